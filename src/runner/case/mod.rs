//! Running one case: a fresh namespace, watches and the invariant monitor, the
//! implementation (one instance per case when it can be namespace-scoped), then the steps in
//! order. A failed case is data ([`Outcome::Fail`](crate::report::Outcome::Fail));
//! [`Outcome::Error`](crate::report::Outcome::Error) means the harness itself could not judge
//! it.
//!
//! - `lifecycle`: one case from namespace to teardown;
//! - `requirements`: what a case needs of the run (the cluster to itself, a controllable
//!   implementation, a pod driver that can do its actions);
//! - `steps`: the state the steps share and the step loop;
//! - `writes`: the steps that write through the API (`apply`, `update`, `delete`, `reject`),
//!   with retries on conflicts;
//! - `pod_actions`: pod and node actions through the pod driver;
//! - `triggers`: `controller` steps, now or when a trigger fires;
//! - `faults`: `fault` steps, holds and relists of what the implementation's watches see;
//! - `refusals`: `refuse` steps, writes the apiserver refuses for a while;
//! - `expect`: `remember` and `expect`, the waits and holds of expectations;
//! - `verdict`: the pure decision of how a case ended, beside the lifecycle's actions.

mod cost;
mod expect;
mod faults;
mod landing;
mod lifecycle;
mod namespaces;
mod pod_actions;
mod refusals;
mod requirements;
mod steps;
mod triggers;
mod verdict;
mod writes;

pub use cost::holding_slot;
pub use expect::DEFAULT_WITHIN;
pub use lifecycle::{
    CASE_LABEL, DEFAULT_CASE_TIMEOUT, RunContext, SHARED_LOG, finished, run_case, run_case_queued,
};
pub use namespaces::{RUN_LABEL, delete_run_namespaces, run_id};
pub use requirements::{
    LARGE_CASE_PODS, fixture_pods, is_large, loses_node, needs_exclusive, skip_reason,
};
