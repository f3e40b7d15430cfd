//! The Deployment controller (`pkg/controller/deployment`, component `deployment-controller`, 5 workers,
//! a key dropped after 15 retries): rolls a Deployment's pod template out through ReplicaSets named
//! `<deployment>-<pod-template-hash>`, scales them proportionally, keeps revisionHistoryLimit old ones, and
//! reports status and conditions.
//!
//! ```text
//!  Deployment / ReplicaSet / Pod(delete) informers ──handlers──► queue ──► sync(ns/name)
//!  sync: claim ReplicaSets ─► paused conditions ─► paused or scaling event: sync::proportional
//!                                               ─► rollback annotation: rollback::plan
//!                                               ─► RollingUpdate: rolling::{reconcile_new, reconcile_old}
//!                                               ─► Recreate: recreate::{scale_down_old, old_pods_running}
//!        ─► sync::cleanup ─► progress::rollout_status ─► PUT /status (annotations included)
//! ```
//!
//! Every decision is a pure function in the submodules; this module reads the caches, runs them in
//! upstream's order and makes the writes. Objects this sync wrote replace their cached copies for the rest
//! of the sync, so one pass does not trip over its own writes; a stale cache otherwise only costs a 409
//! and a retry, and the deterministic ReplicaSet name means a lagging cache can never create two.

pub mod progress;
pub mod recreate;
pub mod rollback;
pub mod rolling;
pub mod sync;
pub mod util;

#[cfg(test)]
mod simulate;

use std::sync::{Arc, Weak};
use std::time::Duration;

use client::events::EventType;
use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

use self::recreate::PodMap;
use self::sync::{NewRs, Via};
use crate::controller_ref;
use crate::informer::{Change, Informer, key_of};
use crate::pod_control::{self, api_message};
use crate::replicaset::{Claimer, claim_objects, now_seconds, recheck, resolve_owner, spec_replicas};
use crate::{Context, Error, Reconciler, WorkQueue, selector};

/// The event source.
pub const COMPONENT: &str = "deployment-controller";
/// `--concurrent-deployment-syncs`.
pub const WORKERS: usize = 5;

/// The controller.
pub struct DeploymentController {
    client: kube::Client,
    deployments: Arc<Informer<Deployment>>,
    replicasets: Arc<Informer<ReplicaSet>>,
    pods: Arc<Informer<Pod>>,
    recorder: Arc<client::events::Recorder>,
}

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("deployment");
    // deployment_controller.go: maxRetries = 15, then the key waits for its next event.
    queue.set_max_retries(15);
    let deployments = ctx.informers.get::<Deployment>();
    let replicasets = ctx.informers.get::<ReplicaSet>();
    let pods = ctx.informers.get::<Pod>();
    register_handlers(&deployments, &replicasets, &pods, &queue);
    let controller = Arc::new(DeploymentController {
        client: ctx.client.clone(),
        deployments,
        replicasets,
        pods,
        recorder: ctx.recorder(COMPONENT),
    });
    Box::pin(crate::run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        controller,
        cancel,
    ))
}

/// `GetDeploymentsForReplicaSet`: the Deployments whose (non-empty) selector matches an orphan's labels.
fn deployments_matching(deployments: &Informer<Deployment>, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
    let labels = rs.metadata.labels.as_ref();
    if labels.is_none_or(|l| l.is_empty()) {
        return Vec::new();
    }
    deployments
        .list_ns(&rs.namespace().unwrap_or_default())
        .into_iter()
        .filter(|d| {
            d.spec
                .as_ref()
                .is_some_and(|s| !selector::is_empty(&s.selector) && selector::matches(&s.selector, labels))
        })
        .collect()
}

fn owner_deployment(deployments: &Informer<Deployment>, rs: &ReplicaSet) -> Option<Arc<Deployment>> {
    let r = controller_ref::controller_of(&rs.metadata)?;
    resolve_owner(deployments, &rs.namespace().unwrap_or_default(), r, "Deployment")
}

