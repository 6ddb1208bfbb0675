//! Driving pods on a real cluster (kind, or any kubeconfig), where there is no simulated
//! kubelet: fixture containers block reading the FIFO `/tmp/exit-code` and exit with the code
//! written into it, so an exit is an exec (the API's `exec` subresource, from the harness's own
//! client: no `kubectl` process per pod); they serve `/tmp/www` on port 8080 and their
//! readiness probe asks for `/ready`, so a readiness flip (removing or restoring
//! `/tmp/www/ready`) is an exec too. Neither costs anything while nothing happens: no
//! polling loop, no exec probe; evictions, preemptions and deletes go through the
//! API as on the embedded target. On kind a node is lost by killing its container and starting
//! it again: the node lifecycle controller marks it NotReady and the taint-based eviction
//! deletes its pods, which the restarted kubelet then finishes.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{
    Api, AttachParams, DeleteParams, EvictParams, ListParams, Patch, PatchParams, Preconditions,
};
use kube::runtime::wait::await_condition;
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::host::docker;

/// The fixture container contract these files belong to is the catalog's (`lint` checks it).
pub use crate::catalog::{EXIT_CODE_FILE, READY_FILE};
/// How long a lost node may take to be noticed (NotReady) and to have its pods evicted, and a
/// restarted one to be Ready again.
pub const NODE_TRANSITION_TIMEOUT: Duration = Duration::from_secs(120);

/// How long an exec may take before the harness stops waiting for its answer (an exit's kubelet
/// report is awaited apart).
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a pod or node action of the harness's own helpers failed.
#[derive(Debug, thiserror::Error)]
pub enum RealPodsError {
    /// The exec subresource could not be opened.
    #[error("failed to exec in pod {namespace}/{pod}")]
    Exec {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The exec ended with a failure status.
    #[error(
        "failed to exec in pod {namespace}/{pod}: {message}{}",
        stderr_note(stderr)
    )]
    ExecFailed {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The status message.
        message: String,
        /// What the command wrote to standard error.
        stderr: String,
    },
    /// The exec did not answer in time.
    #[error("failed to hear back from an exec in pod {namespace}/{pod} within {EXEC_TIMEOUT:?}")]
    ExecTimeout {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
    },
    /// An API call failed.
    #[error("failed to {what}")]
    Api {
        /// What was asked.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A command could not be run.
    #[error("failed to start `{what}`")]
    Spawn {
        /// The command.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The task running a command ended without an answer.
    #[error("failed to wait for `{what}`")]
    Join {
        /// The command.
        what: String,
        /// The cause.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A wait on the API failed.
    #[error("failed to wait until {what}")]
    Wait {
        /// What was awaited.
        what: String,
        /// The cause.
        #[source]
        source: kube::runtime::wait::Error,
    },
    /// What was awaited did not happen in time.
    #[error("{what} within {NODE_TRANSITION_TIMEOUT:?}")]
    TimedOut {
        /// What did not happen (`node n was not marked NotReady …`).
        what: String,
    },
    /// The exit code could not be written and the kubelet reported no exit.
    #[error("failed to write the exit code")]
    ExitNotWritten(#[source] Box<RealPodsError>),
    /// The pod is on no node.
    #[error("pod {namespace}/{pod} is not bound to a node")]
    NotBound {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
    },
    /// The target's nodes cannot be stopped.
    #[error("this target's nodes cannot be stopped")]
    NoNodeControl,
    /// A command ran and failed.
    #[error("failed to run `{what}`: {stderr}")]
    Failed {
        /// The command.
        what: String,
        /// Its standard error.
        stderr: String,
    },
}

fn stderr_note(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", stderr.trim())
    }
}

/// Waits, up to [`NODE_TRANSITION_TIMEOUT`], until `condition` holds for the object `name` of
/// `api`. `awaited` names what is waited for (a failed watch), `late` what did not happen in
/// time.
async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    condition: impl kube::runtime::wait::Condition<K>,
    awaited: impl FnOnce() -> String,
    late: impl FnOnce() -> String,
) -> Result<(), RealPodsError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::time::timeout(
        NODE_TRANSITION_TIMEOUT,
        await_condition(api, name, condition),
    )
    .await
    .map_err(|_| RealPodsError::TimedOut { what: late() })?
    .map_err(|source| RealPodsError::Wait {
        what: awaited(),
        source,
    })?;
    Ok(())
}

