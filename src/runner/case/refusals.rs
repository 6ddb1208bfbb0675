//! `refuse` steps: the apiserver refuses one kind of write in the case's namespace, as a
//! policy engine or a quota of a real cluster does, until the refusal is lifted.
//!
//! A refusal is a ValidatingAdmissionPolicy and its binding, both named after the case's
//! namespace and the step, whose one validation is `false` (`Forbidden`, HTTP 403). The
//! apiserver applies a policy once its own informer has it, a moment after the create: so the
//! policy also refuses the create of one ConfigMap, its probe, and the step waits until a
//! dry-run create of that ConfigMap is refused (and, when the refusal is lifted, accepted
//! again). Nothing is instrumented in the implementation: every client meets the refusal, the
//! harness's own steps included.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::steps::{CaseRun, StepError};
use super::writes::api_error_text;
use crate::catalog::{Refusal, RefuseStep, RefusedVerb};
use crate::runner::observe::api_resource;

/// How long the apiserver may take to start (or stop) applying a policy just written.
const TAKES_EFFECT_WITHIN: Duration = Duration::from_secs(30);

/// Why a refusal did not start or end as the step asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum RefusalError {
    /// The probe's dry-run create failed for another reason than the refusal.
    #[error("the probe of refusal {name} failed: {}", api_error_text(.error))]
    Probe {
        /// The refusal.
        name: String,
        /// The apiserver's answer.
        error: kube::Error,
    },
    /// The apiserver did not start (or stop) applying the policy in time.
    #[error(
        "the apiserver did not {} refusal {name} within {TAKES_EFFECT_WITHIN:?}",
        if *.applied { "apply" } else { "stop applying" }
    )]
    TookTooLong {
        /// The refusal.
        name: String,
        /// Whether it was to be applied (or lifted).
        applied: bool,
    },
    /// The policy or its binding could not be deleted.
    #[error("could not lift refusal {name}: {}", api_error_text(.error))]
    Lift {
        /// The refusal.
        name: String,
        /// The apiserver's answer.
        error: kube::Error,
    },
    /// The policy or its binding could not be created.
    #[error("could not create {object} {name}: {}", api_error_text(.error))]
    Create {
        /// `policy` or `binding`.
        object: &'static str,
        /// The refusal.
        name: String,
        /// The apiserver's answer.
        error: kube::Error,
    },
    /// The manifests did not build.
    #[error("refusal {name}: its manifests do not build")]
    Manifests {
        /// The refusal.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl From<RefusalError> for StepError {
    fn from(e: RefusalError) -> Self {
        StepError::Error(crate::errors::chain(&e).to_string())
    }
}

/// The refusals of one case that stand.
#[derive(Default)]
pub(super) struct Refusals {
    /// The names (policy, binding and probe alike) of the refusals in force.
    active: Arc<Mutex<BTreeSet<String>>>,
    /// The `for:` timers that lift a refusal.
    timers: Vec<tokio::task::JoinHandle<()>>,
    /// Refusals started so far (each gets a name of its own).
    started: usize,
}

/// The admission operation of `verb`.
fn operation(verb: RefusedVerb) -> &'static str {
    match verb {
        RefusedVerb::Create => "CREATE",
        RefusedVerb::Update => "UPDATE",
        RefusedVerb::Delete => "DELETE",
    }
}

/// The policy and binding refusing `refusal` in `namespace`, both named `name`; the policy
/// also refuses the create of the ConfigMap `name` there (the probe).
fn manifests(
    name: &str,
    namespace: &str,
    refusal: &Refusal,
) -> serde_json::Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    let resource = api_resource(refusal.kind);
    let plural = if refusal.status {
        format!("{}/status", resource.plural)
    } else {
        resource.plural.clone()
    };
    let labels = json!({ "app.kubernetes.io/managed-by": "grove-conformance" });
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [
                {
                    "apiGroups": [resource.group],
                    "apiVersions": [resource.version],
                    "operations": [operation(refusal.verb)],
                    "resources": [plural],
                },
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["configmaps"],
                },
            ]},
            "matchConditions": [{
                "name": "refused-or-probe",
                "expression": format!(
                    "request.resource.resource != 'configmaps' || request.name == '{name}'"
                ),
            }],
            "validations": [{
                "expression": "false",
                "reason": "Forbidden",
                "message": format!(
                    "refused: the conformance case in namespace {namespace} refuses every `{refusal}` request here for now"
                ),
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": { "namespaceSelector": { "matchLabels": {
                "kubernetes.io/metadata.name": namespace,
            }}},
        },
    });
    Ok((
        serde_json::from_value(policy)?,
        serde_json::from_value(binding)?,
    ))
}

