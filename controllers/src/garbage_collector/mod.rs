//! The garbage collector (`pkg/controller/garbagecollector/`): deletes objects whose owners are gone,
//! carries out foreground deletion (`foregroundDeletion` finalizer) and orphaning (`orphan` finalizer).
//!
//! ```text
//!  discovery (every 30 s) ──► one metadata watch per listable+watchable+deletable resource (not events)
//!                                  │ add / update / delete
//!                                  ▼
//!                       graph (uid → identity, owners, dependents; virtual nodes for unseen owners)
//!                                  │ Work: UIDs to look at
//!                   ┌──────────────┴───────────────┐
//!          attemptToDelete (20 workers)     attemptToOrphan (20 workers)
//!   live GET of the item and of each owner   drop the owner's ref from each dependent,
//!   → decide::decide → patch / delete        then the `orphan` finalizer
//! ```
//!
//! Nothing is deleted on the graph's word alone: the item and each owner are fetched live first, and a
//! delete carries the item's UID (and resourceVersion) as preconditions.

pub mod decide;
pub mod graph;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use client::events::{EventType, Recorder};
use client::watch::{Event, Selector, Target};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::core::PartialObjectMeta;
use tokio_util::sync::CancellationToken;

use crate::discovery::{self, Served, ServedResource};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};
use decide::{Action, OwnerState, Propagation};
use graph::{Graph, Identity, Observed, Work};

/// kube-controller-manager `--concurrent-gc-syncs`.
pub const WORKERS: usize = 20;
/// How often discovery is run again for new kinds (upstream: 30 s).
pub const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);
/// upstream `absentOwnerCache` size.
const ABSENT_CACHE_SIZE: usize = 500;
/// How long the workers wait for the first list of every watch before they start anyway (the live GETs
/// keep them safe either way).
const SYNC_WAIT: Duration = Duration::from_secs(60);

/// Resources the collector does not watch (upstream `DefaultIgnoredResources`).
fn ignored(r: &ServedResource) -> bool {
    r.ar.plural == "events" && (r.ar.group.is_empty() || r.ar.group == "events.k8s.io")
}

/// A small LRU of owners known absent (upstream keys it by the owner's identity incl. namespace).
#[derive(Default)]
struct AbsentCache {
    set: HashSet<(String, String)>,
    order: VecDeque<(String, String)>,
}

