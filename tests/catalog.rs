//! Every case of the catalog as its own test, run against the reference operator.
//!
//! `GROVE_CONFORMANCE_TARGET` selects the target, acquired once per test binary:
//! - `embedded` (the default): the embedded cluster; every case must run there;
//! - `kind`: a kind cluster created from the project's configuration with the assets of
//!   `grove-conformance setup --kind` (built if missing; Docker needed), deleted when the tests
//!   end;
//! - `kubeconfig`: the cluster of `GROVE_CONFORMANCE_KUBECONFIG` (also chosen when only that
//!   variable is set).
//!
//! On a real cluster a step that needs a capability the target lacks (a kubelet that writes
//! no terminal phase, say) reports `skipped: <reason>` on stderr.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

use grove_conformance::catalog::{Case, ControllerAction, StepKind, Trigger};
use grove_conformance::report::Outcome;
use grove_conformance::runner::case::{RunContext, needs_exclusive, run_case};
use grove_conformance::runner::default_jobs;
use rstest::rstest;

/// Where the implementation's logs of the case tests go.
fn logs() -> PathBuf {
    common::root().join("target/grove-conformance-test-logs")
}

/// How many case tests run at once on real kubelets, where each pod costs a real container:
/// [`default_jobs`], as `grove-conformance run` has it, whatever the test threads (16, for the
/// embedded cluster). A permit is held for the whole case.
fn real_kubelet_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| tokio::sync::Semaphore::new(default_jobs(true)))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[rstest]
fn case(#[files("cases/**/*.yaml")] path: PathBuf) {
    let world = common::world();
    let target = world.target().handles().clone();
    let catalog = common::repository_catalog();
    let embedded = !world.real_kubelets;
    let case = catalog
        .cases
        .iter()
        .find(|c| same_file(&c.path, &path))
        .unwrap_or_else(|| panic!("{} is not in the catalog", path.display()))
        .clone();
    std::fs::create_dir_all(logs()).unwrap();
    let implementation = common::reference();
    let _slot = (!embedded).then(|| {
        world
            .runtime
            .block_on(real_kubelet_slots().acquire())
            .expect("the semaphore is never closed")
    });
    // Cases that are large, or lose a node where they cannot have nodes of their own, run
    // alone, as `grove-conformance run` does.
    static CLUSTER: RwLock<()> = RwLock::new(());
    let _alone;
    let _shared;
    if needs_exclusive(&case, &catalog, &implementation, &target.pods) {
        _alone = CLUSTER.write().unwrap_or_else(|p| p.into_inner());
    } else {
        _shared = CLUSTER.read().unwrap_or_else(|p| p.into_inner());
    }
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let result = world.runtime.block_on(async {
        let context = RunContext::new(&target, implementation, catalog.clone(), logs(), events);
        run_case(&context, &case).await
    });
    receiver.close();
    if result.outcome == Outcome::Pass {
        check_landing_points(&case, &result.crash_points);
    }
    match result.outcome {
        Outcome::Pass => {}
        Outcome::Skip { reason } if !embedded => eprintln!("skipped: {reason}"),
        Outcome::Skip { reason } => panic!(
            "case {} was skipped on the embedded target with the reference operator, where every case must run: {reason}",
            case.name
        ),
        Outcome::NotApplicable { reason } => panic!(
            "case {} is not applicable in the default revision, which every case must be: {reason}",
            case.name
        ),
        Outcome::Fail(failure) | Outcome::Unstable { failure, .. } => panic!(
            "case {} failed: {}\n\n{}\n\ntimeline:\n{}",
            case.name,
            failure.message,
            failure.diff.unwrap_or_default(),
            failure.timeline.unwrap_or_default()
        ),
        Outcome::Error { message } => panic!("case {} could not be judged: {message}", case.name),
    }
}

/// Every crash or pause that a watched change, deletion or condition fires says where it
/// landed in the implementation's API traffic (its last request sent and last answer
/// received), one point per such step, as a pinned crash says which request it landed on.
fn check_landing_points(case: &Case, points: &[String]) {
    let watched = case
        .steps
        .iter()
        .filter(|s| {
            matches!(&s.kind, StepKind::Controller(c)
                if matches!(c.action, ControllerAction::Crash | ControllerAction::Pause)
                    && c.when.as_ref().is_some_and(|t| !matches!(t, Trigger::Request(_))))
        })
        .count();
    let landed = points
        .iter()
        .filter(|p| p.contains(" when ") && p.contains(", last answer received "))
        .count();
    assert_eq!(
        landed, watched,
        "case {}: {watched} crash or pause step(s) fired by a watched change, {landed} landing point(s) recorded: {points:?}",
        case.name
    );
}
