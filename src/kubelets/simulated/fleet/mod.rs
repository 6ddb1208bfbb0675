//! The simulated node fleet: registers Nodes, renews their Leases, binds schedulable pods to
//! nodes with room (playing the scheduler), and plays the kubelet on every node: statuses,
//! graceful deletions, container exits and restarts. The harness drives pods through the
//! methods of [`Fleet`]; each action looks in the API as it does on a real cluster.
//!
//! The state every part shares (nodes, pod records, the harness's actions) is defined here; the
//! parts are:
//!
//! - `nodes`: registering nodes as the kubelet does, and renewing their leases;
//! - `scheduler`: binding pods that have no node to the least-loaded node they fit on;
//! - `lifecycle`: the pod watch, pods started on their node, graceful deletions finished, and
//!   the kubelet's status writes;
//! - `actions`: what test cases ask the harness to do to pods and nodes (exits, readiness flips,
//!   evictions, preemptions, deletions, node loss), and the record of it.

mod actions;
mod lifecycle;
mod nodes;
mod scheduler;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::{Client, ResourceExt};
use tokio::task::JoinHandle;

pub use actions::{HarnessAction, NodeLoss};
pub use nodes::Taint;
pub use scheduler::parse_cpu_millis;

use lifecycle::watch_pods;
use nodes::{default_labels, register_node, renew_leases};

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
    /// Kept for one namespace at a time (see [`Fleet::reserve_nodes`]): never used for the
    /// pods of any other.
    private: bool,
    /// The namespace it is reserved for now.
    reserved_for: Option<String>,
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
    /// How many private nodes were registered (they are numbered in order).
    private_nodes: std::sync::atomic::AtomicUsize,
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
                private: false,
                reserved_for: None,
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
            private_nodes: std::sync::atomic::AtomicUsize::new(0),
        });
        let leases = tokio::spawn(renew_leases(inner.clone()));
        let pods = tokio::spawn(watch_pods(inner.clone()));
        Ok(Fleet {
            inner,
            tasks: vec![leases, pods],
        })
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
