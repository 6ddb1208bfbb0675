//! `explore`: generated scenarios (shapes and pod actions from one seed) run as cases through
//! the normal runner with the invariant monitor, each step judged against the spec model's
//! allowed states; a failing scenario is shrunk until nothing smaller fails and written as a
//! case file plus fixture into `<out>`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use grove_conformance::campaign::explore as files;
use grove_conformance::catalog;
use grove_conformance::cluster::TargetHandles;
use grove_conformance::explore::{Scenario, scenario, scenario_with_faults, shrink};
use grove_conformance::implementation::admission;
use grove_conformance::report::{self, Exit, Outcome};
use grove_conformance::runner::{self, RunSettings};

use grove_conformance::schedule::Durations;

use super::error::{CliError, CliResult};
use super::run::{self, RunArgs};
use super::{provenance, reports, runtime, shard};

/// At most this many rounds of shrinking a scenario.
const MAX_SHRINK_ROUNDS: usize = 25;

#[derive(Debug, clap::Args)]
pub(crate) struct ExploreArgs {
    /// The seed every draw comes from: the same seed, runs and size give the same scenarios.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many scenarios.
    #[arg(long, default_value_t = 100)]
    runs: u32,
    /// Size of shapes and sequences, 1 (smallest) to 5.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=5))]
    size: u32,
    /// Do not shrink failing scenarios (write them as generated).
    #[arg(long)]
    no_shrink: bool,
    /// Also compose faults into the rounds: pauses and crashes pinned before or after a
    /// request the round makes, holds of the implementation's view, refusals for a while, and
    /// user deletes of a PodClique or a scaling group inside a terminal scope or of the
    /// terminal PodCliqueSet. A scenario whose fault never fired is skipped (not reached),
    /// never passed.
    #[arg(long)]
    faults: bool,
    #[command(flatten)]
    run: RunArgs,
}

/// A scenario that failed, and what shrinking made of it.
struct Shrunk {
    original: String,
    rounds: usize,
    runs: usize,
    file: std::path::PathBuf,
    path: Vec<String>,
}

/// `explore`; `Ok` is the exit code of the generated run, as `run`'s.
pub(crate) fn explore(args: &ExploreArgs) -> CliResult {
    let r = &args.run;
    run::create_out_dir(&r.out)?;
    let scenarios: Vec<Scenario> = (0..args.runs)
        .map(|i| {
            if args.faults {
                scenario_with_faults(args.seed, i, args.size)
            } else {
                scenario(args.seed, i, args.size)
            }
        })
        .collect();
    let (catalog, _) = build(
        &r.out,
        scenarios.iter().map(|s| (s.clone(), None)).collect(),
    )?;
    let selected = run::select(&catalog, r)?;
    // Generated scenarios have no recorded durations: a shard takes an even share of them.
    let cases = match r.shard {
        Some(s) => shard::shard_cases(&selected, &catalog, &Durations::default(), s, false),
        None => selected.clone(),
    };
    let generated = format!(
        "explore: seed {} runs {} size {}{}",
        args.seed,
        args.runs,
        args.size,
        if args.faults { " faults" } else { "" }
    );
    let scratch = run::scratch_dir()?;
    let prepared = run::prepare_admission(r, scratch.path())?;
    let implementation = run::implementation(r, &prepared)?;
    let mut facts = provenance::RunFacts::new(r, &implementation, generated);
    // Explore certifies nothing: L2 fails every scenario that breaches it, though generated
    // cases are `core` and L2 is provisional.
    let settings = RunSettings {
        restraint_fails_every_case: true,
        ..run::run_settings(r, implementation)
    };
    let spec = run::target_spec(r)?;
    if cases.is_empty() {
        let shard = r.shard.expect("only a shard selects nothing here");
        println!(
            "shard {shard}: none of the {} scenario(s) falls in this shard; nothing to run",
            selected.len()
        );
        let empty = report::RunResults::default();
        reports::write_reports(r, &empty, &selected, &facts, None);
        return Ok(report::SUCCESS);
    }
    let started = Instant::now();
    let ran = cases.len();
    let (results, shrunk, kubernetes) = runtime().block_on(async {
        let mut target = run::acquire_target(&spec, !r.no_install_crds, &prepared).await?;
        let client = target.handles().client.clone();
        let kubernetes =
            provenance::observe(&client, &settings.implementation, &mut facts.run).await;
        let handles = target.handles().clone();
        let work = async {
            let results = runner::run_cases(
                &handles,
                Arc::new(catalog),
                cases,
                &settings,
                run::progress_on_stderr(),
            )
            .await
            .map_err(unrun)?;
            let explored = started.elapsed();
            let failed: Vec<&Scenario> = scenarios
                .iter()
                .filter(|s| {
                    results
                        .cases
                        .iter()
                        .any(|c| c.case == s.name() && matches!(c.outcome, Outcome::Fail(_)))
                })
                .collect();
            let mut shrunk = Vec::new();
            for s in failed {
                shrunk.push(shrink_one(&handles, &settings, s, &r.out, !args.no_shrink).await?);
            }
            Ok::<_, CliError>((results, shrunk, explored))
        };
        let outcome = tokio::select! {
            outcome = work => outcome,
            signal = run::interrupted() => {
                eprintln!("\ninterrupted by {signal}: stopping and tearing the target down");
                admission::remove_webhooks(&client, &prepared.webhooks).await;
                runner::case::delete_run_namespaces(&client).await;
                return Err(CliError::said(Exit::Interrupted));
            }
        };
        admission::remove_webhooks(&client, &prepared.webhooks).await;
        let (results, shrunk, explored) = outcome.inspect_err(|_| target.mark_failed())?;
        if report::exit_code(&results) != report::SUCCESS {
            target.mark_failed();
        }
        let minutes = explored.as_secs_f64() / 60.0;
        eprintln!(
            "explore: {ran} scenario(s) of seed {} at size {} in {:.1}s: {:.0} scenarios/minute",
            args.seed,
            args.size,
            explored.as_secs_f64(),
            ran as f64 / minutes.max(1e-9)
        );
        Ok((results, shrunk, kubernetes))
    })?;
    reports::write_reports(r, &results, &selected, &facts, kubernetes);
    for s in &shrunk {
        if args.no_shrink {
            println!(
                "{}: written as generated to {}",
                s.original,
                s.file.display()
            );
        } else if s.path.is_empty() {
            println!(
                "{}: nothing smaller fails ({} run(s) in {} round(s)); written to {}",
                s.original,
                s.runs,
                s.rounds,
                s.file.display()
            );
        } else {
            println!(
                "{}: shrunk in {} round(s) ({} run(s)): {}; written to {}",
                s.original,
                s.rounds,
                s.runs,
                s.path.join(", "),
                s.file.display()
            );
        }
    }
    Ok(report::exit_code(&results))
}

