//! `syncJob` and `trackJobStatusAndRemoveFinalizers`: read the caches, ask [`super::decide`], write.
//! The order of the writes is upstream's, which the 1.32 API server's Job status validation relies on:
//! uncounted UIDs and the interim condition first, then finalizer removal, then counters and the final
//! condition.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use client::events::EventType;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PostParams};

use super::backoff::BackoffRecord;
use super::decide::{self, Manage, Uncounted};
use super::indexed::{self, Intervals};
use super::{
    JobController, TRACKING_FINALIZER, effective_selector, finished_type, generated_labels,
    has_tracking_finalizer, is_indexed, managed_externally,
};
use crate::Error;
use crate::controller_ref::{self, Claim};
use crate::informer::key_of;
use crate::pod_control::{self, object_ref};
use crate::{podutil, selector};

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn status_mut(job: &mut Job) -> &mut JobStatus {
    job.status.get_or_insert_with(Default::default)
}

/// Omit what upstream's `omitempty` omits: zero `active`/`succeeded`/`failed`, empty uncounted lists and
/// `completedIndexes`.
fn normalise(status: &mut JobStatus) {
    for n in [&mut status.active, &mut status.succeeded, &mut status.failed] {
        if *n == Some(0) {
            *n = None;
        }
    }
    let u = status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    for l in [&mut u.succeeded, &mut u.failed] {
        if l.as_ref().is_some_and(Vec::is_empty) {
            *l = None;
        }
    }
    if status.completed_indexes.as_deref() == Some("") {
        status.completed_indexes = None;
    }
}

/// The reasons a failed Job's Warning event can carry (the recorder wants static strings).
fn static_reason(reason: &str) -> &'static str {
    match reason {
        "BackoffLimitExceeded" => "BackoffLimitExceeded",
        "DeadlineExceeded" => "DeadlineExceeded",
        "PodFailurePolicy" => "PodFailurePolicy",
        "MaxFailedIndexesExceeded" => "MaxFailedIndexesExceeded",
        "FailedIndexes" => "FailedIndexes",
        _ => "Failed",
    }
}

