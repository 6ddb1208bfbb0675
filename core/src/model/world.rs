//! One state the spec allows, and how a batch of pod changes moves it: clique evaluation
//! (E1–E3, E5), replica and parent evaluation (E7–E13), gang restarts (R1–R3, R6), cleanup
//! (C1–C5) and the events owed (EV1–EV4).
//!
//! The world is the settled state: what holds once the implementation is quiet. A batch whose
//! changes the implementation may observe in several orders yields several worlds (one per
//! order the spec leaves open), which [`Model::apply`] returns as a set.

use std::collections::{BTreeMap, BTreeSet};

use super::batch::View;
use super::shape::{Child, Shape};

/// The terminal condition of an object or replica: neither, `Completed=True` or `Failed=True`
/// (E6: never both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cond {
    /// Neither condition is True.
    Running,
    /// `Completed=True`.
    Completed,
    /// `Failed=True`.
    Failed,
}

impl Cond {
    /// Completed or Failed.
    pub fn terminal(self) -> bool {
        self != Cond::Running
    }
}

/// A pod of a PodClique, by what the spec distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodState {
    /// Pending or Running, not being deleted.
    Active,
    /// Phase Succeeded.
    Succeeded,
    /// Phase Failed.
    Failed,
}

/// The kinds of Grove object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    /// PodClique.
    Clique,
    /// PodCliqueScalingGroup.
    Group,
    /// PodCliqueSet.
    Set,
}

/// The job events (EV1–EV4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventReason {
    /// `JobCompleted` (EV1).
    JobCompleted,
    /// `JobFailed` (EV2).
    JobFailed,
    /// `GangRestartTriggered` (EV3).
    GangRestartTriggered,
    /// `RestartBudgetExhausted` (EV4).
    RestartBudgetExhausted,
}

/// A PodClique object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CliqueState {
    /// Its template's name.
    pub template: String,
    /// Completion-aware (its template has `policy.completion`).
    pub aware: bool,
    /// Its terminal condition (always Running for a regular clique: E5).
    pub cond: Cond,
    /// Its existing pods by index.
    pub pods: BTreeMap<u32, PodState>,
    /// A pod of it disappeared before reaching Succeeded (E3).
    pub lost: bool,
}

/// A replica of a PCSG or of the PCS.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaState {
    /// Completed (E7), Failed (E9) or neither.
    pub cond: Cond,
    /// `replicaRestartCounts[j]` (R3).
    pub restarts: u32,
}

impl ReplicaState {
    fn fresh() -> Self {
        ReplicaState {
            cond: Cond::Running,
            restarts: 0,
        }
    }
}

/// A PodCliqueScalingGroup object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupState {
    /// Its config's name.
    pub template: String,
    /// Its terminal condition (E11).
    pub cond: Cond,
    /// Its replicas.
    pub replicas: Vec<ReplicaState>,
}

/// One settled state the spec allows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct World {
    /// The PodCliqueSet's terminal condition.
    pub set: Cond,
    /// Its replicas.
    pub set_replicas: Vec<ReplicaState>,
    /// Existing PCSG objects by name.
    pub groups: BTreeMap<String, GroupState>,
    /// Existing PodClique objects by name.
    pub cliques: BTreeMap<String, CliqueState>,
    /// PodCliques that may or may not exist: the spec neither requires nor forbids their
    /// cleanup (the running replicas of a Failed PCSG inside a terminal PCS replica: C2 speaks
    /// of the failed replica, C3 of the PCS replica's non-terminal direct children only).
    pub uncertain: BTreeSet<String>,
    /// How many times each object name was created (the first creation is 1; R1, R2).
    pub incarnations: BTreeMap<String, u32>,
    /// The job events owed so far, by reason and involved object.
    pub events: BTreeMap<(EventReason, ObjectKind, String), u32>,
    /// A user deleted the PodCliqueSet (B3: nothing of it is left).
    pub set_deleted: bool,
}

