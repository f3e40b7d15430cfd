//! A Service's cluster IP held by an `IPAddress` object named by the IP (networking.k8s.io/v1; upstream's
//! allocator since v1.33, KEP-1880). The object's name makes the IP unique in the store, so one create
//! decides between several API servers on one etcd, where each server's own allocation lock cannot: two
//! Services created at once through two servers never get one IP.
//!
//! - On a Service's create the registry reserves its IP before writing the Service ([`reserve`]); a
//!   dynamically chosen IP that another server took meanwhile is replaced by the next free one, a requested
//!   one is refused (422, as upstream's "provided IP is already allocated").
//! - When the Service is gone its IPAddress is deleted ([`release`]); so is one whose Service write failed.
//! - An IPAddress whose Service does not hold its IP and that is older than [`STALE_AFTER`] (left by a
//!   crash between the two writes) is taken over by the next Service that asks for that IP; dynamic
//!   allocation skips every IP that has an IPAddress. At start every Service's IP gets its IPAddress if it
//!   lacks one (data dirs from before this allocator).

use serde_json::{Value, json};

use super::{DeleteOptions, Registry, WriteOptions, meta_str, resources};
use crate::error::ApiError;

/// Upstream's labels on the allocator's IPAddress objects.
const IP_FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
const ALLOCATOR: &str = "ipallocator.k8s.io";

/// How many IPs (or node ports) one create tries before giving up (each lost to another server's Service).
pub(super) const ATTEMPTS: usize = 16;

fn info() -> &'static super::ResourceInfo {
    resources::find("networking.k8s.io", "v1", "ipaddresses").expect("ipaddresses are served")
}

fn services() -> &'static super::ResourceInfo {
    resources::find("", "v1", "services").expect("services are served")
}

/// The cluster IP a Service holds: none for a headless (`None`) or ExternalName Service.
pub fn cluster_ip(service: &Value) -> Option<&str> {
    service
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
}

/// The Service (namespace, name) an IPAddress (or a node port's reservation) names as its parent.
pub(super) fn parent(ip_address: &Value) -> Option<(&str, &str)> {
    let p = ip_address.pointer("/spec/parentRef")?;
    if p.get("resource").and_then(Value::as_str) != Some("services") {
        return None;
    }
    Some((
        p.get("namespace").and_then(Value::as_str).unwrap_or(""),
        p.get("name").and_then(Value::as_str).unwrap_or(""),
    ))
}

/// The IPAddress of `ip` for the Service `ns/name`, as upstream's allocator writes it.
fn ip_address(ip: &str, ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {"name": ip, "labels": {IP_FAMILY_LABEL: "IPv4", MANAGED_BY_LABEL: ALLOCATOR}},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}

/// What [`hold`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// This call created the IPAddress.
    Created,
    /// The Service already had it.
    Already,
    /// Another Service holds the IP, or is about to (its IPAddress is new).
    Taken,
}

/// An IPAddress whose Service does not hold its IP is left over (a crash between the IPAddress's write and
/// the Service's) only once it is this old; a younger one is another API server's reservation whose
/// Service is still being written.
pub(super) const STALE_AFTER: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);

/// What to do about an existing IPAddress of the IP wanted by the Service `want` (namespace, name).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Existing {
    /// It names `want`.
    Ours,
    /// Another Service's.
    Theirs,
    /// Left over: delete it and create ours.
    Stale,
}

/// What is known of an existing IPAddress (or node port record).
#[derive(Debug, Clone, Copy)]
pub(super) struct Found<'a> {
    /// The Service it names.
    pub(super) parent: Option<(&'a str, &'a str)>,
    /// That Service exists and holds the IP (or port).
    pub(super) parent_holds: bool,
    /// How long ago it was created (None: unknown, taken as new).
    pub(super) age: Option<jiff::SignedDuration>,
    /// The allocator made it (an IPAddress a user made for something else is never taken over).
    pub(super) managed: bool,
}

/// No Service: what [`decide`] is asked on behalf of when only staleness matters.
pub(super) const NOBODY: (&str, &str) = ("", "\0");

