//! What is judged: the implementation under test — the reference operator (default), any
//! command, a container image, or one already running — and what it brings with it: its own
//! CRDs and admission webhooks ([`admission`]). The spec of an implementation and its running
//! instance are in [`instance`]: a command runs as a supervised child process, an image as a
//! container ([`container`]), a Deployment through the harness's API proxy ([`deployment`]), so
//! a case can pause, resume or crash it.
//!
//! May use: [`crate::host`], [`crate::proxy`], [`crate::cluster`] (certificates, the field
//! manager, CRD errors), the pure core. Never the runner.

pub mod admission;
pub mod container;
pub mod deployment;
mod instance;

pub use instance::*;
