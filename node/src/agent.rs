//! The node agent as a whole: connect to Docker, make the pause image, register the node and keep its
//! status and Lease fresh, and run the pods bound to it. A client of any API server, over HTTPS only.
//!
//! With [`RuntimeChoice::Sim`] the same kubelet runs over the simulated runtime
//! ([`crate::runtime::sim`]) and its prober ([`crate::prober::sim`]): no Docker, no pause image, no
//! cluster network, gateway or Service proxy (Services do not route on simulated nodes), and the node
//! reports kwok's fake capacity. Several agents can run in one process, each with its own node name, data
//! dir, kubelet port and pod IP range.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::kubelet::{Kubelet, KubeletConfig};
use crate::node_status::{self, NodeConfig};
use crate::prober::Prober;
use crate::runtime::docker::{DEFAULT_PAUSE_IMAGE, DockerRuntime};
use crate::runtime::sim::PodCidr;
use crate::runtime::{ContainerRuntime, Owner, SimRuntime};
use crate::sources::{self, SourceUpdate};

/// Which container runtime a node agent drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeChoice {
    /// Docker.
    #[default]
    Docker,
    /// The simulated runtime, giving pods the addresses of this range.
    Sim(PodCidr),
}

/// How to run a node agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The container runtime.
    pub runtime: RuntimeChoice,
    /// Node name.
    pub node_name: String,
    /// The node's IP (InternalIP, pods' hostIP).
    pub node_ip: String,
    /// Where the cluster id and pod volumes live.
    pub data_dir: PathBuf,
    /// The pause image (built locally when missing).
    pub pause_image: String,
    /// Port of the node's own endpoint (logs, exec), reported in the Node status; 0 takes a free one.
    pub kubelet_port: u16,
    /// The bearer token the API server presents to the node's endpoint (the cluster's token).
    pub node_token: String,
    /// The manifest directory of static pods (`--static-pod-path`); none disables the file source.
    pub static_pod_path: Option<PathBuf>,
    /// How often the manifest directory is listed in full (besides watching it).
    pub file_check_frequency: Duration,
    /// The manifest URL of static pods (`--manifest-url`); none disables the http source.
    pub manifest_url: Option<String>,
    /// Headers sent with the manifest URL's GET.
    pub manifest_url_headers: Vec<(String, String)>,
    /// How often the manifest URL is fetched.
    pub http_check_frequency: Duration,
    /// Pods' DNS: `--cluster-dns`, `--cluster-domain`, `--resolv-conf`.
    pub dns: crate::dns::DnsSettings,
    /// Put pods on the cluster's own Docker network and run the Service proxy (off: Docker's default bridge,
    /// no Services).
    pub services: bool,
    /// The API server's address on this host, for the `kubernetes` Service's endpoints; none leaves them.
    pub apiserver: Option<std::net::SocketAddr>,
    /// The id that marks this cluster's containers and names its Docker network; none reads (or makes) the
    /// one in `data_dir`. Node agents of one cluster on one Docker share it, and so share the network.
    pub cluster_id: Option<String>,
    /// Run the service gateway and the Service proxy (with `services`). Of several node agents on one Docker
    /// only one does: the gateway serves the whole cluster network, and so every node's pods.
    pub service_proxy: bool,
}

/// upstream: `fileCheckFrequency` and `httpCheckFrequency` default to 20 s.
pub const DEFAULT_CHECK_FREQUENCY: Duration = Duration::from_secs(20);

impl AgentConfig {
    /// Defaults: the host name as node name, 127.0.0.1, kubeling's pause image.
    pub fn new(data_dir: &Path) -> AgentConfig {
        AgentConfig {
            runtime: RuntimeChoice::Docker,
            node_name: default_node_name(),
            node_ip: "127.0.0.1".to_string(),
            data_dir: data_dir.to_path_buf(),
            pause_image: DEFAULT_PAUSE_IMAGE.to_string(),
            kubelet_port: 0,
            node_token: String::new(),
            static_pod_path: None,
            file_check_frequency: DEFAULT_CHECK_FREQUENCY,
            manifest_url: None,
            manifest_url_headers: Vec::new(),
            http_check_frequency: DEFAULT_CHECK_FREQUENCY,
            dns: Default::default(),
            services: true,
            apiserver: None,
            cluster_id: None,
            service_proxy: true,
        }
    }
}

/// The host name, lower-cased (upstream's default node name).
pub fn default_node_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
    name.trim().to_lowercase()
}

/// The id that marks this cluster's containers in a shared Docker engine; made once, kept in the data dir.
pub fn cluster_id(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("cluster-id");
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        _ => {
            std::fs::create_dir_all(data_dir)?;
            let id = format!("{:016x}", rand_u64());
            std::fs::write(&path, &id)?;
            Ok(id)
        }
    }
}

