//! The EndpointSlice controller (`pkg/controller/endpointslice/`, the reconciler of
//! `staging/src/k8s.io/endpointslice/reconciler.go`).
//!
//! For every Service with a selector (not ExternalName) it keeps the `discovery.k8s.io/v1` EndpointSlices
//! labelled `kubernetes.io/service-name=<svc>` and managed by `endpointslice-controller.k8s.io`: one
//! endpoint per matching pod with an IP (terminating pods stay, marked), grouped by the pod's resolved
//! port list, at most 100 per slice, existing slices reused and filled before new ones are made, and one
//! empty placeholder slice when nothing is selected. [`reconcile`] decides, pure; [`Controller::sync`]
//! reads the caches, calls it, and writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::controller_ref::{controller_of, controller_ref};
use crate::endpoints::{
    HEADLESS, LAST_CHANGE_TRIGGER_TIME, service_wants_endpoints, should_pod_be_in_endpoints, trigger_time,
};
use crate::endpoints::{
    enqueue_pod_services, find_port, hostname_for, is_headless, pod_ips, pod_ref, selects,
};
use crate::informer::{Change, Informer, key, key_of, split_key};
use crate::{Context, Error, Reconciler, WorkQueue, podutil, run_workers};

/// upstream `controllerName`: the managed-by label's value.
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// upstream `discovery.LabelManagedBy`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// upstream `discovery.LabelServiceName`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// kube-controller-manager `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// kube-controller-manager `--concurrent-service-endpoint-syncs`.
pub const WORKERS: usize = 5;
/// upstream `v1.LabelTopologyZone`.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The address types the Service wants (`spec.ipFamilies`, IPv4 when unset).
pub fn address_types(svc: &Service) -> Vec<String> {
    let families = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.clone())
        .unwrap_or_default();
    if families.is_empty() {
        return vec!["IPv4".into()];
    }
    families
}

/// upstream `PodToEndpoint`.
pub fn pod_to_endpoint(pod: &Pod, node: Option<&Node>, svc: &Service, ipv6: bool) -> Endpoint {
    let serving = podutil::is_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let ready = publish || (serving && !terminating);
    let node_name = podutil::node_name(pod);
    Endpoint {
        addresses: pod_ips(pod, ipv6),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: hostname_for(pod, svc),
        node_name: (!node_name.is_empty()).then(|| node_name.to_string()),
        target_ref: Some(pod_ref(pod)),
        zone: node
            .and_then(|n| n.metadata.labels.as_ref())
            .and_then(|l| l.get(ZONE_LABEL))
            .filter(|z| !z.is_empty())
            .cloned(),
        ..Default::default()
    }
}

/// The Service's ports as a pod resolves them (upstream `getEndpointPorts`; unresolvable ones left out).
pub fn endpoint_ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            find_port(pod, p).map(|n| EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(n),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
        })
        .collect()
}

/// upstream `setEndpointSliceLabels`: the Service's labels (not the reserved ones) plus ours.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = svc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != LABEL_SERVICE_NAME && k != LABEL_MANAGED_BY && k != HEADLESS)
        .collect();
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
    if is_headless(svc) {
        labels.insert(HEADLESS.into(), String::new());
    }
    labels
}

/// What to write for a Service.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// Slices to create (generateName `<svc>-`).
    pub create: Vec<EndpointSlice>,
    /// Slices to replace.
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete.
    pub delete: Vec<String>,
    /// Pods left out because their Node is unknown (retried).
    pub skipped: Vec<String>,
}

fn new_slice(
    svc: &Service,
    address_type: &str,
    ports: Vec<EndpointPort>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let name = svc.metadata.name.clone().unwrap_or_default();
    let mut prefix = format!("{name}-");
    if prefix.len() > 58 {
        prefix.truncate(58);
    }
    EndpointSlice {
        address_type: address_type.into(),
        endpoints,
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(slice_labels(svc)),
            owner_references: Some(vec![controller_ref(
                "v1",
                "Service",
                &name,
                svc.metadata.uid.as_deref().unwrap_or(""),
            )]),
            ..Default::default()
        },
        ports: Some(ports),
    }
}

