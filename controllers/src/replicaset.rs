//! The ReplicaSet controller (`pkg/controller/replicaset`, component `replicaset-controller`, 5 workers):
//! keeps `spec.replicas` active pods for each ReplicaSet, claiming (adopting, releasing) the pods its selector
//! matches, and reports what it sees in `status` through `/status`.
//!
//! ```text
//!  ReplicaSet / Pod informers ──handlers (owner, orphan matches, expectations)──► queue ──► sync(ns/name)
//!  sync: claim active pods ─► manage_replicas (expectations satisfied): create in slow-start batches or delete
//!        by rank::pods_to_delete ─► calculate_status (pure) ─► PUT /status when it changed
//! ```
//!
//! Creations and deletions are recorded as expectations before they are sent, and the pod handlers lower them
//! as the informer shows the results, so a lagging cache never creates or deletes twice.

pub mod rank;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use rank::{POD_DELETION_COST, deletion_order, pods_to_delete};

use crate::controller_ref::{self, Claim};
use crate::expectations::Expectations;
use crate::informer::{Cached, Change, Informer, key_of, split_key};
use crate::pod_control::{self, BURST_REPLICAS, PodControl};
use crate::{Context, Error, Reconciler, WorkQueue, podutil, selector};

/// The event source.
pub const COMPONENT: &str = "replicaset-controller";
/// `--concurrent-replicaset-syncs`.
pub const WORKERS: usize = 5;
/// `statusUpdateRetries`: one more try with a fresh GET after a failed status update.
const STATUS_UPDATE_RETRIES: usize = 1;
/// The condition type a failed create or delete sets.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// The time as the API server stores it (whole seconds), so computed conditions compare with stored ones.
pub fn now_seconds() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

/// `spec.replicas`, 1 when unset (the apps/v1 default).
pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `spec.minReadySeconds`.
pub fn min_ready_seconds(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// The ReplicaSet's status (all zero when it has none).
pub fn status(rs: &ReplicaSet) -> ReplicaSetStatus {
    rs.status.clone().unwrap_or_default()
}

/// Whether `rs`'s selector (never an empty one) matches `labels`.
pub fn selects(rs: &ReplicaSet, labels: Option<&BTreeMap<String, String>>) -> bool {
    rs.spec
        .as_ref()
        .is_some_and(|s| !selector::is_empty(&s.selector) && selector::matches(&s.selector, labels))
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// `calculateStatus`: the counters over the claimed active `pods`, and the `ReplicaFailure` condition set
/// (with `manage_error`'s text) when managing failed and there is none yet, removed once it succeeds.
pub fn calculate_status(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    manage_error: Option<&str>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut st = status(rs);
    let template_labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = min_ready_seconds(rs);
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    for p in pods {
        let labels = p.metadata.labels.as_ref();
        if template_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            fully_labeled += 1;
        }
        if podutil::is_ready(p) {
            ready += 1;
            if podutil::is_available(p, min_ready, now) {
                available += 1;
            }
        }
    }
    let has_failure = st.conditions.iter().flatten().any(|c| c.type_ == REPLICA_FAILURE);
    match manage_error {
        Some(msg) if !has_failure => {
            let diff = pods.len() as i64 - i64::from(spec_replicas(rs));
            let reason = match diff.cmp(&0) {
                std::cmp::Ordering::Less => "FailedCreate",
                std::cmp::Ordering::Greater => "FailedDelete",
                std::cmp::Ordering::Equal => "",
            };
            st.conditions
                .get_or_insert_with(Vec::new)
                .push(ReplicaSetCondition {
                    type_: REPLICA_FAILURE.to_string(),
                    status: "True".to_string(),
                    last_transition_time: Some(Time(now)),
                    reason: Some(reason.to_string()),
                    message: Some(msg.to_string()),
                });
        }
        None if has_failure => {
            let kept: Vec<_> = st
                .conditions
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.type_ != REPLICA_FAILURE)
                .collect();
            st.conditions = (!kept.is_empty()).then_some(kept);
        }
        _ => {}
    }
    st.replicas = pods.len() as i32;
    st.fully_labeled_replicas = nonzero(fully_labeled);
    st.ready_replicas = nonzero(ready);
    st.available_replicas = nonzero(available);
    st
}

