//! The proxy's server: it accepts connections on its listener, finishes their TLS
//! handshakes, and serves each request through the pipeline, holding requests and answers
//! while the proxy is frozen.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::clients::identify;
use super::handle::Shared;
use super::pipeline::{Dropped, ProxyBody, handle};

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until told to stop; connection tasks end with this one.
pub(super) async fn serve(
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
