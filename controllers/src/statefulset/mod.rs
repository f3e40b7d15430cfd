//! The StatefulSet controller (`pkg/controller/statefulset/`), component `statefulset-controller`: pods
//! `<set>-<ordinal>` with stable identity and storage, created in order (OrderedReady) or all at once
//! (Parallel), scaled down from the highest ordinal, rolled one pod at a time in reverse order down to the
//! partition, revisions kept as ControllerRevisions.
//!
//! ```text
//! StatefulSet / Pod / PVC events ──► queue ──► sync(ns/name)
//!    claim revisions and pods (adopt / release) → find or create the update revision
//!    → control::plan (pure) → run its groups of creates/deletes/fixes → write status → trim history
//! ```

pub mod control;
pub mod identity;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::controller_ref::{self, Claim};
use crate::informer::{Change, Informer, key_of, split_key};
use crate::pod_control::{api_message, object_ref, slow_start_batch};
use crate::{Context, Error, Reconciler, WorkQueue, history, podutil, run_workers, selector};
use control::{Action, Inputs, UpdateRevision};

/// The component events are written as.
pub const COMPONENT: &str = "statefulset-controller";
/// `--concurrent-statefulset-syncs`.
pub const WORKERS: usize = 5;

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("statefulset");
    let sets = ctx.informers.get::<StatefulSet>();
    let pods = ctx.informers.get::<Pod>();
    let revisions = ctx.informers.get::<ControllerRevision>();
    let claims = ctx.informers.get::<PersistentVolumeClaim>();
    revisions.want();

    let q = queue.clone();
    sets.on_change(move |c| q.add(key_of(c.object().as_ref())));

    let (q, s) = (queue.clone(), sets.clone());
    pods.on_change(move |c| pod_changed(&s, &q, c));

    // A stale claim (one a previous pod owned) blocks a pod until the GC removes it.
    let (q, s) = (queue.clone(), sets.clone());
    claims.on_change(move |c| {
        if let Change::Deleted(claim) = c {
            let ns = claim.metadata.namespace.as_deref().unwrap_or("");
            for set in matching_sets(&s, ns, claim.metadata.labels.as_ref()) {
                q.add(key_of(set.as_ref()));
            }
        }
    });

    let controller = Arc::new(StatefulSetController {
        client: ctx.client.clone(),
        recorder: ctx.recorder(COMPONENT),
        sets,
        pods,
        revisions,
        claims,
    });
    Box::pin(run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        controller,
        cancel,
    ))
}

