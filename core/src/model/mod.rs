//! An independent, executable reading of the job-semantics spec
//! (`job-semantics.md`): given a job shape and the pod changes applied so far, the set of
//! settled states the spec allows. Written from the spec's clauses alone, each rule citing
//! its clause, so that it is a second opinion on any implementation.
//!
//! - [`shape`]: a PodCliqueSet as the clauses read it (also invalid ones);
//! - [`admission`]: which rejections a shape is due (V1–V7);
//! - [`world`]: one allowed state and how pod changes move it (E, R, C, EV);
//! - `deletes`: a user deleting a PodClique, a PCSG or the PodCliqueSet (B3, C4).
//!
//! Where the spec leaves a choice open (the order in which a parent observes children that
//! became terminal together, E10; whether a Failed PCSG's still-running replicas are cleaned
//! up inside a terminal PCS replica, C2/C3), every allowed outcome is kept.

pub mod admission;
mod batch;
mod deletes;
pub mod shape;
pub mod world;

#[cfg(test)]
mod tests;

pub use admission::{Rejection, admit};
pub use batch::{NoActivePod, ordered_partitions};
pub use deletes::{NotDeletable, UserDelete};
pub use shape::{Child, Clique, Completion, Group, RestartPolicy, Shape};
pub use world::{
    CliqueState, Cond, EventReason, GroupState, Model, ObjectKind, PodChange, PodEvent, PodState,
    ReplicaState, World,
};
