//! `pods/NAME/eviction` (policy/v1 Eviction), upstream `pkg/registry/core/pod/storage/eviction.go`: a pod
//! delete that honours the PodDisruptionBudgets selecting the pod.
//!
//! ```text
//!  POST eviction ─► pod terminal, Pending or being deleted? ─yes─► add DisruptionTarget, delete (201)
//!                   │ no
//!                   ▼
//!             budgets selecting the pod: >1 → 500 Status; 0 → delete
//!                   │ 1
//!                   ▼
//!   pod not ready and the budget may lose it (AlwaysAllow, or healthy enough) → delete if unchanged since
//!   else check_and_decrement under the storage's writer: 429 when no disruption is allowed, else
//!        disruptionsAllowed-1 and disruptedPods[pod]=now in the budget's status → delete (201)
//! ```
//!
//! The decisions are the pure functions below; [`Registry::evict`] only reads and writes. The budget's
//! check and decrement run inside one storage write, so two evictions never spend the same disruption
//! (upstream retries on a resourceVersion conflict to the same effect).

use serde_json::{Value, json};

use super::workload::{selector_is_empty, selector_matches};
use super::{DeleteOptions, Registry, WriteOptions, meta_str, now_rfc3339, resources};
use crate::error::ApiError;
use crate::storage::Decision;

/// upstream `MaxDisruptedPodSize`.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;
/// The 429 message every refused eviction carries.
pub const TOO_MANY_REQUESTS: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The message of the 500 Status when several budgets select the pod.
pub const MULTIPLE_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// upstream `EvictionsRetry.Steps`.
const RETRIES: usize = 20;
/// The manager of the writes the eviction makes itself (upstream's are the API server's own).
const MANAGER: &str = "kube-apiserver";

/// What an eviction ended in, when it was not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evicted {
    /// The pod was deleted (or marked for deletion): 201 Success.
    Deleted,
    /// More than one budget selects the pod: a 500 Failure Status, as upstream answers.
    MultipleBudgets,
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

fn being_deleted(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// `canIgnorePDB`: a terminal or Pending pod, or one already being deleted, disrupts nothing more.
pub fn can_ignore_budget(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || being_deleted(pod)
}

/// `shouldEnforceResourceVersion`: delete only the pod as read, unless it is terminal or going anyway.
pub fn should_enforce_resource_version(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && !being_deleted(pod)
}

/// `IsPodReady`.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// `getPodDisruptionBudgets`: the budgets of the pod's namespace whose selector matches its labels; an
/// empty or invalid selector matches nothing here.
pub fn matching_budgets<'a>(pod: &Value, budgets: &'a [Value]) -> Vec<&'a Value> {
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    budgets
        .iter()
        .filter(|b| {
            let sel = b.pointer("/spec/selector").filter(|s| s.is_object());
            sel.is_some_and(|s| !selector_is_empty(s)) && selector_matches(sel, labels) == Some(true)
        })
        .collect()
}

