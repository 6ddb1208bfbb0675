//! Running the catalog several times in a row, each run a fresh `grove-conformance run`
//! process (its own cluster, its own implementation), to compare two commits on one machine
//! and to find flakes: the wall time of each run, its outcome counts, and every case whose
//! outcome differed between runs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::host::cpu::CpuReport;
use crate::host::process::{SpawnError, Supervised};
use crate::report::{NOT_APPLICABLE_PREFIX, TIME_PROPERTIES, Verdict};

/// One case of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRun {
    /// `area/name`.
    pub case: String,
    /// Its outcome.
    pub verdict: Verdict,
    /// Its wall time.
    pub time: Duration,
    /// Where it went, from the testcase's properties, in
    /// [`TIME_PROPERTIES`](crate::report::TIME_PROPERTIES) order (waiting, holds, overhead,
    /// queued); zeros when the file has none.
    pub split: [Duration; 4],
}

/// One run of the catalog.
#[derive(Debug, Clone)]
pub struct Run {
    /// 1-based.
    pub index: usize,
    /// Wall time of the whole process: cluster start, every case, teardown.
    pub wall: Duration,
    /// The process's exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// Its cases, from its JUnit file (empty when the run wrote none).
    pub cases: Vec<CaseRun>,
    /// Where its outputs are.
    pub out: PathBuf,
    /// Its CPU by component, from its `cpu.json` (`None` when it wrote none).
    pub cpu: Option<CpuReport>,
}

impl Run {
    fn count(&self, v: Verdict) -> usize {
        self.cases.iter().filter(|c| c.verdict == v).count()
    }
}

