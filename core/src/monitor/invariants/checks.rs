//! One check per clause, and [`CHECKS`], the table [`Monitor::check`] runs on every entry.
//!
//! Every check sees the state as it was before the entry (`prev` is the entry's object as the
//! monitor last knew it, `None` when the entry is its first) and reports through
//! [`Monitor::violate`]. Only R3 also writes state: each increment it sees, which R3 itself
//! and O1, O2 read later.

use crate::walk::Walk;
use serde_json::Value;

use super::{Monitor, Obj, ReplicaKey};
use crate::monitor::timeline::{Actor, Entry, EventType};
use crate::vocab::{Kind, Term};

/// The check of one clause (or of clauses judged together) on the entry at position `idx`.
pub(super) type Check = fn(&mut Monitor, usize, &Entry, Option<&Obj>);

/// Every invariant, in the order each entry is checked, which is the order of the violations
/// one entry reveals. To add one: a method below, a row here, and a row at the same place in
/// the clause table of the monitor's module doc (`invariants.rs`; a unit test compares them).
pub(super) const CHECKS: &[(&str, Check)] = &[
    ("E6", Monitor::terminal_conditions),
    ("R3", Monitor::restart_counts),
    ("C4", Monitor::creation_in_terminal_scope),
    ("E3", Monitor::replacement_pod),
    ("O1/O2", Monitor::early_deletion),
];

/// Whether entry `e` creates its object, written by neither the harness nor the cluster.
fn created_by_implementation(e: &Entry, prev: Option<&Obj>) -> bool {
    prev.is_none()
        && e.event != EventType::Deleted
        && e.actor != Actor::Harness
        && e.actor != Actor::System
}

impl Monitor {
    /// E6: a Grove object never shows Completed and Failed both True, and a True terminal
    /// condition stays True.
    fn terminal_conditions(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        if !e.kind.is_grove() || e.event == EventType::Deleted || e.actor == Actor::Harness {
            return;
        }
        let now = self.vocab.terminal_state(e.kind, &e.object);
        if now.completed && now.failed {
            self.violate(
                "E6",
                format!("{} {} shows Completed and Failed both True", e.kind, e.name),
                vec![idx],
            );
        }
        if let Some(p) = prev {
            for (was, is, what) in [
                (p.terminal.completed, now.completed, "Completed"),
                (p.terminal.failed, now.failed, "Failed"),
            ] {
                if was && !is {
                    self.violate(
                        "E6",
                        format!("{} {} was {what} and is no longer", e.kind, e.name),
                        vec![p.terminal_at.unwrap_or(p.last), idx],
                    );
                }
            }
        }
    }

    /// R3: an entry of a PCSG's or PCS's `replicaRestartCounts` never decreases, grows by one
    /// per write at most, and grows only after a failure in its replica since the previous
    /// increment. Records each increment (the harness's too) as that replica's latest.
    fn restart_counts(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        if !matches!(e.kind, Kind::PodCliqueScalingGroup | Kind::PodCliqueSet)
            || e.event == EventType::Deleted
        {
            return;
        }
        let by_harness = e.actor == Actor::Harness;
        let field = self.vocab.name(Term::ReplicaRestartCounts);
        let now: Vec<u64> = field
            .and_then(|f| e.object.get("status")?.get(f)?.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|v| v.as_u64().unwrap_or(0))
            .collect();
        let was = prev.map(|p| p.counts.clone()).unwrap_or_default();
        let width = now.len().max(was.len());
        for j in 0..width {
            let (a, b) = (
                was.get(j).copied().unwrap_or(0),
                now.get(j).copied().unwrap_or(0),
            );
            let key = (e.uid.clone(), u32::try_from(j).unwrap_or(u32::MAX));
            let prior = prev.and_then(|p| p.counts_at).unwrap_or(idx);
            if b < a && !by_harness {
                self.violate(
                    "R3",
                    format!(
                        "{} {} replicaRestartCounts[{j}] decreased from {a} to {b}",
                        e.kind, e.name
                    ),
                    vec![prior, idx],
                );
            } else if b > a {
                let track = self.replicas.entry(key.clone()).or_default().clone();
                if b > a + 1 && !by_harness {
                    self.violate(
                        "R3",
                        format!(
                            "{} {} replicaRestartCounts[{j}] grew from {a} to {b} in one write (one restart counts one)",
                            e.kind, e.name
                        ),
                        vec![prior, idx],
                    );
                } else if track.pending.is_none() && !by_harness {
                    let mut ev = vec![prior, idx];
                    if let Some(at) = track.authorized_at {
                        ev.push(at);
                    }
                    self.violate(
                        "R3",
                        format!(
                            "{} {} replicaRestartCounts[{j}] grew to {b} with no failure in replica {j} since the previous count (a restart counted twice)",
                            e.kind, e.name
                        ),
                        ev,
                    );
                }
                let t = self.replicas.entry(key).or_default();
                t.pending = None;
                t.authorized_at = Some(idx);
                // A new attempt: a completion seen before it no longer makes the replica final.
                t.completed_at = None;
            }
        }
    }

