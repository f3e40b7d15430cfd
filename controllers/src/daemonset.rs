//! The DaemonSet controller (`pkg/controller/daemon/`), component `daemonset-controller`: one pod per node
//! that should run it. Pods get no `nodeName`; a required node affinity `matchFields metadata.name In
//! [<node>]` lets the scheduler bind them to their node. Failed pods are deleted (with a per-node backoff)
//! and replaced; template changes roll out under `maxUnavailable` / `maxSurge`, or on deletion (OnDelete).
//!
//! ```text
//! DaemonSet / Pod / Node / ControllerRevision events ──► queue ──► sync(ns/name)
//!    claim revisions, find or snapshot the current one (hash) → claim pods, group by target node
//!    → manage (pure: nodes needing a pod, pods to delete) → rolling_update (pure) → trim history → status
//! ```
//!
//! Every decision below is a pure function of the DaemonSet, the nodes and the pods by node (and `now`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
    PodTemplateSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::controller_ref::{self, Claim};
use crate::expectations::Expectations;
use crate::informer::{Change, Informer, key_of, split_key};
use crate::pod_control::{BURST_REPLICAS, PodControl, object_ref, pod_from_template, slow_start_batch};
use crate::{Context, Error, Reconciler, WorkQueue, history, podutil, run_workers, scheduler, selector};

/// The component events are written as.
pub const COMPONENT: &str = "daemonset-controller";
/// `--concurrent-daemonset-syncs`.
pub const WORKERS: usize = 2;
/// `BurstReplicas` of the DaemonSet controller.
pub const DS_BURST_REPLICAS: usize = 250;
/// `apps.DefaultDaemonSetUniqueLabelKey`: the revision hash on DaemonSet pods and revisions.
pub const HASH_LABEL: &str = "controller-revision-hash";
/// `extensions.DaemonSetTemplateGenerationKey`.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// `apps.DeprecatedTemplateGeneration`: the template generation the API server keeps on the DaemonSet.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";
/// Failed-pod backoff: 1 s doubling to 15 min (`failedPodsBackoff`).
pub const FAILED_BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The cap of the failed-pod backoff.
pub const FAILED_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

// ---------------------------------------------------------------------------------------------------------
// Per-node decisions

/// `AddOrUpdateDaemonPodTolerations`: the tolerations every daemon pod gets (all `Exists`, no
/// tolerationSeconds), replacing a toleration of the same key, operator and effect.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let t = Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        };
        // `MatchToleration`: same key, operator, value and effect.
        match tolerations.iter_mut().find(|x| {
            x.key == t.key
                && x.operator.as_deref().unwrap_or("Equal") == "Exists"
                && x.value.as_deref().unwrap_or("").is_empty()
                && x.effect == t.effect
        }) {
            Some(x) => *x = t,
            None => tolerations.push(t),
        }
    }
}

/// `NewPod`: the pod the DaemonSet would run on `node`, for the predicates.
fn simulated_pod(ds: &DaemonSet, node: &str) -> Pod {
    let template = template(ds);
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.node_name = Some(node.into());
    add_daemon_tolerations(&mut spec);
    Pod {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: Some(spec),
        status: None,
    }
}

fn template(ds: &DaemonSet) -> PodTemplateSpec {
    ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default()
}

fn untolerated(taints: &[Taint], tolerations: &[Toleration], effects: &[&str]) -> bool {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .any(|t| !scheduler::tolerates(tolerations, t))
}

/// `NodeShouldRunDaemonPod`: (shouldRun, shouldContinueRunning). Node name, nodeSelector and required
/// affinity must fit; an untolerated NoSchedule taint keeps existing pods only, a NoExecute one neither.
pub fn should_run(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let name = node.metadata.name.as_deref().unwrap_or("");
    let pod = simulated_pod(ds, name);
    let wanted_node = template(ds).spec.and_then(|s| s.node_name).unwrap_or_default();
    if !wanted_node.is_empty() && wanted_node != name {
        return (false, false);
    }
    if !scheduler::selector_fits(&pod, node) {
        return (false, false);
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[]);
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[]);
    if untolerated(taints, tolerations, &["NoSchedule", "NoExecute"]) {
        return (false, !untolerated(taints, tolerations, &["NoExecute"]));
    }
    (true, true)
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes the single term
/// `matchFields metadata.name In [<node>]` (preferred terms and pod affinities stay).
pub fn replace_node_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
        match_expressions: None,
    };
    let mut affinity = affinity.unwrap_or_default();
    let na = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
    affinity
}

