//! `lint` and `coverage`: the catalog checked, and its clause coverage.

use std::path::Path;

use grove_conformance::catalog;
use grove_conformance::report::{self, Exit};

use super::error::{CliError, CliResult};
use super::load;

pub(crate) fn lint(root: &Path) -> CliResult {
    let catalog = catalog::lint(root)
        .map_err(|diagnostics| CliError::diagnostics(catalog::render_diagnostics(&diagnostics)))?;
    println!(
        "catalog ok: {} cases, {} fixtures",
        catalog.cases.len(),
        catalog.fixtures.len()
    );
    Ok(report::SUCCESS)
}

pub(crate) fn coverage(root: &Path, write: Option<&Path>, check: Option<&Path>) -> CliResult {
    let catalog = load(root)?;
    let table = catalog::coverage(&catalog);
    if let Some(path) = write {
        std::fs::write(path, &table).map_err(|e| {
            CliError::context(
                Exit::SetupFailed,
                format!("failed to write {}", path.display()),
                e,
            )
        })?;
    } else if let Some(path) = check {
        let current = std::fs::read_to_string(path).unwrap_or_default();
        if current != table {
            return Err(CliError::new(
                Exit::InvalidCatalog,
                format!(
                    "{} is stale; regenerate it with `grove-conformance coverage --write {}`",
                    path.display(),
                    path.display()
                ),
            ));
        }
    } else {
        print!("{table}");
    }
    Ok(report::SUCCESS)
}
