//! The cluster's own Docker network and its service gateway container.
//!
//! Each cluster (one data dir, one cluster id) gets a user-defined bridge `kubeling-<cluster id>` with a /22
//! picked from 10.112.0.0/12 that overlaps no existing Docker network ([`pick_subnet`]), so two clusters on
//! one Docker never collide. The host side of the bridge is `.1` (where the node agent's proxy listens), the
//! gateway container is `.2`, and pods get addresses from the upper /23 (Docker's `ip-range`). The network
//! is reused after a restart (pods keep their IPs) and removed by a later start of any kubeling once the data
//! dir it belongs to is gone ([`remove_orphans`]).
//!
//! The gateway container (`kubeling-gateway-<cluster id>`, image built from `pause/gateway.c`) owns the whole
//! Service range through a local route; it balances TCP Service connections itself, straight to the pods, over
//! the endpoints the node agent (`crate::proxy`) sends it, and relays UDP to the agent. Pods route the range to
//! it (pause's `--route`).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam, IpamConfig,
    NetworkCreateRequest, NetworkingConfig, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder,
};
use tracing::{info, warn};

use crate::runtime::docker::{DockerRuntime, PodNetwork};

/// Upstream's default `--service-cluster-ip-range`, the range the API server allocates from.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The gateway's image, built locally from [`GATEWAY_BINARY`].
pub const GATEWAY_IMAGE: &str = "kubeling/gateway:0.2";
/// The static gateway executable compiled by `build.rs` from `pause/gateway.c`.
pub const GATEWAY_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gateway"));
/// SHA-256 of [`GATEWAY_BINARY`]; the image and the container carry it as [`LABEL_GATEWAY_SHA`].
pub const GATEWAY_BINARY_SHA256: &str = env!("KUBELING_GATEWAY_SHA256");
/// The gateway's control port, on its own address (never on a Service IP).
pub const GATEWAY_CONTROL_PORT: u16 = 9;

const LABEL_NETWORK_CLUSTER: &str = "io.kubeling.network";
const LABEL_DATA_DIR: &str = "io.kubeling.data-dir";
const LABEL_GATEWAY: &str = "io.kubeling.gateway";
const LABEL_GATEWAY_SHA: &str = "io.kubeling.gateway.sha";
/// The pool the per-cluster /22s come from.
const POOL: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 112, 0, 0), 12);
const SUBNET_PREFIX: u8 = 22;

/// Failures setting up the network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A Docker call failed.
    #[error("{what} {name}: {source}")]
    Docker {
        /// The operation.
        what: &'static str,
        /// The network or container.
        name: String,
        /// bollard's error.
        source: bollard::errors::Error,
    },
    /// The pool has no /22 left that overlaps nothing.
    #[error("no free /{SUBNET_PREFIX} left in 10.112.0.0/12 for network {0}")]
    PoolExhausted(String),
    /// The existing network has no IPv4 subnet kubeling can use.
    #[error("network {0} has no usable IPv4 subnet")]
    BadNetwork(String),
    /// The gateway image could not be built.
    #[error("gateway image: {0}")]
    Image(String),
}

/// The addresses of a cluster's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNetwork {
    /// `kubeling-<cluster id>`.
    pub name: String,
    /// The /22.
    pub subnet: (Ipv4Addr, u8),
    /// The host's address on the bridge (Docker's gateway): where the agent's proxy listens.
    pub host_ip: Ipv4Addr,
    /// The gateway container's address.
    pub gateway_ip: Ipv4Addr,
}

impl ClusterNetwork {
    /// The layout of a network on `subnet`: host `.1`, gateway `.2`.
    pub fn on(name: String, subnet: (Ipv4Addr, u8)) -> ClusterNetwork {
        let base = u32::from(subnet.0);
        ClusterNetwork {
            name,
            subnet,
            host_ip: Ipv4Addr::from(base + 1),
            gateway_ip: Ipv4Addr::from(base + 2),
        }
    }

    /// What sandboxes need to join it; `route`: the pause image is kubeling's own and adds the Service route.
    pub fn pod_network(&self, route: bool) -> PodNetwork {
        PodNetwork {
            name: self.name.clone(),
            service_cidr: SERVICE_CIDR.to_owned(),
            gateway_ip: self.gateway_ip.to_string(),
            route,
        }
    }

