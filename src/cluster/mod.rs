//! The embedded default cluster: real etcd, kube-apiserver and kube-controller-manager
//! (garbage collector, namespace controller, pod GC) started locally, their binaries found or
//! built offline, and every process and temporary file cleaned up with us.

pub mod certs;
mod control_plane;
pub mod crds;
pub mod docker_runtime;
mod fsutil;
pub mod kind_assets;
pub mod process;
pub mod provision;

pub use certs::{CertError, CertPaths};
pub use control_plane::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, DEFAULT_CONTROLLERS, client_for,
};
pub use fsutil::{free_port, write_private};
pub use provision::{Binaries, Component, ProvisionError, ProvisionOptions};
