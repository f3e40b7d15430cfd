//! The TTL-after-finished controller (`pkg/controller/ttlafterfinished/`, component
//! `ttl-after-finished-controller`): deletes a finished Job `spec.ttlSecondsAfterFinished` seconds after its
//! `Complete` or `Failed` condition's transition, re-queueing itself for that moment (no polling). Before it
//! deletes, a live GET re-checks the TTL; the DELETE is Foreground (the pods go first, through the garbage
//! collector) with the Job's UID as precondition. It emits no events.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer, key_of, split_key};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// kube-controller-manager `--concurrent-ttl-after-finished-syncs`.
pub const WORKERS: usize = 5;

/// When a Job's TTL expires: `None` unless it has a TTL, is finished and not being deleted.
pub fn expiry(job: &Job) -> Option<Timestamp> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?;
    let at = finished.last_transition_time.as_ref()?.0;
    Some(at + SignedDuration::from_secs(i64::from(ttl)))
}

/// What to do with a Job at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Nothing (no TTL, not finished, or being deleted).
    Keep,
    /// Look again after this long.
    Wait(Duration),
    /// The TTL has expired.
    Expired,
}

/// `processTTL`'s decision.
pub fn decide(job: &Job, now: Timestamp) -> Ttl {
    match expiry(job) {
        None => Ttl::Keep,
        Some(at) if at <= now => Ttl::Expired,
        Some(at) => Ttl::Wait(now.duration_until(at).unsigned_abs()),
    }
}

struct TtlController {
    client: kube::Client,
    jobs: Arc<Informer<Job>>,
}

/// Start the controller.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("ttl_jobs_to_delete");
    let jobs = ctx.informers.get::<Job>();
    let q = queue.clone();
    jobs.on_change(move |change| match change {
        Change::Added(j) | Change::Updated { new: j, .. } => {
            if expiry(j).is_some() {
                q.add(key_of(j.as_ref()));
            }
        }
        Change::Deleted(_) => {}
    });
    let r = Arc::new(TtlController {
        client: ctx.client.clone(),
        jobs,
    });
    let informers = ctx.informers.clone();
    Box::pin(run_workers(informers, queue, WORKERS, r, cancel))
}

#[async_trait::async_trait]
impl Reconciler for TtlController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(job) = self.jobs.get(key) else {
            return Ok(None);
        };
        match decide(&job, Timestamp::now()) {
            Ttl::Keep => return Ok(None),
            Ttl::Wait(d) => return Ok(Some(d)),
            Ttl::Expired => {}
        }
        // The cached TTL may be stale: check the live object before deleting.
        let (ns, name) = split_key(key);
        let api: Api<Job> = Api::namespaced(self.client.clone(), ns);
        let fresh = match api.get(name).await {
            Ok(j) => j,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match decide(&fresh, Timestamp::now()) {
            Ttl::Keep => return Ok(None),
            Ttl::Wait(d) => return Ok(Some(d)),
            Ttl::Expired => {}
        }
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn job(ttl: Option<i32>, cond: Option<(&str, &str)>, deleting: bool) -> Job {
        let mut v = json!({"metadata": {"name": "j", "namespace": "ns"},
                           "spec": {"template": {}, "ttlSecondsAfterFinished": ttl}, "status": {}});
        if let Some((t, s)) = cond {
            v["status"]["conditions"] =
                json!([{"type": t, "status": s, "lastTransitionTime": ts(0).to_string()}]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!(ts(1).to_string());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn jobs_expire_ttl_seconds_after_their_terminal_condition() {
        let cases = [
            (
                job(Some(5), Some(("Complete", "True")), false),
                ts(2),
                Ttl::Wait(Duration::from_secs(3)),
            ),
            (
                job(Some(5), Some(("Complete", "True")), false),
                ts(5),
                Ttl::Expired,
            ),
            (job(Some(0), Some(("Failed", "True")), false), ts(0), Ttl::Expired),
            (
                job(Some(5), Some(("SuccessCriteriaMet", "True")), false),
                ts(9),
                Ttl::Keep,
            ),
            (job(Some(5), Some(("Complete", "False")), false), ts(9), Ttl::Keep),
            (job(None, Some(("Complete", "True")), false), ts(9), Ttl::Keep),
            (job(Some(5), Some(("Complete", "True")), true), ts(9), Ttl::Keep),
        ];
        for (i, (j, now, want)) in cases.into_iter().enumerate() {
            assert_eq!(decide(&j, now), want, "case {i}");
        }
    }
}
