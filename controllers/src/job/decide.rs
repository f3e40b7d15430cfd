//! The Job controller's decisions, as pure functions of the Job, its pods and `now` (upstream
//! `job_controller.go`): which finished pods are new, the finished condition, how many pods should run,
//! which pods to delete, and what the finalizer-tracking pass must write.

use std::collections::HashSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::failure_policy;
use super::indexed::{self, Intervals};
use super::{has_tracking_finalizer, is_indexed};
use crate::podutil;

/// upstream `MaxUncountedPods`: UIDs in `status.uncountedTerminatedPods` per pass.
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// upstream `MaxPodCreateDeletePerSync`.
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;

/// `spec.parallelism` (defaulted to 1).
pub fn parallelism(job: &Job) -> i32 {
    spec(job).and_then(|s| s.parallelism).unwrap_or(1)
}

/// `spec.backoffLimit` (defaulted to 6).
pub fn backoff_limit(job: &Job) -> i32 {
    spec(job).and_then(|s| s.backoff_limit).unwrap_or(6)
}

/// `spec.completions` (nil: a work-queue Job).
pub fn completions(job: &Job) -> Option<i32> {
    spec(job).and_then(|s| s.completions)
}

fn spec(job: &Job) -> Option<&k8s_openapi::api::batch::v1::JobSpec> {
    job.spec.as_ref()
}

/// `spec.suspend`.
pub fn suspended(job: &Job) -> bool {
    spec(job).and_then(|s| s.suspend).unwrap_or(false)
}

/// `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, or any podFailurePolicy.
pub fn only_replace_failed(job: &Job) -> bool {
    let s = spec(job);
    s.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || s.is_some_and(|s| s.pod_failure_policy.is_some())
}

/// `isPodFailed`: phase Failed, or (unless only failed pods are replaced) deleted and not Succeeded.
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = podutil::phase(pod);
    if phase == "Failed" {
        return true;
    }
    if only_replace_failed(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded"
}

/// The condition of `type_` with status True.
pub fn true_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    conditions(job)
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

fn conditions(job: &Job) -> &[JobCondition] {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
}

