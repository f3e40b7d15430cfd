//! Step 7 with the real binary, kubectl and Docker: ReplicationControllers and their controller,
//! PodDisruptionBudgets with the disruption controller, `pods/eviction` honouring them, ResourceQuotas
//! (admission and controller) and `kubectl drain`. One cluster for the whole file; the cases run side by
//! side in their own namespaces, then the drain (it cordons the node) alone.

mod common;

use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
/// Built by the node agent at start; its container runs until stopped and is Ready at once.
const IMAGE: &str = "kubeling/pause:3.10-1";

/// kubectl in one namespace.
struct Ns<'a> {
    c: &'a Cluster,
    ns: &'static str,
}

impl Ns<'_> {
    fn new<'a>(c: &'a Cluster, ns: &'static str) -> Ns<'a> {
        c.ok(&["create", "namespace", ns]);
        Ns { c, ns }
    }

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

    fn apply(&self, yaml: &str) -> String {
        self.c.ok_stdin(&self.args(&["apply", "-f", "-"]), yaml)
    }

    fn apply_fails(&self, yaml: &str) -> String {
        let out = self
            .c
            .kubectl_stdin(&self.args(&["apply", "-f", "-"]), Some(yaml));
        assert!(!out.status.success(), "apply should have failed");
        String::from_utf8_lossy(&out.stderr).to_string()
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

    /// POST `pods/NAME/eviction` with a JSON Eviction (`delete_options` as its deleteOptions).
    fn evict(&self, pod: &str, delete_options: Value) -> (u16, Value) {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": pod, "namespace": self.ns}, "deleteOptions": delete_options});
        let path = format!("/api/v1/namespaces/{}/pods/{pod}/eviction", self.ns);
        let token = self.c.token();
        self.c.curl(
            "POST",
            &path,
            Some(&token),
            "application/json",
            Some(body.to_string().as_bytes()),
        )
    }

    fn pod_names(&self, selector: &str) -> Vec<String> {
        let pods = self.json(&["pods", "-l", selector]);
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }
}

/// `kubectl get pdb NAME -w -o json` in the background: every version of the budget it shows.
struct BudgetWatch {
    child: std::process::Child,
    seen: std::sync::mpsc::Receiver<Value>,
}

impl BudgetWatch {
    fn start(k: &Ns, name: &str) -> BudgetWatch {
        let mut child = std::process::Command::new(common::KUBECTL)
            .args(["--kubeconfig"])
            .arg(&k.c.kubeconfig)
            .args(["-n", k.ns, "get", "pdb", name, "-w", "-o", "json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("kubectl");
        let stdout = child.stdout.take().unwrap();
        let (tx, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Objects follow one another as pretty-printed JSON documents.
            let stream = serde_json::Deserializer::from_reader(stdout).into_iter::<Value>();
            for v in stream.flatten() {
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let w = BudgetWatch { child, seen };
        // The first document is the budget as it is: the watch is running.
        w.seen.recv_timeout(WAIT).expect("the watch shows the budget");
        w
    }

    fn until(mut self, cond: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let v = self
                .seen
                .recv_timeout(left)
                .expect("the budget reaches the awaited state");
            if cond(&v) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return v;
            }
        }
    }
}

impl Drop for BudgetWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  selector:\n    \
         matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      \
         terminationGracePeriodSeconds: 0\n      containers:\n      - name: c\n        image: {IMAGE}\n"
    )
}

fn ready_replicas(v: &Value) -> i64 {
    v["status"]["readyReplicas"].as_i64().unwrap_or(0)
}

#[test]
fn replication_controllers_budgets_evictions_quotas_and_drain() {
    let c = Cluster::up();
    std::thread::scope(|s| {
        s.spawn(|| replication_controller_scale_and_pods(&Ns::new(&c, "rc-e2e")));
        s.spawn(|| disruption_budget_status(&Ns::new(&c, "pdb-e2e")));
        s.spawn(|| eviction_refused_then_allowed(&Ns::new(&c, "evict-e2e")));
        s.spawn(|| quota_refuses_past_its_limit(&Ns::new(&c, "quota-e2e")));
        s.spawn(|| limit_range_defaults_and_refuses(&Ns::new(&c, "limits-e2e")));
    });
    drain_honours_the_budget(&Ns::new(&c, "drain-e2e"));
}

