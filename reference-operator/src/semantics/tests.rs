//! Table tests for every row of the truth tables, and properties of sequences of decisions:
//! stickiness (E6), restart counting (R3), Option A (E10), budget arithmetic (E8, E9) and crash
//! safety of the restart protocol (O2, O3).

use std::collections::BTreeSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::*;
use crate::names::{
    REASON_INSUFFICIENT_READY_PODS, REASON_INSUFFICIENT_SCHEDULED_PODS,
    REASON_SCHEDULED_REPLICAS_BELOW_MIN_AVAILABLE, REASON_SUFFICIENT_READY_PODS,
};

// =============================================================================================
// Helpers.

fn pod(index: u32, phase: PodPhase) -> PodView {
    PodView {
        name: format!("p-{index}-{phase:?}").to_lowercase(),
        index,
        phase,
        deleting: false,
        scheduled: phase != PodPhase::Pending,
        ready: phase == PodPhase::Running,
    }
}

fn clique(aware: bool, replicas: u32, pods: Vec<PodView>) -> PodCliqueView {
    let created = pods.iter().map(|p| p.index).collect();
    PodCliqueView {
        completion_aware: aware,
        replicas,
        min_available: replicas,
        terminal: None,
        pods,
        created_indices: created,
        succeeded_indices: BTreeSet::new(),
    }
}

fn running(n: u32) -> Vec<PodView> {
    (0..n).map(|i| pod(i, PodPhase::Running)).collect()
}

fn now() -> Timestamp {
    Timestamp::from_second(1_000_000).expect("valid")
}

fn child(name: &str, aware: bool, state: ChildState) -> ChildView {
    ChildView {
        name: name.into(),
        object_name: format!("job-0-{name}"),
        completion_aware: aware,
        state,
        attempt: Some(0),
        breached_since: None,
    }
}

fn replica(children: Vec<ChildView>) -> ReplicaView {
    ReplicaView {
        completion_aware: children.iter().any(|c| c.completion_aware),
        scope_terminal: None,
        recorded_completed: false,
        restart_count: 0,
        max_restarts: 1,
        target_names: None,
        children,
        termination_delay: SignedDuration::from_secs(30),
        now: now(),
    }
}

fn objects(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("job-0-{n}")).collect()
}

// =============================================================================================
// Helpers on labels and counts.

#[test]
fn attempt_labels_round_trip_and_absent_reads_zero() {
    assert_eq!(parse_attempt_label(None), Some(0));
    assert_eq!(parse_attempt_label(Some(&attempt_label_value(7))), Some(7));
    assert_eq!(parse_attempt_label(Some("x")), None);
}

#[test]
fn restart_counts_read_missing_as_zero_and_never_decrease() {
    assert_eq!(restart_count(&[], 3), 0);
    assert_eq!(restart_count(&[2, -1], 1), 0);
    assert_eq!(with_restart_count(&[], 2, 1), vec![0, 0, 1]);
    assert_eq!(with_restart_count(&[3], 0, 1), vec![3]);
    assert_eq!(with_restart_count(&[3], 0, 4), vec![4]);
}

#[test]
fn pod_phases_parse_with_unknown_text_as_pending() {
    assert_eq!(PodPhase::parse(Some("Succeeded")), PodPhase::Succeeded);
    assert_eq!(PodPhase::parse(Some("Failed")), PodPhase::Failed);
    assert_eq!(PodPhase::parse(Some("Running")), PodPhase::Running);
    assert_eq!(PodPhase::parse(Some("Unknown")), PodPhase::Unknown);
    assert_eq!(PodPhase::parse(None), PodPhase::Pending);
    assert_eq!(PodPhase::parse(Some("Weird")), PodPhase::Pending);
}

// =============================================================================================
// PodClique truth table.

#[test]
fn row1_terminal_clique_only_deletes_active_pods() {
    for terminal in [Terminal::Completed, Terminal::Failed] {
        let mut view = clique(
            true,
            3,
            vec![
                pod(0, PodPhase::Succeeded),
                pod(1, PodPhase::Failed),
                pod(2, PodPhase::Running),
            ],
        );
        view.terminal = Some(terminal);
        view.created_indices.insert(3); // a lost pod after the fact changes nothing
        let d = evaluate_podclique(&view);
        assert_eq!(d.outcome, None, "E6: no second terminal condition");
        assert!(d.create.is_empty(), "C4");
        assert_eq!(
            d.delete,
            vec!["p-2-running".to_string()],
            "C1 keeps terminal pods"
        );
    }
}

