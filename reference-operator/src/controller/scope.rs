//! A PCSG or a PCS as the semantics module sees it: replicas of direct children. Building the
//! replica views from the caches and turning the decisions into one ordered plan (status
//! write, then events, then deletes, then creates: O1, O2) is the same for both parents.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use kube::runtime::controller::Action;

use super::conditions::{self, Desired};
use super::context::{Context, Guard, Kind, label};
use super::error::Error;
use super::events::Events;
use super::podclique::RESYNC;
use crate::api::{PodClique, PodCliqueScalingGroup};
use crate::names::{
    EVENT_GANG_RESTART_TRIGGERED, EVENT_JOB_COMPLETED, EVENT_JOB_FAILED,
    EVENT_RESTART_BUDGET_EXHAUSTED, LABEL_RESTART_ATTEMPT, REASON_RESTART_BUDGET_EXHAUSTED,
};
use crate::semantics::{
    AggregateDecision, AggregateView, ChildState, ChildView, ReplicaAction, ReplicaOutcome,
    ReplicaView, Terminal, evaluate_aggregate, evaluate_replica, parse_attempt_label,
    with_restart_count,
};

/// How many requests of one kind a reconcile keeps in flight.
pub(super) const PARALLEL_REQUESTS: usize = 32;

/// How soon to look again when the caches are behind a write of ours.
pub(super) const STALE_RETRY: Duration = Duration::from_millis(100);

/// An existing direct child of a replica.
#[derive(Clone, Debug)]
pub(super) enum Existing {
    /// A PodClique (in a PCSG replica, or standalone in a PCS replica).
    Clique(Arc<PodClique>),
    /// A PCSG (in a PCS replica).
    Group(Arc<PodCliqueScalingGroup>),
}

impl Existing {
    fn meta(&self) -> &ObjectMeta {
        match self {
            Existing::Clique(c) => c.meta(),
            Existing::Group(g) => g.meta(),
        }
    }

    fn conditions(&self) -> &[Condition] {
        let conditions = match self {
            Existing::Clique(c) => c.status.as_ref().and_then(|s| s.conditions.as_deref()),
            Existing::Group(g) => g.status.as_ref().and_then(|s| s.conditions.as_deref()),
        };
        conditions.unwrap_or_default()
    }

    /// A child's state is its own conditions (E13 for a PCSG).
    fn state(&self) -> ChildState {
        match conditions::terminal(self.conditions()) {
            Some(Terminal::Completed) => ChildState::Completed,
            Some(Terminal::Failed) => ChildState::Failed,
            None => ChildState::Active,
        }
    }

    fn object_ref(&self) -> ObjectReference {
        match self {
            Existing::Clique(c) => c.object_ref(&()),
            Existing::Group(g) => g.object_ref(&()),
        }
    }

    /// Object name.
    pub(super) fn name(&self) -> String {
        self.meta().name.clone().unwrap_or_default()
    }

    async fn delete(&self, ctx: &Context, guard: Guard) -> Result<bool, Error> {
        match self {
            Existing::Clique(c) => ctx.delete(c.as_ref(), guard).await,
            Existing::Group(g) => ctx.delete(g.as_ref(), guard).await,
        }
    }

    /// Whether the object is, live, still the one evaluated: same uid and resourceVersion.
    async fn unchanged(&self, ctx: &Context) -> Result<bool, Error> {
        let meta = self.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = self.name();
        let live = match self {
            Existing::Clique(_) => ctx
                .get::<PodClique>(namespace, &name)
                .await?
                .map(|c| c.metadata),
            Existing::Group(_) => ctx
                .get::<PodCliqueScalingGroup>(namespace, &name)
                .await?
                .map(|g| g.metadata),
        };
        Ok(live.is_some_and(|l| l.uid == meta.uid && l.resource_version == meta.resource_version))
    }
}

/// One direct child a replica should have, and the object that realises it, if any.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    /// Template name (clique or scaling group), as `targetNames` spells it.
    pub template: String,
    /// Object name.
    pub object_name: String,
    /// Completion-aware per the template.
    pub aware: bool,
    /// The owned object of that name.
    pub existing: Option<Existing>,
}

impl Slot {
    fn view(&self) -> ChildView {
        let existing = self.existing.as_ref();
        ChildView {
            name: self.template.clone(),
            object_name: self.object_name.clone(),
            completion_aware: self.aware,
            state: existing.map_or(ChildState::Missing, Existing::state),
            attempt: existing.map_or(Some(0), |e| {
                parse_attempt_label(label(e.meta(), LABEL_RESTART_ATTEMPT))
            }),
            breached_since: existing
                .filter(|_| !self.aware)
                .and_then(|e| conditions::breached_since(e.conditions())),
        }
    }
}

