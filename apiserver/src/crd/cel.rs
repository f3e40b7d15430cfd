//! CEL `x-kubernetes-validations` rules (upstream `apiextensions-apiserver/pkg/apiserver/schema/cel`),
//! evaluated with the `cel` crate (cel-rust). Rules are compiled once, when the CRD is served
//! ([`Rules::compile`]); a CRD whose rules do not compile is refused when it is written
//! ([`compile_errors`]). Each rule runs with `self` bound to the value at its schema node and, for
//! transition rules on updates, `oldSelf` to the old object's value at the same place (found through
//! object properties and map values; list items are not correlated, so transition rules below a list
//! are not run, as upstream for atomic lists). A rule that is false, or fails to evaluate, is one
//! 422 cause with the rule's `message` (or `messageExpression`, or `failed rule: <rule>`).
//!
//! Deliberate differences: no type-checking at compile time (cel-rust has no checker), so a rule that
//! names a field absent from the object fails at evaluation with "no such key" instead of being refused
//! with the CRD; no cost budget; the Kubernetes CEL libraries (`isSorted`, `quantity`, `url`, ...) are
//! not there; only the standard library and `matches`.

use std::collections::HashMap;
use std::sync::Arc;

use api::cel::{compile, to_cel};
use serde_json::Value;

use super::schema::{Additional, Schema};
use crate::error::FieldError;

/// Compiled programs of a schema's rules, keyed by the expression.
#[derive(Default, Clone)]
pub struct Rules {
    programs: HashMap<String, Arc<cel::Program>>,
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("count", &self.programs.len())
            .finish()
    }
}

fn each_rule<'a>(s: &'a Schema, out: &mut Vec<&'a str>) {
    for r in &s.rules {
        out.push(&r.rule);
        if let Some(m) = &r.message_expression {
            out.push(m);
        }
    }
    for p in s.properties.values() {
        each_rule(p, out);
    }
    if let Some(Additional::Schema(a)) = &s.additional {
        each_rule(a, out);
    }
    if let Some(i) = &s.items {
        each_rule(i, out);
    }
}

impl Rules {
    /// Compile every rule and message expression of a schema (ones that do not compile are skipped:
    /// the CRD's validation refused them already).
    pub fn compile(schema: &Schema) -> Rules {
        let mut exprs = Vec::new();
        each_rule(schema, &mut exprs);
        let programs = exprs
            .into_iter()
            .filter_map(|e| Some((e.to_string(), Arc::new(compile(e).ok()?))))
            .collect();
        Rules { programs }
    }

    /// Whether the schema has no rules at all (the common fast path).
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }
}

/// The compile errors of a version's rules, as CRD field errors under `path` (the schema's path).
pub fn compile_errors(v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk_json(v, path, &mut errs);
    errs
}

fn walk_json(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(o) = v.as_object() else { return };
    for (i, r) in o
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let rp = format!("{path}.x-kubernetes-validations[{i}]");
        match r.get("rule").and_then(Value::as_str) {
            None | Some("") => errs.push(FieldError::required(format!("{rp}.rule"), "")),
            Some(rule) => {
                if let Err(e) = compile(rule) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.rule"),
                        &Value::String(rule.into()),
                        &format!("compilation failed: {e}"),
                    ));
                }
            }
        }
        if let Some(m) = r.get("messageExpression").and_then(Value::as_str)
            && let Err(e) = compile(m)
        {
            errs.push(FieldError::invalid(
                format!("{rp}.messageExpression"),
                &Value::String(m.into()),
                &format!("messageExpression compilation failed: {e}"),
            ));
        }
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            walk_json(p, &format!("{path}.properties[{k}]"), errs);
        }
    }
    if let Some(a) = o.get("additionalProperties").filter(|a| a.is_object()) {
        walk_json(a, &format!("{path}.additionalProperties"), errs);
    }
    if let Some(i) = o.get("items").filter(|i| i.is_object()) {
        walk_json(i, &format!("{path}.items"), errs);
    }
}

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

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Every failing rule of `obj` (against `old` on updates).
pub fn validate(schema: &Schema, rules: &Rules, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if rules.is_empty() {
        return errs;
    }
    node(schema, rules, obj, old, "", &mut errs);
    errs
}

fn eval(program: &cel::Program, this: &cel::Value, old: Option<&cel::Value>) -> Result<cel::Value, String> {
    let mut ctx = cel::Context::default();
    ctx.add_variable_from_value("self", this.clone());
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", o.clone());
    }
    // A panic inside the interpreter must not take the request down with it: it is the rule's failure.
    api::cel::execute(program, &ctx)
}

