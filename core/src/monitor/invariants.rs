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

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use self::checks::CHECKS;
use super::timeline::{Actor, Entry, EventType, render};
use crate::vocab::{Kind, PcsShape, Term, TerminalState, Vocabulary};

mod checks;

/// A broken invariant, with the slice of the timeline that proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The clause id (`O1`).
    pub clause: &'static str,
    /// What happened, in one sentence.
    pub message: String,
    /// Positions in the timeline of the entries that prove it, ascending.
    pub evidence: Vec<usize>,
    /// Those entries rendered, one per line.
    pub slice: String,
}

impl Violation {
    /// The violation as a paragraph: clause, message and the timeline slice.
    pub fn render(&self) -> String {
        format!("{}: {}\n{}", self.clause, self.message, self.slice)
    }
}

/// A request of the implementation as its API proxy saw it: where it and its answer fell in
/// the proxy's arrival order, and what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The request's number in arrival order.
    pub arrived: u64,
    /// How many requests had arrived when its answer went back: every request numbered
    /// above it was sent after the client had the answer.
    pub answered_after: Option<u64>,
    /// For an accepted create, update or patch: the `resourceVersion` its answer named.
    pub revision: Option<u64>,
    /// For a quorum read (a GET, or a LIST, without `resourceVersion`): the resource
    /// (plural) and the object name (empty for a LIST).
    pub read: Option<(String, String)>,
}

/// A creation the timeline alone cannot judge: a pod created in a PodClique that is not
/// terminal, of a replica whose terminal condition was already persisted. C4 allows a pod
/// create already under way in a child clique at that moment (C2 and C3 clean it up). No
/// implementation can check a parent and create a pod in one step, so a create sent just
/// after the terminal write may still rest on a check made before it; only the requests show
/// that it did not ([`Undecided::judge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    /// The clause (`C4`).
    pub clause: &'static str,
    /// What happened, in one sentence.
    pub message: String,
    /// Positions in the timeline of the terminal write and the creation.
    pub evidence: Vec<usize>,
    /// Those entries rendered, one per line.
    pub slice: String,
    /// The revision the creation committed at.
    pub created: u64,
    /// The revision of the write that made the replica terminal.
    pub terminal: u64,
    /// The terminal parent: its resource (plural) and name.
    pub parent: (String, String),
}

impl Undecided {
    /// The revisions whose writes decide it.
    pub fn revisions(&self) -> [u64; 2] {
        [self.created, self.terminal]
    }

