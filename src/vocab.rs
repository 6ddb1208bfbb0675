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

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// A revision of the job-support spec an implementation can claim (job-semantics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Revision {
    /// `grep-0285-review`: the GREP as settled in review (the default).
    #[default]
    Grep0285Review,
    /// `grep-0285-2026-08`: the GREP text of 2026-08-13 (`completedNames`, no empty markers).
    Grep0285ProposalText,
    /// `grove-pr-728`: the first partial implementation upstream (PodClique level only).
    GrovePr728,
}

impl Revision {
    /// Every revision, default first (the column order of [`TABLE`]).
    pub const ALL: [Revision; 3] = [
        Revision::Grep0285Review,
        Revision::Grep0285ProposalText,
        Revision::GrovePr728,
    ];

    /// The stable id used on the command line, in cases and in reports.
    pub fn id(self) -> &'static str {
        match self {
            Revision::Grep0285Review => "grep-0285-review",
            Revision::Grep0285ProposalText => "grep-0285-2026-08",
            Revision::GrovePr728 => "grove-pr-728",
        }
    }

    /// One line saying what the revision is.
    pub fn description(self) -> &'static str {
        match self {
            Revision::Grep0285Review => "the GREP as settled in review",
            Revision::Grep0285ProposalText => "the GREP text of 2026-08-13",
            Revision::GrovePr728 => "the first partial implementation upstream",
        }
    }

    fn column(self) -> usize {
        match self {
            Revision::Grep0285Review => 0,
            Revision::Grep0285ProposalText => 1,
            Revision::GrovePr728 => 2,
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A revision id that is not one of [`Revision::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown spec revision `{0}` (expected one of grep-0285-review, grep-0285-2026-08, grove-pr-728)"
)]
pub struct UnknownRevision(pub String);

impl FromStr for Revision {
    type Err = UnknownRevision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::ALL
            .into_iter()
            .find(|r| r.id() == s)
            .ok_or_else(|| UnknownRevision(s.to_owned()))
    }
}

/// The Kubernetes kinds the harness reads and writes (the same in every revision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` Pod.
    Pod,
    /// `grove.io/v1alpha1` PodClique (PCLQ).
    PodClique,
    /// `grove.io/v1alpha1` PodCliqueScalingGroup (PCSG).
    PodCliqueScalingGroup,
    /// `grove.io/v1alpha1` PodCliqueSet (PCS).
    PodCliqueSet,
    /// `v1` Event (core events, as written by client-go recorders).
    Event,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Pod,
        Kind::PodClique,
        Kind::PodCliqueScalingGroup,
        Kind::PodCliqueSet,
        Kind::Event,
    ];

    /// The kind as spelled in manifests (`PodClique`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::PodClique => "PodClique",
            Kind::PodCliqueScalingGroup => "PodCliqueScalingGroup",
            Kind::PodCliqueSet => "PodCliqueSet",
            Kind::Event => "Event",
        }
    }

    /// The `apiVersion` of the kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Pod | Kind::Event => "v1",
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet => GROVE_API_VERSION,
        }
    }

    /// The resource (plural) name used in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::PodClique => "podcliques",
            Kind::PodCliqueScalingGroup => "podcliquescalinggroups",
            Kind::PodCliqueSet => "podcliquesets",
            Kind::Event => "events",
        }
    }

    /// Whether the kind is one of Grove's (PodClique, PCSG, PCS).
    pub fn is_grove(self) -> bool {
        matches!(
            self,
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown kind `{s}`"))
    }
}

/// The API version of Grove's kinds.
pub const GROVE_API_VERSION: &str = "grove.io/v1alpha1";

/// What a [`Term`] names; used to check that a case puts a name where it belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A segment of a policy field path (`completion`, `targetNames`, ...).
    PolicyField,
    /// A status field.
    StatusField,
    /// A condition type.
    ConditionType,
    /// A condition reason.
    ConditionReason,
    /// A value of `status.phase` used as a terminal state.
    TerminalPhase,
    /// The reason of a Kubernetes Event.
    EventReason,
    /// A label key.
    Label,
    /// A pod scheduling gate.
    SchedulingGate,
}