/// The sets in `ns` whose selector matches `labels` (an empty selector matches nothing).
fn matching_sets(
    sets: &Informer<StatefulSet>,
    ns: &str,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Vec<Arc<StatefulSet>> {
    sets.list_ns(ns)
        .into_iter()
        .filter(|s| {
            s.spec.as_ref().is_some_and(|sp| {
                !selector::is_empty(&sp.selector) && selector::matches(&sp.selector, labels)
            })
        })
        .collect()
}

/// The set a controller reference names, if it is still that set.
fn resolve(sets: &Informer<StatefulSet>, ns: &str, r: &OwnerReference) -> Option<Arc<StatefulSet>> {
    if r.kind != "StatefulSet" {
        return None;
    }
    sets.get_in(ns, &r.name)
        .filter(|s| s.metadata.uid.as_deref() == Some(r.uid.as_str()))
}

/// `addPod` / `updatePod` / `deletePod`: the owner, or for orphans every matching set.
fn pod_changed(sets: &Informer<StatefulSet>, queue: &Arc<WorkQueue>, change: &Change<'_, Pod>) {
    let pod = change.object();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let owner = controller_ref::controller_of(&pod.metadata);
    match change {
        Change::Added(_) | Change::Deleted(_) => match owner {
            Some(r) => {
                if let Some(s) = resolve(sets, ns, r) {
                    queue.add(key_of(s.as_ref()));
                }
            }
            None if matches!(change, Change::Added(_)) => {
                for s in matching_sets(sets, ns, pod.metadata.labels.as_ref()) {
                    queue.add(key_of(s.as_ref()));
                }
            }
            None => {}
        },
        Change::Updated { old, new } => {
            let old_owner = controller_ref::controller_of(&old.metadata);
            if old_owner.map(|r| &r.uid) != owner.map(|r| &r.uid)
                && let Some(s) = old_owner.and_then(|r| resolve(sets, ns, r))
            {
                queue.add(key_of(s.as_ref()));
            }
            match owner {
                Some(r) => {
                    if let Some(s) = resolve(sets, ns, r) {
                        let key = key_of(s.as_ref());
                        let min_ready = s.spec.as_ref().and_then(|sp| sp.min_ready_seconds).unwrap_or(0);
                        if !podutil::is_ready(old) && podutil::is_ready(new) && min_ready > 0 {
                            queue.add_after(key.clone(), Duration::from_secs(min_ready as u64 + 1));
                        }
                        queue.add(key);
                    }
                }
                None => {
                    if old.metadata.labels != new.metadata.labels || old_owner.is_some() {
                        for s in matching_sets(sets, ns, new.metadata.labels.as_ref()) {
                            queue.add(key_of(s.as_ref()));
                        }
                    }
                }
            }
        }
    }
}

struct StatefulSetController {
    client: kube::Client,
    recorder: Arc<Recorder>,
    sets: Arc<Informer<StatefulSet>>,
    pods: Arc<Informer<Pod>>,
    revisions: Arc<Informer<ControllerRevision>>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
}

fn name_of(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or("")
}

fn set_ref(set: &StatefulSet) -> ObjectReference {
    object_ref("apps/v1", "StatefulSet", &set.metadata)
}

fn gone_or_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

#[async_trait::async_trait]
impl Reconciler for StatefulSetController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(set) = self.sets.get(key) else {
            return Ok(None);
        };
        let (ns, _) = split_key(key);
        let Some(spec) = set.spec.as_ref() else {
            return Ok(None);
        };
        let owner = identity::owner_ref(&set);
        let deleting = set.metadata.deletion_timestamp.is_some();

        let mut revisions = history::claim_revisions(
            &self.client,
            self.revisions.list_ns(ns),
            &spec.selector,
            &owner,
            deleting,
        )
        .await?;
        history::sort_revisions(&mut revisions);
        let pods = self.claim_pods(&set, ns).await?;

        // getStatefulSetRevisions
        let mut collision_count = set.status.as_ref().and_then(|s| s.collision_count).unwrap_or(0);
        let update = match control::find_update_revision(&set, &revisions, collision_count) {
            UpdateRevision::Newest(i) => (*revisions[i]).clone(),
            UpdateRevision::Renumber(i, n) => {
                history::set_revision_number(&self.client, &revisions[i], n).await?
            }
            UpdateRevision::Create(rev) => {
                let revision = rev.revision;
                history::create_revision(&self.client, *rev, &mut collision_count, |cc| {
                    let r = control::revision_for(&set, revision, cc);
                    let hash = r
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(history::HASH_LABEL).cloned());
                    (r.metadata.name.unwrap_or_default(), hash.unwrap_or_default())
                })
                .await?
            }
        };
        let current_name = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.clone())
            .unwrap_or_default();
        let current = revisions
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(current_name.as_str()))
            .map(|r| (**r).clone())
            .unwrap_or_else(|| update.clone());

        let claims: HashMap<String, Arc<PersistentVolumeClaim>> = self
            .claims
            .list_ns(ns)
            .into_iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
            .collect();
        let plan = control::plan(&Inputs {
            set: &set,
            pods: &pods,
            claims: &claims,
            current: &current,
            update: &update,
            collision_count,
            now: jiff::Timestamp::now(),
        });

        let mut failure = None;
        for group in &plan.groups {
            let (_, err) = slow_start_batch(group.len(), |i| self.perform(&set, &claims, &group[i])).await;
            if let Some(e) = err {
                failure = Some(e);
                break;
            }
        }
        if plan.write_status {
            let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
            match api
                .patch_status(
                    name_of(&set),
                    &PatchParams::default(),
                    &Patch::Merge(&plan.status.patch()),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if gone_or_conflict(&e) => {}
                Err(e) => failure = failure.or(Some(e.into())),
            }
        }

        // truncateHistory: revisions that neither the status nor any pod uses, beyond the limit.
        let mut live: HashSet<String> = pods
            .iter()
            .map(|p| identity::pod_revision(p).to_string())
            .collect();
        live.insert(current.metadata.name.clone().unwrap_or_default());
        live.insert(update.metadata.name.clone().unwrap_or_default());
        let limit = spec.revision_history_limit.unwrap_or(10);
        let old = history::to_truncate(&revisions, &live, limit);
        if let Err(e) = history::delete_revisions(&self.client, ns, &old).await {
            failure = failure.or(Some(e));
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(plan.requeue),
        }
    }
}

