//! Installing CRDs, the one way every target does it: server-side apply under a field manager
//! (so a second install, or one over CRDs another tool applied, updates rather than fails),
//! then a wait until each is established.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

/// Field manager of the harness's own writes.
pub const FIELD_MANAGER: &str = "grove-conformance";

/// A CRD that could not be installed or did not become established.
#[derive(Debug, thiserror::Error)]
#[error("failed to install CRD {name}")]
pub struct CrdError {
    /// The CRD's name.
    pub name: String,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Applies `crds` server-side as `manager` (forcing ownership of conflicting fields), then
/// waits until each is established, at most `timeout` for each.
pub async fn install(
    client: &Client,
    crds: &[CustomResourceDefinition],
    manager: &str,
    timeout: Duration,
) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| CrdError {
            name: name.clone(),
            source,
        };
        let mut body = serde_json::to_value(crd).map_err(|e| fail(Box::new(e)))?;
        body["apiVersion"] = "apiextensions.k8s.io/v1".into();
        body["kind"] = "CustomResourceDefinition".into();
        api.patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|e| fail(Box::new(e)))?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::conditions::is_crd_established(),
        );
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(CrdError {
                    name,
                    source: Box::new(e),
                });
            }
            Err(_) => {
                return Err(CrdError {
                    source: format!("not established within {timeout:?}").into(),
                    name,
                });
            }
        }
    }
    Ok(())
}
