//! `progress.go` and `checkPausedConditions`: the Progressing condition during a rollout, the
//! ReplicaFailure copy, and when to look again for a progress deadline.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};

use super::sync::calculate_status;
use super::util::{self, condition, new_condition, remove_condition, set_condition};
use crate::replicaset::{REPLICA_FAILURE, status};

/// What `syncRolloutStatus` decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// The status to write, when it changed.
    pub write: Option<DeploymentStatus>,
    /// When nothing changed: look again after this long for the progress deadline.
    pub requeue: Option<Duration>,
}

fn rs_name(new: Option<&Arc<ReplicaSet>>) -> Option<String> {
    new.and_then(|rs| rs.metadata.name.clone())
}

/// `syncRolloutStatus`.
pub fn rollout_status(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new: Option<&Arc<ReplicaSet>>,
    now: Timestamp,
) -> Rollout {
    let mut st = calculate_status(all, new, d, now);
    if util::progress_deadline(d).is_none() {
        remove_condition(&mut st, "Progressing");
    }
    let old = util::dstatus(d);
    let current = condition(&old, "Progressing").cloned();
    let is_complete = st.replicas == st.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(util::NEW_RS_AVAILABLE);
    let name = d.metadata.name.clone().unwrap_or_default();
    if util::progress_deadline(d).is_some() && !is_complete {
        if util::complete(d, &st) {
            let msg = match rs_name(new) {
                Some(rs) => format!("ReplicaSet {rs:?} has successfully progressed."),
                None => format!("Deployment {name:?} has successfully progressed."),
            };
            set_condition(
                &mut st,
                new_condition("Progressing", "True", util::NEW_RS_AVAILABLE, msg, now),
            );
        } else if util::progressing(d, &st) {
            let msg = match rs_name(new) {
                Some(rs) => format!("ReplicaSet {rs:?} is progressing."),
                None => format!("Deployment {name:?} is progressing."),
            };
            // Progress always refreshes lastUpdateTime, even with the same reason.
            let mut c = new_condition("Progressing", "True", util::REPLICA_SET_UPDATED, msg, now);
            if let Some(cur) = &current {
                if cur.status == "True" {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove_condition(&mut st, "Progressing");
            }
            set_condition(&mut st, c);
        } else if util::timed_out(d, &st, now) {
            let msg = match rs_name(new) {
                Some(rs) => format!("ReplicaSet {rs:?} has timed out progressing."),
                None => format!("Deployment {name:?} has timed out progressing."),
            };
            set_condition(
                &mut st,
                new_condition("Progressing", "False", util::TIMED_OUT, msg, now),
            );
        }
    }
    match replica_failure(all, new) {
        Some(c) => set_condition(&mut st, c),
        None => remove_condition(&mut st, REPLICA_FAILURE),
    }
    if st == old {
        return Rollout {
            write: None,
            requeue: requeue_after(d, &st, now),
        };
    }
    Rollout {
        write: Some(st),
        requeue: None,
    }
}

/// `getReplicaFailures`: the new ReplicaSet's ReplicaFailure condition, else any ReplicaSet's (the first).
fn replica_failure(
    all: &[Arc<ReplicaSet>],
    new: Option<&Arc<ReplicaSet>>,
) -> Option<k8s_openapi::api::apps::v1::DeploymentCondition> {
    let of = |rs: &ReplicaSet| {
        status(rs)
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == REPLICA_FAILURE)
    };
    new.and_then(|rs| of(rs))
        .or_else(|| all.iter().find_map(|rs| of(rs)))
        .map(|c| util::from_rs_condition(&c))
}

