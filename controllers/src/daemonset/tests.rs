use super::*;
use serde_json::{Value, json};

fn ds(extra: Value) -> DaemonSet {
    let mut v = json!({
        "metadata": {"name": "agent", "namespace": "ns", "uid": "ds-uid", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "c", "image": "v1"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        }
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn merge(a: &mut Value, b: Value) {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), &b) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(x) if x.is_object() && v.is_object() => merge(x, v.clone()),
                _ => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn node(name: &str, labels: Value, taints: Value) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap(),
    )
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// A daemon pod on `node` (bound), `phase`, ready or not, at `hash`, created at second `created`.
fn pod(name: &str, node: &str, phase: &str, ready: bool, hash: &str, created: i64) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
                         "creationTimestamp": format!("2025-12-31T00:00:{created:02}Z"),
                         "labels": {"app": "agent", HASH_LABEL: hash},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                              "uid": "ds-uid", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "v1"}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                                       "lastTransitionTime": "2025-12-31T00:00:00Z"}]}
        }))
        .unwrap(),
    )
}

fn by_node(pods: &[Arc<Pod>]) -> PodsByNode {
    pods_by_node(pods, false)
}

fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
}

#[test]
fn nodes_run_daemon_pods_by_selector_affinity_and_taints() {
    let plain = ds(json!({}));
    let cases = [
        (
            "plain node",
            plain.clone(),
            node("n", json!({}), json!([])),
            (true, true),
        ),
        (
            "nodeSelector mismatch",
            ds(json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}})),
            node("n", json!({"disk": "hdd"}), json!([])),
            (false, false),
        ),
        (
            "nodeSelector match",
            ds(json!({"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}})),
            node("n", json!({"disk": "ssd"}), json!([])),
            (true, true),
        ),
        (
            "required affinity mismatch",
            ds(
                json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}}}}),
            ),
            node("n", json!({"zone": "b"}), json!([])),
            (false, false),
        ),
        (
            "untolerated NoSchedule keeps running pods only",
            plain.clone(),
            node(
                "n",
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            ),
            (false, true),
        ),
        (
            "untolerated NoExecute: neither",
            plain.clone(),
            node(
                "n",
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoExecute"}]),
            ),
            (false, false),
        ),
        (
            "the template tolerates it",
            ds(
                json!({"spec": {"template": {"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}}}),
            ),
            node(
                "n",
                json!({}),
                json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            ),
            (true, true),
        ),
        (
            "automatic tolerations: unreachable NoExecute, unschedulable NoSchedule",
            plain.clone(),
            node(
                "n",
                json!({}),
                json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                       {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            ),
            (true, true),
        ),
        (
            "a PreferNoSchedule taint does not matter",
            plain.clone(),
            node(
                "n",
                json!({}),
                json!([{"key": "x", "effect": "PreferNoSchedule"}]),
            ),
            (true, true),
        ),
        (
            "template nodeName names another node",
            ds(json!({"spec": {"template": {"spec": {"nodeName": "other"}}}})),
            node("n", json!({}), json!([])),
            (false, false),
        ),
    ];
    for (what, d, n, want) in cases {
        assert_eq!(should_run(&n, &d), want, "{what}");
    }
}

#[test]
fn daemon_pods_name_their_node_by_match_fields_and_get_no_node_name() {
    let d = ds(
        json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]}}}}}}),
    );
    let t = pod_template_for(&d, "5d4f", "node-1");
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(
        v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]})
    );
    assert!(
        v["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].is_array()
    );
    assert!(v["spec"].get("nodeName").is_none());
    assert_eq!(v["metadata"]["labels"][HASH_LABEL], "5d4f");
    assert_eq!(v["metadata"]["labels"][TEMPLATE_GENERATION_LABEL], "1");
    let tols = v["spec"]["tolerations"].as_array().unwrap();
    assert_eq!(tols.len(), 6);
    assert_eq!(
        tols[1],
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"})
    );
    let pod = Pod {
        metadata: t.metadata.clone().unwrap(),
        spec: t.spec.clone(),
        status: None,
    };
    assert_eq!(target_node(&pod).as_deref(), Some("node-1"));
    // hostNetwork pods also tolerate network-unavailable; a user toleration of the same key is replaced.
    let d = ds(
        json!({"spec": {"template": {"spec": {"hostNetwork": true, "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}}}}),
    );
    let t = pod_template_for(&d, "h", "n");
    let tols = t.spec.unwrap().tolerations.unwrap();
    assert_eq!(tols.len(), 7);
    assert_eq!(tols[0].toleration_seconds, None);
    // The annotation the API server keeps wins over metadata.generation.
    let d = ds(json!({"metadata": {"generation": 5, "annotations": {TEMPLATE_GENERATION_ANNOTATION: "3"}}}));
    assert_eq!(template_generation(&d), Some(3));
}

#[test]
fn manage_creates_missing_pods_replaces_finished_ones_and_prunes_extras() {
    let d = ds(json!({}));
    let nodes = vec![
        node("a", json!({}), json!([])),
        node("b", json!({}), json!([])),
        node(
            "c",
            json!({}),
            json!([{"key": "k", "value": "v", "effect": "NoExecute"}]),
        ),
    ];
    let pods = vec![
        pod("agent-b1", "b", "Running", true, "h", 1),
        pod("agent-b2", "b", "Running", true, "h", 2),
        pod("agent-c1", "c", "Running", true, "h", 1),
    ];
    let plan = manage(&d, &nodes, &by_node(&pods), "h", t0());
    assert_eq!(plan.create_on, ["a"]);
    assert_eq!(
        names(&plan.delete),
        ["agent-b2", "agent-c1"],
        "the newer duplicate and the evicted one"
    );

    let pods = vec![
        pod("agent-a1", "a", "Failed", false, "h", 1),
        pod("agent-b1", "b", "Succeeded", false, "h", 1),
    ];
    let plan = manage(&d, &nodes[..2], &by_node(&pods), "h", t0());
    assert!(
        plan.create_on.is_empty(),
        "replacements come once the finished pods are gone"
    );
    assert_eq!(plan.failed.len(), 1);
    assert_eq!(plan.failed[0].0, "a");
    assert_eq!(plan.succeeded[0].0, "b");

    // A failed pod being deleted is ignored, so the node gets a new pod.
    let mut dying = (*pod("agent-a1", "a", "Failed", false, "h", 1)).clone();
    dying.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let plan = manage(&d, &nodes[..1], &by_node(&[Arc::new(dying)]), "h", t0());
    assert_eq!(plan.create_on, ["a"]);

    // An unbound pod aimed at a node that is gone is deleted.
    let t = pod_template_for(&d, "h", "gone");
    let unbound = Arc::new(Pod {
        metadata: {
            let mut m = t.metadata.unwrap();
            m.name = Some("agent-x".into());
            m
        },
        spec: t.spec,
        status: None,
    });
    let plan = manage(&d, &nodes[..1], &by_node(&[unbound]), "h", t0());
    assert_eq!(names(&plan.delete), ["agent-x"]);
}

#[test]
fn rolling_update_without_surge_deletes_within_max_unavailable() {
    let d = ds(json!({}));
    let nodes = vec![node("a", json!({}), json!([])), node("b", json!({}), json!([]))];
    let old = vec![
        pod("agent-a", "a", "Running", true, "old", 1),
        pod("agent-b", "b", "Running", true, "old", 1),
    ];
    let (delete, create) = rolling_update(&d, &nodes, &by_node(&old), "new", t0());
    assert_eq!(names(&delete), ["agent-a"], "one at a time (maxUnavailable 1)");
    assert!(create.is_empty());
    // a's replacement is not available yet: b waits.
    let pods = vec![pod("agent-a2", "a", "Running", false, "new", 2), old[1].clone()];
    assert!(
        rolling_update(&d, &nodes, &by_node(&pods), "new", t0())
            .0
            .is_empty()
    );
    // An unavailable old pod is always replaced.
    let pods = vec![
        pod("agent-a2", "a", "Running", false, "new", 2),
        pod("agent-b", "b", "Running", false, "old", 1),
    ];
    assert_eq!(
        names(&rolling_update(&d, &nodes, &by_node(&pods), "new", t0()).0),
        ["agent-b"]
    );
    // maxUnavailable 100% rounds up to every node.
    let d = ds(json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "50%"}}}}));
    assert_eq!(surge_and_unavailable(&d, 3), (0, 2));
    let (delete, _) = rolling_update(
        &ds(json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%"}}}})),
        &nodes,
        &by_node(&old),
        "new",
        t0(),
    );
    assert_eq!(delete.len(), 2);
}

#[test]
fn rolling_update_with_surge_creates_first_and_deletes_once_available() {
    let d = ds(json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}}));
    let nodes = vec![node("a", json!({}), json!([])), node("b", json!({}), json!([]))];
    let old = vec![
        pod("agent-a", "a", "Running", true, "old", 1),
        pod("agent-b", "b", "Running", true, "old", 1),
    ];
    let (delete, create) = rolling_update(&d, &nodes, &by_node(&old), "new", t0());
    assert!(delete.is_empty());
    assert_eq!(create, ["a"]);
    let pods = vec![
        old[0].clone(),
        pod("agent-a2", "a", "Running", true, "new", 2),
        old[1].clone(),
    ];
    let (delete, create) = rolling_update(&d, &nodes, &by_node(&pods), "new", t0());
    assert_eq!(names(&delete), ["agent-a"]);
    assert_eq!(create, ["b"], "a's new pod is available, so b may surge");
    let pods = vec![
        old[0].clone(),
        pod("agent-a2", "a", "Running", false, "new", 2),
        old[1].clone(),
    ];
    let (delete, create) = rolling_update(&d, &nodes, &by_node(&pods), "new", t0());
    assert!(delete.is_empty() && create.is_empty(), "a is surging: b waits");
    // manage with surge keeps both while the new one is not available.
    let pods = vec![old[0].clone(), pod("agent-a2", "a", "Running", false, "new", 2)];
    assert!(
        manage(&d, &nodes[..1], &by_node(&pods), "new", t0())
            .delete
            .is_empty()
    );
}

