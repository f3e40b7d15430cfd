//! The service strategy: defaulting and cluster IP / node port allocation (upstream
//! `pkg/registry/core/service`), and the `kubernetes` service in `default`.
//!
//! Cluster IPs come from 10.96.0.0/12 as upstream's allocator hands them out (KEP-3070): dynamic allocations
//! take the upper band first and the lower, static band (the first `min(max(16, size/16), 256)` addresses)
//! only when the upper one is full; index 1 is the `kubernetes` Service's and index 10 the cluster DNS's
//! (`kube-dns`, kubeadm `GetDNSIP`), which is never handed out dynamically, only to a request naming it.
//! Deliberate difference: lowest-free-first within a band (upstream is random), so IPs are predictable. The node
//! agent's proxy (`node/src/proxy`) routes them.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{Registry, Selection, WriteOptions, ipaddress, meta_str, nodeport, resources};
use crate::error::ApiError;

const SERVICE_CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SERVICE_CIDR_SIZE: u32 = 1 << 20;
/// Upstream reserves the first address of the range for the `kubernetes` service.
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// kubeadm `GetDNSIP`: the cluster DNS Service's index in the range (10.96.0.10).
const DNS_SERVICE_INDEX: u32 = 10;

/// The order in which dynamic allocation tries the range's addresses (offsets from the base): the upper band
/// first, then the static band (upstream `calculateRangeOffset`: `min(max(16, size/16), 256)`), never the
/// network and broadcast addresses, the `kubernetes` Service's index 1 or the DNS index 10.
fn dynamic_offsets(size: u32) -> impl Iterator<Item = u32> {
    let band = (size / 16).clamp(16, 256).min(size);
    (band..size - 1)
        .chain(1..band)
        .filter(|&i| i != 1 && i != DNS_SERVICE_INDEX)
}

/// The cluster IPs and node ports the stored Services hold.
pub(super) fn used(registry: &Registry) -> (HashSet<String>, HashSet<i64>) {
    used_by_others(registry, None)
}

/// The cluster IPs and node ports the stored Services but `except` (namespace, name) hold.
fn used_by_others(registry: &Registry, except: Option<(&str, &str)>) -> (HashSet<String>, HashSet<i64>) {
    let info = resources::find("", "v1", "services").expect("services are served");
    let all = registry.list(info, None, &Selection::default(), None, None);
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for s in all.items {
        if except.is_some_and(|(ns, name)| {
            let v = s.value();
            meta_str(&v, "namespace") == Some(ns) && meta_str(&v, "name") == Some(name)
        }) {
            continue;
        }
        if let Some(ip) = s.value().pointer("/spec/clusterIP").and_then(Value::as_str) {
            ips.insert(ip.to_string());
        }
        for p in s
            .value()
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
                ports.insert(n);
            }
        }
    }
    (ips, ports)
}

/// The first free address in dynamic order, skipping `used`.
fn first_free(used: &HashSet<String>) -> Result<String, ApiError> {
    dynamic_offsets(SERVICE_CIDR_SIZE)
        .map(|i| Ipv4Addr::from(SERVICE_CIDR_BASE + i).to_string())
        .find(|ip| !used.contains(ip))
        .ok_or_else(|| ApiError::internal("the service IP range is full"))
}

fn set_ip(spec: &mut Value, ip: &str) {
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
}

/// A dynamically allocated IP was reserved by another API server first: the next free one, not in `lost`.
pub(super) fn reallocate(
    registry: &Registry,
    service: &mut Value,
    lost: &HashSet<String>,
) -> Result<(), ApiError> {
    let (mut used, _) = used(registry);
    used.extend(super::ipaddress::reserved(registry));
    used.extend(lost.iter().cloned());
    let ip = first_free(&used)?;
    set_ip(&mut service["spec"], &ip);
    Ok(())
}

/// A 422 about a requested cluster IP, the value printed as Go prints a `[]string` (upstream's message).
fn ip_refused(service: &Value, ip: &str, detail: &str) -> ApiError {
    ApiError::invalid(
        "Service",
        "",
        service
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(""),
        &[super::workload::invalid_printed(
            "spec.clusterIPs",
            &format!("[]string{{{ip:?}}}"),
            &format!("failed to allocate IP {ip}: {detail}"),
        )],
    )
}

