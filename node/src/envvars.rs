//! The Service environment variables of a container (upstream `pkg/kubelet/envvars` and the kubelet's
//! `getServiceEnvVarMap`): `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT[_<PORT NAME>]` and the Docker-links
//! `<NAME>_PORT...` variables, for every Service of the pod's namespace with a cluster IP when
//! `enableServiceLinks` is not false, and for the `kubernetes` Service of `default` always. The worker lists
//! the Services when it builds a container's environment; [`crate::env::make_environment`] offers these to
//! `$(VAR)` expansion and appends those the container does not define itself.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// kubelet: the master services whose variables every pod gets (`masterServices`).
const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// upstream `IsServiceIPSet`: a cluster IP other than `None`.
fn has_cluster_ip(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// kubelet `getServiceEnvVarMap` then `envvars.FromServices`: the variables of the Services a pod in
/// `namespace` sees, as (name, value) pairs, Services in name order (upstream's order is Go map order).
pub fn service_env(
    services: &[Service],
    namespace: &str,
    enable_service_links: bool,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for svc in services.iter().filter(|s| has_cluster_ip(s)) {
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        if ns == "default" && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(svc);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        }
    }
    chosen.values().flat_map(|s| from_service(s)).collect()
}

/// upstream `makeEnvVariableName`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// upstream `FromServices` for one Service.
fn from_service(svc: &Service) -> Vec<(String, String)> {
    let spec = svc.spec.clone().unwrap_or_default();
    let ip = spec.cluster_ip.clone().unwrap_or_default();
    let ports = spec.ports.unwrap_or_default();
    let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
    let Some(first) = ports.first() else {
        return vec![(format!("{prefix}_SERVICE_HOST"), ip)];
    };
    let mut out = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.clone()),
        (format!("{prefix}_SERVICE_PORT"), first.port.to_string()),
    ];
    for p in &ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((
                format!("{prefix}_SERVICE_PORT_{}", env_name(name)),
                p.port.to_string(),
            ));
        }
    }
    // Docker-compatible link variables (`makeLinkVariables`).
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.clone()
    };
    for (i, p) in ports.iter().enumerate() {
        let protocol = p.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
        let url = format!("{}://{host}:{}", protocol.to_lowercase(), p.port);
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        out.push((port_prefix.clone(), url));
        out.push((format!("{port_prefix}_PROTO"), protocol.to_lowercase()));
        out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
        out.push((format!("{port_prefix}_ADDR"), ip.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports},
        }))
        .unwrap()
    }

    fn services() -> Vec<Service> {
        vec![
            svc(
                "default",
                "kubernetes",
                "10.96.0.1",
                serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
            ),
            svc(
                "ns",
                "my-web",
                "10.96.1.2",
                serde_json::json!([
                    {"port": 80, "protocol": "TCP"},
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                ]),
            ),
            svc("ns", "headless", "None", serde_json::json!([{"port": 80}])),
            svc(
                "other",
                "elsewhere",
                "10.96.1.3",
                serde_json::json!([{"port": 80}]),
            ),
        ]
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    const KUBERNETES: &[(&str, &str)] = &[
        ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
        ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
        ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
        ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
        ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
        ("KUBERNETES_PORT_443_TCP_PORT", "443"),
        ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
    ];

    #[test]
    fn a_pod_sees_its_namespaces_services_and_the_masters() {
        // upstream TestMakeEnvironmentVariables "api server = Y, kubelet = Y" and envvars_test.go.
        let mut want = pairs(KUBERNETES);
        want.extend(pairs(&[
            ("MY_WEB_SERVICE_HOST", "10.96.1.2"),
            ("MY_WEB_SERVICE_PORT", "80"),
            ("MY_WEB_SERVICE_PORT_DNS", "53"),
            ("MY_WEB_PORT", "tcp://10.96.1.2:80"),
            ("MY_WEB_PORT_80_TCP", "tcp://10.96.1.2:80"),
            ("MY_WEB_PORT_80_TCP_PROTO", "tcp"),
            ("MY_WEB_PORT_80_TCP_PORT", "80"),
            ("MY_WEB_PORT_80_TCP_ADDR", "10.96.1.2"),
            ("MY_WEB_PORT_53_UDP", "udp://10.96.1.2:53"),
            ("MY_WEB_PORT_53_UDP_PROTO", "udp"),
            ("MY_WEB_PORT_53_UDP_PORT", "53"),
            ("MY_WEB_PORT_53_UDP_ADDR", "10.96.1.2"),
        ]));
        assert_eq!(service_env(&services(), "ns", true), want);
    }

    #[test]
    fn without_service_links_only_the_master_service() {
        assert_eq!(service_env(&services(), "ns", false), pairs(KUBERNETES));
    }

    #[test]
    fn in_default_the_kubernetes_service_once() {
        let env = service_env(&services(), "default", true);
        assert_eq!(env, pairs(KUBERNETES));
    }

    #[test]
    fn ipv6_cluster_ips_are_bracketed_in_urls() {
        let s = vec![svc("ns", "six", "fd00::5", serde_json::json!([{"port": 80}]))];
        let env = service_env(&s, "ns", true);
        assert!(env.contains(&("SIX_PORT".into(), "tcp://[fd00::5]:80".into())));
        assert!(env.contains(&("SIX_PORT_80_TCP_ADDR".into(), "fd00::5".into())));
    }
}
