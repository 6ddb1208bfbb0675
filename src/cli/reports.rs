//! What `run` and `merge` leave behind: the failure details and the summary on the terminal,
//! JUnit, `conformance.{yaml,md,html}` and `results.json`, all rendered from one set of
//! results, so that merged shards give exactly the files one run would.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use grove_conformance::catalog;
use grove_conformance::diff::Style;
use grove_conformance::errors;
use grove_conformance::report::{self, ConformanceReport, Provenance, RunRecord};
use grove_conformance::vocab::Revision;

use super::provenance::RunFacts;
use super::run::RunArgs;
use super::shard;

/// Where the reports go and what they say the run was.
pub(crate) struct Reports<'a> {
    /// The results folder.
    pub out: &'a Path,
    /// The JUnit file (default: `<out>/junit.xml`).
    pub junit: Option<PathBuf>,
    /// The implementation as the report names it.
    pub implementation: report::Implementation,
    /// The revision under test.
    pub revision: Revision,
    /// The day of the run (`YYYY-MM-DD`).
    pub date: String,
    /// What produced the run.
    pub provenance: Option<Provenance>,
}

/// Today, as the reports date a run.
pub(crate) fn today() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%d")
        .to_string()
}

impl Reports<'_> {
    /// Prints the failure details and the summary table, then writes every report and
    /// `record` as `results.json`. A file that cannot be written is reported on stderr; the
    /// others are still written.
    pub(crate) fn write(&self, results: &report::RunResults, record: &RunRecord) {
        print!("{}", failure_details(self.out, results));
        println!("{}", report::summary_table(results));
        let junit_path = self
            .junit
            .clone()
            .unwrap_or_else(|| self.out.join("junit.xml"));
        let now = k8s_openapi::jiff::Timestamp::now();
        if let Err(e) = report::write_junit(&junit_path, results, now, self.provenance.as_ref()) {
            eprintln!("error: {:#}", errors::chain(&e));
        }
        let conformance = ConformanceReport::new(
            self.implementation.clone(),
            self.revision,
            &self.date,
            results,
        )
        .with_provenance(self.provenance.clone());
        for (file, text) in [
            ("conformance.yaml", conformance.to_yaml()),
            ("conformance.md", conformance.to_markdown()),
            (
                "conformance.html",
                report::html::render(&conformance, results),
            ),
            ("results.json", record.to_json()),
        ] {
            if let Err(e) = std::fs::write(self.out.join(file), text) {
                eprintln!("error: failed to write {file}: {e}");
            }
        }
        println!(
            "JUnit: {}  report: {} (page: {})",
            junit_path.display(),
            self.out.join("conformance.md").display(),
            self.out.join("conformance.html").display()
        );
    }
}

/// The failed and errored cases' details for the terminal (coloured when stdout is one), each
/// failed or unstable case's whole timeline written to `<out>/timelines/<area>.<name>.txt` for the line
/// that says how many entries the terminal leaves out.
fn failure_details(out: &Path, results: &report::RunResults) -> String {
    let dir = out.join("timelines");
    for r in &results.cases {
        if let Some(f) = r.outcome.failure()
            && let Some(timeline) = &f.timeline
        {
            let file = dir.join(format!("{}.{}.txt", r.area, r.case));
            if let Err(e) =
                std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, timeline))
            {
                eprintln!("error: failed to write {}: {e}", file.display());
            }
        }
    }
    let style = if std::io::stdout().is_terminal() {
        Style::Color
    } else {
        Style::Plain
    };
    report::failure_details(results, style, |r| {
        dir.join(format!("{}.{}.txt", r.area, r.case))
            .display()
            .to_string()
    })
}

/// The summary, the failure details and every report of a run, with its `results.json`:
/// `selected` is every case selected before sharding, `facts` what the run was, on an
/// apiserver of version `kubernetes` (`None` when no cluster was started).
pub(crate) fn write_reports(
    args: &RunArgs,
    results: &report::RunResults,
    selected: &[catalog::Case],
    facts: &RunFacts,
    kubernetes: Option<String>,
) {
    let provenance = facts.provenance(args, kubernetes);
    let named = report::Implementation {
        name: facts.name.clone(),
        version: facts.version.clone(),
    };
    let identity = shard::identity(&named, args.revision, facts.catalog.clone(), selected);
    let reports = Reports {
        out: &args.out,
        junit: args.junit.clone(),
        implementation: named,
        revision: args.revision,
        date: today(),
        provenance: Some(provenance),
    };
    let record = RunRecord::new(identity, args.shard, &reports.date, results)
        .with_provenance(reports.provenance.clone());
    reports.write(results, &record);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unstable_case_keeps_its_whole_timeline_as_a_failed_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let failure = report::Failure {
            message: "passed 1 of 2 runs".into(),
            timeline: Some("── run 2 of 2 ──\n#0 rv 1 harness ADDED PodCliqueSet job\n".into()),
            ..report::Failure::default()
        };
        let case = |name: &str, outcome| report::CaseResult {
            case: name.into(),
            area: "a".into(),
            clauses: Vec::new(),
            profile: grove_conformance::catalog::Profile::Core,
            outcome,
            duration: std::time::Duration::ZERO,
            time: report::TimeSplit::default(),
            crash_points: Vec::new(),
            fault_points: Vec::new(),
            api: None,
        };
        let results = report::RunResults {
            cases: vec![
                case(
                    "lucky",
                    report::Outcome::Unstable {
                        passed: 1,
                        runs: 2,
                        failure: failure.clone(),
                    },
                ),
                case("wrong", report::Outcome::Fail(failure)),
            ],
            duration: std::time::Duration::ZERO,
        };
        failure_details(dir.path(), &results);
        for name in ["a.lucky.txt", "a.wrong.txt"] {
            let kept = std::fs::read_to_string(dir.path().join("timelines").join(name)).unwrap();
            assert!(kept.contains("run 2 of 2"), "{name}: {kept}");
        }
    }
}
