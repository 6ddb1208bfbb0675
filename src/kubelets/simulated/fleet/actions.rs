//! Harness actions: what test cases ask of pods and nodes (container exits, readiness flips,
//! evictions, preemptions, deletions, node loss), each done as it looks in the API on a real
//! cluster, and the record of them by which the monitor attributes their effects.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, EvictParams, Patch, PatchParams};
use serde_json::json;

use super::lifecycle::{delete_pod, patch_pod_status};
use super::{Fleet, FleetError, Stage, api_err, now};
use crate::kubelets::simulated::status::{self, ContainerState, Placement};

/// How a node is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeLoss {
    /// The node stops reporting, its pods are evicted by taint (deletionTimestamp, no kubelet
    /// to answer) and then force-deleted: they vanish without ever showing a terminal phase.
    Vanish,
    /// Pod GC's path: each pod is first marked `phase: Failed` with `DisruptionTarget`
    /// (reason `DeletionByPodGC`), then force-deleted.
    FailedFirst,
}

/// A pod action the harness took (so the monitor attributes its effects to the harness).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessAction {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid.
    pub uid: String,
    /// What was done (`exit 3`, `evict`, `preempt`, `delete`, `force-delete`, `lose-node`, …).
    pub action: String,
}

impl Fleet {
    /// Every pod action taken through this fleet so far.
    pub fn actions(&self) -> Vec<HarnessAction> {
        self.inner
            .actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the harness started the deletion of the pod with this uid (delete, evict,
    /// preempt, force-delete, node loss).
    pub fn initiated_deletion(&self, uid: &str) -> bool {
        self.inner
            .actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|a| {
                a.uid == uid
                    && matches!(
                        a.action.as_str(),
                        "evict" | "preempt" | "delete" | "force-delete" | "lose-node"
                    )
            })
    }

    fn record(&self, pod: &Pod, action: &str) {
        self.inner
            .actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(HarnessAction {
                namespace: pod.namespace().unwrap_or_default(),
                name: pod.name_any(),
                uid: pod.uid().unwrap_or_default(),
                action: action.to_string(),
            });
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Pod, FleetError> {
        Api::<Pod>::namespaced(self.inner.client.clone(), namespace)
            .get(name)
            .await
            .map_err(api_err(format!("get pod {namespace}/{name}")))
    }

    /// Makes every container of a running pod exit with `code`. Under `restartPolicy: Never`
    /// the pod ends Succeeded (0) or Failed; under `Always` (and `OnFailure` with a non-zero
    /// code) the container is restarted, as the kubelet does.
    pub async fn exit(&self, namespace: &str, name: &str, code: i32) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        let (placement, restarts, started_at) = self.running_placement(&pod)?;
        self.record(&pod, &format!("exit {code}"));
        let now = now();
        let patch = if status::terminal_phase(&pod, code).is_some() {
            self.set_stage(&pod, Stage::Exited);
            status::status_patch(
                &pod,
                &placement,
                ContainerState::Exited { code },
                restarts,
                &started_at,
                &now,
            )
        } else {
            self.inner.with_pod(&pod, |r| r.restarts += 1);
            status::restarted_patch(&pod, &placement, code, restarts, &started_at, &now)
        };
        patch_pod_status(&self.inner, &pod, &patch).await
    }

    /// Makes a running pod unready (`false`) or ready again (`true`).
    pub async fn set_ready(
        &self,
        namespace: &str,
        name: &str,
        ready: bool,
    ) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        let (placement, restarts, started_at) = self.running_placement(&pod)?;
        self.record(&pod, if ready { "ready" } else { "unready" });
        let patch = status::status_patch(
            &pod,
            &placement,
            ContainerState::Running { ready },
            restarts,
            &started_at,
            &now(),
        );
        patch_pod_status(&self.inner, &pod, &patch).await
    }

