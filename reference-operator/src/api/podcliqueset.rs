//! PodCliqueSet: the user-facing workload, and the templates it materialises children from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::podclique::{PodCliqueSpec, StringMap};
use super::policy::RunPolicy;
use super::schema;

fn one() -> i32 {
    1
}

/// Desired state of a PodCliqueSet.
// The derive's repeated `printcolumn(type_ = ..)` arguments are not duplicate attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "grove.io",
    version = "v1alpha1",
    kind = "PodCliqueSet",
    namespaced,
    status = "PodCliqueSetStatus",
    shortname = "pcs",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.hpaPodSelector"
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
pub struct PodCliqueSetSpec {
    /// Number of replicas; 0 creates nothing.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// How template changes roll out (regular mode only: jobs reject them, V9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Template of every replica.
    pub template: PodCliqueSetTemplateSpec,
    /// Job policy of the PodCliqueSet (`targetNames` name standalone cliques and PCSGs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
}

/// `spec.updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// `RollingRecreate` (default) or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["RollingRecreate", "OnDelete"]))]
    pub type_: Option<String>,
}

/// `spec.template`: the cliques and scaling groups of one replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueSetTemplateSpec {
    /// Clique templates, keyed by name.
    #[schemars(length(min = 1, max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub cliques: Vec<PodCliqueTemplateSpec>,
    /// Scaling groups, keyed by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pod_clique_scaling_groups: Option<Vec<PodCliqueScalingGroupConfig>>,
    /// Start order of the cliques.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [
        "CliqueStartupTypeAnyOrder",
        "CliqueStartupTypeInOrder",
        "CliqueStartupTypeExplicit"
    ]))]
    pub clique_startup_type: Option<String>,
    /// Priority class of every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,
    /// Delay before a regular MinAvailableBreached gang termination (Go duration, e.g. `4h`).
    /// Never applies to completion-aware failures (R4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub termination_delay: Option<String>,
    /// Headless service options, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub headless_service_config: Option<serde_json::Value>,
    /// Topology placement, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub topology_constraint: Option<serde_json::Value>,
    /// Resource claim templates, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub resource_claim_templates: Option<serde_json::Value>,
    /// Shared resource claims, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub resource_sharing: Option<serde_json::Value>,
}

/// One entry of `spec.template.cliques`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueTemplateSpec {
    /// Clique name, unique in the PodCliqueSet.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Labels copied to the PodClique and its pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_map")]
    pub labels: Option<StringMap>,
    /// Annotations copied to the PodClique and its pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::annotation_map")]
    pub annotations: Option<StringMap>,
    /// The PodClique spec.
    pub spec: PodCliqueSpec,
    /// Topology placement, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub topology_constraint: Option<serde_json::Value>,
    /// Shared resource claims, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub resource_sharing: Option<serde_json::Value>,
    /// Rolling-update knobs, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub rolling_update: Option<serde_json::Value>,
}

/// One entry of `spec.template.podCliqueScalingGroups`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueScalingGroupConfig {
    /// Scaling group name, unique in the PodCliqueSet.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Member cliques (names of `spec.template.cliques`).
    #[schemars(length(min = 1, max = 32), inner(length(min = 1, max = 63)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub clique_names: Vec<String>,
    /// Annotations copied to the PCSG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StringMap>,
    /// Number of replicas of the group.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub replicas: i32,
    /// Minimum number of available replicas.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub min_available: i32,
    /// Horizontal autoscaling; not allowed on a completion-aware PCSG (V7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub scale_config: Option<serde_json::Value>,
    /// Job policy of the group (`targetNames` name member cliques).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
    /// Topology placement, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub topology_constraint: Option<serde_json::Value>,
    /// Shared resource claims, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub resource_sharing: Option<serde_json::Value>,
    /// Rolling-update knobs, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub rolling_update: Option<serde_json::Value>,
}

/// Observed state of a PodCliqueSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCliqueSetStatus {
    /// Most recent generation observed by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Completed` and `Failed` (E11), plus upstream's own.
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
    /// Number of replicas created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Number of replicas at the desired revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Number of available replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Label selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa_pod_selector: Option<String>,
    /// Generation hash of the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_generation_hash: Option<String>,
    /// Upstream rolling-update progress, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_object")]
    pub update_progress: Option<serde_json::Value>,
    /// Upstream PodGang statuses, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub pod_gang_statuses: Option<serde_json::Value>,
    /// Last errors seen by the controller, kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::free_form_list")]
    pub last_errors: Option<serde_json::Value>,
}

impl PodCliqueSetTemplateSpec {
    /// The scaling group configs (empty when none).
    pub fn scaling_groups(&self) -> &[PodCliqueScalingGroupConfig] {
        self.pod_clique_scaling_groups
            .as_deref()
            .unwrap_or_default()
    }

    /// The clique template named `name`.
    pub fn clique(&self, name: &str) -> Option<&PodCliqueTemplateSpec> {
        self.cliques.iter().find(|c| c.name == name)
    }

    /// The scaling group config that lists clique `name`, if any.
    pub fn scaling_group_of(&self, clique: &str) -> Option<&PodCliqueScalingGroupConfig> {
        self.scaling_groups()
            .iter()
            .find(|g| g.clique_names.iter().any(|n| n == clique))
    }

    /// Clique templates in no scaling group, in template order.
    pub fn standalone_cliques(&self) -> impl Iterator<Item = &PodCliqueTemplateSpec> {
        self.cliques
            .iter()
            .filter(|c| self.scaling_group_of(&c.name).is_none())
    }

    /// Whether scaling group `group` is completion-aware (one of its cliques is).
    pub fn is_scaling_group_completion_aware(&self, group: &PodCliqueScalingGroupConfig) -> bool {
        group
            .clique_names
            .iter()
            .filter_map(|n| self.clique(n))
            .any(|c| c.spec.is_completion_aware())
    }

    /// Whether the PodCliqueSet is completion-aware: a direct child (standalone clique or
    /// scaling group) is, which amounts to any clique being completion-aware.
    pub fn is_completion_aware(&self) -> bool {
        self.standalone_cliques()
            .any(|c| c.spec.is_completion_aware())
            || self
                .scaling_groups()
                .iter()
                .any(|g| self.is_scaling_group_completion_aware(g))
    }
}
