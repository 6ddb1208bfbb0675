//! Reading and writing `status.conditions` the way every controller does: terminal conditions
//! are sticky (E6), a condition keeps its `lastTransitionTime` while its status stays, and only
//! True terminal conditions are ever written (a job shows `Completed`/`Failed` once it is one).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::names::{
    CONDITION_COMPLETED, CONDITION_FAILED, CONDITION_MIN_AVAILABLE_BREACHED,
    REASON_COMPLETION_CRITERIA_MET,
};
use crate::semantics::Terminal;

/// The condition of type `type_`.
pub(super) fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether condition `type_` is True.
pub(super) fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The persisted terminal state (Failed wins should both ever be True).
pub(super) fn terminal(conditions: &[Condition]) -> Option<Terminal> {
    if is_true(conditions, CONDITION_FAILED) {
        Some(Terminal::Failed)
    } else if is_true(conditions, CONDITION_COMPLETED) {
        Some(Terminal::Completed)
    } else {
        None
    }
}

/// Since when `MinAvailableBreached` has been True, if it is.
pub(super) fn breached_since(conditions: &[Condition]) -> Option<Timestamp> {
    find(conditions, CONDITION_MIN_AVAILABLE_BREACHED)
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.0)
}

/// A desired condition, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Desired {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

impl Desired {
    /// `Completed=True` (CompletionCriteriaMet).
    pub fn completed(message: String) -> Desired {
        Desired {
            type_: CONDITION_COMPLETED,
            status: "True",
            reason: REASON_COMPLETION_CRITERIA_MET.into(),
            message,
        }
    }

    /// `Failed=True` with `reason`.
    pub fn failed(reason: &str, message: String) -> Desired {
        Desired {
            type_: CONDITION_FAILED,
            status: "True",
            reason: reason.into(),
            message,
        }
    }
}

/// The conditions to write: the existing terminal conditions kept as they are (E6), then each
/// desired condition, keeping the old `lastTransitionTime` when its status is unchanged. Once
/// `Completed` or `Failed` is True, no terminal condition is added or replaced.
pub(super) fn merge(
    existing: &[Condition],
    desired: Vec<Desired>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = existing
        .iter()
        .filter(|c| {
            (c.type_ == CONDITION_COMPLETED || c.type_ == CONDITION_FAILED) && c.status == "True"
        })
        .cloned()
        .collect();
    // `out` now holds exactly the persisted terminal conditions: with one, no other is added.
    let terminal = |type_: &str| type_ == CONDITION_COMPLETED || type_ == CONDITION_FAILED;
    let sealed = !out.is_empty();
    for d in desired {
        if out.iter().any(|c| c.type_ == d.type_) || (sealed && terminal(d.type_)) {
            continue;
        }
        let previous = find(existing, d.type_);
        let since = match previous {
            Some(p) if p.status == d.status => p.last_transition_time.clone(),
            _ => Time(now),
        };
        out.push(Condition {
            type_: d.type_.into(),
            status: d.status.into(),
            reason: d.reason,
            message: d.message,
            last_transition_time: since,
            observed_generation: generation,
        });
    }
    out
}

/// Whether two condition lists say the same thing, whatever their order and timestamps.
pub(super) fn same(a: &[Condition], b: &[Condition]) -> bool {
    let key = |c: &Condition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        )
    };
    let mut a: Vec<_> = a.iter().map(key).collect();
    let mut b: Vec<_> = b.iter().map(key).collect();
    a.sort();
    b.sort();
    a == b
}

/// The current time, truncated to the second as `metav1.Time` stores it.
pub(super) fn now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests;
