//! A fault-injecting Kubernetes API proxy. It listens with TLS on 127.0.0.1, writes a
//! kubeconfig for clients, records every request the way the apiserver reads it, and forwards
//! it to the real apiserver with the upstream credentials, streaming answers back (watches
//! event by event). Fault rules, replaceable at any time, answer chosen requests with an
//! injected `Status`, delay them, or hold them at a hook (before or after the apiserver)
//! while a callback runs, then drop them.
//!
//! May use: [`crate::host`] and the pure core only, so every implementation, process, image
//! or deployed, can be put behind it.
//!
//! ```no_run
//! # use std::path::Path;
//! # use grove_conformance::proxy::ProxyError;
//! # async fn example(upstream: &Path, dir: &Path) -> Result<(), ProxyError> {
//! use grove_conformance::proxy::{
//!     ApiProxy, FaultAction, FaultRule, HookPosition, RequestMatch, Verb,
//! };
//!
//! let proxy = ApiProxy::start(upstream, dir).await?;
//! proxy.set_hook(|fired| async move { println!("the crash landed at: {fired}") });
//! proxy.set_rules(vec![FaultRule::new(
//!     RequestMatch::any().verb(Verb::Patch).resource("podcliques").subresource("status"),
//!     FaultAction::Hook { position: HookPosition::After },
//! )
//! .nth(3)]);
//! // ... start the implementation with `proxy.kubeconfig()` ...
//! # Ok(())
//! # }
//! ```

mod clients;
mod faults;
mod handle;
mod headers;
mod lag;
mod pipeline;
mod record;
mod request;
mod server;
mod tls;
mod upstream;
mod watch;

pub use faults::{
    AppliedFault, FaultAction, FaultRule, Fired, HookPosition, status_body, status_reason,
};
pub use handle::{ApiProxy, Credentials, HookFuture, PLACEHOLDER_TOKEN, ProxyError, ProxyOptions};
pub use lag::{HoldError, MAX_HOLD};
pub use record::RecordedRequest;
pub use request::{RequestInfo, RequestMatch, UnknownVerb, Verb, glob_matches};
pub use watch::{Hold, HoldRecord, Reads, Release};
