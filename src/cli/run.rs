//! `run`: the selected cases of the catalog against a target and an implementation, then the
//! summary and the reports.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::ValueEnum;
use grove_conformance::catalog::{self, Profile};
use grove_conformance::cluster::{self, TargetGuard, TargetOptions, TargetSpec};
use grove_conformance::implementation::admission::{
    self, AdmissionOptions, Prepared, WebhookConfiguration,
};
use grove_conformance::implementation::deployment::DeploymentRef;
use grove_conformance::implementation::{ImplementationSpec, Setup};
use grove_conformance::report::{self, Exit, ProgressLine};
use grove_conformance::runner::{self, RunSettings, Selection};
use grove_conformance::schedule::Shard;
use grove_conformance::vocab::{Revision, Vocabulary};

use super::e2e_log::E2eLog;
use super::error::{CliError, CliResult};
use super::provenance::{self, ImplementerArgs, RunFacts};
use super::reports::write_reports;
use super::{load, runtime, shard};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ImplementationKind {
    /// The reference operator shipped with this suite (one instance per case).
    Reference,
    /// Already running in the cluster; cases that pause or crash it are skipped.
    External,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProfileArg {
    Core,
    Extended,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Folder holding `cases/` and `fixtures/`.
    #[arg(long, default_value = ".")]
    pub(crate) catalog: PathBuf,
    /// Run against the cluster of this kubeconfig instead of the embedded one.
    #[arg(long, env = "GROVE_CONFORMANCE_KUBECONFIG")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Context of `--kubeconfig` to use (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    context: Option<String>,
    /// Create a kind cluster and run against it (needs Docker).
    #[arg(long, conflicts_with = "kubeconfig")]
    pub(crate) kind: bool,
    /// Keep the kind cluster afterwards.
    #[arg(long, requires = "kind")]
    keep_cluster: bool,
    /// The kind cluster configuration (default: the project's own, built into this binary,
    /// whatever `--catalog` is).
    #[arg(long, value_name = "FILE", requires = "kind")]
    kind_config: Option<PathBuf>,
    /// The implementation under test.
    #[arg(long, value_enum, default_value_t = ImplementationKind::Reference)]
    implementation: ImplementationKind,
    /// Run this command as the implementation (with KUBECONFIG set; `{namespace}`,
    /// `{kubeconfig}`, `{cert_dir}`, `{webhook_port}` and `{config}` are substituted; with
    /// `{namespace}` one instance runs per case).
    #[arg(long, conflicts_with = "implementation", allow_hyphen_values = true)]
    implementation_cmd: Option<String>,
    /// Run the implementation as a container from this local image (`name[:tag]`; Docker
    /// needed), on the host network with KUBECONFIG set and every placeholder's path mounted;
    /// `--implementation-cmd`, if given, is its arguments (split on whitespace). Pause is
    /// `docker pause`, a crash a kill and a start of the same container.
    #[arg(long, value_name = "IMAGE", conflicts_with = "implementation")]
    implementation_image: Option<String>,
    /// Certify the implementation deployed in the target cluster as this Deployment
    /// (`NAMESPACE/NAME`): for the run its pods are pointed at the harness's API proxy by a
    /// kubeconfig (forwarded with their own ServiceAccount token), pause freezes their
    /// traffic there, a crash deletes the pod without grace; the Deployment is restored at
    /// the end.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        conflicts_with_all = ["implementation", "implementation_cmd", "implementation_image"]
    )]
    implementation_deployment: Option<String>,
    /// The operator's container in `--implementation-deployment`, when its pods have several.
    #[arg(long, value_name = "NAME", requires = "implementation_deployment")]
    implementation_container: Option<String>,
    /// The address the API proxy listens on for a deployed implementation: one of this
    /// machine (or pod) that the cluster's pods reach (default: inside a pod, the pod's IP; on
    /// kind, or with a kubeconfig whose apiserver is on loopback as kind's is, this machine's
    /// address on kind's Docker network).
    #[arg(long, value_name = "IP", requires = "implementation_deployment")]
    proxy_address: Option<std::net::IpAddr>,
    /// How long the deployed implementation's pods, once Ready, may take to send their first
    /// request through the API proxy before the run fails, saying its clients ignore
    /// KUBECONFIG.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60,
        requires = "implementation_deployment"
    )]
    traffic_timeout: u64,
    /// Name and version of the implementation for the report (`name@version`).
    #[arg(long)]
    implementation_name: Option<String>,
    #[command(flatten)]
    pub(crate) implementer: ImplementerArgs,
    /// Spec revision the implementation follows.
    #[arg(long, default_value = "grep-0285-review")]
    pub(crate) revision: Revision,
    /// Only cases of this profile.
    #[arg(long, value_enum)]
    profile: Option<ProfileArg>,
    /// Only cases whose name contains it, whose area is it, or that cite it as a clause
    /// (repeatable).
    #[arg(long)]
    pub(crate) filter: Vec<String>,
    /// Only cases whose spec text matches this regular expression, as Ginkgo's `--focus`: the
    /// text is `[area] name [clause]... [Conformance]` (`[Extended]` for extended cases),
    /// e.g. `\[Conformance\]` selects the core profile.
    #[arg(long, value_name = "REGEX")]
    pub(crate) focus: Option<regex::Regex>,
    /// Leave out cases whose spec text matches this regular expression (as `--focus`).
    #[arg(long, value_name = "REGEX")]
    pub(crate) skip: Option<regex::Regex>,
    /// Also write a Ginkgo-style log here, the form conformance runners read progress from:
    /// `Will run N of M specs`, a line starting `•` per finished case, the summary.
    #[arg(long, value_name = "FILE")]
    e2e_log: Option<PathBuf>,
    /// Cases at once (default: 16 × cores, between 4 and 32; on real kubelets, `--kind` or
    /// `--kubeconfig`, 2 × cores, between 2 and 16).
    #[arg(short = 'j', long)]
    pub(crate) jobs: Option<usize>,
    /// Where the JUnit XML goes (default: <out>/junit.xml).
    #[arg(long)]
    pub(crate) junit: Option<PathBuf>,
    /// Folder for the JUnit XML, the conformance report and implementation logs.
    #[arg(long, default_value = "grove-conformance-results")]
    pub(crate) out: PathBuf,
    /// Start no further case once one fails or errors (the rest are reported as skipped).
    #[arg(long)]
    pub(crate) fail_fast: bool,
    /// Run each case N times, side by side as slots allow: it passes only when it passed N of
    /// N; a mix of passes and failures is `unstable k/N`, which fails the run.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: u32,
    /// Let the implementation reach the apiserver directly instead of through the harness's
    /// API proxy (cases with `request:` crash pins are then skipped; for measuring the proxy).
    #[arg(long)]
    pub(crate) no_api_proxy: bool,
    /// Keep each case's namespace afterwards.
    #[arg(long)]
    keep_namespaces: bool,
    /// The cases' durations in a previous run, read from its `conformance.yaml` (or a
    /// `durations.yaml`): cases start longest first, and `--shard` balances by them (default:
    /// the catalog's `durations.yaml`, when it has one).
    #[arg(long, value_name = "FILE")]
    durations: Option<PathBuf>,
    /// Run only shard I of N (1-based, as in 2/4) of the selected cases: every case is in
    /// exactly one shard, shards balanced by duration; `merge` joins their results.
    #[arg(long, value_name = "I/N")]
    pub(crate) shard: Option<Shard>,
    /// Print the plan instead of running it: the selected cases (of `--shard`, when given) in
    /// the order they would start, each with its planned duration, and every shard's load.
    #[arg(long)]
    list: bool,
    /// Do not install the Grove CRDs (the cluster has them already).
    #[arg(long)]
    pub(crate) no_install_crds: bool,
    /// Folder of the implementation's own CRDs (YAML), installed instead of the reference
    /// operator's; the run waits until they are established.
    #[arg(long, value_name = "DIR")]
    implementation_crds: Option<PathBuf>,
    /// File of the implementation's admission webhook configurations: each webhook is pointed
    /// at https://127.0.0.1:{webhook_port} (same path) and trusts a CA the harness generates;
    /// the serving certificate is in {cert_dir} (tls.crt, tls.key, ca.crt). The
    /// implementation is ready once that port accepts connections.
    #[arg(long, value_name = "FILE")]
    implementation_webhooks: Option<PathBuf>,
    /// A configuration file template for the implementation: {cert_dir} and {webhook_port}
    /// are replaced, and the rendered file's path is {config}.
    #[arg(long, value_name = "FILE")]
    implementation_config: Option<PathBuf>,
}