/// `updateReplicaSetStatus`'s test: whether the status must be written (a counter, the conditions, or
/// `observedGeneration` differ). Returns the status to write, with `observedGeneration` set.
pub fn status_to_write(rs: &ReplicaSet, new: ReplicaSetStatus) -> Option<ReplicaSetStatus> {
    let old = status(rs);
    let generation = rs.metadata.generation.unwrap_or(0);
    let n = |v: Option<i32>| v.unwrap_or(0);
    let same = old.replicas == new.replicas
        && n(old.fully_labeled_replicas) == n(new.fully_labeled_replicas)
        && n(old.ready_replicas) == n(new.ready_replicas)
        && n(old.available_replicas) == n(new.available_replicas)
        && old.observed_generation.unwrap_or(0) == generation
        && old.conditions.clone().unwrap_or_default() == new.conditions.clone().unwrap_or_default();
    if same {
        return None;
    }
    Some(ReplicaSetStatus {
        observed_generation: (generation != 0).then_some(generation),
        ..new
    })
}

/// What one sync decides about the number of pods: create `n`, delete `n`, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manage {
    /// Create this many (at most [`BURST_REPLICAS`]).
    Create(usize),
    /// Delete this many (at most [`BURST_REPLICAS`]).
    Delete(usize),
    /// The count is right.
    Nothing,
}

/// `manageReplicas`' arithmetic: `active` pods against `replicas`, capped at 500 per sync.
pub fn manage(active: usize, replicas: i32) -> Manage {
    let diff = active as i64 - i64::from(replicas.max(0));
    match diff.cmp(&0) {
        std::cmp::Ordering::Less => Manage::Create(((-diff) as usize).min(BURST_REPLICAS)),
        std::cmp::Ordering::Greater => Manage::Delete((diff as usize).min(BURST_REPLICAS)),
        std::cmp::Ordering::Equal => Manage::Nothing,
    }
}

/// The requeue after a status write: with `minReadySeconds`, all replicas ready but not all available yet
/// means availability changes with time alone.
pub fn min_ready_requeue(rs: &ReplicaSet, st: &ReplicaSetStatus) -> Option<Duration> {
    let min_ready = min_ready_seconds(rs);
    let replicas = spec_replicas(rs);
    (min_ready > 0
        && st.ready_replicas.unwrap_or(0) == replicas
        && st.available_replicas.unwrap_or(0) != replicas)
        .then(|| Duration::from_secs(min_ready as u64))
}

/// The owner an object's controllerRef names, if it is a `kind` in `informer` with that UID
/// (`resolveControllerRef`).
pub(crate) fn resolve_owner<K>(
    informer: &Informer<K>,
    ns: &str,
    r: &OwnerReference,
    kind: &str,
) -> Option<Arc<K>>
where
    K: Cached,
{
    if r.kind != kind {
        return None;
    }
    informer
        .get_in(ns, &r.name)
        .filter(|o| o.meta().uid.as_deref() == Some(r.uid.as_str()))
}

/// The claimer in [`claim_objects`].
pub(crate) struct Claimer<'a> {
    pub(crate) api_version: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) meta: &'a ObjectMeta,
}

