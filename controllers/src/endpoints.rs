//! The Endpoints controller (`pkg/controller/endpoint/endpoints_controller.go`) and the rules it shares
//! with the EndpointSlice controller (`staging/src/k8s.io/endpointslice/util/controller_utils.go`,
//! `podutil.FindPort`).
//!
//! For every Service with a selector (not ExternalName) it writes the Endpoints object of the same name:
//! the matching pods with an IP, ready ones under `addresses`, the others under `notReadyAddresses`, one
//! port per Service port resolved per pod, subsets repacked. [`desired_subsets`] and [`plan`] decide;
//! [`Controller::sync`] reads the caches, calls them, and writes only on change. The Endpoints of a deleted
//! Service is deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service, ServicePort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer, key, key_of, split_key};
use crate::{Context, Error, Reconciler, WorkQueue, podutil, run_workers, selector};

/// kube-controller-manager `--concurrent-endpoint-syncs`.
pub const WORKERS: usize = 5;
/// upstream `maxCapacity`: addresses kept in one Endpoints object.
pub const MAX_CAPACITY: usize = 1000;
/// upstream `v1.EndpointsOverCapacity`.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// upstream `v1.EndpointsLastChangeTriggerTime`.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// upstream `v1.IsHeadlessService`.
pub const HEADLESS: &str = "service.kubernetes.io/headless";

// ---- rules shared with the EndpointSlice controller ----

/// Only Services with a selector and not of type ExternalName get endpoints from the controllers.
pub fn service_wants_endpoints(svc: &Service) -> bool {
    let spec = svc.spec.as_ref();
    spec.and_then(|s| s.selector.as_ref()).is_some()
        && spec.and_then(|s| s.type_.as_deref()) != Some("ExternalName")
}

/// The Service's selector (empty when none).
pub fn service_selector(svc: &Service) -> BTreeMap<String, String> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default()
}

/// Whether `pod` is selected by `svc` (same namespace, every selector pair).
pub fn selects(svc: &Service, pod: &Pod) -> bool {
    svc.metadata.namespace == pod.metadata.namespace
        && selector::map_matches(&service_selector(svc), pod.metadata.labels.as_ref())
}

/// upstream `ShouldPodBeInEndpoints`: not terminal, has an IP, and (unless `include_terminating`) not
/// being deleted.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if podutil::is_terminal(pod) {
        return false;
    }
    let status = pod.status.as_ref();
    let has_ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty())
        || status
            .and_then(|s| s.pod_ips.as_ref())
            .is_some_and(|ips| !ips.is_empty());
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// upstream `ShouldSetHostname`: the pod names a hostname and sits in the Service's subdomain.
pub fn hostname_for(pod: &Pod, svc: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace)
        .then(|| hostname.to_string())
}

fn protocol(p: Option<&str>) -> &str {
    p.unwrap_or("TCP")
}

/// upstream `podutil.FindPort`: an int targetPort as given; a named one looked up in the containers'
/// (and sidecar init containers') ports with the same protocol.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && protocol(p.protocol.as_deref()) == protocol(port.protocol.as_deref())
                })
                .map(|p| p.container_port)
        }
    }
}

/// The Service's IP family: the first of `spec.ipFamilies`, else guessed from the cluster IP (IPv4).
pub fn service_ipv6(svc: &Service) -> bool {
    let spec = svc.spec.as_ref();
    if let Some(f) = spec.and_then(|s| s.ip_families.as_ref()).and_then(|f| f.first()) {
        return f == "IPv6";
    }
    spec.and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| ip.contains(':'))
}

/// The pod's IPs of one family (`status.podIPs`, else `status.podIP`).
pub fn pod_ips(pod: &Pod, ipv6: bool) -> Vec<String> {
    let status = pod.status.as_ref();
    let mut ips: Vec<String> = status
        .and_then(|s| s.pod_ips.as_ref())
        .map(|v| v.iter().map(|p| p.ip.clone()).collect())
        .unwrap_or_default();
    if ips.is_empty()
        && let Some(ip) = status.and_then(|s| s.pod_ip.clone())
    {
        ips.push(ip);
    }
    ips.retain(|ip| !ip.is_empty() && ip.contains(':') == ipv6);
    ips
}

/// A `targetRef` to a pod.
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// Headless: `clusterIP: None` (upstream `!helper.IsServiceIPSet`).
pub fn is_headless(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_none_or(|ip| ip.is_empty() || ip == "None")
}

