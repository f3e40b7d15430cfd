//! JSON as kube-apiserver writes it: an object's keys in upstream's (Go struct) order at the top level and
//! in `metadata` — `kind, apiVersion, metadata, spec, …, status`; a Status's `kind, apiVersion, metadata,
//! status, message, reason, details, code` — so clients comparing bodies byte for byte see what a real
//! server sends. Deeper keys keep serde_json's (sorted) order. Used where objects are serialised once: the
//! storage's stored bytes (served as-is by get, list and watch) and the HTTP layer's other answers.

use serde_json::{Map, Value};

/// Upstream's leading keys of an object; `status` comes last, after any key not named here.
const OBJECT_ORDER: &[&str] = &["kind", "apiVersion", "metadata", "spec"];
/// `metav1.Status`.
const STATUS_ORDER: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];
/// `metav1.StatusDetails` and `metav1.StatusCause`.
const DETAILS_ORDER: &[&str] = &["name", "group", "kind", "uid", "causes", "retryAfterSeconds"];
const CAUSE_ORDER: &[&str] = &["reason", "message", "field"];
/// `metav1.ObjectMeta`.
const META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Serialise `v` compactly, in upstream's key order (no trailing newline: stored bytes are embedded in
/// lists and watch events).
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    match v {
        Value::Object(m) => {
            let is_status = m.get("kind").and_then(Value::as_str) == Some("Status");
            let (order, last) = if is_status {
                (STATUS_ORDER, None)
            } else {
                (OBJECT_ORDER, Some("status"))
            };
            write_ordered(&mut out, m, order, last, Nested::Top { is_status });
        }
        other => serde_json::to_writer(&mut out, other).expect("JSON serialises"),
    }
    out
}

/// Where an object sits, for the orders of its children.
#[derive(Clone, Copy)]
enum Nested {
    Top { is_status: bool },
    Details,
    Other,
}

fn write_ordered(out: &mut Vec<u8>, m: &Map<String, Value>, order: &[&str], last: Option<&str>, at: Nested) {
    out.push(b'{');
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, k: &str, v: &Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, k).expect("JSON serialises");
        out.push(b':');
        match (at, k, v) {
            (Nested::Top { .. }, "metadata", Value::Object(meta)) => {
                write_ordered(out, meta, META_ORDER, None, Nested::Other)
            }
            (Nested::Top { is_status: true }, "details", Value::Object(d)) => {
                write_ordered(out, d, DETAILS_ORDER, None, Nested::Details)
            }
            (Nested::Details, "causes", Value::Array(causes)) => {
                out.push(b'[');
                for (i, c) in causes.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match c {
                        Value::Object(c) => write_ordered(out, c, CAUSE_ORDER, None, Nested::Other),
                        other => serde_json::to_writer(&mut *out, other).expect("JSON serialises"),
                    }
                }
                out.push(b']');
            }
            _ => serde_json::to_writer(&mut *out, v).expect("JSON serialises"),
        }
    };
    for k in order {
        if let Some(v) = m.get(*k) {
            put(out, k, v);
        }
    }
    for (k, v) in m {
        if !order.contains(&k.as_str()) && Some(k.as_str()) != last {
            put(out, k, v);
        }
    }
    if let Some(k) = last
        && let Some(v) = m.get(k)
    {
        put(out, k, v);
    }
    out.push(b'}');
}

/// Whether stored bytes already have upstream's order (bytes written before this module existed do not).
pub fn is_ordered(bytes: &[u8]) -> bool {
    bytes.starts_with(b"{\"kind\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn objects_lead_with_kind_api_version_metadata_spec_and_end_with_status() {
        let pod = json!({"status": {"phase": "Running"}, "spec": {"b": 1, "a": 2}, "metadata": {"uid": "u",
            "namespace": "default", "name": "p", "labels": {"z": "1", "a": "2"}}, "apiVersion": "v1", "kind": "Pod",
            "extra": true});
        assert_eq!(
            text(&pod),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","uid":"u","labels":{"a":"2","z":"1"}},"spec":{"a":2,"b":1},"extra":true,"status":{"phase":"Running"}}"#
        );
    }

    #[test]
    fn status_keys_are_in_metav1_status_order() {
        let s = json!({"code": 422, "details": {"name": "x", "kind": "pods", "causes": [{"field": "f",
            "message": "m", "reason": "FieldValueRequired"}]}, "reason": "Invalid", "message": "m",
            "status": "Failure", "metadata": {}, "apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            text(&s),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Invalid","details":{"name":"x","kind":"pods","causes":[{"reason":"FieldValueRequired","message":"m","field":"f"}]},"code":422}"#
        );
    }

    #[test]
    fn output_is_the_same_json() {
        let v =
            json!({"kind": "ConfigMap", "data": {"k": "v\n\"q\""}, "metadata": {"name": "c", "x": [1, 2]}});
        let back: Value = serde_json::from_slice(&to_vec(&v)).unwrap();
        assert_eq!(back, v);
        assert!(is_ordered(&to_vec(&v)));
        assert_eq!(text(&json!([1, "a"])), r#"[1,"a"]"#);
    }
}
