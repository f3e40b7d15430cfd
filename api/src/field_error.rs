//! Field errors: one invalid field of an object, with upstream's reasons and messages
//! (`apimachinery/pkg/util/validation/field`). The API server turns a list of them into a 422 `Invalid`
//! Status; the node agent reports them for static pods it refuses.

use serde_json::Value;

/// One invalid field, as in upstream's `field.Error`: a `StatusCause` of a 422 `Invalid` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueForbidden`,
    /// `FieldValueDuplicate`, `FieldValueTooLong`, `FieldValueTypeInvalid`.
    pub reason: &'static str,
    /// The field path, e.g. `spec.containers[0].name`.
    pub field: String,
    /// The whole message, as upstream prints it: `spec.containers[0].name: Required value`.
    pub message: String,
}

impl FieldError {
    /// `<field>: Required value[: detail]`
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = if detail.is_empty() {
            format!("{field}: Required value")
        } else {
            format!("{field}: Required value: {detail}")
        };
        FieldError {
            reason: "FieldValueRequired",
            field,
            message,
        }
    }

    /// `<field>: Invalid value: <value>: detail` (the value printed as upstream does: strings quoted).
    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        let field = field.into();
        let message = format!("{field}: Invalid value: {}: {detail}", print_value(value));
        FieldError {
            reason: "FieldValueInvalid",
            field,
            message,
        }
    }

    /// `<field>: Unsupported value: <value>: supported values: "a", "b"`
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let field = field.into();
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let message = format!(
            "{field}: Unsupported value: {}: supported values: {}",
            print_value(value),
            list.join(", ")
        );
        FieldError {
            reason: "FieldValueNotSupported",
            field,
            message,
        }
    }

    /// `<field>: Forbidden: detail`
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = format!("{field}: Forbidden: {detail}");
        FieldError {
            reason: "FieldValueForbidden",
            field,
            message,
        }
    }

    /// `<field>: Duplicate value: <value>`
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        let field = field.into();
        let message = format!("{field}: Duplicate value: {}", print_value(value));
        FieldError {
            reason: "FieldValueDuplicate",
            field,
            message,
        }
    }

    /// `<field>: Too long: may not be more than <max> bytes`
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let field = field.into();
        let message = format!("{field}: Too long: may not be more than {max} bytes");
        FieldError {
            reason: "FieldValueTooLong",
            field,
            message,
        }
    }

    /// The message without the leading `<field>: `, as upstream puts it in `StatusCause.message`.
    pub fn detail(&self) -> &str {
        self.message
            .strip_prefix(&self.field)
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(&self.message)
    }
}

/// How upstream's `field.Error` prints a bad value: strings quoted, numbers and booleans bare.
fn print_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}
