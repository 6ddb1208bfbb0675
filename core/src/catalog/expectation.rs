//! What an `expect` step judges: objects and their conditions, labels, spec and status; pod
//! counts by phase; events; and the UIDs a case remembers to tell a recreation happened.

use std::fmt;

use serde_json::Value;

use super::model::{ConditionStatus, Duration, ObjectRef, PodSelector};
use crate::vocab::{Kind, Term};

/// An object or pod whose UID can be remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UidSubject {
    /// A Grove object.
    Object(ObjectRef),
    /// The current pod of a PodClique with this index.
    Pod {
        /// PodClique name.
        clique: String,
        /// Pod index.
        index: u32,
    },
}

/// `remember`: record the current UID of `subject` under `label` for later `recreated` /
/// `unchanged` expectations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remember {
    /// Label, unique within the case.
    pub label: String,
    /// The object or pod.
    pub subject: UidSubject,
}

/// The predicates of an `expect` step; all must hold together.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expectation {
    /// Must become true within this time (`None` with `hold`: must be true already).
    pub within: Option<Duration>,
    /// Then must stay true for this long (`for:` in YAML).
    pub hold: Option<Duration>,
    /// Object states.
    pub objects: Vec<ObjectExpectation>,
    /// Pod counts.
    pub pods: Vec<PodCount>,
    /// Remembered labels whose subject now exists with a different UID.
    pub recreated: Vec<String>,
    /// Remembered labels whose subject still exists with the same UID.
    pub unchanged: Vec<String>,
    /// Events that must have been recorded.
    pub events: Vec<EventExpectation>,
}

/// What an object expectation addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A Grove object.
    Object(ObjectRef),
    /// The current pod of a PodClique with this index (`pod: <podclique>/<index>`).
    Pod {
        /// PodClique name.
        clique: String,
        /// Pod index.
        index: u32,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Object(o) => o.fmt(f),
            Subject::Pod { clique, index } => write!(f, "pod {clique}/{index}"),
        }
    }
}

/// The expected state of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectExpectation {
    /// The object.
    pub subject: Subject,
    /// Absent, or present in a state.
    pub state: ObjectState,
}

/// Absent, or present with these properties (all optional; present alone means "exists").
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectState {
    /// `absent: true`: the object does not exist (or is being deleted).
    Absent,
    /// The object exists and matches.
    Present {
        /// Conditions by type.
        conditions: Vec<ConditionExpectation>,
        /// Labels that must be present with these values (keys are vocabulary labels).
        labels: Vec<(Term, String)>,
        /// A subset the observed `spec` must contain.
        spec: Option<Value>,
        /// A subset the observed `status` must contain (conditions excluded: use `conditions`).
        status: Option<Value>,
        /// `owner: {kind, name}`: its controller ownerReference points at that object, by
        /// kind, name and current UID (B3).
        owner: Option<ObjectRef>,
    },
}

/// The expectation on one condition type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionExpectation {
    /// Condition type.
    pub condition: Term,
    /// What it must be.
    pub expect: ConditionMatch,
}

/// `absent`, `not-true`, or a status with an optional reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConditionMatch {
    /// No condition of that type.
    Absent,
    /// No condition of that type with status True: absent, False or Unknown all match. What a
    /// case says where the spec only forbids True.
    NotTrue,
    /// Present with this status (and reason, when given).
    Status {
        /// Status.
        status: ConditionStatus,
        /// Reason, when the case names one.
        reason: Option<Term>,
    },
}

/// Pod phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodPhase {
    /// Pending.
    Pending,
    /// Running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
    /// Unknown.
    Unknown,
}

impl PodPhase {
    /// As in `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }

    /// Parses `status.phase`.
    pub fn parse(s: &str) -> Option<PodPhase> {
        [
            PodPhase::Pending,
            PodPhase::Running,
            PodPhase::Succeeded,
            PodPhase::Failed,
            PodPhase::Unknown,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// Which pods a [`PodCount`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodFilter {
    /// `count:` every existing pod (being deleted included).
    All,
    /// `phase: P` with `count:`.
    Phase(PodPhase),
    /// `active:` Pending or Running and not being deleted.
    Active,
    /// `terminal:` Succeeded or Failed.
    Terminal,
    /// `ready:` Ready condition True and not being deleted.
    Ready,
    /// `owned:` controlled (B3) by the PodClique its `grove.io/podclique` label names: a
    /// controller ownerReference with that PodClique's kind, name and current UID.
    Owned,
}

/// `pods:` entry: exactly `count` pods of `scope` pass `filter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCount {
    /// Which pods are considered.
    pub scope: PodSelector,
    /// Which of them are counted.
    pub filter: PodFilter,
    /// The exact number expected.
    pub count: u32,
}

/// `events:` entry: events with `reason` on the involved object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventExpectation {
    /// Event reason.
    pub reason: Term,
    /// Involved object kind, when given.
    pub kind: Option<Kind>,
    /// Involved object name, when given.
    pub name: Option<String>,
    /// Exact number of occurrences (summing Event `count`); `None`: at least one.
    pub count: Option<u32>,
    /// Words the event's message must contain, each as a whole word (EV3: the replica index
    /// and the failed child).
    pub mentions: Vec<String>,
}

impl From<UidSubject> for Subject {
    fn from(s: UidSubject) -> Self {
        match s {
            UidSubject::Object(o) => Subject::Object(o),
            UidSubject::Pod { clique, index } => Subject::Pod { clique, index },
        }
    }
}
