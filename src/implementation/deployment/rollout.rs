//! Putting a Deployment back as the harness found it, and waiting for its rollouts.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplateSpec};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};

use super::template::{MARKER, configmap_name};
use super::{DeploymentError, DeploymentRef, ROLLOUT_TIMEOUT, api_error};

/// Puts back the template the marker holds, drops the marker and the ConfigMap. A Deployment
/// without the marker is left as it is.
pub async fn restore(client: &Client, target: &DeploymentRef) -> Result<(), DeploymentError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
    // A conflict means someone else wrote it meanwhile: read again and retry.
    for _ in 0..10 {
        let mut found = super::read(&api, target).await?;
        let Some(marker) = found.annotations_mut().remove(MARKER) else {
            break;
        };
        let template: PodTemplateSpec =
            serde_json::from_str(&marker).map_err(|e| DeploymentError::Container {
                deployment: target.to_string(),
                message: format!("its annotation {MARKER} is not a pod template: {e}"),
            })?;
        if let Some(spec) = found.spec.as_mut() {
            spec.template = template;
        }
        found.status = None;
        match api
            .replace(&target.name, &PostParams::default(), &found)
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(api_error(target, "put its original pod template back")(e)),
        }
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &target.namespace);
    let _ = cms
        .delete(&configmap_name(target), &DeleteParams::default())
        .await;
    Ok(())
}

/// Whether `d`'s rollout is complete: its controller saw the newest spec, every replica is
/// updated and available, and no old one is left.
pub(super) fn rolled_out(d: &Deployment) -> bool {
    let generation = d.metadata.generation.unwrap_or(0);
    let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    d.status.as_ref().is_some_and(|s| {
        s.observed_generation.unwrap_or(0) >= generation
            && s.updated_replicas.unwrap_or(0) == wanted
            && s.available_replicas.unwrap_or(0) == wanted
            && s.replicas.unwrap_or(0) == wanted
    })
}

/// Waits until the Deployment's rollout is complete ([`rolled_out`]).
pub(super) async fn wait_rollout(
    client: &Client,
    target: &DeploymentRef,
) -> Result<(), DeploymentError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
    let deadline = Instant::now() + ROLLOUT_TIMEOUT;
    loop {
        if let Ok(d) = api.get(&target.name).await
            && rolled_out(&d)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(DeploymentError::Timeout {
                deployment: target.to_string(),
                what: "its rollout did not complete".into(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether `pod` is Ready.
pub(super) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
