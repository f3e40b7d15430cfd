//! A Service's node ports, each held by a reservation record in the store, as its cluster IP is by an
//! IPAddress (`ipaddress.rs`): the record's key is the port, so one store create decides between several API
//! servers on one etcd. Upstream keeps a bitmap of the range in etcd (`/registry/ranges/servicenodeports`)
//! and updates it with a compare-and-swap; one key per port gives the same guarantee without one hot key.
//! The records live under a group no resource is served from, so no client lists or watches them.
//!
//! Reserved before the Service is written; released when it is deleted, or when its write fails; a record
//! left by a crash between the two writes is taken over after [`super::ipaddress::STALE_AFTER`]; at start
//! every Service's node ports get their records.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::ipaddress::{ATTEMPTS, Existing, Hold, NOBODY, examine, parent};
use super::{Registry, meta_str, resources};
use crate::error::ApiError;
use crate::storage::Decision;

/// Where the records are: `<this prefix><port>`.
const RECORDS: &str = "kubeling.io/servicenodeports//";

/// Upstream's default `--service-node-port-range`.
pub const RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

fn key(port: i64) -> String {
    format!("{RECORDS}{port}")
}

fn services() -> &'static super::ResourceInfo {
    resources::find("", "v1", "services").expect("services are served")
}

/// The node ports of a Service's spec.
pub fn node_ports(service: &Value) -> Vec<i64> {
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .collect()
}