/// The watches of §2.1.
fn register_handlers(
    deployments: &Arc<Informer<Deployment>>,
    replicasets: &Arc<Informer<ReplicaSet>>,
    pods: &Arc<Informer<Pod>>,
    queue: &Arc<WorkQueue>,
) {
    {
        let queue = queue.clone();
        deployments.on_change(move |c| queue.add(key_of(c.object().as_ref())));
    }
    {
        let queue = queue.clone();
        let ds: Weak<Informer<Deployment>> = Arc::downgrade(deployments);
        replicasets.on_change(move |c| {
            let Some(ds) = ds.upgrade() else { return };
            let enqueue = |d: Arc<Deployment>| queue.add(key_of(d.as_ref()));
            let by_owner_or_selector = |rs: &ReplicaSet| {
                if controller_ref::controller_of(&rs.metadata).is_some() {
                    if let Some(d) = owner_deployment(&ds, rs) {
                        enqueue(d);
                    }
                } else {
                    deployments_matching(&ds, rs).into_iter().for_each(enqueue);
                }
            };
            match c {
                Change::Added(rs) => by_owner_or_selector(rs),
                Change::Deleted(rs) => {
                    if let Some(d) = owner_deployment(&ds, rs) {
                        enqueue(d);
                    }
                }
                Change::Updated { old, new } => {
                    let cur_ref = controller_ref::controller_of(&new.metadata);
                    let old_ref = controller_ref::controller_of(&old.metadata);
                    let ref_changed = cur_ref != old_ref;
                    if ref_changed
                        && old_ref.is_some()
                        && let Some(d) = owner_deployment(&ds, old)
                    {
                        enqueue(d);
                    }
                    if cur_ref.is_some() {
                        if let Some(d) = owner_deployment(&ds, new) {
                            enqueue(d);
                        }
                        return;
                    }
                    if ref_changed || old.metadata.labels != new.metadata.labels {
                        deployments_matching(&ds, new).into_iter().for_each(enqueue);
                    }
                }
            }
        });
    }
    // A deleted pod matters only to Recreate, and only once the Deployment has no pods left.
    let queue = queue.clone();
    let ds: Weak<Informer<Deployment>> = Arc::downgrade(deployments);
    let rss: Weak<Informer<ReplicaSet>> = Arc::downgrade(replicasets);
    let pods_weak: Weak<Informer<Pod>> = Arc::downgrade(pods);
    pods.on_change(move |c| {
        let Change::Deleted(pod) = c else { return };
        let (Some(ds), Some(rss), Some(pods)) = (ds.upgrade(), rss.upgrade(), pods_weak.upgrade()) else {
            return;
        };
        let ns = pod.namespace().unwrap_or_default();
        let Some(rs) = controller_ref::controller_of(&pod.metadata)
            .and_then(|r| resolve_owner(&rss, &ns, r, "ReplicaSet"))
        else {
            return;
        };
        let Some(d) = owner_deployment(&ds, &rs) else {
            return;
        };
        if util::strategy_type(&d) != "Recreate" {
            return;
        }
        let owned: Vec<Arc<ReplicaSet>> = rss
            .list_ns(&ns)
            .into_iter()
            .filter(|rs| {
                controller_ref::controller_of(&rs.metadata).map(|r| &r.uid) == d.metadata.uid.as_ref()
            })
            .collect();
        if pod_map(&d, &owned, &pods.list_ns(&ns))
            .values()
            .all(Vec::is_empty)
        {
            queue.add(key_of(d.as_ref()));
        }
    });
}

/// `getPodMapForDeployment`: the pods the selector matches, by the UID of their controlling ReplicaSet
/// among `rss` (every ReplicaSet has an entry, maybe empty).
fn pod_map(d: &Deployment, rss: &[Arc<ReplicaSet>], pods: &[Arc<Pod>]) -> PodMap {
    let mut map: PodMap = rss
        .iter()
        .map(|rs| (rs.metadata.uid.clone().unwrap_or_default(), Vec::new()))
        .collect();
    let Some(sel) = d.spec.as_ref().map(|s| &s.selector) else {
        return map;
    };
    for p in pods
        .iter()
        .filter(|p| selector::matches(sel, p.metadata.labels.as_ref()))
    {
        if let Some(r) = controller_ref::controller_of(&p.metadata)
            && let Some(list) = map.get_mut(&r.uid)
        {
            list.push(p.clone());
        }
    }
    map
}

