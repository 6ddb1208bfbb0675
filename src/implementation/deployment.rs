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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplateSpec};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::proxy::ApiProxy;

/// The annotation holding the original pod template while the harness has changed it.
pub const MARKER: &str = "conformance.grove.io/original-template";

/// The pod-template annotation naming the proxy the pods go through.
pub const PROXY_ANNOTATION: &str = "conformance.grove.io/api-proxy";

/// The volume (and ConfigMap name prefix) the harness adds.
const VOLUME: &str = "grove-conformance-api-proxy";

/// Where that volume is mounted in the operator's container.
const MOUNT: &str = "/var/run/grove-conformance";

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

impl DeploymentRef {
    /// Reads `NAMESPACE/NAME`.
    pub fn parse(text: &str, container: Option<String>) -> Result<Self, String> {
        match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(DeploymentRef {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    container,
                    traffic_timeout: TRAFFIC_TIMEOUT,
                })
            }
            _ => Err(format!(
                "`{text}` is not NAMESPACE/NAME (say which Deployment, e.g. grove-system/grove-operator)"
            )),
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

/// What the harness keeps of the Deployment as it found it.
#[derive(Debug, Clone)]
struct Original {
    template: PodTemplateSpec,
}

/// A deployed implementation pointed at the proxy.
pub struct Deployed {
    client: Client,
    /// The admin kubeconfig's text, for a restore from a thread of its own (on drop), which
    /// may come after the file is gone.
    kubeconfig: String,
    target: DeploymentRef,
    container: String,
    original: Original,
    proxy: Arc<ApiProxy>,
    /// The pods serving now.
    pods: Vec<String>,
    log: PathBuf,
    restored: bool,
    /// From each crash to the replacement's first request through the proxy.
    restart_times: Vec<Duration>,
}

impl std::fmt::Debug for Deployed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployed")
            .field("target", &self.target)
            .field("container", &self.container)
            .field("pods", &self.pods)
            .finish_non_exhaustive()
    }
}

/// The kubeconfig the operator's pods get: the proxy, its CA, their own token.
fn pod_kubeconfig(proxy: &ApiProxy, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: grove-conformance-api-proxy
  cluster:
    server: https://{addr}
    certificate-authority: {MOUNT}/ca.crt
users:
- name: serviceaccount
  user:
    tokenFile: {MOUNT}/token
contexts:
- name: grove-conformance-api-proxy
  context:
    cluster: grove-conformance-api-proxy
    user: serviceaccount
    namespace: {namespace}
current-context: grove-conformance-api-proxy
",
        addr = proxy.addr()
    )
}

/// The ConfigMap holding that kubeconfig.
fn configmap_name(target: &DeploymentRef) -> String {
    let mut name = format!("{VOLUME}-{}", target.name);
    name.truncate(253);
    name
}

/// `template` pointed at the proxy: the volume, its mount and `KUBECONFIG` in `container`,
/// and the annotation that rolls the pods.
pub fn pointed_at_proxy(
    template: &PodTemplateSpec,
    container: &str,
    configmap: &str,
    proxy: &str,
) -> PodTemplateSpec {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    value["metadata"]["annotations"][PROXY_ANNOTATION] = json!(proxy);
    let spec = &mut value["spec"];
    let volume = json!({
        "name": VOLUME,
        "projected": {"sources": [
            {"configMap": {"name": configmap, "items": [
                {"key": "kubeconfig", "path": "kubeconfig"},
                {"key": "ca.crt", "path": "ca.crt"},
            ]}},
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
        ]},
    });
    push(&mut spec["volumes"], volume);
    if let Some(containers) = spec["containers"].as_array_mut() {
        for c in containers.iter_mut().filter(|c| c["name"] == container) {
            push(
                &mut c["volumeMounts"],
                json!({"name": VOLUME, "mountPath": MOUNT, "readOnly": true}),
            );
            if let Some(env) = c["env"].as_array_mut() {
                env.retain(|e| e["name"] != "KUBECONFIG");
            }
            push(
                &mut c["env"],
                json!({"name": "KUBECONFIG", "value": format!("{MOUNT}/kubeconfig")}),
            );
        }
    }
    serde_json::from_value(value).unwrap_or_else(|_| template.clone())
}

/// Appends `item` to the array at `slot` (made when absent).
fn push(slot: &mut serde_json::Value, item: serde_json::Value) {
    if !slot.is_array() {
        *slot = json!([]);
    }
    if let Some(items) = slot.as_array_mut() {
        items.push(item);
    }
}

