//! What cases run against: the embedded default (a real control plane with the simulated
//! kubelet of [`crate::kubelets`]), a kind cluster created for the run, or an existing cluster
//! named by a kubeconfig. [`TargetSpec`] says which; [`acquire`] brings it up and returns the
//! [`TargetGuard`] that tears it down.
//!
//! - `options`: the one mapping from options or the environment to a [`TargetSpec`], and
//!   whether its kubelets are real;
//! - `acquire`: the spec, the guard, acquisition and teardown;
//! - [`crds`]: CRD installation, the one way every target does it;
//! - [`embedded`]: the embedded control plane (etcd, kube-apiserver, kube-controller-manager),
//!   its certificates, the build of its binaries, and the shared instance of a test binary;
//! - [`kind`]: kind clusters, their offline assets (node image, component images) and the runc
//!   shim some hosts need.
//!
//! May use: [`crate::host`], [`crate::kubelets`] (the fleet an embedded cluster starts and the
//! pod driver a cluster hands out), the pure core. Never the runner, the proxy or an
//! implementation.

mod acquire;
pub mod crds;
pub mod embedded;
pub mod kind;
mod options;

pub use acquire::*;
pub use options::{KIND_CONFIG, TargetOptions, TargetOptionsError};
