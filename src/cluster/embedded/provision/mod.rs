//! Finding, or building, the control-plane binaries: `etcd`, `kube-apiserver` and
//! `kube-controller-manager`.
//!
//! Resolution order, per binary (envtest's convention first, so existing setups just work):
//! 1. `TEST_ASSET_ETCD`, `TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_KUBE_CONTROLLER_MANAGER`;
//! 2. `$KUBEBUILDER_ASSETS/<binary>`;
//! 3. our cache, `$GROVE_CONFORMANCE_CACHE` or `<user cache dir>/grove-conformance`, keyed by
//!    version (`bin/k8s-<version>-etcd-<version>/`);
//! 4. a build with the local `go` from the Go module proxy at the pinned versions, under a
//!    file lock so concurrent processes build once (the others wait, then use the result).
//!
//! Otherwise resolution fails with a message saying how to supply the binaries.

mod builder;
mod go_build;
mod resolve;
#[cfg(test)]
mod tests;

pub(crate) use builder::{Builder, lock_build};
pub(crate) use go_build::build_kubernetes;
pub use go_build::{staging_replaces, version_ldflags};
pub(crate) use resolve::io_err;
pub use resolve::{
    Binaries, Component, ETCD_VERSION, KUBERNETES_VERSION, Origin, ProvisionError,
    ProvisionOptions, cache_bin_dir, default_cache_root, lookup_configured, resolve,
};
