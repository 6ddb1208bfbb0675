//! How cases end when something other than the implementation goes wrong, on the embedded
//! target: an early exit after the case's namespace exists deletes it and stops what the case
//! started; a crash the harness fails to pin is an error; pods that cannot start end the case
//! at once as an error naming them; the end of a case confirms its revision though only kinds
//! no gated watch delivers wrote after it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grove_conformance::catalog::{self, Case, Catalog, RequestPin};
use grove_conformance::cluster::TargetGuard;
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::report::{CaseResult, Outcome};
use grove_conformance::runner::case::{CASE_LABEL, RunContext, run_case};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// What the tests of this binary share: the embedded world and the repository's catalog.
struct Env {
    runtime: &'static tokio::runtime::Runtime,
    target: &'static TargetGuard,
    catalog: Arc<Catalog>,
}

fn env() -> Env {
    let world = common::embedded_world();
    Env {
        runtime: &world.runtime,
        target: world.target(),
        catalog: common::repository_catalog(),
    }
}

/// A case on the `single-clique` fixture that waits (up to `within`) for a completion no
/// step brings about.
fn waiting_case(name: &str, within: &str) -> Case {
    let text = format!(
        "name: {name}\nsummary: s\nclauses: [E1]\nprofile: core\nfixture: single-clique\nsteps:\n  - apply: single-clique\n  - expect: {{within: {within}, objects: [{{kind: PodCliqueSet, name: job, conditions: {{Completed: \"True\"}}}}]}}\n"
    );
    let fixtures: BTreeSet<String> = env().catalog.fixtures.keys().cloned().collect();
    let mut case =
        catalog::parse_case_with_fixtures(Path::new(&format!("{name}.yaml")), &text, &fixtures)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    case.area = "endings".into();
    case
}

fn context(implementation: ImplementationSpec, logs: &Path) -> RunContext {
    let env = env();
    let target = env.target.handles();
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    RunContext::new(
        target,
        implementation,
        env.catalog.clone(),
        logs.to_path_buf(),
        events,
    )
}

use common::reference;

/// The namespaces the case made that are neither gone nor being deleted.
async fn live_namespaces(case: &str) -> Vec<String> {
    let namespaces: Api<Namespace> = Api::all(env().target.handles().client.clone());
    namespaces
        .list(&ListParams::default().labels(&format!("{CASE_LABEL}={case}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// The live processes (zombies aside) whose command line mentions `word`.
fn processes_mentioning(word: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().starts_with('Z')))
            .unwrap_or(true);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !zombie && String::from_utf8_lossy(&cmdline).contains(word) {
            found.push(pid);
        }
    }
    found
}

fn run(context: &RunContext, case: &Case) -> CaseResult {
    env().runtime.block_on(run_case(context, case))
}

#[test]
fn an_implementation_that_cannot_start_leaves_no_namespace_behind() {
    let logs = tempfile::tempdir().unwrap();
    let case = waiting_case("ending-implementation-cannot-start", "5s");
    let broken = ImplementationSpec::Reference {
        program: PathBuf::from("/nonexistent/grove-operator"),
    };
    let result = run(&context(broken, logs.path()), &case);
    let Outcome::Error { message } = &result.outcome else {
        panic!("expected an error, got {:?}", result.outcome);
    };
    assert!(
        message.contains("failed to start the implementation"),
        "{message}"
    );
    assert_eq!(
        env().runtime.block_on(live_namespaces(&case.name)),
        Vec::<String>::new(),
        "the case's namespace was left behind"
    );
}

#[test]
fn a_crash_the_harness_fails_to_pin_is_an_error_and_stops_the_implementation() {
    let logs = tempfile::tempdir().unwrap();
    let case = waiting_case("ending-crash-pin-fails", "5s");
    // Per case (it names {namespace}), and recognisable by it on its command line.
    let implementation = ImplementationSpec::command_line("sh -c 'sleep 600; :' {namespace}");
    let context = RunContext {
        inject_pin: Some(RequestPin {
            verb: Some("frobnicate".into()),
            resource: Some("pods".into()),
            subresource: None,
            name: None,
            nth: 1,
            after: false,
        }),
        ..context(implementation, logs.path())
    };
    let result = run(&context, &case);
    let Outcome::Error { message } = &result.outcome else {
        panic!(
            "a harness failure while pinning a crash must be an error, got {:?}",
            result.outcome
        );
    };
    assert!(message.contains("frobnicate"), "{message}");
    let marker = format!("gc-{}-", case.name);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        processes_mentioning(&marker),
        Vec::<u32>::new(),
        "the implementation outlived its case"
    );
    assert_eq!(
        env().runtime.block_on(live_namespaces(&case.name)),
        Vec::<String>::new(),
        "the case's namespace was left behind"
    );
}

