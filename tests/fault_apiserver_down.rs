//! The fault suite's API server outage: `kubeling apiserver` and `kubeling node --static-pod-path` as
//! separate processes; the API server is stopped (SIGTERM, or SIGKILL) under a running node agent. Meanwhile
//! the pods keep running in Docker, a container that exits is restarted by the node agent, and a static pod
//! added meanwhile starts. When the API server is back on the same data dir and port, the node's status and
//! Lease, the pods' statuses (with the restart) and the mirror pods (also the new one's) are written.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Cluster, NodeAgent, container_status, eventually, running_containers};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// How long the API server stays down at least.
const OUTAGE: Duration = Duration::from_secs(15);

const LABEL_CLUSTER: &str = "io.kubeling.cluster";
const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
const LABEL_TYPE: &str = "io.kubernetes.docker.type";
/// CRI annotations are Docker labels with the `annotation.` prefix (node/src/runtime/naming.rs).
const LABEL_RESTART_COUNT: &str = "annotation.io.kubernetes.container.restartCount";

/// A sleeping testbox pod `name` (for the API: bound to `node`; static: no node).
fn pod(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{
            "name": "main",
            "image": testbox_image::ensure_testbox_image(),
            "args": ["sleep"],
        }]},
    });
    if let Some(node) = node {
        p["spec"]["nodeName"] = json!(node);
    }
    p
}

/// Running containers of this cluster's pod `pod` of Docker type `kind` (`container`, `podsandbox`).
fn running(cluster: &str, pod: &str, kind: &str) -> Vec<String> {
    running_containers(&[
        (LABEL_CLUSTER, cluster),
        (LABEL_POD_NAME, pod),
        (LABEL_TYPE, kind),
    ])
}

/// The one running app container and the one running sandbox of `pod`, once there are exactly those.
fn containers_of(cluster: &str, pod: &str) -> (String, String) {
    eventually(
        WAIT,
        &format!("one running container and sandbox of {pod}"),
        || {
            let (apps, sandboxes) = (
                running(cluster, pod, "container"),
                running(cluster, pod, "podsandbox"),
            );
            (apps.len() == 1 && sandboxes.len() == 1).then(|| (apps[0].clone(), sandboxes[0].clone()))
        },
    )
}

