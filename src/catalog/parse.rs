//! Parsing a case file into a [`Case`], reporting every problem at once.
//!
//! The parser walks the positioned YAML tree by hand (no serde derive): each key is known
//! in advance, unknown keys are errors naming the allowed ones, and every diagnostic carries
//! file:line:column and the dotted field path.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use serde_json::Value;

use super::clauses::{self, ClauseStatus, Profile};
use super::diagnostic::Diagnostic;
use super::model::{
    Apply, Case, ConditionExpectation, ConditionMatch, ConditionStatus, ConditionWrite,
    ControllerAction, ControllerStep, Delete, DeletionTarget, Duration, EventExpectation,
    Expectation, NodeLoss, ObjectExpectation, ObjectRef, ObjectState, PodAction, PodCount,
    PodFilter, PodPhase, PodSelector, PodStep, Reject, Remember, Request, Step, StepKind, Subject,
    Subresource, Target, Trigger, UidSubject, Update,
};
use super::yaml::{self, Node, NodeValue, Pos};
use crate::vocab::{Category, Feature, Kind, Revision, Term};

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

const CASE_KEYS: &[&str] = &[
    "name",
    "summary",
    "clauses",
    "profile",
    "fixture",
    "fixtures",
    "revisions",
    "timeout",
    "steps",
];

const STEP_KEYS: &[&str] = &[
    "apply",
    "update",
    "delete",
    "force-delete",
    "reject",
    "exit",
    "unready",
    "ready",
    "evict",
    "preempt",
    "lose-node",
    "controller",
    "remember",
    "expect",
];

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