#[test]
fn row2_a_failed_pod_fails_the_clique_and_active_pods_go() {
    let d = evaluate_podclique(&clique(
        true,
        3,
        vec![
            pod(0, PodPhase::Running),
            pod(1, PodPhase::Failed),
            pod(2, PodPhase::Succeeded),
        ],
    ));
    assert_eq!(
        d.outcome,
        Some(PodCliqueOutcome::Failed(FailureCause::PodFailed))
    );
    assert_eq!(d.delete, vec!["p-0-running".to_string()]);
    assert!(d.create.is_empty());
    assert_eq!(d.newly_succeeded, vec![2]);
}

#[test]
fn row3_a_vanished_pod_fails_the_clique_without_replacement() {
    let mut view = clique(
        true,
        3,
        vec![pod(0, PodPhase::Running), pod(2, PodPhase::Running)],
    );
    view.created_indices.insert(1);
    let d = evaluate_podclique(&view);
    assert_eq!(
        d.outcome,
        Some(PodCliqueOutcome::Failed(FailureCause::PodLost))
    );
    assert!(d.create.is_empty(), "E3: no replacement");
    assert_eq!(d.delete.len(), 2);
}

#[test]
fn row3_a_pod_being_deleted_is_not_lost_yet() {
    let mut evicted = pod(1, PodPhase::Running);
    evicted.deleting = true;
    let view = clique(true, 2, vec![pod(0, PodPhase::Running), evicted]);
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, None);
    assert!(d.create.is_empty() && d.delete.is_empty());
}

#[test]
fn row3_a_succeeded_pod_that_vanished_is_not_lost() {
    let mut view = clique(true, 2, vec![pod(1, PodPhase::Running)]);
    view.created_indices.insert(0);
    view.succeeded_indices.insert(0);
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, None);
    view.pods = vec![pod(1, PodPhase::Succeeded)];
    let d = evaluate_podclique(&view);
    assert_eq!(
        d.outcome,
        Some(PodCliqueOutcome::Completed),
        "E1 with a recorded success"
    );
}

#[test]
fn row3_a_never_created_index_is_created_not_lost() {
    let view = clique(true, 3, vec![pod(0, PodPhase::Running)]);
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, None);
    assert_eq!(d.create, vec![1, 2]);
}

#[test]
fn row4_all_pods_succeeded_completes_the_clique() {
    let view = clique(
        true,
        2,
        vec![pod(0, PodPhase::Succeeded), pod(1, PodPhase::Succeeded)],
    );
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, Some(PodCliqueOutcome::Completed));
    assert!(d.delete.is_empty() && d.create.is_empty());
    assert_eq!(d.newly_succeeded, vec![0, 1]);
}

#[test]
fn row4_zero_replicas_never_completes() {
    let d = evaluate_podclique(&clique(true, 0, vec![]));
    assert_eq!(d.outcome, None);
}

#[test]
fn row5_a_live_clique_removes_duplicates_and_surplus() {
    let mut dup = pod(0, PodPhase::Pending);
    dup.name = "a-dup".into();
    let view = clique(
        true,
        2,
        vec![
            pod(0, PodPhase::Running),
            dup,
            pod(1, PodPhase::Running),
            pod(5, PodPhase::Running),
        ],
    );
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, None);
    assert_eq!(
        d.delete,
        vec!["a-dup".to_string(), "p-5-running".to_string()]
    );
    assert_eq!(d.min_available_breached, Breach::Absent, "E4");
}

#[test]
fn row5_duplicates_of_one_index_and_phase_keep_the_first_name() {
    let mut first = pod(0, PodPhase::Running);
    first.name = "a".into();
    let mut second = pod(0, PodPhase::Running);
    second.name = "b".into();
    for pods in [vec![first.clone(), second.clone()], vec![second, first]] {
        let d = evaluate_podclique(&clique(true, 1, pods));
        assert_eq!(
            d.delete,
            vec!["b".to_string()],
            "the choice is deterministic"
        );
    }
}

#[test]
fn row6_regular_clique_never_terminal_and_replaces_deleted_pods() {
    let view = clique(
        false,
        3,
        vec![pod(0, PodPhase::Failed), pod(1, PodPhase::Succeeded)],
    );
    let mut view = view;
    view.created_indices.insert(2);
    let d = evaluate_podclique(&view);
    assert_eq!(d.outcome, None, "E5");
    assert_eq!(d.create, vec![2], "B4: the deleted index comes back");
    assert!(d.delete.is_empty());
}

