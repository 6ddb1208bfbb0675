//! Durations, shards and the identity of a run, shared by `run`, `sweep` and `merge`; and the
//! `durations` and `merge` subcommands.

use std::path::{Path, PathBuf};

use grove_conformance::catalog::{Case, Catalog};
use grove_conformance::report::{self, Exit, Provenance, RunIdentity, RunRecord};
use grove_conformance::runner;
use grove_conformance::schedule::{self, Durations, Shard, Weighted};
use grove_conformance::vocab::Revision;

use super::error::{CliError, CliResult};
use super::reports::{Reports, today};

/// The file a catalog keeps its cases' durations in, used when `--durations` is not given.
pub(crate) const DEFAULT_DURATIONS: &str = "durations.yaml";

/// The durations a run plans with: `explicit` when given (it must read), else the catalog's
/// `durations.yaml` when it has one, else none (catalog order).
pub(crate) fn load_durations(
    explicit: Option<&Path>,
    catalog: &Path,
) -> Result<Durations, CliError> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => (catalog.join(DEFAULT_DURATIONS), false),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Durations::default());
        }
        Err(e) => return Err(unreadable(&path, e)),
    };
    Durations::parse(&path, &text).map_err(|e| CliError::from_error(Exit::Usage, e))
}

/// Whether `case` runs alone whatever the implementation: it creates as many pods as a large
/// case, or it loses a node of a cluster whose nodes every case shares (real kubelets).
fn runs_alone(case: &Case, catalog: &Catalog, real_kubelets: bool) -> bool {
    runner::case::is_large(case, catalog) || (real_kubelets && runner::case::loses_node(case))
}

/// The weight `case` is partitioned with: its planned duration, times
/// [`schedule::alone_weight`] when it runs alone.
fn weight<'a>(
    case: &'a Case,
    catalog: &Catalog,
    durations: &Durations,
    real_kubelets: bool,
) -> Weighted<'a> {
    let factor = if runs_alone(case, catalog, real_kubelets) {
        schedule::alone_weight(real_kubelets)
    } else {
        1
    };
    Weighted::new(&case.name, durations.planned(&case.name), factor)
}

/// The cases of `selected` that fall in `shard`, in their order: [`schedule::partition`] by
/// their weights. Only the catalog, the durations and whether the target has real kubelets
/// decide, so every shard of a matrix computes the same partition.
pub(crate) fn shard_cases(
    selected: &[Case],
    catalog: &Catalog,
    durations: &Durations,
    shard: Shard,
    real_kubelets: bool,
) -> Vec<Case> {
    let weighted: Vec<Weighted<'_>> = selected
        .iter()
        .map(|c| weight(c, catalog, durations, real_kubelets))
        .collect();
    let shards = schedule::partition(&weighted, shard.count);
    selected
        .iter()
        .zip(shards)
        .filter(|(_, s)| *s == shard.index)
        .map(|(c, _)| c.clone())
        .collect()
}

/// `run --list`: `cases` (the shard's, or the whole selection) in the order they would start,
/// each with its planned duration (`?` when the durations do not know it) and whether it runs
/// alone, then each shard's share of the selection's weight.
pub(crate) fn plan_listing(
    selected: &[Case],
    cases: &[Case],
    catalog: &Catalog,
    durations: &Durations,
    shard: Option<Shard>,
    real_kubelets: bool,
) -> String {
    use std::fmt::Write as _;
    let alone = |c: &Case| runs_alone(c, catalog, real_kubelets);
    let mut out = String::new();
    for (c, alone) in runner::plan(cases.to_vec(), durations, alone) {
        let known = durations
            .get(&c.name)
            .map_or("?".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()));
        let _ = writeln!(
            out,
            "{:<64} {:>7}{}",
            c.name,
            known,
            if alone { "  alone" } else { "" }
        );
    }
    let weight = |c: &Case| weight(c, catalog, durations, real_kubelets).weight;
    let total: std::time::Duration = selected.iter().map(weight).sum();
    let count = shard.map_or(1, |s| s.count);
    let _ = writeln!(
        out,
        "{} case(s){}; planned weight {:.1}s (a case that runs alone counts {} times its length)",
        cases.len(),
        shard.map_or(String::new(), |s| format!(
            " in shard {s} of {} selected",
            selected.len()
        )),
        total.as_secs_f64(),
        schedule::alone_weight(real_kubelets)
    );
    if count > 1 {
        for index in 1..=count {
            let mine = shard_cases(
                selected,
                catalog,
                durations,
                Shard { index, count },
                real_kubelets,
            );
            let load: std::time::Duration = mine.iter().map(weight).sum();
            let share = if total.is_zero() {
                0.0
            } else {
                100.0 * load.as_secs_f64() / total.as_secs_f64()
            };
            let _ = writeln!(
                out,
                "shard {index}/{count}: {} case(s), {:.1}s, {share:.1} %",
                mine.len(),
                load.as_secs_f64()
            );
        }
    }
    out
}

