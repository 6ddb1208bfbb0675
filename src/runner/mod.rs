//! Running cases: [`run_cases`] schedules a selection of cases against an acquired target and
//! an implementation (the order they start in, cases that need the cluster to themselves);
//! the one `RunContext` constructor is in `context`; [`case::run_case`] runs one in its own
//! namespace under the [`observe::Observer`]'s watches and invariant monitor; a case's pod
//! actions reach pods through the target's [`PodDriver`](crate::kubelets::PodDriver).
//!
//! May use: [`crate::cluster`], [`crate::implementation`], [`crate::proxy`],
//! [`crate::kubelets`], [`crate::host`], the pure core.

pub mod case;
mod context;
pub mod observe;
mod run;

pub use run::{RunSettings, Selection, default_jobs, plan, run_cases, start_shared};
