//! Expressions: the `(expr)` strings of assertion trees, templates and bindings, evaluated with JMESPath
//! (the `jmespath` crate, plus the kyverno and chainsaw functions in [`super::functions`]).
//!
//! Bindings (`$namespace`, `$values`, user bindings) are not part of the JMESPath grammar the crate
//! implements, so every `$name` outside string and literal tokens is replaced by a JSON literal of its value
//! before compiling (`$index` → `` `3` ``). An unknown `$name` is an error naming it, as in chainsaw
//! (`variable not defined: $name`).

use std::sync::LazyLock;

use serde_json::Value;

use super::bindings::Bindings;
use super::functions;

static RUNTIME: LazyLock<jmespath::Runtime> = LazyLock::new(|| {
    let mut rt = jmespath::Runtime::new();
    rt.register_builtin_functions();
    functions::register(&mut rt);
    rt
});

/// The compiler an expression names: `(jp; expr)`, `(cel; expr)`, or the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    Jp,
    Cel,
}

/// A parsed `(expr)` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expression {
    pub compiler: Option<Compiler>,
    pub text: String,
}

/// Parses a string of the form `(expr)` (kyverno-json `expression.Parse`): `None` for any other string,
/// so it is a literal. `(jp; expr)` and `(cel; expr)` name the compiler.
pub fn parse(s: &str) -> Option<Expression> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    if inner.trim().is_empty() {
        return None;
    }
    for (prefix, compiler) in [("jp;", Compiler::Jp), ("cel;", Compiler::Cel)] {
        if let Some(rest) = inner.strip_prefix(prefix) {
            return Some(Expression {
                compiler: Some(compiler),
                text: rest.trim().to_string(),
            });
        }
    }
    Some(Expression {
        compiler: None,
        text: inner.to_string(),
    })
}

/// Evaluates `expr` with `@` = `at` and the given bindings.
pub fn evaluate(expr: &Expression, at: &Value, bindings: &Bindings) -> Result<Value, String> {
    match expr.compiler {
        Some(Compiler::Cel) => Err(format!("cel expressions are not supported: {}", expr.text)),
        _ => search(&expr.text, at, bindings),
    }
}

/// Evaluates a JMESPath expression text.
pub fn search(text: &str, at: &Value, bindings: &Bindings) -> Result<Value, String> {
    let substituted = substitute_bindings(text, bindings)?;
    let rewritten = super::arith::rewrite(&substituted);
    let compiled = RUNTIME
        .compile(&rewritten)
        .map_err(|e| format!("invalid expression {text:?}: {}", first_line(&e)))?;
    // A null `@` would make every multi-select (`[$a, 'b']`) null; chainsaw evaluates templates and
    // non-resource trees against an empty value instead.
    let empty = Value::Object(Default::default());
    let at = if at.is_null() { &empty } else { at };
    let data = jmespath::Variable::from_serializable(at).map_err(|e| e.to_string())?;
    let result = compiled
        .search(data)
        .map_err(|e| format!("failed to evaluate {text:?}: {}", first_line(&e)))?;
    serde_json::to_value(&*result).map_err(|e| e.to_string())
}

fn first_line(e: &jmespath::JmespathError) -> String {
    let s = e.to_string();
    s.lines().next().unwrap_or_default().to_string()
}

/// If `value` is an `(expr)` string, its value; otherwise itself.
pub fn evaluate_if_expression(value: &Value, at: &Value, bindings: &Bindings) -> Result<Value, String> {
    match value.as_str().and_then(parse) {
        Some(expr) => evaluate(&expr, at, bindings),
        None => Ok(value.clone()),
    }
}

/// Replaces each `$name` outside `'raw strings'`, `"quoted identifiers"` and `` `literals` `` by a JSON
/// literal of its bound value.
pub fn substitute_bindings(text: &str, bindings: &Bindings) -> Result<String, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' | '`' => {
                out.push(c);
                i += 1;
                while i < chars.len() {
                    out.push(chars[i]);
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        out.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    if chars[i - 1] == c {
                        break;
                    }
                }
            }
            '$' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
                    end += 1;
                }
                if end == start || chars[start].is_ascii_digit() {
                    out.push(c);
                    i += 1;
                    continue;
                }
                let name: String = chars[start..end].iter().collect();
                let value = bindings
                    .get(&name)
                    .ok_or_else(|| format!("variable not defined: ${name}"))?;
                let json = serde_json::to_string(value).map_err(|e| e.to_string())?;
                out.push('`');
                out.push_str(&json.replace('`', "\\`"));
                out.push('`');
                i = end;
            }
            _ => {
                out.push(c);
                i += 1;
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
    fn only_parenthesised_strings_are_expressions() {
        type Want = Option<(Option<Compiler>, &'static str)>;
        let table: &[(&str, Want)] = &[
            ("(foo)", Some((None, "foo"))),
            ("(jp; foo.bar)", Some((Some(Compiler::Jp), "foo.bar"))),
            ("(cel; 1 + 1)", Some((Some(Compiler::Cel), "1 + 1"))),
            ("foo", None),
            ("(foo", None),
            ("()", None),
            ("((a) || 'b')", Some((None, "(a) || 'b'"))),
        ];
        for (s, want) in table {
            let got = parse(s).map(|e| (e.compiler, e.text));
            assert_eq!(got, want.map(|(c, t)| (c, t.to_string())), "{s}");
        }
    }

    #[test]
    fn bindings_are_substituted_outside_strings() {
        let b = Bindings::new()
            .with("namespace", json!("ns-1"))
            .with("n", json!(2));
        let table: &[(&str, &str)] = &[
            ("$namespace", "`\"ns-1\"`"),
            ("join('-', [$namespace, 'x'])", "join('-', [`\"ns-1\"`, 'x'])"),
            ("'$namespace'", "'$namespace'"),
            ("`\"$n\"`", "`\"$n\"`"),
            ("$n", "`2`"),
        ];
        for (text, want) in table {
            assert_eq!(substitute_bindings(text, &b).unwrap(), *want, "{text}");
        }
        assert_eq!(
            substitute_bindings("$nope", &b).unwrap_err(),
            "variable not defined: $nope"
        );
    }

    #[test]
    fn jmespath_evaluates_with_bindings_and_current_value() {
        let b = Bindings::new()
            .with("namespace", json!("ns-1"))
            .with("obj", json!({"a": {"b": [1, 2]}}));
        let at =
            json!({"spec": {"replicas": 3}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let table: &[(&str, Value)] = &[
            ("spec.replicas", json!(3)),
            ("spec.replicas > `1` && spec.replicas < `4`", json!(true)),
            ("status.conditions[?type == 'Ready'] | [0].status", json!("True")),
            ("join('-', [$namespace, 'foo'])", json!("ns-1-foo")),
            ("$obj.a.b[1]", json!(2)),
            ("length($obj.a.b)", json!(2)),
            ("missing", Value::Null),
        ];
        for (text, want) in table {
            assert_eq!(search(text, &at, &b).unwrap(), *want, "{text}");
        }
        assert!(
            search("spec.[", &at, &b)
                .unwrap_err()
                .contains("invalid expression")
        );
    }
}
