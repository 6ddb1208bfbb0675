//! The invariant monitor: a pure state machine over timeline entries.
//!
//! On every entry it checks the safety clauses that must hold at every instant, not only at
//! the end of a case, in this order (one check each, listed in [`checks::CHECKS`]; O1 and O2
//! are judged together):
//!
//! | clause | violated when |
//! |---|---|
//! | E6 | an object shows Completed and Failed both True, or a True terminal condition stops being True |
//! | R3 | a `replicaRestartCounts` entry decreases, grows by more than one in one write, or grows with no failure observed in that replica since its last increment (a double count) |
//! | C4 | the implementation creates a pod, PodClique or PCSG inside a terminal scope, or again creates a PodClique or PCSG of a replica that became complete after its predecessor was deleted; a pod created in a live PodClique of a replica whose terminal condition was persisted is [`Undecided`] until the requests are known |
//! | E3 | a pod is created in a completion-aware PodClique (same UID: same attempt) for an index that already had a pod, for an index outside `0..replicas`, or beyond its `replicas` pods in all |
//! | O1 | the implementation starts deleting something in a completion-aware scope whose terminal state is not visible and no persisted restart justifies it |
//! | O2 | the same, while the replica has an uncounted failure and budget left: the restart's deletions came before its persisted increment |
//!
//! Writes attributed to the harness are recorded but never held against the implementation;
//! deletions that cascade from an owner being deleted are allowed.
//!
//! This file holds the monitor and the order of its work on each entry; `findings` what it
//! reports, `topology` how it reads the objects' relations (owners, replicas, scopes),
//! `tracking` what it remembers between entries (failures, breaches, completions, objects),
//! and `checks` the checks.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use self::checks::CHECKS;
use super::timeline::{Entry, render};
use crate::vocab::{Kind, TerminalState, Vocabulary};

mod checks;
mod findings;
mod topology;
mod tracking;

pub use findings::{SeenRequest, Undecided, Violation};

#[derive(Debug, Clone)]
struct Obj {
    kind: Kind,
    name: String,
    object: Value,
    last: usize,
    created: usize,
    deleting: Option<usize>,
    gone: bool,
    terminal: TerminalState,
    terminal_at: Option<usize>,
    counts: Vec<u64>,
    counts_at: Option<usize>,
}

#[derive(Debug, Clone, Default)]
struct ReplicaTrack {
    /// The latest failure evidence not yet followed by an increment.
    pending: Option<usize>,
    /// The entry that persisted the latest increment.
    authorized_at: Option<usize>,
    /// The entry in which a regular PodClique of the replica, or a scaling group of a
    /// PodCliqueSet replica, showed MinAvailableBreached=True (a gang termination, R5, may
    /// follow), and that object's UID, while the breach stands.
    breached_at: Option<(usize, String)>,
    /// The entry in which the replica's current attempt became complete (E7: every required
    /// child created since the latest persisted restart Completed). A restart persisted after
    /// it withdraws it (the completion raced a restart decided before it; R3 and the cases
    /// judge that restart).
    completed_at: Option<usize>,
}

/// A replica of a parent: PCSG replica j, or PCS replica i.
type ReplicaKey = (String, u32);

/// The always-on invariant monitor of one case. Feed it with [`Monitor::observe`].
#[derive(Debug, Clone)]
pub struct Monitor {
    vocab: Vocabulary,
    timeline: Vec<Entry>,
    objs: HashMap<String, Obj>,
    by_name: HashMap<(Kind, String), String>,
    pod_indices: HashMap<String, BTreeMap<String, Vec<usize>>>,
    replicas: HashMap<ReplicaKey, ReplicaTrack>,
    violations: Vec<Violation>,
    undecided: Vec<Undecided>,
}

impl Monitor {
    /// A monitor reading names through `vocab`.
    pub fn new(vocab: Vocabulary) -> Self {
        Monitor {
            vocab,
            timeline: Vec::new(),
            objs: HashMap::new(),
            by_name: HashMap::new(),
            pod_indices: HashMap::new(),
            replicas: HashMap::new(),
            violations: Vec::new(),
            undecided: Vec::new(),
        }
    }

