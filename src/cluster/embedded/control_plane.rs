//! Starting and stopping the embedded control plane: etcd, kube-apiserver (TLS on 127.0.0.1
//! only) and kube-controller-manager running the garbage collector, the namespace controller
//! and pod GC. CRDs handed in are installed before the controller manager starts, so the
//! garbage collector's discovery sees them at once (it refreshes only every 30 s).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::certs::{self, CertPaths};
use super::provision::{Binaries, Component};
use crate::host::process::{self, Supervised};
use crate::host::{free_port, write_private};

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

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
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
struct Ports {
    etcd: u16,
    etcd_peer: u16,
    api: u16,
    controller_manager: u16,
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
    fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd)
    }

    /// The apiserver URL.
    fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.api)
    }
}

/// Keeps the logs in `log_dir` (a component failed), passing the error on.
fn keep_logs(log_dir: &Path) -> impl FnOnce(ControlPlaneError) -> ControlPlaneError + '_ {
    move |err| {
        process::forget_dir(log_dir);
        err
    }
}

/// The Go garbage collector's target for the control plane's processes, unless the
/// environment sets `GOGC` itself: a heap may grow to five times what is live before it is
/// collected, against twice by default. The catalog keeps kube-apiserver busy with short-lived
/// objects (pod status patches, custom-resource status writes, watch events); at the default,
/// its collector took about a quarter of its CPU. Measured on 2 cores over the whole catalog:
/// kube-apiserver 88 s of CPU at the default, 64 s at 400; the process tree 144 s against
/// 114 s. Memory is what it costs (a few hundred MB more at peak), and the embedded cluster
/// lives only as long as the run.
pub const CONTROL_PLANE_GOGC: &str = "400";

/// Sets [`CONTROL_PLANE_GOGC`] on a control-plane process, unless `GOGC` is set already.
fn go_gc(command: &mut Command) {
    if std::env::var_os("GOGC").is_none() {
        command.env("GOGC", CONTROL_PLANE_GOGC);
    }
}

/// Starts etcd and waits until it answers `/health`; the logs are kept when it does not.
async fn start_etcd(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
) -> Result<Supervised, ControlPlaneError> {
    let mut etcd_cmd = Command::new(options.binaries.path(Component::Etcd));
    etcd_cmd.args(etcd_args(data_dir, ports));
    go_gc(&mut etcd_cmd);
    let etcd_log = log_dir.join("etcd.log");
    let mut etcd = Supervised::spawn("etcd", etcd_cmd, Some(&etcd_log))?;
    let port = ports.etcd;
    wait_until(options.ready_timeout, "etcd", log_dir, &mut etcd, || {
        plain_http_ok(port, "/health")
    })
    .await
    .map_err(keep_logs(log_dir))?;
    Ok(etcd)
}

/// Starts kube-apiserver, writes the admin kubeconfig and waits until the apiserver is ready
/// and has made the `default` namespace (the logs are kept when it does not); returns it, the
/// kubeconfig and a client.
async fn start_apiserver(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
) -> Result<(Supervised, PathBuf, Client), ControlPlaneError> {
    let mut api_cmd = Command::new(options.binaries.path(Component::KubeApiserver));
    api_cmd.args(apiserver_args(cert_paths, &ports.etcd_url(), ports.api));
    go_gc(&mut api_cmd);
    let api_log = log_dir.join("kube-apiserver.log");
    let mut apiserver = Supervised::spawn("kube-apiserver", api_cmd, Some(&api_log))?;

    let kubeconfig = data_dir.join("kubeconfig");
    write_private(
        &kubeconfig,
        kubeconfig_yaml(&ports.server(), cert_paths).as_bytes(),
    )
    .map_err(io("write the kubeconfig"))?;
    let client = client_for(&kubeconfig).await?;

    let probe = client.clone();
    wait_until_async(
        options.ready_timeout,
        "kube-apiserver",
        log_dir,
        &mut apiserver,
        || {
            let probe = probe.clone();
            async move {
                let ready = probe
                    .request_text(
                        http::Request::get("/readyz")
                            .body(Vec::new())
                            .expect("valid request"),
                    )
                    .await
                    .is_ok_and(|t| t.trim() == "ok");
                ready
                    && Api::<Namespace>::all(probe)
                        .get_opt("default")
                        .await
                        .ok()
                        .flatten()
                        .is_some()
            }
        },
    )
    .await
    .map_err(keep_logs(log_dir))?;
    Ok((apiserver, kubeconfig, client))
}

