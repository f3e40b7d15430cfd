//! What the cluster zone answers: a pure function from a question (name, type) and a view of the cluster's
//! Services and EndpointSlices to an [`Answer`], following the Kubernetes DNS specification 1.1.0
//! (kubernetes/dns `docs/specification.md`) and CoreDNS's `kubernetes` plugin with `pods insecure`, as
//! kubeadm, kind and k3s configure it. The server ([`crate::server`]) turns an [`Answer`] into a DNS message;
//! the watchers ([`crate::watch`]) keep the [`ClusterView`] current.
//!
//! All matching is case-insensitive: names are lower-cased before they get here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// CoreDNS `kubernetes` plugin: the default TTL of its records is 5 s (kubeadm's Corefile raises it to 30;
/// a development cluster's Services come and go, so the plugin default is kept).
pub const DEFAULT_TTL: u32 = 5;

/// The spec's `dns-version.<zone>` TXT answer.
pub const SCHEMA_VERSION: &str = "1.1.0";

/// `kubernetes.io/service-name`: the label tying an EndpointSlice to its Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The Services and EndpointSlices the zone is built from. The watchers' reflector stores implement it; the
/// tests use [`Objects`].
pub trait ClusterView: Send + Sync {
    /// The Service `namespace/name`.
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>>;
    /// Every Service (for reverse lookups and namespace existence).
    fn services(&self) -> Vec<Arc<Service>>;
    /// The EndpointSlices of the Service `namespace/name` (by the `kubernetes.io/service-name` label).
    fn endpoint_slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>>;
}

/// A plain in-memory [`ClusterView`].
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// Services.
    pub services: Vec<Arc<Service>>,
    /// EndpointSlices.
    pub slices: Vec<Arc<EndpointSlice>>,
}

impl ClusterView for Objects {
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services
            .iter()
            .find(|s| {
                s.metadata.namespace.as_deref() == Some(namespace) && s.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }

    fn services(&self) -> Vec<Arc<Service>> {
        self.services.clone()
    }

    fn endpoint_slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>> {
        self.slices
            .iter()
            .filter(|s| slice_of(s, namespace, service))
            .cloned()
            .collect()
    }
}

/// Whether `slice` belongs to the Service `namespace/service`.
pub fn slice_of(slice: &EndpointSlice, namespace: &str, service: &str) -> bool {
    slice.metadata.namespace.as_deref() == Some(namespace)
        && slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_SERVICE_NAME))
            .is_some_and(|s| s == service)
}

/// What the zone says about a question.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The name has records of the type: the answer section and the additional section.
    Records {
        /// Answer section.
        answers: Vec<Record>,
        /// Additional section (the A/AAAA records of SRV targets).
        additionals: Vec<Record>,
    },
    /// The name exists but has no record of this type (NOERROR, empty answer, SOA in authority).
    NoData,
    /// The name does not exist in the zone (NXDOMAIN, SOA in authority).
    NxDomain,
    /// Not the cluster's to answer: forward it to the upstream resolvers (names outside the zone and
    /// reverse lookups of addresses that are not the cluster's, as CoreDNS's `fallthrough`).
    Forward,
}

/// The cluster zone (`cluster.local`) and its settings.
#[derive(Debug, Clone)]
pub struct Zone {
    /// The cluster domain, lower case, without the trailing dot.
    pub domain: String,
    /// TTL of every record.
    pub ttl: u32,
    /// SOA serial (CoreDNS: the time of the last change; here the server's start time).
    pub serial: u32,
}

impl Zone {
    /// `cluster.local` with the default TTL.
    pub fn new(domain: &str, serial: u32) -> Zone {
        Zone {
            domain: domain.trim_end_matches('.').to_ascii_lowercase(),
            ttl: DEFAULT_TTL,
            serial,
        }
    }

