//! Watching a case's namespace: the latest state of every pod, PodClique, PCSG, PCS and Event
//! (the [`Snapshot`] expectations are judged against), a change signal that wakes waiters on
//! every watch event (no polling), and the invariant monitor fed in resourceVersion order.
//!
//! Watches of different kinds deliver independently, so an entry is handed to the monitor
//! only after a short settling delay, in resourceVersion order (an etcd revision, comparable
//! across kinds); the actor of each write is decided then, when the harness has recorded the
//! resourceVersions its own requests got back.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::kubelet::Fleet;
use crate::monitor::{Actor, Entry, EventType, Monitor, Violation};
use crate::snapshot::Snapshot;
use crate::vocab::{Kind, Vocabulary};

/// How long an entry waits before the monitor sees it (lets the other watches catch up; a
/// loaded apiserver delivers one kind's events hundreds of milliseconds after another's).
pub const SETTLE: Duration = Duration::from_millis(1000);

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
}

#[derive(Debug)]
struct Pending {
    arrived: Instant,
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
}

/// What the harness itself wrote, for attribution.
#[derive(Debug, Default)]
struct HarnessWrites {
    resource_versions: HashSet<u64>,
    deleted_uids: HashSet<String>,
}

/// The watches of one case.
pub struct Observer {
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
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

fn uid_of(o: &Value) -> String {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
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
        let state = Arc::new(Mutex::new(State {
            monitor: Some(Monitor::new(vocab)),
            ..State::default()
        }));
        let writes = Arc::new(Mutex::new(HarnessWrites::default()));
        let mut tasks = Vec::new();
        for kind in Kind::ALL {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
            tasks.push(tokio::spawn(watch_kind(
                kind,
                api,
                state.clone(),
                writes.clone(),
                tx.clone(),
            )));
        }
        tasks.push(tokio::spawn(release_loop(
            state.clone(),
            writes.clone(),
            fleet,
            tx.clone(),
        )));
        let observer = Observer {
            state,
            writes,
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

    /// Records that the harness deleted the object with this uid.
    pub fn harness_deleted(&self, uid: &str) {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .deleted_uids
            .insert(uid.to_string());
    }

    /// Monitor violations found so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    /// Whether the monitor has found a violation that still stands once every watch has had
    /// time to deliver what came before it (a late entry replays the timeline, which can
    /// withdraw a verdict that rested on arrival order).
    pub async fn violation_confirmed(&self) -> bool {
        if self.violations().is_empty() {
            return false;
        }
        tokio::time::sleep(2 * SETTLE).await;
        !self.violations().is_empty()
    }

    /// How often the timeline was judged again in resource-version order.
    pub fn replays(&self) -> usize {
        self.lock().replays
    }

    /// Watch failures seen (the watches resume by themselves; these explain a stuck case).
    pub fn watch_errors(&self) -> Vec<String> {
        self.lock().watch_errors.clone()
    }

    /// Why the timeline cannot be judged, if it cannot: a watch delivered a resourceVersion
    /// lower than one it had delivered before (a restored etcd, another apiserver's older
    /// cache), so the order of writes the monitor relies on is unknown. A case with such a
    /// timeline is an error, never a pass.
    pub fn unjudgeable(&self) -> Option<String> {
        self.lock().unjudgeable.clone()
    }

    /// Hands every pending entry to the monitor (waiting out the settling delay first) and
    /// returns the rendered timeline.
    pub async fn settle(&self) -> String {
        tokio::time::sleep(SETTLE + Duration::from_millis(100)).await;
        let state = self.lock();
        state
            .monitor
            .as_ref()
            .map(Monitor::render_timeline)
            .unwrap_or_default()
    }

    /// The timeline so far (entries already handed to the monitor).
    pub fn timeline(&self) -> String {
        self.lock()
            .monitor
            .as_ref()
            .map(Monitor::render_timeline)
            .unwrap_or_default()
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

fn record(
    kind: Kind,
    object: Value,
    deleted: bool,
    state: &Arc<Mutex<State>>,
    writes: &Arc<Mutex<HarnessWrites>>,
    tx: &watch::Sender<u64>,
) {
    let uid = uid_of(&object);
    let rv = object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse::<u64>().ok())
        .unwrap_or(0);
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    let previous = state.seen.get(&uid).copied();
    if previous.is_some_and(|(seen_rv, ev)| seen_rv >= rv && !(deleted && ev != EventType::Deleted))
    {
        return; // a relist repeating what we have
    }
    let event = if deleted {
        EventType::Deleted
    } else if previous.is_none() {
        EventType::Added
    } else {
        EventType::Modified
    };
    let mut facts = Facts::default();
    let snapshot = &mut state.snapshot;
    match kind {
        Kind::Pod => {
            let old = snapshot.pods.iter().position(|p| uid_of(p) == uid);
            let was = old.map(|i| snapshot.pods[i].clone());
            facts.deletion_started =
                (deleted || deleting(&object)) && !was.as_ref().is_some_and(deleting);
            facts.node_newly_set = object
                .pointer("/spec/nodeName")
                .is_some_and(|n| !n.is_null())
                && was
                    .as_ref()
                    .is_some_and(|w| w.pointer("/spec/nodeName").is_none_or(Value::is_null));
            let owners: Vec<String> = object
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .map(|o| o.iter().map(uid_of_ref).collect())
                .unwrap_or_default();
            let harness = writes.lock().unwrap_or_else(|p| p.into_inner());
            facts.owner_deleted_by_harness =
                owners.iter().any(|o| harness.deleted_uids.contains(o));
            drop(harness);
            match (old, deleted) {
                (Some(i), true) => {
                    snapshot.pods.remove(i);
                }
                (Some(i), false) => snapshot.pods[i] = object.clone(),
                (None, false) => snapshot.pods.push(object.clone()),
                (None, true) => {}
            }
        }
        Kind::Event => {
            let old = snapshot.events.iter().position(|p| uid_of(p) == uid);
            match (old, deleted) {
                (Some(i), true) => {
                    snapshot.events.remove(i);
                }
                (Some(i), false) => snapshot.events[i] = object.clone(),
                (None, false) => snapshot.events.push(object.clone()),
                (None, true) => {}
            }
        }
        _ => {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if deleted {
                if snapshot
                    .objects
                    .get(&(kind, name.clone()))
                    .is_some_and(|o| uid_of(o) == uid)
                {
                    snapshot.objects.remove(&(kind, name));
                }
            } else {
                snapshot.objects.insert((kind, name), object.clone());
            }
        }
    }
    state.seen.insert(uid, (rv, event));
    if let Ok(entry) = Entry::new(kind, event, object, Actor::Implementation) {
        state.pending.push(Pending {
            arrived: Instant::now(),
            entry,
            facts,
        });
    }
    drop(state);
    tx.send_modify(|n| *n += 1);
}

fn uid_of_ref(owner: &Value) -> String {
    owner
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

async fn watch_kind(
    kind: Kind,
    api: Api<DynamicObject>,
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    tx: Arc<watch::Sender<u64>>,
) {
    // kube's default backoff paces the retries after a watch error.
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut progress = WatchProgress::default();
    while let Some(event) = stream.next().await {
        let to_value = |o: DynamicObject| {
            let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
            // Dynamic objects carry their kind in `types`; make sure it is there.
            if v.get("kind").is_none() {
                v["kind"] = Value::String(kind.as_str().into());
            }
            v
        };
        match event {
            Ok(watcher::Event::Apply(o)) => {
                let object = to_value(o);
                progress.streamed(kind, &object, &state);
                record(kind, object, false, &state, &writes, &tx);
            }
            Ok(watcher::Event::Delete(o)) => {
                let object = to_value(o);
                progress.streamed(kind, &object, &state);
                record(kind, object, true, &state, &writes, &tx);
            }
            Ok(watcher::Event::Init) => progress.listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(o)) => {
                let object = to_value(o);
                progress.listed(&object);
                record(kind, object, false, &state, &writes, &tx);
            }
            Ok(watcher::Event::InitDone) => {
                // A relist after a gap: whatever we hold that the list no longer has was
                // deleted while the watch was away.
                for gone in progress.relisted(kind, &state) {
                    record(kind, gone, true, &state, &writes, &tx);
                }
                state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .synced
                    .insert(kind);
                tx.send_modify(|n| *n += 1);
            }
            Err(err) => {
                state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .watch_errors
                    .push(format!("{kind}: {err}"));
            }
        }
    }
}

fn rv_of(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse::<u64>().ok())
        .unwrap_or(0)
}

/// What one watch has delivered: the highest resourceVersion streamed, and during a (re)list
/// the UIDs listed so far.
#[derive(Debug, Default)]
struct WatchProgress {
    highest: u64,
    listing: Option<HashSet<String>>,
}

impl WatchProgress {
    /// A streamed event: its resourceVersion must be above every one streamed before.
    fn streamed(&mut self, kind: Kind, object: &Value, state: &Mutex<State>) {
        let rv = rv_of(object);
        if rv < self.highest {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            state.unjudgeable.get_or_insert_with(|| {
                format!(
                    "the {kind} watch went back in time: resourceVersion {rv} ({} {}) after {}",
                    kind,
                    object
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?"),
                    self.highest
                )
            });
        }
        self.highest = self.highest.max(rv);
    }

    fn listed(&mut self, object: &Value) {
        self.highest = self.highest.max(rv_of(object));
        if let Some(listing) = self.listing.as_mut() {
            listing.insert(uid_of(object));
        }
    }

    /// The objects of `kind` held in the snapshot that the list just finished did not have,
    /// each stamped with the list's highest resourceVersion (they were deleted before it).
    fn relisted(&mut self, kind: Kind, state: &Mutex<State>) -> Vec<Value> {
        let Some(listed) = self.listing.take() else {
            return Vec::new();
        };
        let state = state.lock().unwrap_or_else(|p| p.into_inner());
        let held: Vec<&Value> = match kind {
            Kind::Pod => state.snapshot.pods.iter().collect(),
            Kind::Event => state.snapshot.events.iter().collect(),
            _ => state
                .snapshot
                .objects
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|(_, o)| o)
                .collect(),
        };
        held.into_iter()
            .filter(|o| !listed.contains(&uid_of(o)))
            .map(|o| {
                let mut gone = o.clone();
                gone["metadata"]["resourceVersion"] =
                    Value::String(self.highest.max(rv_of(o)).to_string());
                gone
            })
            .collect()
    }
}

fn actor(entry: &Entry, facts: Facts, writes: &HarnessWrites, fleet: Option<&Fleet>) -> Actor {
    let harness_rv = writes.resource_versions.contains(&entry.resource_version);
    match entry.kind {
        Kind::Event => Actor::Implementation,
        Kind::Pod => {
            let harness_deletion = fleet.is_some_and(|f| f.initiated_deletion(&entry.uid))
                || writes.deleted_uids.contains(&entry.uid);
            if facts.owner_deleted_by_harness
                && (facts.deletion_started || entry.event == EventType::Deleted)
            {
                return Actor::System;
            }
            match entry.event {
                EventType::Added => Actor::Implementation,
                EventType::Deleted if harness_deletion => Actor::Harness,
                EventType::Deleted => Actor::Implementation,
                EventType::Modified if facts.deletion_started => {
                    if harness_deletion {
                        Actor::Harness
                    } else {
                        Actor::Implementation
                    }
                }
                EventType::Modified => {
                    if harness_rv
                        || facts.node_newly_set
                        || fleet.is_some_and(|f| f.wrote(entry.resource_version))
                    {
                        Actor::Harness
                    } else {
                        Actor::Implementation
                    }
                }
            }
        }
        _ => {
            if harness_rv
                || ((entry.event == EventType::Deleted || entry.deleting())
                    && writes.deleted_uids.contains(&entry.uid))
            {
                Actor::Harness
            } else {
                Actor::Implementation
            }
        }
    }
}

async fn release_loop(
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    fleet: Option<Arc<Fleet>>,
    tx: Arc<watch::Sender<u64>>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (mut ready, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut guard.pending)
            .into_iter()
            .partition(|p| now.duration_since(p.arrived) >= SETTLE);
        guard.pending = rest;
        if ready.is_empty() {
            continue;
        }
        ready.sort_by_key(|p| p.entry.resource_version);
        let writes = writes.lock().unwrap_or_else(|p| p.into_inner());
        let entries: Vec<Entry> = ready
            .into_iter()
            .map(|mut p| {
                p.entry.actor = actor(&p.entry, p.facts, &writes, fleet.as_deref());
                p.entry
            })
            .collect();
        drop(writes);
        let state = &mut *guard;
        let Some(monitor) = state.monitor.as_mut() else {
            continue;
        };
        let newest = entries.last().map_or(0, |e| e.resource_version);
        // An entry older than one already judged arrived later than the settling delay (a
        // watch lagged): judge the whole timeline again in resource-version order, which is
        // the order etcd committed the writes in, so no verdict rests on arrival order.
        let late = entries
            .first()
            .is_some_and(|e| e.resource_version < state.released_rv);
        let new = if late {
            *monitor = monitor.replayed_with(entries);
            let before = state.violations.len();
            state.violations = monitor.violations().to_vec();
            state.replays += 1;
            state.violations.len() > before
        } else {
            let mut found = Vec::new();
            for entry in entries {
                found.extend(monitor.observe(entry));
            }
            state.violations.extend(found.iter().cloned());
            !found.is_empty()
        };
        state.released_rv = state.released_rv.max(newest);
        drop(guard);
        if new {
            tx.send_modify(|n| *n += 1);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, rv: u64) -> Value {
        json!({"kind": "Pod", "metadata": {"name": uid, "uid": uid, "resourceVersion": rv.to_string()}})
    }

    #[test]
    fn a_watch_going_back_in_time_makes_the_timeline_unjudgeable() {
        let state = Mutex::new(State::default());
        let mut progress = WatchProgress::default();
        progress.streamed(Kind::Pod, &pod("a", 10), &state);
        progress.streamed(Kind::Pod, &pod("b", 12), &state);
        assert_eq!(state.lock().unwrap().unjudgeable, None);
        progress.streamed(Kind::Pod, &pod("c", 11), &state);
        let why = state.lock().unwrap().unjudgeable.clone().unwrap();
        assert!(
            why.contains("resourceVersion 11") && why.contains("after 12"),
            "{why}"
        );
    }

    #[test]
    fn a_relist_reports_the_objects_it_no_longer_has_as_deleted() {
        let state = Mutex::new(State::default());
        state.lock().unwrap().snapshot.pods = vec![pod("kept", 5), pod("gone", 7)];
        let mut progress = WatchProgress {
            listing: Some(HashSet::new()),
            ..WatchProgress::default()
        };
        progress.listed(&pod("kept", 5));
        progress.listed(&pod("new", 20));
        let gone = progress.relisted(Kind::Pod, &state);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0]["metadata"]["uid"], "gone");
        assert_eq!(gone[0]["metadata"]["resourceVersion"], "20");
        // Nothing more once the list is done; relist items never count as going backwards.
        assert!(progress.relisted(Kind::Pod, &state).is_empty());
        assert_eq!(state.lock().unwrap().unjudgeable, None);
    }
}
