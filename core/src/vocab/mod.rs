//! Every implementation-facing name, keyed by spec revision.
//!
//! Cases, fixtures, the matcher and the monitor never spell a field path, condition type,
//! reason, event reason or label key themselves: they name a [`Term`] and ask the
//! [`Vocabulary`] of the selected [`Revision`] for its spelling. Cases and fixtures are written
//! once, in the default revision (`grep-0285-review`); [`Vocabulary::translate_manifest`]
//! rewrites a manifest for another revision, or says why it cannot.
//!
//! The single table is [`TABLE`]: one row per term, one column per revision, `None` where a
//! revision has no such name.
//!
//! The module is split along its seams, each with its own `impl Vocabulary` block:
//! - `revision`: the spec revisions ([`Revision`]) and parsing their ids;
//! - `kind`: the Kubernetes kinds the harness reads and writes ([`Kind`]);
//! - `terms`: the term table ([`Term`], [`Category`], [`TABLE`]), the capabilities a
//!   revision may lack ([`Feature`]) and the policy field paths ([`PolicyLevel`]);
//! - `objects`: reading and writing observed objects (conditions, [`TerminalState`], the
//!   job structure [`PcsShape`]);
//! - `translate`: rewriting catalog manifests and field paths for a revision.

mod kind;
mod objects;
mod revision;
mod terms;
mod translate;

pub use kind::{GROVE_API_VERSION, Kind};
pub use objects::{
    CliqueShape, GroupShape, PcsShape, TerminalSignal, TerminalState, condition, condition_status,
};
pub use revision::{Revision, UnknownRevision};
pub use terms::{Category, Feature, Names, PolicyLevel, TABLE, Term};

/// A name that the selected revision does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// The revision has no spelling for the term.
    #[error("revision {revision} has no `{term}`")]
    Term {
        /// The revision.
        revision: Revision,
        /// The term it lacks.
        term: Term,
    },
    /// The revision lacks a capability.
    #[error("revision {revision} has no {}", feature.description())]
    Feature {
        /// The revision.
        revision: Revision,
        /// The capability it lacks.
        feature: Feature,
    },
    /// A manifest field cannot be expressed in the revision.
    #[error("`{path}` cannot be expressed in revision {revision}: {why}")]
    Manifest {
        /// The revision.
        revision: Revision,
        /// Field path in the manifest (default-revision spelling).
        path: String,
        /// Why.
        why: String,
    },
}

/// The names of one revision. Cheap to copy; build with [`Vocabulary::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Vocabulary {
    revision: Revision,
}

impl Vocabulary {
    /// The vocabulary of `revision`.
    pub fn new(revision: Revision) -> Self {
        Vocabulary { revision }
    }

    /// The revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }
}

/// A PodCliqueSet with a leader-worker PCSG and a regular sidecar, shared by the shape and
/// translation tests.
#[cfg(test)]
fn leader_worker() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": "job"},
        "spec": {"replicas": 1, "template": {
            "cliques": [
                {"name": "leader", "spec": {"replicas": 1, "policy": {"completion": {}},
                    "podSpec": {"containers": []}}},
                {"name": "worker", "spec": {"replicas": 4, "policy": {"completion": {}},
                    "podSpec": {"containers": []}}},
                {"name": "sidecar", "spec": {"replicas": 1, "podSpec": {"containers": []}}}
            ],
            "podCliqueScalingGroups": [
                {"name": "trainer", "cliqueNames": ["leader", "worker"],
                 "policy": {"completion": {"success": {"targetNames": ["leader"]},
                                           "failure": {"maxRestarts": 2}}}}
            ]
        }}
    })
}
