//! The proxy server: TLS on loopback, every request recorded, faults applied, the rest
//! forwarded through a `kube::Client` to the apiserver with its credentials, and answers
//! streamed back as they come (watches event by event).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::clients::{Clients, identify};
use super::faults::{FaultAction, FaultRule, Fired, HookPosition, Terminal, status_body};
use super::lag::{RelayBody, relay, stale_read, stale_read_applies};
use super::record::{Journal, RecordedRequest};
use super::request::{RequestInfo, RequestMatch, Verb};
use super::tls;
use super::watch::Hub;
use crate::host::write_private;

/// The token of the kubeconfig the proxy writes. With [`Credentials::Upstream`] the proxy
/// ignores it: it listens on loopback and sends everything upstream with the upstream
/// kubeconfig's credentials.
pub const PLACEHOLDER_TOKEN: &str = "api-proxy-does-not-authenticate";

/// The largest request body forwarded; the apiserver itself refuses more than 3 MiB.
const MAX_REQUEST_BODY: usize = 16 << 20;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

type Hook = Arc<dyn Fn(Fired) -> HookFuture + Send + Sync>;

/// What a mark runs when its request comes: it gets the request.
type MarkCallback = Box<dyn FnOnce(RequestInfo) -> HookFuture + Send>;

/// What the server tasks share with the handle.
pub(super) struct Shared {
    /// What forwarded requests go through (without credentials of its own under
    /// [`Credentials::Client`]).
    pub(super) upstream: kube::Client,
    /// The upstream kubeconfig's identity, for the proxy's own reads.
    pub(super) admin: kube::Client,
    pub(super) credentials: Credentials,
    clients: Mutex<Clients>,
    /// `true` while frozen: requests wait before going upstream, answers before going back.
    frozen: watch::Sender<bool>,
    next_connection: AtomicU64,
    journal: Mutex<Journal>,
    hook: Mutex<Option<Hook>>,
    hub: Mutex<Hub>,
    marks: Mutex<std::collections::HashMap<u64, MarkCallback>>,
}

impl Shared {
    /// The relayed watches and the holds on them.
    pub(super) fn hub(&self) -> MutexGuard<'_, Hub> {
        // Every hub method leaves it consistent: a panic elsewhere cannot tear it.
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        // The journal stays consistent between statements: a panic elsewhere cannot tear it.
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn clients(&self) -> MutexGuard<'_, Clients> {
        // Every method leaves the table consistent: a panic elsewhere cannot tear it.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while the proxy is frozen.
    async fn thawed(&self) {
        let mut frozen = self.frozen.subscribe();
        // The sender lives as long as `self`.
        let _ = frozen.wait_for(|f| !*f).await;
    }

    fn hook(&self) -> Option<Hook> {
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

/// The upstream client and the namespace of the upstream context. Retries are off: the proxy
/// passes every answer on and leaves retrying to its clients. No read timeout: a quiet watch
/// may stay silent for minutes.
async fn upstream_client(
    path: &Path,
    credentials: Credentials,
) -> Result<(kube::Client, String), ProxyError> {
    let kubeconfig_error = |source| ProxyError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
    let mut config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_error)?;
    config.default_retry = false;
    config.read_timeout = None;
    if credentials == Credentials::Client {
        // Neither a client certificate nor a token: the client's own header authenticates.
        config.auth_info = kube::config::AuthInfo::default();
    }
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).map_err(|source| ProxyError::Client { source })?;
    Ok((client, namespace))
}

/// A kubeconfig for the proxy: its address, its CA, the placeholder token.
fn client_kubeconfig(addr: SocketAddr, ca_pem: &str, namespace: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: api-proxy
  cluster:
    server: https://{addr}
    certificate-authority-data: {ca}
users:
- name: api-proxy
  user:
    token: {PLACEHOLDER_TOKEN}
contexts:
- name: api-proxy
  context:
    cluster: api-proxy
    user: api-proxy
    namespace: {namespace}
current-context: api-proxy
"
    )
}

