//! The garbage collector, the namespace controller and the Endpoints/EndpointSlice controllers with the real
//! binary, kubectl and Docker (reference §15 cases 30–36): cascading deletion in the background, orphaning
//! and in the foreground over owner chains made by hand, a dangling owner, a namespace held by a pod's
//! finalizer, and a Service's endpoints following its pods' readiness and deletion. One cluster, one
//! namespace per step.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(90);

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn uid(c: &Cluster, ns: &str, what: &str) -> String {
    c.ok(&["-n", ns, "get", what, "-o", "jsonpath={.metadata.uid}"])
}

fn gone(c: &Cluster, ns: &str, what: &str) -> bool {
    let out = c.kubectl(&["-n", ns, "get", what, "-o", "name"]);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
}

/// A namespace whose `default` ServiceAccount exists (pods need it).
fn new_namespace(c: &Cluster, ns: &str) {
    c.ok(&["create", "namespace", ns]);
    eventually(WAIT, "the default ServiceAccount", || {
        c.kubectl(&["-n", ns, "get", "serviceaccount", "default"])
            .status
            .success()
            .then_some(())
    });
}

fn owner_ref(kind: &str, name: &str, uid: &str, block: bool) -> String {
    format!(
        "  ownerReferences:\n  - {{apiVersion: v1, kind: {kind}, name: {name}, uid: \"{uid}\", blockOwnerDeletion: {block}}}\n"
    )
}

fn configmap(ns: &str, name: &str, owners: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{owners}data: {{k: v}}\n"
    )
}

/// A testbox pod; `meta` and `spec` are extra indented lines.
fn pod(ns: &str, name: &str, meta: &str, spec: &str, containers: &str) -> String {
    let image = testbox_image::ensure_testbox_image();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n{meta}spec:\n{spec}  containers:\n{}",
        containers.replace("IMAGE", &image)
    )
}

fn sleeper(ns: &str, name: &str, meta: &str) -> String {
    pod(
        ns,
        name,
        meta,
        "  terminationGracePeriodSeconds: 2\n",
        "  - name: main\n    image: IMAGE\n    args: [sleep]\n",
    )
}

#[test]
fn garbage_collector_namespace_and_endpoints_controllers() {
    let c = Cluster::up();
    background_cascade(&c);
    orphan_cascade(&c);
    foreground_cascade(&c);
    dangling_owner(&c);
    namespace_waits_for_its_content(&c);
    service_endpoints_follow_pods(&c);
    deployment_cascades(&c);
}

fn names(c: &Cluster, ns: &str, what: &str, selector: &str) -> Vec<String> {
    let out = c.ok(&["-n", ns, "get", what, "-l", selector, "-o", "name"]);
    out.lines().map(str::to_string).collect()
}

