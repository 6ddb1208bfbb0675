//! The Kubernetes kinds the harness reads and writes.

use std::fmt;
use std::str::FromStr;

/// The Kubernetes kinds the harness reads and writes (the same in every revision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` Pod.
    Pod,
    /// `grove.io/v1alpha1` PodClique (PCLQ).
    PodClique,
    /// `grove.io/v1alpha1` PodCliqueScalingGroup (PCSG).
    PodCliqueScalingGroup,
    /// `grove.io/v1alpha1` PodCliqueSet (PCS).
    PodCliqueSet,
    /// `v1` Event (core events, as written by client-go recorders).
    Event,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Pod,
        Kind::PodClique,
        Kind::PodCliqueScalingGroup,
        Kind::PodCliqueSet,
        Kind::Event,
    ];

    /// The kind as spelled in manifests (`PodClique`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::PodClique => "PodClique",
            Kind::PodCliqueScalingGroup => "PodCliqueScalingGroup",
            Kind::PodCliqueSet => "PodCliqueSet",
            Kind::Event => "Event",
        }
    }

    /// The `apiVersion` of the kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Pod | Kind::Event => "v1",
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet => GROVE_API_VERSION,
        }
    }

    /// The resource (plural) name used in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::PodClique => "podcliques",
            Kind::PodCliqueScalingGroup => "podcliquescalinggroups",
            Kind::PodCliqueSet => "podcliquesets",
            Kind::Event => "events",
        }
    }

    /// Whether the kind is one of Grove's (PodClique, PCSG, PCS).
    pub fn is_grove(self) -> bool {
        matches!(
            self,
            Kind::PodClique | Kind::PodCliqueScalingGroup | Kind::PodCliqueSet
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown kind `{s}`"))
    }
}

/// The API version of Grove's kinds.
pub const GROVE_API_VERSION: &str = "grove.io/v1alpha1";
