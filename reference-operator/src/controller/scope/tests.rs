//! From replica decisions to one ordered plan: what is persisted, deleted, created, reported.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::*;
use crate::api::PodClique;

fn now() -> Timestamp {
    Timestamp::from_second(1_000_000).expect("valid")
}

/// A PodClique of attempt `attempt` with the given condition (`None`: running).
fn clique(name: &str, attempt: u32, condition: Option<(&str, &str)>) -> Existing {
    let mut object = json!({
        "apiVersion": "grove.io/v1alpha1", "kind": "PodClique",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": "7",
                     "labels": {LABEL_RESTART_ATTEMPT: attempt.to_string()}},
        "spec": {"roleName": "r", "replicas": 1, "podSpec": {"containers": []}},
    });
    if let Some((type_, since)) = condition {
        object["status"] = json!({"conditions": [{
            "type": type_, "status": "True", "reason": "R", "message": "",
            "lastTransitionTime": since,
        }]});
    }
    Existing::Clique(Arc::new(
        serde_json::from_value::<PodClique>(object).expect("clique"),
    ))
}

fn slot(template: &str, aware: bool, existing: Option<Existing>) -> Slot {
    Slot {
        template: template.into(),
        object_name: format!("g-0-{template}"),
        aware,
        existing,
    }
}

/// A replica of attempt `attempt`: a running leader and a Failed worker.
fn leader_and_failed_worker(attempt: u32) -> Vec<Slot> {
    let failed = Some(("Failed", "2020-01-01T00:00:00Z"));
    vec![
        slot("leader", true, Some(clique("g-0-leader", attempt, None))),
        slot("worker", true, Some(clique("g-0-worker", attempt, failed))),
    ]
}

fn scope(replicas: Vec<Vec<Slot>>, counts: Vec<i32>, max_restarts: u32) -> Scope {
    Scope {
        aware: true,
        terminal: None,
        counts,
        completed: Vec::new(),
        max_restarts,
        target_names: None,
        termination_delay: SignedDuration::from_secs(30),
        replicas,
        extras: Vec::new(),
    }
}

fn deleted(plan: &Plan) -> Vec<(String, Guard)> {
    plan.deletes.iter().map(|(e, g)| (e.name(), *g)).collect()
}

#[test]
fn a_restart_persists_the_count_then_deletes_and_recreates_the_whole_replica() {
    let s = scope(vec![leader_and_failed_worker(0)], vec![], 2);
    let plan = s.plan(now());
    assert_eq!(
        plan.counts,
        vec![1],
        "O2: the increment is in the status to write"
    );
    assert_eq!(plan.restarts.len(), 1);
    assert_eq!(plan.restarts[0].failed_child, "worker");
    assert_eq!(
        plan.restarts[0]
            .related
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("g-0-worker"),
        "EV3 names the failed child"
    );
    assert_eq!(
        deleted(&plan),
        vec![
            ("g-0-leader".into(), Guard::Uid),
            ("g-0-worker".into(), Guard::Uid)
        ],
        "R1, C5: every child, terminal ones included, never a successor"
    );
    assert_eq!(
        plan.recreate,
        vec![(0, vec!["g-0-leader".into(), "g-0-worker".into()])]
    );
    assert!(plan.creates.is_empty());
    assert_eq!(plan.aggregate, None);
}

#[test]
fn a_spent_budget_fails_the_parent_and_deletes_only_what_still_runs() {
    let s = scope(vec![leader_and_failed_worker(1)], vec![1], 1);
    let plan = s.plan(now());
    assert_eq!(plan.counts, vec![1], "E9: no increment");
    assert_eq!(plan.aggregate, Some(AggregateDecision::Fail));
    assert_eq!(plan.exhausted, vec![(0, "worker".to_string())]);
    assert_eq!(
        deleted(&plan),
        vec![("g-0-leader".into(), Guard::Version)],
        "C2: a child that turned terminal since the read is looked at again"
    );
    let conditions = s.terminal_conditions(&plan);
    assert_eq!(conditions[0].type_, "Failed");
    assert_eq!(conditions[0].reason, REASON_RESTART_BUDGET_EXHAUSTED);
}

