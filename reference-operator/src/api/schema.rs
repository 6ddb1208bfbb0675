//! Schema helpers for fields the derive cannot describe structurally on its own.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An object whose content is kept as written (`x-kubernetes-preserve-unknown-fields`).
pub(crate) fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of objects whose content is kept as written.
pub(crate) fn free_form_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// `status.conditions`: metav1 Conditions, a list-map keyed by `type` as upstream declares it.
pub(crate) fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item =
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// Template labels: bounded so the CEL rules comparing them (V9) stay within the cost budget.
pub(crate) fn label_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "maxProperties": 128,
        "additionalProperties": { "type": "string", "maxLength": 63 },
    })
}

/// Template annotations: bounded so the CEL rules comparing them (V9) stay within the cost
/// budget.
pub(crate) fn annotation_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "maxProperties": 128,
        "additionalProperties": { "type": "string", "maxLength": 65536 },
    })
}
