//! Resolving the binaries: the pinned versions, the overrides, the cache and what is missing.

use std::path::{Path, PathBuf};

use super::go_build::build;
use crate::host::{is_executable, which};

/// The Kubernetes version the embedded control plane runs.
pub const KUBERNETES_VERSION: &str = "v1.34.4";
/// The etcd version the embedded control plane runs (envtest pairs 1.34 with 3.6).
pub const ETCD_VERSION: &str = "v3.6.16";

/// One of the three binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `etcd`.
    Etcd,
    /// `kube-apiserver`.
    KubeApiserver,
    /// `kube-controller-manager`.
    KubeControllerManager,
}

impl Component {
    /// All three, in start order.
    pub const ALL: [Component; 3] = [
        Component::Etcd,
        Component::KubeApiserver,
        Component::KubeControllerManager,
    ];

    /// The binary's file name.
    pub fn binary(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
        }
    }

    /// The envtest-style override variable.
    pub fn env_var(self) -> &'static str {
        match self {
            Component::Etcd => "TEST_ASSET_ETCD",
            Component::KubeApiserver => "TEST_ASSET_KUBE_APISERVER",
            Component::KubeControllerManager => "TEST_ASSET_KUBE_CONTROLLER_MANAGER",
        }
    }
}

/// Where a resolved binary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A `TEST_ASSET_*` variable.
    EnvOverride(&'static str),
    /// `$KUBEBUILDER_ASSETS`.
    KubebuilderAssets,
    /// Our version-keyed cache.
    Cache,
    /// Built just now from the Go module proxy.
    Built,
}

/// The three resolved binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// Path to `etcd`.
    pub etcd: PathBuf,
    /// Path to `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// Path to `kube-controller-manager`.
    pub kube_controller_manager: PathBuf,
    /// Where each came from, in [`Component::ALL`] order.
    pub origins: [Origin; 3],
}

impl Binaries {
    /// The path of one component.
    pub fn path(&self, component: Component) -> &Path {
        match component {
            Component::Etcd => &self.etcd,
            Component::KubeApiserver => &self.kube_apiserver,
            Component::KubeControllerManager => &self.kube_controller_manager,
        }
    }
}

/// How to resolve.
#[derive(Debug, Clone)]
pub struct ProvisionOptions {
    /// Build from the Go module proxy when nothing else has the binaries.
    pub allow_build: bool,
    /// Cache root; `None` means `$GROVE_CONFORMANCE_CACHE` or the user cache dir.
    pub cache_root: Option<PathBuf>,
    /// Print progress lines to stderr while building.
    pub progress: bool,
}

impl Default for ProvisionOptions {
    fn default() -> Self {
        ProvisionOptions {
            allow_build: true,
            cache_root: None,
            progress: true,
        }
    }
}

/// Errors while resolving or building.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// A `TEST_ASSET_*` variable or `$KUBEBUILDER_ASSETS` names something that is not there.
    #[error("{var} points at {}, which is not an executable file", path.display())]
    BadOverride {
        /// The variable.
        var: &'static str,
        /// What it named.
        path: PathBuf,
    },
    /// Nothing has the binaries and building is not possible or not allowed.
    #[error(
        "failed to find {missing}: set TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER and \
         TEST_ASSET_KUBE_CONTROLLER_MANAGER to the binaries, or KUBEBUILDER_ASSETS to a directory \
         holding all three, or put them in {} ({reason})",
        cache.display()
    )]
    NotFound {
        /// Which binaries are missing.
        missing: String,
        /// The cache directory that would be used.
        cache: PathBuf,
        /// Why no build happened.
        reason: String,
    },
    /// Something a build needs besides Go is missing or unusable (the kind assets' Docker
    /// engine); the cause says how to provide it.
    #[error(
        "failed to find {missing} for the assets in {}; once it works, run `grove-conformance setup --kind`",
        cache.display()
    )]
    Prerequisite {
        /// What is missing.
        missing: &'static str,
        /// The cache directory of the assets.
        cache: PathBuf,
        /// Why it cannot be used, and how to fix that.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A build step failed.
    #[error("failed to build the control-plane binaries at step '{step}' (log: {})\n{tail}", log.display())]
    Build {
        /// The step.
        step: String,
        /// The full build log.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// Filesystem trouble.
    #[error("failed to {what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_err(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> ProvisionError {
    let path = path.to_path_buf();
    move |source| ProvisionError::Io { what, path, source }
}

/// The cache root: `$GROVE_CONFORMANCE_CACHE`, else `<user cache dir>/grove-conformance`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("GROVE_CONFORMANCE_CACHE") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("grove-conformance")
}

/// The version-keyed directory the binaries are cached in.
pub fn cache_bin_dir(root: &Path) -> PathBuf {
    root.join("bin")
        .join(format!("k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"))
}

/// Looks a binary up in the overrides and `$KUBEBUILDER_ASSETS` (steps 1 and 2), given the
/// environment as a lookup function so the order can be tested without touching the process.
pub fn lookup_configured(
    component: Component,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(PathBuf, Origin)>, ProvisionError> {
    if let Some(value) = env(component.env_var()).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        if !is_executable(&path) {
            return Err(ProvisionError::BadOverride {
                var: component.env_var(),
                path,
            });
        }
        return Ok(Some((path, Origin::EnvOverride(component.env_var()))));
    }
    if let Some(dir) = env("KUBEBUILDER_ASSETS").filter(|v| !v.is_empty()) {
        let path = Path::new(&dir).join(component.binary());
        if is_executable(&path) {
            return Ok(Some((path, Origin::KubebuilderAssets)));
        }
    }
    Ok(None)
}

/// Resolves all three binaries, building them if needed and allowed.
pub fn resolve(options: &ProvisionOptions) -> Result<Binaries, ProvisionError> {
    let env = |name: &str| std::env::var(name).ok();
    let root = options
        .cache_root
        .clone()
        .unwrap_or_else(default_cache_root);
    let cache = cache_bin_dir(&root);
    let mut found: Vec<Option<(PathBuf, Origin)>> = Vec::new();
    for component in Component::ALL {
        let hit = match lookup_configured(component, &env)? {
            Some(hit) => Some(hit),
            None => {
                let path = cache.join(component.binary());
                is_executable(&path).then_some((path, Origin::Cache))
            }
        };
        found.push(hit);
    }
    if found.iter().any(Option::is_none) {
        let missing: Vec<Component> = Component::ALL
            .into_iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| c)
            .collect();
        let names = missing
            .iter()
            .map(|c| c.binary())
            .collect::<Vec<_>>()
            .join(", ");
        if !options.allow_build {
            return Err(ProvisionError::NotFound {
                missing: names,
                cache,
                reason: "building was not allowed".into(),
            });
        }
        if which("go").is_none() {
            return Err(ProvisionError::NotFound {
                missing: names,
                cache,
                reason: "no `go` on PATH to build them with".into(),
            });
        }
        build(&root, options.progress)?;
        for (component, slot) in Component::ALL.into_iter().zip(found.iter_mut()) {
            if slot.is_none() {
                *slot = Some((cache.join(component.binary()), Origin::Built));
            }
        }
    }
    let mut it = found.into_iter().map(|f| f.expect("every slot is filled"));
    let (etcd, o1) = it.next().expect("three components");
    let (kube_apiserver, o2) = it.next().expect("three components");
    let (kube_controller_manager, o3) = it.next().expect("three components");
    Ok(Binaries {
        etcd,
        kube_apiserver,
        kube_controller_manager,
        origins: [o1, o2, o3],
    })
}
