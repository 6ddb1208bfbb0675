//! An implementation's own CRDs and admission webhooks, set up the way envtest's
//! `CRDInstallOptions` and `WebhookInstallOptions` do for an operator run out of cluster: the
//! CRDs are read from a folder and installed instead of the reference operator's; the webhook
//! configurations are read from a file and pointed at the implementation's webhook server on
//! loopback (`https://127.0.0.1:<port><path>`), trusting a CA the harness generates, whose
//! serving certificate the implementation finds in a certificate folder (`tls.crt`,
//! `tls.key`, `ca.crt`).
//!
//! Bad input is reported with the file, the line and the field, and nothing is installed from
//! a file that has a problem.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::Value;

use crate::cluster::embedded::certs;
use crate::cluster::{HARNESS_MANAGER, TargetError};
use crate::host::{free_port, write_private};

/// A problem with the implementation's CRDs, webhooks or configuration template.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A file could not be read or written.
    #[error("failed to use {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A document is not what it must be.
    #[error("{}:{line}: {field}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line of the document (or of the problem, when known), from 1.
        line: usize,
        /// The field at fault (`webhooks[0].clientConfig`), or `document`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The serving certificate could not be made.
    #[error("failed to make the webhook serving certificate")]
    Certs(#[from] certs::CertError),
}

/// Where the implementation serves its webhooks, and with what certificate.
#[derive(Debug, Clone)]
pub struct WebhookServing {
    /// Folder with `tls.crt`, `tls.key` (0600) and `ca.crt`: `{cert_dir}`.
    pub cert_dir: PathBuf,
    /// Loopback port the webhook server must listen on: `{webhook_port}`.
    pub port: u16,
    /// PEM of the CA the apiserver trusts for it.
    pub ca_pem: String,
}

impl WebhookServing {
    /// Generates a CA and a serving certificate for 127.0.0.1 and `localhost` into
    /// `cert_dir`, and picks a free port.
    pub fn generate(cert_dir: &Path) -> Result<WebhookServing, AdmissionError> {
        let pair = certs::generate_serving(cert_dir, "grove-conformance webhook")?;
        let port = free_port().map_err(|source| AdmissionError::Io {
            path: cert_dir.to_path_buf(),
            source,
        })?;
        Ok(WebhookServing {
            cert_dir: cert_dir.to_path_buf(),
            port,
            ca_pem: pair.ca_pem,
        })
    }
}

/// What the implementation brings besides its command (all optional).
#[derive(Debug, Clone, Default)]
pub struct AdmissionOptions {
    /// Folder of its CRDs, installed instead of the reference operator's.
    pub crds: Option<PathBuf>,
    /// File of its webhook configurations.
    pub webhooks: Option<PathBuf>,
    /// A configuration file template, rendered to `{config}`.
    pub config_template: Option<PathBuf>,
}

/// The implementation's setup, prepared before the target is acquired.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// Its CRDs, when it brings them.
    pub crds: Option<Vec<CustomResourceDefinition>>,
    /// Its webhook configurations, pointed at `serving`.
    pub webhooks: Vec<WebhookConfiguration>,
    /// Where it serves them, when it has webhooks or a configuration template.
    pub serving: Option<WebhookServing>,
    /// `{cert_dir}`, `{webhook_port}` and `{config}`, as far as they apply.
    pub placeholders: Vec<(String, String)>,
}

