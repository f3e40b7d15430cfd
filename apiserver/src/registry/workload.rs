//! What the workload strategies ([`super::apps`], [`super::batch`]) share: pod-template defaulting and
//! validation on the stored JSON, structured label selectors (`metav1.LabelSelector`: validation,
//! matching) and the Go `%#v` renderings upstream's field errors print for selectors and label maps.
//!
//! Everything here is a pure function of JSON values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Map, Value, json};

use super::pod;
use super::validation::{label_value_errors, qualified_name_errors, validate_labels};
use crate::error::FieldError;

/// upstream `apimachineryvalidation.FieldImmutableErrorMsg`.
pub const FIELD_IMMUTABLE: &str = "field is immutable";
/// upstream `apimachineryvalidation` `ValidateNonnegativeField` message.
pub const NEGATIVE: &str = "must be greater than or equal to 0";

/// Apply the pod template defaults (`SetDefaults_PodSpec` and below) to the template at `pointer`
/// (`/spec/template`), creating its `spec` when absent: upstream's PodTemplateSpec.Spec is not a pointer,
/// so defaulting always reaches it. An undecodable spec is left alone (the kind's decode already
/// accepted it, so this does not happen).
pub fn default_template(obj: &mut Value, pointer: &str) {
    let Some(template) = obj.pointer_mut(pointer) else {
        return;
    };
    if !template.is_object() {
        return;
    }
    let raw = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    let Ok(mut spec) = api::tree::pod_spec(&raw) else {
        return;
    };
    pod::default_pod_template_spec(&mut spec);
    template["spec"] = api::tree::pod_spec_to_tree(&spec).expect("a PodSpec always serialises");
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
        .collect()
}

/// upstream `ValidatePodTemplateSpec` for the template at `pointer`, errors under `path`.
pub fn validate_template(obj: &Value, pointer: &str, path: &str) -> Vec<FieldError> {
    let Some(template) = obj.pointer(pointer) else {
        return vec![FieldError::required(path, "")];
    };
    let labels = string_map(template.pointer("/metadata/labels"));
    let annotations = string_map(template.pointer("/metadata/annotations"));
    let spec: PodSpec = template
        .get("spec")
        .and_then(|s| api::tree::pod_spec(s).ok())
        .unwrap_or_default();
    pod::validate_pod_template_spec(Some(&labels), Some(&annotations), &spec, path)
}

/// Go's `%q`-ish quoting as `%#v` uses for strings.
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// Go's `%#v` of a `map[string]string`: keys sorted, `map[string]string(nil)` for nil.
pub fn go_string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let mut pairs: Vec<(&String, &Value)> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".to_string(),
        Some(a) => {
            let items: Vec<String> = a.iter().map(|s| go_quote(s.as_str().unwrap_or(""))).collect();
            format!("[]string{{{}}}", items.join(", "))
        }
    }
}

/// Go's `%#v` of a `metav1.LabelSelector` (what `field.Invalid(path, spec.Selector, ...)` prints: the
/// pointer is dereferenced and the struct has no value-receiver `String`).
pub fn go_label_selector(selector: Option<&Value>) -> String {
    let Some(sel) = selector.filter(|s| s.is_object()) else {
        return "null".to_string();
    };
    let exprs = match sel.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(e.get("key").and_then(Value::as_str).unwrap_or("")),
                        go_quote(e.get("operator").and_then(Value::as_str).unwrap_or("")),
                        go_string_slice(e.get("values"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        go_string_map(sel.get("matchLabels")),
        exprs
    )
}

/// Whether a structured selector has no requirement at all (`len(MatchLabels)+len(MatchExpressions) == 0`).
pub fn selector_is_empty(selector: &Value) -> bool {
    let n = |k: &str| {
        selector
            .get(k)
            .map(|v| match v {
                Value::Object(o) => o.len(),
                Value::Array(a) => a.len(),
                _ => 0,
            })
            .unwrap_or(0)
    };
    n("matchLabels") + n("matchExpressions") == 0
}

/// `metav1.LabelSelectorAsSelector(sel).Matches(labels)`: `None` where upstream's conversion fails (an
/// unknown operator, values where none belong). A nil selector matches nothing, an empty one everything.
pub fn selector_matches(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> Option<bool> {
    let Some(sel) = selector.filter(|s| !s.is_null()) else {
        return Some(false);
    };
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let mut ok = true;
    for (k, v) in sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        ok &= label(k) == v.as_str();
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let have = label(key);
        ok &= match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" if !values.is_empty() => have.is_some_and(|h| values.contains(&h)),
            "NotIn" if !values.is_empty() => have.is_none_or(|h| !values.contains(&h)),
            "Exists" if values.is_empty() => have.is_some(),
            "DoesNotExist" if values.is_empty() => have.is_none(),
            _ => return None,
        };
    }
    Some(ok)
}

/// upstream `metav1validation.ValidateLabelSelector` (strict label values), errors under `path`.
pub fn validate_label_selector(selector: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(sel) = selector.filter(|s| s.is_object()) else {
        return errs;
    };
    for (i, e) in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let n = e.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        match op {
            "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                &json!(other),
                "not a valid selector operator",
            )),
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for msg in qualified_name_errors(key) {
            errs.push(FieldError::invalid(format!("{p}.key"), &json!(key), &msg));
        }
        for (j, v) in e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let v = v.as_str().unwrap_or("");
            for msg in label_value_errors(v) {
                errs.push(FieldError::invalid(format!("{p}.values[{j}]"), &json!(v), &msg));
            }
        }
    }
    errs.extend(validate_labels(
        &string_map(sel.get("matchLabels")),
        &format!("{path}.matchLabels"),
    ));
    errs
}

