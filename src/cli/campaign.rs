//! `bench` and `sweep`: repeated whole runs, and the fault sweeps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grove_conformance::catalog::{self, Applicability};
use grove_conformance::cluster::TargetSpec;
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::implementation::admission::{self, AdmissionOptions};
use grove_conformance::report::{self, Exit};
use grove_conformance::runner::RunSettings;
use grove_conformance::schedule::Shard;
use grove_conformance::vocab::{Revision, Vocabulary};

use super::error::{CliError, CliResult};
use super::{load, runtime};

/// The implementation a sweep explores, when it is not the reference operator: the options
/// of `run` that start one, and the revision it follows.
#[derive(Debug, clap::Args)]
pub(crate) struct SweepImplementation {
    /// Sweep this command instead of the reference operator (as `run
    /// --implementation-cmd`, with KUBECONFIG set and the same placeholders). With
    /// `{namespace}` one instance runs per point; without, one instance serves every point
    /// and the points run one at a time.
    #[arg(long, allow_hyphen_values = true)]
    implementation_cmd: Option<String>,
    /// Folder of its CRDs, installed instead of the reference operator's (as `run`).
    #[arg(long, value_name = "DIR", requires = "implementation_cmd")]
    implementation_crds: Option<PathBuf>,
    /// File of its admission webhook configurations (as `run`).
    #[arg(long, value_name = "FILE", requires = "implementation_cmd")]
    implementation_webhooks: Option<PathBuf>,
    /// A configuration file template for it (as `run`).
    #[arg(long, value_name = "FILE", requires = "implementation_cmd")]
    implementation_config: Option<PathBuf>,
    /// Spec revision the implementation follows: a case that does not apply to it is not
    /// swept.
    #[arg(long, default_value = "grep-0285-review")]
    revision: Revision,
}

pub(crate) fn sweep(
    root: &Path,
    filter: &[String],
    (pattern, after, jobs): (grove_conformance::campaign::sweep::Pattern, bool, usize),
    out: &Path,
    shard: Option<Shard>,
    durations: Option<&Path>,
    implementation: &SweepImplementation,
) -> CliResult {
    use grove_conformance::campaign::sweep;
    use grove_conformance::runner::case::RunContext;
    let catalog = Arc::new(load(root)?);
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
        return Err(CliError::new(Exit::NoCases, "the filter selected no case"));
    }
    let cases = match shard {
        None => cases,
        Some(s) => {
            let durations = super::shard::load_durations(durations, root)?;
            // The sweep runs on the embedded cluster.
            let mine = super::shard::shard_cases(&cases, &catalog, &durations, s, false);
            if mine.is_empty() {
                println!(
                    "shard {s}: none of the {} selected case(s) falls in this shard; nothing to sweep",
                    cases.len()
                );
                return Ok(report::SUCCESS);
            }
            mine
        }
    };
    let logs = out.join("logs");
    super::run::create_out_dir(&logs)?;
    // What cannot be swept is said before anything starts, and a sweep of nothing is no pass.
    let revision = implementation.revision;
    let cases: Vec<catalog::Case> = cases
        .into_iter()
        .filter(|case| {
            let why = match catalog.applicability(case, revision) {
                Applicability::NotApplicable(why) => {
                    Some(format!("not applicable in this revision: {why}"))
                }
                _ => sweep::unsweepable(case, pattern),
            };
            if let Some(why) = &why {
                eprintln!("{}: not swept: {why}", case.name);
            }
            why.is_none()
        })
        .collect();
    if cases.is_empty() {
        return Err(CliError::new(
            Exit::NoCases,
            "none of the selected cases can be swept with this pattern and revision",
        ));
    }
    // The implementation's own files are read and checked before anything starts.
    let scratch = super::run::scratch_dir()?;
    let admission = AdmissionOptions {
        crds: implementation.implementation_crds.clone(),
        webhooks: implementation.implementation_webhooks.clone(),
        config_template: implementation.implementation_config.clone(),
    };
    let prepared = admission::prepare(&admission, scratch.path())
        .map_err(|e| CliError::from_error(Exit::Usage, e))?;
    let spec = match &implementation.implementation_cmd {
        Some(template) => ImplementationSpec::Command {
            template: template.clone(),
            setup: super::run::setup_of(&prepared),
        },
        None => ImplementationSpec::reference_from_current_exe().map_err(|e| {
            CliError::context(Exit::SetupFailed, "failed to locate this executable", e)
        })?,
    };
    // One instance for every point: a fault or crash of one point must not meet another's.
    let jobs = if spec.per_case() {
        jobs
    } else {
        if jobs > 1 {
            eprintln!(
                "the implementation serves every namespace from one instance: points run one at a time"
            );
        }
        1
    };
    let settings = RunSettings {
        implementation: spec,
        vocab: Vocabulary::new(revision),
        jobs,
        keep_namespaces: false,
        restraint_fails_every_case: false,
        log_dir: logs.clone(),
        fail_fast: false,
        api_proxy: true,
        durations: Default::default(),
        repeat: 1,
    };
    runtime().block_on(async {
        let target = super::run::acquire_target(&TargetSpec::Embedded, true, &prepared).await?;
        let handles = target.handles().clone();
        let (shared_proxy, shared_instance) =
            grove_conformance::runner::start_shared(&handles, &settings)
                .await
                .map_err(|e| {
                    CliError::context(Exit::SetupFailed, "failed to start the implementation", e)
                })?;
        let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
        let context = RunContext {
            shared_proxy,
            shared_instance,
            vocab: settings.vocab,
            ..RunContext::new(
                &handles,
                settings.implementation.clone(),
                catalog.clone(),
                logs.clone(),
                events,
            )
        };
        let mut sweeps = Vec::new();
        for case in &cases {
            eprintln!("{}: fault-free run, recording the writes", case.name);
            let done = sweep::sweep(&context, case, pattern, after, jobs, |p| {
                eprintln!(
                    "{}: write {:>2} {:<50} {}{}",
                    case.name,
                    p.write,
                    p.what(),
                    p.verdict_words(),
                    p.landed
                        .first()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                );
            })
            .await;
            if done.baseline != report::Outcome::Pass {
                eprintln!(
                    "{}: the fault-free run did not pass ({})",
                    case.name,
                    sweep::why_not(&done.baseline)
                );
            }
            eprintln!(
                "{}: {} writes, {} points explored in {:.1?}",
                case.name,
                done.writes.len(),
                done.points.len(),
                done.duration
            );
            sweeps.push(done);
        }
        if let Some(instance) = &context.shared_instance {
            instance.lock().await.stop().await;
        }
        let summary = sweep::summary(&sweeps);
        println!("{summary}");
        let path = out.join("sweep.md");
        if let Err(e) = std::fs::write(&path, &summary) {
            eprintln!("warning: failed to write {}: {e}", path.display());
        }
        let failed = sweeps.iter().any(|s| {
            s.baseline != report::Outcome::Pass
                || s.points.iter().any(|p| !p.verdict().is_success())
        });
        Ok(if failed {
            report::CASES_FAILED
        } else {
            report::SUCCESS
        })
    })
}

