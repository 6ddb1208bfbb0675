//! The proxy's handle: [`ApiProxy`] starts the server, and its methods set the fault rules,
//! hooks and marks, freeze and cut off clients, and read what was recorded. Also the state the
//! server tasks share with it.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::config::KubeconfigError;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::clients::Clients;
use super::faults::{FaultRule, Fired, HookPosition};
use super::record::{Journal, RecordedRequest};
use super::request::{RequestInfo, RequestMatch};
use super::server::serve;
use super::tls;
use super::upstream::{client_kubeconfig, upstream_client};
use super::watch::Hub;
use crate::host::write_private;

/// The token of the kubeconfig the proxy writes. With [`Credentials::Upstream`] the proxy
/// ignores it: it listens on loopback and sends everything upstream with the upstream
/// kubeconfig's credentials.
pub const PLACEHOLDER_TOKEN: &str = "api-proxy-does-not-authenticate";

/// Errors while starting the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream kubeconfig could not be read or used.
    #[error("failed to load the upstream kubeconfig {}", path.display())]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// The cause.
        #[source]
        source: KubeconfigError,
    },
    /// No client could be built from the upstream kubeconfig.
    #[error("failed to build the upstream client")]
    Client {
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The certificates could not be made.
    #[error("failed to generate the proxy's certificates")]
    Certificate {
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// The TLS server configuration was refused.
    #[error("failed to configure TLS")]
    Tls {
        /// The cause.
        #[source]
        source: rustls::Error,
    },
    /// No loopback port could be bound.
    #[error("failed to listen on 127.0.0.1")]
    Bind {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The client kubeconfig could not be written.
    #[error("failed to write the proxy kubeconfig {}", path.display())]
    WriteKubeconfig {
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Whose credentials the requests the proxy forwards carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Credentials {
    /// The upstream kubeconfig's: clients present the placeholder token, and may do what the
    /// upstream identity may.
    #[default]
    Upstream,
    /// The client's own: its `Authorization` header goes upstream as it came, and the upstream
    /// kubeconfig gives only the apiserver's address and CA, so what a client may do is what
    /// its own RBAC allows (the proxy adds nothing). The harness's own reads (a hold's
    /// starting resourceVersion) still use the upstream credentials.
    Client,
}

/// Where the proxy listens and whose credentials it forwards with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyOptions {
    /// The address it listens on (a free port of it); the serving certificate names it.
    pub listen: IpAddr,
    /// Whose credentials go upstream.
    pub credentials: Credentials,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            listen: Ipv4Addr::LOCALHOST.into(),
            credentials: Credentials::Upstream,
        }
    }
}

/// The future a hook callback returns.
pub type HookFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(super) type Hook = Arc<dyn Fn(Fired) -> HookFuture + Send + Sync>;

/// What a mark runs when its request comes: it gets the request.
pub(super) type MarkCallback = Box<dyn FnOnce(RequestInfo) -> HookFuture + Send>;

/// What the server tasks share with the handle.
pub(super) struct Shared {
    /// What forwarded requests go through (without credentials of its own under
    /// [`Credentials::Client`]).
    pub(super) upstream: kube::Client,
    /// The upstream kubeconfig's identity, for the proxy's own reads.
    pub(super) admin: kube::Client,
    pub(super) credentials: Credentials,
    pub(super) clients: Mutex<Clients>,
    /// `true` while frozen: requests wait before going upstream, answers before going back.
    pub(super) frozen: watch::Sender<bool>,
    pub(super) next_connection: AtomicU64,
    pub(super) journal: Mutex<Journal>,
    pub(super) hook: Mutex<Option<Hook>>,
    pub(super) hub: Mutex<Hub>,
    pub(super) marks: Mutex<std::collections::HashMap<u64, MarkCallback>>,
}

impl Shared {
    /// The relayed watches and the holds on them.
    pub(super) fn hub(&self) -> MutexGuard<'_, Hub> {
        // Every hub method leaves it consistent: a panic elsewhere cannot tear it.
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn journal(&self) -> MutexGuard<'_, Journal> {
        // The journal stays consistent between statements: a panic elsewhere cannot tear it.
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn clients(&self) -> MutexGuard<'_, Clients> {
        // Every method leaves the table consistent: a panic elsewhere cannot tear it.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while the proxy is frozen.
    pub(super) async fn thawed(&self) {
        let mut frozen = self.frozen.subscribe();
        // The sender lives as long as `self`.
        let _ = frozen.wait_for(|f| !*f).await;
    }

    pub(super) fn hook(&self) -> Option<Hook> {
        self.hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A running fault-injecting API proxy. Dropping it stops the server (open watches included)
/// and removes the kubeconfig it wrote.
pub struct ApiProxy {
    addr: SocketAddr,
    kubeconfig: PathBuf,
    ca_pem: String,
    pub(super) shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiProxy")
            .field("addr", &self.addr)
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

impl ApiProxy {
    /// Starts a proxy in front of the apiserver `upstream_kubeconfig` names (its current
    /// context), on a free port of 127.0.0.1, and writes a kubeconfig for clients into `dir`
    /// (`api-proxy-<port>.kubeconfig`, mode 0600). Must run inside a Tokio runtime, which
    /// the server tasks then live on.
    pub async fn start(upstream_kubeconfig: &Path, dir: &Path) -> Result<ApiProxy, ProxyError> {
        Self::start_with(upstream_kubeconfig, dir, ProxyOptions::default()).await
    }

    /// [`ApiProxy::start`] on `options.listen` (its serving certificate names that address
    /// too), forwarding with `options.credentials`.
    pub async fn start_with(
        upstream_kubeconfig: &Path,
        dir: &Path,
        options: ProxyOptions,
    ) -> Result<ApiProxy, ProxyError> {
        let (admin, namespace) =
            upstream_client(upstream_kubeconfig, Credentials::Upstream).await?;
        let upstream = match options.credentials {
            Credentials::Upstream => admin.clone(),
            Credentials::Client => {
                upstream_client(upstream_kubeconfig, Credentials::Client)
                    .await?
                    .0
            }
        };
        let identity = tls::identity(options.listen)?;
        let listener = TcpListener::bind((options.listen, 0))
            .await
            .map_err(|source| ProxyError::Bind { source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ProxyError::Bind { source })?;
        let kubeconfig = dir.join(format!("api-proxy-{}.kubeconfig", addr.port()));
        write_private(
            &kubeconfig,
            client_kubeconfig(addr, &identity.ca_pem, &namespace).as_bytes(),
        )
        .map_err(|source| ProxyError::WriteKubeconfig {
            path: kubeconfig.clone(),
            source,
        })?;
        let shared = Arc::new(Shared {
            upstream,
            admin,
            credentials: options.credentials,
            clients: Mutex::new(Clients::default()),
            frozen: watch::Sender::new(false),
            next_connection: AtomicU64::new(0),
            journal: Mutex::new(Journal::default()),
            hook: Mutex::new(None),
            hub: Mutex::new(Hub::default()),
            marks: Mutex::new(std::collections::HashMap::new()),
        });
        let (stop, stopped) = oneshot::channel();
        let acceptor = TlsAcceptor::from(identity.config);
        let task = tokio::spawn(serve(listener, acceptor, shared.clone(), stopped));
        tracing::debug!(%addr, kubeconfig = %kubeconfig.display(), "API proxy listening");
        Ok(ApiProxy {
            addr,
            kubeconfig,
            ca_pem: identity.ca_pem,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The kubeconfig clients use to go through the proxy.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// PEM of the CA that signed the proxy's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Freezes every client's traffic: requests wait before they reach the apiserver, and
    /// answers (watch events included) before they reach the client, until
    /// [`ApiProxy::thaw`]. The clients keep running; they only hear nothing and achieve
    /// nothing, as across a network partition.
    pub fn freeze(&self) {
        self.shared.frozen.send_replace(true);
    }

    /// Ends a freeze: what waited goes on, in order.
    pub fn thaw(&self) {
        self.shared.frozen.send_replace(false);
    }

    /// Cuts `client` (a name [`ApiProxy::clients`] lists) off: its connections close now,
    /// and nothing it sends from now on reaches the apiserver (connections close without an
    /// answer). Returns how many connections were closed.
    pub fn cut_off(&self, client: &str) -> usize {
        self.shared.clients().cut_off(client)
    }

    /// Lets a client that was cut off through again.
    pub fn restore_client(&self, client: &str) {
        self.shared.clients().restore(client);
    }

    /// How many requests each client sent so far, by name: `pod NAMESPACE/NAME` for a bound
    /// ServiceAccount token (under [`Credentials::Client`]), else `peer ADDRESS`.
    pub fn clients(&self) -> std::collections::HashMap<String, u64> {
        self.shared.clients().counts()
    }

    /// Replaces the fault rules; every rule counts matching requests from now on.
    pub fn set_rules(&self, rules: Vec<FaultRule>) {
        self.shared.journal().rules.set(rules);
    }

    /// The fault rules in force.
    pub fn rules(&self) -> Vec<FaultRule> {
        self.shared.journal().rules.rules()
    }

    /// Registers the callback hooks run, replacing any other. It gets the firing (rule,
    /// request, sequence number) and is awaited before the held request is dropped. It runs
    /// on a task of its own, so it completes even when the client goes away meanwhile
    /// (usually because the callback killed it). Hooks firing with no callback registered
    /// only drop their request.
    pub fn set_hook<F, Fut>(&self, hook: F)
    where
        F: Fn(Fired) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let hook: Hook = Arc::new(move |fired| Box::pin(hook(fired)) as HookFuture);
        *self
            .shared
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    /// Runs `callback` when the `nth` (1-based) request `matches` selects from now on
    /// arrives (`Before`: the request waits for it, then goes to the apiserver) or has been
    /// answered by the apiserver (`After`: the answer waits for it). Unlike a hook, the
    /// request goes on as if nothing happened. Fires once; returns the mark's id.
    pub fn on_request<F, Fut>(
        &self,
        matches: RequestMatch,
        nth: u32,
        position: HookPosition,
        callback: F,
    ) -> u64
    where
        F: FnOnce(RequestInfo) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // The callback is registered before the mark can be due.
        let mut marks = self
            .shared
            .marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let id = self.shared.journal().mark(matches, nth, position);
        marks.insert(
            id,
            Box::new(move |info| Box::pin(callback(info)) as HookFuture),
        );
        id
    }

    /// Forgets every mark that has not fired.
    pub fn clear_marks(&self) {
        self.shared.journal().clear_marks();
        self.shared
            .marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Removes the hook callback.
    pub fn clear_hook(&self) {
        *self
            .shared
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Every request since the start or the last [`ApiProxy::clear_log`], in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.journal().requests().to_vec()
    }

    /// The accepted creates, updates and patches whose writes committed at one of
    /// `revisions` (as their answers said), in arrival order.
    pub fn writes_at(&self, revisions: &[u64]) -> Vec<RecordedRequest> {
        self.shared.journal().writes_at(revisions)
    }

    /// The quorum reads (no `resourceVersion`) that could show object `name` of `resource`:
    /// GETs of it and LISTs of the resource, in arrival order.
    pub fn quorum_reads(&self, resource: &str, name: &str) -> Vec<RecordedRequest> {
        self.shared.journal().quorum_reads(resource, name)
    }

    /// The requests that would change state: create, update, patch, delete, deletecollection.
    pub fn mutating_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .journal()
            .requests()
            .iter()
            .filter(|r| r.request.resource_request && r.request.verb.is_mutating())
            .cloned()
            .collect()
    }

    /// The rules that fired since the start or the last [`ApiProxy::clear_log`], in order.
    pub fn fired(&self) -> Vec<Fired> {
        self.shared.journal().fired().to_vec()
    }

    /// Forgets the recorded requests and firings; sequence numbers go on, rules stay.
    pub fn clear_log(&self) {
        self.shared.journal().clear();
    }

    /// Stops accepting, closes every connection (open watches included) and waits for the
    /// server to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            // The server may be gone already (its runtime shut down): nothing to stop.
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            // Aborting drops the accept loop and with it the set of connection tasks.
            task.abort();
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}
