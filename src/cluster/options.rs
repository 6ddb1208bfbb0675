//! The one mapping from what a user asked for (command-line options, or the environment of a
//! test binary) to a [`TargetSpec`], and what follows from the target: whether its kubelets are
//! real.

use std::path::{Path, PathBuf};

use super::TargetSpec;

/// The project's kind cluster configuration, built in: a catalog kept anywhere runs on kind
/// without a copy of it (`--kind-config` gives another).
pub const KIND_CONFIG: &str = include_str!("../../kind-config/kind.yaml");

/// What a user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetOptions {
    /// The cluster of this kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    /// Its context (default: the current one).
    pub context: Option<String>,
    /// A kind cluster created for the run.
    pub kind: bool,
    /// Keep the kind cluster afterwards.
    pub keep_cluster: bool,
    /// The kind cluster configuration (default: [`KIND_CONFIG`]).
    pub kind_config: Option<PathBuf>,
}

/// A target the options cannot name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetOptionsError {
    /// `GROVE_CONFORMANCE_TARGET` names no target.
    #[error("GROVE_CONFORMANCE_TARGET={0} is not a target: use embedded, kind or kubeconfig")]
    UnknownTarget(String),
    /// `GROVE_CONFORMANCE_TARGET=kubeconfig` without the kubeconfig.
    #[error("GROVE_CONFORMANCE_TARGET=kubeconfig needs GROVE_CONFORMANCE_KUBECONFIG")]
    NoKubeconfig,
    /// Both a kubeconfig and kind.
    #[error("a kubeconfig and a kind cluster cannot both be the target")]
    KindAndKubeconfig,
}

impl TargetOptions {
    /// The target a test binary's environment names: `GROVE_CONFORMANCE_TARGET` (`embedded`,
    /// the default; `kind`; `kubeconfig`) and `GROVE_CONFORMANCE_KUBECONFIG` (which alone
    /// also selects its cluster).
    pub fn from_env() -> Result<Self, TargetOptionsError> {
        Self::from_vars(
            std::env::var("GROVE_CONFORMANCE_TARGET").ok().as_deref(),
            std::env::var_os("GROVE_CONFORMANCE_KUBECONFIG").map(PathBuf::from),
        )
    }

    /// [`Self::from_env`] over given values.
    ///
    /// | target       | kubeconfig | result                |
    /// |--------------|------------|-----------------------|
    /// | kind         | any        | kind                  |
    /// | kubeconfig   | set        | that cluster          |
    /// | kubeconfig   | unset      | error                 |
    /// | unset, ""    | set        | that cluster          |
    /// | unset, "", embedded | (unset, or embedded) | embedded |
    /// | other        | any        | error                 |
    pub fn from_vars(
        target: Option<&str>,
        kubeconfig: Option<PathBuf>,
    ) -> Result<Self, TargetOptionsError> {
        match (target.unwrap_or(""), kubeconfig) {
            ("kind", _) => Ok(TargetOptions {
                kind: true,
                ..Self::default()
            }),
            ("kubeconfig" | "", Some(path)) => Ok(TargetOptions {
                kubeconfig: Some(path),
                ..Self::default()
            }),
            ("kubeconfig", None) => Err(TargetOptionsError::NoKubeconfig),
            ("embedded", _) | ("", None) => Ok(Self::default()),
            (other, _) => Err(TargetOptionsError::UnknownTarget(other.to_string())),
        }
    }

    /// The target these options name. `harness` is the grove-conformance executable (the
    /// runc shim of a kind target, on hosts that need one).
    pub fn spec(&self, harness: &Path) -> Result<TargetSpec, TargetOptionsError> {
        match (&self.kubeconfig, self.kind) {
            (Some(_), true) => Err(TargetOptionsError::KindAndKubeconfig),
            (Some(path), false) => Ok(TargetSpec::Kubeconfig {
                path: path.clone(),
                context: self.context.clone(),
            }),
            (None, true) => Ok(TargetSpec::Kind {
                config: self.kind_config.clone(),
                keep: self.keep_cluster,
                harness: harness.to_path_buf(),
            }),
            (None, false) => Ok(TargetSpec::Embedded),
        }
    }

    /// Whether the target's kubelets are real (every target but the embedded one), decided
    /// before anything is acquired.
    pub fn real_kubelets(&self) -> bool {
        self.kind || self.kubeconfig.is_some()
    }
}

impl TargetSpec {
    /// Whether the target's kubelets are real: every target but the embedded one, whose pods
    /// the simulated kubelet drives.
    pub fn real_kubelets(&self) -> bool {
        match self {
            TargetSpec::Embedded => false,
            TargetSpec::Kubeconfig { .. } | TargetSpec::Kind { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_one_target() {
        let kc = || Some(PathBuf::from("/k"));
        assert!(TargetOptions::from_vars(Some("kind"), kc()).unwrap().kind);
        assert_eq!(
            TargetOptions::from_vars(None, kc()).unwrap().kubeconfig,
            kc()
        );
        assert_eq!(
            TargetOptions::from_vars(Some("kubeconfig"), None),
            Err(TargetOptionsError::NoKubeconfig)
        );
        assert_eq!(
            TargetOptions::from_vars(Some("embedded"), kc()).unwrap(),
            TargetOptions::default()
        );
        assert_eq!(
            TargetOptions::from_vars(Some("nope"), None),
            Err(TargetOptionsError::UnknownTarget("nope".into()))
        );
    }

    #[test]
    fn the_kind_configuration_defaults_to_the_projects_whatever_the_catalog() {
        let options = TargetOptions {
            kind: true,
            ..TargetOptions::default()
        };
        let spec = options.spec(Path::new("/bin/h")).unwrap();
        assert!(matches!(&spec, TargetSpec::Kind { config: None, .. }));
        assert!(spec.real_kubelets() && options.real_kubelets());
        assert!(KIND_CONFIG.contains("kind: Cluster"));
        assert!(!TargetSpec::Embedded.real_kubelets());
    }
}
