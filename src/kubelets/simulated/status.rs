//! Pod statuses as the kubelet writes them, as pure functions of the pod, the node and `now`,
//! so their shape is unit-tested without a server. Written as strategic-merge patches for
//! `pods/<name>/status`: conditions merge by `type` and container statuses by `name`, so
//! conditions other writers add (the scheduler's `PodScheduled`, the apiserver's
//! `DisruptionTarget`) survive, as they do on a real node.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// What the simulated containers of a pod are doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    /// Sandbox being made, images being pulled (`waiting: ContainerCreating`).
    Creating,
    /// Running; `ready` says whether readiness passes.
    Running {
        /// Readiness.
        ready: bool,
    },
    /// Every container exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
}

/// Where the pod runs.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The node's internal IP.
    pub host_ip: String,
    /// The pod's IP.
    pub pod_ip: String,
}

fn container_names(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The phase a pod reaches when all its containers exited with `code`, given its restart
/// policy: `Never` ends in Succeeded/Failed; `OnFailure` ends only on success; `Always` never
/// ends (the container is restarted). `None` means the pod keeps running.
pub fn terminal_phase(pod: &Pod, code: i32) -> Option<&'static str> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    match (policy, code) {
        ("Never", 0) | ("OnFailure", 0) => Some("Succeeded"),
        ("Never", _) => Some("Failed"),
        _ => None,
    }
}

fn condition(kind: &str, status: bool, reason: Option<&str>, now: &str) -> Value {
    // `null` removes a reason or message left by an earlier write (strategic merge).
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": null,
        "lastProbeTime": null,
        "lastTransitionTime": now,
    })
}