#[test]
fn regular_min_available_breached_follows_scheduled_and_ready_pods() {
    let cases = [
        (
            vec![pod(0, PodPhase::Pending), pod(1, PodPhase::Pending)],
            Breach::Sufficient(REASON_INSUFFICIENT_SCHEDULED_PODS),
        ),
        (
            vec![pod(0, PodPhase::Running), pod(1, PodPhase::Pending)],
            Breach::Breached(REASON_SCHEDULED_REPLICAS_BELOW_MIN_AVAILABLE),
        ),
        (running(2), Breach::Sufficient(REASON_SUFFICIENT_READY_PODS)),
        (
            {
                let mut p = running(2);
                p[1].ready = false;
                p
            },
            Breach::Breached(REASON_INSUFFICIENT_READY_PODS),
        ),
    ];
    for (pods, expected) in cases {
        let d = evaluate_podclique(&clique(false, 2, pods));
        assert_eq!(d.min_available_breached, expected);
    }
}

// =============================================================================================
// Replica truth table.

#[test]
fn row1_a_child_newer_than_the_count_means_a_stale_view() {
    let mut view = replica(vec![child("leader", true, ChildState::Active)]);
    view.children[0].attempt = Some(1);
    assert_eq!(evaluate_replica(&view).action, ReplicaAction::Wait);
}

#[test]
fn row2_a_terminal_scope_only_cleans_up() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Completed),
        child("worker", true, ChildState::Failed),
        child("router", false, ChildState::Active),
        child("extra", true, ChildState::Missing),
    ]);
    view.scope_terminal = Some(Terminal::Completed);
    let d = evaluate_replica(&view);
    assert_eq!(
        d.action,
        ReplicaAction::Cleanup {
            delete: objects(&["router"])
        }
    );
    view.scope_terminal = Some(Terminal::Failed);
    view.max_restarts = 0;
    view.target_names = Some(vec!["leader".into(), "extra".into()]);
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Failed);
    assert!(matches!(d.action, ReplicaAction::Cleanup { .. }));
}

#[test]
fn row2_a_replica_recorded_completed_is_never_run_again() {
    // Completed by its leader (row 4); the parent records it with that decision.
    let mut view = replica(vec![
        child("leader", true, ChildState::Completed),
        child("worker", true, ChildState::Active),
    ]);
    view.target_names = Some(vec!["leader".into()]);
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Completed);
    assert_eq!(d.action.row().1, "complete");
    // Its children deleted since (the worker by C2, the leader by a user): the record keeps
    // it finished, nothing is created (C4), and it still counts as Completed (E11).
    view.recorded_completed = true;
    for c in &mut view.children {
        c.state = ChildState::Missing;
    }
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Completed);
    assert_eq!(d.action, ReplicaAction::Cleanup { delete: vec![] });
    // Without the record the same view is a new replica to create.
    view.recorded_completed = false;
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Running);
    assert!(matches!(d.action, ReplicaAction::Maintain { ref create } if create.len() == 2));
    // A child failing under the record restarts nothing (E10): it is only cleaned up.
    view.recorded_completed = true;
    view.children[1].state = ChildState::Failed;
    view.children[0].state = ChildState::Active;
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Completed);
    assert_eq!(
        d.action,
        ReplicaAction::Cleanup {
            delete: objects(&["leader"])
        }
    );
}

#[test]
fn row2_outcomes_under_a_terminal_scope() {
    // A regular replica shows nothing of its own.
    let mut view = replica(vec![child("router", false, ChildState::Active)]);
    view.scope_terminal = Some(Terminal::Completed);
    assert_eq!(evaluate_replica(&view).outcome, ReplicaOutcome::Running);
    // Under a Completed scope, a replica whose failure spent its budget and whose required
    // children did not complete still shows Failed.
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Failed),
    ]);
    view.scope_terminal = Some(Terminal::Completed);
    view.max_restarts = 0;
    assert_eq!(evaluate_replica(&view).outcome, ReplicaOutcome::Failed);
    // With budget left it shows Running.
    view.max_restarts = 1;
    assert_eq!(evaluate_replica(&view).outcome, ReplicaOutcome::Running);
}

#[test]
fn row4_an_aware_replica_with_only_regular_children_never_completes() {
    let mut view = replica(vec![child("router", false, ChildState::Active)]);
    view.completion_aware = true;
    let d = evaluate_replica(&view);
    assert_eq!(
        d.outcome,
        ReplicaOutcome::Running,
        "E12: nothing is required"
    );
    assert_eq!(d.action, ReplicaAction::Maintain { create: vec![] });
}

#[test]
fn row3_stale_children_are_deleted_before_anything_is_created() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Failed),
        child("worker", true, ChildState::Active),
        child("router", false, ChildState::Missing),
    ]);
    view.restart_count = 1;
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Running);
    assert_eq!(
        d.action,
        ReplicaAction::FinishRestart {
            delete: objects(&["leader", "worker"])
        },
        "O3: the persisted restart is finished, not counted again"
    );
}

