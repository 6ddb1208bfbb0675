//! Tests of `results.json`: every outcome reads back unchanged, shards merge.

use super::*;
use crate::report::ConformanceReport;
use crate::vocab::Revision;

fn result(case: &str, clauses: &[&str], outcome: Outcome) -> CaseResult {
    CaseResult {
        case: case.into(),
        area: "area".into(),
        clauses: clauses.iter().map(|c| (*c).to_owned()).collect(),
        profile: Profile::Core,
        outcome,
        duration: Duration::from_millis(1500),
        time: TimeSplit {
            waiting: Duration::from_millis(500),
            holding: Duration::from_millis(700),
            queued: Duration::from_millis(3),
        },
        crash_points: vec!["crash before request #3: DELETE pods x".into()],
        fault_points: Vec::new(),
        api: None,
    }
}

fn identity(selected: &[&str]) -> RunIdentity {
    RunIdentity {
        implementation: RecordedImplementation {
            name: "impl".into(),
            version: "1".into(),
        },
        revision: "grep-0285-review".into(),
        catalog: "sha256:abc".into(),
        selected: selected.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn every_outcome() -> Vec<CaseResult> {
    vec![
        result("a", &["E1"], Outcome::Pass),
        result(
            "b",
            &["E1", "E3"],
            Outcome::Fail(Failure {
                message: "step 3".into(),
                diff: Some("- x\n+ y".into()),
                compared: Some(Box::new(Compared {
                    expected: serde_json::json!({"a": 1}),
                    observed: serde_json::json!({"a": 2}),
                })),
                timeline: Some("rv 1 ...".into()),
                broken: vec!["E3".into()],
            }),
        ),
        result(
            "c",
            &["R1"],
            Outcome::Skip {
                reason: "why".into(),
            },
        ),
        result(
            "d",
            &["R2"],
            Outcome::NotApplicable {
                reason: "rev".into(),
            },
        ),
        result(
            "e",
            &["O1"],
            Outcome::Error {
                message: "broke".into(),
            },
        ),
        result(
            "f",
            &["E2"],
            Outcome::Unstable {
                passed: 6,
                runs: 8,
                failure: Failure {
                    message: "passed 6 of 8 runs; run 2 failed: step 4".into(),
                    timeline: Some("── run 2 of 8 ──\nrv 1 ...".into()),
                    ..Failure::default()
                },
            },
        ),
    ]
}

#[test]
fn a_record_reads_back_every_outcome_unchanged() {
    let results = RunResults {
        cases: every_outcome(),
        duration: Duration::from_millis(9000),
    };
    let record = RunRecord::new(
        identity(&["a", "b", "c", "d", "e"]),
        None,
        "2026-12-02",
        &results,
    );
    let back = RunRecord::from_json(&record.to_json()).unwrap();
    assert_eq!(back, record);
    assert_eq!(back.results().unwrap(), results);
}

#[test]
fn a_record_of_another_format_is_refused_saying_so() {
    let e = RunRecord::from_json("{\"format\": 7}").unwrap_err();
    assert!(matches!(e, RecordError::Format { found: 7 }), "{e}");
    assert!(e.to_string().contains("format 7"), "{e}");
    let e = RunRecord::from_json("{\"x\": 1}").unwrap_err();
    assert!(matches!(e, RecordError::NoFormat), "{e}");
    assert!(
        e.to_string()
            .contains("not a grove-conformance results.json"),
        "{e}"
    );
}

fn sharded(results: &[CaseResult], count: usize) -> Vec<(String, RunRecord)> {
    let names: Vec<&str> = results.iter().map(|r| r.case.as_str()).collect();
    (1..=count)
        .map(|index| {
            let part = RunResults {
                cases: results
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % count + 1 == index)
                    .map(|(_, r)| r.clone())
                    .collect(),
                duration: Duration::from_millis(1000 * index as u64),
            };
            let shard = Some(Shard { index, count });
            (
                format!("shard-{index}"),
                RunRecord::new(identity(&names), shard, "2026-12-02", &part),
            )
        })
        .collect()
}

#[test]
fn merged_shards_give_the_report_of_one_run() {
    let all = every_outcome();
    let one = RunResults {
        cases: all.clone(),
        duration: Duration::from_millis(3000),
    };
    let (id, merged) = merge(&sharded(&all, 3)).unwrap();
    assert_eq!(
        merged.duration,
        Duration::from_millis(3000),
        "the longest shard"
    );
    let report = |r: &RunResults| {
        ConformanceReport::new(
            Implementation::from(&id.implementation),
            Revision::Grep0285Review,
            "2026-12-02",
            r,
        )
    };
    assert_eq!(report(&merged).clauses, report(&one).clauses);
    assert_eq!(report(&merged).profiles, report(&one).profiles);
    assert_eq!(merged.sorted(), one.sorted());
}

#[test]
fn a_missing_shard_and_its_cases_are_named() {
    let all = every_outcome();
    let mut shards = sharded(&all, 3);
    shards.remove(1);
    let e = merge(&shards).unwrap_err().to_string();
    assert!(e.contains("shard 2/3 is missing"), "{e}");
    assert!(e.contains("have no result: b, e"), "{e}");
}

#[test]
fn a_repeated_shard_and_case_are_named() {
    let all = every_outcome();
    let mut shards = sharded(&all, 2);
    let again = (String::from("copy"), shards[0].1.clone());
    shards.push(again);
    let e = merge(&shards).unwrap_err().to_string();
    assert!(
        e.contains("shard 1/2 is given more than once: shard-1, copy"),
        "{e}"
    );
    assert!(
        e.contains("case `a` is in more than one result: shard-1, copy"),
        "{e}"
    );
}

#[test]
fn shards_of_different_runs_are_refused() {
    let all = every_outcome();
    for (what, change) in [
        (
            "catalog",
            (|r: &mut RunRecord| r.identity.catalog = "sha256:other".into()) as fn(&mut RunRecord),
        ),
        ("revision", |r| r.identity.revision = "grove-pr-728".into()),
        ("implementation", |r| {
            r.identity.implementation.version = "2".into()
        }),
        ("selection", |r| {
            r.identity.selected.pop().map(drop).unwrap_or(())
        }),
        ("shard count", |r| {
            r.shard = Some(Shard { index: 1, count: 5 })
        }),
    ] {
        let mut shards = sharded(&all, 2);
        change(&mut shards[1].1);
        let e = merge(&shards).unwrap_err().to_string();
        assert!(e.contains(&format!("their {what} differ")), "{what}: {e}");
        assert!(e.contains("shard-1 and shard-2"), "{e}");
    }
    assert_eq!(merge(&[]), Err(MergeError::Empty));
}