pub(crate) fn bench(runs: usize, out: &Path, run_args: &[std::ffi::OsString]) -> CliResult {
    use grove_conformance::campaign::{bench, cost};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let exe = super::current_exe()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, dir, args) = (stop.clone(), out.to_path_buf(), run_args.to_vec());
    let beside_reference = cost::other_implementation(run_args);
    let runs_done = super::runtime().block_on(async move {
        let work = tokio::task::spawn_blocking(move || {
            let done = bench::run_repeatedly(&exe, runs, &args, &dir, &flag, |run| {
                eprintln!("{}", bench::run_line(run))
            })?;
            // The same selection once with the reference operator, for the cost table.
            let reference = if beside_reference {
                let reference_args = cost::reference_args(&args);
                bench::run_repeatedly(
                    &exe,
                    1,
                    &reference_args,
                    &dir.join("reference"),
                    &flag,
                    |run| eprintln!("reference operator: {}", bench::run_line(run)),
                )?
            } else {
                Vec::new()
            };
            Ok::<_, bench::BenchError>((done, reference))
        });
        tokio::pin!(work);
        tokio::select! {
            done = &mut work => done,
            signal = super::run::interrupted() => {
                eprintln!("\ninterrupted by {signal}: stopping the run in progress");
                stop.store(true, Ordering::SeqCst);
                work.await
            }
        }
    });
    let (done, reference) = match runs_done {
        Ok(Ok(done)) => done,
        Ok(Err(bench::BenchError::Interrupted { run })) => {
            eprintln!("bench: run {run} stopped; no summary written");
            return Err(CliError::said(Exit::Interrupted));
        }
        Ok(Err(e)) => return Err(CliError::from_error(Exit::SetupFailed, e)),
        Err(e) => return Err(CliError::context(Exit::SetupFailed, "the bench stopped", e)),
    };
    let mut summary = bench::summary(&done);
    if let Some(reference) = reference.first() {
        let counts: Vec<_> = done.iter().map(|r| cost::read_counts(&r.out)).collect();
        summary.push_str(&cost::beside(
            &cost::medians(&counts),
            &cost::read_counts(&reference.out),
        ));
    }
    println!("{summary}");
    let path = out.join("bench.md");
    if let Err(e) = std::fs::write(&path, &summary) {
        eprintln!("warning: failed to write {}: {e}", path.display());
    }
    Ok(
        match done.iter().find(|r| r.exit_code != Some(report::SUCCESS)) {
            None => report::SUCCESS,
            Some(r) => r.exit_code.unwrap_or(report::CASES_ERRORED),
        },
    )
}
