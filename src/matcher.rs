//! Judging observed state against an `expect` step: pure functions, no client, no clock.
//!
//! The rules, in order of application:
//! 1. Server-populated fields (uid, resourceVersion, managedFields, creationTimestamp,
//!    generation, condition and status timestamps) are stripped from observed objects.
//! 2. Expected ⊆ observed, recursively: every expected key must be present with a matching
//!    value; observed may have more. Lists whose expected items all carry `type` (conditions)
//!    are matched by `type`, those whose items all carry `name` by `name`, never by position;
//!    other lists must have the same length and match item by item. Numbers compare by value.
//! 3. Conditions are checked by type through the [`Vocabulary`], which knows how the selected
//!    revision shows a terminal state (a condition, or `status.phase`).
//! 4. A missing `replicaRestartCounts` entry reads as 0 (R3).
//!
//! [`evaluate`] judges a whole expectation against a [`Snapshot`] and keeps an expected and an
//! observed YAML document side by side for the diff.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::catalog::{
    ConditionMatch, ConditionStatus, EventExpectation, Expectation, ObjectExpectation, ObjectState,
    PodCount, PodFilter, PodSelector, Subject,
};
use crate::vocab::{Category, Kind, Term, TerminalSignal, Vocabulary, condition};

/// Metadata fields the API server fills in; never part of a judgement.
pub const SERVER_METADATA_FIELDS: &[&str] = &[
    "uid",
    "resourceVersion",
    "managedFields",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Timestamp fields stripped wherever they occur (conditions, container states, ...).
pub const TIMESTAMP_FIELDS: &[&str] = &[
    "lastTransitionTime",
    "lastUpdateTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
];

/// A copy of `object` without server-populated fields.
pub fn strip_server_fields(object: &Value) -> Value {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !TIMESTAMP_FIELDS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    let mut out = strip(object);
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in SERVER_METADATA_FIELDS {
            meta.remove(*f);
        }
    }
    out
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        _ => a == b,
    }
}

/// The key by which the items of an expected list are matched: `type`, `name` or none.
fn list_key(items: &[Value]) -> Option<&'static str> {
    ["type", "name"].into_iter().find(|key| {
        !items.is_empty()
            && items
                .iter()
                .all(|i| i.get(*key).is_some_and(Value::is_string))
    })
}

/// Whether `expected` ⊆ `observed` (see the module rules).
pub fn is_subset(expected: &Value, observed: &Value) -> bool {
    match (expected, observed) {
        (Value::Object(e), Value::Object(o)) => e
            .iter()
            .all(|(k, ev)| o.get(k).is_some_and(|ov| is_subset(ev, ov))),
        (Value::Array(e), Value::Array(o)) => match list_key(e) {
            Some(key) => e.iter().all(|ei| {
                o.iter()
                    .find(|oi| oi.get(key) == ei.get(key))
                    .is_some_and(|oi| is_subset(ei, oi))
            }),
            None => e.len() == o.len() && e.iter().zip(o).all(|(a, b)| is_subset(a, b)),
        },
        (e, o) => scalar_eq(e, o),
    }
}

/// `observed` pruned to the shape of `expected`, so a diff shows only what was asked for.
/// Keyed list items are reordered like the expected ones; missing keys stay missing.
pub fn project(expected: &Value, observed: &Value) -> Value {
    match (expected, observed) {
        (Value::Object(e), Value::Object(o)) => Value::Object(
            e.iter()
                .filter_map(|(k, ev)| o.get(k).map(|ov| (k.clone(), project(ev, ov))))
                .collect(),
        ),
        (Value::Array(e), Value::Array(o)) => match list_key(e) {
            Some(key) => Value::Array(
                e.iter()
                    .filter_map(|ei| {
                        o.iter()
                            .find(|oi| oi.get(key) == ei.get(key))
                            .map(|oi| project(ei, oi))
                    })
                    .collect(),
            ),
            None if e.len() == o.len() => {
                Value::Array(e.iter().zip(o).map(|(a, b)| project(a, b)).collect())
            }
            None => observed.clone(),
        },
        (_, o) => o.clone(),
    }
}