/// One implementation-facing name, independent of its spelling in a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Term {
    /// `policy`: the field holding `completion` on a clique, PCSG or PCS.
    Policy,
    /// `policy.completion`: the job marker on a clique, PCSG or PCS.
    Completion,
    /// `completion.success`.
    Success,
    /// `success.targetNames` (`completedNames` in the 2026-08 text).
    TargetNames,
    /// `completion.failure`.
    Failure,
    /// `failure.maxRestarts`.
    MaxRestarts,
    /// `status.replicaRestartCounts` on PCSG and PCS.
    ReplicaRestartCounts,
    /// Condition `Completed`.
    Completed,
    /// Condition `Failed`.
    Failed,
    /// PodClique `status.phase` value meaning completed (`grove-pr-728` only).
    PhaseCompleted,
    /// PodClique `status.phase` value meaning failed (`grove-pr-728` only).
    PhaseFailed,
    /// Reason `CompletionCriteriaMet` (Completed=True).
    CompletionCriteriaMet,
    /// Reason `RestartBudgetExhausted` (Failed=True because a budget ran out).
    RestartBudgetExhaustedReason,
    /// Condition `MinAvailableBreached` (upstream Grove).
    MinAvailableBreached,
    /// Condition `PodCliqueScheduled` (upstream Grove).
    PodCliqueScheduled,
    /// Condition `GangTerminationInProgress` (upstream Grove, PCSG).
    GangTerminationInProgress,
    /// Reason `InsufficientReadyPods` (MinAvailableBreached=True).
    InsufficientReadyPods,
    /// Reason `ScheduledReplicasBelowMinAvailable` (MinAvailableBreached=True).
    ScheduledReplicasBelowMinAvailable,
    /// Reason `SufficientReadyPods` (MinAvailableBreached=False).
    SufficientReadyPods,
    /// Reason `UpdateInProgress` (MinAvailableBreached=Unknown).
    UpdateInProgress,
    /// Reason `SufficientScheduledPods` (PodCliqueScheduled=True).
    SufficientScheduledPods,
    /// Reason `InsufficientScheduledPods` (PodCliqueScheduled=False).
    InsufficientScheduledPods,
    /// Event `JobCompleted` (Normal).
    JobCompleted,
    /// Event `JobFailed` (Warning).
    JobFailed,
    /// Event `GangRestartTriggered` (Warning, PCSG/PCS).
    GangRestartTriggered,
    /// Event `RestartBudgetExhausted` (Warning, PCSG/PCS).
    RestartBudgetExhaustedEvent,
    /// Event `PodCliqueScalingGroupReplicaDeleteSuccessful` (upstream gang termination).
    PcsgReplicaDeleteSuccessful,
    /// Event `PodCliqueSetReplicaDeleteSuccessful` (upstream gang termination).
    PcsReplicaDeleteSuccessful,
    /// Label `grove.io/podclique` on pods.
    LabelPodClique,
    /// Label `grove.io/podclique-pod-index` on pods.
    LabelPodIndex,
    /// Label `grove.io/restart-attempt` on recreated children (R7, provisional).
    LabelRestartAttempt,
    /// Label `grove.io/podcliqueset-replica-index` on every child.
    LabelPcsReplicaIndex,
    /// Label `grove.io/podcliquescalinggroup` on PodCliques in a PCSG.
    LabelPcsg,
    /// Label `grove.io/podcliquescalinggroup-replica-index` on PodCliques in a PCSG.
    LabelPcsgReplicaIndex,
    /// Label `app.kubernetes.io/part-of` (the PCS name) on every child.
    LabelPartOf,
    /// Label `app.kubernetes.io/managed-by` on every child.
    LabelManagedBy,
    /// Label `grove.io/podgang` on pods.
    LabelPodGang,
    /// Scheduling gate `grove.io/podgang-pending-creation` (R8).
    GatePodGangPendingCreation,
}

/// The spellings of one term: `[grep-0285-review, grep-0285-2026-08, grove-pr-728]`.
pub type Names = [Option<&'static str>; 3];

const fn all(name: &'static str) -> Names {
    [Some(name), Some(name), Some(name)]
}

/// A name of the GREP's revisions only: `grove-pr-728` has no such thing.
const fn proposal_only(name: &'static str) -> Names {
    [Some(name), Some(name), None]
}

/// THE vocabulary: every implementation-facing name, one row per term, one column per
/// revision (in the order of [`Revision::ALL`]).
pub const TABLE: &[(Term, Category, Names)] = &[
    (Term::Policy, Category::PolicyField, proposal_only("policy")),
    (
        Term::Completion,
        Category::PolicyField,
        proposal_only("completion"),
    ),
    (
        Term::Success,
        Category::PolicyField,
        proposal_only("success"),
    ),
    (
        Term::TargetNames,
        Category::PolicyField,
        [Some("targetNames"), Some("completedNames"), None],
    ),
    (
        Term::Failure,
        Category::PolicyField,
        proposal_only("failure"),
    ),
    (
        Term::MaxRestarts,
        Category::PolicyField,
        proposal_only("maxRestarts"),
    ),
    (
        Term::ReplicaRestartCounts,
        Category::StatusField,
        proposal_only("replicaRestartCounts"),
    ),
    (
        Term::Completed,
        Category::ConditionType,
        proposal_only("Completed"),
    ),
    (
        Term::Failed,
        Category::ConditionType,
        proposal_only("Failed"),
    ),
    (
        Term::PhaseCompleted,
        Category::TerminalPhase,
        [None, None, Some("Completed")],
    ),
    (
        Term::PhaseFailed,
        Category::TerminalPhase,
        [None, None, Some("Failed")],
    ),
    (
        Term::CompletionCriteriaMet,
        Category::ConditionReason,
        proposal_only("CompletionCriteriaMet"),
    ),
    (
        Term::RestartBudgetExhaustedReason,
        Category::ConditionReason,
        proposal_only("RestartBudgetExhausted"),
    ),
    (
        Term::MinAvailableBreached,
        Category::ConditionType,
        all("MinAvailableBreached"),
    ),
    (
        Term::PodCliqueScheduled,
        Category::ConditionType,
        all("PodCliqueScheduled"),
    ),
    (
        Term::GangTerminationInProgress,
        Category::ConditionType,
        all("GangTerminationInProgress"),
    ),
    (
        Term::InsufficientReadyPods,
        Category::ConditionReason,
        all("InsufficientReadyPods"),
    ),
    (
        Term::ScheduledReplicasBelowMinAvailable,
        Category::ConditionReason,
        all("ScheduledReplicasBelowMinAvailable"),
    ),
    (
        Term::SufficientReadyPods,
        Category::ConditionReason,
        all("SufficientReadyPods"),
    ),
    (
        Term::UpdateInProgress,
        Category::ConditionReason,
        all("UpdateInProgress"),
    ),
    (
        Term::SufficientScheduledPods,
        Category::ConditionReason,
        all("SufficientScheduledPods"),
    ),
    (
        Term::InsufficientScheduledPods,
        Category::ConditionReason,
        all("InsufficientScheduledPods"),
    ),
    (
        Term::JobCompleted,
        Category::EventReason,
        proposal_only("JobCompleted"),
    ),
    (
        Term::JobFailed,
        Category::EventReason,
        proposal_only("JobFailed"),
    ),
    (
        Term::GangRestartTriggered,
        Category::EventReason,
        proposal_only("GangRestartTriggered"),
    ),
    (
        Term::RestartBudgetExhaustedEvent,
        Category::EventReason,
        proposal_only("RestartBudgetExhausted"),
    ),
    (
        Term::PcsgReplicaDeleteSuccessful,
        Category::EventReason,
        all("PodCliqueScalingGroupReplicaDeleteSuccessful"),
    ),
    (
        Term::PcsReplicaDeleteSuccessful,
        Category::EventReason,
        all("PodCliqueSetReplicaDeleteSuccessful"),
    ),
    (
        Term::LabelPodClique,
        Category::Label,
        all("grove.io/podclique"),
    ),
    (
        Term::LabelPodIndex,
        Category::Label,
        all("grove.io/podclique-pod-index"),
    ),
    (
        Term::LabelRestartAttempt,
        Category::Label,
        proposal_only("grove.io/restart-attempt"),
    ),
    (
        Term::LabelPcsReplicaIndex,
        Category::Label,
        all("grove.io/podcliqueset-replica-index"),
    ),
    (
        Term::LabelPcsg,
        Category::Label,
        all("grove.io/podcliquescalinggroup"),
    ),
    (
        Term::LabelPcsgReplicaIndex,
        Category::Label,
        all("grove.io/podcliquescalinggroup-replica-index"),
    ),
    (
        Term::LabelPartOf,
        Category::Label,
        all("app.kubernetes.io/part-of"),
    ),
    (
        Term::LabelManagedBy,
        Category::Label,
        all("app.kubernetes.io/managed-by"),
    ),
    (Term::LabelPodGang, Category::Label, all("grove.io/podgang")),
    (
        Term::GatePodGangPendingCreation,
        Category::SchedulingGate,
        all("grove.io/podgang-pending-creation"),
    ),
];

impl Term {
    fn row(self) -> &'static (Term, Category, Names) {
        TABLE
            .iter()
            .find(|(t, _, _)| *t == self)
            .expect("every term has a row in the vocabulary table")
    }

    /// What the term names.
    pub fn category(self) -> Category {
        self.row().1
    }

    /// The spelling used in cases and fixtures: the default revision's, or for a term the
    /// default revision lacks, the first revision's that has it.
    pub fn catalog_name(self) -> &'static str {
        let names = self.row().2;
        names
            .into_iter()
            .flatten()
            .next()
            .expect("every term is spelled in some revision")
    }

    /// The term a case or fixture means by `name` in `category` (default-revision spelling).
    pub fn from_catalog_name(category: Category, name: &str) -> Option<Term> {
        TABLE
            .iter()
            .find(|(t, c, names)| *c == category && names[0] == Some(name) && t.row().1 == *c)
            .map(|(t, _, _)| *t)
    }

    /// Every default-revision spelling in `category`, for "expected one of" messages.
    pub fn catalog_names(category: Category) -> Vec<&'static str> {
        TABLE
            .iter()
            .filter(|(_, c, names)| *c == category && names[0].is_some())
            .filter_map(|(_, _, names)| names[0])
            .collect()
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.catalog_name())
    }
}