    /// C4: the implementation creates no pod in a terminal PodClique, and no pod, PodClique or
    /// PCSG in a replica of a completion-aware parent after its terminal condition was
    /// persisted.
    fn creation_in_terminal_scope(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        if !created_by_implementation(e, prev) {
            return;
        }
        match e.kind {
            Kind::Pod => {
                let Some(owner) = self.owner(&e.object, Kind::PodClique) else {
                    return;
                };
                let Some(clique) = self.objs.get(&owner).cloned() else {
                    return;
                };
                if clique.terminal.is_terminal() {
                    self.violate(
                        "C4",
                        format!(
                            "pod {} created in PodClique {} after it became terminal",
                            e.name, clique.name
                        ),
                        vec![clique.terminal_at.unwrap_or(clique.last), idx],
                    );
                } else {
                    self.creation_in_terminal_replica(
                        idx,
                        e,
                        &clique.object,
                        Kind::PodClique,
                        true,
                    );
                }
            }
            Kind::PodClique | Kind::PodCliqueScalingGroup => {
                if !self.creation_in_terminal_replica(idx, e, &e.object, e.kind, false) {
                    self.rerun_of_completed_replica(idx, e);
                }
            }
            Kind::PodCliqueSet | Kind::Event => {}
        }
    }

    /// C4 for a replica that became complete (E7) without its parent's terminal condition (a
    /// parent with other replicas still running): a PodClique or PCSG of it created again after
    /// its predecessor of the same name in the same replica started being deleted once the
    /// replica was complete (cleaned up, C2 and C3, or deleted by a user). The predecessor's
    /// deletion rules out a create that was decided before the completion and landed after it
    /// (a new child made in the moment its replica completes is the race the persisted
    /// guard above allows); a pod is never judged here: a pod create already under way in a
    /// child clique is cleaned up with it (C2, C3).
    fn rerun_of_completed_replica(&mut self, idx: usize, e: &Entry) {
        for key in self.replicas_of(&e.object, e.kind) {
            let Some(done) = self.replicas.get(&key).and_then(|t| t.completed_at) else {
                continue;
            };
            let predecessor = self
                .objs
                .iter()
                .filter(|(uid, o)| **uid != e.uid && o.kind == e.kind && o.name == e.name)
                .filter_map(|(_, o)| o.deleting.filter(|d| *d > done).map(|d| (d, o)))
                .find(|(_, o)| self.replicas_of(&o.object, o.kind).contains(&key))
                .map(|(d, _)| d);
            let Some(deleted) = predecessor else {
                continue;
            };
            let parent = &self.objs[&key.0];
            let message = format!(
                "{} {} created again inside replica {} of {} {}, which became complete before its predecessor was deleted",
                e.kind, e.name, key.1, parent.kind, parent.name
            );
            self.violate("C4", message, vec![done, deleted, idx]);
            return;
        }
    }