/// A PCSG or PCS with the observed children of each replica.
#[derive(Clone, Debug)]
pub(super) struct Scope {
    /// The parent is completion-aware.
    pub aware: bool,
    /// The parent's persisted terminal condition.
    pub terminal: Option<Terminal>,
    /// `replicaRestartCounts` as read.
    pub counts: Vec<i32>,
    /// The replicas recorded Completed, as read (`status.completedReplicas`).
    pub completed: Vec<i32>,
    /// `failure.maxRestarts`.
    pub max_restarts: u32,
    /// `success.targetNames`.
    pub target_names: Option<Vec<String>>,
    /// `terminationDelay` (regular gang termination, R5).
    pub termination_delay: SignedDuration,
    /// The children of each replica, in template order.
    pub replicas: Vec<Vec<Slot>>,
    /// Owned children no replica expects (a regular parent scaled in).
    pub extras: Vec<Existing>,
}

/// A gang restart to report (EV3).
#[derive(Clone, Debug)]
pub(super) struct Restart {
    pub replica: usize,
    pub count: u32,
    pub failed_child: String,
    pub related: Option<ObjectReference>,
}

/// Everything one reconcile of a parent does, in the order it must be done.
#[derive(Clone, Debug, Default)]
pub(super) struct Plan {
    /// `replicaRestartCounts` to persist (incremented entries included: O2).
    pub counts: Vec<i32>,
    /// The replicas to record Completed (those recorded before included), persisted with the
    /// decision that completes them and before its deletes (C4: a finished replica stays
    /// finished once its children are gone, and across a restart).
    pub completed: Vec<i32>,
    /// The terminal condition to persist on the parent (E11).
    pub aggregate: Option<AggregateDecision>,
    /// Gang restarts decided now (EV3).
    pub restarts: Vec<Restart>,
    /// Gang restarts persisted before, whose old attempt is still being deleted: each owes
    /// its EV3 event, should the process that persisted it have died before publishing it.
    pub finishing: Vec<Restart>,
    /// Replicas that ran out of budget now, with the failed child (EV4).
    pub exhausted: Vec<(usize, String)>,
    /// Regular gang terminations (R5), with the breached child.
    pub gang_terminations: Vec<(usize, String)>,
    /// Children to delete, after the status write.
    pub deletes: Vec<(Existing, Guard)>,
    /// Children to create per replica, after the deletes.
    pub creates: Vec<(usize, Vec<String>)>,
    /// Replicas whose children are all deleted now, to recreate at once when every delete
    /// is confirmed gone (rather than on a later look, once the cache shows them gone).
    pub recreate: Vec<(usize, Vec<String>)>,
    /// When to look again without a change.
    pub retry: Option<Duration>,
    /// The replicas' decisions that act, for the log.
    pub decisions: Vec<Decision>,
}

/// One replica's decision, as the log shows it.
#[derive(Clone, Debug)]
pub(super) struct Decision {
    replica: usize,
    row: u8,
    action: &'static str,
    /// The failed or breached child, when the action has one.
    child: Option<String>,
    /// The restart count written by a restart.
    count: Option<u32>,
    delete: Vec<String>,
    create: Vec<String>,
}