/// A SHA-256 digest of every case and fixture file of `catalog` (paths relative to its root,
/// and contents): shards of one run must have run the same catalog.
pub(crate) fn catalog_digest(catalog: &Catalog) -> Result<String, CliError> {
    let mut files: Vec<&Path> = catalog
        .cases
        .iter()
        .map(|c| c.path.as_path())
        .chain(catalog.fixtures.values().map(|f| f.path.as_path()))
        .collect();
    files.sort();
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for file in files {
        let text = std::fs::read(file).map_err(|e| {
            CliError::context(
                Exit::SetupFailed,
                format!("failed to read {}", file.display()),
                e,
            )
        })?;
        let name = file.strip_prefix(&catalog.root).unwrap_or(file);
        let name = name.to_string_lossy();
        context.update(&(name.len() as u64).to_le_bytes());
        context.update(name.as_bytes());
        context.update(&(text.len() as u64).to_le_bytes());
        context.update(&text);
    }
    let digest = context.finish();
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// The names of `selected`, sorted: what every shard of the run records as its selection.
fn selected_names(selected: &[Case]) -> Vec<String> {
    let mut names: Vec<String> = selected.iter().map(|c| c.name.clone()).collect();
    names.sort();
    names
}

/// `durations`: the median wall time of each case over the runs whose `conformance.yaml`s
/// `inputs` name (files, or folders searched for them, as `bench` leaves them), printed or
/// written to `write`; cases the catalog no longer has are left out, and the catalog's cases
/// no input has are named.
pub(crate) fn durations(catalog: &Path, inputs: &[PathBuf], write: Option<&Path>) -> CliResult {
    let catalog = super::load(catalog)?;
    let mut files = Vec::new();
    for input in inputs {
        conformance_files(input, &mut files).map_err(|e| unreadable(input, e))?;
    }
    if files.is_empty() {
        return Err(CliError::usage("no conformance.yaml found in the inputs"));
    }
    files.sort();
    let mut runs = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| unreadable(file, e))?;
        runs.push(Durations::parse(file, &text).map_err(|e| CliError::from_error(Exit::Usage, e))?);
    }
    let median = Durations::median(&runs);
    let kept = Durations::from_pairs(
        catalog
            .cases
            .iter()
            .filter_map(|c| median.get(&c.name).map(|d| (c.name.clone(), d))),
    );
    let missing = kept.unknown(catalog.cases.iter().map(|c| c.name.as_str()));
    let header = format!(
        "Each case's wall time in milliseconds: the median of {} run(s). `run` starts cases\n\
         longest first by it and `--shard` balances shards by it. Refresh it with\n\
         `grove-conformance bench --runs 5 --out B && grove-conformance durations --write {DEFAULT_DURATIONS} B`.",
        runs.len()
    );
    let text = kept.to_yaml(&header);
    match write {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| {
                CliError::context(
                    Exit::SetupFailed,
                    format!("failed to write {}", path.display()),
                    e,
                )
            })?;
            eprintln!(
                "wrote {} ({} cases, median of {} run(s))",
                path.display(),
                kept.len(),
                runs.len()
            );
        }
        None => print!("{text}"),
    }
    if !missing.is_empty() {
        eprintln!(
            "note: {} case(s) of the catalog have no duration (planned as the longest): {}",
            missing.len(),
            missing.join(", ")
        );
    }
    Ok(report::SUCCESS)
}

/// An input that does not read: refused before anything started.
fn unreadable(path: &Path, e: std::io::Error) -> CliError {
    CliError::context(Exit::Usage, format!("failed to read {}", path.display()), e)
}

/// `input` if it is a file, else every `conformance.yaml` below it.
fn conformance_files(input: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !input.is_dir() {
        std::fs::metadata(input)?;
        out.push(input.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(input)? {
        let path = entry?.path();
        if path.is_dir() {
            conformance_files(&path, out)?;
        } else if path.file_name().is_some_and(|n| n == "conformance.yaml") {
            out.push(path);
        }
    }
    Ok(())
}

/// `merge`: the `results.json` of each of `dirs` (the shards of one run) merged into one
/// run's reports in `out`. Exits as `run` would have; 2 when the shards do not make up one
/// run (naming what is missing, repeated or different).
pub(crate) fn merge(dirs: &[PathBuf], out: &Path, junit: Option<PathBuf>) -> CliResult {
    let mut records = Vec::new();
    for dir in dirs {
        let file = if dir.is_dir() {
            dir.join("results.json")
        } else {
            dir.clone()
        };
        let text = std::fs::read_to_string(&file).map_err(|e| unreadable(&file, e))?;
        let record = RunRecord::from_json(&text)
            .map_err(|e| CliError::context(Exit::Usage, file.display().to_string(), e))?;
        records.push((dir.display().to_string(), record));
    }
    let (identity, results) =
        report::merge(&records).map_err(|e| CliError::from_error(Exit::Usage, e))?;
    let provenance = Provenance::merged(records.iter().filter_map(|(_, r)| r.provenance.as_ref()))
        .map_err(|e| CliError::from_error(Exit::Usage, e))?;
    let revision: Revision = identity
        .revision
        .parse()
        .map_err(|e| CliError::context(Exit::Usage, records[0].0.clone(), e))?;
    super::run::create_out_dir(out)?;
    let date = records
        .iter()
        .map(|(_, r)| r.date.clone())
        .max()
        .unwrap_or_else(today);
    let reports = Reports {
        out,
        junit,
        implementation: (&identity.implementation).into(),
        revision,
        date: date.clone(),
        provenance: provenance.clone(),
    };
    let record = RunRecord::new(identity, None, &date, &results).with_provenance(provenance);
    reports.write(&results, &record);
    eprintln!(
        "merged {} shard(s): {} cases",
        records.len(),
        results.cases.len()
    );
    Ok(report::exit_code(&results))
}

/// The identity a run records.
pub(crate) fn identity(
    implementation: &report::Implementation,
    revision: Revision,
    catalog: String,
    selected: &[Case],
) -> RunIdentity {
    RunIdentity {
        implementation: implementation.into(),
        revision: revision.id().to_owned(),
        catalog,
        selected: selected_names(selected),
    }
}
