//! `kubectl debug` and `kubectl patch --subresource=ephemeralcontainers` against the API server alone (no node
//! agent, no Docker): the ephemeral container lands in the pod's spec, and what upstream refuses is
//! refused with upstream's 422 messages.

mod common;

use common::Cluster;
use serde_json::{Value, json};

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: mypod
spec:
  containers:
  - name: app
    image: kubeling/testbox:0.1
";

fn started() -> Cluster {
    let c = Cluster::start();
    c.ok_stdin(&["apply", "-f", "-"], POD);
    c
}

fn ephemeral_containers(c: &Cluster) -> Value {
    let pod: Value = serde_json::from_str(&c.ok(&["get", "pod", "mypod", "-o", "json"])).unwrap();
    pod["spec"]["ephemeralContainers"].clone()
}

#[test]
fn kubectl_debug_adds_a_defaulted_ephemeral_container_targeting_the_app() {
    let c = started();
    let out = c.kubectl(&[
        "debug",
        "mypod",
        "--image=kubeling/testbox:0.1",
        "--target=app",
        "-c",
        "dbg",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl debug failed: {stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Targeting container \"app\""),
        "{out:?}"
    );
    assert_eq!(
        ephemeral_containers(&c),
        json!([{"name": "dbg", "image": "kubeling/testbox:0.1", "targetContainerName": "app",
                "imagePullPolicy": "IfNotPresent", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}])
    );
    // The pod's own containers are as they were, and the debug container shows in describe.
    let describe = c.ok(&["describe", "pod", "mypod"]);
    assert!(
        describe.contains("Ephemeral Containers:") && describe.contains("dbg:"),
        "{describe}"
    );

    // A second one, with a generated name and a profile's security context, joins the first.
    c.ok(&[
        "debug",
        "mypod",
        "--image=kubeling/testbox:0.1",
        "--target=app",
        "--profile=general",
    ]);
    let all = ephemeral_containers(&c);
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0] == "dbg" && names[1].starts_with("debugger-"),
        "{names:?}"
    );
    assert_eq!(
        all[1]["securityContext"],
        json!({"capabilities": {"add": ["SYS_PTRACE"]}})
    );
}

#[test]
fn refused_ephemeral_container_changes_get_upstreams_422_messages() {
    let c = started();
    c.ok(&[
        "debug",
        "mypod",
        "--image=kubeling/testbox:0.1",
        "--target=app",
        "-c",
        "dbg",
    ]);
    let before = ephemeral_containers(&c);
    let patch = |args: &[&str]| {
        let mut all = vec!["patch", "pod", "mypod", "--subresource=ephemeralcontainers"];
        all.extend_from_slice(args);
        c.fails(&all)
    };

    // A strategic merge patch without `$setElementOrder` puts new list items first, as upstream's does.
    let err = patch(&[
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"web","image":"kubeling/testbox:0.1","ports":[{"containerPort":80}]}]}}"#,
    ]);
    assert!(
        err.contains(
            "The Pod \"mypod\" is invalid: spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an \
             Ephemeral Container"
        ),
        "{err}"
    );

    let err = patch(&[
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"dbg","image":"busybox:1.37"}]}}"#,
    ]);
    assert!(
        err.contains(
            "The Pod \"mypod\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \
             \"dbg\" may not be changed\n  spec.ephemeralContainers[0].image:\n-   \"kubeling/testbox:0.1\"\n+   \
             \"busybox:1.37\""
        ),
        "{err}"
    );

    let err = patch(&[
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/ephemeralContainers/0"}]"#,
    ]);
    assert!(
        err.contains(
            "The Pod \"mypod\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \
             \"dbg\" may not be removed"
        ),
        "{err}"
    );

    let err = patch(&[
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"app","image":"busybox:1.37","targetContainerName":"nope"}]}}"#,
    ]);
    assert!(
        err.contains("spec.ephemeralContainers[0].name: Duplicate value: \"app\"")
            && err.contains("spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\""),
        "{err}"
    );

    // The pod itself cannot take ephemeral containers, and kubectl debug of a missing pod is a plain 404.
    let err = c.fails(&[
        "patch",
        "pod",
        "mypod",
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"x","image":"busybox:1.37"}]}}"#,
    ]);
    assert!(
        err.contains(
            "The Pod \"mypod\" is invalid: spec: Forbidden: pod updates may not change fields other than"
        ),
        "{err}"
    );
    let err = c.fails(&["debug", "nope", "--image=kubeling/testbox:0.1", "-c", "dbg"]);
    assert!(
        err.contains("Error from server (NotFound): pods \"nope\" not found"),
        "{err}"
    );
    assert_eq!(ephemeral_containers(&c), before, "nothing was changed");
}

#[test]
fn server_side_apply_and_dry_run_reach_the_subresource() {
    let c = started();
    let manifest = "apiVersion: v1
kind: Pod
metadata:
  name: mypod
spec:
  ephemeralContainers:
  - name: ssa
    image: kubeling/testbox:0.1
";
    let dry = c.ok_stdin(
        &[
            "apply",
            "--server-side",
            "--subresource=ephemeralcontainers",
            "--dry-run=server",
            "-f",
            "-",
        ],
        manifest,
    );
    assert!(
        dry.contains("pod/mypod serverside-applied (server dry run)"),
        "{dry}"
    );
    assert_eq!(ephemeral_containers(&c), Value::Null, "a dry run stores nothing");
    let out = c.ok_stdin(
        &[
            "apply",
            "--server-side",
            "--subresource=ephemeralcontainers",
            "-f",
            "-",
        ],
        manifest,
    );
    assert!(out.contains("pod/mypod serverside-applied"), "{out}");
    let ec = ephemeral_containers(&c);
    assert_eq!(
        (&ec[0]["name"], &ec[0]["imagePullPolicy"]),
        (&json!("ssa"), &json!("IfNotPresent"))
    );
}
