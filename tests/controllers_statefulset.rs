//! StatefulSets, DaemonSets and the built-in local volume provisioner against the real binary, kubectl and
//! Docker (reference §15 cases 17–21): ordered creation with stable names and claims, data that survives
//! its pod, ordered scale-down that keeps claims, a reverse-order rolling update, reclaim of a released
//! volume, and a DaemonSet pod pinned to the node by `matchFields`. One cluster for the file.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(180);
const NS: &str = "sts-e2e";

fn statefulset_manifest(image: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: nginx, namespace: {NS}}}
spec:
  clusterIP: None
  selector: {{app: sts}}
  ports: [{{port: 8080}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: web, namespace: {NS}}}
spec:
  serviceName: nginx
  replicas: 3
  selector: {{matchLabels: {{app: sts}}}}
  template:
    metadata: {{labels: {{app: sts}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: {image}
        args: [serve, --port, \"8080\"]
        volumeMounts: [{{name: www, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: www}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Mi}}}}
"
    )
}

fn pods(c: &Cluster) -> Vec<Value> {
    let out = c.ok(&["get", "pods", "-n", NS, "-l", "app=sts", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["items"].as_array().unwrap().clone()
}

fn ready_time(p: &Value) -> Option<jiff::Timestamp> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?["lastTransitionTime"]
        .as_str()?
        .parse()
        .ok()
}

fn created(p: &Value) -> jiff::Timestamp {
    p["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn events(c: &Cluster, ns: &str, name: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={name}");
    let out = c.ok(&[
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        &selector,
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}|{}",
                e["reason"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn rollout_status(c: &Cluster, what: &str, ns: &str) -> String {
    let out = c.ok(&["rollout", "status", what, "-n", ns, "--timeout=180s"]);
    out.trim().lines().last().unwrap_or("").to_string()
}

/// Waits until web-0..web-(n-1) exist, are Ready, and nothing else is left.
fn wait_ready(c: &Cluster, n: usize) -> Vec<Value> {
    let want: Vec<String> = (0..n).map(|i| format!("web-{i}")).collect();
    eventually(WAIT, &format!("{n} ready StatefulSet pods"), || {
        let ps = pods(c);
        let mut names: Vec<String> = ps
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        (names == want
            && ps
                .iter()
                .all(|p| ready_time(p).is_some() && p["metadata"]["deletionTimestamp"].is_null()))
        .then_some(ps)
    })
}

fn claim_uids(c: &Cluster) -> HashMap<String, String> {
    let out = c.ok(&["get", "pvc", "-n", NS, "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["metadata"]["uid"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn statefulset(c: &Cluster, image: &str) {
    c.ok(&["create", "namespace", NS]);
    c.ok_stdin(&["apply", "-f", "-"], &statefulset_manifest(image));
    assert_eq!(
        rollout_status(c, "sts/web", NS),
        "partitioned roll out complete: 3 new pods have been updated..."
    );
    let ps = wait_ready(c, 3);
    let sts: Value = serde_json::from_str(&c.ok(&["get", "sts", "web", "-n", NS, "-o", "json"])).unwrap();
    let update_rev = sts["status"]["updateRevision"].as_str().unwrap().to_string();
    assert!(update_rev.starts_with("web-"), "{update_rev}");
    let by_name: HashMap<String, &Value> = ps
        .iter()
        .map(|p| (p["metadata"]["name"].as_str().unwrap().to_string(), p))
        .collect();
    for i in 0..3 {
        let name = format!("web-{i}");
        let p = by_name[&name];
        assert_eq!(p["spec"]["hostname"], name.as_str());
        assert_eq!(p["spec"]["subdomain"], "nginx");
        let l = &p["metadata"]["labels"];
        assert_eq!(l["statefulset.kubernetes.io/pod-name"], name.as_str());
        assert_eq!(l["apps.kubernetes.io/pod-index"], i.to_string().as_str());
        assert_eq!(l["controller-revision-hash"], update_rev.as_str());
        let vol = p["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "www")
            .unwrap();
        assert_eq!(
            vol["persistentVolumeClaim"]["claimName"],
            format!("www-{name}").as_str()
        );
    }
    // OrderedReady: each pod is created only once the previous one is Ready.
    for i in 1..3 {
        let prev = by_name[&format!("web-{}", i - 1)];
        let this = by_name[&format!("web-{i}")];
        assert!(
            created(this) >= ready_time(prev).unwrap(),
            "web-{i} created before web-{} was ready",
            i - 1
        );
    }

    // Claims: bound to provisioned hostPath volumes of the default class.
    let pvcs: Value = serde_json::from_str(&c.ok(&["get", "pvc", "-n", NS, "-o", "json"])).unwrap();
    let mut names: Vec<&str> = pvcs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["www-web-0", "www-web-1", "www-web-2"]);
    for pvc in pvcs["items"].as_array().unwrap() {
        assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
        assert_eq!(pvc["spec"]["storageClassName"], "standard");
        assert_eq!(pvc["metadata"]["labels"]["app"], "sts");
        assert_eq!(
            pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
            "yes"
        );
        assert_eq!(pvc["status"]["capacity"]["storage"], "1Mi");
        let pv_name = pvc["spec"]["volumeName"].as_str().unwrap();
        assert_eq!(
            pv_name,
            format!("pvc-{}", pvc["metadata"]["uid"].as_str().unwrap())
        );
        let pv: Value = serde_json::from_str(&c.ok(&["get", "pv", pv_name, "-o", "json"])).unwrap();
        assert_eq!(pv["status"]["phase"], "Bound");
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        assert_eq!(
            pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
            "kubeling.io/local-path"
        );
        let path = pv["spec"]["hostPath"]["path"].as_str().unwrap();
        assert!(
            path.ends_with(&format!(
                "/{pv_name}_{NS}_{}",
                pvc["metadata"]["name"].as_str().unwrap()
            )),
            "{path}"
        );
        assert!(std::path::Path::new(path).is_dir());
    }
    let class: Value =
        serde_json::from_str(&c.ok(&["get", "storageclass", "standard", "-o", "json"])).unwrap();
    assert_eq!(class["provisioner"], "kubeling.io/local-path");
    assert_eq!(
        class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
        "true"
    );

    let evs = events(c, NS, "web");
    for want in [
        "SuccessfulCreate|create Claim www-web-0 Pod web-0 in StatefulSet web success",
        "SuccessfulCreate|create Pod web-0 in StatefulSet web successful",
        "SuccessfulCreate|create Pod web-2 in StatefulSet web successful",
    ] {
        assert!(evs.iter().any(|e| e == want), "no {want:?} in {evs:#?}");
    }

    // Data in the volume outlives the pod.
    c.ok(&[
        "exec",
        "-n",
        NS,
        "web-1",
        "--",
        "sh",
        "-c",
        "echo kept > /data/note",
    ]);
    let old_uid = by_name["web-1"]["metadata"]["uid"].as_str().unwrap().to_string();
    c.ok(&["delete", "pod", "web-1", "-n", NS, "--wait=false"]);
    eventually(WAIT, "a new ready web-1", || {
        pods(c)
            .into_iter()
            .find(|p| p["metadata"]["name"] == "web-1" && p["metadata"]["uid"] != old_uid.as_str())
            .filter(|p| ready_time(p).is_some())
    });
    assert_eq!(
        c.ok(&["exec", "-n", NS, "web-1", "--", "cat", "/data/note"])
            .trim(),
        "kept"
    );

    // A rolling update replaces web-2, web-1, web-0 in that order, one at a time.
    c.ok(&["set", "env", "sts/web", "-n", NS, "VERSION=2"]);
    let mut order: Vec<String> = Vec::new();
    let deadline = Instant::now() + WAIT;
    let new_rev = loop {
        let sts: Value = serde_json::from_str(&c.ok(&["get", "sts", "web", "-n", NS, "-o", "json"])).unwrap();
        let rev = sts["status"]["updateRevision"].as_str().unwrap_or("").to_string();
        if rev != update_rev && !rev.is_empty() {
            let mut not_ready = 0;
            for p in pods(c) {
                let name = p["metadata"]["name"].as_str().unwrap().to_string();
                if p["metadata"]["labels"]["controller-revision-hash"] == rev.as_str()
                    && !order.contains(&name)
                {
                    order.push(name);
                }
                if ready_time(&p).is_none() {
                    not_ready += 1;
                }
            }
            assert!(not_ready <= 1, "more than one pod down at once");
            if order.len() == 3 {
                break rev;
            }
        }
        assert!(
            Instant::now() < deadline,
            "rolling update did not finish: {order:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(order, ["web-2", "web-1", "web-0"]);
    assert_eq!(
        rollout_status(c, "sts/web", NS),
        "partitioned roll out complete: 3 new pods have been updated..."
    );
    let sts = c.wait_json(&["sts", "web", "-n", NS], WAIT, |s| {
        s["status"]["currentRevision"] == s["status"]["updateRevision"]
    });
    assert_eq!(sts["status"]["currentRevision"], new_rev.as_str());
    let revs = c.ok(&[
        "get",
        "controllerrevisions",
        "-n",
        NS,
        "-l",
        "app=sts",
        "--no-headers",
    ]);
    assert_eq!(revs.lines().count(), 2, "{revs}");
    assert_eq!(
        c.ok(&["exec", "-n", NS, "web-1", "--", "cat", "/data/note"])
            .trim(),
        "kept"
    );

    // Scale down: web-2 goes first, then web-1; the claims stay.
    let uids = claim_uids(c);
    c.ok(&["scale", "sts", "web", "-n", NS, "--replicas=1"]);
    let mut gone: Vec<String> = Vec::new();
    eventually(WAIT, "scale down to web-0", || {
        let names: Vec<String> = pods(c)
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for n in ["web-2", "web-1"] {
            if !names.iter().any(|x| x == n) && !gone.iter().any(|g| g == n) {
                gone.push(n.to_string());
            }
        }
        (names == ["web-0"]).then_some(())
    });
    assert_eq!(gone, ["web-2", "web-1"]);
    let evs = events(c, NS, "web");
    assert!(
        evs.iter()
            .any(|e| e == "SuccessfulDelete|delete Pod web-2 in StatefulSet web successful"),
        "{evs:#?}"
    );
    assert_eq!(claim_uids(c), uids, "claims are kept");

    // Scaling up again reuses the same claims (and their data).
    c.ok(&["scale", "sts", "web", "-n", NS, "--replicas=3"]);
    wait_ready(c, 3);
    assert_eq!(claim_uids(c), uids);
    assert_eq!(
        c.ok(&["exec", "-n", NS, "web-1", "--", "cat", "/data/note"])
            .trim(),
        "kept"
    );

    // A released claim's volume (reclaim Delete) goes away with its directory.
    c.ok(&["scale", "sts", "web", "-n", NS, "--replicas=2"]);
    wait_ready(c, 2);
    let pvc: Value =
        serde_json::from_str(&c.ok(&["get", "pvc", "www-web-2", "-n", NS, "-o", "json"])).unwrap();
    let pv_name = pvc["spec"]["volumeName"].as_str().unwrap().to_string();
    let pv: Value = serde_json::from_str(&c.ok(&["get", "pv", &pv_name, "-o", "json"])).unwrap();
    let dir = std::path::PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap());
    c.ok(&["delete", "pvc", "www-web-2", "-n", NS]);
    eventually(WAIT, "the released volume to be deleted", || {
        let out = c.kubectl(&["get", "pv", &pv_name]);
        (!out.status.success()).then_some(())
    });
    assert!(!dir.exists(), "{} is still there", dir.display());
}

fn daemonset(c: &Cluster, image: &str) {
    let ns = "ds-e2e";
    c.ok(&["create", "namespace", ns]);
    let manifest = format!(
        "apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{{name: agent, image: {image}, args: [sleep]}}]
"
    );
    c.ok_stdin(&["apply", "-f", "-"], &manifest);
    assert_eq!(
        rollout_status(c, "ds/agent", ns),
        "daemon set \"agent\" successfully rolled out"
    );
    let ds = c.wait_json(&["ds", "agent", "-n", ns], WAIT, |d| {
        d["status"]["numberAvailable"] == 1
    });
    let s = &ds["status"];
    let got = format!(
        "{} {} {} {} {}",
        s["desiredNumberScheduled"],
        s["currentNumberScheduled"],
        s["numberReady"],
        s["updatedNumberScheduled"],
        s["numberAvailable"]
    );
    assert_eq!(got, "1 1 1 1 1");
    let node = c.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let pods: Value =
        serde_json::from_str(&c.ok(&["get", "pods", "-n", ns, "-l", "app=agent", "-o", "json"])).unwrap();
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let p = &items[0];
    assert!(p["metadata"]["name"].as_str().unwrap().starts_with("agent-"));
    assert_eq!(
        p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"][0],
        serde_json::json!({"key": "metadata.name", "operator": "In", "values": [node.trim()]})
    );
    assert_eq!(p["spec"]["nodeName"], node.trim(), "bound by the scheduler");
    let unreachable = p["spec"]["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "node.kubernetes.io/unreachable")
        .expect("unreachable toleration");
    assert_eq!(unreachable["effect"], "NoExecute");
    assert!(unreachable["tolerationSeconds"].is_null());
    let labels = &p["metadata"]["labels"];
    let hash = labels["controller-revision-hash"].as_str().unwrap();
    assert!(hash.chars().all(|c| "456789bcdf".contains(c)), "{hash}");
    assert_eq!(labels["pod-template-generation"], "1");

    // A template change rolls the pod.
    let old_uid = p["metadata"]["uid"].clone();
    c.ok(&["set", "env", "ds/agent", "-n", ns, "VERSION=2"]);
    assert_eq!(
        rollout_status(c, "ds/agent", ns),
        "daemon set \"agent\" successfully rolled out"
    );
    let pods: Value =
        serde_json::from_str(&c.ok(&["get", "pods", "-n", ns, "-l", "app=agent", "-o", "json"])).unwrap();
    let live: Vec<&Value> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    assert_eq!(live.len(), 1);
    assert_ne!(live[0]["metadata"]["uid"], old_uid);
    assert_eq!(live[0]["metadata"]["labels"]["pod-template-generation"], "2");
}

#[test]
fn statefulsets_daemonsets_and_local_volumes() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up();
    statefulset(&c, &image);
    daemonset(&c, &image);
}