impl Deployed {
    /// Points `target`'s pods at `proxy` and waits until they talk through it. Restores a
    /// Deployment an earlier run left changed first. On any error after the first change the
    /// Deployment is restored before returning.
    pub async fn start(
        client: Client,
        kubeconfig: &Path,
        target: &DeploymentRef,
        proxy: Arc<ApiProxy>,
        log: &Path,
    ) -> Result<Deployed, DeploymentError> {
        let api: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
        let Some(mut found) = api
            .get_opt(&target.name)
            .await
            .map_err(api_error(target, "read it"))?
        else {
            return Err(DeploymentError::Missing(target.to_string()));
        };
        if found.annotations().contains_key(MARKER) {
            append_log(
                log,
                &format!(
                    "{target} still carried the changes of an earlier run that did not end \
                     (annotation {MARKER}): restoring it first\n"
                ),
            );
            restore(&client, target).await?;
            wait_rollout(&client, target).await?;
            found = api
                .get(&target.name)
                .await
                .map_err(api_error(target, "read it"))?;
        }
        if !rolled_out(&found) {
            // A rollout under way (another run's restore, say): judge it once it is done.
            wait_rollout(&client, target).await?;
            found = api
                .get(&target.name)
                .await
                .map_err(api_error(target, "read it"))?;
        }
        let ready = found
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        if ready < 1 {
            return Err(DeploymentError::NotReady(target.to_string(), ready));
        }
        let template = found
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let container = choose_container(target, &template)?;
        let kubeconfig = std::fs::read_to_string(kubeconfig).unwrap_or_default();
        let mut deployed = Deployed {
            client,
            kubeconfig,
            target: target.clone(),
            container,
            original: Original {
                template: template.clone(),
            },
            proxy,
            pods: Vec::new(),
            log: log.to_path_buf(),
            restored: true,
            restart_times: Vec::new(),
        };
        match deployed.point_at_proxy(found).await {
            Ok(()) => Ok(deployed),
            Err(e) => {
                deployed.stop().await;
                Err(e)
            }
        }
    }

