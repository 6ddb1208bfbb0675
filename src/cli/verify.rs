//! `verify-report`: a report checked against this checkout of the suite. A file is a
//! `conformance.yaml` or a `results.json`; a folder is a run's results, each of the two it
//! holds checked and `conformance.yaml` compared with what `results.json` renders to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use grove_conformance::catalog::{self, Profile};
use grove_conformance::report::{self, Checkout, CheckoutCase, Exit, Finding, ReportFile};
use grove_conformance::runner::Selection;

use super::error::{CliError, CliResult};
use super::{load, provenance, run, shard};

/// `verify-report PATH --catalog DIR`: 0 when every report at `path` holds, 105 naming each
/// finding when one does not, 2 when a file does not read.
pub(crate) fn verify_report(path: &Path, catalog_dir: &Path) -> CliResult {
    let files = report_files(path)?;
    let catalog = load(catalog_dir)?;
    let checkout = Checkout {
        catalog: shard::catalog_digest(&catalog)?,
        cases: catalog
            .cases
            .iter()
            .map(|c| {
                let case = CheckoutCase {
                    area: c.area.clone(),
                    profile: c.profile,
                    clauses: c.clauses.clone(),
                };
                (c.name.clone(), case)
            })
            .collect(),
    };
    let mut refused = 0;
    let mut read = BTreeMap::new();
    // Said once, however many of the files they are true of.
    let mut notes = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| {
            CliError::context(Exit::Usage, format!("failed to read {}", file.display()), e)
        })?;
        let findings = match report::read_report(&text) {
            Ok(report) => {
                let findings = judge(&report, &catalog, &checkout, &mut notes)?;
                read.insert(report.kind().file_name(), report);
                findings
            }
            Err(f) => vec![f],
        };
        refused += print(&file.display().to_string(), &findings);
    }
    if let (Some(c), Some(r)) = (read.get("conformance.yaml"), read.get("results.json")) {
        let label = format!(
            "{} against the results.json beside it",
            path.join("conformance.yaml").display()
        );
        let findings: Vec<Finding> = report::agree(c, r)
            .into_iter()
            .map(|f| Finding {
                message: format!("{} (not what results.json gives)", f.message),
                ..f
            })
            .collect();
        refused += print(&label, &findings);
    }
    for note in notes {
        eprintln!("note: {note}");
    }
    Ok(if refused == 0 {
        report::SUCCESS
    } else {
        Exit::ReportRefused.code()
    })
}

/// The reports at `path`: the file, or a folder's `conformance.yaml` and `results.json`.
fn report_files(path: &Path) -> Result<Vec<PathBuf>, CliError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let files: Vec<PathBuf> = ["conformance.yaml", "results.json"]
        .iter()
        .map(|f| path.join(f))
        .filter(|f| f.is_file())
        .collect();
    if files.is_empty() {
        return Err(CliError::usage(format!(
            "{} holds neither conformance.yaml nor results.json",
            path.display()
        )));
    }
    Ok(files)
}

/// The findings of `report` against `checkout`, its selection made again in `catalog`; what is
/// worth knowing but no finding goes to `notes`.
fn judge(
    report: &ReportFile,
    catalog: &catalog::Catalog,
    checkout: &Checkout,
    notes: &mut BTreeSet<String>,
) -> Result<Vec<Finding>, CliError> {
    let Some(p) = report.provenance() else {
        return Ok(report.verify(checkout, &[]));
    };
    if p.harness.commit != provenance::harness().commit {
        notes.insert(format!(
            "produced by grove-conformance {} at commit {}; this build is at {}",
            p.harness.version,
            p.harness.commit,
            provenance::harness().commit
        ));
    }
    if report.generated() {
        notes.insert(format!(
            "its cases were generated ({}): the checkout's catalog and selection are not compared",
            p.catalog
        ));
        return Ok(report.verify(checkout, &report.case_names()));
    }
    let regex = |field: &str, r: &Option<String>| {
        r.as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| {
                CliError::context(
                    Exit::ReportRefused,
                    format!("provenance.selection.{field}"),
                    e,
                )
            })
    };
    let profile = match p.selection.profile.as_deref() {
        None => None,
        Some(text) => Some(text.parse::<Profile>().map_err(|_| {
            CliError::new(
                Exit::ReportRefused,
                format!("provenance.selection.profile: unknown profile `{text}`"),
            )
        })?),
    };
    let selection = Selection {
        filters: p.selection.filter.clone(),
        profile,
    };
    let focus = regex("focus", &p.selection.focus)?;
    let skip = regex("skip", &p.selection.skip)?;
    let selected: Vec<String> =
        run::select_cases(catalog, &selection, focus.as_ref(), skip.as_ref())
            .into_iter()
            .map(|c| c.name)
            .collect();
    Ok(report.verify(checkout, &selected))
}

/// Prints the verdict on `what` (to stdout when it holds, each finding to stderr when not);
/// the number of findings.
fn print(what: &str, findings: &[Finding]) -> usize {
    if findings.is_empty() {
        println!("verified: {what}");
    } else {
        eprintln!("refused: {what} ({} finding(s))", findings.len());
        for f in findings {
            eprintln!("  {f}");
        }
    }
    findings.len()
}