/// Renames default-revision field names (`targetNames`) to the revision's spelling.
pub fn translate_keys(value: &Value, vocab: &Vocabulary) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let term = Term::from_catalog_name(Category::PolicyField, k)
                        .or_else(|| Term::from_catalog_name(Category::StatusField, k));
                    let key = term.and_then(|t| vocab.name(t)).unwrap_or(k);
                    (key.to_owned(), translate_keys(v, vocab))
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| translate_keys(i, vocab)).collect())
        }
        other => other.clone(),
    }
}

/// Observed state at one instant, as the runner's watch caches hold it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Grove objects by kind and name (the current incarnation).
    pub objects: BTreeMap<(Kind, String), Value>,
    /// Every pod of the case's namespace.
    pub pods: Vec<Value>,
    /// Every Event of the case's namespace.
    pub events: Vec<Value>,
}

impl Snapshot {
    /// Adds or replaces an object (kind from its `kind`, name from `metadata.name`).
    pub fn insert(&mut self, object: Value) {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|k| k.parse::<Kind>().ok());
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (kind, name) {
            (Some(Kind::Pod), _) => self.pods.push(object),
            (Some(Kind::Event), _) => self.events.push(object),
            (Some(kind), Some(name)) => {
                self.objects.insert((kind, name), object);
            }
            _ => {}
        }
    }
}

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

fn is_deleting(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

fn label<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o.pointer("/metadata/labels")?.get(key)?.as_str()
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

/// Whether a pod is active (Pending or Running, not being deleted).
pub fn pod_is_active(pod: &Value) -> bool {
    matches!(phase(pod), "Pending" | "Running") && !is_deleting(pod)
}

/// Whether a pod is terminal (Succeeded or Failed).
pub fn pod_is_terminal(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn pod_is_ready(pod: &Value) -> bool {
    !is_deleting(pod)
        && condition(pod, "Ready")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("True")
}

/// The pods a selector addresses.
pub fn select_pods<'a>(
    pods: &'a [Value],
    selector: &PodSelector,
    vocab: &Vocabulary,
) -> Vec<&'a Value> {
    let clique_label = vocab.name(Term::LabelPodClique).unwrap_or_default();
    let index_label = vocab.name(Term::LabelPodIndex).unwrap_or_default();
    let part_of = vocab.name(Term::LabelPartOf).unwrap_or_default();
    pods.iter()
        .filter(|p| match selector {
            PodSelector::Pod { clique, index } => {
                label(p, clique_label) == Some(clique.as_str())
                    && label(p, index_label) == Some(index.to_string().as_str())
            }
            PodSelector::Clique(c) => label(p, clique_label) == Some(c.as_str()),
            PodSelector::PodCliqueSet(s) => label(p, part_of) == Some(s.as_str()),
        })
        .collect()
}

/// The current pod of `clique` with `index`: the one not being deleted, else the newest.
pub fn current_pod<'a>(
    pods: &'a [Value],
    clique: &str,
    index: u32,
    vocab: &Vocabulary,
) -> Option<&'a Value> {
    let selected = select_pods(
        pods,
        &PodSelector::Pod {
            clique: clique.to_owned(),
            index,
        },
        vocab,
    );
    let created = |p: &Value| {
        p.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    selected
        .iter()
        .copied()
        .filter(|p| !is_deleting(p))
        .max_by_key(|p| created(p))
        .or_else(|| selected.iter().copied().max_by_key(|p| created(p)))
}

fn count_pods(count: &PodCount, pods: &[Value], vocab: &Vocabulary) -> u32 {
    let n = select_pods(pods, &count.scope, vocab)
        .into_iter()
        .filter(|p| match count.filter {
            PodFilter::All => true,
            PodFilter::Phase(ph) => phase(p) == ph.as_str(),
            PodFilter::Active => pod_is_active(p),
            PodFilter::Terminal => pod_is_terminal(p),
            PodFilter::Ready => pod_is_ready(p),
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn describe_count(count: &PodCount) -> String {
    let what = match count.filter {
        PodFilter::All => "pods".to_owned(),
        PodFilter::Phase(p) => format!("{} pods", p.as_str()),
        PodFilter::Active => "active pods".to_owned(),
        PodFilter::Terminal => "terminal pods".to_owned(),
        PodFilter::Ready => "ready pods".to_owned(),
    };
    format!("{what} of {}", count.scope).replace("of pods of", "of")
}

/// The type the spec gives each job event (EV1–EV4); other events' types are not checked.
pub fn event_type(reason: Term) -> Option<&'static str> {
    match reason {
        Term::JobCompleted => Some("Normal"),
        Term::JobFailed | Term::GangRestartTriggered | Term::RestartBudgetExhaustedEvent => {
            Some("Warning")
        }
        _ => None,
    }
}

/// Whether `text` contains `word` with no letter or digit on either side.
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
        boundary(before) && boundary(after)
    })
}

