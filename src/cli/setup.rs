//! `setup` and `up`: the control-plane binaries (and kind assets) found or built, and a
//! standing embedded cluster to look around in.

use grove_conformance::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use grove_conformance::cluster::embedded::{ProvisionOptions, provision};
use grove_conformance::errors;
use grove_conformance::kubelets::simulated::FleetOptions;
use grove_conformance::report;

use super::runtime;

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
            eprintln!("error: {:#}", errors::chain(&err));
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
    match grove_conformance::cluster::kind::assets::resolve(&options, &exe) {
        Ok(assets) => {
            println!("{:<24} {}", "kind", assets.kind.display());
            println!("{:<24} {}", "kubectl", assets.kubectl.display());
            println!("{:<24} {}", "node image", assets.node_image);
            report::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {:#}", errors::chain(&err));
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
                eprintln!("error: {:#}", errors::chain(&err));
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
