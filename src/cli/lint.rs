//! `lint` and `coverage`: the catalog checked, and its clause coverage.

use std::path::Path;

use grove_conformance::catalog;
use grove_conformance::report;

use super::load;

pub(crate) fn lint(root: &Path) -> i32 {
    match catalog::lint(root) {
        Ok(catalog) => {
            println!(
                "catalog ok: {} cases, {} fixtures",
                catalog.cases.len(),
                catalog.fixtures.len()
            );
            report::SUCCESS
        }
        Err(diagnostics) => {
            eprintln!("{}", catalog::render_diagnostics(&diagnostics));
            report::INVALID_CATALOG
        }
    }
}

pub(crate) fn coverage(root: &Path, write: Option<&Path>, check: Option<&Path>) -> i32 {
    let catalog = match load(root) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let table = catalog::coverage(&catalog);
    if let Some(path) = write {
        if let Err(e) = std::fs::write(path, &table) {
            eprintln!("error: failed to write {}: {e}", path.display());
            return report::SETUP_FAILED;
        }
    } else if let Some(path) = check {
        let current = std::fs::read_to_string(path).unwrap_or_default();
        if current != table {
            eprintln!(
                "error: {} is stale; regenerate it with `grove-conformance coverage --write {}`",
                path.display(),
                path.display()
            );
            return report::INVALID_CATALOG;
        }
    } else {
        print!("{table}");
    }
    report::SUCCESS
}
