//! The controller manager's namespace-wide and node-wide controllers against the real binary with kubectl:
//! ServiceAccount `default` and `kube-root-ca.crt` in every namespace (and their repair), the leader lease,
//! node lifecycle (a node that stops heartbeating goes Unknown and gets the unreachable taints; its pods
//! are evicted after their tolerationSeconds) and pod GC of pods bound to a node that does not exist.

mod common;

use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::{Value, json};

fn condition<'a>(obj: &'a Value, type_: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    obj["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&NULL)
}

fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn namespaces_get_their_service_account_and_root_ca(c: &Cluster) {
    c.ok(&["create", "namespace", "ctl-sa"]);
    let sa = c.wait_json(
        &["serviceaccount", "default", "-n", "ctl-sa"],
        Duration::from_secs(20),
        |_| true,
    );
    let ca_b64 = c.ok(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    use base64::Engine;
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca_b64.trim())
            .unwrap(),
    )
    .unwrap();
    let cm = c.wait_json(
        &["configmap", "kube-root-ca.crt", "-n", "ctl-sa"],
        Duration::from_secs(20),
        |_| true,
    );
    assert_eq!(
        cm["data"]["ca.crt"],
        ca.as_str(),
        "the CA that signed the API server's certificate"
    );
    assert!(
        cm["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .unwrap()
            .starts_with("Contains a CA bundle")
    );

    // Deleting `default` brings back a new one; blanking the CA repairs it.
    c.ok(&["delete", "serviceaccount", "default", "-n", "ctl-sa"]);
    let old_uid = sa["metadata"]["uid"].clone();
    c.wait_json(
        &["serviceaccount", "default", "-n", "ctl-sa"],
        Duration::from_secs(20),
        |v| v["metadata"]["uid"] != old_uid,
    );
    c.ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "ctl-sa",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":""}}"#,
    ]);
    c.wait_json(
        &["configmap", "kube-root-ca.crt", "-n", "ctl-sa"],
        Duration::from_secs(20),
        |v| v["data"]["ca.crt"] == ca.as_str(),
    );
    c.ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "ctl-sa"]);
    c.wait_json(
        &["configmap", "kube-root-ca.crt", "-n", "ctl-sa"],
        Duration::from_secs(20),
        |v| v["data"]["ca.crt"] == ca.as_str(),
    );
}

fn one_controller_manager_holds_the_lease(c: &Cluster) {
    let lease = c.wait_json(
        &["lease", "kubeling-controller-manager", "-n", "kube-system"],
        Duration::from_secs(10),
        |v| {
            v["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty())
        },
    );
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
}

/// A Node object with no kubelet behind it: Ready once, then never again.
fn register_silent_node(c: &Cluster, name: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    c.ok_stdin(&["create", "-f", "-"], &node.to_string());
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
    c.ok(&[
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=strategic",
        "-p",
        &status.to_string(),
    ]);
}

fn a_silent_node_goes_unknown_is_tainted_and_its_pods_are_evicted(c: &Cluster) {
    register_silent_node(c, "silent-node");
    c.ok(&["create", "namespace", "ctl-evict"]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evictee", "namespace": "ctl-evict"},
        "spec": {"nodeName": "silent-node", "containers": [{"name": "c", "image": "kubeling/testbox:0.1"}],
                 "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 2}]}});
    // The namespace's `default` ServiceAccount may take a moment: retry the create until admitted.
    eventually(Duration::from_secs(20), "the pod is admitted", || {
        c.kubectl_stdin(&["create", "-f", "-"], Some(&pod.to_string()))
            .status
            .success()
            .then_some(())
    });
    // Grace 15 s (the harness's flag) after the last heartbeat: Unknown, with upstream's reason.
    let node = c.wait_json(&["node", "silent-node"], Duration::from_secs(60), |n| {
        condition(n, "Ready")["status"] == "Unknown"
    });
    assert_eq!(condition(&node, "Ready")["reason"], "NodeStatusUnknown");
    assert_eq!(
        condition(&node, "Ready")["message"],
        "Kubelet stopped posting node status."
    );
    // Another node is Ready, so this is not a whole-cluster disruption: both unreachable taints.
    let node = c.wait_json(&["node", "silent-node"], Duration::from_secs(20), |n| {
        let t = taint_keys(n);
        t.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string())
            && t.contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
    });
    assert!(
        node["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["effect"] == "NoExecute" && t["timeAdded"].is_string())
    );
    // The pod tolerates the taint for 2 s, then is marked and deleted.
    let evicted = c.wait_json(
        &["pod", "evictee", "-n", "ctl-evict"],
        Duration::from_secs(30),
        |p| p["metadata"]["deletionTimestamp"].is_string(),
    );
    assert_eq!(
        condition(&evicted, "DisruptionTarget")["reason"],
        "DeletionByTaintManager"
    );
    let events = c.ok(&[
        "get",
        "events",
        "-n",
        "ctl-evict",
        "--field-selector",
        "involvedObject.name=evictee",
        "-o",
        "jsonpath={range .items[*]}{.reason}|{.message}{\"\\n\"}{end}",
    ]);
    assert!(
        events.contains("TaintManagerEviction|Marking for deletion Pod ctl-evict/evictee"),
        "{events}"
    );
    // The real node keeps heartbeating: Ready, and none of the controller's taints.
    let real = c.ok(&["get", "nodes", "-o", "json"]);
    let real: Value = serde_json::from_str(&real).unwrap();
    for n in real["items"].as_array().unwrap() {
        if n["metadata"]["name"] != "silent-node" {
            assert_eq!(condition(n, "Ready")["status"], "True", "{n}");
            assert!(taint_keys(n).iter().all(|t| !t.contains("unreachable")), "{n}");
        }
    }
    let node_events = c.ok(&[
        "get",
        "events",
        "-A",
        "--field-selector",
        "involvedObject.name=silent-node",
        "-o",
        "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
    ]);
    assert!(node_events.contains("RegisteredNode"), "{node_events}");
    assert!(node_events.contains("NodeNotReady"), "{node_events}");
}

fn pods_bound_to_a_missing_node_are_collected(c: &Cluster) {
    c.ok(&["create", "namespace", "ctl-podgc"]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray", "namespace": "ctl-podgc"},
        "spec": {"nodeName": "ghost-node", "containers": [{"name": "c", "image": "kubeling/testbox:0.1"}]}});
    eventually(Duration::from_secs(20), "the pod is admitted", || {
        c.kubectl_stdin(&["create", "-f", "-"], Some(&pod.to_string()))
            .status
            .success()
            .then_some(())
    });
    // 40 s of quarantine and a 20 s period: gone within about 80 s.
    eventually(Duration::from_secs(120), "the orphaned pod is deleted", || {
        let out = c.kubectl(&["get", "pod", "stray", "-n", "ctl-podgc"]);
        (!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")).then_some(())
    });
}

#[test]
fn namespace_and_node_controllers_behave_as_upstream() {
    let c = Cluster::up_with(&["--node-monitor-grace-period", "15s"], None);
    std::thread::scope(|s| {
        // The pod GC case waits out its quarantine while the others run.
        let gc = s.spawn(|| pods_bound_to_a_missing_node_are_collected(&c));
        one_controller_manager_holds_the_lease(&c);
        namespaces_get_their_service_account_and_root_ca(&c);
        a_silent_node_goes_unknown_is_tainted_and_its_pods_are_evicted(&c);
        gc.join().unwrap();
    });
}
