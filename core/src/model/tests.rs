//! The model's own tests: catalog scenarios restated (each names the case it restates) and
//! the admission rules.

use std::collections::BTreeSet;

use super::*;

pub(super) fn aware(name: &str, pods: u32) -> Clique {
    Clique {
        name: name.into(),
        pods,
        completion: Some(Completion::default()),
        restart_policy: None,
        autoscaling: false,
    }
}

fn regular(name: &str, pods: u32) -> Clique {
    Clique {
        completion: None,
        ..aware(name, pods)
    }
}

fn policy(targets: Option<&[&str]>, max_restarts: Option<i32>) -> Option<Completion> {
    Some(Completion {
        target_names: targets.map(|t| t.iter().map(|s| s.to_string()).collect()),
        max_restarts,
    })
}

/// fixtures/leader-worker.yaml: group `trainer` (leader 1, worker 4), targets [leader],
/// budget 1; the PCS has no policy.
fn leader_worker(group_budget: Option<i32>, set_budget: Option<i32>) -> Shape {
    Shape {
        name: "job".into(),
        replicas: 1,
        completion: set_budget.and_then(|b| policy(None, Some(b))),
        cliques: vec![aware("leader", 1), aware("worker", 4)],
        groups: vec![Group {
            name: "trainer".into(),
            replicas: 1,
            members: vec!["leader".into(), "worker".into()],
            completion: policy(Some(&["leader"]), group_budget),
            scale_config: false,
        }],
    }
}

/// fixtures/all-ranks.yaml: one standalone clique of 8, PCS budget 2 (or as patched).
fn all_ranks(budget: i32) -> Shape {
    Shape {
        name: "job".into(),
        replicas: 1,
        completion: policy(None, Some(budget)),
        cliques: vec![aware("worker", 8)],
        groups: vec![],
    }
}

/// fixtures/single-clique.yaml: one standalone clique of 4, no PCS policy.
fn single_clique() -> Shape {
    Shape {
        name: "job".into(),
        replicas: 1,
        completion: None,
        cliques: vec![aware("worker", 4)],
        groups: vec![],
    }
}

fn exit(clique: &str, index: u32, code: i32) -> PodEvent {
    PodEvent {
        clique: clique.into(),
        index,
        change: PodChange::Exit(code),
    }
}

fn removed(clique: &str, index: u32) -> PodEvent {
    PodEvent {
        clique: clique.into(),
        index,
        change: PodChange::Removed,
    }
}

struct Run {
    model: Model,
    worlds: BTreeSet<World>,
}

impl Run {
    fn new(shape: Shape) -> Self {
        assert!(admit(&shape).is_empty(), "{:?}", admit(&shape));
        let model = Model::new(shape);
        let worlds = BTreeSet::from([model.initial()]);
        Run { model, worlds }
    }

    fn step(&mut self, events: &[PodEvent]) -> &mut Self {
        self.worlds = self.model.apply(&self.worlds, events).unwrap();
        self
    }

    fn one(&self) -> &World {
        assert_eq!(self.worlds.len(), 1, "{:#?}", self.worlds);
        self.worlds.iter().next().unwrap()
    }
}

fn events(w: &World, reason: EventReason, kind: ObjectKind, name: &str) -> u32 {
    w.events
        .get(&(reason, kind, name.to_owned()))
        .copied()
        .unwrap_or(0)
}

// cases/podclique/all-pods-succeed-completes-clique.yaml
#[test]
fn all_pods_succeeding_completes_the_clique_and_the_job() {
    let mut r = Run::new(single_clique());
    for k in 0..3 {
        r.step(&[exit("job-0-worker", k, 0)]);
        assert_eq!(r.one().cliques["job-0-worker"].cond, Cond::Running);
    }
    r.step(&[exit("job-0-worker", 3, 0)]);
    let w = r.one();
    assert_eq!(w.cliques["job-0-worker"].cond, Cond::Completed);
    assert_eq!(w.set, Cond::Completed);
    assert_eq!(
        events(
            w,
            EventReason::JobCompleted,
            ObjectKind::Clique,
            "job-0-worker"
        ),
        1
    );
    assert_eq!(
        events(w, EventReason::JobCompleted, ObjectKind::Set, "job"),
        1
    );
    // C1, C7: the succeeded pods stay.
    assert_eq!(w.cliques["job-0-worker"].pods.len(), 4);
}

