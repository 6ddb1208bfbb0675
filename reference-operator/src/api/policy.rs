//! `policy.completion`: the job fields of GREP-0285, shared by every level.
//!
//! One Rust type serves the PCS, the PCSG configs and objects, and the cliques, because the
//! JSON shape is the same everywhere; what a level may hold (no `success` on a clique, a clique
//! `maxRestarts` of 0 only) is enforced by the CEL rules of [`crate::admission`], so a bad
//! value is rejected with a message naming the field instead of being pruned in silence.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `policy` of a PodCliqueSet, a PCSG config or object, a clique template or a PodClique.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Present (even empty) makes the resource completion-aware; absent keeps it regular.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionPolicy>,
}

/// `policy.completion`: `{}` is valid and means the defaults (V10).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicy {
    /// When a replica counts as completed (PCSG and PCS only, V1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<SuccessPolicy>,
    /// How many gang restarts a replica may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailurePolicy>,
}

/// `policy.completion.success`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicy {
    /// Direct children that must complete; absent means every completion-aware direct child.
    /// Non-empty and duplicate-free when present (V2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), inner(length(min = 1, max = 63)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub target_names: Option<Vec<String>>,
}

/// `policy.completion.failure`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Gang restarts allowed per replica; omitted means 0. Never negative (V3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_restarts: Option<i32>,
}

impl RunPolicy {
    /// Whether `policy.completion` is present: the definition of completion-aware.
    pub fn is_completion_aware(policy: Option<&RunPolicy>) -> bool {
        policy.is_some_and(|p| p.completion.is_some())
    }

    /// `failure.maxRestarts`, 0 when omitted; negative values (rejected at admission) read as 0.
    pub fn max_restarts(policy: Option<&RunPolicy>) -> u32 {
        policy
            .and_then(|p| p.completion.as_ref())
            .and_then(|c| c.failure.as_ref())
            .and_then(|f| f.max_restarts)
            .map_or(0, |n| u32::try_from(n).unwrap_or(0))
    }

    /// `success.targetNames` when present.
    pub fn target_names(policy: Option<&RunPolicy>) -> Option<&[String]> {
        policy
            .and_then(|p| p.completion.as_ref())
            .and_then(|c| c.success.as_ref())
            .and_then(|s| s.target_names.as_deref())
    }

    /// A policy that only marks its holder completion-aware with every default (`completion: {}`).
    pub fn completion_defaults() -> RunPolicy {
        RunPolicy {
            completion: Some(CompletionPolicy::default()),
        }
    }
}