/// A failure to run the benchmark itself (not a failing case).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The output folder could not be made.
    #[error("failed to create {path}")]
    Output {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The run process could not be started.
    #[error("failed to start {exe}")]
    Spawn {
        /// The harness executable.
        exe: PathBuf,
        /// The cause.
        #[source]
        source: SpawnError,
    },
    /// Stopped by a signal during run `run` (which was stopped in turn).
    #[error("interrupted during run {run}: it was stopped and tore its target down")]
    Interrupted {
        /// The run stopped.
        run: usize,
    },
    /// A JUnit file could not be read.
    #[error("failed to read the JUnit file {path}")]
    Junit {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// How long a `run` stopped by [`run_repeatedly`]'s `stop` may take to tear its target down
/// after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(90);

/// Runs `exe run --out <out>/run-<i> <run_args>` `runs` times, one after the other, its
/// console going to `<out>/run-<i>/console.log`, and calls `progress` after each run. Once
/// `stop` is set, the running `run` gets SIGTERM (and SIGKILL after [`STOP_GRACE`]), as if it
/// had been interrupted itself, and no further run starts: [`BenchError::Interrupted`].
pub fn run_repeatedly(
    exe: &Path,
    runs: usize,
    run_args: &[OsString],
    out: &Path,
    stop: &AtomicBool,
    mut progress: impl FnMut(&Run),
) -> Result<Vec<Run>, BenchError> {
    let mut done = Vec::with_capacity(runs);
    for index in 1..=runs {
        let dir = out.join(format!("run-{index}"));
        std::fs::create_dir_all(&dir).map_err(|source| BenchError::Output {
            path: dir.clone(),
            source,
        })?;
        let console = dir.join("console.log");
        std::fs::File::create(&console).map_err(|source| BenchError::Output {
            path: console.clone(),
            source,
        })?;
        let started = Instant::now();
        let mut command = Command::new(exe);
        command.arg("run").arg("--out").arg(&dir).args(run_args);
        let mut child = Supervised::spawn(&format!("run-{index}"), command, Some(&console))
            .map_err(|source| BenchError::Spawn {
                exe: exe.to_path_buf(),
                source,
            })?;
        let status = loop {
            if let Some(status) = child.exited() {
                break status;
            }
            if stop.load(Ordering::SeqCst) {
                child.stop(STOP_GRACE);
                return Err(BenchError::Interrupted { run: index });
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let wall = started.elapsed();
        let junit = dir.join("junit.xml");
        let cases = if junit.exists() {
            read_junit(&junit)?
        } else {
            Vec::new()
        };
        let cpu = std::fs::read_to_string(dir.join("cpu.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
        let run = Run {
            index,
            wall,
            exit_code: status.code(),
            cases,
            out: dir,
            cpu,
        };
        progress(&run);
        done.push(run);
    }
    Ok(done)
}

/// The testcases of a JUnit file written by `run`: `classname` `grove-conformance.<area>`
/// and `name` give `area/name`.
pub fn read_junit(path: &Path) -> Result<Vec<CaseRun>, BenchError> {
    let fail = |source: Box<dyn std::error::Error + Send + Sync>| BenchError::Junit {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(Box::new(e)))?;
    parse_junit(&text).map_err(fail)
}

fn parse_junit(text: &str) -> Result<Vec<CaseRun>, Box<dyn std::error::Error + Send + Sync>> {
    let mut reader = Reader::from_str(text);
    let mut cases = Vec::new();
    let mut current: Option<CaseRun> = None;
    loop {
        let event = reader.read_event()?;
        let (start, is_empty) = match &event {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            _ => (None, false),
        };
        if let Some(e) = start {
            match e.name().as_ref() {
                b"testcase" => {
                    let mut attrs = BTreeMap::new();
                    for a in e.attributes() {
                        let a = a?;
                        attrs.insert(
                            String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)?
                                .into_owned(),
                        );
                    }
                    let area = attrs
                        .get("classname")
                        .map(|c| c.trim_start_matches("grove-conformance.").to_owned())
                        .unwrap_or_default();
                    let name = attrs.get("name").cloned().unwrap_or_default();
                    let secs: f64 = attrs
                        .get("time")
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0.0);
                    let case = CaseRun {
                        case: format!("{area}/{name}"),
                        verdict: Verdict::Pass,
                        time: Duration::from_secs_f64(secs.max(0.0)),
                        split: [Duration::ZERO; 4],
                    };
                    if is_empty {
                        cases.push(case);
                    } else {
                        current = Some(case);
                    }
                }
                b"property" => {
                    let (mut name, mut value) = (String::new(), String::new());
                    for a in e.attributes() {
                        let a = a?;
                        let v = a
                            .normalized_value(quick_xml::XmlVersion::Implicit1_0)?
                            .into_owned();
                        match a.key.as_ref() {
                            b"name" => name = v,
                            b"value" => value = v,
                            _ => {}
                        }
                    }
                    if let Some(c) = current.as_mut()
                        && let Some(i) = TIME_PROPERTIES.iter().position(|p| *p == name)
                    {
                        let secs: f64 = value.parse().unwrap_or(0.0);
                        c.split[i] = Duration::from_secs_f64(secs.max(0.0));
                    }
                }
                b"failure" | b"error" | b"skipped" => {
                    if let Some(c) = current.as_mut() {
                        let not_applicable = e.attributes().flatten().any(|a| {
                            a.key.as_ref() == b"message"
                                && a.value.starts_with(NOT_APPLICABLE_PREFIX.as_bytes())
                        });
                        c.verdict = match (e.name().as_ref(), not_applicable) {
                            (b"failure", _) => Verdict::Fail,
                            (b"error", _) => Verdict::Error,
                            (_, true) => Verdict::NotApplicable,
                            (_, false) => Verdict::Skip,
                        };
                    }
                }
                _ => {}
            }
        }
        match event {
            Event::End(e) if e.name().as_ref() == b"testcase" => {
                if let Some(c) = current.take() {
                    cases.push(c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(cases)
}

/// Minimum, median and maximum.
fn spread(mut xs: Vec<Duration>) -> Option<(Duration, Duration, Duration)> {
    xs.sort();
    Some((*xs.first()?, xs[xs.len() / 2], *xs.last()?))
}

/// The one-line progress of a run.
pub fn run_line(run: &Run) -> String {
    let code = run
        .exit_code
        .map_or_else(|| "signal".to_owned(), |c| c.to_string());
    format!(
        "run {:>2}: {:>7.1} s  pass {:>3}  fail {}  error {}  skip {}  n/a {}  exit {code}",
        run.index,
        run.wall.as_secs_f64(),
        run.count(Verdict::Pass),
        run.count(Verdict::Fail),
        run.count(Verdict::Error),
        run.count(Verdict::Skip),
        run.count(Verdict::NotApplicable),
    )
}

/// The summary of all runs, in Markdown: a row per run, min/median/max of the wall time and of
/// the summed case time, the slowest cases by median, and each case whose outcome was not the
/// same in every run (a flake, or a run that broke).
pub fn summary(runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| run | wall (s) | case time (s) | pass | fail | error | skip | n/a | exit |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let case_time: Duration = r.cases.iter().map(|c| c.time).sum();
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} |",
            r.index,
            r.wall.as_secs_f64(),
            case_time.as_secs_f64(),
            r.count(Verdict::Pass),
            r.count(Verdict::Fail),
            r.count(Verdict::Error),
            r.count(Verdict::Skip),
            r.count(Verdict::NotApplicable),
            r.exit_code
                .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
        );
    }
    let walls: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
    let sums: Vec<Duration> = runs
        .iter()
        .map(|r| r.cases.iter().map(|c| c.time).sum())
        .collect();
    let _ = writeln!(
        out,
        "\n| of {} runs | min (s) | median (s) | max (s) |",
        runs.len()
    );
    let _ = writeln!(out, "|---|---|---|---|");
    let summed = |i: usize| -> Vec<Duration> {
        runs.iter()
            .map(|r| r.cases.iter().map(|c| c.split[i]).sum())
            .collect()
    };
    for (what, xs) in [
        ("wall", walls),
        ("summed case time", sums),
        ("of which waiting on the implementation", summed(0)),
        ("of which `for:` holds", summed(1)),
        ("of which harness overhead", summed(2)),
        ("slots queued behind exclusive cases", summed(3)),
    ] {
        if let Some((lo, mid, hi)) = spread(xs) {
            let _ = writeln!(
                out,
                "| {what} | {:.1} | {:.1} | {:.1} |",
                lo.as_secs_f64(),
                mid.as_secs_f64(),
                hi.as_secs_f64()
            );
        }
    }

    out.push_str(&cpu_summary(runs));

    let mut by_case: BTreeMap<&str, Vec<(usize, Verdict, Duration)>> = BTreeMap::new();
    for r in runs {
        for c in &r.cases {
            by_case
                .entry(&c.case)
                .or_default()
                .push((r.index, c.verdict, c.time));
        }
    }
    let mut medians: Vec<(&str, Duration)> = by_case
        .iter()
        .filter_map(|(case, xs)| Some((*case, spread(xs.iter().map(|x| x.2).collect())?.1)))
        .collect();
    medians.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(out, "\nslowest cases (median of their runs):");
    for (case, t) in medians.iter().take(10) {
        let _ = writeln!(out, "- {case}: {:.1} s", t.as_secs_f64());
    }

    let unstable: Vec<String> = by_case
        .iter()
        .filter(|(_, xs)| xs.len() < runs.len() || xs.iter().any(|x| x.1 != xs[0].1))
        .map(|(case, xs)| {
            let runs: Vec<String> = xs
                .iter()
                .map(|(i, v, _)| format!("{i}:{}", v.label()))
                .collect();
            format!("- {case}: {}", runs.join(" "))
        })
        .collect();
    let runs_failed: Vec<String> = runs
        .iter()
        .filter(|r| r.cases.is_empty())
        .map(|r| format!("- run {} wrote no JUnit (see {})", r.index, r.out.display()))
        .collect();
    if unstable.is_empty() && runs_failed.is_empty() {
        let _ = writeln!(out, "\nevery case had the same outcome in every run");
    } else {
        let _ = writeln!(out, "\ncases whose outcome differed between runs:");
        for line in unstable.iter().chain(&runs_failed) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// Where the CPU of the runs went: min, median and max of the CPU seconds of each component
/// (the harness, each supervised child by name) and of their total, with the median's share;
/// then the implementation's CPU by case class beside the class's summed case time. Empty when
/// no run wrote its `cpu.json`.
fn cpu_summary(runs: &[Run]) -> String {
    let reports: Vec<&CpuReport> = runs.iter().filter_map(|r| r.cpu.as_ref()).collect();
    if reports.is_empty() {
        return String::new();
    }
    let seconds = |xs: Vec<f64>| spread(xs.into_iter().map(Duration::from_secs_f64).collect());
    let mut components: Vec<(String, Vec<f64>)> = vec![(
        "harness (kubelets, monitor, proxy, runner)".to_string(),
        reports.iter().map(|r| r.harness).collect(),
    )];
    let names: std::collections::BTreeSet<&String> =
        reports.iter().flat_map(|r| r.components.keys()).collect();
    for name in names {
        let xs = reports
            .iter()
            .map(|r| r.components.get(name).copied().unwrap_or(0.0))
            .collect();
        components.push((name.clone(), xs));
    }
    let totals: Vec<f64> = reports
        .iter()
        .map(|r| r.harness + r.components.values().sum::<f64>())
        .collect();
    let total_median = seconds(totals.clone()).map_or(0.0, |s| s.1.as_secs_f64());
    let mut out = format!(
        "\n| CPU of {} run(s), by component | min (s) | median (s) | max (s) | share of the median total |\n|---|---|---|---|---|\n",
        reports.len()
    );
    for (what, xs) in components
        .into_iter()
        .chain([("total".to_string(), totals)])
    {
        if let Some((lo, mid, hi)) = seconds(xs) {
            let share = if total_median > 0.0 {
                format!("{:.0} %", 100.0 * mid.as_secs_f64() / total_median)
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                out,
                "| {what} | {:.1} | {:.1} | {:.1} | {share} |",
                lo.as_secs_f64(),
                mid.as_secs_f64(),
                hi.as_secs_f64()
            );
        }
    }
    let classes: std::collections::BTreeSet<&String> = reports
        .iter()
        .flat_map(|r| r.implementation_by_class.keys())
        .collect();
    if !classes.is_empty() {
        let _ = writeln!(
            out,
            "\n| case class | implementation CPU, median (s) | summed case time, median (s) |\n|---|---|---|"
        );
        for class in classes {
            let cpu = reports
                .iter()
                .map(|r| r.implementation_by_class.get(class).copied().unwrap_or(0.0))
                .collect();
            let time = runs
                .iter()
                .filter(|r| r.cpu.is_some())
                .map(|r| {
                    r.cases
                        .iter()
                        .filter(|c| c.case.split('/').next() == Some(class.as_str()))
                        .map(|c| c.time)
                        .sum()
                })
                .collect();
            if let (Some(cpu), Some(time)) = (seconds(cpu), spread(time)) {
                let _ = writeln!(
                    out,
                    "| {class} | {:.1} | {:.1} |",
                    cpu.1.as_secs_f64(),
                    time.1.as_secs_f64()
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="guards" tests="3">
    <testcase name="a" classname="grove-conformance.guards" time="1.500">
      <properties><property name="clause" value="C1"/><property name="time-waiting" value="1.000"/><property name="time-holding" value="0.250"/><property name="time-overhead" value="0.250"/><property name="time-queued" value="3.000"/></properties>
    </testcase>
    <testcase name="b" classname="grove-conformance.guards" time="2.000">
      <properties/>
      <failure type="fail" message="x"><![CDATA[diff]]></failure>
      <system-out><![CDATA[t]]></system-out>
    </testcase>
    <testcase name="c" classname="grove-conformance.crash" time="0.100">
      <skipped message="why"/>
    </testcase>
    <testcase name="d" classname="grove-conformance.crash" time="0.2"/>
  </testsuite>
</testsuites>"#;

    #[test]
    fn junit_testcases_are_read_with_their_outcome_and_time() {
        let cases = parse_junit(JUNIT).unwrap();
        let got: Vec<(&str, Verdict, u128)> = cases
            .iter()
            .map(|c| (c.case.as_str(), c.verdict, c.time.as_millis()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("guards/a", Verdict::Pass, 1500),
                ("guards/b", Verdict::Fail, 2000),
                ("crash/c", Verdict::Skip, 100),
                ("crash/d", Verdict::Pass, 200),
            ]
        );
        assert_eq!(
            cases[0].split.map(|d| d.as_millis()),
            [1000, 250, 250, 3000]
        );
        assert_eq!(cases[1].split, [Duration::ZERO; 4]);
    }

    fn run(index: usize, wall: u64, verdict_b: Verdict) -> Run {
        Run {
            index,
            wall: Duration::from_secs(wall),
            exit_code: Some(0),
            cases: vec![
                CaseRun {
                    case: "guards/a".into(),
                    verdict: Verdict::Pass,
                    time: Duration::from_secs(1),
                    split: [Duration::ZERO; 4],
                },
                CaseRun {
                    case: "guards/b".into(),
                    verdict: verdict_b,
                    time: Duration::from_secs(3),
                    split: [
                        Duration::from_secs(wall),
                        Duration::ZERO,
                        Duration::ZERO,
                        Duration::ZERO,
                    ],
                },
            ],
            out: PathBuf::from("/x"),
            cpu: Some(CpuReport {
                harness: wall as f64,
                components: [
                    ("etcd".to_string(), 1.0),
                    ("implementation".to_string(), 3.0),
                ]
                .into(),
                implementation_by_class: [("guards".to_string(), 3.0)].into(),
            }),
        }
    }

    #[test]
    fn the_summary_breaks_the_cpu_down_by_component_and_class() {
        let mut runs = vec![run(1, 6, Verdict::Pass), run(2, 16, Verdict::Pass)];
        runs.push(Run {
            cpu: None,
            ..run(3, 100, Verdict::Pass)
        });
        let s = summary(&runs);
        assert!(s.contains("| CPU of 2 run(s), by component |"), "{s}");
        assert!(
            s.contains("| harness (kubelets, monitor, proxy, runner) | 6.0 | 16.0 | 16.0 | 80 % |"),
            "{s}"
        );
        assert!(s.contains("| etcd | 1.0 | 1.0 | 1.0 | 5 % |"), "{s}");
        assert!(s.contains("| total | 10.0 | 20.0 | 20.0 | 100 % |"), "{s}");
        assert!(s.contains("| guards | 3.0 | 4.0 |"), "{s}");
    }

    #[test]
    fn the_summary_names_a_case_whose_outcome_changed_between_runs() {
        let runs = vec![
            run(1, 10, Verdict::Pass),
            run(2, 30, Verdict::Fail),
            run(3, 20, Verdict::Pass),
        ];
        let s = summary(&runs);
        assert!(s.contains("| wall | 10.0 | 20.0 | 30.0 |"), "{s}");
        assert!(
            s.contains("| of which waiting on the implementation | 10.0 | 20.0 | 30.0 |"),
            "{s}"
        );
        assert!(s.contains("- guards/b: 1:pass 2:fail 3:pass"), "{s}");
        assert!(!s.contains("- guards/a: 1:"), "{s}");
        assert!(s.contains("- guards/b: 3.0 s\n- guards/a: 1.0 s"), "{s}");
    }

    #[test]
    fn the_summary_says_so_when_every_run_agreed() {
        let runs = vec![run(1, 10, Verdict::Pass), run(2, 11, Verdict::Pass)];
        let s = summary(&runs);
        assert!(
            s.contains("every case had the same outcome in every run"),
            "{s}"
        );
    }
}
