//! The scheduler: binds each pod that has no node to the least-loaded node it fits on (room,
//! node selector, taints), keeps the nodes' room accounted, and retries the pods that found
//! none when room is freed or a node is added or recovered.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::lifecycle::on_pod;
use super::nodes::Taint;
use super::{Inner, NodeState, Stage, State};

/// The CPU a pod requests, in millicores (the sum over its containers).
pub(super) fn cpu_request_millis(pod: &Pod) -> u64 {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
                .map(|q| parse_cpu_millis(&q.0))
                .sum()
        })
        .unwrap_or(0)
}

/// Parses a CPU quantity (`2`, `500m`, `0.5`) into millicores.
pub fn parse_cpu_millis(quantity: &str) -> u64 {
    if let Some(m) = quantity.strip_suffix('m') {
        return m.parse().unwrap_or(0);
    }
    quantity
        .parse::<f64>()
        .map(|cores| (cores * 1000.0).round() as u64)
        .unwrap_or(0)
}

/// What of a pod the scheduler filters on.
#[derive(Debug, Clone, Default)]
struct Fit {
    namespace: String,
    cpu: u64,
    selector: BTreeMap<String, String>,
    tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
}

impl Fit {
    fn of(pod: &Pod) -> Fit {
        let spec = pod.spec.as_ref();
        Fit {
            namespace: pod.namespace().unwrap_or_default(),
            cpu: cpu_request_millis(pod),
            selector: spec
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
        }
    }

    fn tolerates(&self, taint: &Taint) -> bool {
        self.tolerations.iter().any(|t| {
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == taint.effect);
            let exists = t.operator.as_deref() == Some("Exists");
            let key = t.key.as_deref().unwrap_or("");
            let key_ok = (key.is_empty() && exists) || key == taint.key;
            let value_ok = exists || t.value.as_deref().unwrap_or("") == taint.value;
            effect_ok && key_ok && value_ok
        })
    }

    /// `reserved`: whether the pod's namespace has nodes of its own, which then are the only
    /// ones it may use; no other namespace's pod goes to a private node.
    fn fits(&self, node: &NodeState, reserved: bool, max_pods: usize, cpu_capacity: u64) -> bool {
        let allowed = if reserved {
            node.reserved_for.as_deref() == Some(self.namespace.as_str())
        } else {
            !node.private
        };
        allowed
            && !node.lost
            && node.pods.len() < max_pods
            && node.cpu_used + self.cpu <= cpu_capacity
            && self
                .selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
            && node
                .taints
                .iter()
                .filter(|t| t.effect != "PreferNoSchedule")
                .all(|t| self.tolerates(t))
    }
}

/// Picks the least-loaded node the pod fits on (room, node selector, taints).
fn pick_node(state: &State, max_pods: usize, cpu_capacity: u64, fit: &Fit) -> Option<usize> {
    let reserved = state
        .nodes
        .iter()
        .any(|n| n.reserved_for.as_deref() == Some(fit.namespace.as_str()));
    state
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| fit.fits(n, reserved, max_pods, cpu_capacity))
        .min_by_key(|(_, n)| (n.cpu_used, n.pods.len()))
        .map(|(i, _)| i)
}

/// Schedules a pod that has no node: binds it to the least-loaded node it fits on or, when none
/// has room, keeps it among the pods waiting for room. Gated pods are left alone, and so are
/// pods the fleet has bound or is binding: a view of one without a node is older than the
/// binding (a read made before it landed), and binding it again would fail and start it twice.
pub(super) fn schedule(
    inner: &Arc<Inner>,
    state: &mut State,
    pod: Pod,
    uid: String,
    namespace: String,
    name: String,
    stage: Option<Stage>,
) {
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    if gated || stage.is_some() {
        return;
    }
    let fit = Fit::of(&pod);
    let cpu = fit.cpu;
    let Some(index) = pick_node(
        state,
        inner.options.max_pods,
        inner.options.cpu_millis,
        &fit,
    ) else {
        state.unscheduled.insert(uid, (namespace, name));
        return;
    };
    state.unscheduled.remove(&uid);
    let node = &mut state.nodes[index];
    node.pods.insert(uid.clone());
    node.cpu_used += cpu;
    let node = node.name.clone();
    if let Some(r) = state.pods.get_mut(&uid) {
        r.stage = Some(Stage::Binding);
        r.node = Some(node.clone());
        r.cpu_millis = cpu;
    }
    let inner = inner.clone();
    tokio::spawn(async move { bind(inner, pod, node).await });
}

async fn bind(inner: Arc<Inner>, pod: Pod, node: String) {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: pod.uid(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.clone()),
            api_version: Some("v1".into()),
            ..ObjectReference::default()
        },
    };
    let api: Api<Pod> = Api::namespaced(inner.client.clone(), &namespace);
    let result: Result<serde_json::Value, kube::Error> = api
        .create_subresource("binding", &name, &PostParams::default(), &binding)
        .await;
    if let Err(err) = result {
        tracing::debug!(pod = %name, error = %err, "binding failed");
        let uid = pod.uid().unwrap_or_default();
        let mut state = inner.lock();
        release(&inner, &mut state, &uid);
        if let Some(r) = state.pods.get_mut(&uid) {
            r.stage = None;
            r.node = None;
        }
    }
}

/// Frees a pod's node resources and retries pods waiting for room.
pub(super) fn release(inner: &Arc<Inner>, state: &mut State, uid: &str) {
    if let Some(record) = state.pods.get_mut(uid)
        && let Some(node) = record.node.clone()
        && let Some(n) = state.nodes.iter_mut().find(|n| n.name == node)
        && n.pods.remove(uid)
    {
        n.cpu_used = n.cpu_used.saturating_sub(record.cpu_millis);
        retry_unscheduled(inner, state);
    }
}

