//! The namespaces of a run that stopped short: every case namespace carries the label
//! [`RUN_LABEL`] with this process's run id, so that a run interrupted before its cases tore
//! themselves down (SIGINT, SIGTERM) can delete what it left in a cluster that outlives it
//! (`--kubeconfig`).

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams};

use super::writes::remove_case_finalizers_in;

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
