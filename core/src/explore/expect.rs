//! What every state the model allows agrees on, as the expectations of one `expect` step,
//! and the clauses those expectations check.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::catalog::{
    ConditionExpectation, ConditionMatch, ConditionStatus, Duration, EventExpectation, Expectation,
    ObjectExpectation, ObjectRef, ObjectState, PodCount, PodFilter, PodPhase, PodSelector,
    StepKind, Subject,
};
use crate::model::{Child, Cond, EventReason, ObjectKind, PodState, Shape, World};
use crate::vocab::{Kind, Term};

/// Whether the PodClique or PCSG `name` exists in `w`.
pub(super) fn exists(w: &World, kind: Kind, name: &str) -> bool {
    if kind == Kind::PodClique {
        w.cliques.contains_key(name)
    } else {
        w.groups.contains_key(name)
    }
}

/// Every PCSG and PodClique of the shape, with whether it is completion-aware (B1).
fn objects(shape: &Shape) -> Vec<(Kind, String, bool)> {
    let mut out = Vec::new();
    for i in 0..shape.replicas {
        for child in shape.children() {
            match child {
                Child::Clique(c) => {
                    out.push((
                        Kind::PodClique,
                        shape.standalone_name(i, &c.name),
                        c.aware(),
                    ));
                }
                Child::Group(g) => {
                    out.push((
                        Kind::PodCliqueScalingGroup,
                        shape.group_name(i, &g.name),
                        shape.group_aware(g),
                    ));
                    for j in 0..g.replicas {
                        for m in &g.members {
                            let aware = shape.clique(m).is_some_and(|c| c.aware());
                            out.push((Kind::PodClique, shape.member_name(i, &g.name, j, m), aware));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The facts every allowed state agrees on, as one `expect` step.
pub(super) struct Expect {
    objects: Vec<ObjectExpectation>,
    pods: Vec<PodCount>,
    events: Vec<EventExpectation>,
}

impl Expect {
    pub(super) fn new(shape: &Shape, worlds: &BTreeSet<World>, crashes: bool) -> Self {
        let mut objects = Vec::new();
        let mut pods = Vec::new();
        let all = |f: &dyn Fn(&World) -> bool| worlds.iter().all(f);
        // The PodCliqueSet.
        let set_conds: BTreeSet<Cond> = worlds.iter().map(|w| w.set).collect();
        let counts: BTreeSet<Vec<u32>> = worlds
            .iter()
            .map(|w| w.set_replicas.iter().map(|r| r.restarts).collect())
            .collect();
        if all(&|w| w.set_deleted) {
            objects.push(ObjectExpectation {
                subject: Subject::Object(ObjectRef {
                    kind: Kind::PodCliqueSet,
                    name: shape.name.clone(),
                }),
                state: ObjectState::Absent,
            });
        } else {
            objects.push(object(
                Kind::PodCliqueSet,
                &shape.name,
                conditions(&set_conds, true, shape.aware()),
                one(&counts),
            ));
        }
        // Every PCSG and PodClique of the shape (all exist from the start).
        let of_shape = self::objects(shape);
        let names: BTreeSet<(Kind, String)> =
            of_shape.iter().map(|(k, n, _)| (*k, n.clone())).collect();
        let count = |clique: &str, filter, count: usize| PodCount {
            scope: PodSelector::Clique(clique.to_owned()),
            filter,
            count: count as u32,
        };
        for (kind, name) in &names {
            if worlds.iter().any(|w| w.uncertain.contains(name)) {
                continue;
            }
            if all(&|w| !exists(w, *kind, name)) {
                objects.push(ObjectExpectation {
                    subject: Subject::Object(ObjectRef {
                        kind: *kind,
                        name: name.clone(),
                    }),
                    state: ObjectState::Absent,
                });
                if *kind == Kind::PodClique {
                    pods.push(count(name, PodFilter::All, 0));
                }
                continue;
            }
            if !all(&|w| exists(w, *kind, name)) {
                continue;
            }
            if *kind == Kind::PodCliqueScalingGroup {
                let conds: BTreeSet<Cond> = worlds.iter().map(|w| w.groups[name].cond).collect();
                let counts: BTreeSet<Vec<u32>> = worlds
                    .iter()
                    .map(|w| w.groups[name].replicas.iter().map(|r| r.restarts).collect())
                    .collect();
                let template = &worlds.iter().next().unwrap().groups[name].template;
                let aware = shape
                    .groups
                    .iter()
                    .find(|g| &g.name == template)
                    .is_some_and(|g| shape.group_aware(g));
                objects.push(object(
                    *kind,
                    name,
                    conditions(&conds, true, aware),
                    one(&counts),
                ));
            } else {
                let conds: BTreeSet<Cond> = worlds.iter().map(|w| w.cliques[name].cond).collect();
                let aware = worlds.iter().next().unwrap().cliques[name].aware;
                let mut c = conditions(&conds, false, aware);
                if aware {
                    // E4: never MinAvailableBreached on a completion-aware PodClique.
                    c.push(condition(
                        Term::MinAvailableBreached,
                        ConditionMatch::Absent,
                    ));
                }
                objects.push(object(*kind, name, c, None));
                let pod_sets: BTreeSet<&BTreeMap<u32, PodState>> =
                    worlds.iter().map(|w| &w.cliques[name].pods).collect();
                if let [p] = pod_sets.into_iter().collect::<Vec<_>>().as_slice() {
                    let n = |s: PodState| p.values().filter(|v| **v == s).count();
                    pods.push(count(name, PodFilter::Active, n(PodState::Active)));
                    // Active pods settle Running (bound and started) before the next action.
                    let phase = |ph| PodFilter::Phase(ph);
                    pods.push(count(name, phase(PodPhase::Running), n(PodState::Active)));
                    pods.push(count(
                        name,
                        phase(PodPhase::Succeeded),
                        n(PodState::Succeeded),
                    ));
                    pods.push(count(name, phase(PodPhase::Failed), n(PodState::Failed)));
                    pods.push(count(name, PodFilter::All, p.len()));
                    // Every pod of a settled state is the current PodClique's (C5: a restart
                    // deletes the old attempt's pods with its cliques): a pod of the clique
                    // this one replaced, still there, must not stand in for it (B3).
                    pods.push(count(name, PodFilter::Owned, p.len()));
                }
            }
        }
        // Events: on every aware object the shape has ever had.
        let mut events = Vec::new();
        let mut keys: BTreeSet<(EventReason, ObjectKind, String)> = BTreeSet::new();
        let parent_reasons = [
            EventReason::JobCompleted,
            EventReason::JobFailed,
            EventReason::GangRestartTriggered,
            EventReason::RestartBudgetExhausted,
        ];
        if shape.aware() {
            for r in parent_reasons {
                keys.insert((r, ObjectKind::Set, shape.name.clone()));
            }
        }
        for (kind, name) in &names {
            let aware_obj = of_shape
                .iter()
                .any(|(k, n, aware)| k == kind && n == name && *aware);
            if !aware_obj {
                continue;
            }
            let (reasons, k): (&[EventReason], _) = if *kind == Kind::PodClique {
                (
                    &[EventReason::JobCompleted, EventReason::JobFailed],
                    ObjectKind::Clique,
                )
            } else {
                (&parent_reasons, ObjectKind::Group)
            };
            for r in reasons {
                keys.insert((*r, k, name.clone()));
            }
        }
        for (reason, kind, name) in keys {
            let n: BTreeSet<u32> = worlds
                .iter()
                .map(|w| {
                    w.events
                        .get(&(reason, kind, name.clone()))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            let lo = *n.iter().next().unwrap();
            let exact = n.len() == 1;
            let term = match reason {
                EventReason::JobCompleted => Term::JobCompleted,
                EventReason::JobFailed => Term::JobFailed,
                EventReason::GangRestartTriggered => Term::GangRestartTriggered,
                EventReason::RestartBudgetExhausted => Term::RestartBudgetExhaustedEvent,
            };
            let kind = match kind {
                ObjectKind::Clique => Kind::PodClique,
                ObjectKind::Group => Kind::PodCliqueScalingGroup,
                ObjectKind::Set => Kind::PodCliqueSet,
            };
            // EV1/EV2 say an event is owed when an object becomes terminal, not that it is
            // sent once; EV3/EV4 are one per restart and per exhausted budget, except that a
            // crash may lose or repeat an event the spec does not make crash-safe.
            let restart_event = matches!(
                reason,
                EventReason::GangRestartTriggered | EventReason::RestartBudgetExhausted
            );
            let count = if exact && lo == 0 {
                Some(0)
            } else if exact && restart_event && !crashes {
                Some(lo)
            } else if lo >= 1 {
                None
            } else {
                continue;
            };
            events.push(EventExpectation {
                reason: term,
                kind: Some(kind),
                name: Some(name),
                count,
                mentions: Vec::new(),
            });
        }
        Expect {
            objects,
            pods,
            events,
        }
    }

    /// The `expect` step: `within` (becomes true) or `for` (stays true) `time`.
    pub(super) fn step(
        &self,
        time: Duration,
        within: bool,
        recreated: &[String],
        unchanged: &[String],
    ) -> StepKind {
        StepKind::Expect(Expectation {
            within: within.then_some(time),
            hold: (!within).then_some(time),
            objects: self.objects.clone(),
            pods: self.pods.clone(),
            recreated: recreated.to_vec(),
            unchanged: unchanged.to_vec(),
            events: self.events.clone(),
        })
    }
}

fn one<T: Clone>(set: &BTreeSet<T>) -> Option<T> {
    (set.len() == 1).then(|| set.iter().next().unwrap().clone())
}

fn condition(condition: Term, expect: ConditionMatch) -> ConditionExpectation {
    ConditionExpectation { condition, expect }
}

/// The condition expectations for an object whose allowed terminal conditions are `conds`.
fn conditions(conds: &BTreeSet<Cond>, parent: bool, aware: bool) -> Vec<ConditionExpectation> {
    use ConditionMatch::{Absent, NotTrue, Status};
    if !aware && !parent {
        // E5: a regular PodClique never carries Completed or Failed.
        return vec![
            condition(Term::Completed, Absent),
            condition(Term::Failed, Absent),
        ];
    }
    let failed = Status {
        status: ConditionStatus::True,
        reason: parent.then_some(Term::RestartBudgetExhaustedReason),
    };
    match one(conds) {
        Some(Cond::Completed) => vec![
            condition(
                Term::Completed,
                Status {
                    status: ConditionStatus::True,
                    reason: Some(Term::CompletionCriteriaMet),
                },
            ),
            condition(Term::Failed, NotTrue),
        ],
        Some(Cond::Failed) => vec![
            condition(Term::Failed, failed),
            condition(Term::Completed, NotTrue),
        ],
        _ => {
            let mut v = Vec::new();
            if !conds.contains(&Cond::Completed) {
                v.push(condition(Term::Completed, NotTrue));
            }
            if !conds.contains(&Cond::Failed) {
                v.push(condition(Term::Failed, NotTrue));
            }
            v
        }
    }
}

/// A present object with these conditions and, on a parent, these restart counts.
fn object(
    kind: Kind,
    name: &str,
    conditions: Vec<ConditionExpectation>,
    counts: Option<Vec<u32>>,
) -> ObjectExpectation {
    let status = counts
        .filter(|_| kind != Kind::PodClique)
        .map(|c| json!({"replicaRestartCounts": c}));
    ObjectExpectation {
        subject: Subject::Object(ObjectRef {
            kind,
            name: name.to_owned(),
        }),
        state: ObjectState::Present {
            conditions,
            labels: Vec::new(),
            spec: None,
            status,
            owner: None,
        },
    }
}

/// The clauses a scenario's expectations check.
pub(super) fn clauses(
    shape: &Shape,
    worlds: &[BTreeSet<World>],
    crashes: bool,
    deletes: bool,
) -> Vec<&'static str> {
    let mut c: BTreeSet<&'static str> = BTreeSet::from(["B1", "B5", "E6"]);
    let last = worlds.last().expect("at least the initial state");
    if shape.cliques.iter().any(|c| c.aware()) {
        c.insert("E4");
    }
    if shape.cliques.iter().any(|c| !c.aware()) {
        c.extend(["E5", "E12"]);
    }
    for w in last {
        for ((reason, kind, _), n) in &w.events {
            if *n == 0 {
                continue;
            }
            match (reason, kind) {
                (EventReason::JobCompleted, ObjectKind::Clique) => {
                    c.extend(["E1", "EV1", "C1"]);
                }
                (EventReason::JobFailed, ObjectKind::Clique) => {
                    c.extend(["E2", "EV2", "C1"]);
                }
                (EventReason::JobCompleted, _) => {
                    c.extend(["E7", "E11", "EV1"]);
                }
                (EventReason::JobFailed, _) => {
                    c.extend(["E9", "E11", "EV2"]);
                }
                (EventReason::GangRestartTriggered, ObjectKind::Group) => {
                    c.extend(["E8", "R1", "R3", "EV3", "C5"]);
                }
                (EventReason::GangRestartTriggered, _) => {
                    c.extend(["E8", "R2", "R3", "EV3", "C5"]);
                }
                (EventReason::RestartBudgetExhausted, _) => {
                    c.extend(["E9", "EV4"]);
                }
            }
        }
        if !w.groups.is_empty() && w.set.terminal() {
            c.insert("E13");
        }
    }
    if crashes {
        c.insert("O3");
    }
    if deletes {
        // A user delete inside a terminal scope: nothing comes back (C4), and what the
        // deleted object owns goes with it (B3).
        c.extend(["B3", "C4"]);
    }
    c.into_iter().collect()
}
