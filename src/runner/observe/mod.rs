//! Watching a case's namespace: the latest state of every pod, PodClique, PCSG, PCS and Event
//! (the [`Snapshot`] expectations are judged against), a change signal that wakes waiters on
//! every watch event (no polling), and the invariant monitor fed in resourceVersion order.
//!
//! Watches of different kinds deliver independently, so an entry is handed to the monitor only
//! once every watch has *confirmed* it delivered everything up to the entry's resourceVersion
//! (an etcd revision, comparable across kinds), and then in resourceVersion order: no verdict
//! rests on arrival order or on a guessed delay. A watch confirms its progress with each event
//! and with the apiserver's bookmarks. Each watch runs in short sessions, because the apiserver
//! sends a session's bookmark shortly before the session ends; before a session whose kind holds
//! entries back (or the revision the end of the case awaits), the harness makes one consistent
//! list of that kind, which brings the apiserver's watch cache up to the current revision, so
//! the next bookmark covers them.
//! The actor of each write is decided at release, when the harness has recorded the
//! resourceVersions its own requests got back.
//!
//! It also notes what tells that a case did not run as written: pods that failed though no
//! step made them fail, and pods whose containers cannot start on the target
//! ([`cannot_start`], awaited through [`StartFailures`]); and the rendered timeline ends with
//! the watches' errors and the monitor's replays.
//!
//! - `watches`: the watch of one kind, in sessions, with lists and relists;
//! - `record`: what a watch delivered, into the snapshot and the pending entries;
//! - `release`: the confirmed entries to the monitor, in resourceVersion order.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::kubelets::simulated::Fleet;
use crate::monitor::{Entry, EventType, Monitor, Undecided, Violation};
use crate::snapshot::Snapshot;
use crate::vocab::{Kind, Vocabulary};
use release::{release, release_loop};
use watches::{Shared, nudge, watch_kind};

/// How long one watch session of a gated kind lasts. The apiserver sends a session's bookmark
/// two seconds before its end, at its next one-second tick, so a 3 s session confirms the
/// watch's progress within about 2 s of starting, even when the kind is quiet.
const SESSION_SECONDS: u32 = 3;

/// Events enter no verdict (only the rendered timeline), and the apiserver serves their watch
/// without a cache, so without timely bookmarks: their sessions are long and never gate.
const EVENT_SESSION_SECONDS: u32 = 60;

/// The kinds whose watch progress gates the monitor.
const GATED: [Kind; 4] = [
    Kind::Pod,
    Kind::PodClique,
    Kind::PodCliqueScalingGroup,
    Kind::PodCliqueSet,
];

/// How long the end of a case waits for every gated watch to confirm the revision current at
/// the end; past it, the case cannot be judged (the apiserver gives no watch progress).
const PROGRESS_DEADLINE: Duration = Duration::from_secs(30);

/// The API resource of a kind.
pub fn api_resource(kind: Kind) -> ApiResource {
    let (group, version) = match kind.api_version().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", kind.api_version()),
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind.as_str()),
        kind.plural(),
    )
}

/// Facts about a pod event known only at arrival (against the previous version).
#[derive(Debug, Clone, Copy, Default)]
struct Facts {
    deletion_started: bool,
    node_newly_set: bool,
    owner_deleted_by_harness: bool,
    /// The pod's deletion started with a `DisruptionTarget` condition that a component of
    /// the cluster sets before it deletes a pod itself ([`CLUSTER_DISRUPTIONS`]).
    disrupted_by_cluster: bool,
}

#[derive(Debug)]
struct Pending {
    entry: Entry,
    facts: Facts,
}

