//! Merging a case's inline patch into a fixture or a live object.

use serde_json::Value;

/// Merges `patch` into `target`, Kubernetes-style:
///
/// | patch value | effect |
/// |---|---|
/// | mapping | merged key by key, recursively |
/// | `null` | removes the key |
/// | list whose items are all mappings with a `name`, merged into such a list | merged item by item by `name` (list-map semantics, like `cliques[]`); new names are appended; an item `{name: x, $delete: true}` removes `x` |
/// | anything else | replaces the value |
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (key, value) in p {
                if value.is_null() {
                    t.remove(key);
                    continue;
                }
                match t.get_mut(key) {
                    Some(existing) => merge_patch(existing, value),
                    None => {
                        let mut fresh = Value::Null;
                        merge_patch(&mut fresh, value);
                        t.insert(key.clone(), fresh);
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(p)) if is_named_list(t) && is_named_list(p) => {
            for item in p {
                let name = item.get("name").cloned();
                let delete = item.get("$delete").and_then(Value::as_bool) == Some(true);
                let at = t.iter().position(|e| e.get("name") == name.as_ref());
                match (at, delete) {
                    (Some(i), true) => {
                        t.remove(i);
                    }
                    (Some(i), false) => merge_patch(&mut t[i], item),
                    (None, true) => {}
                    (None, false) => t.push(strip_nulls(item)),
                }
            }
        }
        (target, patch) => *target = strip_nulls(patch),
    }
}

fn is_named_list(list: &[Value]) -> bool {
    !list.is_empty()
        && list
            .iter()
            .all(|i| i.get("name").is_some_and(Value::is_string))
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !v.is_null() && k.as_str() != "$delete")
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_maps_removes_nulls_and_merges_named_lists() {
        let mut target = json!({
            "spec": {"replicas": 1, "template": {"cliques": [
                {"name": "leader", "spec": {"replicas": 1}},
                {"name": "worker", "spec": {"replicas": 4, "policy": {"completion": {}}}}
            ]}}
        });
        merge_patch(
            &mut target,
            &json!({"spec": {"replicas": 2, "template": {"cliques": [
                {"name": "worker", "spec": {"policy": null, "replicas": 2}},
                {"name": "extra", "spec": {"replicas": 1, "x": null}},
                {"name": "leader", "$delete": true}
            ]}}}),
        );
        assert_eq!(
            target,
            json!({"spec": {"replicas": 2, "template": {"cliques": [
                {"name": "worker", "spec": {"replicas": 2}},
                {"name": "extra", "spec": {"replicas": 1}}
            ]}}})
        );
    }

    #[test]
    fn other_lists_are_replaced() {
        let mut target = json!({"a": [1, 2, 3]});
        merge_patch(&mut target, &json!({"a": [4]}));
        assert_eq!(target, json!({"a": [4]}));
    }
}