#[test]
fn row3_an_unparsable_attempt_is_stale() {
    let mut view = replica(vec![child("leader", true, ChildState::Active)]);
    view.children[0].attempt = None;
    assert!(matches!(
        evaluate_replica(&view).action,
        ReplicaAction::FinishRestart { .. }
    ));
}

#[test]
fn row3_after_stale_children_are_gone_the_new_attempt_is_created() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Missing),
        child("worker", true, ChildState::Missing),
    ]);
    view.restart_count = 1;
    assert_eq!(
        evaluate_replica(&view).action,
        ReplicaAction::Maintain {
            create: objects(&["leader", "worker"])
        }
    );
}

#[test]
fn row4_required_children_completed_complete_the_replica() {
    let view = replica(vec![
        child("leader", true, ChildState::Completed),
        child("worker", true, ChildState::Completed),
        child("router", false, ChildState::Active),
    ]);
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Completed, "E7, E12");
    assert_eq!(
        d.action,
        ReplicaAction::Complete {
            then_delete: objects(&["router"])
        }
    );
}

#[test]
fn row4_option_a_same_observation_completes_without_budget() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Completed),
        child("worker", true, ChildState::Failed),
    ]);
    view.target_names = Some(vec!["leader".into()]);
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Completed, "E10");
    assert_eq!(
        d.action,
        ReplicaAction::Complete {
            then_delete: vec![]
        }
    );
}

#[test]
fn row4_a_non_required_active_child_is_cleaned_up() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Completed),
        child("worker", true, ChildState::Active),
    ]);
    view.target_names = Some(vec!["leader".into()]);
    assert_eq!(
        evaluate_replica(&view).action,
        ReplicaAction::Complete {
            then_delete: objects(&["worker"])
        }
    );
}

#[test]
fn row4_a_required_regular_child_never_completes() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("router", false, ChildState::Active),
    ]);
    view.target_names = Some(vec!["router".into()]);
    assert_eq!(evaluate_replica(&view).outcome, ReplicaOutcome::Running);
}

#[test]
fn row5_an_aware_failure_with_budget_restarts_by_one() {
    let view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Failed),
        child("router", false, ChildState::Active),
    ]);
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Running);
    assert_eq!(
        d.action,
        ReplicaAction::Restart {
            new_count: 1,
            failed_child: "worker".into(),
            then_delete: objects(&["leader", "worker", "router"]),
        },
        "E8, R1, C5: every child, terminal ones included"
    );
}

#[test]
fn row5_a_non_required_failure_before_completion_restarts() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Failed),
    ]);
    view.target_names = Some(vec!["leader".into()]);
    assert!(matches!(
        evaluate_replica(&view).action,
        ReplicaAction::Restart { new_count: 1, .. }
    ));
}

#[test]
fn row5_a_failed_pcsg_child_of_a_pcs_replica_restarts_it() {
    // R6, E13: the PCSG's own Failed condition is a failed direct child of the PCS replica.
    let view = replica(vec![
        child("trainer", true, ChildState::Failed),
        child("router", false, ChildState::Active),
    ]);
    assert!(matches!(
        evaluate_replica(&view).action,
        ReplicaAction::Restart { ref failed_child, .. } if failed_child == "trainer"
    ));
}

#[test]
fn row6_an_aware_failure_without_budget_fails_the_replica() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Failed),
        child("router", false, ChildState::Active),
    ]);
    view.restart_count = 1;
    for c in &mut view.children {
        c.attempt = Some(1);
    }
    let d = evaluate_replica(&view);
    assert_eq!(d.outcome, ReplicaOutcome::Failed, "E9");
    assert_eq!(
        d.action,
        ReplicaAction::Fail {
            failed_child: "worker".into(),
            then_delete: objects(&["leader", "router"]),
        }
    );
}

#[test]
fn row6_a_regular_failure_is_ignored() {
    let view = replica(vec![
        child("leader", true, ChildState::Active),
        child("router", false, ChildState::Failed),
    ]);
    assert_eq!(
        evaluate_replica(&view).action,
        ReplicaAction::Maintain { create: vec![] }
    );
}

#[test]
fn row7_a_regular_breach_past_the_delay_terminates_the_gang_without_budget() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("router", false, ChildState::Active),
    ]);
    view.children[1].breached_since = Some(now() - SignedDuration::from_secs(31));
    let d = evaluate_replica(&view);
    assert_eq!(
        d.action,
        ReplicaAction::GangTerminate {
            breached_child: "router".into(),
            delete: objects(&["leader", "router"]),
        },
        "R5"
    );
    view.children[1].breached_since = Some(now() - SignedDuration::from_secs(29));
    assert_eq!(
        evaluate_replica(&view).action,
        ReplicaAction::Maintain { create: vec![] }
    );
}

