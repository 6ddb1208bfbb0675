//! The kubelet's side of a pod's life: the pod watch, each pod bound to a node started
//! (Pending, then Running), each graceful deletion finished (SIGTERM, the terminal status, the
//! final delete), and the status writes the kubelet makes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::scheduler::{cpu_request_millis, release, schedule};
use super::{
    Fleet, FleetError, Inner, KUBELET_MANAGER, PodRecord, Stage, TERMINATION_SECONDS_ANNOTATION,
    api_err, now,
};
use crate::kubelets::simulated::status::{self, ContainerState, Placement};

fn grace_seconds(pod: &Pod) -> u64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0) as u64
}

fn termination_seconds(pod: &Pod) -> u64 {
    pod.annotations()
        .get(TERMINATION_SECONDS_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

impl Fleet {
    /// Whether the pod write with this resourceVersion was made by the fleet (as kubelet).
    pub fn wrote(&self, resource_version: u64) -> bool {
        self.inner
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&resource_version)
    }
}

pub(super) async fn watch_pods(inner: Arc<Inner>) {
    let api: Api<Pod> = Api::all(inner.client.clone());
    let config = watcher::Config::default();
    // kube's default backoff paces the retries after a watch error.
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                on_pod(&inner, pod);
            }
            Ok(watcher::Event::Delete(pod)) => on_pod_gone(&inner, &pod),
            Ok(watcher::Event::Init) | Ok(watcher::Event::InitDone) => {}
            Err(err) => tracing::debug!(error = %err, "pod watch interrupted; resuming"),
        }
    }
}

/// Acts on one observed state of a pod: finishes its deletion on a live node, frees its node
/// when it is terminal, has it scheduled when it has no node, starts it on the node it is bound
/// to.
pub(super) fn on_pod(inner: &Arc<Inner>, pod: Pod) {
    let uid = pod.uid().unwrap_or_default();
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let mut state = inner.lock();
    let record = state.pods.entry(uid.clone()).or_insert_with(|| PodRecord {
        node: None,
        stage: None,
        cpu_millis: cpu_request_millis(&pod),
        restarts: 0,
        started_at: String::new(),
        pod_ip: String::new(),
    });
    let stage = record.stage;

    if pod.metadata.deletion_timestamp.is_some() {
        let on_live_node = node_name
            .as_ref()
            .and_then(|n| state.nodes.iter().find(|s| &s.name == n))
            .is_some_and(|n| !n.lost);
        if on_live_node && stage != Some(Stage::Terminating) {
            if let Some(r) = state.pods.get_mut(&uid) {
                r.stage = Some(Stage::Terminating);
            }
            let inner = inner.clone();
            tokio::spawn(async move { terminate(inner, pod).await });
        }
        return;
    }
    if is_terminal(&pod) {
        if let Some(r) = state.pods.get_mut(&uid) {
            r.stage = Some(Stage::Exited);
        }
        release(inner, &mut state, &uid);
        return;
    }
    match node_name {
        None => schedule(inner, &mut state, pod, uid, namespace, name, stage),
        Some(node) => {
            let Some(n) = state.nodes.iter_mut().find(|n| n.name == node) else {
                return;
            };
            if n.lost || stage.is_some_and(|s| s >= Stage::Starting) {
                return;
            }
            let cpu = cpu_request_millis(&pod);
            if n.pods.insert(uid.clone()) {
                n.cpu_used += cpu;
            }
            let ip = format!(
                "10.244.{}.{}",
                n.ip.rsplit('.').next().unwrap_or("0"),
                n.next_ip
            );
            n.next_ip = if n.next_ip >= 254 { 2 } else { n.next_ip + 1 };
            let host_ip = n.ip.clone();
            if let Some(r) = state.pods.get_mut(&uid) {
                r.stage = Some(Stage::Starting);
                r.node = Some(node);
                r.pod_ip = ip.clone();
                r.started_at = now();
            }
            let inner = inner.clone();
            let placement = Placement {
                host_ip,
                pod_ip: ip,
            };
            tokio::spawn(async move { start(inner, pod, placement).await });
        }
    }
}

