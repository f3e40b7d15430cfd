//! The `kube-dns` Service in `kube-system` and its endpoints, kept by the DNS server itself with server-side
//! apply: the Service at the 10th address of the Service range (kubeadm `GetDNSIP`), ports `dns` 53/UDP and
//! `dns-tcp` 53/TCP, and no selector, so that its EndpointSlice and Endpoints (pointing at where this server
//! really listens) are ours, not the endpoints controllers'.
//!
//! Deliberate difference from kubeadm: no selector and no `metrics` port (no CoreDNS pod behind it).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// The Service's namespace and name.
pub const NAMESPACE: &str = "kube-system";
/// The Service's name.
pub const NAME: &str = "kube-dns";
/// The field manager of the applies, and the EndpointSlice's `managed-by` value.
pub const FIELD_MANAGER: &str = "kubeling-dns";
/// The EndpointSlice's name.
pub const SLICE_NAME: &str = "kube-dns-kubeling";
/// The managed-by label's value on our EndpointSlice (the endpointslice controller leaves others alone).
pub const MANAGED_BY: &str = "dns.kubeling.io";

/// kubeadm `GetDNSIP`: index 10 of the Service range. The `kubernetes` Service holds index 1, so the range's
/// base is its IP minus one.
pub fn dns_service_ip(kubernetes_service_ip: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(kubernetes_service_ip).wrapping_sub(1).wrapping_add(10))
}

/// The address the endpoints name: the listen address, loopback for a wildcard one.
pub fn endpoint_addr(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), listen.port()),
        _ => listen,
    }
}

/// The Service, applied as a whole.
pub fn service(ip: Ipv4Addr, target_port: u16) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {
                "k8s-app": "kube-dns",
                "kubernetes.io/cluster-service": "true",
                "kubernetes.io/name": "CoreDNS",
            },
        },
        "spec": {
            "clusterIP": ip.to_string(),
            "clusterIPs": [ip.to_string()],
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": target_port},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": target_port},
            ],
        },
    })
}

/// The EndpointSlice: one ready endpoint at `addr`.
pub fn endpoint_slice(addr: SocketAddr) -> serde_json::Value {
    let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": SLICE_NAME,
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": NAME,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": family,
        "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true, "serving": true, "terminating": false}}],
        "ports": [
            {"name": "dns", "port": addr.port(), "protocol": "UDP"},
            {"name": "dns-tcp", "port": addr.port(), "protocol": "TCP"},
        ],
    })
}

/// The core Endpoints of the same name.
pub fn endpoints(addr: SocketAddr) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"k8s-app": "kube-dns"}},
        "subsets": [{
            "addresses": [{"ip": addr.ip().to_string()}],
            "ports": [
                {"name": "dns", "port": addr.port(), "protocol": "UDP"},
                {"name": "dns-tcp", "port": addr.port(), "protocol": "TCP"},
            ],
        }],
    })
}

/// Applies the Service, its EndpointSlice and its Endpoints; `listen` is where the server bound.
pub async fn ensure(client: &kube::Client, listen: SocketAddr) -> Result<Ipv4Addr, kube::Error> {
    let kubernetes: Service = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await?;
    let master = kubernetes
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .unwrap_or(Ipv4Addr::new(10, 96, 0, 1));
    let ip = dns_service_ip(master);
    let addr = endpoint_addr(listen);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &params, &Patch::Apply(service(ip, addr.port())))
        .await?;
    Api::<EndpointSlice>::namespaced(client.clone(), NAMESPACE)
        .patch(SLICE_NAME, &params, &Patch::Apply(endpoint_slice(addr)))
        .await?;
    Api::<Endpoints>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &params, &Patch::Apply(endpoints(addr)))
        .await?;
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dns_ip_is_the_tenth_of_the_range() {
        assert_eq!(
            dns_service_ip(Ipv4Addr::new(10, 96, 0, 1)),
            Ipv4Addr::new(10, 96, 0, 10)
        );
        assert_eq!(
            dns_service_ip(Ipv4Addr::new(10, 43, 0, 1)),
            Ipv4Addr::new(10, 43, 0, 10)
        );
    }

    #[test]
    fn objects_name_the_real_port() {
        let addr: SocketAddr = "0.0.0.0:5353".parse().unwrap();
        let addr = endpoint_addr(addr);
        let slice = endpoint_slice(addr);
        assert_eq!(slice["endpoints"][0]["addresses"][0], "127.0.0.1");
        assert_eq!(slice["ports"][1]["port"], 5353);
        assert_eq!(
            slice["metadata"]["labels"]["kubernetes.io/service-name"],
            "kube-dns"
        );
        let svc = service(Ipv4Addr::new(10, 96, 0, 10), 5353);
        assert_eq!(svc["spec"]["ports"][0]["name"], "dns");
        assert_eq!(svc["spec"]["ports"][1]["protocol"], "TCP");
        assert!(svc["spec"].get("selector").is_none());
    }
}