#[test]
fn row7_applies_to_regular_scopes_too() {
    let mut view = replica(vec![child("router", false, ChildState::Active)]);
    view.children[0].breached_since = Some(now() - SignedDuration::from_hours(5));
    assert!(!view.completion_aware);
    assert!(matches!(
        evaluate_replica(&view).action,
        ReplicaAction::GangTerminate { .. }
    ));
}

#[test]
fn row7_an_aware_failure_wins_over_a_regular_breach() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Failed),
        child("router", false, ChildState::Active),
    ]);
    view.children[1].breached_since = Some(now() - SignedDuration::from_hours(5));
    assert!(matches!(
        evaluate_replica(&view).action,
        ReplicaAction::Restart { .. }
    ));
}

#[test]
fn row8_missing_children_are_created() {
    let view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Missing),
        child("router", false, ChildState::Missing),
    ]);
    assert_eq!(
        evaluate_replica(&view).action,
        ReplicaAction::Maintain {
            create: objects(&["worker", "router"])
        }
    );
}

// =============================================================================================
// Aggregate truth table.

#[test]
fn aggregate_rows() {
    use ReplicaOutcome::{Completed, Failed, Running};
    let cases = [
        (false, None, vec![Failed], AggregateDecision::Keep),
        (
            true,
            Some(Terminal::Completed),
            vec![Failed],
            AggregateDecision::Keep,
        ),
        (
            true,
            Some(Terminal::Failed),
            vec![Completed],
            AggregateDecision::Keep,
        ),
        (true, None, vec![Completed, Failed], AggregateDecision::Fail),
        (true, None, vec![Running, Failed], AggregateDecision::Fail),
        (
            true,
            None,
            vec![Completed, Completed],
            AggregateDecision::Complete,
        ),
        (
            true,
            None,
            vec![Completed, Running],
            AggregateDecision::Keep,
        ),
        (true, None, vec![], AggregateDecision::Keep),
    ];
    for (aware, terminal, replicas, expected) in cases {
        let view = AggregateView {
            completion_aware: aware,
            terminal,
            replicas: replicas.clone(),
        };
        assert_eq!(
            evaluate_aggregate(&view),
            expected,
            "{aware} {terminal:?} {replicas:?}"
        );
    }
}

// =============================================================================================
// Properties.

fn phase() -> impl Strategy<Value = PodPhase> {
    prop_oneof![
        Just(PodPhase::Pending),
        Just(PodPhase::Running),
        Just(PodPhase::Succeeded),
        Just(PodPhase::Failed),
        Just(PodPhase::Unknown),
    ]
}

/// One thing that can happen to a pod between two observations.
#[derive(Clone, Debug)]
enum PodEvent {
    Phase(u32, PodPhase),
    Vanish(u32),
}

fn pod_event(replicas: u32) -> impl Strategy<Value = PodEvent> {
    prop_oneof![
        4 => (0..replicas, phase()).prop_map(|(i, p)| PodEvent::Phase(i, p)),
        1 => (0..replicas).prop_map(PodEvent::Vanish),
    ]
}

/// Drives one completion-aware PodClique through a random history, applying every decision as
/// a controller would (persist the outcome, record successes, create, delete).
fn simulate_podclique(replicas: u32, events: &[PodEvent]) -> Vec<Option<Terminal>> {
    let mut view = clique(true, replicas, vec![]);
    let mut history = Vec::new();
    let mut serial = 0;
    for event in events.iter().map(Some).chain(std::iter::once(None)) {
        let d = evaluate_podclique(&view);
        if let Some(outcome) = d.outcome {
            assert!(
                view.terminal.is_none(),
                "a terminal clique got a second outcome"
            );
            view.terminal = Some(match outcome {
                PodCliqueOutcome::Completed => Terminal::Completed,
                PodCliqueOutcome::Failed(_) => Terminal::Failed,
            });
        }
        view.succeeded_indices.extend(d.newly_succeeded);
        for index in d.create {
            assert!(view.terminal.is_none(), "C4: created in a terminal clique");
            assert!(
                view.created_indices.insert(index),
                "E3: index {index} created twice"
            );
            serial += 1;
            view.pods.push(PodView {
                name: format!("pod-{serial}"),
                ..pod(index, PodPhase::Pending)
            });
        }
        view.pods.retain(|p| !d.delete.contains(&p.name));
        history.push(view.terminal);
        match event {
            Some(PodEvent::Phase(i, p)) => {
                if let Some(pod) = view.pods.iter_mut().find(|x| x.index == *i) {
                    // Terminal phases are final for a pod.
                    if !pod.phase.is_terminal() {
                        pod.phase = *p;
                    }
                }
            }
            Some(PodEvent::Vanish(i)) => view.pods.retain(|x| x.index != *i),
            None => {}
        }
    }
    history
}

