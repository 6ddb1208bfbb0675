//! A view that lags, served through the proxy: watches relayed line by line through the
//! [`Hub`](super::watch) so holds can keep their events back, reads answered as of a held
//! resourceVersion, and the handle's methods that start and end holds.

use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use http::{Request, Response, header};
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use super::handle::{ApiProxy, Shared};
use super::headers::{copy_end_to_end, list_values, prefer_json};
use super::pipeline::{ProxyBody, downstream, status_response};
use super::request::{RequestInfo, Verb};
use super::watch::{Hold, HoldRecord, Lines};

/// The body of a relayed watch: the lines the hub lets through.
pub(super) type RelayBody = StreamBody<BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// How long a hold may stand: kube-apiserver compacts etcd every 5 minutes by default, after
/// which the resourceVersion a hold (and its stale reads) stand at may no longer be served.
/// A hold that reaches this is released and the case it belongs to is an error.
pub const MAX_HOLD: Duration = Duration::from_secs(4 * 60);

/// How often a quiet relay checks whether its client is still there.
const RELAY_CHECK: Duration = Duration::from_secs(1);

/// The largest answer a stale read collects.
const MAX_READ_BODY: usize = 64 << 20;

/// A hold could not start.
#[derive(Debug, thiserror::Error)]
#[error("failed to read the resourceVersion to hold {resource} at: {message}")]
pub struct HoldError {
    /// The resource.
    pub resource: String,
    /// What went wrong.
    pub message: String,
}

/// Why a read at the apiserver did not answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// The path does not make a URI.
    #[error("`{path}` is not a request path")]
    Uri {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The request went unanswered.
    #[error("the apiserver did not answer")]
    Send(#[source] kube::Error),
    /// The answer's body broke off or was too large.
    #[error("the answer did not read")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Relays a watch answer through the hub, line by line. Answers other than a JSON event
/// stream (an error status, a Table or protobuf stream) pass untouched: holds cannot read
/// them, and [`ApiProxy::hold`] refuses to start while one is open on the kind.
pub(super) fn relay(
    shared: &Arc<Shared>,
    info: &RequestInfo,
    upstream: Response<kube::client::Body>,
) -> Response<ProxyBody> {
    let json = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !upstream.status().is_success() || !json {
        if upstream.status().is_success() {
            shared.hub().unreadable(info);
        }
        return downstream(upstream);
    }
    let (parts, mut body) = upstream.into_parts();
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let id = shared.hub().open(info, tx);
    let hub = shared.clone();
    tokio::spawn(async move {
        let mut lines = Lines::default();
        loop {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = tokio::time::sleep(RELAY_CHECK) => {
                    if hub.hub().is_open(id) { continue } else { break }
                }
            };
            let Some(Ok(frame)) = frame else { break };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let complete = lines.push(&data);
            let mut h = hub.hub();
            for line in complete {
                h.line(id, line);
            }
            if !h.is_open(id) {
                break;
            }
        }
        let mut h = hub.hub();
        if let Some(last) = lines.finish() {
            h.line(id, last);
        }
        h.close(id);
    });
    let lines = stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|line| (Ok::<_, Infallible>(Frame::data(line)), rx))
    })
    .boxed();
    let mut response = Response::new(Either::Right(Either::Right(StreamBody::new(lines))));
    *response.status_mut() = parts.status;
    copy_end_to_end(
        &parts.headers,
        response.headers_mut(),
        &[header::CONTENT_LENGTH],
    );
    response
}

