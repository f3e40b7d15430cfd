//! Pod helpers every controller uses (`pkg/api/v1/pod/util.go`, `controller.IsPodActive`).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition};

/// The pod's condition of `type_`.
pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The pod's phase ("" when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// Ready: condition `Ready=True`.
pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the pod last became Ready.
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Available: ready, and for at least `min_ready_seconds` (strictly before `now`, as upstream).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    match ready_since(pod) {
        Some(t) => t + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now,
        None => false,
    }
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Active: not terminal and not being deleted (`controller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Terminating: being deleted and not yet terminal.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !is_terminal(pod)
}

/// The node the pod is bound to ("" when none).
pub fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn pod(phase: &str, ready: Option<(&str, Timestamp)>) -> Pod {
        let mut v = json!({"metadata": {"name": "p"}, "status": {"phase": phase}});
        if let Some((s, t)) = ready {
            v["status"]["conditions"] =
                json!([{"type": "Ready", "status": s, "lastTransitionTime": Time(t)}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn availability_needs_min_ready_seconds_strictly_passed() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let p = pod("Running", Some(("True", t0)));
        assert!(is_available(&p, 0, t0));
        assert!(!is_available(&p, 5, t0 + SignedDuration::from_secs(5)));
        assert!(is_available(&p, 5, t0 + SignedDuration::from_secs(6)));
        assert!(!is_available(&pod("Running", Some(("False", t0))), 0, t0));
        assert!(!is_available(&pod("Running", None), 0, t0));
    }

    #[test]
    fn activity_and_terminal_phases() {
        assert!(is_active(&pod("Running", None)));
        assert!(is_active(&pod("Pending", None)));
        assert!(!is_active(&pod("Succeeded", None)));
        assert!(!is_active(&pod("Failed", None)));
        let mut p = pod("Running", None);
        p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(!is_active(&p));
        assert!(is_terminating(&p));
    }
}
