//! Every name the operator exposes on the API: group, kinds, label keys, condition types,
//! reasons, event reasons, env vars and the field manager.
//!
//! Nothing else in the crate spells these strings; the spec clauses they come from are noted
//! next to each group (`job-semantics.md`, `grove-api.md`).

/// API group of the Grove kinds.
pub const GROUP: &str = "grove.io";
/// `apiVersion` of the Grove kinds.
pub const API_VERSION: &str = "grove.io/v1alpha1";

/// Kind name of a PodCliqueSet.
pub const KIND_PCS: &str = "PodCliqueSet";
/// Kind name of a PodCliqueScalingGroup.
pub const KIND_PCSG: &str = "PodCliqueScalingGroup";
/// Kind name of a PodClique.
pub const KIND_PCLQ: &str = "PodClique";

/// Field manager for every server-side apply and status write of the operator.
pub const FIELD_MANAGER: &str = "grove-reference-operator";

// ---------------------------------------------------------------------------------------------
// Labels (grove-api.md "How the hierarchy is materialised"; R7 for the restart attempt).

/// `app.kubernetes.io/managed-by`, on every child.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`]: the same as upstream, so label selectors written for Grove match.
pub const MANAGED_BY_VALUE: &str = "grove-operator";
/// `app.kubernetes.io/part-of=<pcs>`, on every child.
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
/// `grove.io/podcliqueset-replica-index=<i>`, on every child.
pub const LABEL_PCS_REPLICA_INDEX: &str = "grove.io/podcliqueset-replica-index";
/// `grove.io/podcliquescalinggroup=<pcsg object name>`, on PodCliques in a PCSG and their pods.
pub const LABEL_PCSG: &str = "grove.io/podcliquescalinggroup";
/// `grove.io/podcliquescalinggroup-replica-index=<j>`, on PodCliques in a PCSG and their pods.
pub const LABEL_PCSG_REPLICA_INDEX: &str = "grove.io/podcliquescalinggroup-replica-index";
/// `grove.io/podclique=<podclique name>`, on every pod (B2).
pub const LABEL_PODCLIQUE: &str = "grove.io/podclique";
/// `grove.io/podclique-pod-index=<n>`, on every pod (B2).
pub const LABEL_POD_INDEX: &str = "grove.io/podclique-pod-index";
/// `grove.io/podgang=<podgang>`, on every pod.
pub const LABEL_PODGANG: &str = "grove.io/podgang";
/// `grove.io/restart-attempt=<n>`: the restart count that created a child (R7). Also on pods,
/// so a PodClique recreated under the same name never adopts the pods of an older attempt.
pub const LABEL_RESTART_ATTEMPT: &str = "grove.io/restart-attempt";

/// Upstream's scheduling gate, held until a pod's PodGang lists it (R8). This operator creates no
/// PodGangs, so it never sets the gate.
pub const SCHEDULING_GATE_PODGANG: &str = "grove.io/podgang-pending-creation";

// ---------------------------------------------------------------------------------------------
// Condition types and reasons (job-semantics.md "API surface"; grove-api.md for the regular ones).

/// Condition type set to True when a scope completes (E1, E7, E11).
pub const CONDITION_COMPLETED: &str = "Completed";
/// Condition type set to True when a scope fails (E2, E3, E9, E11).
pub const CONDITION_FAILED: &str = "Failed";
/// Regular-mode availability condition; never on a completion-aware PodClique (E4).
pub const CONDITION_MIN_AVAILABLE_BREACHED: &str = "MinAvailableBreached";

/// Reason of `Completed=True`.
pub const REASON_COMPLETION_CRITERIA_MET: &str = "CompletionCriteriaMet";
/// Reason of `Failed=True` on a PCSG or PCS whose replica ran out of restart budget.
pub const REASON_RESTART_BUDGET_EXHAUSTED: &str = "RestartBudgetExhausted";
/// Reason of `Failed=True` on a PodClique one of whose pods reached phase Failed (E2).
pub const REASON_POD_FAILED: &str = "PodFailed";
/// Reason of `Failed=True` on a PodClique one of whose pods vanished before Succeeded (E3).
pub const REASON_POD_LOST: &str = "PodLost";
/// `MinAvailableBreached=True`: fewer ready pods than `minAvailable`.
pub const REASON_INSUFFICIENT_READY_PODS: &str = "InsufficientReadyPods";
/// `MinAvailableBreached=False`: enough ready pods.
pub const REASON_SUFFICIENT_READY_PODS: &str = "SufficientReadyPods";
/// `MinAvailableBreached=True`: some, but fewer than `minAvailable`, pods are scheduled.
pub const REASON_SCHEDULED_REPLICAS_BELOW_MIN_AVAILABLE: &str =
    "ScheduledReplicasBelowMinAvailable";
