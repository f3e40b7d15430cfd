//! Step 8, Services with the real binary, kubectl and Docker: ClusterIPs reached from pods through the
//! service gateway (TCP round robin over ready endpoints, client IP affinity, UDP), NodePort and
//! LoadBalancer on the host's 127.0.0.1, the `kubernetes` Service to the API server with the pod's own
//! credentials, Service and StatefulSet names resolved in pods through the `kube-dns` Service, one Docker
//! network per cluster, and routing kept across a kubeling restart.
//!
//! The tests share one cluster (each in its own namespace) while they run at the same time; the restart and
//! two-cluster tests start their own.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use common::{Cluster, eventually};

const WAIT: Duration = Duration::from_secs(90);

/// The cluster the tests running now share; made by the first, dropped with the last.
fn shared() -> Arc<Cluster> {
    static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = slot.upgrade() {
        return c;
    }
    let c = Arc::new(Cluster::up());
    *slot = Arc::downgrade(&c);
    c
}

fn image() -> String {
    testbox_image::ensure_testbox_image()
}

/// A namespace with a `client` pod (testbox sleeping) in it, ready.
fn namespace_with_client(c: &Cluster, ns: &str) {
    c.ok(&["create", "namespace", ns]);
    let client = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: client\n  namespace: {ns}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: main\n    image: {}\n",
        image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &client);
    c.ok(&[
        "wait",
        "-n",
        ns,
        "--for=condition=Ready",
        "pod/client",
        "--timeout=90s",
    ]);
}

/// A Deployment `name` of `replicas` testbox pods running `args` with a readiness probe on /ready (HTTP
/// servers) or none, and a Service of `service_spec` (YAML lines under `spec:`) selecting them.
fn deploy(c: &Cluster, ns: &str, name: &str, replicas: u32, args: &str, probe: bool, service_spec: &str) {
    let probe = if probe {
        "        readinessProbe:\n          httpGet: {path: /ready, port: 8080}\n          periodSeconds: 1\n          failureThreshold: 1\n"
    } else {
        ""
    };
    let manifest = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      - name: main\n        image: {}\n        args: {args}\n{probe}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector: {{app: {name}}}\n{service_spec}",
        image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &manifest);
    eventually(WAIT, &format!("{replicas} ready pods of {name}"), || {
        let out = c.ok(&[
            "get",
            "deploy",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]);
        (out.trim() == replicas.to_string()).then_some(())
    });
}

fn pod_names(c: &Cluster, ns: &str, app: &str) -> BTreeSet<String> {
    c.ok(&[
        "get",
        "pods",
        "-n",
        ns,
        "-l",
        &format!("app={app}"),
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])
    .split_whitespace()
    .map(String::from)
    .collect()
}

fn cluster_ip(c: &Cluster, ns: &str, svc: &str) -> String {
    c.ok(&["get", "svc", svc, "-n", ns, "-o", "jsonpath={.spec.clusterIP}"])
        .trim()
        .to_string()
}