/// Starts kube-controller-manager and waits until it answers `/healthz`; the logs are kept
/// when it does not.
async fn start_controller_manager(
    options: &ControlPlaneOptions,
    data_dir: &Path,
    log_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
    kubeconfig: &Path,
) -> Result<Supervised, ControlPlaneError> {
    let mut kcm_cmd = Command::new(options.binaries.path(Component::KubeControllerManager));
    kcm_cmd.args(controller_manager_args(
        kubeconfig,
        &options.controllers,
        data_dir,
        ports,
        cert_paths,
    ));
    go_gc(&mut kcm_cmd);
    let kcm_log = log_dir.join("kube-controller-manager.log");
    let mut controller_manager =
        Supervised::spawn("kube-controller-manager", kcm_cmd, Some(&kcm_log))?;
    let health = insecure_client(ports.controller_manager)?;
    wait_until_async(
        options.ready_timeout,
        "kube-controller-manager",
        log_dir,
        &mut controller_manager,
        || {
            let health = health.clone();
            async move {
                health
                    .request_text(
                        http::Request::get("/healthz")
                            .body(Vec::new())
                            .expect("valid request"),
                    )
                    .await
                    .is_ok_and(|t| t.trim() == "ok")
            }
        },
    )
    .await
    .map_err(keep_logs(log_dir))?;
    Ok(controller_manager)
}

/// etcd's flags: a single member on loopback, data in `data_dir`, no fsync (the data is
/// thrown away).
fn etcd_args(data_dir: &Path, ports: &Ports) -> Vec<String> {
    let etcd_url = ports.etcd_url();
    let peer = ports.etcd_peer;
    vec![
        format!("--data-dir={}", data_dir.join("etcd").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
        "--unsafe-no-fsync=true".into(),
        "--log-level=warn".into(),
        "--quota-backend-bytes=4294967296".into(),
    ]
}

/// kube-controller-manager's flags: `controllers` only, no leader election, on loopback.
fn controller_manager_args(
    kubeconfig: &Path,
    controllers: &[String],
    data_dir: &Path,
    ports: &Ports,
    cert_paths: &CertPaths,
) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--controllers={}", controllers.join(",")),
        "--leader-elect=false".into(),
        "--use-service-account-credentials=false".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", ports.controller_manager),
        format!("--cert-dir={}", data_dir.join("kcm-certs").display()),
        "--concurrent-gc-syncs=10".into(),
        "--concurrent-namespace-syncs=5".into(),
        // The default client rate (20 requests/s) makes the garbage collector take 13 s to
        // delete the 256 pods of one PodClique; the collector's speed is not what a case
        // tests, and one machine's apiserver has room for more.
        "--kube-api-qps=500".into(),
        "--kube-api-burst=1000".into(),
        format!(
            "--service-account-private-key-file={}",
            cert_paths.sa_private.display()
        ),
        format!("--root-ca-file={}", cert_paths.serving_ca.display()),
        "--v=1".into(),
    ]
}

fn apiserver_args(certs: &CertPaths, etcd_url: &str, port: u16) -> Vec<String> {
    vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", certs.dir.display()),
        format!("--tls-cert-file={}", certs.serving_cert.display()),
        format!("--tls-private-key-file={}", certs.serving_key.display()),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        "--endpoint-reconciler-type=none".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        "--authorization-mode=RBAC".into(),
        format!("--client-ca-file={}", certs.client_ca.display()),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!("--service-account-key-file={}", certs.sa_public.display()),
        format!(
            "--service-account-signing-key-file={}",
            certs.sa_private.display()
        ),
        "--disable-admission-plugins=ServiceAccount".into(),
        "--profiling=false".into(),
        "--watch-cache=true".into(),
        "--v=1".into(),
    ]
}

