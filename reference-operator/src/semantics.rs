//! Pure job semantics: from the observed state of one scope, the decision to act on.
//!
//! No client, no clock, no I/O: a controller gathers a view (`PodCliqueView`, `ReplicaView`,
//! `AggregateView`), calls the matching `evaluate_*` function and carries out the decision in
//! the order the decision documents (status write first, then deletes: O1, O2).
//!
//! Scopes and their functions:
//! - a PodClique: [`evaluate_podclique`] (E1–E5, C1, C4);
//! - a replica of a PCSG (its PodCliques) or of a PCS (its standalone PodCliques and PCSGs):
//!   [`evaluate_replica`] (E6–E10, E12, E13, R1–R7, O2, O3, C2–C5);
//! - a whole PCSG or PCS from its replicas: [`evaluate_aggregate`] (E11).
//!
//! The crash-safe restart protocol (O2, O3, R7) is encoded in [`evaluate_replica`]: the restart
//! count in the parent's status is the *desired* attempt, the `grove.io/restart-attempt` label on
//! each child its *realised* attempt. A new failure yields [`ReplicaAction::Restart`] (persist the
//! incremented count, then delete); a child whose attempt is older than the count means a restart
//! is already persisted and only its deletions are pending ([`ReplicaAction::FinishRestart`]), so
//! a controller that crashed anywhere in between never increments twice.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

mod podclique;

pub use podclique::{
    Breach, FailureCause, PodCliqueDecision, PodCliqueOutcome, PodCliqueView, PodView,
    evaluate_podclique, podclique_row,
};

// =============================================================================================
// Shared vocabulary.

/// A terminal condition as persisted on a PodClique, PCSG or PCS (`Completed=True` or
/// `Failed=True`). E6: never both; once set it stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Terminal {
    /// `Completed=True`, reason `CompletionCriteriaMet`.
    Completed,
    /// `Failed=True`.
    Failed,
}

/// Phase of a pod as reported by the kubelet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// Accepted, not all containers running yet.
    Pending,
    /// Bound and running.
    Running,
    /// Every container exited 0.
    Succeeded,
    /// A container exited non-zero or the pod was terminated by the system.
    Failed,
    /// The kubelet cannot report (node unreachable).
    Unknown,
}

impl PodPhase {
    /// Parse `status.phase`; anything unrecognised or absent reads as `Pending` (not yet terminal).
    pub fn parse(phase: Option<&str>) -> PodPhase {
        match phase {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Unknown") => PodPhase::Unknown,
            _ => PodPhase::Pending,
        }
    }

    /// Succeeded or Failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The `grove.io/restart-attempt` value for attempt `n` (R7).
pub fn attempt_label_value(n: u32) -> String {
    n.to_string()
}

/// Read a `grove.io/restart-attempt` label: absent means attempt 0 (children created before
/// the first restart may carry no label); an unparsable value reads as `None`, which callers
/// treat as stale (it cannot be the current attempt).
pub fn parse_attempt_label(value: Option<&str>) -> Option<u32> {
    match value {
        None => Some(0),
        Some(v) => v.parse().ok(),
    }
}

/// `replicaRestartCounts[index]`, a missing entry or a negative value reading as 0 (R3).
pub fn restart_count(counts: &[i32], index: usize) -> u32 {
    counts
        .get(index)
        .map_or(0, |&n| u32::try_from(n).unwrap_or(0))
}

/// `counts` with entry `index` set to `value`, padding missing entries with 0 (R3). Entries
/// never decrease: a lower `value` leaves the existing entry in place.
pub fn with_restart_count(counts: &[i32], index: usize, value: u32) -> Vec<i32> {
    let mut out = counts.to_vec();
    if out.len() <= index {
        out.resize(index + 1, 0);
    }
    let value = i32::try_from(value).unwrap_or(i32::MAX);
    if value > out[index] {
        out[index] = value;
    }
    out
}

// =============================================================================================
// Replica of a PCSG or PCS.

/// State of a direct child of a replica as its own conditions show it (E13: a PCSG child is
/// seen through the PCSG's conditions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildState {
    /// Exists, no terminal condition.
    Active,
    /// Exists with `Completed=True`.
    Completed,
    /// Exists with `Failed=True`.
    Failed,
    /// Does not exist (not created yet, or deleted).
    Missing,
}

