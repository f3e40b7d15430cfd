//! The Job controller (`pkg/controller/job/`, component `job-controller`): runs a Job's pods to completion.
//! It claims the pods its selector matches (adopting with the `batch.kubernetes.io/job-tracking` finalizer),
//! creates and deletes pods toward `parallelism`/`completions` (Indexed Jobs by completion index), backs off
//! after pod failures, and counts every finished pod exactly once through the tracking finalizer
//! (`status.uncountedTerminatedPods`, then finalizer removal, then the counters). Terminal conditions come in
//! two steps as in 1.32: SuccessCriteriaMet → Complete, FailureTarget → Failed.
//!
//! ```text
//!  jobs informer ─┐  add/spec change: now; status or pod change: batched 1 s
//!  pods informer ─┴──► queue "job" ──► 5 workers: sync::sync_job (decide.rs decides, sync.rs writes)
//!        └── orphan pods with the finalizer ──► queue "job_orphan_pod" ──► remove the finalizer
//! ```
//!
//! Differences from upstream: `backoffLimitPerIndex`, `maxFailedIndexes` and `successPolicy` are not
//! implemented (a FailIndex rule counts as Count). When a Job has no `spec.selector` (an API server that
//! does not generate one), the controller uses upstream's generated selector and pod labels itself.

pub mod backoff;
pub mod decide;
pub mod failure_policy;
pub mod indexed;
mod sync;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::events::Recorder;
use futures_util::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use crate::controller_ref::controller_of;
use crate::expectations::Expectations;
use crate::informer::{Change, Informer, key_of};
use crate::pod_control::PodControl;
use crate::{Context, Error, Reconciler, WorkQueue, run_workers, selector};

/// The finalizer every Job pod carries until the controller has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// `spec.managedBy` of Jobs this controller syncs (and the default).
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// upstream `syncJobBatchPeriod`.
pub const SYNC_BATCH_PERIOD: Duration = Duration::from_secs(1);
/// upstream `DefaultJobApiBackOff` / `MaxJobApiBackOff`.
pub const API_BACKOFF: Duration = Duration::from_secs(1);
/// The cap of the API backoff.
pub const MAX_API_BACKOFF: Duration = Duration::from_secs(60);
/// kube-controller-manager `--concurrent-job-syncs`.
pub const WORKERS: usize = 5;
/// The event source.
pub const COMPONENT: &str = "job-controller";

const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// Whether the pod still carries the tracking finalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
}

/// `completionMode: Indexed`.
pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// The type of the Job's terminal condition (`Complete` or `Failed` with status True), if finished.
pub fn finished_type(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

/// Whether another controller manages the Job (`spec.managedBy`, JobManagedBy beta in 1.32).
pub fn managed_externally(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.managed_by.as_deref())
        .is_some_and(|m| m != JOB_CONTROLLER_NAME)
}

/// The Job's selector; without one (and without `manualSelector`), upstream's generated
/// `batch.kubernetes.io/controller-uid=<uid>`.
pub fn effective_selector(job: &Job) -> Option<LabelSelector> {
    let spec = job.spec.as_ref()?;
    if let Some(s) = spec.selector.clone() {
        return Some(s);
    }
    if spec.manual_selector == Some(true) {
        return None;
    }
    let uid = job.metadata.uid.clone()?;
    Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(CONTROLLER_UID_LABEL.to_string(), uid)])),
        match_expressions: None,
    })
}

/// The labels the API server's Job strategy adds to the template (each only if absent).
fn generated_labels(job: &Job) -> Vec<(&'static str, String)> {
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    vec![
        (CONTROLLER_UID_LABEL, uid.clone()),
        (JOB_NAME_LABEL, name.clone()),
        (LEGACY_CONTROLLER_UID_LABEL, uid),
        (LEGACY_JOB_NAME_LABEL, name),
    ]
}

/// The `$deleteFromPrimitiveList` patch that removes the tracking finalizer.
pub fn remove_finalizer_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}})
}

