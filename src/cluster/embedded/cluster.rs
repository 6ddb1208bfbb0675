//! The embedded default target: the control plane plus the simulated node fleet, started
//! together, and a process-wide shared instance for test binaries.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use crate::cluster::embedded::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, ProvisionError, ProvisionOptions,
    provision,
};
use crate::kubelets::simulated::{Fleet, FleetError, FleetOptions, NODE_LABEL};

/// How to start the embedded cluster.
#[derive(Debug, Clone, Default)]
pub struct EmbeddedOptions {
    /// How to find or build the binaries.
    pub provision: ProvisionOptions,
    /// CRDs installed before the controller manager starts.
    pub crds: Vec<CustomResourceDefinition>,
    /// The node fleet.
    pub fleet: FleetOptions,
}

/// Errors while starting the embedded cluster.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The binaries could not be found or built.
    #[error("failed to provision the control-plane binaries")]
    Provision(#[from] ProvisionError),
    /// The control plane did not start.
    #[error("failed to start the control plane")]
    ControlPlane(#[from] ControlPlaneError),
    /// The fleet did not start.
    #[error("failed to start the simulated node fleet")]
    Fleet(#[from] FleetError),
    /// The nodes did not register.
    #[error("simulated nodes did not become Ready within {0:?}")]
    Nodes(Duration),
}

/// A running embedded cluster.
#[derive(Debug)]
pub struct EmbeddedCluster {
    /// The node fleet (declared first: it stops before the control plane).
    pub fleet: Arc<Fleet>,
    /// The control plane.
    pub control_plane: ControlPlane,
    /// How long the start took (binaries already present).
    pub start_duration: Duration,
}

impl EmbeddedCluster {
    /// Resolves (or builds) the binaries, starts the control plane with the CRDs, registers
    /// the nodes and waits until they are Ready and schedulable.
    pub async fn start(options: EmbeddedOptions) -> Result<EmbeddedCluster, EmbeddedError> {
        let provision = options.provision.clone();
        let binaries = tokio::task::spawn_blocking(move || provision::resolve(&provision))
            .await
            .expect("provisioning does not panic")?;
        let started = Instant::now();
        let mut cp_options = ControlPlaneOptions::new(binaries);
        cp_options.crds = options.crds;
        let control_plane = ControlPlane::start(cp_options).await?;
        let fleet = Arc::new(Fleet::start(control_plane.client(), options.fleet.clone()).await?);
        wait_nodes_ready(&control_plane.client(), options.fleet.nodes).await?;
        Ok(EmbeddedCluster {
            fleet,
            control_plane,
            start_duration: started.elapsed(),
        })
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.control_plane.client()
    }
}

/// Waits, on a watch of the fleet's Nodes, until `count` of them are Ready and untainted.
async fn wait_nodes_ready(client: &Client, count: usize) -> Result<(), EmbeddedError> {
    let timeout = Duration::from_secs(30);
    let nodes: Api<Node> = Api::all(client.clone());
    let (cache, writer) = reflector::store();
    let config = watcher::Config::default().labels(NODE_LABEL);
    // Every event, the end of a listing included: the cache takes a listing's nodes only
    // once it is complete.
    let events = reflector(writer, watcher(nodes, config)).default_backoff();
    let ready = async move {
        futures::pin_mut!(events);
        while events.next().await.is_some() {
            if cache.state().iter().filter(|n| schedulable(n)).count() >= count {
                return true;
            }
        }
        false
    };
    match tokio::time::timeout(timeout, ready).await {
        Ok(true) => Ok(()),
        _ => Err(EmbeddedError::Nodes(timeout)),
    }
}

/// Ready and untainted: the scheduler may bind to it.
fn schedulable(node: &Node) -> bool {
    let untainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_none_or(|t| t.is_empty());
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    untainted && ready
}

/// A cluster shared by every test of one test binary, on a runtime of its own (so clients
/// and the fleet outlive any single test's runtime). Processes are stopped at process exit.
#[derive(Debug)]
pub struct Shared {
    runtime: tokio::runtime::Runtime,
    cluster: Result<EmbeddedCluster, EmbeddedError>,
}

impl Shared {
    /// Runs a future on the shared runtime, from any thread.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// The cluster, or the reason it could not start (rendered once, with its causes).
    pub fn cluster(&self) -> Result<&EmbeddedCluster, crate::errors::Chain<'_>> {
        self.cluster.as_ref().map_err(|e| crate::errors::chain(e))
    }
}

/// The process-wide embedded cluster, started on first use with `crds` installed.
pub fn shared(crds: impl FnOnce() -> Vec<CustomResourceDefinition>) -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        // A test binary's progress (a first build of the binaries takes minutes) is shown.
        crate::host::logging::init(crate::host::logging::DEFAULT_FILTER);
        let runtime = crate::host::runtime("grove-shared", Some(2))
            .expect("failed to build the shared runtime");
        let options = EmbeddedOptions {
            crds: crds(),
            ..EmbeddedOptions::default()
        };
        let cluster = runtime.block_on(EmbeddedCluster::start(options));
        Shared { runtime, cluster }
    })
}
