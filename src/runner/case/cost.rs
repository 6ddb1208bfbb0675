//! A case's API cost from its proxy's request log ([`ApiCost`]), and where the case reached
//! its required state (the moment its final `expect` first held).

use std::collections::HashSet;
use std::time::{Instant, SystemTime};

use grove_conformance_core::catalog::StepKind;

use super::steps::CaseRun;
use crate::proxy::{RecordedRequest, Verb};
use crate::report::{ApiCost, ApiRequest, RESTRAINT_BOUND};

/// How long the implementation must send no write at the end of a case before its restraint
/// (L2) is judged: while it still writes, the case watches on (see
/// [`CaseRun::watch_restraint_tail`]).
pub(super) const QUIET_TAIL: std::time::Duration = std::time::Duration::from_secs(2);

tokio::task_local! {
    /// The run's slot the running case holds, given back while the case watches its end: a
    /// case that only watches takes no slot from the cases waiting.
    static SLOT: std::cell::RefCell<Option<Box<dyn std::any::Any + Send>>>;
}

/// Runs `case` holding `slot` (whatever the run gives a case to run: dropped to give it back),
/// until the case gives it back early ([`give_back_slot`]) or ends.
pub async fn holding_slot<F: std::future::Future>(
    slot: Box<dyn std::any::Any + Send>,
    case: F,
) -> F::Output {
    SLOT.scope(std::cell::RefCell::new(Some(slot)), case).await
}

/// Gives the run's slot of the running case back, if it holds one.
fn give_back_slot() {
    let _ = SLOT.try_with(|s| drop(s.borrow_mut().take()));
}

impl CaseRun<'_> {
    /// Watches the end of a case that reached its required state until the implementation
    /// has written nothing for [`QUIET_TAIL`], or until [`RESTRAINT_BOUND`] plus the tail has
    /// passed since the required state (its writes past the bound are then L2's findings). An
    /// implementation that rewrites an object without changing it is watched until the bound,
    /// the tail and the longest gap between its writes to that object have passed (at most
    /// twice the bound), so a rewrite on any timer shorter than the bound lands past it.
    /// The case gives its slot back first: a case that only watches holds up no other. Nothing
    /// is done without an API proxy or a required state.
    pub(super) async fn watch_restraint_tail(&self) {
        let Some(proxy) = self.proxy.as_ref() else {
            return;
        };
        let Some(required) = self.final_required_state() else {
            return;
        };
        give_back_slot();
        let mut deadline = required + RESTRAINT_BOUND + QUIET_TAIL;
        let mut told = false;
        loop {
            let requests = proxy.requests();
            let last_write = requests
                .iter()
                .filter(|r| r.request.namespace == self.namespace && is_write(r.request.verb))
                .map(|r| r.at)
                .max();
            let quiet = last_write
                .and_then(|at| SystemTime::now().duration_since(at).ok())
                .unwrap_or(QUIET_TAIL);
            if Instant::now() >= deadline {
                return;
            }
            // A write that changed nothing is an implementation rewriting what it already
            // wrote, which it may do on a timer: however long it waits between such writes,
            // the case watches on until the bound has passed.
            let idle = idle_write(&requests, &self.namespace);
            if let Some(r) = idle {
                let period = longest_gap(&requests, r).min(RESTRAINT_BOUND);
                deadline = deadline.max(required + RESTRAINT_BOUND + QUIET_TAIL + period);
            }
            if let Some(r) = idle.filter(|_| !told) {
                told = true;
                tracing::info!(
                    request = r.seq,
                    "the implementation rewrote {} {} without changing it; watching until the restraint bound has passed",
                    r.request.resource,
                    r.request.name
                );
            }
            if quiet >= QUIET_TAIL && idle.is_none() {
                return;
            }
            let step = std::time::Duration::from_millis(500);
            tokio::time::sleep(QUIET_TAIL.saturating_sub(quiet).min(step).max(step / 10)).await;
        }
    }

    /// When the state the case requires at its end first held: the one its last step, an
    /// expect, waited for; a case ending on another step states none.
    fn final_required_state(&self) -> Option<Instant> {
        let ends_on_expect =
            matches!(self.case.steps.last(), Some(s) if matches!(s.kind, StepKind::Expect(_)));
        ends_on_expect
            .then(|| {
                *self
                    .required_at
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .flatten()
    }

    /// Notes that an `expect` step's state was there at `reached`.
    pub(super) fn reached(&self, reached: Instant) {
        *self
            .required_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reached);
    }

    /// What the implementation cost the apiserver in this case, from `started` (the case's
    /// start, on both clocks) until now; `None` without an API proxy.
    pub(super) fn api_cost(&self, started: (Instant, SystemTime)) -> Option<ApiCost> {
        let proxy = self.proxy.as_ref()?;
        let required = self
            .final_required_state()
            .map(|at| at.saturating_duration_since(started.0));
        let requests: Vec<ApiRequest> = proxy
            .requests()
            .iter()
            .filter(|r| r.request.namespace == self.namespace || r.request.namespace.is_empty())
            .filter_map(|r| {
                let at = r.at.duration_since(started.1).ok()?;
                let resource = if r.request.subresource.is_empty() {
                    r.request.resource.clone()
                } else {
                    format!("{}/{}", r.request.resource, r.request.subresource)
                };
                Some(ApiRequest {
                    at,
                    verb: r.request.verb.as_str().to_owned(),
                    resource,
                    object: r.request.name.clone(),
                    write: is_write(r.request.verb),
                })
            })
            .collect();
        Some(ApiCost::of(&requests, required, started.0.elapsed()))
    }
}