/// A capability that some revisions lack; a case needing it is skipped under those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Completion and failure evaluated on PCSG and PCS (targetNames, budgets, gang restarts).
    ParentSemantics,
    /// `completion: {}` (and empty `success`/`failure`) accepted as "defaults" (V10).
    EmptyCompletionMarker,
    /// The job marker is the `policy.completion` field (not `restartPolicy: Never`).
    CompletionPolicyField,
    /// Terminal state of a PodClique shown as `Completed`/`Failed` conditions (not a phase).
    PodCliqueConditions,
    /// Job events (`JobCompleted`, `JobFailed`, ...).
    JobEvents,
}

impl Feature {
    /// A short description for skip reasons.
    pub fn description(self) -> &'static str {
        match self {
            Feature::ParentSemantics => {
                "completion semantics on PodCliqueScalingGroup and PodCliqueSet"
            }
            Feature::EmptyCompletionMarker => "an empty `completion: {}` marker",
            Feature::CompletionPolicyField => "the `policy.completion` field",
            Feature::PodCliqueConditions => "Completed/Failed conditions on PodClique",
            Feature::JobEvents => "job events",
        }
    }
}

/// Where a `policy` sits; decides the full field path of the policy fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyLevel {
    /// `spec.policy` of a PodCliqueSet.
    PodCliqueSet,
    /// `spec.template.cliques[].spec.policy` in a PodCliqueSet.
    CliqueTemplate,
    /// `spec.template.podCliqueScalingGroups[].policy` in a PodCliqueSet.
    ScalingGroupConfig,
    /// `spec.policy` of a PodClique object.
    PodClique,
    /// `spec.policy` of a PodCliqueScalingGroup object.
    ScalingGroup,
}

impl PolicyLevel {
    /// The path of the object holding `policy` at this level.
    fn holder(self) -> &'static str {
        match self {
            PolicyLevel::PodCliqueSet | PolicyLevel::PodClique | PolicyLevel::ScalingGroup => {
                "spec"
            }
            PolicyLevel::CliqueTemplate => "spec.template.cliques[].spec",
            PolicyLevel::ScalingGroupConfig => "spec.template.podCliqueScalingGroups[]",
        }
    }
}

