use std::time::Duration;

use super::*;
use crate::report::event::{CaseResult, Failure, Outcome, TimeSplit};
use crate::report::provenance::{
    Harness, ImplementationRun, Implementer, SelectionRecord, Settings, TargetRecord,
};
use crate::report::record::RunIdentity;

fn provenance(shards: &[&str]) -> Provenance {
    Provenance {
        harness: Harness {
            version: "0.1.0".into(),
            commit: "abc".into(),
        },
        implementer: Implementer {
            organization: Some("example".into()),
            ..Implementer::default()
        },
        catalog: "sha256:cat".into(),
        target: TargetRecord {
            kind: "embedded".into(),
            kubernetes: Some("v1.34.1".into()),
        },
        implementation: ImplementationRun {
            mode: "reference".into(),
            command: None,
            image: None,
            image_digest: None,
            deployment: None,
        },
        selection: SelectionRecord::default(),
        settings: Settings {
            jobs: 4,
            repeat: 1,
            shards: shards.iter().map(|s| s.to_string()).collect(),
            api_proxy: true,
            fail_fast: false,
        },
        started: "2026-12-07T09:00:00Z".into(),
        commands: vec!["grove-conformance run".into()],
    }
}

fn result(case: &str, clauses: &[&str], outcome: Outcome) -> CaseResult {
    CaseResult {
        case: case.into(),
        area: "jobs".into(),
        clauses: clauses.iter().map(|c| c.to_string()).collect(),
        profile: Profile::Core,
        outcome,
        duration: Duration::from_millis(1500),
        time: TimeSplit {
            waiting: Duration::from_millis(700),
            holding: Duration::from_millis(300),
            queued: Duration::ZERO,
        },
        crash_points: vec!["before create pods".into()],
        fault_points: Vec::new(),
        api: None,
    }
}

fn results() -> RunResults {
    let violation = Outcome::Fail(Failure {
        message: "invariant violated".into(),
        broken: vec!["O1".into()],
        ..Failure::default()
    });
    RunResults {
        cases: vec![
            result("a", &["E8"], Outcome::Pass),
            result("b", &["E8", "R3"], violation),
            result(
                "c",
                &["R3"],
                Outcome::Skip {
                    reason: "no".into(),
                },
            ),
        ],
        duration: Duration::from_secs(4),
    }
}

fn checkout() -> Checkout {
    let cases = results()
        .cases
        .iter()
        .map(|r| {
            (
                r.case.clone(),
                CheckoutCase {
                    area: r.area.clone(),
                    profile: r.profile,
                    clauses: r.clauses.clone(),
                },
            )
        })
        .collect();
    Checkout {
        catalog: "sha256:cat".into(),
        cases,
    }
}

fn selected() -> Vec<String> {
    vec!["a".into(), "b".into(), "c".into()]
}

fn yaml() -> String {
    let implementation = Implementation {
        name: "x".into(),
        version: "1".into(),
    };
    ConformanceReport::new(
        implementation,
        Revision::default(),
        "2026-12-07",
        &results(),
    )
    .with_provenance(Some(provenance(&[])))
    .to_yaml()
}

fn verify(text: &str) -> Vec<String> {
    match read_report(text) {
        Ok(file) => file
            .verify(&checkout(), &selected())
            .iter()
            .map(Finding::to_string)
            .collect(),
        Err(f) => vec![f.to_string()],
    }
}

/// `text` edited and its digest computed again, so that only the consistency checks stand
/// between the edit and a pass.
fn resealed(text: &str) -> String {
    let mut value: Value = serde_yaml::from_str(text).unwrap();
    let digest = digest_of(&value);
    value[DIGEST_FIELD] = Value::String(digest);
    serde_yaml::to_string(&value).unwrap()
}

fn any_at(findings: &[String], at: &str) -> bool {
    findings.iter().any(|f| f.starts_with(at))
}

#[test]
fn a_report_as_written_verifies() {
    assert_eq!(verify(&yaml()), Vec::<String>::new());
}