/// A condition as upstream's `newCondition` makes it (probe and transition time `now`).
pub fn new_condition(type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: (!reason.is_empty()).then(|| reason.to_string()),
        message: (!message.is_empty()).then(|| message.to_string()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `ensureJobConditionStatus`: update the condition of `type_` if it differs, or add it unless the status
/// is False (nothing → False means nothing). Returns whether the list changed.
pub fn ensure_condition(
    list: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = list.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status
            || c.reason.as_deref().unwrap_or("") != reason
            || c.message.as_deref().unwrap_or("") != message
        {
            *c = new_condition(type_, status, reason, message, now);
            return true;
        }
        return false;
    }
    if status != "False" {
        list.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// The UIDs in `status.uncountedTerminatedPods`.
#[derive(Debug, Default, Clone)]
pub struct Uncounted {
    /// Succeeded, not yet in `status.succeeded`.
    pub succeeded: HashSet<String>,
    /// Failed, not yet in `status.failed`.
    pub failed: HashSet<String>,
}

impl Uncounted {
    /// From the Job's status.
    pub fn of(status: &JobStatus) -> Uncounted {
        let u = status.uncounted_terminated_pods.as_ref();
        let set = |v: Option<&Vec<String>>| v.map(|v| v.iter().cloned().collect()).unwrap_or_default();
        Uncounted {
            succeeded: set(u.and_then(|u| u.succeeded.as_ref())),
            failed: set(u.and_then(|u| u.failed.as_ref())),
        }
    }
}

fn uid(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or("")
}

/// `getNewFinishedPods`: finished pods still carrying the finalizer, not yet uncounted and not expected to
/// lose it (Indexed: with a valid index only).
pub fn new_finished_pods<'a>(
    job: &Job,
    pods: &[&'a Pod],
    uncounted: &Uncounted,
    expected_rm: &HashSet<String>,
) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let completions = completions(job).unwrap_or(0);
    let valid = |p: &&Pod, set: &HashSet<String>| {
        has_tracking_finalizer(p)
            && !set.contains(uid(p))
            && !expected_rm.contains(uid(p))
            && (!is_indexed(job) || indexed::valid_index(p, completions).is_some())
    };
    let succeeded = pods
        .iter()
        .filter(|p| valid(p, &uncounted.succeeded) && podutil::phase(p) == "Succeeded")
        .copied()
        .collect();
    let failed = pods
        .iter()
        .filter(|p| valid(p, &uncounted.failed) && is_pod_failed(p, job))
        .copied()
        .collect();
    (succeeded, failed)
}

/// `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure`, the restarts of running and pending pods
/// reach the limit (any restart, for a limit of 0).
pub fn past_backoff_limit_on_failure(job: &Job, pods: &[&Pod]) -> bool {
    let policy = spec(job)
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(podutil::phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();
    let limit = backoff_limit(job);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

/// The outcome of [`finished_condition`].
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The interim (or carried-over) condition: SuccessCriteriaMet or FailureTarget (or Failed when an
    /// existing FailureTarget is carried on).
    pub condition: Option<JobCondition>,
    /// Sync again after this (the activeDeadlineSeconds deadline).
    pub requeue: Option<Duration>,
}

/// Step 9 of `syncJob`: the finished condition, first match wins. `failed` counts the failures (new,
/// uncounted and recorded); `start` is the (possibly just set) startTime.
pub fn finished_condition(
    job: &Job,
    pods: &[&Pod],
    failed: i32,
    start: Option<Timestamp>,
    now: Timestamp,
) -> Finish {
    if let Some(c) = true_condition(job, "SuccessCriteriaMet") {
        return Finish {
            condition: Some(c.clone()),
            requeue: None,
        };
    }
    if let Some(c) = true_condition(job, "FailureTarget") {
        return Finish {
            condition: Some(new_condition(
                "Failed",
                "True",
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or(""),
                now,
            )),
            requeue: None,
        };
    }
    let policy = spec(job).and_then(|s| s.pod_failure_policy.as_ref());
    if policy.is_some() {
        for p in pods.iter().filter(|p| is_pod_failed(p, job)) {
            if let Some(msg) = failure_policy::evaluate(policy, p).fail_job {
                return Finish {
                    condition: Some(new_condition(
                        "FailureTarget",
                        "True",
                        "PodFailurePolicy",
                        &msg,
                        now,
                    )),
                    requeue: None,
                };
            }
        }
    }
    if failed > backoff_limit(job) || past_backoff_limit_on_failure(job, pods) {
        return Finish {
            condition: Some(new_condition(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            )),
            requeue: None,
        };
    }
    let deadline = spec(job).and_then(|s| s.active_deadline_seconds);
    if let (Some(secs), Some(start)) = (deadline, start)
        && !suspended(job)
    {
        let ends = start
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap_or(Timestamp::MAX);
        if now >= ends {
            return Finish {
                condition: Some(new_condition(
                    "FailureTarget",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                )),
                requeue: None,
            };
        }
        return Finish {
            condition: None,
            requeue: Some(now.duration_until(ends).unsigned_abs()),
        };
    }
    Finish {
        condition: None,
        requeue: None,
    }
}

/// The desired number of active pods (manageJob's `wantActive`).
pub fn want_active(job: &Job, succeeded: i32, active: i32) -> i32 {
    match completions(job) {
        None if succeeded > 0 => active,
        None => parallelism(job),
        Some(c) => (c - succeeded).min(parallelism(job)).max(0),
    }
}

/// Whether the Job has succeeded (no finished condition yet, manageJob done).
pub fn is_complete(job: &Job, succeeded: i32, active: i32) -> bool {
    match completions(job) {
        None => succeeded > 0 && active == 0,
        Some(c) => succeeded >= c && active == 0,
    }
}

/// The success condition (`newSuccessCondition`, 1.32 wording).
pub fn success_condition(now: Timestamp) -> JobCondition {
    new_condition(
        "SuccessCriteriaMet",
        "True",
        "CompletionsReached",
        "Reached expected number of succeeded pods",
        now,
    )
}

const PHASE_ORDINAL: [(&str, u8); 3] = [("Pending", 0), ("Unknown", 1), ("Running", 2)];

fn phase_ordinal(p: &Pod) -> u8 {
    let phase = podutil::phase(p);
    PHASE_ORDINAL
        .iter()
        .find(|(n, _)| *n == phase)
        .map_or(0, |(_, o)| *o)
}

fn max_restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|v| v.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

/// `afterOrZero`: a zero time counts as the newest.
fn after_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    match (a, b) {
        (None, _) | (_, None) => a.is_none(),
        (Some(a), Some(b)) => a > b,
    }
}

/// `controller.ActivePods` order, first to delete first: unassigned, Pending < Unknown < Running, not
/// ready, ready for less time, more restarts, newer.
pub fn deletion_less(a: &Pod, b: &Pod) -> bool {
    let (na, nb) = (podutil::node_name(a), podutil::node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return na.is_empty();
    }
    if phase_ordinal(a) != phase_ordinal(b) {
        return phase_ordinal(a) < phase_ordinal(b);
    }
    let (ra, rb) = (podutil::is_ready(a), podutil::is_ready(b));
    if ra != rb {
        return !ra;
    }
    if ra && rb {
        let (ta, tb) = (podutil::ready_since(a), podutil::ready_since(b));
        if ta != tb {
            return after_or_zero(ta, tb);
        }
    }
    if max_restarts(a) != max_restarts(b) {
        return max_restarts(a) > max_restarts(b);
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if created(a) != created(b) {
        return after_or_zero(created(a), created(b));
    }
    false
}

/// Sort pods first-to-delete first.
pub fn sort_for_deletion(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| {
        if deletion_less(a, b) {
            std::cmp::Ordering::Less
        } else if deletion_less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
}

/// `activePodsForRemoval`: at least `rm_at_least` active pods; Indexed Jobs first lose duplicate,
/// out-of-range and index-less pods.
pub fn pods_for_removal<'a>(job: &Job, active: &[&'a Pod], rm_at_least: usize) -> Vec<&'a Pod> {
    let (mut rm, mut left) = if is_indexed(job) {
        indexed::duplicate_index_pods(active, completions(job).unwrap_or(0))
    } else {
        (Vec::new(), active.to_vec())
    };
    if rm.len() < rm_at_least {
        sort_for_deletion(&mut left);
        let more = (rm_at_least - rm.len()).min(left.len());
        rm.extend(left.drain(..more));
    }
    rm
}

/// What manageJob does this pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Manage<'a> {
    /// Nothing to create or delete.
    Nothing,
    /// Delete these (suspended, too many, or duplicate indexes); deletion wins over creation.
    Delete(Vec<&'a Pod>),
    /// Too few, but the pod-failure backoff has this long left.
    Wait(Duration),
    /// Create this many pods (NonIndexed).
    Create(usize),
    /// Create pods for these indexes.
    CreateIndexes(Vec<i32>),
}

/// manageJob's decision. `terminating` counts pods being deleted; `backoff_left` is the remaining
/// pod-failure backoff; `succeeded_indexes` is for Indexed Jobs.
pub fn plan_manage<'a>(
    job: &Job,
    active: &[&'a Pod],
    succeeded: i32,
    terminating: i32,
    backoff_left: Duration,
    succeeded_indexes: &Intervals,
) -> Manage<'a> {
    let n_active = active.len() as i32;
    if suspended(job) {
        let rm = pods_for_removal(job, active, active.len());
        return if rm.is_empty() {
            Manage::Nothing
        } else {
            Manage::Delete(rm)
        };
    }
    let want = want_active(job, succeeded, n_active);
    let rm_at_least = (n_active - want).max(0) as usize;
    let mut rm = pods_for_removal(job, active, rm_at_least);
    rm.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !rm.is_empty() {
        return Manage::Delete(rm);
    }
    let terminating = if only_replace_failed(job) { terminating } else { 0 };
    let diff = want - terminating - n_active;
    if diff <= 0 {
        return Manage::Nothing;
    }
    if !backoff_left.is_zero() {
        return Manage::Wait(backoff_left);
    }
    let diff = (diff as usize).min(MAX_POD_CREATE_DELETE_PER_SYNC);
    if is_indexed(job) {
        let ixs =
            indexed::first_pending_indexes(succeeded_indexes, active, diff, completions(job).unwrap_or(0));
        return if ixs.is_empty() {
            Manage::Nothing
        } else {
            Manage::CreateIndexes(ixs)
        };
    }
    Manage::Create(diff)
}

/// The finalizer-tracking pass's decision (first half of `trackJobStatusAndRemoveFinalizers`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tracking<'a> {
    /// Pods whose finalizer is removed this pass.
    pub remove_finalizer: Vec<&'a Pod>,
    /// UIDs added to `uncountedTerminatedPods.succeeded`.
    pub add_succeeded: Vec<String>,
    /// UIDs added to `uncountedTerminatedPods.failed`.
    pub add_failed: Vec<String>,
    /// Indexed: newly succeeded indexes.
    pub new_succeeded_indexes: Vec<i32>,
    /// The 500-UID cap was hit: do not finish the Job this pass.
    pub reached_max: bool,
}

