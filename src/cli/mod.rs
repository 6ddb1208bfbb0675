//! The `grove-conformance` command line: flags become a plan here, one file per subcommand or
//! pair of them.
//!
//! - `run`: the catalog against a target and an implementation ([`run`]);
//! - `setup`, `up`: the control-plane binaries and kind assets, a standing cluster ([`setup`]);
//! - `lint`, `coverage`: the catalog checked and its clause coverage ([`lint`]);
//! - `bench`, `sweep`: many runs at once ([`campaign`]);
//! - `durations`, `merge`: the durations runs are planned with, shards joined ([`shard`]);
//! - `explore`: generated scenarios judged by the spec model, shrunk when they fail ([`explore`]);
//! - `image`, `in-cluster`: the harness and the reference operator as images, and the harness
//!   run in a pod by a conformance runner ([`in_cluster`]);
//! - `reference-operator`: the reference operator itself ([`operator`]);
//! - [`reports`]: the one writer of a run's reports.
//! - [`error`]: the one error a subcommand stops with, printed once here, its exit code from
//!   the exit table.
//!
//! Only this folder and the reporters print; the library logs through `tracing`. Exit codes are
//! those of [`grove_conformance::report`].
//!
//! May use: every folder of the library (this is the binary; nothing uses it).

mod campaign;
mod e2e_log;
mod error;
mod explore;
mod in_cluster;
mod lint;
mod operator;
mod provenance;
mod reports;
mod run;
mod setup;
mod shard;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use grove_conformance::catalog;
use grove_conformance::host::logging;
use grove_conformance::report::{self, Exit};

use error::{CliError, CliResult};

pub(crate) use run::RunArgs;

