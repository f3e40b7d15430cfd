//! A small scheduler (upstream kube-scheduler's filters that matter on a local cluster): pods created
//! without `spec.nodeName` are bound through `pods/binding` to a Ready, schedulable node that satisfies the
//! pod's nodeSelector, required node affinity, taints/tolerations and the node's pod capacity; the least
//! loaded such node wins. A pod that fits nowhere stays Pending with `PodScheduled=False` (`Unschedulable`)
//! and a `FailedScheduling` event, and is tried again whenever a node or a pod changes.
//!
//! `kubeling up` runs it beside the API server; it is a client like any other (the `kube` crate over HTTPS).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    Binding, Node, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, Pod, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use client::events::{EventType, Recorder, pod_ref};
use client::informer::Informers;

/// The scheduler name pods get by default.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Why a node was filtered out (upstream's plugin messages, counted per reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Misfit {
    NotReady,
    Unschedulable,
    Selector,
    Taint,
    TooManyPods,
}

impl Misfit {
    fn message(self, n: usize) -> String {
        match self {
            Misfit::NotReady => {
                format!("{n} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}")
            }
            Misfit::Unschedulable => format!("{n} node(s) were unschedulable"),
            Misfit::Selector => format!("{n} node(s) didn't match Pod's node affinity/selector"),
            Misfit::Taint => format!("{n} node(s) had untolerated taint(s)"),
            Misfit::TooManyPods => format!("{n} Too many pods"),
        }
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn matches_requirement(req: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (value.and_then(|v| v.parse::<i64>().ok()), values.first()) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        // upstream: an empty term matches no objects
        return false;
    }
    let name = name.to_string();
    exprs.iter().all(|r| matches_requirement(r, labels.get(&r.key)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && matches_requirement(r, Some(&name)))
}

/// The pod's `nodeSelector` and required node affinity (`matchExpressions` on labels, `matchFields` on
/// `metadata.name`, which DaemonSet pods use to name their node) fit `node` (upstream
/// `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`).
pub fn selector_fits(pod: &Pod, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let spec = pod.spec.as_ref();
    let selector_ok = spec
        .and_then(|s| s.node_selector.as_ref())
        .is_none_or(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let affinity_ok = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
        .is_none_or(|req| {
            req.node_selector_terms
                .iter()
                .any(|t| term_matches(t, labels, name))
        });
    selector_ok && affinity_ok
}

/// Whether any of `tolerations` tolerates `taint` (`v1helper.TolerationsTolerateTaint`).
pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key_ok = t.key.as_deref().is_none_or(|k| k.is_empty() || k == taint.key);
        let op = t.operator.as_deref().unwrap_or("Equal");
        let value_ok = match op {
            "Exists" => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        };
        // An empty key with Exists tolerates everything.
        effect_ok && key_ok && value_ok && (t.key.as_deref().is_some_and(|k| !k.is_empty()) || op == "Exists")
    })
}

fn taints_fit(pod: &Pod, node: &Node) -> bool {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| tolerates(tolerations, t))
}

/// NodeUnschedulable: a cordoned node takes pods that tolerate `node.kubernetes.io/unschedulable:NoSchedule`
/// (DaemonSet pods do).
fn tolerates_unschedulable(pod: &Pod) -> bool {
    let taint = Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    tolerates(tolerations, &taint)
}

/// Bindings in flight at once.
const CONCURRENT_BINDINGS: usize = 32;

fn pod_capacity(node: &Node) -> usize {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .and_then(|a| a.get("pods"))
        .and_then(|q| q.0.parse().ok())
        .unwrap_or(110)
}