/// Whether a request with `verb` changes anything (L2 counts these).
/// The first write of `namespace` that changed nothing: the apiserver answered it with the
/// resourceVersion an earlier write to the same object had already been answered with (a
/// no-op patch or update is not persisted, so its version stays).
fn idle_write<'r>(requests: &'r [RecordedRequest], namespace: &str) -> Option<&'r RecordedRequest> {
    let mut seen: HashSet<(&str, &str, u64)> = HashSet::new();
    for r in requests.iter().filter(|r| r.request.namespace == namespace) {
        let Some(version) = r.resource_version else {
            continue;
        };
        let object = (
            r.request.resource.as_str(),
            r.request.name.as_str(),
            version,
        );
        if !seen.insert(object) && !r.request.name.is_empty() {
            return Some(r);
        }
    }
    None
}

/// The longest time between two consecutive answered writes to the object `idle` wrote.
fn longest_gap(requests: &[RecordedRequest], idle: &RecordedRequest) -> std::time::Duration {
    let times: Vec<SystemTime> = requests
        .iter()
        .filter(|r| {
            r.resource_version.is_some()
                && r.request.namespace == idle.request.namespace
                && r.request.resource == idle.request.resource
                && r.request.name == idle.request.name
        })
        .map(|r| r.at)
        .collect();
    times
        .windows(2)
        .filter_map(|w| w[1].duration_since(w[0]).ok())
        .max()
        .unwrap_or_default()
}

fn is_write(verb: Verb) -> bool {
    match verb {
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection => true,
        Verb::Get | Verb::List | Verb::Watch | Verb::Proxy | Verb::Other => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::proxy::RequestInfo;

    fn write(seq: u64, name: &str, version: Option<u64>) -> RecordedRequest {
        let path = format!("/apis/grove.io/v1alpha1/namespaces/ns/podcliques/{name}/status");
        RecordedRequest {
            seq,
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(seq),
            request: RequestInfo::parse("PATCH", &path, ""),
            status: Some(200),
            duration: Some(Duration::from_millis(1)),
            faults: Vec::new(),
            resource_version: version,
            answered_after: Some(seq),
        }
    }

    #[test]
    fn a_write_answered_with_a_version_already_answered_is_idle() {
        let changing = [write(1, "a", Some(7)), write(2, "a", Some(9))];
        assert_eq!(idle_write(&changing, "ns"), None);
        // The same version again: the second write changed nothing.
        let rewrite = [write(1, "a", Some(7)), write(2, "a", Some(7))];
        assert_eq!(idle_write(&rewrite, "ns").map(|r| r.seq), Some(2));
        // Another object, another namespace, or a write without an answer: not idle.
        let others = [
            write(1, "a", Some(7)),
            write(2, "b", Some(8)),
            write(3, "a", None),
        ];
        assert_eq!(idle_write(&others, "ns"), None);
        assert_eq!(idle_write(&rewrite, "other"), None);
    }

    #[test]
    fn the_longest_gap_is_between_writes_to_the_idle_object() {
        let log = [
            write(1, "a", Some(7)),
            write(4, "b", Some(8)),
            write(9, "a", Some(7)),
        ];
        assert_eq!(longest_gap(&log, &log[2]), Duration::from_secs(8));
        assert_eq!(longest_gap(&log[..1], &log[0]), Duration::ZERO);
    }
}
