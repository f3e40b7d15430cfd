use super::*;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-0", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }))
    .unwrap()
}

fn settings() -> DnsSettings {
    DnsSettings {
        cluster_dns: vec!["10.96.0.10".into()],
        ..DnsSettings::default()
    }
}

const HOST: &str = "# comment\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch corp.example. lab.example\n\
                    options timeout:2 rotate\noptions timeout:3\n";

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn resolv_conf_parses_as_the_kubelet() {
    // upstream TestParseResolvConf: the last search line wins, trailing dots go, options merge by name.
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
    let cases: &[Case] = &[
        ("", &[], &[], &[]),
        ("nameserver 1.2.3.4", &["1.2.3.4"], &[], &[]),
        ("nameserver 1.2.3.4 #comment", &["1.2.3.4"], &[], &[]),
        ("#nameserver 1.2.3.4\n;nameserver 5.6.7.8", &[], &[], &[]),
        ("search foo.\nsearch bar baz.", &[], &["bar", "baz"], &[]),
        ("search .", &[], &[], &[]),
        (
            "options ndots:5 attempts:2\noptions ndots:1",
            &[],
            &[],
            &["ndots:1", "attempts:2"],
        ),
        (
            HOST,
            &["192.168.1.1", "192.168.1.2"],
            &["corp.example", "lab.example"],
            &["timeout:3", "rotate"],
        ),
    ];
    for (text, ns, search, options) in cases {
        let conf = parse_resolv_conf(text);
        assert_eq!(conf.nameservers, strs(ns), "{text:?}");
        assert_eq!(conf.searches, strs(search), "{text:?}");
        assert_eq!(conf.options, strs(options), "{text:?}");
    }
}

#[test]
fn dns_policy_decides_the_type() {
    // upstream TestGetPodDNSType.
    let cases = [
        (
            serde_json::json!({"dnsPolicy": "ClusterFirst"}),
            PodDnsType::Cluster,
        ),
        (serde_json::json!({}), PodDnsType::Cluster),
        (
            serde_json::json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true}),
            PodDnsType::Host,
        ),
        (
            serde_json::json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true}),
            PodDnsType::Cluster,
        ),
        (
            serde_json::json!({"dnsPolicy": "ClusterFirstWithHostNet"}),
            PodDnsType::Cluster,
        ),
        (serde_json::json!({"dnsPolicy": "Default"}), PodDnsType::Host),
        (
            serde_json::json!({"dnsPolicy": "None", "hostNetwork": true}),
            PodDnsType::None,
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(pod_dns_type(&pod(spec.clone())), want, "{spec}");
    }
}

#[test]
fn pod_resolv_conf_per_policy() {
    struct Case {
        name: &'static str,
        spec: serde_json::Value,
        settings: DnsSettings,
        host: Option<&'static str>,
        servers: &'static [&'static str],
        searches: &'static [&'static str],
        options: &'static [&'static str],
        warnings: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "ClusterFirst: cluster DNS, cluster searches then the host's, ndots:5 only",
            spec: serde_json::json!({"dnsPolicy": "ClusterFirst"}),
            settings: settings(),
            host: Some(HOST),
            servers: &["10.96.0.10"],
            searches: &[
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lab.example",
            ],
            options: &["ndots:5"],
            warnings: &[],
        },
        Case {
            name: "ClusterFirst with duplicates in the host's searches",
            spec: serde_json::json!({}),
            settings: settings(),
            host: Some("search cluster.local other"),
            servers: &["10.96.0.10"],
            searches: &[
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "other",
            ],
            options: &["ndots:5"],
            warnings: &[],
        },
        Case {
            name: "ClusterFirst without a cluster DNS falls back to Default (Docker's host file)",
            spec: serde_json::json!({"dnsPolicy": "ClusterFirst"}),
            settings: DnsSettings::default(),
            host: Some(HOST),
            servers: &[],
            searches: &[],
            options: &[],
            warnings: &["MissingClusterDNS"],
        },
        Case {
            name: "ClusterFirst on the host network is Default",
            spec: serde_json::json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true}),
            settings: settings(),
            host: Some(HOST),
            servers: &[],
            searches: &[],
            options: &[],
            warnings: &[],
        },
        Case {
            name: "ClusterFirstWithHostNet on the host network",
            spec: serde_json::json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true}),
            settings: settings(),
            host: Some(""),
            servers: &["10.96.0.10"],
            searches: &["ns.svc.cluster.local", "svc.cluster.local", "cluster.local"],
            options: &["ndots:5"],
            warnings: &[],
        },
        Case {
            name: "Default with dnsConfig: the host's file merged",
            spec: serde_json::json!({"dnsPolicy": "Default", "dnsConfig": {
                "nameservers": ["192.168.1.2", "10.0.0.53"], "searches": ["extra.example"],
                "options": [{"name": "timeout", "value": "1"}, {"name": "edns0"}]}}),
            settings: settings(),
            host: Some(HOST),
            servers: &["192.168.1.1", "192.168.1.2", "10.0.0.53"],
            searches: &["corp.example", "lab.example", "extra.example"],
            options: &["timeout:1", "rotate", "edns0"],
            warnings: &[],
        },
        Case {
            name: "Default with an empty --resolv-conf: loopback, no search",
            spec: serde_json::json!({"dnsPolicy": "Default"}),
            settings: settings(),
            host: None,
            servers: &["127.0.0.1"],
            searches: &["."],
            options: &[],
            warnings: &[],
        },
        Case {
            name: "None: only dnsConfig; no search line",
            spec: serde_json::json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"],
                "options": [{"name": "ndots", "value": "2"}]}}),
            settings: settings(),
            host: Some(HOST),
            servers: &["1.1.1.1"],
            searches: &["."],
            options: &["ndots:2"],
            warnings: &[],
        },
        Case {
            name: "ClusterFirst with dnsConfig: appended, ndots overridden",
            spec: serde_json::json!({"dnsConfig": {"nameservers": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
                "searches": ["ns.svc.cluster.local", "my.dns.search"],
                "options": [{"name": "ndots", "value": "3"}]}}),
            settings: settings(),
            host: Some(""),
            servers: &["10.96.0.10", "10.0.0.1", "10.0.0.2"],
            searches: &[
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "my.dns.search",
            ],
            options: &["ndots:3"],
            warnings: &["DNSConfigForming"],
        },
    ];
    for c in cases {
        let got = pod_dns(&pod(c.spec), &c.settings, c.host);
        assert_eq!(got.config.servers, strs(c.servers), "{}", c.name);
        assert_eq!(got.config.searches, strs(c.searches), "{}", c.name);
        assert_eq!(got.config.options, strs(c.options), "{}", c.name);
        let reasons: Vec<&str> = got.warnings.iter().map(|w| w.reason).collect();
        assert_eq!(reasons, c.warnings, "{}", c.name);
    }
}