    /// Docker's `ip-range` for pods: the upper half of the subnet (the lower half keeps `.1`, `.2` free).
    fn pod_range(&self) -> String {
        let half = 1u32 << (32 - self.subnet.1 - 1);
        format!(
            "{}/{}",
            Ipv4Addr::from(u32::from(self.subnet.0) + half),
            self.subnet.1 + 1
        )
    }
}

/// The network's name for a cluster id.
pub fn network_name(cluster_id: &str) -> String {
    format!("kubeling-{cluster_id}")
}

/// The gateway container's name for a cluster id.
pub fn gateway_name(cluster_id: &str) -> String {
    format!("kubeling-gateway-{cluster_id}")
}

/// Parses `a.b.c.d/n` (IPv4 only), the network address with host bits cleared.
pub fn parse_cidr(text: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, prefix) = text.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((Ipv4Addr::from(u32::from(ip) & mask(prefix)), prefix))
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) }
}

fn overlaps(a: (Ipv4Addr, u8), b: (Ipv4Addr, u8)) -> bool {
    let m = mask(a.1.min(b.1));
    u32::from(a.0) & m == u32::from(b.0) & m
}

/// The first /22 of 10.112.0.0/12 that overlaps none of `taken` (every existing Docker network's subnets).
pub fn pick_subnet(taken: &[(Ipv4Addr, u8)]) -> Option<(Ipv4Addr, u8)> {
    let count = 1u32 << (SUBNET_PREFIX - POOL.1);
    (0..count)
        .map(|i| {
            (
                Ipv4Addr::from(u32::from(POOL.0) + (i << (32 - SUBNET_PREFIX))),
                SUBNET_PREFIX,
            )
        })
        .find(|candidate| !taken.iter().any(|t| overlaps(*candidate, *t)))
}

fn docker_err(what: &'static str, name: &str) -> impl FnOnce(bollard::errors::Error) -> NetworkError {
    let name = name.to_owned();
    move |source| NetworkError::Docker { what, name, source }
}

fn status_code(err: &bollard::errors::Error) -> Option<u16> {
    match err {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

fn ipv4_subnets(ipam: Option<&Ipam>) -> Vec<(Ipv4Addr, u8)> {
    ipam.and_then(|i| i.config.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.subnet.as_deref().and_then(parse_cidr))
        .collect()
}

/// Finds or creates the cluster's network. `data_dir` is recorded on it for [`remove_orphans`].
pub async fn ensure_network(
    docker: &Docker,
    cluster_id: &str,
    data_dir: &Path,
) -> Result<ClusterNetwork, NetworkError> {
    let name = network_name(cluster_id);
    for _attempt in 0..5 {
        match docker.inspect_network(&name, None).await {
            Ok(existing) => {
                let subnet = ipv4_subnets(existing.ipam.as_ref())
                    .into_iter()
                    .next()
                    .ok_or_else(|| NetworkError::BadNetwork(name.clone()))?;
                return Ok(ClusterNetwork::on(name, subnet));
            }
            Err(err) if status_code(&err) == Some(404) => {}
            Err(err) => return Err(docker_err("inspect network", &name)(err)),
        }
        let all = docker
            .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
            .await
            .map_err(docker_err("list networks", &name))?;
        let taken: Vec<_> = all.iter().flat_map(|n| ipv4_subnets(n.ipam.as_ref())).collect();
        let subnet = pick_subnet(&taken).ok_or_else(|| NetworkError::PoolExhausted(name.clone()))?;
        let net = ClusterNetwork::on(name.clone(), subnet);
        let request = NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".to_owned()),
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(format!("{}/{}", subnet.0, subnet.1)),
                    ip_range: Some(net.pod_range()),
                    gateway: Some(net.host_ip.to_string()),
                    ..IpamConfig::default()
                }]),
                ..Ipam::default()
            }),
            labels: Some(HashMap::from([
                (LABEL_NETWORK_CLUSTER.to_owned(), cluster_id.to_owned()),
                (LABEL_DATA_DIR.to_owned(), data_dir.display().to_string()),
            ])),
            ..NetworkCreateRequest::default()
        };
        match docker.create_network(request).await {
            Ok(_) => {
                info!(network = %name, subnet = %format!("{}/{}", subnet.0, subnet.1), "created the cluster network");
                return Ok(net);
            }
            // Another cluster took the same subnet (or this name) meanwhile: look again.
            Err(err) if matches!(status_code(&err), Some(400 | 403 | 409)) => {
                warn!(network = %name, error = %err, "creating the network raced; retrying");
            }
            Err(err) => return Err(docker_err("create network", &name)(err)),
        }
    }
    Err(NetworkError::PoolExhausted(name))
}

