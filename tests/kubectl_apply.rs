//! Step 2 acceptance: every kubectl write path (client-side apply, server-side apply, edit, patch, replace,
//! explain, auth) against the real binary, as a user would run them.

mod common;

use common::Cluster;
use serde_json::{Value, json};

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn deployment(image: &str, env: &[(&str, &str)], labels: &[(&str, &str)]) -> String {
    let env: String = env
        .iter()
        .map(|(n, v)| format!("        - name: {n}\n          value: \"{v}\"\n"))
        .collect();
    let labels: String = labels.iter().map(|(k, v)| format!("    {k}: {v}\n")).collect();
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
{labels}spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: {image}
        env:
{env}"
    )
}

fn get(c: &Cluster, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    json_of(&c.ok(&args))
}

fn no_dollar_keys(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().all(|(k, v)| !k.starts_with('$') && no_dollar_keys(v)),
        Value::Array(a) => a.iter().all(no_dollar_keys),
        _ => true,
    }
}

#[test]
fn client_side_apply_creates_is_unchanged_then_configures_each_change_exactly() {
    let c = Cluster::start();
    let v1 = deployment(
        "nginx:1.27",
        &[("A", "1"), ("B", "2")],
        &[("app", "web"), ("tier", "front")],
    );
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &v1)
            .contains("deployment.apps/web created")
    );
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &v1)
            .contains("deployment.apps/web unchanged")
    );
    // Change the image and an env value, add a label; remove env B and label tier.
    let v2 = deployment(
        "nginx:1.28",
        &[("A", "changed")],
        &[("app", "web"), ("team", "x")],
    );
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &v2)
            .contains("deployment.apps/web configured")
    );
    let d = get(&c, &["deployment", "web"]);
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.28");
    assert_eq!(container["env"], json!([{"name": "A", "value": "changed"}]));
    assert_eq!(d["metadata"]["labels"], json!({"app": "web", "team": "x"}));
    assert!(no_dollar_keys(&d), "{d}");
    let last = d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(
        last["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert_eq!(d["metadata"]["generation"], 2);
}

#[test]
fn pod_apply_may_change_image_and_labels_but_not_the_command() {
    let c = Cluster::start();
    let pod = |image: &str, label: &str, command: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    l: {label}\nspec:\n  containers:\n  - name: c\n    image: {image}\n    command: [\"{command}\"]\n"
        )
    };
    c.ok_stdin(&["apply", "-f", "-"], &pod("busybox:1.36", "a", "sleep"));
    assert!(
        c.ok_stdin(&["apply", "-f", "-"], &pod("busybox:1.37", "b", "sleep"))
            .contains("configured")
    );
    let p = get(&c, &["pod", "p"]);
    assert_eq!(p["spec"]["containers"][0]["image"], "busybox:1.37");
    assert_eq!(p["metadata"]["labels"]["l"], "b");
    let out = c.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("busybox:1.37", "b", "true")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("pod updates may not change fields other than"),
        "{err}"
    );
}

#[test]
fn server_side_apply_creates_removes_dropped_fields_and_reports_conflicts_until_forced() {
    let c = Cluster::start();
    let v1 = deployment(
        "nginx:1.27",
        &[("A", "1"), ("B", "2")],
        &[("app", "web"), ("tier", "front")],
    );
    assert!(
        c.ok_stdin(&["apply", "--server-side", "-f", "-"], &v1)
            .contains("serverside-applied")
    );
    let v2 = deployment("nginx:1.27", &[("A", "1")], &[("app", "web")]);
    c.ok_stdin(&["apply", "--server-side", "-f", "-"], &v2);
    let d = get(&c, &["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
    assert!(d["metadata"]["labels"].get("tier").is_none(), "{d}");
    // Another manager sets the replicas; our apply of a different value conflicts.
    c.ok(&["scale", "deployment", "web", "--replicas=5"]);
    let v3 = v2.replace("replicas: 2", "replicas: 3");
    let out = c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&v3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("conflict") && err.contains(".spec.replicas"),
        "{err}"
    );
    c.ok_stdin(&["apply", "--server-side", "--force-conflicts", "-f", "-"], &v3);
    assert_eq!(get(&c, &["deployment", "web"])["spec"]["replicas"], 3);
}

#[test]
fn strategic_patch_edit_replace_and_delete_directive_work() {
    let c = Cluster::start();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &deployment("nginx:1.27", &[("A", "1"), ("B", "2")], &[("app", "web")]),
    );
    let patch = r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"A","$patch":"delete"}]}]}}}}"#;
    c.ok(&["patch", "deployment", "web", "-p", patch]);
    let d = get(&c, &["deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "B", "value": "2"}])
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27",
        "the rest is kept"
    );

    // kubectl edit with an editor script that changes the image.
    let dir = tempfile::tempdir().unwrap();
    let editor = dir.path().join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/nginx:1.27/nginx:1.29/' \"$1\"\n").unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    let out = std::process::Command::new(common::KUBECTL)
        .args(["edit", "deployment", "web"])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("EDITOR", &editor)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        get(&c, &["deployment", "web"])["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.29"
    );

    // kubectl replace with the object changed.
    let mut d = get(&c, &["deployment", "web"]);
    d["spec"]["replicas"] = json!(4);
    c.ok_stdin(&["replace", "-f", "-"], &d.to_string());
    assert_eq!(get(&c, &["deployment", "web"])["spec"]["replicas"], 4);
}

