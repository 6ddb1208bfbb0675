//! Starting and stopping the embedded control plane: etcd, kube-apiserver (TLS on 127.0.0.1
//! only) and kube-controller-manager running the garbage collector, the namespace controller
//! and pod GC. CRDs handed in are installed before the controller manager starts, so the
//! garbage collector's discovery sees them at once (it refreshes only every 30 s).
//!
//! This file holds the handle and one start's order; `components` starts each process with
//! its flags, `readiness` waits until each answers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;

use super::certs;
use super::components::{keep_logs, start_apiserver, start_controller_manager, start_etcd};
use super::provision::Binaries;
use crate::host::free_port;
use crate::host::process::{self, Supervised};

/// The controllers the embedded controller manager runs by default: ownerReference cascades,
/// namespace deletion and pod GC as on a real cluster, and what production operators rely on
/// at start: service accounts, their token Secrets (filled with a token signed by the
/// apiserver's service-account key) and the `kube-root-ca.crt` ConfigMap in every namespace.
pub const DEFAULT_CONTROLLERS: &[&str] = &[
    "garbagecollector",
    "namespace",
    "podgc",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-cert-publisher",
];

/// How to start the control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    /// The binaries to run.
    pub binaries: Binaries,
    /// CRDs to install (and wait for) before the controller manager starts.
    pub crds: Vec<CustomResourceDefinition>,
    /// `--controllers` of the controller manager.
    pub controllers: Vec<String>,
    /// How long each component may take to become ready.
    pub ready_timeout: Duration,
}