/// `ClaimObject` over `candidates` (`controller_ref_manager.go`): keep ours, release ours that no longer
/// match, adopt matching orphans once `recheck` (a live GET of the claimer, called at most once and only
/// before the first adoption) says the claimer is still there and not being deleted. A 404 on adopt or
/// release means the object is gone and is skipped; other errors are returned after every candidate was
/// tried, with the objects claimed so far dropped (the key is retried).
pub(crate) async fn claim_objects<K, F, Fut>(
    client: &kube::Client,
    claimer: &Claimer<'_>,
    candidates: Vec<Arc<K>>,
    matches: impl Fn(&K) -> bool,
    recheck: F,
) -> Result<Vec<Arc<K>>, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let uid = claimer.meta.uid.clone().unwrap_or_default();
    let ns = claimer.meta.namespace.clone().unwrap_or_default();
    let deleting = claimer.meta.deletion_timestamp.is_some();
    let owner = controller_ref::controller_ref(
        claimer.api_version,
        claimer.kind,
        claimer.meta.name.as_deref().unwrap_or(""),
        &uid,
    );
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    let mut recheck = Some(recheck);
    let mut can_adopt: Option<Result<(), String>> = None;
    let mut claimed = Vec::new();
    let mut first_error: Option<Error> = None;
    for obj in candidates {
        let meta = obj.meta();
        if meta.namespace.as_deref().unwrap_or("") != ns {
            continue;
        }
        let dep_uid = meta.uid.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let patch = match controller_ref::claim(meta, &uid, matches(&obj), deleting) {
            Claim::Owned => {
                claimed.push(obj);
                continue;
            }
            Claim::Ignore => continue,
            Claim::Release => controller_ref::release_patch(&uid, &dep_uid),
            Claim::Adopt => {
                if can_adopt.is_none() {
                    let f = recheck.take().expect("recheck runs once");
                    can_adopt = Some(f().await.map_err(|e| e.to_string()));
                }
                if let Some(Err(e)) = &can_adopt {
                    first_error.get_or_insert_with(|| Error::Other(format!("can't adopt {name}: {e}")));
                    continue;
                }
                controller_ref::adopt_patch(&owner, &dep_uid, &[])
            }
        };
        let adopting = patch["metadata"]["ownerReferences"][0].get("$patch").is_none();
        match api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(patched) if adopting => claimed.push(Arc::new(patched)),
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                first_error.get_or_insert(Error::Kube(e));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(claimed),
    }
}

/// The kinds the controller runs on: ReplicaSets, and ReplicationControllers through a conversion to
/// the ReplicaSet they describe (upstream's RC controller is this controller over `pkg/controller/
/// replication/conversion.go`). Every decision reads [`ReplicaSetKind::as_replica_set`]; only the writes
/// (claims, pod owners, events, status) use the kind itself.
pub trait ReplicaSetKind:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// `apps/v1` or `v1`.
    const API_VERSION: &'static str;
    /// `ReplicaSet` or `ReplicationController`.
    const KIND: &'static str;
    /// The event source.
    const COMPONENT: &'static str;
    /// The work queue's name.
    const QUEUE: &'static str;
    /// The object as the ReplicaSet it describes.
    fn as_replica_set(&self) -> Cow<'_, ReplicaSet>;
    /// The object with `status` as its status.
    fn with_status(self, status: ReplicaSetStatus) -> Self;
}

impl ReplicaSetKind for ReplicaSet {
    const API_VERSION: &'static str = "apps/v1";
    const KIND: &'static str = "ReplicaSet";
    const COMPONENT: &'static str = COMPONENT;
    const QUEUE: &'static str = "replicaset";

    fn as_replica_set(&self) -> Cow<'_, ReplicaSet> {
        Cow::Borrowed(self)
    }

    fn with_status(mut self, status: ReplicaSetStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// The controller: caches, queue, expectations, pod control.
pub struct ReplicaSetController<K: ReplicaSetKind = ReplicaSet> {
    client: kube::Client,
    replicasets: Arc<Informer<K>>,
    pods: Arc<Informer<Pod>>,
    expectations: Arc<Expectations>,
    pod_control: PodControl,
}

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    start_for::<ReplicaSet>(ctx, cancel)
}

/// The controller of the kind `K`: handlers registered, the workers' future returned.
pub fn start_for<K: ReplicaSetKind>(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new(K::QUEUE);
    let replicasets = ctx.informers.get::<K>();
    let pods = ctx.informers.get::<Pod>();
    let expectations = Arc::new(Expectations::default());
    register_handlers(&replicasets, &pods, &queue, &expectations);
    let controller = Arc::new(ReplicaSetController::<K> {
        client: ctx.client.clone(),
        replicasets,
        pods,
        expectations,
        pod_control: PodControl::new(ctx.client.clone(), ctx.recorder(K::COMPONENT)),
    });
    Box::pin(crate::run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        controller,
        cancel,
    ))
}