/// How a revision shows that an object has reached a terminal state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalSignal {
    /// `status.conditions[]` entries of these types with status `True`.
    Conditions {
        /// The condition type meaning completed.
        completed: &'static str,
        /// The condition type meaning failed.
        failed: &'static str,
    },
    /// `status.phase` equal to one of these values.
    Phase {
        /// The phase meaning completed.
        completed: &'static str,
        /// The phase meaning failed.
        failed: &'static str,
    },
}

/// The terminal state of one observed object, as its revision shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TerminalState {
    /// Completed (condition True, or phase Completed).
    pub completed: bool,
    /// Failed (condition True, or phase Failed).
    pub failed: bool,
}

impl TerminalState {
    /// Either completed or failed.
    pub fn is_terminal(self) -> bool {
        self.completed || self.failed
    }
}

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

    /// The spelling of `term`, or `None` when the revision has no such name.
    pub fn name(&self, term: Term) -> Option<&'static str> {
        term.row().2[self.revision.column()]
    }

    /// The spelling of `term`, or an error saying the revision lacks it.
    pub fn require(&self, term: Term) -> Result<&'static str, Unsupported> {
        self.name(term).ok_or(Unsupported::Term {
            revision: self.revision,
            term,
        })
    }

    /// Whether the revision has `feature`.
    pub fn supports(&self, feature: Feature) -> bool {
        match feature {
            Feature::ParentSemantics
            | Feature::CompletionPolicyField
            | Feature::PodCliqueConditions
            | Feature::JobEvents => self.revision != Revision::GrovePr728,
            Feature::EmptyCompletionMarker => self.revision == Revision::Grep0285Review,
        }
    }

    /// Ok when the revision has `feature`, else the skip reason.
    pub fn require_feature(&self, feature: Feature) -> Result<(), Unsupported> {
        if self.supports(feature) {
            Ok(())
        } else {
            Err(Unsupported::Feature {
                revision: self.revision,
                feature,
            })
        }
    }

    /// Full path of `policy.completion` at `level` (`None` without a completion field).
    pub fn completion_path(&self, level: PolicyLevel) -> Option<String> {
        Some(format!(
            "{}.{}.{}",
            level.holder(),
            self.name(Term::Policy)?,
            self.name(Term::Completion)?
        ))
    }

    /// Full path of `completion.success.targetNames` at `level`.
    pub fn target_names_path(&self, level: PolicyLevel) -> Option<String> {
        Some(format!(
            "{}.{}.{}",
            self.completion_path(level)?,
            self.name(Term::Success)?,
            self.name(Term::TargetNames)?
        ))
    }

    /// Full path of `completion.failure.maxRestarts` at `level`.
    pub fn max_restarts_path(&self, level: PolicyLevel) -> Option<String> {
        Some(format!(
            "{}.{}.{}",
            self.completion_path(level)?,
            self.name(Term::Failure)?,
            self.name(Term::MaxRestarts)?
        ))
    }

    /// Rewrites a field path written in the default revision (as in a case's `field:`) for
    /// this revision; `None` when a segment has no equivalent.
    pub fn translate_field_path(&self, path: &str) -> Option<String> {
        let mut out = Vec::new();
        for segment in path.split('.') {
            let (name, index) = match segment.find('[') {
                Some(at) => segment.split_at(at),
                None => (segment, ""),
            };
            let translated = match Term::from_catalog_name(Category::PolicyField, name)
                .or_else(|| Term::from_catalog_name(Category::StatusField, name))
            {
                Some(term) => self.name(term)?,
                None => name,
            };
            out.push(format!("{translated}{index}"));
        }
        Some(out.join("."))
    }

    /// How `kind` shows a terminal state in this revision (`None`: it never becomes terminal).
    pub fn terminal_signal(&self, kind: Kind) -> Option<TerminalSignal> {
        match (self.supports(Feature::PodCliqueConditions), kind) {
            (_, Kind::Pod | Kind::Event) => None,
            (true, _) => Some(TerminalSignal::Conditions {
                completed: self.name(Term::Completed)?,
                failed: self.name(Term::Failed)?,
            }),
            (false, Kind::PodClique) => Some(TerminalSignal::Phase {
                completed: self.name(Term::PhaseCompleted)?,
                failed: self.name(Term::PhaseFailed)?,
            }),
            (false, Kind::PodCliqueScalingGroup | Kind::PodCliqueSet) => None,
        }
    }

    /// The terminal state of an observed object of `kind`.
    pub fn terminal_state(&self, kind: Kind, object: &Value) -> TerminalState {
        match self.terminal_signal(kind) {
            None => TerminalState::default(),
            Some(TerminalSignal::Conditions { completed, failed }) => TerminalState {
                completed: condition_status(object, completed) == Some("True"),
                failed: condition_status(object, failed) == Some("True"),
            },
            Some(TerminalSignal::Phase { completed, failed }) => {
                let phase = object.pointer("/status/phase").and_then(Value::as_str);
                TerminalState {
                    completed: phase == Some(completed),
                    failed: phase == Some(failed),
                }
            }
        }
    }

    /// Whether a PodClique object (or clique template `spec`'s parent) is completion-aware.
    ///
    /// `object` is a PodClique object or a clique template (`{name, spec}`): both keep the
    /// policy and pod spec under `spec`.
    pub fn is_completion_aware_clique(&self, object: &Value) -> bool {
        let spec = object.get("spec");
        if self.supports(Feature::CompletionPolicyField) {
            let (Some(policy), Some(completion)) =
                (self.name(Term::Policy), self.name(Term::Completion))
            else {
                return false;
            };
            spec.and_then(|s| s.get(policy))
                .and_then(|p| p.get(completion))
                .is_some_and(|c| !c.is_null())
        } else {
            spec.and_then(|s| s.pointer("/podSpec/restartPolicy"))
                .and_then(Value::as_str)
                == Some("Never")
        }
    }

    /// The `policy.completion` object of a PCS (`spec.policy`) or PCSG config (`policy`).
    fn completion_of<'a>(&self, policy_parent: Option<&'a Value>) -> Option<&'a Value> {
        policy_parent?
            .get(self.name(Term::Policy)?)?
            .get(self.name(Term::Completion)?)
            .filter(|c| !c.is_null())
    }

    fn targets_of(&self, completion: Option<&Value>) -> Option<Vec<String>> {
        let list = completion?
            .get(self.name(Term::Success)?)?
            .get(self.name(Term::TargetNames)?)?
            .as_array()?;
        Some(
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        )
    }

    fn max_restarts_of(&self, completion: Option<&Value>) -> u32 {
        (|| {
            completion?
                .get(self.name(Term::Failure)?)?
                .get(self.name(Term::MaxRestarts)?)?
                .as_u64()
        })()
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The job structure of a PodCliqueSet manifest or object, read with this revision's names.
    pub fn shape(&self, pcs: &Value) -> PcsShape {
        let spec = pcs.get("spec");
        let template = spec.and_then(|s| s.get("template"));
        let list = |key: &str| -> Vec<Value> {
            template
                .and_then(|t| t.get(key))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let replicas = |v: Option<&Value>, default: u32| {
            v.and_then(Value::as_u64)
                .map_or(default, |n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        let groups_raw = list("podCliqueScalingGroups");
        let cliques: Vec<CliqueShape> = list("cliques")
            .iter()
            .map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                CliqueShape {
                    name: name.to_owned(),
                    completion_aware: self.is_completion_aware_clique(c),
                    replicas: replicas(c.pointer("/spec/replicas"), 0),
                    group: groups_raw
                        .iter()
                        .find(|g| {
                            g.get("cliqueNames")
                                .and_then(Value::as_array)
                                .is_some_and(|n| n.iter().any(|n| n.as_str() == Some(name)))
                        })
                        .and_then(|g| g.get("name").and_then(Value::as_str))
                        .map(str::to_owned),
                }
            })
            .collect();
        let groups: Vec<GroupShape> = groups_raw
            .iter()
            .map(|g| {
                let names: Vec<String> = g
                    .get("cliqueNames")
                    .and_then(Value::as_array)
                    .map(|n| {
                        n.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let completion = self.completion_of(Some(g));
                GroupShape {
                    name: g
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    completion_aware: names
                        .iter()
                        .any(|n| cliques.iter().any(|c| &c.name == n && c.completion_aware)),
                    replicas: replicas(g.get("replicas"), 1),
                    target_names: self.targets_of(completion),
                    max_restarts: self.max_restarts_of(completion),
                    clique_names: names,
                }
            })
            .collect();
        let completion = self.completion_of(spec);
        PcsShape {
            name: pcs
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            replicas: replicas(spec.and_then(|s| s.get("replicas")), 0),
            completion_aware: cliques
                .iter()
                .any(|c| c.group.is_none() && c.completion_aware)
                || groups.iter().any(|g| g.completion_aware),
            target_names: self.targets_of(completion),
            max_restarts: self.max_restarts_of(completion),
            cliques,
            groups,
        }
    }

    /// Sets (or replaces, by type) a condition in `object.status.conditions`.
    ///
    /// Used by the harness to write children's conditions itself (same-observation cases);
    /// `now` is an RFC 3339 timestamp for `lastTransitionTime`.
    pub fn set_condition(
        object: &mut Value,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        now: &str,
    ) {
        let Some(root) = object.as_object_mut() else {
            return;
        };
        let status_obj = root
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if !status_obj.is_object() {
            *status_obj = Value::Object(Map::new());
        }
        let conditions = status_obj
            .as_object_mut()
            .expect("status was made an object")
            .entry("conditions")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !conditions.is_array() {
            *conditions = Value::Array(Vec::new());
        }
        let list = conditions.as_array_mut().expect("conditions is an array");
        let mut condition = Map::new();
        condition.insert("type".into(), Value::from(type_));
        condition.insert("status".into(), Value::from(status));
        // metav1.Condition requires a reason and a message.
        condition.insert(
            "reason".into(),
            Value::from(reason.unwrap_or("SetByConformanceHarness")),
        );
        condition.insert(
            "message".into(),
            Value::from("written by the grove-conformance harness"),
        );
        condition.insert("lastTransitionTime".into(), Value::from(now));
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        {
            Some(existing) => *existing = Value::Object(condition),
            None => list.push(Value::Object(condition)),
        }
    }

    /// Writes a terminal state into an object's status the way this revision shows it
    /// (a condition, or `status.phase`), e.g. for the harness's status writes.
    pub fn set_terminal(
        &self,
        kind: Kind,
        object: &mut Value,
        term: Term,
        reason: Option<&str>,
        now: &str,
    ) -> Result<(), Unsupported> {
        let signal = self.terminal_signal(kind).ok_or(Unsupported::Feature {
            revision: self.revision,
            feature: Feature::ParentSemantics,
        })?;
        let completed = match term {
            Term::Completed | Term::PhaseCompleted => true,
            Term::Failed | Term::PhaseFailed => false,
            other => {
                return Err(Unsupported::Term {
                    revision: self.revision,
                    term: other,
                });
            }
        };
        match signal {
            TerminalSignal::Conditions {
                completed: c,
                failed: f,
            } => {
                Self::set_condition(object, if completed { c } else { f }, "True", reason, now);
            }
            TerminalSignal::Phase {
                completed: c,
                failed: f,
            } => {
                if let Some(root) = object.as_object_mut() {
                    let status = root
                        .entry("status")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(status) = status.as_object_mut() {
                        status.insert("phase".into(), Value::from(if completed { c } else { f }));
                    }
                }
            }
        }
        Ok(())
    }

    /// Rewrites a manifest (or a patch shaped like one) written in the default revision for
    /// this revision. Fields the revision cannot express are an error saying which.
    ///
    /// | revision | rewrite |
    /// |---|---|
    /// | `grep-0285-review` | none |
    /// | `grep-0285-2026-08` | `success.targetNames` → `success.completedNames`; empty `completion`/`success`/`failure` → their explicit defaults |
    /// | `grove-pr-728` | a clique's `policy.completion` → `podSpec.restartPolicy: Never`; parent policies and explicit non-`Never` restart policies of completion-aware cliques, or `Never`/`OnFailure` of regular ones, are errors |
    pub fn translate_manifest(&self, kind: Kind, manifest: &Value) -> Result<Value, Unsupported> {
        let mut out = manifest.clone();
        match kind {
            Kind::PodCliqueSet => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_policy_holder(spec, "spec")?;
                    if let Some(template) = spec.get_mut("template") {
                        if let Some(cliques) =
                            template.get_mut("cliques").and_then(Value::as_array_mut)
                        {
                            for (i, clique) in cliques.iter_mut().enumerate() {
                                if let Some(cspec) = clique.get_mut("spec") {
                                    self.translate_clique_spec(
                                        cspec,
                                        &format!("spec.template.cliques[{i}].spec"),
                                    )?;
                                }
                            }
                        }
                        if let Some(groups) = template
                            .get_mut("podCliqueScalingGroups")
                            .and_then(Value::as_array_mut)
                        {
                            for (i, group) in groups.iter_mut().enumerate() {
                                self.translate_policy_holder(
                                    group,
                                    &format!("spec.template.podCliqueScalingGroups[{i}]"),
                                )?;
                            }
                        }
                    }
                }
            }
            Kind::PodClique => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_clique_spec(spec, "spec")?;
                }
            }
            Kind::PodCliqueScalingGroup => {
                if let Some(spec) = out.get_mut("spec") {
                    self.translate_policy_holder(spec, "spec")?;
                }
            }
            Kind::Pod | Kind::Event => {}
        }
        Ok(out)
    }

    /// Translates the `policy` of a PCS spec or PCSG config/spec (`holder.policy.completion`).
    fn translate_policy_holder(&self, holder: &mut Value, at: &str) -> Result<(), Unsupported> {
        let Some(completion) = holder
            .get_mut(src(Term::Policy))
            .and_then(|p| p.get_mut(src(Term::Completion)))
        else {
            return Ok(());
        };
        match self.revision {
            Revision::Grep0285Review => Ok(()),
            Revision::Grep0285ProposalText => {
                self.spell_out_defaults(completion);
                Ok(())
            }
            Revision::GrovePr728 => Err(Unsupported::Manifest {
                revision: self.revision,
                path: format!("{at}.{}.{}", src(Term::Policy), src(Term::Completion)),
                why: "it has no completion semantics above PodClique".into(),
            }),
        }
    }

    /// Rewrites one completion object for a revision with other spellings and no empty
    /// markers: renamed fields, and `{}` parts replaced by their explicit defaults.
    fn spell_out_defaults(&self, completion: &mut Value) {
        let Some(map) = completion.as_object_mut() else {
            return;
        };
        let (Some(success), Some(targets), Some(failure), Some(max_restarts)) = (
            self.name(Term::Success),
            self.name(Term::TargetNames),
            self.name(Term::Failure),
            self.name(Term::MaxRestarts),
        ) else {
            return;
        };
        if let Some(s) = map.remove(src(Term::Success)) {
            let mut s = s.as_object().cloned().unwrap_or_default();
            if let Some(names) = s.remove(src(Term::TargetNames)) {
                s.insert(targets.into(), names);
            }
            if !s.is_empty() {
                map.insert(success.into(), Value::Object(s));
            }
        }
        let f = map
            .remove(src(Term::Failure))
            .and_then(|f| f.as_object().cloned())
            .unwrap_or_default();
        let mut f: Map<String, Value> = f
            .into_iter()
            .map(|(k, v)| {
                if k == src(Term::MaxRestarts) {
                    (max_restarts.to_owned(), v)
                } else {
                    (k, v)
                }
            })
            .collect();
        if f.is_empty() && map.contains_key(success) {
            return;
        }
        if f.is_empty() {
            f.insert(max_restarts.into(), Value::from(0));
        }
        map.insert(failure.into(), Value::Object(f));
    }

    fn translate_clique_spec(&self, spec: &mut Value, at: &str) -> Result<(), Unsupported> {
        let completion_at = format!("{at}.{}.{}", src(Term::Policy), src(Term::Completion));
        match self.revision {
            Revision::Grep0285Review => Ok(()),
            Revision::Grep0285ProposalText => {
                if let Some(completion) = spec
                    .get_mut(src(Term::Policy))
                    .and_then(|p| p.get_mut(src(Term::Completion)))
                {
                    self.spell_out_defaults(completion);
                }
                Ok(())
            }
            Revision::GrovePr728 => {
                let completion = spec
                    .get(src(Term::Policy))
                    .and_then(|p| p.get(src(Term::Completion)))
                    .filter(|c| !c.is_null())
                    .cloned();
                let restart_policy = spec
                    .pointer("/podSpec/restartPolicy")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match completion {
                    Some(completion) => {
                        if completion.get(src(Term::Success)).is_some() {
                            return Err(Unsupported::Manifest {
                                revision: self.revision,
                                path: format!("{completion_at}.{}", src(Term::Success)),
                                why: "its job marker is `restartPolicy: Never` only".into(),
                            });
                        }
                        if let Some(rp) = restart_policy.filter(|rp| rp != "Never") {
                            return Err(Unsupported::Manifest {
                                revision: self.revision,
                                path: format!("{at}.podSpec.restartPolicy"),
                                why: format!(
                                    "`{rp}` on a completion-aware clique has no equivalent"
                                ),
                            });
                        }
                        let spec_map = spec.as_object_mut().expect("a clique spec is an object");
                        if let Some(policy) = spec_map
                            .get_mut(src(Term::Policy))
                            .and_then(Value::as_object_mut)
                        {
                            policy.remove(src(Term::Completion));
                            if policy.is_empty() {
                                spec_map.remove(src(Term::Policy));
                            }
                        }
                        if let Some(pod_spec) =
                            spec_map.get_mut("podSpec").and_then(Value::as_object_mut)
                        {
                            pod_spec.insert("restartPolicy".into(), Value::from("Never"));
                        }
                        Ok(())
                    }
                    None => match restart_policy.filter(|rp| rp == "Never" || rp == "OnFailure") {
                        Some(rp) => Err(Unsupported::Manifest {
                            revision: self.revision,
                            path: format!("{at}.podSpec.restartPolicy"),
                            why: format!("`{rp}` on a regular clique would change its meaning"),
                        }),
                        None => Ok(()),
                    },
                }
            }
        }
    }
}