/// Which pods lose their finalizer and which UIDs become uncounted. `finished` is the finished condition
/// (interim); `prev_succeeded` the indexes already in status.
pub fn plan_tracking<'a>(
    job: &Job,
    pods: &[&'a Pod],
    uncounted: &Uncounted,
    expected_rm: &HashSet<String>,
    finished: Option<&JobCondition>,
    prev_succeeded: &Intervals,
) -> Tracking<'a> {
    let mut t = Tracking::default();
    let indexed = is_indexed(job);
    let completions = completions(job).unwrap_or(0);
    let mut ordered: Vec<&Pod> = pods.to_vec();
    if indexed {
        // Completed indexes come in order.
        ordered.sort_by_key(|p| indexed::completion_index(p).unwrap_or(-1));
    }
    let failing = finished.is_some_and(|c| c.type_ != "SuccessCriteriaMet" && c.type_ != "Complete");
    let deleting = job.metadata.deletion_timestamp.is_some();
    for p in ordered {
        if !has_tracking_finalizer(p) || expected_rm.contains(uid(p)) {
            continue;
        }
        let failed = is_pod_failed(p, job);
        let succeeded = podutil::phase(p) == "Succeeded";
        if !(deleting || finished.is_some() || succeeded || failed) {
            continue;
        }
        t.remove_finalizer.push(p);
        if succeeded && !uncounted.failed.contains(uid(p)) {
            if indexed {
                if let Some(ix) = indexed::valid_index(p, completions)
                    && !prev_succeeded.has(ix)
                {
                    t.new_succeeded_indexes.push(ix);
                }
            } else if !uncounted.succeeded.contains(uid(p)) {
                t.add_succeeded.push(uid(p).to_string());
            }
        } else if (failed || failing)
            && !uncounted.failed.contains(uid(p))
            && (!indexed || indexed::valid_index(p, completions).is_some())
        {
            let policy = spec(job).and_then(|s| s.pod_failure_policy.as_ref());
            if failure_policy::evaluate(policy, p).count {
                t.add_failed.push(uid(p).to_string());
            }
        }
        if t.new_succeeded_indexes.len()
            + uncounted.succeeded.len()
            + t.add_succeeded.len()
            + uncounted.failed.len()
            + t.add_failed.len()
            >= MAX_UNCOUNTED_PODS
        {
            t.reached_max = true;
            break;
        }
    }
    t
}