    /// C4 for an object whose scopes are those of `scope_object` (of `kind`): a creation after
    /// a scope's terminal condition was persisted. A replica whose required children are all
    /// Completed but whose parent has not written so yet is terminal by evaluation (E7), yet a
    /// child of it that is still starting (a new attempt's pods) may be created in that moment:
    /// no implementation can order a creation against another object's status write, and the
    /// parent's cleanup (C2, C3) removes what was made. The recreation guard applies from the
    /// persisted decision on. A pod (`pod`) in a live clique created after it is left
    /// undecided: a create already under way then is allowed, and only the requests show
    /// whether it was.
    /// Returns whether it found one.
    fn creation_in_terminal_replica(
        &mut self,
        idx: usize,
        e: &Entry,
        scope_object: &Value,
        kind: Kind,
        pod: bool,
    ) -> bool {
        for key in self.replicas_of(scope_object, kind) {
            if !self.replica_aware(&key) {
                continue;
            }
            let persisted = self
                .objs
                .get(&key.0)
                .filter(|p| p.terminal.is_terminal())
                .map(|p| p.terminal_at.unwrap_or(p.last));
            if let Some(at) = persisted {
                let parent = &self.objs[&key.0];
                let message = format!(
                    "{} {} created inside replica {} of {} {}, which is terminal",
                    e.kind, e.name, key.1, parent.kind, parent.name
                );
                if pod {
                    self.defer("C4", message, at, idx);
                } else {
                    self.violate("C4", message, vec![at, idx]);
                }
                return true;
            }
        }
        false
    }

    /// E3: the implementation creates no replacement pod in a completion-aware PodClique (same
    /// UID: same attempt): no pod for an index that already had one, and none beyond the first
    /// attempt's pods (an index outside `0..replicas`, or more pods than `replicas` in all,
    /// whatever their labels say).
    fn replacement_pod(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        if e.kind != Kind::Pod || !created_by_implementation(e, prev) {
            return;
        }
        let Some(owner) = self.owner(&e.object, Kind::PodClique) else {
            return;
        };
        let Some(clique) = self.objs.get(&owner) else {
            return;
        };
        if !self.vocab.is_completion_aware_clique(&clique.object) {
            return;
        }
        let clique_name = clique.name.clone();
        let replicas = clique
            .object
            .walk(&["spec", "replicas"])
            .and_then(Value::as_u64);
        let index = self
            .label(&e.object, Term::LabelPodIndex)
            .map(str::to_owned);
        let seen = self.pod_indices.get(&owner);
        let earlier = index
            .as_ref()
            .and_then(|i| seen.and_then(|m| m.get(i)))
            .cloned()
            .unwrap_or_default();
        if !earlier.is_empty() {
            // The earlier pods' creation, deletion start and last entries.
            let mut evidence = earlier.clone();
            for i in earlier {
                if let Some(o) = self.objs.get(&self.timeline[i].uid) {
                    evidence.push(o.last);
                    evidence.extend(o.deleting);
                }
            }
            evidence.push(idx);
            self.violate(
                "E3",
                format!(
                    "replacement pod {} created for index {} of completion-aware PodClique {clique_name}",
                    e.name,
                    index.unwrap_or_default()
                ),
                evidence,
            );
            return;
        }
        let Some(replicas) = replicas else {
            return;
        };
        let before: Vec<usize> = seen
            .map(|m| m.values().flatten().copied().collect())
            .unwrap_or_default();
        let in_range = index
            .as_deref()
            .and_then(|i| i.parse::<u64>().ok())
            .is_some_and(|i| i < replicas);
        if in_range && (before.len() as u64) < replicas {
            return;
        }
        let mut evidence = before;
        evidence.push(idx);
        self.violate(
            "E3",
            format!(
                "pod {} (index {}) created in completion-aware PodClique {clique_name} beyond its first attempt's {replicas} pods (indices 0..{replicas}; {} created before)",
                e.name,
                index.as_deref().unwrap_or("none"),
                evidence.len() - 1
            ),
            evidence,
        );
    }

