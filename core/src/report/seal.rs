//! The digest a report carries of its own content (its `digest` field): SHA-256 of the
//! report as canonical JSON (object keys sorted, no spaces) without that field. It tells an
//! edit by hand from the file the suite wrote; it is not a signature: whoever edits a report
//! and computes the digest again is caught only by the checks `verify-report` makes of the
//! report's consistency and by running the command it names again.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The field holding the digest.
pub const DIGEST_FIELD: &str = "digest";

/// The digest of `report` (a JSON object), its [`DIGEST_FIELD`] left out: `sha256:<hex>`.
pub fn digest_of(report: &Value) -> String {
    let mut text = String::new();
    match report {
        Value::Object(map) => {
            let mut without = map.clone();
            without.remove(DIGEST_FIELD);
            canonical(&Value::Object(without), &mut text);
        }
        other => canonical(other, &mut text),
    }
    let hash = Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `value` as JSON with every object's keys sorted.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_ignores_key_order_and_its_own_field_but_not_a_value() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,{"y":2,"x":"s"}]}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":[1,{"x":"s","y":2}],"digest":"sha256:00","b":1}"#)
                .unwrap();
        assert_eq!(digest_of(&a), digest_of(&b));
        let c: Value = serde_json::from_str(r#"{"b":2,"a":[1,{"y":2,"x":"s"}]}"#).unwrap();
        assert_ne!(digest_of(&a), digest_of(&c));
        assert!(digest_of(&a).starts_with("sha256:"));
        assert_eq!(digest_of(&a).len(), "sha256:".len() + 64);
    }
}
