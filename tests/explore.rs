//! `explore` end to end: generated scenarios, written as cases, are ordinary catalog cases
//! (they pass `lint` beside the catalog), and a sample of them passes against the reference
//! operator on the embedded cluster through the normal runner.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grove_conformance::campaign::explore as files;
use grove_conformance::catalog;
use grove_conformance::explore::{Body, Scenario, scenario, scenario_with_faults, shrink};
use grove_conformance::report::Outcome;
use grove_conformance::runner::{RunSettings, run_cases};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

#[test]
fn written_scenarios_and_shrunk_ones_pass_lint_beside_the_catalog() {
    let root = common::root();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root.join("cases"), &dir.path().join("cases"));
    copy_dir(&root.join("fixtures"), &dir.path().join("fixtures"));
    let mut written = 0;
    let mut kinds = (false, false);
    for i in 0..40 {
        let s = scenario(42, i, 3);
        match s.body {
            Body::Rejected { .. } => kinds.0 = true,
            Body::Rounds(_) => kinds.1 = true,
        }
        let smaller: Vec<Scenario> = shrink::candidates(&s).into_iter().take(1).collect();
        for s in std::iter::once(s).chain(smaller) {
            let file = files::write(dir.path(), &s).unwrap();
            assert!(file.starts_with(dir.path().join("cases/explore")));
            written += 1;
        }
    }
    assert!(kinds.0 && kinds.1, "both kinds of scenario written");
    let linted =
        catalog::lint(dir.path()).unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let explored = linted
        .cases
        .iter()
        .filter(|c| c.area == files::AREA)
        .count();
    assert_eq!(explored, written);
}

/// `scenarios` run as explore runs them, against the reference operator.
fn run_scenarios(scenarios: Vec<Scenario>, dir: &str) -> grove_conformance::report::RunResults {
    let world = common::world();
    let named: Vec<(Scenario, Option<String>)> = scenarios.into_iter().map(|s| (s, None)).collect();
    let logs: PathBuf = common::root().join("target/grove-conformance-test-logs");
    let (catalog, cases) = files::catalog(&logs, &named)
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    world.runtime.block_on(async {
        let settings = RunSettings {
            jobs: 8,
            restraint_fails_every_case: true,
            ..common::settings(common::reference(), logs.join(dir))
        };
        run_cases(
            world.target().handles(),
            Arc::new(catalog),
            cases,
            &settings,
            |_| {},
        )
        .await
        .unwrap()
    })
}

/// Every case passed or was skipped (saying why); returns how many passed.
fn passed(results: &grove_conformance::report::RunResults) -> usize {
    let mut passed = 0;
    for r in &results.cases {
        match &r.outcome {
            Outcome::Pass => passed += 1,
            Outcome::Skip { reason } => eprintln!("{}: skipped: {reason}", r.case),
            other => panic!("{}: {other:?}", r.case),
        }
    }
    passed
}

#[test]
fn generated_scenarios_pass_against_the_reference_operator() {
    let results = run_scenarios((0..16).map(|i| scenario(2026, i, 2)).collect(), "explore");
    assert_eq!(results.cases.len(), 16);
    let passed = passed(&results);
    assert!(passed >= 12, "only {passed} of 16 ran");
}

/// With faults the same scenarios pass too, and their faults fire: pinned pauses and crashes
/// land on the requests chosen, holds hold.
#[test]
fn generated_scenarios_with_faults_pass_against_the_reference_operator() {
    let results = run_scenarios(
        (0..16).map(|i| scenario_with_faults(2027, i, 2)).collect(),
        "explore-faults",
    );
    assert_eq!(results.cases.len(), 16);
    let passed = passed(&results);
    assert!(passed >= 12, "only {passed} of 16 ran");
    let fired: usize = results
        .cases
        .iter()
        .map(|r| r.crash_points.len() + r.fault_points.len())
        .sum();
    assert!(fired >= 4, "only {fired} faults fired in 16 scenarios");
}
