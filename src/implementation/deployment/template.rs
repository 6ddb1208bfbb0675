//! The pod template of a deployed implementation pointed at the proxy, and back: the
//! volume, mount and `KUBECONFIG` the harness adds, the container it adds them to, and what of
//! a Deployment must be left as the harness found it. Pure functions of the objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::ResourceExt;
use serde_json::json;

use super::{DeploymentError, DeploymentRef};
use crate::proxy::ApiProxy;

/// The annotation holding the original pod template while the harness has changed it.
pub const MARKER: &str = "conformance.grove.io/original-template";

/// The pod-template annotation naming the proxy the pods go through.
pub const PROXY_ANNOTATION: &str = "conformance.grove.io/api-proxy";

/// The volume (and ConfigMap name prefix) the harness adds.
const VOLUME: &str = "grove-conformance-api-proxy";

/// Where that volume is mounted in the operator's container.
const MOUNT: &str = "/var/run/grove-conformance";

/// The kubeconfig the operator's pods get: the proxy, its CA, their own token.
pub(super) fn pod_kubeconfig(proxy: &ApiProxy, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: grove-conformance-api-proxy
  cluster:
    server: https://{addr}
    certificate-authority: {MOUNT}/ca.crt
users:
- name: serviceaccount
  user:
    tokenFile: {MOUNT}/token
contexts:
- name: grove-conformance-api-proxy
  context:
    cluster: grove-conformance-api-proxy
    user: serviceaccount
    namespace: {namespace}
current-context: grove-conformance-api-proxy
",
        addr = proxy.addr()
    )
}

/// The ConfigMap holding that kubeconfig.
pub(super) fn configmap_name(target: &DeploymentRef) -> String {
    let mut name = format!("{VOLUME}-{}", target.name);
    name.truncate(253);
    name
}

/// `template` pointed at the proxy: the volume, its mount and `KUBECONFIG` in `container`,
/// and the annotation that rolls the pods.
pub fn pointed_at_proxy(
    template: &PodTemplateSpec,
    container: &str,
    configmap: &str,
    proxy: &str,
) -> PodTemplateSpec {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    value["metadata"]["annotations"][PROXY_ANNOTATION] = json!(proxy);
    let spec = &mut value["spec"];
    let volume = json!({
        "name": VOLUME,
        "projected": {"sources": [
            {"configMap": {"name": configmap, "items": [
                {"key": "kubeconfig", "path": "kubeconfig"},
                {"key": "ca.crt", "path": "ca.crt"},
            ]}},
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        ]},
    });
    push(&mut spec["volumes"], volume);
    if let Some(containers) = spec["containers"].as_array_mut() {
        for c in containers.iter_mut().filter(|c| c["name"] == container) {
            push(
                &mut c["volumeMounts"],
                json!({"name": VOLUME, "mountPath": MOUNT, "readOnly": true}),
            );
            if let Some(env) = c["env"].as_array_mut() {
                env.retain(|e| e["name"] != "KUBECONFIG");
            }
            push(
                &mut c["env"],
                json!({"name": "KUBECONFIG", "value": format!("{MOUNT}/kubeconfig")}),
            );
        }
    }
    serde_json::from_value(value).unwrap_or_else(|_| template.clone())
}

/// Appends `item` to the array at `slot` (made when absent).
fn push(slot: &mut serde_json::Value, item: serde_json::Value) {
    if !slot.is_array() {
        *slot = json!([]);
    }
    if let Some(items) = slot.as_array_mut() {
        items.push(item);
    }
}

/// The container to point at the proxy.
pub(super) fn choose_container(
    target: &DeploymentRef,
    template: &PodTemplateSpec,
) -> Result<String, DeploymentError> {
    let names: Vec<String> = template
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let error = |message: String| DeploymentError::Container {
        deployment: target.to_string(),
        message,
    };
    match &target.container {
        Some(c) if names.contains(c) => Ok(c.clone()),
        Some(c) => Err(error(format!(
            "it has no container `{c}` (it has: {})",
            names.join(", ")
        ))),
        None if names.len() == 1 => Ok(names[0].clone()),
        None => Err(error(format!(
            "it has {} containers ({}): say which is the operator with --implementation-container",
            names.len(),
            names.join(", ")
        ))),
    }
}

/// What of a Deployment the harness must leave as it found it: its spec, labels and
/// annotations but `deployment.kubernetes.io/revision` (the Deployment controller's count of
/// rollouts, which the harness's rollout and restore advance).
pub fn restorable_view(d: &Deployment) -> serde_json::Value {
    let mut annotations: BTreeMap<String, String> = d.annotations().clone();
    annotations.remove("deployment.kubernetes.io/revision");
    json!({
        "labels": d.labels(),
        "annotations": annotations,
        "spec": d.spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "op"}},
            "spec": {"containers": [
                {"name": "operator", "image": "op:1", "env": [{"name": "KUBECONFIG", "value": "/old"}, {"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "side:1"},
            ]},
        }))
        .unwrap()
    }

    #[test]
    fn the_template_gets_the_kubeconfig_in_the_chosen_container_only() {
        let t = pointed_at_proxy(&template(), "operator", "cm", "10.0.0.1:4443");
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v["metadata"]["annotations"][PROXY_ANNOTATION],
            "10.0.0.1:4443"
        );
        assert_eq!(v["spec"]["volumes"][0]["name"], VOLUME);
        let sources = &v["spec"]["volumes"][0]["projected"]["sources"];
        assert_eq!(sources[0]["configMap"]["name"], "cm");
        assert_eq!(sources[1]["serviceAccountToken"]["path"], "token");
        let operator = &v["spec"]["containers"][0];
        assert_eq!(operator["volumeMounts"][0]["mountPath"], MOUNT);
        let env: Vec<(String, String)> = operator["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            env,
            [
                ("A".to_string(), "1".to_string()),
                ("KUBECONFIG".to_string(), format!("{MOUNT}/kubeconfig")),
            ]
        );
        let sidecar = &v["spec"]["containers"][1];
        assert!(sidecar.get("volumeMounts").is_none());
        assert!(sidecar.get("env").is_none());
    }

    #[test]
    fn the_operator_container_must_be_named_when_there_are_several() {
        let target = DeploymentRef::parse("ns/op", None).unwrap();
        let e = choose_container(&target, &template())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--implementation-container"), "{e}");
        assert!(e.contains("operator, sidecar"), "{e}");
        let named = DeploymentRef::parse("ns/op", Some("operator".into())).unwrap();
        assert_eq!(choose_container(&named, &template()).unwrap(), "operator");
        let wrong = DeploymentRef::parse("ns/op", Some("nope".into())).unwrap();
        let e = choose_container(&wrong, &template())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no container `nope`"), "{e}");
    }
}
