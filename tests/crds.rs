//! CustomResourceDefinitions with the real kubectl against `kubeling up`, as a new user tries them:
//! apply a CRD and a custom object, printer columns, `kubectl explain`, a wrong type refused naming the
//! field, an unknown field pruned, a default filled, a CEL rule's message, `patch --subresource status`,
//! `kubectl scale`, a watch, and `kubectl delete crd` taking the objects with it. One cluster is shared
//! by the tests of this file (each uses its own CRD).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use common::{Cluster, KUBECTL, eventually};
use serde_json::Value;

/// The cluster of this file: started by the first test that needs it, stopped with the last one.
fn cluster() -> Arc<Cluster> {
    static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = shared.upgrade() {
        return c;
    }
    let c = Arc::new(Cluster::up());
    *shared = Arc::downgrade(&c);
    c
}

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: WidgetSpec is what the user wants of a widget.
            x-kubernetes-validations:
            - rule: self.replicas <= self.maxReplicas
              message: replicas must not exceed maxReplicas
            properties:
              replicas:
                type: integer
                description: How many widgets.
                default: 1
              maxReplicas:
                type: integer
                default: 10
              color:
                type: string
                enum: [blue, red]
                default: blue
          status:
            type: object
            properties:
              replicas:
                type: integer
"#;

fn widget(name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n{spec}\n")
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn install(c: &Cluster, manifest: &str, name: &str) {
    c.ok_stdin(&["apply", "-f", "-"], manifest);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{name}"),
        "--timeout=20s",
    ]);
}

