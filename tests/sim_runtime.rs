//! `kubeling up --runtime sim --nodes 3`: the real binary and kubectl, no Docker. Simulated nodes register
//! Ready, a Deployment's pods spread over them and turn Ready, a Job completes, exit annotations fail or
//! restart containers as the restart policy says, probes follow their annotations, and `kubectl logs`
//! answers.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use common::{Cluster, container_status};

const TIMEOUT: Duration = Duration::from_secs(90);
/// 300 pods through three kubelets, each pod a handful of API writes; generous for a loaded debug build.
const DEPLOYMENT_TIMEOUT: Duration = Duration::from_secs(300);

fn sim_cluster() -> Cluster {
    Cluster::up_with(&["--runtime", "sim", "--nodes", "3"], None)
}

fn apply(c: &Cluster, manifest: &str) {
    c.ok_stdin(&["apply", "-f", "-"], manifest);
}

#[test]
fn three_simulated_nodes_run_a_deployment_of_300_spread_over_them() {
    let c = sim_cluster();
    let nodes = c.wait_json(&["nodes"], TIMEOUT, |v| {
        let items = v["items"].as_array().cloned().unwrap_or_default();
        items.len() == 3
            && items.iter().all(|n| {
                n["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
            })
    });
    let names: Vec<&str> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    let first = names.iter().min_by_key(|n| n.len()).unwrap();
    let mut want = vec![first.to_string(), format!("{first}-2"), format!("{first}-3")];
    want.sort();
    let mut got: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    got.sort();
    assert_eq!(got, want, "nodes are <host>, <host>-2, <host>-3");
    for n in nodes["items"].as_array().unwrap() {
        assert_eq!(n["status"]["nodeInfo"]["containerRuntimeVersion"], "sim://0.1");
        assert_eq!(n["status"]["allocatable"]["pods"], "4000");
    }

    apply(
        &c,
        r#"{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 300, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                           "readinessProbe": {"httpGet": {"port": 80}}}]}}}}"#,
    );
    // The readiness probe (httpGet: nothing listens on a simulated pod's IP) passes on the simulated prober.
    c.wait_json(&["deployment", "web"], DEPLOYMENT_TIMEOUT, |d| {
        d["status"]["readyReplicas"] == 300
    });
    let pods = c.wait_json(&["pods", "-l", "app=web"], TIMEOUT, |v| {
        v["items"].as_array().is_some_and(|items| items.len() == 300)
    });
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut ips = HashSet::new();
    for p in pods["items"].as_array().unwrap() {
        assert_eq!(p["status"]["phase"], "Running");
        *per_node
            .entry(p["spec"]["nodeName"].as_str().unwrap().to_string())
            .or_default() += 1;
        let ip = p["status"]["podIP"].as_str().unwrap().to_string();
        assert!(ip.starts_with("10.1"), "pod IP {ip} from the simulated ranges");
        assert!(ips.insert(ip), "pod IPs are unique");
    }
    assert_eq!(per_node.len(), 3, "pods on every node: {per_node:?}");
    assert!(per_node.values().all(|n| *n >= 50), "spread: {per_node:?}");

    let name = pods["items"][0]["metadata"]["name"].as_str().unwrap();
    let logs = c.ok(&["logs", name]);
    assert!(
        logs.contains(&format!(
            "sim: container app of pod default/{name} started (image nginx:1.27)"
        )),
        "{logs}"
    );
}

#[test]
fn jobs_complete_and_exit_annotations_follow_the_restart_policy() {
    let c = sim_cluster();
    apply(
        &c,
        r#"{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
            "spec": {"completions": 3, "parallelism": 2,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "initContainers": [{"name": "setup", "image": "busybox"}],
                                           "containers": [{"name": "pi", "image": "perl:5"}]}}}}"#,
    );
    apply(
        &c,
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "fails", "annotations": {"sim.kubeling.dev/exit-code": "3"}},
             "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "crashes", "annotations": {"sim.kubeling.dev/exit-after": "1s",
                                                              "sim.kubeling.dev/exit-code": "app=2"}},
             "spec": {"containers": [{"name": "app", "image": "busybox"}]}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "unready", "annotations": {"sim.kubeling.dev/readiness": "fail"}},
             "spec": {"containers": [{"name": "app", "image": "busybox",
                                      "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                                      "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "bad", "annotations": {"sim.kubeling.dev/exit-after": "soon"}},
             "spec": {"containers": [{"name": "app", "image": "busybox"}]}}]}"#,
    );
    c.wait_json(&["job", "pi"], TIMEOUT, |j| {
        j["status"]["succeeded"] == 3
            && j["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            })
    });

    let fails = c.wait_json(&["pod", "fails"], TIMEOUT, |p| p["status"]["phase"] == "Failed");
    let app = container_status(&fails, "containerStatuses", "app");
    assert_eq!(app["state"]["terminated"]["exitCode"], 3);
    assert_eq!(app["state"]["terminated"]["reason"], "Error");
    assert_eq!(app["restartCount"], 0, "restartPolicy Never: no restart");

    let crashes = c.wait_json(&["pod", "crashes"], TIMEOUT, |p| {
        container_status(p, "containerStatuses", "app")["restartCount"]
            .as_i64()
            .is_some_and(|n| n >= 1)
    });
    let app = container_status(&crashes, "containerStatuses", "app");
    assert_eq!(app["lastState"]["terminated"]["exitCode"], 2, "{app}");
    assert_eq!(crashes["status"]["phase"], "Running");

    // Probes answer from the annotations: readiness fails, liveness (exec) passes and never restarts it.
    c.wait_json(&["pod", "unready"], TIMEOUT, |p| {
        p["status"]["phase"] == "Running"
            && container_status(p, "containerStatuses", "app")["started"] == true
    });
    // Several probe periods later (1 s each; failureThreshold 3), it is still running, unready, unrestarted.
    std::thread::sleep(Duration::from_secs(4));
    let unready: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "pod", "unready", "-o", "json"])).unwrap();
    let app = container_status(&unready, "containerStatuses", "app");
    assert_eq!(app["ready"], false, "{app}");
    assert_eq!(app["restartCount"], 0, "{app}");

    // A bad annotation is a clear error on the container.
    let bad = c.wait_json(&["pod", "bad"], TIMEOUT, |p| {
        container_status(p, "containerStatuses", "app")["state"]["waiting"]["reason"]
            == "CreateContainerError"
    });
    let message = container_status(&bad, "containerStatuses", "app")["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("sim.kubeling.dev/exit-after"), "{message}");

    let logs = c.ok(&["logs", "fails"]);
    assert!(
        logs.contains("sim: container app of pod default/fails exited with code 3"),
        "{logs}"
    );
}
