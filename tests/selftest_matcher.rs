//! Self-tests of the matcher and the diff: expectations from real case syntax judged against
//! synthetic snapshots.

use std::collections::BTreeMap;
use std::path::Path;

use grove_conformance::catalog::{self, Expectation, StepKind};
use grove_conformance::diff::{self, Style};
use grove_conformance::matcher;
use grove_conformance::snapshot::Snapshot;
use grove_conformance::vocab::{Kind, Revision, Vocabulary};
use serde_json::{Value, json};

/// The expectation of a one-step case written with `body` (YAML under `expect:`).
fn expectation(body: &str) -> Expectation {
    let text = format!(
        "name: m\nsummary: s\nclauses: [E1]\nprofile: core\nfixture: all-ranks\nsteps:\n  - remember: {{as: old, kind: PodClique, name: job-0-worker}}\n  - expect:\n{body}"
    );
    let fixtures = ["all-ranks".to_owned()].into_iter().collect();
    let case = catalog::parse_case_with_fixtures(Path::new("m.yaml"), &text, &fixtures)
        .unwrap_or_else(|d| panic!("{}", catalog::render_diagnostics(&d)));
    match case.steps.into_iter().nth(1).map(|s| s.kind) {
        Some(StepKind::Expect(e)) => e,
        other => panic!("{other:?}"),
    }
}