#[derive(Debug, Default)]
struct State {
    snapshot: Snapshot,
    /// uid → (kind, name) of live Grove objects, and pod uid → index into `snapshot.pods`.
    seen: HashMap<String, (u64, EventType)>,
    pending: Vec<Pending>,
    monitor: Option<Monitor>,
    violations: Vec<Violation>,
    /// The highest resource version handed to the monitor.
    released_rv: u64,
    /// How often a late entry made the monitor replay the timeline in resource-version order.
    replays: usize,
    synced: HashSet<Kind>,
    watch_errors: Vec<String>,
    /// Why the timeline cannot be judged (a watch saw a resourceVersion go backwards).
    unjudgeable: Option<String>,
    /// Per kind, the resourceVersion up to which its watch has delivered every event (from
    /// its events, its bookmarks and its lists).
    progress: HashMap<Kind, u64>,
    /// The revision the end of the case waits for every gated watch to confirm (0 before it).
    awaited: u64,
    /// Pods that turned Failed while not being deleted, though no step of the harness acted
    /// on them, nor deleted their owner: uid, and the pod's name with the reason it gives.
    failed_unprompted: Vec<(String, String)>,
    /// Pods whose containers cannot start on the target (an image it cannot pull, a container
    /// it cannot create): uid, and the pod's name with the reason its status gives.
    cannot_start: Vec<(String, String)>,
    /// Pods the cluster itself deleted (a node gone NotReady, pod garbage collection, the
    /// kubelet, the scheduler's preemption) though no step of the harness acted on them or
    /// their owner: uid, and the pod's name with the condition's reason and message.
    disrupted_by_cluster: Vec<(String, String)>,
}

impl State {
    /// The resourceVersion up to which every gated watch has delivered everything.
    fn gate(&self) -> u64 {
        GATED
            .iter()
            .map(|k| self.progress.get(k).copied().unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Whether `kind`'s watch holds something back it has not yet confirmed: an entry, or the
    /// revision the end of the case awaits. Its cache of the kind advances only with the kind's
    /// own writes, so a revision written elsewhere (an Event, a Lease) reaches its bookmarks
    /// only once a consistent read has brought the cache up to date.
    fn held_by(&self, kind: Kind) -> bool {
        let reached = self.progress.get(&kind).copied().unwrap_or(0);
        GATED.contains(&kind)
            && (self.awaited > reached
                || self
                    .pending
                    .iter()
                    .any(|p| p.entry.resource_version > reached))
    }

    /// The timeline handed to the monitor so far, then what the watches went through that
    /// bears on it: their errors (each counted, the watches resume by themselves) and how
    /// often late entries made the monitor judge the whole timeline again.
    fn rendered(&self) -> String {
        let mut out = self
            .monitor
            .as_ref()
            .map(Monitor::render_timeline)
            .unwrap_or_default();
        let mut errors: Vec<(&str, usize)> = Vec::new();
        for e in &self.watch_errors {
            match errors.iter_mut().find(|(m, _)| *m == e.as_str()) {
                Some((_, n)) => *n += 1,
                None => errors.push((e, 1)),
            }
        }
        for (message, times) in errors {
            let times = if times > 1 {
                format!(" ({times} times)")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "note: watch error, resumed by itself: {message}{times}\n"
            ));
        }
        if self.replays > 0 {
            out.push_str(&format!(
                "note: the monitor judged the whole timeline again {} time{}: object entries arrived after later ones had been judged\n",
                self.replays,
                if self.replays == 1 { "" } else { "s" }
            ));
        }
        out
    }

    fn progressed(&mut self, kind: Kind, rv: u64) {
        let reached = self.progress.entry(kind).or_insert(0);
        *reached = (*reached).max(rv);
    }
}

/// What the harness itself wrote, for attribution.
#[derive(Debug, Default)]
struct HarnessWrites {
    resource_versions: HashSet<u64>,
    deleted_uids: HashSet<String>,
    /// Pods a pod step acted on (an exit, a readiness flip, a disruption).
    touched_uids: HashSet<String>,
}

/// The watches of one case.
pub struct Observer {
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    fleet: Option<Arc<Fleet>>,
    apis: Vec<(Kind, Api<DynamicObject>)>,
    /// Bumped to end every watch session at once (its successor's bookmark comes sooner).
    restart: Arc<watch::Sender<u64>>,
    changed: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Observer {
    /// Starts watching `namespace` and returns once every watch has listed once.
    pub async fn start(
        client: Client,
        namespace: &str,
        vocab: Vocabulary,
        fleet: Option<Arc<Fleet>>,
    ) -> Observer {
        let (tx, changed) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let restart = Arc::new(watch::channel(0u64).0);
        let state = Arc::new(Mutex::new(State {
            monitor: Some(Monitor::new(vocab)),
            ..State::default()
        }));
        let writes = Arc::new(Mutex::new(HarnessWrites::default()));
        let mut tasks = Vec::new();
        let mut apis = Vec::new();
        for kind in Kind::ALL {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
            apis.push((kind, api.clone()));
            tasks.push(tokio::spawn(watch_kind(
                kind,
                api,
                Shared {
                    state: state.clone(),
                    writes: writes.clone(),
                    tx: tx.clone(),
                },
                restart.subscribe(),
            )));
        }
        tasks.push(tokio::spawn(release_loop(
            state.clone(),
            writes.clone(),
            fleet.clone(),
            tx.clone(),
        )));
        let observer = Observer {
            state,
            writes,
            fleet,
            apis,
            restart,
            changed,
            tasks,
        };
        let mut rx = observer.changed.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while observer.lock().synced.len() < Kind::ALL.len() {
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                break;
            }
        }
        observer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver that changes on every watch event and every monitor verdict.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.clone()
    }