    /// The zone's SOA, as CoreDNS writes it: `ns.dns.<zone>. hostmaster.<zone>. <serial> 7200 1800 86400 <ttl>`.
    pub fn soa(&self) -> Record {
        let origin = fqdn(&self.domain);
        let rdata = SOA::new(
            fqdn(&format!("ns.dns.{}", self.domain)),
            fqdn(&format!("hostmaster.{}", self.domain)),
            self.serial,
            7200,
            1800,
            86400,
            self.ttl,
        );
        Record::from_rdata(origin, self.ttl, RData::SOA(rdata))
    }

    /// Whether `name` (lower case, no trailing dot) is in this zone.
    pub fn contains(&self, name: &str) -> bool {
        name == self.domain || name.ends_with(&format!(".{}", self.domain))
    }

    /// Whether `name` (lower case, no trailing dot) is one this server answers rather than forwards:
    /// the cluster zone, or a reverse name.
    pub fn is_local(&self, name: &str) -> bool {
        self.contains(name) || name.ends_with(".in-addr.arpa") || name.ends_with(".ip6.arpa")
    }
}

fn fqdn(name: &str) -> Name {
    // Every name built here is made of labels from the API (DNS-1123) and the zone: valid.
    let mut n = Name::from_str(name).unwrap_or_else(|_| Name::root());
    n.set_fqdn(true);
    n
}

/// Answers `qname` (lower case, without the trailing dot) of type `qtype`. `owner` is the question's name as
/// asked, used as the owner of the answer records.
pub fn resolve(view: &dyn ClusterView, zone: &Zone, owner: &Name, qname: &str, qtype: RecordType) -> Answer {
    let qname = qname.trim_end_matches('.');
    if qname.ends_with(".in-addr.arpa") || qname.ends_with(".ip6.arpa") {
        return reverse(view, zone, owner, qname, qtype);
    }
    if !zone.contains(qname) {
        return Answer::Forward;
    }
    let rel: Vec<&str> = if qname == zone.domain {
        Vec::new()
    } else {
        qname[..qname.len() - zone.domain.len() - 1].split('.').collect()
    };
    let record = |rdata: RData| Record::from_rdata(owner.clone(), zone.ttl, rdata);
    match rel.as_slice() {
        [] => match qtype {
            RecordType::SOA => Answer::Records {
                answers: vec![Record::from_rdata(
                    owner.clone(),
                    zone.ttl,
                    zone.soa().data.clone(),
                )],
                additionals: Vec::new(),
            },
            _ => Answer::NoData,
        },
        ["dns-version"] => match qtype {
            RecordType::TXT => Answer::Records {
                answers: vec![record(RData::TXT(TXT::new(vec![SCHEMA_VERSION.to_owned()])))],
                additionals: Vec::new(),
            },
            _ => Answer::NoData,
        },
        ["svc"] | ["pod"] => Answer::NoData,
        [ns, "svc"] | [ns, "pod"] => {
            if view
                .services()
                .iter()
                .any(|s| s.metadata.namespace.as_deref() == Some(ns))
            {
                Answer::NoData
            } else {
                Answer::NxDomain
            }
        }
        [svc, ns, "svc"] => service_records(view, zone, owner, ns, svc, qtype),
        [host, svc, ns, "svc"] => endpoint_records(view, zone, owner, ns, svc, host, qtype),
        [port, proto, svc, ns, "svc"] if port.starts_with('_') && proto.starts_with('_') => {
            srv_records(view, zone, owner, ns, svc, &port[1..], &proto[1..], qtype)
        }
        [ip, _ns, "pod"] => pod_records(owner, zone, ip, qtype),
        _ => Answer::NxDomain,
    }
}

/// Only the A or AAAA records among `ips` that the question asks for; NODATA when the name has addresses of
/// the other family only.
fn address_answer(owner: &Name, ttl: u32, ips: &[IpAddr], qtype: RecordType) -> Answer {
    let answers: Vec<Record> = ips
        .iter()
        .filter_map(|ip| address_rdata(*ip, qtype))
        .map(|rdata| Record::from_rdata(owner.clone(), ttl, rdata))
        .collect();
    if answers.is_empty() {
        Answer::NoData
    } else {
        Answer::Records {
            answers,
            additionals: Vec::new(),
        }
    }
}

