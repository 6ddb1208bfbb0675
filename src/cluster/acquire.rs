//! The cluster a run happens on, acquired in one place: the embedded default, an existing
//! cluster named by a kubeconfig (and optionally a context), or a kind cluster created for the
//! run. [`acquire`] returns a [`TargetGuard`] that holds what the run needs and tears the
//! target down when dropped (stopping the embedded cluster, keeping its logs when the run
//! failed; deleting the kind cluster unless told to keep it). CRDs are installed one way:
//! server-side apply, then a wait until they are established.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::crds;
use super::kind::assets as kind_assets;
use super::kind::{KindCluster, set_up_nodes};
use crate::cluster::embedded::ProvisionOptions;
use crate::cluster::embedded::{EmbeddedCluster, EmbeddedOptions};
use crate::host::write_private;
use crate::kubelets::PodDriver;
use crate::kubelets::real::{NodeControl, RealPods};

/// Which cluster to run on.
#[derive(Debug, Clone)]
pub enum TargetSpec {
    /// The embedded control plane with the simulated node fleet.
    Embedded,
    /// An existing cluster.
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// Its context to use (default: the current one).
        context: Option<String>,
    },
    /// A kind cluster created from `config` for the run.
    Kind {
        /// The kind cluster configuration (default: the project's, [`super::KIND_CONFIG`]).
        config: Option<PathBuf>,
        /// Keep the cluster afterwards.
        keep: bool,
        /// The grove-conformance executable: installed as the runc shim on hosts that need
        /// one (see `cluster::kind::runc_shim`).
        harness: PathBuf,
    },
}

/// What a run needs of its target.
#[derive(Clone)]
pub struct TargetHandles {
    /// Admin client.
    pub client: Client,
    /// Its kubeconfig (for the implementation).
    pub kubeconfig: PathBuf,
    /// How pod actions reach pods.
    pub pods: PodDriver,
}

impl std::fmt::Debug for TargetHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetHandles")
            .field("kubeconfig", &self.kubeconfig)
            .field("pods", &self.pods)
            .finish_non_exhaustive()
    }
}

/// An acquired target; dropping it tears the target down.
#[derive(Debug)]
pub struct TargetGuard {
    handles: TargetHandles,
    embedded: Option<EmbeddedCluster>,
    /// Declared before the scratch files: the cluster is deleted first.
    kind: Option<KindCluster>,
    /// Scratch files of the target (derived kubeconfigs), removed with the guard.
    _scratch: Option<tempfile::TempDir>,
}

pub use super::kind::KIND_CLUSTER;

/// Acquires the target `spec` with `crds` installed (unless `install_crds` is false on a
/// cluster that has them already; the embedded cluster always starts with them).
pub async fn acquire(
    spec: &TargetSpec,
    crds: Vec<CustomResourceDefinition>,
    install_crds: bool,
) -> Result<TargetGuard, TargetError> {
    // Named like every temporary directory of ours and registered for removal at exit: a
    // target held for a whole test binary is never dropped, and a killed process's is reaped
    // by the next start.
    let scratch = tempfile::Builder::new()
        .prefix(&format!(
            "{}{}-target-",
            crate::host::process::TEMP_PREFIX,
            std::process::id()
        ))
        .tempdir()
        .map_err(|e| TargetError::Scratch(Box::new(e)))?;
    crate::host::process::register_dir(scratch.path());
    // The kubeconfig to use, its context, and whether a kind cluster was made (kept or not).
    let (path, context, kind) = match spec {
        TargetSpec::Embedded => {
            let options = EmbeddedOptions {
                crds,
                ..EmbeddedOptions::default()
            };
            let cluster = EmbeddedCluster::start(options)
                .await
                .map_err(|e| TargetError::Embedded(Box::new(e)))?;
            tracing::info!(took = ?cluster.start_duration, "embedded cluster ready");
            return Ok(TargetGuard {
                handles: TargetHandles {
                    client: cluster.client(),
                    kubeconfig: cluster.control_plane.kubeconfig_path().to_path_buf(),
                    pods: PodDriver::Simulated(cluster.fleet.clone()),
                },
                embedded: Some(cluster),
                kind: None,
                _scratch: None,
            });
        }
        TargetSpec::Kubeconfig { path, context } => (path.clone(), context.clone(), None),
        TargetSpec::Kind {
            config,
            keep,
            harness,
        } => {
            let kubeconfig = scratch.path().join("kind-kubeconfig");
            let config = match config {
                Some(config) => config.clone(),
                None => {
                    let built_in = scratch.path().join("kind.yaml");
                    std::fs::write(&built_in, super::KIND_CONFIG)
                        .map_err(|e| TargetError::Scratch(Box::new(e)))?;
                    built_in
                }
            };
            let (keep, path) = (*keep, kubeconfig.clone());
            let harness = harness.clone();
            let started = std::time::Instant::now();
            let (assets, cluster) = tokio::task::spawn_blocking(move || {
                let assets = kind_assets::resolve(&ProvisionOptions::default(), &harness)
                    .map_err(|e| TargetError::KindAssets(Box::new(e)))?;
                tracing::info!(
                    config = %config.display(),
                    image = %assets.node_image,
                    "creating kind cluster {KIND_CLUSTER}"
                );
                let cluster = KindCluster::create(&assets, KIND_CLUSTER, &config, &path, keep)?;
                Ok::<_, TargetError>((assets, cluster))
            })
            .await
            .map_err(|e| TargetError::Scratch(Box::new(e)))??;
            (kubeconfig, None, Some((assets, cluster, started)))
        }
    };
    // A kind cluster made for the run goes with it (dropped), even when it cannot be used.
    let (client, kubeconfig) = from_kubeconfig(&path, context.as_deref(), scratch.path()).await?;
    let nodes = match &kind {
        Some((_, cluster, started)) => {
            set_up_nodes(&client, &cluster.name).await?;
            tracing::info!(took = ?started.elapsed(), "kind cluster {} ready", cluster.name);
            NodeControl::DockerContainers
        }
        // A kubeconfig naming a kind cluster of this machine: its nodes are containers the
        // harness can stop as well.
        None if super::kind::nodes_are_local_containers(&client).await => {
            NodeControl::DockerContainers
        }
        None => NodeControl::Unavailable,
    };
    let pods = PodDriver::Real(RealPods::new(client.clone(), nodes));
    let mut guard = TargetGuard {
        handles: TargetHandles {
            client,
            kubeconfig,
            pods,
        },
        embedded: None,
        kind: kind.map(|(_, cluster, _)| cluster),
        _scratch: Some(scratch),
    };
    if install_crds
        && let Err(e) = crds::install(
            &guard.handles.client,
            &crds,
            HARNESS_MANAGER,
            Duration::from_secs(60),
        )
        .await
    {
        guard.mark_failed();
        return Err(TargetError::Crd(e));
    }
    Ok(guard)
}