proptest! {
    #[test]
    fn prop_podclique_terminal_state_is_sticky(
        replicas in 1u32..5,
        events in prop::collection::vec(pod_event(4), 0..40),
    ) {
        let events: Vec<PodEvent> = events
            .into_iter()
            .filter(|e| match e { PodEvent::Phase(i, _) | PodEvent::Vanish(i) => *i < replicas })
            .collect();
        let history = simulate_podclique(replicas, &events);
        let mut seen: Option<Terminal> = None;
        for t in history {
            if let Some(prev) = seen {
                prop_assert_eq!(t, Some(prev), "E6: terminal state changed");
            }
            seen = seen.or(t);
        }
    }

    #[test]
    fn prop_podclique_never_completes_after_any_pod_failed(
        replicas in 1u32..5,
        pods in prop::collection::vec(phase(), 1..5),
    ) {
        let pods: Vec<PodView> = pods.iter().enumerate().map(|(i, p)| pod(i as u32, *p)).collect();
        let any_failed = pods.iter().any(|p| p.phase == PodPhase::Failed);
        let d = evaluate_podclique(&clique(true, replicas, pods));
        if any_failed {
            prop_assert_eq!(d.outcome, Some(PodCliqueOutcome::Failed(FailureCause::PodFailed)));
        }
        prop_assert!(d.outcome != Some(PodCliqueOutcome::Completed) || !any_failed);
    }

    #[test]
    fn prop_regular_podclique_never_terminal(
        replicas in 0u32..5,
        pods in prop::collection::vec(phase(), 0..6),
    ) {
        let pods: Vec<PodView> = pods.iter().enumerate().map(|(i, p)| pod(i as u32, *p)).collect();
        let d = evaluate_podclique(&clique(false, replicas, pods));
        prop_assert_eq!(d.outcome, None);
        prop_assert!(d.min_available_breached != Breach::Absent);
    }
}

/// What a child of the simulated replica does between two observations.
#[derive(Clone, Debug)]
enum ChildEvent {
    Complete(usize),
    Fail(usize),
    /// The controller crashes after the status write, before the deletes of this decision.
    CrashAfterWrite,
}

fn child_event() -> impl Strategy<Value = ChildEvent> {
    prop_oneof![
        3 => (0usize..3).prop_map(ChildEvent::Complete),
        3 => (0usize..3).prop_map(ChildEvent::Fail),
        1 => Just(ChildEvent::CrashAfterWrite),
    ]
}

#[derive(Debug, Default)]
struct ReplicaRun {
    counts: Vec<u32>,
    restarts: u32,
    outcome: Option<ReplicaOutcome>,
    /// Failures observed in the attempt that ended it (each attempt's first failure).
    attempts_failed: u32,
}

