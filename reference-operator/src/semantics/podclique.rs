//! The PodClique scope of [`super`]: from a clique's pods and its record of created and
//! succeeded indices, its terminal condition, the pods to create and those to delete
//! ([`evaluate_podclique`]: E1–E5, C1, C4).

use std::collections::BTreeSet;

use super::{PodPhase, Terminal};

/// One pod of the current attempt of a PodClique (pods carrying an older
/// `grove.io/restart-attempt` belong to a deleted PodClique and are not part of the view).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// Pod name (pods are created with `generateName`).
    pub name: String,
    /// `grove.io/podclique-pod-index`.
    pub index: u32,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Bound to a node (`spec.nodeName` set).
    pub scheduled: bool,
    /// `Ready=True`.
    pub ready: bool,
}

impl PodView {
    /// Active: Pending, Running or Unknown, and not being deleted.
    pub fn is_active(&self) -> bool {
        !self.phase.is_terminal() && !self.deleting
    }
}

/// Everything [`evaluate_podclique`] needs about one PodClique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodCliqueView {
    /// `spec.policy.completion` is present.
    pub completion_aware: bool,
    /// `spec.replicas`.
    pub replicas: u32,
    /// `spec.minAvailable`, defaulted to `replicas`.
    pub min_available: u32,
    /// The terminal condition already persisted, if any.
    pub terminal: Option<Terminal>,
    /// Pods of the current attempt that still exist.
    pub pods: Vec<PodView>,
    /// Indices for which a pod was created in this attempt. A created index with no pod and
    /// no recorded success is a lost pod (E3); an index never created is simply still to create.
    pub created_indices: BTreeSet<u32>,
    /// Indices whose pod was observed Succeeded in this attempt, so a succeeded pod that later
    /// vanishes (node loss, C7) still counts towards completion and is not a loss.
    pub succeeded_indices: BTreeSet<u32>,
}

/// Why a PodClique failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureCause {
    /// A pod reached phase Failed (E2): reason `PodFailed`.
    PodFailed,
    /// A created pod vanished before Succeeded (E3): reason `PodLost`.
    PodLost,
}

/// A terminal condition to persist on a PodClique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodCliqueOutcome {
    /// `Completed=True`, reason `CompletionCriteriaMet` (E1).
    Completed,
    /// `Failed=True` with the cause's reason (E2, E3).
    Failed(FailureCause),
}

/// Desired `MinAvailableBreached` condition of a PodClique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Breach {
    /// The condition must not be there (completion-aware cliques, E4).
    Absent,
    /// `MinAvailableBreached=True` with the given reason.
    Breached(&'static str),
    /// `MinAvailableBreached=False` with the given reason.
    Sufficient(&'static str),
}

/// What to do with a PodClique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodCliqueDecision {
    /// New terminal condition to persist first (none when nothing changes, E6).
    pub outcome: Option<PodCliqueOutcome>,
    /// Pod indices to create (never in a terminal clique, C4; never a replacement in a
    /// completion-aware one, E3).
    pub create: Vec<u32>,
    /// Names of pods to delete gracefully (C1, C6), only after `outcome` is persisted (O1);
    /// also duplicates and surplus indices.
    pub delete: Vec<String>,
    /// Desired `MinAvailableBreached` (E4).
    pub min_available_breached: Breach,
    /// Indices observed Succeeded for the first time, to add to the record.
    pub newly_succeeded: Vec<u32>,
}

// Truth table of `evaluate_podclique` (first matching row wins):
//
// | # | aware | persisted terminal | observation                                   | outcome          | create             | delete                     | clause |
// |---|-------|--------------------|-----------------------------------------------|------------------|--------------------|----------------------------|--------|
// | 1 | any   | Completed/Failed   | anything                                      | — (sticky)       | none               | active pods                | E6 C1 C4 |
// | 2 | yes   | —                  | a pod has phase Failed                        | Failed PodFailed | none               | active pods                | E2 C1  |
// | 3 | yes   | —                  | a created index has no pod, never Succeeded   | Failed PodLost   | none               | active pods                | E3 C1  |
// | 4 | yes   | —                  | every index 0..replicas Succeeded (now/record)| Completed        | none               | active pods                | E1 C1  |
// | 5 | yes   | —                  | otherwise                                     | —                | never-created idx  | duplicates, idx ≥ replicas | E3     |
// | 6 | no    | —                  | anything                                      | — (E5)           | idx with no pod    | duplicates, idx ≥ replicas | B4 B5  |
//
// MinAvailableBreached: Absent when aware (E4); otherwise True when 0 < scheduled < minAvailable
// (ScheduledReplicasBelowMinAvailable) or scheduled ≥ minAvailable > ready
// (InsufficientReadyPods); False with InsufficientScheduledPods when nothing is scheduled yet
// (a termination would only recreate the same pending pods), else SufficientReadyPods.
// Row 2 precedes row 3: a pod seen Failed is the more precise cause.

