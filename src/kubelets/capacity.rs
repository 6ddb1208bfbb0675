//! How many pods a cluster's nodes hold: what a case that needs more than that is told before
//! it runs.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};

/// The allocatable pods of every node a plain pod can run on: Ready, schedulable, without a
/// `NoSchedule` or `NoExecute` taint.
pub(super) async fn pod_capacity(client: &Client) -> Result<u64, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    Ok(nodes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|n| usable(n))
        .map(allocatable_pods)
        .sum())
}

fn usable(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let schedulable = !spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let untainted = spec
        .and_then(|s| s.taints.as_ref())
        .is_none_or(|ts| ts.iter().all(|t| t.effect == "PreferNoSchedule"));
    ready && schedulable && untainted
}

fn allocatable_pods(node: &Node) -> u64 {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("pods"))
        .and_then(|q| q.0.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: &str, taint: Option<&str>, pods: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"taints": taint.map(|e| vec![serde_json::json!({"key": "k", "effect": e})])},
            "status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "allocatable": {"pods": pods}
            }
        }))
        .unwrap()
    }

    #[test]
    fn only_ready_untainted_nodes_hold_a_case_s_pods() {
        assert!(usable(&node("True", None, "110")));
        assert!(usable(&node("True", Some("PreferNoSchedule"), "110")));
        assert!(!usable(&node("True", Some("NoSchedule"), "110")));
        assert!(!usable(&node("False", None, "110")));
        assert_eq!(allocatable_pods(&node("True", None, "250")), 250);
    }
}
