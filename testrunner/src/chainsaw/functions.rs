//! The kyverno and chainsaw JMESPath functions suites commonly use (reference 2.5), on top of the JMESPath
//! builtins. The `x_k8s_*` functions read the cluster through the [`ClusterReader`] installed for the
//! current thread by [`with_cluster`]; `$client` is bound to a marker value they accept.

use std::cell::RefCell;
use std::sync::Arc;

use base64::Engine as _;
use jmespath::{Context, ErrorReason, JmespathError, Rcvar, Runtime, Variable};
use serde_json::{Number, Value};

/// What `x_k8s_get`/`x_k8s_list`/`x_k8s_exists`/`x_k8s_server_version` read (synchronous: the runner
/// implements it by blocking on its async client).
pub trait ClusterReader: Send + Sync {
    /// The object, or `None` when it does not exist.
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, String>;
    /// A `List` object (`{"items": [...]}`).
    fn list(&self, api_version: &str, kind: &str, namespace: &str) -> Result<Value, String>;
    /// Whether discovery knows the kind.
    fn resource_exists(&self, api_version: &str, kind: &str) -> Result<bool, String>;
    /// The `/version` document.
    fn server_version(&self) -> Result<Value, String>;
}

thread_local! {
    static CLUSTER: RefCell<Option<Arc<dyn ClusterReader>>> = const { RefCell::new(None) };
}

/// Runs `f` with `reader` as the cluster the `x_k8s_*` functions read.
pub fn with_cluster<T>(reader: Option<Arc<dyn ClusterReader>>, f: impl FnOnce() -> T) -> T {
    let previous = CLUSTER.with(|c| std::mem::replace(&mut *c.borrow_mut(), reader));
    let out = f();
    CLUSTER.with(|c| *c.borrow_mut() = previous);
    out
}

static GLOBAL: std::sync::RwLock<Option<Arc<dyn ClusterReader>>> = std::sync::RwLock::new(None);

/// Sets the cluster the `x_k8s_*` functions read when no thread-local one is installed (the run's).
pub fn set_global_cluster(reader: Option<Arc<dyn ClusterReader>>) {
    *GLOBAL.write().expect("cluster reader lock") = reader;
}

fn cluster() -> Result<Arc<dyn ClusterReader>, String> {
    CLUSTER
        .with(|c| c.borrow().clone())
        .or_else(|| GLOBAL.read().expect("cluster reader lock").clone())
        .ok_or_else(|| "no cluster client available".to_string())
}

fn fail(ctx: &Context<'_>, msg: impl Into<String>) -> JmespathError {
    JmespathError::from_ctx(ctx, ErrorReason::Parse(msg.into()))
}

fn to_json(v: &Rcvar) -> Value {
    serde_json::to_value(&**v).unwrap_or(Value::Null)
}

fn from_json(v: Value) -> Rcvar {
    Rcvar::new(Variable::from_serializable(v).unwrap_or(Variable::Null))
}

fn arg_str<'a>(args: &'a [Rcvar], i: usize, name: &str, ctx: &Context<'_>) -> Result<&'a str, JmespathError> {
    args.get(i)
        .and_then(|a| a.as_string().map(String::as_str))
        .ok_or_else(|| fail(ctx, format!("{name}: argument {} must be a string", i + 1)))
}

fn arg_num(args: &[Rcvar], i: usize, name: &str, ctx: &Context<'_>) -> Result<f64, JmespathError> {
    args.get(i)
        .and_then(|a| a.as_number())
        .ok_or_else(|| fail(ctx, format!("{name}: argument {} must be a number", i + 1)))
}

fn arity(args: &[Rcvar], n: usize, name: &str, ctx: &Context<'_>) -> Result<(), JmespathError> {
    if args.len() != n {
        return Err(fail(
            ctx,
            format!("{name}: expected {n} arguments, got {}", args.len()),
        ));
    }
    Ok(())
}

fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)
    }
}

