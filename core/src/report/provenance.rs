//! What produced a report: the harness (version and commit), the catalog (its digest), the
//! target (its kind and the apiserver's version), how the implementation ran, the selection
//! and settings of the run, when it started and the command lines that made it; plus the
//! implementer's own names for their project. Every report carries it ([`Provenance`]), and
//! `verify-report` re-derives the selection from it.

use serde::{Deserialize, Serialize};

/// The implementer's names for their project (`run --organization … --contact …`), as
/// published reports of other conformance programmes carry them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Implementer {
    /// The organization behind the implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// The project's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Where the project lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The version of the implementation certified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Who to ask about the report (repeatable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contact: Vec<String>,
}

impl Implementer {
    /// Whether no name was given.
    pub fn is_empty(&self) -> bool {
        *self == Implementer::default()
    }
}

/// The harness that produced a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Harness {
    /// Its version (the crate's).
    pub version: String,
    /// The commit it was built from (`unknown` when built outside a Git checkout).
    pub commit: String,
}

/// The cluster a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// `embedded`, `kind` or `kubeconfig`.
    pub kind: String,
    /// The apiserver's version (`gitVersion` of `/version`); absent when the run started no
    /// cluster (a shard with no case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

impl std::fmt::Display for TargetRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kubernetes {
            Some(v) => write!(f, "{}, Kubernetes {v}", self.kind),
            None => write!(f, "{}, no cluster started", self.kind),
        }
    }
}

/// How the implementation under test ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplementationRun {
    /// `reference`, `command`, `image`, `deployment` or `external`.
    pub mode: String,
    /// The command (template) it ran as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image's digest (its ID, as the container runtime names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The Deployment (`NAMESPACE/NAME`) it runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
}

/// The cases a run selected, as its flags said (what `verify-report` selects again).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SelectionRecord {
    /// `--profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// `--filter`, each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter: Vec<String>,
    /// `--focus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// `--skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
}

/// How a run ran its cases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Cases at once.
    pub jobs: usize,
    /// Runs of each case.
    pub repeat: u32,
    /// The shards (`I/N`) the results come from, when sharded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<String>,
    /// Whether the implementation's requests went through the API proxy.
    pub api_proxy: bool,
    /// `--fail-fast`.
    pub fail_fast: bool,
}

/// Everything that produced a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The harness.
    pub harness: Harness,
    /// The implementer's names for their project (left out when none was given).
    #[serde(default, skip_serializing_if = "Implementer::is_empty")]
    pub implementer: Implementer,
    /// The digest of the catalog's case and fixture files (or what generated the cases).
    pub catalog: String,
    /// The target.
    pub target: TargetRecord,
    /// How the implementation ran.
    pub implementation: ImplementationRun,
    /// The selection.
    pub selection: SelectionRecord,
    /// The settings.
    pub settings: Settings,
    /// When the run started (RFC 3339, UTC); the earliest shard's when merged.
    pub started: String,
    /// The command line of the run, one per shard when merged.
    pub commands: Vec<String>,
}

/// Why shards' provenances do not make one run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shards differ in their {what}: {a} and {b}")]
pub struct ProvenanceMismatch {
    /// What differs.
    pub what: &'static str,
    /// The first shard's.
    pub a: String,
    /// The other's.
    pub b: String,
}

