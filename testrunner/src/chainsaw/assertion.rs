//! Assertion trees, as kyverno-json evaluates them (`pkg/core/assertion`, `projection`, `matching`;
//! reference 2.5). The expected YAML is a tree: map keys are projections (plain field, `(expr)`,
//! `~name.(expr)` iteration, `expr -> name` binding, `\(literal)\` escape), slices match by position with
//! equal lengths, scalar leaves compare (or evaluate as `(expr)` with `@` = the actual value).
//!
//! A mismatch is a list of field errors (a `~` iteration over something that is not a slice or a map is
//! one too, kyverno-json's `TypeInvalid`) (the assertion may match later, so the caller polls again); a
//! type error (`types are not comparable`, a plain key into a non-map, a slice node against a non-slice, a
//! bad expression) is [`AssertError::Internal`], which stops polling at once as in chainsaw.

use serde_json::Value;

use super::bindings::Bindings;
use super::expr::{self, Expression};

/// One failed field: `path: detail` (`spec.replicas: Invalid value: 1: Expected value: 3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub detail: String,
    /// What the tree expected there, when it is a value (for diffs).
    pub expected: Option<Value>,
    /// What the object had there (`None` when the field was missing).
    pub actual: Option<Value>,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.detail)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssertError {
    /// The object does not match (yet); sorted by path.
    Fields(Vec<FieldError>),
    /// The tree cannot be evaluated against this object; chainsaw stops polling.
    Internal(String),
}

impl std::fmt::Display for AssertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssertError::Fields(errs) => {
                for (i, e) in errs.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "* {e}")?;
                }
                Ok(())
            }
            AssertError::Internal(msg) => write!(f, "{msg}"),
        }
    }
}