// cases/podclique/one-pod-fails-fails-clique.yaml
#[test]
fn one_failed_pod_fails_the_clique_and_stops_the_rest() {
    let mut r = Run::new(single_clique());
    r.step(&[exit("job-0-worker", 1, 3)]);
    let w = r.one();
    let c = &w.cliques["job-0-worker"];
    assert_eq!(c.cond, Cond::Failed);
    // C1: active pods deleted, the failed one stays.
    assert_eq!(c.pods.len(), 1);
    assert_eq!(c.pods[&1], PodState::Failed);
    // Budget 0 (no PCS policy): the job fails.
    assert_eq!(w.set, Cond::Failed);
    assert_eq!(
        events(
            w,
            EventReason::RestartBudgetExhausted,
            ObjectKind::Set,
            "job"
        ),
        1
    );
}

// cases/podclique/evicted-pod-fails-clique.yaml (and node-loss-fails-clique.yaml)
#[test]
fn a_vanished_pod_fails_the_clique_and_is_not_replaced() {
    let mut r = Run::new(single_clique());
    r.step(&[removed("job-0-worker", 2)]);
    let w = r.one();
    let c = &w.cliques["job-0-worker"];
    assert_eq!(c.cond, Cond::Failed);
    assert!(c.pods.is_empty(), "{c:?}");
    assert_eq!(w.set, Cond::Failed);
}

// cases/all-ranks/one-failure-restarts-gang.yaml
#[test]
fn one_failure_restarts_the_gang_with_a_fresh_attempt() {
    let mut r = Run::new(all_ranks(2));
    r.step(&[exit("job-0-worker", 3, 1)]);
    let w = r.one();
    assert_eq!(w.set_replicas[0].restarts, 1);
    assert_eq!(w.set, Cond::Running);
    let c = &w.cliques["job-0-worker"];
    assert_eq!(c.cond, Cond::Running);
    assert_eq!(c.pods.len(), 8);
    assert!(c.pods.values().all(|p| *p == PodState::Active));
    assert_eq!(w.incarnations["job-0-worker"], 2);
    assert_eq!(
        events(w, EventReason::GangRestartTriggered, ObjectKind::Set, "job"),
        1
    );
    assert_eq!(
        events(
            w,
            EventReason::JobFailed,
            ObjectKind::Clique,
            "job-0-worker"
        ),
        1
    );
}

// cases/all-ranks/budget-exhausted-fails-job.yaml
#[test]
fn the_failure_after_the_budget_fails_the_job() {
    let mut r = Run::new(all_ranks(2));
    r.step(&[exit("job-0-worker", 0, 1)])
        .step(&[exit("job-0-worker", 1, 1)])
        .step(&[exit("job-0-worker", 2, 1)]);
    let w = r.one();
    assert_eq!(w.set_replicas[0].restarts, 2);
    assert_eq!(w.set, Cond::Failed);
    assert_eq!(w.incarnations["job-0-worker"], 3);
    assert_eq!(
        events(w, EventReason::GangRestartTriggered, ObjectKind::Set, "job"),
        2
    );
    assert_eq!(
        events(
            w,
            EventReason::RestartBudgetExhausted,
            ObjectKind::Set,
            "job"
        ),
        1
    );
}

// cases/all-ranks/whole-clique-failing-at-once-restarts-once.yaml
#[test]
fn a_whole_clique_failing_at_once_restarts_once() {
    let mut r = Run::new(all_ranks(2));
    let all: Vec<_> = (0..8).map(|k| exit("job-0-worker", k, 1)).collect();
    r.step(&all);
    assert_eq!(r.one().set_replicas[0].restarts, 1);
}

