//! Generic object validation: the checks every kind shares, ported from upstream
//! `apimachinery/pkg/util/validation` (name and key formats), `apimachinery/pkg/api/validation`
//! (`ValidateObjectMeta`), `apimachinery/pkg/apis/meta/v1/validation` (labels) and the ConfigMap and
//! Secret checks of `pkg/apis/core/validation`.
//!
//! The API server's registry (re-exported there as `registry::validation`) calls
//! [`validate_object_meta`] (plus a kind's own spec checks) on create and update, and its `http` layer
//! turns the returned [`FieldError`]s into a 422 `Invalid` Status. Field paths and messages are printed
//! exactly as upstream prints them, because kubectl shows them to users verbatim. Upstream's messages
//! come from kube-apiserver v1.33.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::FieldError;

/// Which rule a kind's `metadata.name` follows (upstream's `ValidateNameFunc` per kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: pods, configmaps, secrets, nodes, deployments, leases, ...
    Subdomain,
    /// `NameIsDNSLabel`: namespaces.
    Label,
    /// `path.ValidatePathSegmentName`: RBAC roles and bindings, anything that only has to be a URL
    /// path segment.
    PathSegment,
    /// `NameIsDNS1035Label`: services (the name becomes a DNS name that must start with a letter).
    Dns1035Label,
}

// ---------------------------------------------------------------------------------------------
// Formats and messages (apimachinery/pkg/util/validation/validation.go, v1.33)
// ---------------------------------------------------------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_UNDERSCORE_FMT: &str =
    r"_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_UNDERSCORE_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_ERR: &str = "a valid HTTP header must consist of alphanumeric characters or '-'";

/// upstream: DNS1123LabelMaxLength = 63
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// upstream: DNS1123SubdomainMaxLength = 253
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// upstream: qualifiedNameMaxLength = 63, LabelValueMaxLength = 63
const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// upstream: TotalAnnotationSizeLimitB = 256 * (1 << 10)
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// upstream: core.MaxSecretSize = 1 * 1024 * 1024 (also the ConfigMap limit)
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// upstream `RegexError`. The doubled space in `'a',  or 'b'` is upstream's and kubectl users see it.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// upstream `MaxLenError`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// upstream `InclusiveRangeError`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// `label(\.label)*`
fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label_with_underscore(s: &str) -> bool {
    let rest = s.strip_prefix('_').unwrap_or(s);
    let b = rest.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-' || c == b'_')
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// Messages of upstream `IsDNS1123Label` (empty vec = ok).
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(s) {
        if matches_dns1123_subdomain(s) {
            // A valid subdomain but not a valid label: upstream knows it can only be the dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Messages of upstream `IsDNS1123Subdomain` (empty vec = ok).
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(s) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Messages of upstream `IsDNS1123SubdomainWithUnderscore` (pod `dnsConfig.searches`).
pub fn dns1123_subdomain_with_underscore_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !s.split('.').all(matches_dns1123_label_with_underscore) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_UNDERSCORE_ERR,
            DNS1123_SUBDOMAIN_UNDERSCORE_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Messages of upstream `IsDNS1035Label`.
pub fn dns1035_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1035_label(s) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// Messages of upstream `IsQualifiedName` (label keys, annotation keys, finalizers, resource names).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Messages of upstream `IsValidLabelValue`.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(max_len_error(QUALIFIED_NAME_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Messages of upstream `IsConfigMapKey` (ConfigMap and Secret data keys, key selectors).
pub fn config_map_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_');
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// Messages of upstream `IsValidPortName`.
pub fn port_name_errors(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.bytes().all(|c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Messages of upstream `IsValidPortNum`.
pub fn port_num_errors(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// Messages of upstream `IsRelaxedEnvVarName`: the 1.33 rule (`RelaxedEnvironmentVariableValidation`
/// is beta and on by default since 1.32).
pub fn env_var_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push("environment variable name must be non-empty".to_string());
    }
    // Go's unicode.IsPrint on ASCII: space through '~'.
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .to_string(),
        );
    }
    errs
}

/// Messages of upstream `IsHTTPHeaderName`.
pub fn http_header_name_errors(value: &str) -> Vec<String> {
    if !value.is_empty() && value.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
        Vec::new()
    } else {
        vec![regex_error(
            HTTP_HEADER_NAME_ERR,
            HTTP_HEADER_NAME_FMT,
            &["X-Header-Name"],
        )]
    }
}

/// Messages of upstream `path.ValidatePathSegmentName` (prefix: the name is a generateName prefix).
pub fn path_segment_name_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for bad in [".", ".."] {
            if name == bad {
                return vec![format!("may not be '{bad}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(*bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// upstream `maskTrailingDash`: a generateName prefix may end in '-', so validate it as if the
/// generated suffix followed. Upstream replaces the last *two* characters with "a"; kept as is.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let mut s = name[..name.len() - 2].to_string();
        s.push('a');
        s
    } else {
        name.to_string()
    }
}

/// The messages of a kind's name rule (upstream `ValidateNameFunc(name, prefix)`).
pub fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let masked;
    let name = if prefix && rule != NameRule::PathSegment {
        masked = mask_trailing_dash(name);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Subdomain => dns1123_subdomain_errors(name),
        NameRule::Label => dns1123_label_errors(name),
        NameRule::Dns1035Label => dns1035_label_errors(name),
        NameRule::PathSegment => path_segment_name_errors(name, prefix),
    }
}

/// upstream `field.NotFound`: `<field>: Not found: "<value>"`. The shared error type has no
/// constructor for it, so it is built here.
pub fn not_found(field: impl Into<String>, value: &str) -> FieldError {
    let field = field.into();
    let message = format!("{field}: Not found: {value:?}");
    FieldError {
        reason: "FieldValueNotFound",
        field,
        message,
    }
}

/// An `Invalid` error whose bad value is printed verbatim: for values upstream prints with Go's
/// `%#v` (slices, structs), which no JSON rendering reproduces.
pub fn invalid_printed(field: impl Into<String>, printed: &str, detail: &str) -> FieldError {
    let field = field.into();
    let message = format!("{field}: Invalid value: {printed}: {detail}");
    FieldError {
        reason: "FieldValueInvalid",
        field,
        message,
    }
}

/// Go's `%#v` of a `[]string`: `[]string{"a", "b"}`.
pub fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

// ---------------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------------

/// upstream `ValidateLabels`: every error is reported on the map's path (`metadata.labels`), not
/// on the key.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for msg in qualified_name_errors(k) {
            errs.push(FieldError::invalid(path, &json!(k), &msg));
        }
        for msg in label_value_errors(v) {
            errs.push(FieldError::invalid(path, &json!(v), &msg));
        }
    }
    errs
}

