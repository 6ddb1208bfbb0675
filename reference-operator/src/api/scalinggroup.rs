//! PodCliqueScalingGroup: the object materialising one scaling group of a PodCliqueSet replica.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::policy::RunPolicy;
use super::schema;

fn one() -> i32 {
    1
}

/// Desired state of a PodCliqueScalingGroup.
// The derive's repeated `printcolumn(type_ = ..)` arguments are not duplicate attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "grove.io",
    version = "v1alpha1",
    kind = "PodCliqueScalingGroup",
    namespaced,
    status = "PodCliqueScalingGroupStatus",
    shortname = "pcsg",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas"
    ),
    printcolumn(
        name = "Completed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Completed\")].status"
    ),
    printcolumn(
        name = "Failed",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Failed\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueScalingGroupSpec {
    /// Number of replicas.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub replicas: i32,
    /// Minimum number of available replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_available: Option<i32>,
    /// Member cliques (template names).
    #[schemars(length(min = 1, max = 32), inner(length(min = 1, max = 63)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub clique_names: Vec<String>,
    /// Job policy copied from the config; set (at least `completion: {}`) on every
    /// completion-aware group so the object is self-describing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
}

/// Observed state of a PodCliqueScalingGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueScalingGroupStatus {
    /// Most recent generation observed by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Completed` and `Failed` (E11), `MinAvailableBreached`, `GangTerminationInProgress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Gang restarts so far, indexed by replica; a missing entry reads as 0 (R3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(range(min = 0)))]
    pub replica_restart_counts: Option<Vec<i32>>,
    /// Replicas that became Completed (E7), by index (completion-aware parents only, not
    /// upstream): a finished scope, in which no child is created again (C4), also once its
    /// children are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096), inner(range(min = 0)))]
    pub completed_replicas: Option<Vec<i32>>,
    /// Observed number of replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Number of scheduled replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_replicas: Option<i32>,
    /// Number of available replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Number of replicas at the desired revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Label selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Generation hash of the PodCliqueSet realised in this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_pod_clique_set_generation_hash: Option<String>,
    /// Upstream rolling-update progress, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub update_progress: Option<serde_json::Value>,
    /// Last errors seen by the controller, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub last_errors: Option<serde_json::Value>,
}

impl PodCliqueScalingGroupSpec {
    /// Whether this group is completion-aware as recorded on the object.
    pub fn is_completion_aware(&self) -> bool {
        RunPolicy::is_completion_aware(self.policy.as_ref())
    }
}
