//! kubeling's kube-proxy: makes ClusterIPs, NodePorts and LoadBalancer ports work without kernel NAT, so
//! that the host's firewall is never touched.
//!
//! ```text
//!  pod ──10.96.0.0/12 via gateway──► gateway container (owns the range, listens on each ClusterIP:port)
//!                                      │ TCP: round robin / ClientIP affinity in the gateway ──► pod IP:targetPort
//!                                      │ UDP: 12-byte header + datagram
//!                                      ▼
//!  host 127.0.0.1:nodePort/LB port ─► node agent (this module) ──► Balancer::next ──► pod IP:targetPort
//! ```
//!
//! Services and EndpointSlices come from two reflectors; every change rebuilds the table ([`table::build`]),
//! hands it to the [`balancer::Balancer`] (UDP, host ports), sends the gateway its set ([`gateway_set`]:
//! listeners, and per TCP port the ready endpoints and affinity it balances over itself) and opens or closes
//! the host listeners; a new ready endpoint is used from the next connection on.

pub mod balancer;
#[cfg(test)]
mod gateway_tests;
pub mod table;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use client::informer::{Informer, Informers};

use self::balancer::Balancer;
use self::table::{Protocol, ServicePort, ServicePortName};
use crate::events::{EventType, Recorder};

/// upstream userspace proxy `tryConnect`: the dial timeouts of its four attempts.
const DIAL_TIMEOUTS: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];
/// A UDP session (client, Service port) → endpoint ends after this long without a reply or request.
/// Deliberate difference: upstream's `--udp-timeout` default is 250 ms; a longer one keeps a slow answer.
const UDP_IDLE: Duration = Duration::from_secs(10);
/// The gateway's UDP header: client IPv4, client port, Service IPv4, Service port.
const UDP_HEADER: usize = 12;
/// How often the table is rebuilt without a change (a freed host port is retried, affinity expires).
const RESYNC: Duration = Duration::from_secs(5);
/// The address LoadBalancer Services get (`status.loadBalancer.ingress[0].ip`), as k3s rootless ServiceLB.
pub const LOAD_BALANCER_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Where the proxy listens and whom it tells.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The host's address on the cluster network: the gateway relays Service traffic here.
    pub host_ip: Ipv4Addr,
    /// The gateway container's control address.
    pub gateway_control: SocketAddr,
    /// The host address NodePorts and LoadBalancer ports listen on.
    pub node_listen_ip: Ipv4Addr,
    /// The API server's address on this host, for the `kubernetes` Service: its endpoint becomes
    /// `host_ip:port`, relayed here when the API server does not listen on `host_ip` itself.
    pub apiserver: Option<SocketAddr>,
}

#[derive(Default)]
struct Shared {
    by_vip: HashMap<(Ipv4Addr, u16, Protocol), ServicePortName>,
    by_host_port: HashMap<(u16, Protocol), ServicePortName>,
    balancer: Balancer,
}

type SharedRef = Arc<Mutex<Shared>>;