#[test]
fn status_counts_the_oldest_pod_per_node() {
    let d = ds(json!({}));
    let nodes = vec![node("a", json!({}), json!([]))];
    let pods = vec![pod("agent-a", "a", "Running", true, "h", 1)];
    let s = status(&d, &nodes, &by_node(&pods), "h", t0());
    assert_eq!(
        s,
        DsStatus {
            desired: 1,
            current: 1,
            misscheduled: 0,
            ready: 1,
            updated: 1,
            available: 1,
            unavailable: 0
        }
    );
    let tainted = vec![node(
        "a",
        json!({}),
        json!([{"key": "k", "value": "v", "effect": "NoSchedule"}]),
    )];
    let s = status(&d, &tainted, &by_node(&pods), "h", t0());
    assert_eq!((s.desired, s.misscheduled), (0, 1));
    let s = status(&d, &nodes, &PodsByNode::new(), "h", t0());
    assert_eq!((s.desired, s.current, s.unavailable), (1, 0, 1));
}

#[test]
fn revisions_match_by_template_and_old_ones_go_unless_a_pod_uses_them() {
    let d = ds(json!({}));
    let r = revision_for(&d, 1, None);
    let hash = r.metadata.labels.as_ref().unwrap()[HASH_LABEL].clone();
    assert_eq!(r.metadata.name.as_deref(), Some(format!("agent-{hash}").as_str()));
    assert!(hash.chars().all(|c| "456789bcdf".contains(c)));
    assert!(revision_matches(&d, &r));
    let d2 = ds(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "v2"}]}}}}));
    assert!(!revision_matches(&d2, &r));
    assert_ne!(revision_for(&d, 1, Some(1)).metadata.name, r.metadata.name);

    let old: Vec<Arc<ControllerRevision>> = (1..=4)
        .map(|i| {
            let mut r = revision_for(&d, i, Some(i as i32));
            r.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert(HASH_LABEL.into(), format!("h{i}"));
            r.metadata.name = Some(format!("agent-h{i}"));
            Arc::new(r)
        })
        .collect();
    let pods = vec![pod("p", "a", "Running", true, "h1", 1)];
    assert_eq!(history_to_delete(&old, &pods, 2), ["agent-h2", "agent-h3"]);
    assert!(history_to_delete(&old, &pods, 4).is_empty());
}

#[test]
fn failed_pod_backoff_doubles_per_node() {
    let b = Backoff::default();
    let t = Instant::now();
    assert_eq!(b.in_backoff("k", t), None);
    b.next("k", t);
    assert_eq!(b.in_backoff("k", t), Some(Duration::from_secs(1)));
    assert_eq!(b.in_backoff("k", t + Duration::from_secs(1)), None);
    b.next("k", t + Duration::from_secs(1));
    assert_eq!(
        b.in_backoff("k", t + Duration::from_secs(2)),
        Some(Duration::from_secs(1))
    );
    assert_eq!(
        b.in_backoff("k", t + Duration::from_secs(1)),
        Some(Duration::from_secs(2))
    );
}