fn pod(clique: &str, index: u32, phase: &str, deleting: bool) -> Value {
    let mut p = json!({"kind": "Pod", "metadata": {"name": format!("{clique}-{index}abc"), "uid": format!("{clique}-{index}"),
        "labels": {"grove.io/podclique": clique, "grove.io/podclique-pod-index": index.to_string(), "app.kubernetes.io/part-of": "job"}},
        "spec": {"restartPolicy": "Never"}, "status": {"phase": phase}});
    if deleting {
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    p
}

fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    s.insert(json!({"kind": "PodCliqueSet", "metadata": {"name": "job", "uid": "pcs-1", "resourceVersion": "9",
        "managedFields": [{"manager": "x"}]},
        "status": {"conditions": [
            {"type": "Failed", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Completed", "status": "True", "reason": "CompletionCriteriaMet", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "replicaRestartCounts": [1]}}));
    s.insert(
        json!({"kind": "PodClique", "metadata": {"name": "job-0-worker", "uid": "pclq-2",
        "labels": {"grove.io/restart-attempt": "1"}},
        "status": {"conditions": [{"type": "Completed", "status": "True"}], "phase": "Completed"}}),
    );
    for i in 0..8 {
        s.insert(pod("job-0-worker", i, "Succeeded", false));
    }
    s.insert(pod("job-0-worker", 8, "Running", true));
    s.insert(json!({"kind": "Event", "metadata": {"name": "e1", "uid": "e1"}, "reason": "JobCompleted", "count": 2,
        "type": "Normal", "involvedObject": {"kind": "PodCliqueSet", "name": "job"}}));
    s
}

fn uids(
    old: &str,
    now: Option<&str>,
) -> (BTreeMap<String, String>, BTreeMap<String, Option<String>>) {
    (
        [("old".to_owned(), old.to_owned())].into_iter().collect(),
        [("old".to_owned(), now.map(str::to_owned))]
            .into_iter()
            .collect(),
    )
}

#[test]
fn a_matching_expectation_passes_and_has_no_diff() {
    let e = expectation(
        r#"      within: 10s
      objects:
        - kind: PodCliqueSet
          name: job
          conditions: {Completed: {status: "True", reason: CompletionCriteriaMet}, Failed: "False", MinAvailableBreached: absent}
          status: {replicaRestartCounts: [1]}
        - kind: PodClique
          name: job-0-worker
          labels: {grove.io/restart-attempt: "1"}
        - {kind: PodCliqueScalingGroup, name: job-0-trainer, absent: true}
        - {pod: job-0-worker/3, spec: {restartPolicy: Never}}
      pods:
        - {clique: job-0-worker, phase: Succeeded, count: 8}
        - {clique: job-0-worker, count: 9}
        - {clique: job-0-worker, active: 0}
        - {pcs: job, terminal: 8}
      recreated: [old]
      events:
        - {reason: JobCompleted, kind: PodCliqueSet, name: job, count: 2}
        - {reason: JobFailed, count: 0}
"#,
    );
    let (old, now) = uids("pclq-1", Some("pclq-2"));
    let ev = matcher::evaluate(&e, &snapshot(), &old, &now, &Vocabulary::default());
    assert!(ev.ok, "{:?}\n{}", ev.failures, ev.diff());
    assert_eq!(ev.diff(), "");
}

#[test]
fn a_failing_expectation_names_each_failure_and_diffs_only_what_was_asked() {
    let e = expectation(
        r#"      within: 10s
      objects:
        - kind: PodCliqueSet
          name: job
          conditions: {Completed: absent, Failed: "True"}
          status: {replicaRestartCounts: [0, 0]}
      pods:
        - {clique: job-0-worker, active: 8}
      recreated: [old]
      events:
        - {reason: GangRestartTriggered, kind: PodCliqueSet, name: job}
"#,
    );
    let (old, now) = uids("pclq-2", Some("pclq-2"));
    let ev = matcher::evaluate(&e, &snapshot(), &old, &now, &Vocabulary::default());
    assert!(!ev.ok);
    assert_eq!(
        ev.failures,
        [
            "PodCliqueSet job: status differs",
            "PodCliqueSet job: condition Completed is True",
            "PodCliqueSet job: condition Failed is False",
            "active pods of PodClique job-0-worker: expected 8, observed 0",
            "old: expected new uid, observed same uid",
            "event GangRestartTriggered (Warning) on PodCliqueSet job: expected \"at least 1\", observed 0",
        ]
    );
    let d = ev.diff();
    assert!(
        !d.contains("managedFields") && !d.contains("lastTransitionTime"),
        "{d}"
    );
    assert!(d.contains("-      - [-0-]\n+      - {+1+}\n"), "{d}");
    assert!(d.contains("[-'True'-]") || d.contains("{+'False'+}"), "{d}");
    assert!(d.starts_with("--- expected\n+++ observed\n"), "{d}");
}

#[test]
fn missing_restart_counts_read_as_zero() {
    let e = expectation(
        "      for: 1s\n      objects:\n        - {kind: PodCliqueSet, name: job, status: {replicaRestartCounts: [1, 0]}}\n",
    );
    let (old, now) = uids("a", Some("a"));
    let ev = matcher::evaluate(&e, &snapshot(), &old, &now, &Vocabulary::default());
    assert!(ev.ok, "{}", ev.diff());
}

#[test]
fn terminal_conditions_read_as_a_phase_under_pr_728() {
    let e = expectation(
        "      within: 1s\n      objects:\n        - {kind: PodClique, name: job-0-worker, conditions: {Completed: \"True\", Failed: absent}}\n",
    );
    let (old, now) = uids("a", Some("a"));
    let mut snap = snapshot();
    let ev = matcher::evaluate(
        &e,
        &snap,
        &old,
        &now,
        &Vocabulary::new(Revision::GrovePr728),
    );
    assert!(ev.ok, "{}", ev.diff());
    snap.objects
        .get_mut(&(Kind::PodClique, "job-0-worker".to_owned()))
        .unwrap()["status"]["phase"] = json!("Failed");
    let ev = matcher::evaluate(
        &e,
        &snap,
        &old,
        &now,
        &Vocabulary::new(Revision::GrovePr728),
    );
    assert!(!ev.ok);
    assert!(
        ev.diff()
            .contains("-      phase: [-Completed-]\n+      phase: {+Failed+}\n"),
        "{}",
        ev.diff()
    );
}

#[test]
fn diffs_render_plain_and_colour() {
    let a = json!({"status": {"conditions": [{"type": "Completed", "status": "True"}]}});
    let b = json!({"status": {"conditions": [{"type": "Completed", "status": "False"}]}});
    let plain = diff::diff_values(&a, &b, Style::Plain);
    assert!(plain.contains("-  - status: [-'True'-]"), "{plain}");
    assert!(plain.contains("+  - status: {+'False'+}"), "{plain}");
    let colour = diff::diff_values(&a, &b, Style::Color);
    assert!(colour.contains("\u{1b}[31m"), "{colour:?}");
}

#[test]
fn not_true_accepts_false_and_absence_but_never_true() {
    let e = expectation(
        r#"      within: 10s
      objects:
        - {kind: PodCliqueSet, name: job, conditions: {Failed: not-true, MinAvailableBreached: not-true}}
"#,
    );
    let (old, now) = uids("pclq-1", Some("pclq-2"));
    let vocab = Vocabulary::default();
    let ev = matcher::evaluate(&e, &snapshot(), &old, &now, &vocab);
    assert!(ev.ok, "False and absent are not True: {:?}", ev.failures);
    let e = expectation(
        r#"      within: 10s
      objects:
        - {kind: PodCliqueSet, name: job, conditions: {Completed: not-true}}
"#,
    );
    let ev = matcher::evaluate(&e, &snapshot(), &old, &now, &vocab);
    assert_eq!(
        ev.failures,
        ["PodCliqueSet job: condition Completed is True"]
    );
}

#[test]
fn null_restart_counts_read_as_zeros() {
    let e = expectation(
        r#"      within: 10s
      objects:
        - {kind: PodCliqueScalingGroup, name: job-0-trainer, status: {replicaRestartCounts: [0, 0]}}
"#,
    );
    let (old, now) = uids("pclq-1", Some("pclq-2"));
    for counts in [json!(null), json!([]), json!([0])] {
        let mut s = snapshot();
        s.insert(json!({"kind": "PodCliqueScalingGroup", "metadata": {"name": "job-0-trainer", "uid": "g"},
            "status": {"replicaRestartCounts": counts}}));
        let ev = matcher::evaluate(&e, &s, &old, &now, &Vocabulary::default());
        assert!(ev.ok, "{counts}: {:?}", ev.failures);
    }
}

#[test]
fn job_events_count_only_with_the_spec_type_and_the_words_asked_for() {
    let e = expectation(
        r#"      within: 10s
      events:
        - {reason: GangRestartTriggered, kind: PodCliqueSet, name: job, count: 1, mentions: ["1", worker]}
"#,
    );
    let (old, now) = uids("pclq-1", Some("pclq-2"));
    let judge = |type_: &str, message: &str| {
        let mut s = snapshot();
        s.insert(json!({"kind": "Event", "metadata": {"name": "e2", "uid": "e2"}, "reason": "GangRestartTriggered",
            "type": type_, "message": message, "involvedObject": {"kind": "PodCliqueSet", "name": "job"}}));
        matcher::evaluate(&e, &s, &old, &now, &Vocabulary::default()).ok
    };
    assert!(judge(
        "Warning",
        "restarting replica 1 after job-1-worker failed"
    ));
    assert!(
        !judge("Normal", "restarting replica 1 after job-1-worker failed"),
        "EV3 is a Warning"
    );
    assert!(
        !judge("Warning", "restarting replica 10 after worker failed"),
        "no replica 1"
    );
    assert!(
        !judge("Warning", "restarting replica 1 after workers failed"),
        "no child worker"
    );
}

#[test]
fn one_object_is_judged_aspect_by_aspect() {
    let e = expectation(
        r#"      within: 10s
      objects:
        - {kind: PodClique, name: job-0-worker, labels: {grove.io/restart-attempt: "2"}, conditions: {Completed: "False"}}
        - {kind: PodCliqueSet, name: job, absent: true}
        - {kind: PodClique, name: job-0-leader}
        - {pod: job-0-worker/8}
        - {kind: PodClique, name: job-0-worker}
"#,
    );
    let vocab = Vocabulary::default();
    let s = snapshot();
    let judge = |i: usize| {
        let oe = &e.objects[i];
        matcher::match_object(oe, s.subject(&oe.subject, &vocab), None, &vocab)
    };

    let worker = judge(0);
    assert!(!worker.ok);
    assert_eq!(
        worker.failures,
        [
            "PodClique job-0-worker: labels differ",
            "PodClique job-0-worker: condition Completed is True",
        ]
    );
    assert_eq!(
        worker.expected,
        json!({"metadata": {"labels": {"grove.io/restart-attempt": "2"}},
            "status": {"conditions": [{"type": "Completed", "status": "False"}]}})
    );
    assert_eq!(
        worker.observed,
        json!({"metadata": {"labels": {"grove.io/restart-attempt": "1"}},
            "status": {"conditions": [{"type": "Completed", "status": "True"}]}})
    );

    let pcs = judge(1);
    assert_eq!(
        pcs.failures,
        ["PodCliqueSet job: expected absent, but it exists"]
    );
    assert_eq!(
        (pcs.ok, pcs.expected, pcs.observed),
        (false, json!("absent"), json!({"metadata": {"name": "job"}}))
    );

    let leader = judge(2);
    assert_eq!(
        leader.failures,
        ["PodClique job-0-leader: expected to exist, but it is absent"]
    );
    assert_eq!(
        (leader.expected, leader.observed),
        (json!("present"), json!("absent"))
    );

    // The only pod with index 8 is being deleted: it reads as absent.
    let deleting = judge(3);
    assert_eq!(
        deleting.failures,
        ["pod job-0-worker/8: expected to exist, but it is absent"]
    );

    let exists = judge(4);
    assert!(exists.ok && exists.failures.is_empty());
    assert_eq!(
        (exists.expected, exists.observed),
        (json!({"exists": true}), json!({"exists": true}))
    );
}

#[test]
fn owners_are_judged_by_controller_reference_kind_name_and_current_uid() {
    let mut s = snapshot();
    let controller = |kind: &str, name: &str, uid: &str| json!([{"apiVersion": "grove.io/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": true}]);
    // The clique is controlled by the set; pods 0-5 by the clique, 6 by a clique of the same
    // name that no longer exists (an older UID), 7 by nothing.
    let mut clique = s
        .object(&catalog::ObjectRef {
            kind: Kind::PodClique,
            name: "job-0-worker".into(),
        })
        .unwrap()
        .clone();
    clique["metadata"]["ownerReferences"] = controller("PodCliqueSet", "job", "pcs-1");
    s.insert(clique);
    for i in 0..8 {
        let mut p = pod("job-0-worker", i, "Succeeded", false);
        match i {
            0..=5 => {
                p["metadata"]["ownerReferences"] = controller("PodClique", "job-0-worker", "pclq-2")
            }
            6 => {
                p["metadata"]["ownerReferences"] =
                    controller("PodClique", "job-0-worker", "pclq-old")
            }
            _ => {}
        }
        s.insert(p);
    }
    let vocab = Vocabulary::default();
    let no_uids = (BTreeMap::new(), BTreeMap::new());
    let judge =
        |body: &str| matcher::evaluate(&expectation(body), &s, &no_uids.0, &no_uids.1, &vocab);

    let ok = judge(
        "      within: 1s\n      objects:\n        - {kind: PodClique, name: job-0-worker, owner: {kind: PodCliqueSet, name: job}}\n      pods:\n        - {clique: job-0-worker, owned: 6}\n",
    );
    assert!(ok.ok, "{:?}", ok.failures);

    let wrong = judge(
        "      within: 1s\n      objects:\n        - {kind: PodClique, name: job-0-worker, owner: {kind: PodCliqueScalingGroup, name: job-0-trainer}}\n      pods:\n        - {clique: job-0-worker, owned: 8}\n",
    );
    assert_eq!(
        wrong.failures,
        [
            "PodClique job-0-worker: expected its controller owner to be PodCliqueScalingGroup job-0-trainer (uid (owner absent))",
            "pods controlled by their PodClique of PodClique job-0-worker: expected 8, observed 6",
        ]
    );
    let diff = wrong.diff();
    assert!(diff.contains("PodCliqueSet"), "{diff}");
}