fn lock(shared: &SharedRef) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the proxy until `cancel`. Errors only when its own sockets cannot be opened.
pub async fn run(client: kube::Client, cfg: ProxyConfig, cancel: CancellationToken) -> std::io::Result<()> {
    let shared: SharedRef = Arc::default();
    let udp = Arc::new(UdpSocket::bind((cfg.host_ip, 0)).await?);
    let hello = format!("A {} {}\n", cfg.host_ip, udp.local_addr()?.port());
    let (set_tx, set_rx) = watch::channel(None::<String>);
    tokio::spawn(gateway_control(
        cfg.gateway_control,
        hello,
        set_rx,
        cancel.clone(),
    ));
    tokio::spawn(serve_udp(udp, UdpSource::Gateway, shared.clone(), cancel.clone()));
    if let Some(api) = cfg.apiserver {
        tokio::spawn(kubernetes_service(
            client.clone(),
            cfg.host_ip,
            api,
            cancel.clone(),
        ));
    }

    let informers = Informers::new();
    let services = informers.get::<Service>();
    let slices = informers.get::<EndpointSlice>();
    // Any change rebuilds the table (changes arriving together, once).
    let wake = Arc::new(tokio::sync::Notify::new());
    let poke = wake.clone();
    services.on_change(move |_| poke.notify_one());
    let poke = wake.clone();
    slices.on_change(move |_| poke.notify_one());
    informers.start(&client, &cancel);
    let mut hosts = HostListeners::new(cfg.node_listen_ip, shared.clone(), &cancel);
    let recorder = Arc::new(Recorder::new(client.clone(), "kube-proxy", None));
    let mut lb = LoadBalancerStatus::default();
    // Nothing is closed before both first lists have arrived (a restarted agent must not drop the
    // gateway's listeners on an empty store).
    tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        _ = informers.wait_synced() => {}
    }
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, RESYNC);
    loop {
        let table = table::build(&services.list_cloned(), &slices.list_cloned());
        {
            let mut s = lock(&shared);
            s.by_vip = table
                .iter()
                .map(|p| ((p.cluster_ip, p.port, p.id.protocol), p.id.clone()))
                .collect();
            s.balancer.update(&table);
            s.balancer.expire(Instant::now());
        }
        set_tx.send_if_modified(|old| {
            let new = Some(gateway_set(&table));
            let changed = *old != new;
            *old = new;
            changed
        });
        let failed = hosts.reconcile(&table).await;
        lb.sync(&client, &recorder, &services, &table, &failed).await;
        tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            _ = wake.notified() => {}
            _ = resync.tick() => {}
        }
    }
}

/// The gateway's set for `table` (the line protocol at the top of `node/pause/gateway.c`): `B`; per TCP
/// Service port with a ready endpoint `T IP PORT AFFINITY_SECONDS` (0: no affinity) and one `E IP PORT` per
/// endpoint in the balancer's order; per UDP one `U IP PORT`; `.`. A port without a ready endpoint is not
/// listened on, so a client is refused at once (TCP reset, ICMP port unreachable), as kube-proxy's REJECT
/// rule for Services without endpoints does. Ports are sorted, the first of two with one address kept.
pub fn gateway_set(table: &[ServicePort]) -> String {
    let mut ports: BTreeMap<(Protocol, Ipv4Addr, u16), String> = BTreeMap::new();
    for p in table {
        let endpoints: Vec<SocketAddrV4> = p
            .endpoints
            .iter()
            .filter_map(|e| match e {
                SocketAddr::V4(v4) => Some(*v4),
                SocketAddr::V6(_) => None,
            })
            .collect();
        if endpoints.is_empty() {
            continue;
        }
        let lines = match p.id.protocol {
            Protocol::Tcp => {
                // upstream's timeoutSeconds is 1..=86400; the gateway takes whole seconds in that range.
                let affinity = p.affinity.map_or(0, |d| d.as_secs().clamp(1, 86400));
                let mut lines = format!("T {} {} {affinity}\n", p.cluster_ip, p.port);
                for e in endpoints {
                    lines.push_str(&format!("E {} {}\n", e.ip(), e.port()));
                }
                lines
            }
            Protocol::Udp => format!("U {} {}\n", p.cluster_ip, p.port),
        };
        ports
            .entry((p.id.protocol, p.cluster_ip, p.port))
            .or_insert(lines);
    }
    format!("B\n{}.\n", ports.into_values().collect::<String>())
}

