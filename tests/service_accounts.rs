//! Service accounts end to end with kubectl and Docker: `kubectl create token` gives a token the API server
//! authenticates as `system:serviceaccount:NS:NAME`; every pod gets the `kube-api-access-*` volume and sees
//! `token`, `ca.crt` and `namespace` at `/var/run/secrets/kubernetes.io/serviceaccount`, unless it opts out.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::Cluster;
use serde_json::Value;

const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn whoami(c: &Cluster, token: &str) -> String {
    c.ok(&[
        "--token",
        token,
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ])
}

#[test]
fn service_account_tokens_authenticate_and_are_mounted_into_pods() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up();
    let ns = "sa-e2e";
    c.ok(&["create", "namespace", ns]);
    c.wait_json(
        &["serviceaccount", "default", "-n", ns],
        Duration::from_secs(20),
        |_| true,
    );

    let token = c.ok(&["create", "token", "default", "-n", ns]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    assert_eq!(whoami(&c, token), format!("system:serviceaccount:{ns}:default"));
    let err = c.fails(&["--token", "not-a-token", "get", "pods"]);
    assert!(err.contains("Unauthorized"), "{err}");

    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: reader\n  namespace: {ns}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    args: [sleep]\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: opted-out\n  namespace: {ns}\nspec:\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    args: [sleep]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &pod);
    let p = c.wait_json(&["pod", "reader", "-n", ns], Duration::from_secs(60), |p| {
        p["status"]["phase"] == "Running"
    });
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    let volume = p["spec"]["volumes"]
        .as_array()
        .and_then(|v| {
            v.iter().find(|v| {
                v["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("kube-api-access-"))
            })
        })
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3607,
        "{p}"
    );
    let mounted = &p["spec"]["containers"][0]["volumeMounts"];
    assert!(
        mounted
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["mountPath"] == MOUNT && m["readOnly"] == true)),
        "{mounted}"
    );

    let cat = |file: &str| {
        c.ok(&[
            "exec",
            "-n",
            ns,
            "reader",
            "--",
            "cat",
            &format!("{MOUNT}/{file}"),
        ])
    };
    assert_eq!(cat("namespace"), ns);
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
    assert_eq!(cat("ca.crt"), ca);
    let pod_token = cat("token");
    assert_eq!(
        whoami(&c, pod_token.trim()),
        format!("system:serviceaccount:{ns}:default")
    );
    // RBAC: the pod's identity may not list pods until a RoleBinding lets it (issue 11 acceptance).
    let err = c.fails(&["--token", pod_token.trim(), "get", "pods", "-n", ns]);
    assert!(
        err.contains(&format!(
            "pods is forbidden: User \"system:serviceaccount:{ns}:default\" cannot list resource \"pods\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{err}"
    );
    c.ok(&[
        "create",
        "rolebinding",
        "pod-viewers",
        "--clusterrole=view",
        &format!("--serviceaccount={ns}:default"),
        "-n",
        ns,
    ]);
    // `view` is filled by the aggregation controller; poll until the grant shows.
    common::eventually(Duration::from_secs(30), "the pod's token to list pods", || {
        c.kubectl(&["--token", pod_token.trim(), "get", "pods", "-n", ns, "-o", "name"])
            .status
            .success()
            .then_some(())
    });
    assert!(
        c.ok(&["--token", pod_token.trim(), "get", "pods", "-n", ns, "-o", "name"])
            .contains("pod/reader")
    );

    let p = c.wait_json(&["pod", "opted-out", "-n", ns], Duration::from_secs(60), |p| {
        p["status"]["phase"] == "Running"
    });
    assert!(
        p["spec"]["volumes"].as_array().is_none_or(|v| v
            .iter()
            .all(|v| !v["name"].as_str().unwrap_or("").starts_with("kube-api-access-"))),
        "{p}"
    );
    let out = c.kubectl(&[
        "exec",
        "-n",
        ns,
        "opted-out",
        "--",
        "cat",
        &format!("{MOUNT}/token"),
    ]);
    assert!(!out.status.success(), "no token without automount");
}
