//! The simulated node fleet: registers Nodes, renews their Leases, binds schedulable pods to
//! nodes with room (playing the scheduler), and plays the kubelet on every node: statuses,
//! graceful deletions, container exits and restarts. The harness drives pods through the
//! methods of [`Fleet`]; each action looks in the API as it does on a real cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;

use super::status::{self, ContainerState, Placement};

/// Annotation on a pod: how many seconds its simulated containers take to exit after SIGTERM
/// (default 0). Capped by the pod's grace period, after which they are killed (exit 137).
pub const TERMINATION_SECONDS_ANNOTATION: &str = "sim.grove-conformance.io/termination-seconds";
/// Label on every simulated node.
pub const NODE_LABEL: &str = "sim.grove-conformance.io/node";
/// Field manager of the simulated kubelet's writes.
pub const KUBELET_MANAGER: &str = "grove-conformance-kubelet";

/// Size and shape of the fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// How many nodes.
    pub nodes: usize,
    /// Node name prefix (`<prefix>-<k>`).
    pub name_prefix: String,
    /// CPU capacity per node, in millicores.
    pub cpu_millis: u64,
    /// Memory capacity per node (a quantity string).
    pub memory: String,
    /// Pod capacity per node.
    pub max_pods: usize,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            nodes: 8,
            name_prefix: "grove-sim".into(),
            cpu_millis: 64_000,
            memory: "512Gi".into(),
            max_pods: 110,
        }
    }
}

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

/// Errors of the fleet's actions.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// An API call failed.
    #[error("failed to {what}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The pod is not in a state the action applies to.
    #[error("pod {namespace}/{name}: {problem}")]
    BadState {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What is wrong.
        problem: String,
    },
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> FleetError {
    let what = what.into();
    move |source| FleetError::Api { what, source }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Binding,
    Starting,
    Running,
    Exited,
    Terminating,
}

#[derive(Debug)]
struct PodRecord {
    node: Option<String>,
    stage: Option<Stage>,
    cpu_millis: u64,
    restarts: i32,
    started_at: String,
    pod_ip: String,
}

#[derive(Debug)]
struct NodeState {
    name: String,
    ip: String,
    lost: bool,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    pods: HashSet<String>,
    cpu_used: u64,
    next_ip: u32,
}

#[derive(Debug, Default)]
struct State {
    nodes: Vec<NodeState>,
    pods: HashMap<String, PodRecord>,
    unscheduled: BTreeMap<String, (String, String)>,
    /// Pods (by uid) whose graceful deletion ends without a terminal phase.
    silent: HashSet<String>,
}

struct Inner {
    client: Client,
    options: FleetOptions,
    state: Mutex<State>,
    actions: Mutex<Vec<HarnessAction>>,
    /// resourceVersions of the pod writes this fleet made (statuses as the kubelet).
    writes: Mutex<HashSet<u64>>,
}

/// The running fleet. Dropping it stops the simulation (the Node objects stay).
#[derive(Debug)]
pub struct Fleet {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn now_micro() -> String {
    Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn cpu_request_millis(pod: &Pod) -> u64 {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
                .map(|q| parse_cpu_millis(&q.0))
                .sum()
        })
        .unwrap_or(0)
}