    /// O1 and O2: a deletion the implementation starts in a completion-aware scope is
    /// justified by the scope's visible terminal state, its parent being deleted, a persisted
    /// restart, or a regular clique's gang termination (R5). Without one it is O2 when the
    /// replica has an uncounted failure and budget left (the restart's deletions came before
    /// its persisted increment), O1 otherwise. A pod counts only in a live, non-terminal
    /// completion-aware PodClique.
    fn early_deletion(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        let deletion_started = match prev {
            Some(p) => {
                p.deleting.is_none() && !p.gone && (e.deleting() || e.event == EventType::Deleted)
            }
            None => e.deleting() || e.event == EventType::Deleted,
        };
        if !deletion_started || e.actor != Actor::Implementation {
            return;
        }
        let created = prev.map_or(idx, |p| p.created);
        let scopes = match e.kind {
            Kind::Pod => {
                let owner = self.owner(&e.object, Kind::PodClique);
                let clique = owner.as_ref().and_then(|u| self.objs.get(u));
                match clique {
                    Some(c) if self.vocab.is_completion_aware_clique(&c.object) => {
                        if c.terminal.is_terminal() || c.deleting.is_some() || c.gone {
                            None
                        } else {
                            Some(self.replicas_of(&c.object.clone(), Kind::PodClique))
                        }
                    }
                    _ => None,
                }
            }
            Kind::PodClique | Kind::PodCliqueScalingGroup => {
                Some(self.replicas_of(&e.object, e.kind))
            }
            Kind::PodCliqueSet | Kind::Event => None,
        };
        if let Some(scopes) = scopes
            && let Some((clause, why, mut evidence)) = self.judge_deletion(&scopes, created)
        {
            evidence.push(idx);
            self.violate(
                clause,
                format!(
                    "{} {} deleted by the implementation too early: {why}",
                    e.kind, e.name
                ),
                evidence,
            );
        }
    }

    /// Judges a deletion the implementation started of an object created at entry `created`,
    /// in the replicas `scopes` (nearest first). Returns `None` when justified, else the clause
    /// (O1 or O2), the reason and the evidence.
    fn judge_deletion(
        &self,
        scopes: &[ReplicaKey],
        created: usize,
    ) -> Option<(&'static str, String, Vec<usize>)> {
        let aware: Vec<&ReplicaKey> = scopes.iter().filter(|k| self.replica_aware(k)).collect();
        let nearest = *aware.first()?;
        // The cascade of a parent's deletion, a regular scaling group's included (that
        // deletion is judged on its own): also a child the implementation created after its
        // owner was deleted, which the garbage collector then removes.
        if scopes.iter().any(|k| {
            self.objs
                .get(&k.0)
                .is_some_and(|p| p.deleting.is_some() || p.gone)
        }) {
            return None;
        }
        for key in &aware {
            if self.scope_terminal(key).is_some() {
                return None;
            }
            self.objs.get(&key.0)?;
            let track = self.replicas.get(*key).cloned().unwrap_or_default();
            if track.authorized_at.is_some_and(|at| created < at) {
                return None;
            }
            if self.regular_gang_termination(key, created) {
                return None;
            }
        }
        let track = self.replicas.get(nearest).cloned().unwrap_or_default();
        let parent = self.objs.get(&nearest.0)?;
        let count = parent.counts.get(nearest.1 as usize).copied().unwrap_or(0);
        let max = self.max_restarts(nearest);
        let mut evidence = vec![parent.last];
        if let Some(p) = track.pending {
            evidence.push(p);
        }
        match track.pending {
            Some(_) if count < max => Some((
                "O2",
                format!(
                    "replica {} of {} {} had a failure to restart (replicaRestartCounts[{}] = {count} < maxRestarts {max}) but the increment was not persisted before this deletion",
                    nearest.1, parent.kind, parent.name, nearest.1
                ),
                evidence,
            )),
            _ => Some((
                "O1",
                format!(
                    "replica {} of {} {} showed no terminal condition (and no persisted restart) when this deletion started",
                    nearest.1, parent.kind, parent.name
                ),
                evidence,
            )),
        }
    }
}
