//! The resource quota controller (`pkg/controller/resourcequota`): keeps each ResourceQuota's `status`
//! (`hard` = `spec.hard`, `used` = what the namespace's objects use) current. The API server's quota
//! admission charges creates as they happen; this controller gives back what deletions and finished pods
//! release, and recounts everything on a quota's creation or spec change and every five minutes.
//!
//! ```text
//!  ResourceQuota informer (new quota, spec.hard changed) ─┐
//!  Pod informer (deleted, or stops counting: terminal)    ├─► queue (quota keys) ──► sync(ns/name)
//!  Service / PVC / ConfigMap / Secret / RC deleted         ┘
//!  sync: objects of every kind a hard resource counts (pods from the cache, the rest listed through
//!        discovery) ─► api::quota::total_usage (pure) ─► PUT /status when hard or used changed
//! ```

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ReplicationController, ResourceQuota, ResourceQuotaStatus, Secret,
    Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::discovery::{Served, discover};
use crate::informer::{Cached, Change, Informer, key_of};
use crate::{Context, Error, Reconciler, WorkQueue};
use api::quota;

/// `--concurrent-resource-quota-syncs`.
pub const WORKERS: usize = 5;
/// `--resource-quota-sync-period`: every quota is recounted this often.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Whether a stored status already says `hard` and `used` (compared by value, as `quota.Equals`).
pub fn status_current(quota_obj: &Value, used: &quota::ResourceList) -> bool {
    let hard = quota::resource_list(quota_obj.pointer("/spec/hard"));
    let st_hard = quota::resource_list(quota_obj.pointer("/status/hard"));
    let st_used = quota::resource_list(quota_obj.pointer("/status/used"));
    quota_obj.pointer("/status/hard").is_some()
        && quota::equal(&hard, &st_hard)
        && quota::equal(used, &st_used)
}

/// The `(group, plural)` of every kind a quota's hard resources count.
pub fn counted_kinds(quota_obj: &Value) -> BTreeSet<(String, String)> {
    quota_obj
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| quota::counted_kind(k))
        .collect()
}

struct QuotaController {
    client: kube::Client,
    quotas: Arc<Informer<ResourceQuota>>,
    pods: Arc<Informer<Pod>>,
    served: Mutex<Option<Served>>,
}

/// Enqueue every quota of `ns`.
fn enqueue_ns(quotas: &Weak<Informer<ResourceQuota>>, queue: &WorkQueue, ns: &str) {
    if let Some(quotas) = quotas.upgrade() {
        for q in quotas.list_ns(ns) {
            queue.add(key_of(q.as_ref()));
        }
    }
}

/// Replenish on deletions of `K` (the kinds whose count is usually limited).
fn on_delete<K>(ctx: &Context, quotas: &Arc<Informer<ResourceQuota>>, queue: &Arc<WorkQueue>)
where
    K: Cached,
{
    let weak = Arc::downgrade(quotas);
    let q = queue.clone();
    ctx.informers.get::<K>().on_change(move |c| {
        if let Change::Deleted(o) = c {
            enqueue_ns(&weak, &q, o.meta().namespace.as_deref().unwrap_or(""));
        }
    });
}

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("resourcequota_primary");
    let quotas = ctx.informers.get::<ResourceQuota>();
    {
        let q = queue.clone();
        quotas.on_change(move |c| match c {
            Change::Added(rq) => q.add(key_of(rq.as_ref())),
            // Status changes are this controller's and the admission's own: only a new spec recounts.
            Change::Updated { old, new } => {
                let hard = |r: &ResourceQuota| {
                    quota::resource_list(
                        serde_json::to_value(r.spec.as_ref().and_then(|s| s.hard.as_ref()))
                            .ok()
                            .as_ref(),
                    )
                };
                if !quota::equal(&hard(old), &hard(new)) {
                    q.add(key_of(new.as_ref()));
                }
            }
            Change::Deleted(_) => {}
        });
    }
    let pods = ctx.informers.get::<Pod>();
    {
        let weak = Arc::downgrade(&quotas);
        let q = queue.clone();
        pods.on_change(move |c| {
            let ns = |p: &Pod| p.namespace().unwrap_or_default();
            match c {
                Change::Deleted(p) => enqueue_ns(&weak, &q, &ns(p)),
                Change::Updated { old, new } => {
                    let now = jiff::Timestamp::now();
                    let counts = |p: &Pod| serde_json::to_value(p).is_ok_and(|v| quota::pod_counts(&v, now));
                    if counts(old) != counts(new) {
                        enqueue_ns(&weak, &q, &ns(new));
                    }
                }
                Change::Added(_) => {}
            }
        });
    }
    on_delete::<Service>(ctx, &quotas, &queue);
    on_delete::<PersistentVolumeClaim>(ctx, &quotas, &queue);
    on_delete::<ConfigMap>(ctx, &quotas, &queue);
    on_delete::<Secret>(ctx, &quotas, &queue);
    on_delete::<ReplicationController>(ctx, &quotas, &queue);
    let r = Arc::new(QuotaController {
        client: ctx.client.clone(),
        quotas,
        pods,
        served: Mutex::new(None),
    });
    Box::pin(crate::run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        r,
        cancel,
    ))
}