/// The watches of §3.1 (handlers hold the other informer weakly: the informers own the handlers).
fn register_handlers<K: ReplicaSetKind>(
    replicasets: &Arc<Informer<K>>,
    pods: &Arc<Informer<Pod>>,
    queue: &Arc<WorkQueue>,
    expectations: &Arc<Expectations>,
) {
    {
        let queue = queue.clone();
        let exp = expectations.clone();
        replicasets.on_change(move |c| match c {
            Change::Added(rs) => queue.add(key_of(rs.as_ref())),
            Change::Updated { old, new } => {
                if old.meta().uid != new.meta().uid {
                    exp.forget(&key_of(old.as_ref()));
                }
                queue.add(key_of(new.as_ref()));
            }
            Change::Deleted(rs) => {
                let key = key_of(rs.as_ref());
                exp.forget(&key);
                queue.add(key);
            }
        });
    }
    let rs_weak: Weak<Informer<K>> = Arc::downgrade(replicasets);
    let queue = queue.clone();
    let exp = expectations.clone();
    pods.on_change(move |c| {
        let Some(rss) = rs_weak.upgrade() else { return };
        let h = PodHandler {
            rss: &rss,
            queue: &queue,
            exp: &exp,
        };
        match c {
            Change::Added(p) => h.added(p),
            Change::Updated { old, new } => h.updated(old, new),
            Change::Deleted(p) => h.deleted(p),
        }
    });
}

struct PodHandler<'a, K: ReplicaSetKind> {
    rss: &'a Informer<K>,
    queue: &'a Arc<WorkQueue>,
    exp: &'a Expectations,
}

impl<K: ReplicaSetKind> PodHandler<'_, K> {
    fn owner(&self, pod: &Pod) -> Option<Arc<K>> {
        let r = controller_ref::controller_of(&pod.metadata)?;
        resolve_owner(self.rss, pod.namespace().as_deref().unwrap_or(""), r, K::KIND)
    }

    /// `getPodReplicaSets`: the ReplicaSets whose selector matches an orphan.
    fn matching(&self, pod: &Pod) -> Vec<Arc<K>> {
        let ns = pod.namespace().unwrap_or_default();
        self.rss
            .list_ns(&ns)
            .into_iter()
            .filter(|rs| selects(&rs.as_replica_set(), pod.metadata.labels.as_ref()))
            .collect()
    }

    fn added(&self, pod: &Arc<Pod>) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Restarted controller: a pod already being deleted counts as a deletion.
            self.deleted(pod);
            return;
        }
        if controller_ref::controller_of(&pod.metadata).is_some() {
            if let Some(rs) = self.owner(pod) {
                let key = key_of(rs.as_ref());
                self.exp.creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        for rs in self.matching(pod) {
            self.queue.add(key_of(rs.as_ref()));
        }
    }

    fn updated(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // The delete is observed now (graceful deletion); the old labels' owner hears of it too.
            self.deleted(new);
            if labels_changed {
                self.deleted(old);
            }
            return;
        }
        let cur_ref = controller_ref::controller_of(&new.metadata);
        let old_ref = controller_ref::controller_of(&old.metadata);
        let ref_changed = cur_ref != old_ref;
        if ref_changed
            && old_ref.is_some()
            && let Some(rs) = self.owner(old)
        {
            self.queue.add(key_of(rs.as_ref()));
        }
        if cur_ref.is_some() {
            let Some(rs) = self.owner(new) else { return };
            let key = key_of(rs.as_ref());
            self.queue.add(key.clone());
            let min_ready = min_ready_seconds(&rs.as_replica_set());
            if !podutil::is_ready(old) && podutil::is_ready(new) && min_ready > 0 {
                // Availability comes with time: look again once it has passed (+1 s for clock skew).
                self.queue
                    .add_after(key, Duration::from_secs(min_ready as u64 + 1));
            }
            return;
        }
        if labels_changed || ref_changed {
            for rs in self.matching(new) {
                self.queue.add(key_of(rs.as_ref()));
            }
        }
    }

    fn deleted(&self, pod: &Arc<Pod>) {
        let Some(rs) = self.owner(pod) else { return };
        let key = key_of(rs.as_ref());
        self.exp.deletion_observed(&key, &key_of(pod.as_ref()));
        self.queue.add(key);
    }
}