fn rand_u64() -> u64 {
    // Enough entropy for an id without a dependency: time and the process id through a hash.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(jiff::Timestamp::now().as_nanosecond() as u128);
    h.write_u32(std::process::id());
    h.finish()
}

/// Run the node agent until `cancel`. Containers keep running after it stops (simulated ones end with it).
pub async fn run(client: kube::Client, cfg: AgentConfig, cancel: CancellationToken) -> std::io::Result<()> {
    let owner = Owner {
        cluster: match &cfg.cluster_id {
            Some(id) => {
                // Kept in this node's data dir too: what finds the cluster's containers and network by it
                // (and tells a live cluster's network from an orphan's) reads it there.
                std::fs::create_dir_all(&cfg.data_dir)?;
                std::fs::write(cfg.data_dir.join("cluster-id"), id)?;
                id.clone()
            }
            None => cluster_id(&cfg.data_dir)?,
        },
        node: cfg.node_name.clone(),
    };
    let (runtime, prober): (Arc<dyn ContainerRuntime>, Option<Arc<dyn Prober>>) = match cfg.runtime {
        RuntimeChoice::Docker => match docker_runtime(&client, &cfg, owner, &cancel).await {
            Some(runtime) => (runtime, None),
            None => return Ok(()),
        },
        RuntimeChoice::Sim(cidr) => {
            tracing::info!(node = %cfg.node_name, pod_cidr = %cidr, "simulated runtime: no Docker; Services do not route to its pods");
            let sim = SimRuntime::new(owner, cidr);
            let prober = Arc::new(crate::prober::sim::SimProber::new(sim.clone()));
            (Arc::new(sim), Some(prober))
        }
    };
    // The node's own endpoint (logs, exec): a free port unless one is given, a self-signed certificate
    // (the API server authenticates to it with the cluster token; see apiserver/src/http/proxy.rs).
    let listener = std::net::TcpListener::bind((bind_ip(&cfg.node_ip), cfg.kubelet_port))?;
    let kubelet_port = listener.local_addr()?.port();
    let tls = Arc::new(node_tls(&cfg)?);
    let node_cfg = NodeConfig {
        name: cfg.node_name.clone(),
        ip: cfg.node_ip.clone(),
        kubelet_port,
        data_dir: cfg.data_dir.clone(),
        simulated: matches!(cfg.runtime, RuntimeChoice::Sim(_)),
    };
    let health_runtime = runtime.clone();
    let health = move || {
        let r = health_runtime.clone();
        async move {
            r.version()
                .await
                .map(|v| v.trim_start_matches("docker://").to_string())
                .map_err(|e| e.to_string())
        }
    };
    let status = node_status::run(client.clone(), node_cfg, health, cancel.clone());
    let (static_updates, static_sources) = start_static_sources(&cfg, &cancel);
    let kubelet_cfg = KubeletConfig {
        node_name: cfg.node_name.clone(),
        node_ip: cfg.node_ip.clone(),
        pause_image: cfg.pause_image.clone(),
        data_dir: cfg.data_dir.clone(),
        container_gc_period: crate::gc::CONTAINER_GC_PERIOD,
        dns: cfg.dns.clone(),
    };
    let kubelet = match prober {
        Some(prober) => Kubelet::with_prober(client, runtime.clone(), kubelet_cfg, prober),
        None => Kubelet::new(client, runtime.clone(), kubelet_cfg),
    };
    let state = Arc::new(crate::server::ServerState {
        runtime,
        lookup: kubelet.container_lookup(),
        token: cfg.node_token.clone(),
    });
    let server = crate::server::serve(listener, tls, state, cancel.clone());
    let pods = kubelet.run(static_updates, &static_sources, cancel);
    let (_, _, served) = tokio::join!(status, pods, server);
    served
}

