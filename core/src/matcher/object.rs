//! One object expectation judged aspect by aspect.

use crate::walk::Walk;
use serde_json::{Map, Value, json};

use crate::catalog::{
    ConditionExpectation, ConditionMatch, ConditionStatus, ObjectExpectation, ObjectRef,
    ObjectState, Subject,
};
use crate::snapshot::{controller_ref, controller_ref_is, is_deleting, uid};
use crate::vocab::{Kind, Term, TerminalSignal, Vocabulary, condition};

use super::values::{is_subset, project, strip_server_fields, translate_keys};

/// The judgement of one object expectation ([`match_object`]): its part of an
/// [`Evaluation`](super::Evaluation).
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
/// `observed` is the object as the snapshot has it ([`Snapshot::subject`](crate::snapshot::Snapshot::subject)); one being deleted
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
            json!({"metadata": {"name": o.walk(&["metadata", "name"])}}),
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
    let have_phase = observed.walk(&["status", "phase"]).and_then(Value::as_str);
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