impl Provenance {
    /// One provenance for shards of one run: they must agree on the harness, catalog,
    /// target, implementation, selection and every setting but the shard; the merged one
    /// lists every shard and command line, and starts with the earliest.
    pub fn merged<'a>(
        shards: impl IntoIterator<Item = &'a Provenance>,
    ) -> Result<Option<Provenance>, ProvenanceMismatch> {
        let mut merged: Option<Provenance> = None;
        for p in shards {
            let Some(m) = &mut merged else {
                merged = Some(p.clone());
                continue;
            };
            let differ = |what, a: String, b: String| ProvenanceMismatch { what, a, b };
            if m.harness != p.harness {
                let show = |h: &Harness| format!("{} ({})", h.version, h.commit);
                return Err(differ("harness", show(&m.harness), show(&p.harness)));
            }
            if m.catalog != p.catalog {
                return Err(differ("catalog", m.catalog.clone(), p.catalog.clone()));
            }
            let (a, b) = (&m.target, &p.target);
            let versions_differ =
                matches!((&a.kubernetes, &b.kubernetes), (Some(x), Some(y)) if x != y);
            if a.kind != b.kind || versions_differ {
                return Err(differ("target", a.to_string(), b.to_string()));
            }
            if m.target.kubernetes.is_none() {
                m.target.kubernetes = p.target.kubernetes.clone();
            }
            let debug = |v: &dyn std::fmt::Debug| format!("{v:?}");
            if m.implementation != p.implementation {
                return Err(differ(
                    "implementation run",
                    debug(&m.implementation),
                    debug(&p.implementation),
                ));
            }
            if m.implementer != p.implementer {
                return Err(differ(
                    "implementer",
                    debug(&m.implementer),
                    debug(&p.implementer),
                ));
            }
            if m.selection != p.selection {
                return Err(differ(
                    "selection",
                    debug(&m.selection),
                    debug(&p.selection),
                ));
            }
            let settings = |s: &Settings| Settings {
                shards: Vec::new(),
                ..s.clone()
            };
            if settings(&m.settings) != settings(&p.settings) {
                return Err(differ("settings", debug(&m.settings), debug(&p.settings)));
            }
            m.started = m.started.clone().min(p.started.clone());
            m.commands.extend(p.commands.iter().cloned());
            m.settings.shards.extend(p.settings.shards.iter().cloned());
        }
        if let Some(m) = &mut merged {
            m.settings.shards.sort();
        }
        Ok(merged)
    }

    /// The lines a report shows it in (label, value), in order.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let i = &self.implementation;
        let mut run = i.mode.clone();
        for (label, value) in [
            ("command", &i.command),
            ("image", &i.image),
            ("digest", &i.image_digest),
            ("deployment", &i.deployment),
        ] {
            if let Some(v) = value {
                run.push_str(&format!(", {label} `{v}`"));
            }
        }
        let s = &self.settings;
        let mut settings = format!(
            "jobs {}, repeat {}, API proxy {}, fail-fast {}",
            s.jobs,
            s.repeat,
            if s.api_proxy { "on" } else { "off" },
            if s.fail_fast { "on" } else { "off" }
        );
        if !s.shards.is_empty() {
            settings.push_str(&format!(", shards {}", s.shards.join(" ")));
        }
        let sel = &self.selection;
        let mut selection = Vec::new();
        if let Some(p) = &sel.profile {
            selection.push(format!("profile {p}"));
        }
        selection.extend(sel.filter.iter().map(|f| format!("filter {f}")));
        if let Some(f) = &sel.focus {
            selection.push(format!("focus {f}"));
        }
        if let Some(f) = &sel.skip {
            selection.push(format!("skip {f}"));
        }
        if selection.is_empty() {
            selection.push("the whole catalog".into());
        }
        let mut lines = Vec::new();
        let who = &self.implementer;
        for (label, value) in [
            ("organization", &who.organization),
            ("project", &who.project),
            ("url", &who.url),
            ("version", &who.version),
        ] {
            if let Some(v) = value {
                lines.push((label, v.clone()));
            }
        }
        if !who.contact.is_empty() {
            lines.push(("contact", who.contact.join(", ")));
        }
        lines.extend([
            (
                "harness",
                format!(
                    "grove-conformance {} ({})",
                    self.harness.version, self.harness.commit
                ),
            ),
            ("catalog", self.catalog.clone()),
            ("target", self.target.to_string()),
            ("implementation run", run),
            ("selection", selection.join(", ")),
            ("settings", settings),
            ("started", self.started.clone()),
            ("command", self.commands.join(" ; ")),
        ]);
        lines
    }
}