/// Waits until a dry-run create of the probe ConfigMap `name` is refused (`refused`) or
/// accepted (`!refused`): the apiserver applies the policy, or no longer does.
async fn probe(
    client: &Client,
    namespace: &str,
    name: &str,
    refused: bool,
) -> Result<(), RefusalError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut probe = ConfigMap::default();
    probe.metadata.name = Some(name.to_string());
    let start = Instant::now();
    loop {
        let now_refused = match api.create(&params, &probe).await {
            Ok(_) => false,
            Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(name) => true,
            Err(error) => {
                return Err(RefusalError::Probe {
                    name: name.to_owned(),
                    error,
                });
            }
        };
        if now_refused == refused {
            return Ok(());
        }
        if start.elapsed() > TAKES_EFFECT_WITHIN {
            return Err(RefusalError::TookTooLong {
                name: name.to_owned(),
                applied: refused,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes the binding and policy `name` and waits until the apiserver no longer applies it.
async fn lift(client: &Client, namespace: &str, name: &str) -> Result<(), RefusalError> {
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    for result in [
        bindings
            .delete(name, &DeleteParams::default())
            .await
            .map(drop),
        policies
            .delete(name, &DeleteParams::default())
            .await
            .map(drop),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => {
                return Err(RefusalError::Lift {
                    name: name.to_owned(),
                    error,
                });
            }
        }
    }
    probe(client, namespace, name, false).await
}

impl CaseRun<'_> {
    /// Runs a `refuse` step: starts a refusal and waits until the apiserver applies it, or
    /// lifts every refusal of the case and waits until none applies.
    pub(super) async fn refuse(&mut self, step: &RefuseStep) -> Result<(), StepError> {
        let client = self.run.client.clone();
        let namespace = self.namespace.clone();
        let refusal = match step {
            RefuseStep::Lift => {
                return Ok(self.lift_refusals().await?);
            }
            RefuseStep::Start(refusal) => refusal,
        };
        self.refusals.started += 1;
        let name = format!("{namespace}-refuse-{}", self.refusals.started);
        let (policy, binding) =
            manifests(&name, &namespace, refusal).map_err(|source| RefusalError::Manifests {
                name: name.clone(),
                source,
            })?;
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
        policies
            .create(&PostParams::default(), &policy)
            .await
            .map_err(|e| match &e {
                // A cluster that serves no admission policies, or credentials that may not
                // write them: the case cannot run here, which is no verdict on anything.
                kube::Error::Api(s) if s.code == 403 || s.code == 404 => StepError::Skip(format!(
                    "the case has the apiserver refuse writes through a ValidatingAdmissionPolicy, which this cluster does not allow: {}",
                    api_error_text(&e)
                )),
                _ => RefusalError::Create {
                    object: "policy",
                    name: name.clone(),
                    error: e,
                }
                .into(),
            })?;
        // Recorded once the policy exists, so that the case's end lifts whatever of it was made.
        self.refusals
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone());
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .map_err(|error| RefusalError::Create {
                object: "binding",
                name: name.clone(),
                error,
            })?;
        probe(&client, &namespace, &name, true).await?;
        if let Some(lasts) = refusal.lasts {
            let active = self.refusals.active.clone();
            let lasts = lasts.as_std();
            self.refusals.timers.push(tokio::spawn(async move {
                tokio::time::sleep(lasts).await;
                match lift(&client, &namespace, &name).await {
                    Ok(()) => {
                        active
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&name);
                    }
                    // Left in `active`: the case's end lifts it again.
                    Err(error) => tracing::warn!(
                        error = %crate::errors::chain(&error),
                        "a refusal was not lifted in time"
                    ),
                }
            }));
        }
        Ok(())
    }

    /// Lifts every refusal of the case that stands, waiting until the apiserver applies none;
    /// the first failure is returned once every refusal was tried.
    pub(super) async fn lift_refusals(&mut self) -> Result<(), RefusalError> {
        for timer in self.refusals.timers.drain(..) {
            timer.abort();
        }
        let names: Vec<String> = std::mem::take(
            &mut *self
                .refusals
                .active
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
        .into_iter()
        .collect();
        let mut first = None;
        for name in names {
            if let Err(e) = lift(&self.run.client, &self.namespace, &name).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Kind;

    fn refusal(verb: RefusedVerb, kind: Kind, status: bool) -> Refusal {
        Refusal {
            verb,
            kind,
            status,
            lasts: None,
        }
    }

    #[test]
    fn a_refusal_names_the_operation_resource_and_namespace() {
        let (policy, binding) = manifests(
            "ns-a-refuse-1",
            "ns-a",
            &refusal(RefusedVerb::Delete, Kind::Pod, false),
        )
        .unwrap();
        let spec = serde_json::to_value(policy.spec.unwrap()).unwrap();
        let rules = &spec["matchConstraints"]["resourceRules"];
        assert_eq!(rules[0]["operations"], json!(["DELETE"]));
        assert_eq!(rules[0]["resources"], json!(["pods"]));
        assert_eq!(rules[0]["apiGroups"], json!([""]));
        assert_eq!(rules[1]["resources"], json!(["configmaps"]));
        assert_eq!(spec["validations"][0]["reason"], "Forbidden");
        let binding = serde_json::to_value(binding.spec.unwrap()).unwrap();
        assert_eq!(binding["policyName"], "ns-a-refuse-1");
        assert_eq!(
            binding["matchResources"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "ns-a"
        );
    }

    #[test]
    fn a_status_refusal_names_the_status_subresource() {
        let (policy, _) = manifests(
            "n",
            "ns",
            &refusal(RefusedVerb::Update, Kind::PodClique, true),
        )
        .unwrap();
        let spec = serde_json::to_value(policy.spec.unwrap()).unwrap();
        let rule = &spec["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["resources"], json!(["podcliques/status"]));
        assert_eq!(rule["apiGroups"], json!(["grove.io"]));
        assert_eq!(rule["operations"], json!(["UPDATE"]));
        let message = spec["validations"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("every `update PodClique status` request"),
            "{message}"
        );
    }
}
