//! The simulated node fleet: scheduler and kubelet for pods on nodes that have no containers.
//!
//! The only simulated part of the embedded cluster. It must behave like the real thing:
//! statuses as the kubelet writes them, graceful deletion finished by the node, evictions,
//! preemption and node loss as they appear in the API.
//!
//! May use: [`crate::host`], the pure core, and the pinned Kubernetes version of
//! [`crate::cluster::embedded`] (nothing else of the cluster).

mod fleet;
pub mod status;

pub use fleet::{
    Fleet, FleetError, FleetOptions, HarnessAction, KUBELET_MANAGER, NODE_LABEL, NodeLoss,
    TERMINATION_SECONDS_ANNOTATION, Taint, parse_cpu_millis,
};
