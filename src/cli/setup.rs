//! `setup` and `up`: the control-plane binaries (and kind assets) found or built, and a
//! standing embedded cluster to look around in.

use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::cluster::embedded::{ProvisionOptions, provision};
use grove_conformance::kubelets::simulated::FleetOptions;
use grove_conformance::report::{self, Exit};

use super::error::{CliError, CliResult};
use super::runtime;

pub(crate) fn setup(no_build: bool, kind: bool) -> CliResult {
    let options = ProvisionOptions {
        allow_build: !no_build,
        ..ProvisionOptions::default()
    };
    let binaries =
        provision::resolve(&options).map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    for component in provision::Component::ALL {
        println!(
            "{:<24} {}",
            component.binary(),
            binaries.path(component).display()
        );
    }
    if !kind {
        return Ok(report::SUCCESS);
    }
    let exe = super::current_exe()?;
    let assets = grove_conformance::cluster::kind::assets::resolve(&options, &exe)
        .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    println!("{:<24} {}", "kind", assets.kind.display());
    println!("{:<24} {}", "kubectl", assets.kubectl.display());
    println!("{:<24} {}", "node image", assets.node_image);
    Ok(report::SUCCESS)
}

pub(crate) fn up(nodes: usize) -> CliResult {
    runtime().block_on(async {
        let options = EmbeddedOptions {
            crds: grove_reference_operator::crds(),
            fleet: FleetOptions {
                nodes,
                ..FleetOptions::default()
            },
            ..EmbeddedOptions::default()
        };
        let cluster = EmbeddedCluster::start(options)
            .await
            .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
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
        Ok(report::SUCCESS)
    })
}
