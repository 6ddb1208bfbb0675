//! The subcommands besides `run`: setting up binaries and assets, a standing cluster, the
//! catalog's lint and coverage, repeated runs, the crash sweep, and the reference operator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grove_conformance::catalog;
use grove_conformance::cluster::{ProvisionOptions, provision};
use grove_conformance::embedded::{EmbeddedCluster, EmbeddedOptions, render_error};
use grove_conformance::kubelet::FleetOptions;
use grove_conformance::report;
use grove_conformance::runner::{self, ImplementationSpec, TargetSpec};
use grove_conformance::vocab::Vocabulary;

use crate::{load, runtime};

pub(crate) fn reference_operator(kubeconfig: Option<PathBuf>, namespace: Option<String>) -> i32 {
    let options = grove_reference_operator::controller::RunOptions {
        kubeconfig,
        namespace,
    };
    match runtime().block_on(grove_reference_operator::controller::run(options)) {
        Ok(()) => report::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", render_error(&err));
            1
        }
    }
}

pub(crate) fn setup(no_build: bool, kind: bool) -> i32 {
    let options = ProvisionOptions {
        allow_build: !no_build,
        ..ProvisionOptions::default()
    };
    match provision::resolve(&options) {
        Ok(binaries) => {
            for component in provision::Component::ALL {
                println!(
                    "{:<24} {}",
                    component.binary(),
                    binaries.path(component).display()
                );
            }
        }
        Err(err) => {
            eprintln!("error: {}", render_error(&err));
            return report::SETUP_FAILED;
        }
    }
    if !kind {
        return report::SUCCESS;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: failed to locate this executable: {e}");
            return report::SETUP_FAILED;
        }
    };
    match grove_conformance::cluster::kind_assets::resolve(&options, &exe) {
        Ok(assets) => {
            println!("{:<24} {}", "kind", assets.kind.display());
            println!("{:<24} {}", "kubectl", assets.kubectl.display());
            println!("{:<24} {}", "node image", assets.node_image);
            report::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {}", render_error(&err));
            report::SETUP_FAILED
        }
    }
}

pub(crate) fn up(nodes: usize) -> i32 {
    runtime().block_on(async {
        let options = EmbeddedOptions {
            crds: grove_reference_operator::crds(),
            fleet: FleetOptions {
                nodes,
                ..FleetOptions::default()
            },
            ..EmbeddedOptions::default()
        };
        let cluster = match EmbeddedCluster::start(options).await {
            Ok(cluster) => cluster,
            Err(err) => {
                eprintln!("error: {}", render_error(&err));
                return report::SETUP_FAILED;
            }
        };
        println!(
            "embedded cluster ready in {:.1?}: {} nodes, apiserver {}",
            cluster.start_duration,
            nodes,
            cluster.control_plane.server()
        );
        println!(
            "export KUBECONFIG={}",
            cluster.control_plane.kubeconfig_path().display()
        );
        println!("press Ctrl-C to stop");
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("stopping");
        drop(cluster);
        report::SUCCESS
    })
}