#[test]
fn every_simple_kind_goes_through_apply_reapply_server_side_apply_and_delete() {
    let c = Cluster::start();
    let manifests = [
        (
            "configmap/cm",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: \"1\"\n",
        ),
        (
            "secret/s",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  p: x\n",
        ),
        (
            "service/svc",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  selector:\n    app: web\n  ports:\n  - port: 80\n",
        ),
        (
            "lease.coordination.k8s.io/l",
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l\nspec:\n  holderIdentity: me\n",
        ),
    ];
    for (name, m) in manifests {
        assert!(c.ok_stdin(&["apply", "-f", "-"], m).contains("created"), "{name}");
        assert!(
            c.ok_stdin(&["apply", "-f", "-"], m).contains("unchanged"),
            "{name}"
        );
        c.ok_stdin(&["apply", "--server-side", "--force-conflicts", "-f", "-"], m);
        assert!(c.ok(&["delete", name]).contains("deleted"), "{name}");
    }
}

#[test]
fn explain_and_auth_answer() {
    let c = Cluster::start();
    let out = c.ok(&["explain", "pod.spec.containers.livenessProbe"]);
    assert!(out.contains("livenessProbe") && out.contains("FIELDS"), "{out}");
    assert_eq!(c.ok(&["auth", "can-i", "get", "pods"]).trim(), "yes");
    let who = c.ok(&["auth", "whoami"]);
    assert!(
        who.contains("kubeling-admin") && who.contains("system:masters"),
        "{who}"
    );
}

#[test]
fn apply_dry_run_server_changes_nothing_and_warn_validation_warns() {
    let c = Cluster::start();
    let v1 = deployment("nginx:1.27", &[("A", "1")], &[("app", "web")]);
    c.ok_stdin(&["apply", "-f", "-"], &v1);
    let before = get(&c, &["deployment", "web"]);
    let v2 = deployment("nginx:1.28", &[("A", "1")], &[("app", "web")]);
    let out = c.ok_stdin(&["apply", "--dry-run=server", "-f", "-"], &v2);
    assert!(out.contains("configured (server dry run)"), "{out}");
    let after = get(&c, &["deployment", "web"]);
    assert_eq!(
        before["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );

    let bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\nbogus: 1\n";
    let out = c.kubectl_stdin(&["create", "--validate=warn", "-f", "-"], Some(bad));
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Warning") && err.contains("unknown field \"bogus\""),
        "{err}"
    );
}

#[test]
fn malformed_strategic_patches_are_client_errors() {
    let c = Cluster::start();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &deployment("nginx:1.27", &[("A", "1")], &[("app", "web")]),
    );
    for patch in [
        r#"{"spec":{"template":{"spec":{"containers":"nope"}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","$patch":"explode"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[7]}}}}"#,
    ] {
        let err = c.fails(&["patch", "deployment", "web", "-p", patch]);
        assert!(
            err.contains("BadRequest") || err.contains("Invalid") || err.contains("invalid"),
            "{patch}: {err}"
        );
        assert!(!err.contains("InternalError"), "{patch}: {err}");
    }
}