fn publish_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// The Services of the pod's namespace that select it.
pub fn services_for_pod(services: &Informer<Service>, pod: &Pod) -> Vec<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    services
        .list_ns(ns)
        .iter()
        .filter(|s| selects(s, pod))
        .map(|s| key_of(s.as_ref()))
        .collect()
}

/// Queue the Services selecting a changed pod (before and after the change).
pub fn enqueue_pod_services(queue: &Arc<WorkQueue>, services: &Informer<Service>, change: &Change<'_, Pod>) {
    let mut keys = BTreeSet::new();
    if let Change::Updated { old, .. } = change {
        keys.extend(services_for_pod(services, old));
    }
    keys.extend(services_for_pod(services, change.object()));
    for k in keys {
        queue.add(k);
    }
}

// ---- the Endpoints decision ----

fn address_key(a: &EndpointAddress) -> (String, String) {
    (
        a.ip.clone(),
        a.target_ref
            .as_ref()
            .and_then(|r| r.uid.clone())
            .unwrap_or_default(),
    )
}

/// The subsets the Service should have (upstream `syncService`'s loop, then `RepackSubsets`).
pub fn desired_subsets(svc: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let tolerate = publish_not_ready(svc);
    let ipv6 = service_ipv6(svc);
    let ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    // (address, port or sentinel, ready) entries, as upstream's per-pod subsets before repacking.
    let mut entries: Vec<(EndpointAddress, Option<EndpointPort>, bool)> = Vec::new();
    let mut sorted: Vec<&Arc<Pod>> = pods.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pod in sorted {
        if !should_pod_be_in_endpoints(pod, tolerate) {
            continue;
        }
        let Some(ip) = pod_ips(pod, ipv6).into_iter().next() else {
            continue;
        };
        let addr = EndpointAddress {
            ip,
            hostname: hostname_for(pod, svc),
            node_name: Some(podutil::node_name(pod).to_string()),
            target_ref: Some(pod_ref(pod)),
        };
        let ready = tolerate || podutil::is_ready(pod);
        if ports.is_empty() {
            if is_headless(svc) {
                entries.push((addr, None, ready));
            }
            continue;
        }
        for p in &ports {
            let Some(n) = find_port(pod, p) else { continue };
            let epp = EndpointPort {
                name: p.name.clone(),
                port: n,
                protocol: Some(protocol(p.protocol.as_deref()).to_string()),
                app_protocol: p.app_protocol.clone(),
            };
            entries.push((addr.clone(), Some(epp), ready));
        }
    }
    repack(entries)
}

fn port_key(p: &Option<EndpointPort>) -> (String, i32, String, String) {
    match p {
        None => (String::new(), -1, String::new(), String::new()),
        Some(p) => (
            p.name.clone().unwrap_or_default(),
            p.port,
            p.protocol.clone().unwrap_or_default(),
            p.app_protocol.clone().unwrap_or_default(),
        ),
    }
}

/// upstream `RepackSubsets`: addresses that offer the same set of ports share a subset; not ready wins
/// over ready for an address seen both ways; everything sorted.
fn repack(entries: Vec<(EndpointAddress, Option<EndpointPort>, bool)>) -> Vec<EndpointSubset> {
    type AddrKey = (String, String);
    let mut addrs: BTreeMap<AddrKey, EndpointAddress> = BTreeMap::new();
    type PortKey = (String, i32, String, String);
    type Offered = (Option<EndpointPort>, BTreeMap<AddrKey, bool>);
    let mut by_port: BTreeMap<PortKey, Offered> = BTreeMap::new();
    for (a, p, ready) in entries {
        let k = address_key(&a);
        addrs.entry(k.clone()).or_insert(a);
        let slot = by_port
            .entry(port_key(&p))
            .or_insert_with(|| (p.clone(), BTreeMap::new()));
        let e = slot.1.entry(k).or_insert(ready);
        *e = *e && ready;
    }
    // Address sets (with readiness) → the ports they offer.
    let mut by_set: BTreeMap<Vec<(AddrKey, bool)>, Vec<EndpointPort>> = BTreeMap::new();
    for (_, (p, set)) in by_port {
        let key: Vec<(AddrKey, bool)> = set.into_iter().collect();
        let ports = by_set.entry(key).or_default();
        if let Some(p) = p {
            ports.push(p);
        }
    }
    by_set
        .into_iter()
        .map(|(set, mut ports)| {
            ports.sort_by_key(|p| port_key(&Some(p.clone())));
            let pick = |want: bool| -> Option<Vec<EndpointAddress>> {
                let v: Vec<EndpointAddress> = set
                    .iter()
                    .filter(|(_, r)| *r == want)
                    .map(|(k, _)| addrs[k].clone())
                    .collect();
                (!v.is_empty()).then_some(v)
            };
            EndpointSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

/// upstream `truncateEndpoints`: past [`MAX_CAPACITY`] addresses, not-ready ones go first (or, with more
/// ready than that, all not-ready and the ready ones cut), proportionally per subset. True if cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let ready: usize = subsets
        .iter()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    let not_ready: usize = subsets
        .iter()
        .map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len))
        .sum();
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, ready)
    } else {
        (MAX_CAPACITY - ready, not_ready)
    };
    let mut can_add = max;
    for s in subsets.iter_mut() {
        let list = if truncate_ready {
            s.addresses.as_mut()
        } else {
            s.not_ready_addresses.as_mut()
        };
        let n = list.as_ref().map_or(0, |l| l.len());
        let share = ((n as f64 / total as f64) * max as f64).ceil() as usize;
        let keep = share.min(can_add);
        if let Some(l) = list {
            l.truncate(keep);
            can_add -= l.len();
        }
        if truncate_ready {
            s.not_ready_addresses = None;
        }
    }
    true
}