/// upstream `ValidateAnnotations`: keys are qualified names compared case-insensitively, and the
/// keys and values together may not exceed 256 KiB.
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for k in annotations.keys() {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, &json!(k), &msg));
        }
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn validate_owner_references(
    refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        // schema.FromAPIVersionAndKind: "group/version", "version", or unparseable (no version).
        let (group, version) = match r.api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.apiVersion"),
                &json!(r.api_version),
                "version must not be empty",
            ));
        }
        if r.kind.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.kind"),
                &json!(r.kind),
                "must not be empty",
            ));
        }
        if r.name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.name"),
                &json!(r.name),
                "must not be empty",
            ));
        }
        if r.uid.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.uid"),
                &json!(r.uid),
                "must not be empty",
            ));
        }
        if group.is_empty() && version == "v1" && r.kind == "Event" {
            // upstream prints the whole OwnerReference with %#v; we print it as JSON.
            let printed = serde_json::to_string(r).unwrap_or_default();
            errs.push(invalid_printed(
                path,
                &printed,
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            let this = format!("{}/{}", r.kind, r.name);
            match &first_controller {
                Some(first) => {
                    let printed = serde_json::to_string(refs).unwrap_or_default();
                    errs.push(invalid_printed(
                        path,
                        &printed,
                        &format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                        ),
                    ));
                }
                None => first_controller = Some(this),
            }
        }
    }
    errs
}