/// Decide on an existing IPAddress (or record) of the IP (or port) the Service `want` (namespace, name)
/// asks for.
pub(super) fn decide(want: (&str, &str), found: Found<'_>) -> Existing {
    match found.parent {
        Some(p) if p == want => Existing::Ours,
        _ if found.parent_holds || !found.managed => Existing::Theirs,
        _ if found.age.is_some_and(|a| a >= STALE_AFTER) => Existing::Stale,
        _ => Existing::Theirs,
    }
}

/// [`decide`] on an existing IPAddress or record, for the Service `want`: `holds(namespace, name)` tells
/// whether the Service it names holds its IP or port.
pub(super) fn examine(
    existing: &Value,
    want: (&str, &str),
    holds: impl FnOnce(&str, &str) -> bool,
    managed: bool,
) -> Existing {
    let parent = parent(existing);
    decide(
        want,
        Found {
            parent,
            parent_holds: parent.is_some_and(|(ns, name)| holds(ns, name)),
            age: age(existing),
            managed,
        },
    )
}

/// [`examine`] an existing IPAddress of `ip`.
fn examine_ip(registry: &Registry, existing: &Value, ip: &str, want: (&str, &str)) -> Existing {
    let managed = existing["metadata"]["labels"][MANAGED_BY_LABEL] == ALLOCATOR;
    examine(existing, want, |ns, name| holds(registry, ns, name, ip), managed)
}

/// Whether the Service `ns/name` exists and holds `ip`.
fn holds(registry: &Registry, ns: &str, name: &str, ip: &str) -> bool {
    registry
        .storage()
        .get(&services().key(Some(ns), name))
        .is_some_and(|s| cluster_ip(&s.value()) == Some(ip))
}

pub(super) fn age(obj: &Value) -> Option<jiff::SignedDuration> {
    let created: jiff::Timestamp = meta_str(obj, "creationTimestamp")?.parse().ok()?;
    Some(jiff::Timestamp::now().duration_since(created))
}

/// Make `ip`'s IPAddress name the Service `ns/name`, unless another Service holds the IP.
async fn hold(registry: &Registry, ip: &str, ns: &str, name: &str) -> Result<Hold, ApiError> {
    let defaults = WriteOptions::default();
    for _ in 0..ATTEMPTS {
        let create = Box::pin(registry.create(info(), None, ip_address(ip, ns, name), &defaults));
        match create.await {
            Ok(_) => return Ok(Hold::Created),
            Err(e) if e.reason == "AlreadyExists" => {}
            Err(e) => return Err(e),
        }
        let Ok(existing) = registry.get(info(), None, ip) else {
            continue; // Released meanwhile: create again.
        };
        let existing = existing.value();
        match examine_ip(registry, &existing, ip, (ns, name)) {
            Existing::Ours => return Ok(Hold::Already),
            Existing::Theirs => return Ok(Hold::Taken),
            Existing::Stale => {
                let stale = DeleteOptions {
                    uid: meta_str(&existing, "uid").map(str::to_string),
                    ..Default::default()
                };
                let _ = Box::pin(registry.delete(info(), None, ip, &stale)).await;
            }
        }
    }
    Err(ApiError::internal(format!(
        "could not reserve the cluster IP {ip}"
    )))
}

/// Reserve the cluster IP of the Service `service` (about to be created in `ns`, its spec already
/// allocated): the IP `prepare_create` chose, or when another API server took it meanwhile, the next free
/// one (written into `service`). Returns the IP whose IPAddress this call created, for [`release`] should
/// the Service's write fail. `requested`: the client named the IP.
pub(super) async fn reserve(
    registry: &Registry,
    service: &mut Value,
    ns: &str,
    requested: bool,
) -> Result<Option<String>, ApiError> {
    let name = meta_str(service, "name").unwrap_or("").to_string();
    let mut lost = std::collections::HashSet::new();
    for _ in 0..ATTEMPTS {
        let Some(ip) = cluster_ip(service).map(str::to_string) else {
            return Ok(None);
        };
        match hold(registry, &ip, ns, &name).await? {
            Hold::Created => return Ok(Some(ip)),
            Hold::Already => return Ok(None),
            Hold::Taken if requested => {
                return Err(super::service::ip_taken(service, &ip));
            }
            Hold::Taken => {
                lost.insert(ip);
                super::service::reallocate(registry, service, &lost)?;
            }
        }
    }
    Err(ApiError::internal(
        "could not reserve a cluster IP: every try lost to another API server",
    ))
}