// cases/leader-driven/leader-completes-while-workers-run.yaml
#[test]
fn the_leader_completing_completes_the_group_and_stops_the_workers() {
    let mut r = Run::new(leader_worker(Some(1), None));
    r.step(&[exit("job-0-trainer-0-leader", 0, 0)]);
    let w = r.one();
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Completed);
    assert_eq!(w.set, Cond::Completed);
    // C2: the running workers' PodClique is deleted.
    assert!(!w.cliques.contains_key("job-0-trainer-0-worker"));
    assert_eq!(
        w.cliques["job-0-trainer-0-leader"].pods[&0],
        PodState::Succeeded
    );
}

// cases/leader-driven/workers-completing-do-not-complete-group.yaml
#[test]
fn workers_completing_do_not_complete_the_group() {
    let mut r = Run::new(leader_worker(Some(1), None));
    for k in 0..4 {
        r.step(&[exit("job-0-trainer-0-worker", k, 0)]);
    }
    let w = r.one();
    assert_eq!(w.cliques["job-0-trainer-0-worker"].cond, Cond::Completed);
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Running);
    assert_eq!(w.set, Cond::Running);
}

// cases/leader-driven/worker-fails-first-consumes-budget.yaml
#[test]
fn a_worker_failing_first_consumes_the_group_budget() {
    let mut r = Run::new(leader_worker(Some(1), None));
    r.step(&[exit("job-0-trainer-0-worker", 1, 1)]);
    let w = r.one();
    assert_eq!(w.groups["job-0-trainer"].replicas[0].restarts, 1);
    assert_eq!(w.incarnations["job-0-trainer-0-leader"], 2);
    assert_eq!(w.incarnations["job-0-trainer"], 1, "R1: the group stays");
    assert_eq!(
        events(
            w,
            EventReason::GangRestartTriggered,
            ObjectKind::Group,
            "job-0-trainer"
        ),
        1
    );
}

// cases/leader-driven/worker-fails-without-budget-fails-group.yaml
#[test]
fn a_worker_failing_without_budget_fails_group_and_job() {
    let mut r = Run::new(leader_worker(Some(0), None));
    r.step(&[exit("job-0-trainer-0-worker", 2, 1)]);
    let w = r.one();
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Failed);
    assert_eq!(w.set, Cond::Failed);
    assert!(!w.cliques.contains_key("job-0-trainer-0-leader"));
    assert_eq!(
        events(
            w,
            EventReason::RestartBudgetExhausted,
            ObjectKind::Group,
            "job-0-trainer"
        ),
        1
    );
    assert_eq!(
        events(
            w,
            EventReason::GangRestartTriggered,
            ObjectKind::Group,
            "job-0-trainer"
        ),
        0
    );
}

// cases/leader-driven/leader-and-worker-finish-together-pods-only.yaml
#[test]
fn leader_success_and_worker_failure_together_complete_or_restart_once() {
    let mut r = Run::new(leader_worker(Some(1), None));
    r.step(&[
        exit("job-0-trainer-0-leader", 0, 0),
        exit("job-0-trainer-0-worker", 3, 1),
    ]);
    let outcomes: BTreeSet<(Cond, u32)> = r
        .worlds
        .iter()
        .map(|w| {
            let g = &w.groups["job-0-trainer"];
            (g.cond, g.replicas[0].restarts)
        })
        .collect();
    assert_eq!(
        outcomes,
        BTreeSet::from([(Cond::Completed, 0), (Cond::Running, 1)])
    );
    assert!(r.worlds.iter().all(|w| w.set != Cond::Failed));
}