/// One direct child of a replica: a PodClique of a PCSG replica, or a standalone PodClique or
/// PCSG of a PCS replica. Missing children are listed too, from the template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildView {
    /// Template name (clique or scaling group name), as `targetNames` spells it.
    pub name: String,
    /// Object name (`<pcs>-<i>-<clique>`, `<pcs>-<i>-<pcsg>`, `<pcs>-<i>-<pcsg>-<j>-<clique>`).
    pub object_name: String,
    /// Completion-aware per the template.
    pub completion_aware: bool,
    /// Observed state.
    pub state: ChildState,
    /// Parsed `grove.io/restart-attempt` of the existing object (see [`parse_attempt_label`]);
    /// ignored when `Missing`.
    pub attempt: Option<u32>,
    /// Since when `MinAvailableBreached=True` (regular children only; R5).
    pub breached_since: Option<Timestamp>,
}

/// Everything [`evaluate_replica`] needs about replica j of a PCSG (or i of a PCS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    /// The PCSG (PCS) is completion-aware.
    pub completion_aware: bool,
    /// Terminal condition already persisted on the PCSG (PCS) itself, if any.
    pub scope_terminal: Option<Terminal>,
    /// The parent's record says this replica already became Completed (E7): it is a finished
    /// scope whatever its children show now, also once they are deleted (C4).
    pub recorded_completed: bool,
    /// `replicaRestartCounts[j]` as read from status (missing entry = 0): the desired attempt.
    pub restart_count: u32,
    /// `policy.completion.failure.maxRestarts` of the PCSG (PCS), 0 when omitted.
    pub max_restarts: u32,
    /// `policy.completion.success.targetNames` of the PCSG (PCS).
    pub target_names: Option<Vec<String>>,
    /// Every direct child of the replica, in template order.
    pub children: Vec<ChildView>,
    /// `terminationDelay` for regular MinAvailableBreached gang termination (R5).
    pub termination_delay: SignedDuration,
    /// The time of the observation.
    pub now: Timestamp,
}

/// The replica's state, for [`evaluate_aggregate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplicaOutcome {
    /// Not terminal (running, restarting, or not aware).
    Running,
    /// Every required child of the current attempt is Completed (E7, E10).
    Completed,
    /// Failed with the budget spent (E9).
    Failed,
}

/// What to do with a replica. Every variant's deletions are graceful (C6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaAction {
    /// Keep the attempt alive: create the missing children with the current attempt label.
    Maintain {
        /// Object names of the children to create.
        create: Vec<String>,
    },
    /// A restart is already persisted (count > attempt of these children): delete them, create
    /// nothing until every stale child is gone (R1, R2, C5, O3).
    FinishRestart {
        /// Object names of the stale children.
        delete: Vec<String>,
    },
    /// A new completion-aware failure with budget left (E8): persist
    /// `replicaRestartCounts[j] = new_count` first (O2), then delete `then_delete` (R1, R2, C5).
    Restart {
        /// The incremented count (exactly +1, R3).
        new_count: u32,
        /// Template name of the failed child (for EV3).
        failed_child: String,
        /// Every existing child, terminal ones included.
        then_delete: Vec<String>,
    },
    /// A completion-aware failure with the budget spent (E9): the replica is Failed; persist
    /// `Failed=True` (RestartBudgetExhausted) on the scope first (O1), then delete the
    /// non-terminal children (C2, C3).
    Fail {
        /// Template name of the failed child.
        failed_child: String,
        /// Non-terminal children.
        then_delete: Vec<String>,
    },
    /// The replica is Completed (E7, E10): delete its non-terminal children (C2, C3, E12).
    Complete {
        /// Non-terminal children.
        then_delete: Vec<String>,
    },
    /// A regular child's MinAvailableBreached outlasted `terminationDelay`: delete every child
    /// of the replica; they are recreated under the same attempt, no budget is used (R5).
    GangTerminate {
        /// Template name of the breached child.
        breached_child: String,
        /// Every existing child.
        delete: Vec<String>,
    },
    /// The scope is already terminal: only delete non-terminal children (C2, C3, C4).
    Cleanup {
        /// Non-terminal children.
        delete: Vec<String>,
    },
    /// The view is inconsistent (a child carries an attempt newer than the count: the parent
    /// was read from a stale cache). Do nothing and look again.
    Wait,
}

impl ReplicaAction {
    /// The row of [`evaluate_replica`]'s truth table that chose this action, and its name.
    pub fn row(&self) -> (u8, &'static str) {
        match self {
            ReplicaAction::Wait => (1, "wait"),
            ReplicaAction::Cleanup { .. } => (2, "cleanup"),
            ReplicaAction::FinishRestart { .. } => (3, "finish-restart"),
            ReplicaAction::Complete { .. } => (4, "complete"),
            ReplicaAction::Restart { .. } => (5, "restart"),
            ReplicaAction::Fail { .. } => (6, "fail"),
            ReplicaAction::GangTerminate { .. } => (7, "gang-terminate"),
            ReplicaAction::Maintain { .. } => (8, "maintain"),
        }
    }
}