    /// A monitor that has seen this one's timeline and `more`, all in resource-version order.
    pub fn replayed_with(&self, more: Vec<Entry>) -> Monitor {
        let mut all = self.timeline.clone();
        all.extend(more);
        all.sort_by_key(|e| e.resource_version);
        let mut fresh = Monitor::new(self.vocab);
        for entry in all {
            fresh.observe(entry);
        }
        fresh
    }

    /// Every entry so far.
    pub fn timeline(&self) -> &[Entry] {
        &self.timeline
    }

    /// Every violation so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Every creation so far that only the requests can judge.
    pub fn undecided(&self) -> &[Undecided] {
        &self.undecided
    }

    /// The whole timeline rendered, one entry per line, in resource-version order (an Event
    /// that arrived late keeps its position number but is shown where etcd committed it).
    pub fn render_timeline(&self) -> String {
        let mut all: Vec<(usize, &Entry)> = self.timeline.iter().enumerate().collect();
        all.sort_by_key(|(_, e)| e.resource_version);
        render(&all, &self.vocab)
    }

    /// Records one entry, checks every invariant, and returns the violations it revealed.
    pub fn observe(&mut self, entry: Entry) -> Vec<Violation> {
        let idx = self.timeline.len();
        self.timeline.push(entry);
        let before = self.violations.len();
        let entry = self.timeline[idx].clone();
        if entry.kind != Kind::Event {
            let prev = self.objs.get(&entry.uid).cloned();
            self.check(idx, &entry, prev.as_ref());
            self.note_failure(idx, &entry, prev.as_ref());
            self.update(idx, &entry, prev);
            self.note_completion(idx, &entry);
        }
        self.violations[before..].to_vec()
    }

    fn violate(&mut self, clause: &'static str, message: String, evidence: Vec<usize>) {
        let (evidence, slice) = self.slice(evidence);
        self.violations.push(Violation {
            clause,
            message,
            evidence,
            slice,
        });
    }

    /// Leaves a creation at timeline position `created` after the terminal write at
    /// `terminal` for the requests to judge.
    fn defer(&mut self, clause: &'static str, message: String, terminal: usize, created: usize) {
        let revisions = (
            self.timeline[created].resource_version,
            self.timeline[terminal].resource_version,
        );
        let parent = (
            self.timeline[terminal].kind.plural().to_owned(),
            self.timeline[terminal].name.clone(),
        );
        let (evidence, slice) = self.slice(vec![terminal, created]);
        self.undecided.push(Undecided {
            clause,
            message,
            evidence,
            slice,
            created: revisions.0,
            terminal: revisions.1,
            parent,
        });
    }

    /// Evidence positions, sorted and without repeats, and their entries rendered.
    fn slice(&self, mut evidence: Vec<usize>) -> (Vec<usize>, String) {
        evidence.sort_unstable();
        evidence.dedup();
        let rows: Vec<(usize, &Entry)> =
            evidence.iter().map(|i| (*i, &self.timeline[*i])).collect();
        let slice = render(&rows, &self.vocab);
        (evidence, slice)
    }

    /// Runs every check of [`CHECKS`] on the entry at `idx`, in the table's order.
    fn check(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        for (_, check) in CHECKS {
            check(self, idx, e, prev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::checks::CHECKS;

    /// The clause table of the module doc lists the clauses of [`CHECKS`], in its order.
    #[test]
    fn the_module_doc_lists_every_check_in_order() {
        let documented: Vec<&str> = include_str!("invariants.rs")
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .filter_map(|l| l.strip_prefix("//! | "))
            .filter_map(|row| row.split(" |").next())
            .filter(|clause| *clause != "clause")
            .collect();
        let checked: Vec<&str> = CHECKS
            .iter()
            .flat_map(|(clauses, _)| clauses.split('/'))
            .collect();
        assert_eq!(documented, checked);
    }
}
