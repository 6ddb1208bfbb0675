//! An implementation already deployed in the target cluster (a Deployment), judged with every
//! fault: its pods are pointed at the harness's API proxy through a kubeconfig, the proxy
//! forwarding each request with the operator's own ServiceAccount token
//! ([`Credentials::Client`](crate::proxy::Credentials)), so its RBAC is what is tested.
//!
//! - The harness adds to the pod template one projected volume (a ConfigMap with the
//!   kubeconfig and the proxy's CA, and a token of the pod's own ServiceAccount), its mount
//!   in the operator's container, `KUBECONFIG` pointing at it, and an annotation naming the
//!   proxy (the rollout that brings them). The original template is kept on the Deployment as
//!   an annotation, the marker a later run restores from when this one was killed outright.
//! - Pause: the proxy freezes the operator's traffic; resume thaws it.
//! - Crash: the proxy cuts the pod off (its connections close, nothing it sends after reaches
//!   the apiserver), the pod is deleted without grace, and the harness waits until the
//!   replacement is Ready and its first request has come through the proxy.
//! - At the end (and on SIGINT/SIGTERM, or a drop on any path) the Deployment gets its
//!   original template back and the ConfigMap goes.
//!
//! This file names the Deployment and says what can go wrong; `template` rewrites its pod
//! template (pure), `rollout` restores it and waits for its rollouts, `deployed` drives it.

mod deployed;
mod rollout;
mod template;

use std::path::Path;
use std::time::Duration;

pub use deployed::Deployed;
pub use rollout::restore;
pub use template::{MARKER, PROXY_ANNOTATION, pointed_at_proxy, restorable_view};

/// How long a rollout (the harness's, a restore's, a replacement pod's) may take.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(180);

/// How long pods that are Ready may take to send their first request through the proxy, by
/// default.
pub const TRAFFIC_TIMEOUT: Duration = Duration::from_secs(60);

/// Which Deployment, and which of its containers is the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The container to point at the proxy (needed when it has several).
    pub container: Option<String>,
    /// How long its pods, once Ready, may take to send their first request through the proxy
    /// ([`TRAFFIC_TIMEOUT`] by default).
    pub traffic_timeout: Duration,
}

/// Text that does not name a Deployment as `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not NAMESPACE/NAME (say which Deployment, e.g. grove-system/grove-operator)")]
pub struct BadDeploymentRef {
    /// The text given.
    pub text: String,
}

impl DeploymentRef {
    /// Reads `NAMESPACE/NAME`.
    pub fn parse(text: &str, container: Option<String>) -> Result<Self, BadDeploymentRef> {
        match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(DeploymentRef {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    container,
                    traffic_timeout: TRAFFIC_TIMEOUT,
                })
            }
            _ => Err(BadDeploymentRef {
                text: text.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for DeploymentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Deployment {}/{}", self.namespace, self.name)
    }
}

/// Why the deployed implementation could not be set up or controlled.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// It is not there.
    #[error("{0} does not exist")]
    Missing(String),
    /// It has no pod that is Ready.
    #[error("{0} has no ready pod (readyReplicas {1}): start it before certifying it")]
    NotReady(String, i32),
    /// The container is ambiguous or absent.
    #[error("{deployment}: {message}")]
    Container {
        /// Which.
        deployment: String,
        /// What is wrong.
        message: String,
    },
    /// Its pods never talked to the proxy.
    #[error(
        "{deployment}: its pod {pod} is Ready but sent nothing through the API proxy at {proxy} within {:?}: its clients ignore KUBECONFIG (or cannot reach {proxy}); the Deployment was restored",
        timeout
    )]
    NoTraffic {
        /// Which.
        deployment: String,
        /// The pod that stayed silent.
        pod: String,
        /// Where the proxy listens.
        proxy: String,
        /// How long it was given.
        timeout: Duration,
    },
    /// Something did not come within its time.
    #[error("{deployment}: {what} within {:?}", ROLLOUT_TIMEOUT)]
    Timeout {
        /// Which.
        deployment: String,
        /// What did not happen.
        what: String,
    },
    /// The apiserver refused or failed a request.
    #[error("{deployment}: failed to {action}")]
    Api {
        /// Which.
        deployment: String,
        /// What the harness was doing.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// Maps a failed request about `target` while doing `action` to [`DeploymentError::Api`].
/// Reads the Deployment `target` names; one that is not there is [`DeploymentError::Missing`].
pub(super) async fn read(
    api: &kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    target: &DeploymentRef,
) -> Result<k8s_openapi::api::apps::v1::Deployment, DeploymentError> {
    api.get_opt(&target.name)
        .await
        .map_err(api_error(target, "read it"))?
        .ok_or_else(|| DeploymentError::Missing(target.to_string()))
}

pub(super) fn api_error(
    target: &DeploymentRef,
    action: &str,
) -> impl FnOnce(kube::Error) -> DeploymentError {
    let deployment = target.to_string();
    let action = action.to_string();
    move |source| DeploymentError::Api {
        deployment,
        action,
        source,
    }
}

/// Appends `text` to `log`.
pub(super) fn append_log(log: &Path, text: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = file.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployments_are_named_namespace_slash_name() {
        let d = DeploymentRef::parse("grove-system/grove-operator", None).unwrap();
        assert_eq!(d.namespace, "grove-system");
        assert_eq!(d.name, "grove-operator");
        assert_eq!(d.to_string(), "Deployment grove-system/grove-operator");
        for bad in ["grove-operator", "/x", "x/", "a/b/c"] {
            let e = DeploymentRef::parse(bad, None).unwrap_err().to_string();
            assert!(e.contains("NAMESPACE/NAME"), "{e}");
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }
}
