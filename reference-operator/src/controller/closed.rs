//! What this process has learnt of closed scopes (C4), from its own status writes and its live
//! reads of parents: a PodCliqueSet or scaling group terminal or being deleted, a replica of it
//! recorded Completed, an attempt that a restart has replaced. Every create consults it right
//! before it is sent, so a create decided on a check that one worker made is not sent once
//! another worker (or this one, writing the terminal status) has learnt that the scope closed.
//! The live check before a create still decides; this only narrows its window to the request.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::conditions;

/// Past this many parents the record starts over (it only saves creates, never allows one).
const LIMIT: usize = 4096;

/// The closures known of one parent, by uid. Each only grows: a terminal or deleted parent
/// stays so, a completed replica stays completed, restart counts never decrease.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Closure {
    whole: bool,
    completed: BTreeSet<usize>,
    counts: Vec<u32>,
}

/// What a status write or a live read showed of one parent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    /// Terminal (Completed or Failed) or being deleted.
    pub whole: bool,
    /// Its `completedReplicas`.
    pub completed: Vec<usize>,
    /// Its `replicaRestartCounts`.
    pub counts: Vec<u32>,
}

impl Seen {
    /// What a parent shows: whether it is being deleted, its conditions and its record of
    /// restarts and completed replicas.
    pub(super) fn of(
        deleting: bool,
        conditions: &[Condition],
        counts: &[i32],
        completed: &[i32],
    ) -> Seen {
        Seen {
            whole: deleting || conditions::terminal(conditions).is_some(),
            completed: completed
                .iter()
                .filter_map(|&j| usize::try_from(j).ok())
                .collect(),
            counts: counts
                .iter()
                .map(|&c| u32::try_from(c).unwrap_or(0))
                .collect(),
        }
    }

    /// What a status written as JSON shows (a field it cannot read counts as absent, which
    /// only leaves a closure unlearnt).
    pub(super) fn of_status(status: &serde_json::Value) -> Seen {
        fn field<T: serde::de::DeserializeOwned>(status: &serde_json::Value, key: &str) -> Vec<T> {
            status
                .get(key)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default()
        }
        let conditions: Vec<Condition> = field(status, "conditions");
        let counts: Vec<i32> = field(status, "replicaRestartCounts");
        let completed: Vec<i32> = field(status, "completedReplicas");
        Seen::of(false, &conditions, &counts, &completed)
    }
}

/// The record, shared by every worker of the process.
#[derive(Debug, Default)]
pub(super) struct Closed(Mutex<HashMap<String, Closure>>);

impl Closed {
    /// Adds what was seen of the parent with `uid`.
    pub(super) fn learn(&self, uid: &str, seen: &Seen) {
        if uid.is_empty() {
            return;
        }
        let mut record = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if record.len() >= LIMIT && !record.contains_key(uid) {
            record.clear();
        }
        let closure = record.entry(uid.to_string()).or_default();
        closure.whole |= seen.whole;
        closure.completed.extend(&seen.completed);
        if closure.counts.len() < seen.counts.len() {
            closure.counts.resize(seen.counts.len(), 0);
        }
        for (known, &count) in closure.counts.iter_mut().zip(&seen.counts) {
            *known = (*known).max(count);
        }
    }

    /// Whether replica `replica`, attempt `attempt` of the parent with `uid` is known closed.
    pub(super) fn knows_closed(&self, uid: &str, replica: usize, attempt: Option<u32>) -> bool {
        let record = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = record.get(uid) else {
            return false;
        };
        c.whole
            || c.completed.contains(&replica)
            || attempt.is_some_and(|a| c.counts.get(replica).is_some_and(|&now| now > a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_closed_by_what_any_worker_learnt_and_stays_closed() {
        let closed = Closed::default();
        assert!(!closed.knows_closed("g", 0, Some(0)));
        closed.learn(
            "g",
            &Seen::of_status(&serde_json::json!({"replicaRestartCounts": [1, 0]})),
        );
        // Attempt 0 of replica 0 was replaced; replica 1 still runs attempt 0.
        assert!(closed.knows_closed("g", 0, Some(0)));
        assert!(!closed.knows_closed("g", 0, Some(1)));
        assert!(!closed.knows_closed("g", 1, Some(0)));
        // An older view never reopens it.
        closed.learn(
            "g",
            &Seen::of_status(&serde_json::json!({"replicaRestartCounts": [0]})),
        );
        assert!(closed.knows_closed("g", 0, Some(0)));
        closed.learn(
            "g",
            &Seen::of_status(&serde_json::json!({"completedReplicas": [1]})),
        );
        assert!(closed.knows_closed("g", 1, Some(0)));
        closed.learn(
            "g",
            &Seen::of_status(&serde_json::json!({"conditions": [{
                "type": "Failed", "status": "True", "reason": "r", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]})),
        );
        assert!(closed.knows_closed("g", 0, Some(1)));
        assert!(!closed.knows_closed("other", 0, Some(0)));
        let open = Seen::of_status(&serde_json::json!({"conditions": [{
            "type": "Completed", "status": "False", "reason": "r", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]}));
        assert!(!open.whole);
    }
}