// cases/leader-driven/leader-and-worker-failing-together-restart-once.yaml
#[test]
fn leader_and_worker_failing_together_restart_once() {
    let mut r = Run::new(leader_worker(Some(1), None));
    r.step(&[
        exit("job-0-trainer-0-leader", 0, 1),
        exit("job-0-trainer-0-worker", 2, 1),
    ]);
    // Whether the second clique shows Failed before the restart removes it is open; the
    // restart is one either way.
    assert_eq!(r.worlds.len(), 3);
    for w in &r.worlds {
        assert_eq!(w.groups["job-0-trainer"].replicas[0].restarts, 1);
        assert_eq!(
            events(
                w,
                EventReason::GangRestartTriggered,
                ObjectKind::Group,
                "job-0-trainer"
            ),
            1
        );
    }
}

// cases/restart-scope/spent-group-budget-escalates-to-job.yaml
#[test]
fn a_spent_group_budget_escalates_to_the_job() {
    let mut r = Run::new(leader_worker(Some(1), Some(1)));
    r.step(&[exit("job-0-trainer-0-worker", 1, 1)]);
    assert_eq!(r.one().groups["job-0-trainer"].replicas[0].restarts, 1);
    r.step(&[exit("job-0-trainer-0-worker", 2, 1)]);
    let w = r.one();
    assert_eq!(w.set_replicas[0].restarts, 1);
    // R2: a recreated group starts at 0.
    assert_eq!(w.groups["job-0-trainer"].replicas[0].restarts, 0);
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Running);
    assert_eq!(w.incarnations["job-0-trainer"], 2);
    assert_eq!(
        events(
            w,
            EventReason::JobFailed,
            ObjectKind::Group,
            "job-0-trainer"
        ),
        1
    );
    r.step(&[exit("job-0-trainer-0-leader", 0, 0)]);
    let w = r.one();
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Completed);
    assert_eq!(w.set, Cond::Completed);
    assert_eq!(w.set_replicas[0].restarts, 1);
}

// cases/restart-scope/group-without-budget-escalates-until-job-budget-ends.yaml
#[test]
fn a_group_without_budget_escalates_until_the_job_budget_ends() {
    let mut r = Run::new(leader_worker(Some(0), Some(1)));
    r.step(&[exit("job-0-trainer-0-worker", 0, 1)]);
    assert_eq!(r.one().set_replicas[0].restarts, 1);
    assert_eq!(r.one().set, Cond::Running);
    r.step(&[exit("job-0-trainer-0-worker", 0, 1)]);
    let w = r.one();
    assert_eq!(w.set, Cond::Failed);
    assert_eq!(w.set_replicas[0].restarts, 1);
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Failed);
}

// cases/restart-scope/one-failed-replica-fails-the-job.yaml
#[test]
fn one_failed_set_replica_fails_the_job_and_stops_the_other() {
    let mut shape = single_clique();
    shape.replicas = 2;
    let mut r = Run::new(shape);
    r.step(&[exit("job-1-worker", 0, 1)]);
    let w = r.one();
    assert_eq!(w.set_replicas[1].cond, Cond::Failed);
    assert_eq!(w.set_replicas[0].cond, Cond::Running);
    assert_eq!(w.set, Cond::Failed);
    // C3 (or the PCS): replica 0's running clique is deleted too.
    assert!(!w.cliques.contains_key("job-0-worker"));
}

// cases/restart-scope/group-counts-restarts-per-replica.yaml
#[test]
fn group_counts_restarts_per_replica() {
    let mut shape = leader_worker(Some(2), None);
    shape.groups[0].replicas = 2;
    let mut r = Run::new(shape);
    r.step(&[exit("job-0-trainer-1-worker", 0, 1)])
        .step(&[exit("job-0-trainer-1-worker", 1, 1)]);
    let w = r.one();
    let counts: Vec<u32> = w.groups["job-0-trainer"]
        .replicas
        .iter()
        .map(|r| r.restarts)
        .collect();
    assert_eq!(counts, [0, 2]);
    assert_eq!(w.incarnations["job-0-trainer-0-leader"], 1);
    assert_eq!(w.incarnations["job-0-trainer-1-leader"], 3);
}