/// The default-revision spelling of `term`: how cases and fixtures are written.
fn src(term: Term) -> &'static str {
    term.catalog_name()
}

/// The status of the condition of `type_` in `object.status.conditions`, if present.
pub fn condition_status<'a>(object: &'a Value, type_: &str) -> Option<&'a str> {
    condition(object, type_)?.get("status")?.as_str()
}

/// The condition of `type_` in `object.status.conditions`, if present.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// The job structure of a PodCliqueSet, read through a [`Vocabulary`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PcsShape {
    /// `metadata.name`.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: u32,
    /// Whether any direct child is completion-aware.
    pub completion_aware: bool,
    /// `spec.policy.completion.success.targetNames`, when present.
    pub target_names: Option<Vec<String>>,
    /// `spec.policy.completion.failure.maxRestarts` (0 when omitted).
    pub max_restarts: u32,
    /// Clique templates.
    pub cliques: Vec<CliqueShape>,
    /// PCSG configs.
    pub groups: Vec<GroupShape>,
}

/// A clique template of a [`PcsShape`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CliqueShape {
    /// Template name.
    pub name: String,
    /// Whether its policy makes it completion-aware.
    pub completion_aware: bool,
    /// `spec.replicas` (pods per PodClique).
    pub replicas: u32,
    /// The PCSG config it belongs to, if any (else it is standalone).
    pub group: Option<String>,
}

