//! What the monitor remembers between entries: each object as last seen (terminal state,
//! restart counts, deletion), each replica's pending failure, standing breach and completion,
//! and every pod of a clique by index.

use crate::walk::Walk;
use serde_json::Value;

use super::ReplicaKey;
use super::{Monitor, Obj};
use crate::monitor::timeline::{Actor, Entry, EventType};
use crate::vocab::{Kind, Term, TerminalState};

impl Monitor {
    /// Whether a breach of replica `key` (see [`Self::note_breach`]) was shown after the object
    /// created at `created` existed: a gang termination of that attempt is justified even once
    /// the breached object itself is gone.
    pub(super) fn regular_gang_termination(&self, key: &ReplicaKey, created: usize) -> bool {
        self.replicas
            .get(key)
            .and_then(|t| t.breached_at.as_ref())
            .is_some_and(|(at, _)| created < *at)
    }

    /// Records a breach that may lead to a regular gang termination (R5), and withdraws it
    /// when the object that showed it (live, not being deleted) shows the condition not True
    /// again: the breach healed before any gang termination, which then authorises nothing.
    /// A regular PodClique's MinAvailableBreached=True counts for its nearest replica. A
    /// scaling group's own MinAvailableBreached=True (fewer than its `minAvailable` replicas
    /// available, which in Grove a breached regular clique can cause) counts for the
    /// PodCliqueSet replica the group is in: Grove may terminate that whole replica. A group
    /// that shows the condition not True again withdraws it only if its breached replica was
    /// not torn down meanwhile (see [`Self::members_torn_down`]).
    pub(super) fn note_breach(&mut self, idx: usize, e: &Entry) {
        let Some(breached) = self.vocab.name(Term::MinAvailableBreached) else {
            return;
        };
        if e.event == EventType::Deleted || e.deleting() {
            return;
        }
        let keys = match e.kind {
            Kind::PodClique if !self.vocab.is_completion_aware_clique(&e.object) => self
                .replicas_of(&e.object, Kind::PodClique)
                .into_iter()
                .take(1)
                .collect(),
            Kind::PodCliqueScalingGroup => self.replicas_of(&e.object, Kind::PodCliqueScalingGroup),
            _ => return,
        };
        let now_true = crate::vocab::condition_status(&e.object, breached) == Some("True");
        for key in keys {
            let since = self.replicas.get(&key).and_then(|t| t.breached_at.clone());
            let heals = match &since {
                Some((at, uid)) if !now_true && *uid == e.uid => {
                    e.kind != Kind::PodCliqueScalingGroup || !self.members_torn_down(uid, *at)
                }
                _ => false,
            };
            let track = self.replicas.entry(key).or_default();
            if now_true {
                track.breached_at = Some((idx, e.uid.clone()));
            } else if heals {
                track.breached_at = None;
            }
        }
    }

    /// Whether a PodClique of the scaling group `group` started its deletion after entry `at`.
    /// A group whose breached replica was torn down shows the condition not True again
    /// because its cliques are new, not because it healed; the PodCliqueSet replica's own
    /// gang termination, decided on the same breach, may still follow.
    pub(super) fn members_torn_down(&self, group: &str, at: usize) -> bool {
        self.objs.values().any(|o| {
            o.kind == Kind::PodClique
                && o.deleting.is_some_and(|d| d > at)
                && self
                    .owner(&o.object, Kind::PodCliqueScalingGroup)
                    .as_deref()
                    == Some(group)
        })
    }

