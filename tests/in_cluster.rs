//! An unmodified in-cluster client in a pod: `fixtures/incluster` is a kube-rs program that calls
//! `Client::try_default()` (KUBERNETES_SERVICE_HOST/PORT set by the node agent, the `kubernetes` Service routed
//! to the API server, the serving certificate valid for its ClusterIP, the projected token and ca.crt) and lists
//! the pods of its namespace. Without a RoleBinding it gets RBAC's 403; with one it lists its own pod.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::Cluster;
use serde_json::Value;

/// Runs `incluster list-pods` once in a pod named `name` and returns its phase (Succeeded or Failed) and logs.
fn run_client(c: &Cluster, image: &str, ns: &str, name: &str) -> (String, String) {
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  restartPolicy: Never\n  \
         containers:\n  - name: client\n    image: {image}\n    imagePullPolicy: Never\n    args: [list-pods]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &manifest);
    let pod = c.wait_json(&["pod", name, "-n", ns], Duration::from_secs(60), |p: &Value| {
        matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    });
    let phase = pod["status"]["phase"].as_str().unwrap_or_default().to_string();
    let logs = c.ok(&["logs", name, "-n", ns]);
    (phase, logs)
}

#[test]
fn a_kube_rs_client_in_a_pod_is_refused_then_lists_pods_after_a_role_binding() {
    let image = testbox_image::ensure_incluster_image();
    let c = Cluster::up();
    let ns = "in-cluster";
    c.ok(&["create", "namespace", ns]);
    c.wait_json(
        &["serviceaccount", "default", "-n", ns],
        Duration::from_secs(20),
        |_| true,
    );

    let (phase, logs) = run_client(&c, &image, ns, "before-binding");
    assert_eq!(phase, "Failed", "the client should be refused; logs:\n{logs}");
    assert!(
        logs.contains("error 403 Forbidden:")
            && logs.contains(
                "User \"system:serviceaccount:in-cluster:default\" cannot list resource \"pods\" in API group \"\" in the namespace \"in-cluster\""
            ),
        "expected RBAC's 403 through the kubernetes Service; logs:\n{logs}"
    );

    c.ok(&[
        "create",
        "rolebinding",
        "view",
        "--clusterrole=view",
        &format!("--serviceaccount={ns}:default"),
        "-n",
        ns,
    ]);
    let (phase, logs) = run_client(&c, &image, ns, "after-binding");
    assert_eq!(phase, "Succeeded", "logs:\n{logs}");
    assert!(
        logs.contains("pod after-binding"),
        "the client should list its own pod; logs:\n{logs}"
    );
    assert!(logs.contains("pod before-binding"), "logs:\n{logs}");
}
