//! API errors: what a client did wrong (or what failed), as upstream's `metav1.Status`.
//!
//! Every layer below `http` reports client-caused failures as an [`ApiError`]; `http` turns it into a
//! `Status` body with the same code, reason and wording as upstream (`apimachinery/pkg/api/errors`).

use serde_json::{Value, json};

pub use api::FieldError;

/// A failed API request, carried up to `http` and written as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message, upstream's wording.
    pub message: String,
    /// `metav1.StatusDetails` as JSON, or `None`.
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `pods` or `leases.coordination.k8s.io`: how upstream names a resource in messages.
fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` with upstream's `<resource> "<name>" is forbidden: <why>` wording.
    pub fn forbidden(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let message = format!("{} {name:?} is forbidden: {why}", qualified(resource, group));
        ApiError {
            details: Some(details(name, group, resource)),
            ..Self::new(403, "Forbidden", message)
        }
    }

    /// 404 `NotFound` for one object: `pods "x" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let message = format!("{} {name:?} not found", qualified(resource, group));
        ApiError {
            details: Some(details(name, group, resource)),
            ..Self::new(404, "NotFound", message)
        }
    }

    /// 404 for a path that names nothing we serve.
    pub fn no_route() -> Self {
        ApiError {
            details: Some(json!({})),
            ..Self::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 406 `NotAcceptable`.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 409 `AlreadyExists`: `pods "x" already exists`.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        let message = format!("{} {name:?} already exists", qualified(resource, group));
        ApiError {
            details: Some(details(name, group, resource)),
            ..Self::new(409, "AlreadyExists", message)
        }
    }

    /// 409 `Conflict`: `Operation cannot be fulfilled on pods "x": <why>`.
    pub fn conflict(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: {why}",
            qualified(resource, group)
        );
        ApiError {
            details: Some(details(name, group, resource)),
            ..Self::new(409, "Conflict", message)
        }
    }

    /// 409 for a stale `resourceVersion` on update.
    pub fn stale(resource: &str, group: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 `Expired`: `too old resource version: N (M)`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 `RequestEntityTooLarge`.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 422 `Invalid`: `Pod "x" is invalid: [a, b]` (`Deployment.apps "x"` in a group) with one cause per
    /// field. `kind` is the Kind (`Pod`).
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let joined = if errors.len() == 1 {
            errors[0].message.clone()
        } else {
            format!(
                "[{}]",
                errors
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        // upstream NewInvalid prints the qualified GroupKind: `Deployment.apps "web" is invalid`.
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let message = format!("{qualified} {name:?} is invalid: {joined}");
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({ "reason": e.reason, "message": e.detail(), "field": e.field }))
            .collect();
        let mut d = details(name, group, kind);
        d["causes"] = Value::Array(causes);
        ApiError {
            details: Some(d),
            ..Self::new(422, "Invalid", message)
        }
    }

    /// 422 `Invalid` without field causes (e.g. a JSON patch that cannot be applied).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 500 `InternalError`: something on our side failed. Never for client mistakes.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        let message = format!("Internal error occurred: {message}");
        ApiError {
            details: Some(json!({ "causes": [{ "message": message.clone() }] })),
            ..Self::new(500, "InternalError", message)
        }
    }

    /// 503 `ServiceUnavailable` (shutting down).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 507 `InsufficientStorage`: the data's file system is full (no upstream reason has this code).
    pub fn insufficient_storage(message: impl Into<String>) -> Self {
        Self::new(507, "InsufficientStorage", message)
    }

    /// The `metav1.Status` body for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_joins_several_field_errors_like_upstream() {
        let errs = vec![
            FieldError::required("spec.containers", ""),
            FieldError::invalid("metadata.name", &json!("A_b"), "a lowercase RFC 1123 subdomain"),
        ];
        let e = ApiError::invalid("Pod", "", "A_b", &errs);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Pod \"A_b\" is invalid: [spec.containers: Required value, metadata.name: Invalid value: \"A_b\": a lowercase RFC 1123 subdomain]"
        );
        let causes = &e.details.as_ref().unwrap()["causes"];
        assert_eq!(causes[0]["reason"], "FieldValueRequired");
        assert_eq!(causes[0]["message"], "Required value");
        assert_eq!(causes[0]["field"], "spec.containers");
    }

    #[test]
    fn not_found_names_group_qualified_resource() {
        let e = ApiError::not_found("leases", "coordination.k8s.io", "x");
        assert_eq!(e.message, "leases.coordination.k8s.io \"x\" not found");
        assert_eq!(e.to_status()["details"]["group"], "coordination.k8s.io");
    }
}
