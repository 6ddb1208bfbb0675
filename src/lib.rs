//! grove-conformance: the end-to-end conformance suite for Grove job support (GREP-0285).
//!
//! The crate is a library (so `cargo test` can drive it) and a binary, `grove-conformance`,
//! whose command line (`src/cli/`) belongs to the binary, not to this library. What decides
//! lives in the pure core crate, `grove-conformance-core` (no kube client, no async runtime),
//! re-exported here: [`vocab`], [`catalog`], [`snapshot`], [`matcher`], [`diff`], [`monitor`],
//! [`report`], [`schedule`], [`errors`], the spec [`model`] and the scenario generators of
//! [`explore`]. What does I/O lives here, from the ground up:
//! - [`host`]: supervised processes, files, the Docker engine, images of this executable,
//!   running inside a pod, logging;
//! - [`cluster`]: what cases run against (embedded, kind, an existing cluster);
//! - [`kubelets`]: how pods are driven: the simulated node fleet of the embedded cluster, or
//!   real kubelets (kind, any cluster), behind one [`kubelets::PodDriver`];
//! - [`proxy`]: the fault-injecting Kubernetes API proxy implementations talk through;
//! - [`implementation`]: what is judged (a process, a container image, a Deployment, one already
//!   running);
//! - [`runner`]: running cases (scheduling, observing, a case's steps);
//! - [`campaign`]: work made of many runs: `bench`, the `sweep`s (crash, stale, unobserved) and
//!   `explore`'s generated catalog.
//!
//! Each folder's module doc ends with the folders it may use (`tests/layout.rs` checks them).

pub use grove_conformance_core::{
    catalog, diff, errors, explore, matcher, model, monitor, report, schedule, snapshot, vocab,
};

pub mod campaign;
pub mod cluster;
pub mod host;
pub mod implementation;
pub mod kubelets;
pub mod proxy;
pub mod runner;
