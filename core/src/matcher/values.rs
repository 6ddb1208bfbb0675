//! Values: stripping server fields, the subset rule, projection and key translation.

use serde_json::Value;

use crate::vocab::{Category, Term, Vocabulary};

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
