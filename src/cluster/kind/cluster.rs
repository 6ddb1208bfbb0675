//! The kind target: a cluster created from `kind-config/kind.yaml` with the locally built node
//! image ([`crate::cluster::kind::assets`]), pod networking set up by the harness (kind's own
//! CNI image is not available offline: each node gets a bridge configuration for its pod CIDR
//! and routes to the others'), and deleted with the run unless kept.
//!
//! A cluster of that name left behind by a harness that was killed is deleted before a new one
//! is created (its node containers carry kind's cluster label).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::cluster::TargetError;
use crate::cluster::kind::assets::KindAssets;
use crate::host::docker;

/// The name of the kind cluster a run creates.
pub const KIND_CLUSTER: &str = "grove-conformance";
/// How long nodes may take to get their pod CIDRs and then to turn Ready.
const NODES_TIMEOUT: Duration = Duration::from_secs(180);

/// The `kind create cluster` command for `config` with `image`, writing its kubeconfig to
/// `kubeconfig`. It does not wait for Ready nodes: they become Ready once the harness has
/// written their CNI configuration.
pub fn create_command(
    kind: &Path,
    name: &str,
    config: &Path,
    image: &str,
    kubeconfig: &Path,
) -> Command {
    let mut command = Command::new(kind);
    command
        .args(["create", "cluster", "--name", name, "--config"])
        .arg(config)
        .args(["--image", image, "--kubeconfig"])
        .arg(kubeconfig);
    command
}

/// The `kind delete cluster` command.
pub fn delete_command(kind: &Path, name: &str) -> Command {
    let mut command = Command::new(kind);
    command.args(["delete", "cluster", "--name", name]);
    command
}