/// The checks every selector-plus-template workload shares (`ValidateDeploymentSpec`,
/// `ValidateReplicaSetSpec`, ...): selector required, valid and non-empty (`kind` names the workload in
/// upstream's message), and the template labels matched by it.
pub fn validate_selector_and_template(obj: &Value, kind: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector = obj.pointer("/spec/selector").filter(|s| !s.is_null());
    match selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => {
            errs.extend(validate_label_selector(Some(sel), "spec.selector"));
            if selector_is_empty(sel) {
                errs.push(invalid_printed(
                    "spec.selector",
                    &go_label_selector(Some(sel)),
                    &format!("empty selector is invalid for {kind}"),
                ));
            }
        }
    }
    let labels = obj.pointer("/spec/template/metadata/labels");
    match selector_matches(selector, labels.and_then(Value::as_object)) {
        // A nil selector is reported above; an empty one selects everything.
        Some(false) if selector.is_some() => errs.push(invalid_printed(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        )),
        None => errs.push(invalid_printed(
            "spec.selector",
            &go_label_selector(selector),
            "invalid label selector",
        )),
        _ => {}
    }
    errs
}

/// An `Invalid` error whose value is printed verbatim (Go's `%#v` of a struct or map).
pub fn invalid_printed(field: &str, printed: &str, detail: &str) -> FieldError {
    super::validation::invalid_printed(field, printed, detail)
}

/// `ValidateNonnegativeField` on the integer at `pointer`, when present.
pub fn non_negative(obj: &Value, pointer: &str, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = obj.pointer(pointer).and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(path, &json!(n), NEGATIVE));
    }
}

/// `ValidateImmutableField` for the selector at `/spec/selector`.
pub fn immutable_selector(new: &Value, old: &Value) -> Option<FieldError> {
    let n = new.pointer("/spec/selector");
    (n != old.pointer("/spec/selector"))
        .then(|| invalid_printed("spec.selector", &go_label_selector(n), FIELD_IMMUTABLE))
}

/// Set `obj[key]` to `value` when absent or null.
pub fn set_default(obj: &mut Value, key: &str, value: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj[key] = value;
    }
}

/// The object at `pointer`, created as `{}` along the way when absent.
pub fn ensure_object<'a>(obj: &'a mut Value, path: &[&str]) -> &'a mut Value {
    let mut cur = obj;
    for key in path {
        if !cur.get(*key).is_some_and(Value::is_object) {
            cur[*key] = json!({});
        }
        cur = cur.get_mut(*key).expect("just inserted");
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_renderings_match_upstream_error_text() {
        assert_eq!(
            go_label_selector(Some(&json!({}))),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            go_label_selector(Some(&json!({"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["x"]}]}))),
            "v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"1\", \"b\":\"2\"}, \
             MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"k\", \
             Operator:\"In\", Values:[]string{\"x\"}}}}"
        );
        assert_eq!(go_string_map(None), "map[string]string(nil)");
        assert_eq!(go_string_map(Some(&json!({}))), "map[string]string{}");
    }

    #[test]
    fn selectors_match_labels_and_expressions_like_labels_selector() {
        let labels = json!({"app": "web", "tier": "fe"});
        let l = labels.as_object();
        for (sel, want) in [
            (json!({"matchLabels": {"app": "web"}}), Some(true)),
            (json!({"matchLabels": {"app": "db"}}), Some(false)),
            (json!({}), Some(true)),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]}),
                Some(true),
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fe"]}]}),
                Some(false),
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}),
                Some(true),
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "Exists"}]}),
                Some(false),
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "Bogus"}]}),
                None,
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "In"}]}),
                None,
            ),
        ] {
            assert_eq!(selector_matches(Some(&sel), l), want, "{sel}");
        }
        assert_eq!(selector_matches(None, l), Some(false));
    }

    #[test]
    fn workload_selector_errors_carry_upstream_paths_and_messages() {
        let empty = json!({"spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "x"}}}}});
        let errs = validate_selector_and_template(&empty, "deployment");
        assert_eq!(
            errs[0].message,
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        );
        let mismatch = json!({"spec": {"selector": {"matchLabels": {"app": "y"}},
            "template": {"metadata": {"labels": {"app": "x"}}}}});
        let errs = validate_selector_and_template(&mismatch, "deployment");
        assert_eq!(
            errs[0].message,
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: `selector` does not \
             match template `labels`"
        );
        let missing = json!({"spec": {"template": {}}});
        assert_eq!(
            validate_selector_and_template(&missing, "deployment")[0].message,
            "spec.selector: Required value"
        );
        let bad_op = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}});
        let errs = validate_selector_and_template(&bad_op, "deployment");
        assert!(
            errs.iter()
                .any(|e| e.field == "spec.selector.matchExpressions[0].values"),
            "{errs:?}"
        );
    }

    #[test]
    fn template_defaults_fill_the_pod_spec_but_not_pod_only_fields() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
        default_template(&mut d, "/spec/template");
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["securityContext"], json!({}));
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        // SetDefaults_Pod and admission defaults are for pods only.
        assert!(spec.get("enableServiceLinks").is_none());
        assert!(spec.get("serviceAccountName").is_none());
        assert!(spec.get("tolerations").is_none());
    }
}
