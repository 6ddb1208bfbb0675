//! Recording what a watch delivered: the snapshot, the facts only arrival knows, and what a
//! pod's status says about why it failed.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;

use super::{Facts, HarnessWrites, Pending, State};
use crate::monitor::{Actor, Entry, EventType};
use crate::snapshot::{self, is_deleting};
use crate::vocab::Kind;

/// Records one object a watch delivered (or a list held): the snapshot, the pending entry
/// with the facts only its arrival knows, and a pod that failed by itself.
pub(super) fn record(
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
            let old = snapshot
                .pods
                .iter()
                .position(|p| snapshot::uid(p) == Some(uid.as_str()));
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
            let disruption = cluster_disruption(&object);
            facts.disrupted_by_cluster = facts.deletion_started && disruption.is_some();
            if let Some(why) = disruption
                && facts.deletion_started
                && !prompted
                && !state.disrupted_by_cluster.iter().any(|(u, _)| *u == uid)
            {
                let what = format!("{} ({why})", name_of(&object));
                state.disrupted_by_cluster.push((uid.clone(), what));
            }
            if !deleted
                && !is_deleting(&object)
                && !prompted
                && object.pointer("/status/phase").and_then(Value::as_str) == Some("Failed")
                && !state.failed_unprompted.iter().any(|(u, _)| *u == uid)
            {
                let what = format!("{} ({})", name_of(&object), failure_reason(&object));
                state.failed_unprompted.push((uid.clone(), what));
            }
            if !deleted
                && !is_deleting(&object)
                && let Some(reason) = cannot_start(&object)
                && !state.cannot_start.iter().any(|(u, _)| *u == uid)
            {
                let what = format!("{} ({reason})", name_of(&object));
                state.cannot_start.push((uid.clone(), what));
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
            let old = snapshot
                .events
                .iter()
                .position(|p| snapshot::uid(p) == Some(uid.as_str()));
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
                    .is_some_and(|o| snapshot::uid(o) == Some(uid.as_str()))
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

/// A pod's name.
pub(super) fn name_of(object: &Value) -> &str {
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

pub(super) fn rv_of(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse::<u64>().ok())
        .unwrap_or(0)
}

pub(super) fn uid_of(o: &Value) -> String {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Container waiting reasons that mean the target cannot start the container as written, so
/// the pod will never run: an image it cannot pull or may not pull, an image name it cannot
/// parse, a container it cannot create or run. (`ContainerCreating` and `PodInitializing` are
/// on the way; `CrashLoopBackOff` follows an exit, which the harness itself brings about.)
pub const CANNOT_START: [&str; 9] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "RegistryUnavailable",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreStartHookError",
];

/// The reasons of a `DisruptionTarget` condition that a component of the cluster sets on a
/// pod just before it deletes the pod itself: the taint manager evicting from a node gone
/// NotReady or unreachable, pod garbage collection (a node deleted), the kubelet (node
/// pressure, graceful node shutdown), the scheduler's preemption. The Eviction API's own
/// reason is not among them: whoever calls it is a client like any other.
pub const CLUSTER_DISRUPTIONS: [&str; 4] = [
    "DeletionByTaintManager",
    "DeletionByPodGC",
    "TerminationByKubelet",
    "PreemptionByScheduler",
];

/// Whether a component of the cluster marked the pod for its own deletion: a True
/// `DisruptionTarget` condition with a reason of [`CLUSTER_DISRUPTIONS`], as `reason: message`.
pub fn cluster_disruption(pod: &Value) -> Option<String> {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some("DisruptionTarget")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
        .and_then(|c| {
            let reason = c.get("reason").and_then(Value::as_str)?;
            CLUSTER_DISRUPTIONS.contains(&reason).then(|| {
                let message: String = c
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(160)
                    .collect();
                if message.is_empty() {
                    reason.to_owned()
                } else {
                    format!("{reason}: {message}")
                }
            })
        })
}

/// Why a pod's containers cannot start on the target, if its status says so: each container
/// (init containers too) waiting for a reason of [`CANNOT_START`], with its name, the reason
/// and the message (`main: ErrImagePull: failed to pull image "busybox": ...`).
pub fn cannot_start(pod: &Value) -> Option<String> {
    let reasons: Vec<String> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|field| pod.pointer(&format!("/status/{field}")))
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|c| {
            let waiting = c.pointer("/state/waiting")?;
            let reason = waiting.get("reason").and_then(Value::as_str)?;
            CANNOT_START.contains(&reason).then(|| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
                let message: String = waiting
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                if message.is_empty() {
                    format!("{name}: {reason}")
                } else {
                    format!("{name}: {reason}: {message}")
                }
            })
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}
