//! Step 6 with the real binary, kubectl and Docker: the Deployment and ReplicaSet controllers (reference §15
//! cases 1–16). One cluster for the whole file; independent scenarios run side by side in their own
//! namespaces.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

/// kubectl in one namespace.
struct Ns<'a> {
    c: &'a Cluster,
    ns: &'static str,
}

impl Ns<'_> {
    fn args<'b>(&'b self, args: &[&'b str]) -> Vec<&'b str> {
        let mut v = vec!["-n", self.ns];
        v.extend_from_slice(args);
        v
    }

    fn ok(&self, args: &[&str]) -> String {
        self.c.ok(&self.args(args))
    }

    fn fails(&self, args: &[&str]) -> String {
        self.c.fails(&self.args(args))
    }

    fn apply(&self, yaml: &str) {
        self.c.ok_stdin(&self.args(&["apply", "-f", "-"]), yaml);
    }

    fn json(&self, what: &[&str]) -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(what);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    fn wait_json(&self, what: &[&str], cond: impl FnMut(&Value) -> bool) -> Value {
        let mut a = vec!["-n", self.ns];
        a.extend_from_slice(what);
        self.c.wait_json(&a, WAIT, cond)
    }

    fn rollout_ok(&self, name: &str) -> String {
        let target = format!("deployment/{name}");
        let out = self.ok(&["rollout", "status", &target, "--timeout=120s"]);
        assert!(
            out.trim_end()
                .ends_with(&format!("deployment \"{name}\" successfully rolled out")),
            "{out}"
        );
        out
    }

    /// `reason|message` of the events about `name`.
    fn events(&self, name: &str) -> Vec<String> {
        let sel = format!("involvedObject.name={name}");
        let v: Value =
            serde_json::from_str(&self.ok(&["get", "events", "--field-selector", &sel, "-o", "json"]))
                .unwrap();
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

    fn wait_event(&self, name: &str, want: &str) -> Vec<String> {
        eventually(WAIT, &format!("event {want:?} on {name}"), || {
            let evs = self.events(name);
            evs.iter().any(|e| e == want).then_some(evs)
        })
    }

    /// The ReplicaSets with `app=<app>`, oldest revision first.
    fn replicasets(&self, app: &str) -> Vec<Value> {
        let sel = format!("app={app}");
        let mut items = self.json(&["rs", "-l", &sel])["items"]
            .as_array()
            .unwrap()
            .clone();
        items.sort_by_key(revision);
        items
    }
}

fn revision(obj: &Value) -> i64 {
    obj["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn hash_of(rs: &Value) -> String {
    rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap()
        .to_string()
}

fn is_hash(h: &str) -> bool {
    !h.is_empty() && h.len() <= 10 && h.chars().all(|c| "456789bcdf".contains(c))
}

fn is_suffix(s: &str) -> bool {
    s.len() == 5 && s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
}

fn conditions(d: &Value) -> Vec<String> {
    d["status"]["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    format!(
                        "{}={}/{}",
                        c["type"].as_str().unwrap(),
                        c["status"].as_str().unwrap(),
                        c["reason"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn condition<'a>(d: &'a Value, type_: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    d["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&NULL)
}

fn num(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

#[test]
fn deployments_and_replicasets_behave_as_upstream() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up();
    for ns in ["web", "bad", "adopt", "rec", "hist"] {
        c.ok(&["create", "namespace", ns]);
    }
    std::thread::scope(|s| {
        s.spawn(|| create_scale_roll_undo_restart_pause(&Ns { c: &c, ns: "web" }, &image));
        s.spawn(|| progress_deadline(&Ns { c: &c, ns: "bad" }));
        s.spawn(|| replicaset_adoption_and_release(&Ns { c: &c, ns: "adopt" }, &image));
        s.spawn(|| recreate(&Ns { c: &c, ns: "rec" }, &image));
        s.spawn(|| revision_history_limit(&Ns { c: &c, ns: "hist" }, &image));
    });
}

/// Cases 1–12.
fn create_scale_roll_undo_restart_pause(k: &Ns, image: &str) {
    let img = format!("--image={image}");
    let out = k.ok(&[
        "create",
        "deployment",
        "web",
        &img,
        "--replicas=3",
        "--",
        "/testbox",
        "serve",
    ]);
    assert_eq!(out.trim(), "deployment.apps/web created");
    k.rollout_ok("web");

    // 1, 5: columns, counters and conditions.
    let row = k.ok(&["get", "deploy", "web", "--no-headers"]);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..4], ["web", "3/3", "3", "3"], "{row}");
    let d = k.json(&["deploy", "web"]);
    let st = &d["status"];
    assert_eq!(
        (
            num(&st["replicas"]),
            num(&st["updatedReplicas"]),
            num(&st["readyReplicas"]),
            num(&st["availableReplicas"]),
            num(&st["observedGeneration"])
        ),
        (3, 3, 3, 3, 1),
        "{st}"
    );
    assert!(st.get("unavailableReplicas").is_none(), "{st}");
    assert_eq!(
        conditions(&d),
        [
            "Available=True/MinimumReplicasAvailable",
            "Progressing=True/NewReplicaSetAvailable"
        ]
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );

    // 2, 3: the ReplicaSet's name, labels, selector, owner and annotations.
    let rss = k.replicasets("web");
    assert_eq!(rss.len(), 1);
    let rs1 = &rss[0];
    let h1 = hash_of(rs1);
    assert!(is_hash(&h1), "{h1}");
    let rs1_name = format!("web-{h1}");
    assert_eq!(rs1["metadata"]["name"], rs1_name.as_str());
    assert_eq!(
        rs1["spec"]["selector"]["matchLabels"],
        serde_json::json!({"app": "web", "pod-template-hash": h1})
    );
    let owner = &rs1["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["name"].as_str(),
            &owner["controller"],
            &owner["blockOwnerDeletion"]
        ),
        (
            Some("Deployment"),
            Some("web"),
            &Value::Bool(true),
            &Value::Bool(true)
        )
    );
    assert_eq!(
        rs1["metadata"]["annotations"],
        serde_json::json!({"deployment.kubernetes.io/desired-replicas": "3", "deployment.kubernetes.io/max-replicas": "4", "deployment.kubernetes.io/revision": "1"})
    );

    // 4: pods.
    let pods = k.json(&["pods", "-l", "app=web"]);
    let pods = pods["items"].as_array().unwrap();
    assert_eq!(pods.len(), 3);
    for p in pods {
        let prefix = format!("{rs1_name}-");
        assert_eq!(p["metadata"]["generateName"], prefix.as_str());
        let name = p["metadata"]["name"].as_str().unwrap();
        assert!(is_suffix(name.strip_prefix(&prefix).unwrap()), "{name}");
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], h1.as_str());
        let o = &p["metadata"]["ownerReferences"];
        assert_eq!(o.as_array().unwrap().len(), 1);
        assert_eq!(
            (o[0]["kind"].as_str(), o[0]["name"].as_str(), &o[0]["controller"]),
            (Some("ReplicaSet"), Some(rs1_name.as_str()), &Value::Bool(true))
        );
    }
    // 6: the creation event.
    k.wait_event(
        "web",
        &format!("ScalingReplicaSet|Scaled up replica set {rs1_name} from 0 to 3"),
    );

    // 7: scale up through /scale, then down; the ReplicaSet deletes and says so.
    assert_eq!(
        k.ok(&["scale", "deployment", "web", "--replicas=5"]).trim(),
        "deployment.apps/web scaled"
    );
    k.rollout_ok("web");
    k.wait_event(
        "web",
        &format!("ScalingReplicaSet|Scaled up replica set {rs1_name} from 3 to 5"),
    );
    let rs = k.json(&["rs", &rs1_name]);
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"],
        "5"
    );
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"],
        "7"
    );
    k.ok(&["scale", "deployment", "web", "--replicas=1"]);
    k.rollout_ok("web");
    k.wait_event(
        "web",
        &format!("ScalingReplicaSet|Scaled down replica set {rs1_name} from 5 to 1"),
    );
    let evs = eventually(WAIT, "four SuccessfulDelete events on the ReplicaSet", || {
        let evs = k.events(&rs1_name);
        (evs.iter()
            .filter(|e| e.starts_with(&format!("SuccessfulDelete|Deleted pod: {rs1_name}-")))
            .count()
            == 4)
            .then_some(evs)
    });
    assert!(
        evs.iter()
            .filter(|e| e.starts_with("SuccessfulCreate|Created pod: "))
            .count()
            >= 5,
        "{evs:?}"
    );
    k.ok(&["scale", "deployment", "web", "--replicas=3"]);
    k.rollout_ok("web");

    // 8: a rolling update, watched: never more than 4 pods wanted, never fewer than 3 available.
    let stop = Arc::new(AtomicBool::new(false));
    let min_available = Arc::new(AtomicI64::new(i64::MAX));
    let max_wanted = Arc::new(AtomicI64::new(0));
    let samples = Arc::new(AtomicI64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let d = k.json(&["deploy", "web"]);
                min_available.fetch_min(num(&d["status"]["availableReplicas"]), Ordering::SeqCst);
                let rss = k.json(&["rs", "-l", "app=web"]);
                let wanted: i64 = rss["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| num(&r["spec"]["replicas"]))
                    .sum();
                max_wanted.fetch_max(wanted, Ordering::SeqCst);
                samples.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eq!(
            k.ok(&["set", "env", "deployment/web", "GEN=2"]).trim(),
            "deployment.apps/web env updated"
        );
        k.rollout_ok("web");
        stop.store(true, Ordering::SeqCst);
    });
    assert!(
        samples.load(Ordering::SeqCst) >= 3,
        "the watcher sampled the rollout"
    );
    assert!(
        min_available.load(Ordering::SeqCst) >= 3,
        "availableReplicas dropped to {}",
        min_available.load(Ordering::SeqCst)
    );
    assert!(
        max_wanted.load(Ordering::SeqCst) <= 4,
        "{} replicas wanted at once",
        max_wanted.load(Ordering::SeqCst)
    );
    let d = k.json(&["deploy", "web"]);
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let rss = k.replicasets("web");
    assert_eq!(rss.len(), 2);
    let rs2_name = rss[1]["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(rss[0]["metadata"]["name"], rs1_name.as_str());
    assert_eq!(
        (
            num(&rss[0]["spec"]["replicas"]),
            num(&rss[0]["status"]["replicas"])
        ),
        (0, 0)
    );
    let evs = k.wait_event(
        "web",
        &format!("ScalingReplicaSet|Scaled down replica set {rs1_name} from 1 to 0"),
    );
    for want in [
        format!("Scaled up replica set {rs2_name} from 0 to 1"),
        format!("Scaled down replica set {rs1_name} from 3 to 2"),
        format!("Scaled up replica set {rs2_name} from 1 to 2"),
        format!("Scaled down replica set {rs1_name} from 2 to 1"),
        format!("Scaled up replica set {rs2_name} from 2 to 3"),
    ] {
        assert!(
            evs.contains(&format!("ScalingReplicaSet|{want}")),
            "{want} not in {evs:#?}"
        );
    }

    // 9: history, and change-cause reaching the current ReplicaSet.
    let hist = k.ok(&["rollout", "history", "deployment/web"]);
    assert_eq!(
        hist,
        "deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n\n"
    );
    k.ok(&[
        "annotate",
        "deployment",
        "web",
        "kubernetes.io/change-cause=bump",
        "--overwrite",
    ]);
    k.wait_json(&["rs", &rs2_name], |rs| {
        rs["metadata"]["annotations"]["kubernetes.io/change-cause"] == "bump"
    });
    let hist = k.ok(&["rollout", "history", "deployment/web"]);
    assert!(hist.contains("2         bump"), "{hist}");

    // 10: undo goes back to revision 1's template, which becomes revision 3.
    assert_eq!(
        k.ok(&["rollout", "undo", "deployment/web"]).trim(),
        "deployment.apps/web rolled back"
    );
    k.wait_json(&["deploy", "web"], |d| {
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    });
    k.rollout_ok("web");
    let d = k.json(&["deploy", "web"]);
    assert!(
        d["spec"]["template"]["spec"]["containers"][0]
            .get("env")
            .is_none(),
        "{}",
        d["spec"]["template"]
    );
    let rs = k.json(&["rs", &rs1_name]);
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    assert_eq!(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"],
        "1"
    );
    let hist = k.ok(&["rollout", "history", "deployment/web"]);
    let revs: Vec<&str> = hist
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revs, ["2", "3"], "{hist}");
    let err = k.fails(&["rollout", "undo", "deployment/web", "--to-revision=9"]);
    assert!(
        err.contains("unable to find specified revision 9 in history"),
        "{err}"
    );

    // 11: restart makes a new ReplicaSet, revision 4.
    assert_eq!(
        k.ok(&["rollout", "restart", "deployment/web"]).trim(),
        "deployment.apps/web restarted"
    );
    let d = k.json(&["deploy", "web"]);
    let at = d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(at.parse::<jiff::Timestamp>().is_ok(), "{at}");
    k.rollout_ok("web");
    k.wait_json(&["deploy", "web"], |d| {
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "4"
    });
    assert_eq!(k.replicasets("web").len(), 3);

    // 12: pause holds the template back; resume rolls it out.
    assert_eq!(
        k.ok(&["rollout", "pause", "deployment/web"]).trim(),
        "deployment.apps/web paused"
    );
    k.ok(&["set", "env", "deployment/web", "GEN=3"]);
    // Once the controller has seen the paused template change, nothing new exists.
    let d = k.wait_json(&["deploy", "web"], |d| {
        num(&d["status"]["observedGeneration"]) == num(&d["metadata"]["generation"])
            && condition(d, "Progressing")["reason"] == "DeploymentPaused"
    });
    assert_eq!(condition(&d, "Progressing")["status"], "Unknown");
    assert_eq!(k.replicasets("web").len(), 3, "no new ReplicaSet while paused");
    let err = k.fails(&["rollout", "restart", "deployment/web"]);
    assert!(
        err.contains("can't restart paused deployment (run rollout resume first)"),
        "{err}"
    );
    assert_eq!(
        k.ok(&["rollout", "resume", "deployment/web"]).trim(),
        "deployment.apps/web resumed"
    );
    k.rollout_ok("web");
    k.wait_json(&["deploy", "web"], |d| {
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "5"
    });
    assert_eq!(k.replicasets("web").len(), 4);
}