type Func = fn(&[Rcvar], &mut Context<'_>) -> Result<Value, JmespathError>;

/// Registers the functions on a runtime that already has the builtins.
pub fn register(rt: &mut Runtime) {
    let table: &[(&str, Func)] = &[
        ("trim_space", |a, c| {
            arity(a, 1, "trim_space", c)?;
            Ok(Value::from(arg_str(a, 0, "trim_space", c)?.trim()))
        }),
        ("trim", |a, c| {
            arity(a, 2, "trim", c)?;
            let cut: Vec<char> = arg_str(a, 1, "trim", c)?.chars().collect();
            Ok(Value::from(
                arg_str(a, 0, "trim", c)?.trim_matches(|ch| cut.contains(&ch)),
            ))
        }),
        ("trim_prefix", |a, c| {
            arity(a, 2, "trim_prefix", c)?;
            let s = arg_str(a, 0, "trim_prefix", c)?;
            Ok(Value::from(
                s.strip_prefix(arg_str(a, 1, "trim_prefix", c)?).unwrap_or(s),
            ))
        }),
        ("to_upper", |a, c| {
            arity(a, 1, "to_upper", c)?;
            Ok(Value::from(arg_str(a, 0, "to_upper", c)?.to_uppercase()))
        }),
        ("to_lower", |a, c| {
            arity(a, 1, "to_lower", c)?;
            Ok(Value::from(arg_str(a, 0, "to_lower", c)?.to_lowercase()))
        }),
        ("split", |a, c| {
            arity(a, 2, "split", c)?;
            let s = arg_str(a, 0, "split", c)?;
            Ok(Value::from(
                s.split(arg_str(a, 1, "split", c)?)
                    .map(Value::from)
                    .collect::<Vec<_>>(),
            ))
        }),
        ("replace", |a, c| {
            arity(a, 4, "replace", c)?;
            let (s, old, new) = (
                arg_str(a, 0, "replace", c)?,
                arg_str(a, 1, "replace", c)?,
                arg_str(a, 2, "replace", c)?,
            );
            let n = arg_num(a, 3, "replace", c)?;
            Ok(Value::from(if n < 0.0 {
                s.replace(old, new)
            } else {
                s.replacen(old, new, n as usize)
            }))
        }),
        ("replace_all", |a, c| {
            arity(a, 3, "replace_all", c)?;
            let (s, old, new) = (
                arg_str(a, 0, "replace_all", c)?,
                arg_str(a, 1, "replace_all", c)?,
                arg_str(a, 2, "replace_all", c)?,
            );
            Ok(Value::from(s.replace(old, new)))
        }),
        ("truncate", |a, c| {
            arity(a, 2, "truncate", c)?;
            let n = arg_num(a, 1, "truncate", c)?.max(0.0) as usize;
            Ok(Value::from(
                arg_str(a, 0, "truncate", c)?.chars().take(n).collect::<String>(),
            ))
        }),
        ("json_parse", |a, c| {
            arity(a, 1, "json_parse", c)?;
            serde_json::from_str(arg_str(a, 0, "json_parse", c)?)
                .map_err(|e| fail(c, format!("json_parse: {e}")))
        }),
        ("parse_json", |a, c| {
            arity(a, 1, "parse_json", c)?;
            serde_json::from_str(arg_str(a, 0, "parse_json", c)?)
                .map_err(|e| fail(c, format!("parse_json: {e}")))
        }),
        ("parse_yaml", |a, c| {
            arity(a, 1, "parse_yaml", c)?;
            serde_norway::from_str(arg_str(a, 0, "parse_yaml", c)?)
                .map_err(|e| fail(c, format!("parse_yaml: {e}")))
        }),
        ("base64_decode", |a, c| {
            arity(a, 1, "base64_decode", c)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(arg_str(a, 0, "base64_decode", c)?)
                .map_err(|e| fail(c, format!("base64_decode: {e}")))?;
            Ok(Value::from(String::from_utf8_lossy(&bytes).into_owned()))
        }),
        ("base64_encode", |a, c| {
            arity(a, 1, "base64_encode", c)?;
            Ok(Value::from(
                base64::engine::general_purpose::STANDARD.encode(arg_str(a, 0, "base64_encode", c)?),
            ))
        }),
        ("regex_match", |a, c| {
            arity(a, 2, "regex_match", c)?;
            let re = regex::Regex::new(arg_str(a, 0, "regex_match", c)?)
                .map_err(|e| fail(c, format!("regex_match: {e}")))?;
            let s = match &*a[1] {
                Variable::String(s) => s.clone(),
                other => serde_json::to_string(other).unwrap_or_default(),
            };
            Ok(Value::from(re.is_match(&s)))
        }),
        ("regex_replace_all", |a, c| {
            arity(a, 3, "regex_replace_all", c)?;
            let re = regex::Regex::new(arg_str(a, 0, "regex_replace_all", c)?)
                .map_err(|e| fail(c, format!("regex_replace_all: {e}")))?;
            let s = arg_str(a, 1, "regex_replace_all", c)?;
            Ok(Value::from(
                re.replace_all(s, arg_str(a, 2, "regex_replace_all", c)?)
                    .into_owned(),
            ))
        }),
        ("pattern_match", |a, c| {
            arity(a, 2, "pattern_match", c)?;
            let s = match &*a[1] {
                Variable::String(s) => s.clone(),
                other => serde_json::to_string(other).unwrap_or_default(),
            };
            Ok(Value::from(wildcard_match(
                arg_str(a, 0, "pattern_match", c)?,
                &s,
            )))
        }),
        ("add", |a, c| arith(a, c, "add")),
        ("subtract", |a, c| arith(a, c, "subtract")),
        ("multiply", |a, c| arith(a, c, "multiply")),
        ("divide", |a, c| arith(a, c, "divide")),
        ("modulo", |a, c| arith(a, c, "modulo")),
        ("env", |a, c| {
            arity(a, 1, "env", c)?;
            Ok(Value::from(
                std::env::var(arg_str(a, 0, "env", c)?).unwrap_or_default(),
            ))
        }),
        ("to_boolean", |a, c| {
            arity(a, 1, "to_boolean", c)?;
            match arg_str(a, 0, "to_boolean", c)?.to_lowercase().as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                other => Err(fail(c, format!("to_boolean: cannot convert {other:?}"))),
            }
        }),
        ("lookup", |a, c| {
            arity(a, 2, "lookup", c)?;
            match (to_json(&a[0]), to_json(&a[1])) {
                (Value::Object(m), Value::String(k)) => Ok(m.get(&k).cloned().unwrap_or(Value::Null)),
                (Value::Array(v), Value::Number(n)) => Ok(n
                    .as_u64()
                    .and_then(|i| v.get(i as usize).cloned())
                    .unwrap_or(Value::Null)),
                _ => Err(fail(c, "lookup: expected (object, string) or (array, number)")),
            }
        }),
        ("items", |a, c| {
            arity(a, 3, "items", c)?;
            let (k, v) = (arg_str(a, 1, "items", c)?, arg_str(a, 2, "items", c)?);
            match to_json(&a[0]) {
                Value::Object(m) => Ok(Value::Array(
                    m.into_iter()
                        .map(|(key, val)| serde_json::json!({ k: key, v: val }))
                        .collect(),
                )),
                Value::Array(arr) => Ok(Value::Array(
                    arr.into_iter()
                        .enumerate()
                        .map(|(i, val)| serde_json::json!({ k: i, v: val }))
                        .collect(),
                )),
                _ => Err(fail(c, "items: argument 1 must be an object or an array")),
            }
        }),
        ("object_from_lists", |a, c| {
            arity(a, 2, "object_from_lists", c)?;
            let (Value::Array(keys), Value::Array(values)) = (to_json(&a[0]), to_json(&a[1])) else {
                return Err(fail(c, "object_from_lists: arguments must be arrays"));
            };
            let mut m = serde_json::Map::new();
            for (i, k) in keys.into_iter().enumerate() {
                let key = k.as_str().map(str::to_string).unwrap_or_else(|| k.to_string());
                m.insert(key, values.get(i).cloned().unwrap_or(Value::Null));
            }
            Ok(Value::Object(m))
        }),
        ("label_match", |a, c| {
            arity(a, 2, "label_match", c)?;
            let (Value::Object(want), Value::Object(have)) = (to_json(&a[0]), to_json(&a[1])) else {
                return Err(fail(c, "label_match: arguments must be objects"));
            };
            Ok(Value::Bool(want.iter().all(|(k, v)| have.get(k) == Some(v))))
        }),
        ("time_now_utc", |a, c| {
            arity(a, 0, "time_now_utc", c)?;
            Ok(Value::from(
                jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            ))
        }),
        ("x_k8s_get", |a, c| {
            arity(a, 5, "x_k8s_get", c)?;
            let (v, k, ns, n) = (
                arg_str(a, 1, "x_k8s_get", c)?,
                arg_str(a, 2, "x_k8s_get", c)?,
                arg_str(a, 3, "x_k8s_get", c)?,
                arg_str(a, 4, "x_k8s_get", c)?,
            );
            let obj = cluster()
                .and_then(|cl| cl.get(v, k, ns, n))
                .map_err(|e| fail(c, format!("x_k8s_get: {e}")))?;
            obj.ok_or_else(|| fail(c, format!("x_k8s_get: {k} {ns}/{n} not found")))
        }),
        ("x_k8s_exists", |a, c| {
            arity(a, 5, "x_k8s_exists", c)?;
            let (v, k, ns, n) = (
                arg_str(a, 1, "x_k8s_exists", c)?,
                arg_str(a, 2, "x_k8s_exists", c)?,
                arg_str(a, 3, "x_k8s_exists", c)?,
                arg_str(a, 4, "x_k8s_exists", c)?,
            );
            let obj = cluster()
                .and_then(|cl| cl.get(v, k, ns, n))
                .map_err(|e| fail(c, format!("x_k8s_exists: {e}")))?;
            Ok(Value::Bool(obj.is_some()))
        }),
        ("x_k8s_list", |a, c| {
            if a.len() != 3 && a.len() != 4 {
                return Err(fail(
                    c,
                    format!("x_k8s_list: expected 3 or 4 arguments, got {}", a.len()),
                ));
            }
            let (v, k) = (arg_str(a, 1, "x_k8s_list", c)?, arg_str(a, 2, "x_k8s_list", c)?);
            let ns = if a.len() == 4 {
                arg_str(a, 3, "x_k8s_list", c)?
            } else {
                ""
            };
            cluster()
                .and_then(|cl| cl.list(v, k, ns))
                .map_err(|e| fail(c, format!("x_k8s_list: {e}")))
        }),
        ("x_k8s_resource_exists", |a, c| {
            arity(a, 3, "x_k8s_resource_exists", c)?;
            let (v, k) = (
                arg_str(a, 1, "x_k8s_resource_exists", c)?,
                arg_str(a, 2, "x_k8s_resource_exists", c)?,
            );
            let exists = cluster()
                .and_then(|cl| cl.resource_exists(v, k))
                .map_err(|e| fail(c, format!("x_k8s_resource_exists: {e}")))?;
            Ok(Value::Bool(exists))
        }),
        ("x_k8s_server_version", |a, c| {
            arity(a, 1, "x_k8s_server_version", c)?;
            cluster()
                .and_then(|cl| cl.server_version())
                .map_err(|e| fail(c, format!("x_k8s_server_version: {e}")))
        }),
    ];
    for (name, f) in table {
        let f = *f;
        rt.register_function(
            name,
            Box::new(move |args: &[Rcvar], ctx: &mut Context<'_>| f(args, ctx).map(from_json)),
        );
    }
}

fn arith(a: &[Rcvar], c: &mut Context<'_>, name: &str) -> Result<Value, JmespathError> {
    arity(a, 2, name, c)?;
    let (x, y) = (arg_num(a, 0, name, c)?, arg_num(a, 1, name, c)?);
    let r = match name {
        "add" => x + y,
        "subtract" => x - y,
        "multiply" => x * y,
        "divide" if y == 0.0 => return Err(fail(c, "divide: division by zero")),
        "divide" => x / y,
        _ if y == 0.0 => return Err(fail(c, "modulo: division by zero")),
        _ => x % y,
    };
    Ok(number(r))
}

/// `*` matches any run, `?` one character (kyverno's `wildcard.Match`).
pub fn wildcard_match(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = s.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0usize, 0usize, None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::super::bindings::Bindings;
    use super::super::expr::search;
    use serde_json::{Value, json};

    #[test]
    fn kyverno_functions_evaluate() {
        let b = Bindings::new()
            .with("index", json!(1))
            .with("stdout", json!("  hello chainsaw\n"));
        let table: &[(&str, Value)] = &[
            ("trim_space($stdout)", json!("hello chainsaw")),
            ("to_string($index + `1`)", json!("2")),
            ("join('-', ['nginx', to_string($index + `1`)])", json!("nginx-2")),
            ("`7` % `4`", json!(3)),
            ("`1` / `4`", json!(0.25)),
            ("json_parse('{\"a\": [1]}').a[0]", json!(1)),
            ("parse_yaml('a: b').a", json!("b")),
            ("base64_decode('aGVsbG8=')", json!("hello")),
            ("base64_encode('hello')", json!("aGVsbG8=")),
            ("regex_match('^ng.*x$', 'nginx')", json!(true)),
            ("pattern_match('ng*', 'nginx')", json!(true)),
            ("pattern_match('ap?', 'nginx')", json!(false)),
            ("split('a,b', ',')", json!(["a", "b"])),
            ("to_upper('ab')", json!("AB")),
            ("items({a: `1`}, 'k', 'v')", json!([{"k": "a", "v": 1}])),
            ("contains(['a', 'b'], 'b')", json!(true)),
            ("starts_with('chainsaw-x', 'chainsaw-')", json!(true)),
        ];
        for (text, want) in table {
            assert_eq!(search(text, &Value::Null, &b).unwrap(), *want, "{text}");
        }
        assert!(
            search(
                "x_k8s_list($client, 'v1', 'Node')",
                &Value::Null,
                &b.with("client", json!({}))
            )
            .unwrap_err()
            .contains("no cluster client")
        );
    }
}
