//! The `grove-conformance` command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use grove_conformance::cluster::{ProvisionOptions, provision};
use grove_conformance::embedded::{EmbeddedCluster, EmbeddedOptions, render_error};
use grove_conformance::kubelet::FleetOptions;

/// End-to-end conformance suite for Grove job support (GREP-0285).
#[derive(Debug, Parser)]
#[command(name = "grove-conformance", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Find or build etcd, kube-apiserver and kube-controller-manager, and print where they are.
    Setup {
        /// Fail instead of building when the binaries are not found.
        #[arg(long)]
        no_build: bool,
    },
    /// Start the embedded cluster and keep it running in the foreground (Ctrl-C stops it).
    Up {
        /// Number of simulated nodes.
        #[arg(long, default_value_t = 8)]
        nodes: usize,
    },
}

/// Readiness probes fail by design while components start; kube's client logs each failure.
const DEFAULT_LOG_FILTER: &str =
    "warn,kube_client::client::builder=off,kube_client::client::tls=error";

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Setup { no_build } => setup(no_build),
        Command::Up { nodes } => up(nodes),
    }
}

fn setup(no_build: bool) -> ExitCode {
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
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {}", render_error(&err));
            ExitCode::from(3)
        }
    }
}

fn up(nodes: usize) -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("failed to build a runtime");
    runtime.block_on(async {
        let options = EmbeddedOptions {
            crds: Vec::new(),
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
                return ExitCode::from(3);
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
        ExitCode::SUCCESS
    })
}
