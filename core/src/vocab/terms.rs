//! The term table: every implementation-facing name ([`Term`], by [`Category`]) and its
//! spelling in each revision ([`TABLE`]), the capabilities a revision may lack ([`Feature`]),
//! and the full paths of the policy fields at each [`PolicyLevel`].

use std::fmt;

use super::{Revision, Unsupported, Vocabulary};

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

    /// Which revisions have the feature, one cell per revision in [`Revision::ALL`] order
    /// (`grep-0285-review`, `grep-0285-2026-08`, `grove-pr-728`). A new revision widens every
    /// row, so the compiler asks for its cell in each; a new feature needs its own row.
    #[rustfmt::skip]
    pub fn support(self) -> [bool; Revision::ALL.len()] {
        match self {
            //                                  review 2026-08 pr-728
            Feature::ParentSemantics =>       [true,  true,   false],
            Feature::EmptyCompletionMarker => [true,  false,  false],
            Feature::CompletionPolicyField => [true,  true,   false],
            Feature::PodCliqueConditions =>   [true,  true,   false],
            Feature::JobEvents =>             [true,  true,   false],
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

impl Vocabulary {
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

    /// Whether the revision has `feature`: its cell in [`Feature::support`].
    pub fn supports(&self, feature: Feature) -> bool {
        feature.support()[self.revision.column()]
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
