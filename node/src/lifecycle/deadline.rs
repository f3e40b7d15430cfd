//! `activeDeadlineSeconds` (upstream `pkg/kubelet/active_deadline.go`): a pod that has been active on the
//! node longer than its deadline, counted from `status.startTime`, is failed with reason
//! `DeadlineExceeded`; its containers are killed and it is not restarted.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

/// upstream `reason`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// upstream `message`.
pub const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// When the pod's deadline passes: `startTime + activeDeadlineSeconds`; `None` without either.
pub fn deadline(pod: &Pod, start_time: Option<Timestamp>) -> Option<Timestamp> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    start_time?.checked_add(SignedDuration::from_secs(seconds)).ok()
}

/// Upstream `pastActiveDeadline`: `now - startTime >= activeDeadlineSeconds`.
pub fn past_deadline(pod: &Pod, start_time: Option<Timestamp>, now: Timestamp) -> bool {
    deadline(pod, start_time).is_some_and(|d| now >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(seconds: Option<i64>) -> Pod {
        let mut p = serde_json::json!({"spec": {"containers": []}});
        if let Some(s) = seconds {
            p["spec"]["activeDeadlineSeconds"] = s.into();
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn the_deadline_counts_from_the_start_time() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let cases = [
            (Some(5), Some(t(100)), t(104), false),
            (Some(5), Some(t(100)), t(105), true),
            (Some(5), None, t(1000), false),
            (None, Some(t(100)), t(1000), false),
        ];
        for (seconds, start, now, want) in cases {
            assert_eq!(
                past_deadline(&pod(seconds), start, now),
                want,
                "{seconds:?} {start:?} {now}"
            );
        }
        assert_eq!(deadline(&pod(Some(5)), Some(t(100))), Some(t(105)));
    }
}
