//! The embedded default target: real etcd, kube-apiserver and kube-controller-manager (garbage
//! collector, namespace controller, pod GC) started locally ([`ControlPlane`]), their
//! certificates ([`certs`]) and binaries, found or built offline ([`provision`]), together with
//! the simulated node fleet of [`crate::kubelets::simulated`] ([`EmbeddedCluster`]), and a process-wide
//! shared instance for test binaries ([`shared`]).
//!
//! May use: [`crate::host`], [`crate::kubelets::simulated`], the pure core.

pub mod certs;
mod cluster;
mod components;
mod control_plane;
pub mod provision;
mod readiness;

pub use certs::{CertError, CertPaths};
pub use cluster::*;
pub use control_plane::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, DEFAULT_CONTROLLERS,
};
pub use provision::{Binaries, Component, ProvisionError, ProvisionOptions};
pub use readiness::client_for;