/// `MinAvailableBreached=False` while no pod is scheduled yet (nothing to terminate).
pub const REASON_INSUFFICIENT_SCHEDULED_PODS: &str = "InsufficientScheduledPods";
/// PCSG `MinAvailableBreached=True`: fewer available replicas than `minAvailable`.
pub const REASON_INSUFFICIENT_AVAILABLE_PCSG_REPLICAS: &str =
    "InsufficientAvailablePodCliqueScalingGroupReplicas";
/// PCSG `MinAvailableBreached=False`: enough available replicas.
pub const REASON_SUFFICIENT_AVAILABLE_PCSG_REPLICAS: &str =
    "SufficientAvailablePodCliqueScalingGroupReplicas";
/// PCSG `MinAvailableBreached=False` while fewer replicas than `minAvailable` are scheduled.
pub const REASON_INSUFFICIENT_SCHEDULED_PCSG_REPLICAS: &str =
    "InsufficientScheduledPodCliqueScalingGroupReplicas";

// ---------------------------------------------------------------------------------------------
// Event reasons (EV1–EV4).

/// Normal event on every PodClique, PCSG and PCS that becomes Completed (EV1).
pub const EVENT_JOB_COMPLETED: &str = "JobCompleted";
/// Warning event on every PodClique, PCSG and PCS that becomes Failed (EV2).
pub const EVENT_JOB_FAILED: &str = "JobFailed";
/// Warning event on a PCSG/PCS at each gang restart (EV3).
pub const EVENT_GANG_RESTART_TRIGGERED: &str = "GangRestartTriggered";
/// Warning event on a PCSG/PCS when a replica runs out of budget (EV4).
pub const EVENT_RESTART_BUDGET_EXHAUSTED: &str = "RestartBudgetExhausted";
/// Upstream's event on the PCS after a regular gang termination of a PCSG replica (R5).
pub const EVENT_PCSG_REPLICA_DELETE_SUCCESSFUL: &str =
    "PodCliqueScalingGroupReplicaDeleteSuccessful";
/// Upstream's event on the PCS after a regular gang termination of a PCS replica (R5).
pub const EVENT_PCS_REPLICA_DELETE_SUCCESSFUL: &str = "PodCliqueSetReplicaDeleteSuccessful";

// ---------------------------------------------------------------------------------------------
// Env vars injected into every pod container (grove-api.md).

/// Name of the PodCliqueSet.
pub const ENV_PCS_NAME: &str = "GROVE_PCS_NAME";
/// Replica index of the PodCliqueSet.
pub const ENV_PCS_INDEX: &str = "GROVE_PCS_INDEX";
/// Name of the PodClique.
pub const ENV_PCLQ_NAME: &str = "GROVE_PCLQ_NAME";
/// Name of the headless service of the PCS replica.
pub const ENV_HEADLESS_SERVICE: &str = "GROVE_HEADLESS_SERVICE";
/// Pod index within its PodClique.
pub const ENV_PCLQ_POD_INDEX: &str = "GROVE_PCLQ_POD_INDEX";
/// Name of the PCSG object (PodCliques in a PCSG only).
pub const ENV_PCSG_NAME: &str = "GROVE_PCSG_NAME";
/// Replica index of the PCSG (PodCliques in a PCSG only).
pub const ENV_PCSG_INDEX: &str = "GROVE_PCSG_INDEX";
/// Number of pods in one replica of the PCSG (PodCliques in a PCSG only).
pub const ENV_PCSG_TEMPLATE_NUM_PODS: &str = "GROVE_PCSG_TEMPLATE_NUM_PODS";