/// Choose a node for `pod`, or say why none fits (upstream's `0/N nodes are available: ...` message).
/// `load` counts the non-terminal pods already bound to each node.
pub fn pick_node(pod: &Pod, nodes: &[Node], load: &HashMap<String, usize>) -> Result<String, String> {
    if nodes.is_empty() {
        // upstream `ErrNoNodesAvailable`
        return Err("no nodes available to schedule pods".to_string());
    }
    let mut misfits: BTreeMap<Misfit, usize> = BTreeMap::new();
    let mut best: Option<(usize, &str)> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let misfit = if !node_ready(node) {
            Some(Misfit::NotReady)
        } else if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
            && !tolerates_unschedulable(pod)
        {
            Some(Misfit::Unschedulable)
        } else if !selector_fits(pod, node) {
            Some(Misfit::Selector)
        } else if !taints_fit(pod, node) {
            Some(Misfit::Taint)
        } else if load.get(name).copied().unwrap_or(0) >= pod_capacity(node) {
            Some(Misfit::TooManyPods)
        } else {
            None
        };
        match misfit {
            Some(m) => *misfits.entry(m).or_default() += 1,
            None => {
                let l = load.get(name).copied().unwrap_or(0);
                if best.is_none_or(|(bl, bn)| (l, name) < (bl, bn)) {
                    best = Some((l, name));
                }
            }
        }
    }
    if let Some((_, name)) = best {
        return Ok(name.to_string());
    }
    let reasons: Vec<String> = misfits.iter().map(|(m, n)| m.message(*n)).collect();
    let mut msg = format!("0/{} nodes are available", nodes.len());
    if !reasons.is_empty() {
        msg.push_str(": ");
        msg.push_str(&reasons.join(", "));
    }
    msg.push_str(". preemption: 0/");
    msg.push_str(&nodes.len().to_string());
    msg.push_str(" nodes are available: ");
    msg.push_str(&format!(
        "{} Preemption is not helpful for scheduling.",
        nodes.len()
    ));
    Err(msg)
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn wants_us(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty)
        && spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER)
            == DEFAULT_SCHEDULER
        && pod.metadata.deletion_timestamp.is_none()
        && !is_terminal(pod)
}

/// Run the scheduler until `cancel`.
pub async fn run(client: kube::Client, cancel: CancellationToken) {
    // Its own informers (the scheduler may run without the controller manager), woken by any change.
    let informers = Informers::new();
    let pods = informers.get::<Pod>();
    let nodes = informers.get::<Node>();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let poke = tx.clone();
    pods.on_change(move |_| {
        let _ = poke.try_send(());
    });
    nodes.on_change(move |_| {
        let _ = tx.try_send(());
    });
    informers.start(&client, &cancel);
    let recorder = Arc::new(Recorder::new(client.clone(), DEFAULT_SCHEDULER, None));
    // Pods we reported unschedulable, with the message, so an unchanged verdict is not reported again.
    let mut reported: HashMap<String, String> = HashMap::new();
    let schedule = async {
        informers.wait_synced().await;
        loop {
            let node_list = nodes.list_cloned();
            let all_pods = pods.list();
            let mut load: HashMap<String, usize> = HashMap::new();
            for p in all_pods.iter().filter(|p| !is_terminal(p)) {
                if let Some(n) = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .filter(|n| !n.is_empty())
                {
                    *load.entry(n.to_string()).or_default() += 1;
                }
            }
            // Forget verdicts about pods that no longer wait (deleted, or bound elsewhere).
            let waiting: std::collections::HashSet<&str> = all_pods
                .iter()
                .filter(|p| wants_us(p))
                .filter_map(|p| p.metadata.uid.as_deref())
                .collect();
            reported.retain(|uid, _| waiting.contains(uid.as_str()));
            // Decisions are made one pod at a time (each counts toward its node's load); the bindings go
            // out concurrently, as upstream's asynchronous binding cycle, so thousands of pending pods do
            // not wait on one round trip each. A failed binding is retried on the next pass.
            let mut decided = Vec::new();
            for pod in all_pods.iter().filter(|p| wants_us(p)) {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                match pick_node(pod, &node_list, &load) {
                    Ok(node) => {
                        *load.entry(node.clone()).or_default() += 1;
                        reported.remove(&uid);
                        decided.push((pod.clone(), node));
                    }
                    Err(msg) => {
                        if reported.get(&uid) != Some(&msg) {
                            mark_unschedulable(&client, pod, &msg).await;
                            recorder
                                .record(&pod_ref(pod), EventType::Warning, "FailedScheduling", &msg)
                                .await;
                            reported.insert(uid, msg);
                        }
                    }
                }
            }
            futures_util::stream::iter(decided)
                .for_each_concurrent(CONCURRENT_BINDINGS, |(pod, node)| {
                    let (client, recorder) = (&client, &recorder);
                    async move {
                        if bind(client, &pod, &node).await {
                            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                            let name = pod.metadata.name.as_deref().unwrap_or("");
                            let msg = format!("Successfully assigned {ns}/{name} to {node}");
                            recorder.emit(pod_ref(&pod), EventType::Normal, "Scheduled", msg);
                        }
                    }
                })
                .await;
            tokio::select! {
                _ = rx.recv() => {}
                // Scheduling decisions depend only on pods and nodes, which wake us; the timer is a backstop
                // for a bind that failed on a transient error.
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = schedule => {}
    }
}

async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.clone().unwrap_or_default();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.to_string()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    match pods
        .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
        .await
    {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(pod = %name, error = %e, "binding failed; will retry");
            false
        }
    }
}

