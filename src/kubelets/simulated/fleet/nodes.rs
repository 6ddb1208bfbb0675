//! Nodes and their leases: each node registered as its kubelet does (the Node, its status and
//! taints, its Lease), leases renewed while the node lives, nodes added and recovered.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::scheduler::retry_unscheduled;
use super::{
    Fleet, FleetError, FleetOptions, Inner, KUBELET_MANAGER, NODE_LABEL, NodeState, api_err, now,
    now_micro,
};

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

impl Fleet {
    /// How many shared nodes the fleet started with, and how many pods each holds.
    pub fn shape(&self) -> (usize, usize) {
        (self.inner.options.nodes, self.inner.options.max_pods)
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
        self.register(name, labels, taints, None).await
    }

    /// Registers a node; `reserved_for`: a private node, reserved for that namespace.
    async fn register(
        &self,
        name: &str,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        reserved_for: Option<&str>,
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
            private: reserved_for.is_some(),
            reserved_for: reserved_for.map(str::to_string),
        });
        retry_unscheduled(&self.inner, &state);
        Ok(name.to_string())
    }

    /// Reserves `count` nodes for the pods of `namespace`, and returns their names: from then
    /// on its pods are bound only to them and no other pods are, so losing one of them touches
    /// that namespace alone (a case that loses a node need not run alone). Private nodes a
    /// released reservation left idle are taken first; the rest are registered.
    pub async fn reserve_nodes(
        &self,
        namespace: &str,
        count: usize,
    ) -> Result<Vec<String>, FleetError> {
        let mut reserved = Vec::new();
        while reserved.len() < count {
            let spare = {
                let mut state = self.inner.lock();
                state
                    .nodes
                    .iter_mut()
                    .find(|n| n.private && n.reserved_for.is_none() && !n.lost)
                    .map(|n| {
                        n.reserved_for = Some(namespace.to_string());
                        n.name.clone()
                    })
            };
            let name = match spare {
                Some(name) => name,
                None => {
                    let k = self
                        .inner
                        .private_nodes
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let name = format!("{}-private-{k}", self.inner.options.name_prefix);
                    self.register(&name, BTreeMap::new(), Vec::new(), Some(namespace))
                        .await?
                }
            };
            reserved.push(name);
        }
        Ok(reserved)
    }

    /// Ends the reservations of `namespace`: its nodes wait idle for the next reservation.
    pub fn release_nodes(&self, namespace: &str) {
        let mut state = self.inner.lock();
        for n in &mut state.nodes {
            if n.reserved_for.as_deref() == Some(namespace) {
                n.reserved_for = None;
            }
        }
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
}

pub(super) fn default_labels(name: &str) -> BTreeMap<String, String> {
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

pub(super) async fn register_node(
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
            "kubeletVersion": crate::cluster::embedded::provision::KUBERNETES_VERSION,
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

pub(super) async fn renew_leases(inner: Arc<Inner>) {
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