/// Makes sure the gateway container runs on `net` with the current gateway binary: builds the image when
/// needed and (re)creates the container when it is missing, stale or stopped. Pods keep running meanwhile.
pub async fn ensure_gateway(
    runtime: &DockerRuntime,
    cluster_id: &str,
    net: &ClusterNetwork,
) -> Result<(), NetworkError> {
    runtime
        .ensure_embedded_image(
            GATEWAY_IMAGE,
            LABEL_GATEWAY_SHA,
            GATEWAY_BINARY_SHA256,
            "gateway",
            GATEWAY_BINARY,
        )
        .await
        .map_err(|e| NetworkError::Image(e.to_string()))?;
    let docker = runtime.client();
    let name = gateway_name(cluster_id);
    match docker.inspect_container(&name, None).await {
        Ok(c) => {
            let current = c
                .config
                .as_ref()
                .and_then(|c| c.labels.as_ref())
                .and_then(|l| l.get(LABEL_GATEWAY_SHA))
                .is_some_and(|sha| sha == GATEWAY_BINARY_SHA256);
            let running = c.state.as_ref().and_then(|s| s.running).unwrap_or(false);
            if current && running {
                return Ok(());
            }
            info!(container = %name, current, running, "replacing the gateway container");
            let options = RemoveContainerOptionsBuilder::new().force(true).build();
            docker
                .remove_container(&name, Some(options))
                .await
                .map_err(docker_err("remove container", &name))?;
        }
        Err(err) if status_code(&err) == Some(404) => {}
        Err(err) => return Err(docker_err("inspect container", &name)(err)),
    }
    let body = ContainerCreateBody {
        image: Some(GATEWAY_IMAGE.to_owned()),
        cmd: Some(vec![
            SERVICE_CIDR.to_owned(),
            net.gateway_ip.to_string(),
            GATEWAY_CONTROL_PORT.to_string(),
        ]),
        labels: Some(HashMap::from([
            (LABEL_GATEWAY.to_owned(), cluster_id.to_owned()),
            (LABEL_GATEWAY_SHA.to_owned(), GATEWAY_BINARY_SHA256.to_owned()),
        ])),
        host_config: Some(HostConfig {
            network_mode: Some(net.name.clone()),
            cap_add: Some(vec!["NET_ADMIN".to_owned()]),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
                maximum_retry_count: None,
            }),
            ..HostConfig::default()
        }),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                net.name.clone(),
                EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: Some(net.gateway_ip.to_string()),
                        ..EndpointIpamConfig::default()
                    }),
                    ..EndpointSettings::default()
                },
            )])),
        }),
        ..ContainerCreateBody::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    docker
        .create_container(Some(options), body)
        .await
        .map_err(docker_err("create container", &name))?;
    docker
        .start_container(&name, None::<bollard::query_parameters::StartContainerOptions>)
        .await
        .map_err(docker_err("start container", &name))?;
    info!(container = %name, ip = %net.gateway_ip, "started the service gateway");
    Ok(())
}

/// Removes a cluster's gateway container and network (best effort: a network with containers stays).
pub async fn remove(docker: &Docker, cluster_id: &str) {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    let _ = docker
        .remove_container(&gateway_name(cluster_id), Some(options))
        .await;
    let _ = docker.remove_network(&network_name(cluster_id)).await;
}

