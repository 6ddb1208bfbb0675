//! The `grove.io/v1alpha1` kinds: PodCliqueSet, PodCliqueScalingGroup and PodClique, with the
//! job fields of GREP-0285 (`policy.completion`, `replicaRestartCounts`).
//!
//! JSON names and shapes follow upstream Grove so upstream manifests apply unchanged. Fields
//! upstream carries but this operator does not act on are kept as free-form values so nothing
//! a user wrote is rejected or silently lost. Admission rules live in [`crate::admission`].

mod podclique;
mod podcliqueset;
mod policy;
mod scalinggroup;
mod schema;

pub use podclique::{PodClique, PodCliqueSpec, PodCliqueStatus};
pub use podcliqueset::{
    PodCliqueScalingGroupConfig, PodCliqueSet, PodCliqueSetSpec, PodCliqueSetStatus,
    PodCliqueSetTemplateSpec, PodCliqueTemplateSpec, UpdateStrategy,
};
pub use policy::{CompletionPolicy, FailurePolicy, RunPolicy, SuccessPolicy};
pub use scalinggroup::{
    PodCliqueScalingGroup, PodCliqueScalingGroupSpec, PodCliqueScalingGroupStatus,
};