/// Docker with the pause image, and (with `cfg.services`) the cluster network, its gateway and the Service
/// proxy; `None` when `cancel` came first.
async fn docker_runtime(
    client: &kube::Client,
    cfg: &AgentConfig,
    owner: Owner,
    cancel: &CancellationToken,
) -> Option<Arc<dyn ContainerRuntime>> {
    let docker = loop {
        match DockerRuntime::connect(owner.clone()).await {
            Ok(d) => break d,
            Err(e) => {
                tracing::warn!(error = %e, "cannot reach Docker; retrying");
                tokio::select! {
                    _ = cancel.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        }
    };
    let own_pause = match docker.ensure_pause_image(&cfg.pause_image).await {
        Ok(image) => image
            .labels
            .contains_key(crate::runtime::naming::LABEL_KUBELING_PAUSE),
        Err(e) => {
            tracing::error!(image = %cfg.pause_image, error = %e, "cannot make the pause image");
            false
        }
    };
    if !own_pause && cfg.services {
        tracing::warn!(image = %cfg.pause_image, "not kubeling's pause image: pods get no route to Services");
    }
    let (docker, proxy) = if cfg.services {
        match setup_network(&docker, &owner.cluster, cfg).await {
            Ok(net) if cfg.service_proxy => {
                tokio::spawn(keep_gateway(
                    docker.clone(),
                    owner.cluster.clone(),
                    net.clone(),
                    cancel.clone(),
                ));
                let proxy = crate::proxy::ProxyConfig {
                    host_ip: net.host_ip,
                    gateway_control: (net.gateway_ip, crate::network::GATEWAY_CONTROL_PORT).into(),
                    node_listen_ip: std::net::Ipv4Addr::LOCALHOST,
                    apiserver: cfg.apiserver,
                };
                (docker.with_pod_network(net.pod_network(own_pause)), Some(proxy))
            }
            // Another node agent of this cluster on this Docker runs the gateway: pods join its network.
            Ok(net) => (docker.with_pod_network(net.pod_network(own_pause)), None),
            Err(e) => {
                tracing::error!(error = %e, "cannot set up the cluster network; pods use Docker's default bridge and Services do not route");
                (docker, None)
            }
        }
    } else {
        (docker, None)
    };
    if let Some(proxy) = proxy {
        let (client, cancel) = (client.clone(), cancel.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::proxy::run(client, proxy, cancel).await {
                tracing::error!(error = %e, "the service proxy stopped");
            }
        });
    }
    Some(Arc::new(docker))
}

/// The cluster's Docker network and its service gateway (see `crate::network`); networks of deleted clusters
/// are removed first.
async fn setup_network(
    docker: &DockerRuntime,
    cluster: &str,
    cfg: &AgentConfig,
) -> Result<crate::network::ClusterNetwork, crate::network::NetworkError> {
    // Node agents of one process set up one network at a time: Docker creates two networks of one name
    // when asked at the same moment.
    static SETUP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = SETUP.lock().await;
    crate::network::remove_orphans(docker.client()).await;
    let net = crate::network::ensure_network(docker.client(), cluster, &cfg.data_dir).await?;
    if cfg.service_proxy {
        crate::network::ensure_gateway(docker, cluster, &net).await?;
    }
    Ok(net)
}

/// Re-creates the service gateway when it is gone or stopped (someone removed it, Docker restarted).
async fn keep_gateway(
    docker: DockerRuntime,
    cluster: String,
    net: crate::network::ClusterNetwork,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
        if let Err(e) = crate::network::ensure_gateway(&docker, &cluster, &net).await {
            tracing::warn!(error = %e, "cannot restore the service gateway");
        }
    }
}

/// Starts the manifest directory and manifest URL sources that are configured; returns the channel their
/// updates arrive on and their names.
fn start_static_sources(
    cfg: &AgentConfig,
    cancel: &CancellationToken,
) -> (mpsc::Receiver<SourceUpdate>, Vec<&'static str>) {
    let (tx, rx) = mpsc::channel(16);
    let mut names = Vec::new();
    if let Some(dir) = &cfg.static_pod_path {
        names.push(sources::FILE_SOURCE);
        tracing::info!(path = %dir.display(), "watching the static pod directory");
        tokio::spawn(sources::file::run(
            dir.clone(),
            cfg.node_name.clone(),
            cfg.file_check_frequency,
            tx.clone(),
            cancel.clone(),
        ));
    }
    if let Some(url) = &cfg.manifest_url {
        names.push(sources::HTTP_SOURCE);
        tokio::spawn(sources::http::run(
            url.clone(),
            cfg.manifest_url_headers.clone(),
            cfg.node_name.clone(),
            cfg.http_check_frequency,
            tx,
            cancel.clone(),
        ));
    }
    (rx, names)
}

fn bind_ip(node_ip: &str) -> std::net::IpAddr {
    node_ip
        .parse()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
}

/// A self-signed serving certificate for the node's endpoint (ring provider, as everywhere in kubeling).
fn node_tls(cfg: &AgentConfig) -> std::io::Result<rustls::ServerConfig> {
    let names = vec![
        cfg.node_name.clone(),
        cfg.node_ip.clone(),
        "localhost".to_string(),
    ];
    self_signed_tls(names)
}

/// A server configuration with a fresh self-signed certificate for `names` (ALPN `http/1.1`).
pub(crate) fn self_signed_tls(names: Vec<String>) -> std::io::Result<rustls::ServerConfig> {
    let err = |e: &dyn std::fmt::Display| std::io::Error::other(format!("node certificate: {e}"));
    let key = rcgen::KeyPair::generate().map_err(|e| err(&e))?;
    let params = rcgen::CertificateParams::new(names).map_err(|e| err(&e))?;
    let cert = params.self_signed(&key).map_err(|e| err(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = vec![cert.der().clone()];
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| err(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(&e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| err(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