/// 422 for a requested cluster IP another Service holds (upstream's message).
pub(super) fn ip_taken(service: &Value, ip: &str) -> ApiError {
    ip_refused(service, ip, "provided IP is already allocated")
}

/// What is wrong with a requested cluster IP (not `None`), if anything: not an IP address (upstream's
/// validation), or not in the service range (upstream's allocator), or not written as the range's addresses
/// are (one address, one IPAddress name).
fn check_requested_ip(service: &Value, ip: &str) -> Result<(), ApiError> {
    let name = service
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Canonical form only: one address, one IPAddress name.
    let Some(parsed) = ip
        .parse::<std::net::IpAddr>()
        .ok()
        .filter(|p| p.to_string() == ip)
    else {
        return Err(ApiError::invalid(
            "Service",
            "",
            name,
            &[crate::error::FieldError::invalid(
                "spec.clusterIPs[0]",
                &json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )],
        ));
    };
    let in_range = match parsed {
        std::net::IpAddr::V4(v4) => {
            (u32::from(v4) - SERVICE_CIDR_BASE.min(u32::from(v4))) < SERVICE_CIDR_SIZE
                && u32::from(v4) >= SERVICE_CIDR_BASE
        }
        std::net::IpAddr::V6(_) => false,
    };
    if !in_range {
        let base = Ipv4Addr::from(SERVICE_CIDR_BASE);
        let bits = 32 - SERVICE_CIDR_SIZE.trailing_zeros();
        return Err(ip_refused(
            service,
            ip,
            &format!(
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {base}/{bits}"
            ),
        ));
    }
    Ok(())
}

/// Defaulting and allocation on create. The registry holds its allocation lock around this and the write.
pub fn prepare_create(registry: &Registry, obj: &mut Value) -> Result<(), ApiError> {
    obj.as_object_mut().map(|o| o.remove("status"));
    obj["status"] = json!({"loadBalancer": {}});
    let named = json!({"metadata": {"name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null)}});
    let spec = obj.get_mut("spec").filter(|s| s.is_object());
    let Some(spec) = spec else {
        obj["spec"] = json!({});
        return prepare_create(registry, obj);
    };
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    spec["type"] = json!(ty);
    default_spec(spec);
    let (mut ips, node_ports) = used(registry);
    forbid_node_ports(spec, named["metadata"]["name"].as_str().unwrap_or(""))?;
    if ty != "ExternalName" {
        let want = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if want.is_empty() {
            // Skip IPs reserved by any API server, whose Services may not be written yet.
            ips.extend(super::ipaddress::reserved(registry));
            let ip = first_free(&ips)?;
            set_ip(spec, &ip);
        } else if want != "None" && {
            check_requested_ip(&named, &want)?;
            ips.contains(&want)
        } {
            return Err(ip_taken(&named, &want));
        } else {
            spec["clusterIPs"] = json!([want]);
        }
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
        spec["internalTrafficPolicy"] = spec
            .get("internalTrafficPolicy")
            .cloned()
            .unwrap_or(json!("Cluster"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        spec["externalTrafficPolicy"] = spec
            .get("externalTrafficPolicy")
            .cloned()
            .unwrap_or(json!("Cluster"));
        let Some(ports) = obj["spec"].get_mut("ports").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        // Requested ports are checked against the stored Services here, and against other servers'
        // reservations when this create reserves them; dynamic ones skip both.
        let mut avoid = node_ports.clone();
        avoid.extend(nodeport::reserved(registry, None));
        check_and_allocate_node_ports(ports, &named, &HashSet::new(), &node_ports, avoid)?;
    }
    Ok(())
}

/// Node ports of `ports` not in `held` (the Service's own) must be in the range and not in `taken`; one
/// left out gets the lowest free port, not in `avoid` nor requested by another of `ports` (one Service may
/// name a port twice, for TCP and UDP). Upstream's 422s name the port's index.
fn check_and_allocate_node_ports(
    ports: &mut [Value],
    named: &Value,
    held: &HashSet<i64>,
    taken: &HashSet<i64>,
    mut avoid: HashSet<i64>,
) -> Result<(), ApiError> {
    let node_port = |p: &Value| p.get("nodePort").and_then(Value::as_i64);
    for (index, port) in ports
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, node_port(p)?)))
    {
        if held.contains(&port) {
            continue;
        }
        if !nodeport::RANGE.contains(&port) {
            return Err(nodeport::out_of_range(named, index, port));
        }
        if taken.contains(&port) {
            return Err(nodeport::taken(named, index, port));
        }
    }
    avoid.extend(ports.iter().filter_map(node_port));
    for p in ports.iter_mut() {
        if node_port(p).is_none()
            && let Some(port) = nodeport::RANGE.clone().find(|n| !avoid.contains(n))
        {
            avoid.insert(port);
            p["nodePort"] = json!(port);
        }
    }
    Ok(())
}

/// What the client of a Service's create named itself, read before defaulting: then another Service's
/// reservation of it is a 422 rather than a reason to allocate another.
pub(super) struct Requested {
    ip: bool,
    /// The indexes of the ports with a node port.
    ports: HashSet<usize>,
}

impl Requested {
    pub(super) fn of(service: &Value) -> Requested {
        Requested {
            ip: ipaddress::cluster_ip(service).is_some(),
            ports: service
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, p)| p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0))
                .map(|(i, _)| i)
                .collect(),
        }
    }
}

