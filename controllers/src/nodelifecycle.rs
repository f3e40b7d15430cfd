//! The node lifecycle controller (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`): a node whose
//! kubelet stops heartbeating (neither its Ready condition's `lastHeartbeatTime` nor its Lease's
//! `renewTime` moves) for `--node-monitor-grace-period` gets its conditions set to Unknown, its pods marked
//! not Ready, and the `unreachable` taints; the taints follow the conditions as they change.
//!
//! Upstream's whole-cluster disruption rule is kept: when no node at all is Ready, NoExecute taints are
//! removed instead of added, so nothing is evicted. A single-node cluster is always that case, so there
//! only the NoSchedule taint, the Unknown conditions and the not-Ready pods appear.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::events::{EventType, Recorder, pod_ref};
use futures_util::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer};
use crate::{Context, podutil};

/// `--node-monitor-period`.
pub const MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// `--node-startup-grace-period`.
pub const STARTUP_GRACE: Duration = Duration::from_secs(60);
/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The conditions the controller sets to Unknown.
const WATCHED_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What the controller last saw of a node's heartbeats (upstream's `nodeHealthData`).
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// When a heartbeat last moved, by our clock.
    pub probed: Timestamp,
    /// The Ready condition's lastHeartbeatTime then.
    pub ready_heartbeat: Option<Timestamp>,
    /// The Lease's renewTime then.
    pub lease_renew: Option<Timestamp>,
}