impl Scope {
    /// Evaluates every replica and the parent (pure).
    pub(super) fn plan(&self, now: Timestamp) -> Plan {
        let mut plan = Plan {
            counts: self.counts.clone(),
            completed: self.completed.clone(),
            ..Plan::default()
        };
        let mut outcomes = Vec::with_capacity(self.replicas.len());
        for (j, slots) in self.replicas.iter().enumerate() {
            let view = ReplicaView {
                completion_aware: self.aware,
                scope_terminal: self.terminal,
                recorded_completed: self.recorded_completed(j),
                restart_count: crate::semantics::restart_count(&self.counts, j),
                max_restarts: self.max_restarts,
                target_names: self.target_names.clone(),
                children: slots.iter().map(Slot::view).collect(),
                termination_delay: self.termination_delay,
                now,
            };
            let decision = evaluate_replica(&view);
            outcomes.push(decision.outcome);
            if self.aware && decision.outcome == ReplicaOutcome::Completed {
                plan.record_completed(j);
            }
            if let Some(d) = Decision::of(j, &decision.action) {
                plan.decisions.push(d);
            }
            let all: Vec<String> = slots.iter().map(|s| s.object_name.clone()).collect();
            let existing = |names: &[String], guard: Guard| {
                slots
                    .iter()
                    .filter(|s| names.contains(&s.object_name))
                    .filter_map(|s| s.existing.clone())
                    .map(move |e| (e, guard))
                    .collect::<Vec<_>>()
            };
            match decision.action {
                ReplicaAction::Maintain { create } => {
                    if !create.is_empty() {
                        plan.creates.push((j, create));
                    }
                    plan.retry_at(breach_deadline(&view));
                }
                ReplicaAction::FinishRestart { delete } => {
                    let count = crate::semantics::restart_count(&self.counts, j);
                    // The old attempt's failed child, still there: its events come before
                    // any delete.
                    let failed = slots.iter().find(|s| {
                        delete.contains(&s.object_name)
                            && s.existing
                                .as_ref()
                                .is_some_and(|e| e.state() == ChildState::Failed)
                    });
                    if count > 0 {
                        plan.finishing.push(Restart {
                            replica: j,
                            count,
                            failed_child: failed.map_or_else(
                                || "a child of the previous attempt".to_string(),
                                |s| s.template.clone(),
                            ),
                            related: failed
                                .and_then(|s| s.existing.as_ref())
                                .map(Existing::object_ref),
                        });
                    }
                    plan.deletes.extend(existing(&delete, Guard::Uid));
                    plan.recreate.push((j, all));
                }
                ReplicaAction::Restart {
                    new_count,
                    failed_child,
                    then_delete,
                } => {
                    plan.counts = with_restart_count(&plan.counts, j, new_count);
                    plan.restarts.push(Restart {
                        replica: j,
                        count: new_count,
                        related: slots
                            .iter()
                            .find(|s| s.template == failed_child)
                            .and_then(|s| s.existing.as_ref())
                            .map(Existing::object_ref),
                        failed_child,
                    });
                    plan.deletes.extend(existing(&then_delete, Guard::Uid));
                    plan.recreate.push((j, all));
                }
                ReplicaAction::Fail {
                    failed_child,
                    then_delete,
                } => {
                    plan.exhausted.push((j, failed_child));
                    plan.deletes.extend(existing(&then_delete, Guard::Version));
                }
                ReplicaAction::Complete { then_delete }
                | ReplicaAction::Cleanup {
                    delete: then_delete,
                } => {
                    plan.deletes.extend(existing(&then_delete, Guard::Version));
                }
                ReplicaAction::GangTerminate {
                    breached_child,
                    delete,
                } => {
                    plan.gang_terminations.push((j, breached_child));
                    plan.deletes.extend(existing(&delete, Guard::Live));
                    plan.recreate.push((j, all));
                }
                ReplicaAction::Wait => plan.retry_at(Some(STALE_RETRY)),
            }
        }
        let aggregate = evaluate_aggregate(&AggregateView {
            completion_aware: self.aware,
            terminal: self.terminal,
            replicas: outcomes,
        });
        plan.aggregate = (aggregate != AggregateDecision::Keep).then_some(aggregate);
        if self.aware {
            // Every replica's count is visible from the start; entries never decrease (R3).
            let width = plan.counts.len().max(self.replicas.len());
            plan.counts.resize(width, 0);
        } else {
            plan.deletes
                .extend(self.extras.iter().map(|e| (e.clone(), Guard::Uid)));
        }
        plan
    }

    /// Whether replica `j` is recorded Completed.
    pub(super) fn recorded_completed(&self, j: usize) -> bool {
        recorded_completed(&self.completed, j)
    }

    /// The terminal condition to hold after `plan`: the persisted one, or the new one.
    pub(super) fn terminal_conditions(&self, plan: &Plan) -> Vec<Desired> {
        match plan.aggregate {
            Some(AggregateDecision::Complete) => vec![Desired::completed(format!(
                "all {} replicas completed",
                self.replicas.len()
            ))],
            Some(AggregateDecision::Fail) => {
                let (j, child) = plan.exhausted.first().cloned().unwrap_or_default();
                vec![Desired::failed(
                    REASON_RESTART_BUDGET_EXHAUSTED,
                    format!(
                        "replica {j} failed ({child}) after {} of {} restarts",
                        self.max_restarts, self.max_restarts
                    ),
                )]
            }
            Some(AggregateDecision::Keep) | None => Vec::new(),
        }
    }
}

/// Whether replica `j` is in a `completedReplicas` record.
pub(super) fn recorded_completed(record: &[i32], j: usize) -> bool {
    i32::try_from(j).is_ok_and(|j| record.contains(&j))
}

