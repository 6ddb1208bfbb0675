//! The `grove-reference-operator` command line, shared by its own binary and by the
//! `grove-conformance` binary when it is invoked under that name (the image that carries the
//! harness carries the reference operator as a link to it).
//!
//! `crdgen [--out DIR]` writes the CRDs (default: the crate's committed `crds/`);
//! `run [--kubeconfig FILE] [--namespace NS]` runs the controllers until SIGTERM/SIGINT.
//! Logs go to stderr; `RUST_LOG` filters them (default `info`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::controller::{self, RunOptions};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Reference operator for Grove job semantics (GREP-0285)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the PodCliqueSet, PodCliqueScalingGroup and PodClique CRDs as YAML.
    Crdgen {
        /// Directory to write into.
        #[arg(long, default_value_os_t = crate::crd::committed_dir())]
        out: PathBuf,
    },
    /// Run the controllers.
    Run {
        /// Kubeconfig to use (default: in-cluster, then `KUBECONFIG`, then `~/.kube/config`).
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Watch and act in this namespace only.
        #[arg(long)]
        namespace: Option<String>,
    },
}

/// Runs the command line `args` (the first is the program name).
pub fn main_with<I, T>(args: I) -> anyhow::Result<ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::parse_from(args).command {
        Command::Crdgen { out } => {
            for path in crate::crd::write_all(&out)? {
                println!("{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            kubeconfig,
            namespace,
        } => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .init();
            // An unoptimised build nests deep when it deserialises lists of pods: Tokio's 2 MiB
            // default stack is not enough there.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_stack_size(16 * 1024 * 1024)
                .build()?;
            runtime.block_on(controller::run(RunOptions {
                kubeconfig,
                namespace,
            }))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