fn kubeconfig_yaml(server: &str, certs: &CertPaths) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: grove-conformance\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: grove-conformance\n  context:\n    cluster: grove-conformance\n    user: admin\n    namespace: default\ncurrent-context: grove-conformance\n",
        certs.serving_ca.display(),
        certs.admin_cert.display(),
        certs.admin_key.display()
    )
}

/// Builds a client from a kubeconfig file (its current context).
pub async fn client_for(kubeconfig: &Path) -> Result<Client, ControlPlaneError> {
    let file =
        Kubeconfig::read_from(kubeconfig).map_err(|e| ControlPlaneError::Client(Box::new(e)))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| ControlPlaneError::Client(Box::new(e)))?;
    Client::try_from(config).map_err(|e| ControlPlaneError::Client(Box::new(e)))
}

fn insecure_client(port: u16) -> Result<Client, ControlPlaneError> {
    let uri: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| ControlPlaneError::Client(Box::new(e)))?;
    let mut config = Config::new(uri);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    Client::try_from(config).map_err(|e| ControlPlaneError::Client(Box::new(e)))
}

/// A GET over plain HTTP/1.0 on 127.0.0.1, true on a 200 answer (etcd's `/health`).
fn plain_http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}

fn not_ready(
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    timeout: Duration,
) -> ControlPlaneError {
    let log = child
        .log()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let state = match child.exited() {
        Some(status) => format!("exited with {status}"),
        None => format!("not ready after {timeout:?}"),
    };
    ControlPlaneError::NotReady {
        component,
        detail: format!("{state}; last log lines:\n{}", tail.join("\n")),
        logs: log_dir.to_path_buf(),
    }
}

async fn wait_until(
    timeout: Duration,
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    mut ready: impl FnMut() -> bool,
) -> Result<(), ControlPlaneError> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        if child.exited().is_some() || Instant::now() >= deadline {
            return Err(not_ready(component, log_dir, child, timeout));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn wait_until_async<F, Fut>(
    timeout: Duration,
    component: &'static str,
    log_dir: &Path,
    child: &mut Supervised,
    mut ready: F,
) -> Result<(), ControlPlaneError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if ready().await {
            return Ok(());
        }
        if child.exited().is_some() || Instant::now() >= deadline {
            return Err(not_ready(component, log_dir, child, timeout));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
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

    #[test]
    fn the_components_listen_on_their_own_loopback_ports() {
        let ports = Ports {
            etcd: 1,
            etcd_peer: 2,
            api: 3,
            controller_manager: 4,
        };
        let etcd = etcd_args(Path::new("/d"), &ports);
        assert!(etcd.contains(&"--data-dir=/d/etcd".to_string()), "{etcd:?}");
        assert!(etcd.contains(&"--listen-client-urls=http://127.0.0.1:1".to_string()));
        assert!(etcd.contains(&"--initial-cluster=default=http://127.0.0.1:2".to_string()));
        assert_eq!(ports.server(), "https://127.0.0.1:3");
        let pki = |name: &str| PathBuf::from("/d/pki").join(name);
        let certs = CertPaths {
            dir: pki(""),
            serving_ca: pki("ca.crt"),
            serving_cert: pki("apiserver.crt"),
            serving_key: pki("apiserver.key"),
            client_ca: pki("client-ca.crt"),
            admin_cert: pki("admin.crt"),
            admin_key: pki("admin.key"),
            sa_public: pki("sa.pub"),
            sa_private: pki("sa.key"),
        };
        let kcm = controller_manager_args(
            Path::new("/d/kubeconfig"),
            &["garbagecollector".into(), "podgc".into()],
            Path::new("/d"),
            &ports,
            &certs,
        );
        assert!(
            kcm.contains(&"--controllers=garbagecollector,podgc".to_string()),
            "{kcm:?}"
        );
        assert!(kcm.contains(&"--secure-port=4".to_string()), "{kcm:?}");
        assert!(kcm.contains(&"--leader-elect=false".to_string()), "{kcm:?}");
    }
}