/// `run`: the selected cases of the catalog against a target and an implementation, then the
/// summary and the reports. `Ok` is the run's exit code; `Err` says why it stopped short.
pub(crate) fn run(args: &RunArgs) -> CliResult {
    let catalog = Arc::new(load(&args.catalog)?);
    let selected = select(&catalog, args)?;
    let durations = shard::load_durations(args.durations.as_deref(), &args.catalog)?;
    let digest = shard::catalog_digest(&catalog)?;
    let cases = match args.shard {
        Some(s) => shard::shard_cases(
            &selected,
            &catalog,
            &durations,
            s,
            args.target_options().real_kubelets(),
        ),
        None => selected.clone(),
    };
    if args.list {
        print!(
            "{}",
            shard::plan_listing(
                &selected,
                &cases,
                &catalog,
                &durations,
                args.shard,
                args.target_options().real_kubelets()
            )
        );
        return Ok(report::SUCCESS);
    }
    create_out_dir(&args.out)?;
    // The implementation's own files are read and checked before anything starts.
    let scratch = scratch_dir()?;
    let prepared = prepare_admission(args, scratch.path())?;
    let implementation = implementation(args, &prepared)?;
    let mut facts = RunFacts::new(args, &implementation, digest);
    if cases.is_empty() {
        // Only a shard can be empty (an empty selection exited 104 above); its results
        // still go out, so that `merge` finds every shard.
        let shard = args.shard.expect("only a shard selects nothing here");
        println!(
            "shard {shard}: none of the {} selected case(s) falls in this shard; nothing to run",
            selected.len()
        );
        let results = report::RunResults::default();
        write_reports(args, &results, &selected, &facts, None);
        return Ok(report::SUCCESS);
    }
    let settings = RunSettings {
        durations,
        ..run_settings(args, implementation.clone())
    };
    let spec = target_spec(args)?;
    let (results, kubernetes) = runtime().block_on(async {
        let mut target = acquire_target(&spec, !args.no_install_crds, &prepared).await?;
        let client = target.handles().client.clone();
        let kubernetes = provenance::observe(&client, &implementation, &mut facts.run).await;
        let e2e_log = args.e2e_log.clone().map(|p| (p, catalog.cases.len()));
        let results = execute(
            &mut target,
            &prepared.webhooks,
            catalog,
            cases,
            &settings,
            e2e_log,
        )
        .await?;
        Ok::<_, CliError>((results, kubernetes))
    })?;
    write_reports(args, &results, &selected, &facts, kubernetes);
    // The target is down: every child's CPU is in the ledger.
    let cpu = args.out.join("cpu.json");
    if let Err(e) = grove_conformance::host::cpu::write_report(&cpu) {
        eprintln!("warning: failed to write {}: {e}", cpu.display());
    }
    Ok(report::exit_code(&results))
}

