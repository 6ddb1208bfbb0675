//! What the test binaries share: the harness binary, the repository's catalog, the target
//! every case test of a binary runs on, the reference operator as the implementation, and
//! run settings as `grove-conformance run` has them. Each binary uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

use grove_conformance::catalog::{self, Catalog};
use grove_conformance::cluster::{TargetGuard, TargetOptions, TargetSpec, acquire};
use grove_conformance::errors;
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::runner::RunSettings;

/// The repository's root (the catalog, fixtures and docs are there).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `grove-conformance` binary Cargo built for the tests.
pub fn harness_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_grove-conformance"))
}

/// Runs the binary with `args` from the crate's root and waits for it.
pub fn harness(args: &[&str]) -> Output {
    Command::new(harness_binary())
        .args(args)
        .current_dir(root())
        .output()
        .expect("the harness runs")
}

/// The exit code and both streams of a run, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The repository's catalog, loaded once (a catalog that does not load fails the test with
/// its diagnostics).
pub fn repository_catalog() -> Arc<Catalog> {
    static CATALOG: OnceLock<Arc<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| {
            Arc::new(
                catalog::load_catalog(root())
                    .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d))),
            )
        })
        .clone()
}

/// The reference operator, run by the harness binary.
pub fn reference() -> ImplementationSpec {
    ImplementationSpec::Reference {
        program: harness_binary().to_path_buf(),
    }
}

/// Settings as `grove-conformance run` has them, for `implementation`, its logs in `log_dir`.
pub fn settings(implementation: ImplementationSpec, log_dir: impl Into<PathBuf>) -> RunSettings {
    RunSettings {
        implementation,
        log_dir: log_dir.into(),
        ..RunSettings::default()
    }
}

/// The target every case test of one binary shares, on a runtime of its own (so clients and
/// the fleet outlive any single test).
pub struct World {
    /// Runs what the tests ask of the target.
    pub runtime: tokio::runtime::Runtime,
    /// The target, or why it could not be had (rendered with its causes).
    pub target: Result<TargetGuard, String>,
    /// Whether its pods run on real kubelets (kind, or a cluster named by kubeconfig).
    pub real_kubelets: bool,
}

impl World {
    /// The target; a target that could not be had fails the test, saying why.
    pub fn target(&self) -> &TargetGuard {
        self.target
            .as_ref()
            .unwrap_or_else(|e| panic!("the target is not available:\n{e}"))
    }
}

/// The binary's world, acquired once with the reference operator's CRDs: the target
/// `GROVE_CONFORMANCE_TARGET` selects (`embedded`, the default; `kind`; `kubeconfig`, the
/// cluster of `GROVE_CONFORMANCE_KUBECONFIG`).
pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let options = TargetOptions::from_env().unwrap_or_else(|e| panic!("{e}"));
        let spec = options
            .spec(harness_binary())
            .unwrap_or_else(|e| panic!("{e}"));
        make_world(&spec)
    })
}

/// The binary's world on the embedded target whatever the environment says, for tests of
/// what only the simulated fleet does; acquired once.
pub fn embedded_world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| make_world(&TargetSpec::Embedded))
}

fn make_world(spec: &TargetSpec) -> World {
    grove_conformance::host::logging::init(grove_conformance::host::logging::DEFAULT_FILTER);
    let runtime = grove_conformance::host::runtime("grove-test-world", Some(2))
        .expect("failed to build the shared runtime");
    let target = runtime
        .block_on(acquire(spec, grove_reference_operator::crds(), true))
        .map_err(|e| format!("{:#}", errors::chain(&e)));
    // The target lives in a static, which is never dropped: the kind cluster is deleted by a
    // watchdog once this process has ended.
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
    World {
        runtime,
        target,
        real_kubelets: spec.real_kubelets(),
    }
}

/// The embedded target, acquired now (for a test that needs one of its own).
pub async fn embedded_target() -> TargetGuard {
    acquire(
        &TargetSpec::Embedded,
        grove_reference_operator::crds(),
        true,
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the embedded target is not available:\n{:#}",
            errors::chain(&e)
        )
    })
}

/// The embedded cluster every test of one binary shares (the library's, with `crds`
/// installed when it starts), and the runtime it runs on; a cluster that did not start fails
/// the test, saying why.
pub fn shared_cluster(
    crds: impl FnOnce() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
) -> (
    &'static grove_conformance::cluster::embedded::Shared,
    &'static grove_conformance::cluster::embedded::EmbeddedCluster,
) {
    let shared = grove_conformance::cluster::embedded::shared(crds);
    let cluster = shared
        .cluster()
        .unwrap_or_else(|reason| panic!("the embedded cluster did not start:\n{reason:#}"));
    (shared, cluster)
}