/// Whether a stale-read hold standing at `at` answers this request: a GET or LIST of the
/// object itself or its status (other subresources are read as they are) that a real
/// apiserver serves from its watch cache, which is what lags: `resourceVersion=0`, or a
/// resourceVersion not newer than `at` without `resourceVersionMatch=Exact`. A read without
/// a resourceVersion is a quorum read, current on every apiserver, and stays so.
pub(super) fn stale_read_applies(info: &RequestInfo, at: u64) -> bool {
    if !matches!(info.verb, Verb::Get | Verb::List)
        || !(info.subresource.is_empty() || info.subresource == "status")
    {
        return false;
    }
    let mut version = None;
    let mut exact = false;
    for (key, value) in form_urlencoded::parse(info.query.as_bytes()) {
        match key.as_ref() {
            "resourceVersion" => version = Some(value.into_owned()),
            "resourceVersionMatch" => exact = value == "Exact",
            _ => {}
        }
    }
    match version.as_deref() {
        Some("0") => true,
        Some(v) => !exact && v.parse::<u64>().is_ok_and(|v| v <= at),
        None => false,
    }
}

/// The collection path of `info`'s kind in its namespace.
fn collection_path(group: &str, version: &str, namespace: &str, resource: &str) -> String {
    let mut path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    if !namespace.is_empty() {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push('/');
    path.push_str(resource);
    path
}

/// The query of a list read exactly at `at`; `None` for a continued list, whose token
/// already names the resourceVersion it reads at.
pub(crate) fn exact_query(query: &str, at: u64) -> Option<String> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if pairs.iter().any(|(k, _)| k == "continue") {
        return None;
    }
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in &pairs {
        if k != "resourceVersion" && k != "resourceVersionMatch" {
            out.append_pair(k, v);
        }
    }
    out.append_pair("resourceVersion", &at.to_string());
    out.append_pair("resourceVersionMatch", "Exact");
    Some(out.finish())
}

/// The object a list read for one name found, as a GET answers it (list items of built-in
/// kinds carry no `kind` or `apiVersion`); `None` when the list is empty.
pub(crate) fn single_item(list: &Value) -> Option<Value> {
    let mut item = list["items"].as_array()?.first()?.clone();
    if item.get("kind").is_none()
        && let Some(kind) = list["kind"].as_str().and_then(|k| k.strip_suffix("List"))
    {
        item["kind"] = kind.into();
    }
    if item.get("apiVersion").is_none() {
        item["apiVersion"] = list["apiVersion"].clone();
    }
    Some(item)
}

/// A GET of `path` at the apiserver, in the form `accept` asks for (JSON when `None`).
async fn upstream_get(
    client: &kube::Client,
    path_and_query: &str,
    authorization: Option<http::HeaderValue>,
    accept: Option<http::HeaderValue>,
) -> Result<(http::StatusCode, http::HeaderMap, Bytes), ReadError> {
    let mut request = Request::new(kube::client::Body::empty());
    if let Some(value) = authorization {
        request.headers_mut().insert(header::AUTHORIZATION, value);
    }
    *request.uri_mut() = path_and_query.parse().map_err(|source| ReadError::Uri {
        path: path_and_query.to_owned(),
        source,
    })?;
    request.headers_mut().insert(
        header::ACCEPT,
        accept.unwrap_or_else(|| http::HeaderValue::from_static("application/json")),
    );
    let response = client.send(request).await.map_err(ReadError::Send)?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_READ_BODY)
        .collect()
        .await
        .map_err(ReadError::Body)?
        .to_bytes();
    Ok((parts.status, parts.headers, body))
}

