//! The CustomResourceDefinitions: derived from [`crate::api`], finished for the apiserver, and
//! rendered to the committed YAML under `reference-operator/crds/`.
//!
//! The derive gives a structural schema (every `$ref` inlined, IntOrString and Quantity as
//! `x-kubernetes-int-or-string`, `nullable` for options). On top of it [`crds`]:
//! - keeps the full core/v1 `PodSpec` schema for `podSpec` (so CEL can read
//!   `podSpec.restartPolicy` and compare pod templates, V5/V6/V9, and pods are validated as
//!   upstream's CRD does), but drops its descriptions: they are the core/v1 API docs, and
//!   without them the CRDs stay small enough for a client-side `kubectl apply`;
//! - injects the CEL rules of [`crate::admission`];
//! - checks the structural-schema invariants the apiserver enforces, so a unit test catches a
//!   schema the apiserver would refuse.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::admission::{self, Kind};
use crate::api::{PodClique, PodCliqueScalingGroup, PodCliqueSet};

/// Errors of CRD generation and rendering.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// A rule targets a schema node that does not exist.
    #[error("failed to place admission rule at {path}: no such schema node")]
    MissingNode {
        /// The node path.
        path: String,
    },
    /// The schema violates a structural-schema rule.
    #[error("failed to keep the schema structural at {path}: {problem}")]
    NotStructural {
        /// JSON path of the node.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// (De)serialisation of the CRD failed.
    #[error("failed to convert the CRD")]
    Json(#[from] serde_json::Error),
    /// YAML rendering failed.
    #[error("failed to render the CRD as YAML")]
    Yaml(#[from] serde_yaml::Error),
    /// Writing a file failed.
    #[error("failed to write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// File name of each CRD under `crds/`, in install order.
pub const FILES: [(Kind, &str); 3] = [
    (Kind::PodCliqueSet, "podcliquesets.yaml"),
    (Kind::PodCliqueScalingGroup, "podcliquescalinggroups.yaml"),
    (Kind::PodClique, "podcliques.yaml"),
];

/// The three CRDs, ready to install (PodCliqueSet, PodCliqueScalingGroup, PodClique).
///
/// # Panics
/// Never in practice: the generation is covered by unit tests ([`try_crds`] reports errors).
pub fn crds() -> Vec<CustomResourceDefinition> {
    try_crds().expect("CRD generation is covered by the crate's tests")
}

/// The three CRDs, or the first generation error.
pub fn try_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    FILES.iter().map(|(kind, _)| crd(*kind)).collect()
}

/// One finished CRD.
pub fn crd(kind: Kind) -> Result<CustomResourceDefinition, CrdError> {
    let raw = match kind {
        Kind::PodCliqueSet => PodCliqueSet::crd(),
        Kind::PodCliqueScalingGroup => PodCliqueScalingGroup::crd(),
        Kind::PodClique => PodClique::crd(),
    };
    let mut value = serde_json::to_value(raw)?;
    let versions =
        value["spec"]["versions"]
            .as_array_mut()
            .ok_or_else(|| CrdError::MissingNode {
                path: "spec.versions".into(),
            })?;
    for version in versions {
        let schema = &mut version["schema"]["openAPIV3Schema"];
        strip_pod_spec_descriptions(schema);
        for rule in admission::rules_for(kind) {
            let node = node_mut(schema, &rule.at).ok_or_else(|| CrdError::MissingNode {
                path: rule.at.join("."),
            })?;
            let rules = node
                .as_object_mut()
                .ok_or_else(|| CrdError::MissingNode {
                    path: rule.at.join("."),
                })?
                .entry("x-kubernetes-validations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(rules) = rules {
                rules.push(rule.to_json());
            }
        }
        check_structural(schema, "openAPIV3Schema")?;
    }
    Ok(serde_json::from_value(value)?)
}

/// The schema node at `path` (property names; `[]` for list items).
fn node_mut<'a>(schema: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(schema, |node, step| {
        if *step == "[]" {
            node.get_mut("items")
        } else {
            node.get_mut("properties")?.get_mut(*step)
        }
    })
}

/// Drop every `description` below a `podSpec` property (its own description stays).
fn strip_pod_spec_descriptions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get_mut("properties")
                && let Some(pod_spec) = props.get_mut("podSpec")
                && let Some(Value::Object(inner)) = pod_spec.get_mut("properties")
            {
                inner.values_mut().for_each(remove_descriptions);
            }
            for v in map.values_mut() {
                strip_pod_spec_descriptions(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_pod_spec_descriptions),
        _ => {}
    }
}

fn remove_descriptions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            // `description` is a keyword only in a schema; a property named "description"
            // lives under `properties` and is an object, so only drop string values.
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            map.values_mut().for_each(remove_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(remove_descriptions),
        _ => {}
    }
}

/// The structural-schema rules of the apiserver that a derived schema could break: no `$ref`,
/// a `type` on every node (unless int-or-string or preserve-unknown-fields), no
/// `additionalProperties` next to `properties`, `items` on arrays, list-map keys required or
/// defaulted.
fn check_structural(node: &Value, path: &str) -> Result<(), CrdError> {
    let fail = |problem: &str| {
        Err(CrdError::NotStructural {
            path: path.to_string(),
            problem: problem.to_string(),
        })
    };
    let Some(map) = node.as_object() else {
        return fail("schema node is not an object");
    };
    for banned in [
        "$ref",
        "definitions",
        "$defs",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
    ] {
        if map.contains_key(banned) {
            return fail(&format!("`{banned}` is not allowed"));
        }
    }
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let ty = map.get("type").and_then(Value::as_str);
    if ty.is_none() && !int_or_string && !preserve {
        return fail("node has no type");
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        return fail("`properties` and `additionalProperties` together");
    }
    if ty == Some("array") && !map.contains_key("items") {
        return fail("array without items");
    }
    if map.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let item = &map["items"];
        let required: Vec<&str> = item["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for key in map["x-kubernetes-list-map-keys"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = key.as_str().unwrap_or_default();
            let defaulted = item["properties"][key].get("default").is_some();
            if !required.contains(&key) && !defaulted {
                return fail(&format!(
                    "list-map key `{key}` is neither required nor defaulted"
                ));
            }
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, child) in props {
            check_structural(child, &format!("{path}.{name}"))?;
        }
    }
    if let Some(items) = map.get("items") {
        check_structural(items, &format!("{path}[]"))?;
    }
    if let Some(additional) = map.get("additionalProperties").filter(|a| a.is_object()) {
        check_structural(additional, &format!("{path}{{}}"))?;
    }
    Ok(())
}

/// A CRD as the YAML committed under `crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    Ok(serde_yaml::to_string(crd)?)
}

/// Every CRD file name with its YAML.
pub fn rendered() -> Result<Vec<(&'static str, String)>, CrdError> {
    FILES
        .iter()
        .map(|(kind, file)| Ok((*file, to_yaml(&crd(*kind)?)?)))
        .collect()
}

/// Write every CRD into `dir` (created if needed); returns the files written.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CrdError> {
    std::fs::create_dir_all(dir).map_err(|source| CrdError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    rendered()?
        .into_iter()
        .map(|(file, yaml)| {
            let path = dir.join(file);
            std::fs::write(&path, yaml).map_err(|source| CrdError::Io {
                path: path.clone(),
                source,
            })?;
            Ok(path)
        })
        .collect()
}

/// Where the committed CRDs live: `reference-operator/crds`.
pub fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crds")
}

#[cfg(test)]
mod tests;