/// Accepts connections until told to stop; connection tasks end with this one.
async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                    let abort = connections.spawn(serve_connection(
                        tcp,
                        peer.ip(),
                        id,
                        acceptor.clone(),
                        shared.clone(),
                    ));
                    shared.clients().register(id, abort);
                }
                Err(error) => {
                    // Out of descriptors, mostly: give connections a moment to close.
                    tracing::warn!(%error, "API proxy failed to accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            // Reaps finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

async fn serve_connection(
    tcp: TcpStream,
    peer: IpAddr,
    id: u64,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
) {
    serve_tls(tcp, peer, id, acceptor, shared.clone()).await;
    shared.clients().finish(id);
}

async fn serve_tls(
    tcp: TcpStream,
    peer: IpAddr,
    id: u64,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
) {
    // Answers are written in small pieces (watch events): no waiting for ACKs between them.
    let _ = tcp.set_nodelay(true);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%error, "API proxy TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = shared.clone();
        async move {
            // Frozen: the request waits here, before it is numbered or goes anywhere.
            shared.thawed().await;
            let client = identify(request.headers(), peer);
            if !shared.clients().request(id, &client) {
                return Err(Dropped);
            }
            let answer = handle(&shared, request).await?;
            shared.thawed().await;
            Ok::<_, Dropped>(answer.map(|body| Gated {
                inner: body,
                frozen: shared.frozen.subscribe(),
                waiting: None,
            }))
        }
    });
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await
    {
        tracing::debug!(%error, "API proxy connection ended");
    }
}

/// The body of an answer: one the proxy made, or the apiserver's, streamed.
pub(super) type ProxyBody = Either<Full<Bytes>, Either<kube::client::Body, RelayBody>>;

/// An answer's body as the client gets it: each frame waits while the proxy is frozen.
pub(super) struct Gated {
    inner: ProxyBody,
    frozen: watch::Receiver<bool>,
    waiting: Option<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>,
}