fn event_count(exp: &EventExpectation, events: &[Value], vocab: &Vocabulary) -> u64 {
    let Some(reason) = vocab.name(exp.reason) else {
        return 0;
    };
    let type_ = event_type(exp.reason);
    events
        .iter()
        .filter(|e| e.get("reason").and_then(Value::as_str) == Some(reason))
        .filter(|e| type_.is_none_or(|t| e.get("type").and_then(Value::as_str) == Some(t)))
        .filter(|e| {
            let message = e
                .get("message")
                .or_else(|| e.get("note"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            exp.mentions.iter().all(|w| mentions(message, w))
        })
        .filter(|e| {
            let involved = e.get("involvedObject").or_else(|| e.get("regarding"));
            let kind_ok = exp.kind.is_none_or(|k| {
                involved.and_then(|i| i.get("kind")).and_then(Value::as_str) == Some(k.as_str())
            });
            let name_ok = exp.name.as_deref().is_none_or(|n| {
                involved.and_then(|i| i.get("name")).and_then(Value::as_str) == Some(n)
            });
            kind_ok && name_ok
        })
        .map(|e| {
            e.get("count")
                .and_then(Value::as_u64)
                .or_else(|| e.pointer("/series/count").and_then(Value::as_u64))
                .unwrap_or(1)
                .max(1)
        })
        .sum()
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

/// The expected and observed views of one object expectation, and its failures.
pub fn match_object(
    exp: &ObjectExpectation,
    observed: Option<&Value>,
    vocab: &Vocabulary,
) -> (bool, Vec<String>, Value, Value) {
    let subject = exp.subject.to_string();
    let observed = observed
        .filter(|o| !is_deleting(o))
        .map(strip_server_fields);
    let (conditions, labels, spec, status) = match &exp.state {
        ObjectState::Absent => {
            return match observed {
                None => (true, vec![], json!("absent"), json!("absent")),
                Some(o) => {
                    let shown = json!({"metadata": {"name": o.pointer("/metadata/name")}});
                    (
                        false,
                        vec![format!("{subject}: expected absent, but it exists")],
                        json!("absent"),
                        shown,
                    )
                }
            };
        }
        ObjectState::Present {
            conditions,
            labels,
            spec,
            status,
        } => (conditions, labels, spec, status),
    };
    let Some(observed) = observed else {
        return (
            false,
            vec![format!("{subject}: expected to exist, but it is absent")],
            json!("present"),
            json!("absent"),
        );
    };
    let mut failures = Vec::new();
    let mut expected_doc = Map::new();
    let mut observed_doc = Map::new();

    if !labels.is_empty() {
        let want: Map<String, Value> = labels
            .iter()
            .map(|(t, v)| {
                (
                    vocab.name(*t).unwrap_or(t.catalog_name()).to_owned(),
                    json!(v),
                )
            })
            .collect();
        let want = json!({"labels": want});
        let have = observed.get("metadata").cloned().unwrap_or(Value::Null);
        if !is_subset(&want, &have) {
            failures.push(format!("{subject}: labels differ"));
        }
        expected_doc.insert("metadata".into(), want.clone());
        observed_doc.insert("metadata".into(), project(&want, &have));
    }
    if let Some(spec) = spec {
        let want = translate_keys(spec, vocab);
        let have = observed.get("spec").cloned().unwrap_or(Value::Null);
        if !is_subset(&want, &have) {
            failures.push(format!("{subject}: spec differs"));
        }
        expected_doc.insert("spec".into(), want.clone());
        observed_doc.insert("spec".into(), project(&want, &have));
    }
    let mut want_status = status
        .as_ref()
        .map(|s| translate_keys(s, vocab))
        .unwrap_or(json!({}));
    let mut have_status = observed.get("status").cloned().unwrap_or(json!({}));
    if let Some(field) = vocab.name(Term::ReplicaRestartCounts)
        && let Some(want_len) = want_status
            .get(field)
            .and_then(Value::as_array)
            .map(Vec::len)
        && let Some(have) = have_status.as_object_mut()
    {
        // R3: a missing entry reads as 0, and so does a missing (or null) list.
        let counts = have.entry(field).or_insert(Value::Null);
        if counts.is_null() {
            *counts = json!([]);
        }
        if let Some(list) = counts.as_array_mut() {
            while list.len() < want_len {
                list.push(json!(0));
            }
        }
    }
    if status.is_some() && !is_subset(&want_status, &have_status) {
        failures.push(format!("{subject}: status differs"));
    }
    let mut projected_status = project(&want_status, &have_status);

    let kind = match &exp.subject {
        Subject::Object(o) => o.kind,
        Subject::Pod { .. } => Kind::Pod,
    };
    let signal = vocab.terminal_signal(kind);
    let mut want_conditions = Vec::new();
    let mut have_conditions = Vec::new();
    let mut phase_checks: Vec<(Term, &ConditionMatch)> = Vec::new();
    for c in conditions {
        let terminal = matches!(c.condition, Term::Completed | Term::Failed);
        if terminal && let Some(TerminalSignal::Phase { .. }) = signal {
            phase_checks.push((c.condition, &c.expect));
            continue;
        }
        let type_name = vocab
            .name(c.condition)
            .unwrap_or(c.condition.catalog_name());
        let present = condition(&observed, type_name);
        let (want, ok) = match &c.expect {
            ConditionMatch::Absent => (
                json!({"type": type_name, "status": "<absent>"}),
                present.is_none(),
            ),
            ConditionMatch::NotTrue => (
                json!({"type": type_name, "status": "<not True>"}),
                present
                    .and_then(|p| p.get("status"))
                    .and_then(Value::as_str)
                    != Some("True"),
            ),
            ConditionMatch::Status { status, reason } => {
                let mut want = json!({"type": type_name, "status": status.as_str()});
                if let Some(r) = reason {
                    want["reason"] = json!(vocab.name(*r).unwrap_or(r.catalog_name()));
                }
                let ok = present.is_some_and(|p| is_subset(&want, p));
                (want, ok)
            }
        };
        let have = if ok {
            want.clone()
        } else {
            match present {
                Some(p) => project(&want, p),
                None => json!({"type": type_name, "status": "<absent>"}),
            }
        };
        if !ok {
            failures.push(format!(
                "{subject}: condition {type_name} is {}",
                present
                    .and_then(|p| p.get("status"))
                    .and_then(Value::as_str)
                    .unwrap_or("absent")
            ));
        }
        want_conditions.push(want);
        have_conditions.push(have);
    }
    if !want_conditions.is_empty() {
        want_status["conditions"] = Value::Array(want_conditions);
        if let Some(m) = projected_status.as_object_mut() {
            m.insert("conditions".into(), Value::Array(have_conditions));
        }
    }
    if let (Some(TerminalSignal::Phase { completed, failed }), false) =
        (signal, phase_checks.is_empty())
    {
        let have_phase = observed.pointer("/status/phase").and_then(Value::as_str);
        let phase_of = |t: Term| {
            if t == Term::Completed {
                completed
            } else {
                failed
            }
        };
        let mut ok = true;
        let mut wants = Vec::new();
        for (term, m) in &phase_checks {
            let p = phase_of(*term);
            match m {
                ConditionMatch::Status {
                    status: ConditionStatus::True,
                    ..
                } => {
                    ok &= have_phase == Some(p);
                    wants.push(p.to_owned());
                }
                ConditionMatch::Status { .. }
                | ConditionMatch::Absent
                | ConditionMatch::NotTrue => {
                    ok &= have_phase != Some(p);
                    wants.push(format!("not {p}"));
                }
            }
        }
        // A phase that must be reached implies the others are not; show only it then.
        let want = match wants.iter().find(|w| !w.starts_with("not ")) {
            Some(reached) => json!(reached),
            None => json!(wants.join(" and ")),
        };
        let have = if ok {
            want.clone()
        } else {
            json!(have_phase.unwrap_or("<absent>"))
        };
        if !ok {
            failures.push(format!(
                "{subject}: phase is {}",
                have_phase.unwrap_or("absent")
            ));
        }
        want_status["phase"] = want;
        if let Some(m) = projected_status.as_object_mut() {
            m.insert("phase".into(), have);
        }
    }
    if want_status.as_object().is_some_and(|m| !m.is_empty()) {
        expected_doc.insert("status".into(), want_status);
        observed_doc.insert("status".into(), projected_status);
    }
    if expected_doc.is_empty() {
        expected_doc.insert("exists".into(), json!(true));
        observed_doc.insert("exists".into(), json!(true));
    }
    (
        failures.is_empty(),
        failures,
        Value::Object(expected_doc),
        Value::Object(observed_doc),
    )
}

fn uid(o: &Value) -> Option<&str> {
    o.pointer("/metadata/uid").and_then(Value::as_str)
}

/// The current UID of a remembered subject (object, or current pod of a clique index).
pub fn current_uid<'a>(
    subject: &crate::catalog::UidSubject,
    snapshot: &'a Snapshot,
    vocab: &Vocabulary,
) -> Option<&'a str> {
    match subject {
        crate::catalog::UidSubject::Object(o) => snapshot
            .objects
            .get(&(o.kind, o.name.clone()))
            .filter(|o| !is_deleting(o))
            .and_then(uid),
        crate::catalog::UidSubject::Pod { clique, index } => {
            current_pod(&snapshot.pods, clique, *index, vocab)
                .filter(|p| !is_deleting(p))
                .and_then(uid)
        }
    }
}

/// Judges `exp` against `snapshot`.
///
/// `remembered` maps each `remember` label to the UID recorded then; `current` maps each label
/// to the subject's UID now (`None`: gone) — the runner resolves both with [`current_uid`].
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
            let found = match &oe.subject {
                Subject::Object(r) => snapshot.objects.get(&(r.kind, r.name.clone())),
                Subject::Pod { clique, index } => {
                    current_pod(&snapshot.pods, clique, *index, vocab)
                }
            };
            let (_, f, want, have) = match_object(oe, found, vocab);
            failures.extend(f);
            e.insert(oe.subject.to_string(), want);
            o.insert(oe.subject.to_string(), have);
        }
        expected.insert("objects".into(), Value::Object(e));
        observed.insert("objects".into(), Value::Object(o));
    }
    if !exp.pods.is_empty() {
        let mut e = Map::new();
        let mut o = Map::new();
        for pc in &exp.pods {
            let n = count_pods(pc, &snapshot.pods, vocab);
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
            let n = event_count(ev, &snapshot.events, vocab);
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

/// Whether a rejection's `message` names `field` (default-revision spelling, translated). It
/// must contain a field path that, segment by segment, is
/// - the whole of `field`, or a suffix of it of at least two segments (`failure.maxRestarts`,
///   `podSpec.restartPolicy`): validation messages name a field relative to what they check;
/// - or a path below `field` (`…targetNames[1]`, `…podSpec.containers`): an element or a part
///   of it is at fault.
///
/// Segments compare by name and index, where a wildcard `[]` (CEL's notation) or a missing
/// index on either side matches any index. One word (`replicas`) is not enough, and a path
/// naming another field (`spec.template.cliques[0].spec.replicas` for `spec.replicas`) does
/// not count.
pub fn message_names_field(message: &str, field: &str, vocab: &Vocabulary) -> bool {
    let field = vocab
        .translate_field_path(field)
        .unwrap_or_else(|| field.to_owned());
    let wanted = path_segments(&field);
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']');
    message
        .split(|c: char| !is_path_char(c))
        .map(|token| token.trim_matches('.'))
        .filter(|token| !token.is_empty())
        .any(|token| {
            let named = path_segments(token);
            let same = |a: &[Segment], b: &[Segment]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
            };
            let whole_or_suffix = named.len() <= wanted.len()
                && (named.len() >= 2 || named.len() == wanted.len())
                && same(&named, &wanted[wanted.len() - named.len()..]);
            let below = named.len() > wanted.len() && same(&named[..wanted.len()], &wanted);
            whole_or_suffix || below
        })
}

