//! Self-tests of the reporters: JUnit against a golden file, the summary table, the
//! conformance report, the progress line and the exit codes.

mod common;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use grove_conformance::catalog::Profile;
use grove_conformance::report::{
    self, ApiCost, CaseResult, ConformanceReport, Failure, Implementation, Outcome, ProgressLine,
    Recorder, RunEvent, RunResults, TimeSplit,
};
use grove_conformance::vocab::Revision;
use k8s_openapi::jiff::Timestamp;

fn case(
    name: &str,
    area: &str,
    clauses: &[&str],
    profile: Profile,
    outcome: Outcome,
    ms: u64,
) -> CaseResult {
    CaseResult {
        case: name.to_owned(),
        area: area.to_owned(),
        clauses: clauses.iter().map(|c| (*c).to_owned()).collect(),
        profile,
        outcome,
        duration: Duration::from_millis(ms),
        // Made up, but summing to less than the wall time as a real split does.
        time: TimeSplit {
            waiting: Duration::from_millis(ms * 3 / 5),
            holding: Duration::from_millis(ms / 5),
            queued: Duration::from_millis(ms / 10),
        },
        crash_points: Vec::new(),
        fault_points: Vec::new(),
        api: None,
    }
}

/// A run with one result of each kind, fed through the event stream.
fn results() -> RunResults {
    let events = vec![
        RunEvent::RunStarted { cases: 4 },
        RunEvent::CaseStarted {
            case: "one-failure-restarts-gang".into(),
        },
        RunEvent::CaseFinished(Box::new(CaseResult {
            crash_points: vec![
                "crash before request #12: delete podcliques job-0-worker".into(),
            ],
            fault_points: vec![
                "hold podcliques from rv 812: 5 events held, 5 delivered at release".into(),
            ],
            api: Some(ApiCost {
                requests: [
                    ("create pods".to_owned(), 16),
                    ("list pods".to_owned(), 3),
                    ("patch podcliques/status".to_owned(), 5),
                ]
                .into(),
                total: 24,
                writes: 21,
                writes_after_required: Some(2),
                quiet_tail_ms: Some(4_200),
                late_writes: Vec::new(),
            }),
            ..case(
                "one-failure-restarts-gang",
                "all-ranks",
                &["E8", "R3"],
                Profile::Core,
                Outcome::Pass,
                12_300,
            )
        })),
        RunEvent::CaseFinished(Box::new(case(
            "leader-completes-while-worker-fails",
            "leader-driven",
            &["E10", "C2"],
            Profile::Core,
            Outcome::Fail(Failure {
                message: "step 9 (line 41): expectation not met within 20s".into(),
                diff: Some(
                    "--- expected\n+++ observed\n objects:\n   PodCliqueScalingGroup job-0-trainer:\n     status:\n-      replicaRestartCounts: [-0-]\n+      replicaRestartCounts: {+1+}\n"
                        .into(),
                ),
                compared: None,
                timeline: Some(
                    "#0    rv 101      harness ADDED    PodCliqueSet job [00000001]\n#1    rv 102      impl    MODIFIED PodCliqueScalingGroup job-0-trainer [00000002] replicaRestartCounts=[1]\n"
                        .into(),
                ),
                broken: Vec::new(),
            }),
            20_450,
        ))),
        RunEvent::CaseFinished(Box::new(case(
            "attempt-label",
            "restart-scope",
            &["R7"],
            Profile::Extended,
            Outcome::NotApplicable {
                reason: "revision grove-pr-728 has no `grove.io/restart-attempt`".into(),
            },
            0,
        ))),
        RunEvent::CaseFinished(Box::new(case(
            "node-loss-fails-clique",
            "podclique",
            &["E3"],
            Profile::Core,
            Outcome::Skip {
                reason: "the pod action `lose-node` needs the embedded target's simulated kubelet"
                    .into(),
            },
            0,
        ))),
        RunEvent::CaseFinished(Box::new(case(
            "success-on-clique-rejected",
            "validation",
            &["V1"],
            Profile::Core,
            Outcome::Error {
                message: "failed to create the namespace".into(),
            },
            150,
        ))),
        RunEvent::RunFinished {
            duration: Duration::from_millis(33_000),
        },
    ];
    let mut recorder = Recorder::new();
    for e in &events {
        recorder.on_event(e);
    }
    recorder.into_results()
}