// cases/mixed/regular-member-cleaned-up-when-group-completes.yaml and
// cases/mixed/regular-clique-failures-are-not-job-failures.yaml
#[test]
fn regular_members_are_ignored_and_cleaned_up() {
    let shape = Shape {
        name: "job".into(),
        replicas: 1,
        completion: None,
        cliques: vec![aware("leader", 1), aware("worker", 2), regular("ps", 1)],
        groups: vec![Group {
            name: "trainer".into(),
            replicas: 1,
            members: vec!["leader".into(), "worker".into(), "ps".into()],
            completion: policy(Some(&["leader"]), Some(1)),
            scale_config: false,
        }],
    };
    let mut r = Run::new(shape);
    r.step(&[exit("job-0-trainer-0-ps", 0, 1)])
        .step(&[removed("job-0-trainer-0-ps", 0)]);
    let w = r.one();
    assert_eq!(w.groups["job-0-trainer"].replicas[0].restarts, 0);
    assert_eq!(w.cliques["job-0-trainer-0-ps"].cond, Cond::Running);
    assert_eq!(w.incarnations["job-0-trainer-0-ps"], 1);
    r.step(&[exit("job-0-trainer-0-leader", 0, 0)]);
    let w = r.one();
    assert_eq!(w.set, Cond::Completed);
    assert!(!w.cliques.contains_key("job-0-trainer-0-ps"));
}

// cases/leader-driven/group-target-completes-while-standalone-clique-fails.yaml
#[test]
fn a_standalone_failure_restarts_the_job_replica_with_a_completed_group() {
    let shape = Shape {
        name: "job".into(),
        replicas: 1,
        completion: policy(None, Some(1)),
        cliques: vec![
            aware("leader", 1),
            aware("worker", 2),
            aware("evaluator", 1),
        ],
        groups: vec![Group {
            name: "trainer".into(),
            replicas: 1,
            members: vec!["leader".into(), "worker".into()],
            completion: policy(Some(&["leader"]), None),
            scale_config: false,
        }],
    };
    let mut r = Run::new(shape);
    r.step(&[exit("job-0-trainer-0-leader", 0, 0)]);
    assert_eq!(r.one().groups["job-0-trainer"].cond, Cond::Completed);
    assert_eq!(r.one().set, Cond::Running);
    r.step(&[exit("job-0-evaluator", 0, 1)]);
    let w = r.one();
    // R2: the completed group is recreated too.
    assert_eq!(w.incarnations["job-0-trainer"], 2);
    assert_eq!(w.groups["job-0-trainer"].cond, Cond::Running);
    assert_eq!(w.set_replicas[0].restarts, 1);
}

#[test]
fn a_failed_group_in_a_failed_set_replica_leaves_its_other_replicas_open() {
    let mut shape = leader_worker(Some(0), None);
    shape.groups[0].replicas = 2;
    let mut r = Run::new(shape);
    r.step(&[exit("job-0-trainer-0-worker", 0, 1)]);
    let w = r.one();
    assert_eq!(w.set, Cond::Failed);
    assert!(w.uncertain.contains("job-0-trainer-1-leader"));
    assert!(!w.cliques.contains_key("job-0-trainer-1-worker"));
}

#[test]
fn an_event_on_a_missing_pod_is_an_error() {
    let model = Model::new(single_clique());
    let worlds = BTreeSet::from([model.initial()]);
    assert!(model.apply(&worlds, &[exit("job-0-worker", 9, 0)]).is_err());
}

#[test]
fn ordered_partitions_are_the_fubini_numbers() {
    let counts: Vec<usize> = (0..5).map(|n| ordered_partitions(n).len()).collect();
    assert_eq!(counts, [1, 1, 3, 13, 75]);
}

