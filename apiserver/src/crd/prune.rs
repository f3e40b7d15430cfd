//! Pruning (upstream `structuralschema/pruning`): fields a structural schema does not declare are dropped
//! from a custom object before it is validated and stored, unless a node keeps them with
//! `x-kubernetes-preserve-unknown-fields`. The paths of what was dropped feed `fieldValidation`
//! (a warning each, or a 400 under `Strict`). `apiVersion`, `kind` and `metadata` of the object and of
//! every embedded resource are the API server's and are kept. Pure.

use serde_json::{Map, Value};

use super::schema::{Additional, Schema};

/// Drop every undeclared field of `obj` in place; returns their paths (`spec.foo`, `spec.list[0].bar`).
pub fn prune(schema: &Schema, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Value::Object(o) = obj {
        object(schema, o, "", true, &mut out);
    }
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn object(s: &Schema, o: &mut Map<String, Value>, path: &str, resource: bool, out: &mut Vec<String>) {
    let keys: Vec<String> = o.keys().cloned().collect();
    for k in keys {
        if resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_path = join(path, &k);
        match s.properties.get(&k) {
            Some(cs) => value(cs, o.get_mut(&k).expect("key listed"), &child_path, out),
            None => match &s.additional {
                Some(Additional::Schema(a)) => value(a, o.get_mut(&k).expect("key listed"), &child_path, out),
                Some(Additional::Any) => {}
                None if s.preserve_unknown => {}
                None => {
                    o.remove(&k);
                    out.push(child_path);
                }
            },
        }
    }
}

fn value(s: &Schema, v: &mut Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if s.properties.is_empty() && s.additional.is_none() && (s.preserve_unknown || s.ty.is_empty()) {
                // An open node (or an int-or-string one holding an object, which validation refuses).
                if !s.embedded_resource {
                    return;
                }
            }
            object(s, o, path, s.embedded_resource, out);
        }
        Value::Array(items) => {
            if let Some(item) = &s.items {
                for (i, el) in items.iter_mut().enumerate() {
                    value(item, el, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn undeclared_fields_are_dropped_and_named_unless_preserved() {
        let s = Schema::parse(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "a": {"type": "string"},
                    "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
                    "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"k": {"type": "string"}}}},
                    "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "emb": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
                }},
            }
        }));
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {
                "a": "keep", "b": "drop",
                "list": [{"x": 1, "y": 2}],
                "m": {"one": {"k": "v", "z": 1}},
                "open": {"anything": {"deep": true}},
                "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "extra": 1},
            },
            "status": {"ready": true},
        });
        let pruned = prune(&s, &mut obj);
        assert_eq!(
            pruned,
            vec![
                "spec.b",
                "spec.emb.extra",
                "spec.list[0].y",
                "spec.m.one.z",
                "status"
            ]
        );
        assert_eq!(
            obj,
            json!({
                "apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
                "spec": {
                    "a": "keep",
                    "list": [{"x": 1}],
                    "m": {"one": {"k": "v"}},
                    "open": {"anything": {"deep": true}},
                    "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
                },
            })
        );
    }

    #[test]
    fn a_root_that_preserves_unknown_fields_keeps_everything() {
        let s = Schema::parse(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        let mut obj = json!({"spec": {"x": 1}, "other": 2});
        assert!(prune(&s, &mut obj).is_empty());
        assert_eq!(obj, json!({"spec": {"x": 1}, "other": 2}));
    }
}