/// What happens to one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodChange {
    /// Its containers exit with this code: Succeeded (0) or Failed under `restartPolicy: Never`
    /// (V5); a regular pod's container restarts and the pod stays active.
    Exit(i32),
    /// It disappears (eviction, preemption, delete, force delete, node loss), with or
    /// without showing phase Failed first: either way E2 or E3 fails an aware clique, and a
    /// regular clique replaces it (B4).
    Removed,
}

/// A change to the pod with `index` of PodClique `clique`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodEvent {
    /// PodClique name.
    pub clique: String,
    /// `grove.io/podclique-pod-index`.
    pub index: u32,
    /// What happens.
    pub change: PodChange,
}

/// The model of one job shape.
#[derive(Debug, Clone)]
pub struct Model {
    pub(super) shape: Shape,
}

/// Where a PodClique sits.
#[derive(Debug, Clone, Copy)]
struct Slot<'a> {
    set_replica: u32,
    group: Option<(&'a str, u32)>,
}

impl Model {
    /// The model of `shape`, which must be admitted ([`admit`](super::admit) returns nothing).
    pub fn new(shape: Shape) -> Self {
        Model { shape }
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The state right after creation: every child of every replica exists with all its
    /// pods active (B1, B5), nothing terminal, every count 0.
    pub fn initial(&self) -> World {
        let mut w = World {
            set: Cond::Running,
            set_replicas: (0..self.shape.replicas)
                .map(|_| ReplicaState::fresh())
                .collect(),
            groups: BTreeMap::new(),
            cliques: BTreeMap::new(),
            uncertain: BTreeSet::new(),
            incarnations: BTreeMap::new(),
            events: BTreeMap::new(),
            set_deleted: false,
        };
        for i in 0..self.shape.replicas {
            self.create_set_replica_children(&mut w, i);
        }
        w
    }

    /// E1–E3 reached for a clique: its condition, the event owed (EV1, EV2), and C1: its
    /// active pods are deleted, its terminal pods stay.
    pub(super) fn set_clique_terminal(&self, w: &mut World, name: &str, cond: Cond) {
        let c = w.cliques.get_mut(name).expect("the clique exists");
        c.cond = cond;
        c.pods.retain(|_, p| *p != PodState::Active);
        owe(w, terminal_event(cond), ObjectKind::Clique, name);
    }

    /// Parents' evaluation until nothing changes, each parent deciding from `view`.
    pub(super) fn settle(&self, w: &mut World, view: &View) {
        loop {
            let before = w.clone();
            for i in 0..self.shape.replicas {
                self.settle_set_replica(w, i, view);
            }
            self.settle_set(w);
            if *w == before {
                break;
            }
        }
    }

    fn settle_set_replica(&self, w: &mut World, i: u32, view: &View) {
        if w.set.terminal() || w.set_replicas[i as usize].cond.terminal() {
            return;
        }
        // PCSG replicas first (R6: a PodClique in a PCSG is handled by that PCSG).
        self.settle_groups_of(w, i, view);
        self.settle_set_replica_itself(w, i, view);
    }

    /// The PCSGs' evaluation alone until nothing changes, each deciding from `view`.
    pub(super) fn settle_groups(&self, w: &mut World, view: &View) {
        loop {
            let before = w.clone();
            for i in 0..self.shape.replicas {
                if !w.set.terminal() && !w.set_replicas[i as usize].cond.terminal() {
                    self.settle_groups_of(w, i, view);
                }
            }
            if *w == before {
                break;
            }
        }
    }

    /// The PCSG replicas of PCS replica `i` (E7–E11, R1, R3, C2).
    fn settle_groups_of(&self, w: &mut World, i: u32, view: &View) {
        let shape = &self.shape;
        for g in &shape.groups {
            let gname = shape.group_name(i, &g.name);
            // E12: a regular PCSG is ignored by evaluation.
            if !shape.group_aware(g) {
                continue;
            }
            let Some(group) = w.groups.get(&gname) else {
                continue;
            };
            if group.cond.terminal() {
                continue;
            }
            let targets = g.completion.as_ref().and_then(|c| c.target_names.as_ref());
            let budget = g.completion.as_ref().map_or(0, |c| c.budget());
            for j in 0..g.replicas {
                if w.groups[&gname].replicas[j as usize].cond.terminal() {
                    continue;
                }
                let members: Vec<(String, bool, Cond)> = g
                    .members
                    .iter()
                    .map(|m| {
                        let name = shape.member_name(i, &g.name, j, m);
                        let aware = shape.clique(m).is_some_and(|c| c.aware());
                        (m.clone(), aware, view.clique_for_group(w, &name))
                    })
                    .collect();
                // Required: targetNames, else every completion-aware member (Definitions).
                let required = |m: &str, aware: bool| match targets {
                    Some(t) => t.iter().any(|n| n == m),
                    None => aware,
                };
                // E7 with E10 (Option A): the required members Completed in this observation
                // or earlier complete the replica, whatever else failed with them.
                let completed = members
                    .iter()
                    .filter(|(m, aware, _)| required(m, *aware))
                    .all(|(_, _, c)| *c == Cond::Completed);
                // E8: a failed completion-aware member, required or not.
                let failed = members
                    .iter()
                    .any(|(_, aware, c)| *aware && *c == Cond::Failed);
                if completed {
                    w.groups.get_mut(&gname).unwrap().replicas[j as usize].cond = Cond::Completed;
                    // C2: the replica's non-terminal PodCliques are deleted.
                    for m in &g.members {
                        delete_if_running(w, &shape.member_name(i, &g.name, j, m));
                    }
                } else if failed {
                    let replica = &mut w.groups.get_mut(&gname).unwrap().replicas[j as usize];
                    if replica.restarts < budget {
                        // E8, R1, R3: one gang restart, counted; every PodClique of replica j
                        // is recreated from the template (C5: terminal pods included); EV3.
                        replica.restarts += 1;
                        owe(
                            w,
                            EventReason::GangRestartTriggered,
                            ObjectKind::Group,
                            &gname,
                        );
                        for m in &g.members {
                            self.create_clique(w, shape.member_name(i, &g.name, j, m), m);
                        }
                    } else {
                        // E9: the budget is spent; EV4; C2 cleans up the replica.
                        replica.cond = Cond::Failed;
                        owe(
                            w,
                            EventReason::RestartBudgetExhausted,
                            ObjectKind::Group,
                            &gname,
                        );
                        for m in &g.members {
                            delete_if_running(w, &shape.member_name(i, &g.name, j, m));
                        }
                    }
                }
            }
            // E11: Completed when every replica is, Failed as soon as one is.
            let group = &w.groups[&gname];
            let cond = if group.replicas.iter().any(|r| r.cond == Cond::Failed) {
                Cond::Failed
            } else if group.replicas.iter().all(|r| r.cond == Cond::Completed) {
                Cond::Completed
            } else {
                Cond::Running
            };
            if cond.terminal() {
                w.groups.get_mut(&gname).unwrap().cond = cond;
                owe(w, terminal_event(cond), ObjectKind::Group, &gname);
            }
        }
    }

    /// PCS replica `i` over its direct children (E7–E10, E13: a PCSG counts through its own
    /// conditions; R6: a standalone clique and a PCSG are handled by the PCS).
    fn settle_set_replica_itself(&self, w: &mut World, i: u32, view: &View) {
        let shape = &self.shape;
        let targets = shape
            .completion
            .as_ref()
            .and_then(|c| c.target_names.as_ref());
        let budget = shape.completion.as_ref().map_or(0, |c| c.budget());
        let children: Vec<(String, bool, Cond)> = shape
            .children()
            .into_iter()
            .map(|child| {
                let cond = match child {
                    Child::Clique(c) => view.clique_for_set(w, &shape.standalone_name(i, &c.name)),
                    Child::Group(g) => view.group_for_set(w, &shape.group_name(i, &g.name)),
                };
                (child.name().to_owned(), shape.child_aware(child), cond)
            })
            .collect();
        if !shape.aware() {
            return;
        }
        let required = |m: &str, aware: bool| match targets {
            Some(t) => t.iter().any(|n| n == m),
            None => aware,
        };
        let completed = children
            .iter()
            .filter(|(m, aware, _)| required(m, *aware))
            .all(|(_, _, c)| *c == Cond::Completed);
        let failed = children
            .iter()
            .any(|(_, aware, c)| *aware && *c == Cond::Failed);
        if completed {
            w.set_replicas[i as usize].cond = Cond::Completed;
            self.clean_set_replica(w, i);
        } else if failed {
            let replica = &mut w.set_replicas[i as usize];
            if replica.restarts < budget {
                // R2, R3: the replica's standalone PodCliques and PCSGs are recreated, a
                // recreated PCSG with every count at 0; EV3.
                replica.restarts += 1;
                owe(
                    w,
                    EventReason::GangRestartTriggered,
                    ObjectKind::Set,
                    &shape.name,
                );
                self.delete_set_replica_children(w, i);
                self.create_set_replica_children(w, i);
            } else {
                // E9; EV4; C3.
                replica.cond = Cond::Failed;
                owe(
                    w,
                    EventReason::RestartBudgetExhausted,
                    ObjectKind::Set,
                    &shape.name,
                );
                self.clean_set_replica(w, i);
            }
        }
    }

    /// E11 for the PCS: Completed when every replica is, Failed as soon as one is; C3 (or the
    /// PCS): every non-terminal child of every replica is then deleted.
    fn settle_set(&self, w: &mut World) {
        if w.set.terminal() || !self.shape.aware() {
            return;
        }
        let cond = if w.set_replicas.iter().any(|r| r.cond == Cond::Failed) {
            Cond::Failed
        } else if w.set_replicas.iter().all(|r| r.cond == Cond::Completed) {
            Cond::Completed
        } else {
            Cond::Running
        };
        if cond.terminal() {
            w.set = cond;
            owe(w, terminal_event(cond), ObjectKind::Set, &self.shape.name);
            for i in 0..self.shape.replicas {
                self.clean_set_replica(w, i);
            }
        }
    }

    /// C3: a terminal PCS replica's non-terminal PodCliques and PCSGs are deleted. A terminal
    /// PCSG stays; the PodCliques of its replicas that are still running are neither required
    /// nor forbidden to go (see [`World::uncertain`]).
    fn clean_set_replica(&self, w: &mut World, i: u32) {
        let shape = &self.shape;
        for c in shape.children() {
            match c {
                Child::Clique(c) => delete_if_running(w, &shape.standalone_name(i, &c.name)),
                Child::Group(g) => {
                    let gname = shape.group_name(i, &g.name);
                    let Some(group) = w.groups.get(&gname).cloned() else {
                        continue;
                    };
                    if !group.cond.terminal() {
                        w.groups.remove(&gname);
                        for j in 0..g.replicas {
                            for m in &g.members {
                                w.cliques.remove(&shape.member_name(i, &g.name, j, m));
                            }
                        }
                        continue;
                    }
                    for (j, r) in group.replicas.iter().enumerate() {
                        if r.cond.terminal() {
                            continue;
                        }
                        for m in &g.members {
                            let name = shape.member_name(i, &g.name, j as u32, m);
                            if w.cliques.get(&name).is_some_and(|c| !c.cond.terminal()) {
                                w.cliques.remove(&name);
                                w.uncertain.insert(name);
                            }
                        }
                    }
                }
            }
        }
    }

    /// R2, C5: every standalone PodClique and PCSG of replica i goes, terminal or not.
    fn delete_set_replica_children(&self, w: &mut World, i: u32) {
        let shape = &self.shape;
        for c in shape.children() {
            match c {
                Child::Clique(c) => {
                    w.cliques.remove(&shape.standalone_name(i, &c.name));
                }
                Child::Group(g) => {
                    w.groups.remove(&shape.group_name(i, &g.name));
                    for j in 0..g.replicas {
                        for m in &g.members {
                            let name = shape.member_name(i, &g.name, j, m);
                            w.cliques.remove(&name);
                            w.uncertain.remove(&name);
                        }
                    }
                }
            }
        }
    }

    fn create_set_replica_children(&self, w: &mut World, i: u32) {
        let shape = &self.shape;
        for c in shape.children() {
            match c {
                Child::Clique(c) => {
                    self.create_clique(w, shape.standalone_name(i, &c.name), &c.name);
                }
                Child::Group(g) => {
                    let gname = shape.group_name(i, &g.name);
                    *w.incarnations.entry(gname.clone()).or_default() += 1;
                    w.groups.insert(
                        gname,
                        GroupState {
                            template: g.name.clone(),
                            cond: Cond::Running,
                            replicas: (0..g.replicas).map(|_| ReplicaState::fresh()).collect(),
                        },
                    );
                    for j in 0..g.replicas {
                        for m in &g.members {
                            self.create_clique(w, shape.member_name(i, &g.name, j, m), m);
                        }
                    }
                }
            }
        }
    }

    /// (Re)creates a PodClique from its template with every pod active (R1, B5).
    fn create_clique(&self, w: &mut World, name: String, template: &str) {
        let t = self
            .shape
            .clique(template)
            .expect("a member names a clique");
        *w.incarnations.entry(name.clone()).or_default() += 1;
        w.cliques.insert(
            name,
            CliqueState {
                template: template.to_owned(),
                aware: t.aware(),
                cond: Cond::Running,
                pods: (0..t.pods).map(|k| (k, PodState::Active)).collect(),
                lost: false,
            },
        );
    }

    /// Where PodClique `name` sits, when it is one of the shape's.
    pub fn slot_of(&self, name: &str) -> Option<(u32, Option<(String, u32)>)> {
        self.slots()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| (s.set_replica, s.group.map(|(g, j)| (g.to_owned(), j))))
    }