/// One HTTP GET from the client pod; the body (the serving pod's name) or None.
fn get_from_client(c: &Cluster, ns: &str, url: &str) -> Option<String> {
    let out = c.kubectl(&[
        "exec",
        "-n",
        ns,
        "client",
        "--",
        "testbox",
        "get",
        url,
        "--timeout",
        "3",
    ]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn curl_host(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "3", url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A TCP port free on the host's 127.0.0.1 right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn cluster_ip_spreads_requests_over_ready_replicas_and_skips_an_unready_one() {
    let c = shared();
    let ns = "svc-rr";
    namespace_with_client(&c, ns);
    deploy(
        &c,
        ns,
        "web",
        3,
        "[serve]",
        true,
        "  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n",
    );
    let pods = pod_names(&c, ns, "web");
    let url = format!("http://{}:80/", cluster_ip(&c, ns, "web"));
    let mut seen = BTreeSet::new();
    eventually(WAIT, "requests to the ClusterIP reaching every replica", || {
        seen.extend(get_from_client(&c, ns, &url));
        (seen == pods).then_some(())
    });

    // One replica turns unready: its endpoint leaves the slice and it gets no more requests.
    let victim = pods.iter().next().unwrap().clone();
    c.ok(&["exec", "-n", ns, &victim, "--", "touch", "/tmp/unready"]);
    eventually(WAIT, "the unready pod leaving the EndpointSlice", || {
        let slices = c.ok(&[
            "get",
            "endpointslices",
            "-n",
            ns,
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&slices).unwrap();
        let unready = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .any(|e| e["targetRef"]["name"] == victim.as_str() && e["conditions"]["ready"] == false);
        unready.then_some(())
    });
    let mut after = BTreeSet::new();
    for _ in 0..8 {
        after.extend(get_from_client(&c, ns, &url));
    }
    assert!(
        !after.contains(&victim),
        "the unready pod {victim} still got requests: {after:?}"
    );
    assert_eq!(
        after.len(),
        2,
        "the two ready replicas share the requests: {after:?}"
    );
}

#[test]
fn a_new_ready_endpoint_gets_requests_within_a_second() {
    let c = shared();
    let ns = "svc-new";
    namespace_with_client(&c, ns);
    deploy(
        &c,
        ns,
        "grow",
        1,
        "[serve]",
        true,
        "  ports:\n  - port: 80\n    targetPort: 8080\n",
    );
    let first = pod_names(&c, ns, "grow");
    let url = format!("http://{}/", cluster_ip(&c, ns, "grow"));
    eventually(WAIT, "the first replica answering", || {
        get_from_client(&c, ns, &url)
    });
    c.ok(&["scale", "-n", ns, "deploy/grow", "--replicas=2"]);
    // The moment the new pod's endpoint is ready in its EndpointSlice (what the proxy watches).
    let new_pod = eventually(WAIT, "the new replica's endpoint ready", || {
        let slices = c.ok(&[
            "get",
            "endpointslices",
            "-n",
            ns,
            "-l",
            "kubernetes.io/service-name=grow",
            "-o",
            "json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&slices).unwrap();
        v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .find(|e| {
                e["conditions"]["ready"] == true
                    && !first.contains(e["targetRef"]["name"].as_str().unwrap_or(""))
            })
            .map(|e| e["targetRef"]["name"].as_str().unwrap_or("").to_string())
    });
    let ready_at = std::time::Instant::now();
    // Round robin over two endpoints: one of the first two requests lands on the new pod if the proxy knows it.
    let started = eventually(WAIT, "a request reaching the new replica", || {
        let started = ready_at.elapsed();
        (get_from_client(&c, ns, &url).as_deref() == Some(new_pod.as_str())).then_some(started)
    });
    assert!(
        started < Duration::from_secs(1),
        "the first request to reach {new_pod} was sent {started:?} after its endpoint was ready"
    );
}

#[test]
fn a_service_without_ready_endpoints_refuses_connections() {
    let c = shared();
    let ns = "svc-empty";
    namespace_with_client(&c, ns);
    let svc = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: nobody\n  namespace: {ns}\nspec:\n  selector: {{app: nobody}}\n  ports:\n  - port: 80\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &svc);
    let target = format!("{}:80", cluster_ip(&c, ns, "nobody"));
    let out = c.kubectl(&[
        "exec",
        "-n",
        ns,
        "client",
        "--",
        "testbox",
        "connect",
        &target,
        "--timeout",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "connected to a Service without endpoints");
    assert!(stderr.contains("refused"), "{stderr}");
}

#[test]
fn session_affinity_client_ip_sends_one_client_to_one_pod() {
    let c = shared();
    let ns = "svc-affinity";
    namespace_with_client(&c, ns);
    deploy(
        &c,
        ns,
        "sticky",
        3,
        "[serve]",
        true,
        "  sessionAffinity: ClientIP\n  ports:\n  - port: 80\n    targetPort: 8080\n",
    );
    let url = format!("http://{}/", cluster_ip(&c, ns, "sticky"));
    let first = eventually(WAIT, "a first answer through the ClusterIP", || {
        get_from_client(&c, ns, &url)
    });
    for _ in 0..6 {
        assert_eq!(get_from_client(&c, ns, &url).as_deref(), Some(first.as_str()));
    }
}

#[test]
fn udp_through_a_cluster_ip_reaches_an_endpoint_and_answers() {
    let c = shared();
    let ns = "svc-udp";
    namespace_with_client(&c, ns);
    deploy(
        &c,
        ns,
        "echo",
        1,
        "[udp, --port, \"5353\"]",
        false,
        "  ports:\n  - name: dns\n    port: 53\n    targetPort: 5353\n    protocol: UDP\n",
    );
    let pod = pod_names(&c, ns, "echo").into_iter().next().unwrap();
    let target = format!("{}:53", cluster_ip(&c, ns, "echo"));
    let answer = eventually(WAIT, "a UDP answer through the ClusterIP", || {
        let out = c.kubectl(&[
            "exec", "-n", ns, "client", "--", "testbox", "udp-send", &target, "--send", "ping",
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    });
    assert_eq!(answer, format!("{pod} ping"));
}

#[test]
fn node_port_and_load_balancer_answer_on_host_localhost() {
    let c = shared();
    let ns = "svc-host";
    c.ok(&["create", "namespace", ns]);
    deploy(
        &c,
        ns,
        "np",
        1,
        "[serve]",
        true,
        "  type: NodePort\n  ports:\n  - port: 80\n    targetPort: 8080\n",
    );
    let pod = pod_names(&c, ns, "np").into_iter().next().unwrap();
    let node_port = c.ok(&[
        "get",
        "svc",
        "np",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    let url = format!("http://127.0.0.1:{}/", node_port.trim());
    let body = eventually(WAIT, "the NodePort answering on 127.0.0.1", || curl_host(&url));
    assert_eq!(body, pod);

    let port = free_port();
    let lb = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: lb\n  namespace: {ns}\nspec:\n  type: LoadBalancer\n  selector: {{app: np}}\n  ports:\n  - port: {port}\n    targetPort: 8080\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &lb);
    let body = eventually(WAIT, "the LoadBalancer answering on 127.0.0.1:<port>", || {
        curl_host(&format!("http://127.0.0.1:{port}/"))
    });
    assert_eq!(body, pod);
    let row = eventually(WAIT, "EXTERNAL-IP 127.0.0.1 in kubectl get svc", || {
        let out = c.ok(&["get", "svc", "lb", "-n", ns, "--no-headers"]);
        out.contains("127.0.0.1").then_some(out)
    });
    assert!(row.contains(&format!("{port}:")), "{row}");

    // A second LoadBalancer on a port that is taken stays pending, with a warning event.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let lb2 = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: lb-taken\n  namespace: {ns}\nspec:\n  type: LoadBalancer\n  selector: {{app: np}}\n  ports:\n  - port: {taken_port}\n    targetPort: 8080\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &lb2);
    eventually(WAIT, "an event saying the port is in use", || {
        let out = c.ok(&[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            "involvedObject.name=lb-taken",
        ]);
        out.contains("SyncLoadBalancerFailed").then_some(())
    });
    let row = c.ok(&["get", "svc", "lb-taken", "-n", ns, "--no-headers"]);
    assert!(row.contains("<pending>"), "{row}");
    drop(taken);
}

#[test]
fn a_pod_reaches_the_api_server_through_the_kubernetes_service_with_its_token() {
    let c = shared();
    let ns = "svc-api";
    c.ok(&["create", "namespace", ns]);
    // The real kubectl (a static Go binary) as the in-cluster client: in-cluster config from the env, the
    // projected token and ca.crt, TLS verified against 10.96.0.1.
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: incluster\n  namespace: {ns}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: main\n    image: {}\n    env:\n    - {{name: KUBERNETES_SERVICE_HOST, value: 10.96.0.1}}\n    - {{name: KUBERNETES_SERVICE_PORT, value: \"443\"}}\n    - {{name: HOME, value: /tmp}}\n    volumeMounts:\n    - {{name: kubectl, mountPath: /kubectl, readOnly: true}}\n  volumes:\n  - name: kubectl\n    hostPath: {{path: /usr/bin/kubectl, type: File}}\n",
        image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &pod);
    c.ok(&[
        "wait",
        "-n",
        ns,
        "--for=condition=Ready",
        "pod/incluster",
        "--timeout=90s",
    ]);
    let (ok, text) = eventually(WAIT, "an HTTP answer from the API server via 10.96.0.1", || {
        let out = c.kubectl(&[
            "exec",
            "-n",
            ns,
            "incluster",
            "--",
            "/kubectl",
            "get",
            "--raw",
            "/api",
            "-v=6",
        ]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (text.contains("200 OK") || text.contains("403 Forbidden")).then_some((out.status.success(), text))
    });
    assert!(text.contains("https://10.96.0.1:443/api"), "{text}");
    assert!(!text.contains("x509") && !text.contains("tls:"), "{text}");
    if ok {
        assert!(text.contains("APIVersions"), "{text}");
    }
}

#[test]
fn kubectl_shows_the_kubernetes_service_endpoint_on_the_cluster_network() {
    let c = shared();
    let ep = eventually(WAIT, "the kubernetes EndpointSlice", || {
        let out = c.kubectl(&[
            "get",
            "endpointslice",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.endpoints[0].addresses[0]}:{.ports[0].port}",
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|s| s.len() > 1)
    });
    assert!(ep.starts_with("10.1"), "{ep}");
    assert!(ep.ends_with(&format!(":{}", c.port)), "{ep}");
}

/// `docker network inspect` of the cluster's network: (name, subnet).
fn network_of(c: &Cluster) -> (String, String) {
    let id = std::fs::read_to_string(c.data_dir.join("node/cluster-id")).unwrap();
    let name = format!("kubeling-{}", id.trim());
    let out = Command::new("docker")
        .args([
            "network",
            "inspect",
            &name,
            "--format",
            "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "no network {name}");
    (name, String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn two_clusters_on_one_docker_get_their_own_networks() {
    let a = shared();
    let b = Cluster::up();
    let (na, sa) = eventually(WAIT, "cluster a's network", || {
        std::panic::catch_unwind(|| network_of(&a)).ok()
    });
    let (nb, sb) = eventually(WAIT, "cluster b's network", || {
        std::panic::catch_unwind(|| network_of(&b)).ok()
    });
    assert_ne!(na, nb);
    assert_ne!(sa, sb);
    assert!(sa.starts_with("10.11") && sb.starts_with("10.11"), "{sa} {sb}");
}

fn pod_ip(c: &Cluster, ns: &str, pod: &str) -> String {
    c.ok(&["get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.podIP}"])
        .trim()
        .to_string()
}

#[test]
fn a_kubeling_restart_keeps_pod_ips_and_services_routing_and_a_removed_gateway_comes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let ns = "svc-restart";
    let (ip_before, url, web_pod) = {
        let c = Cluster::start_in(&dir, 0, "up");
        namespace_with_client(&c, ns);
        deploy(
            &c,
            ns,
            "web",
            1,
            "[serve]",
            true,
            "  ports:\n  - port: 80\n    targetPort: 8080\n",
        );
        let web_pod = pod_names(&c, ns, "web").into_iter().next().unwrap();
        let url = format!("http://{}/", cluster_ip(&c, ns, "web"));
        let first = eventually(WAIT, "an answer before the restart", || {
            get_from_client(&c, ns, &url)
        });
        assert_eq!(first, web_pod);
        let ip = pod_ip(&c, ns, &web_pod);
        // Stop kubeling without removing the containers (Drop of a Cluster would).
        let mut c = c;
        c.terminate();
        std::mem::forget(c);
        (ip, url, web_pod)
    };
    let c = Cluster::start_in(&dir, 0, "up");
    let body = eventually(WAIT, "an answer after the restart", || {
        get_from_client(&c, ns, &url)
    });
    assert_eq!(body, web_pod);
    assert_eq!(pod_ip(&c, ns, &web_pod), ip_before);
    assert!(ip_before.starts_with("10.11"), "{ip_before}");
    let restarts = c.ok(&[
        "get",
        "pod",
        &web_pod,
        "-n",
        ns,
        "-o",
        "jsonpath={.status.containerStatuses[0].restartCount}",
    ]);
    assert_eq!(restarts.trim(), "0", "the container was not restarted");

    // A removed gateway container comes back and Services route again.
    let id = std::fs::read_to_string(dir.join("node/cluster-id")).unwrap();
    let removed = Command::new("docker")
        .args(["rm", "-f", &format!("kubeling-gateway-{}", id.trim())])
        .output()
        .unwrap();
    assert!(removed.status.success());
    let body = eventually(WAIT, "an answer after the gateway was removed", || {
        get_from_client(&c, ns, &url)
    });
    assert_eq!(body, web_pod);
    drop(c);
    drop(tmp);
}

#[test]
fn the_network_of_a_deleted_cluster_goes_at_the_next_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let name = {
        let mut c = Cluster::start_in(&dir, 0, "up");
        let (name, _) = eventually(WAIT, "the cluster's network", || {
            std::panic::catch_unwind(|| network_of(&c)).ok()
        });
        // Stop kubeling and leave its gateway and network behind (a Cluster's Drop would remove them).
        c.terminate();
        std::mem::forget(c);
        name
    };
    let exists = |name: &str| {
        Command::new("docker")
            .args(["network", "inspect", name])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(exists(&name));
    // The data dir goes; the next start of any kubeling removes what is left of that cluster.
    drop(tmp);
    let _next = Cluster::up();
    eventually(WAIT, "the deleted cluster's network removed", || {
        (!exists(&name)).then_some(())
    });
    let gateway = name.replacen("kubeling-", "kubeling-gateway-", 1);
    let inspect = Command::new("docker")
        .args(["inspect", &gateway])
        .output()
        .unwrap();
    assert!(
        !inspect.status.success(),
        "the deleted cluster's gateway {gateway} is still there"
    );
}

/// `nslookup` in a pod: the resolver the pod has (its resolv.conf: nameserver 10.96.0.10, the search list,
/// ndots:5), so the query goes through the `kube-dns` Service's ClusterIP to the cluster DNS server.
fn nslookup_from_client(c: &Cluster, ns: &str, name: &str) -> Option<Vec<String>> {
    let out = c.kubectl(&["exec", "-n", ns, "client", "--", "nslookup", name]);
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("Address: ").map(str::to_string))
            .collect()
    })
}

#[test]
fn pods_resolve_services_by_name_through_cluster_dns_and_reach_them() {
    let c = shared();
    let ns = "svc-dns";
    namespace_with_client(&c, ns);
    deploy(
        &c,
        ns,
        "web",
        2,
        "[serve]",
        true,
        "  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n",
    );
    let ip = cluster_ip(&c, ns, "web");
    for name in ["web", "web.svc-dns", "web.svc-dns.svc.cluster.local"] {
        let found = eventually(WAIT, &format!("{name} resolving in the pod"), || {
            nslookup_from_client(&c, ns, name)
        });
        assert_eq!(
            found,
            std::slice::from_ref(&ip),
            "{name} resolves to the ClusterIP"
        );
    }
    // A name nobody has is NXDOMAIN in the pod (not a timeout).
    let out = c.kubectl(&[
        "exec",
        "-n",
        ns,
        "client",
        "--",
        "nslookup",
        "nope.svc-dns.svc.cluster.local",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NXDOMAIN"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // http://web reaches every ready replica by name.
    let pods = pod_names(&c, ns, "web");
    let mut seen = BTreeSet::new();
    eventually(WAIT, "requests to http://web reaching every replica", || {
        seen.extend(get_from_client(&c, ns, "http://web/"));
        (seen == pods).then_some(())
    });

    // A StatefulSet's pod by its stable name through a headless Service: web-0.db.
    let sts = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: db\n  namespace: {ns}\nspec:\n  clusterIP: None\n  selector: {{app: db}}\n  ports:\n  - name: http\n    port: 8080\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: {ns}\nspec:\n  serviceName: db\n  replicas: 1\n  selector:\n    matchLabels: {{app: db}}\n  template:\n    metadata:\n      labels: {{app: db}}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      - name: main\n        image: {}\n        args: [serve]\n",
        image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &sts);
    c.ok(&[
        "wait",
        "-n",
        ns,
        "--for=condition=Ready",
        "pod/db-0",
        "--timeout=90s",
    ]);
    let pod_ip = c.ok(&["get", "pod", "db-0", "-n", ns, "-o", "jsonpath={.status.podIP}"]);
    for name in ["db", "db-0.db"] {
        let found = eventually(WAIT, &format!("{name} resolving in the pod"), || {
            nslookup_from_client(&c, ns, name).filter(|f| !f.is_empty())
        });
        assert_eq!(
            found,
            [pod_ip.trim().to_string()],
            "{name} resolves to the pod IP"
        );
    }
    assert_eq!(
        get_from_client(&c, ns, "http://db-0.db:8080/").as_deref(),
        Some("db-0"),
        "the StatefulSet pod answers by its stable name"
    );
}
