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

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use grove_conformance::catalog::{self, Catalog};
use grove_conformance::cluster::{TargetGuard, TargetOptions, acquire};
use grove_conformance::errors;
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::report::Outcome;
use grove_conformance::runner::case::{RunContext, needs_exclusive, run_case};
use grove_conformance::runner::default_jobs;
use rstest::rstest;

struct Env {
    runtime: tokio::runtime::Runtime,
    target: Result<TargetGuard, String>,
    embedded: bool,
    catalog: Arc<Catalog>,
    logs: PathBuf,
}

/// The target of every case test of this binary, acquired once: the embedded cluster, or the
/// cluster of `GROVE_CONFORMANCE_KUBECONFIG` (then nothing embedded starts).
fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        grove_conformance::host::logging::init(grove_conformance::host::logging::DEFAULT_FILTER);
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let catalog = catalog::load_catalog(root)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
        let options = TargetOptions::from_env().unwrap_or_else(|e| panic!("{e}"));
        let spec = options
            .spec(Path::new(env!("CARGO_BIN_EXE_grove-conformance")))
            .unwrap_or_else(|e| panic!("{e}"));
        // A runtime of its own, so clients and the fleet outlive any single test.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("grove-catalog")
            .build()
            .expect("failed to build the shared runtime");
        let target = runtime
            .block_on(acquire(&spec, grove_reference_operator::crds(), true))
            .map_err(|e| format!("{:#}", errors::chain(&e)));
        // The target lives in a static, which is never dropped: the kind cluster is deleted by
        // a watchdog once this process has ended.
        if let Ok(guard) = &target
            && let Some(cluster) = guard.kind_cluster()
        {
            grove_conformance::cluster::kind::delete_when_gone(
                std::process::id(),
                &cluster.kind,
                &cluster.name,
            )
            .expect("failed to start the kind cluster's watchdog");
        }
        Env {
            runtime,
            target,
            embedded: !spec.real_kubelets(),
            catalog: Arc::new(catalog),
            logs: root.join("target/grove-conformance-test-logs"),
        }
    })
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
    let env = env();
    let target = match &env.target {
        Ok(t) => t.handles().clone(),
        Err(reason) => panic!("the target cluster is not available:\n{reason}"),
    };
    let case = env
        .catalog
        .cases
        .iter()
        .find(|c| same_file(&c.path, &path))
        .unwrap_or_else(|| panic!("{} is not in the catalog", path.display()))
        .clone();
    std::fs::create_dir_all(&env.logs).unwrap();
    let implementation = ImplementationSpec::Reference {
        program: PathBuf::from(env!("CARGO_BIN_EXE_grove-conformance")),
    };
    let _slot = (!env.embedded).then(|| {
        env.runtime
            .block_on(real_kubelet_slots().acquire())
            .expect("the semaphore is never closed")
    });
    // Cases that are large, or lose a node where they cannot have nodes of their own, run
    // alone, as `grove-conformance run` does.
    static CLUSTER: RwLock<()> = RwLock::new(());
    let _alone;
    let _shared;
    if needs_exclusive(&case, &env.catalog, &implementation, &target.pods) {
        _alone = CLUSTER.write().unwrap_or_else(|p| p.into_inner());
    } else {
        _shared = CLUSTER.read().unwrap_or_else(|p| p.into_inner());
    }
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let result = env.runtime.block_on(async {
        let context = RunContext::new(
            &target,
            implementation,
            env.catalog.clone(),
            env.logs.clone(),
            events,
        );
        run_case(&context, &case).await
    });
    receiver.close();
    match result.outcome {
        Outcome::Pass => {}
        Outcome::Skip { reason } if !env.embedded => eprintln!("skipped: {reason}"),
        Outcome::Skip { reason } => panic!(
            "case {} was skipped on the embedded target with the reference operator, where every case must run: {reason}",
            case.name
        ),
        Outcome::NotApplicable { reason } => panic!(
            "case {} is not applicable in the default revision, which every case must be: {reason}",
            case.name
        ),
        Outcome::Fail(failure) => panic!(
            "case {} failed: {}\n\n{}\n\ntimeline:\n{}",
            case.name,
            failure.message,
            failure.diff.unwrap_or_default(),
            failure.timeline.unwrap_or_default()
        ),
        Outcome::Error { message } => panic!("case {} could not be judged: {message}", case.name),
    }
}
