//! `explore`'s side that touches files: generated scenarios as an in-memory catalog (each
//! rendered case and fixture parsed by the catalog's own parser, so what runs is an ordinary
//! case), and a shrunk scenario written out as a case file and fixture.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::catalog::{Case, Catalog, Diagnostic, Fixture, parse_case_with_fixtures, parse_fixture};
use crate::explore::{Scenario, render};

/// The area (folder under `cases/`) of generated cases.
pub const AREA: &str = "explore";

/// Where the case file of `name` goes under a catalog folder `root`.
pub fn case_path(root: &Path, name: &str) -> PathBuf {
    root.join("cases").join(AREA).join(format!("{name}.yaml"))
}

/// Where the fixture of `name` goes under a catalog folder `root`.
pub fn fixture_path(root: &Path, name: &str) -> PathBuf {
    root.join("fixtures").join(format!("{name}.yaml"))
}

/// The scenarios as a catalog rooted at `root` (nothing is written), each case named `names`
/// gives it (the scenario's own name when `None`). A scenario the renderer or the parser
/// cannot turn into a case is a diagnostic, naming the would-be file.
pub fn catalog(
    root: &Path,
    scenarios: &[(Scenario, Option<String>)],
) -> Result<(Catalog, Vec<Case>), Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut fixtures = BTreeMap::new();
    let mut cases = Vec::new();
    for (s, name) in scenarios {
        let name = name.clone().unwrap_or_else(|| s.name());
        let (case, fixture) = match rendered(root, s, &name) {
            Ok(x) => x,
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        fixtures.insert(name, fixture);
        cases.push(case);
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let catalog = Catalog {
        root: root.to_path_buf(),
        cases: cases.clone(),
        fixtures,
    };
    Ok((catalog, cases))
}

fn rendered(root: &Path, s: &Scenario, name: &str) -> Result<(Case, Fixture), Vec<Diagnostic>> {
    let case_file = case_path(root, name);
    let fixture_file = fixture_path(root, name);
    let text = render::case_named(s, name).map_err(|e| {
        vec![Diagnostic::file(
            &case_file,
            format!("cannot be written: {e}"),
        )]
    })?;
    let fixture = parse_fixture(&fixture_file, &render::fixture(s))?;
    if !fixture.contract.is_empty() {
        return Err(fixture.contract);
    }
    let known = BTreeSet::from([name.to_owned()]);
    let mut case = parse_case_with_fixtures(&case_file, &text, &known)?;
    case.area = AREA.to_owned();
    Ok((case, fixture))
}

/// Writes `s` as `cases/explore/<name>.yaml` and `fixtures/<name>.yaml` under `root`, and
/// returns the case file's path.
pub fn write(root: &Path, s: &Scenario) -> std::io::Result<PathBuf> {
    let name = s.name();
    let text = render::case(s).map_err(std::io::Error::other)?;
    let case_file = case_path(root, &name);
    let fixture_file = fixture_path(root, &name);
    for f in [&case_file, &fixture_file] {
        std::fs::create_dir_all(f.parent().expect("a file in a folder"))?;
    }
    std::fs::write(&fixture_file, render::fixture(s))?;
    std::fs::write(&case_file, text)?;
    Ok(case_file)
}