/// One sync of one Deployment: what it has read, and what it has written so far.
struct Pass<'a> {
    c: &'a DeploymentController,
    /// The Deployment as stored (for main-resource writes), newest version seen.
    stored: Deployment,
    /// The same with the apps/v1 defaults filled in: what decisions read.
    d: Deployment,
    /// The owned ReplicaSets, with this pass's writes applied.
    rss: Vec<Arc<ReplicaSet>>,
    dref: ObjectReference,
    now: Timestamp,
}

impl Pass<'_> {
    fn ns(&self) -> String {
        self.d.namespace().unwrap_or_default()
    }

    fn rs_api(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.c.client.clone(), &self.ns())
    }

    fn event(&self, ty: EventType, reason: &'static str, message: String) {
        self.c.recorder.emit(self.dref.clone(), ty, reason, message);
    }

    /// Replace (or add) a ReplicaSet this pass wrote.
    fn remember(&mut self, rs: ReplicaSet) -> Arc<ReplicaSet> {
        let rs = Arc::new(rs);
        match self.rss.iter_mut().find(|r| r.metadata.uid == rs.metadata.uid) {
            Some(slot) => *slot = rs.clone(),
            None => self.rss.push(rs.clone()),
        }
        rs
    }

    /// The newest copies of `list` (by UID).
    fn fresh(&self, list: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
        list.iter()
            .map(|rs| {
                self.rss
                    .iter()
                    .find(|r| r.metadata.uid == rs.metadata.uid)
                    .cloned()
                    .unwrap_or_else(|| rs.clone())
            })
            .collect()
    }

    fn fresh_one(&self, rs: Option<&Arc<ReplicaSet>>) -> Option<Arc<ReplicaSet>> {
        rs.map(|r| self.fresh(std::slice::from_ref(r)).remove(0))
    }

    fn all(&self, new: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
        let mut all = self.fresh(old);
        all.extend(self.fresh_one(new));
        all
    }

    /// PUT `/status` with `d` (its annotations are kept by the API server, so the revision rides along).
    async fn write_status(&mut self, d: &Deployment) -> Result<(), Error> {
        let api: Api<Deployment> = Api::namespaced(self.c.client.clone(), &self.ns());
        let mut body = self.stored.clone();
        body.metadata.annotations = d.metadata.annotations.clone();
        body.status = d.status.clone();
        let written = api
            .replace_status(&self.d.name_any(), &PostParams::default(), &body)
            .await?;
        self.d = util::with_defaults(&written);
        self.stored = written;
        Ok(())
    }

    async fn write_status_only(&mut self, st: DeploymentStatus) -> Result<(), Error> {
        let mut d = self.d.clone();
        d.status = Some(st);
        self.write_status(&d).await
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created when `create`) and all old ones.
    async fn new_and_old(
        &mut self,
        create: bool,
    ) -> Result<(Option<Arc<ReplicaSet>>, Vec<Arc<ReplicaSet>>), Error> {
        let old = util::find_old(&self.d, &self.rss);
        match sync::plan_new_rs(&self.d, &self.rss, &old, create, self.now) {
            NewRs::Missing => Ok((None, old)),
            NewRs::Update(rs) => {
                let written = self
                    .rs_api()
                    .replace(&rs.name_any(), &PostParams::default(), &rs)
                    .await?;
                Ok((Some(self.remember(written)), old))
            }
            NewRs::Found { rs, write } => {
                if let Some(d) = write {
                    self.write_status(&d).await?;
                }
                Ok((Some(rs), old))
            }
            NewRs::Create { rs, revision } => {
                let created = self.create_rs(rs, revision).await?;
                Ok((Some(created), old))
            }
        }
    }

    async fn create_rs(&mut self, rs: ReplicaSet, revision: i64) -> Result<Arc<ReplicaSet>, Error> {
        let name = rs.name_any();
        let wanted = spec_replicas(&rs);
        let (created, already_existed) = match self.rs_api().create(&PostParams::default(), &rs).await {
            Ok(created) => (created, false),
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {
                let existing = match self.c.replicasets.get_in(&self.ns(), &name) {
                    Some(rs) => (*rs).clone(),
                    None => self.rs_api().get(&name).await?,
                };
                let ours = controller_ref::controller_of(&existing.metadata).map(|r| &r.uid)
                    == self.d.metadata.uid.as_ref();
                let template = self
                    .d
                    .spec
                    .as_ref()
                    .map(|s| s.template.clone())
                    .unwrap_or_default();
                if !(ours && util::equal_ignore_hash(&template, &util::rs_template(&existing))) {
                    // A hash collision: count it, so the next try gets another name.
                    let bumped = sync::with_collision(&self.d);
                    let _ = self.write_status(&bumped).await;
                    return Err(Error::Kube(kube::Error::Api(s)));
                }
                (existing, true)
            }
            Err(e) if pod_control::is_namespace_terminating(&e) => return Err(Error::Kube(e)),
            Err(e) => {
                let (msg, write) = sync::create_failed(&self.d, &name, &api_message(&e), self.now);
                if let Some(d) = write {
                    let _ = self.write_status(&d).await;
                }
                self.event(EventType::Warning, util::FAILED_RS_CREATE, msg);
                return Err(Error::Kube(e));
            }
        };
        if !already_existed && wanted > 0 {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                sync::scaling_message("up", &name, 0, wanted),
            );
        }
        let created = self.remember(created);
        if let Some(d) = sync::after_create(&self.d, &name, revision, already_existed, self.now) {
            self.write_status(&d).await?;
        }
        Ok(created)
    }

    /// `scaleReplicaSetAndRecordEvent` (`Via::SizeOnly`) or `scaleReplicaSet` (`Via::Always`): returns
    /// whether the size changed.
    async fn scale(&mut self, name: &str, to: i32, via: Via) -> Result<bool, Error> {
        let Some(rs) = self
            .rss
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .cloned()
        else {
            return Ok(false);
        };
        let from = spec_replicas(&rs);
        let op = match via {
            Via::SizeOnly if from == to => return Ok(false),
            Via::SizeOnly if from < to => "up",
            Via::SizeOnly => "down",
            Via::Always(op) => op,
        };
        let Some(copy) = sync::scaled_rs(&rs, to, &self.d) else {
            return Ok(false);
        };
        let written = self.rs_api().replace(name, &PostParams::default(), &copy).await?;
        self.remember(written);
        if from != to {
            self.event(
                EventType::Normal,
                "ScalingReplicaSet",
                sync::scaling_message(op, name, from, to),
            );
        }
        Ok(from != to)
    }

    /// `cleanupDeployment`.
    async fn cleanup(&mut self, old: &[Arc<ReplicaSet>]) -> Result<(), Error> {
        for rs in sync::cleanup(&self.d, &self.fresh(old)) {
            match self
                .rs_api()
                .delete(&rs.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        Ok(())
    }

    /// `syncDeploymentStatus`: write the computed status when it differs (Progressing left alone).
    async fn sync_status(
        &mut self,
        new: Option<&Arc<ReplicaSet>>,
        old: &[Arc<ReplicaSet>],
    ) -> Result<(), Error> {
        let all = self.all(new, old);
        let new = self.fresh_one(new);
        let st = sync::calculate_status(&all, new.as_ref(), &self.d, self.now);
        if self.d.status.clone().unwrap_or_default() != st {
            self.write_status_only(st).await?;
        }
        Ok(())
    }

    /// `syncRolloutStatus`; returns the requeue for the progress deadline.
    async fn rollout_status(
        &mut self,
        new: Option<&Arc<ReplicaSet>>,
        old: &[Arc<ReplicaSet>],
    ) -> Result<Option<Duration>, Error> {
        let all = self.all(new, old);
        let new = self.fresh_one(new);
        let r = progress::rollout_status(&self.d, &all, new.as_ref(), self.now);
        if let Some(st) = r.write {
            self.write_status_only(st).await?;
        }
        Ok(r.requeue)
    }

    /// `sync`: scaling only (paused, or a scaling event), then cleanup when paused, then status.
    async fn sync_scaling(&mut self) -> Result<Option<Duration>, Error> {
        let (new, old) = self.new_and_old(false).await?;
        for step in sync::proportional(&self.d, new.as_ref(), &old) {
            self.scale(&step.name, step.to, step.via).await?;
        }
        if util::paused(&self.d) && util::rollback_to(&self.d).is_none() {
            self.cleanup(&old).await?;
        }
        self.sync_status(new.as_ref(), &old).await?;
        Ok(None)
    }

    /// `rolloutRolling`.
    async fn rollout_rolling(&mut self) -> Result<Option<Duration>, Error> {
        let (new, old) = self.new_and_old(true).await?;
        let new_rs = new
            .clone()
            .ok_or_else(|| Error::Other("no new replica set".into()))?;
        let all = self.all(Some(&new_rs), &old);
        if let Some(to) = rolling::reconcile_new(&self.d, &all, &new_rs).map_err(Error::Other)?
            && self.scale(&new_rs.name_any(), to, Via::SizeOnly).await?
        {
            return self.rollout_status(new.as_ref(), &old).await;
        }
        let new_rs = self.fresh_one(Some(&new_rs)).expect("present");
        let all = self.all(Some(&new_rs), &old);
        let old_active = util::active(&self.fresh(&old));
        let mut scaled_down = false;
        for (name, to) in rolling::reconcile_old(&self.d, &all, &old_active, &new_rs) {
            match self.scale(&name, to, Via::SizeOnly).await {
                Ok(s) => scaled_down |= s,
                Err(e) => {
                    // Upstream swallows errors here and carries on with the status.
                    tracing::debug!(deployment = %self.d.name_any(), error = %e, "scaling down an old replica set failed");
                    scaled_down = false;
                    break;
                }
            }
        }
        if scaled_down {
            return self.rollout_status(new.as_ref(), &old).await;
        }
        if util::complete(&self.d, &util::dstatus(&self.d)) {
            self.cleanup(&old).await?;
        }
        self.rollout_status(new.as_ref(), &old).await
    }

    /// `rolloutRecreate`.
    async fn rollout_recreate(&mut self, pods: &PodMap) -> Result<Option<Duration>, Error> {
        let (mut new, mut old) = self.new_and_old(false).await?;
        let mut scaled = false;
        for name in recreate::scale_down_old(&old) {
            scaled |= self.scale(&name, 0, Via::SizeOnly).await?;
        }
        if scaled {
            return self.rollout_status(new.as_ref(), &old).await;
        }
        if recreate::old_pods_running(new.as_ref(), &self.fresh(&old), pods) {
            return self.rollout_status(new.as_ref(), &old).await;
        }
        if new.is_none() {
            (new, old) = self.new_and_old(true).await?;
        }
        if let Some(rs) = &new {
            let to = util::replicas(&self.d);
            self.scale(&rs.name_any(), to, Via::SizeOnly).await?;
        }
        if util::complete(&self.d, &util::dstatus(&self.d)) {
            self.cleanup(&old).await?;
        }
        self.rollout_status(new.as_ref(), &old).await
    }

    /// `rollback` (the deprecated annotation).
    async fn rollback(&mut self, to: i64) -> Result<Option<Duration>, Error> {
        let (new, old) = self.new_and_old(true).await?;
        let all = self.all(new.as_ref(), &old);
        let plan = rollback::plan(&self.d, &all, to);
        let (normal, reason, message) = plan.event.clone();
        let mut body = self.stored.clone();
        if let Some((template, annotations)) = plan.change {
            if let Some(spec) = body.spec.as_mut() {
                spec.template = template;
            }
            body.metadata.annotations = Some(annotations);
        }
        if let Some(a) = body.metadata.annotations.as_mut() {
            a.remove(util::ROLLBACK_TO);
        }
        let api: Api<Deployment> = Api::namespaced(self.c.client.clone(), &self.ns());
        let result = api
            .replace(&self.d.name_any(), &PostParams::default(), &body)
            .await;
        if !normal {
            self.event(EventType::Warning, reason, message);
        } else if result.is_ok() {
            self.event(EventType::Normal, reason, message);
        }
        result?;
        Ok(None)
    }
}

impl DeploymentController {
    /// `getReplicaSetsForDeployment`: claim the namespace's ReplicaSets by selector.
    async fn claim(&self, d: &Deployment) -> Result<Vec<Arc<ReplicaSet>>, Error> {
        let ns = d.namespace().unwrap_or_default();
        let name = d.name_any();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let sel = d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        let client = self.client.clone();
        claim_objects(
            &self.client,
            &Claimer {
                api_version: "apps/v1",
                kind: "Deployment",
                meta: &d.metadata,
            },
            self.replicasets.list_ns(&ns),
            |rs: &ReplicaSet| selector::matches(&sel, rs.metadata.labels.as_ref()),
            || async move {
                let fresh = Api::<Deployment>::namespaced(client, &ns).get(&name).await?;
                recheck(&fresh, &ns, &name, &uid, "Deployment")
            },
        )
        .await
    }
}

#[async_trait::async_trait]
impl Reconciler for DeploymentController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(cached) = self.deployments.get(key) else {
            return Ok(None);
        };
        let mut pass = Pass {
            c: self,
            stored: (*cached).clone(),
            d: util::with_defaults(&cached),
            rss: Vec::new(),
            dref: pod_control::object_ref("apps/v1", "Deployment", &cached.metadata),
            now: now_seconds(),
        };
        let sel = pass
            .d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        if selector::is_empty(&sel) {
            pass.event(
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.".into(),
            );
            let st = util::dstatus(&pass.d);
            let generation = pass.d.metadata.generation.unwrap_or(0);
            if st.observed_generation.unwrap_or(0) < generation {
                pass.write_status_only(DeploymentStatus {
                    observed_generation: Some(generation),
                    ..st
                })
                .await?;
            }
            return Ok(None);
        }
        pass.rss = self.claim(&pass.d).await?;
        let pods = pod_map(&pass.d, &pass.rss, &self.pods.list_ns(&pass.ns()));
        if pass.d.metadata.deletion_timestamp.is_some() {
            let (new, old) = pass.new_and_old(false).await?;
            pass.sync_status(new.as_ref(), &old).await?;
            return Ok(None);
        }
        if let Some(st) = progress::paused_conditions(&pass.d, pass.now) {
            pass.write_status_only(st).await?;
        }
        if util::paused(&pass.d) {
            return pass.sync_scaling().await;
        }
        if let Some(to) = util::rollback_to(&pass.d) {
            return pass.rollback(to).await;
        }
        let (new, old) = pass.new_and_old(false).await?;
        if sync::is_scaling_event(&pass.d, pass.fresh_one(new.as_ref()).as_ref(), &pass.fresh(&old)) {
            return pass.sync_scaling().await;
        }
        match util::strategy_type(&pass.d) {
            "Recreate" => pass.rollout_recreate(&pods).await,
            "RollingUpdate" => pass.rollout_rolling().await,
            other => Err(Error::Other(format!(
                "unexpected deployment strategy type: {other}"
            ))),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Merge `patch` into `base` (null removes).
    pub(crate) fn merge(base: &mut Value, patch: Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        b.remove(&k);
                    } else {
                        merge(b.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (b, p) => *b = p,
        }
    }

    /// The Deployment `ns/web` (3 replicas, app=web, image i:1) with `v` merged in and defaults applied.
    pub(crate) fn deployment(v: Value) -> Deployment {
        let mut base = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
            }
        });
        merge(&mut base, v);
        util::with_defaults(&serde_json::from_value(base).unwrap())
    }

    /// A ReplicaSet `name` of that Deployment (its template, uid = name) with `replicas` and `v` merged in.
    pub(crate) fn rs(name: &str, replicas: i32, v: Value) -> ReplicaSet {
        let mut base = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid", "controller": true}]},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
            },
            "status": {"replicas": 0}
        });
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn the_pod_map_groups_matching_pods_by_their_replica_set() {
        let d = deployment(json!({}));
        let a = Arc::new(rs("a", 1, json!({})));
        let pod = |owner: &str, app: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "p", "labels": {"app": app},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": true}]}}))
                .unwrap(),
            )
        };
        let map = pod_map(&d, &[a], &[pod("a", "web"), pod("a", "other"), pod("zz", "web")]);
        assert_eq!(map.len(), 1);
        assert_eq!(map["a"].len(), 1);
    }
}
