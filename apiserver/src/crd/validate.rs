//! Validation of a custom object against its structural schema (upstream's kube-openapi validator as the
//! apiextensions-apiserver runs it): every bad field becomes one `FieldError` with upstream's path and
//! wording, e.g. `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
//! "string"`. Pure; the CEL rules are [`super::cel`]'s.

use serde_json::Value;

use super::schema::{Additional, Schema};
use crate::error::FieldError;

/// Every schema violation in `obj` (the whole object; `metadata`, `apiVersion` and `kind` at the root
/// are the API server's and are not checked here).
pub fn validate(schema: &Schema, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(o) = obj.as_object() else {
        return errs;
    };
    for name in &schema.required {
        if matches!(name.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        if !o.contains_key(name) {
            errs.push(FieldError::required(name.clone(), ""));
        }
    }
    for (k, v) in o {
        if matches!(k.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        if let Some(s) = schema.property(k) {
            node(s, v, k, &mut errs);
        }
    }
    errs
}

/// The type name upstream prints for a JSON value (Go's decoded types).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_error(path: &str, want: &str, v: &Value) -> FieldError {
    let got = type_name(v);
    FieldError::invalid(
        path.to_string(),
        &Value::String(got.into()),
        &format!("{path} in body must be of type {want}: {got:?}"),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        // A whole float counts as an integer (JSON has one number type; upstream decodes 1.0 as int64).
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

/// Too many items or properties (`field.TooMany`).
fn too_many(path: &str, have: usize, max: u64) -> FieldError {
    FieldError {
        reason: "FieldValueTooMany",
        field: path.to_string(),
        message: format!("{path}: Too many: {have}: must have at most {max} items"),
    }
}

fn node(s: &Schema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() {
        if !s.nullable && !s.preserve_unknown_any() {
            let want = if s.int_or_string {
                "integer,string"
            } else if s.ty.is_empty() {
                return;
            } else {
                &s.ty
            };
            errs.push(type_error(path, want, v));
        }
        return;
    }
    if s.int_or_string {
        if !(type_matches("integer", v) || v.is_string()) {
            errs.push(type_error(path, "integer,string", v));
            return;
        }
    } else if !s.ty.is_empty() && !type_matches(&s.ty, v) {
        errs.push(type_error(path, &s.ty, v));
        return;
    }
    if !s.enumeration.is_empty() && !s.enumeration.contains(v) {
        let supported: Vec<String> = s
            .enumeration
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path.to_string(), v, &refs));
    }
    match v {
        Value::String(text) => string(s, text, v, path, errs),
        Value::Number(_) => number(s, v, path, errs),
        Value::Array(items) => {
            if let Some(max) = s.max_items
                && items.len() as u64 > max
            {
                errs.push(too_many(path, items.len(), max));
            }
            if let Some(min) = s.min_items
                && (items.len() as u64) < min
            {
                errs.push(FieldError::invalid(
                    path.to_string(),
                    &Value::from(items.len()),
                    &format!("{path} in body should have at least {min} items"),
                ));
            }
            if s.unique_items || s.list_type == "set" {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        errs.push(FieldError::duplicate(format!("{path}[{i}]"), item));
                    }
                }
            }
            if s.list_type == "map" && !s.list_map_keys.is_empty() {
                for (i, item) in items.iter().enumerate() {
                    let key = |x: &Value| -> Vec<Value> {
                        s.list_map_keys
                            .iter()
                            .map(|k| x.get(k).cloned().unwrap_or(Value::Null))
                            .collect()
                    };
                    if items[..i].iter().any(|o| key(o) == key(item)) {
                        let printed: serde_json::Map<String, Value> = s
                            .list_map_keys
                            .iter()
                            .filter_map(|k| item.get(k).map(|kv| (k.clone(), kv.clone())))
                            .collect();
                        errs.push(FieldError::duplicate(
                            format!("{path}[{i}]"),
                            &Value::Object(printed),
                        ));
                    }
                }
            }
            if let Some(item_schema) = &s.items {
                for (i, item) in items.iter().enumerate() {
                    node(item_schema, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(o) => {
            if let Some(max) = s.max_properties
                && o.len() as u64 > max
            {
                errs.push(too_many(path, o.len(), max));
            }
            if let Some(min) = s.min_properties
                && (o.len() as u64) < min
            {
                errs.push(FieldError::invalid(
                    path.to_string(),
                    &Value::from(o.len()),
                    &format!("{path} in body should have at least {min} properties"),
                ));
            }
            for name in &s.required {
                if !o.contains_key(name) {
                    errs.push(FieldError::required(join(path, name), ""));
                }
            }
            if s.embedded_resource {
                for f in ["apiVersion", "kind"] {
                    if o.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                        errs.push(FieldError::required(join(path, f), "must not be empty"));
                    }
                }
            }
            for (k, child) in o {
                let child_schema = s.properties.get(k).or(match &s.additional {
                    Some(Additional::Schema(a)) => Some(a.as_ref()),
                    _ => None,
                });
                if let Some(cs) = child_schema {
                    node(cs, child, &join(path, k), errs);
                }
            }
        }
        _ => {}
    }
    for sub in &s.all_of {
        node_values(sub, v, path, errs);
    }
    if !s.any_of.is_empty() && !s.any_of.iter().any(|sub| passes(sub, v)) {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body must be valid against any of the schemas"),
        ));
    }
    if !s.one_of.is_empty() && s.one_of.iter().filter(|sub| passes(sub, v)).count() != 1 {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body must validate one and only one schema (oneOf)"),
        ));
    }
    if let Some(not) = &s.not
        && passes(not, v)
    {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body must not validate the schema (not)"),
        ));
    }
}