/// `GetTargetNodeName`: `spec.nodeName`, or for an unbound pod the node its `metadata.name` matchFields
/// term names.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    for term in terms {
        for exp in term.match_fields.iter().flatten() {
            if exp.key == "metadata.name" && exp.operator == "In" {
                let values = exp.values.as_deref().unwrap_or(&[]);
                return (values.len() == 1).then(|| values[0].clone());
            }
        }
    }
    None
}

/// `GetTemplateGeneration`: the annotation the API server keeps, else `metadata.generation`.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    match ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION))
    {
        Some(v) => v.parse().ok(),
        None => ds.metadata.generation,
    }
}

/// `IsPodUpdated`: the pod carries the current hash, or the current template generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let label = |k: &str| pod.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
    let template_matches =
        generation.is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(g.to_string()));
    let hash_matches = !hash.is_empty() && label(HASH_LABEL).as_deref() == Some(hash);
    hash_matches || template_matches
}

/// `CreatePodTemplate` plus the node affinity: the template of the daemon pod for `node`.
pub fn pod_template_for(ds: &DaemonSet, hash: &str, node: &str) -> PodTemplateSpec {
    let mut t = template(ds);
    let spec = t.spec.get_or_insert_with(PodSpec::default);
    add_daemon_tolerations(spec);
    spec.affinity = Some(replace_node_affinity(spec.affinity.take(), node));
    let labels = t
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    if let Some(g) = template_generation(ds) {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(HASH_LABEL.into(), hash.into());
    }
    t
}

/// `podByCreationTimestampAndPhase`: bound pods first, then oldest, then by name.
fn sort_pods(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| {
        let unbound = |p: &Pod| podutil::node_name(p).is_empty();
        let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (unbound(a), created(a), a.metadata.name.clone()).cmp(&(
            unbound(b),
            created(b),
            b.metadata.name.clone(),
        ))
    });
}

fn min_ready_seconds(ds: &DaemonSet) -> i32 {
    ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

fn strategy_type(ds: &DaemonSet) -> &str {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((pct * i64::from(total) + 99) / 100) as i32
        }
    }
}

/// `SurgeCount` and `UnavailableCount` for `desired` nodes (both round up); both 0 becomes unavailable 1.
pub fn surge_and_unavailable(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    if strategy_type(ds) != "RollingUpdate" {
        return (0, 0);
    }
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref());
    let surge = ru
        .and_then(|r| r.max_surge.as_ref())
        .map(|v| scaled(v, desired))
        .unwrap_or(0);
    let unavailable = ru
        .and_then(|r| r.max_unavailable.as_ref())
        .map(|v| scaled(v, desired))
        .unwrap_or(1);
    if desired > 0 && surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// `AllowsSurge`.
fn allows_surge(ds: &DaemonSet) -> bool {
    surge_and_unavailable(ds, 1).0 > 0
}

/// The DaemonSet's pods by target node (terminal pods being deleted left out).
pub type PodsByNode = BTreeMap<String, Vec<Arc<Pod>>>;

/// Group pods by [`target_node`]; `include_deleted_terminal` keeps pods that are both terminal and being
/// deleted (history cleanup wants them).
pub fn pods_by_node(pods: &[Arc<Pod>], include_deleted_terminal: bool) -> PodsByNode {
    let mut m = PodsByNode::new();
    for p in pods {
        if !include_deleted_terminal && podutil::is_terminal(p) && p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(n) = target_node(p) {
            m.entry(n).or_default().push(p.clone());
        }
    }
    m
}

/// What `manage` decided.
#[derive(Debug, Default, Clone)]
pub struct ManagePlan {
    /// Nodes that need a daemon pod.
    pub create_on: Vec<String>,
    /// Pods to delete.
    pub delete: Vec<Arc<Pod>>,
    /// Failed pods (node, pod): deleted unless the node's backoff says wait (`FailedDaemonPod` event).
    pub failed: Vec<(String, Arc<Pod>)>,
    /// Succeeded pods (node, pod): deleted with a `SucceededDaemonPod` event.
    pub succeeded: Vec<(String, Arc<Pod>)>,
}

