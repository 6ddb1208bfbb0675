//! What a case needs of a run: the cluster to itself (it is large, loses a node, or pauses a
//! shared implementation), an implementation the harness may control, and a pod driver that can
//! do its pod actions; otherwise it is skipped, with the reason.

use serde_json::Value;

use super::lifecycle::RunContext;
use crate::catalog::{Case, Catalog, ControllerAction, PodAction, StepKind, merge_patch};
use crate::implementation::ImplementationSpec;
use crate::kubelets::PodDriver;

/// Cases creating at least this many pods run alone: on a small machine they would starve
/// the cases beside them (and be starved), turning timing into flakiness.
pub const LARGE_CASE_PODS: u64 = 128;

/// How many pods the PodCliqueSet of a fixture manifest asks for.
pub fn fixture_pods(manifest: &Value) -> u64 {
    let int = |v: Option<&Value>, default: u64| v.and_then(Value::as_u64).unwrap_or(default);
    let template = manifest.pointer("/spec/template");
    let pcs_replicas = int(manifest.pointer("/spec/replicas"), 1);
    let groups: Vec<&Value> = template
        .and_then(|t| t.get("podCliqueScalingGroups"))
        .and_then(Value::as_array)
        .map(|g| g.iter().collect())
        .unwrap_or_default();
    let per_replica: u64 = template
        .and_then(|t| t.get("cliques"))
        .and_then(Value::as_array)
        .map(|cliques| {
            cliques
                .iter()
                .map(|c| {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                    let pods = int(c.pointer("/spec/replicas"), 1);
                    let group_replicas = groups
                        .iter()
                        .find(|g| {
                            g.get("cliqueNames")
                                .and_then(Value::as_array)
                                .is_some_and(|n| n.iter().any(|n| n.as_str() == Some(name)))
                        })
                        .map(|g| int(g.get("replicas"), 1))
                        .unwrap_or(1);
                    pods * group_replicas
                })
                .sum()
        })
        .unwrap_or(0);
    pcs_replicas * per_replica
}

/// The most pods one of a case's workloads asks for: a fixture it declares, or one it applies
/// with a patch (which is how the 256-pod cases scale).
pub(super) fn case_pods(case: &Case, catalog: &Catalog) -> u64 {
    let declared = case
        .fixtures
        .iter()
        .filter_map(|f| catalog.fixture(f))
        .map(|fx| fixture_pods(&fx.manifest));
    let applied = case.steps.iter().filter_map(|s| {
        let a = s.kind.created_fixture()?;
        let fx = catalog.fixture(&a.fixture)?;
        let mut manifest = fx.manifest.clone();
        if let Some(patch) = &a.patch {
            merge_patch(&mut manifest, patch);
        }
        Some(fixture_pods(&manifest))
    });
    declared.chain(applied).max().unwrap_or(0)
}

/// Whether a case creates [`LARGE_CASE_PODS`] pods or more.
pub fn is_large(case: &Case, catalog: &Catalog) -> bool {
    case_pods(case, catalog) >= LARGE_CASE_PODS
}

/// How many nodes of its own a case gets, where the pod driver can give them (the simulated
/// fleet): a case that loses a node one per pod, up to the fleet's usual spread of 8, so a lost
/// node takes this case's pods alone; a case with more pods than the shared nodes hold enough
/// nodes for all of them, as a cluster autoscaler would add them. `None`: the shared nodes.
pub(super) fn private_node_count(
    case: &Case,
    catalog: &Catalog,
    pods: &PodDriver,
) -> Option<usize> {
    let (shared, per_node) = pods.fleet_shape()?;
    let needed = usize::try_from(case_pods(case, catalog)).unwrap_or(usize::MAX);
    if loses_node(case) {
        Some(needed.clamp(1, 8))
    } else {
        (needed > shared.saturating_mul(per_node)).then(|| needed.div_ceil(per_node.max(1)))
    }
}

/// Whether a case loses a node.
pub fn loses_node(case: &Case) -> bool {
    case.steps
        .iter()
        .any(|s| matches!(&s.kind, StepKind::Pods(p) if matches!(p.action, PodAction::LoseNode(_))))
}

/// Whether a case loses a node that must hold the lost pods alone (`alone: true`).
pub(super) fn loses_node_alone(case: &Case) -> bool {
    case.steps.iter().any(|s| {
        matches!(&s.kind, StepKind::Pods(p) if matches!(p.action, PodAction::LoseNode(_)) && p.alone)
    })
}

/// Asks every pod of a PodCliqueSet manifest to keep off the nodes that hold other pods of its
/// namespace (a preferred pod anti-affinity on the node name; the empty selector matches
/// every pod, and the namespace is the case's own). On a cluster whose few nodes every case
/// shares, a case that loses a node with one pod on it needs that pod alone there; a real
/// scheduler packs pods as it likes otherwise. Preferred, not required: it never keeps a pod
/// from running, and `alone` still checks the placement before the node goes. A pod
/// template that has an affinity of its own keeps it.
pub(super) fn spread_pods(manifest: &mut Value) {
    let Some(cliques) = manifest
        .pointer_mut("/spec/template/cliques")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for clique in cliques {
        let Some(pod) = clique
            .pointer_mut("/spec/podSpec")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        pod.entry("affinity").or_insert_with(|| {
            serde_json::json!({
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {},
                            "topologyKey": "kubernetes.io/hostname"
                        }
                    }]
                }
            })
        });
    }
}