impl Prepared {
    /// Resources whose writes its webhooks reject while it does not answer.
    pub fn fail_closed_resources(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .webhooks
            .iter()
            .flat_map(WebhookConfiguration::fail_closed_resources)
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Reads and checks everything `options` names, generates the serving certificate under
/// `scratch` and renders the configuration template there; nothing touches a cluster yet, so
/// bad input fails before anything is installed.
pub fn prepare(options: &AdmissionOptions, scratch: &Path) -> Result<Prepared, AdmissionError> {
    let mut prepared = Prepared {
        crds: options.crds.as_deref().map(load_crds).transpose()?,
        ..Prepared::default()
    };
    if options.webhooks.is_none() && options.config_template.is_none() {
        return Ok(prepared);
    }
    let serving = WebhookServing::generate(&scratch.join("webhook-certs"))?;
    prepared.placeholders = vec![
        (
            "cert_dir".into(),
            serving.cert_dir.to_string_lossy().into_owned(),
        ),
        ("webhook_port".into(), serving.port.to_string()),
    ];
    if let Some(file) = &options.webhooks {
        prepared.webhooks = load_webhooks(file, &serving)?;
    }
    if let Some(template) = &options.config_template {
        let out = scratch.join("implementation-config.yaml");
        render_config(template, &out, &prepared.placeholders)?;
        prepared
            .placeholders
            .push(("config".into(), out.to_string_lossy().into_owned()));
    }
    prepared.serving = Some(serving);
    Ok(prepared)
}

/// One admission webhook configuration of the implementation.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookConfiguration {
    /// Defaulting.
    Mutating(MutatingWebhookConfiguration),
    /// Validation.
    Validating(ValidatingWebhookConfiguration),
}

impl WebhookConfiguration {
    fn name(&self) -> String {
        match self {
            WebhookConfiguration::Mutating(m) => m.metadata.name.clone(),
            WebhookConfiguration::Validating(v) => v.metadata.name.clone(),
        }
        .unwrap_or_default()
    }

    /// The plural resources (`podcliquesets`, no subresources) whose writes a webhook of this
    /// configuration rejects while the implementation is not answering (`failurePolicy: Fail`,
    /// the default).
    pub fn fail_closed_resources(&self) -> Vec<String> {
        let hooks: Vec<(Option<&str>, Option<&Vec<_>>)> = match self {
            WebhookConfiguration::Mutating(m) => m
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.failure_policy.as_deref(), w.rules.as_ref()))
                .collect(),
            WebhookConfiguration::Validating(v) => v
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.failure_policy.as_deref(), w.rules.as_ref()))
                .collect(),
        };
        hooks
            .into_iter()
            .filter(|(policy, _)| policy.is_none_or(|p| p == "Fail"))
            .flat_map(|(_, rules)| rules.into_iter().flatten())
            .flat_map(|rule| rule.resources.iter().flatten())
            .filter(|r| !r.contains('/'))
            .cloned()
            .collect()
    }
}

/// The documents of a YAML stream with the line each starts on.
fn documents(path: &Path) -> Result<Vec<(usize, Value)>, AdmissionError> {
    let text = std::fs::read_to_string(path).map_err(|source| AdmissionError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    let mut line = 1;
    for chunk in split_documents(&text) {
        let start = line;
        line += chunk.lines().count() + 1;
        let value = match serde_yaml::from_str::<Option<Value>>(chunk) {
            Ok(Some(v)) if !v.is_null() => v,
            Ok(_) => continue,
            Err(e) => {
                return Err(AdmissionError::Invalid {
                    path: path.to_path_buf(),
                    line: start - 1 + e.location().map_or(1, |l| l.line()),
                    field: "document".into(),
                    message: e.to_string(),
                });
            }
        };
        out.push((start, value));
    }
    Ok(out)
}

/// The documents of a YAML stream, split at `---` lines (the separator lines themselves are
/// left out, so a document's lines count from the line after its separator).
fn split_documents(text: &str) -> Vec<&str> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(&text[start..offset]);
            start = offset + line.len();
        }
        offset += line.len();
    }
    docs.push(&text[start..]);
    docs
}

fn invalid(path: &Path, line: usize, field: &str, message: impl Into<String>) -> AdmissionError {
    AdmissionError::Invalid {
        path: path.to_path_buf(),
        line,
        field: field.into(),
        message: message.into(),
    }
}