/// Keeps a control connection to the gateway: the hello (where to relay UDP) and every new set.
async fn gateway_control(
    addr: SocketAddr,
    hello: String,
    mut sets: watch::Receiver<Option<String>>,
    cancel: CancellationToken,
) {
    let mut logged = false;
    while !cancel.is_cancelled() {
        let conn = tokio::select! {
            _ = cancel.cancelled() => return,
            c = TcpStream::connect(addr) => c,
        };
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => {
                if !logged {
                    warn!(gateway = %addr, error = %e, "cannot reach the service gateway; retrying");
                    logged = true;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            }
        };
        info!(gateway = %addr, "connected to the service gateway");
        logged = false;
        let mut sink = [0u8; 256];
        let mut first = true;
        // A new connection gets the hello and the current set; after that only a changed set is sent.
        // The gateway's `ok` is read and dropped: answering it with the set again would make the two
        // ping-pong the same set for ever.
        let mut send = true;
        loop {
            if send {
                let set = sets.borrow_and_update().clone();
                let mut message = if first { hello.clone() } else { String::new() };
                first = false;
                message.push_str(set.as_deref().unwrap_or(""));
                if !message.is_empty() && conn.write_all(message.as_bytes()).await.is_err() {
                    break;
                }
            }
            send = tokio::select! {
                _ = cancel.cancelled() => return,
                changed = sets.changed() => if changed.is_err() { return } else { true },
                // A read of 0 or an error means the gateway went away.
                n = conn.read(&mut sink) => if matches!(n, Ok(n) if n > 0) { false } else { break },
            };
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Splits a gateway datagram into (client, service, payload).
pub fn parse_udp_header(datagram: &[u8]) -> Option<(SocketAddrV4, SocketAddrV4, &[u8])> {
    if datagram.len() < UDP_HEADER {
        return None;
    }
    let ip = |at: usize| Ipv4Addr::new(datagram[at], datagram[at + 1], datagram[at + 2], datagram[at + 3]);
    let port = |at: usize| u16::from_be_bytes([datagram[at], datagram[at + 1]]);
    Some((
        SocketAddrV4::new(ip(0), port(4)),
        SocketAddrV4::new(ip(6), port(10)),
        &datagram[UDP_HEADER..],
    ))
}

/// The header of a reply datagram to the gateway.
pub fn udp_header(client: SocketAddrV4, service: SocketAddrV4) -> [u8; UDP_HEADER] {
    let mut h = [0u8; UDP_HEADER];
    h[..4].copy_from_slice(&client.ip().octets());
    h[4..6].copy_from_slice(&client.port().to_be_bytes());
    h[6..10].copy_from_slice(&service.ip().octets());
    h[10..].copy_from_slice(&service.port().to_be_bytes());
    h
}

/// Dials an endpoint of `id` (up to four attempts, the later ones without affinity) and copies both ways.
/// No endpoint: the client's connection is closed at once (upstream: "missing endpoints").
async fn proxy_tcp<S>(mut conn: S, id: &ServicePortName, client: IpAddr, shared: &SharedRef)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    for (attempt, timeout) in DIAL_TIMEOUTS.iter().enumerate() {
        let Some(endpoint) = lock(shared)
            .balancer
            .next(id, client, Instant::now(), attempt > 0)
        else {
            debug!(service = %id, "no endpoints");
            return;
        };
        match tokio::time::timeout(*timeout, TcpStream::connect(endpoint)).await {
            Ok(Ok(mut backend)) => {
                let _ = backend.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut conn, &mut backend).await;
                return;
            }
            Ok(Err(e)) => debug!(service = %id, %endpoint, error = %e, "dial failed"),
            Err(_) => debug!(service = %id, %endpoint, "dial timed out"),
        }
    }
}

/// Where UDP requests come from: the gateway (with headers) or clients on a host port.
#[derive(Clone)]
enum UdpSource {
    Gateway,
    HostPort(u16),
}

/// UDP proxying: one session per (client, Service port) with its own socket to one endpoint; replies go back
/// the way the request came. Sessions end after [`UDP_IDLE`] without traffic.
async fn serve_udp(sock: Arc<UdpSocket>, source: UdpSource, shared: SharedRef, cancel: CancellationToken) {
    type Sessions = Arc<Mutex<HashMap<(SocketAddr, SocketAddrV4), Arc<UdpSocket>>>>;
    let sessions: Sessions = Arc::default();
    let mut buf = vec![0u8; 65536];
    loop {
        let received = tokio::select! {
            _ = cancel.cancelled() => return,
            r = sock.recv_from(&mut buf) => r,
        };
        let Ok((n, from)) = received else { continue };
        let (client, service, payload, id) = match source {
            UdpSource::Gateway => {
                let Some((client, service, payload)) = parse_udp_header(&buf[..n]) else {
                    continue;
                };
                let id = lock(&shared)
                    .by_vip
                    .get(&(*service.ip(), service.port(), Protocol::Udp))
                    .cloned();
                (SocketAddr::V4(client), service, payload, id)
            }
            UdpSource::HostPort(port) => {
                let id = lock(&shared).by_host_port.get(&(port, Protocol::Udp)).cloned();
                let service = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
                (from, service, &buf[..n], id)
            }
        };
        let key = (client, service);
        let existing = sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let backend = match existing {
            Some(b) => b,
            None => {
                let Some(id) = id else { continue };
                let Some(endpoint) = lock(&shared)
                    .balancer
                    .next(&id, client.ip(), Instant::now(), false)
                else {
                    continue;
                };
                let Ok(backend) = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).await else {
                    continue;
                };
                if backend.connect(endpoint).await.is_err() {
                    continue;
                }
                let backend = Arc::new(backend);
                sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, backend.clone());
                let (sock, sessions, backend2, source) =
                    (sock.clone(), sessions.clone(), backend.clone(), source.clone());
                tokio::spawn(async move {
                    let mut reply = vec![0u8; 65536];
                    let start = match source {
                        UdpSource::Gateway => UDP_HEADER,
                        UdpSource::HostPort(_) => 0,
                    };
                    if let (UdpSource::Gateway, SocketAddr::V4(c)) = (&source, client) {
                        reply[..UDP_HEADER].copy_from_slice(&udp_header(c, service));
                    }
                    while let Ok(Ok(n)) =
                        tokio::time::timeout(UDP_IDLE, backend2.recv(&mut reply[start..])).await
                    {
                        let _ = sock.send_to(&reply[..start + n], from).await;
                    }
                    sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                });
                backend
            }
        };
        let _ = backend.send(payload).await;
    }
}