impl hyper::body::Body for Gated {
    type Data = Bytes;
    type Error = <ProxyBody as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.waiting.is_none() && *this.frozen.borrow() {
            let mut frozen = this.frozen.clone();
            this.waiting = Some(Box::pin(async move {
                let _ = frozen.wait_for(|f| !*f).await;
            }));
        }
        if let Some(waiting) = &mut this.waiting {
            match waiting.as_mut().poll(cx) {
                Poll::Ready(()) => this.waiting = None,
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A hook held the request: the connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
#[error("the request was dropped by a fault hook")]
struct Dropped;

/// Records one request, applies its faults, forwards it, records how it ended.
async fn handle(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Dropped> {
    let arrived = Instant::now();
    let info = RequestInfo::parse(
        request.method().as_str(),
        request.uri().path(),
        request.uri().query().unwrap_or_default(),
    );
    let upgrade = is_upgrade(request.headers());
    let mut committed = None;
    let (seq, decision, marks) = {
        let mut journal = shared.journal();
        let (seq, decision) = journal.arrive(info.clone(), !upgrade);
        let marks = if upgrade {
            Vec::new()
        } else {
            journal.due_marks(&info)
        };
        (seq, decision, marks)
    };
    run_marks(shared, &marks, HookPosition::Before, &info).await;
    let answer = if upgrade {
        Ok(status_response(
            501,
            &info,
            "the API proxy does not forward connection upgrades (exec, attach, port-forward)",
        ))
    } else {
        if !decision.delay.is_zero() {
            tokio::time::sleep(decision.delay).await;
        }
        match decision.terminal {
            Some(Terminal::Status { rule, code }) => {
                let message = format!(
                    "injected by the API proxy: rule {rule} answers {code} to {info} \
                     (request #{seq})"
                );
                Ok(status_response(code, &info, &message))
            }
            Some(Terminal::Hook {
                rule,
                position: HookPosition::Before,
            }) => {
                run_hook(shared, rule, HookPosition::Before, seq, &info, None).await;
                Err(Dropped)
            }
            Some(Terminal::Hook {
                rule,
                position: HookPosition::After,
            }) => {
                let upstream = forward(shared, &info, request).await;
                let status = upstream.as_ref().ok().map(|r| r.status().as_u16());
                run_hook(shared, rule, HookPosition::After, seq, &info, status).await;
                // Held until the callback is done, then never delivered.
                drop(upstream);
                Err(Dropped)
            }
            None => Ok(match stale_at(shared, &info) {
                Some(at) => {
                    let authorization = (shared.credentials == Credentials::Client)
                        .then(|| request.headers().get(header::AUTHORIZATION).cloned())
                        .flatten();
                    stale_read(shared, &info, at, authorization, request.headers()).await
                }
                _ => match forward(shared, &info, request).await {
                    Ok(upstream) => {
                        run_marks(shared, &marks, HookPosition::After, &info).await;
                        if info.verb == Verb::Watch {
                            relay(shared, &info, upstream)
                        } else if names_a_revision(&info, upstream.status()) {
                            let (answer, at) = downstream_whole(&info, upstream).await;
                            committed = at;
                            answer
                        } else {
                            downstream(upstream)
                        }
                    }
                    Err(answer) => answer,
                },
            }),
        }
    };
    let status = answer.as_ref().ok().map(|r| r.status().as_u16());
    shared
        .journal()
        .answered(seq, status, arrived.elapsed(), committed);
    answer
}

/// Whether the answer to `info` is one object whose `resourceVersion` is the revision the
/// request's write committed at: an accepted create, update or patch.
fn names_a_revision(info: &RequestInfo, status: StatusCode) -> bool {
    info.resource_request
        && matches!(info.verb, Verb::Create | Verb::Update | Verb::Patch)
        && status.is_success()
}

/// The largest written object whose answer the proxy reads whole; larger ones are streamed
/// and their revision is not recorded.
const MAX_WRITE_ANSWER: usize = 16 << 20;

/// [`downstream`] for an answer read whole first, with the `resourceVersion` it names.
async fn downstream_whole(
    info: &RequestInfo,
    upstream: Response<kube::client::Body>,
) -> (Response<ProxyBody>, Option<u64>) {
    let (parts, body) = upstream.into_parts();
    let bytes = match Limited::new(body, MAX_WRITE_ANSWER).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let message = format!(
                "the API proxy failed to read the apiserver's answer: {}",
                crate::errors::chain(&*error)
            );
            return (status_response(502, info, &message), None);
        }
    };
    let revision = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/metadata/resourceVersion")?
                .as_str()?
                .parse()
                .ok()
        });
    let mut response = Response::new(Either::Left(Full::new(bytes)));
    *response.status_mut() = parts.status;
    copy_end_to_end(&parts.headers, response.headers_mut(), &[]);
    (response, revision)
}

/// The resourceVersion a stale-read hold answers `info` at, if one does.
fn stale_at(shared: &Shared, info: &RequestInfo) -> Option<u64> {
    let at = shared.hub().stale_at(info)?;
    stale_read_applies(info, at).then_some(at)
}

/// Runs the callbacks of the due `marks` at `position`, each to completion on a task of its
/// own (the client going away must not cancel one half-way).
async fn run_marks(
    shared: &Shared,
    marks: &[(u64, HookPosition)],
    position: HookPosition,
    info: &RequestInfo,
) {
    for (id, at) in marks {
        if *at != position {
            continue;
        }
        let callback = shared
            .marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(callback) = callback
            && let Err(error) = tokio::spawn(callback(info.clone())).await
        {
            tracing::warn!(%error, "API proxy mark callback failed");
        }
    }
}

/// Records the firing and runs the callback to completion.
async fn run_hook(
    shared: &Shared,
    rule: usize,
    position: HookPosition,
    seq: u64,
    info: &RequestInfo,
    upstream_status: Option<u16>,
) {
    let fired = Fired {
        rule,
        action: FaultAction::Hook { position },
        seq,
        request: info.clone(),
        upstream_status,
    };
    tracing::debug!(%fired, ?position, "API proxy hook fired");
    shared.journal().fire(fired.clone());
    if let Some(hook) = shared.hook() {
        // Its own task: the client's connection closing must not cancel it half-way.
        if let Err(error) = tokio::spawn(hook(fired)).await {
            tracing::warn!(%error, "API proxy hook callback failed");
        }
    }
}