/// Runs a command, turning a missing binary or a failure into a clear error.
pub fn run(mut command: Command) -> Result<String, TargetError> {
    let line = format!(
        "{} {}",
        command.get_program().to_string_lossy(),
        command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let output = command.output().map_err(|e| TargetError::Kind {
        command: line.clone(),
        detail: if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{}` is not installed: run `grove-conformance setup --kind`",
                command.get_program().to_string_lossy()
            )
        } else {
            e.to_string()
        },
    })?;
    if !output.status.success() {
        return Err(TargetError::Kind {
            command: line,
            detail: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The node containers of cluster `name`, by kind's label.
pub fn node_containers(name: &str) -> Result<Vec<String>, TargetError> {
    let mut command = docker::command();
    command.args([
        "ps",
        "-a",
        "--filter",
        &format!("label=io.x-k8s.kind.cluster={name}"),
        "--format",
        "{{.Names}}",
    ]);
    let mut names: Vec<String> = run(command)?
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect();
    names.sort();
    Ok(names)
}

/// Whether every node of the cluster `client` reaches is a kind node container of this
/// machine's Docker engine (so the harness can stop and start them).
pub async fn nodes_are_local_containers(client: &Client) -> bool {
    let Ok(list) = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
    else {
        return false;
    };
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    if names.is_empty() {
        return false;
    }
    let containers = tokio::task::spawn_blocking(|| {
        let mut command = docker::command();
        command.args([
            "ps",
            "--filter",
            "label=io.x-k8s.kind.cluster",
            "--format",
            "{{.Names}}",
        ]);
        run(command).unwrap_or_default()
    })
    .await
    .unwrap_or_default();
    let containers: Vec<&str> = containers.lines().collect();
    names.iter().all(|n| containers.contains(&n.as_str()))
}

/// Deletes what a killed harness left of cluster `name`, if anything.
pub fn reap(kind: &Path, name: &str) -> Result<(), TargetError> {
    if node_containers(name)?.is_empty() {
        return Ok(());
    }
    tracing::info!("deleting kind cluster {name}, left behind by an earlier run");
    delete(kind, name)
}

/// Deletes cluster `name`. Cgroups (v1) its nodes' runc left frozen are thawed first: runc
/// freezes a container's cgroup while it applies device rules, and a runc killed in between
/// (under heavy load, on a timeout) leaves it frozen, which no kill can get through. A node
/// busy with hundreds of pods can freeze another cgroup between the thaw and the kill (docker
/// then says "did not receive an exit event" and the node stays), so the thaw and the delete
/// are tried again until no node of the cluster is left.
pub fn delete(kind: &Path, name: &str) -> Result<(), TargetError> {
    const ATTEMPTS: u32 = 5;
    let mut attempt = 1;
    loop {
        for id in node_ids(name) {
            thaw(&Path::new("/sys/fs/cgroup/freezer/docker").join(id));
        }
        let result = run(delete_command(kind, name)).map(|_| ());
        let left = node_ids(name);
        if left.is_empty() {
            return Ok(());
        }
        if attempt == ATTEMPTS {
            return result.and(Err(TargetError::Kind {
                command: format!("{} delete cluster --name {name}", kind.display()),
                detail: format!(
                    "{} node container(s) still there after {ATTEMPTS} attempts: {}",
                    left.len(),
                    left.join(", ")
                ),
            }));
        }
        tracing::warn!(
            "kind cluster {name}: {} node container(s) survived the delete, thawing and trying again",
            left.len()
        );
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// The full IDs of the containers of kind cluster `name` (none when Docker does not answer).
fn node_ids(name: &str) -> Vec<String> {
    let mut ids = docker::command();
    ids.args([
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("label=io.x-k8s.kind.cluster={name}"),
    ]);
    run(ids)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Thaws every frozen cgroup under `dir` (nothing where there is no v1 freezer).
fn thaw(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let state = dir.join("freezer.state");
    if std::fs::read_to_string(&state).is_ok_and(|s| s.trim() == "FROZEN") {
        let _ = std::fs::write(&state, "THAWED");
    }
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            thaw(&entry.path());
        }
    }
}

/// The CNI configuration of a node whose pods get addresses from `cidr`.
pub fn cni_config(cidr: &str) -> String {
    serde_json::to_string_pretty(&serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "grove-conformance",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "gc0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    }))
    .expect("JSON serializes")
}

/// Writes `content` to `path` inside node container `node`.
/// The iptables rules that give a node's pods a way out of the cluster, as kind's own CNI
/// (kindnetd's ip-masq-agent) does: what they send from `own` to anything but the pod CIDRs
/// leaves with the node's address, so that the harness's machine (the Docker network's
/// gateway, where the API proxy for a deployed implementation listens) can answer them.
/// Idempotent: the chain is flushed and refilled.
pub fn masquerade_script<'a>(own: &str, all: impl Iterator<Item = &'a str>) -> String {
    let mut script = String::from(
        "set -e\niptables -t nat -N GROVE-CONFORMANCE-MASQ 2>/dev/null || true\niptables -t nat -F GROVE-CONFORMANCE-MASQ\n",
    );
    for cidr in all {
        script.push_str(&format!(
            "iptables -t nat -A GROVE-CONFORMANCE-MASQ -d {cidr} -j RETURN\n"
        ));
    }
    script.push_str("iptables -t nat -A GROVE-CONFORMANCE-MASQ -j MASQUERADE\n");
    script.push_str(&format!(
        "iptables -t nat -C POSTROUTING -s {own} -j GROVE-CONFORMANCE-MASQ 2>/dev/null || iptables -t nat -A POSTROUTING -s {own} -j GROVE-CONFORMANCE-MASQ\n"
    ));
    script
}

/// Runs `script` with `sh -c` in node container `node`.
fn run_in_node(node: &str, script: &str) -> Result<(), TargetError> {
    let mut command = docker::command();
    command.args(["exec", node, "sh", "-c", script]);
    run(command).map(|_| ())
}

fn write_in_node(node: &str, path: &str, content: &str) -> Result<(), TargetError> {
    use std::io::Write;
    let mut child = docker::command()
        .args(["exec", "-i", node, "sh", "-c"])
        .arg(format!(
            "mkdir -p \"$(dirname {path})\" && cat > {path}.new && mv {path}.new {path}"
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| TargetError::Kind {
            command: format!("docker exec {node}"),
            detail: e.to_string(),
        })?;
    let _ = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(content.as_bytes());
    let output = child.wait_with_output().map_err(|e| TargetError::Kind {
        command: format!("docker exec {node}"),
        detail: e.to_string(),
    })?;
    if !output.status.success() {
        return Err(TargetError::Kind {
            command: format!("docker exec {node} (write {path})"),
            detail: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(())
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Gives every node its pod network (a bridge on its pod CIDR, routes to the other nodes'),
/// then waits until all of them are Ready.
pub async fn set_up_nodes(client: &Client, name: &str) -> Result<(), TargetError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let containers = tokio::task::spawn_blocking({
        let name = name.to_string();
        move || node_containers(&name)
    })
    .await
    .map_err(|e| TargetError::Scratch(Box::new(e)))??;
    let deadline = Instant::now() + NODES_TIMEOUT;
    let timeout = |what: String| TargetError::Kind {
        command: format!("kind cluster {name}"),
        detail: what,
    };
    // Every node's CIDR, once the node IPAM controller has assigned it.
    let cidrs = loop {
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| timeout(e.to_string()))?;
        let cidrs: Vec<(String, String)> = list
            .items
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, n.spec.as_ref()?.pod_cidr.clone()?)))
            .collect();
        if cidrs.len() == containers.len() {
            break cidrs;
        }
        if Instant::now() > deadline {
            return Err(timeout(format!(
                "only {} of {} nodes got a pod CIDR within {NODES_TIMEOUT:?}",
                cidrs.len(),
                containers.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for (node, cidr) in &cidrs {
        let routes: String = cidrs
            .iter()
            .filter(|(other, _)| other != node)
            .map(|(other, c)| format!("{other} {c}\n"))
            .collect();
        let (node, cidr) = (node.clone(), cidr.clone());
        let masquerade = masquerade_script(&cidr, cidrs.iter().map(|(_, c)| c.as_str()));
        tokio::task::spawn_blocking(move || {
            write_in_node(&node, "/etc/grove-conformance/routes", &routes)?;
            write_in_node(&node, "/etc/grove-conformance/masquerade", &masquerade)?;
            run_in_node(&node, "sh /etc/grove-conformance/masquerade")?;
            write_in_node(
                &node,
                "/etc/cni/net.d/10-grove-conformance.conflist",
                &cni_config(&cidr),
            )
        })
        .await
        .map_err(|e| TargetError::Scratch(Box::new(e)))??;
    }
    loop {
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| timeout(e.to_string()))?;
        let not_ready: Vec<String> = list
            .items
            .iter()
            .filter(|n| !ready(n))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        if not_ready.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(timeout(format!(
                "nodes not Ready within {NODES_TIMEOUT:?}: {}",
                not_ready.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Starts a detached watchdog that deletes cluster `name` once process `pid` is gone: for a
/// cluster held by a process that never drops it (a test binary's shared target). A harness
/// killed outright is covered as well; the next run also reaps by label.
pub fn delete_when_gone(pid: u32, kind: &Path, name: &str) -> std::io::Result<()> {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; exec '{}' delete cluster --name '{name}'",
        kind.display()
    );
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
}

/// A kind cluster made for a run; dropping it deletes the cluster unless it is kept.
#[derive(Debug)]
pub struct KindCluster {
    /// The cluster name.
    pub name: String,
    /// The kind binary.
    pub kind: PathBuf,
    /// Keep it afterwards.
    pub keep: bool,
}

impl KindCluster {
    /// Creates cluster `name` from `config` with the assets' node image, writing its
    /// kubeconfig to `kubeconfig` (a cluster of that name left over is deleted first).
    pub fn create(
        assets: &KindAssets,
        name: &str,
        config: &Path,
        kubeconfig: &Path,
        keep: bool,
    ) -> Result<KindCluster, TargetError> {
        reap(&assets.kind, name)?;
        let cluster = KindCluster {
            name: name.to_string(),
            kind: assets.kind.clone(),
            keep,
        };
        run(create_command(
            &assets.kind,
            name,
            config,
            &assets.node_image,
            kubeconfig,
        ))?;
        Ok(cluster)
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if self.keep {
            tracing::info!(
                "kept kind cluster {} (delete it with `kind delete cluster --name {}`)",
                self.name,
                self.name
            );
            return;
        }
        if let Err(e) = delete(&self.kind, &self.name) {
            tracing::warn!(error = %crate::errors::chain(&e), "failed to delete the kind cluster");
        }
    }
}

/// Loads local image `tag` into every node of kind cluster `name` (what `kind load
/// docker-image` does: `docker save` into each node's containerd), so pods run it without a
/// registry.
pub fn load_image(name: &str, tag: &str) -> Result<(), TargetError> {
    let nodes = node_containers(name)?;
    if nodes.is_empty() {
        return Err(TargetError::Kind {
            command: format!("load {tag}"),
            detail: format!("kind cluster {name} has no nodes"),
        });
    }
    for node in nodes {
        let script = format!(
            "docker save '{tag}' | docker exec -i '{node}' ctr --namespace=k8s.io images import --digests -"
        );
        let mut command = Command::new("bash");
        command.args(["-o", "pipefail", "-c", &script]);
        run(command)?;
    }
    Ok(())
}

/// The Docker network kind puts its nodes on.
pub const KIND_NETWORK: &str = "kind";

/// This machine's address on kind's Docker network (the network's IPv4 gateway): what a pod
/// of a kind cluster reaches the harness at.
pub fn network_gateway() -> Result<std::net::IpAddr, TargetError> {
    let mut command = Command::new("docker");
    command.args([
        "network",
        "inspect",
        KIND_NETWORK,
        "--format",
        "{{range .IPAM.Config}}{{.Gateway}} {{end}}",
    ]);
    let out = run(command)?;
    gateway_of(&out).ok_or_else(|| TargetError::Kind {
        command: format!("docker network inspect {KIND_NETWORK}"),
        detail: format!("no IPv4 gateway in `{}`", out.trim()),
    })
}

/// The first IPv4 address among `gateways` (space separated).
fn gateway_of(gateways: &str) -> Option<std::net::IpAddr> {
    gateways
        .split_whitespace()
        .filter_map(|g| g.parse::<std::net::IpAddr>().ok())
        .find(std::net::IpAddr::is_ipv4)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_gateway_is_the_networks_ipv4_one() {
        assert_eq!(
            gateway_of("fc00:f853:ccd:e793::1 172.18.0.1 "),
            Some("172.18.0.1".parse().unwrap())
        );
        assert_eq!(gateway_of(""), None);
    }

    use super::*;

    fn args(command: &Command) -> Vec<String> {
        command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn kind_commands_name_the_cluster_config_image_and_kubeconfig() {
        let create = create_command(
            Path::new("/c/kind"),
            "gc",
            Path::new("kind-config/kind.yaml"),
            "grove-conformance/kind-node:v1.34.4",
            Path::new("/t/kc"),
        );
        assert_eq!(create.get_program(), "/c/kind");
        assert_eq!(
            args(&create),
            [
                "create",
                "cluster",
                "--name",
                "gc",
                "--config",
                "kind-config/kind.yaml",
                "--image",
                "grove-conformance/kind-node:v1.34.4",
                "--kubeconfig",
                "/t/kc",
            ]
        );
        assert_eq!(
            args(&delete_command(Path::new("kind"), "gc")),
            ["delete", "cluster", "--name", "gc"]
        );
    }

    #[test]
    fn a_missing_binary_is_a_clear_error() {
        let mut command = Command::new("kind-binary-that-does-not-exist");
        command.arg("version");
        let err = run(command).unwrap_err().to_string();
        assert!(err.contains("setup --kind"), "{err}");
    }

    #[test]
    fn each_node_bridges_its_own_pod_cidr() {
        let config: serde_json::Value = serde_json::from_str(&cni_config("10.244.2.0/24")).unwrap();
        assert_eq!(
            config["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.2.0/24"
        );
        assert_eq!(config["plugins"][0]["type"], "bridge");
    }

    #[test]
    fn the_shipped_kind_config_parses_and_names_the_cluster() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/kind-config/kind.yaml"
        ))
        .unwrap();
        let config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(config["kind"], "Cluster");
        assert_eq!(config["name"], KIND_CLUSTER);
        let workers = config["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["role"] == "worker")
            .count();
        assert!(workers >= 2, "node loss needs at least two workers");
        assert_eq!(config["networking"]["disableDefaultCNI"], true);
    }
}
