//! What the proxy serves, computed from Services and EndpointSlices as kube-proxy's service and endpoint
//! change trackers do (`pkg/proxy/servicechangetracker.go`, `endpointschangetracker.go`): one entry per
//! Service port, with the ready endpoints of the slices whose port has the same name. Pure.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// `kubernetes.io/service-name`, the label tying a slice to its Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// upstream `DefaultClientIPServiceAffinitySeconds`.
pub const DEFAULT_AFFINITY_TIMEOUT: Duration = Duration::from_secs(10800);

/// Transport protocols the proxy carries (SCTP is not proxied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    fn parse(text: Option<&str>) -> Option<Protocol> {
        match text.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            _ => None,
        }
    }
}

/// A Service port's identity: `namespace/name:portName` (upstream `ServicePortName`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServicePortName {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The port's name ("" for a single unnamed port).
    pub port: String,
    /// Its protocol.
    pub protocol: Protocol,
}

impl std::fmt::Display for ServicePortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

/// One proxied Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Which port of which Service.
    pub id: ServicePortName,
    /// `spec.clusterIP`.
    pub cluster_ip: Ipv4Addr,
    /// `spec.ports[].port`.
    pub port: u16,
    /// `spec.ports[].nodePort` (NodePort and LoadBalancer Services).
    pub node_port: Option<u16>,
    /// `spec.type` is LoadBalancer: the port is also served on the host's 127.0.0.1:`port`.
    pub load_balancer: bool,
    /// `sessionAffinity: ClientIP` with its timeout.
    pub affinity: Option<Duration>,
    /// Ready endpoints, sorted, without duplicates.
    pub endpoints: Vec<SocketAddr>,
}