fn restart_count_label(id: &str) -> String {
    let out = Command::new("docker")
        .args([
            "inspect",
            "--format",
            &format!("{{{{index .Config.Labels \"{LABEL_RESTART_COUNT}\"}}}}"),
            id,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn condition<'a>(v: &'a Value, kind: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or(&NULL)
}

fn time(v: &Value) -> jiff::Timestamp {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// The status of `pod`'s container `main` shows `id` running and ready, `restarts` restarts, and for a
/// restart the exit of the killed container.
fn reports(p: &Value, id: &str, restarts: u64) -> bool {
    let st = container_status(p, "containerStatuses", "main");
    st["containerID"] == format!("docker://{id}")
        && st["ready"] == true
        && st["restartCount"] == restarts
        && (restarts == 0 || st["lastState"]["terminated"]["exitCode"] == 137)
        && condition(p, "Ready")["status"] == "True"
}

#[derive(Clone, Copy)]
enum Stop {
    Term,
    Kill,
}

fn pods_keep_running_and_statuses_are_written_when_the_api_server_returns(stop: Stop, node: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let api_dir = tmp.path().join("api");
    let mut api = Cluster::start_in(&api_dir, 0, "apiserver");
    let (port, kubeconfig) = (api.port, api.kubeconfig.clone());
    let manifests = tmp.path().join("manifests");
    fs::create_dir_all(&manifests).unwrap();
    fs::write(manifests.join("web.json"), pod("web", None).to_string()).unwrap();
    let node_dir = tmp.path().join("node");
    let _agent = NodeAgent::spawn(
        &kubeconfig,
        &node_dir,
        &[
            "--node-name",
            node,
            "--static-pod-path",
            manifests.to_str().unwrap(),
            // The static source's watch sees a new manifest at once; its rescan is not what is tested.
            "--file-check-frequency",
            "1s",
        ],
    );
    api.ok_stdin(&["create", "-f", "-"], &pod("app", Some(node)).to_string());
    let (mirror_web, mirror_late) = (format!("web-{node}"), format!("late-{node}"));
    api.wait_json(&["node", node], WAIT, |n| {
        condition(n, "Ready")["status"] == "True"
    });
    let cluster = fs::read_to_string(node_dir.join("cluster-id"))
        .unwrap()
        .trim()
        .to_string();
    let (app_before, app_sandbox) = containers_of(&cluster, "app");
    let (web_before, web_sandbox) = containers_of(&cluster, &mirror_web);
    api.wait_json(&["pod", "app"], WAIT, |p| reports(p, &app_before, 0));
    api.wait_json(&["pod", &mirror_web], WAIT, |p| reports(p, &web_before, 0));

    match stop {
        Stop::Term => assert!(
            api.terminate().success(),
            "the API server did not exit 0 on SIGTERM"
        ),
        Stop::Kill => api.kill9(),
    }
    drop(api);
    let down = Instant::now();

    // With no API server: the containers run on, an exited one is restarted, a new static pod starts.
    for id in [&app_before, &web_before] {
        let out = Command::new("docker").args(["kill", id]).output().unwrap();
        assert!(
            out.status.success(),
            "docker kill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    fs::write(manifests.join("late.json"), pod("late", None).to_string()).unwrap();
    let restarted = |pod: &str, before: &str, sandbox: &str| {
        eventually(
            WAIT,
            &format!("{pod}'s container restarted without an API server"),
            || {
                let (app, sb) = (
                    running(&cluster, pod, "container"),
                    running(&cluster, pod, "podsandbox"),
                );
                (app.len() == 1 && app[0] != before && sb == [sandbox]).then(|| app[0].clone())
            },
        )
    };
    let app_after = restarted("app", &app_before, &app_sandbox);
    let web_after = restarted(&mirror_web, &web_before, &web_sandbox);
    assert_eq!(restart_count_label(&app_after), "1");
    assert_eq!(restart_count_label(&web_after), "1");
    let (late, late_sandbox) = containers_of(&cluster, &mirror_late);
    // Down for longer than the node's status period (10 s), so status updates and Lease renewals fail
    // meanwhile too; the containers stay as they are.
    let expected = [
        ("app", &app_after, &app_sandbox),
        (mirror_web.as_str(), &web_after, &web_sandbox),
        (mirror_late.as_str(), &late, &late_sandbox),
    ];
    while down.elapsed() < OUTAGE {
        for (pod, app, sandbox) in expected {
            assert_eq!(
                &running(&cluster, pod, "container"),
                std::slice::from_ref(app),
                "{pod}"
            );
            assert_eq!(
                &running(&cluster, pod, "podsandbox"),
                std::slice::from_ref(sandbox),
                "{pod}"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    let api = Cluster::start_in(&api_dir, port, "apiserver");
    let up_at = jiff::Timestamp::now();
    eprintln!("API server down {:?}", down.elapsed());
    api.wait_json(&["pod", "app"], WAIT, |p| reports(p, &app_after, 1));
    api.wait_json(&["pod", &mirror_web], WAIT, |p| reports(p, &web_after, 1));
    let mirror = api.wait_json(&["pod", &mirror_late], WAIT, |p| reports(p, &late, 0));
    assert_eq!(
        mirror["metadata"]["annotations"]["kubernetes.io/config.source"], "file",
        "{mirror}"
    );
    // The node reports again: a heartbeat and a Lease renewal after the API server came back.
    let seconds = |t: jiff::Timestamp| t.as_second();
    api.wait_json(&["node", node], WAIT, |n| {
        let ready = condition(n, "Ready");
        ready["status"] == "True" && seconds(time(&ready["lastHeartbeatTime"])) >= seconds(up_at)
    });
    api.wait_json(&["lease", "-n", "kube-node-lease", node], WAIT, |l| {
        seconds(time(&l["spec"]["renewTime"])) >= seconds(up_at)
    });
    // Nothing was replaced once the API server came back: same containers, same sandboxes.
    assert_eq!(containers_of(&cluster, "app"), (app_after, app_sandbox));
    assert_eq!(containers_of(&cluster, &mirror_web), (web_after, web_sandbox));
}

#[test]
fn pods_keep_running_through_an_api_server_sigterm_and_their_statuses_are_written_when_it_returns() {
    pods_keep_running_and_statuses_are_written_when_the_api_server_returns(Stop::Term, "down-term");
}

#[test]
fn pods_keep_running_through_an_api_server_kill_9_and_their_statuses_are_written_when_it_returns() {
    pods_keep_running_and_statuses_are_written_when_the_api_server_returns(Stop::Kill, "down-kill");
}