fn endpoint_key(e: &Endpoint) -> String {
    e.target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .unwrap_or_else(|| e.addresses.join(","))
}

fn is_placeholder(s: &EndpointSlice) -> bool {
    s.endpoints.is_empty() && s.ports.as_ref().is_none_or(|p| p.is_empty())
}

/// upstream `reconciler.reconcile`: `existing` are the cached slices labelled for the Service and managed
/// by us; `nodes` the cached Nodes by name.
pub fn reconcile(
    svc: &Service,
    pods: &[Arc<Pod>],
    nodes: &HashMap<String, Arc<Node>>,
    existing: &[Arc<EndpointSlice>],
    trigger: Option<String>,
) -> Plan {
    let mut plan = Plan::default();
    let svc_uid = svc.metadata.uid.clone().unwrap_or_default();
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let types = address_types(svc);
    let labels = slice_labels(svc);
    // Slices owned by another Service of the same name, or of an unwanted address type, go.
    let mut mine: Vec<&Arc<EndpointSlice>> = Vec::new();
    for s in existing {
        if s.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let owned = controller_of(&s.metadata).is_some_and(|r| r.uid == svc_uid);
        if !owned || !types.contains(&s.address_type) {
            plan.delete.push(s.metadata.name.clone().unwrap_or_default());
        } else {
            mine.push(s);
        }
    }
    mine.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut total_desired = 0;
    let mut kept = 0;
    let mut sorted_pods: Vec<&Arc<Pod>> = pods.iter().collect();
    sorted_pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for address_type in &types {
        let ipv6 = address_type == "IPv6";
        // Desired endpoints grouped by their port list.
        let mut groups: BTreeMap<String, (Vec<EndpointPort>, Vec<Endpoint>)> = BTreeMap::new();
        for pod in &sorted_pods {
            if !should_pod_be_in_endpoints(pod, true) {
                continue;
            }
            let node_name = podutil::node_name(pod);
            let node = nodes.get(node_name);
            if node.is_none() && !publish {
                plan.skipped.push(format!(
                    "skipping Pod {} for Service {}/{}: Node {} Not Found",
                    pod.metadata.name.as_deref().unwrap_or(""),
                    svc.metadata.namespace.as_deref().unwrap_or(""),
                    svc.metadata.name.as_deref().unwrap_or(""),
                    node_name
                ));
                continue;
            }
            let ep = pod_to_endpoint(pod, node.map(|n| n.as_ref()), svc, ipv6);
            if ep.addresses.is_empty() {
                continue;
            }
            let ports = endpoint_ports(svc, pod);
            let pk = serde_json::to_string(&ports).unwrap_or_default();
            groups.entry(pk).or_insert_with(|| (ports, Vec::new())).1.push(ep);
        }
        let of_type: Vec<&Arc<EndpointSlice>> = mine
            .iter()
            .copied()
            .filter(|s| &s.address_type == address_type)
            .collect();
        let mut matched: Vec<bool> = vec![false; of_type.len()];
        for (pk, (ports, desired)) in groups {
            total_desired += desired.len();
            let mut want: BTreeMap<String, Endpoint> =
                desired.iter().map(|e| (endpoint_key(e), e.clone())).collect();
            let order: Vec<String> = desired.iter().map(endpoint_key).collect();
            let mut to_update: Vec<EndpointSlice> = Vec::new();
            let mut unchanged: Vec<EndpointSlice> = Vec::new();
            for (i, s) in of_type.iter().enumerate() {
                let spk = serde_json::to_string(s.ports.as_deref().unwrap_or(&[])).unwrap_or_default();
                if spk != pk || matched[i] {
                    continue;
                }
                matched[i] = true;
                let eps: Vec<Endpoint> = s
                    .endpoints
                    .iter()
                    .filter_map(|e| want.remove(&endpoint_key(e)))
                    .collect();
                if eps.is_empty() {
                    plan.delete.push(s.metadata.name.clone().unwrap_or_default());
                    continue;
                }
                let labels_differ = s.metadata.labels.as_ref() != Some(&labels);
                let mut new = EndpointSlice::clone(s);
                if eps != s.endpoints || labels_differ {
                    new.endpoints = eps;
                    new.metadata.labels = Some(labels.clone());
                    to_update.push(new);
                } else {
                    unchanged.push(new);
                }
            }
            let mut remaining: Vec<Endpoint> = order.iter().filter_map(|k| want.remove(k)).collect();
            // Fill the slices being written anyway first, then unchanged ones, then new ones.
            for s in to_update.iter_mut() {
                while s.endpoints.len() < MAX_ENDPOINTS_PER_SLICE && !remaining.is_empty() {
                    s.endpoints.push(remaining.remove(0));
                }
            }
            for mut s in unchanged {
                if !remaining.is_empty() && s.endpoints.len() < MAX_ENDPOINTS_PER_SLICE {
                    while s.endpoints.len() < MAX_ENDPOINTS_PER_SLICE && !remaining.is_empty() {
                        s.endpoints.push(remaining.remove(0));
                    }
                    to_update.push(s);
                } else {
                    kept += 1;
                }
            }
            while !remaining.is_empty() {
                let n = remaining.len().min(MAX_ENDPOINTS_PER_SLICE);
                let chunk: Vec<Endpoint> = remaining.drain(..n).collect();
                plan.create
                    .push(new_slice(svc, address_type, ports.clone(), chunk));
            }
            kept += to_update.len();
            plan.update.extend(to_update);
        }
        // Slices of this type whose port list no group wants.
        for (i, s) in of_type.iter().enumerate() {
            if !matched[i] {
                plan.delete.push(s.metadata.name.clone().unwrap_or_default());
            }
        }
    }
    // Nothing selected: keep (or make) one placeholder slice.
    if total_desired == 0 && kept == 0 && plan.create.is_empty() {
        let placeholder = mine
            .iter()
            .find(|s| is_placeholder(s) && s.address_type == types[0])
            .map(|s| s.metadata.name.clone().unwrap_or_default());
        match placeholder {
            Some(name) => {
                plan.delete.retain(|n| *n != name);
                if let Some(s) = mine
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                    && s.metadata.labels.as_ref() != Some(&labels)
                {
                    let mut s = EndpointSlice::clone(s);
                    s.metadata.labels = Some(labels.clone());
                    plan.update.push(s);
                }
            }
            None => plan
                .create
                .push(new_slice(svc, &types[0], Vec::new(), Vec::new())),
        }
    }
    for s in plan.create.iter_mut().chain(plan.update.iter_mut()) {
        let annotations = s.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match &trigger {
            Some(t) => annotations.insert(LAST_CHANGE_TRIGGER_TIME.into(), t.clone()),
            None => annotations.remove(LAST_CHANGE_TRIGGER_TIME),
        };
        if annotations.is_empty() {
            s.metadata.annotations = None;
        }
    }
    plan.delete.sort();
    plan.delete.dedup();
    plan
}