    async fn point_at_proxy(&mut self, mut found: Deployment) -> Result<(), DeploymentError> {
        let configmap = configmap_name(&self.target);
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": configmap, "labels": {"app.kubernetes.io/managed-by": "grove-conformance"}},
            "data": {
                "kubeconfig": pod_kubeconfig(&self.proxy, &self.target.namespace),
                "ca.crt": self.proxy.ca_pem(),
            },
        }))
        .expect("a ConfigMap");
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.target.namespace);
        let _ = cms.delete(&configmap, &DeleteParams::default()).await;
        cms.create(&PostParams::default(), &cm)
            .await
            .map_err(api_error(
                &self.target,
                "create the ConfigMap with the proxy's kubeconfig",
            ))?;
        let marker = serde_json::to_string(&self.original.template).unwrap_or_default();
        found.annotations_mut().insert(MARKER.to_string(), marker);
        if let Some(spec) = found.spec.as_mut() {
            spec.template = pointed_at_proxy(
                &self.original.template,
                &self.container,
                &configmap,
                &self.proxy.addr().to_string(),
            );
        }
        found.status = None;
        self.restored = false;
        Api::<Deployment>::namespaced(self.client.clone(), &self.target.namespace)
            .replace(&self.target.name, &PostParams::default(), &found)
            .await
            .map_err(api_error(
                &self.target,
                "point its pod template at the API proxy",
            ))?;
        wait_rollout(&self.client, &self.target).await?;
        self.pods = self.serving_pods(&[]).await?;
        self.wait_traffic().await
    }

    /// The Ready pods of the Deployment's current template, none of `old`, once there are
    /// as many as it wants.
    async fn serving_pods(&self, old: &[String]) -> Result<Vec<String>, DeploymentError> {
        let deadline = Instant::now() + ROLLOUT_TIMEOUT;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.target.namespace);
        let deployments: Api<Deployment> =
            Api::namespaced(self.client.clone(), &self.target.namespace);
        let proxy = self.proxy.addr().to_string();
        loop {
            let d = deployments.get(&self.target.name).await.ok();
            let wanted = d
                .as_ref()
                .and_then(|d| d.spec.as_ref())
                .and_then(|s| s.replicas)
                .unwrap_or(1);
            let selector = d
                .as_ref()
                .and_then(|d| d.spec.as_ref())
                .and_then(|s| s.selector.match_labels.clone())
                .unwrap_or_default();
            let labels = selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            if let Ok(list) = pods.list(&ListParams::default().labels(&labels)).await {
                let ready: Vec<String> = list
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| p.annotations().get(PROXY_ANNOTATION) == Some(&proxy))
                    .filter(|p| !old.contains(&p.name_any()))
                    .filter(|p| is_ready(p))
                    .map(ResourceExt::name_any)
                    .collect();
                if i32::try_from(ready.len()).unwrap_or(i32::MAX) >= wanted && wanted > 0 {
                    return Ok(ready);
                }
            }
            if Instant::now() >= deadline {
                return Err(DeploymentError::Timeout {
                    deployment: self.target.to_string(),
                    what: "no pod pointed at the API proxy became Ready".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every serving pod has sent a request through the proxy.
    async fn wait_traffic(&self) -> Result<(), DeploymentError> {
        let deadline = Instant::now() + self.target.traffic_timeout;
        loop {
            let clients = self.proxy.clients();
            let silent = self
                .pods
                .iter()
                .find(|p| !clients.contains_key(&self.client_name(p)));
            match silent {
                None => return Ok(()),
                Some(pod) if Instant::now() >= deadline => {
                    return Err(DeploymentError::NoTraffic {
                        deployment: self.target.to_string(),
                        pod: pod.clone(),
                        proxy: self.proxy.addr().to_string(),
                        timeout: self.target.traffic_timeout,
                    });
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// How the proxy names the client of `pod`.
    fn client_name(&self, pod: &str) -> String {
        format!("pod {}/{pod}", self.target.namespace)
    }

    /// Freezes its traffic at the proxy.
    pub fn pause(&self) {
        self.proxy.freeze();
    }

    /// Thaws it.
    pub fn resume(&self) {
        self.proxy.thaw();
    }

    /// Cuts its pods off at the proxy, deletes them without grace, and waits until their
    /// replacements are Ready and have talked through the proxy.
    pub async fn crash_and_restart(&mut self) -> Result<(), DeploymentError> {
        let started = Instant::now();
        let old = std::mem::take(&mut self.pods);
        for pod in &old {
            self.proxy.cut_off(&self.client_name(pod));
        }
        // A crash while paused: the replacement starts unfrozen, as a restarted process.
        self.proxy.thaw();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.target.namespace);
        for pod in &old {
            self.keep_log(pod).await;
            let _ = pods
                .delete(pod, &DeleteParams::default().grace_period(0))
                .await;
        }
        self.pods = self.serving_pods(&old).await?;
        self.wait_traffic().await?;
        let took = started.elapsed();
        self.restart_times.push(took);
        append_log(
            &self.log,
            &format!(
                "crashed {} and {} served again through the proxy after {} ms\n",
                old.join(", "),
                self.pods.join(", "),
                took.as_millis()
            ),
        );
        Ok(())
    }

    /// From each crash to the replacement's first request through the proxy, in order.
    pub fn restart_times(&self) -> &[Duration] {
        &self.restart_times
    }

    /// `Some(reason)` when a serving pod's operator container restarted on its own.
    pub async fn exited(&self) -> Option<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.target.namespace);
        for name in &self.pods {
            let pod = pods.get_opt(name).await.ok()??;
            let restarts = pod
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .iter()
                .find(|c| c.name == self.container)
                .map_or(0, |c| c.restart_count);
            if restarts > 0 {
                return Some(format!(
                    "the deployed implementation's container {} in pod {name} restarted on its own ({restarts} times)",
                    self.container
                ));
            }
        }
        None
    }

    /// Appends `pod`'s operator output to the implementation log.
    async fn keep_log(&self, pod: &str) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.target.namespace);
        let params = LogParams {
            container: Some(self.container.clone()),
            ..LogParams::default()
        };
        let text = pods
            .logs(pod, &params)
            .await
            .unwrap_or_else(|e| format!("(its log could not be read: {e})\n"));
        append_log(&self.log, &format!("==> pod {pod}\n{text}"));
    }

    /// Keeps the pods' output, gives the Deployment its template back, removes the
    /// ConfigMap, and waits until the original pods serve again.
    pub async fn stop(&mut self) {
        for pod in self.pods.clone() {
            self.keep_log(&pod).await;
        }
        self.proxy.thaw();
        if self.restored {
            return;
        }
        match restore(&self.client, &self.target).await {
            Ok(()) => {
                self.restored = true;
                if let Err(e) = wait_rollout(&self.client, &self.target).await {
                    append_log(&self.log, &format!("after the restore: {e}\n"));
                }
            }
            Err(e) => {
                let text = format!(
                    "failed to restore {}: {}; the next run restores it from annotation {MARKER}\n",
                    self.target,
                    crate::errors::chain(&e)
                );
                tracing::error!("{text}");
                append_log(&self.log, &text);
            }
        }
    }
}

impl Drop for Deployed {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        // Not stopped (an interrupt, a panic): restore from a thread and a runtime of its own,
        // which works whatever runtime (if any) is dropping this.
        let kubeconfig = self.kubeconfig.clone();
        let target = self.target.clone();
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let file = kube::config::Kubeconfig::from_yaml(&kubeconfig).ok()?;
                let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .ok()?;
                let client = Client::try_from(config).ok()?;
                restore(&client, &target).await.ok()
            })
        })
        .join();
        if !matches!(done, Ok(Some(()))) {
            eprintln!(
                "error: failed to restore {}: the next run restores it from annotation {MARKER}",
                self.target
            );
        }
    }
}