/// Update what is known of a node's heartbeats (pure): a heartbeat that moved restarts the grace period.
pub fn observe(
    prev: Option<&Health>,
    ready_heartbeat: Option<Timestamp>,
    lease_renew: Option<Timestamp>,
    now: Timestamp,
) -> Health {
    match prev {
        Some(p) if p.ready_heartbeat == ready_heartbeat && p.lease_renew >= lease_renew => p.clone(),
        Some(p) => Health {
            probed: now,
            ready_heartbeat,
            lease_renew: lease_renew.max(p.lease_renew),
        },
        // A node seen for the first time (or after our restart) gets a full grace period.
        None => Health {
            probed: now,
            ready_heartbeat,
            lease_renew,
        },
    }
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The node's Ready status: "True", "False", "Unknown" (or "" when never posted).
pub fn ready_status(node: &Node) -> &str {
    condition(node, "Ready").map(|c| c.status.as_str()).unwrap_or("")
}

/// The conditions to write when the grace period has passed without a heartbeat (pure); empty when they
/// are already Unknown.
pub fn unknown_conditions(node: &Node, now: Timestamp) -> Vec<NodeCondition> {
    let created = node.metadata.creation_timestamp.clone();
    WATCHED_CONDITIONS
        .iter()
        .filter_map(|t| match condition(node, t) {
            Some(c) if c.status == "Unknown" => None,
            Some(c) => Some(NodeCondition {
                status: "Unknown".into(),
                reason: Some("NodeStatusUnknown".into()),
                message: Some("Kubelet stopped posting node status.".into()),
                last_transition_time: Some(Time(now)),
                ..c.clone()
            }),
            None => Some(NodeCondition {
                type_: t.to_string(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: created.clone(),
                last_transition_time: Some(Time(now)),
            }),
        })
        .collect()
}

/// The taint keys this controller owns.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Ready=Unknown.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

fn managed(t: &Taint) -> bool {
    matches!(
        t.key.as_str(),
        NOT_READY
            | UNREACHABLE
            | "node.kubernetes.io/memory-pressure"
            | "node.kubernetes.io/disk-pressure"
            | "node.kubernetes.io/pid-pressure"
            | "node.kubernetes.io/network-unavailable"
            | "node.kubernetes.io/unschedulable"
    ) && (t.effect == "NoSchedule"
        || (t.effect == "NoExecute" && (t.key == NOT_READY || t.key == UNREACHABLE)))
}

/// The node's taints as they should be (pure): the user's kept, ours from its conditions
/// (`doNoScheduleTaintingPass`) and, unless the whole cluster is disrupted, the NoExecute taint for a node
/// that is not Ready. `timeAdded` of a taint already there is kept.
pub fn desired_taints(node: &Node, full_disruption: bool, now: Timestamp) -> Vec<Taint> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let status = |t: &str| condition(node, t).map(|c| c.status.as_str());
    let mut ours: Vec<(&str, &str)> = Vec::new();
    match status("Ready") {
        Some("False") => ours.push((NOT_READY, "NoSchedule")),
        Some("Unknown") => ours.push((UNREACHABLE, "NoSchedule")),
        _ => {}
    }
    for (cond, key) in [
        ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
        ("DiskPressure", "node.kubernetes.io/disk-pressure"),
        ("PIDPressure", "node.kubernetes.io/pid-pressure"),
        ("NetworkUnavailable", "node.kubernetes.io/network-unavailable"),
    ] {
        if status(cond) == Some("True") {
            ours.push((key, "NoSchedule"));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        ours.push(("node.kubernetes.io/unschedulable", "NoSchedule"));
    }
    if !full_disruption {
        match status("Ready") {
            Some("False") => ours.push((NOT_READY, "NoExecute")),
            Some("Unknown") => ours.push((UNREACHABLE, "NoExecute")),
            _ => {}
        }
    }
    let mut out: Vec<Taint> = current.iter().filter(|t| !managed(t)).cloned().collect();
    for (key, effect) in ours {
        let kept = current
            .iter()
            .find(|t| t.key == key && t.effect == effect)
            .cloned();
        out.push(kept.unwrap_or_else(|| Taint {
            key: key.to_string(),
            effect: effect.to_string(),
            value: None,
            time_added: (effect == "NoExecute").then_some(Time(now)),
        }));
    }
    out
}

fn same_taints(a: &[Taint], b: &[Taint]) -> bool {
    let set = |v: &[Taint]| -> BTreeSet<(String, String, String)> {
        v.iter()
            .map(|t| {
                (
                    t.key.clone(),
                    t.effect.clone(),
                    t.value.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    set(a) == set(b)
}

struct Monitor {
    client: kube::Client,
    nodes: Arc<Informer<Node>>,
    leases: Arc<Informer<Lease>>,
    pods: Arc<Informer<Pod>>,
    recorder: Arc<Recorder>,
    grace: Duration,
    health: Mutex<HashMap<String, Health>>,
    known: Mutex<BTreeSet<String>>,
    /// Each node's Ready status at the end of the previous pass: a node agent that posts Ready=False itself
    /// between two passes is a True → not-True change too (upstream keeps the saved status).
    last_ready: Mutex<HashMap<String, String>>,
}

fn node_event_ref(name: &str, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..Default::default()
    }
}

impl Monitor {
    /// One monitoring pass over every node.
    async fn pass(&self) {
        let now = Timestamp::now();
        let grace = SignedDuration::try_from(self.grace).unwrap_or(SignedDuration::from_secs(50));
        let startup = SignedDuration::try_from(STARTUP_GRACE).unwrap_or(SignedDuration::from_secs(60));
        let nodes = self.nodes.list();
        self.track_registrations(&nodes);
        let mut ready_after: HashMap<String, String> = HashMap::new();
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let lease = self.leases.get_in(LEASE_NAMESPACE, &name);
            let renew = lease.and_then(|l| l.spec.clone()?.renew_time.map(|t| t.0));
            let hb = condition(node, "Ready").and_then(|c| c.last_heartbeat_time.as_ref().map(|t| t.0));
            let h = {
                let mut map = self.health.lock().unwrap_or_else(|e| e.into_inner());
                let h = observe(map.get(&name), hb, renew, now);
                map.insert(name.clone(), h.clone());
                h
            };
            let before = ready_status(node).to_string();
            let allowed = if before.is_empty() { startup } else { grace };
            let mut after = before.clone();
            if h.probed + allowed < now {
                let conditions = unknown_conditions(node, now);
                if !conditions.is_empty() {
                    let api: Api<Node> = Api::all(self.client.clone());
                    let patch = json!({"status": {"conditions": conditions}});
                    match api
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                        .await
                    {
                        Ok(_) => after = "Unknown".into(),
                        Err(e) => tracing::warn!(node = %name, error = %e, "marking the node Unknown"),
                    }
                } else {
                    after = "Unknown".into();
                }
            }
            let previous = self
                .last_ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), after.clone())
                .unwrap_or_else(|| before.clone());
            if previous == "True" && after != "True" {
                self.node_not_ready(node, &name).await;
            }
            ready_after.insert(name, after);
        }
        let full_disruption = !ready_after.values().any(|s| s == "True");
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let mut seen = (**node).clone();
            if let Some(status) = ready_after.get(&name)
                && status != ready_status(node)
                && let Some(c) = seen
                    .status
                    .as_mut()
                    .and_then(|s| s.conditions.as_mut())
                    .and_then(|c| c.iter_mut().find(|c| c.type_ == "Ready"))
            {
                c.status = status.clone();
            }
            let want = desired_taints(&seen, full_disruption, now);
            let have = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            if !same_taints(&want, &have) {
                let api: Api<Node> = Api::all(self.client.clone());
                let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": want}});
                if let Err(e) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(node = %name, error = %e, "updating node taints; retried next pass");
                }
            }
        }
    }

    fn track_registrations(&self, nodes: &[Arc<Node>]) {
        let now: BTreeSet<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if !known.contains(&name) {
                self.recorder.emit(
                    node_event_ref(&name, n.metadata.uid.as_deref()),
                    EventType::Normal,
                    "RegisteredNode",
                    format!("Registered Node {name} in Controller"),
                );
            }
        }
        for gone in known.difference(&now) {
            self.recorder.emit(
                node_event_ref(gone, None),
                EventType::Normal,
                "RemovingNode",
                format!("Removing Node {gone} from Controller"),
            );
            self.health.lock().unwrap_or_else(|e| e.into_inner()).remove(gone);
            self.last_ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(gone);
        }
        *known = now;
    }

    /// Ready went from True to something else: the node's event, and every pod on it not Ready
    /// (`MarkPodsNotReady`), so Services stop routing to them.
    async fn node_not_ready(&self, node: &Node, name: &str) {
        self.recorder.emit(
            node_event_ref(name, node.metadata.uid.as_deref()),
            EventType::Normal,
            "NodeNotReady",
            format!("Node {name} status is now: NodeNotReady"),
        );
        for pod in self.pods.list().iter().filter(|p| podutil::node_name(p) == name) {
            if !podutil::is_ready(pod) {
                continue;
            }
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let pname = pod.metadata.name.as_deref().unwrap_or("");
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let patch = json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": Time(Timestamp::now())}
            ]}});
            match api
                .patch_status(pname, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => self.recorder.emit(
                    pod_ref(pod),
                    EventType::Warning,
                    "NodeNotReady",
                    "Node is not ready".into(),
                ),
                Err(e) => tracing::debug!(pod = %pname, error = %e, "marking a pod not ready"),
            }
        }
    }
}