/// `podsShouldBeOnNode` over every node, and `getUnscheduledPodsWithoutNode`.
pub fn manage(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &PodsByNode,
    hash: &str,
    now: Timestamp,
) -> ManagePlan {
    let mut plan = ManagePlan::default();
    let surge = allows_surge(ds);
    let min_ready = min_ready_seconds(ds);
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (run, keep) = should_run(node, ds);
        let pods = by_node.get(&name);
        match (run, keep, pods) {
            (true, _, None) => plan.create_on.push(name),
            (_, true, Some(pods)) => {
                let mut running = Vec::new();
                for p in pods {
                    if p.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match podutil::phase(p) {
                        "Failed" => plan.failed.push((name.clone(), p.clone())),
                        "Succeeded" => plan.succeeded.push((name.clone(), p.clone())),
                        _ => running.push(p.clone()),
                    }
                }
                sort_pods(&mut running);
                if !surge {
                    // Keep the oldest; the rest go.
                    plan.delete.extend(running.into_iter().skip(1));
                    continue;
                }
                if running.is_empty() {
                    if run {
                        plan.create_on.push(name);
                    }
                    continue;
                }
                if running.len() == 1 {
                    continue;
                }
                // Surging: keep the oldest new and the oldest old pod; the old one goes once the new one is
                // available, or at once when it is not ready itself.
                let (mut oldest_new, mut oldest_old): (Option<Arc<Pod>>, Option<Arc<Pod>>) = (None, None);
                for p in running {
                    let slot = if p
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(HASH_LABEL))
                        .map(String::as_str)
                        == Some(hash)
                    {
                        &mut oldest_new
                    } else {
                        &mut oldest_old
                    };
                    if slot.is_none() {
                        *slot = Some(p);
                    } else {
                        plan.delete.push(p);
                    }
                }
                if let (Some(new), Some(old)) = (oldest_new, oldest_old)
                    && (!podutil::is_ready(&old) || podutil::is_available(&new, min_ready, now))
                {
                    plan.delete.push(old);
                }
            }
            (_, false, Some(pods)) => plan.delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .cloned(),
            ),
            _ => {}
        }
    }
    // Unbound pods aimed at nodes that no longer exist are never scheduled: delete them.
    let known: HashSet<&str> = nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
    for (node, pods) in by_node {
        if known.contains(node.as_str()) {
            continue;
        }
        plan.delete.extend(
            pods.iter()
                .filter(|p| podutil::node_name(p).is_empty() && p.metadata.deletion_timestamp.is_none())
                .cloned(),
        );
    }
    plan
}

/// A node's updated pod and old pod.
type NewAndOld = (Option<Arc<Pod>>, Option<Arc<Pod>>);

/// `findUpdatedPodsOnNode`: the node's (new, old) pod, `None` when it has more than one of either.
fn updated_pods_on_node(pods: &[Arc<Pod>], hash: &str, generation: Option<i64>) -> Option<NewAndOld> {
    let (mut new, mut old) = (None, None);
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if is_pod_updated(p, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(p.clone());
    }
    Some((new, old))
}

/// `rollingUpdate`: old pods to delete and nodes to surge onto.
pub fn rolling_update(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &PodsByNode,
    hash: &str,
    now: Timestamp,
) -> (Vec<Arc<Pod>>, Vec<String>) {
    let generation = template_generation(ds);
    let min_ready = min_ready_seconds(ds);
    let available = |p: &Pod| podutil::is_available(p, min_ready, now);
    // `updatedDesiredNodeCounts`: nodes that want a pod take part even without one.
    let mut by_node = by_node.clone();
    let mut desired = 0;
    let node_of: HashMap<&str, &Arc<Node>> = nodes
        .iter()
        .map(|n| (n.metadata.name.as_deref().unwrap_or(""), n))
        .collect();
    for n in nodes {
        if should_run(n, ds).0 {
            desired += 1;
            by_node
                .entry(n.metadata.name.clone().unwrap_or_default())
                .or_default();
        }
    }
    let (max_surge, max_unavailable) = surge_and_unavailable(ds, desired);
    let wants = |node: &str| node_of.get(node).is_some_and(|n| should_run(n, ds).0);

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace = Vec::new();
        let mut candidates = Vec::new();
        for pods in by_node.values() {
            let Some((new, old)) = updated_pods_on_node(pods, hash, generation) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(&new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(&old) {
                        replace.push(old);
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(old);
                    }
                }
            }
        }
        let room = (max_unavailable - unavailable).max(0) as usize;
        replace.extend(candidates.into_iter().take(room));
        return (replace, Vec::new());
    }

    let mut delete = Vec::new();
    let mut should_not_run = Vec::new();
    let mut candidates = Vec::new();
    let mut allowed = Vec::new();
    let mut surging = 0;
    let mut available_count = 0;
    for (node, pods) in &by_node {
        let Some((new, old)) = updated_pods_on_node(pods, hash, generation) else {
            surging += 1;
            continue;
        };
        if let Some(p) = old.as_ref().or(new.as_ref())
            && available(p)
        {
            available_count += 1;
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(&old) {
                    if !wants(node) {
                        delete.push(old);
                    } else {
                        allowed.push(node.clone());
                    }
                } else if !wants(node) {
                    should_not_run.push(old);
                } else if surging < max_surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if !available(&new) {
                    surging += 1;
                } else {
                    delete.push(old);
                }
            }
        }
    }
    // Pods on nodes that no longer want one go only while enough others are available.
    let deletable = (available_count - desired).max(0) as usize;
    delete.extend(should_not_run.into_iter().take(deletable));
    let room = (max_surge - surging).max(0) as usize;
    allowed.extend(candidates.into_iter().take(room));
    (delete, allowed)
}

