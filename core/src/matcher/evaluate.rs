//! A whole expectation judged against a snapshot.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::catalog::{EventExpectation, Expectation, ObjectState, PodCount, PodFilter};
use crate::snapshot::{Snapshot, event_type};
use crate::vocab::Vocabulary;

use super::object::match_object;

/// A UID remembered by a `remember` step.
pub type Remembered = BTreeMap<String, String>;

/// The judgement of one expectation at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Whether every predicate holds.
    pub ok: bool,
    /// One line per failed predicate.
    pub failures: Vec<String>,
    /// What was expected, as a YAML-able document.
    pub expected: Value,
    /// What was observed, projected to the same shape (identical where it matches).
    pub observed: Value,
}

impl Evaluation {
    /// The expected-vs-observed diff of this evaluation (plain text).
    pub fn diff(&self) -> String {
        crate::diff::diff_values(&self.expected, &self.observed, crate::diff::Style::Plain)
    }
}

fn describe_count(count: &PodCount) -> String {
    let what = match count.filter {
        PodFilter::All => "pods".to_owned(),
        PodFilter::Phase(p) => format!("{} pods", p.as_str()),
        PodFilter::Active => "active pods".to_owned(),
        PodFilter::Terminal => "terminal pods".to_owned(),
        PodFilter::Ready => "ready pods".to_owned(),
        PodFilter::Owned => "pods controlled by their PodClique".to_owned(),
    };
    format!("{what} of {}", count.scope).replace("of pods of", "of")
}

fn describe_event(exp: &EventExpectation) -> String {
    let mut s = exp.reason.catalog_name().to_owned();
    if let Some(t) = event_type(exp.reason) {
        s.push_str(&format!(" ({t})"));
    }
    if let Some(k) = exp.kind {
        s.push_str(&format!(" on {k}"));
    }
    if let Some(n) = &exp.name {
        s.push_str(&format!(" {n}"));
    }
    if !exp.mentions.is_empty() {
        s.push_str(&format!(" mentioning {}", exp.mentions.join(", ")));
    }
    s
}

/// Judges `exp` against `snapshot`.
///
/// `remembered` maps each `remember` label to the UID recorded then; `current` maps each label
/// to the subject's UID now (`None`: gone) — the runner resolves both with
/// [`Snapshot::current_uids`].
pub fn evaluate(
    exp: &Expectation,
    snapshot: &Snapshot,
    remembered: &Remembered,
    current: &BTreeMap<String, Option<String>>,
    vocab: &Vocabulary,
) -> Evaluation {
    let mut failures = Vec::new();
    let mut expected = Map::new();
    let mut observed = Map::new();

    if !exp.objects.is_empty() {
        let mut e = Map::new();
        let mut o = Map::new();
        for oe in &exp.objects {
            let found = snapshot.subject(&oe.subject, vocab);
            let owner = match &oe.state {
                ObjectState::Present {
                    owner: Some(owner), ..
                } => snapshot.object(owner),
                _ => None,
            };
            let judged = match_object(oe, found, owner, vocab);
            failures.extend(judged.failures);
            e.insert(oe.subject.to_string(), judged.expected);
            o.insert(oe.subject.to_string(), judged.observed);
        }
        expected.insert("objects".into(), Value::Object(e));
        observed.insert("objects".into(), Value::Object(o));
    }
    if !exp.pods.is_empty() {
        let mut e = Map::new();
        let mut o = Map::new();
        for pc in &exp.pods {
            let n = snapshot.count_pods(pc, vocab);
            let key = describe_count(pc);
            if n != pc.count {
                failures.push(format!("{key}: expected {}, observed {n}", pc.count));
            }
            e.insert(key.clone(), json!(pc.count));
            o.insert(key, json!(n));
        }
        expected.insert("pods".into(), Value::Object(e));
        observed.insert("pods".into(), Value::Object(o));
    }
    for (field, labels, want_new) in [
        ("recreated", &exp.recreated, true),
        ("unchanged", &exp.unchanged, false),
    ] {
        if labels.is_empty() {
            continue;
        }
        let mut e = Map::new();
        let mut o = Map::new();
        for l in labels {
            let old = remembered.get(l).map(String::as_str);
            let now = current.get(l).cloned().flatten();
            let have = match (&now, old) {
                (None, _) => "absent",
                (Some(n), Some(o)) if n == o => "same uid",
                (Some(_), _) => "new uid",
            };
            let want = if want_new { "new uid" } else { "same uid" };
            if have != want {
                failures.push(format!("{l}: expected {want}, observed {have}"));
            }
            e.insert(l.clone(), json!(want));
            o.insert(l.clone(), json!(have));
        }
        expected.insert(field.into(), Value::Object(e));
        observed.insert(field.into(), Value::Object(o));
    }
    if !exp.events.is_empty() {
        let mut e = Map::new();
        let mut o = Map::new();
        for ev in &exp.events {
            let n = snapshot.count_events(ev, vocab);
            let key = describe_event(ev);
            let (ok, want) = match ev.count {
                Some(c) => (n == u64::from(c), json!(c)),
                None => (n >= 1, json!("at least 1")),
            };
            let have = if ok { want.clone() } else { json!(n) };
            if !ok {
                failures.push(format!("event {key}: expected {want}, observed {n}"));
            }
            e.insert(key.clone(), want);
            o.insert(key, have);
        }
        expected.insert("events".into(), Value::Object(e));
        observed.insert("events".into(), Value::Object(o));
    }
    Evaluation {
        ok: failures.is_empty(),
        failures,
        expected: Value::Object(expected),
        observed: Value::Object(observed),
    }
}