/// Delete `ip`'s IPAddress if it names the Service `ns/name` (the Service is gone, or was never written).
pub(super) async fn release(registry: &Registry, ip: &str, ns: &str, name: &str) {
    let Ok(existing) = registry.get(info(), None, ip) else {
        return;
    };
    let existing = existing.value();
    // Not ours, or ours again: the Service `ns/name` in the store holds the IP (another server's create of
    // the same name won, or the Service was made again).
    if parent(&existing) != Some((ns, name)) || holds(registry, ns, name, ip) {
        return;
    }
    let opts = DeleteOptions {
        uid: meta_str(&existing, "uid").map(str::to_string),
        ..Default::default()
    };
    if let Err(e) = Box::pin(registry.delete(info(), None, ip, &opts)).await
        && e.code != 404
    {
        tracing::warn!(ip, error = %e.message, "releasing a cluster IP");
    }
}

/// At start: every Service holding an IP has its IPAddress (data dirs from before this allocator).
pub(super) async fn repair(registry: &Registry) -> Result<(), ApiError> {
    let all = registry.list(services(), None, &super::Selection::default(), None, None);
    for s in all.items {
        let s = s.value();
        let Some(ip) = cluster_ip(&s) else { continue };
        if registry.get(info(), None, ip).is_ok() {
            continue;
        }
        let ns = meta_str(&s, "namespace").unwrap_or("");
        let name = meta_str(&s, "name").unwrap_or("");
        if hold(registry, ip, ns, name).await? == Hold::Taken {
            tracing::warn!(
                ip,
                namespace = ns,
                service = name,
                "two Services hold one cluster IP"
            );
        }
    }
    Ok(())
}

/// The IPs held by IPAddress objects (reserved by any API server, their Services maybe not written yet),
/// but for left-overs, which dynamic allocation may take over.
pub(super) fn reserved(registry: &Registry) -> Vec<String> {
    registry
        .list(info(), None, &super::Selection::default(), None, None)
        .items
        .iter()
        .filter_map(|a| {
            let a = a.value();
            let ip = meta_str(&a, "name")?;
            (examine_ip(registry, &a, ip, NOBODY) != Existing::Stale).then(|| ip.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_ip_address_is_ours_theirs_or_left_over() {
        let old = Some(jiff::SignedDuration::from_secs(60));
        let new = Some(jiff::SignedDuration::from_secs(1));
        let me = ("default", "web");
        let other = Some(("default", "db"));
        for (parent, parent_holds, age, managed, want) in [
            (Some(me), true, old, true, Existing::Ours),
            (Some(me), false, new, true, Existing::Ours),
            (other, true, old, true, Existing::Theirs),
            (other, true, new, true, Existing::Theirs),
            // Another server's reservation whose Service is not written yet.
            (other, false, new, true, Existing::Theirs),
            (other, false, None, true, Existing::Theirs),
            // Left by a crash between the two writes.
            (other, false, old, true, Existing::Stale),
            (None, false, old, true, Existing::Stale),
            (None, false, new, true, Existing::Theirs),
            // Made by a user for something else: never taken over.
            (None, false, old, false, Existing::Theirs),
            (other, false, old, false, Existing::Theirs),
        ] {
            let found = Found {
                parent,
                parent_holds,
                age,
                managed,
            };
            assert_eq!(decide(me, found), want, "{found:?}");
        }
        // Staleness alone, for allocation: NOBODY is nobody's parent.
        let left_over = Found {
            parent: other,
            parent_holds: false,
            age: old,
            managed: true,
        };
        assert_eq!(decide(NOBODY, left_over), Existing::Stale);
    }

    #[test]
    fn only_services_with_an_address_hold_one() {
        assert_eq!(
            cluster_ip(&json!({"spec": {"clusterIP": "10.96.1.0"}})),
            Some("10.96.1.0")
        );
        assert_eq!(cluster_ip(&json!({"spec": {"clusterIP": "None"}})), None);
        assert_eq!(cluster_ip(&json!({"spec": {"clusterIP": ""}})), None);
        assert_eq!(cluster_ip(&json!({"spec": {"type": "ExternalName"}})), None);
        let a = ip_address("10.96.1.0", "default", "web");
        assert_eq!(parent(&a), Some(("default", "web")));
        assert_eq!(a["metadata"]["labels"][MANAGED_BY_LABEL], ALLOCATOR);
    }
}