/// What a Service's create reserved before its write (the IPAddress and the node port records it made).
pub(super) struct Reserved {
    ip: Option<String>,
    ports: Vec<i64>,
}

/// Reserve the cluster IP and node ports `prepare_create` gave `service` (about to be created in `ns`),
/// or others when another API server took them meanwhile. On an error nothing stays reserved.
pub(super) async fn reserve(
    registry: &Registry,
    service: &mut Value,
    ns: &str,
    requested: &Requested,
) -> Result<Reserved, ApiError> {
    let ip = ipaddress::reserve(registry, service, ns, requested.ip).await?;
    match nodeport::reserve(registry, service, ns, &requested.ports).await {
        Ok(ports) => Ok(Reserved { ip, ports }),
        Err(e) => {
            if let Some(ip) = ip {
                let name = meta_str(service, "name").unwrap_or("");
                ipaddress::release(registry, &ip, ns, name).await;
            }
            Err(e)
        }
    }
}

impl Reserved {
    /// The Service `ns/name` was not written: give back what its create reserved.
    pub(super) async fn release(self, registry: &Registry, ns: &str, name: &str) {
        if let Some(ip) = self.ip {
            ipaddress::release(registry, &ip, ns, name).await;
        }
        nodeport::release(registry, &self.ports, ns, name).await;
    }
}

/// After a write of a Service: release its cluster IP and node ports when the write deleted it; make its
/// node ports' records follow an update.
pub(super) async fn after_write(
    registry: &Registry,
    info: &super::ResourceInfo,
    written: &crate::storage::Written,
) {
    if (info.group, info.plural) != ("", "services") {
        return;
    }
    let service = written.object.value();
    if written.event == Some(crate::watch::EventType::Modified) {
        nodeport::sync(registry, &service).await;
        return;
    }
    if written.event != Some(crate::watch::EventType::Deleted) {
        return;
    }
    let ns = meta_str(&service, "namespace").unwrap_or("");
    let name = meta_str(&service, "name").unwrap_or("");
    if let Some(ip) = ipaddress::cluster_ip(&service) {
        ipaddress::release(registry, ip, ns, name).await;
    }
    nodeport::release(registry, &nodeport::node_ports(&service), ns, name).await;
}

fn default_spec(spec: &mut Value) {
    // Protobuf bodies carry Go's non-pointer zeros; 0 means "not set" for these ports, as upstream reads it.
    if spec.get("healthCheckNodePort").and_then(Value::as_i64) == Some(0) {
        spec.as_object_mut().map(|o| o.remove("healthCheckNodePort"));
    }
    for p in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if p.get("nodePort").and_then(Value::as_i64) == Some(0) {
            p.as_object_mut().map(|o| o.remove("nodePort"));
        }
    }
    if spec.get("sessionAffinity").is_none() {
        spec["sessionAffinity"] = json!("None");
    }
    for p in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if p.get("protocol").is_none() {
            p["protocol"] = json!("TCP");
        }
        if p.get("targetPort").is_none()
            && let Some(port) = p.get("port").cloned()
        {
            p["targetPort"] = port;
        }
    }
}

