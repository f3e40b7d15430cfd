//! The pod-failure backoff (`backoff_utils.go`): per Job, how many pods failed since the last success and
//! when the last of them finished; new pods wait `10 s × 2^(failures−1)`, at most 10 minutes, from then.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::podutil;

/// upstream `DefaultJobPodFailureBackOff`.
pub const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// upstream `MaxJobPodFailureBackOff` (10 minutes in code since 1.28; the docs' "6 minutes" is older).
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// What the controller remembers about one Job's failures (upstream `backoffRecord`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Pods failed since the last success.
    pub failures_after_last_success: i32,
    /// When the most recent of them finished.
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// `newBackoffRecord`: the stored record moved on by the newly finished pods.
    pub fn advance(self, new_succeeded: &[&Pod], new_failed: &[&Pod]) -> BackoffRecord {
        let mut failed: Vec<Timestamp> = new_failed.iter().map(|p| finish_time(p)).collect();
        failed.sort();
        let last_success = new_succeeded.iter().map(|p| finish_time(p)).max();
        match last_success {
            None if failed.is_empty() => self,
            None => BackoffRecord {
                failures_after_last_success: self.failures_after_last_success + failed.len() as i32,
                last_failure_time: failed.last().copied(),
            },
            Some(success) => {
                let after: Vec<&Timestamp> = failed.iter().filter(|t| **t > success).collect();
                BackoffRecord {
                    failures_after_last_success: after.len() as i32,
                    last_failure_time: after.last().map(|t| **t),
                }
            }
        }
    }

    /// `getRemainingTime`: how long pod creation still waits at `now` (zero when it need not).
    pub fn remaining(&self, now: Timestamp) -> Duration {
        remaining_for(self.failures_after_last_success, self.last_failure_time, now)
    }
}

/// `getRemainingTimeForFailuresCount`.
pub fn remaining_for(failures: i32, last_failure: Option<Timestamp>, now: Timestamp) -> Duration {
    let Some(last) = last_failure.filter(|_| failures > 0) else {
        return Duration::ZERO;
    };
    let mut wait = POD_FAILURE_BACKOFF;
    for _ in 1..failures {
        wait *= 2;
        if wait >= MAX_POD_FAILURE_BACKOFF {
            wait = MAX_POD_FAILURE_BACKOFF;
            break;
        }
    }
    let elapsed = now.duration_since(last);
    if elapsed.is_negative() {
        return wait;
    }
    wait.saturating_sub(elapsed.unsigned_abs())
}

/// upstream `latestFinishTime`: the latest finish after `prev`, or `None` as soon as one container has not
/// terminated (with a non-zero time).
fn latest_finish(prev: Option<Timestamp>, statuses: &[&ContainerStatus]) -> Option<Timestamp> {
    let mut latest = prev;
    for s in statuses {
        let t = s.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref()?.0;
        if latest.is_none_or(|l| l < t) {
            latest = Some(t);
        }
    }
    latest
}

/// `getFinishedTime`: the latest container finish (only if every regular container and sidecar has
/// terminated), else the Ready=False transition, else deletionTimestamp − grace, else creation.
pub fn finish_time(pod: &Pod) -> Timestamp {
    let status = pod.status.as_ref();
    let regular: Vec<&ContainerStatus> = status
        .and_then(|s| s.container_statuses.as_ref())
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let sidecars: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|v| {
            v.iter()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| c.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let sidecar_statuses: Vec<&ContainerStatus> = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .map(|v| v.iter().filter(|c| sidecars.contains(&c.name.as_str())).collect())
        .unwrap_or_default();
    let from_containers = latest_finish(latest_finish(None, &regular), &sidecar_statuses);
    if let Some(t) = from_containers {
        return t;
    }
    if let Some(c) = podutil::condition(pod, "Ready")
        && c.status == "False"
        && let Some(t) = c.last_transition_time.as_ref()
    {
        return t.0;
    }
    if let Some(d) = pod.metadata.deletion_timestamp.as_ref() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return d.0.checked_sub(SignedDuration::from_secs(grace)).unwrap_or(d.0);
    }
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn finished(at: i64) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": t(-100).to_string()},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 1, "finishedAt": t(at).to_string()}}}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn waits_double_from_ten_seconds_up_to_ten_minutes() {
        let cases = [
            // (failures, seconds since the last failure, expected wait left)
            (0, 0, 0),
            (1, 0, 10),
            (1, 4, 6),
            (1, 11, 0),
            (2, 0, 20),
            (3, 0, 40),
            (5, 10, 150),
            (7, 0, 600),
            (30, 0, 600),
        ];
        for (failures, since, want) in cases {
            let got = remaining_for(failures, Some(t(0)), t(since));
            assert_eq!(
                got,
                Duration::from_secs(want),
                "{failures} failures, {since}s ago"
            );
        }
        assert_eq!(remaining_for(3, None, t(0)), Duration::ZERO);
    }

    #[test]
    fn failures_count_since_the_last_success() {
        let r = BackoffRecord::default();
        let f1 = finished(10);
        let f2 = finished(20);
        let r = r.advance(&[], &[&f2, &f1]);
        assert_eq!(r.failures_after_last_success, 2);
        assert_eq!(r.last_failure_time, Some(t(20)));
        let s = finished(15);
        let f3 = finished(30);
        let r2 = r.advance(&[&s], &[&f1, &f3]);
        assert_eq!(
            r2.failures_after_last_success, 1,
            "only the failure after the success counts"
        );
        assert_eq!(r2.last_failure_time, Some(t(30)));
        let r3 = r.advance(&[&s], &[]);
        assert_eq!(r3, BackoffRecord::default());
        assert_eq!(r.advance(&[], &[]), r);
    }

    #[test]
    fn finish_time_falls_back_in_upstreams_order() {
        assert_eq!(finish_time(&finished(42)), t(42));
        let running: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": t(-100).to_string()},
            "status": {"phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": t(7).to_string()}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                                       "state": {"running": {}}}]}
        }))
        .unwrap();
        assert_eq!(
            finish_time(&running),
            t(7),
            "a container still running: Ready=False time"
        );
        let deleted: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": t(-100).to_string(),
                         "deletionTimestamp": t(30).to_string(), "deletionGracePeriodSeconds": 30}
        }))
        .unwrap();
        assert_eq!(finish_time(&deleted), t(0));
        let bare: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "creationTimestamp": t(-100).to_string()}
        }))
        .unwrap();
        assert_eq!(finish_time(&bare), t(-100));
    }
}