/// End-to-end conformance suite for Grove job support (GREP-0285).
#[derive(Debug, Parser)]
#[command(name = "grove-conformance", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Find or build etcd, kube-apiserver and kube-controller-manager, and print where they
    /// are; with `--kind`, also everything `run --kind` needs (Docker needed).
    Setup {
        /// Fail instead of building when the binaries are not found.
        #[arg(long)]
        no_build: bool,
        /// Also the kind assets: kind, the node binaries, component images, the busybox
        /// fixture image and the node image, all built locally.
        #[arg(long)]
        kind: bool,
    },
    /// Start the embedded cluster and keep it running in the foreground (Ctrl-C stops it).
    Up {
        /// Number of simulated nodes.
        #[arg(long, default_value_t = 8)]
        nodes: usize,
    },
    /// Run the catalog against a target and an implementation; print the summary, write
    /// JUnit and the conformance report.
    Run(Box<RunArgs>),
    /// Run the catalog several times, each run a fresh `run` process, and print each run's
    /// wall time and outcomes, min/median/max, the slowest cases and every case whose outcome
    /// was not the same in every run. Exits 0 only when every run passed.
    Bench {
        /// How many runs.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Folder for each run's outputs (`run-<i>/`) and the summary (`bench.md`).
        #[arg(long, default_value = "grove-conformance-bench")]
        out: PathBuf,
        /// Arguments of each `run` (after `--`), e.g. `-- --filter crash -j 4`.
        #[arg(last = true, allow_hyphen_values = true)]
        run_args: Vec<std::ffi::OsString>,
    },
    /// Run generated scenarios (shapes and pod actions drawn from one seed) as cases, each
    /// step judged against the spec model; shrink each failing one and write it as a case
    /// file and fixture under `--out`. Takes every option of `run`; exit codes as `run`.
    Explore(Box<explore::ExploreArgs>),
    /// Explore fault points on the embedded cluster with the reference operator (or the
    /// implementation `--implementation-cmd` names): each
    /// selected case runs once fault-free with the operator's writes recorded, then once per
    /// write with the pattern's fault placed at it, each run judged by the case's
    /// expectations and the invariant monitor. Exits 0 when every reached point passed.
    Sweep {
        /// Cases whose name contains it, or whose area is it (repeatable; at least one).
        #[arg(long, required = true)]
        filter: Vec<String>,
        /// The fault at each write: `intermediate`, a crash just before it (O3); `stale`,
        /// the written object's watch events held and its kind read as of the write's answer
        /// for 3 s, then delivered; `unobserved`, the same hold with current reads, then only
        /// each object's last state delivered.
        #[arg(long, default_value = "intermediate")]
        pattern: grove_conformance::campaign::sweep::Pattern,
        /// With `intermediate`: also crash just after each write (carried out, answer not
        /// delivered).
        #[arg(long)]
        after: bool,
        /// How many points run at once (each in its own namespace, with its own operator
        /// and API proxy).
        #[arg(short = 'j', long, default_value_t = 8)]
        jobs: usize,
        /// Folder for implementation logs and the summary (`sweep.md`).
        #[arg(long, default_value = "grove-conformance-sweep")]
        out: PathBuf,
        /// Folder holding `cases/` and `fixtures/`.
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
        /// Sweep only shard I of N (1-based) of the selected cases, balanced by duration.
        #[arg(long, value_name = "I/N")]
        shard: Option<grove_conformance::schedule::Shard>,
        /// The durations `--shard` balances by (default: the catalog's `durations.yaml`).
        #[arg(long, value_name = "FILE")]
        durations: Option<PathBuf>,
        #[command(flatten)]
        implementation: campaign::SweepImplementation,
    },
    /// Print (or write) each case's median wall time over the runs whose `conformance.yaml`
    /// files (or folders holding them, as `bench` leaves them) are given: the durations `run`
    /// plans its order and `--shard` balances shards with.
    Durations {
        /// Folder holding `cases/` and `fixtures/`: only its cases are kept.
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
        /// Write them to this file (the catalog's `durations.yaml`) instead of printing them.
        #[arg(long)]
        write: Option<PathBuf>,
        /// `conformance.yaml` files, or folders searched for them.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Merge the results of the shards of one run (each a `run --shard I/N` results folder,
    /// or its `results.json`) into the JUnit, `conformance.{yaml,md,html}` and
    /// `results.json` one run would have written. Refuses shards of different catalogs,
    /// revisions, implementations or selections, and names missing or repeated shards and
    /// cases (exit 2); otherwise exits as `run` would have.
    Merge {
        /// Folder for the merged results.
        #[arg(long, default_value = "grove-conformance-results")]
        out: PathBuf,
        /// Where the merged JUnit XML goes (default: <out>/junit.xml).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// The shards' results folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Check a report against this checkout of the suite: a `conformance.yaml`, a
    /// `results.json`, or a results folder holding them. It must read as one (schema), carry
    /// its own content's digest (not edited by hand), name this catalog's digest, hold exactly
    /// the cases its recorded selection selects here with their clauses, and every count and
    /// verdict must be what its per-case results give. Exits 0 when it holds, 105 naming
    /// every difference.
    VerifyReport {
        /// The report, or a results folder.
        path: PathBuf,
        /// Folder holding `cases/` and `fixtures/`.
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
    },
    /// Check the whole catalog; fails when a case is invalid or a core clause is cited by no case.
    Lint {
        /// Folder holding `cases/` and `fixtures/`.
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
    },
    /// Print (or write, or check) the clause → cases coverage table.
    Coverage {
        /// Folder holding `cases/` and `fixtures/`.
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
        /// Write it to this file instead of printing it.
        #[arg(long)]
        write: Option<PathBuf>,
        /// Fail when this file differs from the table.
        #[arg(long, conflicts_with = "write")]
        check: Option<PathBuf>,
    },
    /// Build a local image of this executable (offline: `docker import`, no base image):
    /// `conformance`, the harness run in a pod (a Hydrophone conformance image, entrypoint
    /// `in-cluster`), or `reference-operator`, the reference operator as
    /// `reference-operator/deploy/` runs it. Prints the tag.
    Image {
        /// What the image is for.
        #[arg(long, value_enum)]
        role: ImageRole,
        /// Its tag (default: `grove-conformance:<version>`, or `grove-reference-operator:dev`
        /// as `reference-operator/deploy/` names it).
        #[arg(long)]
        tag: Option<String>,
        /// Also load it into the nodes of this kind cluster.
        #[arg(long, value_name = "CLUSTER")]
        load_into_kind: Option<String>,
        /// The catalog a conformance image carries (its `cases/`, `fixtures/`,
        /// `durations.yaml`).
        #[arg(long, default_value = ".")]
        catalog: PathBuf,
    },
    /// Run the suite inside a pod as a conformance runner (Hydrophone) starts its image:
    /// `E2E_FOCUS`/`E2E_SKIP` select cases (regular expressions over
    /// `[area] name [clauses] [Conformance]`), `E2E_EXTRA_ARGS` are more `run` options,
    /// results go to `RESULTS_DIR` (default `/tmp/results`): `e2e.log`, `junit_01.xml`, and
    /// every report. Exits as `run`.
    InCluster,
    /// Run the reference operator (used as the default implementation under test).
    #[command(hide = true)]
    ReferenceOperator {
        /// Kubeconfig to use (default: in-cluster or the default kubeconfig).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Watch only this namespace.
        #[arg(long)]
        namespace: Option<String>,
    },
}

/// What an image built by `image` is for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ImageRole {
    /// The harness, for a conformance runner.
    Conformance,
    /// The reference operator.
    ReferenceOperator,
}