#[test]
fn search_lists_are_cut_to_the_limits() {
    // upstream TestFormDNSSearchFitsLimits: 32 paths, 2048 characters, no domain over 253.
    let long = "a".repeat(254);
    let mut searches: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
    searches.insert(3, long.clone());
    let spec = serde_json::json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": searches}});
    let got = pod_dns(&pod(spec), &settings(), Some(""));
    assert_eq!(
        got.config.searches.len(),
        31,
        "32 kept, then the long one dropped"
    );
    assert!(!got.config.searches.contains(&long));
    assert_eq!(got.warnings[0].reason, "DNSConfigForming");
    assert!(
        got.warnings[0]
            .message
            .starts_with("Search Line limits were exceeded")
    );

    let chars: Vec<String> = (0..20).map(|i| format!("{i:02}{}", "b".repeat(200))).collect();
    let spec = serde_json::json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": chars}});
    let got = pod_dns(&pod(spec), &settings(), Some(""));
    assert!(got.config.searches.join(" ").len() <= MAX_SEARCH_LIST_CHARS);
    assert_eq!(got.config.searches.len(), 10);
}

#[test]
fn hostname_and_subdomain() {
    let cases = [
        (serde_json::json!({}), "web-0", None),
        (serde_json::json!({"hostname": "db"}), "db", None),
        (
            serde_json::json!({"hostname": "web-0", "subdomain": "web"}),
            "web-0",
            Some("web.ns.svc.cluster.local"),
        ),
        (
            serde_json::json!({"subdomain": "web", "setHostnameAsFQDN": true}),
            "web-0.web.ns.svc.cluster.local",
            None,
        ),
    ];
    for (spec, host, domain) in cases {
        let (h, d) = hostname_and_domain(&pod(spec.clone()), "cluster.local");
        assert_eq!((h.as_str(), d.as_deref()), (host, domain), "{spec}");
    }
    let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
    assert_eq!(truncate_hostname(&long), "a".repeat(62));
}

#[test]
fn host_aliases_become_extra_hosts() {
    let p = pod(serde_json::json!({"hostAliases": [
        {"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]},
        {"ip": "fd00::1", "hostnames": ["six.local"]},
    ]}));
    assert_eq!(
        extra_hosts(&p),
        ["foo.local:10.1.2.3", "bar.local:10.1.2.3", "six.local:fd00::1"]
    );
}

#[test]
fn resolv_conf_text_is_dockershims() {
    let config = DnsConfig {
        servers: strs(&["10.96.0.10"]),
        searches: strs(&["ns.svc.cluster.local", "svc.cluster.local", "cluster.local"]),
        options: strs(&["ndots:5"]),
    };
    assert_eq!(
        resolv_conf_text(&config),
        "nameserver 10.96.0.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
    );
    let none = DnsConfig {
        servers: strs(&["1.1.1.1"]),
        searches: strs(&["."]),
        options: Vec::new(),
    };
    assert_eq!(resolv_conf_text(&none), "nameserver 1.1.1.1\n");
    assert_eq!(resolv_conf_text(&DnsConfig::default()), "");
}