/// Sends the request upstream; an answer the proxy made when it cannot.
async fn forward(
    shared: &Shared,
    info: &RequestInfo,
    request: Request<Incoming>,
) -> Result<Response<kube::client::Body>, Response<ProxyBody>> {
    let (parts, body) = request.into_parts();
    // kube's client takes whole bodies; Kubernetes request bodies are single objects.
    let body = match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let (code, what) = if error.is::<http_body_util::LengthLimitError>() {
                (
                    413,
                    "the request body is larger than the API proxy forwards",
                )
            } else {
                (400, "the API proxy failed to read the request body")
            };
            return Err(status_response(code, info, &format!("{what}: {error}")));
        }
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = Request::new(kube::client::Body::from(body));
    *upstream.method_mut() = parts.method;
    match path.parse() {
        Ok(uri) => *upstream.uri_mut() = uri,
        Err(error) => {
            let message = format!("the API proxy failed to read the request path: {error}");
            return Err(status_response(400, info, &message));
        }
    }
    // With the upstream credentials the client's token is the placeholder, and kube adds
    // them; with the client's own, its header goes on. kube adds the host and the length of
    // the (now whole, so no longer expected) body.
    let skip: &[HeaderName] = match shared.credentials {
        Credentials::Upstream => &[
            header::AUTHORIZATION,
            header::HOST,
            header::CONTENT_LENGTH,
            header::EXPECT,
        ],
        Credentials::Client => &[header::HOST, header::CONTENT_LENGTH, header::EXPECT],
    };
    copy_end_to_end(&parts.headers, upstream.headers_mut(), skip);
    if matches!(info.verb, Verb::Get | Verb::List | Verb::Watch) {
        prefer_json(upstream.headers_mut());
    }
    shared.upstream.send(upstream).await.map_err(|error| {
        let message = format!(
            "the API proxy failed to reach the apiserver: {}",
            crate::errors::chain(&error)
        );
        status_response(502, info, &message)
    })
}

/// Drops the protobuf alternatives from a read's `Accept` when it also accepts JSON. The
/// apiserver then answers JSON, which the client said it takes (as it gets for every custom
/// resource), and which the proxy can read: a watch of any kind can then be held, and its
/// reads answered stale. A client that accepts protobuf only keeps its `Accept`.
pub(super) fn prefer_json(headers: &mut HeaderMap) {
    let accept = list_values(headers, &header::ACCEPT);
    let kept: Vec<&str> = accept
        .iter()
        .map(String::as_str)
        .filter(|r| !r.starts_with("application/vnd.kubernetes.protobuf"))
        .collect();
    let json = kept
        .iter()
        .any(|r| r.starts_with("application/json") || r.starts_with("*/*"));
    if !json || kept.len() == accept.len() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&kept.join(", ")) {
        headers.remove(header::ACCEPT);
        headers.insert(header::ACCEPT, value);
    }
}