/// Decision for one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaDecision {
    /// The replica's state for [`evaluate_aggregate`].
    pub outcome: ReplicaOutcome,
    /// What to do.
    pub action: ReplicaAction,
}

// Truth table of `evaluate_replica` (first matching row wins). "Aware child" means a
// completion-aware child; "required" is `targetNames`, or every aware child when absent.
// Existing children whose attempt label is older than the count are "stale".
//
// | #  | condition                                                    | action        | outcome   | clauses            |
// |----|--------------------------------------------------------------|---------------|-----------|--------------------|
// | 1  | a child's attempt > restart_count                            | Wait          | Running   | O3 (stale cache)   |
// | 2  | scope already terminal, or the replica recorded Completed    | Cleanup       | derived   | E6 C2 C3 C4        |
// | 3  | a stale child exists (restart persisted, deletes pending)    | FinishRestart | Running   | O2 O3 R1 R2 C5     |
// | 4  | aware, required non-empty and all Completed                  | Complete      | Completed | E7 E10 E12 C2 C3   |
// | 5  | aware, an aware child Failed, restart_count < max_restarts   | Restart(+1)   | Running   | E8 R1–R4 R6 O2     |
// | 6  | aware, an aware child Failed, restart_count ≥ max_restarts   | Fail          | Failed    | E9 R6 C2 C3        |
// | 7  | a regular child breached for ≥ terminationDelay              | GangTerminate | Running   | R5                 |
// | 8  | otherwise                                                    | Maintain      | Running   | E12 (regular kept) |
//
// Row 4 before rows 5/6 is Option A (E10): required children Completed in the same
// observation as (or before) a non-required failure complete the replica; no budget is used
// and later non-required failures are ignored. Regular children never count for rows 4–6
// (E12); a PCSG child is Completed/Failed only through its own conditions (E13), so a
// PodClique failure in a PCSG is handled by the PCSG and reaches the PCS only as a Failed
// PCSG once the PCSG budget is spent (R6). Row 5's count goes up by exactly one (R3) and needs
// no termination delay (R4). Row 7 uses no budget (R5); it never fires on an aware child.
// Stale children (row 3) are never evaluated: their failure was already counted (O3).
// Row 2 also covers a replica the parent recorded Completed (row 4 once, the record persisted
// with that decision): its outcome is Completed from then on, derived from the record and not
// from its children, so a replica whose children a user deletes later is never run again (C4),
// also after a controller restart.

/// Decide what to do with one replica (see the truth table above).
pub fn evaluate_replica(view: &ReplicaView) -> ReplicaDecision {
    let existing = || {
        view.children
            .iter()
            .filter(|c| c.state != ChildState::Missing)
    };
    let non_terminal = || {
        existing()
            .filter(|c| c.state == ChildState::Active)
            .map(|c| c.object_name.clone())
            .collect::<Vec<_>>()
    };

    // Row 1.
    if existing().any(|c| c.attempt.is_some_and(|a| a > view.restart_count)) {
        return ReplicaDecision {
            outcome: ReplicaOutcome::Running,
            action: ReplicaAction::Wait,
        };
    }

    // Row 2.
    if view.scope_terminal.is_some() || view.recorded_completed {
        return ReplicaDecision {
            outcome: if view.recorded_completed {
                ReplicaOutcome::Completed
            } else {
                derived_outcome(view)
            },
            action: ReplicaAction::Cleanup {
                delete: non_terminal(),
            },
        };
    }

    // Row 3.
    let stale: Vec<String> = existing()
        .filter(|c| c.attempt != Some(view.restart_count))
        .map(|c| c.object_name.clone())
        .collect();
    if !stale.is_empty() {
        return ReplicaDecision {
            outcome: ReplicaOutcome::Running,
            action: ReplicaAction::FinishRestart { delete: stale },
        };
    }

    if view.completion_aware {
        // Row 4 (Option A).
        if required_completed(view) {
            return ReplicaDecision {
                outcome: ReplicaOutcome::Completed,
                action: ReplicaAction::Complete {
                    then_delete: non_terminal(),
                },
            };
        }
        // Rows 5 and 6.
        if let Some(failed) = first_failed_aware_child(view) {
            let failed_child = failed.name.clone();
            return if view.restart_count < view.max_restarts {
                ReplicaDecision {
                    outcome: ReplicaOutcome::Running,
                    action: ReplicaAction::Restart {
                        new_count: view.restart_count + 1,
                        failed_child,
                        then_delete: existing().map(|c| c.object_name.clone()).collect(),
                    },
                }
            } else {
                ReplicaDecision {
                    outcome: ReplicaOutcome::Failed,
                    action: ReplicaAction::Fail {
                        failed_child,
                        then_delete: non_terminal(),
                    },
                }
            };
        }
    }

    // Row 7 (R5).
    let breached = existing().find(|c| {
        !c.completion_aware
            && c.breached_since
                .is_some_and(|since| view.now.duration_since(since) >= view.termination_delay)
    });
    if let Some(child) = breached {
        return ReplicaDecision {
            outcome: ReplicaOutcome::Running,
            action: ReplicaAction::GangTerminate {
                breached_child: child.name.clone(),
                delete: existing().map(|c| c.object_name.clone()).collect(),
            },
        };
    }

    // Row 8.
    ReplicaDecision {
        outcome: ReplicaOutcome::Running,
        action: ReplicaAction::Maintain {
            create: view
                .children
                .iter()
                .filter(|c| c.state == ChildState::Missing)
                .map(|c| c.object_name.clone())
                .collect(),
        },
    }
}