fn validate_finalizers(finalizers: &[String], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in finalizers {
        for msg in qualified_name_errors(f) {
            errs.push(FieldError::invalid(path, &json!(f), &msg));
        }
    }
    // metav1.FinalizerOrphanDependents / FinalizerDeleteDependents
    if finalizers.iter().any(|f| f == "orphan") && finalizers.iter().any(|f| f == "foregroundDeletion") {
        errs.push(invalid_printed(
            path,
            &go_string_slice(finalizers),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    // Core kinds add validateKubeFinalizerName: an unqualified name must be a standard one.
    for (i, f) in finalizers.iter().enumerate() {
        if !f.contains('/') && !matches!(f.as_str(), "kubernetes" | "orphan" | "foregroundDeletion") {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                &json!(f),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// Validate metadata of an object being created or updated. `namespaced`: the kind's scope.
///
/// Upstream generates `metadata.name` from `generateName` before validating. Callers should do the
/// same; if they have not, a missing name with a `generateName` is not reported (the name is still
/// to come) and only the prefix is checked.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool, rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or("");
    let name = meta.name.as_deref().unwrap_or("");

    if !generate_name.is_empty() {
        for msg in name_errors(rule, generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                &json!(generate_name),
                &msg,
            ));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
    } else {
        for msg in name_errors(rule, name, false) {
            errs.push(FieldError::invalid("metadata.name", &json!(name), &msg));
        }
    }

    let namespace = meta.namespace.as_deref().unwrap_or("");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in name_errors(NameRule::Label, namespace, false) {
                errs.push(FieldError::invalid("metadata.namespace", &json!(namespace), &msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }

    if let Some(g) = meta.generation
        && g < 0
    {
        errs.push(FieldError::invalid(
            "metadata.generation",
            &json!(g),
            "must be greater than or equal to 0",
        ));
    }
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, "metadata.labels"));
    }
    if let Some(annotations) = &meta.annotations {
        errs.extend(validate_annotations(annotations, "metadata.annotations"));
    }
    if let Some(refs) = &meta.owner_references {
        errs.extend(validate_owner_references(refs, "metadata.ownerReferences"));
    }
    if let Some(finalizers) = &meta.finalizers {
        errs.extend(validate_finalizers(finalizers, "metadata.finalizers"));
    }
    // managedFields are written by the server (server-side apply), not validated here.
    errs
}

/// upstream `ValidateObjectMetaUpdate`: the identity fields may not change, generation may not go
/// down, and an object being deleted may not gain finalizers. Labels, annotations, owner references
/// and finalizer names are checked by [`validate_object_meta`] on the new object, which update paths
/// call as well (upstream checks them in both and so reports them twice; we report them once).
/// `resourceVersion` is left to the store's precondition check.
pub fn validate_object_meta_update(new: &ObjectMeta, old: &ObjectMeta) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.deletion_timestamp.is_some() {
        let old_f = old.finalizers.as_deref().unwrap_or_default();
        let extra: std::collections::BTreeSet<&String> = new
            .finalizers
            .iter()
            .flatten()
            .filter(|f| !old_f.contains(f))
            .collect();
        if !extra.is_empty() {
            let extra: Vec<String> = extra.into_iter().cloned().collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&extra)
                ),
            ));
        }
    }
    if new.generation.unwrap_or(0) < old.generation.unwrap_or(0) {
        errs.push(FieldError::invalid(
            "metadata.generation",
            &json!(new.generation.unwrap_or(0)),
            "must not be decremented",
        ));
    }
    let immutable = |field: &str, new: Value, old: Value, errs: &mut Vec<FieldError>| {
        if new != old {
            errs.push(FieldError::invalid(
                format!("metadata.{field}"),
                &new,
                "field is immutable",
            ));
        }
    };
    let s = |v: &Option<String>| json!(v.as_deref().unwrap_or(""));
    immutable("name", s(&new.name), s(&old.name), &mut errs);
    immutable("namespace", s(&new.namespace), s(&old.namespace), &mut errs);
    immutable("uid", s(&new.uid), s(&old.uid), &mut errs);
    // upstream prints times with Go's time.String(); we print the RFC 3339 form.
    let t = |v: Option<String>| v.map_or(Value::Null, Value::String);
    immutable(
        "creationTimestamp",
        t(new.creation_timestamp.as_ref().map(|x| x.0.to_string())),
        t(old.creation_timestamp.as_ref().map(|x| x.0.to_string())),
        &mut errs,
    );
    immutable(
        "deletionTimestamp",
        t(new.deletion_timestamp.as_ref().map(|x| x.0.to_string())),
        t(old.deletion_timestamp.as_ref().map(|x| x.0.to_string())),
        &mut errs,
    );
    immutable(
        "deletionGracePeriodSeconds",
        json!(new.deletion_grace_period_seconds),
        json!(old.deletion_grace_period_seconds),
        &mut errs,
    );
    errs
}