/// Start the EndpointSlice controller.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    // upstream: 1 s doubling to 1000 s.
    let queue = WorkQueue::with_backoff("endpointslice", Duration::from_secs(1), Duration::from_secs(1000));
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let slices = ctx.informers.get::<EndpointSlice>();
    let nodes = ctx.informers.get::<Node>();
    let q = queue.clone();
    services.on_change(move |c| q.add(key_of(c.object().as_ref())));
    let (q, s) = (queue.clone(), services.clone());
    pods.on_change(move |c| enqueue_pod_services(&q, &s, c));
    let q = queue.clone();
    slices.on_change(move |c| {
        let s = c.object();
        let labels = s.metadata.labels.as_ref();
        if labels.and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str) != Some(MANAGED_BY) {
            return;
        }
        if let Some(svc) = labels.and_then(|l| l.get(LABEL_SERVICE_NAME)) {
            q.add(key(s.metadata.namespace.as_deref(), svc));
        }
    });
    let q = queue.clone();
    let s = services.clone();
    nodes.on_change(move |c| {
        // A node appearing or leaving changes which pods are published (and their zone).
        if !matches!(c, Change::Updated { .. }) {
            for svc in s.list() {
                q.add(key_of(svc.as_ref()));
            }
        }
    });
    let reconciler = Arc::new(Controller {
        client: ctx.client.clone(),
        services,
        pods,
        slices,
        nodes,
        recorder: ctx.recorder("endpoint-slice-controller"),
        written: Mutex::new(HashMap::new()),
    });
    Box::pin(run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        reconciler,
        cancel,
    ))
}

