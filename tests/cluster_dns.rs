//! Cluster DNS with the real binary, kubectl and Docker: the `kube-dns` Service at the 10th address of the
//! Service range with its EndpointSlice, the DNS server answering cluster names at its listen address, and
//! what the node agent gives each pod: `/etc/resolv.conf` per `dnsPolicy`, `/etc/hosts` with the hostname's
//! FQDN and `hostAliases`, the hostname, and the Service environment variables. One cluster is shared by the
//! tests of this file (each uses its own namespace).

mod common;

#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use common::{Cluster, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

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

/// Creates namespace `ns` and waits for its `default` ServiceAccount (pods need it).
fn namespace(c: &Cluster, ns: &str) {
    c.ok(&["create", "namespace", ns]);
    eventually(WAIT, "the default ServiceAccount", || {
        c.kubectl(&["get", "serviceaccount", "default", "-n", ns])
            .status
            .success()
            .then_some(())
    });
}

/// Runs a testbox pod `name` in `ns` with `spec_extra` (spec lines indented by two) and waits until it runs.
fn run_pod(c: &Cluster, ns: &str, name: &str, spec_extra: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec_extra}  \
         containers:\n  - name: main\n    image: {}\n    args: [\"sleep\"]\n",
        testbox_image::ensure_testbox_image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    c.wait_json(&["pod", name, "-n", ns], WAIT, |p| {
        p["status"]["phase"] == "Running"
    });
}

fn exec(c: &Cluster, ns: &str, pod: &str, cmd: &[&str]) -> String {
    let mut args = vec!["exec", "-n", ns, pod, "--"];
    args.extend_from_slice(cmd);
    c.ok(&args)
}