impl RunArgs {
    /// Cases at once: `--jobs`, or the default for the target.
    pub(crate) fn jobs_or_default(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| runner::default_jobs(self.target_options().real_kubelets()))
    }

    /// The profile `--profile` selects.
    pub(crate) fn profile_selected(&self) -> Option<Profile> {
        self.profile.map(|p| match p {
            ProfileArg::Core => Profile::Core,
            ProfileArg::Extended => Profile::Extended,
        })
    }

    /// The target options among the arguments.
    fn target_options(&self) -> TargetOptions {
        TargetOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            kind: self.kind,
            keep_cluster: self.keep_cluster,
            kind_config: self.kind_config.clone(),
        }
    }
}

/// Creates the folder for the results.
pub(crate) fn create_out_dir(out: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(out).map_err(|e| {
        CliError::context(
            Exit::SetupFailed,
            format!("failed to create {}", out.display()),
            e,
        )
    })
}

/// A temporary directory for the files generated for the implementation, removed on drop.
pub(crate) fn scratch_dir() -> Result<tempfile::TempDir, CliError> {
    tempfile::Builder::new()
        .prefix("grove-conformance-run-")
        .tempdir()
        .map_err(|e| {
            CliError::context(
                Exit::SetupFailed,
                "failed to create a temporary directory",
                e,
            )
        })
}