/// The proxy's table: every non-headless Service port with its ready endpoints, sorted by id.
pub fn build(services: &[Service], slices: &[EndpointSlice]) -> Vec<ServicePort> {
    let mut out = Vec::new();
    for svc in services {
        let (Some(namespace), Some(name), Some(spec)) = (
            svc.metadata.namespace.as_deref(),
            svc.metadata.name.as_deref(),
            svc.spec.as_ref(),
        ) else {
            continue;
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            continue;
        }
        // Headless Services ("None") are not proxied; an unallocated or IPv6 ClusterIP cannot be.
        let Some(cluster_ip) = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        else {
            continue;
        };
        let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(DEFAULT_AFFINITY_TIMEOUT, Duration::from_secs)
        });
        let load_balancer = spec.type_.as_deref() == Some("LoadBalancer");
        let node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
        for p in spec.ports.iter().flatten() {
            let (Some(protocol), Ok(port)) = (Protocol::parse(p.protocol.as_deref()), u16::try_from(p.port))
            else {
                continue;
            };
            let port_name = p.name.clone().unwrap_or_default();
            let endpoints = ready_endpoints(namespace, name, &port_name, protocol, slices);
            out.push(ServicePort {
                id: ServicePortName {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    port: port_name,
                    protocol,
                },
                cluster_ip,
                port,
                node_port: p
                    .node_port
                    .filter(|_| node_ports)
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|n| *n != 0),
                load_balancer,
                affinity,
                endpoints,
            });
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The ready IPv4 endpoints of the Service's slices for the port named `port_name` (upstream matches slice
/// ports to Service ports by name; a nil `ready` counts as ready).
fn ready_endpoints(
    namespace: &str,
    service: &str,
    port_name: &str,
    protocol: Protocol,
    slices: &[EndpointSlice],
) -> Vec<SocketAddr> {
    let mut found = BTreeSet::new();
    for slice in slices {
        let owned = slice.metadata.namespace.as_deref() == Some(namespace)
            && slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SERVICE_NAME))
                .is_some_and(|n| n == service);
        if !owned || slice.address_type != "IPv4" {
            continue;
        }
        let Some(port) = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == port_name
                && Protocol::parse(p.protocol.as_deref()) == Some(protocol)
        }) else {
            continue;
        };
        let Some(port) = port.port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready {
                continue;
            }
            for address in &ep.addresses {
                if let Ok(ip) = address.parse::<Ipv4Addr>() {
                    found.insert(SocketAddr::V4(SocketAddrV4::new(ip, port)));
                }
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    fn slice(v: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(v).unwrap()
    }

    fn web_slice(name: &str, ports: serde_json::Value, endpoints: serde_json::Value) -> EndpointSlice {
        slice(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {LABEL_SERVICE_NAME: "web"}},
            "addressType": "IPv4", "ports": ports, "endpoints": endpoints
        }))
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn endpoints_are_ready_ones_of_the_port_with_the_same_name() {
        let service = svc(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"clusterIP": "10.96.0.20", "ports": [
                {"name": "http", "port": 80, "targetPort": "web"},
                {"name": "metrics", "port": 9090},
                {"name": "dns", "port": 53, "protocol": "UDP"}
            ]}
        }));
        let slices = [
            web_slice(
                "a",
                json!([{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}, {"name": "dns", "port": 5353, "protocol": "UDP"}]),
                json!([
                    {"addresses": ["10.112.6.3"], "conditions": {"ready": true}},
                    {"addresses": ["10.112.6.4"], "conditions": {"ready": false}},
                    {"addresses": ["10.112.6.5"]}
                ]),
            ),
            // A second slice of the same Service, and one of another Service or namespace.
            web_slice(
                "b",
                json!([{"name": "http", "port": 8080}]),
                json!([{"addresses": ["10.112.6.9", "10.112.6.3"]}]),
            ),
            slice(
                json!({"metadata": {"name": "c", "namespace": "other", "labels": {LABEL_SERVICE_NAME: "web"}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 1}], "endpoints": [{"addresses": ["10.0.0.1"]}]}),
            ),
            slice(
                json!({"metadata": {"name": "d", "namespace": "ns", "labels": {LABEL_SERVICE_NAME: "web"}},
                "addressType": "IPv6", "ports": [{"name": "http", "port": 1}], "endpoints": [{"addresses": ["fd00::1"]}]}),
            ),
        ];
        let table = build(&[service], &slices);
        let got: Vec<_> = table
            .iter()
            .map(|p| (p.id.port.as_str(), p.id.protocol, p.port, p.endpoints.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "dns",
                    Protocol::Udp,
                    53,
                    addrs(&["10.112.6.3:5353", "10.112.6.5:5353"])
                ),
                (
                    "http",
                    Protocol::Tcp,
                    80,
                    addrs(&["10.112.6.3:8080", "10.112.6.5:8080", "10.112.6.9:8080"])
                ),
                (
                    "metrics",
                    Protocol::Tcp,
                    9090,
                    addrs(&["10.112.6.3:9100", "10.112.6.5:9100"])
                ),
            ]
        );
    }

    #[test]
    fn headless_external_name_and_sctp_are_not_proxied() {
        let services = [
            svc(
                json!({"metadata": {"name": "h", "namespace": "ns"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
            ),
            svc(
                json!({"metadata": {"name": "e", "namespace": "ns"}, "spec": {"type": "ExternalName", "externalName": "x.example"}}),
            ),
            svc(
                json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": {"clusterIP": "10.96.0.9", "ports": [{"port": 80, "protocol": "SCTP"}]}}),
            ),
        ];
        assert_eq!(build(&services, &[]), vec![]);
    }

    #[test]
    fn node_ports_load_balancers_and_affinity_come_from_the_spec() {
        let cases = [
            (
                json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30001}]}),
                None,
                false,
                None,
            ),
            (
                json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30001}]}),
                Some(30001),
                false,
                None,
            ),
            (
                json!({"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30002}]}),
                Some(30002),
                true,
                None,
            ),
            (
                json!({"type": "LoadBalancer", "ports": [{"port": 80}]}),
                None,
                true,
                None,
            ),
            (
                json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}),
                None,
                false,
                Some(DEFAULT_AFFINITY_TIMEOUT),
            ),
            (
                json!({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}, "ports": [{"port": 80}]}),
                None,
                false,
                Some(Duration::from_secs(5)),
            ),
            (
                json!({"sessionAffinity": "None", "ports": [{"port": 80}]}),
                None,
                false,
                None,
            ),
        ];
        for (spec, node_port, lb, affinity) in cases {
            let mut spec = spec;
            spec["clusterIP"] = json!("10.96.0.30");
            let table = build(
                &[svc(
                    json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": spec.clone()}),
                )],
                &[],
            );
            assert_eq!(table.len(), 1, "{spec}");
            assert_eq!(
                (table[0].node_port, table[0].load_balancer, table[0].affinity),
                (node_port, lb, affinity),
                "{spec}"
            );
        }
    }
}