/// Every CustomResourceDefinition in the `*.yaml`/`*.yml`/`*.json` files of `dir` (sorted by
/// file name); any other kind of document is an error.
pub fn load_crds(dir: &Path) -> Result<Vec<CustomResourceDefinition>, AdmissionError> {
    let entries = std::fs::read_dir(dir).map_err(|source| AdmissionError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        for (line, doc) in documents(&file)? {
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind != "CustomResourceDefinition" {
                return Err(invalid(
                    &file,
                    line,
                    "kind",
                    format!("expected CustomResourceDefinition, found `{kind}`"),
                ));
            }
            let crd = CustomResourceDefinition::deserialize(&doc)
                .map_err(|e| invalid(&file, line, "document", e.to_string()))?;
            crds.push(crd);
        }
    }
    if crds.is_empty() {
        return Err(invalid(
            dir,
            1,
            "document",
            "no CustomResourceDefinition found",
        ));
    }
    Ok(crds)
}

/// The webhook configurations of `file`, each webhook pointed at `serving`: the URL's (or the
/// service's) path on `https://127.0.0.1:<port>`, and `caBundle` set to the harness CA.
pub fn load_webhooks(
    file: &Path,
    serving: &WebhookServing,
) -> Result<Vec<WebhookConfiguration>, AdmissionError> {
    let mut out = Vec::new();
    for (line, mut doc) in documents(file)? {
        // The harness sets the CA bundle; whatever stands there (often a placeholder that is
        // not base64) is dropped unread.
        for hook in doc
            .get_mut("webhooks")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(config) = hook.get_mut("clientConfig").and_then(Value::as_object_mut) {
                config.remove("caBundle");
            }
        }
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        let point = |i: usize, config: &mut WebhookClientConfig| -> Result<(), AdmissionError> {
            let field = format!("webhooks[{i}].clientConfig");
            let path = match (&config.url, &config.service) {
                (Some(url), _) => url_path(url).ok_or_else(|| {
                    invalid(file, line, &format!("{field}.url"), "not an https URL")
                })?,
                (None, Some(service)) => service.path.clone().unwrap_or_else(|| "/".into()),
                (None, None) => {
                    return Err(invalid(
                        file,
                        line,
                        &field,
                        "has neither `url` nor `service`",
                    ));
                }
            };
            config.url = Some(format!("https://127.0.0.1:{}{path}", serving.port));
            config.service = None;
            config.ca_bundle = Some(ByteString(serving.ca_pem.clone().into_bytes()));
            Ok(())
        };
        let config = match kind {
            "MutatingWebhookConfiguration" => {
                let mut c = MutatingWebhookConfiguration::deserialize(&doc)
                    .map_err(|e| invalid(file, line, "document", e.to_string()))?;
                for (i, w) in c.webhooks.iter_mut().flatten().enumerate() {
                    point(i, &mut w.client_config)?;
                }
                WebhookConfiguration::Mutating(c)
            }
            "ValidatingWebhookConfiguration" => {
                let mut c = ValidatingWebhookConfiguration::deserialize(&doc)
                    .map_err(|e| invalid(file, line, "document", e.to_string()))?;
                for (i, w) in c.webhooks.iter_mut().flatten().enumerate() {
                    point(i, &mut w.client_config)?;
                }
                WebhookConfiguration::Validating(c)
            }
            other => {
                return Err(invalid(
                    file,
                    line,
                    "kind",
                    format!(
                        "expected MutatingWebhookConfiguration or ValidatingWebhookConfiguration, found `{other}`"
                    ),
                ));
            }
        };
        if config.name().is_empty() {
            return Err(invalid(file, line, "metadata.name", "is missing"));
        }
        out.push(config);
    }
    Ok(out)
}

/// The path (with query) of an `https://host[:port]/path` URL.
fn url_path(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    Some(match rest.find('/') {
        Some(i) => rest[i..].to_string(),
        None => "/".into(),
    })
}

