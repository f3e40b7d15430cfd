//! Which pods a ReplicaSet deletes first when it scales down (`controller.ActivePodsWithRanks`, v1.32 with the
//! PodDeletionCost and LogarithmicScaleDown gates on, as they are by default). Pure: the pods, the related pods
//! that give each node its rank, and `now`.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::podutil;

/// `controller.kubernetes.io/pod-deletion-cost`: lower goes first (int32, default 0, unparsable counts as 0).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// What the ordering looks at, computed once per pod.
#[derive(Debug, Clone)]
struct Facts {
    assigned: bool,
    node: String,
    phase: u8,
    ready: bool,
    cost: i32,
    rank: usize,
    ready_time: Option<Timestamp>,
    restarts: i32,
    created: Option<Timestamp>,
    uid: String,
}

/// `podPhaseToOrdinal`: Pending 0, Unknown 1, Running 2; anything else (not in the map) 0.
fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// The pod-deletion-cost annotation (`GetDeletionCostFromPodAnnotations`; errors count as 0).
pub fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(0)
}

/// `maxContainerRestarts`: the most restarts of any regular container, or of a sidecar (an init container
/// with `restartPolicy: Always`).
pub fn max_restarts(pod: &Pod) -> i32 {
    let Some(status) = pod.status.as_ref() else {
        return 0;
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    let sidecars: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    regular.max(sidecar)
}

fn facts(pod: &Pod, rank: usize) -> Facts {
    let node = podutil::node_name(pod).to_string();
    let ready = podutil::is_ready(pod);
    Facts {
        assigned: !node.is_empty(),
        node,
        phase: phase_ordinal(podutil::phase(pod)),
        ready,
        cost: deletion_cost(pod),
        rank,
        ready_time: if ready { podutil::ready_since(pod) } else { None },
        restarts: max_restarts(pod),
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// `afterOrZero`: a zero time counts as later than any other.
fn after_or_zero(t1: Option<Timestamp>, t2: Option<Timestamp>) -> bool {
    match (t1, t2) {
        (None, _) | (_, None) => t1.is_none(),
        (Some(a), Some(b)) => a > b,
    }
}

/// `logarithmicRankDiff`: the difference of the log2 buckets of `now − t` in nanoseconds (−1 for a time not
/// before now).
fn log_rank_diff(t1: Timestamp, t2: Timestamp, now: Timestamp) -> i64 {
    let bucket = |t: Timestamp| {
        let d = now.duration_since(t).as_nanos();
        if d > 0 { (d as f64).log2() as i64 } else { -1 }
    };
    bucket(t1) - bucket(t2)
}

/// Log-bucketed comparison of two different times with the UID tie-break (`true`: `a` goes first).
fn log_less(a: &Facts, b: &Facts, ta: Option<Timestamp>, tb: Option<Timestamp>, now: Timestamp) -> bool {
    match (ta, tb) {
        (Some(x), Some(y)) => match log_rank_diff(x, y, now) {
            0 => a.uid < b.uid,
            d => d < 0,
        },
        _ => after_or_zero(ta, tb),
    }
}

/// `ActivePodsWithRanks.Less`: whether `a` should be deleted before `b`.
fn less(a: &Facts, b: &Facts, now: Timestamp) -> bool {
    // 1. Unassigned < assigned.
    if a.node != b.node && (!a.assigned || !b.assigned) {
        return !a.assigned;
    }
    // 2. Pending < Unknown < Running.
    if a.phase != b.phase {
        return a.phase < b.phase;
    }
    // 3. Not ready < ready.
    if a.ready != b.ready {
        return !a.ready;
    }
    // 4. Lower pod-deletion-cost < higher.
    if a.cost != b.cost {
        return a.cost < b.cost;
    }
    // 5. Doubled up < not doubled up.
    if a.rank != b.rank {
        return a.rank > b.rank;
    }
    // 6. Both ready: ready for a shorter time first (log2 buckets, then UID).
    if a.ready && b.ready && a.ready_time != b.ready_time {
        return log_less(a, b, a.ready_time, b.ready_time, now);
    }
    // 7. More restarts first.
    if a.restarts != b.restarts {
        return a.restarts > b.restarts;
    }
    // 8. Newer first (zero counts as newest; log2 buckets, then UID).
    if a.created != b.created {
        return log_less(a, b, a.created, b.created, now);
    }
    false
}

/// A stable merge sort on a `less` that need not be a total order (the log-bucket UID tie-break can make
/// cycles, on which the standard library's sort may panic; Go's sort just produces some order).
fn merge_sort<T: Clone>(items: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let n = items.len();
    if n <= 1 {
        return;
    }
    let mid = n / 2;
    merge_sort(&mut items[..mid], less);
    merge_sort(&mut items[mid..], less);
    let mut merged = Vec::with_capacity(n);
    let (mut i, mut j) = (0, mid);
    while i < mid && j < n {
        if less(&items[j], &items[i]) {
            merged.push(items[j].clone());
            j += 1;
        } else {
            merged.push(items[i].clone());
            i += 1;
        }
    }
    merged.extend_from_slice(&items[i..mid]);
    merged.extend_from_slice(&items[j..n]);
    items.clone_from_slice(&merged);
}

/// `getPodsRankedByRelatedPodsOnSameNode` + `ActivePodsWithRanks` sorted: `pods` in deletion order. A pod's
/// rank is the number of active `related` pods (those of every ReplicaSet with the same controller) on its
/// node.
pub fn deletion_order(pods: &[Arc<Pod>], related: &[Arc<Pod>], now: Timestamp) -> Vec<Arc<Pod>> {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| podutil::is_active(p)) {
        *on_node.entry(podutil::node_name(p)).or_default() += 1;
    }
    let mut ranked: Vec<(Facts, Arc<Pod>)> = pods
        .iter()
        .map(|p| {
            let rank = on_node.get(podutil::node_name(p)).copied().unwrap_or(0);
            (facts(p, rank), p.clone())
        })
        .collect();
    merge_sort(&mut ranked, &|a: &(Facts, Arc<Pod>), b: &(Facts, Arc<Pod>)| {
        less(&a.0, &b.0, now)
    });
    ranked.into_iter().map(|(_, p)| p).collect()
}

/// `getPodsToDelete`: the first `diff` pods in deletion order (no sort when all of them go).
pub fn pods_to_delete(pods: &[Arc<Pod>], related: &[Arc<Pod>], diff: usize, now: Timestamp) -> Vec<Arc<Pod>> {
    if diff >= pods.len() {
        return pods.to_vec();
    }
    let mut ordered = deletion_order(pods, related, now);
    ordered.truncate(diff);
    ordered
}

/// How two pods compare (for tests and debugging): `Less` when `a` goes first.
pub fn compare(a: &Pod, b: &Pod, rank_a: usize, rank_b: usize, now: Timestamp) -> Ordering {
    let (fa, fb) = (facts(a, rank_a), facts(b, rank_b));
    if less(&fa, &fb, now) {
        Ordering::Less
    } else if less(&fb, &fa, now) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use serde_json::{Value, json};

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    /// A pod with `uid`, built from a JSON patch of fields.
    fn pod(uid: &str, extra: Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": uid, "uid": uid, "creationTimestamp": "2025-12-31T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-12-31T12:00:00Z"}
            ]}
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn merge(base: &mut Value, patch: Value) {
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

    fn ready_at(ago: SignedDuration) -> Value {
        let t = t0() - ago;
        json!({"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t.to_string()}]}})
    }

    fn created_at(ago: SignedDuration) -> Value {
        json!({"metadata": {"creationTimestamp": (t0() - ago).to_string()}})
    }

    #[test]
    fn each_rule_decides_in_upstreams_order() {
        let now = t0();
        let h = SignedDuration::from_hours;
        let s = SignedDuration::from_secs;
        // (name, a, b, rank a, rank b, expected: does a go first?)
        let cases: Vec<(&str, Pod, Pod, usize, usize, Ordering)> = vec![
            (
                "unassigned before assigned",
                pod("a", json!({"spec": {"nodeName": null}})),
                pod("b", json!({})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "unassigned before assigned even if running vs pending",
                pod(
                    "a",
                    json!({"spec": {"nodeName": null}, "status": {"phase": "Running"}}),
                ),
                pod("b", json!({"status": {"phase": "Pending"}})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "pending before running",
                pod("a", json!({"status": {"phase": "Pending"}})),
                pod("b", json!({})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "unknown before running",
                pod("a", json!({"status": {"phase": "Unknown"}})),
                pod("b", json!({})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "pending before unknown",
                pod("a", json!({"status": {"phase": "Pending"}})),
                pod("b", json!({"status": {"phase": "Unknown"}})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "not ready before ready",
                pod(
                    "b",
                    json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                ),
                pod("a", json!({})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "lower deletion cost first, even against rank",
                pod(
                    "a",
                    json!({"metadata": {"annotations": {POD_DELETION_COST: "-5"}}}),
                ),
                pod("b", json!({})),
                0,
                3,
                Ordering::Less,
            ),
            (
                "higher cost last",
                pod(
                    "a",
                    json!({"metadata": {"annotations": {POD_DELETION_COST: "10"}}}),
                ),
                pod("b", json!({})),
                0,
                0,
                Ordering::Greater,
            ),
            (
                "an unparsable cost counts as 0",
                pod(
                    "b",
                    json!({"metadata": {"annotations": {POD_DELETION_COST: "lots"}}}),
                ),
                pod("a", json!({})),
                5,
                0,
                Ordering::Less,
            ),
            (
                "higher rank (more doubled up) first",
                pod("a", json!({})),
                pod("b", json!({})),
                3,
                1,
                Ordering::Less,
            ),
            (
                "ready for a shorter time first (different buckets)",
                pod("z", ready_at(s(10))),
                pod("a", ready_at(h(10))),
                0,
                0,
                Ordering::Less,
            ),
            (
                // 100 s and 120 s ago share the bucket 2^36 ns..2^37 ns, so the smaller UID goes first.
                "same log bucket: the smaller uid first",
                pod("b", ready_at(s(100))),
                pod("a", ready_at(s(120))),
                0,
                0,
                Ordering::Greater,
            ),
            (
                "more restarts first",
                pod(
                    "b",
                    json!({"status": {"containerStatuses": [{"name": "c", "restartCount": 4, "image": "", "imageID": "", "ready": true}]}}),
                ),
                pod("a", json!({})),
                0,
                0,
                Ordering::Less,
            ),
            (
                "newer first",
                pod("z", created_at(s(30))),
                pod("a", created_at(h(30))),
                0,
                0,
                Ordering::Less,
            ),
            (
                "no creation time counts as newest",
                pod("z", json!({"metadata": {"creationTimestamp": null}})),
                pod("a", created_at(s(1))),
                0,
                0,
                Ordering::Less,
            ),
            (
                "identical pods: no preference",
                pod("a", json!({})),
                pod("a", json!({})),
                0,
                0,
                Ordering::Equal,
            ),
        ];
        for (name, a, b, ra, rb, want) in cases {
            assert_eq!(compare(&a, &b, ra, rb, now), want, "{name}");
        }
    }

    #[test]
    fn sidecar_restarts_count_but_plain_init_containers_do_not() {
        let mut p = pod(
            "a",
            json!({
                "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}, {"name": "init"}]},
                "status": {"initContainerStatuses": [
                    {"name": "side", "restartCount": 7, "image": "", "imageID": "", "ready": true},
                    {"name": "init", "restartCount": 9, "image": "", "imageID": "", "ready": false}
                ]}
            }),
        );
        assert_eq!(max_restarts(&p), 7);
        p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].restart_policy = None;
        assert_eq!(max_restarts(&p), 0);
    }

    #[test]
    fn pods_on_crowded_nodes_go_first_and_all_go_unsorted() {
        let now = t0();
        let a = Arc::new(pod("a", json!({"spec": {"nodeName": "n1"}})));
        let b = Arc::new(pod("b", json!({"spec": {"nodeName": "n2"}})));
        let c = Arc::new(pod("c", json!({"spec": {"nodeName": "n2"}})));
        // A pod of a sibling ReplicaSet on n1 makes n1 crowded.
        let sib1 = Arc::new(pod("s1", json!({"spec": {"nodeName": "n1"}})));
        let sib2 = Arc::new(pod("s2", json!({"spec": {"nodeName": "n1"}})));
        let pods = vec![b.clone(), c.clone(), a.clone()];
        let related = vec![a.clone(), b.clone(), c.clone(), sib1, sib2];
        let out = pods_to_delete(&pods, &related, 1, now);
        assert_eq!(out[0].metadata.name.as_deref(), Some("a"));
        let all = pods_to_delete(&pods, &related, 3, now);
        let names: Vec<_> = all.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["b", "c", "a"], "deleting all of them keeps the order");
    }

    #[test]
    fn a_cyclic_comparison_does_not_panic() {
        // Equal ready times go to restarts, different ones in one bucket to the UID: a cycle.
        let now = t0();
        let s = SignedDuration::from_secs;
        let restarts = |n: i32| json!({"status": {"containerStatuses": [{"name": "c", "restartCount": n, "image": "", "imageID": "", "ready": true}]}});
        let mut a = pod("3", ready_at(s(100)));
        merge_into(&mut a, restarts(5));
        let b = pod("1", ready_at(s(100)));
        let c = pod("2", ready_at(s(110)));
        let pods: Vec<Arc<Pod>> = (0..50)
            .flat_map(|_| [a.clone(), b.clone(), c.clone()])
            .map(Arc::new)
            .collect();
        assert_eq!(deletion_order(&pods, &[], now).len(), 150);
    }

    fn merge_into(p: &mut Pod, extra: Value) {
        let mut v = serde_json::to_value(&*p).unwrap();
        merge(&mut v, extra);
        *p = serde_json::from_value(v).unwrap();
    }
}
