//! The proxy's side towards the apiserver: the client it forwards with, the kubeconfig it
//! writes for its own clients, and forwarding one request.

use std::net::SocketAddr;
use std::path::Path;

use base64::Engine;
use http::header::{self, HeaderName};
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::handle::{Credentials, PLACEHOLDER_TOKEN, ProxyError, Shared};
use super::headers::{copy_end_to_end, prefer_json};
use super::pipeline::{ProxyBody, status_response};
use super::request::{RequestInfo, Verb};

/// The largest request body forwarded; the apiserver itself refuses more than 3 MiB.
const MAX_REQUEST_BODY: usize = 16 << 20;

/// The upstream client and the namespace of the upstream context. Retries are off: the proxy
/// passes every answer on and leaves retrying to its clients. No read timeout: a quiet watch
/// may stay silent for minutes.
pub(super) async fn upstream_client(
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
pub(super) fn client_kubeconfig(addr: SocketAddr, ca_pem: &str, namespace: &str) -> String {
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

/// Sends the request upstream; an answer the proxy made when it cannot.
pub(super) async fn forward(
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

#[cfg(test)]
mod tests {
    use super::*;

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