/// The items of a comma-separated header over all its lines, trimmed, empty ones left out.
pub(super) fn list_values(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The apiserver's answer as the client gets it: status, end-to-end headers, streamed body.
pub(super) fn downstream(upstream: Response<kube::client::Body>) -> Response<ProxyBody> {
    let (parts, body) = upstream.into_parts();
    let mut response = Response::new(Either::Right(Either::Left(body)));
    *response.status_mut() = parts.status;
    copy_end_to_end(&parts.headers, response.headers_mut(), &[]);
    response
}

/// Headers meaningful for one connection only (RFC 9110 section 7.6.1).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Copies every header except hop-by-hop ones, those `Connection` names, and `skip`.
pub(super) fn copy_end_to_end(from: &HeaderMap, to: &mut HeaderMap, skip: &[HeaderName]) {
    let named: Vec<String> = list_values(from, &header::CONNECTION)
        .into_iter()
        .map(|v| v.to_ascii_lowercase())
        .collect();
    for (name, value) in from {
        if HOP_BY_HOP.contains(name)
            || skip.contains(name)
            || named.iter().any(|n| n == name.as_str())
        {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

/// Whether the client asks to switch protocols (exec, attach, port-forward over SPDY or
/// WebSocket).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// An answer the proxy makes: a Kubernetes `Status` of `code` (200 to 599; others become 500).
pub(super) fn status_response(code: u16, info: &RequestInfo, message: &str) -> Response<ProxyBody> {
    let (status, message) = match StatusCode::from_u16(code) {
        Ok(status) if (200..600).contains(&code) => (status, message.to_string()),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{message} (status {code} is not a usable HTTP status, answered 500)"),
        ),
    };
    let body = status_body(status.as_u16(), info, &message).to_string();
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::TOO_MANY_REQUESTS {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_not_copied() {
        let mut from = HeaderMap::new();
        from.insert(header::CONNECTION, "keep-alive, X-Private".parse().unwrap());
        from.insert("x-private", "1".parse().unwrap());
        from.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        from.insert(header::AUTHORIZATION, "Bearer x".parse().unwrap());
        from.insert(
            header::CONTENT_TYPE,
            "application/apply-patch+yaml".parse().unwrap(),
        );
        from.append(header::ACCEPT, "application/json".parse().unwrap());
        from.append(
            header::ACCEPT,
            "application/vnd.kubernetes.protobuf".parse().unwrap(),
        );
        let mut to = HeaderMap::new();
        copy_end_to_end(&from, &mut to, &[header::AUTHORIZATION]);
        let mut names: Vec<&str> = to.keys().map(HeaderName::as_str).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-type"]);
        assert_eq!(to.get_all(header::ACCEPT).iter().count(), 2);
    }

    #[test]
    fn a_read_that_also_accepts_json_is_answered_json() {
        let accept = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::ACCEPT, v.parse().unwrap());
            }
            prefer_json(&mut headers);
            headers
                .get_all(header::ACCEPT)
                .iter()
                .map(|v| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        // client-go's typed clients of built-in kinds.
        assert_eq!(
            accept(&["application/vnd.kubernetes.protobuf, application/json"]),
            ["application/json"]
        );
        // Its metadata-only informers, over two header lines.
        assert_eq!(
            accept(&[
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ]),
            ["application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"]
        );
        // Protobuf only, JSON only, nothing: as they came.
        assert_eq!(
            accept(&["application/vnd.kubernetes.protobuf"]),
            ["application/vnd.kubernetes.protobuf"]
        );
        assert_eq!(accept(&["application/json"]), ["application/json"]);
        assert!(accept(&[]).is_empty());
    }

    #[test]
    fn upgrades_are_recognised() {
        let mut headers = HeaderMap::new();
        assert!(!is_upgrade(&headers));
        headers.insert(header::CONNECTION, "keep-alive, Upgrade".parse().unwrap());
        assert!(is_upgrade(&headers));
        let mut headers = HeaderMap::new();
        headers.insert(header::UPGRADE, "websocket".parse().unwrap());
        assert!(is_upgrade(&headers));
    }

    #[test]
    fn made_answers_are_statuses_and_unusable_codes_become_500() {
        let info = RequestInfo::parse("GET", "/api/v1/namespaces/ns/pods/p", "");
        let throttled = status_response(429, &info, "slow");
        assert_eq!(throttled.status(), 429);
        assert_eq!(throttled.headers()[header::RETRY_AFTER], "1");
        assert_eq!(
            throttled.headers()[header::CONTENT_TYPE],
            "application/json"
        );
        assert_eq!(status_response(409, &info, "x").status(), 409);
        assert_eq!(status_response(42, &info, "x").status(), 500);
        assert_eq!(status_response(101, &info, "x").status(), 500);
        assert!(
            !status_response(409, &info, "x")
                .headers()
                .contains_key(header::RETRY_AFTER)
        );
    }

    #[test]
    fn the_client_kubeconfig_names_the_proxy_and_trusts_its_ca() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let text = client_kubeconfig(addr, "PEM", "ns");
        let config: Kubeconfig = serde_yaml::from_str(&text).unwrap();
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:4321"));
        assert_eq!(
            cluster.certificate_authority_data.as_deref(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode("PEM")
                    .as_str()
            )
        );
        assert_eq!(config.current_context.as_deref(), Some("api-proxy"));
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some("ns"));
    }
}
