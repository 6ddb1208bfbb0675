//! Every case of the catalog as its own test, run against the reference operator.
//!
//! By default the target is the embedded cluster (one per test binary). Set
//! `GROVE_CONFORMANCE_KUBECONFIG` to a kubeconfig to run against that cluster instead (the
//! Grove CRDs are installed and no embedded cluster starts; steps that need the simulated
//! kubelet report `skipped: <reason>` on stderr there).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use grove_conformance::catalog::{self, Catalog};
use grove_conformance::embedded::render_error;
use grove_conformance::report::Outcome;
use grove_conformance::runner::case::{RunContext, needs_exclusive, run_case};
use grove_conformance::runner::{ImplementationSpec, TargetGuard, TargetSpec, acquire};
use grove_conformance::vocab::{Revision, Vocabulary};
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
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let catalog = catalog::load_catalog(root)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
        let spec = match std::env::var_os("GROVE_CONFORMANCE_KUBECONFIG") {
            Some(path) => TargetSpec::Kubeconfig {
                path: PathBuf::from(path),
                context: None,
            },
            None => TargetSpec::Embedded,
        };
        // A runtime of its own, so clients and the fleet outlive any single test.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("grove-catalog")
            .build()
            .expect("failed to build the shared runtime");
        let target = runtime
            .block_on(acquire(&spec, grove_reference_operator::crds(), true))
            .map_err(|e| render_error(&e));
        Env {
            runtime,
            target,
            embedded: matches!(spec, TargetSpec::Embedded),
            catalog: Arc::new(catalog),
            logs: root.join("target/grove-conformance-test-logs"),
        }
    })
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
    // Cases that lose a node or are large run alone, as `grove-conformance run` does.
    static CLUSTER: RwLock<()> = RwLock::new(());
    let _alone;
    let _shared;
    if needs_exclusive(&case, &env.catalog, &implementation) {
        _alone = CLUSTER.write().unwrap_or_else(|p| p.into_inner());
    } else {
        _shared = CLUSTER.read().unwrap_or_else(|p| p.into_inner());
    }
    let (events, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let result = env.runtime.block_on(async {
        let context = RunContext {
            client: target.client.clone(),
            kubeconfig: target.kubeconfig.clone(),
            pods: target.pods.clone(),
            implementation,
            shared_instance: None,
            vocab: Vocabulary::new(Revision::default()),
            catalog: env.catalog.clone(),
            keep_namespaces: false,
            log_dir: env.logs.clone(),
            events,
        };
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