/// Parses a CPU quantity (`2`, `500m`, `0.5`) into millicores.
pub fn parse_cpu_millis(quantity: &str) -> u64 {
    if let Some(m) = quantity.strip_suffix('m') {
        return m.parse().unwrap_or(0);
    }
    quantity
        .parse::<f64>()
        .map(|cores| (cores * 1000.0).round() as u64)
        .unwrap_or(0)
}

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
    /// Registers the nodes and starts the simulation. Returns once every node is Ready and
    /// schedulable.
    pub async fn start(client: Client, options: FleetOptions) -> Result<Fleet, FleetError> {
        let mut nodes = Vec::new();
        for k in 0..options.nodes {
            let name = format!("{}-{k}", options.name_prefix);
            let ip = format!("10.0.{}.{}", 1 + k / 250, 1 + k % 250);
            register_node(&client, &options, &name, &ip, &default_labels(&name), &[]).await?;
            nodes.push(NodeState {
                labels: default_labels(&name),
                name,
                ip,
                lost: false,
                taints: Vec::new(),
                pods: HashSet::new(),
                cpu_used: 0,
                next_ip: 2,
            });
        }
        let inner = Arc::new(Inner {
            client,
            options,
            state: Mutex::new(State {
                nodes,
                ..State::default()
            }),
            actions: Mutex::new(Vec::new()),
            writes: Mutex::new(HashSet::new()),
        });
        let leases = tokio::spawn(renew_leases(inner.clone()));
        let pods = tokio::spawn(watch_pods(inner.clone()));
        Ok(Fleet {
            inner,
            tasks: vec![leases, pods],
        })
    }

    /// Names of the nodes.
    pub fn node_names(&self) -> Vec<String> {
        self.inner
            .lock()
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect()
    }

    /// Adds a node with extra labels and taints (e.g. a dedicated node only tolerating pods
    /// land on) and returns its name.
    pub async fn add_node(
        &self,
        name: &str,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
    ) -> Result<String, FleetError> {
        let (ip, all_labels) = {
            let state = self.inner.lock();
            let k = state.nodes.len();
            let mut all = default_labels(name);
            all.extend(labels);
            (format!("10.0.{}.{}", 1 + k / 250, 1 + k % 250), all)
        };
        register_node(
            &self.inner.client,
            &self.inner.options,
            name,
            &ip,
            &all_labels,
            &taints,
        )
        .await?;
        let mut state = self.inner.lock();
        state.nodes.push(NodeState {
            name: name.to_string(),
            ip,
            lost: false,
            labels: all_labels,
            taints,
            pods: HashSet::new(),
            cpu_used: 0,
            next_ip: 2,
        });
        retry_unscheduled(&self.inner, &state);
        Ok(name.to_string())
    }

    /// Brings a lost node back: Ready again, lease renewed, schedulable.
    pub async fn recover_node(&self, node: &str) -> Result<(), FleetError> {
        let (ip, labels, taints) = {
            let mut state = self.inner.lock();
            let Some(n) = state.nodes.iter_mut().find(|n| n.name == node) else {
                return Err(FleetError::BadState {
                    namespace: String::new(),
                    name: node.into(),
                    problem: "is not a simulated node".into(),
                });
            };
            n.lost = false;
            n.pods.clear();
            n.cpu_used = 0;
            (n.ip.clone(), n.labels.clone(), n.taints.clone())
        };
        register_node(
            &self.inner.client,
            &self.inner.options,
            node,
            &ip,
            &labels,
            &taints,
        )
        .await?;
        retry_unscheduled(&self.inner, &self.inner.lock());
        Ok(())
    }

    /// Every pod action taken through this fleet so far.
    pub fn actions(&self) -> Vec<HarnessAction> {
        self.inner
            .actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the pod write with this resourceVersion was made by the fleet (as kubelet).
    pub fn wrote(&self, resource_version: u64) -> bool {
        self.inner
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&resource_version)
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

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with_pod(&self, pod: &Pod, f: impl FnOnce(&mut PodRecord)) {
        let uid = pod.uid().unwrap_or_default();
        if let Some(record) = self.lock().pods.get_mut(&uid) {
            f(record);
        }
    }
}

async fn register_node(
    client: &Client,
    options: &FleetOptions,
    name: &str,
    ip: &str,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
) -> Result<(), FleetError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"podCIDR": format!("10.244.{}.0/24", ip.rsplit('.').next().unwrap_or("0"))},
    }))
    .expect("a valid Node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(source) => {
            return Err(FleetError::Api {
                what: format!("create node {name}"),
                source,
            });
        }
    }
    let now = now();
    let ok = |kind: &str, reason: &str, status: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": reason,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let resources = json!({
        "cpu": format!("{}m", options.cpu_millis), "memory": options.memory,
        "pods": options.max_pods.to_string(), "ephemeral-storage": "1Ti",
    });
    let status = json!({"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [
            ok("MemoryPressure", "KubeletHasSufficientMemory", "False"),
            ok("DiskPressure", "KubeletHasNoDiskPressure", "False"),
            ok("PIDPressure", "KubeletHasSufficientPID", "False"),
            ok("Ready", "KubeletReady", "True"),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64", "operatingSystem": "linux", "osImage": "grove-conformance simulated node",
            "kernelVersion": "simulated", "containerRuntimeVersion": "simulated://1.0",
            "kubeletVersion": super::super::cluster::provision::KUBERNETES_VERSION,
            "kubeProxyVersion": "", "machineID": name, "systemUUID": name, "bootID": name,
        },
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(api_err(format!("report status of node {name}")))?;
    // TaintNodesByCondition added `node.kubernetes.io/not-ready:NoSchedule` at creation;
    // what remains are the node's own taints.
    let own: Vec<serde_json::Value> = taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
        .collect();
    let own = if own.is_empty() {
        json!(null)
    } else {
        json!(own)
    };
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": own}})),
        )
        .await
        .map_err(api_err(format!("untaint node {name}")))?;
    renew_lease(client, name).await
}