/// Installs the webhook configurations (server-side apply).
pub async fn install_webhooks(
    client: &Client,
    configs: &[WebhookConfiguration],
) -> Result<(), TargetError> {
    let params = PatchParams::apply(HARNESS_MANAGER).force();
    for config in configs {
        let name = config.name();
        let err = |source: kube::Error| TargetError::Webhook {
            name: name.clone(),
            source: Box::new(source),
        };
        match config {
            WebhookConfiguration::Mutating(c) => {
                let mut c = c.clone();
                c.metadata.managed_fields = None;
                let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(
                    &name,
                    &params,
                    &Patch::Apply(with_type(&c, "MutatingWebhookConfiguration")),
                )
                .await
                .map_err(err)?;
            }
            WebhookConfiguration::Validating(c) => {
                let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(
                    &name,
                    &params,
                    &Patch::Apply(with_type(c, "ValidatingWebhookConfiguration")),
                )
                .await
                .map_err(err)?;
            }
        }
    }
    Ok(())
}

/// Removes the webhook configurations again (best effort): a cluster that outlives the run
/// is not left calling a webhook server that is gone.
pub async fn remove_webhooks(client: &Client, configs: &[WebhookConfiguration]) {
    for config in configs {
        let name = config.name();
        let result = match config {
            WebhookConfiguration::Mutating(_) => {
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(drop)
            }
            WebhookConfiguration::Validating(_) => {
                Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(drop)
            }
        };
        if let Err(error) = result {
            tracing::warn!(%name, %error, "failed to remove a webhook configuration");
        }
    }
}

fn with_type(object: &impl serde::Serialize, kind: &str) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    value["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    value["kind"] = kind.into();
    value
}

/// Replaces every `{name}` of `placeholders` in `text`.
pub fn render(text: &str, placeholders: &[(String, String)]) -> String {
    placeholders
        .iter()
        .fold(text.to_string(), |t, (name, value)| {
            t.replace(&format!("{{{name}}}"), value)
        })
}

/// Renders the configuration template `template` into `out` (0600: it may hold secrets).
pub fn render_config(
    template: &Path,
    out: &Path,
    placeholders: &[(String, String)],
) -> Result<(), AdmissionError> {
    let text = std::fs::read_to_string(template).map_err(|source| AdmissionError::Io {
        path: template.to_path_buf(),
        source,
    })?;
    write_private(out, render(&text, placeholders).as_bytes()).map_err(|source| {
        AdmissionError::Io {
            path: out.to_path_buf(),
            source,
        }
    })
}

/// The implementation's webhook server did not come up.
#[derive(Debug, thiserror::Error)]
#[error(
    "the implementation's webhook server did not listen on 127.0.0.1:{port} within {timeout:?}"
)]
pub struct NotListening {
    /// The port.
    pub port: u16,
    /// How long the harness waited.
    pub timeout: Duration,
}