impl TargetGuard {
    /// What the run needs.
    pub fn handles(&self) -> &TargetHandles {
        &self.handles
    }

    /// The kind cluster made for the run, on that target.
    pub fn kind_cluster(&self) -> Option<&KindCluster> {
        self.kind.as_ref()
    }

    /// The embedded cluster, on that target.
    pub fn embedded(&self) -> Option<&EmbeddedCluster> {
        self.embedded.as_ref()
    }

    /// The run failed: keep the embedded cluster's component logs.
    pub fn mark_failed(&mut self) {
        if let Some(cluster) = &self.embedded {
            cluster.control_plane.mark_failed();
        }
    }
}

/// Field manager of the harness's own writes.
pub use crate::cluster::crds::FIELD_MANAGER as HARNESS_MANAGER;

/// Errors while preparing a target.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The kubeconfig could not be read or used.
    #[error("failed to use kubeconfig {}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A CRD could not be installed.
    #[error(transparent)]
    Crd(crds::CrdError),
    /// A webhook configuration could not be installed.
    #[error("failed to install webhook configuration {name}")]
    Webhook {
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The embedded cluster did not start.
    #[error("failed to start the embedded cluster")]
    Embedded(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A scratch directory could not be made.
    #[error("failed to create a scratch directory")]
    Scratch(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The kind assets are missing and could not be built.
    #[error("the kind assets are not available")]
    KindAssets(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// `kind` failed.
    #[error("failed to run `{command}`: {detail}")]
    Kind {
        /// The command line.
        command: String,
        /// What went wrong.
        detail: String,
    },
}

/// A client for `context` (or the current context) of a kubeconfig, and a kubeconfig file
/// whose current context is that one (mode 0600), for the implementation's child process.
pub async fn from_kubeconfig(
    path: &Path,
    context: Option<&str>,
    scratch: &Path,
) -> Result<(Client, PathBuf), TargetError> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| TargetError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let mut file = Kubeconfig::read_from(path).map_err(|e| err(Box::new(e)))?;
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(file.clone(), &options)
        .await
        .map_err(|e| err(Box::new(e)))?;
    let client = Client::try_from(config).map_err(|e| err(Box::new(e)))?;
    let Some(context) = context else {
        return Ok((client, path.to_path_buf()));
    };
    file.current_context = Some(context.to_string());
    let text = serde_yaml::to_string(&file).map_err(|e| err(Box::new(e)))?;
    let derived = scratch.join("kubeconfig");
    write_private(&derived, text.as_bytes()).map_err(|e| err(Box::new(e)))?;
    Ok((client, derived))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_context_is_written_into_a_private_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://127.0.0.1:1'}\n- name: b\n  cluster: {server: 'https://127.0.0.1:2'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: ca\n  context: {cluster: a, user: u}\n- name: cb\n  context: {cluster: b, user: u}\ncurrent-context: ca\n",
        )
        .unwrap();
        let (_client, derived) = from_kubeconfig(&path, Some("cb"), dir.path())
            .await
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&derived).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let text = std::fs::read_to_string(&derived).unwrap();
        assert!(text.contains("current-context: cb"), "{text}");
    }
}