/// 2026-08-13T12:00:00Z: a fixed timestamp keeps the golden file stable.
fn fixed_time() -> Timestamp {
    Timestamp::from_second(1_786_622_400).unwrap()
}

fn golden(name: &str) -> PathBuf {
    common::root().to_path_buf().join("tests/golden").join(name)
}

fn check_golden(name: &str, actual: &str) {
    let path = golden(name);
    if std::env::var_os("GROVE_CONFORMANCE_UPDATE_GOLDEN").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, actual).unwrap();
    }
    let expected = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{} differs (GROVE_CONFORMANCE_UPDATE_GOLDEN=1 rewrites it):\n{}",
        path.display(),
        grove_conformance::diff::diff_text(
            &expected,
            actual,
            grove_conformance::diff::Style::Plain
        )
    );
}

#[test]
fn junit_matches_the_golden_file() {
    let xml = report::junit(&results(), fixed_time()).unwrap();
    check_golden("junit.xml", &xml);
    assert!(xml.contains("<property name=\"clause\" value=\"E10\"/>"));
    assert!(xml.contains("<failure type=\"fail\""));
    assert!(xml.contains("<skipped message=\"not applicable in this revision: "));
    assert!(xml.contains("<skipped message=\"the pod action"));
    assert!(xml.contains("<error type=\"error\""));
    assert!(xml.contains("<system-out><![CDATA[#0    rv 101"));
}

#[test]
fn junit_is_written_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    report::write_junit(&path, &results(), fixed_time(), None).unwrap();
    assert!(fs::read_to_string(path).unwrap().starts_with("<?xml"));
}

#[test]
fn the_summary_table_lists_every_case() {
    let table = report::summary_table(&results());
    check_golden("summary.txt", &table);
    assert!(table.ends_with(
        "total time 33.0s\n1 passed, 2 failed, 1 skipped, 1 not applicable in this revision\n"
    ));
}

/// A provenance as a run on kind with an implementer's names would record it.
fn provenance() -> report::Provenance {
    report::Provenance {
        harness: report::Harness {
            version: "0.1.0".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        },
        implementer: report::Implementer {
            organization: Some("example.org".into()),
            project: Some("grove-reference-operator".into()),
            url: Some("https://example.org/grove".into()),
            version: Some("0.1.0".into()),
            contact: vec!["grove@example.org".into()],
        },
        catalog: "sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
        target: report::TargetRecord {
            kind: "kind".into(),
            kubernetes: Some("v1.34.4".into()),
        },
        implementation: report::ImplementationRun {
            mode: "image".into(),
            command: Some("reference-operator --namespace {namespace}".into()),
            image: Some("grove-reference-operator:dev".into()),
            image_digest: Some(
                "sha256:1111111111111111111111111111111111111111111111111111111111111111".into(),
            ),
            deployment: None,
        },
        selection: report::SelectionRecord {
            profile: Some("core".into()),
            ..Default::default()
        },
        settings: report::Settings {
            jobs: 4,
            repeat: 8,
            shards: Vec::new(),
            api_proxy: true,
            fail_fast: false,
        },
        started: "2026-08-13T12:00:00Z".into(),
        commands: vec!["grove-conformance run --kind --profile core --repeat 8".into()],
    }
}

#[test]
fn the_conformance_report_aggregates_per_clause_and_profile() {
    let r = ConformanceReport::new(
        Implementation {
            name: "grove-reference-operator".into(),
            version: "0.1.0".into(),
        },
        Revision::Grep0285Review,
        "2026-08-13T12:00:00Z",
        &results(),
    )
    .with_provenance(Some(provenance()));
    assert!(!r.conformant());
    let verdict = |id: &str| r.clauses.iter().find(|c| c.clause == id).unwrap().verdict;
    assert_eq!(verdict("E8"), "pass");
    assert_eq!(verdict("E10"), "fail");
    assert_eq!(verdict("V1"), "fail");
    assert_eq!(
        verdict("R7"),
        "n/a",
        "its only case is not applicable in the revision"
    );
    assert_eq!(verdict("E3"), "skip");
    let core = &r.profiles[0];
    assert_eq!((core.cases.skip, core.cases.not_applicable), (1, 0));
    assert_eq!(r.profiles[1].cases.not_applicable, 1);
    assert_eq!(verdict("B1"), "untested");
    check_golden("conformance.yaml", &r.to_yaml());
    check_golden("conformance.md", &r.to_markdown());

    let passing = RunResults {
        cases: vec![case("a", "x", &["E1"], Profile::Core, Outcome::Pass, 1)],
        duration: Duration::from_secs(1),
    };
    let r = ConformanceReport::new(
        Implementation {
            name: "x".into(),
            version: "1".into(),
        },
        Revision::GrovePr728,
        "d",
        &passing,
    );
    assert!(r.conformant());
    assert!(
        r.to_markdown()
            .contains("| core | conformant | 1 | 0 | 0 | 0 |")
    );
}