fn on_pod_gone(inner: &Arc<Inner>, pod: &Pod) {
    let uid = pod.uid().unwrap_or_default();
    let mut state = inner.lock();
    release(inner, &mut state, &uid);
    state.pods.remove(&uid);
    state.unscheduled.remove(&uid);
}

async fn start(inner: Arc<Inner>, pod: Pod, placement: Placement) {
    let uid = pod.uid().unwrap_or_default();
    let (started_at, restarts) = {
        let state = inner.lock();
        state
            .pods
            .get(&uid)
            .map(|r| (r.started_at.clone(), r.restarts))
            .unwrap_or_default()
    };
    let creating = status::status_patch(
        &pod,
        &placement,
        ContainerState::Creating,
        restarts,
        &started_at,
        &started_at,
    );
    if patch_pod_status(&inner, &pod, &creating).await.is_err() {
        return;
    }
    let running = status::status_patch(
        &pod,
        &placement,
        ContainerState::Running { ready: true },
        restarts,
        &started_at,
        &now(),
    );
    if patch_pod_status(&inner, &pod, &running).await.is_ok() {
        inner.with_pod(&pod, |r| {
            if r.stage == Some(Stage::Starting) {
                r.stage = Some(Stage::Running);
            }
        });
    }
}

/// Finishes a graceful deletion as the kubelet does: the containers get SIGTERM and exit
/// (after the pod's simulated termination time, killed at the grace period), the terminal
/// status is written, then the pod is deleted with grace 0 and a UID precondition.
async fn terminate(inner: Arc<Inner>, pod: Pod) {
    let grace = grace_seconds(&pod);
    let wanted = termination_seconds(&pod);
    let waited = wanted.min(grace);
    if waited > 0 {
        tokio::time::sleep(Duration::from_secs(waited)).await;
    }
    let code = if wanted > grace { 137 } else { 143 };
    let placement = {
        let state = inner.lock();
        let uid = pod.uid().unwrap_or_default();
        state.pods.get(&uid).and_then(|r| {
            let node = state
                .nodes
                .iter()
                .find(|n| Some(&n.name) == r.node.as_ref())?;
            (!node.lost).then(|| {
                (
                    Placement {
                        host_ip: node.ip.clone(),
                        pod_ip: r.pod_ip.clone(),
                    },
                    r.restarts,
                    r.started_at.clone(),
                )
            })
        })
    };
    let Some((placement, restarts, started_at)) = placement else {
        return;
    };
    let silent = inner.lock().silent.remove(&pod.uid().unwrap_or_default());
    if !is_terminal(&pod) && !silent {
        let mut patch = status::status_patch(
            &pod,
            &placement,
            ContainerState::Exited { code },
            restarts,
            &started_at,
            &now(),
        );
        // A pod being deleted reaches a terminal phase whatever its restart policy.
        patch["status"]["phase"] = json!("Failed");
        let _ = patch_pod_status(&inner, &pod, &patch).await;
    }
    if let Err(err) = delete_pod(&inner.client, &pod, Some(0)).await {
        tracing::debug!(error = %err, "final delete failed");
    }
}

pub(super) async fn patch_pod_status(
    inner: &Inner,
    pod: &Pod,
    patch: &serde_json::Value,
) -> Result<(), FleetError> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let written = Api::<Pod>::namespaced(inner.client.clone(), &namespace)
        .patch_status(
            &name,
            &PatchParams {
                field_manager: Some(KUBELET_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Strategic(patch),
        )
        .await
        .map_err(api_err(format!("write status of pod {namespace}/{name}")))?;
    if let Some(rv) = written
        .metadata
        .resource_version
        .and_then(|rv| rv.parse::<u64>().ok())
    {
        inner
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(rv);
    }
    Ok(())
}

pub(super) async fn delete_pod(
    client: &Client,
    pod: &Pod,
    grace: Option<u32>,
) -> Result<(), FleetError> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let params = DeleteParams {
        grace_period_seconds: grace,
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    Api::<Pod>::namespaced(client.clone(), &namespace)
        .delete(&name, &params)
        .await
        .map_err(api_err(format!("delete pod {namespace}/{name}")))?;
    Ok(())
}
