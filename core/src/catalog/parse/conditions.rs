//! Conditions: the one parser of a `conditions:` mapping (type → status, `{status, reason}`,
//! or, in an expectation, `absent` / `not-true`), shared by `update` (the conditions a step
//! writes) and object expectations (the conditions a case expects), plus the status scalar
//! and the bookkeeping of what a condition needs from a revision.

use serde_json::Value;

use super::{Parser, join};
use crate::catalog::yaml::{Node, NodeValue};
use crate::catalog::{ConditionExpectation, ConditionMatch, ConditionStatus, ConditionWrite};
use crate::vocab::{Category, Feature, Kind, Term};

/// One entry of a `conditions:` mapping, as the caller keeps it.
pub(super) trait ConditionEntry: Sized {
    /// The entry a bare word other than a status stands for (`absent`, `not-true`); `None`
    /// when the word is not one, and then the value must be a status.
    fn word(condition: Term, word: &str) -> Option<Self>;

    /// The entry for a status, with the reason when one was given.
    fn status(condition: Term, status: ConditionStatus, reason: Option<Term>) -> Self;
}

/// `update … conditions:`: a status and an optional reason to write; no words.
impl ConditionEntry for ConditionWrite {
    fn word(_: Term, _: &str) -> Option<Self> {
        None
    }

    fn status(condition: Term, status: ConditionStatus, reason: Option<Term>) -> Self {
        ConditionWrite {
            condition,
            status,
            reason,
        }
    }
}

/// `expect … objects[] … conditions:`: also `absent` and `not-true`.
impl ConditionEntry for ConditionExpectation {
    fn word(condition: Term, word: &str) -> Option<Self> {
        let expect = match word {
            "absent" => ConditionMatch::Absent,
            "not-true" => ConditionMatch::NotTrue,
            _ => return None,
        };
        Some(ConditionExpectation { condition, expect })
    }

    fn status(condition: Term, status: ConditionStatus, reason: Option<Term>) -> Self {
        ConditionExpectation {
            condition,
            expect: ConditionMatch::Status { status, reason },
        }
    }
}

impl Parser<'_> {
    /// Records what a condition on `kind` needs from a revision.
    pub(super) fn note_condition(&mut self, kind: Option<Kind>, condition: Term) {
        let terminal = matches!(condition, Term::Completed | Term::Failed);
        match (terminal, kind) {
            // A PodClique's terminal state translates to a phase where conditions are missing.
            (true, Some(Kind::PodClique) | Some(Kind::Pod)) => {}
            (true, Some(Kind::PodCliqueScalingGroup | Kind::PodCliqueSet)) => {
                self.features.insert(Feature::ParentSemantics);
            }
            (false, _) | (true, None | Some(Kind::Event)) => {
                self.terms.insert(condition);
            }
        }
    }

    pub(super) fn condition_status(&mut self, node: &Node, path: &str) -> Option<ConditionStatus> {
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

    /// A `conditions:` mapping on an object of `kind`: each key a condition type, each value a
    /// word `T` accepts, a status, or `{status, reason}`. Entries with a problem are reported
    /// and left out.
    pub(super) fn conditions<T: ConditionEntry>(
        &mut self,
        node: &Node,
        path: &str,
        kind: Option<Kind>,
    ) -> Vec<T> {
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
            if let Some(entry) = v.as_str().and_then(|w| T::word(condition, w)) {
                out.push(entry);
                continue;
            }
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
                out.push(T::status(condition, status, reason));
            }
        }
        out
    }
}
