//! The reference operator for Grove job semantics (GREP-0285).
//!
//! The crate is split along the reconcile pipeline: [`api`] holds the kinds, [`admission`] the
//! CEL rules the CRDs carry, [`crd`] the generated CustomResourceDefinitions, [`semantics`] the
//! pure job decisions and [`build`] the pure construction of desired children; [`controller`]
//! runs them against a cluster. [`names`] holds every label, condition, reason and event name.

pub mod admission;
pub mod api;
pub mod build;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod names;
pub mod semantics;

pub use crd::crds;