/// Matches `actual` against the assertion tree `expected`.
pub fn assert_tree(expected: &Value, actual: &Value, bindings: &Bindings) -> Result<(), AssertError> {
    let mut errs = Vec::new();
    node(expected, actual, "", bindings, &mut errs).map_err(AssertError::Internal)?;
    if errs.is_empty() {
        Ok(())
    } else {
        errs.sort_by(|a, b| a.path.cmp(&b.path));
        Err(AssertError::Fields(errs))
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

fn render(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A map key of an assertion tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Field(String),
    Projection(Expression),
    /// `~name.(expr)`: every element of what the inner key yields; `$name` is the index or map key.
    Foreach {
        name: Option<String>,
        inner: Box<Key>,
    },
}

/// A parsed key with its optional `-> name` binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey {
    pub key: Key,
    pub bind: Option<String>,
}

/// Parses a map key of an assertion tree (kyverno-json `projection.Parse`).
pub fn parse_key(raw: &str) -> ParsedKey {
    if raw.len() >= 2 && raw.starts_with('\\') && raw.ends_with('\\') {
        return ParsedKey {
            key: Key::Field(raw[1..raw.len() - 1].to_string()),
            bind: None,
        };
    }
    let (text, bind) = match raw.rfind("->") {
        Some(pos) if !raw[pos + 2..].trim().is_empty() && !raw[pos + 2..].contains(['(', ')', '\'', '`']) => {
            (raw[..pos].trim(), Some(raw[pos + 2..].trim().to_string()))
        }
        _ => (raw, None),
    };
    ParsedKey {
        key: parse_plain_key(text),
        bind,
    }
}

fn parse_plain_key(text: &str) -> Key {
    if let Some(rest) = text.strip_prefix('~') {
        let (name, inner) = match rest.find('.') {
            Some(dot) if !rest[..dot].contains('(') => (&rest[..dot], &rest[dot + 1..]),
            _ => ("", rest),
        };
        let name = (!name.is_empty()).then(|| name.to_string());
        return Key::Foreach {
            name,
            inner: Box::new(parse_plain_key(inner)),
        };
    }
    match expr::parse(text) {
        Some(e) => Key::Projection(e),
        None => Key::Field(text.to_string()),
    }
}

/// Projects `actual` through `key`: `Ok(None)` when a plain field is missing.
fn project(key: &Key, actual: &Value, bindings: &Bindings) -> Result<Option<Value>, String> {
    match key {
        Key::Field(name) => match actual {
            Value::Object(m) => Ok(m.get(name).cloned()),
            other => Err(format!(
                "expected a map to look up {name:?}, found {}",
                type_name(other)
            )),
        },
        Key::Projection(e) => expr::evaluate(e, actual, bindings).map(Some),
        Key::Foreach { inner, .. } => project(inner, actual, bindings),
    }
}

fn key_text(key: &Key) -> String {
    match key {
        Key::Field(n) => n.clone(),
        Key::Projection(e) => format!("({})", e.text),
        Key::Foreach { inner, .. } => key_text(inner),
    }
}

fn node(
    expected: &Value,
    actual: &Value,
    path: &str,
    bindings: &Bindings,
    errs: &mut Vec<FieldError>,
) -> Result<(), String> {
    match expected {
        Value::Object(map) => {
            if map.is_empty() {
                if actual.is_null() {
                    errs.push(FieldError {
                        path: path.to_string(),
                        detail: "Invalid value: null: invalid value, must not be null".to_string(),
                        expected: None,
                        actual: Some(Value::Null),
                    });
                }
                return Ok(());
            }
            for (raw, sub) in map {
                let parsed = parse_key(raw);
                let name = key_text(&parsed.key);
                let p = child(path, &name);
                let Some(value) = project(&parsed.key, actual, bindings)? else {
                    errs.push(FieldError {
                        path: p,
                        detail: "Required value: field not found in the input object".to_string(),
                        expected: Some(sub.clone()),
                        actual: None,
                    });
                    continue;
                };
                let b = match &parsed.bind {
                    Some(n) => bindings.with(n.clone(), value.clone()),
                    None => bindings.clone(),
                };
                match &parsed.key {
                    Key::Foreach { name: idx, .. } => match &value {
                        Value::Array(items) => {
                            for (i, item) in items.iter().enumerate() {
                                let b = match idx {
                                    Some(n) => b.with(n.clone(), Value::from(i)),
                                    None => b.clone(),
                                };
                                node(sub, item, &format!("{p}[{i}]"), &b, errs)?;
                            }
                        }
                        Value::Object(m) => {
                            for (k, item) in m {
                                let b = match idx {
                                    Some(n) => b.with(n.clone(), Value::from(k.clone())),
                                    None => b.clone(),
                                };
                                node(sub, item, &child(&p, k), &b, errs)?;
                            }
                        }
                        other => errs.push(FieldError {
                            path: p,
                            detail: format!("Invalid value: {}: expected a slice or a map", render(other)),
                            expected: None,
                            actual: Some(other.clone()),
                        }),
                    },
                    _ => node(sub, &value, &p, &b, errs)?,
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            let Value::Array(got) = actual else {
                return Err(format!("{path}: expected a slice, found {}", type_name(actual)));
            };
            if items.len() != got.len() {
                errs.push(FieldError {
                    path: path.to_string(),
                    detail: format!("Invalid value: {}: lengths of slices don't match", got.len()),
                    expected: Some(expected.clone()),
                    actual: Some(actual.clone()),
                });
                return Ok(());
            }
            for (i, (e, a)) in items.iter().zip(got).enumerate() {
                node(e, a, &format!("{path}[{i}]"), bindings, errs)?;
            }
            Ok(())
        }
        scalar => {
            let want =
                expr::evaluate_if_expression(scalar, actual, bindings).map_err(|e| format!("{path}: {e}"))?;
            if !equal(&want, actual).map_err(|e| format!("{path}: {e}"))? {
                errs.push(FieldError {
                    path: path.to_string(),
                    detail: format!(
                        "Invalid value: {}: Expected value: {}",
                        render(actual),
                        render(&want)
                    ),
                    expected: Some(want),
                    actual: Some(actual.clone()),
                });
            }
            Ok(())
        }
    }
}

/// kyverno-json `matching.Equal`: nulls, numbers by value, same types deeply; any other mix is an error.
pub fn equal(a: &Value, b: &Value) -> Result<bool, String> {
    match (a, b) {
        (Value::Null, Value::Null) => Ok(true),
        (Value::Null, _) | (_, Value::Null) => Ok(false),
        (Value::Number(x), Value::Number(y)) => Ok(x.as_f64() == y.as_f64()),
        _ if std::mem::discriminant(a) == std::mem::discriminant(b) => Ok(a == b),
        _ => Err(format!(
            "types are not comparable, {} - {}",
            type_name(a),
            type_name(b)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "example", "labels": {"app": "nginx"}},
            "spec": {"replicas": 3, "containers": [
                {"name": "container-1", "image": "nginx-1", "env": [{"name": "ENV_1", "value": "value-1"}]},
                {"name": "container-2", "image": "nginx-2", "env": [{"name": "ENV_2", "value": "value-2"}]}
            ]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}
        })
    }

    fn yaml(s: &str) -> Value {
        serde_norway::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// (tree, Ok) or (tree, Err(substring of the rendered error)), with `internal` for internal errors.
    #[test]
    fn assertion_trees_match_as_kyverno_json() {
        /// Ok, or the expected error's substring and whether it is internal.
        type Want = Result<(), (&'static str, bool)>;
        let table: &[(&str, Want)] = &[
            ("metadata: {name: example}", Ok(())),
            (
                "metadata: {name: other}",
                Err((
                    "metadata.name: Invalid value: \"example\": Expected value: \"other\"",
                    false,
                )),
            ),
            (
                "metadata: {annotations: {a: b}}",
                Err(("metadata.annotations: Required value: field not found", false)),
            ),
            ("spec: {replicas: 3.0}", Ok(())),
            ("spec: {replicas: '3'}", Err(("types are not comparable", true))),
            (
                "spec: {containers: [{name: container-1}]}",
                Err((
                    "spec.containers: Invalid value: 2: lengths of slices don't match",
                    false,
                )),
            ),
            (
                "spec: {containers: [{name: container-1}, {name: container-2}]}",
                Ok(()),
            ),
            ("spec: {'(replicas > `1` && replicas < `4`)': true}", Ok(())),
            (
                "spec: {'(replicas > `5`)': true}",
                Err((
                    "spec.(replicas > `5`): Invalid value: false: Expected value: true",
                    false,
                )),
            ),
            (
                "status: {\"(conditions[?type == 'Ready'] | [0].status)\": 'False'}",
                Ok(()),
            ),
            (
                "status: {\"(conditions[?type == 'Ready'])\": [{status: 'False'}]}",
                Ok(()),
            ),
            (
                "spec: {\"~.(containers[?name == 'container-1'])\": {image: nginx-1}}",
                Ok(()),
            ),
            (
                "spec: {~index.(containers): {image: \"(join('-', ['nginx', to_string($index + `1`)]))\"}}",
                Ok(()),
            ),
            (
                "spec: {~index2.(containers): {~.(env): {name: \"(join('_', ['ENV', to_string($index2 + `1`)]))\"}}}",
                Ok(()),
            ),
            (
                "spec: {~.(containers): {image: nginx-1}}",
                Err(("spec.(containers)[1].image", false)),
            ),
            (
                "status: {~.(containerStatuses): {ready: true}}",
                Err((
                    "status.(containerStatuses): Invalid value: null: expected a slice or a map",
                    false,
                )),
            ),
            ("spec: {\"(containers[0])->c\": {name: ($c.name)}}", Ok(())),
            ("metadata: {labels: {}}", Ok(())),
            (
                "metadata: {(labels.missing): {}}",
                Err(("must not be null", false)),
            ),
            ("metadata: {name: {a: b}}", Err(("expected a map", true))),
            ("spec: {replicas: [1]}", Err(("expected a slice", true))),
            (
                "metadata: {name: ($nope)}",
                Err(("variable not defined: $nope", true)),
            ),
            ("metadata: {(name): example}", Ok(())),
            (
                "metadata: {labels: {\\(app)\\: x}}",
                Err(("metadata.labels.(app): Required value", false)),
            ),
        ];
        let b = Bindings::new();
        for (tree, want) in table {
            let got = assert_tree(&yaml(tree), &pod(), &b);
            match (want, &got) {
                (Ok(()), Ok(())) => {}
                (Err((needle, internal)), Err(e)) => {
                    assert_eq!(matches!(e, AssertError::Internal(_)), *internal, "{tree}: {e}");
                    assert!(
                        e.to_string().contains(needle),
                        "{tree}: {e} does not contain {needle}"
                    );
                }
                _ => panic!("{tree}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn non_resource_assertion_sees_bindings_only() {
        let b = Bindings::new()
            .with("error", Value::Null)
            .with("stdout", json!("hello chainsaw\n"));
        assert_eq!(
            assert_tree(
                &yaml("($error): ~\n(trim_space($stdout)): hello chainsaw"),
                &Value::Null,
                &b
            ),
            Ok(())
        );
        let e = assert_tree(&yaml("(trim_space($stdout)): bye"), &Value::Null, &b).unwrap_err();
        assert!(e.to_string().contains("Expected value: \"bye\""), "{e}");
    }

    #[test]
    fn equality_table() {
        let table: &[(Value, Value, Result<bool, ()>)] = &[
            (json!(null), json!(null), Ok(true)),
            (json!(null), json!("a"), Ok(false)),
            (json!(1), json!(1.0), Ok(true)),
            (json!("a"), json!("a"), Ok(true)),
            (json!({"a": 1}), json!({"a": 1}), Ok(true)),
            (json!("1"), json!(1), Err(())),
            (json!(true), json!("true"), Err(())),
        ];
        for (a, b, want) in table {
            assert_eq!(equal(a, b).map_err(|_| ()), *want, "{a} vs {b}");
        }
    }

    #[test]
    fn keys_parse() {
        assert_eq!(parse_key("name").key, Key::Field("name".into()));
        assert_eq!(parse_key("\\(x)\\").key, Key::Field("(x)".into()));
        let k = parse_key("~idx.(containers)");
        assert_eq!(
            k.key,
            Key::Foreach {
                name: Some("idx".into()),
                inner: Box::new(Key::Projection(expr::parse("(containers)").unwrap()))
            }
        );
        let k = parse_key("(spec)->specBinding");
        assert_eq!(k.bind.as_deref(), Some("specBinding"));
        assert_eq!(k.key, Key::Projection(expr::parse("(spec)").unwrap()));
    }
}
