//! Parsing a case file into a [`Case`], reporting every problem at once.
//!
//! The parser walks the positioned YAML tree by hand (no serde derive): each key is known
//! in advance, unknown keys are errors naming the allowed ones, and every diagnostic carries
//! file:line:column and the dotted field path.
//!
//! This module is the reader: the entry points, the diagnostics, and the helpers every part
//! uses to check a mapping's keys and read scalars, vocabulary terms and object or pod
//! addresses. The parts of a case are in [`case`] (the header), [`steps`], [`expect`] (the
//! `expect` step) and [`conditions`] (the one `conditions:` parser, shared by `update` and
//! object expectations).

mod case;
mod conditions;
mod expect;
mod implementation;
mod steps;

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use serde_json::Value;

use super::diagnostic::Diagnostic;
use super::yaml::{self, Node, NodeValue, Pos};
use super::{Case, Duration, ObjectRef, PodSelector, UidSubject};
use crate::vocab::{Category, Feature, Kind, Term};

/// Parses one case file. Fixture references are checked only for being declared in the
/// case header; [`parse_case_with_fixtures`] also checks they exist.
pub fn parse_case(path: &Path, text: &str) -> Result<Case, Vec<Diagnostic>> {
    parse(path, text, None)
}

/// Parses one case file, checking that every fixture it names is in `fixtures`.
pub fn parse_case_with_fixtures(
    path: &Path,
    text: &str,
    fixtures: &BTreeSet<String>,
) -> Result<Case, Vec<Diagnostic>> {
    parse(path, text, Some(fixtures))
}

fn parse(
    path: &Path,
    text: &str,
    known_fixtures: Option<&BTreeSet<String>>,
) -> Result<Case, Vec<Diagnostic>> {
    let root = yaml::parse(text).map_err(|e| vec![Diagnostic::at(path, e.pos, "", e.message)])?;
    let mut cx = Parser {
        file: path,
        diags: Vec::new(),
        terms: BTreeSet::new(),
        features: BTreeSet::new(),
        declared_fixtures: Vec::new(),
        known_fixtures,
        remembered: HashSet::new(),
    };
    let case = cx.case(&root);
    match case {
        Some(case) if cx.diags.is_empty() => Ok(case),
        _ => {
            if cx.diags.is_empty() {
                cx.error(root.pos, "", "failed to parse the case");
            }
            Err(cx.diags)
        }
    }
}

/// Reads one case, collecting every problem it finds (the step kinds' readers are its methods).
pub(in crate::catalog) struct Parser<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
    terms: BTreeSet<Term>,
    features: BTreeSet<Feature>,
    declared_fixtures: Vec<String>,
    known_fixtures: Option<&'a BTreeSet<String>>,
    remembered: HashSet<String>,
}