/// Decide what to do with one PodClique (see the truth table above).
pub fn evaluate_podclique(view: &PodCliqueView) -> PodCliqueDecision {
    let active: Vec<String> = view
        .pods
        .iter()
        .filter(|p| p.is_active())
        .map(|p| p.name.clone())
        .collect();
    let newly_succeeded: Vec<u32> = view
        .pods
        .iter()
        .filter(|p| p.phase == PodPhase::Succeeded && !view.succeeded_indices.contains(&p.index))
        .map(|p| p.index)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let min_available_breached = if view.completion_aware {
        Breach::Absent
    } else {
        regular_breach(view)
    };
    let terminal = |outcome: Option<PodCliqueOutcome>| PodCliqueDecision {
        outcome,
        create: Vec::new(),
        delete: active.clone(),
        min_available_breached,
        newly_succeeded: newly_succeeded.clone(),
    };

    // Row 1: a terminal clique only cleans up (E6 stickiness, C1, C4).
    if view.terminal.is_some() {
        return terminal(None);
    }

    if view.completion_aware {
        // Row 2 (E2).
        if view.pods.iter().any(|p| p.phase == PodPhase::Failed) {
            return terminal(Some(PodCliqueOutcome::Failed(FailureCause::PodFailed)));
        }
        // Row 3 (E3): created, gone, never seen Succeeded.
        let present: BTreeSet<u32> = view.pods.iter().map(|p| p.index).collect();
        let lost = view
            .created_indices
            .iter()
            .any(|i| !present.contains(i) && !view.succeeded_indices.contains(i));
        if lost {
            return terminal(Some(PodCliqueOutcome::Failed(FailureCause::PodLost)));
        }
        // Row 4 (E1).
        let succeeded: BTreeSet<u32> = view
            .pods
            .iter()
            .filter(|p| p.phase == PodPhase::Succeeded)
            .map(|p| p.index)
            .chain(view.succeeded_indices.iter().copied())
            .collect();
        if view.replicas > 0 && (0..view.replicas).all(|i| succeeded.contains(&i)) {
            return terminal(Some(PodCliqueOutcome::Completed));
        }
        // Row 5: create what was never created; a created index is never replaced (E3).
        let create = (0..view.replicas)
            .filter(|i| !present.contains(i) && !view.created_indices.contains(i))
            .collect();
        return PodCliqueDecision {
            outcome: None,
            create,
            delete: surplus_pods(view),
            min_available_breached,
            newly_succeeded,
        };
    }

    // Row 6: regular mode (B4, B5, E5): an index is free once its pod is gone.
    let present: BTreeSet<u32> = view.pods.iter().map(|p| p.index).collect();
    PodCliqueDecision {
        outcome: None,
        create: (0..view.replicas)
            .filter(|i| !present.contains(i))
            .collect(),
        delete: surplus_pods(view),
        min_available_breached,
        newly_succeeded,
    }
}

/// The row of [`evaluate_podclique`]'s truth table that made `decision` from `view`.
pub fn podclique_row(view: &PodCliqueView, decision: &PodCliqueDecision) -> u8 {
    match (view.terminal, view.completion_aware, decision.outcome) {
        (Some(_), _, _) => 1,
        (None, true, Some(PodCliqueOutcome::Failed(FailureCause::PodFailed))) => 2,
        (None, true, Some(PodCliqueOutcome::Failed(FailureCause::PodLost))) => 3,
        (None, true, Some(PodCliqueOutcome::Completed)) => 4,
        (None, true, None) => 5,
        (None, false, _) => 6,
    }
}

/// Active pods that must go even in a live clique: indices ≥ `replicas`, and all but one
/// active pod per index (a duplicate left by a create retried after a crash, B2). The pod kept
/// is the most advanced (Running before Pending), ties broken by name.
fn surplus_pods(view: &PodCliqueView) -> Vec<String> {
    let mut active: Vec<&PodView> = view.pods.iter().filter(|p| p.is_active()).collect();
    active.sort_by(|a, b| {
        a.index
            .cmp(&b.index)
            .then_with(|| (b.phase == PodPhase::Running).cmp(&(a.phase == PodPhase::Running)))
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut kept: BTreeSet<u32> = view
        .pods
        .iter()
        .filter(|p| !p.is_active())
        .map(|p| p.index)
        .collect();
    let mut delete = Vec::new();
    for pod in active {
        if pod.index >= view.replicas || !kept.insert(pod.index) {
            delete.push(pod.name.clone());
        }
    }
    delete
}

fn regular_breach(view: &PodCliqueView) -> Breach {
    use crate::names::{
        REASON_INSUFFICIENT_READY_PODS, REASON_INSUFFICIENT_SCHEDULED_PODS,
        REASON_SCHEDULED_REPLICAS_BELOW_MIN_AVAILABLE, REASON_SUFFICIENT_READY_PODS,
    };
    let live = view.pods.iter().filter(|p| p.is_active());
    let (scheduled, ready) = live.fold((0u32, 0u32), |(s, r), p| {
        (s + u32::from(p.scheduled), r + u32::from(p.ready))
    });
    // A pod is only ready once it runs on a node, so `ready <= scheduled`.
    if scheduled == 0 {
        Breach::Sufficient(REASON_INSUFFICIENT_SCHEDULED_PODS)
    } else if scheduled < view.min_available {
        Breach::Breached(REASON_SCHEDULED_REPLICAS_BELOW_MIN_AVAILABLE)
    } else if ready < view.min_available {
        Breach::Breached(REASON_INSUFFICIENT_READY_PODS)
    } else {
        Breach::Sufficient(REASON_SUFFICIENT_READY_PODS)
    }
}
