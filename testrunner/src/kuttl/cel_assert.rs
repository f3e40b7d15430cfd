//! kuttl's CEL assertions (`TestAssert.resourceRefs`, `assertAll`, `assertAny`; kuttl v0.21+): each
//! reference is fetched with a GET (its namespace defaults to the test's) and bound as the CEL variable its
//! `ref` names; every `assertAll` expression must evaluate to exactly `true`, and at least one `assertAny`
//! expression. They are checked with the step's asserts, until the step timeout. A reference that cannot be
//! fetched fails that check; an expression that does not compile fails the step when its file loads.

use serde_json::Value;

use super::config::TestAssert;
use crate::engine::{Cluster, Selector};

/// The compiled expressions of a `TestAssert`.
pub struct CelAssertions {
    all: Vec<(String, cel::Program)>,
    any: Vec<(String, cel::Program)>,
}

impl CelAssertions {
    /// Compile the assert's expressions; `None` when it has none.
    pub fn compile(a: &TestAssert) -> Result<Option<CelAssertions>, String> {
        if a.assert_all.is_empty() && a.assert_any.is_empty() {
            return Ok(None);
        }
        let compile_all = |list: &[super::config::CelAssertion], field: &str| {
            list.iter()
                .enumerate()
                .map(|(i, e)| {
                    api::cel::compile(&e.cel_expr)
                        .map(|p| (e.cel_expr.clone(), p))
                        .map_err(|err| format!("{field}[{i}] {:?}: {err}", e.cel_expr))
                })
                .collect::<Result<Vec<_>, String>>()
        };
        Ok(Some(CelAssertions {
            all: compile_all(&a.assert_all, "assertAll")?,
            any: compile_all(&a.assert_any, "assertAny")?,
        }))
    }

    /// Whether the expressions hold over the fetched references (`ref` name → object).
    pub fn judge(&self, refs: &[(String, Value)]) -> Result<(), String> {
        let mut ctx = cel::Context::default();
        for (name, obj) in refs {
            ctx.add_variable_from_value(name.as_str(), api::cel::to_cel(obj));
        }
        let holds = |p: &cel::Program| match api::cel::execute(p, &ctx) {
            Ok(cel::Value::Bool(true)) => Ok(()),
            Ok(other) => Err(format!("evaluated to {other:?}")),
            Err(e) => Err(e),
        };
        for (src, p) in &self.all {
            holds(p).map_err(|e| format!("assertAll expression {src:?} failed: {e}"))?;
        }
        if !self.any.is_empty() {
            let mut why = Vec::new();
            for (src, p) in &self.any {
                match holds(p) {
                    Ok(()) => return Ok(()),
                    Err(e) => why.push(format!("{src:?}: {e}")),
                }
            }
            return Err(format!("no assertAny expression holds: {}", why.join("; ")));
        }
        Ok(())
    }
}

/// GET every reference of `a` (the test namespace `ns` by default), as `ref` name → object.
pub async fn fetch(cluster: &Cluster, a: &TestAssert, ns: &str) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for r in &a.resource_refs {
        let sel = Selector {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
            name: Some(r.name.clone()),
            labels: Default::default(),
        };
        match cluster.get(&sel, ns).await {
            Ok(Some(obj)) => out.push((r.ref_.clone(), obj)),
            Ok(None) => {
                return Err(format!(
                    "resourceRefs {:?}: {} not found",
                    r.ref_,
                    sel.describe(Some(ns))
                ));
            }
            Err(e) => return Err(format!("resourceRefs {:?}: {e}", r.ref_)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assertions(all: &[&str], any: &[&str]) -> Result<Option<CelAssertions>, String> {
        let a: TestAssert = serde_json::from_value(json!({
            "assertAll": all.iter().map(|e| json!({"celExpr": e})).collect::<Vec<_>>(),
            "assertAny": any.iter().map(|e| json!({"celExpr": e})).collect::<Vec<_>>(),
        }))
        .unwrap();
        CelAssertions::compile(&a)
    }

    #[test]
    fn all_must_hold_and_one_of_any() {
        let refs = vec![(
            "d".to_string(),
            json!({"status": {"readyReplicas": 2}, "metadata": {"name": "web"}}),
        )];
        let cases: &[(&[&str], &[&str], bool)] = &[
            (&["d.status.readyReplicas > 1"], &[], true),
            (
                &["d.status.readyReplicas > 1", "d.metadata.name == 'db'"],
                &[],
                false,
            ),
            (
                &[],
                &["d.status.readyReplicas > 5", "d.metadata.name == 'web'"],
                true,
            ),
            (
                &[],
                &["d.status.readyReplicas > 5", "d.metadata.name == 'db'"],
                false,
            ),
            (&["d.status.readyReplicas == 2"], &["false", "true"], true),
            // Exactly `true`: a non-boolean is a failure, as is a missing field or an unbound name.
            (&["d.status.readyReplicas"], &[], false),
            (&["d.status.missing > 1"], &[], false),
            (&["other.status.x == 1"], &[], false),
        ];
        for (all, any, holds) in cases {
            let a = assertions(all, any).unwrap().unwrap();
            assert_eq!(
                a.judge(&refs).is_ok(),
                *holds,
                "{all:?} {any:?}: {:?}",
                a.judge(&refs)
            );
        }
        let err = assertions(&["d.status.readyReplicas > 1", "d.metadata.name == 'db'"], &[])
            .unwrap()
            .unwrap()
            .judge(&refs)
            .unwrap_err();
        assert!(err.contains("d.metadata.name == 'db'"), "{err}");
    }

    #[test]
    fn no_expressions_is_none_and_a_bad_one_names_itself() {
        assert!(assertions(&[], &[]).unwrap().is_none());
        let err = assertions(&["ok == true", "d.status.readyReplicas >"], &[])
            .err()
            .unwrap();
        assert!(
            err.starts_with("assertAll[1] \"d.status.readyReplicas >\""),
            "{err}"
        );
    }
}
