//! grove-conformance: the end-to-end conformance suite for Grove job support (GREP-0285).
//!
//! The crate is a library (so `cargo test` can drive it) and a binary, `grove-conformance`.
//! What decides lives in the pure core crate, `grove-conformance-core` (no kube client, no
//! async runtime), re-exported here: [`vocab`], [`catalog`], [`snapshot`], [`matcher`],
//! [`diff`], [`monitor`], [`report`], the spec [`model`] and the scenario generators of
//! [`explore`]. What does I/O lives here, from the ground up:
//! - [`host`]: supervised processes, files, the Docker engine;
//! - [`cluster`]: what cases run against (embedded, kind, an existing cluster);
//! - [`kubelets`]: how pods are driven: the simulated node fleet of the embedded cluster, or
//!   real kubelets (kind, any cluster), behind one [`kubelets::PodDriver`];
//! - [`proxy`]: the fault-injecting Kubernetes API proxy implementations talk through;
//! - [`implementation`]: what is judged (a process, a container image, one already running);
//! - [`runner`]: running cases (scheduling, observing, a case's steps);
//! - [`campaign`]: many runs at once: `bench` and the crash `sweep`.

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