/// A slice we wrote: name, the resourceVersion written, when.
type Written = (String, u64, Instant);

/// The EndpointSlice controller's sync.
pub struct Controller {
    client: kube::Client,
    services: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    slices: Arc<Informer<EndpointSlice>>,
    nodes: Arc<Informer<Node>>,
    recorder: Arc<Recorder>,
    /// Slices we wrote, by Service key: (name, resourceVersion written, when). Until the cache has them,
    /// a sync would work from stale slices (upstream `endpointSliceTracker`).
    written: Mutex<HashMap<String, Vec<Written>>>,
}

fn rv(s: &EndpointSlice) -> u64 {
    s.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

impl Controller {
    /// The cached slices of the Service, or `None` while the cache lags behind our own writes.
    fn cached_slices(&self, k: &str) -> Option<Vec<Arc<EndpointSlice>>> {
        let (ns, name) = split_key(k);
        let slices: Vec<Arc<EndpointSlice>> = self
            .slices
            .list_ns(ns)
            .into_iter()
            .filter(|s| {
                let l = s.metadata.labels.as_ref();
                l.and_then(|l| l.get(LABEL_SERVICE_NAME)).map(String::as_str) == Some(name)
                    && l.and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str) == Some(MANAGED_BY)
            })
            .collect();
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = written.get_mut(k) {
            // Forget writes the cache has caught up with, and any older than a minute.
            list.retain(|(n, wrote, at)| {
                let seen = self.slices.get_in(ns, n).is_some_and(|s| rv(&s) >= *wrote);
                !seen && at.elapsed() < Duration::from_secs(60)
            });
            if !list.is_empty() {
                return None;
            }
            written.remove(k);
        }
        Some(slices)
    }

    fn record(&self, k: &str, s: &EndpointSlice) {
        if let Some(name) = &s.metadata.name {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(k.to_string())
                .or_default()
                .push((name.clone(), rv(s), Instant::now()));
        }
    }
}

fn service_ref(svc: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: svc.metadata.namespace.clone(),
        name: svc.metadata.name.clone(),
        uid: svc.metadata.uid.clone(),
        ..Default::default()
    }
}

