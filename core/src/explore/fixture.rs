//! The fixture of a scenario: its shape written as a PodCliqueSet manifest, by the
//! catalog's one YAML writer.

use serde_json::{Value, json};

use super::generate::Scenario;
use crate::catalog::write_yaml;
use crate::model::Shape;

/// The fixture container's command: the fixture container contract of the case language.
const COMMAND: &str = "mkfifo /tmp/exit-code && mkdir -p /tmp/www && echo ok > /tmp/www/ready && httpd -p 8080 -h /tmp/www && read code < /tmp/exit-code; exit $code";

/// The fixture (a PodCliqueSet manifest) of `scenario`, named like the case.
pub fn fixture(scenario: &Scenario) -> String {
    let comment = format!(
        "The job of `grove-conformance explore --seed {} --runs {}` (scenario {}).",
        scenario.seed,
        scenario.index + 1,
        scenario.index
    );
    write_yaml(&[comment], &manifest(&scenario.shape))
}

/// The PodCliqueSet of `s`.
fn manifest(s: &Shape) -> Value {
    let cliques: Vec<Value> = s
        .cliques
        .iter()
        .map(|c| {
            let mut pod_spec = json!({
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "main",
                    "image": "busybox",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", COMMAND],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1},
                }],
            });
            if let Some(r) = c.restart_policy {
                pod_spec["restartPolicy"] = json!(r.as_str());
            }
            let mut spec = json!({"roleName": c.name, "replicas": c.pods, "podSpec": pod_spec});
            if let Some(p) = &c.completion {
                // On a clique only `failure` is valid (V1); a breach may put `success` there.
                spec["policy"] = json!({"completion": completion(p)});
            }
            if c.autoscaling {
                spec["autoScalingConfig"] = json!({"minReplicas": 1, "maxReplicas": 4});
            }
            json!({"name": c.name, "spec": spec})
        })
        .collect();
    // A regular clique's MinAvailableBreached gang termination (R5) is outside what is
    // generated: its terminationDelay never runs out within a scenario.
    let mut template = json!({"terminationDelay": "1h", "cliques": cliques});
    if !s.groups.is_empty() {
        let groups: Vec<Value> = s
            .groups
            .iter()
            .map(|g| {
                let mut v = json!({
                    "name": g.name,
                    "cliqueNames": g.members,
                    "replicas": g.replicas,
                    "minAvailable": 1,
                });
                if let Some(c) = &g.completion {
                    v["policy"] = json!({"completion": completion(c)});
                }
                if g.scale_config {
                    v["scaleConfig"] = json!({"minReplicas": 1, "maxReplicas": 3});
                }
                v
            })
            .collect();
        template["podCliqueScalingGroups"] = Value::Array(groups);
    }
    let mut spec = json!({"replicas": s.replicas, "template": template});
    if let Some(c) = &s.completion {
        spec["policy"] = json!({"completion": completion(c)});
    }
    json!({
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {"name": s.name},
        "spec": spec,
    })
}

fn completion(c: &crate::model::Completion) -> Value {
    let mut v = json!({});
    if let Some(t) = &c.target_names {
        v["success"] = json!({"targetNames": t});
    }
    if let Some(m) = c.max_restarts {
        v["failure"] = json!({"maxRestarts": m});
    }
    v
}