#[test]
fn a_results_record_as_written_verifies_and_an_edit_is_refused() {
    let identity = RunIdentity {
        implementation: (&Implementation {
            name: "x".into(),
            version: "1".into(),
        })
            .into(),
        revision: Revision::default().id().into(),
        catalog: "sha256:cat".into(),
        selected: selected(),
    };
    let json = RunRecord::new(identity, None, "2026-12-07", &results())
        .with_provenance(Some(provenance(&[])))
        .to_json();
    assert_eq!(verify(&json), Vec::<String>::new());
    let edited = json.replacen("\"fail\"", "\"pass\"", 1);
    assert!(any_at(&verify(&edited), "digest"), "{:?}", verify(&edited));
}

#[test]
fn an_edited_count_is_refused_by_digest_and_by_the_aggregate_it_breaks() {
    let text = yaml().replacen("pass: 1", "pass: 2", 1);
    let findings = verify(&text);
    assert!(any_at(&findings, "digest"), "{findings:?}");
    let findings = verify(&resealed(&text));
    assert!(
        any_at(&findings, "profiles[core].cases.pass"),
        "{findings:?}"
    );
}

#[test]
fn an_edited_verdict_is_refused() {
    let text = yaml().replacen("outcome: fail", "outcome: pass", 1);
    let findings = verify(&resealed(&text));
    assert!(any_at(&findings, "profiles[core]"), "{findings:?}");
    let text = yaml().replacen("verdict: fail", "verdict: pass", 1);
    let findings = verify(&resealed(&text));
    assert!(any_at(&findings, "clauses[O1].verdict"), "{findings:?}");
}

#[test]
fn a_removed_case_is_refused() {
    let mut value: Value = serde_yaml::from_str(&yaml()).unwrap();
    value["cases"].as_array_mut().unwrap().remove(2);
    let findings = verify(&resealed(&serde_yaml::to_string(&value).unwrap()));
    assert!(
        findings
            .iter()
            .any(|f| f.starts_with("cases[c]: selected by the report's selection")),
        "{findings:?}"
    );
}

#[test]
fn another_catalog_digest_is_refused() {
    let text = yaml().replacen("catalog: sha256:cat", "catalog: sha256:dog", 1);
    let findings = verify(&resealed(&text));
    assert!(any_at(&findings, "provenance.catalog"), "{findings:?}");
}

#[test]
fn an_edited_clause_is_refused() {
    let mut value: Value = serde_yaml::from_str(&yaml()).unwrap();
    value["cases"][0]["clauses"] = serde_json::json!(["E9"]);
    let findings = verify(&resealed(&serde_yaml::to_string(&value).unwrap()));
    assert!(any_at(&findings, "cases[a].clauses"), "{findings:?}");
    assert!(any_at(&findings, "clauses[E8]"), "{findings:?}");
}

#[test]
fn a_shard_need_not_hold_the_whole_selection_but_every_shard_together_must() {
    let part = RunResults {
        cases: results().cases[..2].to_vec(),
        duration: Duration::from_secs(2),
    };
    let implementation = Implementation {
        name: "x".into(),
        version: "1".into(),
    };
    let of = |shards: &[&str]| {
        ConformanceReport::new(implementation.clone(), Revision::default(), "d", &part)
            .with_provenance(Some(provenance(shards)))
            .to_yaml()
    };
    assert_eq!(verify(&of(&["1/2"])), Vec::<String>::new());
    assert!(any_at(&verify(&of(&["1/2", "2/2"])), "cases[c]"));
}

#[test]
fn a_file_that_is_no_report_says_so() {
    let findings = verify("apiVersion: v1\nkind: Pod\n");
    assert!(any_at(&findings, "schema"), "{findings:?}");
    let findings = verify(&yaml().replace("conformance.grove.io/v1alpha1", "x/v1"));
    assert!(any_at(&findings, "schema"), "{findings:?}");
}