/// What to write for a Service.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nothing differs.
    Keep,
    /// Create this Endpoints object.
    Create(Endpoints),
    /// Replace the existing one with this.
    Update(Endpoints),
}

/// The Endpoints object the Service should have, against the one cached (upstream `syncService` from
/// "See if there's actually an update here"). `trigger_time` is the newest change seen (RFC 3339).
pub fn plan(
    svc: &Service,
    pods: &[Arc<Pod>],
    current: Option<&Endpoints>,
    trigger_time: Option<String>,
) -> Plan {
    let mut subsets = desired_subsets(svc, pods);
    let svc_labels = svc.metadata.labels.clone().unwrap_or_default();
    if let Some(cur) = current {
        let mut labels = cur.metadata.labels.clone().unwrap_or_default();
        labels.remove(HEADLESS);
        let total: usize = subsets
            .iter()
            .map(|s| {
                s.addresses.as_ref().map_or(0, Vec::len) + s.not_ready_addresses.as_ref().map_or(0, Vec::len)
            })
            .sum();
        let annotated = cur
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(OVER_CAPACITY));
        let headless_ok = cur
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(HEADLESS))
            == is_headless(svc);
        if total <= MAX_CAPACITY
            && !annotated
            && labels == svc_labels
            && headless_ok
            && subsets_equal(cur.subsets.as_deref().unwrap_or(&[]), &subsets)
        {
            return Plan::Keep;
        }
    }
    let mut meta = current.map(|c| c.metadata.clone()).unwrap_or_else(|| ObjectMeta {
        name: svc.metadata.name.clone(),
        namespace: svc.metadata.namespace.clone(),
        ..Default::default()
    });
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    match trigger_time {
        Some(t) => annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), t),
        None => annotations.remove(LAST_CHANGE_TRIGGER_TIME),
    };
    if truncate(&mut subsets) {
        annotations.insert(OVER_CAPACITY.into(), "truncated".into());
    } else {
        annotations.remove(OVER_CAPACITY);
    }
    let mut labels = svc_labels;
    if is_headless(svc) {
        labels.insert(HEADLESS.into(), String::new());
    } else {
        labels.remove(HEADLESS);
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
    meta.labels = (!labels.is_empty()).then_some(labels);
    let ep = Endpoints {
        metadata: meta,
        subsets: (!subsets.is_empty()).then_some(subsets),
    };
    if current.is_some() {
        Plan::Update(ep)
    } else {
        Plan::Create(ep)
    }
}

/// Subsets equal, ignoring the pods' resourceVersions in targetRefs (upstream
/// `endpointSubsetsEqualIgnoreResourceVersion`).
fn subsets_equal(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    let strip = |s: &[EndpointSubset]| -> Vec<EndpointSubset> {
        s.iter()
            .cloned()
            .map(|mut s| {
                for list in [s.addresses.as_mut(), s.not_ready_addresses.as_mut()]
                    .into_iter()
                    .flatten()
                {
                    for a in list {
                        if let Some(r) = a.target_ref.as_mut() {
                            r.resource_version = None;
                        }
                    }
                }
                s
            })
            .collect()
    };
    strip(a) == strip(b)
}

