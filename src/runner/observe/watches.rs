//! The watch of one kind: sessions with bookmarks, consistent lists, relists after a gap, and
//! the order of what it delivers.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use tokio::sync::watch;

use super::record::{record, rv_of, uid_of};
use super::{EVENT_SESSION_SECONDS, GATED, HarnessWrites, SESSION_SECONDS, State};
use crate::vocab::Kind;

/// What the watch tasks of one case share.
pub(super) struct Shared {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) writes: Arc<Mutex<HarnessWrites>>,
    pub(super) tx: Arc<watch::Sender<u64>>,
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
pub(super) async fn nudge(api: &Api<DynamicObject>) -> Result<u64, kube::Error> {
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
pub(super) async fn watch_kind(
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

/// What one watch has delivered: the highest resourceVersion streamed, and during a (re)list
/// the UIDs listed so far.
#[derive(Debug, Default)]
pub(super) struct WatchProgress {
    pub(super) highest: u64,
    pub(super) listing: Option<HashSet<String>>,
}

impl WatchProgress {
    /// A streamed event: its resourceVersion must be above every one streamed before.
    pub(super) fn streamed(&mut self, kind: Kind, object: &Value, state: &Mutex<State>) {
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

    pub(super) fn listed(&mut self, object: &Value) {
        self.highest = self.highest.max(rv_of(object));
        if let Some(listing) = self.listing.as_mut() {
            listing.insert(uid_of(object));
        }
    }

    /// The objects of `kind` held in the snapshot that the list just finished did not have,
    /// each stamped with the list's highest resourceVersion (they were deleted before it).
    pub(super) fn relisted(&mut self, kind: Kind, state: &Mutex<State>) -> Vec<Value> {
        let Some(listed) = self.listing.take() else {
            return Vec::new();
        };
        let state = state.lock().unwrap_or_else(|p| p.into_inner());
        let held: Vec<&Value> = match kind {
            Kind::Pod => state.snapshot.pods.iter().collect(),
            Kind::Event => state.snapshot.events.iter().collect(),
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet => state
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
