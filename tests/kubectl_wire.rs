//! Wire and protocol fidelity with the real kubectl and curl (issue 11): OpenAPI v2, `kind: List` files,
//! aggregated discovery, HTTP/2 answers before the body, event expiry, server-side apply over client-side
//! apply.

mod common;

use common::Cluster;
use serde_json::Value;

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

const LIST: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: first
  data: {x: \"1\"}
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: second
  spec:
    selector: {matchLabels: {app: second}}
    template:
      metadata: {labels: {app: second}}
      spec:
        containers: [{name: c, image: nginx}]
";

#[test]
fn apply_of_a_list_file_creates_every_item_and_validates_them_against_openapi_v2() {
    let c = Cluster::start();
    let out = c.ok_stdin(&["apply", "-f", "-"], LIST);
    assert!(out.contains("configmap/first created"), "{out}");
    assert!(out.contains("deployment.apps/second created"), "{out}");
    let out = c.ok_stdin(&["apply", "-f", "-"], LIST);
    assert!(out.contains("configmap/first unchanged"), "{out}");
    // kubectl validates a List's items itself, against /openapi/v2 (protobuf).
    let bad = LIST.replace("selector:", "bogus: 1\n    selector:");
    let out = c.kubectl_stdin(&["apply", "-f", "-"], Some(&bad));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("unknown field \"bogus\" in io.k8s.api.apps.v1.DeploymentSpec"),
        "{err}"
    );
}

#[test]
fn an_unmappable_kind_does_not_stop_apply_of_the_rest_of_the_file() {
    let c = Cluster::start();
    let file = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: after-widget
";
    let out = c.kubectl_stdin(&["apply", "-f", "-"], Some(file));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no matches for kind \"Widget\""), "{err}");
    c.ok(&["get", "configmap", "after-widget"]);
}

#[test]
fn openapi_v2_serves_json_and_explain_reads_it() {
    let c = Cluster::start();
    let doc = json_of(&c.ok(&["get", "--raw", "/openapi/v2"]));
    assert_eq!(doc["swagger"], "2.0");
    assert!(doc["definitions"]["io.k8s.api.core.v1.Pod"].is_object());
    let out = c.ok(&["explain", "pods.spec.containers", "--output=plaintext-openapiv2"]);
    assert!(out.contains("FIELDS:") && out.contains("image"), "{out}");
}

#[test]
fn kubectl_discovers_through_aggregated_discovery_alone() {
    let c = Cluster::start();
    let out = c.kubectl(&["api-resources", "-v=6"]);
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    let gets: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"Response\" verb=\"GET\""))
        .collect();
    // Two documents hold everything: no per-group-version requests follow.
    assert_eq!(gets.len(), 2, "{log}");
    assert!(
        !log.contains("/api/v1?") && !log.contains("/apis/apps/v1?"),
        "{log}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let deploy = table
        .lines()
        .find(|l| l.starts_with("deployments "))
        .unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = deploy.split_whitespace().collect();
    assert_eq!(cols, ["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("pods ") && l.contains(" po "))
    );
    // The legacy documents stay for plain JSON.
    let apis = json_of(&c.ok(&["get", "--raw", "/apis"]));
    assert_eq!(apis["kind"], "APIGroupList");
}

/// `curl --http2 -X POST --data-binary @file URL`: the status code, or curl's error.
fn curl_post_http2(
    c: &Cluster,
    path: &str,
    token: Option<&str>,
    file: &std::path::Path,
) -> Result<u16, String> {
    let mut cmd = std::process::Command::new("curl");
    cmd.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--http2",
        "--cacert",
    ])
    .arg(c.data_dir.join("pki/ca.crt"))
    .args([
        "-H",
        "Content-Type: application/json",
        "-X",
        "POST",
        "--data-binary",
    ])
    .arg(format!("@{}", file.display()));
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd.arg(format!("{}{path}", c.url)).output().expect("curl");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0))
}

#[test]
fn an_answer_before_the_body_is_read_does_not_reset_the_http2_stream() {
    let c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let data = "x".repeat(2_000_000);
    std::fs::write(
        &big,
        format!(
            r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"big"}},"data":{{"k":"{data}"}}}}"#
        ),
    )
    .unwrap();
    let token = c.token();
    // Before the fix about half of these ended in "Stream error in the HTTP/2 framing layer".
    for _ in 0..10 {
        assert_eq!(curl_post_http2(&c, "/api/v1/nope", Some(&token), &big), Ok(404));
        assert_eq!(curl_post_http2(&c, "/version", Some(&token), &big), Ok(405));
        assert_eq!(
            curl_post_http2(&c, "/api/v1/namespaces/default/configmaps", None, &big),
            Ok(401)
        );
    }
}

#[test]
fn event_ttl_flag_expires_events() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Cluster::start_with(
        &tmp.path().join("data"),
        0,
        "apiserver",
        &["--event-ttl=1s"],
        None,
    );
    let event = "apiVersion: v1
kind: Event
metadata:
  name: e1
involvedObject: {kind: Pod, name: p, namespace: default}
reason: Test
message: expires
type: Normal
";
    c.ok_stdin(&["apply", "-f", "-"], event);
    common::eventually(std::time::Duration::from_secs(15), "the event expires", || {
        let out = c.ok(&["get", "events", "-o", "name"]);
        (!out.contains("e1")).then_some(())
    });
}

fn deployment(image: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: {image}
"
    )
}

#[test]
fn server_side_apply_over_a_client_side_apply_takes_over_without_force() {
    let c = Cluster::start();
    c.ok_stdin(&["apply", "-f", "-"], &deployment("nginx:1.27", 2));
    let out = c.ok_stdin(
        &["apply", "--server-side", "-f", "-"],
        &deployment("nginx:1.28", 3),
    );
    assert!(out.contains("deployment.apps/web serverside-applied"), "{out}");
    let d = json_of(&c.ok(&["get", "deployment", "web", "-o", "json", "--show-managed-fields"]));
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    let kubectl = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubectl" && e["operation"] == "Apply")
        .expect("kubectl's apply entry");
    assert!(
        kubectl["fieldsV1"]["f:spec"]["f:replicas"].is_object(),
        "{kubectl}"
    );
    // Back to client-side apply: it diffs against what was applied server-side.
    let out = c.ok_stdin(&["apply", "-f", "-"], &deployment("nginx:1.29", 3));
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let d = json_of(&c.ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.29"
    );
}
