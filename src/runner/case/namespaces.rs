//! Case namespaces: deleting one when its case ends, and the namespaces of a run that stopped
//! short. Every case namespace carries the label [`RUN_LABEL`] with this process's run id, so
//! that a run interrupted before its cases tore themselves down (SIGINT, SIGTERM) can delete
//! what it left in a cluster that outlives it (`--kubeconfig`).

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams};

use super::lifecycle::DEFAULT_CASE_TIMEOUT;
use super::writes::remove_case_finalizers_in;

/// Deletes a case's namespace once its verdict is in; for a large case, waits until it is
/// gone. On the simulated fleet the case's pods are then deleted at once (grace 0): the
/// namespace controller works through terminating namespaces a few at a time and waits out
/// each pod's grace period, so over a long run (an `explore` of a thousand scenarios) the
/// namespaces of ended cases piled up with their pods still Running until the fleet had no
/// room left for the cases that followed. Nothing judges a pod of an ended case, and the
/// Terminating namespace refuses new objects, so nothing comes back.
pub(super) async fn delete_case_namespace(
    client: &kube::Client,
    namespace: &str,
    large: bool,
    simulated: bool,
) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces
        .delete(namespace, &DeleteParams::background())
        .await;
    if simulated {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        if let Err(error) = pods.delete_collection(&now, &ListParams::default()).await {
            tracing::debug!(namespace, %error, "the pods of an ended case were not deleted at once");
        }
    }
    // A large case runs alone; so does its teardown: on real kubelets, hundreds of pods
    // ending their grace periods would otherwise starve the cases that start next.
    if large {
        let gone = kube::runtime::wait::await_condition(
            namespaces.clone(),
            namespace,
            kube::runtime::conditions::is_deleted(""),
        );
        if tokio::time::timeout(DEFAULT_CASE_TIMEOUT, gone)
            .await
            .is_err()
        {
            tracing::warn!(namespace, "a large case's namespace was not gone in time");
        }
    }
}

/// Label on every case namespace, with the run id of the process that made it as value.
pub const RUN_LABEL: &str = "grove-conformance.io/run";

/// This process's run id: its pid and start time, in hex.
pub fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{:x}-{:x}", std::process::id(), nanos & 0xffff_ffff_ffff)
    })
}

/// Deletes every namespace this process's cases made that is still there, after removing the
/// finalizers cases add from its objects (their deletion would wait for them). The names
/// deleted.
pub async fn delete_run_namespaces(client: &kube::Client) -> Vec<String> {
    let api: Api<Namespace> = Api::all(client.clone());
    let selector = format!("{RUN_LABEL}={}", run_id());
    let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
        return Vec::new();
    };
    let mut deleted = Vec::new();
    for ns in list.items {
        let Some(name) = ns.metadata.name else {
            continue;
        };
        remove_case_finalizers_in(client, &name).await;
        if api.delete(&name, &DeleteParams::background()).await.is_ok() {
            deleted.push(name);
        }
    }
    deleted
}
