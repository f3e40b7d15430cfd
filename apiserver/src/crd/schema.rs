//! The structural schema of a CRD version (upstream `apiextensions-apiserver/pkg/apiserver/schema`):
//! parsed once from `openAPIV3Schema` when the CRD is served, and the structural checks a CRD's schema
//! must pass to be accepted (`ValidateStructural`).
//!
//! Validation ([`super::validate`]), pruning ([`super::prune`]) and defaulting ([`super::default`]) walk
//! this tree; none of them re-read the CRD's JSON.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use crate::error::FieldError;

/// `additionalProperties`: a schema for every other key, or `false`/`true`.
#[derive(Debug, Clone)]
pub enum Additional {
    /// `additionalProperties: true` (allowed only with `x-kubernetes-preserve-unknown-fields`).
    Any,
    /// A schema every value of the map follows.
    Schema(Box<Schema>),
}

/// One `x-kubernetes-validations` rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The CEL expression.
    pub rule: String,
    /// `message`.
    pub message: Option<String>,
    /// `messageExpression`.
    pub message_expression: Option<String>,
    /// `fieldPath` (a JSONPath relative to the schema node).
    pub field_path: Option<String>,
    /// `reason`: `FieldValueInvalid` unless given.
    pub reason: Option<String>,
    /// `optionalOldSelf`.
    pub optional_old_self: bool,
}

impl Rule {
    /// A transition rule: one that reads `oldSelf` (evaluated on updates only, unless optional).
    pub fn is_transition(&self) -> bool {
        self.rule.contains("oldSelf")
    }
}

/// A node of a structural schema.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type`: object, array, string, integer, number, boolean (empty for int-or-string and
    /// preserve-unknown-fields nodes).
    pub ty: String,
    /// `format`.
    pub format: String,
    /// `description` (published in OpenAPI).
    pub description: String,
    /// `properties`.
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties`.
    pub additional: Option<Additional>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `required`.
    pub required: Vec<String>,
    /// `enum`.
    pub enumeration: Vec<Value>,
    /// `pattern`, compiled (RE2 syntax; the `regex` crate follows it).
    pub pattern: Option<(String, Regex)>,
    /// `minimum` and whether it is exclusive.
    pub minimum: Option<(f64, bool)>,
    /// `maximum` and whether it is exclusive.
    pub maximum: Option<(f64, bool)>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `nullable`.
    pub nullable: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: String,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-validations`.
    pub rules: Vec<Rule>,
    /// `allOf`, `anyOf`, `oneOf` (value validations only in a structural schema).
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn string(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn schemas(v: &Value, key: &str) -> Vec<Schema> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(Schema::parse)
        .collect()
}

impl Schema {
    /// Parse a JSONSchemaProps value. Never fails: what does not parse is left out, and
    /// [`check_structural`] (run when the CRD is written) reports it.
    pub fn parse(v: &Value) -> Schema {
        let pattern = v
            .get("pattern")
            .and_then(Value::as_str)
            .and_then(|p| Regex::new(p).ok().map(|r| (p.to_string(), r)));
        let additional = match v.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Additional::Any),
            Some(a @ Value::Object(_)) => Some(Additional::Schema(Box::new(Schema::parse(a)))),
            _ => None,
        };
        let rules = v
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some(Rule {
                    rule: r.get("rule")?.as_str()?.to_string(),
                    message: r.get("message").and_then(Value::as_str).map(str::to_string),
                    message_expression: r
                        .get("messageExpression")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    field_path: r.get("fieldPath").and_then(Value::as_str).map(str::to_string),
                    reason: r.get("reason").and_then(Value::as_str).map(str::to_string),
                    optional_old_self: flag(r, "optionalOldSelf"),
                })
            })
            .collect();
        Schema {
            ty: string(v, "type"),
            format: string(v, "format"),
            description: string(v, "description"),
            properties: v
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, s)| (k.clone(), Schema::parse(s))).collect())
                .unwrap_or_default(),
            additional,
            items: v
                .get("items")
                .filter(|i| i.is_object())
                .map(|i| Box::new(Schema::parse(i))),
            required: strings(v, "required"),
            enumeration: v
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            pattern,
            minimum: num(v, "minimum").map(|m| (m, flag(v, "exclusiveMinimum"))),
            maximum: num(v, "maximum").map(|m| (m, flag(v, "exclusiveMaximum"))),
            multiple_of: num(v, "multipleOf"),
            min_length: uint(v, "minLength"),
            max_length: uint(v, "maxLength"),
            min_items: uint(v, "minItems"),
            max_items: uint(v, "maxItems"),
            unique_items: flag(v, "uniqueItems"),
            min_properties: uint(v, "minProperties"),
            max_properties: uint(v, "maxProperties"),
            nullable: flag(v, "nullable"),
            default: v.get("default").cloned(),
            int_or_string: flag(v, "x-kubernetes-int-or-string"),
            preserve_unknown: flag(v, "x-kubernetes-preserve-unknown-fields"),
            embedded_resource: flag(v, "x-kubernetes-embedded-resource"),
            list_type: string(v, "x-kubernetes-list-type"),
            list_map_keys: strings(v, "x-kubernetes-list-map-keys"),
            rules,
            all_of: schemas(v, "allOf"),
            any_of: schemas(v, "anyOf"),
            one_of: schemas(v, "oneOf"),
            not: v
                .get("not")
                .filter(|n| n.is_object())
                .map(|n| Box::new(Schema::parse(n))),
        }
    }

    /// The schema of a property (a named one, or `additionalProperties`).
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        })
    }
}

