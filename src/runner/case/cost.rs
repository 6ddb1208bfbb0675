//! A case's API cost from its proxy's request log ([`ApiCost`]), and where the case reached
//! its required state (the moment its final `expect` first held).

use std::time::{Instant, SystemTime};

use grove_conformance_core::catalog::StepKind;

use super::steps::CaseRun;
use crate::proxy::Verb;
use crate::report::{ApiCost, ApiRequest};

impl CaseRun<'_> {
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
        // The state the case requires at its end is the one its last step, an expect, waited
        // for; a case ending on another step states none.
        let ends_on_expect =
            matches!(self.case.steps.last(), Some(s) if matches!(s.kind, StepKind::Expect(_)));
        let required = ends_on_expect
            .then(|| {
                *self
                    .required_at
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .flatten()
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
fn is_write(verb: Verb) -> bool {
    match verb {
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection => true,
        Verb::Get | Verb::List | Verb::Watch | Verb::Proxy | Verb::Other => false,
    }
}