// cases/validation/*: each V clause restated.
#[test]
fn admission_names_each_breach() {
    let ok = leader_worker(Some(1), Some(1));
    assert!(admit(&ok).is_empty());
    let field = |s: &Shape| {
        admit(s)
            .into_iter()
            .map(|r| (r.clause, r.field))
            .collect::<Vec<_>>()
    };
    // success-on-clique-rejected.yaml
    let mut s = ok.clone();
    s.cliques[0].completion = policy(Some(&["x"]), None);
    assert_eq!(
        field(&s),
        [(
            "V1",
            "spec.template.cliques[0].spec.policy.completion.success".into()
        )]
    );
    // duplicate-target-names-rejected.yaml, empty-target-names-rejected.yaml
    for t in [&["leader", "leader"][..], &[][..], &["evaluator"][..]] {
        let mut s = ok.clone();
        s.groups[0].completion = policy(Some(t), None);
        assert_eq!(
            field(&s),
            [(
                "V2",
                "spec.template.podCliqueScalingGroups[0].policy.completion.success.targetNames"
                    .into()
            )]
        );
    }
    // target-names-naming-a-regular-clique-rejected.yaml
    let mut s = ok.clone();
    s.cliques[1].completion = None;
    s.groups[0].completion = policy(Some(&["leader", "worker"]), None);
    assert_eq!(field(&s)[0].0, "V2");
    // job-target-names-must-be-direct-children.yaml
    let mut s = ok.clone();
    s.completion = policy(Some(&["leader"]), None);
    assert_eq!(
        field(&s),
        [("V2", "spec.policy.completion.success.targetNames".into())]
    );
    // clique-max-restarts-rejected.yaml, negative-max-restarts-rejected.yaml
    let mut s = ok.clone();
    s.cliques[1].completion = policy(None, Some(2));
    assert_eq!(
        field(&s),
        [(
            "V3",
            "spec.template.cliques[1].spec.policy.completion.failure.maxRestarts".into()
        )]
    );
    let mut s = ok.clone();
    s.completion = policy(None, Some(-1));
    assert_eq!(
        field(&s),
        [("V3", "spec.policy.completion.failure.maxRestarts".into())]
    );
    // job-policy-without-job-children-rejected.yaml
    let mut s = ok.clone();
    s.cliques[0].completion = None;
    s.cliques[1].completion = None;
    s.groups[0].completion = policy(None, Some(1));
    let got = field(&s);
    assert!(got.contains(&("V4", "spec.policy.completion".into())));
    assert!(got.contains(&(
        "V4",
        "spec.template.podCliqueScalingGroups[0].policy.completion".into()
    )));
    // job-clique-restart-policy-rejected.yaml, regular-clique-restart-policy-rejected.yaml
    let mut s = ok.clone();
    s.cliques[0].restart_policy = Some(RestartPolicy::OnFailure);
    assert_eq!(field(&s)[0].0, "V5");
    s.cliques[0].restart_policy = Some(RestartPolicy::Never);
    assert!(
        field(&s).is_empty(),
        "V5: Never is what an aware clique runs"
    );
    let mut s = single_clique();
    s.cliques.push(regular("ps", 1));
    s.cliques[1].restart_policy = Some(RestartPolicy::Never);
    assert_eq!(
        field(&s),
        [(
            "V6",
            "spec.template.cliques[1].spec.podSpec.restartPolicy".into()
        )]
    );
    // autoscaling-job-clique-rejected.yaml, scaling-a-job-group-rejected.yaml
    let mut s = ok.clone();
    s.cliques[1].autoscaling = true;
    s.groups[0].scale_config = true;
    assert_eq!(
        field(&s),
        [
            (
                "V7",
                "spec.template.cliques[1].spec.autoScalingConfig".into()
            ),
            (
                "V7",
                "spec.template.podCliqueScalingGroups[0].scaleConfig".into()
            )
        ]
    );
    // empty-completion-markers-accepted.yaml (V10)
    let mut s = ok.clone();
    s.completion = Some(Completion::default());
    assert!(field(&s).is_empty());
}

