//! `--repeat`: a case run several times passes only when every run passed. An implementation
//! that does its job on every other start is `unstable k/N`, with each failing run's log
//! named by its run; one that always does its job passes with one result per case.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use grove_conformance::catalog::{self, Case};
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::report::{Outcome, RunEvent, Verdict};
use grove_conformance::runner::{RunSettings, run_cases};

/// A case the implementation passes by creating the clique's pods within 8 s.
fn pods_case() -> Case {
    let text = "name: pods-come-up\nsummary: s\nclauses: [B5]\nprofile: core\nfixture: single-clique\nsteps:\n  - apply: single-clique\n  - expect: {within: 8s, pods: [{clique: job-0-worker, phase: Running, count: 4}]}\n";
    let catalog = common::repository_catalog();
    let fixtures: BTreeSet<String> = catalog.fixtures.keys().cloned().collect();
    let mut case =
        catalog::parse_case_with_fixtures(Path::new("pods-come-up.yaml"), text, &fixtures)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    case.area = "repeat".into();
    case
}

/// Runs `case` `repeat` times against `implementation`; the results and the events.
fn run(
    implementation: ImplementationSpec,
    repeat: u32,
    logs: &Path,
) -> (grove_conformance::report::RunResults, Vec<RunEvent>) {
    let world = common::embedded_world();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let settings = RunSettings {
        repeat,
        jobs: 4,
        ..common::settings(implementation, logs)
    };
    let results = world
        .runtime
        .block_on(run_cases(
            world.target().handles(),
            common::repository_catalog(),
            vec![pods_case()],
            &settings,
            move |e| seen.lock().unwrap().push(e.clone()),
        ))
        .unwrap();
    let events = events.lock().unwrap().clone();
    (results, events)
}

#[test]
fn an_implementation_that_works_every_other_start_is_unstable() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("every-other.sh");
    let count = dir.path().join("starts");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(flock {count} sh -c 'n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; echo $n')\nif [ $((n % 2)) -eq 1 ]; then exec sleep 600; fi\nexec {harness} reference-operator \"$@\"\n",
            count = count.display(),
            harness = common::harness_binary().display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let implementation = ImplementationSpec::Command {
        template: format!(
            "{} --kubeconfig {{kubeconfig}} --namespace {{namespace}}",
            script.display()
        ),
        setup: Default::default(),
    };
    let logs = dir.path().join("logs");
    let (results, events) = run(implementation, 4, &logs);
    assert_eq!(results.cases.len(), 1, "one result for the case");
    let result = &results.cases[0];
    let Outcome::Unstable {
        passed,
        runs,
        failure,
    } = &result.outcome
    else {
        panic!("not unstable: {:?}", result.outcome);
    };
    assert_eq!((*passed, *runs), (2, 4));
    assert_eq!(result.outcome.verdict(), Verdict::Unstable);
    assert!(!result.outcome.verdict().is_success());
    assert!(
        failure.message.starts_with("passed 2 of 4 runs; run "),
        "{}",
        failure.message
    );
    let timeline = failure.timeline.as_deref().unwrap_or_default();
    assert_eq!(timeline.matches("── run ").count(), 2, "{timeline}");
    let repeated: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::RepeatFinished { run, .. } => Some(*run),
            _ => None,
        })
        .collect();
    assert_eq!(
        repeated.iter().copied().collect::<BTreeSet<_>>(),
        (1..=4).collect(),
        "every run's result is an event of its own"
    );
    let finished = events
        .iter()
        .filter(|e| matches!(e, RunEvent::CaseFinished(_)))
        .count();
    assert_eq!(finished, 1, "the case ends once");
    // Each failing run's log is its own, named by its run.
    let failing_logs: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("pods-come-up.run-"))
        .collect();
    assert!(failing_logs.len() >= 2, "{failing_logs:?}");
    assert!(grove_conformance::report::exit_code(&results) != grove_conformance::report::SUCCESS);
}

#[test]
fn an_implementation_that_always_works_passes_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let (results, events) = run(common::reference(), 3, dir.path());
    assert_eq!(results.cases.len(), 1);
    assert_eq!(results.cases[0].outcome, Outcome::Pass);
    let repeated = events
        .iter()
        .filter(|e| matches!(e, RunEvent::RepeatFinished { .. }))
        .count();
    assert_eq!(repeated, 3);
}