// ---------------------------------------------------------------------------------------------
// ConfigMap and Secret
// ---------------------------------------------------------------------------------------------

fn meta_of(obj: &Value) -> ObjectMeta {
    obj.get("metadata")
        .and_then(|m| crate::tree::object_meta(m).ok())
        .unwrap_or_default()
}

/// Decode standard base64 (what Go's encoding/json does for `[]byte`), for sizes and content checks.
/// Upstream rejects bad base64 while decoding the request (400); we report it as a field error.
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    fn val(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    // Go's decoder skips '\r' and '\n'.
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'\r' && c != b'\n').collect();
    let illegal = |i: usize| format!("illegal base64 data at input byte {i}");
    if !bytes.len().is_multiple_of(4) {
        return Err(illegal(bytes.len() / 4 * 4));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (ci, chunk) in bytes.chunks(4).enumerate() {
        let last = ci == bytes.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(illegal(ci * 4 + 4 - pad));
        }
        let mut n: u32 = 0;
        for (j, &c) in chunk[..4 - pad].iter().enumerate() {
            let v = val(c).ok_or_else(|| illegal(ci * 4 + j))?;
            n |= u32::from(v) << (18 - 6 * j);
        }
        let [_, b0, b1, b2] = n.to_be_bytes();
        out.push(b0);
        if pad < 2 {
            out.push(b1);
        }
        if pad < 1 {
            out.push(b2);
        }
    }
    Ok(out)
}

/// upstream `ValidateConfigMap` (create and update; `immutable` is checked by the update path).
pub fn validate_configmap(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&meta_of(obj), true, NameRule::Subdomain);
    let empty = serde_json::Map::new();
    let data = obj.get("data").and_then(Value::as_object).unwrap_or(&empty);
    let binary = obj.get("binaryData").and_then(Value::as_object).unwrap_or(&empty);
    let mut total = 0usize;
    for (key, value) in data {
        let path = format!("data[{key}]");
        for msg in config_map_key_errors(key) {
            errs.push(FieldError::invalid(&path, &json!(key), &msg));
        }
        if binary.contains_key(key) {
            errs.push(FieldError::invalid(
                &path,
                &json!(key),
                "duplicate of key present in binaryData",
            ));
        }
        total += value.as_str().map_or(0, str::len);
    }
    for (key, value) in binary {
        let path = format!("binaryData[{key}]");
        for msg in config_map_key_errors(key) {
            errs.push(FieldError::invalid(&path, &json!(key), &msg));
        }
        match decode_base64(value.as_str().unwrap_or("")) {
            Ok(bytes) => total += bytes.len(),
            Err(e) => errs.push(FieldError::invalid(&path, &json!("<binary data>"), &e)),
        }
    }
    if total > MAX_SECRET_SIZE {
        // upstream passes the empty path: the error is about the whole object.
        errs.push(FieldError::too_long("", MAX_SECRET_SIZE));
    }
    errs
}

