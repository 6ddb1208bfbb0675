//! The steps that write through the API: `apply`, `update` (with retries on 409 Conflict),
//! `delete` and `reject`, each recorded with the observer so that the monitor tells the
//! harness's writes from the implementation's.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::steps::{CaseRun, StepError, fail};
use crate::catalog::{Addressee, Delete, Reject, Request, Subresource, Update, merge_patch};
use crate::matcher;
use crate::runner::observe::api_resource;
use crate::vocab::{Kind, Vocabulary};

/// An API error as its message and HTTP code, any other error as it prints.
pub(super) fn api_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

/// The finalizers cases add (another controller's, in a case's story) are named so.
const CASE_FINALIZER_PREFIX: &str = "conformance.grove.io/";

/// Removes the finalizers cases add (`conformance.grove.io/…`) from the objects of
/// `namespace`, each by a patch that removes exactly that entry and fails if the list changed
/// meanwhile: a case that ended before removing its own then leaves nothing that its
/// namespace's deletion would wait for.
pub(super) async fn remove_case_finalizers_in(client: &kube::Client, namespace: &str) {
    for kind in [
        Kind::Pod,
        Kind::PodClique,
        Kind::PodCliqueScalingGroup,
        Kind::PodCliqueSet,
    ] {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &api_resource(kind));
        let Ok(list) = api.list(&Default::default()).await else {
            continue;
        };
        for object in list.items {
            let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
            let ops: Vec<Value> = finalizers
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, f)| f.starts_with(CASE_FINALIZER_PREFIX))
                .flat_map(|(i, f)| {
                    let path = format!("/metadata/finalizers/{i}");
                    [
                        json!({"op": "test", "path": path, "value": f}),
                        json!({"op": "remove", "path": path}),
                    ]
                })
                .collect();
            if ops.is_empty() {
                continue;
            }
            let name = object.metadata.name.clone().unwrap_or_default();
            let Ok(patch) = serde_json::from_value(Value::Array(ops)) else {
                continue;
            };
            if let Err(e) = api
                .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
            {
                tracing::warn!(
                    kind = %kind,
                    name,
                    error = %api_error_text(&e),
                    "failed to remove a finalizer the case added"
                );
            }
        }
    }
}

