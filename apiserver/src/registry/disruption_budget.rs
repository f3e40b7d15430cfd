//! The policy/v1 PodDisruptionBudget strategy (upstream `pkg/registry/policy/poddisruptionbudget` and
//! `ValidatePodDisruptionBudget{,StatusUpdate}` of `pkg/apis/policy/validation`). Status is reset on
//! create and written only through `/status` (by the disruption controller and the eviction
//! subresource); `metadata.generation` follows the spec. Pure functions of the stored JSON.

use serde_json::{Value, json};

use super::apps::positive_int_or_percent;
use super::workload::{invalid_printed, non_negative, validate_label_selector};
use crate::error::FieldError;

/// The resource this strategy is for.
pub fn handles(group: &str, plural: &str) -> bool {
    (group, plural) == ("policy", "poddisruptionbudgets")
}

/// upstream's `supportedUnhealthyPodEvictionPolicies`.
const UNHEALTHY_POD_EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

/// Validation of the object (`ValidatePodDisruptionBudgetSpec`) or of a status update.
pub fn validate(obj: &Value, status_update: bool) -> Vec<FieldError> {
    if status_update {
        return validate_status(obj);
    }
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let min = spec.get("minAvailable").filter(|v| !v.is_null());
    let max = spec.get("maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        // Upstream prints the Go struct (with pointer addresses); the JSON says the same, readably.
        errs.push(invalid_printed(
            "spec",
            &spec.to_string(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    if min.is_some() {
        positive_int_or_percent(min, "spec.minAvailable", true, &mut errs);
    }
    if max.is_some() {
        positive_int_or_percent(max, "spec.maxUnavailable", true, &mut errs);
    }
    errs.extend(validate_label_selector(
        spec.get("selector").filter(|s| !s.is_null()),
        "spec.selector",
    ));
    if let Some(p) = spec.get("unhealthyPodEvictionPolicy").and_then(Value::as_str)
        && !UNHEALTHY_POD_EVICTION_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            &json!(p),
            UNHEALTHY_POD_EVICTION_POLICIES,
        ));
    }
    errs
}

/// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1): conditions well formed, counts not negative.
fn validate_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, c) in obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("status.conditions[{i}]");
        if c.get("type").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("{p}.type"), ""));
        }
        match c.get("status").and_then(Value::as_str).unwrap_or("") {
            "True" | "False" | "Unknown" => {}
            other => errs.push(FieldError::not_supported(
                format!("{p}.status"),
                &json!(other),
                &["False", "True", "Unknown"],
            )),
        }
        if c.get("reason").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("{p}.reason"), ""));
        }
    }
    for c in [
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
    ] {
        non_negative(obj, &format!("/status/{c}"), &format!("status.{c}"), &mut errs);
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: &Value, status: bool) -> Vec<String> {
        validate(obj, status).into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn min_available_and_max_unavailable_exclude_each_other() {
        let both = json!({"spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}}});
        let got = messages(&both, false);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("spec: Invalid value: "));
        assert!(got[0].ends_with(": minAvailable and maxUnavailable cannot be both set"));
        assert!(messages(&json!({"spec": {"minAvailable": "50%"}}), false).is_empty());
    }

    #[test]
    fn bounds_are_counts_or_percentages_up_to_100() {
        let cases = [
            (
                json!({"minAvailable": -1}),
                "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                json!({"maxUnavailable": "150%"}),
                "spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
            ),
            (
                json!({"minAvailable": "x"}),
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"x\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ),
            (
                json!({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                json!({"unhealthyPodEvictionPolicy": "Never"}),
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(messages(&json!({"spec": spec}), false), vec![want.to_string()]);
        }
    }

    #[test]
    fn status_counts_are_not_negative_and_conditions_well_formed() {
        let obj = json!({"status": {"disruptionsAllowed": -1, "conditions": [{"type": "DisruptionAllowed", "status": "Maybe", "reason": "X"}]}});
        assert_eq!(
            messages(&obj, true),
            vec![
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }
}