/// Whether a case needs the cluster to itself: it loses a node, it pauses or crashes an
/// implementation that serves every case or holds back what that one sees (its watches span
/// every case's namespace), or it is large ([`LARGE_CASE_PODS`]).
pub fn needs_exclusive(
    case: &Case,
    catalog: &Catalog,
    implementation: &ImplementationSpec,
    pods: &PodDriver,
) -> bool {
    is_large(case, catalog)
        || (loses_node(case) && !pods.private_nodes())
        || (!implementation.per_case()
            && case
                .steps
                .iter()
                .any(|s| s.kind.definition().needs.whole_implementation))
}

/// Why a case cannot run here, if it cannot.
pub fn skip_reason(case: &Case, ctx: &RunContext) -> Option<String> {
    let fail_closed = ctx.implementation.fail_closed();
    let mut paused = false;
    for step in &case.steps {
        if paused
            && let Some(resource) = step.kind.written_resource()
            && fail_closed.iter().any(|r| r == resource)
        {
            return Some(format!(
                "the case writes {resource} while the implementation is paused, and the implementation's admission webhooks reject every such write then (failurePolicy: Fail)"
            ));
        }
        if let StepKind::Controller(c) = &step.kind
            && c.when.is_none()
            && c.action != ControllerAction::Wait
        {
            paused = c.action == ControllerAction::Pause;
        }
        let needs = step.kind.definition().needs;
        let keyword = step.kind.keyword();
        if needs.controllable && !ctx.implementation.controllable() {
            return Some(format!(
                "the case's `{keyword}` step pauses, resumes or crashes the implementation, which an external implementation does not allow"
            ));
        }
        if needs.api_proxy
            && (!ctx.api_proxy || (!ctx.implementation.per_case() && ctx.shared_proxy.is_none()))
        {
            return Some(format!(
                "the case's `{keyword}` step needs the implementation behind the harness's API proxy"
            ));
        }
        if let StepKind::Pods(p) = &step.kind
            && let Some(reason) = ctx.pods.unsupported(p.action)
        {
            return Some(reason);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn spreading_asks_every_clique_to_avoid_its_namespace_neighbours() {
        let mut manifest = json!({"spec": {"template": {"cliques": [
            {"name": "a", "spec": {"podSpec": {"containers": []}}},
            {"name": "b", "spec": {"podSpec": {"containers": [], "affinity": {"nodeAffinity": {}}}}},
        ]}}});
        spread_pods(&mut manifest);
        let term = manifest.pointer(
            "/spec/template/cliques/0/spec/podSpec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm",
        );
        assert_eq!(
            term,
            Some(&json!({"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}))
        );
        // A template's own affinity is kept as it is.
        assert_eq!(
            manifest.pointer("/spec/template/cliques/1/spec/podSpec/affinity"),
            Some(&json!({"nodeAffinity": {}}))
        );
    }

    #[test]
    fn only_the_alone_node_loss_cases_spread_their_pods() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
                .expect("the catalog loads");
        let spread: Vec<&str> = catalog
            .cases
            .iter()
            .filter(|c| loses_node_alone(c))
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            spread,
            [
                "succeeded-pod-lost-with-its-node-still-completes",
                "succeeded-pod-lost-with-its-node-while-paused-still-completes"
            ]
        );
    }

    #[test]
    fn the_256_pod_cases_are_large_through_their_patch() {
        let catalog =
            crate::catalog::load_catalog(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
                .expect("the catalog loads");
        for name in [
            "all-ranks-256-pods-restart",
            "leader-worker-256-pods-restart",
        ] {
            let case = catalog.case(name).expect("the case exists");
            assert!(is_large(case, &catalog), "{name} is not seen as large");
        }
        let small = catalog
            .case("all-ranks-completes")
            .expect("the case exists");
        assert!(!is_large(small, &catalog));
    }

    #[test]
    fn fixture_pods_multiply_clique_group_and_set_replicas() {
        let manifest = json!({"spec": {"replicas": 2, "template": {
            "cliques": [
                {"name": "leader", "spec": {"replicas": 1}},
                {"name": "worker", "spec": {"replicas": 16}},
                {"name": "router", "spec": {"replicas": 3}},
            ],
            "podCliqueScalingGroups": [{"name": "trainer", "cliqueNames": ["leader", "worker"], "replicas": 4}],
        }}});
        // Per set replica: (1 + 16) x 4 in the group, plus 3 standalone.
        assert_eq!(fixture_pods(&manifest), 2 * (17 * 4 + 3));
    }
}