    /// Evicts a pod through the policy/v1 Eviction API: the apiserver adds `DisruptionTarget`
    /// (`EvictionByEvictionAPI`) and deletes it gracefully; the kubelet finishes the deletion.
    pub async fn evict(&self, namespace: &str, name: &str) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        self.record(&pod, "evict");
        Api::<Pod>::namespaced(self.inner.client.clone(), namespace)
            .evict(name, &EvictParams::default())
            .await
            .map_err(api_err(format!("evict pod {namespace}/{name}")))?;
        Ok(())
    }

    /// Preempts a pod as the scheduler does: `DisruptionTarget=True` (`PreemptionByScheduler`),
    /// then a graceful delete.
    pub async fn preempt(&self, namespace: &str, name: &str) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        self.record(&pod, "preempt");
        let patch = status::disruption_patch(
            "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority pod",
            &now(),
        );
        patch_pod_status(&self.inner, &pod, &patch).await?;
        delete_pod(&self.inner.client, &pod, None).await
    }

    /// From now on, a graceful deletion of the pod `namespace/name` removes it without writing
    /// a terminal phase: as with a kubelet that is gone, or a watch that coalesced the update,
    /// only its absence tells that it ended.
    pub async fn omit_terminal_phase(&self, namespace: &str, name: &str) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        self.inner
            .lock()
            .silent
            .insert(pod.uid().unwrap_or_default());
        Ok(())
    }

    /// Deletes a pod gracefully (its own grace period).
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        self.record(&pod, "delete");
        delete_pod(&self.inner.client, &pod, None).await
    }

    /// Force-deletes a pod (grace 0): it vanishes at once, no terminal phase ever visible.
    pub async fn force_delete(&self, namespace: &str, name: &str) -> Result<(), FleetError> {
        let pod = self.get(namespace, name).await?;
        self.record(&pod, "force-delete");
        delete_pod(&self.inner.client, &pod, Some(0)).await
    }

    /// The node a pod is bound to.
    pub async fn node_of(&self, namespace: &str, name: &str) -> Result<String, FleetError> {
        let pod = self.get(namespace, name).await?;
        pod.spec
            .and_then(|s| s.node_name)
            .ok_or_else(|| FleetError::BadState {
                namespace: namespace.into(),
                name: name.into(),
                problem: "is not bound to a node".into(),
            })
    }

    /// Loses a node: its lease stops, it turns NotReady (unreachable taints), nothing new is
    /// bound to it, and its pods go the way `how` says.
    pub async fn lose_node(&self, node: &str, how: NodeLoss) -> Result<(), FleetError> {
        {
            let mut state = self.inner.lock();
            let Some(n) = state.nodes.iter_mut().find(|n| n.name == node) else {
                return Err(FleetError::BadState {
                    namespace: String::new(),
                    name: node.into(),
                    problem: "is not a simulated node".into(),
                });
            };
            n.lost = true;
        }
        let nodes: Api<Node> = Api::all(self.inner.client.clone());
        let now = now();
        let unknown = |kind: &str| {
            json!({"type": kind, "status": "Unknown", "reason": "NodeStatusUnknown",
                   "message": "Kubelet stopped posting node status.",
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        let patch = json!({"status": {"conditions": [
            unknown("Ready"), unknown("MemoryPressure"), unknown("DiskPressure"), unknown("PIDPressure")
        ]}});
        nodes
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(api_err(format!("mark node {node} NotReady")))?;
        let taints = json!({"spec": {"taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now},
        ]}});
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&taints))
            .await
            .map_err(api_err(format!("taint node {node}")))?;

        let all: Api<Pod> = Api::all(self.inner.client.clone());
        let on_node = all
            .list(&kube::api::ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(api_err(format!("list pods of node {node}")))?;
        for pod in on_node.items {
            self.record(&pod, "lose-node");
            match how {
                NodeLoss::Vanish => {
                    let patch = status::disruption_patch(
                        "DeletionByTaintManager",
                        "Taint manager: deleting due to NoExecute taint",
                        &now,
                    );
                    ignore_gone(patch_pod_status(&self.inner, &pod, &patch).await)?;
                    ignore_gone(delete_pod(&self.inner.client, &pod, None).await)?;
                }
                NodeLoss::FailedFirst => {
                    let mut patch = status::disruption_patch(
                        "DeletionByPodGC",
                        "PodGC: node no longer exists",
                        &now,
                    );
                    patch["status"]["phase"] = json!("Failed");
                    ignore_gone(patch_pod_status(&self.inner, &pod, &patch).await)?;
                }
            }
            ignore_gone(delete_pod(&self.inner.client, &pod, Some(0)).await)?;
        }
        Ok(())
    }

    fn set_stage(&self, pod: &Pod, stage: Stage) {
        self.inner.with_pod(pod, |r| r.stage = Some(stage));
    }

    fn running_placement(&self, pod: &Pod) -> Result<(Placement, i32, String), FleetError> {
        let bad = |problem: &str| FleetError::BadState {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            problem: problem.into(),
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase != Some("Running") {
            return Err(bad(&format!(
                "is not Running (phase {})",
                phase.unwrap_or("none")
            )));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(bad("is being deleted"));
        }
        let state = self.inner.lock();
        let record = state
            .pods
            .get(&pod.uid().unwrap_or_default())
            .ok_or_else(|| bad("is not run by the simulated fleet"))?;
        let node = record
            .node
            .as_ref()
            .and_then(|n| state.nodes.iter().find(|s| &s.name == n))
            .ok_or_else(|| bad("is not on a simulated node"))?;
        Ok((
            Placement {
                host_ip: node.ip.clone(),
                pod_ip: record.pod_ip.clone(),
            },
            record.restarts,
            record.started_at.clone(),
        ))
    }
}

fn ignore_gone(result: Result<(), FleetError>) -> Result<(), FleetError> {
    match result {
        Err(FleetError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 || status.code == 409 => Ok(()),
        other => other,
    }
}