#[async_trait::async_trait]
impl Reconciler for Controller {
    async fn sync(&self, k: &str) -> Result<Option<Duration>, Error> {
        let (ns, name) = split_key(k);
        let Some(svc) = self.services.get(k) else {
            // The slices carry an ownerReference to the Service: the garbage collector removes them.
            self.written.lock().unwrap_or_else(|e| e.into_inner()).remove(k);
            return Ok(None);
        };
        if !service_wants_endpoints(&svc) || svc.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let Some(existing) = self.cached_slices(k) else {
            return Ok(Some(Duration::from_millis(200)));
        };
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_ns(ns)
            .into_iter()
            .filter(|p| selects(&svc, p))
            .collect();
        let nodes: HashMap<String, Arc<Node>> = self
            .nodes
            .list()
            .into_iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
            .collect();
        let trigger = trigger_time(&svc, &pods);
        let plan = reconcile(&svc, &pods, &nodes, &existing, trigger);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let result: Result<(), kube::Error> = async {
            for s in &plan.create {
                match api.create(&PostParams::default(), s).await {
                    Ok(created) => self.record(k, &created),
                    Err(e) if crate::pod_control::is_namespace_terminating(&e) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            for s in &plan.update {
                let n = s.metadata.name.clone().unwrap_or_default();
                let updated = api.replace(&n, &PostParams::default(), s).await?;
                self.record(k, &updated);
            }
            for n in &plan.delete {
                match api.delete(n, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            if !matches!(&e, kube::Error::Api(s) if s.code == 409) {
                self.recorder.emit(
                    service_ref(&svc),
                    EventType::Warning,
                    "FailedToUpdateEndpointSlices",
                    format!("Error updating Endpoint Slices for Service {ns}/{name}: {e}"),
                );
            }
            return Err(e.into());
        }
        if !plan.skipped.is_empty() {
            return Err(Error::Other(plan.skipped.join("; ")));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::tests::{pod, service};
    use serde_json::json;

    fn nodes() -> HashMap<String, Arc<Node>> {
        let n: Node =
            serde_json::from_value(json!({"metadata": {"name": "node1", "labels": {ZONE_LABEL: "z1"}}}))
                .unwrap();
        [("node1".to_string(), Arc::new(n))].into()
    }

    fn stored(mut s: EndpointSlice, name: &str) -> Arc<EndpointSlice> {
        s.metadata.name = Some(name.into());
        s.metadata.generate_name = None;
        Arc::new(s)
    }

    #[test]
    fn endpoints_carry_conditions_node_zone_and_target() {
        let svc = service(json!({}));
        let ready = pod("a", Some("10.0.0.1"), true, json!({}));
        let ep = pod_to_endpoint(&ready, nodes().get("node1").map(|n| n.as_ref()), &svc, false);
        let c = ep.conditions.clone().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(true), Some(true), Some(false))
        );
        assert_eq!(ep.addresses, vec!["10.0.0.1"]);
        assert_eq!(ep.zone.as_deref(), Some("z1"));
        assert_eq!(ep.node_name.as_deref(), Some("node1"));
        assert_eq!(ep.target_ref.unwrap().kind.as_deref(), Some("Pod"));
        let dying = pod(
            "b",
            Some("10.0.0.2"),
            true,
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        );
        let c = pod_to_endpoint(&dying, None, &svc, false).conditions.unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(true), Some(true))
        );
        let not_ready = pod("c", Some("10.0.0.3"), false, json!({}));
        let c = pod_to_endpoint(&not_ready, None, &svc, false).conditions.unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(false), Some(false))
        );
        let publish = service(json!({"spec": {"publishNotReadyAddresses": true}}));
        let c = pod_to_endpoint(&not_ready, None, &publish, false)
            .conditions
            .unwrap();
        assert_eq!(c.ready, Some(true));
    }

