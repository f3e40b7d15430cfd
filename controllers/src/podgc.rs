//! Pod garbage collection (`pkg/controller/podgc/gc_controller.go`), every 20 s: terminated pods over
//! `--terminated-pod-gc-threshold` (oldest first), pods bound to a node that no longer exists (after a
//! 40 s quarantine and a live check), and terminating pods that were never scheduled. A pod that is not
//! yet terminal is first marked Failed with `DisruptionTarget`, then deleted with grace 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::informer::Informer;
use crate::{Context, podutil};

/// podgc: `gcCheckPeriod`.
pub const PERIOD: Duration = Duration::from_secs(20);
/// podgc: `quarantineTime` before an orphan's node is checked again.
pub const QUARANTINE: Duration = Duration::from_secs(40);

/// Why a pod is collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Too many terminated pods.
    Terminated,
    /// Its node is gone.
    Orphaned,
    /// Being deleted and never scheduled.
    Unscheduled,
}

/// The terminated pods to delete beyond `threshold` (pure): oldest by creationTimestamp first, as
/// `gcTerminated` (0 disables).
pub fn terminated_over_threshold(pods: &[Arc<Pod>], threshold: usize) -> Vec<Arc<Pod>> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<Arc<Pod>> = pods.iter().filter(|p| podutil::is_terminal(p)).cloned().collect();
    if terminated.len() <= threshold {
        return Vec::new();
    }
    terminated.sort_by(|a, b| {
        let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        t(a).cmp(&t(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let excess = terminated.len() - threshold;
    terminated.truncate(excess);
    terminated
}

/// Pods bound to a node the cache does not have (pure).
pub fn orphaned(pods: &[Arc<Pod>], node_exists: impl Fn(&str) -> bool) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| {
            let n = podutil::node_name(p);
            !n.is_empty() && !node_exists(n)
        })
        .cloned()
        .collect()
}

/// Terminating pods with no node (pure).
pub fn unscheduled_terminating(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some() && podutil::node_name(p).is_empty())
        .cloned()
        .collect()
}

struct Collector {
    client: kube::Client,
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    threshold: usize,
    /// Missing nodes and when they were first missed.
    quarantine: HashMap<String, Instant>,
}

impl Collector {
    async fn pass(&mut self) {
        let pods = self.pods.list();
        for p in terminated_over_threshold(&pods, self.threshold) {
            self.mark_failed_and_delete(&p, Reason::Terminated).await;
        }
        let now = Instant::now();
        let nodes = self.nodes.clone();
        let orphans = orphaned(&pods, |n| nodes.get(n).is_some());
        let mut still_missing: HashMap<String, Instant> = HashMap::new();
        for p in orphans {
            let node = podutil::node_name(&p).to_string();
            let since = *self.quarantine.get(&node).unwrap_or(&now);
            still_missing.insert(node.clone(), since);
            if now.duration_since(since) < QUARANTINE {
                continue;
            }
            // The cache may lag: ask the API server before deleting anything.
            let api: Api<Node> = Api::all(self.client.clone());
            match api.get_opt(&node).await {
                Ok(None) => self.mark_failed_and_delete(&p, Reason::Orphaned).await,
                Ok(Some(_)) => {
                    still_missing.remove(&node);
                }
                Err(e) => tracing::debug!(node = %node, error = %e, "checking an orphan's node"),
            }
        }
        self.quarantine = still_missing;
        for p in unscheduled_terminating(&pods) {
            self.delete_now(&p).await;
        }
    }

    async fn mark_failed_and_delete(&self, pod: &Pod, reason: Reason) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        if !podutil::is_terminal(pod) {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let (why, message) = match reason {
                Reason::Orphaned => ("DeletionByPodGC", "PodGC: node no longer exists"),
                _ => ("DeletionByPodGC", "PodGC: pod is terminated"),
            };
            let patch = json!({"status": {"phase": "Failed", "conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": why, "message": message,
                "lastTransitionTime": Time(Timestamp::now()),
            }]}});
            if let Err(e) = api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                tracing::debug!(pod = %name, error = %e, "marking a pod Failed");
            }
        }
        self.delete_now(pod).await;
    }

    async fn delete_now(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(kube::api::Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => tracing::info!(pod = %format!("{ns}/{name}"), "pod garbage-collected"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(pod = %name, error = %e, "garbage-collecting a pod"),
        }
    }
}

/// Start the controller (`podgc`).
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let pods = ctx.informers.get::<Pod>();
    pods.want();
    let nodes = ctx.informers.get::<Node>();
    nodes.want();
    let mut c = Collector {
        client: ctx.client.clone(),
        pods,
        nodes,
        threshold: ctx.config.terminated_pod_gc_threshold,
        quarantine: HashMap::new(),
    };
    let informers = ctx.informers.clone();
    Box::pin(async move {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = informers.wait_synced() => {}
        }
        loop {
            c.pass().await;
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(PERIOD) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, phase: &str, node: &str, created: &str, deleting: bool) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "creationTimestamp": created},
                           "spec": {"containers": [], "nodeName": node}, "status": {"phase": phase}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!(created);
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn names(v: Vec<Arc<Pod>>) -> Vec<String> {
        v.into_iter().map(|p| p.metadata.name.clone().unwrap()).collect()
    }

    #[test]
    fn the_oldest_terminated_pods_over_the_threshold_go() {
        let pods = vec![
            pod("new", "Succeeded", "n", "2026-01-03T00:00:00Z", false),
            pod("old", "Failed", "n", "2026-01-01T00:00:00Z", false),
            pod("mid", "Succeeded", "n", "2026-01-02T00:00:00Z", false),
            pod("run", "Running", "n", "2025-01-01T00:00:00Z", false),
        ];
        assert_eq!(names(terminated_over_threshold(&pods, 1)), ["old", "mid"]);
        assert!(terminated_over_threshold(&pods, 3).is_empty());
        assert!(terminated_over_threshold(&pods, 0).is_empty(), "0 disables");
    }

    #[test]
    fn orphans_and_unscheduled_terminating_pods_are_found() {
        let pods = vec![
            pod("a", "Running", "here", "2026-01-01T00:00:00Z", false),
            pod("b", "Running", "ghost", "2026-01-01T00:00:00Z", false),
            pod("c", "Pending", "", "2026-01-01T00:00:00Z", true),
            pod("d", "Pending", "", "2026-01-01T00:00:00Z", false),
        ];
        assert_eq!(names(orphaned(&pods, |n| n == "here")), ["b"]);
        assert_eq!(names(unscheduled_terminating(&pods)), ["c"]);
    }
}
