//! Taint-based eviction (`pkg/controller/tainteviction`): a pod on a node with a NoExecute taint it does not
//! tolerate is deleted at once; one that tolerates every such taint for a limited time is deleted after the
//! shortest `tolerationSeconds`, counted from when the controller first saw the taint; the deletion is
//! cancelled if the taint goes. Before deleting, the pod gets the `DisruptionTarget` condition.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use client::events::{EventType, Recorder, pod_ref};
use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::informer::Informer;
use crate::{Context, podutil};

/// When a pod must go, given the NoExecute taints of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Nothing to do: no NoExecute taint, or every one tolerated forever.
    Never,
    /// A taint is not tolerated.
    Now,
    /// Every taint tolerated, the shortest for this long.
    After(Duration),
}

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    crate::scheduler::tolerates(std::slice::from_ref(t), taint)
}

/// Upstream's `GetMatchingTolerations` + `getMinTolerationTime` over the NoExecute taints (pure): for each
/// taint the first toleration that tolerates it; the shortest `tolerationSeconds` among those (≤ 0: now;
/// none with seconds: never).
pub fn eviction(tolerations: &[Toleration], taints: &[Taint]) -> Eviction {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if no_execute.is_empty() {
        return Eviction::Never;
    }
    let mut used: Vec<&Toleration> = Vec::new();
    for taint in no_execute {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return Eviction::Now,
        }
    }
    let mut shortest: Option<i64> = None;
    for secs in used.iter().filter_map(|t| t.toleration_seconds) {
        if secs <= 0 {
            return Eviction::Now;
        }
        shortest = Some(shortest.map_or(secs, |s| s.min(secs)));
    }
    match shortest {
        None => Eviction::Never,
        Some(s) => Eviction::After(Duration::from_secs(s as u64)),
    }
}

struct Evictor {
    client: kube::Client,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
    recorder: Arc<Recorder>,
    /// Pods with a scheduled eviction: uid → when.
    scheduled: HashMap<String, Instant>,
}

impl Evictor {
    /// One pass; returns when the next scheduled eviction is due.
    async fn pass(&mut self) -> Option<Instant> {
        let now = Instant::now();
        // Only NoExecute taints matter. With none anywhere and no eviction pending there is nothing to do:
        // this pass runs on every pod change, and walking every pod each time made a Deployment of 10,000
        // simulated pods quadratic.
        let tainted: HashMap<String, Vec<Taint>> = self
            .nodes
            .list()
            .iter()
            .filter_map(|n| {
                let taints: Vec<Taint> = (n.spec.as_ref()?.taints.as_ref()?.iter())
                    .filter(|t| t.effect == "NoExecute")
                    .cloned()
                    .collect();
                (!taints.is_empty()).then(|| (n.metadata.name.clone().unwrap_or_default(), taints))
            })
            .collect();
        if tainted.is_empty() && self.scheduled.is_empty() {
            return None;
        }
        let mut keep: HashMap<String, Instant> = HashMap::new();
        for pod in self.pods.list() {
            if !podutil::is_active(&pod) {
                continue;
            }
            let node_name = podutil::node_name(&pod);
            if node_name.is_empty() {
                continue;
            }
            let taints: &[Taint] = tainted.get(node_name).map_or(&[], Vec::as_slice);
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            match eviction(&tolerations, taints) {
                Eviction::Never => {
                    if self.scheduled.contains_key(&uid) {
                        let msg = format!(
                            "Cancelling deletion of Pod {}/{}",
                            pod.metadata.namespace.as_deref().unwrap_or(""),
                            pod.metadata.name.as_deref().unwrap_or("")
                        );
                        self.recorder
                            .emit(pod_ref(&pod), EventType::Normal, "TaintManagerEviction", msg);
                    }
                }
                Eviction::Now => self.evict(&pod).await,
                Eviction::After(d) => {
                    // Tolerations may have shortened since it was scheduled: the earlier time wins.
                    let at = self.scheduled.get(&uid).map_or(now + d, |t| (*t).min(now + d));
                    if at <= now {
                        self.evict(&pod).await;
                    } else {
                        keep.insert(uid, at);
                    }
                }
            }
        }
        self.scheduled = keep;
        self.scheduled.values().min().copied()
    }

    async fn evict(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let condition = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": Time(Timestamp::now()),
        }]}});
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&condition))
            .await
        {
            tracing::debug!(pod = %name, error = %e, "setting DisruptionTarget");
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => self.recorder.emit(
                pod_ref(pod),
                EventType::Normal,
                "TaintManagerEviction",
                format!("Marking for deletion Pod {ns}/{name}"),
            ),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(pod = %name, error = %e, "evicting a pod"),
        }
    }
}

/// Start the controller (`taint-eviction-controller`): a pass on every pod or node change and when a
/// scheduled eviction is due.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    let poke = Arc::new(tokio::sync::Notify::new());
    let p = poke.clone();
    nodes.on_change(move |_| p.notify_one());
    let p = poke.clone();
    pods.on_change(move |_| p.notify_one());
    let mut e = Evictor {
        client: ctx.client.clone(),
        nodes,
        pods,
        recorder: ctx.recorder("taint-eviction-controller"),
        scheduled: HashMap::new(),
    };
    let informers = ctx.informers.clone();
    Box::pin(async move {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = informers.wait_synced() => {}
        }
        loop {
            let next = e.pass().await;
            let wait = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(wait) => {}
                _ = poke.notified() => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: secs,
            ..Default::default()
        }
    }

    #[test]
    fn evictions_follow_the_shortest_toleration() {
        let t = [
            taint("a", "NoExecute"),
            taint("b", "NoExecute"),
            taint("c", "NoSchedule"),
        ];
        assert_eq!(eviction(&[], &[taint("c", "NoSchedule")]), Eviction::Never);
        assert_eq!(
            eviction(&[tol("a", None)], &t),
            Eviction::Now,
            "b is not tolerated"
        );
        assert_eq!(eviction(&[tol("a", None), tol("b", None)], &t), Eviction::Never);
        assert_eq!(
            eviction(&[tol("a", Some(30)), tol("b", Some(5))], &t),
            Eviction::After(Duration::from_secs(5))
        );
        assert_eq!(eviction(&[tol("a", Some(0)), tol("b", None)], &t), Eviction::Now);
        assert_eq!(
            eviction(&[tol("a", None), tol("a", Some(5)), tol("b", None)], &t),
            Eviction::Never,
            "the first matching toleration counts: without seconds, forever"
        );
        assert_eq!(
            eviction(&[tol("a", Some(5)), tol("a", None), tol("b", None)], &t),
            Eviction::After(Duration::from_secs(5)),
            "the first matching toleration counts: 5 s"
        );
    }
}