#[test]
fn widgets_print_columns_explain_validate_prune_default_and_take_status_and_scale() {
    let c = cluster();
    install(&c, WIDGETS, "widgets.example.com");

    c.ok_stdin(
        &["apply", "-f", "-"],
        &widget("w1", "  replicas: 2\n  color: red"),
    );
    let table = c.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "REPLICAS", "COLOR", "AGE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "2", "red"], "{table}");
    // The short name and the `all` category.
    assert!(
        c.ok(&["get", "wd", "w1", "-o", "name"])
            .contains("widget.example.com/w1")
    );
    assert!(
        c.ok(&["get", "all", "-o", "name"])
            .contains("widget.example.com/w1")
    );
    // Re-applying the same file changes nothing.
    let again = c.ok_stdin(
        &["apply", "-f", "-"],
        &widget("w1", "  replicas: 2\n  color: red"),
    );
    assert!(again.contains("unchanged"), "{again}");

    let explain = c.ok(&["explain", "widget.spec"]);
    assert!(
        explain.contains("WidgetSpec is what the user wants of a widget."),
        "{explain}"
    );
    assert!(explain.contains("replicas"), "{explain}");

    // A wrong type is refused naming the field.
    let err = c
        .kubectl_stdin(&["apply", "-f", "-"], Some(&widget("bad", "  replicas: two")))
        .stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains(r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#),
        "{err}"
    );
    // A CEL rule refuses with its message.
    let err = c
        .kubectl_stdin(&["apply", "-f", "-"], Some(&widget("big", "  replicas: 20")))
        .stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(err.contains("replicas must not exceed maxReplicas"), "{err}");
    // An unknown field is pruned (kubectl's default strict validation would refuse it) and defaults fill in.
    c.ok_stdin(
        &["create", "--validate=false", "-f", "-"],
        &widget("w2", "  replicas: 3\n  shape: round"),
    );
    let w2 = json_of(&c.ok(&["get", "widget", "w2", "-o", "json"]));
    assert_eq!(
        w2["spec"],
        serde_json::json!({"replicas": 3, "maxReplicas": 10, "color": "blue"})
    );
    let strict = c
        .kubectl_stdin(&["create", "-f", "-"], Some(&widget("w3", "  shape: round")))
        .stderr;
    assert!(String::from_utf8_lossy(&strict).contains(r#"unknown field "spec.shape""#));

    // The status subresource changes only status; the main resource ignores status.
    c.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":2},"spec":{"replicas":7}}"#,
    ]);
    let w1 = json_of(&c.ok(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(w1["status"]["replicas"], 2);
    assert_eq!(w1["spec"]["replicas"], 2);
    c.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    let w1 = json_of(&c.ok(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(w1["status"]["replicas"], 2);

    // kubectl scale goes through the scale subresource.
    c.ok(&["scale", "widget", "w1", "--replicas=4"]);
    let w1 = json_of(&c.ok(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(w1["spec"]["replicas"], 4);
    assert_eq!(w1["metadata"]["generation"], 2);
}

#[test]
fn a_watch_sees_custom_objects_and_deleting_the_crd_removes_them_and_the_resource() {
    let c = cluster();
    let gadgets = WIDGETS
        .replace("widgets.example.com", "gadgets.example.com")
        .replace("plural: widgets", "plural: gadgets")
        .replace("singular: widget", "singular: gadget")
        .replace("kind: Widget", "kind: Gadget")
        .replace("shortNames: [wd]", "shortNames: [gd]")
        // Not in `all`: the other test lists `all` while this one deletes its CRD.
        .replace("categories: [all]", "categories: [gizmos]");
    install(&c, &gadgets, "gadgets.example.com");
    let gadget = |name: &str| widget(name, "  replicas: 1").replace("kind: Widget", "kind: Gadget");

    let cache = tempfile::tempdir().unwrap();
    let mut watch = Command::new(KUBECTL)
        .args(["get", "gadgets", "--watch", "-o", "name"])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("KUBECACHEDIR", cache.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Create until the watch (which may still be starting) reports one.
    let mut n = 0;
    let seen = eventually(Duration::from_secs(20), "the watch reports a new gadget", || {
        n += 1;
        c.ok_stdin(&["create", "-f", "-"], &gadget(&format!("g{n}")));
        rx.recv_timeout(Duration::from_millis(500))
            .ok()
            .filter(|l| l.contains("gadget.example.com/g"))
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen.contains("gadget.example.com/g"), "{seen}");

    c.ok(&["delete", "crd", "gadgets.example.com", "--timeout=30s"]);
    // A kubectl without a discovery cache, as a new shell's: one whose cache still lists the resource
    // (kept up to 6 h) says "Unable to list ... the server could not find the requested resource", as
    // it does against kube-apiserver.
    let fresh = tempfile::tempdir().unwrap();
    let out = Command::new(KUBECTL)
        .args(["get", "gadgets"])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("KUBECACHEDIR", fresh.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"the server doesn't have a resource type "gadgets""#),
        "{err}"
    );
    // Created again, it has none of the old objects.
    install(&c, &gadgets, "gadgets.example.com");
    let list = c.ok(&["get", "gadgets", "-o", "name"]);
    assert!(list.trim().is_empty(), "{list}");
}

#[test]
fn bad_crds_and_custom_objects_get_a_status_never_a_500() {
    let c = cluster();
    install(
        &c,
        &WIDGETS
            .replace("widgets.example.com", "sprockets.example.com")
            .replace("plural: widgets", "plural: sprockets")
            .replace("singular: widget", "singular: sprocket")
            .replace("kind: Widget", "kind: Sprocket")
            .replace("shortNames: [wd]", "shortNames: [sp]")
            .replace("categories: [all]", "categories: [gizmos]"),
        "sprockets.example.com",
    );
    let token = c.token();
    let t = Some(token.as_str());
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let items = "/apis/example.com/v1/namespaces/default/sprockets";
    let crd = |spec: &str| {
        format!(
            r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
                "metadata":{{"name":"bads.example.com"}},"spec":{spec}}}"#
        )
    };
    let names = r#""group":"example.com","scope":"Namespaced","names":{"plural":"bads","kind":"Bad"}"#;
    let cases: Vec<(&str, String, String, u16)> = vec![
        ("POST", crds.to_string(), r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x"}}"#.into(), 422),
        ("POST", crds.to_string(), crd(&format!(r#"{{{names},"versions":[]}}"#)), 422),
        ("POST", crds.to_string(), crd(&format!(
            r#"{{{names},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{{"type":5}}}}}}]}}"#)), 400),
        ("POST", crds.to_string(), crd(&format!(
            r#"{{{names},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{{"type":"object","properties":{{"a":{{"type":"string","pattern":"(("}}}}}}}}}}]}}"#)), 422),
        ("POST", crds.to_string(), crd(&format!(
            r#"{{{names},"versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{{"type":"object","x-kubernetes-validations":[{{"rule":"self.a ++ )"}}]}}}}}}]}}"#)), 422),
        ("POST", items.to_string(), "[]".into(), 400),
        ("POST", items.to_string(), r#"{"apiVersion":"example.com/v1","kind":"Sprocket","metadata":{"name":"s"},"spec":"flat"}"#.into(), 422),
        ("POST", items.to_string(), r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"s"}}"#.into(), 400),
        ("POST", items.to_string(), r#"{"apiVersion":"example.com/v1","kind":"Sprocket","metadata":{"name":"S_S"}}"#.into(), 422),
    ];
    for (method, path, body, want) in cases {
        let (code, got) = c.curl(method, &path, t, "application/json", Some(body.as_bytes()));
        assert_eq!(code, want, "{body}: {got}");
        assert_eq!(got["kind"], "Status", "{got}");
    }
    c.ok_stdin(
        &["apply", "-f", "-"],
        &widget("s1", "  replicas: 1").replace("Widget", "Sprocket"),
    );
    let item = format!("{items}/s1");
    for (ct, body, want) in [
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"replicas":2}}"#,
            415,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/spec/nope/x","value":1}]"#,
            422,
        ),
        (
            "application/merge-patch+json",
            r#"{"spec":{"replicas":"many"}}"#,
            422,
        ),
        ("application/merge-patch+json", r#"{"spec":{"replicas":50}}"#, 422),
    ] {
        let (code, got) = c.curl("PATCH", &item, t, ct, Some(body.as_bytes()));
        assert_eq!(code, want, "{ct} {body}: {got}");
        assert_eq!(got["kind"], "Status", "{got}");
    }
    let (code, got) = c.curl(
        "PATCH",
        &format!("{item}/scale"),
        t,
        "application/merge-patch+json",
        Some(br#"{"spec":{"replicas":"x"}}"#),
    );
    assert_eq!(code, 422, "{got}");
}
