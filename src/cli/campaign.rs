//! `bench` and `sweep`: repeated whole runs, and the fault sweeps.

use std::path::Path;
use std::sync::Arc;

use grove_conformance::catalog;
use grove_conformance::errors;
use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::report;
use grove_conformance::schedule::Shard;
use grove_conformance::target::TargetSpec;

use super::{load, runtime};

pub(crate) fn sweep(
    root: &Path,
    filter: &[String],
    (pattern, after, jobs): (grove_conformance::campaign::sweep::Pattern, bool, usize),
    out: &Path,
    shard: Option<Shard>,
    durations: Option<&Path>,
) -> i32 {
    use grove_conformance::campaign::sweep;
    use grove_conformance::runner::case::RunContext;
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
    let cases = match shard {
        None => cases,
        Some(s) => {
            let durations = match super::shard::load_durations(durations, root) {
                Ok(d) => d,
                Err(code) => return code,
            };
            // The sweep runs on the embedded cluster.
            let mine = super::shard::shard_cases(&cases, &catalog, &durations, s, false);
            if mine.is_empty() {
                println!(
                    "shard {s}: none of the {} selected case(s) falls in this shard; nothing to sweep",
                    cases.len()
                );
                return report::SUCCESS;
            }
            mine
        }
    };
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
        let target = match grove_conformance::target::acquire(
            &TargetSpec::Embedded,
            grove_reference_operator::crds(),
            true,
        )
        .await
        {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {:#}", errors::chain(&e));
                return report::SETUP_FAILED;
            }
        };
        let handles = target.handles().clone();
        let (events, _ignored) = tokio::sync::mpsc::unbounded_channel();
        let context = RunContext::new(
            &handles,
            implementation,
            catalog.clone(),
            logs.clone(),
            events,
        );
        let mut sweeps = Vec::new();
        for case in &cases {
            if let Some(why) = sweep::unsweepable(case, pattern) {
                eprintln!("{}: not swept: {why}", case.name);
                continue;
            }
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
        let summary = sweep::summary(&sweeps);
        println!("{summary}");
        let path = out.join("sweep.md");
        if let Err(e) = std::fs::write(&path, &summary) {
            eprintln!("error: failed to write {}: {e}", path.display());
        }
        let failed = sweeps.iter().any(|s| {
            s.baseline != report::Outcome::Pass
                || s.points.iter().any(|p| !p.verdict().is_success())
        });
        if failed {
            report::CASES_FAILED
        } else {
            report::SUCCESS
        }
    })
}

pub(crate) fn bench(runs: usize, out: &Path, run_args: &[std::ffi::OsString]) -> i32 {
    use grove_conformance::campaign::bench;
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
            eprintln!("error: {:#}", errors::chain(&e));
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