/// A junctor's sub-schema holds value validations only; its type (for int-or-string's anyOf) is checked
/// as a value validation too.
fn node_values(s: &Schema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    node(s, v, path, errs);
}

fn passes(s: &Schema, v: &Value) -> bool {
    let mut errs = Vec::new();
    node(s, v, "x", &mut errs);
    errs.is_empty()
}

fn string(s: &Schema, text: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let len = text.chars().count() as u64;
    if let Some(max) = s.max_length
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(FieldError {
            reason: "FieldValueTooLong",
            field: path.to_string(),
            message: format!("{path}: Too long: may not be more than {max} {unit}"),
        });
    }
    if let Some(min) = s.min_length
        && len < min
    {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some((src, re)) = &s.pattern
        && !re.is_match(text)
    {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body should match '{src}'"),
        ));
    }
    if !s.format.is_empty() && !format_ok(&s.format, text) {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body must be of type {}: {text:?}", s.format),
        ));
    }
}

fn number(s: &Schema, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(n) = v.as_f64() else { return };
    if let Some((max, exclusive)) = s.maximum {
        let (bad, how) = if exclusive {
            (n >= max, "less than")
        } else {
            (n > max, "less than or equal to")
        };
        if bad {
            errs.push(FieldError::invalid(
                path.to_string(),
                v,
                &format!("{path} in body should be {how} {}", print_number(max)),
            ));
        }
    }
    if let Some((min, exclusive)) = s.minimum {
        let (bad, how) = if exclusive {
            (n <= min, "greater than")
        } else {
            (n < min, "greater than or equal to")
        };
        if bad {
            errs.push(FieldError::invalid(
                path.to_string(),
                v,
                &format!("{path} in body should be {how} {}", print_number(min)),
            ));
        }
    }
    if let Some(m) = s.multiple_of
        && m != 0.0
        && (n / m).fract().abs() > 1e-9
    {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body should be a multiple of {}", print_number(m)),
        ));
    }
    if s.format == "int32" && (n < f64::from(i32::MIN) || n > f64::from(i32::MAX)) {
        errs.push(FieldError::invalid(
            path.to_string(),
            v,
            &format!("{path} in body must be of type int32: {:?}", v.to_string()),
        ));
    }
}

fn print_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// The string formats upstream's CRD validation knows (`apiextensions-apiserver` registers a subset of
/// go-openapi's strfmt). Unknown formats pass, as upstream.
pub fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date" => jiff::civil::Date::strptime("%Y-%m-%d", s).is_ok(),
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        "uuid" => uuid::Uuid::parse_str(s).is_ok() && s.len() == 36,
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s
            .split_once('/')
            .is_some_and(|(ip, bits)| ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok()),
        "mac" => {
            let parts: Vec<&str> = s.split([':', '-']).collect();
            parts.len() == 6
                && parts
                    .iter()
                    .all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok())
        }
        "hostname" => {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
        }
        "email" => s
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.')),
        "duration" => go_duration(s),
        _ => true,
    }
}