impl StatefulSetController {
    /// `getPodsForStatefulSet`: the namespace's pods matched by selector and name, adopting orphans and
    /// releasing ours that no longer match.
    async fn claim_pods(&self, set: &StatefulSet, ns: &str) -> Result<Vec<Arc<Pod>>, Error> {
        let spec = set.spec.as_ref().expect("checked by the caller");
        let owner = identity::owner_ref(set);
        let deleting = set.metadata.deletion_timestamp.is_some();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let mut owned = Vec::new();
        let mut may_adopt: Option<bool> = None;
        for pod in self.pods.list_ns(ns) {
            let matches = !selector::is_empty(&spec.selector)
                && selector::matches(&spec.selector, pod.metadata.labels.as_ref())
                && identity::is_member_of(set, &pod);
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            match controller_ref::claim(&pod.metadata, &owner.uid, matches, deleting) {
                Claim::Owned => owned.push(pod),
                Claim::Adopt => {
                    if may_adopt.is_none() {
                        may_adopt = Some(self.still_current(set, ns).await);
                    }
                    if may_adopt != Some(true) {
                        continue;
                    }
                    let patch = controller_ref::adopt_patch(&owner, &uid, &[]);
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                    {
                        Ok(p) => owned.push(Arc::new(p)),
                        Err(e) if gone_or_conflict(&e) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Claim::Release => {
                    let patch = controller_ref::release_patch(&owner.uid, &uid);
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if gone_or_conflict(&e) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Claim::Ignore => {}
            }
        }
        Ok(owned)
    }

    /// `RecheckDeletionTimestamp`: a live read shows the same set, not being deleted.
    async fn still_current(&self, set: &StatefulSet, ns: &str) -> bool {
        let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
        match api.get(name_of(set)).await {
            Ok(fresh) => {
                fresh.metadata.uid == set.metadata.uid && fresh.metadata.deletion_timestamp.is_none()
            }
            Err(_) => false,
        }
    }

    fn pod_event(&self, set: &StatefulSet, verb: &str, pod: &str, err: Option<&str>) {
        let (ty, reason, message) = match err {
            None => (
                EventType::Normal,
                match verb {
                    "create" => "SuccessfulCreate",
                    "delete" => "SuccessfulDelete",
                    _ => "SuccessfulUpdate",
                },
                format!("{verb} Pod {pod} in StatefulSet {} successful", name_of(set)),
            ),
            Some(e) => (
                EventType::Warning,
                match verb {
                    "create" => "FailedCreate",
                    "delete" => "FailedDelete",
                    _ => "FailedUpdate",
                },
                format!(
                    "{verb} Pod {pod} in StatefulSet {} failed error: {e}",
                    name_of(set)
                ),
            ),
        };
        self.recorder.emit(set_ref(set), ty, reason, message);
    }

    /// `createPersistentVolumeClaims`: create each claim, with upstream's claim events. An AlreadyExists
    /// (the cache was behind) counts as made.
    async fn create_claims(
        &self,
        set: &StatefulSet,
        pod: &str,
        claims: &[PersistentVolumeClaim],
    ) -> Result<Vec<PersistentVolumeClaim>, String> {
        let ns = set.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let mut errors = Vec::new();
        let mut made = Vec::new();
        for claim in claims {
            let cname = claim.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), claim).await {
                Ok(c) => {
                    made.push(c);
                    self.recorder.emit(
                        set_ref(set),
                        EventType::Normal,
                        "SuccessfulCreate",
                        format!(
                            "create Claim {cname} Pod {pod} in StatefulSet {} success",
                            name_of(set)
                        ),
                    );
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    let msg = api_message(&e);
                    self.recorder.emit(
                        set_ref(set),
                        EventType::Warning,
                        "FailedCreate",
                        format!(
                            "create Claim {cname} for Pod {pod} in StatefulSet {} failed error: {msg}",
                            name_of(set)
                        ),
                    );
                    errors.push(format!("failed to create PVC {cname}: {msg}"));
                }
            }
        }
        if errors.is_empty() {
            Ok(made)
        } else {
            Err(errors.join(", "))
        }
    }

    /// Set a claim's ownerReferences (the retention policy).
    async fn set_claim_refs(
        &self,
        ns: &str,
        claim: &str,
        refs: &[OwnerReference],
    ) -> Result<(), kube::Error> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"metadata": {"ownerReferences": refs}});
        match api
            .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn perform(
        &self,
        set: &StatefulSet,
        cached_claims: &HashMap<String, Arc<PersistentVolumeClaim>>,
        action: &Action,
    ) -> Result<(), Error> {
        let ns = set.metadata.namespace.as_deref().unwrap_or("default");
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match action {
            Action::Create {
                pod,
                missing_claims,
                blocked,
            } => {
                let pname = pod.metadata.name.clone().unwrap_or_default();
                if let Some(b) = blocked {
                    self.pod_event(set, "create", &pname, Some(b));
                    return Err(Error::Other(b.clone()));
                }
                let made = match self.create_claims(set, &pname, missing_claims).await {
                    Ok(made) => made,
                    Err(e) => {
                        self.pod_event(set, "create", &pname, Some(&e));
                        return Err(Error::Other(e));
                    }
                };
                let created = match pods.create(&PostParams::default(), pod).await {
                    Ok(p) => p,
                    Err(kube::Error::Api(s)) if s.code == 409 => return Err(kube::Error::Api(s).into()),
                    Err(e) => {
                        self.pod_event(set, "create", &pname, Some(&api_message(&e)));
                        return Err(e.into());
                    }
                };
                // Set the claims' owner references as far as possible now that the pod has a UID.
                for (_, c) in identity::claims_for(set, identity::ordinal_of(&created)) {
                    let cname = c.metadata.name.clone().unwrap_or_default();
                    let claim = made
                        .iter()
                        .find(|m| m.metadata.name.as_deref() == Some(cname.as_str()))
                        .cloned()
                        .or_else(|| cached_claims.get(&cname).map(|c| (**c).clone()));
                    let Some(claim) = claim else { continue };
                    if let Some(refs) = identity::claim_refs_for_policy(set, &created, &claim)
                        && let Err(e) = self.set_claim_refs(ns, &cname, &refs).await
                    {
                        self.pod_event(set, "update", &pname, Some(&api_message(&e)));
                        return Err(e.into());
                    }
                }
                self.pod_event(set, "create", &pname, None);
                Ok(())
            }
            Action::Delete { name, uid } => {
                let dp = DeleteParams {
                    preconditions: (!uid.is_empty()).then(|| Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match pods.delete(name, &dp).await {
                    Ok(_) => {
                        self.pod_event(set, "delete", name, None);
                        Ok(())
                    }
                    Err(e) if gone_or_conflict(&e) => Ok(()),
                    Err(e) => {
                        self.pod_event(set, "delete", name, Some(&api_message(&e)));
                        Err(e.into())
                    }
                }
            }
            Action::Fix {
                pod_name,
                missing_claims,
                labels,
                claim_refs,
                pod_update,
            } => {
                if let Err(e) = self.create_claims(set, pod_name, missing_claims).await {
                    if *pod_update {
                        self.pod_event(set, "update", pod_name, Some(&e));
                    }
                    return Err(Error::Other(e));
                }
                for (claim, refs) in claim_refs {
                    if let Err(e) = self.set_claim_refs(ns, claim, refs).await {
                        self.pod_event(set, "update", pod_name, Some(&api_message(&e)));
                        return Err(e.into());
                    }
                }
                if let Some(labels) = labels {
                    let patch = json!({"metadata": {"labels": labels}});
                    if let Err(e) = pods
                        .patch(pod_name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        self.pod_event(set, "update", pod_name, Some(&api_message(&e)));
                        return Err(e.into());
                    }
                }
                if *pod_update {
                    self.pod_event(set, "update", pod_name, None);
                }
                Ok(())
            }
        }
    }
}