/// Whether an unready pod may go without spending a disruption: the budget's policy is `AlwaysAllow`, or
/// (the default `IfHealthyBudget`) the application is healthy enough without it.
pub fn unready_pod_may_go(budget: &Value) -> bool {
    let int = |k: &str| {
        budget
            .pointer(&format!("/status/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    budget
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        == Some("AlwaysAllow")
        || (int("currentHealthy") >= int("desiredHealthy") && int("desiredHealthy") > 0)
}

/// The 429 `TooManyRequests` of a refused eviction, with upstream's `DisruptionBudget` cause.
pub fn too_many_requests(cause: String, retry_after: i64) -> ApiError {
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: TOO_MANY_REQUESTS.to_string(),
        details: Some(details),
    }
}

/// `createTooManyRequestsError`: the budget's status is behind its spec.
pub fn still_processing(budget_name: &str) -> ApiError {
    too_many_requests(
        format!("The disruption budget {budget_name} is still being processed by the server."),
        10,
    )
}

/// upstream `pdbhelper.UpdateDisruptionAllowedCondition` on a budget's JSON status, at `now`.
pub fn set_disruption_allowed_condition(status: &mut Value, now: &str) {
    let allowed = status
        .get("disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        > 0;
    let (st, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let observed = status.get("observedGeneration").cloned().unwrap_or(json!(0));
    set_condition(status, "DisruptionAllowed", st, reason, "", observed, now);
}

/// `meta.SetStatusCondition`: the transition time moves only when the status changes.
fn set_condition(
    status: &mut Value,
    ty: &str,
    st: &str,
    reason: &str,
    message: &str,
    observed: Value,
    now: &str,
) {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    let conditions = status["conditions"].as_array_mut().expect("just made an array");
    let new = |time: &str| {
        json!({"type": ty, "status": st, "observedGeneration": observed, "lastTransitionTime": time,
               "reason": reason, "message": message})
    };
    match conditions.iter_mut().find(|c| c["type"] == ty) {
        None => conditions.push(new(now)),
        Some(c) => {
            let time = if c["status"] == st {
                c["lastTransitionTime"].as_str().unwrap_or(now).to_string()
            } else {
                now.to_string()
            };
            *c = new(&time);
        }
    }
}

/// `checkAndDecrement`: the budget after spending one disruption on `pod` at `now`, or why not. A dry
/// run checks only (the budget is returned unchanged but for the count).
pub fn check_and_decrement(budget: &Value, pod: &str, now: &str) -> Result<Value, ApiError> {
    let name = meta_str(budget, "name").unwrap_or("");
    let int = |p: &str| budget.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    if int("/status/observedGeneration") < int("/metadata/generation") {
        return Err(still_processing(name));
    }
    let allowed = int("/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden(
            "poddisruptionbudget",
            "policy",
            name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = budget
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_POD_SIZE {
        return Err(ApiError::forbidden(
            "poddisruptionbudget",
            "policy",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                int("/status/desiredHealthy"),
                int("/status/currentHealthy")
            ),
            0,
        ));
    }
    let mut out = budget.clone();
    let status = &mut out["status"];
    status["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_disruption_allowed_condition(status, now);
    }
    if !status.get("disruptedPods").is_some_and(Value::is_object) {
        status["disruptedPods"] = json!({});
    }
    status["disruptedPods"][pod] = json!(now);
    Ok(out)
}

/// The pod with `DisruptionTarget=True` (reason `EvictionByEvictionAPI`), upstream's
/// `podutil.UpdatePodCondition`: the transition time moves only when the status changes.
pub fn with_disruption_target(pod: &Value, now: &str) -> Value {
    let mut out = pod.clone();
    if !out.get("status").is_some_and(Value::is_object) {
        out["status"] = json!({});
    }
    if !out["status"].get("conditions").is_some_and(Value::is_array) {
        out["status"]["conditions"] = json!([]);
    }
    let conditions = out["status"]["conditions"]
        .as_array_mut()
        .expect("just made an array");
    let mut condition = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now, "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"});
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
        Some(c) => {
            if c["status"] == "True" {
                condition["lastTransitionTime"] = c["lastTransitionTime"].clone();
            }
            *c = condition;
        }
        None => conditions.push(condition),
    }
    out
}

fn precondition_conflict(name: &str, what: &str, wanted: &str, have: &str, why: &str) -> ApiError {
    // upstream: NewConflict(schema.GroupResource{Resource: "Pod"}, ...)
    ApiError::conflict(
        "Pod",
        "",
        name,
        &format!(
            "the {what} in the precondition ({wanted}) does not match the {what} in record ({have}). {why}"
        ),
    )
}

impl Registry {
    /// Evict a pod (POST `pods/NAME/eviction`): `opts` are the Eviction's `deleteOptions` with the
    /// request's `dryRun`.
    pub async fn evict(
        &self,
        ns: &str,
        name: &str,
        eviction: &Value,
        opts: DeleteOptions,
    ) -> Result<Evicted, ApiError> {
        if eviction
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            != name
        {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let pods = resources::find("", "v1", "pods").expect("pods are served");
        // Pods whose budget does not matter: delete, retrying a lost race with a changed pod.
        let mut tries = 0;
        let pod = loop {
            let pod = self.get(pods, Some(ns), name)?;
            let pod_value = pod.value();
            if !can_ignore_budget(&pod_value) {
                break pod;
            }
            let mut o = opts.clone();
            if should_enforce_resource_version(&pod_value) && o.resource_version.is_none() {
                o.resource_version = Some(pod.revision.to_string());
            }
            match self.disrupt_and_delete(ns, name, o).await {
                Err(e) if e.code == 409 && opts.resource_version.is_none() && tries < RETRIES => tries += 1,
                Err(e) => return Err(e),
                Ok(()) => return Ok(Evicted::Deleted),
            }
        };
        let budgets_info = resources::find("policy", "v1", "poddisruptionbudgets").expect("PDBs are served");
        let listed = self.list(budgets_info, Some(ns), &Default::default(), None, None);
        let values: Vec<Value> = listed.items.iter().map(|o| o.value()).collect();
        let budgets = matching_budgets(&pod.value(), &values);
        if budgets.len() > 1 {
            return Ok(Evicted::MultipleBudgets);
        }
        let mut only_if_unchanged = false;
        let mut budget_name = String::new();
        if let Some(budget) = budgets.first() {
            budget_name = meta_str(budget, "name").unwrap_or("").to_string();
            if !is_ready(&pod.value()) && unready_pod_may_go(budget) {
                only_if_unchanged = true;
            } else {
                self.spend_disruption(budgets_info, ns, &budget_name, name, opts.dry_run)
                    .await?;
            }
        }
        let mut o = opts.clone();
        if only_if_unchanged {
            o.resource_version = Some(pod.revision.to_string());
        }
        match self.disrupt_and_delete(ns, name, o).await {
            // The pod changed (became ready?) since it was judged: the client retries.
            Err(e) if e.code == 409 && only_if_unchanged && opts.resource_version.is_none() => {
                Err(still_processing(&budget_name))
            }
            Err(e) => Err(e),
            Ok(()) => Ok(Evicted::Deleted),
        }
    }

    /// Check and decrement the budget's disruptions under the storage's writer (a dry run only checks).
    async fn spend_disruption(
        &self,
        info: &'static resources::ResourceInfo,
        ns: &str,
        budget: &str,
        pod: &str,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let now = now_rfc3339();
        let opts = WriteOptions {
            dry_run,
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        self.storage
            .write(&info.key(Some(ns), budget), |current| {
                let Some(cur) = current else {
                    return Err(ApiError::not_found(info.plural, info.group, budget));
                };
                let new = check_and_decrement(&cur.value(), pod, &now)?;
                if dry_run {
                    return Ok(Decision::Keep);
                }
                self.decide_update(info, cur, new, Some("status"), &opts)
            })
            .await?;
        Ok(())
    }

    /// upstream `addConditionAndDeletePod`: `DisruptionTarget` on the pod as it is (honouring the
    /// preconditions), then the delete with `opts` (its resourceVersion precondition moved to the pod
    /// the condition made).
    async fn disrupt_and_delete(
        &self,
        ns: &str,
        name: &str,
        mut opts: DeleteOptions,
    ) -> Result<(), ApiError> {
        let pods = resources::find("", "v1", "pods").expect("pods are served");
        if !opts.dry_run {
            let now = now_rfc3339();
            let write = WriteOptions {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            let written = self
                .storage
                .write(&pods.key(Some(ns), name), |current| {
                    let Some(cur) = current else {
                        return Err(ApiError::not_found("pods", "", name));
                    };
                    let cur_value = cur.value();
                    let uid = meta_str(&cur_value, "uid").unwrap_or("");
                    if let Some(want) = opts.uid.as_deref().filter(|u| !u.is_empty())
                        && want != uid
                    {
                        return Err(precondition_conflict(
                            name,
                            "UID",
                            want,
                            uid,
                            "The object might have been deleted and then recreated",
                        ));
                    }
                    let rv = cur.revision.to_string();
                    if let Some(want) = opts.resource_version.as_deref().filter(|r| !r.is_empty())
                        && want != rv
                    {
                        return Err(precondition_conflict(
                            name,
                            "ResourceVersion",
                            want,
                            &rv,
                            "The object might have been modified",
                        ));
                    }
                    let new = with_disruption_target(&cur.value(), &now);
                    self.decide_update(pods, cur, new, Some("status"), &write)
                })
                .await?;
            if opts.resource_version.is_some() {
                opts.resource_version = Some(written.object.revision.to_string());
            }
        }
        self.delete(pods, Some(ns), name, &opts).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, ready: bool, labels: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": labels},
               "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    fn budget(allowed: i64, current: i64, desired: i64) -> Value {
        json!({"metadata": {"name": "b", "generation": 2},
               "spec": {"selector": {"matchLabels": {"app": "web"}}},
               "status": {"observedGeneration": 2, "disruptionsAllowed": allowed, "currentHealthy": current,
                          "desiredHealthy": desired, "expectedPods": 3}})
    }

    #[test]
    fn terminal_pending_and_deleting_pods_skip_the_budget() {
        for (phase, ignore, enforce) in [
            ("Succeeded", true, false),
            ("Failed", true, false),
            ("Pending", true, true),
            ("Running", false, true),
        ] {
            let p = pod(phase, true, json!({}));
            assert_eq!(can_ignore_budget(&p), ignore, "{phase}");
            assert_eq!(should_enforce_resource_version(&p), enforce, "{phase}");
        }
        let mut deleting = pod("Running", true, json!({}));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(can_ignore_budget(&deleting));
        assert!(!should_enforce_resource_version(&deleting));
    }

    #[test]
    fn budgets_match_by_selector_and_an_empty_selector_matches_nothing() {
        let web = pod("Running", true, json!({"app": "web"}));
        let mut empty = budget(1, 3, 2);
        empty["spec"]["selector"] = json!({});
        let mut other = budget(1, 3, 2);
        other["spec"]["selector"] = json!({"matchLabels": {"app": "db"}});
        let mut exprs = budget(1, 3, 2);
        exprs["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]});
        let all = vec![budget(1, 3, 2), empty, other, exprs];
        assert_eq!(matching_budgets(&web, &all).len(), 2);
    }

    #[test]
    fn a_budget_without_disruptions_refuses_with_429_and_its_numbers() {
        let e = check_and_decrement(&budget(0, 2, 2), "p", "2026-01-01T00:00:00Z").unwrap_err();
        assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
        assert_eq!(e.message, TOO_MANY_REQUESTS);
        assert_eq!(
            e.details.unwrap(),
            json!({"causes": [{"reason": "DisruptionBudget",
                               "message": "The disruption budget b needs 2 healthy pods and has 2 currently"}]})
        );
        let mut behind = budget(1, 3, 2);
        behind["metadata"]["generation"] = json!(3);
        let e = check_and_decrement(&behind, "p", "t").unwrap_err();
        assert_eq!(e.code, 429);
        assert_eq!(e.details.as_ref().unwrap()["retryAfterSeconds"], json!(10));
        assert_eq!(
            e.details.unwrap()["causes"][0]["message"],
            json!("The disruption budget b is still being processed by the server.")
        );
        let e = check_and_decrement(&budget(-1, 3, 2), "p", "t").unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "poddisruptionbudget.policy \"b\" is forbidden: pdb disruptions allowed is negative"
        );
    }

    #[test]
    fn spending_a_disruption_records_the_pod_and_the_condition_at_zero() {
        let now = "2026-01-01T00:00:00Z";
        let after = check_and_decrement(&budget(2, 3, 1), "p1", now).unwrap();
        assert_eq!(after["status"]["disruptionsAllowed"], json!(1));
        assert_eq!(after["status"]["disruptedPods"], json!({"p1": now}));
        assert!(after["status"].get("conditions").is_none());
        let last = check_and_decrement(&after, "p2", now).unwrap();
        assert_eq!(last["status"]["disruptionsAllowed"], json!(0));
        assert_eq!(last["status"]["disruptedPods"], json!({"p1": now, "p2": now}));
        let c = &last["status"]["conditions"][0];
        assert_eq!(
            (&c["type"], &c["status"], &c["reason"], &c["observedGeneration"]),
            (
                &json!("DisruptionAllowed"),
                &json!("False"),
                &json!("InsufficientPods"),
                &json!(2)
            )
        );
    }

    #[test]
    fn an_unready_pod_goes_free_when_the_budget_is_healthy_or_always_allows() {
        assert!(unready_pod_may_go(&budget(0, 2, 2)));
        assert!(!unready_pod_may_go(&budget(0, 1, 2)));
        assert!(
            !unready_pod_may_go(&budget(0, 0, 0)),
            "desiredHealthy 0 is not a healthy budget"
        );
        let mut always = budget(0, 0, 2);
        always["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert!(unready_pod_may_go(&always));
    }

    #[test]
    fn the_disruption_target_condition_keeps_its_transition_time() {
        let p = pod("Running", true, json!({}));
        let once = with_disruption_target(&p, "t1");
        let c = &once["status"]["conditions"][1];
        assert_eq!(
            (&c["type"], &c["reason"]),
            (&json!("DisruptionTarget"), &json!("EvictionByEvictionAPI"))
        );
        let twice = with_disruption_target(&once, "t2");
        assert_eq!(
            twice["status"]["conditions"][1]["lastTransitionTime"],
            json!("t1")
        );
        assert_eq!(twice["status"]["conditions"].as_array().unwrap().len(), 2);
    }
}
