//! `spec.podFailurePolicy` (`pod_failure_policy.go`): the first rule matching a failed pod decides whether the
//! Job fails at once (`FailJob`), the failure is not counted (`Ignore`), or counted as usual (`Count`).

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

/// What the policy says about one failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `FailJob`: the message of the Job's FailureTarget condition.
    pub fail_job: Option<String>,
    /// Whether the failure counts against `backoffLimit` (false for `Ignore`).
    pub count: bool,
    /// The matching rule's action, if a rule matched.
    pub action: Option<String>,
}

/// `matchPodFailurePolicy` for a failed pod; no policy or no matching rule counts the failure.
pub fn evaluate(policy: Option<&PodFailurePolicy>, pod: &Pod) -> Verdict {
    let counted = Verdict {
        fail_job: None,
        count: true,
        action: None,
    };
    let Some(policy) = policy else {
        return counted;
    };
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched: Option<String> = if let Some(req) = rule.on_exit_codes.as_ref() {
            match_exit_codes(pod, req).map(|c| {
                let code = c
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .map_or(0, |t| t.exit_code);
                format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {index}",
                    c.name, rule.action
                )
            })
        } else if let Some(patterns) = rule.on_pod_conditions.as_ref() {
            match_conditions(pod, patterns).map(|c| {
                format!(
                    "Pod {ns}/{name} has condition {} matching {} rule at index {index}",
                    c.type_, rule.action
                )
            })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        let action = Some(rule.action.clone());
        return match rule.action.as_str() {
            "Ignore" => Verdict {
                fail_job: None,
                count: false,
                action,
            },
            "FailJob" => Verdict {
                fail_job: Some(message),
                count: true,
                action,
            },
            // Count, and FailIndex (backoffLimitPerIndex, not implemented: counted as usual).
            _ => Verdict {
                fail_job: None,
                count: true,
                action,
            },
        };
    }
    counted
}

fn match_exit_codes<'a>(
    pod: &'a Pod,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    let lists = [
        status.container_statuses.as_deref(),
        status.init_container_statuses.as_deref(),
    ];
    lists.into_iter().flatten().flatten().find(|c| {
        let Some(t) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
            return false;
        };
        if req.container_name.as_ref().is_some_and(|n| *n != c.name) || t.exit_code == 0 {
            return false;
        }
        match req.operator.as_str() {
            "In" => req.values.contains(&t.exit_code),
            "NotIn" => !req.values.contains(&t.exit_code),
            _ => false,
        }
    })
}

fn match_conditions<'a>(
    pod: &'a Pod,
    patterns: &[k8s_openapi::api::batch::v1::PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a PodCondition> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| {
        patterns.iter().any(|p| {
            // Defaulting sets an empty status to "True".
            let want = if p.status.is_empty() {
                "True"
            } else {
                p.status.as_str()
            };
            p.type_ == c.type_ && want == c.status
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions,
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": exit}}}]}
        }))
        .unwrap()
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let p = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
        ]));
        let fail = evaluate(Some(&p), &failed_pod(42, json!([])));
        assert_eq!(
            fail.fail_job.as_deref(),
            Some("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1")
        );
        assert!(fail.count);
        let ignored = evaluate(
            Some(&p),
            &failed_pod(42, json!([{"type": "DisruptionTarget", "status": "True"}])),
        );
        assert_eq!((ignored.fail_job, ignored.count), (None, false));
        let counted = evaluate(Some(&p), &failed_pod(3, json!([])));
        assert_eq!(counted.action.as_deref(), Some("Count"));
        let unmatched = evaluate(Some(&p), &failed_pod(1, json!([])));
        assert_eq!(
            unmatched,
            Verdict {
                fail_job: None,
                count: true,
                action: None
            }
        );
        assert!(evaluate(None, &failed_pod(42, json!([]))).count);
    }

    #[test]
    fn exit_code_zero_never_matches_and_conditions_say_their_type() {
        let p = policy(json!([{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [1]}}]));
        assert_eq!(evaluate(Some(&p), &failed_pod(0, json!([]))).fail_job, None);
        let p = policy(
            json!([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]),
        );
        let v = evaluate(
            Some(&p),
            &failed_pod(0, json!([{"type": "DisruptionTarget", "status": "True"}])),
        );
        assert_eq!(
            v.fail_job.as_deref(),
            Some("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0")
        );
    }
}