/// One segment of a field path: a name and an index (`None`: none given, `Some(None)`: the
/// wildcard `[]`).
#[derive(Debug, PartialEq)]
struct Segment<'a> {
    name: &'a str,
    index: Option<Option<&'a str>>,
}

impl Segment<'_> {
    fn matches(&self, other: &Segment<'_>) -> bool {
        self.name == other.name
            && match (self.index, other.index) {
                (Some(Some(a)), Some(Some(b))) => a == b,
                _ => true,
            }
    }
}

/// `a.b[0].c[]` → `a`, `b[0]`, `c[]`; a trailing index on its own (`…targetNames[1]`) stays
/// with its name.
fn path_segments(path: &str) -> Vec<Segment<'_>> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('[') {
            Some((name, rest)) => {
                let index = rest.split(']').next().unwrap_or_default();
                Segment {
                    name,
                    index: Some((!index.is_empty()).then_some(index)),
                }
            }
            None => Segment {
                name: s,
                index: None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_matches_conditions_by_type_not_position() {
        let observed = json!({"status": {"conditions": [
            {"type": "Failed", "status": "False", "lastTransitionTime": "t"},
            {"type": "Completed", "status": "True", "reason": "CompletionCriteriaMet"}
        ], "replicas": 8}});
        assert!(is_subset(
            &json!({"status": {"conditions": [{"type": "Completed", "status": "True"}]}}),
            &observed
        ));
        assert!(!is_subset(
            &json!({"status": {"conditions": [{"type": "Completed", "status": "False"}]}}),
            &observed
        ));
        assert!(is_subset(&json!({"status": {"replicas": 8.0}}), &observed));
        assert!(!is_subset(&json!({"a": [1, 2]}), &json!({"a": [1, 2, 3]})));
    }

    #[test]
    fn server_fields_are_stripped() {
        let o = json!({"metadata": {"name": "x", "uid": "u", "resourceVersion": "1",
            "managedFields": [], "creationTimestamp": "t", "generation": 2},
            "status": {"conditions": [{"type": "A", "lastTransitionTime": "t"}]}});
        assert_eq!(
            strip_server_fields(&o),
            json!({"metadata": {"name": "x"}, "status": {"conditions": [{"type": "A"}]}})
        );
    }

    #[test]
    fn field_names_are_found_as_words() {
        let v = Vocabulary::default();
        let msg = "PodCliqueSet.grove.io \"job\" is invalid: spec.template.cliques[1].spec.policy.completion.success: Forbidden";
        assert!(message_names_field(
            msg,
            "spec.template.cliques[1].spec.policy.completion.success",
            &v
        ));
        assert!(!message_names_field("successful", "x.success", &v));
        let text = Vocabulary::new(crate::vocab::Revision::Grep0285ProposalText);
        assert!(message_names_field(
            "success.completedNames: Required",
            "spec.policy.completion.success.targetNames",
            &text
        ));
    }

    #[test]
    fn a_field_is_named_by_its_path_or_a_suffix_of_two_segments() {
        let v = Vocabulary::default();
        let field = "spec.template.cliques[0].spec.policy.completion.failure.maxRestarts";
        let webhook = "admission webhook denied the request: spec.template.cliques[0].spec.policy.completion.failure.maxRestarts: Invalid value: 2";
        assert!(message_names_field(webhook, field, &v));
        assert!(message_names_field(
            "failure.maxRestarts: must be 0",
            field,
            &v
        ));
        assert!(
            !message_names_field("maxRestarts: must be 0", field, &v),
            "one word"
        );
        assert!(
            !message_names_field("policy.completion: invalid", field, &v),
            "not a suffix"
        );
        assert!(
            !message_names_field(
                "spec.template.cliques[0].spec.replicas: immutable",
                "spec.replicas",
                &v
            ),
            "another field's path"
        );
        assert!(message_names_field(
            "spec.replicas: field is immutable",
            "spec.replicas",
            &v
        ));
        assert!(!message_names_field(
            "replicas is immutable",
            "spec.replicas",
            &v
        ));
    }
}
