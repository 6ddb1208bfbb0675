//! The fault-injecting Kubernetes API proxy implementations reach the apiserver through. It
//! listens with TLS (a CA and serving certificate made at start), writes a kubeconfig for
//! clients, reads every request the way the apiserver does and records it with its answer in a
//! journal, and forwards it to the real apiserver, streaming answers back (watches event by
//! event): with the upstream credentials, or, for a deployed implementation, with the
//! credentials the client presents. On top of that it holds the faults a case places:
//!
//! - fault rules, replaceable at any time, that answer chosen requests with an injected
//!   `Status`, delay them, or hold them at a hook (before or after the apiserver) while a
//!   callback runs, then drop them (a crash pinned to a request);
//! - holds on what the implementation's watches see, released in order, coalesced or as a
//!   relist, and reads answered as of a held resourceVersion (a stale or unobserved view);
//! - its clients, named by the pod their token was issued to, cut off at a crash, and the
//!   freeze of their traffic that a pause is.
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
//!
//! May use: [`crate::host`] and the pure core only, so every implementation, process, image
//! or deployed, can be put behind it.

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