/// Writes, as a kubelet that cannot pull the image would, a waiting `ErrImagePull` into the
/// status of the first Running pod of the case's namespace; returns the pod's name.
async fn fail_an_image_pull(case: &str) -> String {
    let client = env().target.handles().client.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no pod of the case ever ran");
        if let Some(namespace) = live_namespaces(case).await.first() {
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            let running = pods
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
            if let Some(pod) = running {
                let name = pod.metadata.name.unwrap();
                let status = json!({"status": {"containerStatuses": [{
                    "name": "main", "image": "busybox", "imageID": "", "ready": false,
                    "restartCount": 0, "started": false,
                    "state": {"waiting": {"reason": "ErrImagePull",
                        "message": "failed to pull image \"busybox\": the registry is unreachable"}}
                }]}});
                pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .unwrap();
                return name;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_pod_whose_image_cannot_be_pulled_ends_the_case_at_once_as_an_error() {
    let logs = tempfile::tempdir().unwrap();
    let case = waiting_case("ending-image-cannot-be-pulled", "90s");
    let context = context(reference(), logs.path());
    let started = Instant::now();
    let (result, pod) = env().runtime.block_on(async {
        let pull = tokio::spawn(fail_an_image_pull("ending-image-cannot-be-pulled"));
        let result = run_case(&context, &case).await;
        (result, pull.await.unwrap())
    });
    let Outcome::Error { message } = &result.outcome else {
        panic!(
            "a case whose pods cannot start must be an error, got {:?}",
            result.outcome
        );
    };
    assert!(
        message.contains(&pod) && message.contains("ErrImagePull: failed to pull image"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the case waited {:?} instead of ending at once",
        started.elapsed()
    );
}

#[test]
fn a_finalizer_a_failed_case_added_does_not_keep_its_namespace() {
    let logs = tempfile::tempdir().unwrap();
    let name = "ending-finalizer-left";
    let text = format!(
        "name: {name}\nsummary: s\nclauses: [E1]\nprofile: core\nfixture: single-clique\nsteps:\n  - apply: single-clique\n  - update: {{kind: PodCliqueSet, name: job, patch: {{metadata: {{finalizers: [conformance.grove.io/keep]}}}}}}\n  - expect: {{within: 2s, objects: [{{kind: PodCliqueSet, name: job, conditions: {{Completed: \"True\"}}}}]}}\n"
    );
    let fixtures: BTreeSet<String> = env().catalog.fixtures.keys().cloned().collect();
    let case =
        catalog::parse_case_with_fixtures(Path::new(&format!("{name}.yaml")), &text, &fixtures)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    let result = run(&context(reference(), logs.path()), &case);
    assert!(
        matches!(result.outcome, Outcome::Fail { .. }),
        "expected a failure before the case removes its finalizer, got {:?}",
        result.outcome
    );
    // The namespace goes entirely, the PodCliqueSet with it: nothing holds it any more.
    let namespaces: Api<Namespace> = Api::all(env().target.handles().client.clone());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let left = env()
            .runtime
            .block_on(
                namespaces.list(&ListParams::default().labels(&format!("{CASE_LABEL}={name}"))),
            )
            .unwrap()
            .items;
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the case's namespace is still there: {:?}",
            left.iter()
                .map(|n| (&n.metadata.name, &n.status))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The end of a case nudges each gated kind's cache, then waits for every watch to confirm the
/// highest revision those reads returned. A write of a kind no gated watch delivers (a Lease,
/// an Event, here a ConfigMap) between two of the reads leaves the caches read first behind
/// it, with nothing of their kinds to deliver: their watches must still confirm it.
#[test]
fn the_end_of_a_case_confirms_revisions_only_ungated_kinds_wrote() {
    use grove_conformance::runner::observe::Observer;
    use grove_conformance::vocab::Vocabulary;
    let env = env();
    let client = env.target.handles().client.clone();
    let namespace = "ending-ungated-writes";
    env.runtime.block_on(async {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let observer =
            Observer::start(client.clone(), namespace, Vocabulary::default(), None).await;
        // Writes back to back, so some land between the end's reads of the gated kinds.
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let writer = tokio::spawn(async move {
            let mut rounds = 0u64;
            loop {
                let map: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": "churn"}, "data": {"round": rounds.to_string()}
                }))
                .unwrap();
                maps.patch(
                    "churn",
                    &PatchParams::apply("grove-conformance-test").force(),
                    &Patch::Apply(&map),
                )
                .await
                .unwrap();
                rounds += 1;
            }
        });
        observer.settle().await;
        writer.abort();
        let unjudgeable = observer.unjudgeable();
        drop(observer);
        namespaces
            .delete(namespace, &DeleteParams::default())
            .await
            .unwrap();
        assert_eq!(unjudgeable, None);
    });
}