    /// Records failure evidence in entry `idx` (a pod of a live completion-aware PodClique
    /// failed or lost, a completion-aware PodClique or a PCSG turned Failed) against the
    /// nearest completion-aware replica: its next increment is justified (R3), and a deletion
    /// before that increment is O2.
    pub(super) fn note_failure(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        let (object, kind) = match e.kind {
            Kind::Pod => {
                let Some(owner) = self.owner(&e.object, Kind::PodClique) else {
                    return;
                };
                let Some(clique) = self.objs.get(&owner) else {
                    return;
                };
                if clique.deleting.is_some()
                    || clique.gone
                    || !self.vocab.is_completion_aware_clique(&clique.object)
                {
                    return;
                }
                let phase = |o: &Value| {
                    o.walk(&["status", "phase"])
                        .and_then(Value::as_str)
                        .unwrap_or("Pending")
                        .to_owned()
                };
                let was_deleting = prev.is_some_and(|p| p.deleting.is_some());
                let impl_deleted = prev.is_some_and(|p| {
                    p.deleting
                        .is_some_and(|d| self.timeline[d].actor == Actor::Implementation)
                });
                let failed_now = phase(&e.object) == "Failed"
                    && prev.is_none_or(|p| phase(&p.object) != "Failed");
                let lost = (e.event == EventType::Deleted || (e.deleting() && !was_deleting))
                    && phase(&e.object) != "Succeeded"
                    && e.actor != Actor::Implementation
                    && !impl_deleted;
                let failed = failed_now && !was_deleting && !impl_deleted;
                if !(failed || lost) {
                    return;
                }
                (clique.object.clone(), Kind::PodClique)
            }
            Kind::PodClique | Kind::PodCliqueScalingGroup => {
                let now = self.vocab.terminal_state(e.kind, &e.object);
                let was = prev.is_some_and(|p| p.terminal.failed);
                if !now.failed || was || e.event == EventType::Deleted {
                    return;
                }
                if e.kind == Kind::PodClique && !self.vocab.is_completion_aware_clique(&e.object) {
                    return;
                }
                (e.object.clone(), e.kind)
            }
            Kind::PodCliqueSet | Kind::Event => return,
        };
        if let Some(key) = self
            .replicas_of(&object, kind)
            .into_iter()
            .find(|k| self.replica_aware(k))
        {
            self.replicas.entry(key).or_default().pending = Some(idx);
        }
    }

    /// Records the entry at which a replica that `e` belongs to became complete (E7), once per
    /// attempt: only required children created after the replica's latest persisted restart
    /// count. Judged after the entry is applied.
    pub(super) fn note_completion(&mut self, idx: usize, e: &Entry) {
        if !matches!(e.kind, Kind::PodClique | Kind::PodCliqueScalingGroup) {
            return;
        }
        for key in self.replicas_of(&e.object, e.kind) {
            let track = self.replicas.get(&key).cloned().unwrap_or_default();
            if track.completed_at.is_some() || !self.replica_aware(&key) {
                continue;
            }
            let since = track.authorized_at;
            if self.replica_complete_where(&key, |o| since.is_none_or(|at| o.created > at)) {
                self.replicas.entry(key).or_default().completed_at = Some(idx);
            }
        }
    }

    pub(super) fn update(&mut self, idx: usize, e: &Entry, prev: Option<Obj>) {
        self.note_breach(idx, e);
        let terminal = self.vocab.terminal_state(e.kind, &e.object);
        let counts: Vec<u64> = self
            .vocab
            .name(Term::ReplicaRestartCounts)
            .and_then(|f| e.object.get("status")?.get(f)?.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|v| v.as_u64().unwrap_or(0))
            .collect();
        let mut obj = prev.unwrap_or(Obj {
            kind: e.kind,
            name: e.name.clone(),
            object: Value::Null,
            last: idx,
            created: idx,
            deleting: None,
            gone: false,
            terminal: TerminalState::default(),
            terminal_at: None,
            counts: Vec::new(),
            counts_at: None,
        });
        if e.event != EventType::Deleted {
            if terminal.is_terminal() && !obj.terminal.is_terminal() {
                obj.terminal_at = Some(idx);
            }
            obj.terminal = terminal;
            if counts != obj.counts {
                obj.counts_at = Some(idx);
            }
            obj.counts = counts;
            obj.object = e.object.clone();
        }
        if obj.deleting.is_none() && (e.deleting() || e.event == EventType::Deleted) {
            obj.deleting = Some(idx);
        }
        obj.last = idx;
        if e.event == EventType::Deleted {
            obj.gone = true;
            let key = (e.kind, e.name.clone());
            if self.by_name.get(&key) == Some(&e.uid) {
                self.by_name.remove(&key);
            }
        } else if e.event == EventType::Added
            || !self.by_name.contains_key(&(e.kind, e.name.clone()))
        {
            self.by_name.insert((e.kind, e.name.clone()), e.uid.clone());
        }
        // Every pod of a clique, by index label (pods without one under ""), so E3 can also
        // count them.
        if e.kind == Kind::Pod
            && let Some(owner) = self.owner(&e.object, Kind::PodClique)
        {
            let index = self
                .label(&e.object, Term::LabelPodIndex)
                .unwrap_or_default()
                .to_owned();
            let seen = self
                .pod_indices
                .entry(owner)
                .or_default()
                .entry(index)
                .or_default();
            if !seen.iter().any(|i| self.timeline[*i].uid == e.uid) {
                seen.push(idx);
            }
        }
        self.objs.insert(e.uid.clone(), obj);
    }
}
