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
//! observed YAML document side by side for the diff; [`match_object`] judges one object, aspect
//! by aspect (labels, spec, status, conditions). What the snapshot holds (which object or pod an
//! expectation is about, how many pods or events match) is looked up by [`crate::snapshot`].

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::catalog::{
    ConditionExpectation, ConditionMatch, ConditionStatus, EventExpectation, Expectation,
    ObjectExpectation, ObjectRef, ObjectState, PodCount, PodFilter, Subject,
};
use crate::snapshot::{Snapshot, controller_ref, controller_ref_is, event_type, is_deleting, uid};
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

/// The judgement of one object expectation ([`match_object`]): its part of an
/// [`Evaluation`].
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectMatch {
    /// Whether the object is as expected (no failures).
    pub ok: bool,
    /// One line per failed predicate, each starting with the subject.
    pub failures: Vec<String>,
    /// What was expected of the object, as a YAML-able document: `absent`, `present`, or the
    /// `metadata`, `spec` and `status` asked for (`exists: true` when nothing was).
    pub expected: Value,
    /// What was observed, projected to the shape of `expected` (identical where it matches).
    pub observed: Value,
}

impl ObjectMatch {
    fn new(failures: Vec<String>, expected: Value, observed: Value) -> Self {
        Self {
            ok: failures.is_empty(),
            failures,
            expected,
            observed,
        }
    }
}

/// One aspect of an object (labels, spec, status, conditions, phase) judged: its expected and
/// observed views and the predicates that failed.
struct Aspect {
    expected: Value,
    observed: Value,
    failures: Vec<String>,
}

impl Aspect {
    /// An aspect with empty views and no failures, for others to be nested in.
    fn empty() -> Self {
        Self {
            expected: json!({}),
            observed: json!({}),
            failures: Vec::new(),
        }
    }

    /// Nests `part` under `key` of both views (the observed one only when it is an object)
    /// and takes on its failures.
    fn nest(&mut self, key: &str, part: Aspect) {
        self.expected[key] = part.expected;
        if let Some(m) = self.observed.as_object_mut() {
            m.insert(key.into(), part.observed);
        }
        self.failures.extend(part.failures);
    }
}

/// The expected and observed views of one object expectation, and its failures.
///
/// `observed` is the object as the snapshot has it ([`Snapshot::subject`]); one being deleted
/// counts as absent.
pub fn match_object(
    exp: &ObjectExpectation,
    observed: Option<&Value>,
    owner: Option<&Value>,
    vocab: &Vocabulary,
) -> ObjectMatch {
    let subject = exp.subject.to_string();
    let observed = observed
        .filter(|o| !is_deleting(o))
        .map(strip_server_fields);
    let (conditions, labels, spec, status, owner_ref) = match &exp.state {
        ObjectState::Absent => return match_absent(&subject, observed.as_ref()),
        ObjectState::Present {
            conditions,
            labels,
            spec,
            status,
            owner: owner_ref,
        } => (conditions, labels, spec, status, owner_ref),
    };
    let Some(observed) = observed else {
        return ObjectMatch::new(
            vec![format!("{subject}: expected to exist, but it is absent")],
            json!("present"),
            json!("absent"),
        );
    };
    let mut judged = Aspect::empty();
    if !labels.is_empty() {
        judged.nest("metadata", match_labels(&subject, labels, &observed, vocab));
    }
    if let Some(owner_ref) = owner_ref {
        judged.nest(
            "controller",
            match_owner(&subject, owner_ref, owner, &observed),
        );
    }
    if let Some(spec) = spec {
        judged.nest("spec", match_spec(&subject, spec, &observed, vocab));
    }
    let kind = match &exp.subject {
        Subject::Object(o) => o.kind,
        Subject::Pod { .. } => Kind::Pod,
    };
    let status = match_status(
        &subject,
        kind,
        status.as_ref(),
        conditions,
        &observed,
        vocab,
    );
    if status.expected.as_object().is_some_and(|m| !m.is_empty()) {
        judged.nest("status", status);
    } else {
        judged.failures.extend(status.failures);
    }
    if judged.expected.as_object().is_some_and(Map::is_empty) {
        judged.expected = json!({"exists": true});
        judged.observed = json!({"exists": true});
    }
    ObjectMatch::new(judged.failures, judged.expected, judged.observed)
}

/// `owner: {kind, name}`: the object's controller ownerReference names that object as it is
/// now (`owner_now`: the owner in the snapshot, `None` when it does not exist); views of the
/// controller reference.
fn match_owner(
    subject: &str,
    owner_ref: &ObjectRef,
    owner_now: Option<&Value>,
    observed: &Value,
) -> Aspect {
    let want_uid = owner_now.and_then(uid).unwrap_or("(owner absent)");
    let expected =
        json!({"kind": owner_ref.kind.as_str(), "name": owner_ref.name, "uid": want_uid});
    let have = controller_ref(observed);
    let observed_view = have.map_or(
        json!("none"),
        |r| json!({"kind": r.get("kind"), "name": r.get("name"), "uid": r.get("uid")}),
    );
    let ok = owner_now.is_some_and(|o| controller_ref_is(observed, owner_ref, o));
    let failures = if ok {
        Vec::new()
    } else {
        vec![format!(
            "{subject}: expected its controller owner to be {owner_ref} (uid {want_uid})"
        )]
    };
    Aspect {
        failures,
        expected,
        observed: observed_view,
    }
}