pub(super) async fn sync_job(c: &JobController, key: &str) -> Result<Option<Duration>, Error> {
    let Some(shared) = c.jobs.get(key) else {
        c.expectations.forget(key);
        c.finalizers.forget(key);
        c.backoff.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        return Ok(None);
    };
    if managed_externally(&shared) {
        return Ok(None);
    }
    if finished_type(&shared).is_some() {
        c.backoff.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        return Ok(None);
    }
    let job_ref = object_ref("batch/v1", "Job", &shared.metadata);
    if let Some(mode) = shared.spec.as_ref().and_then(|s| s.completion_mode.as_deref())
        && mode != "NonIndexed"
        && mode != "Indexed"
    {
        c.recorder.emit(
            job_ref,
            EventType::Warning,
            "UnknownCompletionMode",
            "Skipped Job sync because completion mode is unknown".into(),
        );
        return Ok(None);
    }
    let mut job = (*shared).clone();
    status_mut(&mut job)
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    let now = Timestamp::now();

    // Expectations first, then the pods: a pod created after this check defers the work to the next sync.
    let satisfied = c.expectations.satisfied(key);
    let claimed = claim_pods(c, &job).await?;
    let pods: Vec<&Pod> = claimed.iter().collect();
    let active: Vec<&Pod> = pods.iter().copied().filter(|p| podutil::is_active(p)).collect();
    let mut ready = active.iter().filter(|p| podutil::is_ready(p)).count() as i32;
    let mut terminating = pods.iter().filter(|p| podutil::is_terminating(p)).count() as i32;
    let expected_rm = c.finalizers.expected(key);
    let uncounted = Uncounted::of(job.status.as_ref().expect("set above"));
    let (new_succeeded, new_failed) = decide::new_finished_pods(&job, &pods, &uncounted, &expected_rm);
    let policy = job.spec.as_ref().and_then(|s| s.pod_failure_policy.as_ref());
    let counted_failures = new_failed
        .iter()
        .filter(|p| super::failure_policy::evaluate(policy, p).count)
        .count();
    let status = job.status.as_ref().expect("set above");
    let mut succeeded =
        status.succeeded.unwrap_or(0) + new_succeeded.len() as i32 + uncounted.succeeded.len() as i32;
    let failed = status.failed.unwrap_or(0) + counted_failures as i32 + uncounted.failed.len() as i32;

    if job.status.as_ref().and_then(|s| s.start_time.as_ref()).is_none() && !decide::suspended(&job) {
        status_mut(&mut job).start_time = Some(Time(now));
    }
    let stored = c
        .backoff
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .copied()
        .unwrap_or_default();
    let new_backoff = stored.advance(&new_succeeded, &new_failed);

    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    let finish = decide::finished_condition(&job, &pods, failed, start, now);
    let mut requeue = finish.requeue;
    let mut finished = finish.condition;

    let completions = decide::completions(&job).unwrap_or(0);
    let (prev_succeeded_ix, succeeded_ix) = if is_indexed(&job) {
        let completed = job
            .status
            .as_ref()
            .and_then(|s| s.completed_indexes.clone())
            .unwrap_or_default();
        indexed::succeeded_indexes(&completed, &pods, completions)
    } else {
        Default::default()
    };
    if is_indexed(&job) {
        succeeded = succeeded_ix.total();
    }

    let mut active_n = active.len() as i32;
    let mut suspend_changed = false;
    let mut manage_err: Option<Error> = None;
    if finished.is_some() {
        // Finishing: delete the active pods (finalizers stay, the tracking pass removes them).
        let (deleted_ready, deleted, err) = delete_active_pods(c, &job_ref, &active).await;
        if deleted != active_n || !satisfied {
            // Not finished yet: pods may still have finalizers, or be missing from the cache.
            finished = None;
        }
        active_n -= deleted;
        terminating += deleted;
        ready -= deleted_ready;
        manage_err = err;
    } else {
        let mut manage_called = false;
        if satisfied && job.metadata.deletion_timestamp.is_none() {
            manage_called = true;
            let plan = decide::plan_manage(
                &job,
                &active,
                succeeded,
                terminating,
                new_backoff.remaining(now),
                &succeeded_ix,
            );
            match manage(c, key, &job, &job_ref, plan).await {
                Managed::Deleted { ready: r, count, err } => {
                    active_n -= count;
                    terminating += count;
                    ready -= r;
                    manage_err = err;
                }
                Managed::Created { count, err } => {
                    active_n += count;
                    manage_err = err;
                }
                Managed::Wait(d) => {
                    let d = d.max(super::SYNC_BATCH_PERIOD);
                    requeue = Some(requeue.map_or(d, |r| r.min(d)));
                }
                Managed::Nothing => {}
            }
        }
        if decide::is_complete(&job, succeeded, active_n) {
            finished = Some(decide::success_condition(now));
        } else if manage_called {
            let is_suspended = decide::suspended(&job);
            let list = status_mut(&mut job).conditions.get_or_insert_with(Vec::new);
            if is_suspended {
                if decide::ensure_condition(list, "Suspended", "True", "JobSuspended", "Job suspended", now) {
                    suspend_changed = true;
                    c.recorder.emit(
                        job_ref.clone(),
                        EventType::Normal,
                        "Suspended",
                        "Job suspended".into(),
                    );
                }
            } else if decide::ensure_condition(list, "Suspended", "False", "JobResumed", "Job resumed", now) {
                suspend_changed = true;
                c.recorder.emit(
                    job_ref.clone(),
                    EventType::Normal,
                    "Resumed",
                    "Job resumed".into(),
                );
                // activeDeadlineSeconds counts from the resume.
                status_mut(&mut job).start_time = Some(Time(now));
            }
        }
    }

    let status = status_mut(&mut job);
    let needs_update = suspend_changed
        || status.active.unwrap_or(0) != active_n
        || status.ready != Some(ready)
        || status.terminating != Some(terminating);
    status.active = Some(active_n);
    status.ready = Some(ready);
    status.terminating = Some(terminating);
    let ctx = TrackCtx {
        key,
        job_ref: &job_ref,
        pods: &pods,
        uncounted: &uncounted,
        expected_rm: &expected_rm,
        prev_succeeded_ix: &prev_succeeded_ix,
        succeeded_ix: &succeeded_ix,
        terminating,
        backoff: new_backoff,
        now,
    };
    track(c, job, finished, &ctx, needs_update).await?;
    match manage_err {
        Some(e) => Err(e),
        None => Ok(requeue),
    }
}