/// Keys a schema node may not carry inside `allOf`/`anyOf`/`oneOf`/`not` of a structural schema
/// (upstream `validateValueValidation`: only value validations there).
const FORBIDDEN_IN_JUNCTORS: &[&str] = &[
    "type",
    "default",
    "description",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "additionalProperties",
];

/// Upstream's structural checks of a version's `openAPIV3Schema` (`ValidateStructural` plus the v1 rules
/// of `validateCustomResourceDefinitionOpenAPISchema`), with `path` the schema's own field path
/// (`spec.versions[0].schema.openAPIV3Schema`). Every error is a field error of the CRD.
pub fn check_structural(v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match v.get("type").and_then(Value::as_str) {
        Some("object") => {}
        Some(other) => errs.push(FieldError::invalid(
            format!("{path}.type"),
            &Value::String(other.into()),
            "must be object at the root",
        )),
        None => errs.push(FieldError::required(
            format!("{path}.type"),
            "must not be empty at the root",
        )),
    }
    if let Some(meta) = v.pointer("/properties/metadata") {
        // Only name and generateName may be restricted at the root's metadata.
        if let Some(props) = meta.get("properties").and_then(Value::as_object) {
            for k in props.keys().filter(|k| *k != "name" && *k != "generateName") {
                errs.push(FieldError::forbidden(
                    format!("{path}.properties[metadata].properties[{k}]"),
                    "must not be specified",
                ));
            }
        }
    }
    node(v, path, true, &mut errs);
    errs
}