impl AbsentCache {
    fn add(&mut self, key: (String, String)) {
        if self.set.insert(key.clone()) {
            self.order.push_back(key);
            if self.order.len() > ABSENT_CACHE_SIZE
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn has(&self, key: &(String, String)) -> bool {
        self.set.contains(key)
    }
}

/// The collector's shared state.
pub struct GarbageCollector {
    client: kube::Client,
    graph: Mutex<Graph>,
    served: RwLock<Arc<Served>>,
    absent: Mutex<AbsentCache>,
    attempt_to_delete: Arc<WorkQueue>,
    attempt_to_orphan: Arc<WorkQueue>,
    recorder: Arc<Recorder>,
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Start the collector.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let gc = Arc::new(GarbageCollector {
        client: ctx.client.clone(),
        graph: Mutex::new(Graph::default()),
        served: RwLock::new(Arc::new(Served::default())),
        absent: Mutex::new(AbsentCache::default()),
        attempt_to_delete: WorkQueue::new("garbagecollector"),
        attempt_to_orphan: WorkQueue::new("garbagecollector-orphan"),
        recorder: ctx.recorder("garbage-collector-controller"),
    });
    let informers = ctx.informers.clone();
    Box::pin(async move {
        let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
        let monitors = tokio::spawn(gc.clone().run_monitors(synced_tx, cancel.clone()));
        // Workers start once every watch has listed (upstream waits for the monitors to sync).
        let mut rx = synced_rx;
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = tokio::time::timeout(SYNC_WAIT, rx.wait_for(|s| *s)) => {}
        }
        if !cancel.is_cancelled() {
            let deleter = Arc::new(AttemptToDelete(gc.clone()));
            let orphaner = Arc::new(AttemptToOrphan(gc.clone()));
            futures_util::future::join(
                run_workers(
                    informers.clone(),
                    gc.attempt_to_delete.clone(),
                    WORKERS,
                    deleter,
                    cancel.clone(),
                ),
                run_workers(
                    informers,
                    gc.attempt_to_orphan.clone(),
                    WORKERS,
                    orphaner,
                    cancel.clone(),
                ),
            )
            .await;
        }
        let _ = monitors.await;
    })
}

impl GarbageCollector {
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn served(&self) -> Arc<Served> {
        self.served.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn queue(&self, work: Work) {
        if !work.absent.is_empty() {
            let mut a = self.absent.lock().unwrap_or_else(|e| e.into_inner());
            for id in work.absent {
                a.add((id.uid, id.namespace));
            }
        }
        for uid in work.attempt_to_delete {
            self.attempt_to_delete.add(uid);
        }
        for uid in work.attempt_to_orphan {
            self.attempt_to_orphan.add(uid);
        }
    }

    fn observe(&self, r: &ServedResource, meta: &ObjectMeta) {
        let Some(uid) = meta.uid.clone() else { return };
        let obj = Observed {
            identity: Identity {
                api_version: r.ar.api_version.clone(),
                kind: r.ar.kind.clone(),
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
                uid,
            },
            owners: meta.owner_references.clone().unwrap_or_default(),
            being_deleted: meta.deletion_timestamp.is_some(),
            deleting_dependents: decide::deleting_dependents(meta),
            orphaning: decide::orphaning(meta),
        };
        let work = self.graph().observe(obj);
        self.queue(work);
    }

    fn remove(&self, uid: &str) {
        let work = self.graph().remove(uid);
        self.queue(work);
    }

    /// Run discovery now and every [`DISCOVERY_PERIOD`], keeping one watch per resource; `synced` turns
    /// true once every watch of the first discovery has listed.
    async fn run_monitors(
        self: Arc<Self>,
        synced: tokio::sync::watch::Sender<bool>,
        cancel: CancellationToken,
    ) {
        let mut running: HashMap<(String, String, String), CancellationToken> = HashMap::new();
        let mut first = true;
        loop {
            match discovery::discover(&self.client).await {
                Ok(served) => {
                    let wanted: Vec<ServedResource> = served
                        .preferred()
                        .filter(|r| r.supports(&["list", "watch", "delete"]) && !ignored(r))
                        .cloned()
                        .collect();
                    *self.served.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(served);
                    let keys: HashSet<(String, String, String)> = wanted
                        .iter()
                        .map(|r| (r.ar.group.clone(), r.ar.version.clone(), r.ar.plural.clone()))
                        .collect();
                    running.retain(|k, token| {
                        let keep = keys.contains(k);
                        if !keep {
                            token.cancel();
                        }
                        keep
                    });
                    let mut listed = Vec::new();
                    for r in wanted {
                        let key = (r.ar.group.clone(), r.ar.version.clone(), r.ar.plural.clone());
                        if running.contains_key(&key) {
                            continue;
                        }
                        let token = cancel.child_token();
                        running.insert(key, token.clone());
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        listed.push(rx);
                        tokio::spawn(self.clone().monitor(r, tx, token));
                    }
                    if first {
                        first = false;
                        let synced = synced.clone();
                        tokio::spawn(async move {
                            futures_util::future::join_all(listed).await;
                            synced.send_replace(true);
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(DISCOVERY_PERIOD) => {}
            }
        }
    }

    /// One resource's watch (upstream `monitor`): feeds the graph; a relist's missing objects are deletes.
    async fn monitor(
        self: Arc<Self>,
        r: ServedResource,
        listed: tokio::sync::oneshot::Sender<()>,
        cancel: CancellationToken,
    ) {
        // Metadata only, as upstream's metadata informers: the graph needs owners, UIDs and finalizers.
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &r.ar);
        let target = Target::at(api.resource_url(), Selector::all()).metadata_only();
        let mut stream =
            client::watch::events::<PartialObjectMeta<DynamicObject>>(self.client.clone(), target);
        let mut known: HashSet<String> = HashSet::new();
        let mut relisted: Option<HashSet<String>> = None;
        let mut listed = Some(listed);
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return,
                n = stream.next() => n,
            };
            match next {
                Some(Ok(Event::Init)) => relisted = Some(HashSet::new()),
                Some(Ok(Event::InitApply(obj))) => {
                    if let Some(uid) = &obj.metadata.uid {
                        if let Some(seen) = relisted.as_mut() {
                            seen.insert(uid.clone());
                        }
                        known.insert(uid.clone());
                    }
                    self.observe(&r, &obj.metadata);
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(seen) = relisted.take() {
                        let gone: Vec<String> = known.difference(&seen).cloned().collect();
                        for uid in gone {
                            known.remove(&uid);
                            self.remove(&uid);
                        }
                    }
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                }
                Some(Ok(Event::Apply(obj))) => {
                    if let Some(uid) = &obj.metadata.uid {
                        known.insert(uid.clone());
                    }
                    self.observe(&r, &obj.metadata);
                }
                Some(Ok(Event::Delete(obj))) => {
                    if let Some(uid) = &obj.metadata.uid {
                        known.remove(uid);
                        self.remove(uid);
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(resource = %r.gvr_string(), error = %e, "garbage collector watch failed; retrying")
                }
                None => return,
            }
        }
    }

    /// The API of the object `identity` names, and whether its kind is namespaced.
    fn api_for(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<(Api<DynamicObject>, bool), Error> {
        let served = self.served();
        let r = served
            .resolve(api_version, kind)
            .ok_or_else(|| Error::Other(format!("unable to get REST mapping for {api_version}/{kind}")))?;
        let api = if r.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &r.ar)
        } else {
            Api::all_with(self.client.clone(), &r.ar)
        };
        Ok((api, r.namespaced))
    }

    async fn get_live(&self, id: &Identity) -> Result<Option<ObjectMeta>, Error> {
        let (api, _) = self.api_for(&id.api_version, &id.kind, &id.namespace)?;
        match api.get_metadata_opt(&id.name).await {
            Ok(m) => Ok(m.map(|m| m.metadata)),
            Err(e) => Err(e.into()),
        }
    }

    /// upstream `isDangling` for one reference of `item`.
    async fn owner_state(&self, item: &Identity, r: &OwnerReference) -> Result<OwnerState, Error> {
        let (api, namespaced) = self.api_for(&r.api_version, &r.kind, &item.namespace)?;
        if namespaced && item.namespace.is_empty() {
            // A cluster object cannot be owned by a namespaced one.
            let owner = format!(
                "[{}/{}, namespace: , name: {}, uid: {}]",
                r.api_version, r.kind, r.name, r.uid
            );
            self.recorder.emit(
                object_ref(item),
                EventType::Warning,
                "OwnerRefInvalidNamespace",
                format!("ownerRef {owner} does not exist in namespace \"\""),
            );
            return Ok(OwnerState::Dangling);
        }
        let key = (
            r.uid.clone(),
            if namespaced {
                item.namespace.clone()
            } else {
                String::new()
            },
        );
        if self.absent.lock().unwrap_or_else(|e| e.into_inner()).has(&key) {
            return Ok(OwnerState::Dangling);
        }
        let live = api.get_metadata_opt(&r.name).await?.map(|m| m.metadata);
        let state = decide::classify(r, live.as_ref());
        if state == OwnerState::Dangling {
            self.absent.lock().unwrap_or_else(|e| e.into_inner()).add(key);
        }
        Ok(state)
    }

    /// Patch `item` with a strategic-merge patch, or, where the kind has none (custom resources: 415), with
    /// the JSON merge patch `merge` computes from the live object.
    async fn patch(
        &self,
        item: &Identity,
        strategic: serde_json::Value,
        merge: impl Fn(&ObjectMeta) -> serde_json::Value,
    ) -> Result<(), Error> {
        let (api, _) = self.api_for(&item.api_version, &item.kind, &item.namespace)?;
        let pp = PatchParams::default();
        match api.patch(&item.name, &pp, &Patch::Strategic(strategic)).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) if is_status(&e, 415) => {
                let Some(live) = api.get_metadata_opt(&item.name).await? else {
                    return Ok(());
                };
                match api
                    .patch(&item.name, &pp, &Patch::Merge(merge(&live.metadata)))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if is_status(&e, 404) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// upstream `deleteObject`: UID and resourceVersion preconditions; on a conflict, again with the UID
    /// alone if the ownerReferences did not change meanwhile.
    async fn delete(&self, item: &Identity, latest: &ObjectMeta, policy: Propagation) -> Result<(), Error> {
        let (api, _) = self.api_for(&item.api_version, &item.kind, &item.namespace)?;
        let propagation = match policy {
            Propagation::Orphan => PropagationPolicy::Orphan,
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
        };
        let mut dp = DeleteParams {
            propagation_policy: Some(propagation),
            preconditions: Some(Preconditions {
                uid: Some(item.uid.clone()),
                resource_version: latest.resource_version.clone(),
            }),
            ..Default::default()
        };
        tracing::debug!(item = %item, policy = policy.as_str(), "garbage collector deleting");
        match api.delete(&item.name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) if is_status(&e, 409) => {
                let Some(live) = api.get_metadata_opt(&item.name).await?.map(|m| m.metadata) else {
                    return Ok(());
                };
                if live.uid.as_deref() != Some(item.uid.as_str()) {
                    return Ok(());
                }
                if live.owner_references != latest.owner_references {
                    return Err(Error::Other(format!(
                        "{item} changed its ownerReferences; looking again"
                    )));
                }
                dp.preconditions = Some(Preconditions {
                    uid: Some(item.uid.clone()),
                    resource_version: None,
                });
                match api.delete(&item.name, &dp).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_status(&e, 404) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// upstream `removeFinalizer`: a JSON merge patch guarded by the resourceVersion, retried on conflict.
    async fn remove_finalizer(&self, item: &Identity, finalizer: &str) -> Result<(), Error> {
        let (api, _) = self.api_for(&item.api_version, &item.kind, &item.namespace)?;
        loop {
            let Some(live) = api.get_metadata_opt(&item.name).await?.map(|m| m.metadata) else {
                return Ok(());
            };
            if live.uid.as_deref() != Some(item.uid.as_str()) {
                return Ok(());
            }
            let Some(patch) = decide::remove_finalizer_patch(&live, finalizer) else {
                return Ok(());
            };
            match api
                .patch(&item.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 404) => return Ok(()),
                Err(e) if is_status(&e, 409) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// upstream `attemptToDeleteItem`.
    async fn attempt_to_delete(&self, uid: &str) -> Result<Option<Duration>, Error> {
        let Some(node) = self.graph().get(uid).cloned() else {
            return Ok(None);
        };
        if node.being_deleted && !node.deleting_dependents {
            // A one-way trip: wait for the deletion, then look at the dependents.
            return Ok(None);
        }
        let latest = match self.get_live(&node.identity).await? {
            Some(m) if m.uid.as_deref() == Some(uid) => m,
            _ => {
                // Gone (or the name now belongs to another object): a virtual delete.
                self.remove(uid);
                return Ok(None);
            }
        };
        if node.deleting_dependents {
            return self
                .process_deleting_dependents(&node.identity)
                .await
                .map(|_| None);
        }
        let owners = latest.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return self.requeue_virtual(&node);
        }
        let mut refs = Vec::with_capacity(owners.len());
        for r in &owners {
            refs.push((r.clone(), self.owner_state(&node.identity, r).await?));
        }
        let (has_dependents, dependent_deleting) = {
            let g = self.graph();
            let deps = g.dependents(uid);
            (!deps.is_empty(), deps.iter().any(|d| d.deleting_dependents))
        };
        let finalizers = latest.finalizers.clone().unwrap_or_default();
        let item = &node.identity;
        match decide::decide(&refs, has_dependents, dependent_deleting, &finalizers) {
            Action::Nothing => {}
            Action::RemoveOwnerRefs(uids) => {
                tracing::debug!(item = %item, owners = ?uids, "garbage collector removing dangling and waiting owner references");
                let p = decide::delete_owner_refs_patch(uid, &uids);
                self.patch(item, p, |m| decide::delete_owner_refs_merge_patch(m, &uids))
                    .await?;
            }
            Action::DeleteForeground { unblock_first } => {
                if unblock_first {
                    let p = decide::unblock_patch(uid, &owners);
                    self.patch(item, p, decide::unblock_merge_patch).await?;
                }
                self.delete(item, &latest, Propagation::Foreground).await?;
            }
            Action::Delete(policy) => self.delete(item, &latest, policy).await?,
        }
        self.requeue_virtual(&node)
    }

    /// A node not yet seen through a watch is looked at again until it is (upstream: `!n.isObserved()`).
    fn requeue_virtual(&self, node: &graph::Node) -> Result<Option<Duration>, Error> {
        if node.virtual_ && self.graph().get(&node.identity.uid).is_some_and(|n| n.virtual_) {
            return Err(Error::Other(format!(
                "{} has not been observed yet",
                node.identity
            )));
        }
        Ok(None)
    }

    /// upstream `processDeletingDependentsItem`: with no blocking dependent left, drop
    /// `foregroundDeletion`; otherwise queue the blocking dependents.
    async fn process_deleting_dependents(&self, item: &Identity) -> Result<(), Error> {
        let blocking: Vec<(String, bool)> = {
            let g = self.graph();
            g.dependents(&item.uid)
                .into_iter()
                .filter(|d| decide::blocks(&d.owners, &item.uid))
                .map(|d| (d.identity.uid.clone(), d.deleting_dependents))
                .collect()
        };
        if blocking.is_empty() {
            return self.remove_finalizer(item, decide::FINALIZER_FOREGROUND).await;
        }
        for (dep, deleting) in blocking {
            if !deleting {
                self.attempt_to_delete.add(dep);
            }
        }
        Ok(())
    }

    /// upstream `attemptToOrphanWorker`: drop the owner's ref from every dependent, then `orphan`.
    async fn attempt_to_orphan(&self, uid: &str) -> Result<Option<Duration>, Error> {
        let (owner, dependents) = {
            let g = self.graph();
            let Some(owner) = g.get(uid) else {
                return Ok(None);
            };
            let deps: Vec<Identity> = g
                .dependents(uid)
                .into_iter()
                .map(|d| d.identity.clone())
                .collect();
            (owner.identity.clone(), deps)
        };
        let uids = vec![uid.to_string()];
        let mut errors = Vec::new();
        for dep in &dependents {
            let p = decide::delete_owner_refs_patch(&dep.uid, &uids);
            if let Err(e) = self
                .patch(dep, p, |m| decide::delete_owner_refs_merge_patch(m, &uids))
                .await
            {
                errors.push(format!("{dep}: {e}"));
            }
        }
        if !errors.is_empty() {
            return Err(Error::Other(format!(
                "orphaning the dependents of {owner}: {}",
                errors.join("; ")
            )));
        }
        self.remove_finalizer(&owner, decide::FINALIZER_ORPHAN).await?;
        Ok(None)
    }
}

fn object_ref(id: &Identity) -> ObjectReference {
    ObjectReference {
        api_version: Some(id.api_version.clone()),
        kind: Some(id.kind.clone()),
        namespace: (!id.namespace.is_empty()).then(|| id.namespace.clone()),
        name: Some(id.name.clone()),
        uid: Some(id.uid.clone()),
        ..Default::default()
    }
}

struct AttemptToDelete(Arc<GarbageCollector>);

#[async_trait::async_trait]
impl Reconciler for AttemptToDelete {
    async fn sync(&self, uid: &str) -> Result<Option<Duration>, Error> {
        self.0.attempt_to_delete(uid).await
    }
}

struct AttemptToOrphan(Arc<GarbageCollector>);

#[async_trait::async_trait]
impl Reconciler for AttemptToOrphan {
    async fn sync(&self, uid: &str) -> Result<Option<Duration>, Error> {
        self.0.attempt_to_orphan(uid).await
    }
}