/// The newest change among the pods and the Service (their Ready transitions and creation), RFC 3339.
pub fn trigger_time(svc: &Service, pods: &[Arc<Pod>]) -> Option<String> {
    let mut times: Vec<jiff::Timestamp> = pods
        .iter()
        .filter_map(|p| {
            podutil::condition(p, "Ready")
                .and_then(|c| c.last_transition_time.as_ref())
                .or(p.metadata.creation_timestamp.as_ref())
                .map(|t| t.0)
        })
        .collect();
    times.extend(svc.metadata.creation_timestamp.as_ref().map(|t| t.0));
    times.into_iter().max().map(|t| t.to_string())
}

// ---- the controller ----

/// Start the Endpoints controller.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("endpoint");
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let endpoints = ctx.informers.get::<Endpoints>();
    let q = queue.clone();
    services.on_change(move |c| q.add(key_of(c.object().as_ref())));
    let (q, s) = (queue.clone(), services.clone());
    pods.on_change(move |c| enqueue_pod_services(&q, &s, c));
    let (q, e) = (queue.clone(), Arc::downgrade(&endpoints));
    endpoints.on_change(move |c| {
        // A deleted Endpoints of a live Service is written again; leftovers of gone Services are looked at
        // once, in the first list (upstream's checkLeftoverEndpoints). A new Endpoints is not: a user may
        // write one before its selector-less Service.
        let first_list = e.upgrade().is_some_and(|e| !e.has_synced());
        match c {
            Change::Deleted(o) => q.add(key_of(o.as_ref())),
            Change::Added(o) if first_list => q.add(key_of(o.as_ref())),
            _ => {}
        }
    });
    let reconciler = Arc::new(Controller {
        client: ctx.client.clone(),
        services,
        pods,
        endpoints,
        recorder: ctx.recorder("endpoint-controller"),
    });
    Box::pin(run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        reconciler,
        cancel,
    ))
}

/// The Endpoints controller's sync.
pub struct Controller {
    client: kube::Client,
    services: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    endpoints: Arc<Informer<Endpoints>>,
    recorder: Arc<Recorder>,
}