/// Case 13: a pod that never starts times the rollout out.
fn progress_deadline(k: &Ns) {
    k.ok(&["create", "deployment", "bad", "--image=kubeling/does-not-exist:1"]);
    k.ok(&[
        "patch",
        "deployment",
        "bad",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":10}}"#,
    ]);
    let err = k.fails(&["rollout", "status", "deployment/bad", "--timeout=90s"]);
    assert!(
        err.contains("deployment \"bad\" exceeded its progress deadline"),
        "{err}"
    );
    let d = k.json(&["deploy", "bad"]);
    let p = condition(&d, "Progressing");
    assert_eq!(
        (p["status"].as_str(), p["reason"].as_str()),
        (Some("False"), Some("ProgressDeadlineExceeded")),
        "{d}"
    );
    let rs = &k.replicasets("bad")[0];
    assert_eq!(
        p["message"],
        format!(
            "ReplicaSet \"{}\" has timed out progressing.",
            rs["metadata"]["name"].as_str().unwrap()
        )
        .as_str()
    );
    let a = condition(&d, "Available");
    assert_eq!(
        (a["status"].as_str(), a["reason"].as_str()),
        (Some("False"), Some("MinimumReplicasUnavailable"))
    );
    assert_eq!(num(&d["status"]["unavailableReplicas"]), 1);
}