/// `absent: true`: the object must not exist (or be being deleted).
fn match_absent(subject: &str, observed: Option<&Value>) -> ObjectMatch {
    match observed {
        None => ObjectMatch::new(vec![], json!("absent"), json!("absent")),
        Some(o) => ObjectMatch::new(
            vec![format!("{subject}: expected absent, but it exists")],
            json!("absent"),
            json!({"metadata": {"name": o.pointer("/metadata/name")}}),
        ),
    }
}

/// `labels:`: each (vocabulary) label present with its value; views of `metadata`.
fn match_labels(
    subject: &str,
    labels: &[(Term, String)],
    observed: &Value,
    vocab: &Vocabulary,
) -> Aspect {
    let want: Map<String, Value> = labels
        .iter()
        .map(|(t, v)| {
            (
                vocab.name(*t).unwrap_or(t.catalog_name()).to_owned(),
                json!(v),
            )
        })
        .collect();
    let want = json!({ "labels": want });
    let have = observed.get("metadata").cloned().unwrap_or(Value::Null);
    let failures = if is_subset(&want, &have) {
        vec![]
    } else {
        vec![format!("{subject}: labels differ")]
    };
    Aspect {
        observed: project(&want, &have),
        expected: want,
        failures,
    }
}

/// `spec:`: a subset of the observed `spec`, keys in the revision's spelling.
fn match_spec(subject: &str, spec: &Value, observed: &Value, vocab: &Vocabulary) -> Aspect {
    let want = translate_keys(spec, vocab);
    let have = observed.get("spec").cloned().unwrap_or(Value::Null);
    let failures = if is_subset(&want, &have) {
        vec![]
    } else {
        vec![format!("{subject}: spec differs")]
    };
    Aspect {
        observed: project(&want, &have),
        expected: want,
        failures,
    }
}

/// `status:` and `conditions:` together, as views of `status`: the status subset
/// ([`match_status_fields`]), the conditions read from `status.conditions`
/// ([`match_conditions`]) and those the revision shows as `status.phase` ([`match_phase`]).
fn match_status(
    subject: &str,
    kind: Kind,
    status: Option<&Value>,
    conditions: &[ConditionExpectation],
    observed: &Value,
    vocab: &Vocabulary,
) -> Aspect {
    let mut judged = match_status_fields(subject, status, observed, vocab);
    let signal = vocab.terminal_signal(kind);
    let (by_phase, by_type): (Vec<&ConditionExpectation>, Vec<&ConditionExpectation>) =
        conditions.iter().partition(|c| {
            matches!(c.condition, Term::Completed | Term::Failed)
                && matches!(signal, Some(TerminalSignal::Phase { .. }))
        });
    if !by_type.is_empty() {
        judged.nest(
            "conditions",
            match_conditions(subject, &by_type, observed, vocab),
        );
    }
    if let Some(TerminalSignal::Phase { completed, failed }) = signal
        && !by_phase.is_empty()
    {
        judged.nest(
            "phase",
            match_phase(subject, &by_phase, completed, failed, observed),
        );
    }
    judged
}

/// `status:`: a subset of the observed `status`, keys in the revision's spelling; a missing
/// `replicaRestartCounts` entry reads as 0 (R3). Without a `status:` the views are `{}` and
/// nothing fails.
fn match_status_fields(
    subject: &str,
    status: Option<&Value>,
    observed: &Value,
    vocab: &Vocabulary,
) -> Aspect {
    let want = status
        .map(|s| translate_keys(s, vocab))
        .unwrap_or(json!({}));
    let mut have = observed.get("status").cloned().unwrap_or(json!({}));
    if let Some(field) = vocab.name(Term::ReplicaRestartCounts)
        && let Some(want_len) = want.get(field).and_then(Value::as_array).map(Vec::len)
        && let Some(have) = have.as_object_mut()
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
    let failures = if status.is_some() && !is_subset(&want, &have) {
        vec![format!("{subject}: status differs")]
    } else {
        vec![]
    };
    Aspect {
        observed: project(&want, &have),
        expected: want,
        failures,
    }
}

/// `conditions:` read from `status.conditions`, by type; views of the conditions list.
fn match_conditions(
    subject: &str,
    conditions: &[&ConditionExpectation],
    observed: &Value,
    vocab: &Vocabulary,
) -> Aspect {
    let mut failures = Vec::new();
    let mut want_conditions = Vec::new();
    let mut have_conditions = Vec::new();
    for c in conditions {
        let type_name = vocab
            .name(c.condition)
            .unwrap_or(c.condition.catalog_name());
        let present = condition(observed, type_name);
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
    Aspect {
        expected: Value::Array(want_conditions),
        observed: Value::Array(have_conditions),
        failures,
    }
}

/// The terminal conditions (`Completed`, `Failed`) of a revision that shows them as
/// `status.phase` (`completed`, `failed`); views of the phase.
fn match_phase(
    subject: &str,
    conditions: &[&ConditionExpectation],
    completed: &str,
    failed: &str,
    observed: &Value,
) -> Aspect {
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
    for c in conditions {
        let p = phase_of(c.condition);
        match &c.expect {
            ConditionMatch::Status {
                status: ConditionStatus::True,
                ..
            } => {
                ok &= have_phase == Some(p);
                wants.push(p.to_owned());
            }
            ConditionMatch::Status { .. } | ConditionMatch::Absent | ConditionMatch::NotTrue => {
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
    let failures = if ok {
        vec![]
    } else {
        vec![format!(
            "{subject}: phase is {}",
            have_phase.unwrap_or("absent")
        )]
    };
    Aspect {
        expected: want,
        observed: have,
        failures,
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
