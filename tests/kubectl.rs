//! The acceptance checks of step 1, run as a user would: the real `kubeling` binary and the real kubectl.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Cluster;
use serde_json::{Value, json};

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: web
    image: kubeling/testbox:0.1
";

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn version_and_api_resources_answer() {
    let c = Cluster::start();
    let v = json_of(&c.ok(&["get", "--raw", "/version"]));
    assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.33."), "{v}");
    let out = c.ok(&["version"]);
    assert!(out.contains("Server Version: v1.33."), "{out}");
    let res = c.ok(&["api-resources"]);
    for line in ["pods", "po", "namespaces", "leases", "deployments", "events"] {
        assert!(res.contains(line), "{line} missing from api-resources:\n{res}");
    }
    let pods_line = res.lines().find(|l| l.starts_with("pods ")).unwrap();
    assert!(
        pods_line.contains("po") && pods_line.contains("true") && pods_line.contains("Pod"),
        "{pods_line}"
    );
}

#[test]
fn namespace_configmap_secret_and_pod_are_created_and_shown_with_the_usual_columns() {
    let c = Cluster::start();
    assert!(
        c.ok(&["create", "namespace", "team"])
            .contains("namespace/team created")
    );
    assert!(
        c.ok(&["-n", "team", "create", "configmap", "cfg", "--from-literal=a=1"])
            .contains("created")
    );
    assert!(
        c.ok(&[
            "-n",
            "team",
            "create",
            "secret",
            "generic",
            "s",
            "--from-literal=p=x"
        ])
        .contains("created")
    );
    assert!(
        c.ok_stdin(&["-n", "team", "create", "-f", "-"], POD)
            .contains("pod/web created")
    );

    let get = c.ok(&["-n", "team", "get", "pods"]);
    let header: Vec<&str> = get.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row: Vec<&str> = get.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "0/1", "Pending", "0"]);

    let wide = c.ok(&["-n", "team", "get", "pods", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("NOMINATED NODE"), "{wide}");
    let all = c.ok(&["get", "pods", "-A"]);
    assert!(all.lines().next().unwrap().starts_with("NAMESPACE"), "{all}");
    assert!(all.contains("team"), "{all}");
    let labels = c.ok(&["-n", "team", "get", "pods", "--show-labels"]);
    assert!(labels.contains("app=web"), "{labels}");

    let pod = json_of(&c.ok(&["-n", "team", "get", "pod", "web", "-o", "json"]));
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["spec"]["restartPolicy"], "Always");
    assert_eq!(pod["metadata"]["managedFields"], Value::Null);
    let yaml = c.ok(&["-n", "team", "get", "pod", "web", "-o", "yaml"]);
    assert!(yaml.contains("qosClass: BestEffort"), "{yaml}");

    let cm = json_of(&c.ok(&["-n", "team", "get", "configmap", "cfg", "-o", "json"]));
    assert_eq!(cm["data"], json!({"a": "1"}));
    let cms = c.ok(&["-n", "team", "get", "configmaps"]);
    assert!(cms.lines().next().unwrap().contains("DATA"), "{cms}");
    let secrets = c.ok(&["-n", "team", "get", "secrets"]);
    assert!(secrets.contains("Opaque"), "{secrets}");
    let namespaces = c.ok(&["get", "namespaces"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease", "team"] {
        assert!(namespaces.contains(ns), "{namespaces}");
    }
}

#[test]
fn label_annotate_and_both_patch_types_change_the_object() {
    let c = Cluster::start();
    c.ok_stdin(&["create", "-f", "-"], POD);
    c.ok(&["label", "pod", "web", "tier=front"]);
    c.ok(&["annotate", "pod", "web", "note=hello"]);
    c.ok(&[
        "patch",
        "pod",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"labels":{"merged":"yes"}}}"#,
    ]);
    c.ok(&[
        "patch",
        "pod",
        "web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/jsonp","value":"yes"}]"#,
    ]);
    let pod = json_of(&c.ok(&["get", "pod", "web", "-o", "json"]));
    let labels = &pod["metadata"]["labels"];
    assert_eq!(
        (
            labels["tier"].as_str(),
            labels["merged"].as_str(),
            labels["jsonp"].as_str()
        ),
        (Some("front"), Some("yes"), Some("yes"))
    );
    assert_eq!(pod["metadata"]["annotations"]["note"], "hello");
    c.ok(&["label", "pod", "web", "tier-"]);
    let pod = json_of(&c.ok(&["get", "pod", "web", "-o", "json"]));
    assert!(pod["metadata"]["labels"].get("tier").is_none());
}