/// Maps a failed request about `target` while doing `action` to [`DeploymentError::Api`].
fn api_error(target: &DeploymentRef, action: &str) -> impl FnOnce(kube::Error) -> DeploymentError {
    let deployment = target.to_string();
    let action = action.to_string();
    move |source| DeploymentError::Api {
        deployment,
        action,
        source,
    }
}

/// Whether `pod` is Ready.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The container to point at the proxy.
fn choose_container(
    target: &DeploymentRef,
    template: &PodTemplateSpec,
) -> Result<String, DeploymentError> {
    let names: Vec<String> = template
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let error = |message: String| DeploymentError::Container {
        deployment: target.to_string(),
        message,
    };
    match &target.container {
        Some(c) if names.contains(c) => Ok(c.clone()),
        Some(c) => Err(error(format!(
            "it has no container `{c}` (it has: {})",
            names.join(", ")
        ))),
        None if names.len() == 1 => Ok(names[0].clone()),
        None => Err(error(format!(
            "it has {} containers ({}): say which is the operator with --implementation-container",
            names.len(),
            names.join(", ")
        ))),
    }
}

/// Puts back the template the marker holds, drops the marker and the ConfigMap. A Deployment
/// without the marker is left as it is.
pub async fn restore(client: &Client, target: &DeploymentRef) -> Result<(), DeploymentError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &target.namespace);
    // A conflict means someone else wrote it meanwhile: read again and retry.
    for _ in 0..10 {
        let Some(mut found) = api
            .get_opt(&target.name)
            .await
            .map_err(api_error(target, "read it"))?
        else {
            return Err(DeploymentError::Missing(target.to_string()));
        };
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
fn rolled_out(d: &Deployment) -> bool {
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
async fn wait_rollout(client: &Client, target: &DeploymentRef) -> Result<(), DeploymentError> {
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

/// Appends `text` to `log`.
fn append_log(log: &Path, text: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = file.write_all(text.as_bytes());
    }
}

/// What of a Deployment the harness must leave as it found it: its spec, labels and
/// annotations but `deployment.kubernetes.io/revision` (the Deployment controller's count of
/// rollouts, which the harness's rollout and restore advance).
pub fn restorable_view(d: &Deployment) -> serde_json::Value {
    let mut annotations: BTreeMap<String, String> = d.annotations().clone();
    annotations.remove("deployment.kubernetes.io/revision");
    json!({
        "labels": d.labels(),
        "annotations": annotations,
        "spec": d.spec,
    })
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
            let e = DeploymentRef::parse(bad, None).unwrap_err();
            assert!(e.contains("NAMESPACE/NAME"), "{e}");
        }
    }

    fn template() -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "op"}},
            "spec": {"containers": [
                {"name": "operator", "image": "op:1", "env": [{"name": "KUBECONFIG", "value": "/old"}, {"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "side:1"},
            ]},
        }))
        .unwrap()
    }

    #[test]
    fn the_template_gets_the_kubeconfig_in_the_chosen_container_only() {
        let t = pointed_at_proxy(&template(), "operator", "cm", "10.0.0.1:4443");
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v["metadata"]["annotations"][PROXY_ANNOTATION],
            "10.0.0.1:4443"
        );
        assert_eq!(v["spec"]["volumes"][0]["name"], VOLUME);
        let sources = &v["spec"]["volumes"][0]["projected"]["sources"];
        assert_eq!(sources[0]["configMap"]["name"], "cm");
        assert_eq!(sources[1]["serviceAccountToken"]["path"], "token");
        let operator = &v["spec"]["containers"][0];
        assert_eq!(operator["volumeMounts"][0]["mountPath"], MOUNT);
        let env: Vec<(String, String)> = operator["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            env,
            [
                ("A".to_string(), "1".to_string()),
                ("KUBECONFIG".to_string(), format!("{MOUNT}/kubeconfig")),
            ]
        );
        let sidecar = &v["spec"]["containers"][1];
        assert!(sidecar.get("volumeMounts").is_none());
        assert!(sidecar.get("env").is_none());
    }

    #[test]
    fn the_operator_container_must_be_named_when_there_are_several() {
        let target = DeploymentRef::parse("ns/op", None).unwrap();
        let e = choose_container(&target, &template())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--implementation-container"), "{e}");
        assert!(e.contains("operator, sidecar"), "{e}");
        let named = DeploymentRef::parse("ns/op", Some("operator".into())).unwrap();
        assert_eq!(choose_container(&named, &template()).unwrap(), "operator");
        let wrong = DeploymentRef::parse("ns/op", Some("nope".into())).unwrap();
        let e = choose_container(&wrong, &template())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no container `nope`"), "{e}");
    }
}
