//! The embedded cluster against itself: real etcd, apiserver, garbage collector and namespace
//! controller, and the simulated kubelet behaving like a real one.

mod common;

use std::time::Duration;

use futures::StreamExt;
use grove_conformance::cluster::embedded::EmbeddedCluster;
use grove_conformance::kubelets::simulated::{NodeLoss, Taint};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;

const WAIT: Duration = Duration::from_secs(30);

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.grove-conformance.io"},
        "spec": {
            "group": "test.grove-conformance.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// Runs a test body against the shared cluster; the cluster failing to start fails the test
/// with its reason.
fn with_cluster<F, Fut>(name: &str, body: F)
where
    F: FnOnce(Client, &'static EmbeddedCluster, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (env, cluster) = common::shared_cluster(|| vec![widget_crd()]);
    let client = cluster.client();
    let namespace = format!("cp-{name}");
    env.block_on(async move {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(60), body(client, cluster, namespace))
            .await
            .expect("test timed out");
    });
}

fn pod(name: &str, restart_policy: &str, gated: bool) -> Pod {
    let mut spec = json!({
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": "busybox"}],
    });
    if gated {
        spec["schedulingGates"] = json!([{"name": "test.grove-conformance.io/hold"}]);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn create_running(client: &Client, ns: &str, name: &str, policy: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &pod(name, policy, false))
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), name, conditions::is_pod_running()),
    )
    .await
    .expect("pod did not start")
    .unwrap()
    .unwrap()
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn is_phase(wanted: &'static str) -> impl Fn(Option<&Pod>) -> bool {
    move |pod: Option<&Pod>| pod.and_then(phase) == Some(wanted)
}

fn exit_code(pod: &Pod) -> Option<i32> {
    pod.status.as_ref()?.container_statuses.as_ref()?[0]
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

#[test]
fn pods_are_bound_run_and_exit_with_their_code() {
    with_cluster("exit", |client, cluster, ns| async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let running = create_running(&client, &ns, "ok", "Never").await;
        let node = running.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert!(cluster.fleet.node_names().contains(&node));
        let ready = running
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap();
        assert!(
            ready
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        );
        assert!(
            ready
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True")
        );

        cluster.fleet.exit(&ns, "ok", 0).await.unwrap();
        let done = tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "ok", is_phase("Succeeded")),
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(exit_code(&done), Some(0));

        create_running(&client, &ns, "bad", "Never").await;
        cluster.fleet.exit(&ns, "bad", 3).await.unwrap();
        let failed = tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "bad", is_phase("Failed")),
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(exit_code(&failed), Some(3));

        // Under restartPolicy Always the container restarts: the pod stays Running.
        create_running(&client, &ns, "always", "Always").await;
        cluster.fleet.exit(&ns, "always", 1).await.unwrap();
        let restarted = tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "always", |p: Option<&Pod>| {
                p.and_then(|p| {
                    p.status
                        .as_ref()?
                        .container_statuses
                        .as_ref()?
                        .first()
                        .map(|c| c.restart_count)
                }) == Some(1)
            }),
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(phase(&restarted), Some("Running"));
    });
}

#[test]
fn a_gated_pod_is_bound_only_when_its_gate_goes() {
    with_cluster("gate", |client, _cluster, ns| async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        pods.create(&PostParams::default(), &pod("gated", "Never", true))
            .await
            .unwrap();
        // A second, ungated pod created after it runs: the fleet has seen both.
        create_running(&client, &ns, "witness", "Never").await;
        let gated = pods.get("gated").await.unwrap();
        assert!(
            gated.spec.as_ref().unwrap().node_name.is_none(),
            "a gated pod was bound"
        );
        pods.patch(
            "gated",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"schedulingGates": null}})),
        )
        .await
        .unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(pods, "gated", conditions::is_pod_running()),
        )
        .await
        .expect("the ungated pod did not start")
        .unwrap();
    });
}

#[test]
fn an_eviction_removes_a_running_pod_with_disruption_target() {
    with_cluster("evict", |client, cluster, ns| async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let running = create_running(&client, &ns, "victim", "Never").await;
        let uid = running.uid().unwrap();
        let seen = states_until_deleted(&pods, "victim").await;
        cluster.fleet.evict(&ns, "victim").await.unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "victim", conditions::is_deleted(&uid)),
        )
        .await
        .expect("the evicted pod was not removed")
        .unwrap();
        let history: Vec<Pod> = tokio::time::timeout(WAIT, seen)
            .await
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let disrupted = history.iter().any(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.status == "True"
                            && c.reason.as_deref() == Some("EvictionByEvictionAPI")
                    })
                })
        });
        assert!(disrupted, "no DisruptionTarget condition was ever visible");
    });
}

