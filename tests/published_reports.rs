//! The reports published under `reports/<revision>/<organization>-<project>/`: each folder has
//! a README with a `## Reproduce` section, and its `conformance.yaml` and `results.json` read as
//! reports of this suite, hold their own digest and aggregates, and agree with each other.
//! (Their catalog digest is that of the commit they name, so it is not compared here:
//! `verify-report` at that commit does.)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use grove_conformance::catalog::Profile;
use grove_conformance::report::{self, Checkout, CheckoutCase, ReportFile};

/// Every `reports/<revision>/<implementation>/` folder.
fn published() -> Vec<PathBuf> {
    let root = common::root().join("reports");
    let mut out = Vec::new();
    for revision in std::fs::read_dir(&root).unwrap() {
        let revision = revision.unwrap().path();
        if !revision.is_dir() {
            continue;
        }
        for implementation in std::fs::read_dir(&revision).unwrap() {
            let path = implementation.unwrap().path();
            if path.is_dir() {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> ReportFile {
    let text = std::fs::read_to_string(path).unwrap();
    report::read_report(&text).unwrap_or_else(|f| panic!("{}: {f}", path.display()))
}

/// The report's own cases and catalog as the checkout: what is left to judge is its digest,
/// its aggregates and the agreement of the two files.
fn own_checkout(report: &ReportFile, conformance: &serde_json::Value) -> Checkout {
    let cases = conformance["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let case = CheckoutCase {
                area: c["area"].as_str().unwrap().to_owned(),
                profile: c["profile"].as_str().unwrap().parse::<Profile>().unwrap(),
                clauses: serde_json::from_value(c["clauses"].clone()).unwrap(),
            };
            (c["case"].as_str().unwrap().to_owned(), case)
        })
        .collect::<BTreeMap<_, _>>();
    Checkout {
        catalog: report.provenance().unwrap().catalog.clone(),
        cases,
    }
}

#[test]
fn every_published_report_holds_and_says_how_to_reproduce_it() {
    let folders = published();
    assert!(!folders.is_empty(), "no report is published under reports/");
    for folder in folders {
        let name = folder.display();
        let readme = std::fs::read_to_string(folder.join("README.md"))
            .unwrap_or_else(|e| panic!("{name}/README.md: {e}"));
        assert!(
            readme.contains("\n## Reproduce\n"),
            "{name}/README.md has no `## Reproduce` section"
        );
        let conformance = read(&folder.join("conformance.yaml"));
        let results = read(&folder.join("results.json"));
        let value: serde_json::Value = serde_yaml::from_str(
            &std::fs::read_to_string(folder.join("conformance.yaml")).unwrap(),
        )
        .unwrap();
        let checkout = own_checkout(&conformance, &value);
        let selected = conformance.case_names();
        for (file, report) in [
            ("conformance.yaml", &conformance),
            ("results.json", &results),
        ] {
            let findings = report.verify(&checkout, &selected);
            assert!(findings.is_empty(), "{name}/{file}: {findings:?}");
        }
        let findings = report::agree(&conformance, &results);
        assert!(
            findings.is_empty(),
            "{name}: the two files disagree: {findings:?}"
        );
        // Published runs name the implementer and repeat every case.
        let p = conformance.provenance().unwrap();
        let who = &p.implementer;
        let (Some(org), Some(project)) = (&who.organization, &who.project) else {
            panic!("{name}: a published report names its organization and project");
        };
        assert_eq!(
            folder.file_name().unwrap().to_str(),
            Some(format!("{org}-{project}").as_str()),
            "{name}: the folder is named <organization>-<project>"
        );
        assert!(
            p.settings.repeat >= 2,
            "{name}: a published run repeats its cases"
        );
        let revision = folder.parent().unwrap().file_name().unwrap();
        assert_eq!(
            value["revision"].as_str(),
            revision.to_str(),
            "{name}: the folder's revision"
        );
    }
}