fn endpoints_ref(ns: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Endpoints".into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

#[async_trait::async_trait]
impl Reconciler for Controller {
    async fn sync(&self, k: &str) -> Result<Option<Duration>, Error> {
        let (ns, name) = split_key(k);
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), ns);
        let Some(svc) = self.services.get(k) else {
            // The cache may lag behind a Service just created: ask before deleting its Endpoints.
            let live: Api<Service> = Api::namespaced(self.client.clone(), ns);
            if self.endpoints.get(k).is_some() && live.get_opt(name).await?.is_none() {
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(None);
        };
        if !service_wants_endpoints(&svc) {
            return Ok(None);
        }
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_ns(ns)
            .into_iter()
            .filter(|p| selects(&svc, p))
            .collect();
        let current = self.endpoints.get(&key(Some(ns), name));
        let trigger = trigger_time(&svc, &pods);
        match plan(&svc, &pods, current.as_deref(), trigger) {
            Plan::Keep => Ok(None),
            Plan::Create(ep) => match api.create(&PostParams::default(), &ep).await {
                Ok(_) => Ok(None),
                Err(e) if crate::pod_control::is_namespace_terminating(&e) => Ok(None),
                Err(e) => {
                    self.recorder.emit(
                        endpoints_ref(ns, name),
                        EventType::Warning,
                        "FailedToCreateEndpoint",
                        format!("Failed to create endpoint for service {ns}/{name}: {e}"),
                    );
                    Err(e.into())
                }
            },
            Plan::Update(ep) => match api.replace(name, &PostParams::default(), &ep).await {
                Ok(_) => Ok(None),
                Err(e) => {
                    if !matches!(&e, kube::Error::Api(s) if s.code == 409) {
                        self.recorder.emit(
                            endpoints_ref(ns, name),
                            EventType::Warning,
                            "FailedToUpdateEndpoint",
                            format!("Failed to update endpoint {ns}/{name}: {e}"),
                        );
                    }
                    Err(e.into())
                }
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn pod(name: &str, ip: Option<&str>, ready: bool, extra: serde_json::Value) -> Arc<Pod> {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "i",
                "ports": [{"name": "web", "containerPort": 80, "protocol": "TCP"}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        });
        if let Some(ip) = ip {
            v["status"]["podIP"] = json!(ip);
            v["status"]["podIPs"] = json!([{"ip": ip}]);
        }
        merge(&mut v, extra);
        Arc::new(serde_json::from_value(v).unwrap())
    }

    pub(crate) fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        if let (Some(a), serde_json::Value::Object(b)) = (a.as_object_mut(), b) {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(x) if x.is_object() && v.is_object() => merge(x, v),
                    _ => {
                        a.insert(k, v);
                    }
                }
            }
        }
    }

    pub(crate) fn service(extra: serde_json::Value) -> Service {
        let mut v = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"team": "a"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.5", "ipFamilies": ["IPv4"],
                "ports": [{"name": "http", "port": 8080, "targetPort": "web", "protocol": "TCP"}]}
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn ips(list: &Option<Vec<EndpointAddress>>) -> Vec<String> {
        list.iter().flatten().map(|a| a.ip.clone()).collect()
    }

    #[test]
    fn which_services_and_pods_count() {
        assert!(service_wants_endpoints(&service(json!({}))));
        assert!(!service_wants_endpoints(&service(
            json!({"spec": {"type": "ExternalName"}})
        )));
        let mut no_selector = service(json!({}));
        no_selector.spec.as_mut().unwrap().selector = None;
        assert!(!service_wants_endpoints(&no_selector));
        let cases = [
            (pod("a", Some("10.0.0.1"), true, json!({})), false, true),
            (pod("a", None, true, json!({})), true, false),
            (
                pod(
                    "a",
                    Some("10.0.0.1"),
                    true,
                    json!({"status": {"phase": "Succeeded"}}),
                ),
                true,
                false,
            ),
            (
                pod(
                    "a",
                    Some("10.0.0.1"),
                    true,
                    json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
                ),
                false,
                false,
            ),
            (
                pod(
                    "a",
                    Some("10.0.0.1"),
                    true,
                    json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
                ),
                true,
                true,
            ),
        ];
        for (p, include_terminating, want) in cases {
            assert_eq!(should_pod_be_in_endpoints(&p, include_terminating), want);
        }
    }

    #[test]
    fn named_target_ports_resolve_per_pod_with_the_protocol() {
        let p = pod("a", Some("10.0.0.1"), true, json!({}));
        let port = |target: serde_json::Value, protocol: &str| -> ServicePort {
            serde_json::from_value(json!({"port": 8080, "targetPort": target, "protocol": protocol})).unwrap()
        };
        assert_eq!(find_port(&p, &port(json!("web"), "TCP")), Some(80));
        assert_eq!(
            find_port(&p, &port(json!("web"), "UDP")),
            None,
            "protocol must match"
        );
        assert_eq!(find_port(&p, &port(json!("dns"), "UDP")), Some(53));
        assert_eq!(find_port(&p, &port(json!(9000), "TCP")), Some(9000));
        assert_eq!(find_port(&p, &port(json!("nope"), "TCP")), None);
        let sidecar = pod(
            "s",
            Some("10.0.0.2"),
            true,
            json!({"spec": {"initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always",
                "ports": [{"name": "metrics", "containerPort": 9090}]}]}}),
        );
        assert_eq!(find_port(&sidecar, &port(json!("metrics"), "TCP")), Some(9090));
    }

    #[test]
    fn hostname_only_in_the_services_subdomain() {
        let svc = service(json!({}));
        let p = pod(
            "a",
            Some("1.1.1.1"),
            true,
            json!({"spec": {"hostname": "a-0", "subdomain": "web"}}),
        );
        assert_eq!(hostname_for(&p, &svc).as_deref(), Some("a-0"));
        let p = pod(
            "a",
            Some("1.1.1.1"),
            true,
            json!({"spec": {"hostname": "a-0", "subdomain": "other"}}),
        );
        assert_eq!(hostname_for(&p, &svc), None);
    }

    #[test]
    fn ready_and_not_ready_addresses_are_repacked_into_one_subset() {
        let svc = service(json!({}));
        let pods = vec![
            pod("b", Some("10.0.0.2"), true, json!({})),
            pod("a", Some("10.0.0.1"), false, json!({})),
            pod("c", None, true, json!({})),
            pod(
                "d",
                Some("10.0.0.4"),
                true,
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            ),
        ];
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), vec!["10.0.0.2"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), vec!["10.0.0.1"]);
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port, port.protocol.as_deref()),
            (Some("http"), 80, Some("TCP"))
        );
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.node_name.as_deref(), Some("node1"));
        assert_eq!(a.target_ref.as_ref().unwrap().kind.as_deref(), Some("Pod"));
        // publishNotReadyAddresses: everyone is ready, terminating ones too.
        let svc = service(json!({"spec": {"publishNotReadyAddresses": true}}));
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(
            ips(&subsets[0].addresses),
            vec!["10.0.0.1", "10.0.0.2", "10.0.0.4"]
        );
    }

    #[test]
    fn pods_offering_different_ports_get_different_subsets() {
        let svc = service(json!({"spec": {"ports": [
            {"name": "http", "port": 8080, "targetPort": "web", "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]}}));
        let pods = vec![
            pod("a", Some("10.0.0.1"), true, json!({})),
            pod(
                "b",
                Some("10.0.0.2"),
                true,
                json!({"spec": {"containers": [{"name": "c", "image": "i", "ports": [
                    {"name": "web", "containerPort": 81}, {"name": "metrics", "containerPort": 9100}]}]}}),
            ),
        ];
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(subsets.len(), 2, "{subsets:?}");
        let ports: Vec<Vec<i32>> = subsets
            .iter()
            .map(|s| s.ports.iter().flatten().map(|p| p.port).collect())
            .collect();
        assert!(ports.contains(&vec![80]), "{ports:?}");
        assert!(ports.contains(&vec![81, 9100]), "{ports:?}");
    }

    #[test]
    fn headless_without_ports_gets_portless_subsets() {
        let svc = service(json!({"spec": {"clusterIP": "None", "ports": null}}));
        let mut svc2 = svc.clone();
        svc2.spec.as_mut().unwrap().ports = None;
        let subsets = desired_subsets(&svc2, &[pod("a", Some("10.0.0.1"), true, json!({}))]);
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        let plan = plan(&svc2, &[], None, None);
        let Plan::Create(ep) = plan else { panic!() };
        assert_eq!(
            ep.metadata.labels.unwrap().get(HEADLESS).map(String::as_str),
            Some("")
        );
    }

    #[test]
    fn writes_only_on_change() {
        let svc = service(json!({}));
        let pods = vec![pod("a", Some("10.0.0.1"), true, json!({}))];
        let Plan::Create(ep) = plan(&svc, &pods, None, Some("t".into())) else {
            panic!("a missing Endpoints is created")
        };
        assert_eq!(ep.metadata.name.as_deref(), Some("web"));
        assert_eq!(ep.metadata.labels.as_ref().unwrap()["team"], "a");
        assert_eq!(
            ep.metadata.annotations.as_ref().unwrap()[LAST_CHANGE_TRIGGER_TIME],
            "t"
        );
        assert_eq!(plan(&svc, &pods, Some(&ep), Some("t2".into())), Plan::Keep);
        let more = vec![pods[0].clone(), pod("b", Some("10.0.0.2"), true, json!({}))];
        assert!(matches!(plan(&svc, &more, Some(&ep), None), Plan::Update(_)));
        let mut relabelled = svc.clone();
        relabelled.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
        assert!(matches!(
            plan(&relabelled, &pods, Some(&ep), None),
            Plan::Update(_)
        ));
    }

    #[test]
    fn over_capacity_keeps_ready_addresses_first() {
        let addr = |i: usize| EndpointAddress {
            ip: format!("10.0.{}.{}", i / 250, i % 250),
            ..Default::default()
        };
        let mut subsets = vec![EndpointSubset {
            addresses: Some((0..900).map(addr).collect()),
            not_ready_addresses: Some((900..1200).map(addr).collect()),
            ports: None,
        }];
        assert!(truncate(&mut subsets));
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 900);
        assert_eq!(subsets[0].not_ready_addresses.as_ref().unwrap().len(), 100);
        let mut subsets = vec![EndpointSubset {
            addresses: Some((0..1100).map(addr).collect()),
            not_ready_addresses: Some((0..5).map(addr).collect()),
            ports: None,
        }];
        assert!(truncate(&mut subsets));
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 1000);
        assert!(subsets[0].not_ready_addresses.is_none());
        let mut small = vec![EndpointSubset {
            addresses: Some((0..3).map(addr).collect()),
            ..Default::default()
        }];
        assert!(!truncate(&mut small));
    }
}
