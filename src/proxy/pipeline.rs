//! The request pipeline: each request is recorded, its marks and fault rules applied, and
//! then answered by the proxy, by a stale read, or by the apiserver (a watch relayed through
//! the hub, a write read whole for the revision it committed at).

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;

use super::faults::{FaultAction, Fired, HookPosition, Terminal, status_body};
use super::handle::{Credentials, Shared};
use super::headers::{copy_end_to_end, is_upgrade};
use super::lag::{RelayBody, relay, stale_read, stale_read_applies};
use super::request::{RequestInfo, Verb};
use super::upstream::forward;

/// The body of an answer: one the proxy made, or the apiserver's, streamed.
pub(super) type ProxyBody = Either<Full<Bytes>, Either<kube::client::Body, RelayBody>>;

/// A hook held the request: the connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
#[error("the request was dropped by a fault hook")]
pub(super) struct Dropped;

/// Records one request, applies its faults, forwards it, records how it ended.
pub(super) async fn handle(
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

/// The apiserver's answer as the client gets it: status, end-to-end headers, streamed body.
pub(super) fn downstream(upstream: Response<kube::client::Body>) -> Response<ProxyBody> {
    let (parts, body) = upstream.into_parts();
    let mut response = Response::new(Either::Right(Either::Left(body)));
    *response.status_mut() = parts.status;
    copy_end_to_end(&parts.headers, response.headers_mut(), &[]);
    response
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
}