impl QuotaController {
    /// The objects of `(group, plural)` in `ns`, as JSON: pods from the cache, the rest listed.
    async fn objects(&self, ns: &str, group: &str, plural: &str) -> Result<Vec<Value>, Error> {
        if (group, plural) == ("", "pods") {
            return Ok(self
                .pods
                .list_ns(ns)
                .iter()
                .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
                .collect());
        }
        let find = |s: &Served| {
            s.preferred()
                .find(|r| r.ar.group == group && r.ar.plural == plural && r.namespaced)
                .map(|r| r.ar.clone())
        };
        let cached = self
            .served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(find);
        let ar = match cached {
            Some(ar) => ar,
            None => {
                let served = discover(&self.client).await?;
                let found = find(&served);
                *self.served.lock().unwrap_or_else(|e| e.into_inner()) = Some(served);
                // A kind the server does not serve has no objects.
                let Some(ar) = found else { return Ok(Vec::new()) };
                ar
            }
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let list = api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }
}

#[async_trait::async_trait]
impl Reconciler for QuotaController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(rq) = self.quotas.get(key) else {
            return Ok(None);
        };
        let ns = rq.namespace().unwrap_or_default();
        let value = serde_json::to_value(rq.as_ref()).map_err(|e| Error::Other(e.to_string()))?;
        let mut objects: Vec<(String, String, Vec<Value>)> = Vec::new();
        for (group, plural) in counted_kinds(&value) {
            let items = self.objects(&ns, &group, &plural).await?;
            objects.push((group, plural, items));
        }
        let now = jiff::Timestamp::now();
        let used = quota::total_usage(
            &value,
            objects
                .iter()
                .flat_map(|(g, p, items)| items.iter().map(move |o| (g.as_str(), p.as_str(), o))),
            now,
        );
        if !status_current(&value, &used) {
            let mut body = rq.as_ref().clone();
            body.status = Some(ResourceQuotaStatus {
                hard: rq.spec.as_ref().and_then(|s| s.hard.clone()),
                used: Some(
                    used.iter()
                        .map(|(k, v)| (k.clone(), Quantity(v.canonical())))
                        .collect(),
                ),
            });
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &ns);
            api.replace_status(&rq.name_any(), &PostParams::default(), &body)
                .await?;
        }
        Ok(Some(RESYNC))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_kinds_to_count_come_from_the_hard_resources() {
        let q = json!({"spec": {"hard": {"pods": "2", "requests.cpu": "1", "count/deployments.apps": "1", "services.nodeports": "0"}}});
        let kinds: Vec<(String, String)> = counted_kinds(&q).into_iter().collect();
        assert_eq!(
            kinds,
            vec![
                ("".into(), "pods".into()),
                ("".into(), "services".into()),
                ("apps".into(), "deployments".into())
            ]
        );
    }

    #[test]
    fn the_status_is_current_when_hard_and_used_say_the_same_values() {
        let used = quota::resource_list(Some(&json!({"pods": "1"})));
        let q = json!({"spec": {"hard": {"pods": "2"}}, "status": {"hard": {"pods": "2"}, "used": {"pods": "1"}}});
        assert!(status_current(&q, &used));
        let q = json!({"spec": {"hard": {"pods": "3"}}, "status": {"hard": {"pods": "2"}, "used": {"pods": "1"}}});
        assert!(!status_current(&q, &used), "spec.hard moved");
        let q = json!({"spec": {"hard": {"pods": "2"}}});
        assert!(!status_current(&q, &used), "no status yet");
    }
}
