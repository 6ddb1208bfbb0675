//! Driving pods on a real cluster (kind, or any kubeconfig), where there is no simulated
//! kubelet: fixture containers wait for `/tmp/exit-code` and exit with the code written there,
//! so an exit is a `kubectl exec`; evictions, preemptions and deletes go through the API as
//! on the embedded target. Readiness flips and node loss need the simulated kubelet.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use serde_json::json;

/// The file a fixture container waits for; its content is the exit code.
pub const EXIT_CODE_FILE: &str = "/tmp/exit-code";

/// Pod actions on a real cluster.
#[derive(Clone)]
pub struct RealPods {
    client: Client,
    kubeconfig: PathBuf,
}

impl std::fmt::Debug for RealPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealPods")
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

/// The `kubectl exec` that makes a fixture container exit with `code`.
pub fn exit_command(kubeconfig: &Path, namespace: &str, pod: &str, code: i32) -> Command {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", namespace, "exec", pod, "--", "sh", "-c"])
        .arg(format!("echo {code} > {EXIT_CODE_FILE}"));
    command
}

impl RealPods {
    /// Pod actions through `client`, and `kubectl` with `kubeconfig` for exits.
    pub fn new(client: Client, kubeconfig: PathBuf) -> Self {
        RealPods { client, kubeconfig }
    }

    /// Makes the pod's container exit with `code` (via `kubectl exec`).
    pub async fn exit(&self, namespace: &str, pod: &str, code: i32) -> Result<(), String> {
        let mut command = exit_command(&self.kubeconfig, namespace, pod, code);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("failed to run kubectl: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
        }
    }

    fn api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Evicts through the Eviction API.
    pub async fn evict(&self, namespace: &str, pod: &str) -> Result<(), String> {
        self.api(namespace)
            .evict(pod, &EvictParams::default())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// `DisruptionTarget` (`PreemptionByScheduler`), then a graceful delete.
    pub async fn preempt(&self, namespace: &str, pod: &str, uid: &str) -> Result<(), String> {
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": "preempted by grove-conformance",
        }]}});
        self.api(namespace)
            .patch_status(pod, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|e| e.to_string())?;
        self.delete(namespace, pod, uid, false).await
    }

    /// A delete, graceful or forced (grace 0), with a UID precondition.
    pub async fn delete(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        force: bool,
    ) -> Result<(), String> {
        let params = DeleteParams {
            grace_period_seconds: force.then_some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.api(namespace)
            .delete(pod, &params)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_writes_the_code_where_fixture_containers_wait_for_it() {
        let command = exit_command(Path::new("/k/config"), "ns1", "job-0-worker-abcde", 3);
        assert_eq!(command.get_program(), "kubectl");
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--kubeconfig",
                "/k/config",
                "--namespace",
                "ns1",
                "exec",
                "job-0-worker-abcde",
                "--",
                "sh",
                "-c",
                "echo 3 > /tmp/exit-code"
            ]
        );
    }

    #[test]
    fn every_fixture_container_waits_for_the_exit_code_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let fixture: serde_json::Value = serde_yaml::from_str(&text).unwrap();
            let cliques = fixture
                .pointer("/spec/template/cliques")
                .and_then(|c| c.as_array())
                .unwrap();
            for clique in cliques {
                for container in clique
                    .pointer("/spec/podSpec/containers")
                    .and_then(|c| c.as_array())
                    .unwrap()
                {
                    let command = container
                        .get("command")
                        .map(|c| c.to_string())
                        .unwrap_or_default();
                    assert!(
                        command.contains(EXIT_CODE_FILE),
                        "{}: container {} of clique {} does not wait for {EXIT_CODE_FILE}, so it cannot be driven on a real cluster",
                        path.display(),
                        container["name"],
                        clique["name"]
                    );
                }
            }
        }
    }
}