/// Case 16: a ReplicaSet adopts a matching orphan instead of creating a pod, and releases it when its labels
/// stop matching.
fn replicaset_adoption_and_release(k: &Ns, image: &str) {
    let img = format!("--image={image}");
    assert_eq!(
        k.ok(&["run", "orphan", &img, "--labels=app=adopt"]).trim(),
        "pod/orphan created"
    );
    k.wait_json(&["pod", "orphan"], |p| p["status"]["phase"] == "Running");
    k.apply(&format!(
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: adopt\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: adopt}}\n  template:\n    metadata:\n      labels: {{app: adopt}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {image}\n"
    ));
    let p = k.wait_json(&["pod", "orphan"], |p| {
        p["metadata"]["ownerReferences"].is_array()
    });
    let o = &p["metadata"]["ownerReferences"][0];
    assert_eq!(
        (o["kind"].as_str(), o["name"].as_str(), &o["controller"]),
        (Some("ReplicaSet"), Some("adopt"), &Value::Bool(true))
    );
    // The ReplicaSet has counted it: one replica, and no second pod.
    k.wait_json(&["rs", "adopt"], |rs| {
        num(&rs["status"]["replicas"]) == 1 && num(&rs["status"]["observedGeneration"]) == 1
    });
    let pods = k.json(&["pods"]);
    assert_eq!(pods["items"].as_array().unwrap().len(), 1, "{pods}");

    k.ok(&["label", "pod", "orphan", "app=released", "--overwrite"]);
    let p = k.wait_json(&["pod", "orphan"], |p| {
        p["metadata"]
            .get("ownerReferences")
            .is_none_or(|o| o.as_array().is_some_and(|a| a.is_empty()))
    });
    assert_eq!(p["metadata"]["labels"]["app"], "released");
    let pods = k.wait_json(&["pods", "-l", "app=adopt"], |l| {
        l["items"].as_array().unwrap().len() == 1
    });
    let name = pods["items"][0]["metadata"]["name"].as_str().unwrap();
    assert!(is_suffix(name.strip_prefix("adopt-").unwrap()), "{name}");
    k.wait_event("adopt", &format!("SuccessfulCreate|Created pod: {name}"));
}