/// `getPodsForJob`: every pod in the namespace claimed by the selector; adoption adds the controllerRef
/// and the tracking finalizer in one patch, after a live check that the Job is not being deleted.
async fn claim_pods(c: &JobController, job: &Job) -> Result<Vec<Pod>, Error> {
    let ns = job.metadata.namespace.as_deref().unwrap_or("");
    let name = job.metadata.name.as_deref().unwrap_or("");
    let job_uid = job.metadata.uid.as_deref().unwrap_or("");
    let sel = effective_selector(job);
    let deleting = job.metadata.deletion_timestamp.is_some();
    let owner = controller_ref::controller_ref("batch/v1", "Job", name, job_uid);
    let mut out = Vec::new();
    let mut can_adopt: Option<bool> = None;
    let mut first_err: Option<Error> = None;
    for pod in c.pods.list_ns(ns) {
        let matches = sel
            .as_ref()
            .is_some_and(|s| !selector::is_empty(s) && selector::matches(s, pod.metadata.labels.as_ref()));
        let pod_uid = uid(&pod);
        match controller_ref::claim(&pod.metadata, job_uid, matches, deleting) {
            Claim::Owned => out.push((*pod).clone()),
            Claim::Ignore => {}
            Claim::Adopt => {
                if can_adopt.is_none() {
                    can_adopt = Some(match c.job_api(ns).get(name).await {
                        Ok(fresh) => {
                            fresh.metadata.uid.as_deref() == Some(job_uid)
                                && fresh.metadata.deletion_timestamp.is_none()
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => false,
                        Err(e) => return Err(e.into()),
                    });
                }
                if can_adopt != Some(true) {
                    continue;
                }
                let patch = controller_ref::adopt_patch(&owner, &pod_uid, &[TRACKING_FINALIZER]);
                let pod_name = pod.metadata.name.as_deref().unwrap_or("");
                match c
                    .pod_api(ns)
                    .patch(pod_name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => {
                        let mut p = (*pod).clone();
                        p.metadata
                            .owner_references
                            .get_or_insert_with(Vec::new)
                            .push(owner.clone());
                        if !has_tracking_finalizer(&p) {
                            p.metadata
                                .finalizers
                                .get_or_insert_with(Vec::new)
                                .push(TRACKING_FINALIZER.to_string());
                        }
                        out.push(p);
                    }
                    // Gone, or replaced by a namesake (the UID precondition): nothing to adopt.
                    Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => {}
                    Err(e) => {
                        first_err.get_or_insert(e.into());
                    }
                }
            }
            Claim::Release => {
                let patch = controller_ref::release_patch(job_uid, &pod_uid);
                let pod_name = pod.metadata.name.as_deref().unwrap_or("");
                match c
                    .pod_api(ns)
                    .patch(pod_name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        first_err.get_or_insert(e.into());
                    }
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// `deleteActivePods`: DELETE each active pod, finalizers kept. Returns (ready deleted, deleted, error).
async fn delete_active_pods(
    c: &JobController,
    job_ref: &ObjectReference,
    pods: &[&Pod],
) -> (i32, i32, Option<Error>) {
    let results = futures_util::future::join_all(pods.iter().map(|p| async move {
        let ns = p.metadata.namespace.as_deref().unwrap_or("");
        let name = p.metadata.name.as_deref().unwrap_or("");
        (p, c.pod_control.delete(ns, name, None, job_ref).await)
    }))
    .await;
    let mut deleted = 0;
    let mut deleted_ready = 0;
    let mut err = None;
    for (p, r) in results {
        match r {
            // Gone already counts as deleted.
            Ok(()) => {
                deleted += 1;
                if podutil::is_ready(p) {
                    deleted_ready += 1;
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                deleted += 1;
                if podutil::is_ready(p) {
                    deleted_ready += 1;
                }
            }
            Err(e) => {
                err.get_or_insert(Error::from(e));
            }
        }
    }
    (deleted_ready, deleted, err)
}

/// What manageJob did.
enum Managed {
    Nothing,
    Deleted {
        ready: i32,
        count: i32,
        err: Option<Error>,
    },
    Created {
        count: i32,
        err: Option<Error>,
    },
    Wait(Duration),
}

/// The template new pods come from: the Job's, with the generated labels (if absent), the index env var
/// for Indexed Jobs, and the tracking finalizer.
fn pod_template(job: &Job) -> PodTemplateSpec {
    let mut t = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let meta = t.metadata.get_or_insert_with(Default::default);
    if job.spec.as_ref().and_then(|s| s.manual_selector) != Some(true) {
        let labels = meta.labels.get_or_insert_with(Default::default);
        for (k, v) in generated_labels(job) {
            labels.entry(k.to_string()).or_insert(v);
        }
    }
    let fins = meta.finalizers.get_or_insert_with(Vec::new);
    if !fins.iter().any(|f| f == TRACKING_FINALIZER) {
        fins.push(TRACKING_FINALIZER.to_string());
    }
    if is_indexed(job) {
        indexed::add_completion_index_env(&mut t);
    }
    t
}

/// Carry out manageJob's plan.
async fn manage(
    c: &JobController,
    key: &str,
    job: &Job,
    job_ref: &ObjectReference,
    plan: Manage<'_>,
) -> Managed {
    match plan {
        Manage::Nothing => Managed::Nothing,
        Manage::Wait(d) => Managed::Wait(d),
        Manage::Delete(pods) => {
            c.expectations
                .expect_deletions(key, pods.iter().map(|p| key_of(*p)));
            let results = futures_util::future::join_all(pods.iter().map(|p| async move {
                // `deleteJobPods`: the finalizer goes first, so the pod is not left counted twice.
                if let Err(e) = c.remove_finalizer(p).await {
                    return (p, Err(e));
                }
                let ns = p.metadata.namespace.as_deref().unwrap_or("");
                let name = p.metadata.name.as_deref().unwrap_or("");
                (p, c.pod_control.delete(ns, name, None, job_ref).await)
            }))
            .await;
            let (mut count, mut ready, mut err) = (0, 0, None);
            for (p, r) in results {
                match r {
                    Ok(()) => {
                        count += 1;
                        if podutil::is_ready(p) {
                            ready += 1;
                        }
                    }
                    // Already gone: counted, and not waited for (its delete event may have come already).
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        c.expectations.deletion_observed(key, &key_of(*p));
                        count += 1;
                        if podutil::is_ready(p) {
                            ready += 1;
                        }
                    }
                    Err(e) => {
                        c.expectations.deletion_observed(key, &key_of(*p));
                        err.get_or_insert(Error::from(e));
                    }
                }
            }
            Managed::Deleted { ready, count, err }
        }
        Manage::Create(n) => create_pods(c, key, job, job_ref, vec![None; n]).await,
        Manage::CreateIndexes(ixs) => {
            create_pods(c, key, job, job_ref, ixs.into_iter().map(Some).collect()).await
        }
    }
}

/// Create one pod per entry (an index for Indexed Jobs) in slow-start batches.
async fn create_pods(
    c: &JobController,
    key: &str,
    job: &Job,
    job_ref: &ObjectReference,
    indexes: Vec<Option<i32>>,
) -> Managed {
    let n = indexes.len();
    c.expectations.expect_creations(key, n);
    let template = pod_template(job);
    let ns = job.metadata.namespace.as_deref().unwrap_or("");
    let name = job.metadata.name.as_deref().unwrap_or("");
    let owner =
        controller_ref::controller_ref("batch/v1", "Job", name, job.metadata.uid.as_deref().unwrap_or(""));
    let attempted = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let (_, err) = pod_control::slow_start_batch(n, |i| {
        attempted.fetch_add(1, Ordering::SeqCst);
        let pod = match indexes[i] {
            Some(ix) => {
                let t = indexed::template_for_index(&template, name, ix);
                let mut p = pod_control::pod_from_template(&t, ns, &owner);
                p.metadata.generate_name = Some(indexed::generate_name_with_index(name, ix));
                p
            }
            None => pod_control::pod_from_template(&template, ns, &owner),
        };
        let failed = &failed;
        async move {
            match c.pod_control.create(&pod, job_ref).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    // The informer will never show it.
                    c.expectations.creation_observed(key);
                    failed.fetch_add(1, Ordering::SeqCst);
                    if pod_control::is_namespace_terminating(&e) {
                        Ok(())
                    } else {
                        Err(e)
                    }
                }
            }
        }
    })
    .await;
    let attempted = attempted.load(Ordering::SeqCst);
    c.expectations.lower_creations(key, n - attempted);
    Managed::Created {
        count: (attempted - failed.load(Ordering::SeqCst)) as i32,
        err: err.map(Error::from),
    }
}

/// What the tracking pass reads besides the Job.
struct TrackCtx<'a> {
    key: &'a str,
    job_ref: &'a ObjectReference,
    pods: &'a [&'a Pod],
    uncounted: &'a Uncounted,
    expected_rm: &'a HashSet<String>,
    prev_succeeded_ix: &'a Intervals,
    succeeded_ix: &'a Intervals,
    terminating: i32,
    backoff: BackoffRecord,
    now: Timestamp,
}

async fn write_status(c: &JobController, mut job: Job) -> Result<Job, Error> {
    normalise(status_mut(&mut job));
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    Ok(c.job_api(&ns)
        .replace_status(&name, &PostParams::default(), &job)
        .await?)
}

/// `trackJobStatusAndRemoveFinalizers`.
async fn track(
    c: &JobController,
    mut job: Job,
    finished: Option<JobCondition>,
    t: &TrackCtx<'_>,
    mut needs_flush: bool,
) -> Result<(), Error> {
    let mut with_finalizer: HashSet<String> = t
        .pods
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !t.expected_rm.contains(&uid(p)))
        .map(|p| uid(p))
        .collect();
    if decide::clean_uncounted(status_mut(&mut job), &with_finalizer) {
        needs_flush = true;
    }
    let plan = decide::plan_tracking(
        &job,
        t.pods,
        t.uncounted,
        t.expected_rm,
        finished.as_ref(),
        t.prev_succeeded_ix,
    );
    {
        let u = status_mut(&mut job)
            .uncounted_terminated_pods
            .get_or_insert_with(Default::default);
        if !plan.add_succeeded.is_empty() {
            u.succeeded
                .get_or_insert_with(Vec::new)
                .extend(plan.add_succeeded.iter().cloned());
            needs_flush = true;
        }
        if !plan.add_failed.is_empty() {
            u.failed
                .get_or_insert_with(Vec::new)
                .extend(plan.add_failed.iter().cloned());
            needs_flush = true;
        }
    }
    if is_indexed(&job) {
        if !plan.new_succeeded_indexes.is_empty() {
            needs_flush = true;
        }
        let all = t
            .succeeded_ix
            .with_indexes(plan.new_succeeded_indexes.iter().copied());
        let s = all.to_string();
        let status = status_mut(&mut job);
        if status.completed_indexes.clone().unwrap_or_default() != s {
            needs_flush = true;
        }
        status.succeeded = Some(all.total());
        status.completed_indexes = Some(s);
    }
    let now = t.now;
    let mut final_condition = finished;
    if let Some(fc) = final_condition
        .as_ref()
        .filter(|c| c.type_ == "FailureTarget")
        .cloned()
    {
        status_mut(&mut job)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(fc.clone());
        needs_flush = true;
        final_condition = Some(decide::new_condition(
            "Failed",
            "True",
            fc.reason.as_deref().unwrap_or(""),
            fc.message.as_deref().unwrap_or(""),
            now,
        ));
    }
    if let Some(fc) = final_condition
        .as_ref()
        .filter(|c| c.type_ == "SuccessCriteriaMet")
        .cloned()
    {
        if decide::true_condition(&job, "SuccessCriteriaMet").is_none() {
            status_mut(&mut job)
                .conditions
                .get_or_insert_with(Vec::new)
                .push(fc.clone());
            needs_flush = true;
        }
        final_condition = Some(decide::new_condition(
            "Complete",
            "True",
            fc.reason.as_deref().unwrap_or(""),
            fc.message.as_deref().unwrap_or(""),
            now,
        ));
    }

    // flushUncountedAndRemoveFinalizers
    if needs_flush {
        job = write_status(c, job).await?;
        c.backoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(t.key.to_string(), t.backoff);
        needs_flush = false;
    }
    let mut rm_err: Option<Error> = None;
    if !plan.remove_finalizer.is_empty() {
        c.finalizers
            .expect(t.key, plan.remove_finalizer.iter().map(|p| uid(p)));
        let results = futures_util::future::join_all(
            plan.remove_finalizer
                .iter()
                .map(|p| async move { (p, c.remove_finalizer(p).await) }),
        )
        .await;
        for (p, r) in results {
            match r {
                Ok(()) => {
                    with_finalizer.remove(&uid(p));
                }
                Err(e) => {
                    c.finalizers.observed(t.key, &uid(p));
                    rm_err.get_or_insert(e.into());
                }
            }
        }
    }
    if decide::clean_uncounted(status_mut(&mut job), &with_finalizer) {
        needs_flush = true;
    }
    if let Some(e) = rm_err {
        if needs_flush {
            write_status(c, job).await?;
        }
        return Err(e);
    }
    let finished_now = !plan.reached_max
        && decide::enact_finished(status_mut(&mut job), final_condition.as_ref(), t.terminating, now);
    if finished_now {
        needs_flush = true;
    }
    if needs_flush {
        let job = write_status(c, job).await?;
        if finished_now && let Some(fc) = final_condition {
            record_finished(c, &job, t.job_ref, &fc);
        }
    }
    Ok(())
}

/// `recordJobFinished`: the events of a finished Job.
fn record_finished(c: &JobController, job: &Job, job_ref: &ObjectReference, fc: &JobCondition) {
    if fc.type_ == "Complete" {
        let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
        if decide::completions(job).is_some_and(|n| succeeded > n) {
            c.recorder.emit(
                job_ref.clone(),
                EventType::Warning,
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached".into(),
            );
        }
        c.recorder.emit(
            job_ref.clone(),
            EventType::Normal,
            "Completed",
            "Job completed".into(),
        );
    } else {
        c.recorder.emit(
            job_ref.clone(),
            EventType::Warning,
            static_reason(fc.reason.as_deref().unwrap_or("")),
            fc.message.clone().unwrap_or_default(),
        );
    }
}
