//! Expectations: an `expect` step's `within`/`for` and what it checks: `objects` (with their
//! conditions, labels, spec and status), `pods` counts, `recreated`/`unchanged` remembered
//! UIDs, and `events`.

use serde_json::Value;

use super::{Parser, join};
use crate::catalog::yaml::{Node, NodeValue};
use crate::catalog::{
    ConditionExpectation, EventExpectation, Expectation, ObjectExpectation, ObjectState, PodCount,
    PodFilter, PodPhase, Subject,
};
use crate::vocab::{Category, Feature, Kind, Term};

impl Parser<'_> {
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

    pub(in crate::catalog) fn expect(&mut self, node: &Node, path: &str) -> Option<Expectation> {
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
                "owner",
            ],
        )?;
        let subject = self.subject(&f).map(Subject::from);
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
                    Some("conditions" | "labels" | "spec" | "status" | "owner")
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
            .map(|n| self.conditions::<ConditionExpectation>(n, &f.child("conditions"), kind))
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
        let owner = match f.get("owner") {
            Some(n) => {
                let path = f.child("owner");
                let owner = self.fields(n, &path, &["kind", "name"]);
                Some(owner.and_then(|o| self.object_ref(&o, false))?)
            }
            None => None,
        };
        Some(ObjectExpectation {
            subject: subject?,
            state: ObjectState::Present {
                conditions,
                labels,
                spec,
                status,
                owner,
            },
        })
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
                "pod", "clique", "pcs", "phase", "count", "active", "terminal", "ready", "owned",
            ],
        )?;
        let scope = self.pod_selector(&f, true);
        let counters: Vec<&str> = ["count", "active", "terminal", "ready", "owned"]
            .into_iter()
            .filter(|k| f.has(k))
            .collect();
        if counters.len() != 1 {
            self.error(
                f.pos,
                path,
                "expected exactly one of `count` (with optional `phase`), `active`, `terminal`, `ready`, `owned`",
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
            "owned" => Some(PodFilter::Owned),
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