/// A PCSG config of a [`PcsShape`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupShape {
    /// Config name.
    pub name: String,
    /// `cliqueNames`.
    pub clique_names: Vec<String>,
    /// Whether any member clique is completion-aware.
    pub completion_aware: bool,
    /// `replicas` (default 1).
    pub replicas: u32,
    /// `policy.completion.success.targetNames`, when present.
    pub target_names: Option<Vec<String>>,
    /// `policy.completion.failure.maxRestarts` (0 when omitted).
    pub max_restarts: u32,
}

impl PcsShape {
    /// Standalone clique templates (in no PCSG).
    pub fn standalone_cliques(&self) -> impl Iterator<Item = &CliqueShape> {
        self.cliques.iter().filter(|c| c.group.is_none())
    }

    /// The template of a clique by name.
    pub fn clique(&self, name: &str) -> Option<&CliqueShape> {
        self.cliques.iter().find(|c| c.name == name)
    }

    /// The PCSG config by name.
    pub fn group(&self, name: &str) -> Option<&GroupShape> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Names of the required direct children of a PCS replica (clique or PCSG config names).
    pub fn required_children(&self) -> Vec<String> {
        match &self.target_names {
            Some(t) => t.clone(),
            None => self
                .standalone_cliques()
                .filter(|c| c.completion_aware)
                .map(|c| c.name.clone())
                .chain(
                    self.groups
                        .iter()
                        .filter(|g| g.completion_aware)
                        .map(|g| g.name.clone()),
                )
                .collect(),
        }
    }
}