/// Pod UIDs whose finalizer removal the controller waits to see, per Job (`uidTrackingExpectations`).
#[derive(Default)]
struct FinalizerExpectations {
    map: Mutex<HashMap<String, HashSet<String>>>,
}

impl FinalizerExpectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn expected(&self, key: &str) -> HashSet<String> {
        self.lock().get(key).cloned().unwrap_or_default()
    }
    fn expect(&self, key: &str, uids: impl IntoIterator<Item = String>) {
        self.lock().entry(key.to_string()).or_default().extend(uids);
    }
    fn observed(&self, key: &str, uid: &str) {
        let mut m = self.lock();
        if let Some(s) = m.get_mut(key) {
            s.remove(uid);
            if s.is_empty() {
                m.remove(key);
            }
        }
    }
    fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The Job controller's state shared by its handlers and workers.
pub struct JobController {
    client: kube::Client,
    jobs: Arc<Informer<Job>>,
    pods: Arc<Informer<Pod>>,
    queue: Arc<WorkQueue>,
    orphans: Arc<WorkQueue>,
    expectations: Expectations,
    finalizers: FinalizerExpectations,
    backoff: Mutex<HashMap<String, backoff::BackoffRecord>>,
    pod_control: PodControl,
    recorder: Arc<Recorder>,
}

/// Start the Job controller: handlers now, workers once the caches have synced.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let recorder = ctx.recorder(COMPONENT);
    let c = Arc::new(JobController {
        client: ctx.client.clone(),
        jobs: ctx.informers.get::<Job>(),
        pods: ctx.informers.get::<Pod>(),
        queue: WorkQueue::with_backoff("job", API_BACKOFF, MAX_API_BACKOFF),
        orphans: WorkQueue::with_backoff("job_orphan_pod", API_BACKOFF, MAX_API_BACKOFF),
        expectations: Expectations::default(),
        finalizers: FinalizerExpectations::default(),
        backoff: Mutex::new(HashMap::new()),
        pod_control: PodControl::new(ctx.client.clone(), recorder.clone()),
        recorder,
    });
    JobController::register(&c);
    let informers = ctx.informers.clone();
    let orphan = Arc::new(OrphanPods(c.clone()));
    Box::pin(async move {
        futures_util::future::join(
            run_workers(
                informers.clone(),
                c.queue.clone(),
                WORKERS,
                c.clone(),
                cancel.clone(),
            ),
            run_workers(informers, c.orphans.clone(), 1, orphan, cancel),
        )
        .await;
    })
}

impl JobController {
    fn register(me: &Arc<Self>) {
        let c = me.clone();
        me.jobs.on_change(move |change| c.on_job(change));
        let c = me.clone();
        me.pods.on_change(move |change| c.on_pod(change));
    }

    fn on_job(self: &Arc<Self>, change: &Change<'_, Job>) {
        match change {
            Change::Added(job) => self.queue.add(key_of(job.as_ref())),
            Change::Updated { old, new } => {
                let key = key_of(new.as_ref());
                if old.metadata.generation == new.metadata.generation {
                    self.queue.add_after(key.clone(), SYNC_BATCH_PERIOD);
                } else {
                    self.queue.add(key.clone());
                }
                // Backup: a finished Job's pods should have lost their finalizers already.
                if finished_type(new).is_some() {
                    self.cleanup_pod_finalizers(new);
                }
                let deadline = |j: &Job| j.spec.as_ref().and_then(|s| s.active_deadline_seconds);
                if let (Some(start), Some(secs)) = (
                    new.status.as_ref().and_then(|s| s.start_time.as_ref()),
                    deadline(new),
                ) && deadline(old) != Some(secs)
                {
                    let ends = start
                        .0
                        .checked_add(jiff::SignedDuration::from_secs(secs))
                        .unwrap_or(jiff::Timestamp::MAX);
                    let left = jiff::Timestamp::now().duration_until(ends);
                    self.queue.add_after(
                        key,
                        if left.is_negative() {
                            Duration::ZERO
                        } else {
                            left.unsigned_abs()
                        },
                    );
                }
            }
            Change::Deleted(job) => {
                self.queue.add(key_of(job.as_ref()));
                self.cleanup_pod_finalizers(job);
            }
        }
    }