/// How the harness can take a node away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeControl {
    /// It cannot (a cluster it did not make).
    Unavailable,
    /// Each node is a Docker container of the same name (kind).
    DockerContainers,
}

/// Pod actions on a real cluster.
#[derive(Clone)]
pub struct RealPods {
    client: Client,
    nodes: NodeControl,
}

impl std::fmt::Debug for RealPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealPods")
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

/// The shell script that makes a fixture container unready (`false`) or ready again.
pub fn readiness_script(ready: bool) -> String {
    if ready {
        format!("echo ok > {READY_FILE}")
    } else {
        format!("rm -f {READY_FILE}")
    }
}

async fn run(mut command: Command, what: &str) -> Result<(), RealPodsError> {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .map_err(|source| RealPodsError::Join {
            what: what.to_string(),
            source,
        })?
        .map_err(|source| RealPodsError::Spawn {
            what: what.to_string(),
            source,
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(RealPodsError::Failed {
            what: what.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

fn node_ready(node: &Node) -> Option<bool> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status == "True")
}

/// The shell script that makes a fixture container exit with `code`.
pub fn exit_script(code: i32) -> String {
    format!("until [ -p {EXIT_CODE_FILE} ]; do sleep 0.1; done; echo {code} > {EXIT_CODE_FILE}")
}

impl RealPods {
    /// Pod actions through `client`, and `nodes` for node loss.
    pub fn new(client: Client, nodes: NodeControl) -> Self {
        RealPods { client, nodes }
    }

    /// Runs `sh -c script` in the pod's (only) container through the `exec` subresource and
    /// returns once the command has ended: an error carries its failure status and stderr.
    async fn exec(&self, namespace: &str, pod: &str, script: String) -> Result<(), RealPodsError> {
        tokio::time::timeout(EXEC_TIMEOUT, self.exec_untimed(namespace, pod, script))
            .await
            .map_err(|_| RealPodsError::ExecTimeout {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
            })?
    }

    async fn exec_untimed(
        &self,
        namespace: &str,
        pod: &str,
        script: String,
    ) -> Result<(), RealPodsError> {
        let params = AttachParams::default().stdout(false).stderr(true);
        let mut process = self
            .api(namespace)
            .exec(pod, ["sh".to_string(), "-c".to_string(), script], &params)
            .await
            .map_err(|source| RealPodsError::Exec {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                source,
            })?;
        let status = process.take_status();
        let mut stderr = String::new();
        if let Some(mut reader) = process.stderr() {
            let _ = reader.read_to_string(&mut stderr).await;
        }
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        let _ = process.join().await;
        match status {
            Some(s) if s.status.as_deref() != Some("Success") => Err(RealPodsError::ExecFailed {
                namespace: namespace.to_string(),
                pod: pod.to_string(),
                message: s.message.unwrap_or_else(|| "failed".into()),
                stderr,
            }),
            _ => Ok(()),
        }
    }

    /// Whether the harness can take this target's nodes away.
    pub fn can_lose_nodes(&self) -> bool {
        self.nodes != NodeControl::Unavailable
    }

    /// Makes the pod's container exit with `code` (by exec), and waits until the
    /// kubelet has reported it: a terminal phase, or a restart of the container. A simulated
    /// kubelet reports an exit at once; waiting here gives a case the same order of events on a
    /// real one (a step after an exit sees its outcome).
    pub async fn exit(&self, namespace: &str, pod: &str, code: i32) -> Result<(), RealPodsError> {
        let before = self
            .api(namespace)
            .get(pod)
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("get pod {namespace}/{pod}"),
                source,
            })?;
        let restarts = |p: &Pod| -> i32 {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0)
        };
        let restarts_before = restarts(&before);
        let uid = before.metadata.uid.clone();
        // The container ends as soon as the code is written, taking the exec's shell with it:
        // an exec that "fails" (137) has often done its job. The kubelet's report decides.
        let written = self.exec(namespace, pod, exit_script(code)).await;
        let reported = move |p: Option<&Pod>| {
            p.is_none_or(|p| {
                p.metadata.uid != uid
                    || matches!(
                        p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
                    || restarts(p) > restarts_before
            })
        };
        let waited = wait_for(
            self.api(namespace),
            pod,
            reported,
            || format!("pod {namespace}/{pod} exited"),
            || format!("the kubelet did not report the exit of pod {namespace}/{pod}"),
        )
        .await;
        match (waited, written) {
            (Err(RealPodsError::TimedOut { .. }), Err(e)) => {
                Err(RealPodsError::ExitNotWritten(Box::new(e)))
            }
            (waited, _) => waited,
        }
    }

    /// The UIDs of the pods bound to `node` (outside `kube-system`).
    pub async fn pods_on(&self, node: &str) -> Result<Vec<String>, RealPodsError> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let on_node = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("list the pods on node {node}"),
                source,
            })?;
        Ok(on_node
            .items
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() != Some("kube-system"))
            .filter_map(|p| p.metadata.uid.clone())
            .collect())
    }

    /// Makes the pod unready (`false`) or ready again, through its readiness probe, and waits
    /// until its `Ready` condition says so.
    pub async fn set_ready(
        &self,
        namespace: &str,
        pod: &str,
        ready: bool,
    ) -> Result<(), RealPodsError> {
        self.exec(namespace, pod, readiness_script(ready)).await?;
        let want = if ready { "True" } else { "False" };
        let flipped = move |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == want))
        };
        wait_for(
            self.api(namespace),
            pod,
            flipped,
            || format!("pod {namespace}/{pod} is Ready={want}"),
            || format!("the Ready condition of pod {namespace}/{pod} did not turn {want} (does the container have the readiness probe on {READY_FILE}?)"),
        )
        .await
    }

    /// The node the pod is bound to.
    pub async fn node_of(&self, namespace: &str, pod: &str) -> Result<String, RealPodsError> {
        let found = self
            .api(namespace)
            .get(pod)
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("get pod {namespace}/{pod}"),
                source,
            })?;
        found
            .spec
            .and_then(|s| s.node_name)
            .ok_or_else(|| RealPodsError::NotBound {
                namespace: namespace.to_owned(),
                pod: pod.to_owned(),
            })
    }

    /// Kills the node's container, waits until the control plane has noticed (NotReady) and
    /// the taint-based eviction has marked its pods for deletion, then starts it again so its
    /// kubelet finishes them. Returns the UIDs of the pods that were on it.
    pub async fn lose_node(&self, node: &str) -> Result<Vec<String>, RealPodsError> {
        if self.nodes != NodeControl::DockerContainers {
            return Err(RealPodsError::NoNodeControl);
        }
        let pods: Api<Pod> = Api::all(self.client.clone());
        let on_node = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("list the pods on node {node}"),
                source,
            })?;
        let victims: Vec<(String, String, String)> = on_node
            .items
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() != Some("kube-system"))
            .map(|p| {
                (
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default(),
                    p.metadata.uid.clone().unwrap_or_default(),
                )
            })
            .collect();
        let mut kill = docker::command();
        kill.args(["kill", node]);
        run(kill, &format!("docker kill {node}")).await?;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let not_ready = |n: Option<&Node>| n.and_then(node_ready) == Some(false);
        wait_for(
            nodes,
            node,
            not_ready,
            || format!("node {node} is NotReady"),
            || format!("node {node} was not marked NotReady after its container was killed"),
        )
        .await?;
        for (namespace, name, uid) in &victims {
            let uid = uid.clone();
            let marked = move |p: Option<&Pod>| {
                p.is_none_or(|p| {
                    p.metadata.uid.as_deref() != Some(uid.as_str())
                        || p.metadata.deletion_timestamp.is_some()
                })
            };
            wait_for(
                self.api(namespace),
                name,
                marked,
                || format!("pod {namespace}/{name} is evicted"),
                || format!("pod {namespace}/{name} on the lost node {node} was not evicted"),
            )
            .await?;
        }
        let mut start = docker::command();
        start.args(["start", node]);
        run(start, &format!("docker start {node}")).await?;
        // A restarted container has a new network namespace: the masquerade rule that lets
        // its pods reach this machine (`kind::masquerade_script`) goes back in.
        let mut masquerade = docker::command();
        masquerade.args([
            "exec",
            node,
            "sh",
            "-c",
            "[ ! -f /etc/grove-conformance/masquerade ] || sh /etc/grove-conformance/masquerade",
        ]);
        run(masquerade, &format!("docker exec {node} (masquerade)")).await?;
        Ok(victims.into_iter().map(|(_, _, uid)| uid).collect())
    }

    /// Waits until a node lost with [`RealPods::lose_node`] is Ready again.
    pub async fn recover_node(&self, node: &str) -> Result<(), RealPodsError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let ready = |n: Option<&Node>| n.and_then(node_ready) == Some(true);
        wait_for(
            nodes,
            node,
            ready,
            || format!("node {node} is Ready"),
            || format!("node {node} was not Ready again after its container restarted"),
        )
        .await
    }

    /// The client the pods are driven through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Evicts through the Eviction API; `at_once`: with a grace period of 0, so the pod is
    /// gone before any kubelet writes a terminal phase.
    pub async fn evict(
        &self,
        namespace: &str,
        pod: &str,
        at_once: bool,
    ) -> Result<(), RealPodsError> {
        let params = EvictParams {
            delete_options: at_once.then(|| DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            }),
            ..EvictParams::default()
        };
        self.api(namespace)
            .evict(pod, &params)
            .await
            .map(|_| ())
            .map_err(|source| RealPodsError::Api {
                what: format!("evict pod {namespace}/{pod}"),
                source,
            })
    }

    async fn uid(&self, namespace: &str, pod: &str) -> Result<String, RealPodsError> {
        let found = self
            .api(namespace)
            .get(pod)
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("get pod {namespace}/{pod}"),
                source,
            })?;
        Ok(found.metadata.uid.unwrap_or_default())
    }

    /// `DisruptionTarget` (`PreemptionByScheduler`), then a graceful delete (`at_once`: with a
    /// grace period of 0).
    pub async fn preempt(
        &self,
        namespace: &str,
        pod: &str,
        at_once: bool,
    ) -> Result<(), RealPodsError> {
        let uid = self.uid(namespace, pod).await?;
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": "preempted by grove-conformance",
        }]}});
        self.api(namespace)
            .patch_status(pod, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|source| RealPodsError::Api {
                what: format!("mark pod {namespace}/{pod} as preempted"),
                source,
            })?;
        self.delete_uid(namespace, pod, &uid, at_once).await
    }

    /// A delete, graceful or forced (grace 0).
    pub async fn delete(
        &self,
        namespace: &str,
        pod: &str,
        force: bool,
    ) -> Result<(), RealPodsError> {
        let uid = self.uid(namespace, pod).await?;
        self.delete_uid(namespace, pod, &uid, force).await
    }

    /// A delete with a UID precondition.
    async fn delete_uid(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        force: bool,
    ) -> Result<(), RealPodsError> {
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
            .map_err(|source| RealPodsError::Api {
                what: format!("delete pod {namespace}/{pod}"),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_exec_names_the_pod_and_its_stderr_only_when_there_is_some() {
        let failed = |stderr: &str| RealPodsError::ExecFailed {
            namespace: "ns".into(),
            pod: "p".into(),
            message: "command terminated with non-zero exit code".into(),
            stderr: stderr.into(),
        };
        assert_eq!(
            failed(" sh: no such file \n").to_string(),
            "failed to exec in pod ns/p: command terminated with non-zero exit code (sh: no such file)"
        );
        assert_eq!(
            failed("").to_string(),
            "failed to exec in pod ns/p: command terminated with non-zero exit code"
        );
    }

    #[test]
    fn an_exit_writes_the_code_where_fixture_containers_wait_for_it() {
        assert_eq!(
            exit_script(3),
            "until [ -p /tmp/exit-code ]; do sleep 0.1; done; echo 3 > /tmp/exit-code"
        );
    }

    #[test]
    fn a_readiness_flip_creates_or_removes_the_file_the_probe_tests() {
        assert_eq!(readiness_script(false), "rm -f /tmp/www/ready");
        assert_eq!(readiness_script(true), "echo ok > /tmp/www/ready");
    }

    #[test]
    fn every_fixture_container_waits_for_the_exit_code_file_and_probes_readiness() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
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
                    let probe = container
                        .pointer("/readinessProbe/httpGet")
                        .cloned()
                        .unwrap_or_default();
                    assert_eq!(
                        container["imagePullPolicy"],
                        "IfNotPresent",
                        "{}: container {} of clique {} would pull its image, which an offline cluster cannot",
                        path.display(),
                        container["name"],
                        clique["name"]
                    );
                    assert!(
                        probe["path"] == "/ready"
                            && probe["port"] == 8080
                            && command.contains(READY_FILE),
                        "{}: container {} of clique {} has no readiness probe on {READY_FILE}, so its readiness cannot be flipped on a real cluster",
                        path.display(),
                        container["name"],
                        clique["name"]
                    );
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