fn node(s: &Schema, rules: &Rules, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    // Converted once per node, for all of its rules (and only where there are rules).
    let (this, old_cel) = if s.rules.is_empty() {
        (cel::Value::Null, None)
    } else {
        (to_cel(v), old.map(to_cel))
    };
    for r in &s.rules {
        if r.is_transition() && old.is_none() {
            continue;
        }
        let Some(program) = rules.programs.get(&r.rule) else {
            continue;
        };
        let failed = match eval(program, &this, old_cel.as_ref()) {
            Ok(cel::Value::Bool(true)) => None,
            Ok(cel::Value::Bool(false)) => Some(None),
            Ok(other) => Some(Some(format!("rule did not evaluate to a boolean: {other:?}"))),
            Err(e) => Some(Some(e)),
        };
        let Some(eval_error) = failed else { continue };
        let field = match &r.field_path {
            Some(fp) => format!("{path}{fp}").trim_start_matches('.').to_string(),
            None => path.to_string(),
        };
        let message = match eval_error {
            Some(e) => format!("{}: {e}", r.rule),
            None => r
                .message_expression
                .as_ref()
                .and_then(|m| rules.programs.get(m))
                .and_then(|p| match eval(p, &this, old_cel.as_ref()) {
                    Ok(cel::Value::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                    _ => None,
                })
                .or_else(|| r.message.clone())
                .unwrap_or_else(|| format!("failed rule: {}", r.rule)),
        };
        let mut e = FieldError::invalid(field, &Value::String(type_name(v).into()), &message);
        if let Some(reason) = r.reason.as_deref() {
            e.reason = match reason {
                "FieldValueRequired" => "FieldValueRequired",
                "FieldValueDuplicate" => "FieldValueDuplicate",
                "FieldValueForbidden" => "FieldValueForbidden",
                _ => "FieldValueInvalid",
            };
        }
        errs.push(e);
    }
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                let Some(cs) = s.property(k) else { continue };
                let old_child = old.and_then(|o| o.get(k));
                node(cs, rules, child, old_child, &join(path, k), errs);
            }
        }
        Value::Array(items) => {
            if let Some(item) = &s.items {
                for (i, el) in items.iter().enumerate() {
                    node(item, rules, el, None, &format!("{path}[{i}]"), errs);
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

    fn schema() -> Schema {
        Schema::parse(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    {"rule": "self.max < 100", "messageExpression": "'max is ' + string(self.max)"},
                    {"rule": "!has(self.mode) || self.mode == oldSelf.mode", "message": "mode is immutable",
                     "fieldPath": ".mode"},
                ],
                "properties": {
                    "min": {"type": "integer"},
                    "max": {"type": "integer"},
                    "mode": {"type": "string"},
                    "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('w-')"}]},
                }
            }}
        }))
    }

    fn check(obj: Value, old: Option<Value>) -> Vec<String> {
        let s = schema();
        let rules = Rules::compile(&s);
        validate(&s, &rules, &obj, old.as_ref())
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    #[test]
    fn failing_rules_are_reported_with_their_messages_and_paths() {
        let cases: Vec<(Value, Option<Value>, Vec<&str>)> = vec![
            (json!({"spec": {"min": 1, "max": 2}}), None, vec![]),
            (
                json!({"spec": {"min": 3, "max": 2}}),
                None,
                vec![r#"spec: Invalid value: "object": min must not exceed max"#],
            ),
            (
                json!({"spec": {"min": 1, "max": 200}}),
                None,
                vec![r#"spec: Invalid value: "object": max is 200"#],
            ),
            (
                json!({"spec": {"min": 1, "max": 2, "name": "x"}}),
                None,
                vec![r#"spec.name: Invalid value: "string": failed rule: self.startsWith('w-')"#],
            ),
            // Transition rules run on updates only.
            (json!({"spec": {"min": 1, "max": 2, "mode": "a"}}), None, vec![]),
            (
                json!({"spec": {"min": 1, "max": 2, "mode": "b"}}),
                Some(json!({"spec": {"min": 1, "max": 2, "mode": "a"}})),
                vec![r#"spec.mode: Invalid value: "object": mode is immutable"#],
            ),
            (
                json!({"spec": {"min": 1, "max": 2, "mode": "a"}}),
                Some(json!({"spec": {"min": 1, "max": 2, "mode": "a"}})),
                vec![],
            ),
        ];
        for (obj, old, want) in cases {
            assert_eq!(check(obj.clone(), old), want, "{obj}");
        }
    }

    #[test]
    fn rules_that_do_not_compile_are_named_on_the_crd() {
        let errs = compile_errors(
            &json!({"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.a >"}, {"rule": "self.a > 1"}]}}}),
            "s",
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0]
                .message
                .starts_with("s.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.a >\": compilation failed"),
            "{}",
            errs[0].message
        );
    }
}