fn node(v: &Value, path: &str, root: bool, errs: &mut Vec<FieldError>) {
    let Some(o) = v.as_object() else {
        errs.push(FieldError::invalid(path.to_string(), v, "must be an object"));
        return;
    };
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    let int_or_string = flag(v, "x-kubernetes-int-or-string");
    let preserve = v.get("x-kubernetes-preserve-unknown-fields");
    if let Some(p) = preserve
        && p != &Value::Bool(true)
    {
        errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            p,
            "must be true or undefined",
        ));
    }
    if !matches!(
        ty,
        "" | "object" | "array" | "string" | "integer" | "number" | "boolean"
    ) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &Value::String(ty.into()),
            &["array", "boolean", "integer", "number", "object", "string"],
        ));
    }
    if int_or_string && !ty.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            &Value::String(ty.into()),
            "must be empty to be structural for x-kubernetes-int-or-string",
        ));
    }
    if flag(v, "x-kubernetes-embedded-resource") && ty != "object" {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if o.contains_key("properties") && matches!(o.get("additionalProperties"), Some(Value::Object(_))) {
        errs.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if let Some(p) = o.get("pattern").and_then(Value::as_str)
        && let Err(e) = Regex::new(p)
    {
        errs.push(FieldError::invalid(
            format!("{path}.pattern"),
            &Value::String(p.into()),
            &format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
    if ty == "array" && !o.get("items").is_some_and(Value::is_object) {
        errs.push(FieldError::required(format!("{path}.items"), "must be specified"));
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            let child = format!("{path}.properties[{k}]");
            child_type(p, &child, "must not be empty for specified object fields", errs);
            node(p, &child, false, errs);
        }
    }
    if let Some(a @ Value::Object(_)) = o.get("additionalProperties") {
        let child = format!("{path}.additionalProperties");
        child_type(a, &child, "must not be empty for specified object fields", errs);
        node(a, &child, false, errs);
    }
    if let Some(i @ Value::Object(_)) = o.get("items") {
        let child = format!("{path}.items");
        child_type(i, &child, "must not be empty for specified array items", errs);
        node(i, &child, false, errs);
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (n, s) in o
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            junctor_node(s, &format!("{path}.{junctor}[{n}]"), errs);
        }
    }
    if let Some(n) = o.get("not") {
        junctor_node(n, &format!("{path}.not"), errs);
    }
    let _ = root;
}

/// A field's `type` is required unless it is int-or-string or keeps unknown fields.
fn child_type(v: &Value, path: &str, detail: &str, errs: &mut Vec<FieldError>) {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.is_empty()
        && !flag(v, "x-kubernetes-int-or-string")
        && !flag(v, "x-kubernetes-preserve-unknown-fields")
    {
        errs.push(FieldError::required(format!("{path}.type"), detail));
    }
}

fn junctor_node(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(o) = v.as_object() else { return };
    for k in FORBIDDEN_IN_JUNCTORS {
        if o.contains_key(*k) {
            // x-kubernetes-int-or-string's anyOf [integer, string] is the one allowed use of type there.
            if *k == "type" && path.contains(".anyOf[") {
                continue;
            }
            errs.push(FieldError::forbidden(
                format!("{path}.{k}"),
                "must not be specified",
            ));
        }
    }
    for (k, p) in o
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        junctor_node(p, &format!("{path}.properties[{k}]"), errs);
    }
    if let Some(i) = o.get("items") {
        junctor_node(i, &format!("{path}.items"), errs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(v: Value) -> Vec<String> {
        check_structural(&v, "s").into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn structural_checks_name_each_problem_with_upstream_wording() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                json!({"type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"replicas": {"type": "integer"}}}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"spec": {"properties": {}}}}),
                vec![
                    "s.properties[spec].type: Required value: must not be empty for specified object fields",
                ],
            ),
            (
                json!({"type": "string"}),
                vec!["s.type: Invalid value: \"string\": must be object at the root"],
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array"}}}),
                vec!["s.properties[l].items: Required value: must be specified"],
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {}}}}),
                vec![
                    "s.properties[l].items.type: Required value: must not be empty for specified array items",
                ],
            ),
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-preserve-unknown-fields": true}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"p": {"type": "string", "anyOf": [{"type": "string", "description": "x"}]}}}),
                vec!["s.properties[p].anyOf[0].description: Forbidden: must not be specified"],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object",
                        "properties": {"labels": {"type": "object"}}}}}),
                vec!["s.properties[metadata].properties[labels]: Forbidden: must not be specified"],
            ),
            (
                json!({"type": "object", "properties": {"p": {"type": "string", "pattern": "("}}}),
                vec!["s.properties[p].pattern: Invalid value: \"(\": must be a valid regular expression"],
            ),
        ];
        for (schema, want) in cases {
            let got = messages(schema.clone());
            assert_eq!(got.len(), want.len(), "{schema}: {got:?}");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.starts_with(w), "{schema}: {g:?} does not start with {w:?}");
            }
        }
    }

    #[test]
    fn parse_reads_validations_and_extensions() {
        let s = Schema::parse(&json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.a > oldSelf.a", "message": "m"}],
            "properties": {"a": {"type": "integer", "minimum": 1, "exclusiveMinimum": true}},
            "additionalProperties": false,
        }));
        assert_eq!(s.rules.len(), 1);
        assert!(s.rules[0].is_transition());
        assert_eq!(s.properties["a"].minimum, Some((1.0, true)));
        assert!(s.additional.is_none());
    }
}