/// The binary's entry point.
pub fn main() -> ExitCode {
    // Registered as dockerd's runtime on hosts that need it (see `cluster::kind::runc_shim`).
    if std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n == grove_conformance::cluster::kind::runc_shim::SHIM_NAME)
        })
        .unwrap_or(false)
    {
        grove_conformance::cluster::kind::runc_shim::shim_main();
    }
    let cli = Cli::parse();
    // The reference operator logs each decision at info level, so that the log a failed case
    // keeps explains it.
    let default_filter = match cli.command {
        Command::ReferenceOperator { .. } => logging::OPERATOR_FILTER,
        _ => logging::DEFAULT_FILTER,
    };
    logging::init(default_filter);
    let result = match cli.command {
        Command::Setup { no_build, kind } => setup::setup(no_build, kind),
        Command::Up { nodes } => setup::up(nodes),
        Command::Run(args) => run::run(&args),
        Command::Explore(args) => explore::explore(&args),
        Command::Bench {
            runs,
            out,
            run_args,
        } => campaign::bench(runs, &out, &run_args),
        Command::Sweep {
            filter,
            pattern,
            after,
            jobs,
            out,
            catalog,
            shard,
            durations,
            implementation,
        } => campaign::sweep(
            &catalog,
            &filter,
            (pattern, after, jobs),
            &out,
            shard,
            durations.as_deref(),
            &implementation,
        ),
        Command::Durations {
            catalog,
            write,
            inputs,
        } => shard::durations(&catalog, &inputs, write.as_deref()),
        Command::Merge { out, junit, dirs } => shard::merge(&dirs, &out, junit),
        Command::VerifyReport { path, catalog } => verify::verify_report(&path, &catalog),
        Command::Lint { catalog } => lint::lint(&catalog),
        Command::Coverage {
            catalog,
            write,
            check,
        } => lint::coverage(&catalog, write.as_deref(), check.as_deref()),
        Command::Image {
            role,
            tag,
            load_into_kind,
            catalog,
        } => image(role, tag, load_into_kind.as_deref(), &catalog),
        Command::InCluster => in_cluster::in_cluster(),
        Command::ReferenceOperator {
            kubeconfig,
            namespace,
        } => operator::reference_operator(kubeconfig, namespace),
    };
    ExitCode::from(u8::try_from(error::finish(result)).unwrap_or(1))
}

/// `image`: builds the image, loads it into kind when asked, prints its tag.
fn image(role: ImageRole, tag: Option<String>, kind: Option<&str>, catalog: &Path) -> CliResult {
    use grove_conformance::host::image::{self, Role};
    let (role, default) = match role {
        ImageRole::Conformance => (
            Role::Conformance,
            format!("grove-conformance:{}", env!("CARGO_PKG_VERSION")),
        ),
        ImageRole::ReferenceOperator => (
            Role::ReferenceOperator,
            "grove-reference-operator:dev".to_string(),
        ),
    };
    let tag = tag.unwrap_or(default);
    grove_conformance::host::docker::available()
        .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    let binary = current_exe()?;
    image::build(&binary, &tag, role, catalog)
        .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    if let Some(cluster) = kind {
        grove_conformance::cluster::kind::load_image(cluster, &tag)
            .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    }
    println!("{tag}");
    Ok(report::SUCCESS)
}

/// This executable's path.
pub(crate) fn current_exe() -> Result<PathBuf, CliError> {
    std::env::current_exe()
        .map_err(|e| CliError::context(Exit::SetupFailed, "failed to locate this executable", e))
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    grove_conformance::host::runtime("grove-conformance", None).expect("failed to build a runtime")
}

pub(crate) fn load(catalog: &Path) -> Result<catalog::Catalog, CliError> {
    catalog::load_catalog(catalog)
        .map_err(|diagnostics| CliError::diagnostics(catalog::render_diagnostics(&diagnostics)))
}