/// The status fields (`updateDaemonSetStatus`), counted on the oldest pod of each node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DsStatus {
    /// `desiredNumberScheduled`.
    pub desired: i32,
    /// `currentNumberScheduled`.
    pub current: i32,
    /// `numberMisscheduled`.
    pub misscheduled: i32,
    /// `numberReady`.
    pub ready: i32,
    /// `updatedNumberScheduled`.
    pub updated: i32,
    /// `numberAvailable`.
    pub available: i32,
    /// `numberUnavailable`.
    pub unavailable: i32,
}

/// See [`DsStatus`].
pub fn status(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &PodsByNode,
    hash: &str,
    now: Timestamp,
) -> DsStatus {
    let mut s = DsStatus::default();
    let generation = template_generation(ds);
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let (run, _) = should_run(node, ds);
        let pods = by_node.get(name).filter(|p| !p.is_empty());
        if !run {
            if pods.is_some() {
                s.misscheduled += 1;
            }
            continue;
        }
        s.desired += 1;
        let Some(pods) = pods else { continue };
        s.current += 1;
        let mut pods = pods.clone();
        sort_pods(&mut pods);
        let pod = &pods[0];
        if podutil::is_ready(pod) {
            s.ready += 1;
            if podutil::is_available(pod, min_ready_seconds(ds), now) {
                s.available += 1;
            }
        }
        if is_pod_updated(pod, hash, generation) {
            s.updated += 1;
        }
    }
    s.unavailable = s.desired - s.available;
    s
}

impl DsStatus {
    /// As the DaemonSet carries it.
    pub fn of(ds: &DaemonSet) -> DsStatus {
        let s = ds.status.clone().unwrap_or_default();
        DsStatus {
            desired: s.desired_number_scheduled,
            current: s.current_number_scheduled,
            misscheduled: s.number_misscheduled,
            ready: s.number_ready,
            updated: s.updated_number_scheduled.unwrap_or(0),
            available: s.number_available.unwrap_or(0),
            unavailable: s.number_unavailable.unwrap_or(0),
        }
    }
}

/// The revision data of the DaemonSet's template and whether `rev` holds it (`Match`).
pub fn revision_matches(ds: &DaemonSet, rev: &ControllerRevision) -> bool {
    history::data_of(rev) == &history::template_patch(&template(ds))
}

/// `snapshot`'s revision: `<ds>-<ComputeHash(template, collisionCount)>`, labels = template labels plus the
/// hash.
pub fn revision_for(ds: &DaemonSet, revision: i64, collision_count: Option<i32>) -> ControllerRevision {
    let t = template(ds);
    let hash = crate::hash::compute_hash(&t, collision_count);
    let mut labels = t
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.clone());
    let name = history::revision_name(ds.metadata.name.as_deref().unwrap_or(""), &hash);
    history::new_revision(
        &ds.metadata,
        &owner_ref(ds),
        labels,
        history::template_patch(&t),
        revision,
        name,
    )
}

/// The DaemonSet's controller reference.
pub fn owner_ref(ds: &DaemonSet) -> OwnerReference {
    controller_ref::controller_ref(
        "apps/v1",
        "DaemonSet",
        ds.metadata.name.as_deref().unwrap_or(""),
        ds.metadata.uid.as_deref().unwrap_or(""),
    )
}