pub(crate) fn sweep(root: &Path, filter: &[String], after: bool, out: &Path) -> i32 {
    use grove_conformance::runner::case::RunContext;
    use grove_conformance::runner::sweep;
    let catalog = match load(root) {
        Ok(c) => Arc::new(c),
        Err(code) => return code,
    };
    let cases: Vec<catalog::Case> = catalog
        .cases
        .iter()
        .filter(|c| {
            filter
                .iter()
                .any(|f| c.name.contains(f.as_str()) || c.area == *f)
        })
        .cloned()
        .collect();
    if cases.is_empty() {
        eprintln!("error: the filter selected no case");
        return report::NO_CASES;
    }
    let logs = out.join("logs");
    if let Err(e) = std::fs::create_dir_all(&logs) {
        eprintln!("error: failed to create {}: {e}", logs.display());
        return report::SETUP_FAILED;
    }
    let implementation = match ImplementationSpec::reference_from_current_exe() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: failed to find the grove-conformance executable: {e}");
            return report::SETUP_FAILED;
        }
    };
    runtime().block_on(async {
        let target = match runner::acquire(
            &TargetSpec::Embedded,
            grove_reference_operator::crds(),
            true,
        )
        .await
        {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {}", render_error(&e));
                return report::SETUP_FAILED;
            }
        };
        let handles = target.handles().clone();
        let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
        let context = RunContext {
            client: handles.client.clone(),
            kubeconfig: handles.kubeconfig.clone(),
            pods: handles.pods.clone(),
            implementation,
            shared_instance: None,
            shared_proxy: None,
            api_proxy: true,
            vocab: Vocabulary::default(),
            catalog: catalog.clone(),
            keep_namespaces: false,
            log_dir: logs.clone(),
            events,
            inject_pin: None,
            record_writes: None,
        };
        let mut sweeps = Vec::new();
        for case in &cases {
            if let Some(why) = sweep::unsweepable(case) {
                eprintln!("{}: not swept: {why}", case.name);
                continue;
            }
            eprintln!("{}: crash-free run, recording the writes", case.name);
            let done = sweep::sweep(&context, case, after, |p| {
                eprintln!(
                    "{}: write {:>2} {:<50} {}{}",
                    case.name,
                    p.write,
                    p.pin.to_string(),
                    p.verdict(),
                    p.landed
                        .first()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                );
            })
            .await;
            eprintln!(
                "{}: {} writes, {} points explored in {:.1?}",
                case.name,
                done.writes.len(),
                done.points.len(),
                done.duration
            );
            sweeps.push(done);
        }
        let summary = sweep::summary(&sweeps);
        println!("{summary}");
        let path = out.join("sweep.md");
        if let Err(e) = std::fs::write(&path, &summary) {
            eprintln!("error: failed to write {}: {e}", path.display());
        }
        let failed = sweeps.iter().any(|s| {
            s.baseline != report::Outcome::Pass
                || s.points
                    .iter()
                    .any(|p| matches!(p.verdict(), "fail" | "error"))
        });
        if failed {
            report::CASES_FAILED
        } else {
            report::SUCCESS
        }
    })
}

pub(crate) fn bench(runs: usize, out: &Path, run_args: &[std::ffi::OsString]) -> i32 {
    use grove_conformance::runner::bench;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: failed to find the grove-conformance executable: {e}");
            return report::SETUP_FAILED;
        }
    };
    let done = match bench::run_repeatedly(&exe, runs, run_args, out, |run| {
        eprintln!("{}", bench::run_line(run))
    }) {
        Ok(done) => done,
        Err(e) => {
            eprintln!("error: {}", render_error(&e));
            return report::SETUP_FAILED;
        }
    };
    let summary = bench::summary(&done);
    println!("{summary}");
    let path = out.join("bench.md");
    if let Err(e) = std::fs::write(&path, &summary) {
        eprintln!("error: failed to write {}: {e}", path.display());
    }
    match done.iter().find(|r| r.exit_code != Some(report::SUCCESS)) {
        None => report::SUCCESS,
        Some(r) => r.exit_code.unwrap_or(report::CASES_ERRORED),
    }
}

pub(crate) fn lint(root: &Path) -> i32 {
    match catalog::lint(root) {
        Ok(catalog) => {
            println!(
                "catalog ok: {} cases, {} fixtures",
                catalog.cases.len(),
                catalog.fixtures.len()
            );
            report::SUCCESS
        }
        Err(diagnostics) => {
            eprintln!("{}", catalog::render_diagnostics(&diagnostics));
            report::INVALID_CATALOG
        }
    }
}

pub(crate) fn coverage(root: &Path, write: Option<&Path>, check: Option<&Path>) -> i32 {
    let catalog = match load(root) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let table = catalog::coverage(&catalog);
    if let Some(path) = write {
        if let Err(e) = std::fs::write(path, &table) {
            eprintln!("error: failed to write {}: {e}", path.display());
            return report::SETUP_FAILED;
        }
    } else if let Some(path) = check {
        let current = std::fs::read_to_string(path).unwrap_or_default();
        if current != table {
            eprintln!(
                "error: {} is stale; regenerate it with `grove-conformance coverage --write {}`",
                path.display(),
                path.display()
            );
            return report::INVALID_CATALOG;
        }
    } else {
        print!("{table}");
    }
    report::SUCCESS
}
