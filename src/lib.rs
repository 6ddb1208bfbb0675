//! grove-conformance: the end-to-end conformance suite for Grove job support (GREP-0285).
//!
//! The crate is a library (so `cargo test` can drive it) and a binary, `grove-conformance`.
//! Layout, from the ground up:
//! - [`cluster`]: the embedded control plane (etcd, kube-apiserver, kube-controller-manager),
//!   provisioning of its binaries, certificates and process supervision.
//! - [`kubelet`]: the simulated node fleet that plays kubelet and scheduler for pods.
//! - [`embedded`]: control plane + fleet together, and the shared instance for tests.
//! - [`vocab`]: every implementation-facing name, keyed by spec revision.
//! - [`catalog`]: the case language (parsing, diagnostics, lint, coverage).
//! - [`snapshot`]: observed state at one instant and the queries on it (objects, pods, events,
//!   UIDs).
//! - [`matcher`] and [`diff`]: judging observed objects against expectations.
//! - [`monitor`]: the always-on invariant monitor over a case's timeline.
//! - [`proxy`]: the fault-injecting Kubernetes API proxy implementations reach the apiserver
//!   through (request log, injected statuses and delays, hooks pinned to a request).
//! - [`report`]: console summary, JUnit XML and the conformance report.
//! - [`runner`]: runs cases against a target and an implementation.

pub mod catalog;
pub mod cluster;
pub mod diff;
pub mod embedded;
pub mod kubelet;
pub mod matcher;
pub mod monitor;
pub mod proxy;
pub mod report;
pub mod runner;
pub mod snapshot;
pub mod vocab;