/// Go's `time.ParseDuration` syntax (`1h30m`, `-2.5s`, `0`).
fn go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .find(|u| rest.starts_with(*u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

impl Schema {
    /// A node that keeps anything without a type (null included).
    fn preserve_unknown_any(&self) -> bool {
        self.preserve_unknown && self.ty.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget() -> Schema {
        Schema::parse(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                        "size": {"type": "string", "enum": ["small", "large"]},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1},
                        "when": {"type": "string", "format": "date-time"},
                        "note": {"type": "string", "nullable": true},
                        "ratio": {"type": "number", "multipleOf": 0.5},
                        "raw": {"x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true},
                    }
                }
            }
        }))
    }

    fn check(spec: Value) -> Vec<String> {
        validate(
            &widget(),
            &json!({"apiVersion": "x/v1", "kind": "W", "metadata": {}, "spec": spec}),
        )
        .into_iter()
        .map(|e| e.message)
        .collect()
    }

    #[test]
    fn each_violation_is_reported_with_upstream_path_and_wording() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"size": "small", "replicas": 3}), vec![]),
            (
                json!({"size": "small", "replicas": "three"}),
                vec![
                    r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                ],
            ),
            (json!({}), vec!["spec.size: Required value"]),
            (
                json!({"size": "medium"}),
                vec![r#"spec.size: Unsupported value: "medium": supported values: "small", "large""#],
            ),
            (
                json!({"size": "small", "replicas": 11}),
                vec![
                    "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                ],
            ),
            (
                json!({"size": "small", "replicas": -1}),
                vec![
                    "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
                ],
            ),
            (
                json!({"size": "small", "name": "AB"}),
                vec![r#"spec.name: Invalid value: "AB": spec.name in body should match '^[a-z]+$'"#],
            ),
            (
                json!({"size": "small", "name": "a"}),
                vec![r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#],
            ),
            (
                json!({"size": "small", "name": "abcdef"}),
                vec!["spec.name: Too long: may not be more than 5 bytes"],
            ),
            (json!({"size": "small", "port": 80}), vec![]),
            (json!({"size": "small", "port": "http"}), vec![]),
            (
                json!({"size": "small", "port": true}),
                vec![
                    r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                ],
            ),
            (
                json!({"size": "small", "tags": ["a", "b", "c"]}),
                vec!["spec.tags: Too many: 3: must have at most 2 items"],
            ),
            (
                json!({"size": "small", "tags": ["a", "a"]}),
                vec![r#"spec.tags[1]: Duplicate value: "a""#],
            ),
            (
                json!({"size": "small", "labels": {"a": "x", "b": "y"}}),
                vec!["spec.labels: Too many: 2: must have at most 1 items"],
            ),
            (
                json!({"size": "small", "labels": {"a": 1}}),
                vec![
                    r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
                ],
            ),
            (
                json!({"size": "small", "when": "yesterday"}),
                vec![
                    r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
                ],
            ),
            (json!({"size": "small", "when": "2024-01-02T03:04:05Z"}), vec![]),
            (json!({"size": "small", "note": null}), vec![]),
            (
                json!({"size": null}),
                vec![r#"spec.size: Invalid value: "null": spec.size in body must be of type string: "null""#],
            ),
            (
                json!({"size": "small", "ratio": 0.7}),
                vec!["spec.ratio: Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5"],
            ),
            (json!({"size": "small", "raw": {"any": [1, {"x": null}]}}), vec![]),
            (
                json!({"size": "small", "template": {"spec": {}}}),
                vec![
                    "spec.template.apiVersion: Required value: must not be empty",
                    "spec.template.kind: Required value: must not be empty",
                ],
            ),
            (
                json!({"replicas": "x", "size": 3}),
                vec![
                    r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                    r#"spec.size: Invalid value: "integer": spec.size in body must be of type string: "integer""#,
                ],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(check(spec.clone()), want, "{spec}");
        }
    }

    #[test]
    fn formats_follow_upstream_strfmt() {
        for (f, good, bad) in [
            ("date", "2024-02-29", "2024-13-01"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "1.2.3.4"),
            ("cidr", "10.0.0.0/8", "10.0.0.0"),
            ("duration", "1h30m", "1 hour"),
            ("hostname", "a.example.com", "-bad-"),
        ] {
            assert!(format_ok(f, good), "{f} {good}");
            assert!(!format_ok(f, bad), "{f} {bad}");
        }
        assert!(format_ok("something-else", "anything"));
    }
}
