//! `kubeling up --nodes 3` on Docker, as a user tries it: three Ready nodes, a DaemonSet with a pod on each,
//! and cordon + drain moving a Deployment's pods off a node.

mod common;

#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::Cluster;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(90);

fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn running_on(pods: &Value) -> Vec<(String, String)> {
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn three_nodes_on_one_docker_run_a_daemonset_on_each_and_drain_moves_a_deployment() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up_with(&["--nodes", "3", "--node-name", "mn"], None);
    let names = ["mn", "mn-2", "mn-3"];
    let nodes = c.wait_json(&["nodes"], WAIT, |l| {
        let items = l["items"].as_array().unwrap();
        items.len() == 3 && items.iter().all(ready)
    });
    let mut got: Vec<&str> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, names);

    let ds = format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  selector:\n    matchLabels: {{app: agent}}\n  template:\n    metadata:\n      labels: {{app: agent}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {image}\n        args: [\"serve\", \"--port\", \"8080\"]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &ds);
    let pods = c.wait_json(&["pods", "-l", "app=agent"], WAIT, |l| running_on(l).len() == 3);
    let mut on: Vec<String> = running_on(&pods).into_iter().map(|(_, n)| n).collect();
    on.sort();
    assert_eq!(on, names, "one DaemonSet pod per node");

    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {image}\n        args: [\"serve\", \"--port\", \"8080\"]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &deploy);
    let pods = c.wait_json(&["pods", "-l", "app=web"], WAIT, |l| running_on(l).len() == 3);
    let (_, victim) = running_on(&pods).into_iter().next().unwrap();

    let out = c.ok(&[
        "drain",
        &victim,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=90s",
    ]);
    assert!(out.contains("drained"), "{out}");
    let node = c.wait_json(&["node", &victim], WAIT, |_| true);
    assert_eq!(node["spec"]["unschedulable"], true, "drain cordons the node");
    let pods = c.wait_json(&["pods", "-l", "app=web"], WAIT, |l| {
        let running = running_on(l);
        running.len() == 3 && running.iter().all(|(_, n)| *n != victim)
    });
    assert!(running_on(&pods).iter().all(|(_, n)| names.contains(&n.as_str())));
    // The DaemonSet's pod stays on the drained node (drain leaves DaemonSet pods).
    let agents = c.wait_json(&["pods", "-l", "app=agent"], WAIT, |_| true);
    assert!(running_on(&agents).iter().any(|(_, n)| *n == victim));

    c.ok(&["uncordon", &victim]);
    let node = c.wait_json(&["node", &victim], WAIT, |n| n["spec"]["unschedulable"].is_null());
    assert!(ready(&node));
}
