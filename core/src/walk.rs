//! Reading a JSON value by a path of keys without the allocations of
//! [`serde_json::Value::pointer`], which unescapes every segment into a new string: the
//! snapshot and the monitor read a few fields of every pod on every change, and at thousands
//! of pods that cost dominated a case.

use serde_json::Value;

/// A value's field at a fixed path of object keys.
pub trait Walk {
    /// The value at `path` (object keys only), like `pointer("/a/b")` for `&["a", "b"]`.
    fn walk(&self, path: &[&str]) -> Option<&Value>;
}

impl Walk for Value {
    fn walk(&self, path: &[&str]) -> Option<&Value> {
        path.iter()
            .try_fold(self, |v, key| v.as_object()?.get(*key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_as_pointer_does_on_object_keys() {
        let v = serde_json::json!({"metadata": {"labels": {"a/b": "x"}, "name": "n"}, "list": [1]});
        for (path, keys) in [
            ("/metadata/name", &["metadata", "name"][..]),
            ("/metadata/labels", &["metadata", "labels"][..]),
            ("/metadata/missing", &["metadata", "missing"][..]),
            ("/list", &["list"][..]),
        ] {
            assert_eq!(v.pointer(path), v.walk(keys), "{path}");
        }
        assert_eq!(v.walk(&[]), Some(&v));
        assert_eq!(v.walk(&["list", "0"]), None, "array indices are not keys");
    }
}