/// Group `trainer` (budget 0, targets [coord]) of `coord` and `head` (aware) and `eval`
/// (regular), beside a standalone aware clique `x` when `standalone`.
fn coord_head_eval(standalone: bool) -> Shape {
    let mut cliques = vec![aware("coord", 1), aware("head", 1), regular("eval", 1)];
    if standalone {
        cliques.push(aware("x", 1));
    }
    Shape {
        name: "job".into(),
        replicas: 1,
        completion: None,
        cliques,
        groups: vec![Group {
            name: "trainer".into(),
            replicas: 1,
            members: vec!["coord".into(), "head".into(), "eval".into()],
            completion: policy(Some(&["coord"]), Some(0)),
            scale_config: false,
        }],
    }
}

// A PCSG sees its PodCliques only through their writes: the pod changes of `head` (Failed)
// and `coord` (Completed) seen together by the kubelet are two writes, and a group deciding
// from a view holding only `head`'s may fail (E9), finding `coord` Completed when it cleans up
// (C2 deletes non-terminal cliques only). Option A (E10) holds when its view has both.
#[test]
fn a_group_deciding_before_it_sees_the_target_complete_may_fail_and_keep_it() {
    let mut r = Run::new(coord_head_eval(false));
    r.step(&[
        exit("job-0-trainer-0-head", 0, 1),
        exit("job-0-trainer-0-coord", 0, 0),
    ]);
    let outcomes: BTreeSet<(Cond, Option<Cond>)> = r
        .worlds
        .iter()
        .map(|w| {
            let coord = w.cliques.get("job-0-trainer-0-coord").map(|c| c.cond);
            (w.groups["job-0-trainer"].cond, coord)
        })
        .collect();
    assert_eq!(
        outcomes,
        BTreeSet::from([
            (Cond::Completed, Some(Cond::Completed)),
            (Cond::Failed, None),
            (Cond::Failed, Some(Cond::Completed)),
        ])
    );
    // Budget 0: nothing is restarted; `head` is Failed, or was cleaned up while running
    // when the group completed from `coord` first.
    assert!(r.worlds.iter().all(|w| {
        let head = w.cliques.get("job-0-trainer-0-head").map(|c| c.cond);
        w.groups["job-0-trainer"].replicas[0].restarts == 0 && head != Some(Cond::Running)
    }));
}

// The sibling one level up (E13): a PCS sees a PCSG only through the PCSG's conditions. A
// standalone clique failing while the group's target completes reaches the PCS as the clique's
// write and the group's, in either order: the PCS may fail from a view without the group's
// Completed, and its cleanup (C3) then finds the group terminal and keeps it.
#[test]
fn a_set_deciding_before_it_sees_a_group_complete_may_fail_and_keep_it() {
    let mut r = Run::new(coord_head_eval(true));
    r.step(&[exit("job-0-x", 0, 1), exit("job-0-trainer-0-coord", 0, 0)]);
    let outcomes: BTreeSet<(Cond, Option<Cond>)> = r
        .worlds
        .iter()
        .map(|w| (w.set, w.groups.get("job-0-trainer").map(|g| g.cond)))
        .collect();
    assert!(
        outcomes.contains(&(Cond::Failed, Some(Cond::Completed))),
        "{outcomes:?}"
    );
    assert!(outcomes.contains(&(Cond::Failed, None)), "{outcomes:?}");
    // x is required (no targetNames on the PCS): the PCS can never complete.
    assert!(outcomes.iter().all(|(set, _)| *set == Cond::Failed));
}

// A lagging view changes only what a parent decides on writes that landed together, never
// what one write alone decides: one pod change at a time has one outcome.
#[test]
fn writes_one_at_a_time_have_one_outcome() {
    let mut r = Run::new(coord_head_eval(true));
    r.step(&[exit("job-0-trainer-0-coord", 0, 0)]);
    assert_eq!(r.one().groups["job-0-trainer"].cond, Cond::Completed);
    r.step(&[exit("job-0-x", 0, 1)]);
    assert_eq!(r.one().set, Cond::Failed);
    assert_eq!(r.one().groups["job-0-trainer"].cond, Cond::Completed);
}