/// The implementation's CRDs, webhooks and configuration template that `args` names, read
/// and checked, with their certificates and rendered configuration written to `scratch`.
pub(crate) fn prepare_admission(args: &RunArgs, scratch: &Path) -> Result<Prepared, CliError> {
    let admission = AdmissionOptions {
        crds: args.implementation_crds.clone(),
        webhooks: args.implementation_webhooks.clone(),
        config_template: args.implementation_config.clone(),
    };
    admission::prepare(&admission, scratch).map_err(|e| CliError::from_error(Exit::Usage, e))
}

/// How the cases run: on `implementation`, with the options of `args`.
pub(crate) fn run_settings(args: &RunArgs, implementation: ImplementationSpec) -> RunSettings {
    RunSettings {
        implementation,
        vocab: Vocabulary::new(args.revision),
        jobs: args.jobs_or_default(),
        keep_namespaces: args.keep_namespaces,
        restraint_fails_every_case: false,
        log_dir: args.out.join("logs"),
        fail_fast: args.fail_fast,
        api_proxy: !args.no_api_proxy,
        durations: Default::default(),
        repeat: args.repeat,
    }
}

/// The target `args` names: a kubeconfig's cluster, a kind cluster, or the embedded one.
pub(crate) fn target_spec(args: &RunArgs) -> Result<TargetSpec, CliError> {
    let harness = super::current_exe()?;
    args.target_options()
        .spec(&harness)
        .map_err(|e| CliError::from_error(Exit::Usage, e))
}

/// The target of `spec`, with the implementation's CRDs (the reference operator's when it
/// brings none; installed unless `install_crds` is false) and its webhooks installed.
pub(crate) async fn acquire_target(
    spec: &TargetSpec,
    install_crds: bool,
    prepared: &Prepared,
) -> Result<TargetGuard, CliError> {
    let crds = prepared
        .crds
        .clone()
        .unwrap_or_else(grove_reference_operator::crds);
    let mut target = cluster::acquire(spec, crds, install_crds)
        .await
        .map_err(|e| CliError::from_error(Exit::SetupFailed, e))?;
    let client = target.handles().client.clone();
    if let Err(e) = admission::install_webhooks(&client, &prepared.webhooks).await {
        target.mark_failed();
        return Err(CliError::from_error(Exit::SetupFailed, e));
    }
    Ok(target)
}

/// Runs `cases` on `target` with a progress line until they finish or SIGINT or SIGTERM
/// arrives, then removes the implementation's `webhooks`. The target keeps its logs when the
/// run does not pass.
async fn execute(
    target: &mut TargetGuard,
    webhooks: &[WebhookConfiguration],
    catalog: Arc<catalog::Catalog>,
    cases: Vec<catalog::Case>,
    settings: &RunSettings,
    e2e_log: Option<(PathBuf, usize)>,
) -> Result<report::RunResults, CliError> {
    let client = target.handles().client.clone();
    let mut progress = progress_on_stderr();
    let mut e2e = e2e_log.map(|(path, total)| E2eLog::new(path, total));
    let sink = move |event: &report::RunEvent| {
        progress(event);
        if let Some(log) = &mut e2e {
            log.on_event(event);
        }
    };
    let handles = target.handles().clone();
    let run = runner::run_cases(&handles, catalog, cases, settings, sink);
    let results = tokio::select! {
        results = run => results,
        signal = interrupted() => {
            // Returning drops the target: a kind cluster is deleted (unless kept), the
            // embedded cluster and every implementation instance stopped.
            eprintln!("\ninterrupted by {signal}: stopping the run and tearing the target down");
            admission::remove_webhooks(&client, webhooks).await;
            // A cluster that outlives the run keeps nothing of it.
            let left = runner::case::delete_run_namespaces(&client).await;
            if !left.is_empty() {
                eprintln!("deleted the namespaces of {} case(s) left running", left.len());
            }
            return Err(CliError::said(Exit::Interrupted));
        }
    };
    admission::remove_webhooks(&client, webhooks).await;
    let results = results.map_err(|e| {
        target.mark_failed();
        CliError::context(Exit::SetupFailed, "failed to run the cases", e)
    })?;
    if report::exit_code(&results) != report::SUCCESS {
        target.mark_failed();
    }
    Ok(results)
}