/// The entries of one mapping node; unknown keys are reported when it is built.
struct Fields<'n> {
    path: String,
    pos: Pos,
    entries: &'n [(Node, Node)],
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    fn child(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl<'a> Parser<'a> {
    fn error(&mut self, pos: Pos, field: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::at(self.file, pos, field, message.into()));
    }

    /// A mapping node's fields; reports a non-mapping node or unknown keys.
    fn fields<'n>(&mut self, node: &'n Node, path: &str, allowed: &[&str]) -> Option<Fields<'n>> {
        let NodeValue::Map(entries) = &node.value else {
            self.error(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.describe()),
            );
            return None;
        };
        for (k, _) in entries {
            let key = k.as_str().unwrap_or_default();
            if !allowed.contains(&key) {
                self.error(
                    k.pos,
                    &join(path, key),
                    format!(
                        "unknown key `{key}` (expected one of: {})",
                        allowed.join(", ")
                    ),
                );
            }
        }
        Some(Fields {
            path: path.to_owned(),
            pos: node.pos,
            entries,
        })
    }

    fn required<'n>(&mut self, f: &Fields<'n>, key: &str) -> Option<&'n Node> {
        let node = f.get(key);
        if node.is_none() {
            self.error(f.pos, &f.path, format!("missing required key `{key}`"));
        }
        node
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            NodeValue::Scalar { text, .. } if !node.is_null() => Some(text.clone()),
            NodeValue::Scalar { .. } | NodeValue::Seq(_) | NodeValue::Map(_) => {
                self.error(
                    node.pos,
                    path,
                    format!("expected a string, found {}", node.describe()),
                );
                None
            }
        }
    }

    fn name(&mut self, node: &Node, path: &str) -> Option<String> {
        let s = self.string(node, path)?;
        if is_dns_name(&s) {
            Some(s)
        } else {
            self.error(
                node.pos,
                path,
                format!("`{s}` is not a valid object name (lowercase letters, digits, `-`, `.`)"),
            );
            None
        }
    }

    fn integer(&mut self, node: &Node, path: &str) -> Option<i64> {
        match node.to_json() {
            Value::Number(n) if n.is_i64() => n.as_i64(),
            _ => {
                self.error(
                    node.pos,
                    path,
                    format!("expected an integer, found {}", node.describe()),
                );
                None
            }
        }
    }

    fn unsigned(&mut self, node: &Node, path: &str) -> Option<u32> {
        let n = self.integer(node, path)?;
        match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                self.error(
                    node.pos,
                    path,
                    format!("expected a non-negative integer, found {n}"),
                );
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node, path: &str) -> Option<bool> {
        match node.to_json() {
            Value::Bool(b) => Some(b),
            _ => {
                self.error(
                    node.pos,
                    path,
                    format!("expected true or false, found {}", node.describe()),
                );
                None
            }
        }
    }

    fn duration(&mut self, node: &Node, path: &str) -> Option<Duration> {
        let s = self.string(node, path)?;
        match s.parse::<Duration>() {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(node.pos, path, e);
                None
            }
        }
    }

    fn seq<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [Node]> {
        match &node.value {
            NodeValue::Seq(items) => Some(items),
            NodeValue::Scalar { .. } | NodeValue::Map(_) => {
                self.error(
                    node.pos,
                    path,
                    format!("expected a list, found {}", node.describe()),
                );
                None
            }
        }
    }

    fn term(&mut self, node: &Node, path: &str, category: Category) -> Option<Term> {
        let s = self.string(node, path)?;
        match Term::from_catalog_name(category, &s) {
            Some(t) => Some(t),
            None => {
                let what = match category {
                    Category::ConditionType => "condition type",
                    Category::ConditionReason => "condition reason",
                    Category::EventReason => "event reason",
                    Category::Label => "label",
                    Category::PolicyField | Category::StatusField => "field",
                    Category::TerminalPhase => "phase",
                    Category::SchedulingGate => "scheduling gate",
                };
                self.error(
                    node.pos,
                    path,
                    format!(
                        "unknown {what} `{s}` (the vocabulary has: {})",
                        Term::catalog_names(category).join(", ")
                    ),
                );
                None
            }
        }
    }

    fn kind(&mut self, node: &Node, path: &str, allow_pod: bool) -> Option<Kind> {
        let s = self.string(node, path)?;
        match s.parse::<Kind>() {
            Ok(k) if k.is_grove() || (allow_pod && k == Kind::Pod) => Some(k),
            _ => {
                let mut allowed = vec!["PodClique", "PodCliqueScalingGroup", "PodCliqueSet"];
                if allow_pod {
                    allowed.insert(0, "Pod");
                }
                self.error(
                    node.pos,
                    path,
                    format!(
                        "unknown kind `{s}` (expected one of: {})",
                        allowed.join(", ")
                    ),
                );
                None
            }
        }
    }

    fn fixture_ref(&mut self, node: &Node, path: &str) -> Option<String> {
        let name = self.string(node, path)?;
        if !self.declared_fixtures.contains(&name) {
            self.error(
                node.pos,
                path,
                format!(
                    "fixture `{name}` is not declared in the case's `fixture`/`fixtures` ({})",
                    if self.declared_fixtures.is_empty() {
                        "none declared".to_owned()
                    } else {
                        self.declared_fixtures.join(", ")
                    }
                ),
            );
            return None;
        }
        Some(name)
    }

    /// Records the vocabulary terms named by the keys of a status/spec subset.
    fn note_field_terms(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    for category in [Category::StatusField, Category::PolicyField] {
                        if let Some(t) = Term::from_catalog_name(category, k) {
                            self.terms.insert(t);
                            if t == Term::ReplicaRestartCounts {
                                self.features.insert(Feature::ParentSemantics);
                            }
                        }
                    }
                    self.note_field_terms(v);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| self.note_field_terms(i)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }

    fn note_path_terms(&mut self, path: &str) {
        for segment in path.split('.') {
            let name = segment.split('[').next().unwrap_or(segment);
            for category in [Category::StatusField, Category::PolicyField] {
                if let Some(t) = Term::from_catalog_name(category, name) {
                    self.terms.insert(t);
                    if matches!(t, Term::ReplicaRestartCounts | Term::TargetNames) {
                        self.features.insert(Feature::ParentSemantics);
                    }
                }
            }
        }
    }

    fn patch_value(&mut self, node: &Node, path: &str) -> Option<Value> {
        match &node.value {
            NodeValue::Map(_) => {
                let v = node.to_json();
                self.note_field_terms(&v);
                Some(v)
            }
            NodeValue::Scalar { .. } | NodeValue::Seq(_) => {
                self.error(
                    node.pos,
                    path,
                    format!("expected a mapping, found {}", node.describe()),
                );
                None
            }
        }
    }

    /// `pod: <podclique>/<index>`, or `kind` + `name` (not both), of `remember:` and
    /// `objects:` entries.
    fn subject(&mut self, f: &Fields<'_>) -> Option<UidSubject> {
        let Some(p) = f.get("pod") else {
            return self.object_ref(f, false).map(UidSubject::Object);
        };
        if f.has("kind") || f.has("name") {
            self.error(
                p.pos,
                &f.child("pod"),
                "use either `pod` or `kind` + `name`",
            );
            return None;
        }
        self.pod_address(p, &f.child("pod"))
            .map(|(clique, index)| UidSubject::Pod { clique, index })
    }

    fn object_ref(&mut self, f: &Fields<'_>, allow_pod: bool) -> Option<ObjectRef> {
        let kind = self
            .required(f, "kind")
            .and_then(|n| self.kind(n, &f.child("kind"), allow_pod));
        let name = self
            .required(f, "name")
            .and_then(|n| self.name(n, &f.child("name")));
        Some(ObjectRef {
            kind: kind?,
            name: name?,
        })
    }

    fn pod_selector(&mut self, f: &Fields<'_>, allow_scopes: bool) -> Option<PodSelector> {
        let present: Vec<&str> = ["pod", "clique", "pcs"]
            .into_iter()
            .filter(|k| f.has(k))
            .collect();
        if present.len() != 1 {
            let want = if allow_scopes {
                "exactly one of `pod: <podclique>/<index>`, `clique` or `pcs`"
            } else {
                "`pod: <podclique>/<index>`"
            };
            self.error(f.pos, &f.path, format!("expected {want}"));
            return None;
        }
        let key = present[0];
        let node = f.get(key)?;
        let path = f.child(key);
        if key != "pod" && !allow_scopes {
            self.error(
                node.pos,
                &path,
                "expected `pod: <podclique>/<index>` (this action addresses a single pod)",
            );
            return None;
        }
        match key {
            "pod" => self
                .pod_address(node, &path)
                .map(|(clique, index)| PodSelector::Pod { clique, index }),
            "clique" => self.name(node, &path).map(PodSelector::Clique),
            _ => self.name(node, &path).map(PodSelector::PodCliqueSet),
        }
    }

    fn pod_address(&mut self, node: &Node, path: &str) -> Option<(String, u32)> {
        let s = self.string(node, path)?;
        let parsed = s.rsplit_once('/').and_then(|(c, i)| {
            let index = i.parse::<u32>().ok()?;
            is_dns_name(c).then(|| (c.to_owned(), index))
        });
        if parsed.is_none() {
            self.error(
                node.pos,
                path,
                format!(
                    "expected `<podclique>/<index>` (e.g. `job-0-worker/3`), found `{s}`; pods are addressed by PodClique and pod index, never by pod name"
                ),
            );
        }
        parsed
    }
}