fn replication_controller_scale_and_pods(k: &Ns) {
    k.apply(&format!(
        "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  template:\n    \
         metadata:\n      labels: {{app: web}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      \
         - name: c\n        image: {IMAGE}\n"
    ));
    let rc = k.wait_json(&["rc", "web"], |v| ready_replicas(v) == 2);
    assert_eq!(
        rc["spec"]["selector"],
        json!({"app": "web"}),
        "defaulted from the template"
    );
    assert_eq!(rc["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(rc["status"]["observedGeneration"], json!(1));
    let pods = k.json(&["pods", "-l", "app=web"]);
    for p in pods["items"].as_array().unwrap() {
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["name"].as_str()),
            (Some("ReplicationController"), Some("web"))
        );
        assert!(p["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    }
    let table = k.ok(&["get", "rc", "web", "-o", "wide"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((row[1], row[2], row[3], row[7]), ("2", "2", "2", "app=web"));

    assert!(k.ok(&["scale", "rc", "web", "--replicas=3"]).contains("scaled"));
    k.wait_json(&["rc", "web"], |v| {
        ready_replicas(v) == 3 && v["status"]["replicas"] == 3
    });
    assert_eq!(k.pod_names("app=web").len(), 3);
    let scale: Value = serde_json::from_str(&k.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/rc-e2e/replicationcontrollers/web/scale",
    ]))
    .unwrap();
    assert_eq!(
        (&scale["spec"]["replicas"], &scale["status"]["selector"]),
        (&json!(3), &json!("app=web"))
    );
    k.ok(&["scale", "rc", "web", "--replicas=1"]);
    eventually(WAIT, "one pod left", || {
        (k.pod_names("app=web").len() == 1).then_some(())
    });
    k.wait_json(&["rc", "web"], |v| v["status"]["replicas"] == 1);

    // Validation: the selector must match the template, as upstream says it.
    let err = k.apply_fails(&format!(
        "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: bad\nspec:\n  selector: {{app: other}}\n  \
         template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: c\n        image: {IMAGE}\n"
    ));
    assert!(
        err.contains(
            "ReplicationController \"bad\" is invalid: spec.template.metadata.labels: Invalid value: \
             map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        ),
        "{err}"
    );
}

fn disruption_budget_status(k: &Ns) {
    k.apply(&deployment("web", 3));
    k.apply(&deployment("db", 3));
    k.ok(&["create", "pdb", "web", "--selector=app=web", "--min-available=2"]);
    k.ok(&[
        "create",
        "pdb",
        "db",
        "--selector=app=db",
        "--max-unavailable=50%",
    ]);
    let web = k.wait_json(&["pdb", "web"], |v| v["status"]["currentHealthy"] == 3);
    let st = &web["status"];
    assert_eq!(
        (
            &st["desiredHealthy"],
            &st["expectedPods"],
            &st["disruptionsAllowed"],
            &st["observedGeneration"]
        ),
        (&json!(2), &json!(3), &json!(1), &json!(1))
    );
    let cond = &st["conditions"][0];
    assert_eq!(
        (&cond["type"], &cond["status"], &cond["reason"]),
        (
            &json!("DisruptionAllowed"),
            &json!("True"),
            &json!("SufficientPods")
        )
    );
    // 50% of the Deployment's 3 replicas may be unavailable, rounded up: 2; so 1 must stay healthy.
    let db = k.wait_json(&["pdb", "db"], |v| v["status"]["currentHealthy"] == 3);
    assert_eq!(
        (
            &db["status"]["desiredHealthy"],
            &db["status"]["expectedPods"],
            &db["status"]["disruptionsAllowed"]
        ),
        (&json!(1), &json!(3), &json!(2))
    );
    let table = k.ok(&["get", "pdb"]);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        lines[0].join(" "),
        "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE"
    );
    assert_eq!(lines[1][..4], ["db", "N/A", "50%", "2"]);
    assert_eq!(lines[2][..4], ["web", "2", "N/A", "1"]);

    // A new spec is observed: generation 2, and a minimum of 3 allows nothing.
    k.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":3}}"#,
    ]);
    let web = k.wait_json(&["pdb", "web"], |v| v["status"]["observedGeneration"] == 2);
    assert_eq!(web["status"]["disruptionsAllowed"], json!(0));
    assert_eq!(
        web["status"]["conditions"][0]["reason"],
        json!("InsufficientPods")
    );

    // Both bounds at once are refused.
    let err = k.apply_fails(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: both\nspec:\n  minAvailable: 1\n  \
         maxUnavailable: 1\n  selector:\n    matchLabels: {app: web}\n",
    );
    assert!(
        err.contains("minAvailable and maxUnavailable cannot be both set"),
        "{err}"
    );
}

fn eviction_refused_then_allowed(k: &Ns) {
    k.apply(&deployment("web", 2));
    k.ok(&["create", "pdb", "web", "--selector=app=web", "--min-available=2"]);
    k.wait_json(&["pdb", "web"], |v| v["status"]["currentHealthy"] == 2);
    let pods = k.pod_names("app=web");
    let (code, body) = k.evict(&pods[0], json!({}));
    assert_eq!(code, 429, "{body}");
    assert_eq!(body["reason"], json!("TooManyRequests"));
    assert_eq!(
        body["message"],
        json!("Cannot evict pod as it would violate the pod's disruption budget.")
    );
    assert_eq!(
        body["details"]["causes"][0],
        json!({"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"})
    );

    // A Pending pod (nothing can schedule it) goes whatever the budget says.
    k.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: stuck\n  labels: {{app: web}}\nspec:\n  nodeSelector: {{nowhere: \"true\"}}\n  \
         containers:\n  - name: c\n    image: {IMAGE}\n"
    ));
    let (code, body) = k.evict("stuck", json!({"gracePeriodSeconds": 0}));
    assert_eq!((code, &body["status"]), (201, &json!("Success")), "{body}");
    eventually(WAIT, "the pending pod gone", || {
        k.fails(&["get", "pod", "stuck"])
            .contains("NotFound")
            .then_some(())
    });

    // Allowed once the budget leaves room: spent and recorded in the budget's status.
    k.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":1}}"#,
    ]);
    k.wait_json(&["pdb", "web"], |v| v["status"]["disruptionsAllowed"] == 1);
    // The budget's status as the eviction writes it is seen by a watch (the controller soon drops the
    // entry once the pod is gone).
    let watch = BudgetWatch::start(k, "web");
    let (code, body) = k.evict(&pods[0], json!({}));
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    let spent = watch.until(|b| b["status"]["disruptedPods"].get(&pods[0]).is_some());
    assert_eq!(spent["status"]["disruptionsAllowed"], json!(0), "{spent}");
    assert_eq!(
        spent["status"]["conditions"][0]["reason"],
        json!("InsufficientPods")
    );
    eventually(WAIT, "the evicted pod gone", || {
        (!k.pod_names("app=web").contains(&pods[0])).then_some(())
    });
    // The Deployment replaces it and the budget recovers.
    k.wait_json(&["pdb", "web"], |v| {
        v["status"]["currentHealthy"] == 2 && v["status"]["disruptionsAllowed"] == 1
    });

    let (code, body) = k.evict("missing", json!({}));
    assert_eq!((code, &body["reason"]), (404, &json!("NotFound")), "{body}");
}