/// The listeners on the host's `127.0.0.1` for NodePorts and LoadBalancer ports.
struct HostListeners {
    ip: Ipv4Addr,
    shared: SharedRef,
    cancel: CancellationToken,
    open: HashMap<(u16, Protocol), CancellationToken>,
}

impl HostListeners {
    fn new(ip: Ipv4Addr, shared: SharedRef, cancel: &CancellationToken) -> HostListeners {
        HostListeners {
            ip,
            shared,
            cancel: cancel.clone(),
            open: HashMap::new(),
        }
    }

    /// Opens the wanted host ports and closes the others; returns the wanted ones that could not be opened
    /// (in use by another program or Service).
    async fn reconcile(&mut self, table: &[ServicePort]) -> HashSet<(u16, Protocol)> {
        let wanted = host_ports(table);
        self.open.retain(|key, token| {
            let keep = wanted.contains_key(key);
            if !keep {
                token.cancel();
            }
            keep
        });
        let mut failed = HashSet::new();
        for (&(port, protocol), _) in wanted.iter() {
            if self.open.contains_key(&(port, protocol)) {
                continue;
            }
            let token = self.cancel.child_token();
            let opened = match protocol {
                Protocol::Tcp => match TcpListener::bind((self.ip, port)).await {
                    Ok(l) => {
                        tokio::spawn(serve_host_tcp(l, port, self.shared.clone(), token.clone()));
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                Protocol::Udp => match UdpSocket::bind((self.ip, port)).await {
                    Ok(s) => {
                        let source = UdpSource::HostPort(port);
                        tokio::spawn(serve_udp(Arc::new(s), source, self.shared.clone(), token.clone()));
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            match opened {
                Ok(()) => {
                    info!(port, ?protocol, "listening on a host port");
                    self.open.insert((port, protocol), token);
                }
                Err(e) => {
                    debug!(port, ?protocol, error = %e, "cannot listen on a host port");
                    failed.insert((port, protocol));
                }
            }
        }
        lock(&self.shared).by_host_port = wanted;
        failed
    }
}

/// The host ports of `table`: each nodePort, and each LoadBalancer Service's `port`; the first Service (by
/// name) wins a port two of them want.
fn host_ports(table: &[ServicePort]) -> HashMap<(u16, Protocol), ServicePortName> {
    let mut out = HashMap::new();
    for p in table {
        if let Some(n) = p.node_port {
            out.entry((n, p.id.protocol)).or_insert_with(|| p.id.clone());
        }
    }
    for p in table.iter().filter(|p| p.load_balancer) {
        out.entry((p.port, p.id.protocol)).or_insert_with(|| p.id.clone());
    }
    out
}

async fn serve_host_tcp(listener: TcpListener, port: u16, shared: SharedRef, cancel: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((conn, peer)) = accepted else { continue };
        let id = lock(&shared).by_host_port.get(&(port, Protocol::Tcp)).cloned();
        let Some(id) = id else { continue };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = conn.set_nodelay(true);
            proxy_tcp(conn, &id, peer.ip(), &shared).await;
        });
    }
}

/// Writes `status.loadBalancer` of LoadBalancer Services: ingress 127.0.0.1 when all its ports listen on
/// the host, none (pending, with a warning event) when one of them is taken.
#[derive(Default)]
struct LoadBalancerStatus {
    warned: HashSet<String>,
}

/// Per LoadBalancer Service (`namespace/name`): Ok, or the ports it could not get.
pub fn load_balancer_outcome(
    table: &[ServicePort],
    owners: &HashMap<(u16, Protocol), ServicePortName>,
    failed: &HashSet<(u16, Protocol)>,
) -> BTreeMap<(String, String), Vec<(u16, Protocol)>> {
    let mut out: BTreeMap<(String, String), Vec<(u16, Protocol)>> = BTreeMap::new();
    for p in table.iter().filter(|p| p.load_balancer) {
        let key = (p.id.namespace.clone(), p.id.name.clone());
        let missing = out.entry(key).or_default();
        let host = (p.port, p.id.protocol);
        let ours = owners.get(&host) == Some(&p.id);
        if !ours || failed.contains(&host) {
            missing.push(host);
        }
    }
    out
}

impl LoadBalancerStatus {
    async fn sync(
        &mut self,
        client: &kube::Client,
        recorder: &Arc<Recorder>,
        services: &Informer<Service>,
        table: &[ServicePort],
        failed: &HashSet<(u16, Protocol)>,
    ) {
        let owners = host_ports(table);
        for ((namespace, name), missing) in load_balancer_outcome(table, &owners, failed) {
            let Some(svc) = services.get_in(&namespace, &name) else {
                continue;
            };
            let current: Vec<String> = svc
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|l| l.ingress.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|i| i.ip.clone())
                .collect();
            let key = format!("{namespace}/{name}");
            let want: Vec<String> = if missing.is_empty() {
                self.warned.remove(&key);
                vec![LOAD_BALANCER_IP.to_string()]
            } else {
                if self.warned.insert(key.clone()) {
                    let ports: Vec<String> = missing
                        .iter()
                        .map(|(p, proto)| format!("{p}/{proto:?}"))
                        .collect();
                    let object = ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Service".into()),
                        namespace: Some(namespace.clone()),
                        name: Some(name.clone()),
                        uid: svc.metadata.uid.clone(),
                        ..ObjectReference::default()
                    };
                    recorder.emit(
                        object,
                        EventType::Warning,
                        "SyncLoadBalancerFailed",
                        format!(
                            "port {} on {LOAD_BALANCER_IP} is already in use; the load balancer stays pending",
                            ports.join(", ")
                        ),
                    );
                }
                Vec::new()
            };
            if current == want {
                continue;
            }
            let ingress = if want.is_empty() {
                serde_json::Value::Null
            } else {
                json!(
                    want.iter()
                        .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
                        .collect::<Vec<_>>()
                )
            };
            let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
            let api: Api<Service> = Api::namespaced(client.clone(), &namespace);
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                warn!(service = %key, error = %e, "cannot write the load balancer status");
            }
        }
    }
}