    /// Runs `f` on the current snapshot.
    pub fn with_snapshot<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        f(&self.lock().snapshot)
    }

    /// A handle that reads the snapshot from another task.
    pub fn snapshot_handle(&self) -> SnapshotHandle {
        SnapshotHandle {
            state: self.state.clone(),
        }
    }

    /// Records a resourceVersion one of the harness's requests got back.
    pub fn harness_wrote(&self, object: &Value) {
        if let Some(rv) = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok())
        {
            self.writes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .resource_versions
                .insert(rv);
        }
    }

    /// Records that a pod step acts on the pod with this uid.
    pub fn harness_touched(&self, uid: &str) {
        self.harness_writes().touched_uids.insert(uid.to_string());
    }

    /// On real kubelets, the pods that failed though nothing the harness did made them fail
    /// (a container that could not start, a node that gave out): the case then did not run as
    /// written. Each is its name with the reason its status gives. (A simulated kubelet fails
    /// a pod only when a step says so.)
    pub fn failed_unprompted(&self) -> Vec<String> {
        if self.fleet.is_some() {
            return Vec::new();
        }
        self.lock()
            .failed_unprompted
            .iter()
            .map(|(_, what)| what.clone())
            .collect()
    }

    /// Pods of the case the cluster itself deleted though no step acted on them or their
    /// owner (see [`CLUSTER_DISRUPTIONS`]): each its name, the reason and the message.
    pub fn disrupted_by_cluster(&self) -> Vec<String> {
        self.lock()
            .disrupted_by_cluster
            .iter()
            .map(|(_, what)| what.clone())
            .collect()
    }

    /// Records that the harness deleted the object with this uid.
    pub fn harness_deleted(&self, uid: &str) {
        self.harness_writes().deleted_uids.insert(uid.to_string());
    }

    fn harness_writes(&self) -> std::sync::MutexGuard<'_, HarnessWrites> {
        self.writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Monitor violations found so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    /// Creations the monitor left for the requests to judge ([`Undecided`]).
    pub fn undecided(&self) -> Vec<Undecided> {
        self.lock()
            .monitor
            .as_ref()
            .map_or_else(Vec::new, |m| m.undecided().to_vec())
    }

    /// Whether the monitor has found a violation. Entries reach the monitor only once every
    /// watch has confirmed them, in resourceVersion order, so a verdict never waits for a
    /// later arrival to stand.
    pub fn violation_found(&self) -> bool {
        !self.lock().violations.is_empty()
    }

    /// A handle that waits, from another task, until a pod of the case cannot start.
    pub fn start_failures(&self) -> StartFailures {
        StartFailures {
            state: self.state.clone(),
            changed: self.changed.clone(),
        }
    }

    /// Why the timeline cannot be judged, if it cannot: a watch delivered a resourceVersion
    /// lower than one it had delivered before (a restored etcd, another apiserver's older
    /// cache), so the order of writes the monitor relies on is unknown. A case with such a
    /// timeline is an error, never a pass.
    pub fn unjudgeable(&self) -> Option<String> {
        self.lock().unjudgeable.clone()
    }

    /// Hands the monitor every entry up to the revision current now, once every gated watch has
    /// confirmed it delivered them, and returns the rendered timeline, with the watches' errors
    /// and the monitor's replays noted at its end. A watch that cannot confirm within
    /// `PROGRESS_DEADLINE` (30 s) makes the timeline unjudgeable.
    pub async fn settle(&self) -> String {
        let started = std::time::Instant::now();
        let mut current = 0;
        for (kind, api) in &self.apis {
            if GATED.contains(kind) {
                match nudge(api).await {
                    Ok(rv) => current = current.max(rv),
                    Err(e) => self.lock().watch_errors.push(format!("{kind}: {e}")),
                }
            }
        }
        // Each nudge above may be followed by writes of kinds no gated watch delivers before
        // the last one returns: a watch that delivers nothing more confirms `current` only
        // once its next session has nudged its cache again (see `State::held_by`).
        self.lock().awaited = current;
        // New sessions get their bookmark sooner than the running ones would.
        self.restart.send_modify(|n| *n += 1);
        let mut rx = self.changed.clone();
        let deadline = tokio::time::Instant::now() + PROGRESS_DEADLINE;
        while self.lock().gate() < current {
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let mut state = self.lock();
                let behind: Vec<String> = GATED
                    .iter()
                    .filter_map(|k| {
                        let reached = state.progress.get(k).copied().unwrap_or(0);
                        (reached < current).then(|| format!("{k} watch (at {reached})"))
                    })
                    .collect();
                state.unjudgeable.get_or_insert_with(|| {
                    format!(
                        "the {} did not confirm resourceVersion {current} within {:?} (the apiserver sent no bookmark for it); which writes came before which is unknown",
                        behind.join(" and the "),
                        PROGRESS_DEADLINE
                    )
                });
                break;
            }
        }
        release(&self.state, &self.writes, self.fleet.as_deref());
        let state = self.lock();
        tracing::debug!(
            current,
            waited = ?started.elapsed(),
            pending = state.pending.len(),
            "the watches confirmed the end of the case"
        );
        state.rendered()
    }

    /// The timeline so far (entries already handed to the monitor), with the same notes as
    /// [`settle`](Observer::settle)'s.
    pub fn timeline(&self) -> String {
        self.lock().rendered()
    }
}