/// Where the DNS server listens, from the kube-dns EndpointSlice.
fn dns_addr(c: &Cluster) -> SocketAddr {
    let slice: Value = eventually(WAIT, "the kube-dns EndpointSlice", || {
        let out = c.kubectl(&[
            "get",
            "endpointslices",
            "-n",
            "kube-system",
            "-l",
            "kubernetes.io/service-name=kube-dns",
            "-o",
            "json",
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["items"].as_array()?.first().cloned()
    });
    let ip = slice["endpoints"][0]["addresses"][0].as_str().unwrap();
    let port = slice["ports"][0]["port"].as_u64().unwrap();
    format!("{ip}:{port}").parse().unwrap()
}

/// A minimal DNS client: asks `name` A over UDP; returns the response code and the IPv4 answers.
fn query_a(server: SocketAddr, name: &str) -> (u8, Vec<std::net::Ipv4Addr>) {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send_to(&q, server).unwrap();
    let mut buf = [0u8; 1500];
    let n = socket.recv(&mut buf).expect("a DNS answer within 5 s");
    let r = &buf[..n];
    assert_eq!(&r[..2], &[0x12, 0x34], "the answer carries the query's id");
    let rcode = r[3] & 0x0f;
    let answers = u16::from_be_bytes([r[6], r[7]]);
    // Skip the question, then read each answer (names are compressed pointers or labels).
    let mut i = q.len();
    let mut ips = Vec::new();
    for _ in 0..answers {
        while r[i] != 0 && r[i] & 0xc0 != 0xc0 {
            i += r[i] as usize + 1;
        }
        i += if r[i] == 0 { 1 } else { 2 };
        let rtype = u16::from_be_bytes([r[i], r[i + 1]]);
        let len = u16::from_be_bytes([r[i + 8], r[i + 9]]) as usize;
        i += 10;
        if rtype == 1 && len == 4 {
            ips.push(std::net::Ipv4Addr::new(r[i], r[i + 1], r[i + 2], r[i + 3]));
        }
        i += len;
    }
    (rcode, ips)
}

#[test]
fn kube_dns_service_sits_at_the_tenth_address_with_its_endpoint_slice() {
    let c = cluster();
    let svc = c.wait_json(&["service", "kube-dns", "-n", "kube-system"], WAIT, |s| {
        s["spec"]["clusterIP"].is_string()
    });
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.10");
    let ports: Vec<(String, String, u64)> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["protocol"].as_str().unwrap().to_owned(),
                p["port"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".into(), "UDP".into(), 53),
            ("dns-tcp".into(), "TCP".into(), 53)
        ]
    );
    assert!(svc["spec"].get("selector").is_none());
    let addr = dns_addr(&c);
    assert!(addr.port() != 0);
    // A Service created afterwards never gets the DNS address.
    c.ok(&["create", "service", "clusterip", "after-dns", "--tcp=80"]);
    let ip = c.ok(&["get", "service", "after-dns", "-o", "jsonpath={.spec.clusterIP}"]);
    assert_ne!(ip.trim(), "10.96.0.10");
    // The DNS component keeps its Service: deleted, it comes back at the same address.
    let uid = svc["metadata"]["uid"].as_str().unwrap().to_owned();
    c.ok(&["delete", "service", "kube-dns", "-n", "kube-system"]);
    let back = c.wait_json(&["service", "kube-dns", "-n", "kube-system"], WAIT, |s| {
        s["metadata"]["uid"].as_str().is_some_and(|u| u != uid)
    });
    assert_eq!(back["spec"]["clusterIP"], "10.96.0.10");
}

#[test]
fn the_host_resolves_cluster_names_at_the_dns_listen_address() {
    let c = cluster();
    namespace(&c, "dns-host");
    c.ok(&[
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80",
        "-n",
        "dns-host",
    ]);
    let ip: std::net::Ipv4Addr = c
        .ok(&[
            "get",
            "service",
            "web",
            "-n",
            "dns-host",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .trim()
        .parse()
        .unwrap();
    let server = dns_addr(&c);
    let answer = eventually(WAIT, "web.dns-host.svc.cluster.local to resolve", || {
        let (rcode, ips) = query_a(server, "web.dns-host.svc.cluster.local");
        (rcode == 0 && !ips.is_empty()).then_some(ips)
    });
    assert_eq!(answer, [ip]);
    let (rcode, ips) = query_a(server, "nope.dns-host.svc.cluster.local");
    assert_eq!((rcode, ips.len()), (3, 0), "NXDOMAIN for an unknown Service");
    // Another test deletes kube-dns for a moment: it comes back.
    let ips = eventually(WAIT, "kube-dns.kube-system to resolve", || {
        let (rcode, ips) = query_a(server, "kube-dns.kube-system.svc.cluster.local");
        (rcode == 0).then_some(ips)
    });
    assert_eq!(ips, [std::net::Ipv4Addr::new(10, 96, 0, 10)]);
}

#[test]
fn pods_get_the_resolv_conf_of_their_dns_policy() {
    let c = cluster();
    let ns = "dns-policy";
    namespace(&c, ns);
    run_pod(&c, ns, "first", "");
    run_pod(&c, ns, "host", "  dnsPolicy: Default\n");
    run_pod(
        &c,
        ns,
        "none",
        "  dnsPolicy: None\n  dnsConfig:\n    nameservers: [\"192.0.2.53\"]\n    searches: [\"my.search\"]\n    \
         options:\n    - name: ndots\n      value: \"2\"\n    - name: edns0\n",
    );
    run_pod(
        &c,
        ns,
        "hostnet",
        "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n",
    );
    run_pod(&c, ns, "hostnet-first", "  hostNetwork: true\n");
    let hostnet = exec(&c, ns, "hostnet", &["cat", "/etc/resolv.conf"]);
    assert!(hostnet.contains("nameserver 10.96.0.10"), "{hostnet}");
    assert!(
        hostnet.contains("search dns-policy.svc.cluster.local"),
        "{hostnet}"
    );
    // ClusterFirst on the host network falls back to Default.
    let hostnet_first = exec(&c, ns, "hostnet-first", &["cat", "/etc/resolv.conf"]);
    assert!(!hostnet_first.contains("10.96.0.10"), "{hostnet_first}");
    let first = exec(&c, ns, "first", &["cat", "/etc/resolv.conf"]);
    assert!(first.contains("nameserver 10.96.0.10"), "{first}");
    assert!(
        first.contains("search dns-policy.svc.cluster.local svc.cluster.local cluster.local"),
        "{first}"
    );
    assert!(first.contains("options ndots:5"), "{first}");
    // The kubelet's own file (dockershim's rewrite), not Docker's with its comments.
    assert_eq!(first.lines().next(), Some("nameserver 10.96.0.10"), "{first}");
    assert_eq!(first.lines().count(), 3, "{first}");
    let host = exec(&c, ns, "host", &["cat", "/etc/resolv.conf"]);
    assert!(
        !host.contains("10.96.0.10") && !host.contains("svc.cluster.local"),
        "{host}"
    );
    assert!(host.contains("nameserver"), "{host}");
    let none = exec(&c, ns, "none", &["cat", "/etc/resolv.conf"]);
    assert!(none.contains("nameserver 192.0.2.53"), "{none}");
    assert!(none.contains("search my.search"), "{none}");
    assert!(none.contains("ndots:2") && none.contains("edns0"), "{none}");
    assert!(!none.contains("10.96.0.10"), "{none}");
}

#[test]
fn pods_get_their_hostname_fqdn_and_host_aliases() {
    let c = cluster();
    let ns = "dns-hosts";
    namespace(&c, ns);
    run_pod(
        &c,
        ns,
        "pod-a",
        "  hostname: web-0\n  subdomain: web\n  hostAliases:\n  - ip: \"10.1.2.3\"\n    \
         hostnames: [\"foo.local\", \"bar.local\"]\n",
    );
    assert_eq!(exec(&c, ns, "pod-a", &["hostname"]).trim(), "web-0");
    let hosts = exec(&c, ns, "pod-a", &["cat", "/etc/hosts"]);
    let pod_ip = c.ok(&["get", "pod", "pod-a", "-n", ns, "-o", "jsonpath={.status.podIP}"]);
    let fqdn_line = hosts
        .lines()
        .find(|l| l.contains("web-0.web.dns-hosts.svc.cluster.local"))
        .unwrap_or_else(|| panic!("no FQDN line in {hosts}"));
    assert!(fqdn_line.starts_with(pod_ip.trim()), "{hosts}");
    assert!(
        hosts
            .lines()
            .any(|l| l.starts_with("10.1.2.3") && l.contains("foo.local")),
        "{hosts}"
    );
    assert!(
        hosts
            .lines()
            .any(|l| l.starts_with("10.1.2.3") && l.contains("bar.local")),
        "{hosts}"
    );
    let lookup = exec(&c, ns, "pod-a", &["nslookup", "bar.local"]);
    assert!(lookup.contains("Address: 10.1.2.3"), "{lookup}");
}

#[test]
fn pods_get_service_variables_unless_service_links_are_off() {
    let c = cluster();
    let ns = "dns-env";
    namespace(&c, ns);
    c.ok(&[
        "create",
        "service",
        "clusterip",
        "my-web",
        "--tcp=80:8080",
        "-n",
        ns,
    ]);
    let ip = c.ok(&[
        "get",
        "service",
        "my-web",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let ip = ip.trim();
    run_pod(&c, ns, "linked", "");
    run_pod(&c, ns, "unlinked", "  enableServiceLinks: false\n");
    let env = exec(&c, ns, "linked", &["env"]);
    for want in [
        format!("MY_WEB_SERVICE_HOST={ip}"),
        "MY_WEB_SERVICE_PORT=80".into(),
        "MY_WEB_SERVICE_PORT_80_8080=80".into(),
        format!("MY_WEB_PORT=tcp://{ip}:80"),
        format!("MY_WEB_PORT_80_TCP=tcp://{ip}:80"),
        "MY_WEB_PORT_80_TCP_PROTO=tcp".into(),
        "MY_WEB_PORT_80_TCP_PORT=80".into(),
        format!("MY_WEB_PORT_80_TCP_ADDR={ip}"),
        "KUBERNETES_SERVICE_HOST=10.96.0.1".into(),
        "KUBERNETES_SERVICE_PORT=443".into(),
        "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443".into(),
    ] {
        assert!(env.lines().any(|l| l == want), "{want} missing from\n{env}");
    }
    let env = exec(&c, ns, "unlinked", &["env"]);
    assert!(!env.contains("MY_WEB_"), "{env}");
    assert!(
        env.lines().any(|l| l == "KUBERNETES_SERVICE_HOST=10.96.0.1"),
        "{env}"
    );
}

#[test]
fn headless_services_resolve_to_ready_pods_and_their_hostnames() {
    let c = cluster();
    let ns = "dns-headless";
    namespace(&c, ns);
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  clusterIP: None\n  \
             selector:\n    app: web\n  ports:\n  - name: http\n    port: 80\n"
        ),
    );
    let server = dns_addr(&c);
    // No ready endpoint yet: the name does not exist.
    let (rcode, _) = query_a(server, "web.dns-headless.svc.cluster.local");
    assert_eq!(
        rcode, 3,
        "NXDOMAIN for a headless Service without ready endpoints"
    );
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0\n  namespace: {ns}\n  labels:\n    app: web\nspec:\n  \
         hostname: web-0\n  subdomain: web\n  containers:\n  - name: main\n    image: {}\n    args: [\"sleep\"]\n    \
         ports:\n    - containerPort: 80\n",
        testbox_image::ensure_testbox_image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    let pod = c.wait_json(&["pod", "web-0", "-n", ns], WAIT, |p| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    });
    let ip: std::net::Ipv4Addr = pod["status"]["podIP"].as_str().unwrap().parse().unwrap();
    for name in [
        "web.dns-headless.svc.cluster.local",
        "web-0.web.dns-headless.svc.cluster.local",
    ] {
        let ips = eventually(WAIT, name, || {
            let (rcode, ips) = query_a(server, name);
            (rcode == 0 && !ips.is_empty()).then_some(ips)
        });
        assert_eq!(ips, [ip], "{name}");
    }
    // The pod gone, the Service has no ready endpoint again: its name does not exist.
    c.ok(&[
        "delete",
        "pod",
        "web-0",
        "-n",
        ns,
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    eventually(WAIT, "NXDOMAIN once the pod is gone", || {
        (query_a(server, "web.dns-headless.svc.cluster.local").0 == 3).then_some(())
    });
}

/// `kubeling dns` alone, killed when dropped.
struct DnsProcess(std::process::Child);

impl Drop for DnsProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kubeling_dns_alone_serves_any_api_server_and_applies_kube_dns() {
    use std::io::{BufRead, BufReader};
    let c = Cluster::start();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kubeling"))
        .args(["dns", "--kubeconfig"])
        .arg(&c.kubeconfig)
        .args(["--dns-listen", "127.0.0.1:0"])
        .env("KUBELING_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawning kubeling dns");
    let stdout = child.stdout.take().unwrap();
    let _process = DnsProcess(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr: SocketAddr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    assert_eq!(dns_addr(&c), addr, "the EndpointSlice names where it listens");
    let ips = eventually(WAIT, "kubernetes.default to resolve", || {
        let (rcode, ips) = query_a(addr, "kubernetes.default.svc.cluster.local");
        (rcode == 0 && !ips.is_empty()).then_some(ips)
    });
    assert_eq!(ips, [std::net::Ipv4Addr::new(10, 96, 0, 1)]);
}
