//! Running cases against a target and an implementation.

pub mod implementation;

pub use implementation::{ImplementationSpec, Instance};