#[test]
fn a_persisted_restart_whose_deletes_were_lost_is_finished_not_counted() {
    let s = scope(
        vec![vec![
            slot("leader", true, Some(clique("g-0-leader", 0, None))),
            slot("worker", true, None),
        ]],
        vec![1],
        3,
    );
    let plan = s.plan(now());
    assert_eq!(plan.counts, vec![1], "O3");
    assert!(plan.restarts.is_empty());
    assert_eq!(deleted(&plan), vec![("g-0-leader".into(), Guard::Uid)]);
    assert_eq!(plan.recreate.len(), 1);
}

#[test]
fn a_restart_persisted_by_a_process_that_died_still_owes_its_event() {
    // Count 1 persisted, the old attempt (0) still all there: its event may never have been
    // published, so the finishing plan carries it, naming the old attempt's failed child.
    let s = scope(vec![leader_and_failed_worker(0)], vec![1], 3);
    let plan = s.plan(now());
    assert!(plan.restarts.is_empty(), "O3: not a second restart");
    assert_eq!(plan.finishing.len(), 1);
    let owed = &plan.finishing[0];
    assert_eq!((owed.replica, owed.count), (0, 1));
    assert_eq!(owed.failed_child, "worker");
    assert_eq!(
        owed.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("g-0-worker")
    );
    let Existing::Clique(parent) = clique("g", 0, None) else {
        unreachable!("a clique")
    };
    let events = events(parent.as_ref(), &[], &plan);
    let reports = events.describe();
    assert_eq!(
        reports,
        vec![(
            "GangRestartTriggered".to_string(),
            Some("replica 0 (restart 1)".to_string()),
            true
        )],
        "owed, so looked up before it is published"
    );
}

#[test]
fn a_parent_already_terminal_owes_its_terminal_events() {
    let s = scope(vec![vec![slot("worker", true, None)]], vec![0], 0);
    let plan = s.plan(now());
    let failed = serde_json::from_value::<Condition>(json!({
        "type": "Failed", "status": "True", "reason": REASON_RESTART_BUDGET_EXHAUSTED,
        "message": "replica 0 failed (worker) after 0 of 0 restarts",
        "lastTransitionTime": "2020-01-01T00:00:00Z",
    }))
    .expect("condition");
    let Existing::Clique(parent) = clique("g", 0, None) else {
        unreachable!("a clique")
    };
    let reports = events(parent.as_ref(), &[failed], &plan).describe();
    assert_eq!(
        reports,
        vec![
            ("JobFailed".to_string(), None, true),
            ("RestartBudgetExhausted".to_string(), None, true),
        ]
    );
    let completed = serde_json::from_value::<Condition>(json!({
        "type": "Completed", "status": "True", "reason": "R", "message": "",
        "lastTransitionTime": "2020-01-01T00:00:00Z",
    }))
    .expect("condition");
    let reports = events(parent.as_ref(), &[completed], &plan).describe();
    assert_eq!(reports, vec![("JobCompleted".to_string(), None, true)]);
    // A decision made now is published as such, not looked up.
    let s = scope(vec![leader_and_failed_worker(0)], vec![], 2);
    let plan = s.plan(now());
    let reports = events(parent.as_ref(), &[], &plan).describe();
    assert_eq!(
        reports,
        vec![(
            "GangRestartTriggered".to_string(),
            Some("replica 0 (restart 1)".to_string()),
            false
        )]
    );
}

#[test]
fn counts_of_every_replica_are_written_from_the_start() {
    let s = scope(
        vec![
            vec![slot("worker", true, None)],
            vec![slot("worker", true, None)],
        ],
        vec![],
        0,
    );
    let plan = s.plan(now());
    assert_eq!(plan.counts, vec![0, 0]);
    assert_eq!(plan.creates.len(), 2, "missing children are created");
}