/// The scenarios as an in-memory catalog; a scenario that cannot be written as a valid case
/// is the generator's bug, reported as an invalid catalog.
fn build(
    root: &Path,
    scenarios: Vec<(Scenario, Option<String>)>,
) -> Result<(catalog::Catalog, Vec<catalog::Case>), CliError> {
    files::catalog(root, &scenarios)
        .map_err(|diagnostics| CliError::diagnostics(catalog::render_diagnostics(&diagnostics)))
}

/// The scenarios did not run.
fn unrun(e: std::io::Error) -> CliError {
    CliError::context(Exit::SetupFailed, "failed to run the scenarios", e)
}

/// Shrinks a failing scenario: each round runs every smaller variant at once and keeps the
/// first (smallest change first) that fails, until none does; then writes the result.
async fn shrink_one(
    target: &TargetHandles,
    settings: &RunSettings,
    failing: &Scenario,
    out: &Path,
    shrink: bool,
) -> Result<Shrunk, CliError> {
    let mut current = failing.clone();
    let mut rounds = 0;
    let mut runs = 0;
    while shrink && rounds < MAX_SHRINK_ROUNDS {
        let candidates = shrink::candidates(&current);
        if candidates.is_empty() {
            break;
        }
        rounds += 1;
        let named: Vec<(Scenario, Option<String>)> = candidates
            .iter()
            .enumerate()
            .map(|(k, c)| (c.clone(), Some(format!("{}-try{k}", failing.name()))))
            .collect();
        let (catalog, cases) = build(out, named.clone())?;
        runs += cases.len();
        let results = runner::run_cases(target, Arc::new(catalog), cases, settings, |_| {})
            .await
            .map_err(unrun)?;
        let failed: BTreeSet<&str> = results
            .cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Fail(_)))
            .map(|c| c.case.as_str())
            .collect();
        eprintln!(
            "shrinking {}: round {rounds}, {} smaller variant(s), {} fail",
            failing.name(),
            named.len(),
            failed.len()
        );
        match named
            .into_iter()
            .find(|(_, n)| n.as_deref().is_some_and(|n| failed.contains(n)))
        {
            Some((smaller, _)) => current = smaller,
            None => break,
        }
    }
    let file = files::write(out, &current).map_err(|e| {
        CliError::context(
            Exit::SetupFailed,
            format!("failed to write the case of {}", current.name()),
            e,
        )
    })?;
    Ok(Shrunk {
        original: failing.name(),
        rounds,
        runs,
        file,
        path: current.shrink_path,
    })
}
