//! CEL over JSON objects with the `cel` crate (cel-rust): a JSON value as CEL sees it, and compiling and
//! running a program so that a panic inside the parser or the interpreter is an error, never a crash. The
//! API server's CRD validation rules and `kubeling test`'s kuttl `assertAll`/`assertAny` both use it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// A JSON value as CEL sees it: integers as `int` (`uint` past `i64`), other numbers as `double`,
/// objects as maps with string keys.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => match n.as_u64() {
                Some(u) => cel::Value::UInt(u),
                None => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
            },
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let map: HashMap<cel::objects::Key, cel::Value> = o
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// Compile an expression; a panic of the parser is a compile error.
pub fn compile(source: &str) -> Result<cel::Program, String> {
    std::panic::catch_unwind(|| cel::Program::compile(source))
        .map_err(|_| "the expression could not be parsed".to_string())?
        .map_err(|e| e.to_string())
}

/// Run a program with the variables `ctx` binds; a panic inside the interpreter is an evaluation error.
pub fn execute(program: &cel::Program, ctx: &cel::Context) -> Result<cel::Value, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(ctx)))
        .map_err(|_| "the expression could not be evaluated".to_string())?
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_values_become_cel_values_and_programs_run_over_them() {
        let mut ctx = cel::Context::default();
        ctx.add_variable_from_value(
            "o",
            to_cel(&json!({"n": 3, "s": "x", "l": [1, 2], "f": 1.5, "b": true})),
        );
        let run = |src: &str| execute(&compile(src).unwrap(), &ctx);
        assert_eq!(
            run("o.n + 1 == 4 && o.s == 'x' && size(o.l) == 2 && o.f > 1.0 && o.b"),
            Ok(cel::Value::Bool(true))
        );
        assert!(run("o.missing == 1").is_err());
        assert!(compile("o.n +").is_err());
    }
}
