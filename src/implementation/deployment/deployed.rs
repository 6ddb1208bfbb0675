//! [`Deployed`]: a deployed implementation pointed at the proxy, paused, crashed and restarted
//! through it, and restored when it stops or is dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplateSpec};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::rollout::{is_ready, restore, rolled_out, wait_rollout};
use super::template::{
    MARKER, PROXY_ANNOTATION, choose_container, configmap_name, pod_kubeconfig, pointed_at_proxy,
};
use super::{DeploymentError, DeploymentRef, ROLLOUT_TIMEOUT, api_error, append_log};
use crate::proxy::ApiProxy;

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
        let mut found = super::read(&api, target).await?;
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
        let done = std::thread::Builder::new()
            .stack_size(crate::host::WORKER_STACK)
            .spawn(move || {
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
            .ok()
            .and_then(|thread| thread.join().ok());
        if done.flatten().is_none() {
            eprintln!(
                "error: failed to restore {}: the next run restores it from annotation {MARKER}",
                self.target
            );
        }
    }
}