/// `cleanUncountedPodsWithoutFinalizers`: UIDs whose pod no longer has the finalizer move from the
/// uncounted lists into the counters. Returns whether anything changed.
pub fn clean_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let mut changed = false;
    let u = status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    for (list, counter) in [
        (&mut u.succeeded, &mut status.succeeded),
        (&mut u.failed, &mut status.failed),
    ] {
        let Some(v) = list.as_mut() else { continue };
        let before = v.len();
        v.retain(|uid| with_finalizer.contains(uid));
        let moved = before - v.len();
        if moved > 0 {
            changed = true;
            *counter = Some(counter.unwrap_or(0) + moved as i32);
        }
        if v.is_empty() {
            *list = None;
        }
    }
    changed
}

/// `enactJobFinished`: once nothing is uncounted and no pod is terminating, add the final condition
/// (Complete gets `completionTime`). Returns whether the Job is now finished.
pub fn enact_finished(
    status: &mut JobStatus,
    finished: Option<&JobCondition>,
    terminating: i32,
    now: Timestamp,
) -> bool {
    let Some(fc) = finished else { return false };
    let uncounted = status.uncounted_terminated_pods.as_ref().map_or(0, |u| {
        u.succeeded.as_ref().map_or(0, Vec::len) + u.failed.as_ref().map_or(0, Vec::len)
    });
    if uncounted > 0 || terminating > 0 {
        return false;
    }
    let list = status.conditions.get_or_insert_with(Vec::new);
    ensure_condition(
        list,
        &fc.type_,
        &fc.status,
        fc.reason.as_deref().unwrap_or(""),
        fc.message.as_deref().unwrap_or(""),
        now,
    );
    if fc.type_ == "Complete" {
        status.completion_time = list
            .iter()
            .find(|c| c.type_ == "Complete")
            .and_then(|c| c.last_transition_time.clone());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
        let mut spec = spec;
        spec["template"] =
            json!({"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}});
        serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "ns", "uid": "ju"},
                                      "spec": spec, "status": status}))
        .unwrap()
    }

    fn pod(name: &str, phase: &str, extra: serde_json::Value) -> Pod {
        let mut v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name,
                                        "finalizers": [super::super::TRACKING_FINALIZER]},
                           "status": {"phase": phase}});
        if let Some(m) = extra.get("metadata") {
            for (k, val) in m.as_object().unwrap() {
                v["metadata"][k] = val.clone();
            }
        }
        if let Some(s) = extra.get("status") {
            for (k, val) in s.as_object().unwrap() {
                v["status"][k] = val.clone();
            }
        }
        if let Some(s) = extra.get("spec") {
            v["spec"] = s.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn desired_active_count_follows_parallelism_and_remaining_completions() {
        let cases = [
            // (completions, parallelism, succeeded, active, want)
            (Some(3), 2, 0, 0, 2),
            (Some(3), 2, 2, 1, 1),
            (Some(3), 2, 3, 0, 0),
            (Some(3), 2, 5, 0, 0),
            (None, 4, 0, 1, 4),
            (None, 4, 1, 2, 2),
            (Some(10), 0, 0, 3, 0),
        ];
        for (c, p, s, a, want) in cases {
            let j = job(json!({"completions": c, "parallelism": p}), json!({}));
            assert_eq!(
                want_active(&j, s, a),
                want,
                "completions {c:?} parallelism {p} succeeded {s} active {a}"
            );
        }
        let j = job(json!({"completions": 3}), json!({}));
        assert!(is_complete(&j, 3, 0));
        assert!(!is_complete(&j, 3, 1));
        assert!(!is_complete(&j, 2, 0));
        let wq = job(json!({}), json!({}));
        assert!(is_complete(&wq, 1, 0));
        assert!(!is_complete(&wq, 0, 0));
    }

    #[test]
    fn finished_condition_first_match_wins() {
        let now = ts(100);
        let failed = pod("f", "Failed", json!({}));
        // backoffLimit exceeded
        let j = job(json!({"backoffLimit": 1}), json!({}));
        let f = finished_condition(&j, &[&failed], 2, Some(ts(0)), now);
        let c = f.condition.unwrap();
        assert_eq!(
            (c.type_.as_str(), c.reason.as_deref()),
            ("FailureTarget", Some("BackoffLimitExceeded"))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("Job has reached the specified backoff limit")
        );
        assert!(
            finished_condition(&j, &[&failed], 1, Some(ts(0)), now)
                .condition
                .is_none()
        );
        // deadline reached / not yet
        let j = job(json!({"activeDeadlineSeconds": 5}), json!({}));
        let f = finished_condition(&j, &[], 0, Some(ts(95)), now);
        assert_eq!(f.condition.unwrap().reason.as_deref(), Some("DeadlineExceeded"));
        let f = finished_condition(&j, &[], 0, Some(ts(98)), now);
        assert_eq!((f.condition, f.requeue), (None, Some(Duration::from_secs(3))));
        let j = job(json!({"activeDeadlineSeconds": 5, "suspend": true}), json!({}));
        assert_eq!(
            finished_condition(&j, &[], 0, Some(ts(0)), now),
            Finish {
                condition: None,
                requeue: None
            }
        );
        // an existing FailureTarget becomes Failed with its reason
        let j = job(
            json!({}),
            json!({"conditions": [{"type": "FailureTarget", "status": "True",
                                                      "reason": "DeadlineExceeded", "message": "m"}]}),
        );
        let c = finished_condition(&j, &[], 0, None, now).condition.unwrap();
        assert_eq!(
            (c.type_.as_str(), c.reason.as_deref(), c.message.as_deref()),
            ("Failed", Some("DeadlineExceeded"), Some("m"))
        );
        // an existing SuccessCriteriaMet wins over everything
        let j = job(
            json!({"backoffLimit": 0}),
            json!({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}),
        );
        assert_eq!(
            finished_condition(&j, &[&failed], 9, None, now)
                .condition
                .unwrap()
                .type_,
            "SuccessCriteriaMet"
        );
        // podFailurePolicy FailJob comes before the backoff limit
        let j = job(
            json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]}}),
            json!({}),
        );
        let three = pod(
            "t",
            "Failed",
            json!({"status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}]}}),
        );
        let c = finished_condition(&j, &[&three], 1, None, now).condition.unwrap();
        assert_eq!(c.reason.as_deref(), Some("PodFailurePolicy"));
        assert_eq!(
            c.message.as_deref(),
            Some("Container c for pod ns/t failed with exit code 3 matching FailJob rule at index 0")
        );
    }

    #[test]
    fn restarts_count_against_the_limit_with_restart_on_failure() {
        let mut j = job(json!({"backoffLimit": 2}), json!({}));
        j.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .restart_policy = Some("OnFailure".into());
        let restarted = |n: i32| {
            pod(
                "r",
                "Running",
                json!({"status": {"containerStatuses": [{"name": "c", "image": "i",
            "imageID": "", "ready": false, "restartCount": n}]}}),
            )
        };
        assert!(!past_backoff_limit_on_failure(&j, &[&restarted(1)]));
        assert!(past_backoff_limit_on_failure(&j, &[&restarted(2)]));
        j.spec.as_mut().unwrap().backoff_limit = Some(0);
        assert!(past_backoff_limit_on_failure(&j, &[&restarted(1)]));
    }

    #[test]
    fn deleted_pods_count_as_failed_unless_only_failed_pods_are_replaced() {
        let deleted = pod(
            "d",
            "Running",
            json!({"metadata": {"deletionTimestamp": ts(0).to_string()}}),
        );
        let j = job(json!({}), json!({}));
        assert!(is_pod_failed(&deleted, &j));
        let j = job(json!({"podReplacementPolicy": "Failed"}), json!({}));
        assert!(!is_pod_failed(&deleted, &j));
        let done = pod(
            "s",
            "Succeeded",
            json!({"metadata": {"deletionTimestamp": ts(0).to_string()}}),
        );
        assert!(!is_pod_failed(&done, &job(json!({}), json!({}))));
    }

    #[test]
    fn new_finished_pods_skip_counted_and_expected() {
        let j = job(json!({}), json!({}));
        let s1 = pod("s1", "Succeeded", json!({}));
        let s2 = pod("s2", "Succeeded", json!({}));
        let mut s3 = pod("s3", "Succeeded", json!({}));
        s3.metadata.finalizers = None;
        let f1 = pod("f1", "Failed", json!({}));
        let r = pod("r", "Running", json!({}));
        let uncounted = Uncounted {
            succeeded: ["s1".to_string()].into(),
            failed: HashSet::new(),
        };
        let expected: HashSet<String> = ["f1".to_string()].into();
        let (s, f) = new_finished_pods(&j, &[&s1, &s2, &s3, &f1, &r], &uncounted, &expected);
        assert_eq!(s.iter().map(|p| uid(p)).collect::<Vec<_>>(), ["s2"]);
        assert!(f.is_empty());
    }

    #[test]
    fn manage_deletes_first_then_waits_for_backoff_then_creates() {
        let a = pod("a", "Running", json!({}));
        let b = pod("b", "Pending", json!({}));
        let j = job(json!({"completions": 5, "parallelism": 1}), json!({}));
        match plan_manage(&j, &[&a, &b], 0, 0, Duration::ZERO, &Intervals::default()) {
            Manage::Delete(rm) => assert_eq!(
                rm.iter().map(|p| uid(p)).collect::<Vec<_>>(),
                ["b"],
                "pending goes first"
            ),
            other => panic!("{other:?}"),
        }
        let j = job(json!({"completions": 5, "parallelism": 3}), json!({}));
        assert_eq!(
            plan_manage(&j, &[&a], 0, 0, Duration::ZERO, &Intervals::default()),
            Manage::Create(2)
        );
        assert_eq!(
            plan_manage(&j, &[&a], 3, 0, Duration::ZERO, &Intervals::default()),
            Manage::Create(1)
        );
        assert_eq!(
            plan_manage(&j, &[&a], 0, 0, Duration::from_secs(4), &Intervals::default()),
            Manage::Wait(Duration::from_secs(4))
        );
        assert_eq!(
            plan_manage(&j, &[&a], 4, 0, Duration::ZERO, &Intervals::default()),
            Manage::Nothing
        );
        let j = job(
            json!({"completions": 5, "parallelism": 3, "podReplacementPolicy": "Failed"}),
            json!({}),
        );
        assert_eq!(
            plan_manage(&j, &[&a], 0, 1, Duration::ZERO, &Intervals::default()),
            Manage::Create(1),
            "terminating pods still count"
        );
        let j = job(
            json!({"completions": 5, "parallelism": 3, "suspend": true}),
            json!({}),
        );
        match plan_manage(&j, &[&a, &b], 0, 0, Duration::ZERO, &Intervals::default()) {
            Manage::Delete(rm) => assert_eq!(rm.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn indexed_jobs_create_the_lowest_free_indexes() {
        let j = job(
            json!({"completions": 5, "parallelism": 3, "completionMode": "Indexed"}),
            json!({}),
        );
        let one = pod(
            "a",
            "Running",
            json!({"metadata": {"annotations": {indexed::COMPLETION_INDEX_KEY: "1"}}}),
        );
        let succeeded = Intervals::parse("0", 5);
        assert_eq!(
            plan_manage(&j, &[&one], 1, 0, Duration::ZERO, &succeeded),
            Manage::CreateIndexes(vec![2, 3])
        );
    }

    #[test]
    fn deletion_order_prefers_unassigned_pending_unready_new() {
        let assigned = pod(
            "x",
            "Running",
            json!({"spec": {"nodeName": "n", "containers": []}}),
        );
        let unassigned = pod("y", "Running", json!({}));
        assert!(deletion_less(&unassigned, &assigned));
        let old = pod(
            "o",
            "Running",
            json!({"metadata": {"creationTimestamp": ts(0).to_string()}}),
        );
        let new = pod(
            "n",
            "Running",
            json!({"metadata": {"creationTimestamp": ts(5).to_string()}}),
        );
        assert!(deletion_less(&new, &old));
        let ready = pod(
            "r",
            "Running",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert!(deletion_less(&old, &ready));
    }

    #[test]
    fn tracking_counts_finished_pods_and_every_pod_of_a_failing_job() {
        let j = job(json!({"completions": 3}), json!({}));
        let s = pod("s", "Succeeded", json!({}));
        let f = pod("f", "Failed", json!({}));
        let r = pod("r", "Running", json!({}));
        let t = plan_tracking(
            &j,
            &[&s, &f, &r],
            &Uncounted::default(),
            &HashSet::new(),
            None,
            &Intervals::default(),
        );
        assert_eq!(t.add_succeeded, ["s"]);
        assert_eq!(t.add_failed, ["f"]);
        assert_eq!(t.remove_finalizer.len(), 2, "the running pod keeps its finalizer");
        let failing = new_condition("FailureTarget", "True", "BackoffLimitExceeded", "", ts(0));
        let t = plan_tracking(
            &j,
            &[&s, &f, &r],
            &Uncounted::default(),
            &HashSet::new(),
            Some(&failing),
            &Intervals::default(),
        );
        assert_eq!(
            t.add_failed,
            ["f", "r"],
            "a failing Job counts its unfinished pods as failed"
        );
        assert_eq!(t.remove_finalizer.len(), 3);
        // already uncounted: finalizer removed again, not re-added
        let u = Uncounted {
            succeeded: ["s".to_string()].into(),
            failed: HashSet::new(),
        };
        let t = plan_tracking(&j, &[&s], &u, &HashSet::new(), None, &Intervals::default());
        assert!(t.add_succeeded.is_empty());
        assert_eq!(t.remove_finalizer.len(), 1);
    }

    #[test]
    fn uncounted_uids_move_into_counters_once_their_finalizer_is_gone() {
        let mut status: JobStatus = serde_json::from_value(json!({
            "succeeded": 1, "uncountedTerminatedPods": {"succeeded": ["a", "b"], "failed": ["c"]}
        }))
        .unwrap();
        let with: HashSet<String> = ["b".to_string()].into();
        assert!(clean_uncounted(&mut status, &with));
        assert_eq!(status.succeeded, Some(2));
        assert_eq!(status.failed, Some(1));
        let u = status.uncounted_terminated_pods.as_ref().unwrap();
        assert_eq!(u.succeeded.as_deref(), Some(&["b".to_string()][..]));
        assert_eq!(u.failed, None);
        assert!(!clean_uncounted(&mut status, &with));
    }

    #[test]
    fn the_final_condition_waits_for_uncounted_and_terminating_pods() {
        let complete = new_condition(
            "Complete",
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
            ts(0),
        );
        let mut status: JobStatus =
            serde_json::from_value(json!({"uncountedTerminatedPods": {"succeeded": ["a"]}})).unwrap();
        assert!(!enact_finished(&mut status, Some(&complete), 0, ts(1)));
        status.uncounted_terminated_pods = Some(Default::default());
        assert!(!enact_finished(&mut status, Some(&complete), 1, ts(1)));
        assert!(enact_finished(&mut status, Some(&complete), 0, ts(1)));
        assert_eq!(status.completion_time, Some(Time(ts(1))));
        let c = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.reason.as_deref()),
            ("Complete", Some("CompletionsReached"))
        );
        assert!(!enact_finished(&mut status, None, 0, ts(1)));
    }

    #[test]
    fn conditions_are_added_updated_and_never_added_false() {
        let mut list = Vec::new();
        assert!(!ensure_condition(
            &mut list,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            ts(0)
        ));
        assert!(ensure_condition(
            &mut list,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            ts(0)
        ));
        assert!(!ensure_condition(
            &mut list,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            ts(1)
        ));
        assert!(ensure_condition(
            &mut list,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            ts(2)
        ));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, Some(Time(ts(2))));
    }
}
