//! `run --shard i/n` and `merge`, through the command line on the embedded cluster: shards of
//! a selection merge into the verdicts and case set one run gives; an empty shard exits 0
//! and still leaves its results; merge refuses what does not make up one run.

use std::collections::BTreeSet;
use std::path::Path;
mod common;

use common::{harness, text};

use serde_json::Value;

fn results(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn case_names(results: &Value) -> Vec<String> {
    results["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case"].as_str().unwrap().to_owned())
        .collect()
}

/// The report without what differs between any two runs: the date, what produced it (the
/// command lines and shards), the timing and the digest of it all.
fn verdicts(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("conformance.yaml")).unwrap();
    let mut value: Value = serde_yaml::from_str(&text).unwrap();
    for field in ["date", "provenance", "timing", "digest"] {
        value.as_object_mut().unwrap().remove(field);
    }
    value
}

fn testcases(dir: &Path) -> BTreeSet<String> {
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    xml.split("<testcase name=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_owned())
        .collect()
}

#[test]
fn three_shards_merge_into_the_verdicts_and_cases_of_one_run() {
    let out = tempfile::tempdir().unwrap();
    let dir = |name: &str| out.path().join(name);
    let run = |extra: &[&str], name: &str| {
        let o = dir(name);
        let mut args = vec![
            "run",
            "--filter",
            "validation",
            "--out",
            o.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let done = harness(&args);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    };
    run(&[], "one");
    for i in 1..=3 {
        run(&["--shard", &format!("{i}/3")], &format!("shard-{i}"));
    }
    // Every case in exactly one shard, none left out.
    let one: BTreeSet<String> = case_names(&results(&dir("one"))).into_iter().collect();
    assert!(one.len() > 3, "{one:?}");
    let mut seen = Vec::new();
    for i in 1..=3 {
        let shard = results(&dir(&format!("shard-{i}")));
        assert_eq!(shard["shard"]["index"], i);
        assert_eq!(shard["shard"]["count"], 3);
        let names = case_names(&shard);
        assert!(!names.is_empty(), "shard {i} got no case");
        seen.extend(names);
    }
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "a case ran in two shards: {seen:?}"
    );
    assert_eq!(unique, one);

    let merged = dir("merged");
    let done = harness(&[
        "merge",
        "--out",
        merged.to_str().unwrap(),
        dir("shard-1").to_str().unwrap(),
        dir("shard-2").to_str().unwrap(),
        dir("shard-3").to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    assert_eq!(verdicts(&merged), verdicts(&dir("one")));
    assert_eq!(testcases(&merged), testcases(&dir("one")));
    let merged_names: BTreeSet<String> = case_names(&results(&merged)).into_iter().collect();
    assert_eq!(merged_names, one);
    assert!(merged.join("conformance.html").is_file());
    // Every report written verifies against this checkout: the run's, each shard's, the
    // merged one's; the merged one names every shard's command line.
    for name in ["one", "shard-1", "shard-2", "shard-3", "merged"] {
        let done = harness(&["verify-report", dir(name).to_str().unwrap()]);
        assert_eq!(done.status.code(), Some(0), "{name}: {}", text(&done));
        assert_eq!(
            text(&done).matches("verified:").count(),
            3,
            "{}",
            text(&done)
        );
    }
    let provenance = &results(&merged)["provenance"];
    assert_eq!(provenance["commands"].as_array().unwrap().len(), 3);
    assert_eq!(
        provenance["settings"]["shards"],
        serde_json::json!(["1/3", "2/3", "3/3"])
    );

    // Two shards of three do not make up the run: the missing one and its cases are named.
    let done = harness(&[
        "merge",
        "--out",
        dir("partial").to_str().unwrap(),
        dir("shard-1").to_str().unwrap(),
        dir("shard-3").to_str().unwrap(),
    ]);
    let said = text(&done);
    assert_eq!(done.status.code(), Some(2), "{said}");
    assert!(said.contains("shard 2/3 is missing"), "{said}");
    assert!(said.contains("have no result"), "{said}");
    // A shard and the whole run are not shards of one run.
    let done = harness(&[
        "merge",
        "--out",
        dir("mixed").to_str().unwrap(),
        dir("one").to_str().unwrap(),
        dir("shard-2").to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(2), "{}", text(&done));
    assert!(text(&done).contains("shard count"), "{}", text(&done));
}

#[test]
fn a_shard_with_no_case_exits_zero_saying_so_and_leaves_its_results() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("empty");
    // One case, two shards: one of them is empty (which one the durations decide).
    let case = "budget-zero-fails-immediately";
    let mut empty = None;
    for i in 1..=2 {
        let dir = out.path().join(format!("probe-{i}"));
        let done = harness(&[
            "run",
            "--filter",
            case,
            "--shard",
            &format!("{i}/2"),
            "--out",
            if i == 1 {
                dir.to_str().unwrap()
            } else {
                o.to_str().unwrap()
            },
        ]);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
        if text(&done).contains("nothing to run") {
            empty = Some(if i == 1 { dir } else { o.clone() });
        }
    }
    let empty = empty.expect("one of the two shards holds no case");
    let r = results(&empty);
    assert_eq!(r["cases"].as_array().unwrap().len(), 0);
    assert_eq!(r["selected"], serde_json::json!([case]));
    assert!(empty.join("junit.xml").is_file());
}

#[test]
fn a_malformed_shard_is_a_usage_error() {
    for bad in ["0/2", "3/2", "two"] {
        let done = harness(&["run", "--shard", bad, "--out", "/nonexistent/never"]);
        assert_eq!(done.status.code(), Some(2), "{bad}: {}", text(&done));
        assert!(
            text(&done).contains("expected i/n"),
            "{bad}: {}",
            text(&done)
        );
    }
}

#[test]
fn a_malformed_durations_file_is_named_before_anything_starts() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("d.yaml");
    std::fs::write(
        &file,
        "timing:\n  cases:\n  - case: x\n    wall_ms: later\n",
    )
    .unwrap();
    let done = harness(&[
        "run",
        "--durations",
        file.to_str().unwrap(),
        "--out",
        out.path().join("o").to_str().unwrap(),
    ]);
    let said = text(&done);
    assert_eq!(done.status.code(), Some(2), "{said}");
    assert!(said.contains("d.yaml"), "{said}");
    assert!(said.contains("line 4"), "{said}");
}

#[test]
fn the_listed_plans_of_the_shards_hold_every_case_once() {
    let names = |args: &[&str]| -> Vec<String> {
        let done = harness(args);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
        String::from_utf8_lossy(&done.stdout)
            .lines()
            .take_while(|l| !l.contains(" case(s)"))
            .map(|l| l.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let all = names(&["run", "--list"]);
    let catalog = common::repository_catalog();
    assert_eq!(all.len(), catalog.cases.len());
    let mut sharded = Vec::new();
    for i in 1..=3 {
        sharded.extend(names(&["run", "--list", "--shard", &format!("{i}/3")]));
    }
    assert_eq!(sharded.len(), all.len(), "{sharded:?}");
    let a: BTreeSet<&String> = all.iter().collect();
    let b: BTreeSet<&String> = sharded.iter().collect();
    assert_eq!(a, b);
    // Every shard's load is printed, each a positive duration.
    let done = harness(&["run", "--list", "--shard", "1/3"]);
    let out = String::from_utf8_lossy(&done.stdout);
    let loads: Vec<f64> = out
        .lines()
        .filter(|l| l.starts_with("shard "))
        .map(|l| {
            l.split(", ")
                .nth(1)
                .unwrap()
                .trim_end_matches('s')
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(loads.len(), 3, "{out}");
    assert!(loads.iter().all(|l| *l > 0.0), "{out}");
}