/// Case 15: Recreate removes every old pod before it creates a new one.
fn recreate(k: &Ns, image: &str) {
    let manifest = |generation: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: rec\nspec:\n  replicas: 3\n  strategy: {{type: Recreate}}\n  selector:\n    matchLabels: {{app: rec}}\n  template:\n    metadata:\n      labels: {{app: rec}}\n    spec:\n      terminationGracePeriodSeconds: 2\n      containers:\n      - name: main\n        image: {image}\n        env: [{{name: GEN, value: \"{generation}\"}}]\n"
        )
    };
    k.apply(&manifest("1"));
    k.rollout_ok("rec");
    let h1 = hash_of(&k.replicasets("rec")[0]);
    let stop = AtomicBool::new(false);
    let mixed = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let pods = k.json(&["pods", "-l", "app=rec"]);
                let hashes: std::collections::BTreeSet<String> = pods["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        p["metadata"]["labels"]["pod-template-hash"]
                            .as_str()
                            .unwrap_or("")
                            .to_string()
                    })
                    .collect();
                if hashes.len() > 1 {
                    mixed.store(true, Ordering::SeqCst);
                }
            }
        });
        k.apply(&manifest("2"));
        k.rollout_ok("rec");
        stop.store(true, Ordering::SeqCst);
    });
    assert!(
        !mixed.load(Ordering::SeqCst),
        "old and new pods existed at the same time"
    );
    let rss = k.replicasets("rec");
    let h2 = hash_of(&rss[1]);
    assert_ne!(h1, h2);
    let evs = k.wait_event(
        "rec",
        &format!("ScalingReplicaSet|Scaled up replica set rec-{h2} from 0 to 3"),
    );
    let down = evs
        .iter()
        .position(|e| e == &format!("ScalingReplicaSet|Scaled down replica set rec-{h1} from 3 to 0"));
    let up = evs
        .iter()
        .position(|e| e == &format!("ScalingReplicaSet|Scaled up replica set rec-{h2} from 0 to 3"));
    assert!(down.is_some() && down < up, "{evs:#?}");
}

/// Case 14: revisionHistoryLimit keeps one old ReplicaSet.
fn revision_history_limit(k: &Ns, image: &str) {
    let img = format!("--image={image}");
    k.ok(&["create", "deployment", "hist", &img]);
    k.ok(&[
        "patch",
        "deployment",
        "hist",
        "-p",
        r#"{"spec":{"revisionHistoryLimit":1}}"#,
    ]);
    k.rollout_ok("hist");
    for i in 1..=3 {
        let env = format!("GEN={i}");
        k.ok(&["set", "env", "deployment/hist", &env]);
        k.rollout_ok("hist");
    }
    eventually(WAIT, "two ReplicaSets left", || {
        (k.replicasets("hist").len() == 2).then_some(())
    });
    let rss = k.replicasets("hist");
    assert_eq!(rss.iter().map(revision).collect::<Vec<_>>(), [3, 4]);
}