async fn renew_lease(client: &Client, node: &str) -> Result<(), FleetError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now_micro()},
    });
    leases
        .patch(
            node,
            &PatchParams::apply(KUBELET_MANAGER).force(),
            &Patch::Apply(&lease),
        )
        .await
        .map_err(api_err(format!("renew lease of node {node}")))?;
    Ok(())
}

async fn renew_leases(inner: Arc<Inner>) {
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let alive: Vec<String> = inner
            .lock()
            .nodes
            .iter()
            .filter(|n| !n.lost)
            .map(|n| n.name.clone())
            .collect();
        for node in alive {
            if let Err(err) = renew_lease(&inner.client, &node).await {
                tracing::warn!(error = %err, "lease renewal failed");
            }
        }
    }
}

async fn patch_pod_status(
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

async fn delete_pod(client: &Client, pod: &Pod, grace: Option<u32>) -> Result<(), FleetError> {
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

async fn watch_pods(inner: Arc<Inner>) {
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

/// Frees a pod's node resources and retries pods waiting for room.
fn release(inner: &Arc<Inner>, state: &mut State, uid: &str) {
    if let Some(record) = state.pods.get_mut(uid)
        && let Some(node) = record.node.clone()
        && let Some(n) = state.nodes.iter_mut().find(|n| n.name == node)
        && n.pods.remove(uid)
    {
        n.cpu_used = n.cpu_used.saturating_sub(record.cpu_millis);
        retry_unscheduled(inner, state);
    }
}

/// Looks again at pods that found no node (room was freed, or a node was added or recovered).
fn retry_unscheduled(inner: &Arc<Inner>, state: &State) {
    for (uid, (ns, name)) in state.unscheduled.clone() {
        let inner = inner.clone();
        tokio::spawn(async move {
            if let Ok(pod) = Api::<Pod>::namespaced(inner.client.clone(), &ns)
                .get(&name)
                .await
                && pod.uid().as_deref() == Some(uid.as_str())
            {
                on_pod(&inner, pod);
            }
        });
    }
}

fn on_pod_gone(inner: &Arc<Inner>, pod: &Pod) {
    let uid = pod.uid().unwrap_or_default();
    let mut state = inner.lock();
    release(inner, &mut state, &uid);
    state.pods.remove(&uid);
    state.unscheduled.remove(&uid);
}

/// A node taint, as far as scheduling cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// What of a pod the scheduler filters on.
#[derive(Debug, Clone, Default)]
struct Fit {
    cpu: u64,
    selector: BTreeMap<String, String>,
    tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
}

impl Fit {
    fn of(pod: &Pod) -> Fit {
        let spec = pod.spec.as_ref();
        Fit {
            cpu: cpu_request_millis(pod),
            selector: spec
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
        }
    }

    fn tolerates(&self, taint: &Taint) -> bool {
        self.tolerations.iter().any(|t| {
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == taint.effect);
            let exists = t.operator.as_deref() == Some("Exists");
            let key = t.key.as_deref().unwrap_or("");
            let key_ok = (key.is_empty() && exists) || key == taint.key;
            let value_ok = exists || t.value.as_deref().unwrap_or("") == taint.value;
            effect_ok && key_ok && value_ok
        })
    }

    fn fits(&self, node: &NodeState, max_pods: usize, cpu_capacity: u64) -> bool {
        !node.lost
            && node.pods.len() < max_pods
            && node.cpu_used + self.cpu <= cpu_capacity
            && self
                .selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
            && node
                .taints
                .iter()
                .filter(|t| t.effect != "PreferNoSchedule")
                .all(|t| self.tolerates(t))
    }
}

fn default_labels(name: &str) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        (NODE_LABEL, "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Picks the least-loaded node the pod fits on (room, node selector, taints).
fn pick_node(state: &State, max_pods: usize, cpu_capacity: u64, fit: &Fit) -> Option<usize> {
    state
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| fit.fits(n, max_pods, cpu_capacity))
        .min_by_key(|(_, n)| (n.cpu_used, n.pods.len()))
        .map(|(i, _)| i)
}

fn on_pod(inner: &Arc<Inner>, pod: Pod) {
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
        None => {
            let gated = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty());
            if gated || stage == Some(Stage::Binding) {
                return;
            }
            let fit = Fit::of(&pod);
            let cpu = fit.cpu;
            let Some(index) = pick_node(
                &state,
                inner.options.max_pods,
                inner.options.cpu_millis,
                &fit,
            ) else {
                state.unscheduled.insert(uid, (namespace, name));
                return;
            };
            state.unscheduled.remove(&uid);
            let node = &mut state.nodes[index];
            node.pods.insert(uid.clone());
            node.cpu_used += cpu;
            let node = node.name.clone();
            if let Some(r) = state.pods.get_mut(&uid) {
                r.stage = Some(Stage::Binding);
                r.node = Some(node.clone());
                r.cpu_millis = cpu;
            }
            let inner = inner.clone();
            tokio::spawn(async move { bind(inner, pod, node).await });
        }
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

async fn bind(inner: Arc<Inner>, pod: Pod, node: String) {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: pod.uid(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.clone()),
            api_version: Some("v1".into()),
            ..ObjectReference::default()
        },
    };
    let api: Api<Pod> = Api::namespaced(inner.client.clone(), &namespace);
    let result: Result<serde_json::Value, kube::Error> = api
        .create_subresource("binding", &name, &PostParams::default(), &binding)
        .await;
    if let Err(err) = result {
        tracing::debug!(pod = %name, error = %err, "binding failed");
        let uid = pod.uid().unwrap_or_default();
        let mut state = inner.lock();
        release(&inner, &mut state, &uid);
        if let Some(r) = state.pods.get_mut(&uid) {
            r.stage = None;
            r.node = None;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities_parse_to_millicores() {
        assert_eq!(parse_cpu_millis("500m"), 500);
        assert_eq!(parse_cpu_millis("2"), 2000);
        assert_eq!(parse_cpu_millis("0.25"), 250);
        assert_eq!(parse_cpu_millis("bogus"), 0);
    }

    #[test]
    fn the_least_loaded_live_node_with_room_is_picked() {
        let node = |name: &str, cpu_used: u64, pods: usize, lost: bool| NodeState {
            name: name.into(),
            ip: "10.0.1.1".into(),
            lost,
            labels: default_labels(name),
            taints: Vec::new(),
            pods: (0..pods).map(|i| format!("{name}-{i}")).collect(),
            cpu_used,
            next_ip: 2,
        };
        let state = State {
            nodes: vec![
                node("a", 3000, 3, false),
                node("b", 1000, 1, true),
                node("c", 2000, 2, false),
                node("d", 500, 10, false),
            ],
            ..State::default()
        };
        let cpu = |cpu: u64| Fit {
            cpu,
            ..Fit::default()
        };
        // b is lost; d is full (10 pods); c has the least CPU used among the rest.
        assert_eq!(pick_node(&state, 10, 4000, &cpu(1000)), Some(2));
        // Nothing fits 3500m next to 2000m used, nor 3000m.
        assert_eq!(pick_node(&state, 10, 4000, &cpu(3500)), None);
    }

    #[test]
    fn node_selectors_and_taints_are_honoured() {
        let mut dedicated = NodeState {
            name: "dedicated".into(),
            ip: "10.0.1.9".into(),
            lost: false,
            labels: default_labels("dedicated"),
            taints: vec![Taint {
                key: "test/dedicated".into(),
                value: "yes".into(),
                effect: "NoSchedule".into(),
            }],
            pods: HashSet::new(),
            cpu_used: 0,
            next_ip: 2,
        };
        let plain = Fit::default();
        assert!(
            !plain.fits(&dedicated, 10, 1000),
            "an untolerated taint was ignored"
        );
        let tolerant: Pod = serde_json::from_value(json!({"spec": {
            "containers": [],
            "nodeSelector": {"kubernetes.io/hostname": "dedicated"},
            "tolerations": [{"key": "test/dedicated", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
        }}))
        .unwrap();
        assert!(Fit::of(&tolerant).fits(&dedicated, 10, 1000));
        dedicated
            .labels
            .insert("kubernetes.io/hostname".into(), "other".into());
        assert!(
            !Fit::of(&tolerant).fits(&dedicated, 10, 1000),
            "the node selector was ignored"
        );
        let exists: Pod = serde_json::from_value(json!({"spec": {
            "containers": [], "tolerations": [{"operator": "Exists"}]
        }}))
        .unwrap();
        assert!(Fit::of(&exists).fits(&dedicated, 10, 1000));
    }
}
