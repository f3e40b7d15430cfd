//! ResourceQuotas: the strategy (`ValidateResourceQuota{,StatusUpdate}` of `pkg/apis/core/validation`)
//! and the quota admission on create (`plugin/pkg/admission/resourcequota`): an object that would take
//! a quota's `status.used` past its `status.hard` is refused with 403 and upstream's message; otherwise
//! the usage is charged to the quota's status, each quota in one storage write that re-checks against
//! the quota as stored (so two creates never both take the last unit). The counting rules are shared
//! with the controller manager's quota controller in [`api::quota`].

use serde_json::{Value, json};

use api::quota::{self, Refusal};

use super::{Registry, ResourceInfo, WriteOptions, meta_str, resources};
use crate::error::{ApiError, FieldError};
use crate::storage::Decision;

/// The resource this strategy is for.
pub fn handles(group: &str, plural: &str) -> bool {
    (group, plural) == ("", "resourcequotas")
}

const NEGATIVE: &str = "must be greater than or equal to 0";

/// `ValidateResourceQuantityValue` over a `ResourceList` at `path` (`spec.hard[pods]`).
fn validate_list(list: Option<&Value>, path: &str, names: bool, errs: &mut Vec<FieldError>) {
    for (k, v) in list.and_then(Value::as_object).into_iter().flatten() {
        let p = format!("{path}[{k}]");
        if names && !k.contains('/') && !quota::is_standard_quota_resource(k) {
            errs.push(FieldError::invalid(
                &p,
                &json!(k),
                "must be a standard resource for quota",
            ));
        }
        let Some(q) = v.as_str().and_then(|s| api::pod::parse_quantity(s).ok()) else {
            continue;
        };
        if q.nanos < 0 {
            errs.push(FieldError::invalid(&p, &json!(q.canonical()), NEGATIVE));
        }
        if quota::is_integer_resource(k) && q.nanos % 1_000_000_000 != 0 {
            errs.push(FieldError::invalid(
                &p,
                &json!(q.canonical()),
                "must be an integer",
            ));
        }
    }
}

/// Validation of a create or update, or of a status update.
pub fn validate(obj: &Value, status_update: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if status_update {
        validate_list(obj.pointer("/status/hard"), "status.hard", true, &mut errs);
        validate_list(obj.pointer("/status/used"), "status.used", true, &mut errs);
        return errs;
    }
    validate_list(obj.pointer("/spec/hard"), "spec.hard", true, &mut errs);
    let scopes: Vec<&str> = obj
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let printed = || format!("[{}]", scopes.join(" "));
    if scopes.iter().any(|s| !quota::SCOPES.contains(s)) {
        errs.push(super::validation::invalid_printed(
            "spec.scopes",
            &printed(),
            "unsupported scope",
        ));
    }
    for (a, b) in [("Terminating", "NotTerminating"), ("BestEffort", "NotBestEffort")] {
        if scopes.contains(&a) && scopes.contains(&b) {
            errs.push(super::validation::invalid_printed(
                "spec.scopes",
                &printed(),
                "conflicting scopes",
            ));
        }
    }
    for (i, e) in obj
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("spec.scopeSelector.matchExpressions[{i}]");
        let name = e.get("scopeName").and_then(Value::as_str).unwrap_or("");
        if !quota::SCOPES.contains(&name) {
            errs.push(FieldError::invalid(
                format!("{p}.scopeName"),
                &json!(name),
                "unsupported scope",
            ));
        }
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let n = e.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        match op {
            "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::invalid(
                format!("{p}.values"),
                &json!(e.get("values")),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                &json!(other),
                &["DoesNotExist", "Exists", "In", "NotIn"],
            )),
        }
    }
    errs
}

impl Registry {
    /// Quota admission of a new object: refuse it (403) when it exceeds a quota of its namespace, or
    /// charge its usage to every quota it falls under (not on a dry run).
    pub(super) async fn admit_quota(
        &self,
        info: &ResourceInfo,
        obj: &Value,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let Some(ns) = meta_str(obj, "namespace").filter(|_| info.namespaced) else {
            return Ok(());
        };
        let quotas_info = resources::find("", "v1", "resourcequotas").expect("resourcequotas are served");
        let quotas = self
            .list(quotas_info, Some(ns), &Default::default(), None, None)
            .items;
        if quotas.is_empty() {
            return Ok(());
        }
        let name = meta_str(obj, "name").unwrap_or("");
        let refuse = |r: Refusal| ApiError::forbidden(info.plural, info.group, name, &r.to_string());
        let now = jiff::Timestamp::now();
        // Every quota is judged before any is charged.
        let mut charged = Vec::new();
        for q in &quotas {
            if quota::charge(&q.value(), info.group, info.plural, obj, now)
                .map_err(refuse)?
                .is_some()
            {
                charged.push(meta_str(&q.value(), "name").unwrap_or("").to_string());
            }
        }
        if dry_run {
            return Ok(());
        }
        let opts = WriteOptions {
            field_manager: Some("kube-apiserver".into()),
            ..Default::default()
        };
        for qname in charged {
            let charged = self
                .storage
                .write(&quotas_info.key(Some(ns), &qname), |current| {
                    let Some(cur) = current else {
                        return Err(ApiError::not_found(quotas_info.plural, quotas_info.group, &qname));
                    };
                    match quota::charge(&cur.value(), info.group, info.plural, obj, now).map_err(refuse)? {
                        None => Ok(Decision::Keep),
                        Some(used) => {
                            let mut new = cur.value();
                            new["status"]["used"] = quota::to_json(&used);
                            self.decide_update(quotas_info, cur, new, Some("status"), &opts)
                        }
                    }
                })
                .await;
            match charged {
                // Deleted meanwhile: nothing to charge.
                Err(e) if e.code == 404 => {}
                other => drop(other?),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: &Value, status: bool) -> Vec<String> {
        validate(obj, status).into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn hard_limits_are_standard_non_negative_and_whole_where_counted() {
        let obj = json!({"spec": {"hard": {"pods": "1500m", "cpu": "-1", "widgets": "1", "count/deployments.apps": "2"}}});
        assert_eq!(
            messages(&obj, false),
            vec![
                "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[pods]: Invalid value: \"1500m\": must be an integer",
                "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
            ]
        );
        assert!(
            messages(
                &json!({"spec": {"hard": {"requests.cpu": "500m", "pods": "2"}}}),
                false
            )
            .is_empty()
        );
    }

    #[test]
    fn scopes_are_known_and_not_conflicting() {
        let obj = json!({"spec": {"scopes": ["Terminating", "NotTerminating"]}});
        assert_eq!(
            messages(&obj, false),
            vec!["spec.scopes: Invalid value: [Terminating NotTerminating]: conflicting scopes"]
        );
        let obj = json!({"spec": {"scopes": ["Sometimes"]}});
        assert_eq!(
            messages(&obj, false),
            vec!["spec.scopes: Invalid value: [Sometimes]: unsupported scope"]
        );
        let obj = json!({"spec": {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}}});
        assert_eq!(
            messages(&obj, false),
            vec![
                "spec.scopeSelector.matchExpressions[0].values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
            ]
        );
    }
}