/// Answers a GET or LIST of `info` as the apiserver had it at `at`: a list read exactly
/// there (a GET: the one item of a read by name, or NotFound), with the client's
/// `authorization` when the proxy forwards its credentials. A LIST is read in the form the
/// client's `accept` asks for (its JSON forms, as [`prefer_json`] leaves them: metadata only
/// for a metadata informer); a GET's item is JSON.
pub(super) async fn stale_read(
    shared: &Shared,
    info: &RequestInfo,
    at: u64,
    authorization: Option<http::HeaderValue>,
    accept: &http::HeaderMap,
) -> Response<ProxyBody> {
    let accept = (info.verb == Verb::List)
        .then(|| {
            let mut headers = accept.clone();
            prefer_json(&mut headers);
            http::HeaderValue::from_str(&list_values(&headers, &header::ACCEPT).join(", ")).ok()
        })
        .flatten()
        .filter(|v| !v.is_empty());
    let collection = collection_path(&info.group, &info.version, &info.namespace, &info.resource);
    let query = if info.verb == Verb::List {
        exact_query(&info.query, at)
    } else {
        let selector = format!("metadata.name={}", info.name);
        exact_query(
            &form_urlencoded::Serializer::new(String::new())
                .append_pair("fieldSelector", &selector)
                .finish(),
            at,
        )
    };
    let target = match &query {
        Some(q) => format!("{collection}?{q}"),
        None => format!("{collection}?{}", info.query),
    };
    let (status, headers, body) =
        match upstream_get(&shared.upstream, &target, authorization, accept).await {
            Ok(answer) => answer,
            Err(e) => {
                let message = format!(
                    "the API proxy failed to read {info} as of rv {at}: {}",
                    crate::errors::chain(&e)
                );
                return status_response(502, info, &message);
            }
        };
    if status == http::StatusCode::GONE {
        shared.hub().error(format!(
            "{info} was read as of the held rv {at}, which the apiserver no longer serves \
             (compacted): the hold outlived what a real apiserver can show"
        ));
    }
    if info.verb == Verb::List || !status.is_success() {
        let mut response = Response::new(Either::Left(Full::new(body)));
        *response.status_mut() = status;
        copy_end_to_end(&headers, response.headers_mut(), &[header::CONTENT_LENGTH]);
        return response;
    }
    let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match single_item(&list) {
        Some(item) => {
            let mut response =
                Response::new(Either::Left(Full::new(Bytes::from(item.to_string()))));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        None => {
            let what = if info.group.is_empty() {
                info.resource.clone()
            } else {
                format!("{}.{}", info.resource, info.group)
            };
            status_response(404, info, &format!("{what} \"{}\" not found", info.name))
        }
    }
}

impl ApiProxy {
    /// Starts `hold` at the apiserver's current resourceVersion (read now) and returns its
    /// record. It stands until [`ApiProxy::release`], or [`MAX_HOLD`], after which it is
    /// released and [`ApiProxy::fault_errors`] says the case held too long.
    pub async fn hold(&self, hold: Hold) -> Result<HoldRecord, HoldError> {
        let error = |message: String| HoldError {
            resource: hold.resource.clone(),
            message,
        };
        let namespace = hold.namespace.clone().unwrap_or_default();
        let path = collection_path(&hold.group, &hold.version, &namespace, &hold.resource);
        let (status, _, body) =
            upstream_get(&self.shared.admin, &format!("{path}?limit=1"), None, None)
                .await
                .map_err(|e| error(crate::errors::chain(&e).to_string()))?;
        if !status.is_success() {
            return Err(error(format!(
                "{path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        let list: Value = serde_json::from_slice(&body).map_err(|e| error(e.to_string()))?;
        let at = list["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| error(format!("{path} carries no numeric resourceVersion")))?;
        let mut hub = self.shared.hub();
        if let Some(why) = hub.unreadable_watch(&hold) {
            return Err(error(why));
        }
        let id = hub.start(hold, at);
        let record = hub
            .records()
            .into_iter()
            .find(|r| r.id == id)
            .expect("just started");
        drop(hub);
        let shared: Weak<Shared> = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            tokio::time::sleep(MAX_HOLD).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let mut hub = shared.hub();
            if hub.active().iter().any(|(a, _)| *a == id)
                && let Some(record) = hub.release(id)
            {
                hub.error(format!(
                    "{record} stood {MAX_HOLD:?}, longer than a real apiserver keeps the \
                     history it needs (etcd compacts every 5 minutes by default)"
                ));
            }
        });
        Ok(record)
    }

    /// Releases hold `id` (its events go as its release says); its record, or `None` when
    /// it stands no more.
    pub fn release(&self, id: u64) -> Option<HoldRecord> {
        self.shared.hub().release(id)
    }

    /// Releases every hold in force, oldest first.
    pub fn release_all(&self) -> Vec<HoldRecord> {
        let mut hub = self.shared.hub();
        let ids: Vec<u64> = hub.active().into_iter().map(|(id, _)| id).collect();
        ids.into_iter().filter_map(|id| hub.release(id)).collect()
    }

    /// Ends every relayed watch of `group/resource` with `410 Gone` now, so its clients
    /// list again; how many it ended.
    pub fn relist(&self, group: &str, resource: &str) -> usize {
        self.shared.hub().end_watches(group, resource)
    }

    /// Every hold started so far, in order.
    pub fn holds(&self) -> Vec<HoldRecord> {
        self.shared.hub().records()
    }

    /// What made a fault one no real cluster could produce (a hold longer than the
    /// apiserver's history), in order: each makes the case an error.
    pub fn fault_errors(&self) -> Vec<String> {
        self.shared.hub().errors().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_a_watch_cache_serves_are_answered_stale() {
        let read = |verb: &str, path: &str, query: &str| {
            stale_read_applies(&RequestInfo::parse(verb, path, query), 50)
        };
        let pod = "/api/v1/namespaces/ns/pods/p";
        let pods = "/api/v1/namespaces/ns/pods";
        assert!(read("GET", pods, "resourceVersion=0"));
        assert!(read("GET", pod, "resourceVersion=0"));
        assert!(read("GET", &format!("{pod}/status"), "resourceVersion=0"));
        assert!(read("GET", pods, "resourceVersion=40"));
        assert!(read(
            "GET",
            pods,
            "resourceVersion=40&resourceVersionMatch=NotOlderThan"
        ));
        // Quorum reads are current on a real apiserver; exact ones name their version.
        assert!(!read("GET", pods, ""));
        assert!(!read("GET", pod, ""));
        assert!(!read(
            "GET",
            pods,
            "resourceVersion=40&resourceVersionMatch=Exact"
        ));
        assert!(!read("GET", pods, "resourceVersion=60"));
        assert!(!read("GET", pods, "watch=true&resourceVersion=0"));
        assert!(!read("GET", &format!("{pod}/log"), "resourceVersion=0"));
        assert!(!read("PATCH", pod, "resourceVersion=0"));
    }

    #[test]
    fn lists_are_read_exactly_at_the_hold() {
        let q = exact_query("labelSelector=a%3Db&resourceVersion=0&limit=500", 42).unwrap();
        let pairs: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("labelSelector".into(), "a=b".into()),
                ("limit".into(), "500".into()),
                ("resourceVersion".into(), "42".into()),
                ("resourceVersionMatch".into(), "Exact".into()),
            ]
        );
        assert_eq!(exact_query("limit=1&continue=abc", 42), None);
    }

    #[test]
    fn a_get_is_answered_with_the_lists_one_item() {
        let list = serde_json::json!({
            "kind": "PodList", "apiVersion": "v1",
            "items": [{"metadata": {"name": "p"}}],
        });
        let item = single_item(&list).unwrap();
        assert_eq!(item["kind"], "Pod");
        assert_eq!(item["apiVersion"], "v1");
        let crd = serde_json::json!({
            "kind": "PodCliqueList", "apiVersion": "grove.io/v1alpha1",
            "items": [{"kind": "PodClique", "apiVersion": "grove.io/v1alpha1"}],
        });
        assert_eq!(single_item(&crd).unwrap()["kind"], "PodClique");
        assert_eq!(single_item(&serde_json::json!({"items": []})), None);
    }

    #[test]
    fn collection_paths_follow_the_group_and_scope() {
        assert_eq!(
            collection_path("", "v1", "ns", "pods"),
            "/api/v1/namespaces/ns/pods"
        );
        assert_eq!(
            collection_path("grove.io", "v1alpha1", "", "podcliques"),
            "/apis/grove.io/v1alpha1/podcliques"
        );
    }
}
