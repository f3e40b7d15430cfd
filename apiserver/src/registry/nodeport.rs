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

use super::ipaddress::{ATTEMPTS, Existing, Hold, age, decide, parent};
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
            let existing = current.value();
            let parent = parent(&existing);
            let parent_holds = parent.is_some_and(|(pns, pname)| holds(registry, pns, pname, port));
            Ok(match decide((ns, name), parent, parent_holds, age(&existing)) {
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

/// The ports held by records (reserved by any API server, their Services maybe not written yet).
pub(super) fn reserved(registry: &Registry) -> HashSet<i64> {
    registry
        .storage()
        .list(RECORDS, None, None, |_| true)
        .items
        .iter()
        .filter_map(|r| meta_str(&r.value(), "name").and_then(|n| n.parse().ok()))
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
                    used.extend(reserved(registry));
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