impl CaseRun<'_> {
    /// [`remove_case_finalizers_in`] the case's namespace.
    pub(super) async fn remove_case_finalizers(&self) {
        remove_case_finalizers_in(&self.run.client, &self.namespace).await;
    }

    fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.run.client.clone(),
            &self.namespace,
            &api_resource(kind),
        )
    }

    fn resolve(&self, target: &Addressee) -> Result<(Kind, String), StepError> {
        match target {
            Addressee::Object(o) => Ok((o.kind, o.name.clone())),
            Addressee::Fixture(f) => self
                .run
                .catalog
                .fixture(f)
                .map(|fx| (Kind::PodCliqueSet, fx.object_name.clone()))
                .ok_or_else(|| StepError::Error(format!("unknown fixture {f}"))),
        }
    }

    fn manifest(&self, fixture: &str, patch: Option<&Value>) -> Result<Value, StepError> {
        let fx = self
            .run
            .catalog
            .fixture(fixture)
            .ok_or_else(|| StepError::Error(format!("unknown fixture {fixture}")))?;
        let mut manifest = fx.manifest.clone();
        if let Some(patch) = patch {
            merge_patch(&mut manifest, patch);
        }
        let mut manifest = self
            .vocab()
            .translate_manifest(Kind::PodCliqueSet, &manifest)
            .map_err(|e| StepError::Skip(e.to_string()))?;
        manifest["metadata"]["namespace"] = json!(self.namespace);
        // A node lost with pods that must be alone on it, on nodes the case shares: the
        // case's pods are asked to spread over the nodes.
        if super::requirements::loses_node_alone(self.case) && !self.run.pods.private_nodes() {
            super::requirements::spread_pods(&mut manifest);
        }
        Ok(manifest)
    }

    /// `apply`: creates the PodCliqueSet of a fixture (patched, in the revision's spelling).
    pub(super) async fn apply(
        &self,
        fixture: &str,
        patch: Option<&Value>,
    ) -> Result<(), StepError> {
        let manifest = self.manifest(fixture, patch)?;
        let object: DynamicObject = serde_json::from_value(manifest)
            .map_err(|e| StepError::Error(format!("fixture {fixture} is not an object: {e}")))?;
        let created = self
            .api(Kind::PodCliqueSet)
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| {
                fail(format!(
                    "failed to create fixture {fixture}: {}",
                    api_error_text(&e)
                ))
            })?;
        self.observer
            .harness_wrote(&serde_json::to_value(&created).unwrap_or_default());
        Ok(())
    }

    async fn updated_object(&self, update: &Update) -> Result<(Kind, String, Value), StepError> {
        let (kind, name) = self.resolve(&update.target)?;
        let live = self.api(kind).get(&name).await.map_err(|e| {
            fail(format!(
                "failed to read {kind} {name}: {}",
                api_error_text(&e)
            ))
        })?;
        let mut object = serde_json::to_value(&live).unwrap_or_default();
        if let Some(patch) = &update.patch {
            let patch = if kind == Kind::PodCliqueSet && update.subresource == Subresource::Main {
                self.vocab()
                    .translate_manifest(kind, patch)
                    .map_err(|e| StepError::Skip(e.to_string()))?
            } else {
                patch.clone()
            };
            merge_patch(&mut object, &patch);
        }
        let now = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        for write in &update.conditions {
            let reason = write.reason.and_then(|r| self.vocab().name(r));
            if write.status == crate::catalog::ConditionStatus::True {
                self.vocab()
                    .set_terminal(kind, &mut object, write.condition, reason, &now)
                    .map_err(|e| StepError::Skip(e.to_string()))?;
            } else {
                let type_ = self
                    .vocab()
                    .require(write.condition)
                    .map_err(|e| StepError::Skip(e.to_string()))?;
                Vocabulary::set_condition(&mut object, type_, write.status.as_str(), reason, &now);
            }
        }
        Ok((kind, name, object))
    }

    /// Sends an update, reading the live object afresh and retrying when the implementation
    /// wrote it in between (409 Conflict): the harness's change is what is being tested, not
    /// its timing.
    async fn send_update(&self, update: &Update) -> Result<Value, kube::Error> {
        use backon::{ExponentialBuilder, Retryable};
        (|| self.send_update_once(update))
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(5))
                    .with_max_delay(Duration::from_millis(200))
                    .with_max_times(9),
            )
            .when(|e| matches!(e, kube::Error::Api(status) if status.code == 409))
            .await
    }

    async fn send_update_once(&self, update: &Update) -> Result<Value, kube::Error> {
        let (kind, name, object) = match self.updated_object(update).await {
            Ok(x) => x,
            Err(_) => {
                return Err(kube::Error::Service(
                    format!("failed to prepare the update of {}", update.target).into(),
                ));
            }
        };
        let api = self.api(kind);
        let written = match update.subresource {
            Subresource::Main => {
                let object: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                serde_json::to_value(api.replace(&name, &PostParams::default(), &object).await?)
                    .unwrap_or_default()
            }
            Subresource::Status => {
                let object: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                serde_json::to_value(
                    api.replace_status(&name, &PostParams::default(), &object)
                        .await?,
                )
                .unwrap_or_default()
            }
            Subresource::Scale => {
                let patch = update.patch.clone().unwrap_or_else(|| json!({}));
                let scale = api
                    .patch_scale(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                serde_json::to_value(scale).unwrap_or_default()
            }
        };
        Ok(written)
    }

    /// `update`: writes the main resource, `status` or `scale` of an object.
    pub(super) async fn update(&self, update: &Update) -> Result<(), StepError> {
        // Surface preparation problems (missing object, unsupported revision) as such.
        self.updated_object(update).await?;
        let written = self.send_update(update).await.map_err(|e| {
            fail(format!(
                "failed to update {}: {}",
                update.target,
                api_error_text(&e)
            ))
        })?;
        self.observer.harness_wrote(&written);
        Ok(())
    }

    /// `delete` / `force-delete`: deletes an object in the background.
    pub(super) async fn delete(&self, delete: &Delete) -> Result<(), StepError> {
        let (kind, name) = self.resolve(&delete.target)?;
        let api = self.api(kind);
        if let Ok(live) = api.get(&name).await
            && let Some(uid) = live.metadata.uid.as_deref()
        {
            self.observer.harness_deleted(uid);
        }
        let params = DeleteParams {
            grace_period_seconds: delete.force.then_some(0),
            ..DeleteParams::background()
        };
        api.delete(&name, &params).await.map_err(|e| {
            fail(format!(
                "failed to delete {kind} {name}: {}",
                api_error_text(&e)
            ))
        })?;
        Ok(())
    }

    /// `reject`: the request must be refused with a 4xx naming the field, and create nothing.
    pub(super) async fn reject(&self, reject: &Reject) -> Result<(), StepError> {
        let (result, created_name) = match &reject.request {
            Request::Apply(apply) => {
                let manifest = self.manifest(&apply.fixture, apply.patch.as_ref())?;
                let name = manifest
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let object: DynamicObject = serde_json::from_value(manifest)
                    .map_err(|e| StepError::Error(format!("fixture is not an object: {e}")))?;
                (
                    self.api(Kind::PodCliqueSet)
                        .create(&PostParams::default(), &object)
                        .await
                        .map(|o| serde_json::to_value(o).unwrap_or_default()),
                    Some(name),
                )
            }
            Request::Update(update) => {
                self.updated_object(update).await?;
                (self.send_update(update).await, None)
            }
        };
        match result {
            Ok(_) => Err(fail(format!(
                "the request was accepted; it must be rejected naming `{}`",
                reject.field
            ))),
            Err(kube::Error::Api(status)) => {
                if !(400..500).contains(&status.code) {
                    return Err(fail(format!(
                        "the request failed with {} instead of a 4xx rejection: {}",
                        status.code, status.message
                    )));
                }
                if let Some(code) = reject.code
                    && status.code != code
                {
                    return Err(fail(format!(
                        "rejected with code {} instead of {code}: {}",
                        status.code, status.message
                    )));
                }
                let mut text = status.message.clone();
                if let Some(details) = &status.details {
                    for cause in &details.causes {
                        text.push_str(&format!(" {} {}", cause.field, cause.message));
                    }
                }
                if !matcher::message_names_field(&text, &reject.field, self.vocab()) {
                    return Err(fail(format!(
                        "the rejection does not name `{}`: {}",
                        reject.field, status.message
                    )));
                }
                if let Some(name) = created_name
                    && self
                        .api(Kind::PodCliqueSet)
                        .get_opt(&name)
                        .await
                        .ok()
                        .flatten()
                        .is_some()
                {
                    return Err(fail("the request was rejected but the object exists"));
                }
                Ok(())
            }
            Err(other) => Err(StepError::Error(format!("the request failed: {other}"))),
        }
    }
}
