//! Where a crash or pause fired by a watched change landed in the implementation's API
//! traffic: its last request sent and the last answer it received before the action, as the
//! API proxy recorded them. A pinned crash lands on its request by construction; one fired
//! by a `changed`, `deleted` or `condition` trigger lands wherever the implementation was.

use grove_conformance_core::catalog::{ControllerAction, DeletionTarget, Trigger};

use crate::proxy::{ApiProxy, RecordedRequest};

/// `crash when condition Failed=True on PodClique job-0-worker: last request sent #41 patch
/// podcliques/status job-0-worker, last answer received #40 (201) create events`.
pub(super) fn landing(
    proxy: &ApiProxy,
    namespace: &str,
    action: ControllerAction,
    trigger: &Trigger,
) -> String {
    let requests: Vec<RecordedRequest> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.request.namespace == namespace || r.request.namespace.is_empty())
        .collect();
    let sent = requests.iter().max_by_key(|r| r.seq);
    let answered = requests
        .iter()
        .filter(|r| r.status.is_some())
        .max_by_key(|r| (r.answered_after, r.seq));
    let sent = sent.map_or_else(|| "none".to_owned(), |r| format!("#{} {}", r.seq, what(r)));
    let answered = answered.map_or_else(
        || "none".to_owned(),
        |r| format!("#{} ({}) {}", r.seq, r.status.unwrap_or_default(), what(r)),
    );
    format!(
        "{} when {}: last request sent {sent}, last answer received {answered}",
        verb(action),
        describe(trigger)
    )
}

fn verb(action: ControllerAction) -> &'static str {
    match action {
        ControllerAction::Pause => "pause",
        ControllerAction::Crash => "crash",
        ControllerAction::Resume => "resume",
        ControllerAction::Wait => "wait",
    }
}

fn describe(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Changed { object, path } => format!("{path} of {object} changed"),
        Trigger::Deleted(DeletionTarget::Object(object)) => format!("{object} was deleted"),
        Trigger::Deleted(DeletionTarget::Pod(pods)) => format!("pod {pods} was deleted"),
        Trigger::Deleted(DeletionTarget::AnyOf(kind)) => format!("a {kind} was deleted"),
        Trigger::Condition {
            object,
            condition,
            status,
        } => format!("condition {condition}={} on {object}", status.as_str()),
        Trigger::Request(pin) => format!(
            "request {} {}",
            pin.verb.as_deref().unwrap_or("*"),
            pin.resource.as_deref().unwrap_or("*")
        ),
    }
}

/// `verb resource[/subresource] [name]`.
fn what(r: &RecordedRequest) -> String {
    let mut out = format!("{} {}", r.request.verb.as_str(), r.request.resource);
    if !r.request.subresource.is_empty() {
        out.push('/');
        out.push_str(&r.request.subresource);
    }
    if !r.request.name.is_empty() {
        out.push(' ');
        out.push_str(&r.request.name);
    }
    out
}