/// Drives one PCSG replica (leader, worker aware; router regular) through random child
/// outcomes and crashes, carrying out decisions in the documented order: the status write
/// (count or terminal) first, then deletes, then creates.
fn simulate_replica(
    max_restarts: u32,
    targets: Option<Vec<String>>,
    events: &[ChildEvent],
) -> ReplicaRun {
    let names = [("leader", true), ("worker", true), ("router", false)];
    let mut view = ReplicaView {
        completion_aware: true,
        scope_terminal: None,
        recorded_completed: false,
        restart_count: 0,
        max_restarts,
        target_names: targets,
        children: names
            .iter()
            .map(|(n, aware)| child(n, *aware, ChildState::Missing))
            .collect(),
        termination_delay: SignedDuration::from_secs(30),
        now: now(),
    };
    let mut run = ReplicaRun {
        counts: vec![0],
        ..ReplicaRun::default()
    };
    let mut crash_next = false;
    let mut attempt_had_failure = false;
    for event in events.iter().map(Some).chain([None, None, None]) {
        // Reconcile until quiet (bounded), as the controller would on each event.
        for _ in 0..6 {
            let d = evaluate_replica(&view);
            if d.outcome != ReplicaOutcome::Running && run.outcome.is_none() {
                run.outcome = Some(d.outcome);
            }
            let crash = std::mem::take(&mut crash_next);
            match d.action {
                ReplicaAction::Wait => unreachable!("the simulation never reads a stale parent"),
                ReplicaAction::Restart {
                    new_count,
                    then_delete,
                    ..
                } => {
                    assert_eq!(new_count, view.restart_count + 1, "R3: +1 per restart");
                    view.restart_count = new_count; // O2: persisted first
                    run.counts.push(new_count);
                    run.restarts += 1;
                    if attempt_had_failure {
                        run.attempts_failed += 1;
                    }
                    attempt_had_failure = false;
                    if !crash {
                        delete(&mut view, &then_delete);
                    }
                }
                ReplicaAction::FinishRestart { delete: stale } => delete(&mut view, &stale),
                ReplicaAction::Fail { then_delete, .. } => {
                    view.scope_terminal = Some(Terminal::Failed);
                    if !crash {
                        delete(&mut view, &then_delete);
                    }
                }
                ReplicaAction::Complete { then_delete } => {
                    view.scope_terminal = Some(Terminal::Completed);
                    if !crash {
                        delete(&mut view, &then_delete);
                    }
                }
                ReplicaAction::Cleanup { delete: d } => delete(&mut view, &d),
                ReplicaAction::GangTerminate { .. } => unreachable!("no regular breach here"),
                ReplicaAction::Maintain { create } => {
                    for c in view
                        .children
                        .iter_mut()
                        .filter(|c| create.contains(&c.object_name))
                    {
                        assert!(view.scope_terminal.is_none(), "C4");
                        c.state = ChildState::Active;
                        c.attempt = Some(view.restart_count);
                    }
                }
            }
        }
        match event {
            Some(ChildEvent::Complete(i))
                if view.children[*i].state == ChildState::Active
                    && view.children[*i].completion_aware =>
            {
                view.children[*i].state = ChildState::Completed;
            }
            Some(ChildEvent::Fail(i))
                if view.children[*i].state == ChildState::Active
                    && view.children[*i].completion_aware =>
            {
                view.children[*i].state = ChildState::Failed;
                attempt_had_failure = true;
            }
            Some(ChildEvent::CrashAfterWrite) => crash_next = true,
            _ => {}
        }
    }
    run
}

fn delete(view: &mut ReplicaView, names: &[String]) {
    for c in view
        .children
        .iter_mut()
        .filter(|c| names.contains(&c.object_name))
    {
        c.state = ChildState::Missing;
        c.attempt = None;
    }
}

fn targets() -> impl Strategy<Value = Option<Vec<String>>> {
    prop_oneof![
        Just(None),
        Just(Some(vec!["leader".to_string()])),
        Just(Some(vec!["worker".to_string()])),
    ]
}

proptest! {
    #[test]
    fn prop_counts_grow_by_exactly_one_and_never_exceed_the_budget(
        max_restarts in 0u32..4,
        targets in targets(),
        events in prop::collection::vec(child_event(), 0..60),
    ) {
        let run = simulate_replica(max_restarts, targets, &events);
        for pair in run.counts.windows(2) {
            prop_assert_eq!(pair[1], pair[0] + 1, "R3");
        }
        prop_assert!(run.restarts <= max_restarts, "budget: {} > {}", run.restarts, max_restarts);
        prop_assert_eq!(run.restarts, run.attempts_failed, "O3: one restart per failed attempt");
    }

    #[test]
    fn prop_failed_replica_spent_its_whole_budget(
        max_restarts in 0u32..4,
        events in prop::collection::vec(child_event(), 0..60),
    ) {
        let run = simulate_replica(max_restarts, None, &events);
        if run.outcome == Some(ReplicaOutcome::Failed) {
            prop_assert_eq!(run.restarts, max_restarts, "E9 only after exactly maxRestarts restarts");
        }
    }

    #[test]
    fn prop_option_a_required_completed_never_restarts_or_fails(
        other in prop_oneof![Just(ChildState::Active), Just(ChildState::Failed), Just(ChildState::Completed), Just(ChildState::Missing)],
        worker in prop_oneof![Just(ChildState::Active), Just(ChildState::Failed), Just(ChildState::Completed), Just(ChildState::Missing)],
        count in 0u32..3,
        max in 0u32..3,
    ) {
        let mut view = replica(vec![
            child("leader", true, ChildState::Completed),
            child("worker", true, worker),
            child("helper", true, other),
        ]);
        view.target_names = Some(vec!["leader".into()]);
        view.restart_count = count;
        view.max_restarts = max;
        for c in &mut view.children { c.attempt = Some(count); }
        let d = evaluate_replica(&view);
        prop_assert_eq!(d.outcome, ReplicaOutcome::Completed, "E10");
        let is_complete = matches!(d.action, ReplicaAction::Complete { .. });
        prop_assert!(is_complete);
    }

    #[test]
    fn prop_replica_decisions_never_create_in_a_terminal_scope(
        states in prop::collection::vec(prop_oneof![Just(ChildState::Active), Just(ChildState::Failed), Just(ChildState::Completed), Just(ChildState::Missing)], 3),
        terminal in prop_oneof![Just(Terminal::Completed), Just(Terminal::Failed)],
    ) {
        let mut view = replica(vec![
            child("leader", true, states[0]),
            child("worker", true, states[1]),
            child("router", false, states[2]),
        ]);
        view.scope_terminal = Some(terminal);
        let d = evaluate_replica(&view);
        let is_cleanup = matches!(d.action, ReplicaAction::Cleanup { .. });
        prop_assert!(is_cleanup, "C4");
    }

    #[test]
    fn prop_aggregate_failed_wins_and_is_sticky(
        replicas in prop::collection::vec(prop_oneof![Just(ReplicaOutcome::Running), Just(ReplicaOutcome::Completed), Just(ReplicaOutcome::Failed)], 0..5),
    ) {
        let fresh = evaluate_aggregate(&AggregateView { completion_aware: true, terminal: None, replicas: replicas.clone() });
        if replicas.contains(&ReplicaOutcome::Failed) {
            prop_assert_eq!(fresh, AggregateDecision::Fail);
        }
        let after_fail = evaluate_aggregate(&AggregateView { completion_aware: true, terminal: Some(Terminal::Failed), replicas });
        prop_assert_eq!(after_fail, AggregateDecision::Keep, "E6");
    }
}