/// `requeueStuckDeployment`: with a deadline and a Progressing condition, not complete and not timed out,
/// look again at `lastUpdateTime + deadline` (plus a second for clock skew; at once, in a second, when that
/// is already near).
pub fn requeue_after(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> Option<Duration> {
    let deadline = util::progress_deadline(d)?;
    let old = util::dstatus(d);
    let current = condition(&old, "Progressing")?;
    if util::complete(d, new) || current.reason.as_deref() == Some(util::TIMED_OUT) {
        return None;
    }
    let from = current.last_update_time.as_ref()?.0;
    let after = (from + SignedDuration::from_secs(i64::from(deadline))).duration_since(now);
    let after = Duration::try_from(after).unwrap_or(Duration::ZERO);
    Some(after + Duration::from_secs(1))
}

/// `checkPausedConditions`: the status to write when a Deployment with a deadline was paused
/// (`Progressing=Unknown DeploymentPaused`) or resumed (`DeploymentResumed`); never over
/// ProgressDeadlineExceeded.
pub fn paused_conditions(d: &Deployment, now: Timestamp) -> Option<DeploymentStatus> {
    util::progress_deadline(d)?;
    let mut st = util::dstatus(d);
    let reason = condition(&st, "Progressing").and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(util::TIMED_OUT) {
        return None;
    }
    let paused_cond = reason.as_deref() == Some(util::PAUSED);
    let c = if util::paused(d) && !paused_cond {
        new_condition(
            "Progressing",
            "Unknown",
            util::PAUSED,
            "Deployment is paused".into(),
            now,
        )
    } else if !util::paused(d) && paused_cond {
        new_condition(
            "Progressing",
            "Unknown",
            util::RESUMED,
            "Deployment is resumed".into(),
            now,
        )
    } else {
        return None;
    };
    set_condition(&mut st, c);
    Some(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deployment, rs};
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn with_status(mut d: Deployment, st: DeploymentStatus) -> Deployment {
        d.status = Some(st);
        d
    }

    #[test]
    fn a_complete_rollout_is_marked_new_replica_set_available() {
        let d = deployment(json!({}));
        let new = Arc::new(rs(
            "web-1",
            3,
            json!({"status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3}}),
        ));
        let r = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(0));
        let st = r.write.unwrap();
        let c = condition(&st, "Progressing").unwrap();
        assert_eq!(c.reason.as_deref(), Some(util::NEW_RS_AVAILABLE));
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-1\" has successfully progressed.")
        );
        let kinds: Vec<_> = st
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(kinds, ["Available", "Progressing"]);
        // Written back, a second pass changes nothing and does not requeue (complete).
        let d2 = with_status(d, st);
        assert_eq!(
            rollout_status(&d2, std::slice::from_ref(&new), Some(&new), t(5)),
            Rollout {
                write: None,
                requeue: None
            }
        );
    }

    #[test]
    fn progress_refreshes_last_update_and_a_stall_times_out_after_the_deadline() {
        let d = deployment(json!({"spec": {"progressDeadlineSeconds": 10}}));
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            new_condition("Progressing", "True", util::NEW_REPLICA_SET, "m".into(), t(0)),
        );
        st.observed_generation = Some(1);
        let d = with_status(d, st);
        let new = Arc::new(rs("web-1", 1, json!({"status": {"replicas": 1}})));
        // The first pod appears: updated went up → ReplicaSetUpdated at t(2).
        let r = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(2));
        let st = r.write.unwrap();
        let c = condition(&st, "Progressing").unwrap().clone();
        assert_eq!(c.reason.as_deref(), Some(util::REPLICA_SET_UPDATED));
        assert_eq!(c.last_update_time.as_ref().unwrap().0, t(2));
        assert_eq!(
            c.last_transition_time.as_ref().unwrap().0,
            t(0),
            "was True already"
        );
        let d = with_status(d, st);
        // No progress: requeued for the deadline (12 s from the update, +1 s).
        let r = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(5));
        assert_eq!(r.write, None);
        assert_eq!(r.requeue, Some(Duration::from_secs(8)));
        // Past the deadline: ProgressDeadlineExceeded.
        let r = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(13));
        let st = r.write.unwrap();
        let c = condition(&st, "Progressing").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(util::TIMED_OUT))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-1\" has timed out progressing.")
        );
        let d = with_status(d, st);
        let r = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(20));
        assert_eq!(
            r,
            Rollout {
                write: None,
                requeue: None
            },
            "timed out: no more requeues"
        );
    }

    #[test]
    fn no_deadline_means_no_progressing_condition() {
        let d = deployment(json!({"spec": {"progressDeadlineSeconds": i32::MAX}}));
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            new_condition("Progressing", "True", util::NEW_REPLICA_SET, "m".into(), t(0)),
        );
        let d = with_status(d, st);
        let new = Arc::new(rs(
            "web-1",
            3,
            json!({"status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        let st = rollout_status(&d, std::slice::from_ref(&new), Some(&new), t(1))
            .write
            .unwrap();
        assert!(condition(&st, "Progressing").is_none());
    }

    #[test]
    fn replica_failure_is_copied_from_the_new_replica_set_first() {
        let d = deployment(json!({}));
        let fail = |msg: &str| json!({"status": {"replicas": 0, "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let old = Arc::new(rs("old", 1, fail("old")));
        let new = Arc::new(rs("new", 1, fail("new")));
        let st = rollout_status(&d, &[old.clone(), new.clone()], Some(&new), t(0))
            .write
            .unwrap();
        assert_eq!(
            condition(&st, "ReplicaFailure").unwrap().message.as_deref(),
            Some("new")
        );
        let healthy = Arc::new(rs("new", 1, json!({})));
        let st = rollout_status(&d, &[old.clone(), healthy.clone()], Some(&healthy), t(0))
            .write
            .unwrap();
        assert_eq!(
            condition(&st, "ReplicaFailure").unwrap().message.as_deref(),
            Some("old")
        );
        let d2 = with_status(d, st);
        let st = rollout_status(&d2, std::slice::from_ref(&healthy), Some(&healthy), t(0))
            .write
            .unwrap();
        assert!(condition(&st, "ReplicaFailure").is_none());
    }

    #[test]
    fn pausing_and_resuming_set_unknown_conditions_but_never_over_a_timeout() {
        let paused = deployment(json!({"spec": {"paused": true}}));
        let st = paused_conditions(&paused, t(0)).unwrap();
        let c = condition(&st, "Progressing").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("Unknown", Some(util::PAUSED))
        );
        assert_eq!(c.message.as_deref(), Some("Deployment is paused"));
        let still = with_status(paused.clone(), st.clone());
        assert!(paused_conditions(&still, t(1)).is_none());
        let mut resumed = still.clone();
        resumed.spec.as_mut().unwrap().paused = Some(false);
        let st2 = paused_conditions(&resumed, t(2)).unwrap();
        assert_eq!(
            condition(&st2, "Progressing").unwrap().reason.as_deref(),
            Some(util::RESUMED)
        );
        let mut timed = DeploymentStatus::default();
        set_condition(
            &mut timed,
            new_condition("Progressing", "False", util::TIMED_OUT, "m".into(), t(0)),
        );
        assert!(paused_conditions(&with_status(paused, timed), t(1)).is_none());
    }
}