impl<K: ReplicaSetKind> ReplicaSetController<K> {
    /// `getIndirectlyRelatedPods`: the pods of every ReplicaSet with the same controller (none when it has
    /// no controller), each once.
    fn related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<Pod>> {
        let Some(ctrl) = controller_ref::controller_of(&rs.metadata) else {
            return Vec::new();
        };
        let ns = rs.namespace().unwrap_or_default();
        let pods = self.pods.list_ns(&ns);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for sibling in self.replicasets.list_ns(&ns) {
            let sibling = sibling.as_replica_set();
            if controller_ref::controller_of(&sibling.metadata).map(|r| &r.uid) != Some(&ctrl.uid) {
                continue;
            }
            for p in pods
                .iter()
                .filter(|p| selects(&sibling, p.metadata.labels.as_ref()))
            {
                if seen.insert(p.metadata.uid.clone()) {
                    out.push(p.clone());
                }
            }
        }
        out
    }

    async fn claim_pods(&self, rs: &ReplicaSet, active: Vec<Arc<Pod>>) -> Result<Vec<Arc<Pod>>, Error> {
        let claimer = Claimer {
            api_version: K::API_VERSION,
            kind: K::KIND,
            meta: &rs.metadata,
        };
        let ns = rs.namespace().unwrap_or_default();
        let name = rs.name_any();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let client = self.client.clone();
        claim_objects(
            &self.client,
            &claimer,
            active,
            |p: &Pod| selects(rs, p.metadata.labels.as_ref()),
            || async move {
                let fresh = Api::<K>::namespaced(client, &ns).get(&name).await?;
                recheck(&fresh, &ns, &name, &uid, K::KIND)
            },
        )
        .await
    }

    async fn manage_replicas(&self, rs: &ReplicaSet, pods: &[Arc<Pod>], key: &str) -> Result<(), Error> {
        let ns = rs.namespace().unwrap_or_default();
        let rs_ref = pod_control::object_ref(K::API_VERSION, K::KIND, &rs.metadata);
        match manage(pods.len(), spec_replicas(rs)) {
            Manage::Nothing => Ok(()),
            Manage::Create(n) => {
                let owner = controller_ref::controller_ref(
                    K::API_VERSION,
                    K::KIND,
                    &rs.name_any(),
                    rs.metadata.uid.as_deref().unwrap_or(""),
                );
                let template = rs
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.clone())
                    .unwrap_or_default();
                let pod = pod_control::pod_from_template(&template, &ns, &owner);
                self.expectations.expect_creations(key, n);
                let (ok, err) = pod_control::slow_start_batch(n, |_| {
                    let pod = &pod;
                    let rs_ref = &rs_ref;
                    async move {
                        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
                            return Err(Error::Other("unable to create pods, no labels".into()));
                        }
                        match self.pod_control.create(pod, rs_ref).await {
                            Ok(_) => Ok(()),
                            // All later creates fail the same way; nothing to do (upstream swallows it).
                            Err(e) if pod_control::is_namespace_terminating(&e) => Ok(()),
                            Err(e) => Err(Error::Kube(e)),
                        }
                    }
                })
                .await;
                self.expectations.lower_creations(key, n - ok);
                err.map_or(Ok(()), Err)
            }
            Manage::Delete(n) => {
                let related = self.related_pods(rs);
                let doomed = rank::pods_to_delete(pods, &related, n, Timestamp::now());
                self.expectations
                    .expect_deletions(key, doomed.iter().map(|p| key_of(p.as_ref())));
                let results = futures_util::future::join_all(doomed.iter().map(|p| {
                    let rs_ref = &rs_ref;
                    let ns = &ns;
                    async move {
                        let name = p.name_any();
                        match self.pod_control.delete(ns, &name, None, rs_ref).await {
                            Ok(()) => Ok(()),
                            // Already gone: its delete event may have come before the expectation.
                            Err(kube::Error::Api(s)) if s.code == 404 => {
                                self.expectations.deletion_observed(key, &key_of(p.as_ref()));
                                Ok(())
                            }
                            Err(e) => {
                                self.expectations.deletion_observed(key, &key_of(p.as_ref()));
                                Err(e)
                            }
                        }
                    }
                }))
                .await;
                match results.into_iter().find_map(Result::err) {
                    Some(e) => Err(Error::Kube(e)),
                    None => Ok(()),
                }
            }
        }
    }

    /// `updateReplicaSetStatus`: PUT `/status` when it changed, once more from a fresh GET on failure.
    /// Returns the status now stored.
    async fn update_status(&self, obj: &K, new: ReplicaSetStatus) -> Result<ReplicaSetStatus, Error> {
        let rs = obj.as_replica_set();
        let Some(st) = status_to_write(&rs, new) else {
            return Ok(status(&rs));
        };
        let api: Api<K> = Api::namespaced(self.client.clone(), &rs.namespace().unwrap_or_default());
        let name = rs.name_any();
        let mut current = obj.clone();
        let mut attempt = 0;
        loop {
            let body = current.with_status(st.clone());
            match api.replace_status(&name, &PostParams::default(), &body).await {
                Ok(written) => return Ok(status(&written.as_replica_set())),
                Err(e) if attempt >= STATUS_UPDATE_RETRIES => return Err(Error::Kube(e)),
                Err(_) => {
                    attempt += 1;
                    current = api.get(&name).await?;
                }
            }
        }
    }
}

