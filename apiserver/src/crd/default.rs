//! Defaulting from a structural schema (upstream `structuralschema/defaulting`): a property that is
//! absent, or null where the schema does not allow null, takes its schema's `default`; defaults apply
//! inside array items and map values too, and a defaulted object is itself defaulted. Runs after
//! pruning, on every write. Pure.

use serde_json::{Map, Value};

use super::schema::{Additional, Schema};

/// Fill in the defaults of `obj` in place.
pub fn apply(schema: &Schema, obj: &mut Value) {
    value(schema, obj);
}

fn value(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(o) => object(s, o),
        Value::Array(items) => {
            if let Some(item) = &s.items {
                for el in items.iter_mut() {
                    value(item, el);
                }
            }
        }
        _ => {}
    }
}

fn object(s: &Schema, o: &mut Map<String, Value>) {
    for (k, cs) in &s.properties {
        let Some(default) = &cs.default else { continue };
        match o.get(k) {
            None => {
                o.insert(k.clone(), default.clone());
            }
            Some(Value::Null) if !cs.nullable => {
                o.insert(k.clone(), default.clone());
            }
            Some(_) => {}
        }
    }
    for (k, child) in o.iter_mut() {
        let cs = s.properties.get(k).or(match &s.additional {
            Some(Additional::Schema(a)) => Some(a.as_ref()),
            _ => None,
        });
        if let Some(cs) = cs {
            value(cs, child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_and_disallowed_null_fields_take_their_defaults_at_every_depth() {
        let s = Schema::parse(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "color": {"type": "string", "default": "blue"},
                "note": {"type": "string", "nullable": true, "default": "n"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}}}},
                "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "weight": {"type": "integer", "default": 10}}}},
            }}}
        }));
        let cases = [
            (
                json!({}),
                json!({"spec": {"replicas": 1, "color": "blue", "note": "n"}}),
            ),
            (
                json!({"spec": {"replicas": 3, "color": null, "note": null}}),
                json!({"spec": {"replicas": 3, "color": "blue", "note": null}}),
            ),
            (
                json!({"spec": {"ports": [{"port": 80}, {"protocol": "UDP"}], "byName": {"a": {}}}}),
                json!({"spec": {"replicas": 1, "color": "blue", "note": "n",
                    "ports": [{"port": 80, "protocol": "TCP"}, {"protocol": "UDP"}],
                    "byName": {"a": {"weight": 10}}}}),
            ),
        ];
        for (mut obj, want) in cases {
            apply(&s, &mut obj);
            assert_eq!(obj, want);
        }
    }
}