    /// Queue every pod the Job controls that still has the finalizer for the orphan cleanup.
    fn cleanup_pod_finalizers(&self, job: &Job) {
        let ns = job.metadata.namespace.as_deref().unwrap_or("");
        let uid = job.metadata.uid.as_deref().unwrap_or("");
        for pod in self.pods.list_ns(ns) {
            if controller_of(&pod.metadata).is_some_and(|r| r.uid == uid) && has_tracking_finalizer(&pod) {
                self.orphans.add(key_of(pod.as_ref()));
            }
        }
    }

    /// The cached Job a controllerRef names (same kind, name and UID).
    fn resolve(&self, ns: &str, r: &OwnerReference) -> Option<Arc<Job>> {
        if r.kind != "Job" {
            return None;
        }
        self.jobs
            .get_in(ns, &r.name)
            .filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()))
    }

    /// Jobs in the pod's namespace whose selector matches it (candidates to adopt an orphan).
    fn pod_jobs(&self, pod: &Pod) -> Vec<Arc<Job>> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        self.jobs
            .list_ns(ns)
            .into_iter()
            .filter(|j| {
                effective_selector(j).is_some_and(|s| {
                    !selector::is_empty(&s) && selector::matches(&s, pod.metadata.labels.as_ref())
                })
            })
            .collect()
    }

    fn batched(&self, job: &Job) {
        self.queue.add_after(key_of(job), SYNC_BATCH_PERIOD);
    }

    fn on_pod(self: &Arc<Self>, change: &Change<'_, Pod>) {
        match change {
            Change::Added(pod) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    // A pod already being deleted (seen after a restart) is no creation.
                    self.pod_deleted(pod, false);
                    return;
                }
                let ns = pod.metadata.namespace.as_deref().unwrap_or("");
                if let Some(r) = controller_of(&pod.metadata) {
                    if let Some(job) = self.resolve(ns, r) {
                        self.expectations.creation_observed(&key_of(job.as_ref()));
                        self.batched(&job);
                    }
                    return;
                }
                if has_tracking_finalizer(pod) {
                    self.orphans.add(key_of(pod.as_ref()));
                }
                for job in self.pod_jobs(pod) {
                    self.batched(&job);
                }
            }
            Change::Updated { old, new } => {
                if new.metadata.deletion_timestamp.is_some() {
                    // Graceful deletion starts: a replacement may be created now, not when it is gone.
                    self.pod_deleted(new, false);
                    return;
                }
                let ns = new.metadata.namespace.as_deref().unwrap_or("");
                let finalizer_removed = !has_tracking_finalizer(new);
                let uid = new.metadata.uid.as_deref().unwrap_or("");
                let cur_ref = controller_of(&new.metadata);
                let old_ref = controller_of(&old.metadata);
                let ref_changed = cur_ref != old_ref;
                if ref_changed
                    && let Some(r) = old_ref
                    && let Some(job) = self.resolve(ns, r)
                {
                    if finalizer_removed {
                        self.finalizers.observed(&key_of(job.as_ref()), uid);
                    }
                    self.batched(&job);
                }
                if let Some(r) = cur_ref {
                    if let Some(job) = self.resolve(ns, r) {
                        if finalizer_removed {
                            self.finalizers.observed(&key_of(job.as_ref()), uid);
                        }
                        self.batched(&job);
                    }
                    return;
                }
                if has_tracking_finalizer(new) {
                    self.orphans.add(key_of(new.as_ref()));
                }
                if ref_changed || old.metadata.labels != new.metadata.labels {
                    for job in self.pod_jobs(new) {
                        self.batched(&job);
                    }
                }
            }
            Change::Deleted(pod) => self.pod_deleted(pod, true),
        }
    }

    /// A pod is gone (`final`) or its deletion started.
    fn pod_deleted(&self, pod: &Pod, final_: bool) {
        let has_finalizer = has_tracking_finalizer(pod);
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let Some(r) = controller_of(&pod.metadata) else {
            if has_finalizer {
                self.orphans.add(key_of(pod));
            }
            return;
        };
        let job = self.resolve(ns, r);
        let Some(job) = job.filter(|j| finished_type(j).is_none()) else {
            if has_finalizer {
                self.orphans.add(key_of(pod));
            }
            return;
        };
        let key = key_of(job.as_ref());
        self.expectations.deletion_observed(&key, &key_of(pod));
        if final_ || !has_finalizer {
            self.finalizers
                .observed(&key, pod.metadata.uid.as_deref().unwrap_or(""));
        }
        self.batched(&job);
    }

    fn pod_api(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn job_api(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Remove the tracking finalizer from one pod; a pod already gone counts as done.
    async fn remove_finalizer(&self, pod: &Pod) -> Result<(), kube::Error> {
        if !has_tracking_finalizer(pod) {
            return Ok(());
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        match self
            .pod_api(ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Strategic(remove_finalizer_patch()),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for JobController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        sync::sync_job(self, key).await
    }
}

/// The orphan-pod queue's reconciler (`syncOrphanPod`): removes the tracking finalizer from pods no
/// unfinished Job controls.
struct OrphanPods(Arc<JobController>);

#[async_trait::async_trait]
impl Reconciler for OrphanPods {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let c = &self.0;
        let Some(pod) = c.pods.get(key) else {
            return Ok(None);
        };
        if let Some(r) = controller_of(&pod.metadata) {
            if r.kind != "Job" || r.api_version != "batch/v1" {
                return Ok(None);
            }
            let ns = pod.metadata.namespace.as_deref().unwrap_or("");
            if let Some(job) = c.resolve(ns, r)
                && (managed_externally(&job) || finished_type(&job).is_none())
            {
                // Another controller's Job, or adopted by a running one: not ours to clean.
                return Ok(None);
            }
        }
        c.remove_finalizer(&pod).await?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_selector_falls_back_to_the_generated_one() {
        let j: Job =
            serde_json::from_value(json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"template": {}}}))
                .unwrap();
        let s = effective_selector(&j).unwrap();
        assert_eq!(s.match_labels.unwrap()[CONTROLLER_UID_LABEL], "u");
        let manual: Job = serde_json::from_value(
            json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"template": {}, "manualSelector": true}}),
        )
        .unwrap();
        assert!(effective_selector(&manual).is_none());
        let given: Job = serde_json::from_value(json!({"metadata": {"name": "j", "uid": "u"},
            "spec": {"template": {}, "selector": {"matchLabels": {"a": "b"}}}}))
        .unwrap();
        assert_eq!(
            effective_selector(&given).unwrap().match_labels.unwrap()["a"],
            "b"
        );
    }

    #[test]
    fn finished_and_managed_by() {
        let j: Job = serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": {"template": {},
            "managedBy": "example.com/other"},
            "status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                      {"type": "Complete", "status": "True"}]}}))
        .unwrap();
        assert_eq!(finished_type(&j), Some("Complete"));
        assert!(managed_externally(&j));
        let mut j2 = j.clone();
        j2.spec.as_mut().unwrap().managed_by = Some(JOB_CONTROLLER_NAME.into());
        assert!(!managed_externally(&j2));
        j2.status = None;
        assert_eq!(finished_type(&j2), None);
    }

    #[test]
    fn finalizer_expectations_are_per_job_and_pod() {
        let f = FinalizerExpectations::default();
        f.expect("ns/j", ["a".to_string(), "b".to_string()]);
        f.observed("ns/j", "a");
        assert_eq!(f.expected("ns/j"), HashSet::from(["b".to_string()]));
        f.forget("ns/j");
        assert!(f.expected("ns/j").is_empty());
    }
}