fn address_rdata(ip: IpAddr, qtype: RecordType) -> Option<RData> {
    match (ip, qtype) {
        (IpAddr::V4(v4), RecordType::A) => Some(RData::A(A(v4))),
        (IpAddr::V6(v6), RecordType::AAAA) => Some(RData::AAAA(AAAA(v6))),
        _ => None,
    }
}

/// Any-type address record, for the additional section.
fn address_record(name: &Name, ttl: u32, ip: IpAddr) -> Record {
    let rdata = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(name.clone(), ttl, rdata)
}

/// `clusterIP: None` (or unset, for ExternalName): no virtual IP, the name lists the endpoints.
pub fn is_headless(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_none_or(|ip| ip.is_empty() || ip == "None")
}

fn service_type(svc: &Service) -> &str {
    svc.spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("ClusterIP")
}

/// The Service's cluster IPs (`clusterIPs`, else `clusterIP`).
fn cluster_ips(svc: &Service) -> Vec<IpAddr> {
    let Some(spec) = &svc.spec else { return Vec::new() };
    let ips: Vec<&String> = match &spec.cluster_ips {
        Some(ips) if !ips.is_empty() => ips.iter().collect(),
        _ => spec.cluster_ip.iter().collect(),
    };
    ips.into_iter().filter_map(|ip| ip.parse().ok()).collect()
}

/// A ready endpoint of a headless Service: its addresses and the name it goes by in the zone.
#[derive(Debug, Clone, PartialEq)]
struct Endpoint {
    /// The endpoint's `hostname`, else its first address dashed (`10-0-0-5`), as CoreDNS.
    label: String,
    addresses: Vec<IpAddr>,
    /// `(name, protocol, port)` of the slice the endpoint is in.
    ports: Vec<(String, String, u16)>,
}

/// The ready endpoints of `ns/svc` from its slices. The spec: a nil `ready` counts as ready; the endpoints
/// controller already marks not-ready pods ready when the Service publishes not-ready addresses.
fn ready_endpoints(view: &dyn ClusterView, ns: &str, svc: &str) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for slice in view.endpoint_slices(ns, svc) {
        let ports: Vec<(String, String, u16)> = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.name.clone().unwrap_or_default().to_ascii_lowercase(),
                    p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                    u16::try_from(p.port?).ok()?,
                ))
            })
            .collect();
        for ep in &slice.endpoints {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            let addresses: Vec<IpAddr> = ep.addresses.iter().filter_map(|a| a.parse().ok()).collect();
            let Some(first) = addresses.first() else { continue };
            let label = match &ep.hostname {
                Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
                _ => dashed(*first),
            };
            out.push(Endpoint {
                label,
                addresses,
                ports: ports.clone(),
            });
        }
    }
    out
}

/// CoreDNS's endpoint name for an address: `10.0.0.5` → `10-0-0-5`, `fd00::5` → `fd00--5`.
pub fn dashed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => v6.to_string().replace(':', "-"),
    }
}

/// The address a pod name such as `10-0-0-5` (`pods insecure`: not checked against any pod) stands for.
pub fn undashed(label: &str) -> Option<IpAddr> {
    if let Ok(v4) = Ipv4Addr::from_str(&label.replace('-', ".")) {
        return Some(IpAddr::V4(v4));
    }
    Ipv6Addr::from_str(&label.replace('-', ":")).ok().map(IpAddr::V6)
}