impl Plan {
    fn record_completed(&mut self, j: usize) {
        if let Ok(j) = i32::try_from(j)
            && !self.completed.contains(&j)
        {
            self.completed.push(j);
            self.completed.sort_unstable();
        }
    }

    fn retry_at(&mut self, after: Option<Duration>) {
        if let Some(after) = after {
            self.retry = Some(self.retry.map_or(after, |r| r.min(after)));
        }
    }
}

/// When the earliest regular breach of a replica outlasts `terminationDelay` (R5).
fn breach_deadline(view: &ReplicaView) -> Option<Duration> {
    view.children
        .iter()
        .filter_map(|c| c.breached_since)
        .map(|since| view.termination_delay - view.now.duration_since(since))
        .min()
        .map(|left| Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_millis(50))
}

/// The events of a plan whose status write has landed (EV1–EV4), and those the parent's
/// persisted state (`conditions`, as read) still owes.
pub(super) fn events<K: Resource<DynamicType = ()>>(
    parent: &K,
    conditions: &[Condition],
    plan: &Plan,
) -> Events {
    let mut events = Events::on(parent);
    let restart_note = |r: &Restart| {
        format!(
            "restarting replica {} (restart {}) after {} failed",
            r.replica, r.count, r.failed_child
        )
    };
    // Tells one restart's event from another's (the message names both).
    let restart_marker = |r: &Restart| Some(format!("replica {} (restart {})", r.replica, r.count));
    for r in &plan.restarts {
        let (note, marker) = (restart_note(r), restart_marker(r));
        events.add(
            true,
            EVENT_GANG_RESTART_TRIGGERED,
            note,
            r.related.clone(),
            marker,
        );
    }
    for r in &plan.finishing {
        let (note, marker) = (restart_note(r), restart_marker(r));
        events.owe(
            true,
            EVENT_GANG_RESTART_TRIGGERED,
            note,
            r.related.clone(),
            marker,
        );
    }
    for (j, child) in &plan.exhausted {
        let note = format!("replica {j} failed ({child}) with no restart left");
        let marker = Some(format!("replica {j} failed"));
        events.add(true, EVENT_RESTART_BUDGET_EXHAUSTED, note, None, marker);
    }
    let completed = || "every replica completed".to_string();
    let failed = || "a replica failed with its restart budget spent".to_string();
    match plan.aggregate {
        Some(AggregateDecision::Complete) => {
            events.add(false, EVENT_JOB_COMPLETED, completed(), None, None);
        }
        Some(AggregateDecision::Fail) => {
            events.add(true, EVENT_JOB_FAILED, failed(), None, None);
        }
        Some(AggregateDecision::Keep) | None => {
            // Terminal before this reconcile: its events may not have made it out.
            if let Some(message) = events.owe_terminal(conditions, completed(), |_| failed()) {
                // A PCSG or PCS fails only when a replica runs out of budget (E9, E11). Its
                // replica is not known here: any such event will do.
                events.owe(true, EVENT_RESTART_BUDGET_EXHAUSTED, message, None, None);
            }
        }
    }
    events
}

/// Whether a child the plan deletes under [`Guard::Live`] changed since it was evaluated,
/// read live before the plan's events and deletes: then neither is sent, and the parent
/// looks again. A teardown decided on a stale view (a gang termination, R5, while a leader
/// has just completed) is decided again instead of being reported or carried out in part.
pub(super) async fn stale_teardown(ctx: &Context, plan: &Plan) -> Result<bool, Error> {
    let live: Vec<Existing> = plan
        .deletes
        .iter()
        .filter(|(_, guard)| *guard == Guard::Live)
        .map(|(child, _)| child.clone())
        .collect();
    if live.is_empty() {
        return Ok(false);
    }
    let unchanged: Vec<bool> = futures::stream::iter(live)
        .map(|child| async move { child.unchanged(ctx).await })
        .buffer_unordered(PARALLEL_REQUESTS)
        .try_collect()
        .await?;
    Ok(unchanged.contains(&false))
}