/// A stable fake container id for a pod's container (kubelet reports the runtime's id).
fn container_id(pod: &Pod, name: &str, restart: i64) -> String {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut hash: u64 = 0xcbf29ce484222325;
    for b in uid.bytes().chain(name.bytes()).chain(restart.to_le_bytes()) {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    format!("containerd://{hash:016x}{:016x}", hash.rotate_left(17))
}

/// The status patch for a pod whose containers are in `state`. `previous_restarts` is the
/// current restart count (kept across restarts of `Always` pods).
pub fn status_patch(
    pod: &Pod,
    placement: &Placement,
    state: ContainerState,
    previous_restarts: i32,
    started_at: &str,
    now: &str,
) -> Value {
    let names = container_names(pod);
    let (phase, ready, sandbox) = match state {
        ContainerState::Creating => ("Pending", false, false),
        ContainerState::Running { ready } => ("Running", ready, true),
        ContainerState::Exited { code } => match terminal_phase(pod, code) {
            Some(phase) => (phase, false, false),
            None => ("Running", false, true),
        },
    };
    let not_ready_reason = match state {
        ContainerState::Exited { code } if terminal_phase(pod, code).is_some() => "PodCompleted",
        _ => "ContainersNotReady",
    };
    let statuses: Vec<Value> = names
        .iter()
        .map(|(name, image)| {
            let mut status = json!({
                "name": name,
                "image": image,
                "imageID": format!("{image}@sha256:{:064x}", 0),
                "ready": ready,
                "restartCount": previous_restarts,
                "started": matches!(state, ContainerState::Running { .. }),
            });
            match state {
                ContainerState::Creating => {
                    status["imageID"] = json!("");
                    status["state"] = json!({"waiting": {"reason": "ContainerCreating"}});
                }
                ContainerState::Running { .. } => {
                    status["containerID"] =
                        json!(container_id(pod, name, i64::from(previous_restarts)));
                    status["state"] = json!({"running": {"startedAt": started_at}});
                }
                ContainerState::Exited { code } => {
                    status["containerID"] =
                        json!(container_id(pod, name, i64::from(previous_restarts)));
                    status["state"] = json!({"terminated": {
                        "exitCode": code,
                        "reason": if code == 0 { "Completed" } else { "Error" },
                        "startedAt": started_at,
                        "finishedAt": now,
                        "containerID": container_id(pod, name, i64::from(previous_restarts)),
                    }});
                }
            }
            status
        })
        .collect();
    let mut conditions = vec![
        condition("PodReadyToStartContainers", sandbox, None, now),
        condition("Initialized", true, None, now),
        condition("Ready", ready, (!ready).then_some(not_ready_reason), now),
        condition(
            "ContainersReady",
            ready,
            (!ready).then_some(not_ready_reason),
            now,
        ),
    ];
    if !ready {
        let unready: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        let message = format!("containers with unready status: [{}]", unready.join(" "));
        for c in conditions.iter_mut().skip(2) {
            if not_ready_reason == "ContainersNotReady" {
                c["message"] = json!(message);
            }
        }
    }
    let mut patch = json!({
        "status": {
            "phase": phase,
            "hostIP": placement.host_ip,
            "hostIPs": [{"ip": placement.host_ip}],
            "podIP": placement.pod_ip,
            "podIPs": [{"ip": placement.pod_ip}],
            "startTime": started_at,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
    });
    if let Some(generation) = pod.metadata.generation {
        patch["status"]["observedGeneration"] = json!(generation);
    }
    patch
}

/// The status patch a restarting `Always`/`OnFailure` container gets after exiting with
/// `code`: running again, one more restart, the exit kept in `lastState`.
pub fn restarted_patch(
    pod: &Pod,
    placement: &Placement,
    code: i32,
    restarts: i32,
    started_at: &str,
    now: &str,
) -> Value {
    let mut patch = status_patch(
        pod,
        placement,
        ContainerState::Running { ready: true },
        restarts + 1,
        now,
        now,
    );
    patch["status"]["startTime"] = json!(started_at);
    if let Some(list) = patch["status"]["containerStatuses"].as_array_mut() {
        for status in list {
            status["lastState"] = json!({"terminated": {
                "exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" },
                "startedAt": started_at,
                "finishedAt": now,
            }});
        }
    }
    patch
}

/// The `DisruptionTarget` condition the scheduler (preemption) or pod GC adds.
pub fn disruption_patch(reason: &str, message: &str, now: &str) -> Value {
    json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": now,
    }]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": {"restartPolicy": policy, "containers": [{"name": "main", "image": "busybox"}]}
        }))
        .unwrap()
    }

    fn at() -> Placement {
        Placement {
            host_ip: "10.0.1.1".into(),
            pod_ip: "10.244.1.2".into(),
        }
    }

    fn cond<'a>(patch: &'a Value, kind: &str) -> &'a Value {
        patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap()
    }

    #[test]
    fn running_pod_is_ready_with_a_running_container() {
        let p = status_patch(
            &pod("Never"),
            &at(),
            ContainerState::Running { ready: true },
            0,
            "t0",
            "t1",
        );
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(cond(&p, "Ready")["status"], "True");
        // Null clears the reason and message the Pending write left (strategic merge).
        assert!(cond(&p, "Ready")["reason"].is_null());
        assert!(cond(&p, "Ready")["message"].is_null());
        let c = &p["status"]["containerStatuses"][0];
        assert_eq!(c["ready"], true);
        assert_eq!(c["started"], true);
        assert_eq!(c["state"]["running"]["startedAt"], "t0");
        assert_eq!(p["status"]["podIP"], "10.244.1.2");
    }

    #[test]
    fn exit_codes_decide_the_phase_under_restart_policy_never() {
        let ok = status_patch(
            &pod("Never"),
            &at(),
            ContainerState::Exited { code: 0 },
            0,
            "t0",
            "t1",
        );
        assert_eq!(ok["status"]["phase"], "Succeeded");
        assert_eq!(
            ok["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            0
        );
        assert_eq!(
            ok["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        assert_eq!(cond(&ok, "Ready")["reason"], "PodCompleted");
        let bad = status_patch(
            &pod("Never"),
            &at(),
            ContainerState::Exited { code: 3 },
            0,
            "t0",
            "t1",
        );
        assert_eq!(bad["status"]["phase"], "Failed");
        assert_eq!(
            bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            3
        );
        assert_eq!(
            bad["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Error"
        );
    }

    #[test]
    fn restart_policies_other_than_never_keep_the_pod_alive() {
        assert_eq!(terminal_phase(&pod("Always"), 0), None);
        assert_eq!(terminal_phase(&pod("Always"), 1), None);
        assert_eq!(terminal_phase(&pod("OnFailure"), 0), Some("Succeeded"));
        assert_eq!(terminal_phase(&pod("OnFailure"), 2), None);
        let p = restarted_patch(&pod("Always"), &at(), 1, 0, "t0", "t1");
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 1);
        assert_eq!(
            p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
    }

    #[test]
    fn creating_pod_is_pending_and_waiting() {
        let p = status_patch(
            &pod("Never"),
            &at(),
            ContainerState::Creating,
            0,
            "t0",
            "t0",
        );
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert_eq!(cond(&p, "Ready")["reason"], "ContainersNotReady");
        assert_eq!(cond(&p, "Initialized")["status"], "True");
    }
}