fn record(port: i64, ns: &str, name: &str) -> Value {
    json!({
        "metadata": {"name": port.to_string(), "creationTimestamp": super::now_rfc3339()},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}

/// Whether the Service `ns/name` exists and has `port` as a node port.
fn holds(registry: &Registry, ns: &str, name: &str, port: i64) -> bool {
    registry
        .storage()
        .get(&services().key(Some(ns), name))
        .is_some_and(|s| node_ports(&s.value()).contains(&port))
}

/// [`examine`] the existing record of `port` (every record is the allocator's).
fn examine_port(registry: &Registry, record: &Value, port: i64, want: (&str, &str)) -> Existing {
    examine(record, want, |ns, name| holds(registry, ns, name, port), true)
}

/// Every record: its port and its value.
fn records(registry: &Registry) -> Vec<(i64, Value)> {
    registry
        .storage()
        .list(RECORDS, None, None, |_| true)
        .items
        .iter()
        .filter_map(|r| {
            let r = r.value();
            Some((meta_str(&r, "name")?.parse().ok()?, r))
        })
        .collect()
}

/// Make `port`'s record name the Service `ns/name`, unless another Service holds the port.
async fn hold(registry: &Registry, port: i64, ns: &str, name: &str) -> Result<Hold, ApiError> {
    let mut outcome = Hold::Created;
    registry
        .storage()
        .write(&key(port), |current| {
            let Some(current) = current else {
                outcome = Hold::Created;
                return Ok::<_, ApiError>(Decision::Put(record(port, ns, name)));
            };
            Ok(match examine_port(registry, &current.value(), port, (ns, name)) {
                Existing::Ours => {
                    outcome = Hold::Already;
                    Decision::Keep
                }
                Existing::Theirs => {
                    outcome = Hold::Taken;
                    Decision::Keep
                }
                Existing::Stale => {
                    outcome = Hold::Created;
                    Decision::Put(record(port, ns, name))
                }
            })
        })
        .await?;
    Ok(outcome)
}

/// 422 for a requested node port (upstream's messages).
fn invalid(service: &Value, index: usize, port: i64, detail: &str) -> ApiError {
    ApiError::invalid(
        "Service",
        "",
        meta_str(service, "name").unwrap_or(""),
        &[crate::error::FieldError::invalid(
            format!("spec.ports[{index}].nodePort"),
            &json!(port),
            detail,
        )],
    )
}

/// A requested node port outside the range: upstream's 422.
pub fn out_of_range(service: &Value, index: usize, port: i64) -> ApiError {
    invalid(
        service,
        index,
        port,
        &format!(
            "provided port is not in the valid range. The range of valid ports is {}-{}",
            RANGE.start(),
            RANGE.end()
        ),
    )
}

/// A requested node port another Service holds: upstream's 422.
pub fn taken(service: &Value, index: usize, port: i64) -> ApiError {
    invalid(service, index, port, "provided port is already allocated")
}

/// The ports held by records (reserved by any API server, their Services maybe not written yet), but for
/// left-overs, which dynamic allocation may take over, and those of the Service `except`.
pub(super) fn reserved(registry: &Registry, except: Option<(&str, &str)>) -> HashSet<i64> {
    records(registry)
        .into_iter()
        .filter(|(port, r)| {
            let theirs = except.is_none_or(|e| parent(r) != Some(e));
            theirs && examine_port(registry, r, *port, NOBODY) != Existing::Stale
        })
        .map(|(port, _)| port)
        .collect()
}

/// Reserve the node ports of `service` (about to be created in `ns`, its ports already allocated): a port
/// another API server took meanwhile is refused when the client asked for it (`requested` holds the indexes
/// of those ports), replaced by the next free one otherwise. Returns the ports whose records this call
/// created, for [`release`] should the Service's write fail; on an error it has released them itself.
pub(super) async fn reserve(
    registry: &Registry,
    service: &mut Value,
    ns: &str,
    requested: &HashSet<usize>,
) -> Result<Vec<i64>, ApiError> {
    let name = meta_str(service, "name").unwrap_or("").to_string();
    let count = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut created = Vec::new();
    let mut lost = HashSet::new();
    for index in 0..count {
        let mut attempts = 0;
        let outcome = loop {
            let port = service
                .pointer(&format!("/spec/ports/{index}/nodePort"))
                .and_then(Value::as_i64);
            let Some(port) = port else { break Ok(()) };
            attempts += 1;
            match hold(registry, port, ns, &name).await {
                Ok(Hold::Created) => {
                    created.push(port);
                    break Ok(());
                }
                Ok(Hold::Already) => break Ok(()),
                Ok(Hold::Taken) if requested.contains(&index) => break Err(taken(service, index, port)),
                Ok(Hold::Taken) if attempts < ATTEMPTS => {
                    lost.insert(port);
                    let mut used = super::service::used(registry).1;
                    used.extend(reserved(registry, None));
                    used.extend(lost.iter().copied());
                    used.extend(node_ports(service));
                    let Some(next) = RANGE.clone().find(|p| !used.contains(p)) else {
                        break Err(ApiError::internal("the node port range is full"));
                    };
                    service["spec"]["ports"][index]["nodePort"] = json!(next);
                }
                Ok(Hold::Taken) => {
                    break Err(ApiError::internal(
                        "could not reserve a node port: every try lost to another API server",
                    ));
                }
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = outcome {
            release(registry, &created, ns, &name).await;
            return Err(e);
        }
    }
    Ok(created)
}

/// Delete the records of `ports` that name the Service `ns/name`.
pub(super) async fn release(registry: &Registry, ports: &[i64], ns: &str, name: &str) {
    for &port in ports {
        // Ours again: the Service `ns/name` in the store has the port (another server's create of the same
        // name won, or the Service was made again).
        if holds(registry, ns, name, port) {
            continue;
        }
        let released = registry
            .storage()
            .write(&key(port), |current| match current {
                Some(c) if parent(&c.value()) == Some((ns, name)) => Ok(Decision::Delete),
                _ => Err(ApiError::not_found(
                    "servicenodeports",
                    "kubeling.io",
                    &port.to_string(),
                )),
            })
            .await;
        if let Err(e) = released
            && e.code != 404
        {
            tracing::warn!(port, error = %e.message, "releasing a node port");
        }
    }
}

/// After an update of the Service `service`: its records follow its node ports (new ones held, dropped ones
/// released).
pub(super) async fn sync(registry: &Registry, service: &Value) {
    let ns = meta_str(service, "namespace").unwrap_or("");
    let name = meta_str(service, "name").unwrap_or("");
    let ports = node_ports(service);
    for &port in &ports {
        match hold(registry, port, ns, name).await {
            Ok(Hold::Taken) => {
                tracing::warn!(
                    port,
                    namespace = ns,
                    service = name,
                    "two Services hold one node port"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(port, error = %e.message, "holding a node port"),
        }
    }
    let dropped: Vec<i64> = records(registry)
        .into_iter()
        .filter(|(port, r)| parent(r) == Some((ns, name)) && !ports.contains(port))
        .map(|(port, _)| port)
        .collect();
    release(registry, &dropped, ns, name).await;
}

/// At start: every Service's node ports have their records (data dirs from before the records).
pub(super) async fn repair(registry: &Registry) -> Result<(), ApiError> {
    let all = registry.list(services(), None, &super::Selection::default(), None, None);
    for s in all.items {
        let s = s.value();
        let ns = meta_str(&s, "namespace").unwrap_or("");
        let name = meta_str(&s, "name").unwrap_or("");
        for port in node_ports(&s) {
            if registry.storage().get(&key(port)).is_some() {
                continue;
            }
            if hold(registry, port, ns, name).await? == Hold::Taken {
                tracing::warn!(
                    port,
                    namespace = ns,
                    service = name,
                    "two Services hold one node port"
                );
            }
        }
    }
    Ok(())
}
