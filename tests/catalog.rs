//! Every case of the catalog as its own test, run against the reference operator.
//!
//! By default the target is the embedded cluster (one per test binary). Set
//! `GROVE_CONFORMANCE_KUBECONFIG` to a kubeconfig to run against that cluster instead (the
//! Grove CRDs are installed; pod actions need the simulated kubelet, so those cases report
//! `skipped: <reason>` on stderr there).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use grove_conformance::catalog::{self, Catalog};
use grove_conformance::embedded::{self, Shared};
use grove_conformance::report::Outcome;
use grove_conformance::runner::case::{RunContext, needs_exclusive, run_case};
use grove_conformance::runner::{ImplementationSpec, TargetHandles, target};
use grove_conformance::vocab::{Revision, Vocabulary};
use rstest::rstest;

struct Env {
    shared: &'static Shared,
    target: Result<TargetHandles, String>,
    embedded: bool,
    catalog: Arc<Catalog>,
    logs: PathBuf,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let catalog = catalog::load_catalog(root)
            .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
        let external = std::env::var_os("GROVE_CONFORMANCE_KUBECONFIG").map(PathBuf::from);
        let shared = embedded::shared(if external.is_some() {
            Vec::new
        } else {
            grove_reference_operator::crds
        });
        let logs = root.join("target/grove-conformance-test-logs");
        let target = match &external {
            None => shared.cluster().map(|c| c.target()).map_err(str::to_string),
            Some(path) => shared.block_on(async {
                let scratch = grove_conformance::cluster::process::temp_dir("test")
                    .map_err(|e| e.to_string())?;
                let (client, kubeconfig) = target::from_kubeconfig(path, None, &scratch)
                    .await
                    .map_err(|e| embedded::render_error(&e))?;
                target::install_crds(&client, &grove_reference_operator::crds())
                    .await
                    .map_err(|e| embedded::render_error(&e))?;
                Ok(TargetHandles {
                    client,
                    kubeconfig,
                    fleet: None,
                })
            }),
        };
        Env {
            shared,
            target,
            embedded: external.is_none(),
            catalog: Arc::new(catalog),
            logs,
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
        Ok(t) => t.clone(),
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
    let result = env.shared.block_on(async {
        let context = RunContext {
            client: target.client.clone(),
            kubeconfig: target.kubeconfig.clone(),
            fleet: target.fleet.clone(),
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