/// Waits until something accepts connections on `127.0.0.1:port` (the implementation's
/// webhook server is up), retrying with a growing delay until `timeout`.
pub async fn wait_listening(port: u16, timeout: Duration) -> Result<(), NotListening> {
    use backon::{ExponentialBuilder, Retryable};
    let connect = || async { tokio::net::TcpStream::connect(("127.0.0.1", port)).await };
    let attempts = connect
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(500))
                .with_max_times(usize::MAX),
        )
        .when(|_| true);
    // The retries never give up by themselves: only the timeout ends them.
    match tokio::time::timeout(timeout, attempts).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) | Err(_) => Err(NotListening { port, timeout }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serving() -> WebhookServing {
        WebhookServing {
            cert_dir: PathBuf::from("/c"),
            port: 4443,
            ca_pem: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n".into(),
        }
    }

    #[test]
    fn webhooks_are_pointed_at_the_harness_port_with_its_ca() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("webhooks.yaml");
        std::fs::write(
            &file,
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: d}\nwebhooks:\n- name: d.x.io\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  clientConfig: {url: \"https://127.0.0.1:29443/webhooks/default\", caBundle: \"CA_BUNDLE\"}\n  rules: [{apiGroups: [grove.io], apiVersions: [v1alpha1], operations: [CREATE], resources: [podcliquesets]}]\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n- name: v.x.io\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Ignore\n  clientConfig: {service: {name: s, namespace: n, path: /validate}}\n  rules: [{apiGroups: [grove.io], apiVersions: [v1alpha1], operations: [CREATE], resources: [podcliques, podcliques/status]}]\n",
        )
        .unwrap();
        let configs = load_webhooks(&file, &serving()).unwrap();
        let WebhookConfiguration::Mutating(m) = &configs[0] else {
            panic!("{configs:?}")
        };
        let cc = &m.webhooks.as_ref().unwrap()[0].client_config;
        assert_eq!(
            cc.url.as_deref(),
            Some("https://127.0.0.1:4443/webhooks/default")
        );
        assert_eq!(
            cc.ca_bundle.as_ref().unwrap().0,
            serving().ca_pem.into_bytes()
        );
        assert_eq!(configs[0].fail_closed_resources(), ["podcliquesets"]);
        let WebhookConfiguration::Validating(v) = &configs[1] else {
            panic!("{configs:?}")
        };
        let cc = &v.webhooks.as_ref().unwrap()[0].client_config;
        assert_eq!(cc.url.as_deref(), Some("https://127.0.0.1:4443/validate"));
        assert!(cc.service.is_none());
        assert!(
            configs[1].fail_closed_resources().is_empty(),
            "Ignore fails open"
        );
    }

    #[test]
    fn bad_webhook_files_name_the_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("webhooks.yaml");
        std::fs::write(
            &file,
            "kind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks: []\n---\nkind: ConfigMap\nmetadata: {name: c}\n",
        )
        .unwrap();
        let err = load_webhooks(&file, &serving()).unwrap_err().to_string();
        assert!(err.contains("webhooks.yaml:5: kind: expected"), "{err}");
        std::fs::write(
            &file,
            "kind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n- name: v.x.io\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  clientConfig: {}\n",
        )
        .unwrap();
        let err = load_webhooks(&file, &serving()).unwrap_err().to_string();
        assert!(
            err.contains(":1: webhooks[0].clientConfig: has neither"),
            "{err}"
        );
        std::fs::write(&file, "kind: [unclosed\n").unwrap();
        let err = load_webhooks(&file, &serving()).unwrap_err().to_string();
        assert!(err.contains("webhooks.yaml:"), "{err}");
    }

    #[test]
    fn crds_are_read_from_every_file_of_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let crd = |name: &str| {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {name}s.x.io}}\nspec:\n  group: x.io\n  scope: Namespaced\n  names: {{plural: {name}s, kind: K{name}}}\n  versions: [{{name: v1, served: true, storage: true}}]\n"
            )
        };
        std::fs::write(dir.path().join("b.yaml"), crd("b")).unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            format!("{}---\n{}", crd("a"), crd("c")),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let names: Vec<String> = load_crds(dir.path())
            .unwrap()
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["as.x.io", "cs.x.io", "bs.x.io"]);
        std::fs::write(dir.path().join("c.yaml"), "kind: Secret\n").unwrap();
        let err = load_crds(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("c.yaml:1: kind: expected CustomResourceDefinition"),
            "{err}"
        );
    }

    #[test]
    fn templates_are_rendered_privately() {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("config.tmpl");
        std::fs::write(
            &template,
            "port: {webhook_port}\ncerts: {cert_dir}\nkeep: {other}\n",
        )
        .unwrap();
        let out = dir.path().join("config.yaml");
        let placeholders = [
            ("webhook_port".to_string(), "4443".to_string()),
            ("cert_dir".to_string(), "/c".to_string()),
        ];
        render_config(&template, &out, &placeholders).unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "port: 4443\ncerts: /c\nkeep: {other}\n"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[tokio::test]
    async fn a_listening_port_is_noticed_and_a_silent_one_times_out() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        wait_listening(port, Duration::from_secs(5)).await.unwrap();
        drop(listener);
        // A port bound but not listening refuses connections, and no other process can take
        // it meanwhile (a freed port could be, and then it would answer).
        let silent = tokio::net::TcpSocket::new_v4().unwrap();
        silent.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = silent.local_addr().unwrap().port();
        let err = wait_listening(port, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("did not listen"), "{err}");
    }
}