    #[test]
    fn a_new_service_gets_one_slice_with_labels_owner_and_ports() {
        let svc = service(json!({}));
        let pods = vec![
            pod("a", Some("10.0.0.1"), true, json!({})),
            pod("b", Some("10.0.0.2"), false, json!({})),
            pod("c", None, true, json!({})),
        ];
        let plan = reconcile(&svc, &pods, &nodes(), &[], Some("t".into()));
        assert_eq!(plan.create.len(), 1);
        assert!(plan.update.is_empty() && plan.delete.is_empty() && plan.skipped.is_empty());
        let s = &plan.create[0];
        assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(s.address_type, "IPv4");
        let l = s.metadata.labels.as_ref().unwrap();
        assert_eq!(l[LABEL_SERVICE_NAME], "web");
        assert_eq!(l[LABEL_MANAGED_BY], MANAGED_BY);
        assert_eq!(l["team"], "a");
        assert!(!l.contains_key(HEADLESS));
        let o = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.uid.as_str(), o.controller),
            ("Service", "svc-uid", Some(true))
        );
        assert_eq!(
            serde_json::to_value(&s.ports).unwrap(),
            json!([{"name": "http", "port": 80, "protocol": "TCP"}])
        );
        assert_eq!(s.endpoints.len(), 2);
        assert_eq!(
            s.metadata.annotations.as_ref().unwrap()[LAST_CHANGE_TRIGGER_TIME],
            "t"
        );
    }

    #[test]
    fn existing_slices_are_reused_filled_and_emptied_ones_deleted() {
        let svc = service(json!({}));
        let first: Vec<Arc<Pod>> = (0..3)
            .map(|i| pod(&format!("p{i}"), Some(&format!("10.0.0.{i}")), true, json!({})))
            .collect();
        let plan = reconcile(&svc, &first, &nodes(), &[], None);
        let existing = vec![stored(plan.create[0].clone(), "web-abcde")];
        // Unchanged: nothing to write.
        assert_eq!(
            reconcile(&svc, &first, &nodes(), &existing, None),
            Plan::default()
        );
        // One more pod: the existing slice is filled, not a new one made.
        let mut more = first.clone();
        more.push(pod("p9", Some("10.0.0.9"), true, json!({})));
        let plan = reconcile(&svc, &more, &nodes(), &existing, None);
        assert!(plan.create.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].endpoints.len(), 4);
        assert_eq!(plan.update[0].metadata.name.as_deref(), Some("web-abcde"));
        // A pod turns not ready: the endpoint is updated in place.
        let mut flipped = first.clone();
        flipped[1] = pod("p1", Some("10.0.0.1"), false, json!({}));
        let plan = reconcile(&svc, &flipped, &nodes(), &existing, None);
        assert_eq!(plan.update.len(), 1);
        assert_eq!(
            plan.update[0].endpoints[1].conditions.as_ref().unwrap().ready,
            Some(false)
        );
        // Every pod gone: the slice goes and a placeholder comes.
        let plan = reconcile(&svc, &[], &nodes(), &existing, None);
        assert_eq!(plan.delete, vec!["web-abcde".to_string()]);
        assert_eq!(plan.create.len(), 1);
        assert!(plan.create[0].endpoints.is_empty());
        assert_eq!(plan.create[0].ports, Some(vec![]));
        // The placeholder is kept as it is.
        let placeholder = vec![stored(plan.create[0].clone(), "web-ph")];
        assert_eq!(
            reconcile(&svc, &[], &nodes(), &placeholder, None),
            Plan::default()
        );
        // Pods come back: the placeholder is replaced.
        let plan = reconcile(&svc, &first, &nodes(), &placeholder, None);
        assert_eq!(plan.delete, vec!["web-ph".to_string()]);
        assert_eq!(plan.create.len(), 1);
    }

    #[test]
    fn more_than_100_endpoints_need_more_slices() {
        let svc = service(json!({}));
        let pods: Vec<Arc<Pod>> = (0..250)
            .map(|i| {
                pod(
                    &format!("p{i:03}"),
                    Some(&format!("10.0.{}.{}", i / 200, i % 200)),
                    true,
                    json!({}),
                )
            })
            .collect();
        let plan = reconcile(&svc, &pods, &nodes(), &[], None);
        let sizes: Vec<usize> = plan.create.iter().map(|s| s.endpoints.len()).collect();
        assert_eq!(sizes, vec![100, 100, 50]);
    }

    #[test]
    fn pods_with_different_ports_get_different_slices() {
        let svc = service(json!({}));
        let other = pod(
            "b",
            Some("10.0.0.2"),
            true,
            json!({"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"name": "web", "containerPort": 81}]}]}}),
        );
        let plan = reconcile(
            &svc,
            &[pod("a", Some("10.0.0.1"), true, json!({})), other],
            &nodes(),
            &[],
            None,
        );
        assert_eq!(plan.create.len(), 2);
    }

    #[test]
    fn pods_on_unknown_nodes_are_skipped_and_foreign_slices_deleted() {
        let svc = service(json!({}));
        let lost = pod("a", Some("10.0.0.1"), true, json!({"spec": {"nodeName": "gone"}}));
        let plan = reconcile(&svc, std::slice::from_ref(&lost), &nodes(), &[], None);
        assert_eq!(plan.skipped.len(), 1);
        assert!(
            plan.skipped[0].contains("Node gone Not Found"),
            "{:?}",
            plan.skipped
        );
        assert_eq!(plan.create.len(), 1, "a placeholder");
        let publish = service(json!({"spec": {"publishNotReadyAddresses": true}}));
        let plan = reconcile(&publish, &[lost], &nodes(), &[], None);
        assert!(plan.skipped.is_empty());
        assert_eq!(plan.create[0].endpoints.len(), 1);
        // A slice of an older Service of the same name.
        let mut foreign = new_slice(&svc, "IPv4", vec![], vec![]);
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "old".into();
        let plan = reconcile(&svc, &[], &nodes(), &[stored(foreign, "web-old")], None);
        assert_eq!(plan.delete, vec!["web-old".to_string()]);
        assert_eq!(plan.create.len(), 1);
    }

    #[test]
    fn headless_services_are_labelled() {
        let svc = service(json!({"spec": {"clusterIP": "None"}}));
        assert_eq!(slice_labels(&svc).get(HEADLESS).map(String::as_str), Some(""));
    }
}