fn service_records(
    view: &dyn ClusterView,
    zone: &Zone,
    owner: &Name,
    ns: &str,
    name: &str,
    qtype: RecordType,
) -> Answer {
    let Some(svc) = view.service(ns, name) else {
        return Answer::NxDomain;
    };
    if service_type(&svc) == "ExternalName" {
        let target = svc
            .spec
            .as_ref()
            .and_then(|s| s.external_name.as_deref())
            .unwrap_or_default();
        if target.is_empty() {
            return Answer::NxDomain;
        }
        return Answer::Records {
            answers: vec![Record::from_rdata(
                owner.clone(),
                zone.ttl,
                RData::CNAME(CNAME(fqdn(target))),
            )],
            additionals: Vec::new(),
        };
    }
    if is_headless(&svc) {
        let endpoints = ready_endpoints(view, ns, name);
        // The spec: a headless Service without ready endpoints does not exist in DNS.
        if endpoints.is_empty() {
            return Answer::NxDomain;
        }
        if qtype == RecordType::SRV {
            return srv_answer_from(zone, owner, ns, name, &svc, Some(endpoints), None, None).or_no_data();
        }
        let mut ips: Vec<IpAddr> = endpoints.iter().flat_map(|e| e.addresses.clone()).collect();
        ips.sort();
        ips.dedup();
        return address_answer(owner, zone.ttl, &ips, qtype);
    }
    if qtype == RecordType::SRV {
        return srv_answer_from(zone, owner, ns, name, &svc, None, None, None).or_no_data();
    }
    address_answer(owner, zone.ttl, &cluster_ips(&svc), qtype)
}

fn endpoint_records(
    view: &dyn ClusterView,
    zone: &Zone,
    owner: &Name,
    ns: &str,
    svc: &str,
    host: &str,
    qtype: RecordType,
) -> Answer {
    let Some(service) = view.service(ns, svc) else {
        return Answer::NxDomain;
    };
    if !is_headless(&service) || service_type(&service) == "ExternalName" {
        return Answer::NxDomain;
    }
    let ips: Vec<IpAddr> = ready_endpoints(view, ns, svc)
        .into_iter()
        .filter(|e| e.label == host)
        .flat_map(|e| e.addresses)
        .collect();
    if ips.is_empty() {
        return Answer::NxDomain;
    }
    address_answer(owner, zone.ttl, &ips, qtype)
}

#[allow(clippy::too_many_arguments)]
fn srv_records(
    view: &dyn ClusterView,
    zone: &Zone,
    owner: &Name,
    ns: &str,
    name: &str,
    port: &str,
    proto: &str,
    qtype: RecordType,
) -> Answer {
    let Some(svc) = view.service(ns, name) else {
        return Answer::NxDomain;
    };
    if service_type(&svc) == "ExternalName" {
        return Answer::NxDomain;
    }
    let endpoints = is_headless(&svc).then(|| ready_endpoints(view, ns, name));
    let answer = srv_answer_from(zone, owner, ns, name, &svc, endpoints, Some(port), Some(proto));
    match (answer, qtype) {
        (Answer::Records { .. }, t) if t != RecordType::SRV => Answer::NoData,
        (a, _) => a,
    }
}

/// SRV records of a Service: for a ClusterIP Service one per named port (matching `port`/`proto` when
/// given) pointing at the Service's name; for a headless one (`endpoints` given), endpoints × ports pointing
/// at each endpoint's name. The additional section carries the targets' addresses. CoreDNS answers SRV on
/// the bare Service name too, with every named port.
#[allow(clippy::too_many_arguments)]
fn srv_answer_from(
    zone: &Zone,
    owner: &Name,
    ns: &str,
    name: &str,
    svc: &Service,
    endpoints: Option<Vec<Endpoint>>,
    port: Option<&str>,
    proto: Option<&str>,
) -> Answer {
    let service_name = fqdn(&format!("{name}.{ns}.svc.{}", zone.domain));
    let matches = |pname: &str, pproto: &str| {
        !pname.is_empty() && port.is_none_or(|p| p == pname) && proto.is_none_or(|p| p == pproto)
    };
    // (port, target, addresses)
    let mut targets: Vec<(u16, Name, Vec<IpAddr>)> = Vec::new();
    match endpoints {
        None => {
            for p in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
                let pname = p.name.clone().unwrap_or_default().to_ascii_lowercase();
                let pproto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                if matches(&pname, &pproto) {
                    let Ok(number) = u16::try_from(p.port) else {
                        continue;
                    };
                    targets.push((number, service_name.clone(), cluster_ips(svc)));
                }
            }
        }
        Some(endpoints) => {
            for ep in endpoints {
                let target = fqdn(&format!("{}.{name}.{ns}.svc.{}", ep.label, zone.domain));
                for (pname, pproto, number) in &ep.ports {
                    if matches(pname, pproto) {
                        targets.push((*number, target.clone(), ep.addresses.clone()));
                    }
                }
            }
        }
    }
    if targets.is_empty() {
        return Answer::NxDomain;
    }
    // CoreDNS: every record has priority 0 and an equal share of 100 as weight.
    let weight = (100 / targets.len()).max(1) as u16;
    let mut answers = Vec::new();
    let mut additionals: Vec<Record> = Vec::new();
    for (number, target, addresses) in targets {
        answers.push(Record::from_rdata(
            owner.clone(),
            zone.ttl,
            RData::SRV(SRV::new(0, weight, number, target.clone())),
        ));
        for ip in addresses {
            let extra = address_record(&target, zone.ttl, ip);
            if !additionals.contains(&extra) {
                additionals.push(extra);
            }
        }
    }
    Answer::Records { answers, additionals }
}

