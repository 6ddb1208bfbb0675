//! Running cases: [`run_cases`] schedules a selection of cases against an acquired target and
//! an implementation; [`case::run_case`] runs one in its own namespace under the
//! [`observe::Observer`]'s watches and invariant monitor; [`PodDriver`] is how a case's pod
//! actions reach pods (the simulated kubelet or real kubelets).
//!
//! May use: [`crate::target`], [`crate::implementation`], [`crate::proxy`], [`crate::kubelet`],
//! [`crate::host`], the pure core.

pub mod case;
mod context;
pub mod observe;
pub mod pods;
mod run;

pub use pods::PodDriver;
pub use run::{RunSettings, Selection, default_jobs, run_cases};
