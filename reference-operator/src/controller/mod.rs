//! The controllers: kube-runtime `Controller`s for PodCliqueSet, PodCliqueScalingGroup and
//! PodClique, carrying out the decisions of [`crate::semantics`] on the children built by
//! [`crate::build`].

mod closed;
mod conditions;
mod context;
mod error;
mod events;
mod pcs;
mod pcsg;
mod podclique;
mod run;
mod scope;
mod unanswered;

pub use error::Error;
pub use run::{RunOptions, run, run_until};
