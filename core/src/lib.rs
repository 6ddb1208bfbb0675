//! The pure core of grove-conformance: everything that decides, and nothing that does I/O
//! against a cluster. No kube client and no async runtime are dependencies of this crate, so
//! the compiler, not a convention, keeps it pure.
//!
//! - [`vocab`]: every implementation-facing name, keyed by spec revision;
//! - [`catalog`]: the case language (the model of cases and steps, parsing, diagnostics, lint,
//!   coverage);
//! - [`snapshot`]: observed state at one instant and the queries on it;
//! - [`matcher`] and [`diff`]: judging observed objects against expectations;
//! - [`monitor`]: the always-on invariant monitor over a case's timeline;
//! - [`report`]: outcomes, the run's event stream, and its writers (console, JUnit, the
//!   conformance report, the HTML page, `results.json`), exit codes;
//! - [`schedule`]: durations of a previous run, the order cases start in, shards;
//! - [`model`]: an executable reading of the spec, the set of states it allows;
//! - [`explore`]: scenarios generated from a seed, judged by the model, shrunk;
//! - [`errors`]: the one error-chain printer;
//! - [`walk`]: reading a JSON value by a path of keys without allocating.
//!
//! Its modules may use one another and the crates its manifest lists; nothing here talks to a
//! cluster, spawns a process or waits on a runtime.

pub mod catalog;
pub mod diff;
pub mod errors;
pub mod explore;
pub mod matcher;
pub mod model;
pub mod monitor;
pub mod report;
pub mod schedule;
pub mod snapshot;
pub mod vocab;
pub mod walk;