fn needs_node_ports(ty: &str) -> bool {
    ty == "NodePort" || ty == "LoadBalancer"
}

fn type_of(spec: &Value) -> &str {
    spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP")
}

/// Upstream's validation: no node port on a ClusterIP Service.
fn forbid_node_ports(spec: &Value, name: &str) -> Result<(), ApiError> {
    let with_node_port = spec
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .position(|p| p.get("nodePort").and_then(Value::as_i64).is_some());
    match with_node_port {
        Some(index) if type_of(spec) == "ClusterIP" => Err(ApiError::invalid(
            "Service",
            "",
            name,
            &[crate::error::FieldError::forbidden(
                format!("spec.ports[{index}].nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            )],
        )),
        _ => Ok(()),
    }
}

/// Node ports the new ports leave out are those of the old ports of the same name, unless another new
/// port has that value (upstream's `patchAllocatedValues`).
fn keep_allocated_node_ports(new_ports: &mut [Value], old_ports: &[Value]) {
    let node_port = |p: &Value| p.get("nodePort").and_then(Value::as_i64);
    let kept: HashSet<i64> = new_ports.iter().filter_map(node_port).collect();
    let by_name: std::collections::HashMap<&str, i64> = old_ports
        .iter()
        .filter_map(|p| Some((p.get("name").and_then(Value::as_str).unwrap_or(""), node_port(p)?)))
        .collect();
    for p in new_ports.iter_mut() {
        if node_port(p).is_none()
            && let Some(&old) = by_name.get(p.get("name").and_then(Value::as_str).unwrap_or(""))
            && !kept.contains(&old)
        {
            p["nodePort"] = json!(old);
        }
    }
}

/// A change to a type without node ports drops the node ports the client left as they were (upstream's
/// `dropTypeDependentFields`); one it set itself stays, and is refused.
fn drop_unchanged_node_ports(new_ports: &mut [Value], old_ports: &[Value]) {
    let old: HashSet<i64> = old_ports
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .collect();
    for p in new_ports.iter_mut() {
        if p.get("nodePort")
            .and_then(Value::as_i64)
            .is_some_and(|n| old.contains(&n))
            && let Some(o) = p.as_object_mut()
        {
            o.remove("nodePort");
        }
    }
}

/// Update: allocated fields are kept when the new spec leaves them out (as upstream); the cluster IP may
/// not change (but to or from ExternalName); node ports are kept, checked and allocated as on create. The
/// records of the node ports follow after the write ([`after_write`]).
pub fn prepare_update(registry: &Registry, new: &mut Value, old: &Value) -> Result<(), ApiError> {
    let ns = meta_str(old, "namespace").unwrap_or("").to_string();
    let name = meta_str(old, "name").unwrap_or("").to_string();
    let Some(spec) = new.get_mut("spec").filter(|s| s.is_object()) else {
        return Ok(());
    };
    default_spec(spec);
    for f in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "internalTrafficPolicy",
        "type",
    ] {
        if spec.get(f).is_none()
            && let Some(v) = old.pointer(&format!("/spec/{f}"))
        {
            spec[f] = v.clone();
        }
    }
    let empty = Value::Null;
    let old_spec = old.get("spec").unwrap_or(&empty);
    let (old_ty, new_ty) = (type_of(old_spec).to_string(), type_of(spec).to_string());
    if old_ty != "ExternalName"
        && new_ty != "ExternalName"
        && let Some(old_ip) = ipaddress::cluster_ip(old)
        && let Some(new_ip) = spec.get("clusterIP").and_then(Value::as_str)
        && new_ip != old_ip
    {
        return Err(ApiError::invalid(
            "Service",
            "",
            &name,
            &[crate::error::FieldError::invalid(
                "spec.clusterIPs[0]",
                &json!(new_ip),
                "may not change once set",
            )],
        ));
    }
    let old_ports: Vec<Value> = old_spec
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    if needs_node_ports(&old_ty) && !needs_node_ports(&new_ty) {
        drop_unchanged_node_ports(ports, &old_ports);
    }
    if needs_node_ports(&old_ty) && needs_node_ports(&new_ty) {
        keep_allocated_node_ports(ports, &old_ports);
    }
    forbid_node_ports(spec, &name)?;
    if !needs_node_ports(&new_ty) {
        return Ok(());
    }
    // New node ports: in the range and free, as on create; this Service's own do not count.
    let held: HashSet<i64> = nodeport::node_ports(old).into_iter().collect();
    let (_, mut taken) = used_by_others(registry, Some((&ns, &name)));
    taken.extend(nodeport::reserved(registry, Some((&ns, &name))));
    let named = json!({"metadata": {"name": name}});
    let ports = spec["ports"].as_array_mut().expect("checked above");
    let avoid = taken.clone();
    check_and_allocate_node_ports(ports, &named, &held, &taken, avoid)?;
    Ok(())
}

/// The `kubernetes` service in `default`, as upstream's master endpoint reconciler makes it.
pub async fn bootstrap(registry: &Registry) -> Result<(), ApiError> {
    let info = resources::find("", "v1", "services").expect("services are served");
    if registry
        .storage()
        .get(&info.key(Some("default"), "kubernetes"))
        .is_some()
    {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": KUBERNETES_SERVICE_IP, "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}
    });
    match registry
        .create(info, Some("default"), body, &WriteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.reason == "AlreadyExists" => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_allocation_takes_the_upper_band_first_and_never_the_dns_ip() {
        assert_eq!(dynamic_offsets(SERVICE_CIDR_SIZE).next(), Some(256));
        // A /24 (band 16): 16..255, then 2..16 without 10.
        let small: Vec<u32> = dynamic_offsets(256).collect();
        assert_eq!(small[0], 16);
        assert_eq!(small[238], 255 - 1);
        assert_eq!(&small[239..], &[2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15]);
        assert!(!dynamic_offsets(SERVICE_CIDR_SIZE).any(|i| i == DNS_SERVICE_INDEX || i == 1 || i == 0));
    }

    fn ports(v: Value) -> Vec<Value> {
        v.as_array().unwrap().clone()
    }

    #[test]
    fn an_update_keeps_the_node_ports_it_leaves_out_by_port_name() {
        let old = ports(json!([{"name": "http", "port": 80, "nodePort": 30000},
                               {"name": "https", "port": 443, "nodePort": 30001}]));
        for (new, want) in [
            // Left out: kept, matched by name (the port number may change).
            (
                json!([{"name": "http", "port": 8080}, {"name": "https", "port": 443}]),
                json!([{"name": "http", "port": 8080, "nodePort": 30000},
                       {"name": "https", "port": 443, "nodePort": 30001}]),
            ),
            // Set: as set.
            (
                json!([{"name": "http", "port": 80, "nodePort": 30005}]),
                json!([{"name": "http", "port": 80, "nodePort": 30005}]),
            ),
            // Another new port took the old value: not given twice.
            (
                json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9, "nodePort": 30000}]),
                json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9, "nodePort": 30000}]),
            ),
            // A new name: nothing to keep.
            (
                json!([{"name": "grpc", "port": 90}]),
                json!([{"name": "grpc", "port": 90}]),
            ),
        ] {
            let mut got = ports(new.clone());
            keep_allocated_node_ports(&mut got, &old);
            assert_eq!(Value::from(got), want, "{new}");
        }
    }

    #[test]
    fn a_type_without_node_ports_drops_only_those_left_as_they_were() {
        let old = ports(json!([{"name": "http", "port": 80, "nodePort": 30000}]));
        for (new, want) in [
            (
                json!([{"name": "http", "port": 80, "nodePort": 30000}]),
                json!([{"name": "http", "port": 80}]),
            ),
            // Changed by the client: kept, for validation to refuse.
            (
                json!([{"name": "http", "port": 80, "nodePort": 30007}]),
                json!([{"name": "http", "port": 80, "nodePort": 30007}]),
            ),
        ] {
            let mut got = ports(new.clone());
            drop_unchanged_node_ports(&mut got, &old);
            assert_eq!(Value::from(got), want, "{new}");
        }
    }
}
