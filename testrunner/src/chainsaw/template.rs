//! Templating (reference 2.6): with templating on, every string value of the form `(expr)` in a resource
//! to apply/create/patch/update/delete is replaced by its value; for assert/error only the lookup fields
//! (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`, string labels) are, the rest being an
//! assertion tree already. Binding values and script env values are always templated.

use serde_json::Value;

use super::bindings::Bindings;
use super::expr;

/// Every `(expr)` string in `value` replaced by its value (`@` is null). Map keys are kept.
pub fn template(value: &Value, bindings: &Bindings) -> Result<Value, String> {
    match value {
        Value::String(_) => expr::evaluate_if_expression(value, &Value::Null, bindings),
        Value::Array(items) => items
            .iter()
            .map(|v| template(v, bindings))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(m) => {
            let mut out = serde_json::Map::with_capacity(m.len());
            for (k, v) in m {
                out.insert(k.clone(), template(v, bindings)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

/// A string field templated to a string (`file: ($file)`, `ref.name`); a non-string result is an error.
pub fn template_string(s: &str, bindings: &Bindings) -> Result<String, String> {
    match expr::evaluate_if_expression(&Value::from(s), &Value::Null, bindings)? {
        Value::String(s) => Ok(s),
        other => Err(format!("expression {s:?} must give a string, got {other}")),
    }
}

/// For assert/error: templates only the fields used to find the objects.
pub fn template_lookup(tree: &Value, bindings: &Bindings) -> Result<Value, String> {
    let mut out = tree.clone();
    let Value::Object(root) = &mut out else {
        return Ok(out);
    };
    for key in ["apiVersion", "kind"] {
        if let Some(v @ Value::String(_)) = root.get_mut(key) {
            *v = template(v, bindings)?;
        }
    }
    if let Some(Value::Object(meta)) = root.get_mut("metadata") {
        for key in ["name", "namespace"] {
            if let Some(v @ Value::String(_)) = meta.get_mut(key) {
                *v = template(v, bindings)?;
            }
        }
        if let Some(Value::Object(labels)) = meta.get_mut("labels") {
            for (_, v) in labels.iter_mut() {
                if v.is_string() {
                    *v = template(v, bindings)?;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templating_replaces_expression_strings_only() {
        let b = Bindings::new().with("namespace", json!("ns")).with("c", json!(3));
        let got = template(
            &json!({"metadata": {"name": "(join('-', [$namespace, 'foo']))", "(key)": "x"},
                    "data": {"foo": "(to_string($c))", "plain": "bar", "n": 1, "list": ["($c)"]}}),
            &b,
        )
        .unwrap();
        assert_eq!(
            got,
            json!({"metadata": {"name": "ns-foo", "(key)": "x"}, "data": {"foo": "3", "plain": "bar", "n": 1, "list": [3]}})
        );
        assert_eq!(template_string("($namespace)", &b).unwrap(), "ns");
        assert!(template_string("($c)", &b).is_err());
        assert!(
            template(&json!("($missing)"), &b)
                .unwrap_err()
                .contains("$missing")
        );
    }

    #[test]
    fn lookup_templating_leaves_the_tree_alone() {
        let b = Bindings::new().with("foo", json!("cm-1"));
        let got = template_lookup(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "($foo)", "labels": {"a": "($foo)"}},
                    "data": {"x": "($foo)"}}),
            &b,
        )
        .unwrap();
        assert_eq!(got["metadata"]["name"], json!("cm-1"));
        assert_eq!(got["metadata"]["labels"]["a"], json!("cm-1"));
        assert_eq!(got["data"]["x"], json!("($foo)"));
    }
}