/// upstream `ValidateSecret`. `stringData` is merged over `data` first, as upstream's conversion does,
/// so a bad `stringData` key is reported as `data[<key>]` just like upstream.
pub fn validate_secret(obj: &Value) -> Vec<FieldError> {
    let meta = meta_of(obj);
    let mut errs = validate_object_meta(&meta, true, NameRule::Subdomain);

    // key -> decoded bytes (None when the base64 was bad; already reported).
    let mut data: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    if let Some(map) = obj.get("data").and_then(Value::as_object) {
        for (k, v) in map {
            match decode_base64(v.as_str().unwrap_or("")) {
                Ok(bytes) => {
                    data.insert(k.clone(), Some(bytes));
                }
                Err(e) => {
                    errs.push(FieldError::invalid(
                        format!("data[{k}]"),
                        &json!("<secret contents redacted>"),
                        &e,
                    ));
                    data.insert(k.clone(), None);
                }
            }
        }
    }
    if let Some(map) = obj.get("stringData").and_then(Value::as_object) {
        for (k, v) in map {
            data.insert(k.clone(), Some(v.as_str().unwrap_or("").as_bytes().to_vec()));
        }
    }

    let mut total = 0usize;
    for (key, value) in &data {
        for msg in config_map_key_errors(key) {
            errs.push(FieldError::invalid(format!("data[{key}]"), &json!(key), &msg));
        }
        total += value.as_ref().map_or(0, Vec::len);
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }

    let has = |k: &str| data.contains_key(k);
    let required = |k: &str| FieldError::required(format!("data[{k}]"), "");
    let check_json = |k: &str, errs: &mut Vec<FieldError>| match data.get(k) {
        None => errs.push(required(k)),
        Some(Some(bytes)) => {
            if let Err(e) = serde_json::from_slice::<serde_json::Map<String, Value>>(bytes) {
                // upstream prints Go's encoding/json error text; ours is serde_json's.
                errs.push(FieldError::invalid(
                    format!("data[{k}]"),
                    &json!("<secret contents redacted>"),
                    &e.to_string(),
                ));
            }
        }
        Some(None) => {}
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let sa = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .map_or("", String::as_str);
            if sa.is_empty() {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => check_json(".dockercfg", &mut errs),
        "kubernetes.io/dockerconfigjson" => check_json(".dockerconfigjson", &mut errs),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        "kubernetes.io/ssh-auth"
            if data
                .get("ssh-privatekey")
                .and_then(|v| v.as_ref())
                .is_none_or(Vec::is_empty) =>
        {
            errs.push(required("ssh-privatekey"));
        }
        "kubernetes.io/tls" => {
            if !has("tls.crt") {
                errs.push(required("tls.crt"));
            }
            if !has("tls.key") {
                errs.push(required("tls.key"));
            }
        }
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_REGEX_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_REGEX_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const QUALIFIED_NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            ..Default::default()
        }
    }

    fn messages(errs: &[FieldError]) -> Vec<&str> {
        errs.iter().map(|e| e.message.as_str()).collect()
    }

    #[test]
    fn dns1123_label_accepts_and_rejects_like_upstream() {
        let table: &[(&str, Vec<String>)] = &[
            ("a", vec![]),
            ("my-name", vec![]),
            ("123-abc", vec![]),
            ("a.b", vec!["must not contain dots".into()]),
            ("-a", vec![LABEL_REGEX_MSG.into()]),
            ("a-", vec![LABEL_REGEX_MSG.into()]),
            ("A", vec![LABEL_REGEX_MSG.into()]),
            ("", vec![LABEL_REGEX_MSG.into()]),
            (&"a".repeat(64), vec!["must be no more than 63 characters".into()]),
        ];
        for (input, want) in table {
            assert_eq!(&dns1123_label_errors(input), want, "input {input:?}");
        }
    }

    #[test]
    fn dns1123_subdomain_accepts_dots_and_rejects_bad_labels() {
        assert!(dns1123_subdomain_errors("example.com").is_empty());
        assert!(dns1123_subdomain_errors("a-1.b-2.c").is_empty());
        for bad in ["Example.com", "a..b", ".a", "a.", "a_b", ""] {
            assert_eq!(
                dns1123_subdomain_errors(bad),
                vec![SUBDOMAIN_REGEX_MSG.to_string()],
                "input {bad:?}"
            );
        }
        let long = format!("{}.{}", "a".repeat(63), "b".repeat(200));
        assert_eq!(
            dns1123_subdomain_errors(&long),
            vec!["must be no more than 253 characters".to_string()]
        );
    }

    #[test]
    fn qualified_names_check_prefix_and_name_parts() {
        assert!(qualified_name_errors("app").is_empty());
        assert!(qualified_name_errors("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name_errors("/a"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            qualified_name_errors("Example.com/a"),
            vec![format!("prefix part {SUBDOMAIN_REGEX_MSG}")]
        );
        assert_eq!(
            qualified_name_errors("a/"),
            vec![
                "name part must be non-empty".to_string(),
                QUALIFIED_NAME_PART_MSG.to_string()
            ]
        );
        assert_eq!(
            qualified_name_errors("bad_"),
            vec![QUALIFIED_NAME_PART_MSG.to_string()]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(
            qualified_name_errors("a/b/c")[0]
                .ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
        );
    }

    #[test]
    fn label_values_may_be_empty_but_not_malformed() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_3-x").is_empty());
        assert_eq!(
            label_value_errors("-x"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
    }

    #[test]
    fn path_segment_names_forbid_slash_percent_and_dots() {
        assert!(path_segment_name_errors("system:admin", false).is_empty());
        assert_eq!(
            path_segment_name_errors("..", false),
            vec!["may not be '..'".to_string()]
        );
        assert_eq!(
            path_segment_name_errors("a/b%c", false),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        // A prefix can still grow into a valid name.
        assert!(path_segment_name_errors(".", true).is_empty());
    }

    #[test]
    fn object_meta_requires_name_and_namespace() {
        let errs = validate_object_meta(&ObjectMeta::default(), true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Required value"
            ]
        );
        assert_eq!(errs[0].reason, "FieldValueRequired");
    }

    #[test]
    fn object_meta_rejects_bad_name_with_upstream_message() {
        let errs = validate_object_meta(&meta("My_Pod", Some("default")), true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec![format!(
                "metadata.name: Invalid value: \"My_Pod\": {SUBDOMAIN_REGEX_MSG}"
            )]
        );
    }

    #[test]
    fn namespace_names_must_be_labels() {
        let errs = validate_object_meta(&meta("a.b", None), false, NameRule::Label);
        assert_eq!(
            messages(&errs),
            vec!["metadata.name: Invalid value: \"a.b\": must not contain dots"]
        );
        let errs = validate_object_meta(&meta("x", Some("a.b")), true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec!["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]
        );
    }

    #[test]
    fn cluster_scoped_kinds_forbid_namespace() {
        let errs = validate_object_meta(&meta("n1", Some("default")), false, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn generate_name_is_validated_as_prefix_and_stands_in_for_name() {
        let m = ObjectMeta {
            generate_name: Some("web-".into()),
            namespace: Some("default".into()),
            ..Default::default()
        };
        assert!(validate_object_meta(&m, true, NameRule::Subdomain).is_empty());
        let m = ObjectMeta {
            generate_name: Some("Web-".into()),
            namespace: Some("default".into()),
            ..Default::default()
        };
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.generateName");
        assert!(
            errs[0].message.starts_with(
                "metadata.generateName: Invalid value: \"Web-\": a lowercase RFC 1123 subdomain"
            )
        );
    }

    #[test]
    fn service_names_follow_dns1035() {
        let errs = validate_object_meta(&meta("1abc", Some("default")), true, NameRule::Dns1035Label);
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.name: Invalid value: \"1abc\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
    }

    #[test]
    fn label_errors_are_reported_on_the_labels_path() {
        let mut m = meta("p", Some("default"));
        m.labels = Some(BTreeMap::from([
            ("bad key".to_string(), "ok".to_string()),
            ("k".to_string(), "-v".to_string()),
        ]));
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[0].message,
            format!("metadata.labels: Invalid value: \"bad key\": {QUALIFIED_NAME_PART_MSG}")
        );
        assert_eq!(errs[1].field, "metadata.labels");
        assert!(
            errs[1]
                .message
                .starts_with("metadata.labels: Invalid value: \"-v\": a valid label must be")
        );
    }

    #[test]
    fn annotations_total_size_is_limited_to_256_kib() {
        let mut m = meta("p", Some("default"));
        m.annotations = Some(BTreeMap::from([(
            "a".to_string(),
            "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1),
        )]));
        assert!(validate_object_meta(&m, true, NameRule::Subdomain).is_empty());
        m.annotations = Some(BTreeMap::from([(
            "a".to_string(),
            "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT),
        )]));
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert_eq!(errs[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn annotation_keys_are_case_insensitive_qualified_names() {
        let mut m = meta("p", Some("default"));
        m.annotations = Some(BTreeMap::from([("Example.COM/Key".to_string(), String::new())]));
        assert!(validate_object_meta(&m, true, NameRule::Subdomain).is_empty());
        m.annotations = Some(BTreeMap::from([("a b".to_string(), String::new())]));
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(errs[0].field, "metadata.annotations");
    }

    #[test]
    fn finalizers_must_be_qualified_or_standard() {
        let mut m = meta("p", Some("default"));
        m.finalizers = Some(vec!["kubernetes".into(), "example.com/x".into(), "custom".into()]);
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.finalizers[2]: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
        m.finalizers = Some(vec!["orphan".into(), "foregroundDeletion".into()]);
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
            ]
        );
    }

    #[test]
    fn owner_references_need_version_kind_name_uid() {
        let mut m = meta("p", Some("default"));
        m.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/".into(),
                kind: String::new(),
                name: "rs".into(),
                uid: String::new(),
                ..Default::default()
            },
        ]);
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty",
            ]
        );
    }

    #[test]
    fn negative_generation_is_invalid() {
        let mut m = meta("p", Some("default"));
        m.generation = Some(-1);
        let errs = validate_object_meta(&m, true, NameRule::Subdomain);
        assert_eq!(
            messages(&errs),
            vec!["metadata.generation: Invalid value: -1: must be greater than or equal to 0"]
        );
    }

    #[test]
    fn configmap_keys_are_validated_and_may_not_repeat_in_binary_data() {
        let obj = json!({
            "metadata": {"name": "cm", "namespace": "default"},
            "data": {"good.key": "v", "bad key": "v", "..x": "v", "dup": "v"},
            "binaryData": {"dup": "AAAA", ".": "AAAA"}
        });
        let errs = validate_configmap(&obj);
        assert_eq!(
            messages(&errs),
            vec![
                "data[..x]: Invalid value: \"..x\": must not start with '..'",
                "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData",
                "binaryData[.]: Invalid value: \".\": must not be '.'",
            ]
        );
    }

    #[test]
    fn configmap_total_size_is_limited_to_one_mib() {
        let obj = json!({
            "metadata": {"name": "cm", "namespace": "default"},
            "data": {"a": "x".repeat(MAX_SECRET_SIZE), "b": "y"}
        });
        let errs = validate_configmap(&obj);
        assert_eq!(
            messages(&errs),
            vec![": Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn secret_string_data_keys_are_reported_as_data_keys() {
        let obj = json!({
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"ok": "aGVsbG8="},
            "stringData": {"..": "plain"}
        });
        let errs = validate_secret(&obj);
        assert_eq!(
            messages(&errs),
            vec!["data[..]: Invalid value: \"..\": must not be '..'"]
        );
    }

    #[test]
    fn secret_size_counts_decoded_bytes() {
        // 1 MiB of decoded bytes is allowed; one more is not.
        let full_chunks = "A".repeat(MAX_SECRET_SIZE / 3 * 4);
        let exact = format!("{full_chunks}AA==");
        assert_eq!(decode_base64(&exact).unwrap().len(), MAX_SECRET_SIZE);
        let obj = json!({"metadata": {"name": "s", "namespace": "default"}, "data": {"a": exact}});
        assert!(validate_secret(&obj).is_empty());
        let obj = json!({
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"a": format!("{full_chunks}AAA=")}
        });
        assert_eq!(
            messages(&validate_secret(&obj)),
            vec!["data: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn secret_types_require_their_keys() {
        let tls = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}});
        assert_eq!(
            messages(&validate_secret(&tls)),
            vec!["data[tls.key]: Required value"]
        );
        let basic = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/basic-auth"});
        assert_eq!(
            messages(&validate_secret(&basic)),
            vec!["data[username]: Required value", "data[password]: Required value"]
        );
        let sa = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/service-account-token"});
        assert_eq!(
            messages(&validate_secret(&sa)),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        let docker = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": "{\"auths\":{}}"}});
        assert!(validate_secret(&docker).is_empty());
    }

    #[test]
    fn base64_decoder_matches_standard_encoding() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(
            decode_base64("a$==").unwrap_err(),
            "illegal base64 data at input byte 1"
        );
        assert!(decode_base64("abc").is_err());
    }

    #[test]
    fn not_found_prints_like_upstream() {
        let e = not_found("spec.containers[0].volumeMounts[0].name", "data");
        assert_eq!(
            e.message,
            "spec.containers[0].volumeMounts[0].name: Not found: \"data\""
        );
        assert_eq!(e.detail(), "Not found: \"data\"");
        assert_eq!(e.reason, "FieldValueNotFound");
    }
}