struct Parser<'a> {
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

    /// Records what a condition on `kind` needs from a revision.
    fn note_condition(&mut self, kind: Option<Kind>, condition: Term) {
        let terminal = matches!(condition, Term::Completed | Term::Failed);
        match (terminal, kind) {
            // A PodClique's terminal state translates to a phase where conditions are missing.
            (true, Some(Kind::PodClique) | Some(Kind::Pod)) => {}
            (true, Some(Kind::PodCliqueScalingGroup | Kind::PodCliqueSet)) => {
                self.features.insert(Feature::ParentSemantics);
            }
            _ => {
                self.terms.insert(condition);
            }
        }
    }

    fn case(&mut self, root: &Node) -> Option<Case> {
        let f = self.fields(root, "", CASE_KEYS)?;

        let name = self
            .required(&f, "name")
            .and_then(|n| self.name(n, "name").map(|s| (s, n.pos)));
        if let Some((name, pos)) = &name {
            let stem = self
                .file
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            if name != stem {
                self.error(
                    *pos,
                    "name",
                    format!("name `{name}` must equal the file name `{stem}`"),
                );
            }
        }

        let summary = self.required(&f, "summary").and_then(|n| {
            let s = self.string(n, "summary")?;
            if s.trim().is_empty() || s.contains('\n') {
                self.error(n.pos, "summary", "expected a single non-empty line");
                return None;
            }
            Some(s.trim().to_owned())
        });

        let profile = self.required(&f, "profile").and_then(|n| {
            let s = self.string(n, "profile")?;
            match s.parse::<Profile>() {
                Ok(p) => Some(p),
                Err(e) => {
                    self.error(n.pos, "profile", e);
                    None
                }
            }
        });

        let clauses = self
            .required(&f, "clauses")
            .and_then(|n| self.clauses(n, profile));

        let fixtures = match (f.get("fixture"), f.get("fixtures")) {
            (Some(_), Some(n)) => {
                self.error(
                    n.pos,
                    "fixtures",
                    "use either `fixture` or `fixtures`, not both",
                );
                None
            }
            (Some(n), None) => self.name(n, "fixture").map(|s| vec![(s, n.pos)]),
            (None, Some(n)) => self.seq(n, "fixtures").map(|items| {
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| {
                        self.name(item, &format!("fixtures[{i}]"))
                            .map(|s| (s, item.pos))
                    })
                    .collect()
            }),
            (None, None) => {
                self.error(f.pos, "", "missing required key `fixture` (or `fixtures`)");
                None
            }
        };
        let fixtures: Vec<String> = fixtures
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, pos)| {
                if self.declared_fixtures.contains(&name) {
                    self.error(pos, "fixtures", format!("fixture `{name}` listed twice"));
                    return None;
                }
                if let Some(known) = self.known_fixtures
                    && !known.contains(&name)
                {
                    self.error(
                        pos,
                        "fixtures",
                        format!("unknown fixture `{name}` (no fixtures/{name}.yaml)"),
                    );
                }
                self.declared_fixtures.push(name.clone());
                Some(name)
            })
            .collect();

        let revisions = f.get("revisions").and_then(|n| {
            let items = self.seq(n, "revisions")?;
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let path = format!("revisions[{i}]");
                let s = self.string(item, &path)?;
                match s.parse::<Revision>() {
                    Ok(r) if out.contains(&r) => {
                        self.error(item.pos, &path, format!("revision `{r}` listed twice"));
                    }
                    Ok(r) => out.push(r),
                    Err(e) => self.error(item.pos, &path, e.to_string()),
                }
            }
            if out.is_empty() && items.is_empty() {
                self.error(n.pos, "revisions", "expected at least one revision");
            }
            Some(out)
        });

        let timeout = f.get("timeout").and_then(|n| self.duration(n, "timeout"));

        let steps = self.required(&f, "steps").and_then(|n| {
            let items = self.seq(n, "steps")?;
            if items.is_empty() {
                self.error(n.pos, "steps", "expected at least one step");
            }
            Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.step(item, &format!("steps[{i}]")))
                    .collect::<Vec<_>>(),
            )
        });

        Some(Case {
            name: name?.0,
            path: self.file.to_path_buf(),
            area: String::new(),
            summary: summary?,
            clauses: clauses?,
            profile: profile?,
            fixtures,
            revisions,
            timeout,
            steps: steps?,
            terms: std::mem::take(&mut self.terms),
            features: std::mem::take(&mut self.features),
        })
    }

    fn clauses(&mut self, node: &Node, profile: Option<Profile>) -> Option<Vec<String>> {
        let items = self.seq(node, "clauses")?;
        if items.is_empty() {
            self.error(node.pos, "clauses", "expected at least one clause id");
        }
        let mut out: Vec<String> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("clauses[{i}]");
            let Some(id) = self.string(item, &path) else {
                continue;
            };
            match clauses::clause(&id) {
                None => self.error(
                    item.pos,
                    &path,
                    format!("unknown clause `{id}` (not in job-semantics.md)"),
                ),
                Some(_) if out.contains(&id) => {
                    self.error(item.pos, &path, format!("clause `{id}` listed twice"));
                }
                Some(c) => {
                    if profile == Some(Profile::Core) && c.status == ClauseStatus::Provisional {
                        self.error(
                            item.pos,
                            &path,
                            format!(
                                "clause `{id}` is provisional; a case citing it belongs in profile `extended`"
                            ),
                        );
                    }
                    out.push(id);
                }
            }
        }
        Some(out)
    }

    fn step(&mut self, node: &Node, path: &str) -> Option<Step> {
        let f = self.fields(node, path, STEP_KEYS)?;
        if f.entries.len() != 1 {
            self.error(
                node.pos,
                path,
                format!(
                    "a step has exactly one key (its kind), found {}",
                    f.entries.len()
                ),
            );
            return None;
        }
        let (key_node, body) = &f.entries[0];
        let key = key_node.as_str().unwrap_or_default();
        let p = join(path, key);
        let kind = match key {
            "apply" => StepKind::Apply(self.apply(body, &p)?),
            "update" => StepKind::Update(self.update(body, &p)?),
            "delete" | "force-delete" => self.delete(body, &p, key == "force-delete")?,
            "reject" => StepKind::Reject(self.reject(body, &p)?),
            "exit" | "unready" | "ready" | "evict" | "preempt" | "lose-node" => {
                StepKind::Pods(self.pod_step(key, body, &p)?)
            }
            "controller" => StepKind::Controller(self.controller(body, &p)?),
            "remember" => StepKind::Remember(self.remember(body, &p)?),
            "expect" => StepKind::Expect(self.expect(body, &p)?),
            _ => return None,
        };
        Some(Step {
            pos: node.pos,
            kind,
        })
    }

    fn apply(&mut self, node: &Node, path: &str) -> Option<Apply> {
        if node.as_str().is_some() {
            let fixture = self.fixture_ref(node, path)?;
            return Some(Apply {
                fixture,
                patch: None,
            });
        }
        let f = self.fields(node, path, &["fixture", "patch"])?;
        let fixture = self
            .required(&f, "fixture")
            .and_then(|n| self.fixture_ref(n, &f.child("fixture")));
        let patch = f
            .get("patch")
            .and_then(|n| self.patch_value(n, &f.child("patch")));
        Some(Apply {
            fixture: fixture?,
            patch,
        })
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

    /// `kind` + `name`, or `fixture`; returns the target and whether it was complete.
    fn target(&mut self, f: &Fields<'_>) -> Option<Target> {
        match (f.get("kind"), f.get("name"), f.get("fixture")) {
            (_, _, Some(fx)) if f.has("kind") || f.has("name") => {
                self.error(
                    fx.pos,
                    &f.child("fixture"),
                    "use either `fixture` or `kind` + `name`",
                );
                None
            }
            (None, None, Some(fx)) => self
                .fixture_ref(fx, &f.child("fixture"))
                .map(Target::Fixture),
            (Some(k), Some(n), None) => {
                let kind = self.kind(k, &f.child("kind"), false);
                let name = self.name(n, &f.child("name"));
                Some(Target::Object(ObjectRef {
                    kind: kind?,
                    name: name?,
                }))
            }
            _ => {
                self.error(f.pos, &f.path, "expected `kind` and `name`, or `fixture`");
                None
            }
        }
    }

    fn update(&mut self, node: &Node, path: &str) -> Option<Update> {
        let f = self.fields(
            node,
            path,
            &[
                "kind",
                "name",
                "fixture",
                "subresource",
                "patch",
                "conditions",
            ],
        )?;
        let target = self.target(&f);
        let subresource = match f.get("subresource") {
            None => Some(Subresource::Main),
            Some(n) => match self.string(n, &f.child("subresource")).as_deref() {
                Some("status") => Some(Subresource::Status),
                Some("scale") => Some(Subresource::Scale),
                Some(other) => {
                    self.error(
                        n.pos,
                        &f.child("subresource"),
                        format!("unknown subresource `{other}` (expected `status` or `scale`)"),
                    );
                    None
                }
                None => None,
            },
        };
        let patch = f
            .get("patch")
            .and_then(|n| self.patch_value(n, &f.child("patch")));
        let kind = match &target {
            Some(Target::Object(o)) => Some(o.kind),
            Some(Target::Fixture(_)) => Some(Kind::PodCliqueSet),
            None => None,
        };
        let conditions = match f.get("conditions") {
            None => Vec::new(),
            Some(n) => {
                if subresource != Some(Subresource::Status) {
                    self.error(
                        n.pos,
                        &f.child("conditions"),
                        "`conditions` needs `subresource: status`",
                    );
                }
                self.condition_writes(n, &f.child("conditions"), kind)
            }
        };
        if !f.has("patch") && !f.has("conditions") {
            self.error(f.pos, path, "expected `patch` or `conditions`");
        }
        Some(Update {
            target: target?,
            subresource: subresource?,
            patch,
            conditions,
        })
    }

    fn condition_status(&mut self, node: &Node, path: &str) -> Option<ConditionStatus> {
        match node.to_json() {
            Value::Bool(true) => Some(ConditionStatus::True),
            Value::Bool(false) => Some(ConditionStatus::False),
            Value::String(s) if s == "True" => Some(ConditionStatus::True),
            Value::String(s) if s == "False" => Some(ConditionStatus::False),
            Value::String(s) if s == "Unknown" => Some(ConditionStatus::Unknown),
            _ => {
                self.error(
                    node.pos,
                    path,
                    format!(
                        "expected a condition status \"True\", \"False\" or \"Unknown\", found `{}`",
                        node.as_str().unwrap_or(node.describe())
                    ),
                );
                None
            }
        }
    }

    fn condition_writes(
        &mut self,
        node: &Node,
        path: &str,
        kind: Option<Kind>,
    ) -> Vec<ConditionWrite> {
        let NodeValue::Map(entries) = &node.value else {
            self.error(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.describe()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let p = join(path, k.as_str().unwrap_or_default());
            let Some(condition) = self.term(k, &p, Category::ConditionType) else {
                continue;
            };
            self.note_condition(kind, condition);
            let (status, reason) = if let NodeValue::Map(_) = &v.value {
                let Some(cf) = self.fields(v, &p, &["status", "reason"]) else {
                    continue;
                };
                let status = self
                    .required(&cf, "status")
                    .and_then(|n| self.condition_status(n, &cf.child("status")));
                let reason = cf
                    .get("reason")
                    .and_then(|n| self.term(n, &cf.child("reason"), Category::ConditionReason));
                (status, reason)
            } else {
                (self.condition_status(v, &p), None)
            };
            if let Some(r) = reason {
                self.terms.insert(r);
            }
            if let Some(status) = status {
                out.push(ConditionWrite {
                    condition,
                    status,
                    reason,
                });
            }
        }
        out
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

    fn pod_step(&mut self, key: &str, node: &Node, path: &str) -> Option<PodStep> {
        let allowed: &[&str] = match key {
            "exit" => &["pod", "clique", "pcs", "code"],
            "lose-node" => &["pod", "mode", "alone"],
            "evict" | "preempt" => &["pod", "clique", "pcs", "terminal-phase"],
            _ => &["pod", "clique", "pcs"],
        };
        let f = self.fields(node, path, allowed)?;
        let without_terminal_phase = self.without_terminal_phase(&f)?;
        let selector = self.pod_selector(&f, key != "lose-node");
        let action = match key {
            "exit" => {
                let code = self.required(&f, "code").and_then(|n| {
                    let c = self.integer(n, &f.child("code"))?;
                    match i32::try_from(c) {
                        Ok(c) if (0..=255).contains(&c) => Some(c),
                        _ => {
                            self.error(n.pos, &f.child("code"), "expected an exit code in 0..=255");
                            None
                        }
                    }
                });
                PodAction::Exit(code?)
            }
            "unready" => PodAction::Unready,
            "ready" => PodAction::Ready,
            "evict" => PodAction::Evict,
            "preempt" => PodAction::Preempt,
            _ => {
                let mode = match f.get("mode") {
                    None => Some(NodeLoss::Vanish),
                    Some(n) => match self.string(n, &f.child("mode")).as_deref() {
                        Some("vanish") => Some(NodeLoss::Vanish),
                        Some("fail") => Some(NodeLoss::FailFirst),
                        Some(other) => {
                            self.error(
                                n.pos,
                                &f.child("mode"),
                                format!("unknown mode `{other}` (expected `vanish` or `fail`)"),
                            );
                            None
                        }
                        None => None,
                    },
                };
                PodAction::LoseNode(mode?)
            }
        };
        let alone = match f.get("alone") {
            None => false,
            Some(n) => self.boolean(n, &f.child("alone"))?,
        };
        Some(PodStep {
            selector: selector?,
            action,
            without_terminal_phase,
            alone,
        })
    }

    /// `terminal-phase: false` (the only value besides the default `true`).
    fn without_terminal_phase(&mut self, f: &Fields) -> Option<bool> {
        let Some(n) = f.get("terminal-phase") else {
            return Some(false);
        };
        Some(!self.boolean(n, &f.child("terminal-phase"))?)
    }

    fn delete(&mut self, node: &Node, path: &str, force: bool) -> Option<StepKind> {
        let f = self.fields(
            node,
            path,
            &[
                "kind",
                "name",
                "fixture",
                "pod",
                "clique",
                "pcs",
                "terminal-phase",
            ],
        )?;
        let is_pod = ["pod", "clique", "pcs"].iter().any(|k| f.has(k));
        if f.has("terminal-phase") && (force || !is_pod) {
            self.error(
                f.pos,
                &f.child("terminal-phase"),
                "`terminal-phase` applies to a graceful delete of pods only",
            );
            return None;
        }
        if is_pod {
            let without_terminal_phase = self.without_terminal_phase(&f)?;
            if ["kind", "name", "fixture"].iter().any(|k| f.has(k)) {
                self.error(
                    f.pos,
                    path,
                    "use either a pod selector (`pod`, `clique`, `pcs`) or an object (`kind` + `name`, `fixture`)",
                );
                return None;
            }
            let selector = self.pod_selector(&f, true)?;
            return Some(StepKind::Pods(PodStep {
                selector,
                action: if force {
                    PodAction::ForceDelete
                } else {
                    PodAction::Delete
                },
                without_terminal_phase,
                alone: false,
            }));
        }
        let target = self.target(&f)?;
        Some(StepKind::Delete(Delete { target, force }))
    }

    fn reject(&mut self, node: &Node, path: &str) -> Option<Reject> {
        let f = self.fields(node, path, &["apply", "update", "code", "field"])?;
        let request = match (f.get("apply"), f.get("update")) {
            (Some(a), None) => self.apply(a, &f.child("apply")).map(Request::Apply),
            (None, Some(u)) => self.update(u, &f.child("update")).map(Request::Update),
            _ => {
                self.error(f.pos, path, "expected exactly one of `apply` or `update`");
                None
            }
        };
        let code = f.get("code").and_then(|n| {
            let c = self.integer(n, &f.child("code"))?;
            match u16::try_from(c) {
                Ok(c) if (400..500).contains(&c) => Some(c),
                _ => {
                    self.error(n.pos, &f.child("code"), "expected an HTTP 4xx status code");
                    None
                }
            }
        });
        let field = self.required(&f, "field").and_then(|n| {
            let s = self.string(n, &f.child("field"))?;
            self.note_path_terms(&s);
            Some(s)
        });
        Some(Reject {
            request: request?,
            code,
            field: field?,
        })
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

    fn controller(&mut self, node: &Node, path: &str) -> Option<ControllerStep> {
        let action_of = |s: &str| match s {
            "pause" => Some(ControllerAction::Pause),
            "resume" => Some(ControllerAction::Resume),
            "crash" => Some(ControllerAction::Crash),
            _ => None,
        };
        if let Some(s) = node.as_str() {
            let Some(action) = action_of(s) else {
                self.error(
                    node.pos,
                    path,
                    format!("unknown controller action `{s}` (expected pause, resume or crash)"),
                );
                return None;
            };
            return Some(ControllerStep { action, when: None });
        }
        let f = self.fields(node, path, &["action", "when"])?;
        let action = self.required(&f, "action").and_then(|n| {
            let s = self.string(n, &f.child("action"))?;
            let a = action_of(&s);
            if a.is_none() {
                self.error(
                    n.pos,
                    &f.child("action"),
                    format!("unknown controller action `{s}` (expected pause, resume or crash)"),
                );
            }
            a
        });
        let when = match f.get("when") {
            Some(n) => Some(self.trigger(n, &f.child("when"))?),
            None => None,
        };
        Some(ControllerStep {
            action: action?,
            when,
        })
    }

    fn trigger(&mut self, node: &Node, path: &str) -> Option<Trigger> {
        let f = self.fields(node, path, &["changed", "deleted", "condition"])?;
        if f.entries.len() != 1 {
            self.error(
                f.pos,
                path,
                "expected exactly one of `changed`, `deleted` or `condition`",
            );
            return None;
        }
        let (k, body) = &f.entries[0];
        let key = k.as_str().unwrap_or_default();
        let p = join(path, key);
        match key {
            "changed" => {
                let cf = self.fields(body, &p, &["kind", "name", "path"])?;
                let object = self.object_ref(&cf, false);
                let field = self.required(&cf, "path").and_then(|n| {
                    let s = self.string(n, &cf.child("path"))?;
                    self.note_path_terms(&s);
                    Some(s)
                });
                Some(Trigger::Changed {
                    object: object?,
                    path: field?,
                })
            }
            "deleted" => {
                let cf = self.fields(body, &p, &["kind", "name", "pod", "clique"])?;
                if cf.has("pod") || cf.has("clique") {
                    let present = ["pod", "clique"].iter().filter(|k| cf.has(k)).count();
                    if present != 1 || cf.has("kind") || cf.has("name") {
                        self.error(
                            cf.pos,
                            &p,
                            "expected one of `pod`, `clique`, or `kind` (with optional `name`)",
                        );
                        return None;
                    }
                    return self
                        .pod_selector(&cf, true)
                        .map(DeletionTarget::Pod)
                        .map(Trigger::Deleted);
                }
                let kind = self
                    .required(&cf, "kind")
                    .and_then(|n| self.kind(n, &cf.child("kind"), true))?;
                match cf.get("name") {
                    None => Some(Trigger::Deleted(DeletionTarget::AnyOf(kind))),
                    Some(n) => {
                        if kind == Kind::Pod {
                            self.error(
                                n.pos,
                                &cf.child("name"),
                                "pods are addressed by `pod: <podclique>/<index>`, never by name",
                            );
                            return None;
                        }
                        let name = self.name(n, &cf.child("name"))?;
                        Some(Trigger::Deleted(DeletionTarget::Object(ObjectRef {
                            kind,
                            name,
                        })))
                    }
                }
            }
            _ => {
                let cf = self.fields(body, &p, &["kind", "name", "type", "status"])?;
                let object = self.object_ref(&cf, false);
                let condition = self
                    .required(&cf, "type")
                    .and_then(|n| self.term(n, &cf.child("type"), Category::ConditionType));
                let status = self
                    .required(&cf, "status")
                    .and_then(|n| self.condition_status(n, &cf.child("status")));
                if let (Some(o), Some(c)) = (&object, condition) {
                    self.note_condition(Some(o.kind), c);
                }
                Some(Trigger::Condition {
                    object: object?,
                    condition: condition?,
                    status: status?,
                })
            }
        }
    }

    fn remember(&mut self, node: &Node, path: &str) -> Option<Remember> {
        let f = self.fields(node, path, &["as", "kind", "name", "pod"])?;
        let label = self
            .required(&f, "as")
            .and_then(|n| self.string(n, &f.child("as")).map(|s| (s, n.pos)));
        let subject = if let Some(p) = f.get("pod") {
            if f.has("kind") || f.has("name") {
                self.error(
                    p.pos,
                    &f.child("pod"),
                    "use either `pod` or `kind` + `name`",
                );
                None
            } else {
                self.pod_address(p, &f.child("pod"))
                    .map(|(clique, index)| UidSubject::Pod { clique, index })
            }
        } else {
            self.object_ref(&f, false).map(UidSubject::Object)
        };
        let (label, pos) = label?;
        if !self.remembered.insert(label.clone()) {
            self.error(
                pos,
                &f.child("as"),
                format!("label `{label}` is already remembered"),
            );
        }
        Some(Remember {
            label,
            subject: subject?,
        })
    }

    fn labels_list(&mut self, node: &Node, path: &str) -> Vec<String> {
        let Some(items) = self.seq(node, path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            if let Some(s) = self.string(item, &p) {
                if !self.remembered.contains(&s) {
                    self.error(
                        item.pos,
                        &p,
                        format!("`{s}` is not remembered by an earlier `remember` step"),
                    );
                }
                out.push(s);
            }
        }
        out
    }

    fn expect(&mut self, node: &Node, path: &str) -> Option<Expectation> {
        let f = self.fields(
            node,
            path,
            &[
                "within",
                "for",
                "objects",
                "pods",
                "recreated",
                "unchanged",
                "events",
            ],
        )?;
        let within = f
            .get("within")
            .and_then(|n| self.duration(n, &f.child("within")));
        let hold = f.get("for").and_then(|n| self.duration(n, &f.child("for")));
        if !f.has("within") && !f.has("for") {
            self.error(
                f.pos,
                path,
                "expected `within: <duration>` (becomes true) and/or `for: <duration>` (stays true)",
            );
        }
        let mut e = Expectation {
            within,
            hold,
            ..Expectation::default()
        };
        if let Some(n) = f.get("objects") {
            let p = f.child("objects");
            if let Some(items) = self.seq(n, &p) {
                e.objects = items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.object_expectation(item, &format!("{p}[{i}]")))
                    .collect();
            }
        }
        if let Some(n) = f.get("pods") {
            let p = f.child("pods");
            if let Some(items) = self.seq(n, &p) {
                e.pods = items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.pod_count(item, &format!("{p}[{i}]")))
                    .collect();
            }
        }
        if let Some(n) = f.get("recreated") {
            e.recreated = self.labels_list(n, &f.child("recreated"));
        }
        if let Some(n) = f.get("unchanged") {
            e.unchanged = self.labels_list(n, &f.child("unchanged"));
        }
        if let Some(n) = f.get("events") {
            let p = f.child("events");
            if let Some(items) = self.seq(n, &p) {
                e.events = items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.event_expectation(item, &format!("{p}[{i}]")))
                    .collect();
            }
        }
        if e.objects.is_empty()
            && e.pods.is_empty()
            && e.recreated.is_empty()
            && e.unchanged.is_empty()
            && e.events.is_empty()
            && !["objects", "pods", "recreated", "unchanged", "events"]
                .iter()
                .any(|k| f.has(k))
        {
            self.error(
                f.pos,
                path,
                "expected at least one of `objects`, `pods`, `recreated`, `unchanged`, `events`",
            );
        }
        Some(e)
    }

    fn object_expectation(&mut self, node: &Node, path: &str) -> Option<ObjectExpectation> {
        let f = self.fields(
            node,
            path,
            &[
                "kind",
                "name",
                "pod",
                "absent",
                "conditions",
                "labels",
                "spec",
                "status",
            ],
        )?;
        let subject = if let Some(p) = f.get("pod") {
            if f.has("kind") || f.has("name") {
                self.error(
                    p.pos,
                    &f.child("pod"),
                    "use either `pod` or `kind` + `name`",
                );
                None
            } else {
                self.pod_address(p, &f.child("pod"))
                    .map(|(clique, index)| Subject::Pod { clique, index })
            }
        } else {
            self.object_ref(&f, false).map(Subject::Object)
        };
        let kind = match &subject {
            Some(Subject::Object(o)) => Some(o.kind),
            Some(Subject::Pod { .. }) => Some(Kind::Pod),
            None => None,
        };
        let absent = match f.get("absent") {
            Some(n) => self.boolean(n, &f.child("absent"))?,
            None => false,
        };
        if absent {
            if let Some((k, _)) = f.entries.iter().find(|(k, _)| {
                matches!(
                    k.as_str(),
                    Some("conditions" | "labels" | "spec" | "status")
                )
            }) {
                self.error(
                    k.pos,
                    &f.child(k.as_str().unwrap_or_default()),
                    "an absent object has no state to match",
                );
            }
            return Some(ObjectExpectation {
                subject: subject?,
                state: ObjectState::Absent,
            });
        }
        let conditions = f
            .get("conditions")
            .map(|n| self.condition_expectations(n, &f.child("conditions"), kind))
            .unwrap_or_default();
        let labels = f
            .get("labels")
            .map(|n| self.label_expectations(n, &f.child("labels")))
            .unwrap_or_default();
        let spec = f
            .get("spec")
            .and_then(|n| self.patch_value(n, &f.child("spec")));
        let status = f.get("status").and_then(|n| {
            let v = self.patch_value(n, &f.child("status"))?;
            if let Some(c) = n.get("conditions") {
                self.error(
                    c.pos,
                    &join(&f.child("status"), "conditions"),
                    "match conditions by type with `conditions:` beside `status:`",
                );
            }
            Some(v)
        });
        Some(ObjectExpectation {
            subject: subject?,
            state: ObjectState::Present {
                conditions,
                labels,
                spec,
                status,
            },
        })
    }

    fn condition_expectations(
        &mut self,
        node: &Node,
        path: &str,
        kind: Option<Kind>,
    ) -> Vec<ConditionExpectation> {
        let NodeValue::Map(entries) = &node.value else {
            self.error(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.describe()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let p = join(path, k.as_str().unwrap_or_default());
            let Some(condition) = self.term(k, &p, Category::ConditionType) else {
                continue;
            };
            self.note_condition(kind, condition);
            let expect = if v.as_str() == Some("absent") {
                Some(ConditionMatch::Absent)
            } else if v.as_str() == Some("not-true") {
                Some(ConditionMatch::NotTrue)
            } else if let NodeValue::Map(_) = &v.value {
                let Some(cf) = self.fields(v, &p, &["status", "reason"]) else {
                    continue;
                };
                let status = self
                    .required(&cf, "status")
                    .and_then(|n| self.condition_status(n, &cf.child("status")));
                let reason = cf
                    .get("reason")
                    .and_then(|n| self.term(n, &cf.child("reason"), Category::ConditionReason));
                if let Some(r) = reason {
                    self.terms.insert(r);
                }
                status.map(|status| ConditionMatch::Status { status, reason })
            } else {
                self.condition_status(v, &p)
                    .map(|status| ConditionMatch::Status {
                        status,
                        reason: None,
                    })
            };
            if let Some(expect) = expect {
                out.push(ConditionExpectation { condition, expect });
            }
        }
        out
    }

    fn label_expectations(&mut self, node: &Node, path: &str) -> Vec<(Term, String)> {
        let NodeValue::Map(entries) = &node.value else {
            self.error(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.describe()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let p = join(path, k.as_str().unwrap_or_default());
            let term = self.term(k, &p, Category::Label);
            let value = self.string(v, &p);
            if let (Some(t), Some(value)) = (term, value) {
                self.terms.insert(t);
                out.push((t, value));
            }
        }
        out
    }

    fn pod_count(&mut self, node: &Node, path: &str) -> Option<PodCount> {
        let f = self.fields(
            node,
            path,
            &[
                "pod", "clique", "pcs", "phase", "count", "active", "terminal", "ready",
            ],
        )?;
        let scope = self.pod_selector(&f, true);
        let counters: Vec<&str> = ["count", "active", "terminal", "ready"]
            .into_iter()
            .filter(|k| f.has(k))
            .collect();
        if counters.len() != 1 {
            self.error(
                f.pos,
                path,
                "expected exactly one of `count` (with optional `phase`), `active`, `terminal`, `ready`",
            );
            return None;
        }
        let key = counters[0];
        let count_node = f.get(key)?;
        let count = self.unsigned(count_node, &f.child(key));
        if let Some(p) = f.get("phase")
            && key != "count"
        {
            self.error(p.pos, &f.child("phase"), "`phase` goes with `count`");
        }
        let filter = match key {
            "active" => Some(PodFilter::Active),
            "terminal" => Some(PodFilter::Terminal),
            "ready" => Some(PodFilter::Ready),
            _ => match f.get("phase") {
                None => Some(PodFilter::All),
                Some(n) => {
                    let s = self.string(n, &f.child("phase"));
                    match s.as_deref().and_then(PodPhase::parse) {
                        Some(p) => Some(PodFilter::Phase(p)),
                        None => {
                            if let Some(s) = s {
                                self.error(
                                    n.pos,
                                    &f.child("phase"),
                                    format!(
                                        "unknown pod phase `{s}` (expected Pending, Running, Succeeded, Failed, Unknown)"
                                    ),
                                );
                            }
                            None
                        }
                    }
                }
            },
        };
        Some(PodCount {
            scope: scope?,
            filter: filter?,
            count: count?,
        })
    }

    fn event_expectation(&mut self, node: &Node, path: &str) -> Option<EventExpectation> {
        let f = self.fields(node, path, &["reason", "kind", "name", "count", "mentions"])?;
        let reason = self
            .required(&f, "reason")
            .and_then(|n| self.term(n, &f.child("reason"), Category::EventReason));
        let kind = match f.get("kind") {
            Some(n) => Some(self.kind(n, &f.child("kind"), true)?),
            None => None,
        };
        let name = match f.get("name") {
            Some(n) => Some(self.name(n, &f.child("name"))?),
            None => None,
        };
        if name.is_some() && kind.is_none() {
            self.error(f.pos, path, "`name` needs `kind`");
        }
        let count = match f.get("count") {
            Some(n) => Some(self.unsigned(n, &f.child("count"))?),
            None => None,
        };
        let mentions = match f.get("mentions") {
            Some(n) => self.words(n, &f.child("mentions"))?,
            None => Vec::new(),
        };
        let reason = reason?;
        self.terms.insert(reason);
        if matches!(kind, Some(Kind::PodCliqueScalingGroup | Kind::PodCliqueSet))
            && matches!(reason, Term::JobCompleted | Term::JobFailed)
        {
            self.features.insert(Feature::ParentSemantics);
        }
        Some(EventExpectation {
            reason,
            kind,
            name,
            count,
            mentions,
        })
    }

    /// A list of words: scalars, each a single word (no spaces).
    fn words(&mut self, node: &Node, path: &str) -> Option<Vec<String>> {
        let items = self.seq(node, path)?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let word = match item.to_json() {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                _ => {
                    self.error(
                        item.pos,
                        &p,
                        format!("expected a word, found {}", item.describe()),
                    );
                    continue;
                }
            };
            if word.is_empty() || word.chars().any(|c| !c.is_ascii_alphanumeric() && c != '-') {
                self.error(item.pos, &p, format!("`{word}` is not one word"));
                continue;
            }
            out.push(word);
        }
        Some(out)
    }
}