/// Whether child `c` is required by the replica's success criterion.
fn is_required(view: &ReplicaView, c: &ChildView) -> bool {
    match &view.target_names {
        Some(names) => names.contains(&c.name),
        None => c.completion_aware,
    }
}

/// Rows 4's test: some child is required and every required child is Completed. Only
/// completion-aware children can complete; a required regular child (rejected at admission,
/// V2) never does.
fn required_completed(view: &ReplicaView) -> bool {
    let mut required = view
        .children
        .iter()
        .filter(|c| is_required(view, c))
        .peekable();
    required.peek().is_some()
        && required.all(|c| c.completion_aware && c.state == ChildState::Completed)
}

fn first_failed_aware_child(view: &ReplicaView) -> Option<&ChildView> {
    view.children
        .iter()
        .find(|c| c.completion_aware && c.state == ChildState::Failed)
}

/// The outcome a replica shows under a terminal scope. The scope's own outcome is checked
/// first, so a replica never reads Completed after its failure ended the scope (E6).
fn derived_outcome(view: &ReplicaView) -> ReplicaOutcome {
    let failed =
        || first_failed_aware_child(view).is_some() && view.restart_count >= view.max_restarts;
    if !view.completion_aware {
        ReplicaOutcome::Running
    } else if view.scope_terminal == Some(Terminal::Failed) && failed() {
        ReplicaOutcome::Failed
    } else if required_completed(view) {
        ReplicaOutcome::Completed
    } else if failed() {
        ReplicaOutcome::Failed
    } else {
        ReplicaOutcome::Running
    }
}

// =============================================================================================
// Whole PCSG or PCS.

/// Everything [`evaluate_aggregate`] needs about a PCSG or PCS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregateView {
    /// The PCSG (PCS) is completion-aware.
    pub completion_aware: bool,
    /// Terminal condition already persisted, if any.
    pub terminal: Option<Terminal>,
    /// Outcome of every replica (from [`evaluate_replica`]), by index.
    pub replicas: Vec<ReplicaOutcome>,
}

/// Terminal condition to persist on a PCSG or PCS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggregateDecision {
    /// Nothing new to persist.
    Keep,
    /// Persist `Completed=True`, reason `CompletionCriteriaMet` (EV1).
    Complete,
    /// Persist `Failed=True`, reason `RestartBudgetExhausted` (EV2, EV4).
    Fail,
}

// Truth table of `evaluate_aggregate` (first matching row wins):
//
// | # | aware | persisted terminal | replicas                          | decision | clauses |
// |---|-------|--------------------|-----------------------------------|----------|---------|
// | 1 | no    | —                  | any                               | Keep     | E5      |
// | 2 | yes   | Completed/Failed   | any                               | Keep     | E6      |
// | 3 | yes   | —                  | one replica Failed                | Fail     | E11     |
// | 4 | yes   | —                  | at least one, all Completed       | Complete | E11     |
// | 5 | yes   | —                  | otherwise (incl. zero replicas)   | Keep     |         |

/// Decide the terminal condition of a PCSG or PCS from its replicas (E11).
pub fn evaluate_aggregate(view: &AggregateView) -> AggregateDecision {
    if !view.completion_aware || view.terminal.is_some() {
        AggregateDecision::Keep
    } else if view.replicas.contains(&ReplicaOutcome::Failed) {
        AggregateDecision::Fail
    } else if !view.replicas.is_empty()
        && view
            .replicas
            .iter()
            .all(|r| *r == ReplicaOutcome::Completed)
    {
        AggregateDecision::Complete
    } else {
        AggregateDecision::Keep
    }
}

#[cfg(test)]
mod tests;