/// Watches pod `name` from now until it is deleted, recording each state seen, the deleted
/// one last (`true` marks it). Returns once the watch has listed: a change before that could
/// be missed.
async fn states_until_deleted(
    pods: &Api<Pod>,
    name: &str,
) -> tokio::task::JoinHandle<Vec<(Pod, bool)>> {
    let stream = watcher(
        pods.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    let collect = tokio::spawn(async move {
        let mut states = Vec::new();
        let mut stream = stream.boxed();
        let mut listed = Some(tx);
        while let Some(Ok(event)) = stream.next().await {
            match event {
                watcher::Event::InitDone => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => states.push((p, false)),
                watcher::Event::Delete(p) => {
                    states.push((p, true));
                    break;
                }
                watcher::Event::Init => {}
            }
        }
        states
    });
    rx.await.unwrap();
    collect
}

/// The phases [`states_until_deleted`] saw (`deleted:<phase>` last).
async fn phases_until_deleted(pods: &Api<Pod>, name: &str) -> tokio::task::JoinHandle<Vec<String>> {
    let states = states_until_deleted(pods, name).await;
    tokio::spawn(async move {
        states
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|(p, deleted)| {
                let phase = phase(&p).unwrap_or("");
                if deleted {
                    format!("deleted:{phase}")
                } else {
                    phase.to_string()
                }
            })
            .collect()
    })
}

/// Waits for pod `name` (`uid`) to be deleted and checks that no terminal phase was ever
/// visible on the way.
async fn assert_gone_without_terminal_phase(
    pods: Api<Pod>,
    name: &str,
    uid: &str,
    collect: tokio::task::JoinHandle<Vec<String>>,
) {
    tokio::time::timeout(
        WAIT,
        await_condition(pods, name, conditions::is_deleted(uid)),
    )
    .await
    .unwrap()
    .unwrap();
    let phases = tokio::time::timeout(WAIT, collect).await.unwrap().unwrap();
    assert!(!phases.is_empty());
    assert!(
        phases
            .iter()
            .all(|p| !p.ends_with("Failed") && !p.ends_with("Succeeded")),
        "a terminal phase was visible: {phases:?}"
    );
    assert_eq!(phases.last().map(String::as_str), Some("deleted:Running"));
}

#[test]
fn a_force_delete_shows_no_terminal_phase() {
    with_cluster("force", |client, cluster, ns| async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let running = create_running(&client, &ns, "gone", "Never").await;
        let uid = running.uid().unwrap();
        let collect = phases_until_deleted(&pods, "gone").await;
        cluster.fleet.force_delete(&ns, "gone").await.unwrap();
        assert_gone_without_terminal_phase(pods, "gone", &uid, collect).await;
    });
}

#[test]
fn a_graceful_delete_can_end_without_a_terminal_phase() {
    with_cluster("silent", |client, cluster, ns| async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let running = create_running(&client, &ns, "quiet", "Never").await;
        let uid = running.uid().unwrap();
        let collect = phases_until_deleted(&pods, "quiet").await;
        cluster
            .fleet
            .omit_terminal_phase(&ns, "quiet")
            .await
            .unwrap();
        cluster.fleet.evict(&ns, "quiet").await.unwrap();
        assert_gone_without_terminal_phase(pods, "quiet", &uid, collect).await;
    });
}

#[test]
fn service_accounts_get_token_secrets_and_the_root_ca() {
    with_cluster("sa", |client, _cluster, ns| async move {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        // The serviceaccount controller makes `default`; root-ca-cert-publisher the CA bundle.
        tokio::time::timeout(
            WAIT,
            await_condition(
                accounts.clone(),
                "default",
                |sa: Option<&ServiceAccount>| sa.is_some(),
            ),
        )
        .await
        .expect("the default service account appears")
        .unwrap();
        let ca = tokio::time::timeout(
            WAIT,
            await_condition(maps, "kube-root-ca.crt", |cm: Option<&ConfigMap>| {
                cm.is_some()
            }),
        )
        .await
        .expect("kube-root-ca.crt is published")
        .unwrap()
        .unwrap();
        let bundle = ca
            .data
            .unwrap_or_default()
            .remove("ca.crt")
            .unwrap_or_default();
        assert!(bundle.contains("BEGIN CERTIFICATE"), "{bundle}");

        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
        accounts.create(&PostParams::default(), &sa).await.unwrap();
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "robot-token",
                "annotations": {"kubernetes.io/service-account.name": "robot"}},
            "type": "kubernetes.io/service-account-token"
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let filled = tokio::time::timeout(
            WAIT,
            await_condition(secrets, "robot-token", |s: Option<&Secret>| {
                s.and_then(|s| s.data.as_ref())
                    .is_some_and(|d| d.get("token").is_some_and(|t| !t.0.is_empty()))
            }),
        )
        .await
        .expect("the token controller fills the Secret")
        .unwrap()
        .unwrap();
        let data = filled.data.unwrap();
        let token = String::from_utf8(data["token"].0.clone()).unwrap();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        assert!(data.contains_key("ca.crt"));
    });
}