/// A sink of run events that shows the progress on stderr (one line kept up to date on a
/// terminal).
pub(crate) fn progress_on_stderr() -> impl FnMut(&report::RunEvent) + Send + 'static {
    let interactive = std::io::stderr().is_terminal();
    let mut progress = ProgressLine::new(std::io::stderr(), interactive);
    move |event| {
        let _ = progress.on_event(event);
    }
}

/// Resolves on SIGINT or SIGTERM, naming it.
pub(crate) async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// What `--focus` and `--skip` match a case against: `[area] name [clause]... [Conformance]`,
/// the last `[Extended]` for an extended case.
pub(crate) fn spec_text(case: &catalog::Case) -> String {
    let clauses: String = case.clauses.iter().map(|c| format!(" [{c}]")).collect();
    let profile = match case.profile {
        Profile::Core => "[Conformance]",
        Profile::Extended => "[Extended]",
    };
    format!("[{}] {}{clauses} {profile}", case.area, case.name)
}

/// The cases `args` selects; exit code 104 when none.
pub(crate) fn select(
    catalog: &catalog::Catalog,
    args: &RunArgs,
) -> Result<Vec<catalog::Case>, CliError> {
    let selection = Selection {
        filters: args.filter.clone(),
        profile: args.profile_selected(),
    };
    let cases = select_cases(catalog, &selection, args.focus.as_ref(), args.skip.as_ref());
    if cases.is_empty() {
        return Err(CliError::new(Exit::NoCases, "the filter selected no case"));
    }
    Ok(cases)
}

/// The cases of `catalog` that `selection` selects, whose spec text `focus` matches (when
/// given) and `skip` does not.
pub(crate) fn select_cases(
    catalog: &catalog::Catalog,
    selection: &Selection,
    focus: Option<&regex::Regex>,
    skip: Option<&regex::Regex>,
) -> Vec<catalog::Case> {
    catalog
        .cases
        .iter()
        .filter(|c| selection.selects(c))
        .filter(|c| {
            let text = spec_text(c);
            focus.is_none_or(|f| f.is_match(&text)) && skip.is_none_or(|s| !s.is_match(&text))
        })
        .cloned()
        .collect()
}

/// The implementation `args` names, with what `prepared` gives it.
pub(crate) fn implementation(
    args: &RunArgs,
    prepared: &Prepared,
) -> Result<ImplementationSpec, CliError> {
    let setup = || setup_of(prepared);
    if let Some(text) = &args.implementation_deployment {
        if prepared.serving.is_some() {
            return Err(CliError::usage(
                "--implementation-webhooks and --implementation-config are for an implementation the harness starts; a deployed one brings its own",
            ));
        }
        if args.no_api_proxy {
            return Err(CliError::usage(
                "--implementation-deployment always goes through the API proxy: drop --no-api-proxy",
            ));
        }
        let mut deployment = DeploymentRef::parse(text, args.implementation_container.clone())
            .map_err(|e| CliError::context(Exit::Usage, "--implementation-deployment", e))?;
        deployment.traffic_timeout = std::time::Duration::from_secs(args.traffic_timeout);
        let proxy_address = match args.proxy_address {
            Some(ip) => ip,
            None => default_proxy_address(args)?,
        };
        return Ok(ImplementationSpec::Deployment {
            deployment,
            proxy_address,
        });
    }
    match (
        &args.implementation_image,
        &args.implementation_cmd,
        args.implementation,
    ) {
        (Some(image), template, _) => Ok(ImplementationSpec::Image {
            image: image.clone(),
            args: template.clone(),
            setup: setup(),
        }),
        (None, Some(template), _) => Ok(ImplementationSpec::Command {
            template: template.clone(),
            setup: setup(),
        }),
        (None, None, _) if prepared.serving.is_some() => Err(CliError::usage(
            "--implementation-webhooks and --implementation-config need --implementation-cmd or --implementation-image",
        )),
        (None, None, ImplementationKind::External) => Ok(ImplementationSpec::External),
        (None, None, ImplementationKind::Reference) => {
            ImplementationSpec::reference_from_current_exe().map_err(|e| {
                CliError::context(Exit::SetupFailed, "failed to locate this executable", e)
            })
        }
    }
}

