//! kubeling's cluster DNS: the server behind the `kube-dns` Service.
//!
//! ```text
//! informers (Services, EndpointSlices) ──► their caches (watch::Stores: records::ClusterView)
//!                                                          │
//! UDP/TCP query ──► server::Handler ──► records::resolve (pure) ──► answer │ NODATA/NXDOMAIN + SOA
//!                          └──────── names outside the zone ──► server::Forwarder ──► host resolvers
//! kube_dns::ensure: server-side apply of kube-system/kube-dns, its EndpointSlice and Endpoints
//! ```
//!
//! It plays CoreDNS with kubeadm's Corefile (`kubernetes cluster.local in-addr.arpa ip6.arpa`, `pods insecure`,
//! `fallthrough in-addr.arpa ip6.arpa`, `forward . /etc/resolv.conf`). It is a Kubernetes client over HTTPS
//! like every other component.

pub mod kube_dns;
pub mod records;
pub mod server;
pub mod watch;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// kubelet `--cluster-domain` and CoreDNS's zone by default.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// The kube-dns Service's IP with the API server's Service range (10.96.0.0/12).
pub const DEFAULT_CLUSTER_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

/// How to run the DNS server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (UDP and TCP, same port; port 0 takes a free one).
    pub listen: SocketAddr,
    /// The cluster domain.
    pub domain: String,
    /// The resolv.conf whose nameservers get the names outside the zone.
    pub resolv_conf: PathBuf,
    /// Whether to apply the kube-dns Service and its endpoints.
    pub publish_service: bool,
}

impl Config {
    /// Defaults: loopback on a free port, `cluster.local`, `/etc/resolv.conf`.
    pub fn new() -> Config {
        Config {
            listen: (Ipv4Addr::LOCALHOST, 0).into(),
            domain: DEFAULT_CLUSTER_DOMAIN.to_owned(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            publish_service: true,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

/// A started DNS server.
pub struct Running {
    /// Where it listens (the real port).
    pub addr: SocketAddr,
    server: hickory_server::Server<server::Handler>,
}

impl Running {
    /// Stops serving.
    pub async fn shutdown(mut self) {
        let _ = self.server.shutdown_gracefully().await;
    }
}

/// Binds, starts the watchers and serves; the kube-dns objects are applied in the background (retried
/// until they are, or `cancel`). Watchers stop with `cancel`; the server with [`Running::shutdown`].
pub async fn start(
    client: kube::Client,
    cfg: Config,
    cancel: CancellationToken,
) -> Result<Running, server::ServerError> {
    let (udp, tcp) = server::bind(cfg.listen).await?;
    let addr = udp.local_addr().map_err(|source| server::ServerError::Bind {
        addr: cfg.listen,
        source,
    })?;
    let resolv = std::fs::read_to_string(&cfg.resolv_conf).unwrap_or_default();
    // Never forward to ourselves (a resolv.conf naming this server would loop).
    let upstreams: Vec<SocketAddr> = server::upstreams_from_resolv_conf(&resolv)
        .into_iter()
        .filter(|u| *u != addr)
        .collect();
    let ready = Arc::new(AtomicBool::new(false));
    let stores = watch::start(client.clone(), ready.clone(), cancel.clone());
    let watched = stores.clone();
    let serial = jiff_free_serial();
    let handler = server::Handler::new(
        Arc::new(stores),
        records::Zone::new(&cfg.domain, serial),
        server::Forwarder::new(upstreams),
        ready,
    );
    let server = server::serve(udp, tcp, handler);
    if cfg.publish_service {
        tokio::spawn(keep_kube_dns(client, addr, watched, cancel));
    }
    Ok(Running { addr, server })
}

/// How often the kube-dns objects are checked for and re-applied when one is gone.
const KEEP_PERIOD: Duration = Duration::from_secs(5);

/// Applies the kube-dns Service and its endpoints (retrying until it works), then re-applies them whenever
/// the watches show one of them gone, until `cancel`.
async fn keep_kube_dns(
    client: kube::Client,
    addr: SocketAddr,
    view: watch::Stores,
    cancel: CancellationToken,
) {
    use records::ClusterView;
    let mut applied = false;
    let mut retry = Duration::from_secs(2);
    loop {
        let present = applied
            && view.service(kube_dns::NAMESPACE, kube_dns::NAME).is_some()
            && !view
                .endpoint_slices(kube_dns::NAMESPACE, kube_dns::NAME)
                .is_empty();
        if !present {
            match kube_dns::ensure(&client, addr).await {
                Ok(ip) => {
                    tracing::info!(%ip, %addr, "kube-dns Service applied");
                    applied = true;
                    retry = Duration::from_secs(2);
                }
                Err(e) => {
                    // E.g. a data dir from before the DNS address was reserved, where another Service holds it.
                    tracing::warn!(error = %e, retry_in = ?retry, "applying the kube-dns Service");
                    applied = false;
                }
            }
        }
        let wait = if applied { KEEP_PERIOD } else { retry };
        if !applied {
            retry = (retry * 2).min(Duration::from_secs(60));
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Runs the DNS server until `cancel`.
pub async fn run(
    client: kube::Client,
    cfg: Config,
    cancel: CancellationToken,
) -> Result<(), server::ServerError> {
    let running = start(client, cfg, cancel.clone()).await?;
    tracing::info!(addr = %running.addr, "cluster DNS listening");
    cancel.cancelled().await;
    running.shutdown().await;
    Ok(())
}

/// The SOA serial: seconds since the epoch at start, as CoreDNS's (it uses the time of the last change).
fn jiff_free_serial() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1)
}