/// `RecheckDeletionTimestamp`: the live owner must be the one we cached and not be going away.
pub(crate) fn recheck<K: Resource>(
    fresh: &K,
    ns: &str,
    name: &str,
    uid: &str,
    kind: &str,
) -> Result<(), Error> {
    let fresh_uid = fresh.meta().uid.as_deref().unwrap_or("");
    if fresh_uid != uid {
        return Err(Error::Other(format!(
            "original {kind} {ns}/{name} is gone: got uid {fresh_uid}, wanted {uid}"
        )));
    }
    if let Some(t) = &fresh.meta().deletion_timestamp {
        return Err(Error::Other(format!(
            "{ns}/{name} has just been deleted at {}",
            t.0
        )));
    }
    Ok(())
}

#[async_trait::async_trait]
impl<K: ReplicaSetKind> Reconciler for ReplicaSetController<K> {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(obj) = self.replicasets.get(key) else {
            self.expectations.forget(key);
            return Ok(None);
        };
        let rs = obj.as_replica_set();
        let needs_sync = self.expectations.satisfied(key);
        let (ns, _) = split_key(key);
        let active: Vec<Arc<Pod>> = self
            .pods
            .list_ns(ns)
            .into_iter()
            .filter(|p| podutil::is_active(p))
            .collect();
        let owned = self.claim_pods(&rs, active).await?;
        let manage_error = if needs_sync && rs.metadata.deletion_timestamp.is_none() {
            self.manage_replicas(&rs, &owned, key).await.err()
        } else {
            None
        };
        let message = manage_error.as_ref().map(|e| match e {
            Error::Kube(k) => pod_control::api_message(k),
            other => other.to_string(),
        });
        let new_status = calculate_status(&rs, &owned, message.as_deref(), now_seconds());
        let written = self.update_status(&obj, new_status).await?;
        if let Some(e) = manage_error {
            return Err(e);
        }
        Ok(min_ready_requeue(&rs, &written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use serde_json::json;

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "rs-uid", "generation": 2},
            "spec": {
                "replicas": replicas,
                "minReadySeconds": min_ready,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}, "spec": {"containers": [{"name": "c"}]}}
            },
            "status": {"replicas": 0, "observedGeneration": 2}
        }))
        .unwrap()
    }

    fn pod(labels: serde_json::Value, ready_since: Option<Timestamp>) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": "p", "labels": labels}, "status": {"phase": "Running"}});
        if let Some(t) = ready_since {
            v["status"]["conditions"] =
                json!([{"type": "Ready", "status": "True", "lastTransitionTime": Time(t)}]);
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn manage_creates_or_deletes_the_difference_capped_at_the_burst() {
        assert_eq!(manage(0, 3), Manage::Create(3));
        assert_eq!(manage(5, 3), Manage::Delete(2));
        assert_eq!(manage(3, 3), Manage::Nothing);
        assert_eq!(manage(0, 10_000), Manage::Create(500));
        assert_eq!(manage(2000, 0), Manage::Delete(500));
    }

    #[test]
    fn status_counts_labels_readiness_and_availability() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let long_ago = now - SignedDuration::from_secs(30);
        let just_now = now - SignedDuration::from_secs(2);
        let r = rs(3, 10);
        let pods = vec![
            pod(json!({"app": "web", "tier": "front"}), Some(long_ago)),
            pod(json!({"app": "web", "tier": "front"}), Some(just_now)),
            pod(json!({"app": "web"}), None),
        ];
        let st = calculate_status(&r, &pods, None, now);
        assert_eq!(st.replicas, 3);
        assert_eq!(st.fully_labeled_replicas, Some(2));
        assert_eq!(st.ready_replicas, Some(2));
        assert_eq!(
            st.available_replicas,
            Some(1),
            "minReadySeconds 10 has passed for one"
        );
        assert!(st.conditions.is_none());
        let empty = calculate_status(&r, &[], None, now);
        assert_eq!(
            (empty.ready_replicas, empty.available_replicas),
            (None, None),
            "zero counters are omitted as upstream's omitempty"
        );
    }

    #[test]
    fn replica_failure_is_set_once_and_removed_after_success() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut r = rs(3, 0);
        let st = calculate_status(&r, &[], Some("pods \"x\" is forbidden: quota"), now);
        let c = &st.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_deref()),
            ("ReplicaFailure", "True", Some("FailedCreate"))
        );
        assert_eq!(c.message.as_deref(), Some("pods \"x\" is forbidden: quota"));
        r.status = Some(st.clone());
        let later = now + SignedDuration::from_secs(60);
        let again = calculate_status(&r, &[], Some("other"), later);
        assert_eq!(
            again.conditions, st.conditions,
            "an existing failure is kept as it is"
        );
        let ok = calculate_status(&r, &[], None, later);
        assert!(ok.conditions.is_none());
        let too_many = rs(0, 0);
        let st = calculate_status(&too_many, &[pod(json!({"app": "web"}), None)], Some("e"), now);
        assert_eq!(st.conditions.unwrap()[0].reason.as_deref(), Some("FailedDelete"));
    }

    #[test]
    fn status_is_written_only_when_something_changed() {
        let mut r = rs(1, 0);
        let now = Timestamp::now();
        let same = calculate_status(&r, &[], None, now);
        assert!(status_to_write(&r, same.clone()).is_none());
        r.metadata.generation = Some(3);
        let st = status_to_write(&r, same).expect("generation moved");
        assert_eq!(st.observed_generation, Some(3));
        let more = calculate_status(&r, &[pod(json!({"app": "web"}), None)], None, now);
        assert!(status_to_write(&r, more).is_some());
    }

    #[test]
    fn min_ready_seconds_requeues_while_ready_pods_are_not_yet_available() {
        let mut r = rs(2, 5);
        let st = ReplicaSetStatus {
            replicas: 2,
            ready_replicas: Some(2),
            available_replicas: Some(1),
            ..Default::default()
        };
        assert_eq!(min_ready_requeue(&r, &st), Some(Duration::from_secs(5)));
        let all = ReplicaSetStatus {
            available_replicas: Some(2),
            ..st.clone()
        };
        assert_eq!(min_ready_requeue(&r, &all), None);
        r.spec.as_mut().unwrap().min_ready_seconds = Some(0);
        assert_eq!(min_ready_requeue(&r, &st), None);
    }

    #[test]
    fn an_empty_selector_selects_nothing() {
        let mut r = rs(1, 0);
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(selects(&r, Some(&labels)));
        r.spec.as_mut().unwrap().selector = Default::default();
        assert!(!selects(&r, Some(&labels)));
    }

    #[test]
    fn the_recheck_refuses_a_recreated_or_dying_owner() {
        let r = rs(1, 0);
        assert!(recheck(&r, "ns", "web", "rs-uid", "ReplicaSet").is_ok());
        let e = recheck(&r, "ns", "web", "other", "ReplicaSet").unwrap_err();
        assert_eq!(
            e.to_string(),
            "original ReplicaSet ns/web is gone: got uid rs-uid, wanted other"
        );
        let mut dying = r.clone();
        dying.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        assert!(
            recheck(&dying, "ns", "web", "rs-uid", "ReplicaSet")
                .unwrap_err()
                .to_string()
                .contains("has just been deleted at")
        );
    }
}