/// Whether the pod with `uid` still waits for room (the lock is released on return).
fn still_waiting(inner: &Inner, uid: &str) -> bool {
    inner.lock().unscheduled.contains_key(uid)
}

/// Looks again at pods that found no node (room was freed, or a node was added or recovered).
/// A pod read back is acted on only while it still waits: one deleted or placed meanwhile is
/// known better from the watch than from a read made before that.
pub(super) fn retry_unscheduled(inner: &Arc<Inner>, state: &State) {
    for (uid, (ns, name)) in state.unscheduled.clone() {
        let inner = inner.clone();
        tokio::spawn(async move {
            if let Ok(pod) = Api::<Pod>::namespaced(inner.client.clone(), &ns)
                .get(&name)
                .await
                && pod.uid().as_deref() == Some(uid.as_str())
                && still_waiting(&inner, &uid)
            {
                on_pod(&inner, pod);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::super::nodes::default_labels;
    use super::*;

    #[test]
    fn cpu_quantities_parse_to_millicores() {
        assert_eq!(parse_cpu_millis("500m"), 500);
        assert_eq!(parse_cpu_millis("2"), 2000);
        assert_eq!(parse_cpu_millis("0.25"), 250);
        assert_eq!(parse_cpu_millis("bogus"), 0);
    }

    #[test]
    fn the_least_loaded_live_node_with_room_is_picked() {
        let node = |name: &str, cpu_used: u64, pods: usize, lost: bool| NodeState {
            name: name.into(),
            ip: "10.0.1.1".into(),
            lost,
            labels: default_labels(name),
            taints: Vec::new(),
            pods: (0..pods).map(|i| format!("{name}-{i}")).collect(),
            cpu_used,
            next_ip: 2,
            private: false,
            reserved_for: None,
        };
        let state = State {
            nodes: vec![
                node("a", 3000, 3, false),
                node("b", 1000, 1, true),
                node("c", 2000, 2, false),
                node("d", 500, 10, false),
            ],
            ..State::default()
        };
        let cpu = |cpu: u64| Fit {
            cpu,
            ..Fit::default()
        };
        // b is lost; d is full (10 pods); c has the least CPU used among the rest.
        assert_eq!(pick_node(&state, 10, 4000, &cpu(1000)), Some(2));
        // Nothing fits 3500m next to 2000m used, nor 3000m.
        assert_eq!(pick_node(&state, 10, 4000, &cpu(3500)), None);
    }

    #[test]
    fn a_namespace_with_reserved_nodes_uses_only_those_and_nobody_else_does() {
        let node =
            |name: &str, cpu_used: u64, private: bool, reserved_for: Option<&str>| NodeState {
                name: name.into(),
                ip: "10.0.1.1".into(),
                lost: false,
                labels: default_labels(name),
                taints: Vec::new(),
                pods: HashSet::new(),
                cpu_used,
                next_ip: 2,
                private,
                reserved_for: reserved_for.map(str::to_string),
            };
        let state = State {
            nodes: vec![
                node("shared", 0, false, None),
                node("mine", 3000, true, Some("case-a")),
                node("theirs", 0, true, Some("case-b")),
                node("idle", 0, true, None),
            ],
            ..State::default()
        };
        let of = |namespace: &str| Fit {
            namespace: namespace.into(),
            ..Fit::default()
        };
        // The reserving namespace goes to its own node, though the shared one is emptier.
        assert_eq!(pick_node(&state, 10, 4000, &of("case-a")), Some(1));
        // Everyone else goes to the shared node, never to a private one, idle or not.
        assert_eq!(pick_node(&state, 10, 4000, &of("case-c")), Some(0));
        // A full reservation does not spill over to shared nodes.
        assert_eq!(
            pick_node(
                &state,
                10,
                4000,
                &Fit {
                    cpu: 2000,
                    ..of("case-a")
                }
            ),
            None
        );
    }

    #[test]
    fn node_selectors_and_taints_are_honoured() {
        let mut dedicated = NodeState {
            name: "dedicated".into(),
            ip: "10.0.1.9".into(),
            lost: false,
            labels: default_labels("dedicated"),
            taints: vec![Taint {
                key: "test/dedicated".into(),
                value: "yes".into(),
                effect: "NoSchedule".into(),
            }],
            pods: HashSet::new(),
            cpu_used: 0,
            next_ip: 2,
            private: false,
            reserved_for: None,
        };
        let plain = Fit::default();
        assert!(
            !plain.fits(&dedicated, false, 10, 1000),
            "an untolerated taint was ignored"
        );
        let tolerant: Pod = serde_json::from_value(json!({"spec": {
            "containers": [],
            "nodeSelector": {"kubernetes.io/hostname": "dedicated"},
            "tolerations": [{"key": "test/dedicated", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
        }}))
        .unwrap();
        assert!(Fit::of(&tolerant).fits(&dedicated, false, 10, 1000));
        dedicated
            .labels
            .insert("kubernetes.io/hostname".into(), "other".into());
        assert!(
            !Fit::of(&tolerant).fits(&dedicated, false, 10, 1000),
            "the node selector was ignored"
        );
        let exists: Pod = serde_json::from_value(json!({"spec": {
            "containers": [], "tolerations": [{"operator": "Exists"}]
        }}))
        .unwrap();
        assert!(Fit::of(&exists).fits(&dedicated, false, 10, 1000));
    }
}