/// The `kubernetes` Service's endpoints (what upstream's master endpoint reconciler writes): the API server
/// at `host_ip:port`, reachable from pods; a relay there when the API server listens on loopback only.
async fn kubernetes_service(
    client: kube::Client,
    host_ip: Ipv4Addr,
    api: SocketAddr,
    cancel: CancellationToken,
) {
    let port = api.port();
    let local = SocketAddr::new(
        if api.ip().is_unspecified() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            api.ip()
        },
        port,
    );
    match TcpListener::bind((host_ip, port)).await {
        Ok(listener) => {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                loop {
                    let accepted = tokio::select! {
                        _ = cancel.cancelled() => return,
                        a = listener.accept() => a,
                    };
                    let Ok((mut conn, _)) = accepted else { continue };
                    tokio::spawn(async move {
                        if let Ok(mut up) = TcpStream::connect(local).await {
                            let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                        }
                    });
                }
            });
        }
        Err(e) => {
            debug!(error = %e, "not relaying the API server on the cluster network (it may listen there)")
        }
    }
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {table::LABEL_SERVICE_NAME: "kubernetes", "endpointslice.kubernetes.io/managed-by": "kubeling-node"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [host_ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]
    });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": host_ip.to_string()}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
    });
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
        let eps: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(client.clone(), "default");
        let params = PatchParams::apply("kubeling-node").force();
        if let Err(e) = slices.patch("kubernetes", &params, &Patch::Apply(&slice)).await {
            warn!(error = %e, "cannot write the kubernetes EndpointSlice");
        }
        if let Err(e) = eps.patch("kubernetes", &params, &Patch::Apply(&endpoints)).await {
            warn!(error = %e, "cannot write the kubernetes Endpoints");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn port(
        name: &str,
        ip: [u8; 4],
        port: u16,
        protocol: Protocol,
        node_port: Option<u16>,
        lb: bool,
    ) -> ServicePort {
        ServicePort {
            id: ServicePortName {
                namespace: "ns".into(),
                name: name.into(),
                port: String::new(),
                protocol,
            },
            cluster_ip: Ipv4Addr::from(ip),
            port,
            node_port,
            load_balancer: lb,
            affinity: None::<Duration>,
            endpoints: vec![],
        }
    }

    #[test]
    fn the_gateway_set_lists_each_service_port_with_endpoints_once() {
        let with_endpoints = |mut p: ServicePort, eps: &[&str]| {
            p.endpoints = eps.iter().map(|e| e.parse().unwrap()).collect();
            p
        };
        let mut sticky = port("sticky", [10, 96, 0, 22], 8080, Protocol::Tcp, None, false);
        sticky.affinity = Some(Duration::from_secs(600));
        let mut odd = port("odd", [10, 96, 0, 23], 80, Protocol::Tcp, None, false);
        // Below upstream's minimum and above its maximum: clamped to what the gateway takes.
        odd.affinity = Some(Duration::from_millis(200));
        let mut long = port("long", [10, 96, 0, 24], 80, Protocol::Tcp, None, false);
        long.affinity = Some(Duration::from_secs(1_000_000));
        let table = [
            with_endpoints(
                port("a", [10, 96, 0, 20], 80, Protocol::Tcp, None, false),
                &["10.112.2.3:8080", "10.112.2.4:8080"],
            ),
            port("empty", [10, 96, 0, 21], 80, Protocol::Tcp, None, false),
            with_endpoints(
                port("dns", [10, 96, 0, 10], 53, Protocol::Udp, None, false),
                &["10.112.2.9:53"],
            ),
            with_endpoints(
                port("dns", [10, 96, 0, 10], 53, Protocol::Tcp, None, false),
                &["10.112.2.9:53"],
            ),
            with_endpoints(sticky, &["10.112.2.5:80"]),
            with_endpoints(odd, &["10.112.2.6:80"]),
            with_endpoints(long, &["10.112.2.7:80", "[fd00::1]:80"]),
            // A second port with the same address (invalid upstream): the first wins.
            with_endpoints(
                port("twin", [10, 96, 0, 20], 80, Protocol::Tcp, None, false),
                &["10.112.2.8:80"],
            ),
        ];
        assert_eq!(
            gateway_set(&table),
            "B\n\
             T 10.96.0.10 53 0\nE 10.112.2.9 53\n\
             T 10.96.0.20 80 0\nE 10.112.2.3 8080\nE 10.112.2.4 8080\n\
             T 10.96.0.22 8080 600\nE 10.112.2.5 80\n\
             T 10.96.0.23 80 1\nE 10.112.2.6 80\n\
             T 10.96.0.24 80 86400\nE 10.112.2.7 80\n\
             U 10.96.0.10 53\n\
             .\n"
        );
        assert_eq!(gateway_set(&[]), "B\n.\n");
    }

    #[test]
    fn udp_headers_round_trip() {
        let client: SocketAddrV4 = "10.112.6.3:5353".parse().unwrap();
        let service: SocketAddrV4 = "10.96.0.10:53".parse().unwrap();
        let mut datagram = udp_header(client, service).to_vec();
        datagram.extend_from_slice(b"query");
        assert_eq!(
            parse_udp_header(&datagram),
            Some((client, service, &b"query"[..]))
        );
        assert_eq!(parse_udp_header(&datagram[..11]), None);
    }

    /// A Shared whose TCP and UDP Service 10.96.0.20:80 has `endpoints`.
    fn shared_with(endpoints: Vec<SocketAddr>) -> SharedRef {
        let mut tcp = port("web", [10, 96, 0, 20], 80, Protocol::Tcp, None, false);
        tcp.endpoints = endpoints.clone();
        let mut udp = port("web", [10, 96, 0, 20], 80, Protocol::Udp, None, false);
        udp.endpoints = endpoints;
        let shared: SharedRef = Arc::default();
        {
            let mut s = lock(&shared);
            for p in [&tcp, &udp] {
                s.by_vip
                    .insert((p.cluster_ip, p.port, p.id.protocol), p.id.clone());
            }
            s.balancer.update(&[tcp, udp]);
        }
        shared
    }

    /// Serves `shared`'s Service web as host port 30080 on a local listener; its address.
    async fn host_port(shared: &SharedRef) -> SocketAddr {
        let id = lock(shared)
            .by_vip
            .get(&(Ipv4Addr::new(10, 96, 0, 20), 80, Protocol::Tcp))
            .cloned()
            .unwrap();
        lock(shared).by_host_port.insert((30080, Protocol::Tcp), id);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve_host_tcp(
            listener,
            30080,
            shared.clone(),
            CancellationToken::new(),
        ));
        addr
    }

    #[tokio::test]
    async fn a_host_port_connection_reaches_an_endpoint_after_a_refused_one() {
        // One endpoint refuses (a closed port), the other echoes: the dial moves on to it.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let refused = closed.local_addr().unwrap();
        drop(closed);
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        });
        // The refused one is first in the rotation.
        let shared = shared_with(vec![refused, echo_addr]);
        let mut conn = TcpStream::connect(host_port(&shared).await).await.unwrap();
        conn.write_all(b"hello").await.unwrap();
        conn.shutdown().await.unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello");
    }

    /// A fake gateway's side of the control connection: reads up to the end of a set (`.`), answers `ok`.
    async fn read_set(conn: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b".\n") {
            let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut byte))
                .await
                .expect("a set within 10 s")
                .unwrap();
            assert_eq!(
                n,
                1,
                "connection closed after {:?}",
                String::from_utf8_lossy(&got)
            );
            got.push(byte[0]);
        }
        conn.write_all(b"ok\n").await.unwrap();
        String::from_utf8(got).unwrap()
    }

    #[tokio::test]
    async fn the_gateway_gets_each_set_once_and_its_ok_is_not_answered() {
        let gateway = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (sets, rx) = watch::channel(Some("B\nU 10.96.0.10 53\n.\n".to_string()));
        let cancel = CancellationToken::new();
        tokio::spawn(gateway_control(
            gateway.local_addr().unwrap(),
            "A 10.112.0.1 4000\n".into(),
            rx,
            cancel.clone(),
        ));
        let (mut conn, _) = gateway.accept().await.unwrap();
        assert_eq!(
            read_set(&mut conn).await,
            "A 10.112.0.1 4000\nB\nU 10.96.0.10 53\n.\n"
        );
        // Nothing more until the set changes. Before the fix the `ok` was answered with the same set at
        // once (microseconds), so both sides spun; a quiet half second shows that loop is gone.
        let mut byte = [0u8; 1];
        let quiet = tokio::time::timeout(Duration::from_millis(500), conn.read(&mut byte)).await;
        assert!(
            quiet.is_err(),
            "the agent wrote again without a new set: {quiet:?} {byte:?}"
        );
        sets.send_replace(Some("B\nU 10.96.0.11 53\n.\n".to_string()));
        assert_eq!(read_set(&mut conn).await, "B\nU 10.96.0.11 53\n.\n");
        let quiet = tokio::time::timeout(Duration::from_millis(500), conn.read(&mut byte)).await;
        assert!(
            quiet.is_err(),
            "the agent wrote again without a new set: {quiet:?} {byte:?}"
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_host_port_connection_without_endpoints_is_closed() {
        let shared = shared_with(vec![]);
        let mut conn = TcpStream::connect(host_port(&shared).await).await.unwrap();
        let _ = conn.write_all(b"hello").await;
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got).await;
        assert!(got.is_empty());
    }

    #[tokio::test]
    async fn udp_from_the_gateway_goes_to_an_endpoint_and_the_answer_comes_back_with_the_header() {
        let backend = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let backend_addr = backend.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let (n, from) = backend.recv_from(&mut buf).await.unwrap();
            let mut reply = b"re:".to_vec();
            reply.extend_from_slice(&buf[..n]);
            backend.send_to(&reply, from).await.unwrap();
        });
        let shared = shared_with(vec![backend_addr]);
        let proxy = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let proxy_addr = proxy.local_addr().unwrap();
        tokio::spawn(serve_udp(
            proxy,
            UdpSource::Gateway,
            shared,
            CancellationToken::new(),
        ));
        let gateway = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client: SocketAddrV4 = "10.112.6.3:5353".parse().unwrap();
        let service: SocketAddrV4 = "10.96.0.20:80".parse().unwrap();
        let mut datagram = udp_header(client, service).to_vec();
        datagram.extend_from_slice(b"ping");
        gateway.send_to(&datagram, proxy_addr).await.unwrap();
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), gateway.recv(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            parse_udp_header(&buf[..n]),
            Some((client, service, &b"re:ping"[..]))
        );
    }

    #[test]
    fn host_ports_and_load_balancer_outcomes() {
        let table = [
            port("np", [10, 96, 0, 21], 80, Protocol::Tcp, Some(30080), false),
            port("lb1", [10, 96, 0, 22], 8080, Protocol::Tcp, Some(30081), true),
            // Wants the same host port as lb1: lb1 is first by name.
            port("lb2", [10, 96, 0, 23], 8080, Protocol::Tcp, Some(30082), true),
            port("lb3", [10, 96, 0, 24], 9090, Protocol::Tcp, None, true),
        ];
        let owners = host_ports(&table);
        let mut keys: Vec<_> = owners.keys().copied().collect();
        keys.sort();
        assert_eq!(
            keys,
            vec![
                (8080, Protocol::Tcp),
                (9090, Protocol::Tcp),
                (30080, Protocol::Tcp),
                (30081, Protocol::Tcp),
                (30082, Protocol::Tcp)
            ]
        );
        let failed = HashSet::from([(9090, Protocol::Tcp)]);
        let outcome = load_balancer_outcome(&table, &owners, &failed);
        let got: Vec<_> = outcome
            .iter()
            .map(|((_, n), m)| (n.as_str(), m.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("lb1", vec![]),
                ("lb2", vec![(8080, Protocol::Tcp)]),
                ("lb3", vec![(9090, Protocol::Tcp)])
            ]
        );
    }
}