impl Answer {
    /// The name exists (it is a Service's): no SRV target is NODATA, not NXDOMAIN.
    fn or_no_data(self) -> Answer {
        match self {
            Answer::NxDomain => Answer::NoData,
            a => a,
        }
    }
}

fn pod_records(owner: &Name, zone: &Zone, label: &str, qtype: RecordType) -> Answer {
    match undashed(label) {
        Some(ip) => address_answer(owner, zone.ttl, &[ip], qtype),
        None => Answer::NxDomain,
    }
}

/// The address a reverse name stands for: `5.0.96.10.in-addr.arpa` → 10.96.0.5; `ip6.arpa` nibbles.
pub fn reverse_ip(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let mut octets: Vec<u8> = rest.split('.').map(|o| o.parse().ok()).collect::<Option<_>>()?;
        if octets.len() != 4 {
            return None;
        }
        octets.reverse();
        return Some(IpAddr::V4(Ipv4Addr::new(
            octets[0], octets[1], octets[2], octets[3],
        )));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = rest
        .split('.')
        .map(|n| u8::from_str_radix(n, 16).ok().filter(|_| n.len() == 1))
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, pair) in nibbles.iter().rev().collect::<Vec<_>>().chunks(2).enumerate() {
        bytes[i] = (pair[0] << 4) | pair[1];
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

/// PTR for a ClusterIP (`<svc>.<ns>.svc.<zone>`) or a headless endpoint (`<hostname>.<svc>.<ns>.svc.<zone>`);
/// any other address falls through to the upstream resolvers (CoreDNS `fallthrough in-addr.arpa ip6.arpa`).
fn reverse(view: &dyn ClusterView, zone: &Zone, owner: &Name, qname: &str, qtype: RecordType) -> Answer {
    let Some(ip) = reverse_ip(qname) else {
        return Answer::Forward;
    };
    let mut targets = Vec::new();
    for svc in view.services() {
        let (Some(ns), Some(name)) = (svc.metadata.namespace.as_deref(), svc.metadata.name.as_deref()) else {
            continue;
        };
        if !is_headless(&svc) && cluster_ips(&svc).contains(&ip) {
            targets.push(fqdn(&format!("{name}.{ns}.svc.{}", zone.domain)));
        } else if is_headless(&svc) && service_type(&svc) != "ExternalName" {
            for ep in ready_endpoints(view, ns, name) {
                if ep.addresses.contains(&ip) {
                    targets.push(fqdn(&format!("{}.{name}.{ns}.svc.{}", ep.label, zone.domain)));
                }
            }
        }
    }
    if targets.is_empty() {
        return Answer::Forward;
    }
    if qtype != RecordType::PTR {
        return Answer::NoData;
    }
    Answer::Records {
        answers: targets
            .into_iter()
            .map(|t| Record::from_rdata(owner.clone(), zone.ttl, RData::PTR(PTR(t))))
            .collect(),
        additionals: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