/// Start the controller (`nodelifecycle`): a pass every monitor period, and at once on node changes.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let nodes = ctx.informers.get::<Node>();
    let leases = ctx.informers.get::<Lease>();
    leases.want();
    let pods = ctx.informers.get::<Pod>();
    pods.want();
    let poke = Arc::new(tokio::sync::Notify::new());
    let p = poke.clone();
    nodes.on_change(move |c| {
        if !matches!(c, Change::Updated { old, new } if old.spec == new.spec && old.status.as_ref().map(|s| &s.conditions) == new.status.as_ref().map(|s| &s.conditions))
        {
            p.notify_one();
        }
    });
    let grace = ctx.config.node_monitor_grace_period;
    let m = Monitor {
        client: ctx.client.clone(),
        nodes,
        leases,
        pods,
        recorder: ctx.recorder("node-controller"),
        grace,
        health: Mutex::new(HashMap::new()),
        known: Mutex::new(BTreeSet::new()),
        last_ready: Mutex::new(HashMap::new()),
    };
    let informers = ctx.informers.clone();
    // A short grace (tests) is checked more often than every 5 s, so it is noticed in time.
    let period = MONITOR_PERIOD.min(grace / 2).max(Duration::from_millis(200));
    Box::pin(async move {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = informers.wait_synced() => {}
        }
        loop {
            m.pass().await;
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
                _ = poke.notified() => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn node(ready: Option<&str>, taints: serde_json::Value) -> Node {
        let mut v = json!({"metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z"},
                           "spec": {"taints": taints}, "status": {"conditions": []}});
        if let Some(s) = ready {
            v["status"]["conditions"] = json!([{"type": "Ready", "status": s, "reason": "KubeletReady",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_moving_heartbeat_restarts_the_grace_period_and_a_still_one_does_not() {
        let t0 = ts("2026-01-01T00:00:00Z");
        let t1 = ts("2026-01-01T00:00:30Z");
        let h = observe(None, Some(t0), Some(t0), t0);
        assert_eq!(h.probed, t0);
        assert_eq!(
            observe(Some(&h), Some(t0), Some(t0), t1).probed,
            t0,
            "nothing moved"
        );
        assert_eq!(
            observe(Some(&h), Some(t0), Some(t1), t1).probed,
            t1,
            "the lease was renewed"
        );
        assert_eq!(
            observe(Some(&h), Some(t1), Some(t0), t1).probed,
            t1,
            "the status heartbeat moved"
        );
    }

    #[test]
    fn overdue_nodes_get_unknown_conditions_with_upstreams_reasons() {
        let now = ts("2026-01-01T00:01:00Z");
        let c = unknown_conditions(&node(Some("True"), json!([])), now);
        let ready = c.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            ready.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        let never = c.iter().find(|c| c.type_ == "MemoryPressure").unwrap();
        assert_eq!(never.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(c.len(), 4);
        assert!(unknown_conditions(&node(Some("Unknown"), json!([])), now).len() == 3);
    }

    #[test]
    fn taints_follow_conditions_and_full_disruption_drops_no_execute() {
        let now = ts("2026-01-01T00:01:00Z");
        let keys = |t: Vec<Taint>| -> Vec<String> {
            t.into_iter().map(|t| format!("{}:{}", t.key, t.effect)).collect()
        };
        let user = json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]);
        assert_eq!(
            keys(desired_taints(&node(Some("True"), user.clone()), false, now)),
            ["dedicated:NoSchedule"]
        );
        assert_eq!(
            keys(desired_taints(&node(Some("Unknown"), user.clone()), false, now)),
            [
                "dedicated:NoSchedule",
                "node.kubernetes.io/unreachable:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute"
            ]
        );
        assert_eq!(
            keys(desired_taints(&node(Some("Unknown"), json!([])), true, now)),
            ["node.kubernetes.io/unreachable:NoSchedule"],
            "no node Ready anywhere: nothing is evicted"
        );
        assert_eq!(
            keys(desired_taints(&node(Some("False"), json!([])), false, now)),
            [
                "node.kubernetes.io/not-ready:NoSchedule",
                "node.kubernetes.io/not-ready:NoExecute"
            ]
        );
        // Recovered: our taints go, a NoExecute one added earlier included.
        let had = json!([{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]);
        assert!(desired_taints(&node(Some("True"), had.clone()), false, now).is_empty());
        let kept = desired_taints(&node(Some("Unknown"), had), false, now);
        let ne = kept.iter().find(|t| t.effect == "NoExecute").unwrap();
        assert_eq!(
            ne.time_added,
            Some(Time(ts("2026-01-01T00:00:00Z"))),
            "timeAdded is kept"
        );
    }
}