/// `cleanupHistory`: old revisions beyond the limit whose hash no pod carries, oldest first (`old` sorted).
pub fn history_to_delete(old: &[Arc<ControllerRevision>], pods: &[Arc<Pod>], limit: i32) -> Vec<String> {
    let mut to_kill = old.len() as i64 - i64::from(limit.max(0));
    let live: HashSet<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get(HASH_LABEL).map(String::as_str))
        .collect();
    let mut out = Vec::new();
    for r in old {
        if to_kill <= 0 {
            break;
        }
        let hash = r
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .map(String::as_str);
        if hash.is_some_and(|h| live.contains(h)) {
            continue;
        }
        out.extend(r.metadata.name.clone());
        to_kill -= 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// The controller

/// client-go `flowcontrol.Backoff` for failed pods, per DaemonSet and node.
#[derive(Default)]
struct Backoff {
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl Backoff {
    /// The wait left when `key` is still backing off.
    fn in_backoff(&self, key: &str, now: Instant) -> Option<Duration> {
        let m = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (d, at) = m.get(key)?;
        let since = now.saturating_duration_since(*at);
        (since < *d).then(|| *d - since)
    }

    /// Record a failure: the backoff starts at the base, doubles, and resets after twice the cap.
    fn next(&self, key: &str, now: Instant) {
        let mut m = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(key.into()).or_insert((Duration::ZERO, now));
        let expired = now.saturating_duration_since(e.1) > 2 * FAILED_BACKOFF_MAX;
        e.0 = if e.0.is_zero() || expired {
            FAILED_BACKOFF_BASE
        } else {
            (e.0 * 2).min(FAILED_BACKOFF_MAX)
        };
        e.1 = now;
    }
}

struct DaemonSetController {
    client: kube::Client,
    recorder: Arc<Recorder>,
    pod_control: PodControl,
    sets: Arc<Informer<DaemonSet>>,
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    revisions: Arc<Informer<ControllerRevision>>,
    expectations: Arc<Expectations>,
    backoff: Backoff,
}

fn resolve(sets: &Informer<DaemonSet>, ns: &str, r: &OwnerReference) -> Option<Arc<DaemonSet>> {
    (r.kind == "DaemonSet")
        .then(|| sets.get_in(ns, &r.name))
        .flatten()
        .filter(|s| s.metadata.uid.as_deref() == Some(r.uid.as_str()))
}

fn matching(
    sets: &Informer<DaemonSet>,
    ns: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Vec<Arc<DaemonSet>> {
    sets.list_ns(ns)
        .into_iter()
        .filter(|d| {
            d.spec
                .as_ref()
                .is_some_and(|s| !selector::is_empty(&s.selector) && selector::matches(&s.selector, labels))
        })
        .collect()
}

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("daemonset");
    let sets = ctx.informers.get::<DaemonSet>();
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    let revisions = ctx.informers.get::<ControllerRevision>();
    let expectations = Arc::new(Expectations::default());

    let (q, e) = (queue.clone(), expectations.clone());
    sets.on_change(move |c| {
        let key = key_of(c.object().as_ref());
        if matches!(c, Change::Deleted(_)) {
            e.forget(&key);
        }
        q.add(key);
    });

    let (q, s, e) = (queue.clone(), sets.clone(), expectations.clone());
    pods.on_change(move |c| {
        let pod = c.object();
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let pod_key = key_of(pod.as_ref());
        let owner = controller_ref::controller_of(&pod.metadata).and_then(|r| resolve(&s, ns, r));
        match c {
            Change::Added(p) => match owner {
                Some(ds) => {
                    let key = key_of(ds.as_ref());
                    if p.metadata.deletion_timestamp.is_some() {
                        e.deletion_observed(&key, &pod_key);
                    } else {
                        e.creation_observed(&key);
                    }
                    q.add(key);
                }
                None => {
                    if controller_ref::controller_of(&p.metadata).is_none() {
                        for ds in matching(&s, ns, p.metadata.labels.as_ref()) {
                            q.add(key_of(ds.as_ref()));
                        }
                    }
                }
            },
            Change::Updated { old, new } => {
                let old_owner = controller_ref::controller_of(&old.metadata);
                let new_owner = controller_ref::controller_of(&new.metadata);
                if old_owner.map(|r| &r.uid) != new_owner.map(|r| &r.uid)
                    && let Some(ds) = old_owner.and_then(|r| resolve(&s, ns, r))
                {
                    q.add(key_of(ds.as_ref()));
                }
                match owner {
                    Some(ds) => {
                        let key = key_of(ds.as_ref());
                        if new.metadata.deletion_timestamp.is_some()
                            && old.metadata.deletion_timestamp.is_none()
                        {
                            e.deletion_observed(&key, &pod_key);
                        }
                        let min_ready = min_ready_seconds(&ds);
                        if !podutil::is_ready(old) && podutil::is_ready(new) && min_ready > 0 {
                            q.add_after(key.clone(), Duration::from_secs(min_ready as u64 + 1));
                        }
                        q.add(key);
                    }
                    None if new_owner.is_none()
                        && (old.metadata.labels != new.metadata.labels || old_owner.is_some()) =>
                    {
                        for ds in matching(&s, ns, new.metadata.labels.as_ref()) {
                            q.add(key_of(ds.as_ref()));
                        }
                    }
                    None => {}
                }
            }
            Change::Deleted(_) => {
                if let Some(ds) = owner {
                    let key = key_of(ds.as_ref());
                    e.deletion_observed(&key, &pod_key);
                    q.add(key);
                }
            }
        }
    });

    let (q, s) = (queue.clone(), sets.clone());
    nodes.on_change(move |c| {
        for ds in s.list() {
            let enqueue = match c {
                Change::Added(n) => should_run(n, &ds).0,
                Change::Updated { old, new } => should_run(old, &ds) != should_run(new, &ds),
                Change::Deleted(_) => true,
            };
            if enqueue {
                q.add(key_of(ds.as_ref()));
            }
        }
    });

    let (q, s) = (queue.clone(), sets.clone());
    revisions.on_change(move |c| {
        let rev = c.object();
        let ns = rev.metadata.namespace.as_deref().unwrap_or("");
        match controller_ref::controller_of(&rev.metadata) {
            Some(r) => {
                if let Some(ds) = resolve(&s, ns, r) {
                    q.add(key_of(ds.as_ref()));
                }
            }
            None if matches!(c, Change::Added(_)) => {
                for ds in matching(&s, ns, rev.metadata.labels.as_ref()) {
                    q.add(key_of(ds.as_ref()));
                }
            }
            None => {}
        }
    });

    let recorder = ctx.recorder(COMPONENT);
    let controller = Arc::new(DaemonSetController {
        client: ctx.client.clone(),
        pod_control: PodControl::new(ctx.client.clone(), recorder.clone()),
        recorder,
        sets,
        pods,
        nodes,
        revisions,
        expectations,
        backoff: Backoff::default(),
    });
    Box::pin(run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        controller,
        cancel,
    ))
}

fn gone_or_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

#[async_trait::async_trait]
impl Reconciler for DaemonSetController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(ds) = self.sets.get(key) else {
            self.expectations.forget(key);
            return Ok(None);
        };
        let (ns, name) = split_key(key);
        let Some(spec) = ds.spec.as_ref() else {
            return Ok(None);
        };
        let ds_ref = object_ref("apps/v1", "DaemonSet", &ds.metadata);
        if selector::is_empty(&spec.selector) {
            self.recorder.emit(
                ds_ref,
                EventType::Warning,
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.".into(),
            );
            return Ok(None);
        }
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let mut nodes = self.nodes.list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

        // constructHistory
        let owner = owner_ref(&ds);
        let mut revisions = history::claim_revisions(
            &self.client,
            self.revisions.list_ns(ns),
            &spec.selector,
            &owner,
            false,
        )
        .await?;
        history::sort_revisions(&mut revisions);
        let (cur, old): (Vec<_>, Vec<_>) = revisions.iter().cloned().partition(|r| revision_matches(&ds, r));
        let next = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let current = match cur.last() {
            Some(c) if c.revision < next => history::set_revision_number(&self.client, c, next).await?,
            Some(c) => (**c).clone(),
            None => self.snapshot(&ds, next).await?,
        };
        let hash = current
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL).cloned())
            .unwrap_or_default();

        // Expectations first, then the cache (upstream's order): a pod that lands in between is then seen
        // by the next sync, not counted as satisfied against a list that lacks it.
        let satisfied = self.expectations.satisfied(key);
        let pods = self.claim_pods(&ds, ns).await?;
        let by_node = pods_by_node(&pods, false);
        let now = Timestamp::now();
        let mut failure: Option<Error> = None;
        let mut requeue: Option<Duration> = None;
        if satisfied {
            let plan = manage(&ds, &nodes, &by_node, &hash, now);
            let mut delete = plan.delete.clone();
            for (node, pod) in &plan.succeeded {
                let msg = format!(
                    "Found succeeded daemon pod {ns}/{} on node {node}, will try to delete it",
                    pod.metadata.name.as_deref().unwrap_or("")
                );
                self.recorder
                    .emit(ds_ref.clone(), EventType::Normal, "SucceededDaemonPod", msg);
                delete.push(pod.clone());
            }
            for (node, pod) in &plan.failed {
                let bkey = format!(
                    "{}/{}/{node}",
                    ds.metadata.uid.as_deref().unwrap_or(""),
                    ds.status
                        .as_ref()
                        .and_then(|s| s.observed_generation)
                        .unwrap_or(0)
                );
                let at = Instant::now();
                if let Some(wait) = self.backoff.in_backoff(&bkey, at) {
                    requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
                    continue;
                }
                self.backoff.next(&bkey, at);
                let msg = format!(
                    "Found failed daemon pod {ns}/{} on node {node}, will try to kill it",
                    pod.metadata.name.as_deref().unwrap_or("")
                );
                self.recorder
                    .emit(ds_ref.clone(), EventType::Warning, "FailedDaemonPod", msg);
                delete.push(pod.clone());
            }
            let acted = !delete.is_empty() || !plan.create_on.is_empty();
            if let Err(e) = self.sync_nodes(&ds, key, &delete, &plan.create_on, &hash).await {
                failure = Some(e);
            }
            if !acted
                && failure.is_none()
                && self.expectations.satisfied(key)
                && strategy_type(&ds) == "RollingUpdate"
            {
                let (delete, create_on) = rolling_update(&ds, &nodes, &by_node, &hash, now);
                if let Err(e) = self.sync_nodes(&ds, key, &delete, &create_on, &hash).await {
                    failure = Some(e);
                }
            }
            let mut old = old;
            history::sort_revisions(&mut old);
            let doomed = history_to_delete(&old, &pods, spec.revision_history_limit.unwrap_or(10));
            if let Err(e) = history::delete_revisions(&self.client, ns, &doomed).await {
                failure = failure.or(Some(e));
            }
        }

        // updateDaemonSetStatus (observedGeneration only when the spec was acted on).
        let st = status(&ds, &nodes, &by_node, &hash, now);
        let observed = ds
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        let generation = ds.metadata.generation.unwrap_or(0);
        if st != DsStatus::of(&ds) || (satisfied && observed < generation) {
            let og = if satisfied { generation } else { observed };
            let patch = json!({"status": {
                "observedGeneration": og,
                "desiredNumberScheduled": st.desired,
                "currentNumberScheduled": st.current,
                "numberMisscheduled": st.misscheduled,
                "numberReady": st.ready,
                "updatedNumberScheduled": st.updated,
                "numberAvailable": st.available,
                "numberUnavailable": st.unavailable,
            }});
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if gone_or_conflict(&e) => {}
                Err(e) => failure = failure.or(Some(e.into())),
            }
        }
        let min_ready = min_ready_seconds(&ds);
        if min_ready > 0 && st.ready != st.available {
            let d = Duration::from_secs(min_ready as u64);
            requeue = Some(requeue.map_or(d, |r| r.min(d)));
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(requeue),
        }
    }
}