/// Removes the networks (and gateway containers) of clusters whose data dir no longer holds their cluster
/// id: their data is gone, so nothing will use them again. A network that still has containers stays.
pub async fn remove_orphans(docker: &Docker) {
    let filters = HashMap::from([("label", vec![LABEL_DATA_DIR])]);
    let options = ListNetworksOptionsBuilder::new().filters(&filters).build();
    let Ok(networks) = docker.list_networks(Some(options)).await else {
        return;
    };
    for n in networks {
        let labels = n.labels.unwrap_or_default();
        let (Some(dir), Some(id), Some(name), Some(net_id)) = (
            labels.get(LABEL_DATA_DIR),
            labels.get(LABEL_NETWORK_CLUSTER),
            n.name,
            n.id,
        ) else {
            continue;
        };
        let recorded = match std::fs::read_to_string(Path::new(dir).join("cluster-id")) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Unreadable is not gone.
            Err(_) => continue,
        };
        if !orphaned(recorded.as_deref(), id) {
            continue;
        }
        let options = RemoveContainerOptionsBuilder::new().force(true).build();
        let _ = docker.remove_container(&gateway_name(id), Some(options)).await;
        // By id: two networks can share a name when created at the same moment.
        match docker.remove_network(&net_id).await {
            Ok(()) => info!(network = %name, data_dir = %dir, "removed the network of a deleted cluster"),
            Err(e) => warn!(network = %name, error = %e, "cannot remove the network of a deleted cluster"),
        }
    }
}

/// Whether a network of cluster `network_cluster` is an orphan, given what its data dir's `cluster-id` holds
/// (`None`: no such file). The dir may be gone, or deleted and made again at the same path by another
/// cluster. An empty id or a prefix of this one is a file being written (a starting agent rewrites it), not
/// another cluster.
fn orphaned(recorded: Option<&str>, network_cluster: &str) -> bool {
    match recorded.map(str::trim) {
        None => true,
        Some(id) => !id.is_empty() && !network_cluster.starts_with(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_is_an_orphan_when_its_data_dir_holds_no_id_or_another_clusters() {
        let cases = [
            (None, true),
            (Some("aaaa000011112222"), false),
            (Some("aaaa000011112222\n"), false),
            (Some("bbbb000011112222"), true),
            (Some(""), false),
            (Some("aaaa00"), false),
        ];
        for (recorded, want) in cases {
            assert_eq!(orphaned(recorded, "aaaa000011112222"), want, "{recorded:?}");
        }
    }

    fn net(s: &str) -> (Ipv4Addr, u8) {
        parse_cidr(s).unwrap()
    }

    #[test]
    fn subnets_skip_every_overlapping_network() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], Some("10.112.0.0/22")),
            (&["172.17.0.0/16"], Some("10.112.0.0/22")),
            (&["10.112.0.0/22"], Some("10.112.4.0/22")),
            (&["10.112.0.0/22", "10.112.4.0/24"], Some("10.112.8.0/22")),
            // A wider network covering the start of the pool.
            (&["10.112.0.0/16"], Some("10.113.0.0/22")),
            (&["10.0.0.0/8"], None),
            (&["10.112.0.0/12"], None),
        ];
        for (taken, want) in cases {
            let taken: Vec<_> = taken.iter().map(|s| net(s)).collect();
            assert_eq!(pick_subnet(&taken), want.map(net), "taken {taken:?}");
        }
    }

    #[test]
    fn the_layout_reserves_host_and_gateway_below_the_pod_range() {
        let n = ClusterNetwork::on("kubeling-x".into(), net("10.112.4.0/22"));
        assert_eq!(n.host_ip, Ipv4Addr::new(10, 112, 4, 1));
        assert_eq!(n.gateway_ip, Ipv4Addr::new(10, 112, 4, 2));
        assert_eq!(n.pod_range(), "10.112.6.0/23");
        assert_eq!(n.pod_network(true).service_cidr, "10.96.0.0/12");
    }

    #[test]
    fn cidrs_parse_with_host_bits_cleared() {
        assert_eq!(
            parse_cidr("10.96.0.1/12"),
            Some((Ipv4Addr::new(10, 96, 0, 0), 12))
        );
        assert_eq!(parse_cidr("10.96.0.0"), None);
        assert_eq!(parse_cidr("10.96.0.0/33"), None);
        assert_eq!(parse_cidr("fd00::/64"), None);
    }
}