#[test]
fn exit_codes_follow_the_documented_table() {
    assert_eq!(report::exit_code(&results()), report::CASES_ERRORED);
    let mut r = results();
    r.cases
        .retain(|c| !matches!(c.outcome, Outcome::Error { .. }));
    assert_eq!(report::exit_code(&r), report::CASES_FAILED);
    r.cases.retain(|c| !matches!(c.outcome, Outcome::Fail(_)));
    assert_eq!(report::exit_code(&r), report::SUCCESS);
    r.cases.clear();
    assert_eq!(report::exit_code(&r), report::NO_CASES);
    let mut codes: Vec<i32> = report::Exit::ALL.iter().map(|e| e.code()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(
        codes.len(),
        report::Exit::ALL.len(),
        "two ways to end share a code"
    );
}

#[test]
fn the_readme_and_the_book_give_the_table_of_exit_codes() {
    let root = common::root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&report::exit_table()),
        "the README's table of exit codes is not core/src/report/exit.rs's; it should read:\n{}",
        report::exit_table()
    );
    let book = std::fs::read_to_string(root.join("docs/src/outputs.md")).unwrap();
    let rows: Vec<i32> = book
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
        .collect();
    let codes: Vec<i32> = report::Exit::ALL.iter().map(|e| e.code()).collect();
    assert_eq!(rows, codes, "docs/src/outputs.md's exit codes");
}

#[test]
fn the_progress_line_writes_one_line_per_case_in_logs() {
    let mut out = Vec::new();
    let mut p = ProgressLine::new(&mut out, false);
    p.on_event(&RunEvent::RunStarted { cases: 2 }).unwrap();
    p.on_event(&RunEvent::StepStarted {
        case: "a".into(),
        index: 0,
        description: "apply all-ranks".into(),
    })
    .unwrap();
    p.on_event(&RunEvent::CaseFinished(Box::new(case(
        "a",
        "x",
        &["E1"],
        Profile::Core,
        Outcome::Pass,
        1500,
    ))))
    .unwrap();
    p.on_event(&RunEvent::CaseFinished(Box::new(case(
        "b",
        "x",
        &["R7"],
        Profile::Extended,
        Outcome::Skip {
            reason: "no restart-attempt label".into(),
        },
        0,
    ))))
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "[1/2] PASS  a (1.5s)\n[2/2] SKIP  b (0.0s) skipped: no restart-attempt label\n"
    );

    let mut out = Vec::new();
    let mut p = ProgressLine::new(&mut out, true);
    p.on_event(&RunEvent::RunStarted { cases: 2 }).unwrap();
    p.on_event(&RunEvent::StepStarted {
        case: "a".into(),
        index: 2,
        description: "exit pod job-0-worker/3".into(),
    })
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\r\u{1b}[2K[1/2] a: step 3 exit pod job-0-worker/3"
    );
}

