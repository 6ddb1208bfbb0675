//! What a run's reports say produced them: this harness (version and commit), the catalog's
//! digest, the target and its apiserver's version, how the implementation ran (its command,
//! image and image digest, or Deployment and its image), the selection and settings, the
//! start and the command line, and the implementer's names given with `--organization` and
//! the like.

use grove_conformance::implementation::ImplementationSpec;
use grove_conformance::report::{
    Harness, ImplementationRun, Implementer, Provenance, SelectionRecord, Settings, TargetRecord,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::run::RunArgs;

/// The implementer's names for their project, as the report carries them.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ImplementerArgs {
    /// The organization behind the implementation (for the report).
    #[arg(long)]
    organization: Option<String>,
    /// The implementation's project name (for the report).
    #[arg(long)]
    project: Option<String>,
    /// Where the implementation's project lives (for the report).
    #[arg(long)]
    url: Option<String>,
    /// The version of the implementation certified (for the report; it also names the
    /// version in `implementation`).
    #[arg(long = "version", value_name = "VERSION")]
    implementation_version: Option<String>,
    /// Who to ask about the report (repeatable).
    #[arg(long)]
    contact: Vec<String>,
}

impl ImplementerArgs {
    /// The version given, if any.
    pub(crate) fn version(&self) -> Option<&str> {
        self.implementation_version.as_deref()
    }

    fn implementer(&self) -> Implementer {
        Implementer {
            organization: self.organization.clone(),
            project: self.project.clone(),
            url: self.url.clone(),
            version: self.implementation_version.clone(),
            contact: self.contact.clone(),
        }
    }
}

/// This harness.
pub(crate) fn harness() -> Harness {
    Harness {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: env!("GROVE_CONFORMANCE_COMMIT").to_owned(),
    }
}

/// The command line of this process, each argument quoted for a POSIX shell when it needs it.
pub(crate) fn command_line() -> String {
    let mut args = std::env::args();
    let program = args.next().map(|p| {
        std::path::Path::new(&p)
            .file_name()
            .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
    });
    program
        .into_iter()
        .chain(args)
        .map(|a| quoted(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quoted(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// How `spec` runs, as far as the host tells before the run (an image's digest from Docker).
fn implementation_run(spec: &ImplementationSpec) -> ImplementationRun {
    let mut run = ImplementationRun {
        mode: String::new(),
        command: None,
        image: None,
        image_digest: None,
        deployment: None,
    };
    match spec {
        ImplementationSpec::Reference { .. } => {
            run.mode = "reference".into();
            run.command = Some("grove-conformance reference-operator".into());
        }
        ImplementationSpec::Command { template, .. } => {
            run.mode = "command".into();
            run.command = Some(template.clone());
        }
        ImplementationSpec::Image { image, args, .. } => {
            run.mode = "image".into();
            run.image = Some(image.clone());
            run.command = args.clone();
            run.image_digest = grove_conformance::host::docker::output(&[
                "image", "inspect", "--format", "{{.Id}}", image,
            ])
            .ok()
            .map(|id| id.trim().to_owned())
            .filter(|id| !id.is_empty());
        }
        ImplementationSpec::Deployment { deployment, .. } => {
            run.mode = "deployment".into();
            run.deployment = Some(format!("{}/{}", deployment.namespace, deployment.name));
        }
        ImplementationSpec::External => run.mode = "external".into(),
    }
    run
}

/// What the cluster tells: the apiserver's version, and a deployed implementation's image
/// (its container's, in the Deployment) and image digest (a pod's `imageID` of it).
pub(crate) async fn observe(
    client: &kube::Client,
    spec: &ImplementationSpec,
    run: &mut ImplementationRun,
) -> Option<String> {
    let version = client.apiserver_version().await.ok().map(|v| v.git_version);
    if let ImplementationSpec::Deployment { deployment, .. } = spec {
        let api: Api<Deployment> = Api::namespaced(client.clone(), &deployment.namespace);
        if let Ok(d) = api.get(&deployment.name).await {
            let pod_spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            let containers = pod_spec.map(|p| p.containers.as_slice()).unwrap_or(&[]);
            let container = match &deployment.container {
                Some(name) => containers.iter().find(|c| &c.name == name),
                None => containers.first(),
            };
            if let Some(c) = container {
                run.image = c.image.clone();
                run.image_digest = image_id(client, &deployment.namespace, &d, &c.name).await;
            }
        }
    }
    version
}

/// The `imageID` a running pod of `deployment` reports for `container`.
async fn image_id(
    client: &kube::Client,
    namespace: &str,
    deployment: &Deployment,
    container: &str,
) -> Option<String> {
    let labels = deployment
        .spec
        .as_ref()?
        .selector
        .match_labels
        .as_ref()?
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(&labels))
        .await
        .ok()?;
    list.items.iter().find_map(|p| {
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .find(|s| s.name == container)
            .map(|s| s.image_id.clone())
            .filter(|id| !id.is_empty())
    })
}

/// What a run's reports say of it besides its results, gathered as it starts: the
/// implementation's name and version, the catalog (its digest, or what generated the cases),
/// how the implementation runs (completed from the cluster by [`observe`]) and the start.
pub(crate) struct RunFacts {
    /// The implementation's name for the report.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The catalog's digest, or what generated the cases.
    pub catalog: String,
    /// How the implementation runs.
    pub run: ImplementationRun,
    /// When the run started.
    pub started: String,
}

impl RunFacts {
    /// The facts of a run of `args` on `catalog` with `implementation`, starting now.
    pub(crate) fn new(
        args: &RunArgs,
        implementation: &ImplementationSpec,
        catalog: String,
    ) -> Self {
        let (name, version) = super::run::implementation_name(args, implementation);
        RunFacts {
            name,
            version,
            catalog,
            run: implementation_run(implementation),
            started: now(),
        }
    }

    /// The provenance of the run of `args`, on an apiserver of version `kubernetes` (`None`
    /// when no cluster was started).
    pub(crate) fn provenance(&self, args: &RunArgs, kubernetes: Option<String>) -> Provenance {
        let target = if args.kind {
            "kind"
        } else if args.kubeconfig.is_some() {
            "kubeconfig"
        } else {
            "embedded"
        };
        Provenance {
            harness: harness(),
            implementer: args.implementer.implementer(),
            catalog: self.catalog.clone(),
            target: TargetRecord {
                kind: target.into(),
                kubernetes,
            },
            implementation: self.run.clone(),
            selection: selection(args),
            settings: Settings {
                jobs: args.jobs_or_default(),
                repeat: args.repeat,
                shards: args.shard.iter().map(ToString::to_string).collect(),
                api_proxy: !args.no_api_proxy,
                fail_fast: args.fail_fast,
            },
            started: self.started.clone(),
            commands: vec![command_line()],
        }
    }
}

/// The selection flags of `args`.
fn selection(args: &RunArgs) -> SelectionRecord {
    SelectionRecord {
        profile: args.profile_selected().map(|p| p.as_str().to_owned()),
        filter: args.filter.clone(),
        focus: args.focus.as_ref().map(|r| r.as_str().to_owned()),
        skip: args.skip.as_ref().map(|r| r.as_str().to_owned()),
    }
}

/// Now, as a report dates a run's start (RFC 3339, UTC, to the second).
fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_only_when_a_shell_would_split_or_expand_them() {
        assert_eq!(quoted("--filter"), "--filter");
        assert_eq!(quoted("a b"), "'a b'");
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted(r"\[Conformance\]"), r"'\[Conformance\]'");
        assert_eq!(quoted(""), "''");
    }
}
