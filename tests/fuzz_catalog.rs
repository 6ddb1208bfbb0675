//! Bad input never panics: arbitrary text, YAML built from the case language's own keys and
//! values, and mutations of every real case and fixture file go through the parser, the fixture
//! parser and the linter; each must come back with a value or diagnostics, never a panic. A
//! diagnostic must name a line inside the file.
//!
//! `cargo test` runs a short version. `GROVE_CONFORMANCE_FUZZ_SECONDS=600 cargo test --release
//! --test fuzz_catalog -- --nocapture` keeps generating for that long and prints how many
//! inputs it tried.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use grove_conformance::catalog;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn root() -> PathBuf {
    common::root().to_path_buf()
}

/// Every case and fixture file of the catalog, as (path, text).
fn corpus() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![root().join("cases"), root().join("fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

fn fixtures() -> BTreeSet<String> {
    ["all-ranks", "leader-worker", "single-clique"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Parses `text` as a case and as a fixture; every diagnostic must point into the text.
fn judge(text: &str) {
    let lines = text.lines().count().max(1) + 1;
    let check = |diags: Vec<catalog::Diagnostic>| {
        for d in diags {
            let rendered = d.to_string();
            assert!(!rendered.is_empty());
            if let Some(line) = d.pos.map(|p| p.line) {
                assert!(
                    line <= lines,
                    "line {line} of {lines}: {rendered}\n---\n{text}"
                );
            }
        }
    };
    match catalog::parse_case_with_fixtures(Path::new("cases/fuzz/x.yaml"), text, &fixtures()) {
        Ok(_) => {}
        Err(diags) => check(diags),
    }
    if let Err(diags) = catalog::parse_fixture(Path::new("fixtures/x.yaml"), text) {
        check(diags);
    }
}

/// Keys and values of the case language besides the step keywords (taken from
/// [`catalog::STEP_KINDS`]), to build inputs the parser takes seriously.
const WORDS: &[&str] = &[
    "name",
    "summary",
    "clauses",
    "profile",
    "fixture",
    "fixtures",
    "revisions",
    "timeout",
    "steps",
    "within",
    "for",
    "objects",
    "pods",
    "recreated",
    "unchanged",
    "events",
    "kind",
    "pod",
    "clique",
    "pcs",
    "code",
    "mode",
    "action",
    "when",
    "changed",
    "deleted",
    "condition",
    "request",
    "verb",
    "resource",
    "nth",
    "at",
    "before",
    "after",
    "owner",
    "owned",
    "conditions",
    "status",
    "reason",
    "absent",
    "not-true",
    "terminal-phase",
    "mentions",
    "field",
    "patch",
    "subresource",
    "as",
    "count",
    "phase",
    "active",
    "terminal",
    "labels",
    "spec",
    "core",
    "extended",
    "E3",
    "V1",
    "O3",
    "PodClique",
    "PodCliqueSet",
    "PodCliqueScalingGroup",
    "Pod",
    "job-0-worker/1",
    "job-0-worker",
    "all-ranks",
    "True",
    "False",
    "Unknown",
    "1s",
    "20s",
    "-1",
    "256",
    "vanish",
    "fail",
    "pause",
    "resume",
    "crash",
    "Completed",
    "Failed",
    "main",
    "scale",
    "Running",
    "Succeeded",
    "\"\"",
    "~",
    "null",
    "[]",
    "{}",
    "&a",
    "*a",
    "!!str",
    "hold",
    "until",
    "lift",
    "release",
    "relist",
    "reads",
    "stale",
    "current",
    "deliver",
    "coalesce",
    "wait",
    "create",
    "if-present",
    "alone",
];

/// [`WORDS`] and every step keyword.
fn words() -> Vec<&'static str> {
    let mut words: Vec<&'static str> = catalog::STEP_KINDS.iter().map(|d| d.keyword).collect();
    let others: Vec<&'static str> = WORDS
        .iter()
        .copied()
        .filter(|w| !words.contains(w))
        .collect();
    words.extend(others);
    words
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(words()).prop_map(str::to_owned),
        "[a-z0-9/\\-]{0,12}",
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

/// YAML-shaped text: nested maps and lists of the language's words, block and flow style.
fn yamlish() -> impl Strategy<Value = String> {
    let leaf = word();
    let tree = leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec((word(), inner.clone()), 0..6).prop_map(|entries| {
                let items: Vec<String> = entries.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", items.join(", "))
            }),
            prop::collection::vec(inner, 0..6).prop_map(|items| format!("[{}]", items.join(", "))),
        ]
    });
    prop::collection::vec((word(), tree, 0usize..3), 0..12).prop_map(|entries| {
        entries
            .into_iter()
            .map(|(k, v, indent)| format!("{}{k}: {v}\n", "  ".repeat(indent)))
            .collect()
    })
}

/// One edit of a text: delete, insert, replace a span, or duplicate or drop a line.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    DuplicateLine(usize),
    DropLine(usize),
    Indent(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(at, n)| Edit::Delete(at, n)),
        (
            any::<usize>(),
            prop_oneof![word(), "[ -~\\t\\n]{0,8}", any::<String>()]
        )
            .prop_map(|(at, s)| Edit::Insert(at, s)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        any::<usize>().prop_map(Edit::DropLine),
        (any::<usize>(), 0usize..6).prop_map(|(at, n)| Edit::Indent(at, n)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let boundary = |at: usize| {
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let mut lines: Vec<&str> = text.lines().collect();
    match edit {
        Edit::Delete(at, n) => {
            let start = boundary(*at);
            let end = boundary(start + n);
            let end = end.max(start);
            format!("{}{}", &text[..start], &text[end..])
        }
        Edit::Insert(at, s) => {
            let at = boundary(*at);
            format!("{}{s}{}", &text[..at], &text[at..])
        }
        Edit::DuplicateLine(i) if !lines.is_empty() => {
            let i = i % lines.len();
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        Edit::DropLine(i) if !lines.is_empty() => {
            lines.remove(i % lines.len());
            lines.join("\n")
        }
        Edit::Indent(i, n) if !lines.is_empty() => {
            let i = i % lines.len();
            let indented = format!("{}{}", " ".repeat(*n), lines[i]);
            lines[i] = &indented;
            lines.join("\n")
        }
        _ => text.to_string(),
    }
}

/// Runs the three generators, in rounds, until `budget` is spent (at least one round); returns
/// how many inputs each judged.
fn fuzz(budget: Duration, cases_per_round: u32) -> [u64; 3] {
    let corpus = corpus();
    assert!(corpus.len() > 10, "the catalog is where it should be");
    // A runner counts its cases across runs: each generator gets a fresh one every round.
    let runner = || {
        TestRunner::new(Config {
            cases: cases_per_round,
            failure_persistence: None,
            ..Config::default()
        })
    };
    let started = Instant::now();
    let mut judged = [0u64; 3];
    loop {
        runner()
            .run(&any::<String>(), |text| {
                judge(&text);
                Ok(())
            })
            .unwrap();
        judged[0] += u64::from(cases_per_round);
        runner()
            .run(&yamlish(), |text| {
                judge(&text);
                Ok(())
            })
            .unwrap();
        judged[1] += u64::from(cases_per_round);
        let corpus_len = corpus.len();
        runner()
            .run(
                &(0..corpus_len, prop::collection::vec(edit(), 1..6)),
                |(i, edits)| {
                    let text = edits.iter().fold(corpus[i].1.clone(), |t, e| apply(&t, e));
                    judge(&text);
                    Ok(())
                },
            )
            .unwrap();
        judged[2] += u64::from(cases_per_round);
        if started.elapsed() >= budget {
            return judged;
        }
    }
}

#[test]
fn bad_input_never_panics_the_parser() {
    let seconds: u64 = std::env::var("GROVE_CONFORMANCE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let [text, yaml, mutated] = fuzz(Duration::from_secs(seconds), 200);
    eprintln!(
        "fuzzed for a {seconds} s budget: {text} arbitrary texts, {yaml} YAML documents of the \
         case language, {mutated} mutated catalog files"
    );
}

#[test]
fn the_linter_survives_a_mutated_catalog() {
    // A catalog copy whose every case file got one random edit: loading and linting report
    // diagnostics (or pass), never panic.
    let corpus = corpus();
    let mut runner = TestRunner::new(Config {
        cases: 8,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(edit(), corpus.len()), |edits| {
            let dir = tempfile::tempdir().unwrap();
            for ((path, text), e) in corpus.iter().zip(&edits) {
                let rel = path.strip_prefix(root()).unwrap();
                let dest = dir.path().join(rel);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::write(dest, apply(text, e)).unwrap();
            }
            let _ = catalog::lint(dir.path());
            Ok(())
        })
        .unwrap();
}
