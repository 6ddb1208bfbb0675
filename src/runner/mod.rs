//! Running cases against a target and an implementation.
//!
//! [`run_cases`] schedules a selection of cases; [`case::run_case`] runs one in its own
//! namespace under the [`observe::Observer`]'s watches and invariant monitor;
//! [`implementation`] starts and controls the implementation under test.

pub mod admission;
pub mod bench;
pub mod case;
pub mod container;
pub mod implementation;
pub mod kind;
pub mod observe;
pub mod pods;
pub mod real_pods;
mod run;
pub mod sweep;
pub mod target;

pub use implementation::{ImplementationSpec, Instance};
pub use pods::PodDriver;
pub use run::{RunSettings, Selection, default_jobs, run_cases};
pub use target::{TargetGuard, TargetHandles, TargetSpec, acquire};
