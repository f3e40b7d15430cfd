//! A chart's worth of objects (`fixtures/charts/app.yaml`: ConfigMap, Secret, Deployment, Services,
//! StatefulSet with storage, Job) applied with `kubectl apply -f` comes up on Docker; `kubectl delete -f`
//! removes everything, pods and claims included. And a rollout interrupted by `kill -9` of kubeling finishes
//! after `kubeling up` again, with no duplicate pods.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

fn chart() -> String {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/charts/app.yaml")).unwrap();
    text.replace("IMAGE", &testbox_image::ensure_testbox_image())
}

fn items(c: &Cluster, what: &str, ns: &str) -> Vec<Value> {
    let out = c.ok(&["get", what, "-n", ns, "-o", "json"]);
    serde_json::from_str::<Value>(&out).unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_chart_applied_with_kubectl_comes_up_and_goes_away_with_delete() {
    let c = Cluster::up();
    let ns = "chart";
    c.ok(&["create", "namespace", ns]);
    let manifest = chart();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.yaml");
    std::fs::write(&file, &manifest).unwrap();
    let file = file.to_str().unwrap();
    // The namespace's `default` ServiceAccount is made right after the namespace; pods need it.
    c.wait_json(
        &["serviceaccount", "default", "-n", ns],
        Duration::from_secs(20),
        |_| true,
    );
    let applied = c.ok(&["apply", "-n", ns, "-f", file]);
    for line in [
        "configmap/app-config created",
        "secret/app-secret created",
        "deployment.apps/app-web created",
        "service/app-web created",
        "service/app-db created",
        "statefulset.apps/app-db created",
        "job.batch/app-migrate created",
    ] {
        assert!(applied.contains(line), "{applied}");
    }
    let out = c.ok(&[
        "rollout",
        "status",
        "-n",
        ns,
        "deployment/app-web",
        "--timeout=120s",
    ]);
    assert!(
        out.contains("deployment \"app-web\" successfully rolled out"),
        "{out}"
    );
    let out = c.ok(&[
        "rollout",
        "status",
        "-n",
        ns,
        "statefulset/app-db",
        "--timeout=120s",
    ]);
    assert!(
        out.contains("partitioned roll out complete: 1 new pods have been updated..."),
        "{out}"
    );
    let out = c.ok(&[
        "wait",
        "-n",
        ns,
        "--for=condition=complete",
        "job/app-migrate",
        "--timeout=120s",
    ]);
    assert!(out.contains("job.batch/app-migrate condition met"), "{out}");
    let job_pod = c.ok(&[
        "get",
        "pods",
        "-n",
        ns,
        "-l",
        "job-name=app-migrate",
        "-o",
        "name",
    ]);
    let logs = c.ok(&["logs", "-n", ns, job_pod.trim()]);
    assert_eq!(logs.trim(), "migrated hello", "the Job read the ConfigMap");
    let pvc = c.wait_json(&["pvc", "data-app-db-0", "-n", ns], WAIT, |p| {
        p["status"]["phase"] == "Bound"
    });
    assert!(pvc["spec"]["volumeName"].as_str().is_some_and(|v| !v.is_empty()));
    // The web pods are the Service's endpoints.
    c.wait_json(
        &[
            "endpointslices",
            "-n",
            ns,
            "-l",
            "kubernetes.io/service-name=app-web",
        ],
        WAIT,
        |l| {
            l["items"].as_array().is_some_and(|s| {
                s.iter()
                    .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                    .filter(|e| e["conditions"]["ready"] == true)
                    .count()
                    == 2
            })
        },
    );

    let deleted = c.ok(&["delete", "-n", ns, "-f", file]);
    assert!(
        deleted.contains("deployment.apps \"app-web\" deleted"),
        "{deleted}"
    );
    // Everything the chart made goes, including what the controllers made from it.
    eventually(WAIT, "every pod, ReplicaSet, claim and slice is gone", || {
        let left: Vec<String> = [
            "pods",
            "replicasets",
            "persistentvolumeclaims",
            "endpointslices",
            "jobs",
        ]
        .iter()
        .flat_map(|k| items(&c, k, ns))
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect();
        left.is_empty().then_some(()).or_else(|| {
            eprintln!("still there: {left:?}");
            None
        })
    });
}

fn pods_of(c: &Cluster, ns: &str, app: &str) -> Vec<Value> {
    let out = c.ok(&["get", "pods", "-n", ns, "-l", &format!("app={app}"), "-o", "json"]);
    serde_json::from_str::<Value>(&out).unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_rollout_interrupted_by_kill_9_finishes_after_restart_without_duplicate_pods() {
    let image = testbox_image::ensure_testbox_image();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut first = Cluster::start_in(&dir, 0, "up");
    first.wait_json(&["serviceaccount", "default"], Duration::from_secs(20), |_| true);
    first.ok(&[
        "create",
        "deployment",
        "web",
        &format!("--image={image}"),
        "--replicas=4",
        "--",
        "/testbox",
        "sleep",
    ]);
    first.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    first.ok(&["set", "env", "deployment/web", "ROLL=1"]);
    // Kill as soon as the new ReplicaSet exists, mid-rollout.
    eventually(WAIT, "a second ReplicaSet", || {
        let rs = first.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
        (rs.lines().count() >= 2).then_some(())
    });
    first.kill9();
    let second = Cluster::start_in(&dir, 0, "up");
    let out = second.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = second.wait_json(&["deployment", "web"], WAIT, |d| {
        d["status"]["replicas"] == 4
            && d["status"]["updatedReplicas"] == 4
            && d["status"]["availableReplicas"] == 4
    });
    // Exactly the replicas, all from the new template, once the old pods have finished terminating.
    let pods = eventually(WAIT, "4 pods, no more", || {
        let pods = pods_of(&second, "default", "web");
        (pods.len() == 4).then_some(pods)
    });
    let hash = pods[0]["metadata"]["labels"]["pod-template-hash"].clone();
    for p in &pods {
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], hash, "{p}");
        assert!(
            p["spec"]["containers"][0]["env"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["name"] == "ROLL")),
            "{p}"
        );
    }
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let rs = second.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(rs.lines().count(), 2, "{rs}");
    drop(second);
    drop(first);
}