/// Waits, from another task, until some pod of the case cannot start on the target.
#[derive(Clone)]
pub struct StartFailures {
    state: Arc<Mutex<State>>,
    changed: watch::Receiver<u64>,
}

impl std::fmt::Debug for StartFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartFailures").finish_non_exhaustive()
    }
}

impl StartFailures {
    /// Returns, once there is one, every pod of the case whose containers cannot start (an
    /// image the target cannot pull, a container it cannot create: see
    /// [`cannot_start`]), each its name and the reason its status gives. Never returns while
    /// every pod can start.
    pub async fn wait(&mut self) -> Vec<String> {
        loop {
            let found: Vec<String> = self
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .cannot_start
                .iter()
                .map(|(_, what)| what.clone())
                .collect();
            if !found.is_empty() {
                return found;
            }
            if self.changed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Reads an [`Observer`]'s snapshot from another task (e.g. an armed trigger).
#[derive(Clone)]
pub struct SnapshotHandle {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SnapshotHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotHandle").finish_non_exhaustive()
    }
}

impl SnapshotHandle {
    /// Runs `f` on the current snapshot.
    pub fn with<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        f(&self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .snapshot)
    }
}

mod record;
pub use record::{CANNOT_START, CLUSTER_DISRUPTIONS, cannot_start, cluster_disruption};
mod release;
#[cfg(test)]
mod tests;
mod watches;