impl DaemonSetController {
    /// `snapshot`: create the current revision; a name taken by other data bumps `status.collisionCount`
    /// and fails, so the next sync hashes again.
    async fn snapshot(&self, ds: &DaemonSet, revision: i64) -> Result<ControllerRevision, Error> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or("default");
        let collision = ds.status.as_ref().and_then(|s| s.collision_count);
        let rev = revision_for(ds, revision, collision);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        match api.create(&Default::default(), &rev).await {
            Ok(r) => Ok(r),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = rev.metadata.name.clone().unwrap_or_default();
                let existing = api.get(&name).await?;
                if revision_matches(ds, &existing) {
                    return Ok(existing);
                }
                let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
                let fresh = sets.get(ds.metadata.name.as_deref().unwrap_or("")).await?;
                let fresh_count = fresh.status.as_ref().and_then(|s| s.collision_count);
                if fresh_count != collision {
                    return Err(Error::Other(format!(
                        "found a stale collision count ({collision:?}, expected {fresh_count:?}) of DaemonSet {:?} \
                         while processing; will retry until it is updated",
                        ds.metadata.name.as_deref().unwrap_or("")
                    )));
                }
                let patch = json!({"status": {"collisionCount": collision.unwrap_or(0) + 1}});
                sets.patch_status(
                    ds.metadata.name.as_deref().unwrap_or(""),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
                Err(kube::Error::Api(s).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `getDaemonPods`: the namespace's pods, adopting matching orphans and releasing ours that stopped
    /// matching (finished pods too).
    async fn claim_pods(&self, ds: &DaemonSet, ns: &str) -> Result<Vec<Arc<Pod>>, Error> {
        let spec = ds.spec.as_ref().expect("checked by the caller");
        let owner = owner_ref(ds);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let mut owned = Vec::new();
        let mut may_adopt = None;
        for pod in self.pods.list_ns(ns) {
            let matches = selector::matches(&spec.selector, pod.metadata.labels.as_ref());
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let pname = pod.metadata.name.clone().unwrap_or_default();
            match controller_ref::claim(&pod.metadata, &owner.uid, matches, false) {
                Claim::Owned => owned.push(pod),
                Claim::Adopt => {
                    if may_adopt.is_none() {
                        let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
                        let fresh = sets.get(ds.metadata.name.as_deref().unwrap_or("")).await.ok();
                        may_adopt = Some(fresh.is_some_and(|f| {
                            f.metadata.uid == ds.metadata.uid && f.metadata.deletion_timestamp.is_none()
                        }));
                    }
                    if may_adopt != Some(true) {
                        continue;
                    }
                    let patch = controller_ref::adopt_patch(&owner, &uid, &[]);
                    match api
                        .patch(&pname, &PatchParams::default(), &Patch::Strategic(&patch))
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
                        .patch(&pname, &PatchParams::default(), &Patch::Strategic(&patch))
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

    /// `syncNodes`: delete `delete` and create a pod on each of `create_on` (slow start), with
    /// expectations set first; a failed or skipped call lowers them again.
    async fn sync_nodes(
        &self,
        ds: &DaemonSet,
        key: &str,
        delete: &[Arc<Pod>],
        create_on: &[String],
        hash: &str,
    ) -> Result<(), Error> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or("default");
        let ds_ref = object_ref("apps/v1", "DaemonSet", &ds.metadata);
        let limit = DS_BURST_REPLICAS.min(BURST_REPLICAS);
        let create_on = &create_on[..create_on.len().min(limit)];
        let delete = &delete[..delete.len().min(limit)];
        let mut seen = HashSet::new();
        let delete: Vec<&Arc<Pod>> = delete
            .iter()
            .filter(|p| seen.insert(p.metadata.uid.clone()))
            .collect();
        self.expectations.expect_creations(key, create_on.len());
        self.expectations
            .expect_deletions(key, delete.iter().map(|p| key_of(p.as_ref())));
        let owner = owner_ref(ds);
        let tried = std::sync::atomic::AtomicUsize::new(0);
        let (_, create_err) = slow_start_batch(create_on.len(), |i| {
            tried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let template = pod_template_for(ds, hash, &create_on[i]);
            let pod = pod_from_template(&template, ns, &owner);
            let ds_ref = ds_ref.clone();
            async move {
                match self.pod_control.create(&pod, &ds_ref).await {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        self.expectations.creation_observed(key);
                        Err(e)
                    }
                }
            }
        })
        .await;
        if create_err.is_some() {
            // Creations never tried are not expected either.
            let tried = tried.load(std::sync::atomic::Ordering::Relaxed);
            self.expectations
                .lower_creations(key, create_on.len().saturating_sub(tried));
        }
        let results = futures_util::future::join_all(delete.iter().map(|p| {
            let ds_ref = ds_ref.clone();
            async move {
                let pkey = key_of(p.as_ref());
                let r = self
                    .pod_control
                    .delete(
                        ns,
                        p.metadata.name.as_deref().unwrap_or(""),
                        p.metadata.uid.as_deref(),
                        &ds_ref,
                    )
                    .await;
                if r.is_err() {
                    self.expectations.deletion_observed(key, &pkey);
                }
                // Already gone is done.
                match r {
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    r => r,
                }
            }
        }))
        .await;
        let delete_err = results.into_iter().find_map(Result::err);
        if let Some(e) = create_err.or(delete_err) {
            return Err(e.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
