//! How a case's pods are driven: [`PodDriver`] is the one interface a case uses, with one
//! variant per kind of kubelet behind it.
//!
//! - [`simulated`]: the simulated node fleet of the embedded cluster (scheduler and kubelet
//!   for nodes that have no containers);
//! - [`real`]: exits, readiness, evictions and node loss where the kubelets are real (kind,
//!   any cluster);
//! - `driver`: the [`PodDriver`] that puts either behind a case's pod actions;
//! - `capacity`: how many pods a cluster's nodes hold.
//!
//! May use: [`crate::host`], the pure core, and the pinned Kubernetes version of
//! [`crate::cluster::embedded`] (nothing else of the cluster). Never the runner, the proxy or an
//! implementation.

mod capacity;
mod driver;
pub mod real;
pub mod simulated;

pub use driver::{PodDriver, PodError};