#[test]
fn a_lost_node_takes_its_pods_without_a_terminal_phase() {
    with_cluster("node-loss", |client, cluster, ns| async move {
        // A dedicated node only this test's pods tolerate, so no other test loses pods.
        let taint = Taint {
            key: "test.grove-conformance.io/dedicated".into(),
            value: "node-loss".into(),
            effect: "NoSchedule".into(),
        };
        let node = cluster
            .fleet
            .add_node("grove-sim-dedicated-loss", BTreeMap::new(), vec![taint])
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let mut stranded = pod("stranded", "Never", false);
        let spec = stranded.spec.as_mut().unwrap();
        spec.node_selector = Some([("kubernetes.io/hostname".to_string(), node.clone())].into());
        spec.tolerations = Some(vec![
            serde_json::from_value(json!({
                "key": "test.grove-conformance.io/dedicated", "operator": "Exists"
            }))
            .unwrap(),
        ]);
        pods.create(&PostParams::default(), &stranded)
            .await
            .unwrap();
        let running = tokio::time::timeout(
            WAIT,
            await_condition(pods.clone(), "stranded", conditions::is_pod_running()),
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(
            running.spec.as_ref().unwrap().node_name.as_deref(),
            Some(node.as_str())
        );
        let uid = running.uid().unwrap();
        let collect = phases_until_deleted(&pods, "stranded").await;
        cluster
            .fleet
            .lose_node(&node, NodeLoss::Vanish)
            .await
            .unwrap();
        assert_gone_without_terminal_phase(pods.clone(), "stranded", &uid, collect).await;
        // The node is NotReady, and the same pod again is not bound to it.
        let mut again = stranded.clone();
        again.metadata.name = Some("stranded-again".into());
        pods.create(&PostParams::default(), &again).await.unwrap();
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let lost = nodes.get(&node).await.unwrap();
        let ready = lost
            .status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "Unknown");
        let pending = pods.get("stranded-again").await.unwrap();
        assert!(pending.spec.unwrap().node_name.is_none());
        // Recovered, the node takes it.
        cluster.fleet.recover_node(&node).await.unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(pods, "stranded-again", conditions::is_pod_running()),
        )
        .await
        .expect("the recovered node did not take the pod")
        .unwrap();
    });
}

#[test]
fn the_garbage_collector_removes_dependents_of_core_and_custom_owners() {
    with_cluster("gc", |client, _cluster, ns| async move {
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let gvk = GroupVersionKind::gvk("test.grove-conformance.io", "v1", "Widget");
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
        let owner: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.grove-conformance.io/v1", "kind": "Widget",
            "metadata": {"name": "owner"}, "spec": {}
        }))
        .unwrap();
        let owner = widgets
            .create(&PostParams::default(), &owner)
            .await
            .unwrap();
        let parent = configmaps
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "parent"}})).unwrap(),
            )
            .await
            .unwrap();
        let child =
            |name: &str, api_version: &str, kind: &str, owner_name: &str, uid: &str| -> ConfigMap {
                serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
                "apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}]}}))
                .unwrap()
            };
        let of_cr = configmaps
            .create(
                &PostParams::default(),
                &child(
                    "of-widget",
                    "test.grove-conformance.io/v1",
                    "Widget",
                    "owner",
                    &owner.uid().unwrap(),
                ),
            )
            .await
            .unwrap();
        let of_core = configmaps
            .create(
                &PostParams::default(),
                &child(
                    "of-configmap",
                    "v1",
                    "ConfigMap",
                    "parent",
                    &parent.uid().unwrap(),
                ),
            )
            .await
            .unwrap();
        widgets
            .delete("owner", &DeleteParams::default())
            .await
            .unwrap();
        configmaps
            .delete("parent", &DeleteParams::default())
            .await
            .unwrap();
        for (name, uid) in [
            ("of-widget", of_cr.uid().unwrap()),
            ("of-configmap", of_core.uid().unwrap()),
        ] {
            tokio::time::timeout(
                WAIT,
                await_condition(configmaps.clone(), name, conditions::is_deleted(&uid)),
            )
            .await
            .unwrap_or_else(|_| panic!("the garbage collector did not remove {name}"))
            .unwrap();
        }
    });
}

#[test]
fn namespace_deletion_completes_with_running_pods() {
    with_cluster("nsdel", |client, _cluster, ns| async move {
        create_running(&client, &ns, "resident", "Never").await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let uid = namespaces.get(&ns).await.unwrap().uid().unwrap();
        namespaces
            .delete(&ns, &DeleteParams::default())
            .await
            .unwrap();
        tokio::time::timeout(
            Duration::from_secs(45),
            await_condition(namespaces, &ns, conditions::is_deleted(&uid)),
        )
        .await
        .expect("the namespace was not removed")
        .unwrap();
    });
}