/// The JUnit XML CI systems read (the Ant/Jenkins `junit-10.xsd` family): element nesting and
/// order, required attributes and their types, and counts that agree with the testcases.
/// Checked by reading the document back with an XML parser.
#[test]
fn junit_follows_the_schema_ci_systems_read() {
    use quick_xml::Reader;
    use quick_xml::events::Event;
    use std::collections::BTreeMap;

    let mut results = results();
    results.cases.push(case(
        "quoted",
        "validation",
        &["V1"],
        Profile::Core,
        Outcome::Fail(Failure {
            message: r#"rejected with "403" & <denied> ]]> end"#.into(),
            diff: None,
            compared: None,
            timeline: Some("#0 ]]> still text".into()),
            broken: Vec::new(),
        }),
        5,
    ));
    let xml = report::junit(&results, fixed_time()).unwrap();
    let mut reader = Reader::from_str(&xml);
    let mut stack: Vec<String> = Vec::new();
    // Per open testcase: the children seen, in order.
    let mut children: Vec<String> = Vec::new();
    let mut suites = 0;
    let mut suite_has_cases = false;
    let (mut counted, mut declared) = (BTreeMap::new(), BTreeMap::new());
    let mut messages = Vec::new();
    let attrs = |e: &quick_xml::events::BytesStart| -> BTreeMap<String, String> {
        e.attributes()
            .map(|a| {
                let a = a.expect("well-formed attribute");
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .expect("escaped value")
                        .into_owned(),
                )
            })
            .collect()
    };
    let number = |v: &str| v.parse::<f64>().is_ok_and(|n| n >= 0.0);
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let (name, a, is_empty) = match &event {
            Event::Start(e) => (
                String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
                attrs(e),
                false,
            ),
            Event::Empty(e) => (
                String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
                attrs(e),
                true,
            ),
            Event::End(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                assert_eq!(stack.pop().as_deref(), Some(name.as_str()));
                if name == "testcase" {
                    // properties?, (skipped | error | failure)?, system-out?, system-err?
                    let rank = |c: &str| match c {
                        "properties" => 0,
                        "skipped" | "error" | "failure" => 1,
                        "system-out" => 2,
                        "system-err" => 3,
                        other => panic!("<{other}> in a testcase"),
                    };
                    let ranks: Vec<i32> = children.iter().map(|c| rank(c)).collect();
                    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "order {children:?}");
                    let outcome = children
                        .iter()
                        .find(|c| rank(c) == 1)
                        .cloned()
                        .unwrap_or_else(|| "pass".into());
                    *counted.entry(outcome).or_insert(0) += 1;
                    children.clear();
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let parent = stack.last().map(String::as_str);
        match (parent, name.as_str()) {
            (None, "testsuites") => {
                for k in ["tests", "failures", "errors", "skipped"] {
                    declared.insert(k.to_string(), a[k].parse::<usize>().unwrap());
                }
            }
            (Some("testsuites"), "testsuite") => {
                suites += 1;
                suite_has_cases = false;
                for k in [
                    "name",
                    "tests",
                    "failures",
                    "errors",
                    "skipped",
                    "time",
                    "timestamp",
                    "hostname",
                    "id",
                ] {
                    assert!(a.contains_key(k), "testsuite without {k}: {a:?}");
                }
                assert!(number(&a["time"]));
                // xs:dateTime without a zone, as the schema's ISO8601_DATETIME_PATTERN wants.
                let ts = &a["timestamp"];
                assert_eq!(ts.len(), 19, "{ts}");
                assert_eq!(&ts[10..11], "T", "{ts}");
            }
            (Some("testsuite"), "properties") => {
                // properties?, testcase*: only before the suite's first testcase.
                assert!(!suite_has_cases, "suite <properties> after a testcase");
            }
            (Some("testsuite"), "testcase") => {
                suite_has_cases = true;
                for k in ["name", "classname", "time"] {
                    assert!(a.contains_key(k), "testcase without {k}: {a:?}");
                }
                assert!(number(&a["time"]));
            }
            (
                Some("testcase"),
                child @ ("properties" | "skipped" | "error" | "failure" | "system-out"
                | "system-err"),
            ) => {
                children.push(child.to_string());
                if child == "failure" || child == "error" {
                    assert!(a.contains_key("type") && a.contains_key("message"), "{a:?}");
                    messages.push(a["message"].clone());
                }
            }
            (Some("properties"), "property") => {
                assert!(a.contains_key("name") && a.contains_key("value"), "{a:?}");
            }
            (parent, name) => panic!("<{name}> inside {parent:?}"),
        }
        if !is_empty {
            stack.push(name);
        }
    }
    assert!(stack.is_empty());
    assert!(suites >= 3);
    let n = |k: &str| counted.get(k).copied().unwrap_or(0);
    assert_eq!(
        declared["tests"],
        n("pass") + n("failure") + n("error") + n("skipped")
    );
    assert_eq!(declared["failures"], n("failure"));
    assert_eq!(declared["errors"], n("error"));
    assert_eq!(declared["skipped"], n("skipped"));
    // Attribute text survives escaping unchanged.
    assert!(
        messages
            .iter()
            .any(|m| m == r#"rejected with "403" & <denied> ]]> end"#),
        "{messages:?}"
    );
}
