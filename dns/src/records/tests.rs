use super::*;

fn service(v: serde_json::Value) -> Arc<Service> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn slice(v: serde_json::Value) -> Arc<EndpointSlice> {
    Arc::new(serde_json::from_value(v).unwrap())
}

/// A cluster with a ClusterIP Service, a headless one with a StatefulSet-style endpoint and a nameless one,
/// an ExternalName Service, and a headless Service without ready endpoints.
fn cluster() -> Objects {
    Objects {
        services: vec![
            service(serde_json::json!({
                "metadata": {"name": "web", "namespace": "ns"},
                "spec": {"clusterIP": "10.96.1.5", "clusterIPs": ["10.96.1.5"],
                         "ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                                   {"name": "dns", "port": 53, "protocol": "UDP"},
                                   {"port": 8080}]}
            })),
            service(serde_json::json!({
                "metadata": {"name": "db", "namespace": "ns"},
                "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}
            })),
            service(serde_json::json!({
                "metadata": {"name": "ext", "namespace": "ns"},
                "spec": {"type": "ExternalName", "externalName": "example.com"}
            })),
            service(serde_json::json!({
                "metadata": {"name": "empty", "namespace": "ns"},
                "spec": {"clusterIP": "None"}
            })),
        ],
        slices: vec![
            slice(serde_json::json!({
                "metadata": {"name": "db-abc", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "db"}},
                "addressType": "IPv4",
                "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
                "endpoints": [
                    {"addresses": ["10.0.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
                    {"addresses": ["10.0.0.6"], "conditions": {}},
                    {"addresses": ["10.0.0.7"], "hostname": "db-2", "conditions": {"ready": false}},
                ]
            })),
            slice(serde_json::json!({
                "metadata": {"name": "empty-abc", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "empty"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": false}}]
            })),
        ],
    }
}

fn zone() -> Zone {
    Zone::new("cluster.local", 1)
}

/// The answer in a short text form: `A 10.96.1.5`, `SRV 0 50 80 web.ns.svc.cluster.local.`, `NXDOMAIN`...
fn ask(name: &str, qtype: RecordType) -> Vec<String> {
    let owner = Name::from_str(name).unwrap();
    match resolve(&cluster(), &zone(), &owner, &name.to_ascii_lowercase(), qtype) {
        Answer::Records { answers, additionals } => answers
            .iter()
            .map(|r| format!("{} {}", r.record_type(), r.data))
            .chain(
                additionals
                    .iter()
                    .map(|r| format!("+{} {} {}", r.name, r.record_type(), r.data)),
            )
            .collect(),
        Answer::NoData => vec!["NODATA".into()],
        Answer::NxDomain => vec!["NXDOMAIN".into()],
        Answer::Forward => vec!["FORWARD".into()],
    }
}

#[test]
fn cluster_names_answer_as_the_dns_specification_says() {
    use RecordType::*;
    let cases: &[(&str, RecordType, &[&str])] = &[
        // ClusterIP Service: its IP; case-insensitive.
        ("web.ns.svc.cluster.local", A, &["A 10.96.1.5"]),
        ("WEB.Ns.svc.Cluster.Local", A, &["A 10.96.1.5"]),
        ("web.ns.svc.cluster.local", AAAA, &["NODATA"]),
        ("web.ns.svc.cluster.local", MX, &["NODATA"]),
        ("nope.ns.svc.cluster.local", A, &["NXDOMAIN"]),
        // SRV: named ports only, lowercase protocol, additional A.
        (
            "_http._tcp.web.ns.svc.cluster.local",
            SRV,
            &[
                "SRV 0 100 80 web.ns.svc.cluster.local.",
                "+web.ns.svc.cluster.local. A 10.96.1.5",
            ],
        ),
        (
            "_dns._udp.web.ns.svc.cluster.local",
            SRV,
            &[
                "SRV 0 100 53 web.ns.svc.cluster.local.",
                "+web.ns.svc.cluster.local. A 10.96.1.5",
            ],
        ),
        ("_dns._tcp.web.ns.svc.cluster.local", SRV, &["NXDOMAIN"]),
        ("_http._tcp.web.ns.svc.cluster.local", A, &["NODATA"]),
        // Headless: ready endpoints only (nil ready counts as ready).
        ("db.ns.svc.cluster.local", A, &["A 10.0.0.5", "A 10.0.0.6"]),
        ("db-0.db.ns.svc.cluster.local", A, &["A 10.0.0.5"]),
        ("10-0-0-6.db.ns.svc.cluster.local", A, &["A 10.0.0.6"]),
        ("db-2.db.ns.svc.cluster.local", A, &["NXDOMAIN"]),
        ("db-0.web.ns.svc.cluster.local", A, &["NXDOMAIN"]),
        (
            "_pg._tcp.db.ns.svc.cluster.local",
            SRV,
            &[
                "SRV 0 50 5432 db-0.db.ns.svc.cluster.local.",
                "SRV 0 50 5432 10-0-0-6.db.ns.svc.cluster.local.",
                "+db-0.db.ns.svc.cluster.local. A 10.0.0.5",
                "+10-0-0-6.db.ns.svc.cluster.local. A 10.0.0.6",
            ],
        ),
        // No ready endpoints: the name does not exist.
        ("empty.ns.svc.cluster.local", A, &["NXDOMAIN"]),
        // ExternalName: a CNAME, whatever the type.
        ("ext.ns.svc.cluster.local", A, &["CNAME example.com."]),
        ("ext.ns.svc.cluster.local", AAAA, &["CNAME example.com."]),
        // Pods (`pods insecure`).
        ("10-1-2-3.ns.pod.cluster.local", A, &["A 10.1.2.3"]),
        ("10-1-2-3.any.pod.cluster.local", AAAA, &["NODATA"]),
        ("not-an-ip.ns.pod.cluster.local", A, &["NXDOMAIN"]),
        // The zone's structure.
        (
            "cluster.local",
            SOA,
            &["SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"],
        ),
        ("cluster.local", A, &["NODATA"]),
        ("svc.cluster.local", A, &["NODATA"]),
        ("ns.svc.cluster.local", A, &["NODATA"]),
        ("other.svc.cluster.local", A, &["NXDOMAIN"]),
        ("dns-version.cluster.local", TXT, &["TXT 1.1.0"]),
        ("a.b.c.d.e.f.cluster.local", A, &["NXDOMAIN"]),
        ("google.com.ns.svc.cluster.local", A, &["NXDOMAIN"]),
        // Outside the zone: forwarded.
        ("example.com", A, &["FORWARD"]),
        ("cluster.local.example.com", A, &["FORWARD"]),
        // Reverse: ClusterIPs and headless endpoints; other addresses fall through.
        ("5.1.96.10.in-addr.arpa", PTR, &["PTR web.ns.svc.cluster.local."]),
        (
            "5.0.0.10.in-addr.arpa",
            PTR,
            &["PTR db-0.db.ns.svc.cluster.local."],
        ),
        ("1.1.168.192.in-addr.arpa", PTR, &["FORWARD"]),
    ];
    for (name, qtype, want) in cases {
        assert_eq!(ask(name, *qtype), *want, "{name} {qtype}");
    }
}

#[test]
fn answers_are_owned_by_the_name_as_asked() {
    let owner = Name::from_str("Web.NS.svc.cluster.local.").unwrap();
    let Answer::Records { answers, .. } = resolve(
        &cluster(),
        &zone(),
        &owner,
        "web.ns.svc.cluster.local.",
        RecordType::A,
    ) else {
        panic!("no records");
    };
    assert_eq!(answers[0].name, owner);
    assert_eq!(answers[0].ttl, DEFAULT_TTL);
}

#[test]
fn reverse_names_parse_both_families() {
    assert_eq!(
        reverse_ip("4.3.2.1.in-addr.arpa"),
        Some("1.2.3.4".parse().unwrap())
    );
    assert_eq!(reverse_ip("3.2.1.in-addr.arpa"), None);
    let v6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.0.0.d.f.ip6.arpa";
    assert_eq!(reverse_ip(v6), Some("fd00:fd00::1".parse().unwrap()));
}

#[test]
fn dashed_names_round_trip() {
    for ip in ["10.0.0.5", "fd00::5"] {
        let ip: IpAddr = ip.parse().unwrap();
        assert_eq!(undashed(&dashed(ip)), Some(ip));
    }
    assert_eq!(dashed("fd00::5".parse().unwrap()), "fd00--5");
}