/// Cases 30-32 with Deployments: a plain delete takes the ReplicaSet and pods; `--cascade=orphan` leaves the
/// ReplicaSet without owner references and its pods running; `--cascade=foreground` keeps the owner with the
/// `foregroundDeletion` finalizer until its pods are gone.
fn deployment_cascades(c: &Cluster) {
    let ns = "gc-deploy";
    new_namespace(c, ns);
    let image = format!("--image={}", testbox_image::ensure_testbox_image());
    // `keep`'s pods take a second to stop, so the foreground-held ReplicaSet is seen before it goes.
    for (name, extra) in [("web", None), ("keep", Some("--sigterm-delay=1"))] {
        let mut args = vec![
            "-n",
            ns,
            "create",
            "deployment",
            name,
            &image,
            "--replicas=2",
            "--",
            "/testbox",
            "sleep",
        ];
        args.extend(extra);
        c.ok(&args);
    }
    for name in ["web", "keep"] {
        c.ok(&[
            "-n",
            ns,
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=120s",
        ]);
    }

    let out = c.ok(&["-n", ns, "delete", "deployment", "web"]);
    assert!(out.contains("deployment.apps \"web\" deleted"), "{out}");
    // Polled with a deadline; on a timeout the objects left and the namespace's events say where it stuck
    // (this wait timed out once in a whole ./test.sh run and never alone).
    let deadline = std::time::Instant::now() + WAIT;
    while !(names(c, ns, "rs", "app=web").is_empty() && names(c, ns, "pods", "app=web").is_empty()) {
        if std::time::Instant::now() > deadline {
            let left = c.ok(&[
                "-n",
                ns,
                "get",
                "rs,pods",
                "-l",
                "app=web",
                "-o",
                "custom-columns=KIND:.kind,NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,\
                 OWNERS:.metadata.ownerReferences[*].uid,FINALIZERS:.metadata.finalizers,PHASE:.status.phase",
            ]);
            let events = c.ok(&["-n", ns, "get", "events", "--sort-by=.lastTimestamp"]);
            panic!("web's ReplicaSet and pods are not gone after {WAIT:?}:\n{left}\n{events}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    let pods_before = names(c, ns, "pods", "app=keep");
    assert_eq!(pods_before.len(), 2);
    c.ok(&["-n", ns, "delete", "deployment", "keep", "--cascade=orphan"]);
    let rs = eventually(WAIT, "the orphaned ReplicaSet without owner references", || {
        let out = c.ok(&["-n", ns, "get", "rs", "-l", "app=keep", "-o", "json"]);
        let list = json_of(&out);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 1
            && items[0]["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(|r| r.is_empty()))
        .then(|| items[0]["metadata"]["name"].as_str().unwrap_or("").to_string())
    });
    assert!(gone(c, ns, "deployment/keep"));
    assert_eq!(
        names(c, ns, "pods", "app=keep"),
        pods_before,
        "the pods are left alone"
    );

    c.ok(&[
        "-n",
        ns,
        "delete",
        "rs",
        &rs,
        "--cascade=foreground",
        "--wait=false",
    ]);
    let held = json_of(&c.ok(&["-n", ns, "get", "rs", &rs, "-o", "json"]));
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert!(
        held["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion")),
        "{held}"
    );
    eventually(WAIT, "the ReplicaSet to go after its pods", || {
        // The ReplicaSet first: pods only ever go, so pods seen after it is gone were there when it went.
        let rs_gone = gone(c, ns, &format!("rs/{rs}"));
        let pods = names(c, ns, "pods", "app=keep");
        assert!(
            !rs_gone || pods.is_empty(),
            "the ReplicaSet went while its pods remained: {pods:?}"
        );
        rs_gone.then_some(())
    });
}

/// Case 30 by hand: ConfigMap → ConfigMap → Pod; deleting the top takes the chain.
fn background_cascade(c: &Cluster) {
    let ns = "gc-bg";
    new_namespace(c, ns);
    c.ok_stdin(&["apply", "-f", "-"], &configmap(ns, "top", ""));
    let top = uid(c, ns, "configmap/top");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &configmap(ns, "middle", &owner_ref("ConfigMap", "top", &top, true)),
    );
    let middle = uid(c, ns, "configmap/middle");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &sleeper(ns, "bottom", &owner_ref("ConfigMap", "middle", &middle, true)),
    );
    assert!(
        c.ok(&["-n", ns, "delete", "configmap", "top"])
            .contains("configmap \"top\" deleted")
    );
    eventually(WAIT, "the chain below a deleted owner is collected", || {
        (gone(c, ns, "configmap/middle") && gone(c, ns, "pod/bottom")).then_some(())
    });
}

/// Case 31 by hand: `--cascade=orphan` leaves the dependent without the owner's reference.
fn orphan_cascade(c: &Cluster) {
    let ns = "gc-orphan";
    new_namespace(c, ns);
    c.ok_stdin(&["apply", "-f", "-"], &configmap(ns, "keep", ""));
    let keep = uid(c, ns, "configmap/keep");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &configmap(ns, "kept", &owner_ref("ConfigMap", "keep", &keep, true)),
    );
    assert!(
        c.ok(&["-n", ns, "delete", "configmap", "keep", "--cascade=orphan"])
            .contains("configmap \"keep\" deleted")
    );
    assert!(gone(c, ns, "configmap/keep"));
    let kept = json_of(&c.ok(&["-n", ns, "get", "configmap", "kept", "-o", "json"]));
    assert!(
        kept["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{kept}"
    );
}

/// Case 32 by hand: `--cascade=foreground` keeps the owner with `foregroundDeletion` until its blocking
/// dependent is gone.
fn foreground_cascade(c: &Cluster) {
    let ns = "gc-fg";
    new_namespace(c, ns);
    c.ok_stdin(&["apply", "-f", "-"], &configmap(ns, "fg", ""));
    let fg = uid(c, ns, "configmap/fg");
    // The dependent takes a while to go (its grace period, SIGTERM ignored), so the owner's wait shows.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            ns,
            "fg-pod",
            &owner_ref("ConfigMap", "fg", &fg, true),
            "  terminationGracePeriodSeconds: 5\n",
            "  - name: main\n    image: IMAGE\n    args: [sleep, --ignore-sigterm]\n",
        ),
    );
    c.wait_json(&["-n", ns, "pod", "fg-pod"], WAIT, |p| {
        p["status"]["phase"] == "Running"
    });
    c.ok(&[
        "-n",
        ns,
        "delete",
        "configmap",
        "fg",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let owner = json_of(&c.ok(&["-n", ns, "get", "configmap", "fg", "-o", "json"]));
    assert_eq!(
        owner["metadata"]["finalizers"],
        serde_json::json!(["foregroundDeletion"]),
        "{owner}"
    );
    assert!(owner["metadata"]["deletionTimestamp"].is_string(), "{owner}");
    eventually(WAIT, "the dependent is deleted first", || {
        let p = c.kubectl(&["-n", ns, "get", "pod", "fg-pod", "-o", "json"]);
        (!p.status.success()
            || json_of(&String::from_utf8_lossy(&p.stdout))["metadata"]["deletionTimestamp"].is_string())
        .then_some(())
    });
    eventually(WAIT, "the owner goes once its dependent is gone", || {
        gone(c, ns, "configmap/fg").then_some(())
    });
    assert!(
        gone(c, ns, "pod/fg-pod"),
        "the owner outlived its blocking dependent"
    );
}

/// Case 33: a ConfigMap whose owner never existed is deleted.
fn dangling_owner(c: &Cluster) {
    let ns = "gc-dangling";
    new_namespace(c, ns);
    c.ok_stdin(
        &["apply", "-f", "-"],
        &configmap(
            ns,
            "orphaned",
            &owner_ref(
                "ConfigMap",
                "ghost",
                "00000000-0000-0000-0000-000000000001",
                false,
            ),
        ),
    );
    eventually(
        Duration::from_secs(30),
        "a dependent of a ghost is deleted",
        || gone(c, ns, "configmap/orphaned").then_some(()),
    );
}

fn condition<'a>(ns: &'a Value, type_: &str) -> Option<&'a Value> {
    ns["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// A deleted namespace is Terminating with upstream's conditions while a pod's finalizer holds it; then it
/// goes.
fn namespace_waits_for_its_content(c: &Cluster) {
    let ns = "gc-ns";
    new_namespace(c, ns);
    c.ok_stdin(&["apply", "-f", "-"], &configmap(ns, "data", ""));
    c.ok_stdin(
        &["apply", "-f", "-"],
        &sleeper(ns, "held", "  finalizers: [example.com/hold]\n"),
    );
    c.wait_json(&["-n", ns, "pod", "held"], WAIT, |p| {
        p["status"]["phase"] == "Running"
    });
    c.ok(&["delete", "namespace", ns, "--wait=false"]);
    let seen = c.wait_json(&["namespace", ns], WAIT, |n| {
        n["status"]["phase"] == "Terminating"
            && condition(n, "NamespaceFinalizersRemaining").is_some_and(|c| c["status"] == "True")
    });
    let remaining = condition(&seen, "NamespaceContentRemaining").expect("content condition");
    assert_eq!(remaining["status"], "True", "{seen}");
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(
        remaining["message"], "Some resources are remaining: pods. has 1 resource instances",
        "{seen}"
    );
    let finalizers = condition(&seen, "NamespaceFinalizersRemaining").unwrap();
    assert_eq!(finalizers["reason"], "SomeFinalizersRemain");
    assert_eq!(
        finalizers["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    let discovered = condition(&seen, "NamespaceDeletionDiscoveryFailure").unwrap();
    assert_eq!(
        (discovered["status"].as_str(), discovered["reason"].as_str()),
        (Some("False"), Some("ResourcesDiscovered"))
    );
    assert_eq!(seen["spec"]["finalizers"], serde_json::json!(["kubernetes"]));
    assert!(gone(c, ns, "configmap/data"), "the rest is deleted meanwhile");
    c.ok(&[
        "-n",
        ns,
        "patch",
        "pod",
        "held",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
    ]);
    eventually(WAIT, "the emptied namespace is removed", || {
        let out = c.kubectl(&["get", "namespace", ns]);
        (!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")).then_some(())
    });
}

fn web_pod(ns: &str, name: &str, grace: u32) -> String {
    pod(
        ns,
        name,
        "  labels: {app: ep}\n",
        &format!("  terminationGracePeriodSeconds: {grace}\n"),
        "  - name: main
    image: IMAGE
    args: [serve, --port, \"8080\", --ignore-sigterm]
    ports:
    - {name: web, containerPort: 8080}
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
",
    )
}

fn pod_ip(c: &Cluster, ns: &str, name: &str) -> String {
    c.wait_json(&["-n", ns, "pod", name], WAIT, |p| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    })["status"]["podIP"]
        .as_str()
        .unwrap()
        .to_string()
}

fn ips(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["ip"].as_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

fn slice_endpoints(c: &Cluster, ns: &str) -> Vec<Value> {
    let list = json_of(&c.ok(&[
        "-n",
        ns,
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=ep",
        "-o",
        "json",
    ]));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Cases 34–36 with pods made by hand: a Service's Endpoints and EndpointSlice list the ready pods, follow
/// readiness and deletion, and go with the Service.
fn service_endpoints_follow_pods(c: &Cluster) {
    let ns = "gc-ep";
    new_namespace(c, ns);
    c.ok_stdin(&["apply", "-f", "-"], &web_pod(ns, "ep-a", 1));
    c.ok_stdin(&["apply", "-f", "-"], &web_pod(ns, "ep-b", 30));
    let a = pod_ip(c, ns, "ep-a");
    let b = pod_ip(c, ns, "ep-b");
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert!(
        c.ok(&[
            "-n",
            ns,
            "expose",
            "pod",
            "ep-a",
            "--name=ep",
            "--port=80",
            "--target-port=web",
            "--selector=app=ep",
        ])
        .contains("service/ep exposed")
    );
    let ep = c.wait_json(&["-n", ns, "endpoints", "ep"], WAIT, |e| {
        ips(&e["subsets"][0]["addresses"]) == both
    });
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], 8080, "{ep}");
    assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(ep["subsets"][0]["addresses"][0]["targetRef"]["kind"], "Pod");
    let wide = c.ok(&["-n", ns, "get", "endpoints", "ep", "--no-headers"]);
    assert!(
        wide.contains(&format!("{a}:8080")) && wide.contains(&format!("{b}:8080")),
        "{wide}"
    );
    let slices = c.wait_json(
        &["-n", ns, "endpointslices", "-l", "kubernetes.io/service-name=ep"],
        WAIT,
        |l| {
            l["items"].as_array().is_some_and(|i| i.len() == 1)
                && l["items"][0]["endpoints"]
                    .as_array()
                    .is_some_and(|e| e.len() == 2)
        },
    );
    let s = &slices["items"][0];
    assert_eq!(
        s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(s["addressType"], "IPv4");
    assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Service");
    let name = s["metadata"]["name"].as_str().unwrap();
    assert!(
        name.len() == 8
            && name.starts_with("ep-")
            && name[3..]
                .chars()
                .all(|ch| "bcdfghjklmnpqrstvwxz2456789".contains(ch)),
        "{name}"
    );
    assert_eq!(s["ports"][0]["port"], 8080);
    for e in s["endpoints"].as_array().unwrap() {
        assert_eq!(
            e["conditions"],
            serde_json::json!({"ready": true, "serving": true, "terminating": false}),
            "{e}"
        );
        assert_eq!(e["targetRef"]["kind"], "Pod");
    }

    // ep-a stops being ready: it moves to notReadyAddresses and its endpoint to ready:false.
    c.ok(&["-n", ns, "exec", "ep-a", "--", "touch", "/tmp/unready"]);
    c.wait_json(&["-n", ns, "endpoints", "ep"], WAIT, |e| {
        ips(&e["subsets"][0]["notReadyAddresses"]) == vec![a.clone()]
            && ips(&e["subsets"][0]["addresses"]) == vec![b.clone()]
    });
    eventually(WAIT, "the slice marks ep-a not ready", || {
        slice_endpoints(c, ns)
            .iter()
            .find(|e| e["addresses"][0] == a.as_str())
            .filter(|e| e["conditions"]["ready"] == false && e["conditions"]["serving"] == false)
            .map(|_| ())
    });

    // ep-b terminates (30 s grace, SIGTERM ignored): the slice keeps it as terminating, Endpoints drops it.
    c.ok(&["-n", ns, "delete", "pod", "ep-b", "--wait=false"]);
    eventually(WAIT, "the slice marks ep-b terminating", || {
        slice_endpoints(c, ns)
            .iter()
            .find(|e| e["addresses"][0] == b.as_str())
            .filter(|e| e["conditions"]["terminating"] == true && e["conditions"]["ready"] == false)
            .map(|_| ())
    });
    c.wait_json(&["-n", ns, "endpoints", "ep"], WAIT, |e| {
        ips(&e["subsets"][0]["addresses"]).is_empty()
            && ips(&e["subsets"][0]["notReadyAddresses"]) == vec![a.clone()]
    });
    c.ok(&["-n", ns, "delete", "pod", "ep-b", "--grace-period=0", "--force"]);
    eventually(WAIT, "a deleted pod leaves the slice", || {
        let eps = slice_endpoints(c, ns);
        (eps.len() == 1 && eps[0]["addresses"][0] == a.as_str()).then_some(())
    });

    // The Service goes: its Endpoints with it, its slices through their ownerReference.
    c.ok(&["-n", ns, "delete", "service", "ep"]);
    eventually(WAIT, "Endpoints and EndpointSlices go with the Service", || {
        let slices = c.ok(&[
            "-n",
            ns,
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=ep",
            "-o",
            "name",
        ]);
        (gone(c, ns, "endpoints/ep") && slices.trim().is_empty()).then_some(())
    });
}