/// Steps 3 and 4 of a PCS or PCSG reconcile: what `plan` deletes, then what it creates.
///
/// `open` is the live read that guards creation (C4), giving the parent as it is now when it is
/// open for new children. It is only awaited when the plan may create, and then together with
/// the deletes: neither depends on the other, and a restart waits on both. `create` gets that
/// parent and the children to create: the plan's new ones, plus its recreations once every
/// deleted child is gone.
pub(super) async fn delete_then_create<L, Created>(
    ctx: &Context,
    plan: &Plan,
    open: impl Future<Output = Result<Option<L>, Error>>,
    create: impl FnOnce(L, Vec<(usize, Vec<String>)>) -> Created,
) -> Result<Action, Error>
where
    Created: Future<Output = Result<(), Error>>,
{
    let may_create = !plan.creates.is_empty() || !plan.recreate.is_empty();
    let (deleted, open) = futures::join!(delete_all(ctx, &plan.deletes), async {
        if may_create { open.await } else { Ok(None) }
    });
    let gone = match deleted {
        Err(e) if e.is_conflict() => return Ok(Action::requeue(STALE_RETRY)),
        other => other?,
    };
    let mut creates = plan.creates.clone();
    if gone {
        creates.extend(plan.recreate.iter().cloned());
    }
    if let Some(live) = open?.filter(|_| !creates.is_empty()) {
        create(live, creates).await?;
    }
    Ok(Action::requeue(plan.retry.unwrap_or(RESYNC)))
}

/// Carries out the deletes of a plan, a few at a time; returns whether every child is gone.
async fn delete_all(ctx: &Context, deletes: &[(Existing, Guard)]) -> Result<bool, Error> {
    let gone: Vec<bool> = futures::stream::iter(deletes.to_vec())
        .map(|(child, guard)| async move { child.delete(ctx, guard).await })
        .buffer_unordered(PARALLEL_REQUESTS)
        .try_collect()
        .await?;
    Ok(gone.into_iter().all(|g| g))
}

/// Creates `objects`, a few at a time; objects that already exist are left alone.
pub(super) async fn create_all<K: Kind>(
    ctx: &Context,
    namespace: &str,
    objects: Vec<K>,
) -> Result<(), Error> {
    futures::stream::iter(objects)
        .map(|o| async move { ctx.create(namespace, &o).await.map(drop) })
        .buffer_unordered(PARALLEL_REQUESTS)
        .try_collect()
        .await
}

impl Decision {
    /// The decision to log for `action` on replica `j`; `None` when it changes nothing.
    fn of(j: usize, action: &ReplicaAction) -> Option<Decision> {
        let (row, name) = action.row();
        let mut d = Decision {
            replica: j,
            row,
            action: name,
            child: None,
            count: None,
            delete: Vec::new(),
            create: Vec::new(),
        };
        match action {
            ReplicaAction::Wait => return None,
            ReplicaAction::Maintain { create } if create.is_empty() => return None,
            ReplicaAction::Cleanup { delete } if delete.is_empty() => return None,
            ReplicaAction::Maintain { create } => d.create.clone_from(create),
            ReplicaAction::Cleanup { delete } | ReplicaAction::FinishRestart { delete } => {
                d.delete.clone_from(delete);
            }
            ReplicaAction::Complete { then_delete } => d.delete.clone_from(then_delete),
            ReplicaAction::Restart {
                new_count,
                failed_child,
                then_delete,
            } => {
                d.count = Some(*new_count);
                d.child = Some(failed_child.clone());
                d.delete.clone_from(then_delete);
            }
            ReplicaAction::Fail {
                failed_child,
                then_delete,
            } => {
                d.child = Some(failed_child.clone());
                d.delete.clone_from(then_delete);
            }
            ReplicaAction::GangTerminate {
                breached_child,
                delete,
            } => {
                d.child = Some(breached_child.clone());
                d.delete.clone_from(delete);
            }
        }
        Some(d)
    }
}

/// Logs, one line each, the decisions of `plan` on `parent`: the replica, the truth-table row
/// taken, the child that caused it, the restart count written, what it deletes and creates,
/// and a new terminal condition of the parent.
pub(super) fn log<K: Resource<DynamicType = ()>>(parent: &K, plan: &Plan) {
    let object = format!(
        "{} {}/{}",
        K::kind(&()),
        parent.meta().namespace.as_deref().unwrap_or_default(),
        parent.meta().name.as_deref().unwrap_or_default()
    );
    for d in &plan.decisions {
        tracing::info!(
            %object,
            replica = d.replica,
            row = d.row,
            action = d.action,
            child = d.child.as_deref().unwrap_or("-"),
            restart_count = ?d.count,
            delete = ?d.delete,
            create = ?d.create,
            "replica decision"
        );
    }
    if let Some(aggregate) = plan.aggregate {
        tracing::info!(%object, ?aggregate, counts = ?plan.counts, "terminal condition persisted");
    }
}

#[cfg(test)]
mod tests;