#[test]
fn completion_of_every_replica_completes_the_parent() {
    let done = |n: &str| Some(clique(n, 0, Some(("Completed", "2020-01-01T00:00:00Z"))));
    let s = scope(
        vec![vec![slot("worker", true, done("g-0-worker"))]],
        vec![0],
        0,
    );
    let plan = s.plan(now());
    assert_eq!(plan.aggregate, Some(AggregateDecision::Complete));
    assert!(plan.deletes.is_empty(), "C1/C7: terminal children stay");
    assert_eq!(s.terminal_conditions(&plan)[0].type_, "Completed");
}

#[test]
fn a_regular_breach_is_looked_at_again_when_its_delay_runs_out_and_extras_go() {
    let since = (now() - SignedDuration::from_secs(10)).to_string();
    let mut s = scope(
        vec![vec![slot(
            "router",
            false,
            Some(clique(
                "g-0-router",
                0,
                Some(("MinAvailableBreached", since.as_str())),
            )),
        )]],
        vec![],
        0,
    );
    s.aware = false;
    s.extras = vec![clique("g-5-router", 0, None)];
    let plan = s.plan(now());
    assert!(plan.gang_terminations.is_empty());
    let retry = plan.retry.expect("a deadline");
    assert!(
        retry > Duration::from_secs(19) && retry < Duration::from_secs(21),
        "{retry:?}"
    );
    assert_eq!(deleted(&plan), vec![("g-5-router".into(), Guard::Uid)]);
    assert!(plan.counts.is_empty(), "regular parents carry no counts");

    let plan = s.plan(now() + SignedDuration::from_secs(21));
    assert_eq!(
        plan.gang_terminations,
        vec![(0, "router".to_string())],
        "R5"
    );
    assert_eq!(plan.recreate.len(), 1, "recreated under the same attempt");
}

/// C4: a replica that completed while another still runs is recorded with the decision that
/// completes it, and once a user deletes its remaining children nothing of it is created
/// again; it still counts as Completed for the parent (E11).
#[test]
fn a_completed_replica_is_recorded_and_never_run_again() {
    let done = Some(("Completed", "2020-01-01T00:00:00Z"));
    let slot_of = |j: usize, template: &str, existing: Option<Existing>| Slot {
        template: template.into(),
        object_name: format!("g-{j}-{template}"),
        aware: true,
        existing,
    };
    let running = |j: usize| {
        vec![
            slot_of(j, "leader", Some(clique(&format!("g-{j}-leader"), 0, None))),
            slot_of(j, "worker", Some(clique(&format!("g-{j}-worker"), 0, None))),
        ]
    };
    let mut s = scope(
        vec![
            vec![
                slot_of(0, "leader", Some(clique("g-0-leader", 0, done))),
                slot_of(0, "worker", Some(clique("g-0-worker", 0, None))),
            ],
            running(1),
        ],
        vec![0, 0],
        1,
    );
    s.target_names = Some(vec!["leader".into()]);
    let plan = s.plan(now());
    assert_eq!(
        plan.completed,
        vec![0],
        "recorded with the completing decision"
    );
    assert_eq!(deleted(&plan), [("g-0-worker".to_string(), Guard::Version)]);
    assert_eq!(plan.aggregate, None, "replica 1 still runs");

    // The record persisted, the worker gone (C2), then the leader deleted by a user.
    s.completed = plan.completed;
    s.replicas[0] = vec![slot_of(0, "leader", None), slot_of(0, "worker", None)];
    let plan = s.plan(now());
    assert!(plan.creates.is_empty() && plan.recreate.is_empty(), "C4");
    assert_eq!(plan.completed, vec![0]);

    // Replica 1 completes: the parent is Completed, replica 0 counting through its record.
    s.replicas[1][0] = slot_of(1, "leader", Some(clique("g-1-leader", 0, done)));
    let plan = s.plan(now());
    assert_eq!(plan.aggregate, Some(AggregateDecision::Complete));
    assert_eq!(plan.completed, vec![0, 1]);
}
