//! Judging observed state against an `expect` step: pure functions, no client, no clock.
//!
//! The rules, in order of application:
//! 1. Server-populated fields (uid, resourceVersion, managedFields, creationTimestamp,
//!    generation, condition and status timestamps) are stripped from observed objects.
//! 2. Expected ⊆ observed, recursively: every expected key must be present with a matching
//!    value; observed may have more. Lists whose expected items all carry `type` (conditions)
//!    are matched by `type`, those whose items all carry `name` by `name`, never by position;
//!    other lists must have the same length and match item by item. Numbers compare by value.
//! 3. Conditions are checked by type through the [`Vocabulary`](crate::vocab::Vocabulary), which knows how the selected
//!    revision shows a terminal state (a condition, or `status.phase`).
//! 4. A missing `replicaRestartCounts` entry reads as 0 (R3).
//!
//! [`evaluate`] judges a whole expectation against a [`Snapshot`](crate::snapshot::Snapshot) and keeps an expected and an
//! observed YAML document side by side for the diff; [`match_object`] judges one object, aspect
//! by aspect (labels, spec, status, conditions). What the snapshot holds (which object or pod an
//! expectation is about, how many pods or events match) is looked up by [`crate::snapshot`].

mod evaluate;
mod field;
mod object;
#[cfg(test)]
mod tests;
mod values;

pub use evaluate::{Evaluation, Remembered, evaluate};
pub use field::message_names_field;
pub use object::{ObjectMatch, match_object};
pub use values::{
    SERVER_METADATA_FIELDS, TIMESTAMP_FIELDS, is_subset, project, strip_server_fields,
    translate_keys,
};