    fn slots(&self) -> Vec<(String, Slot<'_>)> {
        let shape = &self.shape;
        let mut out = Vec::new();
        for i in 0..shape.replicas {
            for c in shape.children() {
                match c {
                    Child::Clique(c) => out.push((
                        shape.standalone_name(i, &c.name),
                        Slot {
                            set_replica: i,
                            group: None,
                        },
                    )),
                    Child::Group(g) => {
                        for j in 0..g.replicas {
                            for m in &g.members {
                                out.push((
                                    shape.member_name(i, &g.name, j, m),
                                    Slot {
                                        set_replica: i,
                                        group: Some((&g.name, j)),
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// E1–E3 for a completion-aware clique: Failed when a pod shows Failed or vanished before
/// Succeeded, Completed when all `replicas` pods of the attempt Succeeded.
pub(super) fn evaluate_clique(shape: &Shape, c: &CliqueState) -> Cond {
    if !c.aware {
        return Cond::Running; // E5
    }
    let want = shape.clique(&c.template).map_or(0, |t| t.pods);
    if c.lost || c.pods.values().any(|p| *p == PodState::Failed) {
        Cond::Failed
    } else if c.pods.len() as u32 == want && c.pods.values().all(|p| *p == PodState::Succeeded) {
        Cond::Completed
    } else {
        Cond::Running
    }
}

fn terminal_event(cond: Cond) -> EventReason {
    match cond {
        Cond::Completed => EventReason::JobCompleted,
        _ => EventReason::JobFailed,
    }
}

fn owe(w: &mut World, reason: EventReason, kind: ObjectKind, name: &str) {
    *w.events.entry((reason, kind, name.to_owned())).or_default() += 1;
}

/// C2/C3: a non-terminal PodClique of a terminal scope is deleted (a terminal one stays).
fn delete_if_running(w: &mut World, name: &str) {
    if w.cliques.get(name).is_some_and(|c| !c.cond.terminal()) {
        w.cliques.remove(name);
    }
}
