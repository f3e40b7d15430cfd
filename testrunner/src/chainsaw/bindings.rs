//! Scoped, immutable bindings (`$namespace`, `$test`, user `bindings`, outputs): an inner binding hides an
//! outer one with the same name, and binding never changes the scope it was made from.

use std::sync::Arc;

use serde_json::Value;

#[derive(Debug)]
struct Node {
    name: String,
    value: Value,
    parent: Option<Arc<Node>>,
}

/// A chain of name → value, newest first. Cheap to clone and to extend.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    head: Option<Arc<Node>>,
}

impl Bindings {
    pub fn new() -> Bindings {
        Bindings::default()
    }

    /// A new scope with `name` bound to `value` (the name without its `$`).
    #[must_use]
    pub fn with(&self, name: impl Into<String>, value: Value) -> Bindings {
        Bindings {
            head: Some(Arc::new(Node {
                name: name.into(),
                value,
                parent: self.head.clone(),
            })),
        }
    }

    /// The innermost value bound to `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        let mut node = self.head.as_deref();
        while let Some(n) = node {
            if n.name == name {
                return Some(&n.value);
            }
            node = n.parent.as_deref();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inner_binding_hides_outer_and_outer_scope_is_unchanged() {
        let outer = Bindings::new().with("a", json!(1)).with("b", json!(2));
        let inner = outer.with("a", json!(10));
        assert_eq!(inner.get("a"), Some(&json!(10)));
        assert_eq!(inner.get("b"), Some(&json!(2)));
        assert_eq!(outer.get("a"), Some(&json!(1)));
        assert_eq!(outer.get("c"), None);
    }
}