/// What the harness does for an implementation it starts with `prepared`'s files: the
/// placeholders of its command, the webhook port it is ready at, what its webhooks refuse
/// while it does not answer.
pub(crate) fn setup_of(prepared: &Prepared) -> Setup {
    Setup {
        placeholders: prepared.placeholders.clone(),
        ready_port: prepared
            .serving
            .as_ref()
            .filter(|_| !prepared.webhooks.is_empty())
            .map(|s| s.port),
        fail_closed: prepared.fail_closed_resources(),
    }
}

/// Where the proxy for a deployed implementation listens when `--proxy-address` is not given:
/// inside a pod, the pod's IP; on kind, this machine's address on kind's network.
fn default_proxy_address(args: &RunArgs) -> Result<std::net::IpAddr, CliError> {
    if let Some(ip) = grove_conformance::host::in_cluster::pod_ip() {
        return Ok(ip);
    }
    if args.target_options().kind || kubeconfig_on_loopback(args) {
        return cluster::kind::network_gateway().map_err(|e| {
            CliError::context(
                Exit::SetupFailed,
                "the API proxy's address on kind's network",
                e,
            )
        });
    }
    Err(CliError::usage(
        "--implementation-deployment needs --proxy-address here: an address of this machine that the cluster's pods reach (the API proxy listens there; on kind, or a kubeconfig whose apiserver is on loopback, it is kind's network gateway)",
    ))
}

/// Whether `--kubeconfig` names an apiserver on this machine's loopback (as kind's port
/// mapping does), so that kind's network is where its pods reach this machine.
fn kubeconfig_on_loopback(args: &RunArgs) -> bool {
    let Some(path) = &args.kubeconfig else {
        return false;
    };
    let Ok(config) = kube::config::Kubeconfig::read_from(path) else {
        return false;
    };
    let context = args
        .context
        .clone()
        .or_else(|| config.current_context.clone());
    let cluster = config
        .contexts
        .iter()
        .find(|c| Some(&c.name) == context.as_ref())
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    config
        .clusters
        .iter()
        .find(|c| Some(&c.name) == cluster.as_ref())
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.as_deref())
        .and_then(|s| s.parse::<http::Uri>().ok())
        .and_then(|u| u.host().map(str::to_string))
        .is_some_and(|h| {
            h == "localhost"
                || h.trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        })
}

/// Name and version of the implementation for the report.
pub(crate) fn implementation_name(
    args: &RunArgs,
    implementation: &ImplementationSpec,
) -> (String, String) {
    let (name, version) = named(args, implementation);
    match args.implementer.version() {
        Some(v) => (name, v.to_owned()),
        None => (name, version),
    }
}

fn named(args: &RunArgs, implementation: &ImplementationSpec) -> (String, String) {
    match &args.implementation_name {
        Some(n) => match n.split_once('@') {
            Some((name, version)) => (name.to_string(), version.to_string()),
            None => (n.clone(), "unknown".to_string()),
        },
        None => match implementation {
            ImplementationSpec::Reference { .. } => (
                "grove-reference-operator".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            ),
            _ => (implementation.display_name(), "unknown".to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_texts_carry_area_name_clauses_and_profile() {
        let catalog = catalog::load_catalog(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let case = catalog
            .cases
            .iter()
            .find(|c| c.name == "all-pods-succeed-completes-clique")
            .unwrap();
        let text = spec_text(case);
        assert!(text.starts_with(&format!(
            "[{}] all-pods-succeed-completes-clique [",
            case.area
        )));
        assert!(text.ends_with(" [Conformance]"), "{text}");
        let focus = regex::Regex::new(r"\[Conformance\]").unwrap();
        let core = catalog
            .cases
            .iter()
            .filter(|c| focus.is_match(&spec_text(c)))
            .count();
        let expected = catalog
            .cases
            .iter()
            .filter(|c| c.profile == Profile::Core)
            .count();
        assert_eq!(core, expected);
    }
}
