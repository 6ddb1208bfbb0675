//! `verify-report` on the reports of a real run: they verify as written, they name what
//! produced them (in `conformance.yaml`, JUnit and the page), and five kinds of edit are
//! refused, each named: a count, a verdict, a case removed, the catalog digest, a clause.
//! Each edit is made twice: by hand (the digest no longer matches) and with the digest
//! computed again (what the edit breaks is named).

mod common;

use std::path::Path;

use common::{harness, text};
use grove_conformance::report::{DIGEST_FIELD, digest_of};
use serde_json::Value;

fn read_yaml(path: &Path) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `value` written to `dir/conformance.yaml`; `reseal` computes its digest again first.
fn write(dir: &Path, mut value: Value, reseal: bool) -> std::path::PathBuf {
    if reseal {
        let digest = digest_of(&value);
        value[DIGEST_FIELD] = Value::String(digest);
    }
    let file = dir.join("conformance.yaml");
    std::fs::write(&file, serde_yaml::to_string(&value).unwrap()).unwrap();
    file
}

/// `verify-report FILE`: it must refuse, naming `at` (and, when the digest was not computed
/// again, the digest).
fn refused(file: &Path, at: &str, resealed: bool) {
    let done = harness(&["verify-report", file.to_str().unwrap()]);
    let said = text(&done);
    assert_eq!(done.status.code(), Some(105), "{said}");
    assert!(
        said.contains(&format!("  {at}")),
        "expected a finding at {at}: {said}"
    );
    assert_eq!(
        said.contains("  digest:"),
        !resealed,
        "the digest finding only for an edit by hand: {said}"
    );
}

#[test]
fn the_reports_of_a_run_verify_and_every_kind_of_edit_is_refused_and_named() {
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let done = harness(&[
        "run",
        "--filter",
        "validation",
        "--out",
        run.to_str().unwrap(),
        "--organization",
        "example.org",
        "--project",
        "grove",
        "--version",
        "9.9.9",
        "--contact",
        "grove@example.org",
        "--repeat",
        "2",
    ]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));

    // As written, every report verifies, each file alone and the folder together.
    for path in [
        run.clone(),
        run.join("conformance.yaml"),
        run.join("results.json"),
    ] {
        let done = harness(&["verify-report", path.to_str().unwrap()]);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    }

    // What produced it, in every report.
    let report = read_yaml(&run.join("conformance.yaml"));
    let p = &report["provenance"];
    assert_eq!(p["implementer"]["organization"], "example.org");
    assert_eq!(report["implementation"]["version"], "9.9.9");
    assert_eq!(p["harness"]["version"], env!("CARGO_PKG_VERSION"));
    // The commit the harness was built from (`unknown` only outside a Git checkout).
    assert_eq!(
        p["harness"]["commit"],
        env!("GROVE_CONFORMANCE_COMMIT"),
        "{p}"
    );
    assert!(p["catalog"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(p["target"]["kind"], "embedded");
    assert!(p["target"]["kubernetes"].as_str().unwrap().starts_with('v'));
    assert_eq!(p["implementation"]["mode"], "reference");
    assert_eq!(p["selection"]["filter"], serde_json::json!(["validation"]));
    assert_eq!(p["settings"]["repeat"], 2);
    let command = p["commands"][0].as_str().unwrap();
    assert!(
        command.starts_with("grove-conformance run --filter validation"),
        "{command}"
    );
    let junit = std::fs::read_to_string(run.join("junit.xml")).unwrap();
    for property in [
        "harness-commit",
        "catalog-digest",
        "kubernetes-version",
        "command-line",
    ] {
        assert!(
            junit.contains(&format!("<property name=\"{property}\"")),
            "{property}"
        );
    }
    let page = std::fs::read_to_string(run.join("conformance.html")).unwrap();
    assert!(page.contains("What produced this report"));
    assert!(page.contains(p["catalog"].as_str().unwrap()));

    let edits = out.path().join("edits");
    std::fs::create_dir_all(&edits).unwrap();
    let cases = report["cases"].as_array().unwrap().clone();
    assert!(cases.len() > 3, "{cases:?}");
    let first = cases[0]["case"].as_str().unwrap().to_owned();
    let clause = cases[0]["clauses"][0].as_str().unwrap().to_owned();
    let at_clause = |c: &Value| c["clause"] == clause.as_str();
    for resealed in [false, true] {
        // A count.
        let mut v = report.clone();
        v["profiles"][0]["cases"]["pass"] = Value::from(1000);
        refused(
            &write(&edits, v, resealed),
            "profiles[core].cases.pass",
            resealed,
        );
        // A verdict.
        let mut v = report.clone();
        v["cases"][0]["outcome"] = Value::from("fail");
        refused(
            &write(&edits, v, resealed),
            "profiles[core].cases",
            resealed,
        );
        // A case removed.
        let mut v = report.clone();
        v["cases"].as_array_mut().unwrap().remove(0);
        let at = format!("cases[{first}]: selected by the report's selection");
        refused(&write(&edits, v, resealed), &at, resealed);
        // The catalog digest.
        let mut v = report.clone();
        v["provenance"]["catalog"] = Value::from(format!("sha256:{}", "0".repeat(64)));
        refused(&write(&edits, v, resealed), "provenance.catalog", resealed);
        // A clause.
        let mut v = report.clone();
        let entry = v["clauses"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|c| at_clause(c))
            .unwrap();
        entry["verdict"] = Value::from("untested");
        let at = format!("clauses[{clause}].verdict");
        refused(&write(&edits, v, resealed), &at, resealed);
    }

    // A results folder whose conformance.yaml is not what its results.json renders.
    let mut v = report.clone();
    v["implementation"]["name"] = Value::from("someone-else");
    write(&run, v, true);
    let done = harness(&["verify-report", run.to_str().unwrap()]);
    let said = text(&done);
    assert_eq!(done.status.code(), Some(105), "{said}");
    assert!(said.contains("implementation.name"), "{said}");
    assert!(said.contains("not what results.json gives"), "{said}");
}
