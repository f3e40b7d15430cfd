//! Label selectors (`metav1.LabelSelector`) as controllers use them: matching a label set, and whether a
//! selector selects everything.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// True when `selector` has no requirement at all (upstream: selects everything; controllers refuse it).
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

fn requirement_matches(req: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&req.key);
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // An unknown operator selects nothing (validation rejects it upstream).
        _ => false,
    }
}

/// Whether `labels` satisfy every requirement of `selector`. An empty selector matches everything;
/// callers that must not select everything check [`is_empty`] first.
pub fn matches(selector: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_matches(r, labels))
}

/// A plain equality selector (Services, `nodeSelector`): every pair present in `labels`. An empty map
/// selects nothing here, as for Services.
pub fn map_matches(selector: &BTreeMap<String, String>, labels: Option<&BTreeMap<String, String>>) -> bool {
    !selector.is_empty() && labels.is_some_and(|l| selector.iter().all(|(k, v)| l.get(k) == Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_match_as_upstream() {
        let app = labels(&[("app", "web"), ("tier", "front")]);
        let cases = [
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["front"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}),
                false,
            ),
            (json!({}), true),
        ];
        for (s, want) in cases {
            assert_eq!(matches(&sel(s.clone()), Some(&app)), want, "{s}");
        }
        assert!(is_empty(&sel(json!({}))));
        assert!(!is_empty(&sel(json!({"matchLabels": {"a": "b"}}))));
    }

    #[test]
    fn service_selectors_need_every_pair_and_select_nothing_when_empty() {
        let app = labels(&[("app", "web"), ("tier", "front")]);
        assert!(map_matches(&labels(&[("app", "web")]), Some(&app)));
        assert!(!map_matches(&labels(&[("app", "web"), ("x", "y")]), Some(&app)));
        assert!(!map_matches(&labels(&[]), Some(&app)));
        assert!(!map_matches(&labels(&[("app", "web")]), None));
    }
}