#[test]
fn delete_of_an_unscheduled_pod_returns_promptly_and_a_deleted_namespace_waits_for_its_controller() {
    let c = Cluster::start();
    c.ok(&["create", "namespace", "gone"]);
    c.ok_stdin(&["-n", "gone", "create", "-f", "-"], POD);
    c.ok(&["-n", "gone", "create", "configmap", "x"]);
    let t0 = std::time::Instant::now();
    assert!(
        c.ok(&["-n", "gone", "delete", "pod", "web"])
            .contains("pod \"web\" deleted")
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "delete took {:?}",
        t0.elapsed()
    );
    c.ok_stdin(&["-n", "gone", "create", "-f", "-"], POD);
    // The API server alone (no controller manager) only marks the namespace, as kube-apiserver: the
    // namespace controller empties it and removes the `kubernetes` finalizer (tests/controllers_gc.rs).
    assert!(
        c.ok(&["delete", "namespace", "gone", "--wait=false"])
            .contains("namespace \"gone\" deleted")
    );
    assert_eq!(
        c.ok(&["get", "namespace", "gone", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    assert!(
        c.ok(&["-n", "gone", "get", "configmaps", "-o", "name"])
            .contains("configmap/x")
    );
}

#[test]
fn get_all_lists_the_kubernetes_service() {
    let c = Cluster::start();
    c.ok_stdin(&["create", "-f", "-"], POD);
    let out = c.ok(&["get", "all"]);
    assert!(out.contains("pod/web"), "{out}");
    assert!(out.contains("service/kubernetes"), "{out}");
    assert!(out.contains("10.96.0.1"), "{out}");
}

#[test]
fn get_watch_prints_each_change_once() {
    let c = Cluster::start();
    c.ok_stdin(&["create", "-f", "-"], POD);
    let mut child = Command::new(common::KUBECTL)
        .args(["get", "pods", "-w", "--output-watch-events"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("kubectl get -w printed nothing")
    };
    assert!(next().starts_with("EVENT"), "header first");
    assert!(next().starts_with("ADDED"), "the existing pod");
    c.ok(&["label", "pod", "web", "a=b"]);
    let modified = next();
    assert!(
        modified.starts_with("MODIFIED") && modified.contains("web"),
        "{modified}"
    );
    c.ok(&["delete", "pod", "web"]);
    let deleted = next();
    assert!(deleted.starts_with("DELETED"), "{deleted}");
    // Nothing printed twice: no further line arrives.
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "unexpected extra line"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn writes_survive_kill_9_and_resource_versions_keep_rising() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut c = Cluster::start_in(&dir, 0, "apiserver");
    let mut last = 0u64;
    for i in 0..20 {
        let out = c.ok(&[
            "create",
            "configmap",
            &format!("cm{i}"),
            "--from-literal=i=1",
            "-o",
            "json",
        ]);
        last = json_of(&out)["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    }
    c.kill9();
    let c = Cluster::start_in(&dir, 0, "apiserver");
    let names = c.ok(&["get", "configmaps", "-o", "name"]);
    for i in 0..20 {
        assert!(
            names.contains(&format!("configmap/cm{i}\n")),
            "cm{i} lost: {names}"
        );
    }
    let out = c.ok(&["create", "configmap", "after", "-o", "json"]);
    let rv: u64 = json_of(&out)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > last, "{rv} <= {last}");
}

#[test]
fn sigterm_exits_zero() {
    let mut c = Cluster::start();
    let status = c.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bad_input_is_answered_with_a_status_never_a_500() {
    let c = Cluster::start();
    let token = c.token();
    let t = Some(token.as_str());
    let cms = "/api/v1/namespaces/default/configmaps";
    let expect = |(code, body): (u16, Value), want: u16, reason: &str| {
        assert_eq!(code, want, "{body}");
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["reason"], reason, "{body}");
        assert_eq!(body["code"], want, "{body}");
    };
    expect(
        c.curl("POST", cms, t, "application/json", Some(b"{not json")),
        400,
        "BadRequest",
    );
    let pod = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#;
    expect(
        c.curl("POST", cms, t, "application/json", Some(pod)),
        400,
        "BadRequest",
    );
    let bad_name = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#;
    let (code, body) = c.curl("POST", cms, t, "application/json", Some(bad_name));
    expect((code, body.clone()), 422, "Invalid");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name", "{body}");
    let no_containers = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}"#;
    let (code, body) = c.curl(
        "POST",
        "/api/v1/namespaces/default/pods",
        t,
        "application/json",
        Some(no_containers),
    );
    expect((code, body.clone()), 422, "Invalid");
    assert!(
        body["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"] == "spec.containers"),
        "{body}"
    );
    expect(
        c.curl(
            "GET",
            "/api/v1/namespaces/default/widgets",
            t,
            "application/json",
            None,
        ),
        404,
        "NotFound",
    );
    expect(
        c.curl("PUT", cms, t, "application/json", Some(b"{}")),
        405,
        "MethodNotAllowed",
    );
    let big = vec![b' '; 3 * 1024 * 1024 + 10];
    expect(
        c.curl("POST", cms, t, "application/json", Some(&big)),
        413,
        "RequestEntityTooLarge",
    );
    expect(
        c.curl(
            "GET",
            &format!("{cms}?labelSelector=a%20in%20(b"),
            t,
            "application/json",
            None,
        ),
        400,
        "BadRequest",
    );
    expect(
        c.curl(
            "GET",
            "/api/v1/pods?fieldSelector=spec.nope%3Dx",
            t,
            "application/json",
            None,
        ),
        400,
        "BadRequest",
    );
    expect(
        c.curl("GET", cms, None, "application/json", None),
        401,
        "Unauthorized",
    );
    expect(
        c.curl("GET", cms, Some("wrong"), "application/json", None),
        401,
        "Unauthorized",
    );
    let ok = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}"#;
    assert_eq!(c.curl("POST", cms, t, "application/json", Some(ok)).0, 201);
    let stale = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","resourceVersion":"1"},"data":{"a":"b"}}"#;
    expect(
        c.curl("PUT", &format!("{cms}/ok"), t, "application/json", Some(stale)),
        409,
        "Conflict",
    );
    expect(
        c.curl(
            "PATCH",
            &format!("{cms}/ok"),
            t,
            "application/merge-patch+json",
            Some(b"[1"),
        ),
        400,
        "BadRequest",
    );
    expect(
        c.curl("PATCH", &format!("{cms}/ok"), t, "text/plain", Some(b"{}")),
        415,
        "UnsupportedMediaType",
    );
    let err = c.fails(&["get", "pods", "--selector", "a in (b"]);
    assert!(
        err.contains("BadRequest") || err.contains("unable to parse"),
        "{err}"
    );
}

#[test]
fn typed_kubectl_creators_work_through_protobuf_bodies() {
    let c = Cluster::start();
    assert!(
        c.ok(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2"
        ])
        .contains("created")
    );
    let d = json_of(&c.ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(d["metadata"]["generation"], 1);
    assert!(
        c.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"])
            .contains("created")
    );
    let s = json_of(&c.ok(&["get", "service", "web", "-o", "json"]));
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 8080);
    assert!(
        s["spec"]["clusterIP"].as_str().unwrap().starts_with("10.96."),
        "{s}"
    );
    assert!(s["spec"]["ports"][0].get("nodePort").is_none(), "{s}");
    assert!(c.ok(&["create", "serviceaccount", "robot"]).contains("created"));
    assert!(
        c.ok(&["create", "job", "once", "--image=busybox:1.36"])
            .contains("created")
    );
    let out = c.ok(&["get", "deployments,services,jobs"]);
    assert!(
        out.contains("deployment.apps/web") && out.contains("service/web") && out.contains("job.batch/once"),
        "{out}"
    );
}

#[test]
fn unknown_fields_are_refused_by_default_and_accepted_with_validate_false() {
    let c = Cluster::start();
    let bad = POD.replace("  containers:", "  bogusField: 1\n  containers:");
    let err = String::from_utf8(c.kubectl_stdin(&["create", "-f", "-"], Some(&bad)).stderr).unwrap();
    assert!(err.contains("unknown field \"spec.bogusField\""), "{err}");
    assert!(
        c.ok_stdin(&["create", "--validate=false", "-f", "-"], &bad)
            .contains("pod/web created")
    );
}

#[test]
fn server_dry_run_changes_nothing() {
    let c = Cluster::start();
    let out = c.ok_stdin(&["create", "--dry-run=server", "-f", "-"], POD);
    assert!(out.contains("pod/web created (server dry run)"), "{out}");
    let err = c.fails(&["get", "pod", "web"]);
    assert!(err.contains("NotFound"), "{err}");
    c.ok_stdin(&["create", "-f", "-"], POD);
    c.ok(&["delete", "pod", "web", "--dry-run=server"]);
    c.ok(&["get", "pod", "web"]);
    c.ok(&["label", "pod", "web", "x=y", "--dry-run=server"]);
    let pod = json_of(&c.ok(&["get", "pod", "web", "-o", "json"]));
    assert!(pod["metadata"]["labels"].get("x").is_none(), "{pod}");
}
