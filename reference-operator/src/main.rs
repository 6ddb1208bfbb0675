//! `grove-reference-operator`: the reference operator binary.
//!
//! `crdgen [--out DIR]` writes the CRDs (default: the crate's committed `crds/`); `run` will
//! start the controllers.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code when a subcommand is not available yet.
const EXIT_NOT_IMPLEMENTED: u8 = 3;

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
        #[arg(long, default_value_os_t = grove_reference_operator::crd::committed_dir())]
        out: PathBuf,
    },
    /// Run the controllers.
    Run {
        /// Watch only this namespace.
        #[arg(long)]
        namespace: Option<String>,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Crdgen { out } => {
            for path in grove_reference_operator::crd::write_all(&out)? {
                println!("{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run { namespace: _ } => {
            eprintln!("grove-reference-operator: run is not implemented yet");
            Ok(ExitCode::from(EXIT_NOT_IMPLEMENTED))
        }
    }
}
