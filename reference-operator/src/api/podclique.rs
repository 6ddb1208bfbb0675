//! PodClique: a set of pods of one role, and `PodCliqueSpec`, shared with clique templates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::policy::RunPolicy;
use super::schema;

fn one() -> i32 {
    1
}

/// Desired state of a PodClique; also the `spec` of a clique template in a PodCliqueSet.
// The derive's repeated `printcolumn(type_ = ..)` arguments are not duplicate attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "grove.io",
    version = "v1alpha1",
    kind = "PodClique",
    namespaced,
    status = "PodCliqueStatus",
    shortname = "pclq",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.hpaPodSelector"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
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
pub struct PodCliqueSpec {
    /// Role this clique plays.
    #[schemars(length(max = 63))]
    pub role_name: String,
    /// Template of the pods. Pods of a completion-aware clique run with `restartPolicy: Never`.
    pub pod_spec: PodSpec,
    /// Number of pods.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub replicas: i32,
    /// Minimum number of available pods; defaults to `replicas` when the operator builds children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_available: Option<i32>,
    /// Cliques that must start before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(max = 63)))]
    pub starts_after: Option<Vec<String>>,
    /// Horizontal autoscaling; not allowed on a completion-aware clique (V7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub auto_scaling_config: Option<serde_json::Value>,
    /// Job policy; `policy.completion` makes the clique completion-aware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
}

/// Observed state of a PodClique.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueStatus {
    /// Most recent generation observed by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Number of non-terminated pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Number of ready pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Number of pods at the desired revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Number of pods still carrying a scheduling gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_gated_replicas: Option<i32>,
    /// Number of scheduled pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_replicas: Option<i32>,
    /// Label selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa_pod_selector: Option<String>,
    /// `Completed`, `Failed`, `MinAvailableBreached`, `PodCliqueScheduled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Generation hash of the PodCliqueSet realised in this PodClique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_pod_clique_set_generation_hash: Option<String>,
    /// Pod template hash realised in this PodClique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_pod_template_hash: Option<String>,
    /// Upstream rolling-update progress, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub update_progress: Option<serde_json::Value>,
    /// Last errors seen by the controller, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub last_errors: Option<serde_json::Value>,
    /// Pod indices a pod was created for (completion-aware cliques only, not upstream): an
    /// index created and gone before Succeeded is a lost pod (E3), an index never created is
    /// still to create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096), inner(range(min = 0)))]
    pub created_pod_indices: Option<Vec<i32>>,
    /// Pod indices whose pod was seen Succeeded (completion-aware cliques only, not upstream),
    /// so a succeeded pod that later vanishes still counts towards completion (E1, C7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096), inner(range(min = 0)))]
    pub succeeded_pod_indices: Option<Vec<i32>>,
}

impl PodCliqueSpec {
    /// Whether this clique is completion-aware (`policy.completion` present).
    pub fn is_completion_aware(&self) -> bool {
        RunPolicy::is_completion_aware(self.policy.as_ref())
    }

    /// `minAvailable`, defaulting to `replicas` as upstream does.
    pub fn effective_min_available(&self) -> i32 {
        self.min_available.unwrap_or(self.replicas)
    }
}

/// Labels and annotations map type used by templates.
pub(crate) type StringMap = BTreeMap<String, String>;