impl ControlPlaneOptions {
    /// Defaults for the given binaries.
    pub fn new(binaries: Binaries) -> Self {
        ControlPlaneOptions {
            binaries,
            crds: Vec::new(),
            controllers: DEFAULT_CONTROLLERS.iter().map(|c| c.to_string()).collect(),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

/// Errors while starting the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// Filesystem trouble.
    #[error("failed to {what}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Certificates could not be made.
    #[error("failed to generate certificates")]
    Certs(#[from] certs::CertError),
    /// A component could not be started.
    #[error("failed to start a control-plane component")]
    Spawn(#[from] process::SpawnError),
    /// A component did not become ready in time, or exited.
    #[error("{component} did not become ready: {detail} (logs: {})", logs.display())]
    NotReady {
        /// The component.
        component: &'static str,
        /// What was seen.
        detail: String,
        /// The log directory, kept for reading.
        logs: PathBuf,
    },
    /// The client could not be built.
    #[error("failed to build a client for the embedded apiserver")]
    Client(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A CRD could not be installed.
    #[error(transparent)]
    Crd(#[from] crate::cluster::crds::CrdError),
}

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
    let what = what.into();
    move |source| ControlPlaneError::Io { what, source }
}

/// A running embedded control plane. Dropping it stops every component and removes its
/// directories (logs are kept, and their directory printed, when [`ControlPlane::mark_failed`]
/// was called or a component failed).
pub struct ControlPlane {
    data_dir: PathBuf,
    log_dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    client: Client,
    etcd: Supervised,
    apiserver: Supervised,
    controller_manager: Supervised,
    failed: AtomicBool,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .field("kubeconfig", &self.kubeconfig)
            .field("log_dir", &self.log_dir)
            .finish_non_exhaustive()
    }
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager and waits until all are ready.
    /// A start that loses a port race is retried with new ports (up to five attempts).
    pub async fn start(options: ControlPlaneOptions) -> Result<ControlPlane, ControlPlaneError> {
        process::reap_stale_dirs();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(&options).await {
                Ok(cp) => return Ok(cp),
                Err(err) if retry_after(attempt, &err) => {
                    tracing::warn!("port race while starting the control plane; retrying");
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// One attempt: etcd, then the apiserver and the CRDs, then the controller manager, each
    /// waited for; logs are kept when a component fails.
    async fn start_once(options: &ControlPlaneOptions) -> Result<ControlPlane, ControlPlaneError> {
        let data_dir = process::temp_dir("cp").map_err(io("create a temporary directory"))?;
        let log_dir = process::temp_dir("logs").map_err(io("create a log directory"))?;
        let cert_paths =
            certs::generate(&data_dir.join("pki")).map_err(|e| keep_logs(&log_dir)(e.into()))?;
        let ports = Ports::pick()?;
        let etcd = start_etcd(options, &data_dir, &log_dir, &ports).await?;
        let (apiserver, kubeconfig, client) =
            start_apiserver(options, &data_dir, &log_dir, &ports, &cert_paths).await?;
        crate::cluster::crds::install(
            &client,
            &options.crds,
            crate::cluster::crds::FIELD_MANAGER,
            options.ready_timeout,
        )
        .await
        .map_err(|e| keep_logs(&log_dir)(e.into()))?;
        let controller_manager = start_controller_manager(
            options,
            &data_dir,
            &log_dir,
            &ports,
            &cert_paths,
            &kubeconfig,
        )
        .await?;
        Ok(ControlPlane {
            data_dir,
            log_dir,
            kubeconfig,
            server: ports.server(),
            client,
            etcd,
            apiserver,
            controller_manager,
            failed: AtomicBool::new(false),
        })
    }

    /// A client with cluster-admin rights.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin kubeconfig (mode 0600); an implementation under test runs with it.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The apiserver URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Where the components' logs are.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// Process ids of etcd, kube-apiserver and kube-controller-manager.
    pub fn pids(&self) -> [u32; 3] {
        [
            self.etcd.pid(),
            self.apiserver.pid(),
            self.controller_manager.pid(),
        ]
    }

    /// Keeps the logs after teardown (something failed and someone will want to read them).
    pub fn mark_failed(&self) {
        self.failed.store(true, Ordering::SeqCst);
        process::forget_dir(&self.log_dir);
    }

    /// A component that exited on its own, if any.
    pub fn crashed_component(&mut self) -> Option<String> {
        for child in [
            &mut self.etcd,
            &mut self.apiserver,
            &mut self.controller_manager,
        ] {
            if let Some(status) = child.exited() {
                return Some(format!("{} exited with {status}", child.name()));
            }
        }
        None
    }

    /// Stops the components (controller manager, apiserver, etcd) and removes the data
    /// directory; the logs too unless something failed.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.crashed_component().is_some() {
            self.mark_failed();
        }
        self.controller_manager.stop(Duration::from_secs(5));
        self.apiserver.stop(Duration::from_secs(5));
        self.etcd.stop(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.data_dir);
        if self.failed.load(Ordering::SeqCst) {
            tracing::warn!(dir = %self.log_dir.display(), "control-plane logs kept");
        } else {
            let _ = std::fs::remove_dir_all(&self.log_dir);
        }
    }
}

// the attempt failed with                      | attempt | start again
// ---------------------------------------------+---------+------------
// NotReady saying "address already in use"     | 1 to 4  | yes
// NotReady saying "address already in use"     | 5       | no
// any other error                              | any     | no
/// Whether a start that failed with `err` on attempt `attempt` lost a port race and is
/// tried again with new ports.
fn retry_after(attempt: u32, err: &ControlPlaneError) -> bool {
    matches!(err, ControlPlaneError::NotReady { detail, .. }
        if attempt < 5 && detail.contains("address already in use"))
}

/// The loopback ports of one start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ports {
    pub(super) etcd: u16,
    pub(super) etcd_peer: u16,
    pub(super) api: u16,
    pub(super) controller_manager: u16,
}

impl Ports {
    /// Four free ports.
    fn pick() -> Result<Ports, ControlPlaneError> {
        Ok(Ports {
            etcd: free_port().map_err(io("pick a port"))?,
            etcd_peer: free_port().map_err(io("pick a port"))?,
            api: free_port().map_err(io("pick a port"))?,
            controller_manager: free_port().map_err(io("pick a port"))?,
        })
    }

    /// etcd's client URL.
    pub(super) fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd)
    }

    /// The apiserver URL.
    pub(super) fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_ready(detail: &str) -> ControlPlaneError {
        ControlPlaneError::NotReady {
            component: "kube-apiserver",
            detail: detail.into(),
            logs: PathBuf::from("/logs"),
        }
    }

    #[test]
    fn only_a_port_race_before_the_fifth_attempt_is_retried() {
        let race = not_ready("exited with 1; bind: address already in use");
        assert!(retry_after(1, &race));
        assert!(retry_after(4, &race));
        assert!(!retry_after(5, &race));
        assert!(!retry_after(1, &not_ready("not ready after 60s")));
        let io = ControlPlaneError::Io {
            what: "pick a port".into(),
            source: std::io::Error::other("address already in use"),
        };
        assert!(!retry_after(1, &io));
    }
}