#[test]
fn a_crash_between_the_count_write_and_the_deletes_never_counts_twice() {
    let mut view = replica(vec![
        child("leader", true, ChildState::Active),
        child("worker", true, ChildState::Failed),
    ]);
    let ReplicaAction::Restart { new_count, .. } = evaluate_replica(&view).action else {
        panic!("expected a restart");
    };
    // The count is persisted, then the controller dies before deleting anything (O2).
    view.restart_count = new_count;
    let again = evaluate_replica(&view);
    assert_eq!(
        again.action,
        ReplicaAction::FinishRestart {
            delete: objects(&["leader", "worker"])
        },
        "O3: the pending restart is finished, the count is not incremented again"
    );
}

// =============================================================================================
// Truth-table rows named in the decision log.

#[test]
fn podclique_rows_name_the_truth_table_row_taken() {
    let row = |view: &PodCliqueView| podclique_row(view, &evaluate_podclique(view));
    let mut terminal = clique(true, 2, running(2));
    terminal.terminal = Some(Terminal::Failed);
    assert_eq!(row(&terminal), 1);
    assert_eq!(row(&clique(true, 2, vec![pod(0, PodPhase::Failed)])), 2);
    let mut lost = clique(true, 2, vec![pod(1, PodPhase::Running)]);
    lost.created_indices.insert(0);
    assert_eq!(row(&lost), 3);
    let both = vec![pod(0, PodPhase::Succeeded), pod(1, PodPhase::Succeeded)];
    assert_eq!(row(&clique(true, 2, both)), 4);
    assert_eq!(row(&clique(true, 2, running(1))), 5);
    assert_eq!(row(&clique(false, 2, vec![pod(0, PodPhase::Failed)])), 6);
}

#[test]
fn replica_rows_name_the_truth_table_row_taken() {
    let row = |view: &ReplicaView| evaluate_replica(view).action.row();
    let mut stale = replica(vec![child("a", true, ChildState::Active)]);
    stale.children[0].attempt = Some(1);
    assert_eq!(row(&stale), (1, "wait"));
    let mut terminal = replica(vec![child("a", true, ChildState::Active)]);
    terminal.scope_terminal = Some(Terminal::Failed);
    assert_eq!(row(&terminal), (2, "cleanup"));
    let mut restarted = replica(vec![child("a", true, ChildState::Active)]);
    restarted.restart_count = 1;
    assert_eq!(row(&restarted), (3, "finish-restart"));
    assert_eq!(
        row(&replica(vec![child("a", true, ChildState::Completed)])),
        (4, "complete")
    );
    let failed = replica(vec![child("a", true, ChildState::Failed)]);
    assert_eq!(row(&failed), (5, "restart"));
    let mut spent = failed.clone();
    spent.max_restarts = 0;
    assert_eq!(row(&spent), (6, "fail"));
    let mut breached = replica(vec![
        child("a", true, ChildState::Active),
        child("r", false, ChildState::Active),
    ]);
    breached.children[1].breached_since = Some(now() - SignedDuration::from_secs(60));
    assert_eq!(row(&breached), (7, "gang-terminate"));
    assert_eq!(
        row(&replica(vec![child("a", true, ChildState::Active)])),
        (8, "maintain")
    );
}