fn quota_refuses_past_its_limit(k: &Ns) {
    k.ok(&["create", "quota", "q", "--hard=pods=2,count/configmaps=3"]);
    // The controller fills in the status (the default `kube-root-ca.crt` ConfigMap counts).
    let q = k.wait_json(&["quota", "q"], |v| v["status"]["used"]["pods"] == "0");
    assert_eq!(q["status"]["hard"], json!({"pods": "2", "count/configmaps": "3"}));
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 0\n  \
             containers:\n  - name: c\n    image: {IMAGE}\n"
        )
    };
    k.apply(&pod("a"));
    k.apply(&pod("b"));
    let err = k.apply_fails(&pod("c"));
    assert!(
        err.contains(
            "pods \"c\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        ),
        "{err}"
    );
    let table = k.ok(&["get", "quota", "q"]);
    assert!(table.contains("pods: 2/2"), "{table}");
    k.ok(&["delete", "pod", "a", "--wait=true"]);
    k.wait_json(&["quota", "q"], |v| v["status"]["used"]["pods"] == "1");
    k.apply(&pod("c"));
    // A controller that cannot create its pods says why (upstream's "exceeded quota" RC conformance case).
    k.apply(&format!(
        "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: over\nspec:\n  replicas: 1\n  template:\n    \
         metadata:\n      labels: {{app: over}}\n    spec:\n      containers:\n      - name: c\n        image: {IMAGE}\n"
    ));
    let rc = k.wait_json(&["rc", "over"], |v| {
        v["status"]["conditions"][0]["type"] == "ReplicaFailure"
    });
    let cond = &rc["status"]["conditions"][0];
    assert_eq!(
        (&cond["status"], &cond["reason"]),
        (&json!("True"), &json!("FailedCreate"))
    );
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
        "{cond}"
    );
}