impl GroupShape {
    /// Names of the required member cliques of a replica of this PCSG.
    pub fn required_cliques(&self, pcs: &PcsShape) -> Vec<String> {
        match &self.target_names {
            Some(t) => t.clone(),
            None => self
                .clique_names
                .iter()
                .filter(|n| pcs.clique(n).is_some_and(|c| c.completion_aware))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revision_ids_round_trip() {
        for r in Revision::ALL {
            assert_eq!(r.id().parse::<Revision>().unwrap(), r);
            assert_eq!(r.to_string(), r.id());
        }
        assert_eq!(Revision::default(), Revision::Grep0285Review);
        let err = "grep-0285".parse::<Revision>().unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown spec revision `grep-0285`")
        );
    }

    #[test]
    fn every_term_has_exactly_one_row_and_a_catalog_name() {
        for (term, category, _) in TABLE {
            assert_eq!(TABLE.iter().filter(|(t, _, _)| t == term).count(), 1);
            assert_eq!(term.category(), *category);
            assert!(!term.catalog_name().is_empty());
        }
    }

    #[test]
    fn names_differ_by_revision() {
        let review = Vocabulary::new(Revision::Grep0285Review);
        let text = Vocabulary::new(Revision::Grep0285ProposalText);
        let pr = Vocabulary::new(Revision::GrovePr728);
        assert_eq!(review.name(Term::TargetNames), Some("targetNames"));
        assert_eq!(text.name(Term::TargetNames), Some("completedNames"));
        assert_eq!(pr.name(Term::TargetNames), None);
        assert_eq!(pr.name(Term::Completed), None);
        assert_eq!(pr.name(Term::PhaseCompleted), Some("Completed"));
        assert_eq!(
            review
                .target_names_path(PolicyLevel::ScalingGroupConfig)
                .as_deref(),
            Some("spec.template.podCliqueScalingGroups[].policy.completion.success.targetNames")
        );
        assert_eq!(
            text.max_restarts_path(PolicyLevel::CliqueTemplate)
                .as_deref(),
            Some("spec.template.cliques[].spec.policy.completion.failure.maxRestarts")
        );
        assert_eq!(pr.completion_path(PolicyLevel::PodCliqueSet), None);
        assert!(!text.supports(Feature::EmptyCompletionMarker));
        assert!(!pr.supports(Feature::ParentSemantics));
        assert_eq!(
            text.translate_field_path("spec.policy.completion.success.targetNames[1]")
                .as_deref(),
            Some("spec.policy.completion.success.completedNames[1]")
        );
        assert_eq!(pr.translate_field_path("spec.policy.completion"), None);
    }

    #[test]
    fn terminal_state_reads_conditions_or_phase() {
        let obj = json!({"status": {"conditions": [
            {"type": "Failed", "status": "True"}, {"type": "Completed", "status": "False"}
        ], "phase": "Completed"}});
        let review = Vocabulary::new(Revision::Grep0285Review);
        let pr = Vocabulary::new(Revision::GrovePr728);
        let s = review.terminal_state(Kind::PodClique, &obj);
        assert!(s.failed && !s.completed);
        let s = pr.terminal_state(Kind::PodClique, &obj);
        assert!(s.completed && !s.failed);
        assert!(!pr.terminal_state(Kind::PodCliqueSet, &obj).is_terminal());
    }

    fn leader_worker() -> Value {
        json!({
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

    #[test]
    fn translation_to_the_2026_08_text_renames_and_spells_out_defaults() {
        let v = Vocabulary::new(Revision::Grep0285ProposalText);
        let out = v
            .translate_manifest(Kind::PodCliqueSet, &leader_worker())
            .unwrap();
        assert_eq!(
            out.pointer("/spec/template/podCliqueScalingGroups/0/policy/completion"),
            Some(
                &json!({"success": {"completedNames": ["leader"]}, "failure": {"maxRestarts": 2}})
            )
        );
        assert_eq!(
            out.pointer("/spec/template/cliques/0/spec/policy/completion"),
            Some(&json!({"failure": {"maxRestarts": 0}}))
        );
        let review = Vocabulary::default();
        assert_eq!(
            review
                .translate_manifest(Kind::PodCliqueSet, &leader_worker())
                .unwrap(),
            leader_worker()
        );
    }

    #[test]
    fn translation_to_pr_728_uses_restart_policy_and_refuses_parents() {
        let v = Vocabulary::new(Revision::GrovePr728);
        let err = v
            .translate_manifest(Kind::PodCliqueSet, &leader_worker())
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "spec.template.podCliqueScalingGroups[0].policy.completion` cannot be expressed"
            ),
            "{err}"
        );
        let mut simple = leader_worker();
        simple["spec"]["template"]
            .as_object_mut()
            .unwrap()
            .remove("podCliqueScalingGroups");
        let out = v.translate_manifest(Kind::PodCliqueSet, &simple).unwrap();
        assert_eq!(
            out.pointer("/spec/template/cliques/0/spec"),
            Some(&json!({"replicas": 1, "podSpec": {"containers": [], "restartPolicy": "Never"}}))
        );
        assert_eq!(
            out.pointer("/spec/template/cliques/2/spec/podSpec/restartPolicy"),
            None
        );
        assert!(v.is_completion_aware_clique(&out["spec"]["template"]["cliques"][0]));
        let mut regular_never = simple.clone();
        regular_never["spec"]["template"]["cliques"][2]["spec"]["podSpec"]["restartPolicy"] =
            json!("Never");
        assert!(
            v.translate_manifest(Kind::PodCliqueSet, &regular_never)
                .is_err()
        );
    }

    #[test]
    fn shape_reads_required_children_and_budgets() {
        let v = Vocabulary::default();
        let shape = v.shape(&leader_worker());
        assert_eq!(shape.name, "job");
        assert!(shape.completion_aware);
        let g = shape.group("trainer").unwrap();
        assert!(g.completion_aware);
        assert_eq!(g.max_restarts, 2);
        assert_eq!(g.replicas, 1);
        assert_eq!(g.required_cliques(&shape), vec!["leader".to_owned()]);
        assert_eq!(shape.required_children(), vec!["trainer".to_owned()]);
        assert_eq!(shape.standalone_cliques().count(), 1);
    }

    #[test]
    fn set_terminal_writes_the_revision_form() {
        let mut obj = json!({"status": {"conditions": [{"type": "Completed", "status": "False"}]}});
        Vocabulary::default()
            .set_terminal(
                Kind::PodClique,
                &mut obj,
                Term::Completed,
                Some("CompletionCriteriaMet"),
                "t",
            )
            .unwrap();
        assert_eq!(
            obj["status"]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "CompletionCriteriaMet",
                    "message": "written by the grove-conformance harness", "lastTransitionTime": "t"}])
        );
        let mut obj = json!({});
        Vocabulary::new(Revision::GrovePr728)
            .set_terminal(Kind::PodClique, &mut obj, Term::Failed, None, "t")
            .unwrap();
        assert_eq!(obj, json!({"status": {"phase": "Failed"}}));
    }
}