    /// The violation, if `requests` show that the create was not under way: after the
    /// answer to the terminal write, the implementation read the parent afresh (a quorum
    /// read sent after that answer, so it showed the terminal state), had that answer, and
    /// only then sent the create. `None` otherwise: the create may rest on a check made
    /// before the write, or one of the writes is not among `requests` (made past the proxy,
    /// or answered in a form it could not read), and nothing then shows a breach.
    pub fn judge(&self, requests: &[SeenRequest]) -> Option<Violation> {
        let write = |revision: u64| requests.iter().find(|r| r.revision == Some(revision));
        let created = write(self.created)?;
        let terminal = write(self.terminal)?;
        let answered = terminal.answered_after?;
        let (resource, name) = &self.parent;
        let read = requests.iter().find(|r| {
            r.read
                .as_ref()
                .is_some_and(|(res, n)| res == resource && (n.is_empty() || n == name))
                && r.arrived > answered
                && r.answered_after.is_some_and(|a| a < created.arrived)
        })?;
        Some(Violation {
            clause: self.clause,
            message: format!(
                "{}: the implementation read {resource} {name} afresh after the write that made it terminal (request #{}) was answered, had that answer (request #{}), then sent the create (request #{}), so it was not under way then",
                self.message, terminal.arrived, read.arrived, created.arrived
            ),
            evidence: self.evidence.clone(),
            slice: self.slice.clone(),
        })
    }
}

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

    fn label<'a>(&self, o: &'a Value, t: Term) -> Option<&'a str> {
        o.pointer("/metadata/labels")?
            .get(self.vocab.name(t)?)?
            .as_str()
    }

    fn current(&self, kind: Kind, name: &str) -> Option<&Obj> {
        self.by_name
            .get(&(kind, name.to_owned()))
            .and_then(|u| self.objs.get(u))
            .filter(|o| !o.gone)
    }

    /// The UID of the controller owner of `o` with `kind`, by ownerReference or label.
    fn owner(&self, o: &Value, kind: Kind) -> Option<String> {
        let by_ref = o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("kind").and_then(Value::as_str) == Some(kind.as_str()))
            })
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        by_ref.or_else(|| {
            let name = match kind {
                Kind::PodClique => self.label(o, Term::LabelPodClique),
                Kind::PodCliqueScalingGroup => self.label(o, Term::LabelPcsg),
                Kind::PodCliqueSet => self.label(o, Term::LabelPartOf),
                Kind::Pod | Kind::Event => None,
            }?;
            self.by_name.get(&(kind, name.to_owned())).cloned()
        })
    }

    /// The PCS that `uid` belongs to (itself, or through its owners), and its shape.
    fn pcs_of(&self, uid: &str) -> Option<(&Obj, PcsShape)> {
        let mut current = self.objs.get(uid)?;
        for _ in 0..3 {
            match current.kind {
                Kind::PodCliqueSet => return Some((current, self.vocab.shape(&current.object))),
                Kind::PodCliqueScalingGroup => {
                    current = self
                        .objs
                        .get(&self.owner(&current.object, Kind::PodCliqueSet)?)?;
                }
                Kind::PodClique => {
                    let up = self
                        .owner(&current.object, Kind::PodCliqueScalingGroup)
                        .or_else(|| self.owner(&current.object, Kind::PodCliqueSet))?;
                    current = self.objs.get(&up)?;
                }
                Kind::Pod => {
                    current = self
                        .objs
                        .get(&self.owner(&current.object, Kind::PodClique)?)?;
                }
                Kind::Event => return None,
            }
        }
        None
    }

    /// The replicas a child object belongs to, nearest first: for a PodClique in a PCSG,
    /// (PCSG, j) then (PCS, i); for a standalone PodClique or a PCSG, (PCS, i). The parents
    /// come from ownerReferences (B3), the indices from the B1 names (`<pcs>-<i>-<pcsg>`,
    /// `<pcs>-<i>-<pcsg>-<j>-<clique>`, `<pcs>-<i>-<clique>`): no label is needed.
    fn replicas_of(&self, o: &Value, kind: Kind) -> Vec<ReplicaKey> {
        let mut out = Vec::new();
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind == Kind::PodClique
            && let Some(pcsg) = self.owner(o, Kind::PodCliqueScalingGroup)
            && let Some(j) = self
                .objs
                .get(&pcsg)
                .and_then(|g| index_after(name, &g.name))
        {
            out.push((pcsg, j));
        }
        if matches!(kind, Kind::PodClique | Kind::PodCliqueScalingGroup) {
            let pcs = self.owner(o, Kind::PodCliqueSet).or_else(|| {
                let pcsg = self.owner(o, Kind::PodCliqueScalingGroup)?;
                self.owner(&self.objs.get(&pcsg)?.object, Kind::PodCliqueSet)
            });
            if let Some(pcs) = pcs
                && let Some(i) = self.objs.get(&pcs).and_then(|p| index_after(name, &p.name))
            {
                out.push((pcs, i));
            }
        }
        out
    }

    /// Whether replica `key` of a completion-aware parent is complete: every required child of
    /// its current attempt (not being deleted) is Completed.
    fn replica_complete(&self, key: &ReplicaKey) -> bool {
        self.replica_complete_where(key, |_| true)
    }

    /// [`Self::replica_complete`] counting only the required children that `current` accepts.
    fn replica_complete_where(&self, key: &ReplicaKey, current: impl Fn(&Obj) -> bool) -> bool {
        let Some(parent) = self.objs.get(&key.0) else {
            return false;
        };
        let Some((pcs, shape)) = self.pcs_of(&key.0) else {
            return false;
        };
        let live_completed = |kind: Kind, name: &str| {
            self.current(kind, name)
                .is_some_and(|o| o.deleting.is_none() && o.terminal.completed && current(o))
        };
        match parent.kind {
            Kind::PodCliqueScalingGroup => {
                let prefix = format!(
                    "{}-{}-",
                    pcs.name,
                    index_after(&parent.name, &pcs.name).unwrap_or(0)
                );
                let Some(cfg) = parent.name.strip_prefix(&prefix).or_else(|| {
                    shape
                        .groups
                        .iter()
                        .map(|g| g.name.as_str())
                        .find(|g| parent.name.ends_with(&format!("-{g}")))
                }) else {
                    return false;
                };
                let Some(group) = shape.group(cfg) else {
                    return false;
                };
                let required = group.required_cliques(&shape);
                !required.is_empty()
                    && required.iter().all(|c| {
                        live_completed(Kind::PodClique, &format!("{}-{}-{c}", parent.name, key.1))
                    })
            }
            Kind::PodCliqueSet => {
                let required = shape.required_children();
                !required.is_empty()
                    && required.iter().all(|c| {
                        let name = format!("{}-{}-{c}", parent.name, key.1);
                        if shape.group(c).is_some() {
                            live_completed(Kind::PodCliqueScalingGroup, &name)
                        } else {
                            live_completed(Kind::PodClique, &name)
                        }
                    })
            }
            Kind::Pod | Kind::PodClique | Kind::Event => false,
        }
    }

    /// Whether the parent of replica `key` is completion-aware.
    fn replica_aware(&self, key: &ReplicaKey) -> bool {
        let Some(parent) = self.objs.get(&key.0) else {
            return false;
        };
        let Some((pcs, shape)) = self.pcs_of(&key.0) else {
            return false;
        };
        match parent.kind {
            Kind::PodCliqueSet => shape.completion_aware,
            Kind::PodCliqueScalingGroup => shape
                .groups
                .iter()
                .find(|g| {
                    parent.name.ends_with(&format!("-{}", g.name))
                        && parent.name.starts_with(&pcs.name)
                })
                .is_some_and(|g| g.completion_aware),
            Kind::Pod | Kind::PodClique | Kind::Event => false,
        }
    }

    fn max_restarts(&self, key: &ReplicaKey) -> u64 {
        let Some(parent) = self.objs.get(&key.0) else {
            return 0;
        };
        let Some((_, shape)) = self.pcs_of(&key.0) else {
            return 0;
        };
        match parent.kind {
            Kind::PodCliqueSet => u64::from(shape.max_restarts),
            Kind::PodCliqueScalingGroup => shape
                .groups
                .iter()
                .find(|g| parent.name.ends_with(&format!("-{}", g.name)))
                .map_or(0, |g| u64::from(g.max_restarts)),
            // Only a PCS or a PCSG has replicas with a budget.
            Kind::Pod | Kind::PodClique | Kind::Event => 0,
        }
    }

    /// The entry showing why the scope of replica `key` is terminal, if it is: the parent's
    /// terminal write, or the latest required child's completion.
    fn scope_terminal(&self, key: &ReplicaKey) -> Option<usize> {
        let parent = self.objs.get(&key.0)?;
        if parent.terminal.is_terminal() {
            return parent.terminal_at.or(Some(parent.last));
        }
        self.replica_complete(key).then_some(parent.last)
    }

    /// Whether a breach of replica `key` (see [`Self::note_breach`]) was shown after the object
    /// created at `created` existed: a gang termination of that attempt is justified even once
    /// the breached object itself is gone.
    fn regular_gang_termination(&self, key: &ReplicaKey, created: usize) -> bool {
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
    fn note_breach(&mut self, idx: usize, e: &Entry) {
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
    fn members_torn_down(&self, group: &str, at: usize) -> bool {
        self.objs.values().any(|o| {
            o.kind == Kind::PodClique
                && o.deleting.is_some_and(|d| d > at)
                && self
                    .owner(&o.object, Kind::PodCliqueScalingGroup)
                    .as_deref()
                    == Some(group)
        })
    }

    /// Runs every check of [`CHECKS`] on the entry at `idx`, in the table's order.
    fn check(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
        for (_, check) in CHECKS {
            check(self, idx, e, prev);
        }
    }

    /// Records failure evidence in entry `idx` (a pod of a live completion-aware PodClique
    /// failed or lost, a completion-aware PodClique or a PCSG turned Failed) against the
    /// nearest completion-aware replica: its next increment is justified (R3), and a deletion
    /// before that increment is O2.
    fn note_failure(&mut self, idx: usize, e: &Entry, prev: Option<&Obj>) {
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
                    o.pointer("/status/phase")
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
    fn note_completion(&mut self, idx: usize, e: &Entry) {
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

    fn update(&mut self, idx: usize, e: &Entry, prev: Option<Obj>) {
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

/// The replica index in a B1 name: `name` is `<parent>-<index>-<rest>`.
fn index_after(name: &str, parent: &str) -> Option<u32> {
    let (index, rest) = name
        .strip_prefix(parent)?
        .strip_prefix('-')?
        .split_once('-')?;
    if rest.is_empty() || index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    index.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::checks::CHECKS;
    use super::index_after;

    #[test]
    fn replica_indices_are_read_from_b1_names() {
        assert_eq!(index_after("job-0-trainer", "job"), Some(0));
        assert_eq!(
            index_after("job-12-trainer-3-worker", "job-12-trainer"),
            Some(3)
        );
        assert_eq!(index_after("job-x-trainer", "job"), None);
        assert_eq!(index_after("job-0", "job"), None);
        assert_eq!(index_after("jobs-0-trainer", "job"), None);
        assert_eq!(index_after("job-0-", "job"), None);
    }

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