async fn mark_unschedulable(client: &kube::Client, pod: &Pod, msg: &str) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
        "lastTransitionTime": now, "lastProbeTime": null,
    }]}});
    if let Err(e) = pods
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        tracing::debug!(pod = %name, error = %e, "could not mark the pod unschedulable");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: bool, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
                       "allocatable": {"pods": "2"}}
        }))
        .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut s = json!({"containers": [{"name": "c", "image": "i"}]});
        s.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": s})).unwrap()
    }

    #[test]
    fn least_loaded_ready_node_wins() {
        let nodes = vec![
            node("a", true, json!({}), json!([])),
            node("b", true, json!({}), json!([])),
        ];
        let load = HashMap::from([("a".to_string(), 1)]);
        assert_eq!(pick_node(&pod(json!({})), &nodes, &load), Ok("b".to_string()));
    }

    #[test]
    fn node_selector_no_node_matches_is_unschedulable_with_upstreams_message() {
        let nodes = vec![node("a", true, json!({"disk": "hdd"}), json!([]))];
        let err = pick_node(
            &pod(json!({"nodeSelector": {"disk": "ssd"}})),
            &nodes,
            &HashMap::new(),
        )
        .unwrap_err();
        assert!(
            err.starts_with("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."),
            "{err}"
        );
    }

    #[test]
    fn required_node_affinity_is_honoured() {
        let nodes = vec![
            node("a", true, json!({"zone": "x"}), json!([])),
            node("b", true, json!({"zone": "y"}), json!([])),
        ];
        let affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["y"]}]}]}}}});
        assert_eq!(
            pick_node(&pod(affinity), &nodes, &HashMap::new()),
            Ok("b".to_string())
        );
    }

    #[test]
    fn match_fields_on_metadata_name_pin_a_daemon_pod_to_its_node() {
        let nodes = vec![
            node("a", true, json!({}), json!([])),
            node("b", true, json!({}), json!([])),
        ];
        let affinity = |op: &str, name: &str| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": op, "values": [name]}]}]}}}})
        };
        let load = HashMap::from([("a".to_string(), 1)]);
        assert_eq!(
            pick_node(&pod(affinity("In", "a")), &nodes, &load),
            Ok("a".to_string())
        );
        assert_eq!(
            pick_node(&pod(affinity("NotIn", "b")), &nodes, &load),
            Ok("a".to_string())
        );
        assert!(pick_node(&pod(affinity("In", "c")), &nodes, &load).is_err());
        // Another field key matches nothing.
        let other = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a"]}]}]}}}});
        assert!(pick_node(&pod(other), &nodes, &load).is_err());
    }

    #[test]
    fn a_cordoned_node_takes_only_pods_that_tolerate_unschedulable() {
        let mut n = node("a", true, json!({}), json!([]));
        n.spec.as_mut().unwrap().unschedulable = Some(true);
        let nodes = vec![n];
        assert!(pick_node(&pod(json!({})), &nodes, &HashMap::new()).is_err());
        let tol = json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]});
        assert_eq!(pick_node(&pod(tol), &nodes, &HashMap::new()), Ok("a".to_string()));
    }

    #[test]
    fn untolerated_no_schedule_taint_excludes_the_node_and_a_toleration_admits_it() {
        let taint = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
        let nodes = vec![node("a", true, json!({}), taint)];
        assert!(pick_node(&pod(json!({})), &nodes, &HashMap::new()).is_err());
        let tol = json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]});
        assert_eq!(pick_node(&pod(tol), &nodes, &HashMap::new()), Ok("a".to_string()));
    }

    #[test]
    fn no_node_at_all_is_upstreams_no_nodes_available() {
        assert_eq!(
            pick_node(&pod(json!({})), &[], &HashMap::new()),
            Err("no nodes available to schedule pods".to_string())
        );
    }

    #[test]
    fn not_ready_and_full_nodes_are_skipped() {
        let nodes = vec![
            node("a", false, json!({}), json!([])),
            node("b", true, json!({}), json!([])),
        ];
        let load = HashMap::from([("b".to_string(), 2)]);
        let err = pick_node(&pod(json!({})), &nodes, &load).unwrap_err();
        assert!(err.contains("1 Too many pods"), "{err}");
    }
}
