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
//! entries back, the harness makes one consistent list of that kind, which brings the
//! apiserver's watch cache up to the current revision, so the next bookmark covers the entries.
//! The actor of each write is decided at release, when the harness has recorded the
//! resourceVersions its own requests got back.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::kubelet::Fleet;
use crate::monitor::{Actor, Entry, EventType, Monitor, Violation};
use crate::snapshot::{Snapshot, is_deleting};
use crate::vocab::{Kind, Vocabulary};

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
    /// Pods that turned Failed while not being deleted, though no step of the harness acted
    /// on them, nor deleted their owner: uid, and the pod's name with the reason it gives.
    failed_unprompted: Vec<(String, String)>,
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

    /// Whether an entry is held back by `kind`'s watch, which has not yet confirmed it.
    fn held_by(&self, kind: Kind) -> bool {
        let reached = self.progress.get(&kind).copied().unwrap_or(0);
        GATED.contains(&kind)
            && self
                .pending
                .iter()
                .any(|p| p.entry.resource_version > reached)
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

fn uid_of(o: &Value) -> String {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
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

    /// Whether the monitor has found a violation. Entries reach the monitor only once every
    /// watch has confirmed them, in resourceVersion order, so a verdict never waits for a
    /// later arrival to stand.
    pub fn violation_found(&self) -> bool {
        !self.lock().violations.is_empty()
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

    /// Hands the monitor every entry up to the revision current now, once every gated watch has
    /// confirmed it delivered them, and returns the rendered timeline. A watch that cannot
    /// confirm within [`PROGRESS_DEADLINE`] makes the timeline unjudgeable.
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
                    .filter(|k| state.progress.get(k).copied().unwrap_or(0) < current)
                    .map(|k| k.to_string())
                    .collect();
                state.unjudgeable.get_or_insert_with(|| {
                    format!(
                        "the {} watch did not confirm resourceVersion {current} within {:?} (the apiserver sent no bookmark for it); which writes came before which is unknown",
                        behind.join(" and "),
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
                (deleted || is_deleting(&object)) && !was.as_ref().is_some_and(is_deleting);
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
            let prompted = harness.deleted_uids.contains(&uid)
                || harness.touched_uids.contains(&uid)
                || facts.owner_deleted_by_harness;
            drop(harness);
            if !deleted
                && !is_deleting(&object)
                && !prompted
                && object.pointer("/status/phase").and_then(Value::as_str) == Some("Failed")
                && !state.failed_unprompted.iter().any(|(u, _)| *u == uid)
            {
                let what = format!("{} ({})", name_of(&object), failure_reason(&object));
                state.failed_unprompted.push((uid.clone(), what));
            }
            let snapshot = &mut state.snapshot;
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
            let name = name_of(&object).to_string();
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
        state.pending.push(Pending { entry, facts });
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

/// What the watch tasks of one case share.
struct Shared {
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    tx: Arc<watch::Sender<u64>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, kind: Kind, error: impl std::fmt::Display) {
        self.lock().watch_errors.push(format!("{kind}: {error}"));
    }

    /// Records that `kind`'s watch has delivered everything up to `rv`.
    fn progressed(&self, kind: Kind, rv: u64) {
        self.lock().progressed(kind, rv);
        self.tx.send_modify(|n| *n += 1);
    }
}

/// A consistent list of at most one object: the apiserver first brings its watch cache of the
/// kind up to the current revision, which it returns.
async fn nudge(api: &Api<DynamicObject>) -> Result<u64, kube::Error> {
    let list = api.list(&ListParams::default().limit(1)).await?;
    Ok(list
        .metadata
        .resource_version
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0))
}

/// Lists `kind` (consistently) and records what it holds; returns the list's resourceVersion.
async fn list_kind(
    kind: Kind,
    api: &Api<DynamicObject>,
    shared: &Shared,
    progress: &mut WatchProgress,
) -> Result<String, kube::Error> {
    let list = api.list(&ListParams::default()).await?;
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    let list_rv: u64 = rv.parse().unwrap_or(0);
    progress.listing = Some(HashSet::new());
    for object in list.items {
        let object = to_value(kind, object);
        progress.listed(&object);
        record(
            kind,
            object,
            false,
            &shared.state,
            &shared.writes,
            &shared.tx,
        );
    }
    // A relist after a gap: whatever we hold that the list no longer has was deleted while the
    // watch was away, before the list's revision.
    progress.highest = progress.highest.max(list_rv);
    for gone in progress.relisted(kind, &shared.state) {
        record(kind, gone, true, &shared.state, &shared.writes, &shared.tx);
    }
    shared.lock().synced.insert(kind);
    shared.progressed(kind, list_rv);
    Ok(rv)
}

fn to_value(kind: Kind, object: DynamicObject) -> Value {
    let mut v = serde_json::to_value(object).unwrap_or(Value::Null);
    // Dynamic objects carry their kind in `types`; make sure it is there.
    if v.get("kind").is_none() {
        v["kind"] = Value::String(kind.as_str().into());
    }
    v
}

/// How a watch session ended.
enum SessionEnd {
    /// The server closed it, or the harness asked for a new one: resume from the last revision.
    Resume,
    /// The revision is too old for the apiserver: list again.
    Relist,
    /// An error: retry after a pause.
    Failed,
}

/// Watches `kind` in sessions of [`SESSION_SECONDS`], each resuming where the last one
/// stopped, with bookmarks; lists again only when the apiserver no longer has the revision.
async fn watch_kind(
    kind: Kind,
    api: Api<DynamicObject>,
    shared: Shared,
    mut restart: watch::Receiver<u64>,
) {
    let seconds = if GATED.contains(&kind) {
        SESSION_SECONDS
    } else {
        EVENT_SESSION_SECONDS
    };
    let mut progress = WatchProgress::default();
    let mut resume: Option<String> = None;
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(rv) = resume.clone() else {
            match list_kind(kind, &api, &shared, &mut progress).await {
                Ok(rv) => {
                    resume = Some(rv);
                    pause = Duration::from_millis(100);
                }
                Err(e) => {
                    shared.error(kind, e);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
            continue;
        };
        // Entries held back by this watch: bring the apiserver's cache of the kind up to
        // date first, so this session's bookmark covers them.
        if shared.lock().held_by(kind)
            && let Err(e) = nudge(&api).await
        {
            shared.error(kind, e);
        }
        restart.mark_unchanged();
        let params = WatchParams::default().timeout(seconds);
        let end = match api.watch(&params, &rv).await {
            Ok(stream) => {
                let mut stream = stream.boxed();
                loop {
                    let restarted = async {
                        if restart.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    };
                    let event = tokio::select! {
                        event = stream.next() => event,
                        () = restarted => break SessionEnd::Resume,
                    };
                    let Some(event) = event else {
                        break SessionEnd::Resume;
                    };
                    match event {
                        Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                            let object = to_value(kind, o);
                            resume = Some(streamed(kind, &object, &shared, &mut progress));
                            record(
                                kind,
                                object,
                                false,
                                &shared.state,
                                &shared.writes,
                                &shared.tx,
                            );
                        }
                        Ok(WatchEvent::Deleted(o)) => {
                            let object = to_value(kind, o);
                            resume = Some(streamed(kind, &object, &shared, &mut progress));
                            record(
                                kind,
                                object,
                                true,
                                &shared.state,
                                &shared.writes,
                                &shared.tx,
                            );
                        }
                        Ok(WatchEvent::Bookmark(bookmark)) => {
                            let rv = bookmark.metadata.resource_version;
                            shared.progressed(kind, rv.parse().unwrap_or(0));
                            resume = Some(rv);
                        }
                        Ok(WatchEvent::Error(status)) if status.code == 410 => {
                            break SessionEnd::Relist;
                        }
                        Ok(WatchEvent::Error(status)) => {
                            shared.error(kind, status.message);
                            break SessionEnd::Failed;
                        }
                        Err(e) => {
                            shared.error(kind, e);
                            break SessionEnd::Failed;
                        }
                    }
                }
            }
            Err(kube::Error::Api(status)) if status.code == 410 => SessionEnd::Relist,
            Err(e) => {
                shared.error(kind, e);
                SessionEnd::Failed
            }
        };
        match end {
            SessionEnd::Resume => pause = Duration::from_millis(100),
            SessionEnd::Relist => {
                shared.error(
                    kind,
                    format!("resourceVersion {rv} is too old for the apiserver: listing again (objects created and deleted in between are not on the timeline)"),
                );
                resume = None;
            }
            SessionEnd::Failed => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A pod's name.
fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Why a failed pod failed, as its status says: its containers' termination reasons and
/// messages, else the pod's own.
fn failure_reason(pod: &Value) -> String {
    let containers: Vec<String> = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/state/terminated"))
        .map(|t| {
            let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
            let code = t
                .get("exitCode")
                .and_then(Value::as_i64)
                .unwrap_or_default();
            let message: String = field("message").chars().take(200).collect();
            format!("{} exit code {code} {message}", field("reason"))
                .trim()
                .to_string()
        })
        .collect();
    if containers.is_empty() {
        let field = |k: &str| {
            pod.pointer(&format!("/status/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        format!("{} {}", field("reason"), field("message"))
            .trim()
            .to_string()
    } else {
        containers.join("; ")
    }
}

/// A streamed event: checks its order, records the watch's progress, and returns its
/// resourceVersion (where the next session resumes).
fn streamed(kind: Kind, object: &Value, shared: &Shared, progress: &mut WatchProgress) -> String {
    progress.streamed(kind, object, &shared.state);
    shared.progressed(kind, rv_of(object));
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
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

/// Takes the pending entries every gated watch has confirmed, in resourceVersion order.
fn releasable(state: &mut State) -> Vec<Pending> {
    let gate = state.gate();
    let (mut ready, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut state.pending)
        .into_iter()
        .partition(|p| p.entry.resource_version <= gate);
    state.pending = rest;
    ready.sort_by_key(|p| p.entry.resource_version);
    ready
}

/// Hands the monitor every entry the watches have confirmed; returns whether that revealed a
/// violation.
fn release(state: &Mutex<State>, writes: &Mutex<HarnessWrites>, fleet: Option<&Fleet>) -> bool {
    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
    let ready = releasable(&mut guard);
    if ready.is_empty() {
        return false;
    }
    let writes = writes.lock().unwrap_or_else(|p| p.into_inner());
    let entries: Vec<Entry> = ready
        .into_iter()
        .map(|mut p| {
            p.entry.actor = actor(&p.entry, p.facts, &writes, fleet);
            p.entry
        })
        .collect();
    drop(writes);
    let state = &mut *guard;
    let Some(monitor) = state.monitor.as_mut() else {
        return false;
    };
    let newest = entries.last().map_or(0, |e| e.resource_version);
    // An object entry older than one already judged: only a broken promise of the apiserver
    // gets here. Judge the whole timeline again in resource-version order, the order etcd
    // committed the writes in. A late Event (its watch does not gate, and lags under load)
    // needs no replay: the monitor judges no Event, so it is appended, and the rendered
    // timeline puts it in its place. Replaying for each one made a 256-pod case's monitor
    // quadratic: thousands of Events, each a copy and a re-judgement of the whole timeline.
    let late = entries
        .iter()
        .any(|e| e.kind != Kind::Event && e.resource_version < state.released_rv);
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
    new
}

async fn release_loop(
    state: Arc<Mutex<State>>,
    writes: Arc<Mutex<HarnessWrites>>,
    fleet: Option<Arc<Fleet>>,
    tx: Arc<watch::Sender<u64>>,
) {
    let mut changed = tx.subscribe();
    loop {
        // Woken by every watch event and every confirmed progress.
        if changed.changed().await.is_err() {
            return;
        }
        if release(&state, &writes, fleet.as_deref()) {
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

    fn object(kind: Kind, name: &str, rv: u64) -> Value {
        json!({"kind": kind.as_str(), "metadata": {
            "name": name, "uid": name, "namespace": "ns", "resourceVersion": rv.to_string()}})
    }

    /// A state whose monitor judges, with every gated watch at `rv`.
    fn judged_state(rv: u64) -> Mutex<State> {
        let mut state = State {
            monitor: Some(Monitor::new(Vocabulary::default())),
            ..State::default()
        };
        for kind in GATED {
            state.progressed(kind, rv);
        }
        Mutex::new(state)
    }

    fn arrive(state: &Arc<Mutex<State>>, kind: Kind, name: &str, rv: u64) {
        let writes = Arc::new(Mutex::new(HarnessWrites::default()));
        let tx = watch::channel(0).0;
        record(kind, object(kind, name, rv), false, state, &writes, &tx);
    }

    #[test]
    fn a_pod_failing_without_a_step_of_the_harness_is_noted_with_its_reason() {
        let state = Arc::new(judged_state(0));
        let writes = Arc::new(Mutex::new(HarnessWrites::default()));
        writes.lock().unwrap().touched_uids.insert("exited".into());
        writes.lock().unwrap().deleted_uids.insert("evicted".into());
        let tx = watch::channel(0).0;
        let arrive_pod = |pod: Value| record(Kind::Pod, pod, false, &state, &writes, &tx);
        let failed = |name: &str, rv: u64, deleting: bool| {
            let mut p = pod(name, rv);
            p["status"] = json!({"phase": "Failed", "containerStatuses": [{"name": "main",
                "state": {"terminated": {"exitCode": 128, "reason": "StartError",
                    "message": "context deadline exceeded"}}}]});
            if deleting {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            p
        };
        // Made to exit, evicted, or killed by a deletion (the implementation's or the
        // harness's): prompted.
        arrive_pod(failed("exited", 1, false));
        arrive_pod(failed("evicted", 2, false));
        arrive_pod(failed("deleted", 3, true));
        // Failed by itself, reported twice: noted once.
        arrive_pod(pod("alone", 4));
        arrive_pod(failed("alone", 5, false));
        arrive_pod(failed("alone", 6, false));
        let noted: Vec<String> = state
            .lock()
            .unwrap()
            .failed_unprompted
            .iter()
            .map(|(_, what)| what.clone())
            .collect();
        assert_eq!(
            noted,
            ["alone (StartError exit code 128 context deadline exceeded)"]
        );
    }

    fn released(state: &Mutex<State>) -> Vec<u64> {
        release(state, &Mutex::new(HarnessWrites::default()), None);
        let state = state.lock().unwrap();
        let monitor = state.monitor.as_ref().unwrap();
        monitor
            .timeline()
            .iter()
            .map(|e| e.resource_version)
            .collect()
    }

    #[test]
    fn an_entry_waits_until_every_gated_watch_has_confirmed_it() {
        let state = Arc::new(judged_state(5));
        arrive(&state, Kind::Pod, "p", 10);
        arrive(&state, Kind::PodClique, "c", 12);
        // Every watch but the PCSG one is past both entries: nothing is judged yet.
        for kind in [Kind::Pod, Kind::PodClique, Kind::PodCliqueSet] {
            state.lock().unwrap().progressed(kind, 12);
        }
        assert!(state.lock().unwrap().held_by(Kind::PodCliqueScalingGroup));
        assert!(!state.lock().unwrap().held_by(Kind::Pod));
        assert_eq!(released(&state), Vec::<u64>::new());
        // Its bookmark at 11 releases the first entry only.
        state
            .lock()
            .unwrap()
            .progressed(Kind::PodCliqueScalingGroup, 11);
        assert_eq!(released(&state), vec![10]);
        state
            .lock()
            .unwrap()
            .progressed(Kind::PodCliqueScalingGroup, 12);
        assert_eq!(released(&state), vec![10, 12]);
        assert_eq!(state.lock().unwrap().replays, 0);
    }

    #[test]
    fn a_lagging_watch_delays_its_entries_but_never_reorders_them() {
        let state = Arc::new(judged_state(1));
        // The PodClique watch delivers 12 first; the pod watch lags and delivers 10 later.
        arrive(&state, Kind::PodClique, "c", 12);
        state.lock().unwrap().progressed(Kind::PodClique, 12);
        for kind in [Kind::PodCliqueScalingGroup, Kind::PodCliqueSet] {
            state.lock().unwrap().progressed(kind, 30);
        }
        assert_eq!(released(&state), Vec::<u64>::new());
        arrive(&state, Kind::Pod, "p", 10);
        state.lock().unwrap().progressed(Kind::Pod, 10);
        assert_eq!(released(&state), vec![10]);
        state.lock().unwrap().progressed(Kind::Pod, 20);
        assert_eq!(released(&state), vec![10, 12]);
        // Judged in the order etcd committed the writes, without a replay.
        assert_eq!(state.lock().unwrap().replays, 0);
    }

    #[test]
    fn events_never_hold_the_timeline_back_but_wait_their_turn() {
        let state = Arc::new(judged_state(10));
        // No Event watch progress at all: the gated entries are still judged.
        arrive(&state, Kind::Pod, "p", 8);
        arrive(&state, Kind::Event, "e", 9);
        arrive(&state, Kind::Event, "late", 11);
        assert!(!state.lock().unwrap().held_by(Kind::Event));
        assert_eq!(released(&state), vec![8, 9]);
        // An event past the gate waits like any entry.
        assert_eq!(state.lock().unwrap().pending.len(), 1);
    }

    #[test]
    fn a_late_event_is_judged_without_a_replay_and_rendered_in_its_place() {
        let state = Arc::new(judged_state(10));
        arrive(&state, Kind::Pod, "p", 8);
        arrive(&state, Kind::Pod, "q", 10);
        assert_eq!(released(&state), vec![8, 10]);
        // The Event watch lags: an Event committed between the two pods arrives after both.
        arrive(&state, Kind::Event, "e", 9);
        assert_eq!(released(&state), vec![8, 10, 9]);
        assert_eq!(state.lock().unwrap().replays, 0);
        let rendered = state
            .lock()
            .unwrap()
            .monitor
            .as_ref()
            .unwrap()
            .render_timeline();
        let order: Vec<&str> = rendered
            .lines()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(order, ["#0", "#2", "#1"], "{rendered}");
        // A late object entry is still judged again in resource-version order.
        arrive(&state, Kind::Pod, "r", 7);
        assert_eq!(released(&state), vec![7, 8, 9, 10]);
        assert_eq!(state.lock().unwrap().replays, 1);
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