fn limit_range_defaults_and_refuses(k: &Ns) {
    k.apply(
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr\nspec:\n  limits:\n  - type: Container\n    \
         default: {cpu: 200m}\n    defaultRequest: {cpu: 100m}\n    max: {cpu: \"1\"}\n",
    );
    let lr = k.json(&["limits", "lr"]);
    assert_eq!(lr["spec"]["limits"][0]["max"], json!({"cpu": "1"}));
    let pod = |name: &str, resources: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 0\n  \
             containers:\n  - name: c\n    image: {IMAGE}\n    resources: {resources}\n"
        )
    };
    k.apply(&pod("plain", "{}"));
    let p = k.json(&["pod", "plain"]);
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "200m"}, "requests": {"cpu": "100m"}})
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        json!("LimitRanger plugin set: cpu request for container c; cpu limit for container c")
    );
    let err = k.apply_fails(&pod("big", "{limits: {cpu: \"2\"}}"));
    assert!(
        err.contains("pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        "{err}"
    );
}

fn drain_honours_the_budget(k: &Ns) {
    let node =
        k.c.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    k.apply(&deployment("drained", 2));
    k.ok(&[
        "create",
        "pdb",
        "drained",
        "--selector=app=drained",
        "--max-unavailable=1",
    ]);
    k.wait_json(&["pdb", "drained"], |v| v["status"]["disruptionsAllowed"] == 1);
    // One node: the first evicted pod's replacement cannot be scheduled, so the second eviction waits on
    // the budget until the drain gives up.
    let out = k.c.kubectl(&[
        "drain",
        &node,
        "--pod-selector=app=drained",
        "--ignore-daemonsets",
        "--timeout=15s",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{text}"
    );
    assert!(text.contains("evicted"), "one pod is evicted: {text}");
    // With room in the budget the drain completes.
    k.ok(&[
        "patch",
        "pdb",
        "drained",
        "--type=merge",
        "-p",
        r#"{"spec":{"maxUnavailable":"100%"}}"#,
    ]);
    let out = k.c.ok(&[
        "drain",
        &node,
        "--pod-selector=app=drained",
        "--ignore-daemonsets",
        "--timeout=60s",
    ]);
    assert!(out.contains(&format!("node/{node} drained")), "{out}");
    k.c.ok(&["uncordon", &node]);
}
