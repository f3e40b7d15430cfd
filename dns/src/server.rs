//! Serving the zone: a hickory-server [`RequestHandler`] that answers cluster names from
//! [`crate::records::resolve`] and forwards every other name, as the raw query, to the host's resolvers
//! (CoreDNS's `forward . /etc/resolv.conf`). UDP and TCP share one port.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, Metadata, OpCode, Query, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::records::{Answer, ClusterView, Zone, resolve};

/// CoreDNS `forward`: how long one upstream gets before the next is tried.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a TCP client may stay idle.
const TCP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server could not start or a forward failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding the UDP socket or the TCP listener.
    #[error("binding the DNS server to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// No upstream answered.
    #[error("no upstream resolver answered ({0})")]
    Forward(String),
}

/// The host's resolvers, from a resolv.conf's `nameserver` lines, on port 53.
pub fn upstreams_from_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "nameserver").then(|| words.next())?
        })
        .filter_map(|ip| ip.split('%').next()?.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// Sends queries on to the upstream resolvers, in order, UDP first and TCP when the answer is truncated (or
/// the client asked over TCP).
#[derive(Debug, Clone)]
pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
}

impl Forwarder {
    /// A forwarder to `upstreams`.
    pub fn new(upstreams: Vec<SocketAddr>) -> Forwarder {
        Forwarder { upstreams }
    }

    /// Forwards the raw query `raw` and returns the parsed answer.
    pub async fn forward(&self, raw: &[u8], tcp: bool) -> Result<Message, ServerError> {
        let mut last = String::from("no upstream resolver configured");
        for upstream in &self.upstreams {
            let attempt = async {
                if !tcp {
                    let reply = udp_exchange(*upstream, raw).await?;
                    let message = Message::from_vec(&reply).map_err(std::io::Error::other)?;
                    if !message.metadata.truncation {
                        return Ok(message);
                    }
                }
                let reply = tcp_exchange(*upstream, raw).await?;
                Message::from_vec(&reply).map_err(std::io::Error::other)
            };
            match tokio::time::timeout(FORWARD_TIMEOUT, attempt).await {
                Ok(Ok(message)) => return Ok(message),
                Ok(Err(e)) => last = format!("{upstream}: {e}"),
                Err(_) => last = format!("{upstream}: timed out"),
            }
        }
        Err(ServerError::Forward(last))
    }
}

async fn udp_exchange(upstream: SocketAddr, raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = match upstream {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).await?;
    socket.connect(upstream).await?;
    socket.send(raw).await?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = socket.recv(&mut buf).await?;
        // Only the answer to this query (same id): a late answer to an earlier one is dropped.
        if n >= 2 && raw.len() >= 2 && buf[..2] == raw[..2] {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

async fn tcp_exchange(upstream: SocketAddr, raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(upstream).await?;
    let len = u16::try_from(raw.len()).map_err(std::io::Error::other)?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(raw).await?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

/// The request handler: the zone from a [`ClusterView`], everything else forwarded.
pub struct Handler {
    view: Arc<dyn ClusterView>,
    zone: Zone,
    soa: Record,
    forwarder: Forwarder,
    ready: Arc<AtomicBool>,
}

impl Handler {
    /// A handler answering `zone` from `view` once `ready` is set (CoreDNS answers SERVFAIL for cluster names
    /// until its watches have synced).
    pub fn new(
        view: Arc<dyn ClusterView>,
        zone: Zone,
        forwarder: Forwarder,
        ready: Arc<AtomicBool>,
    ) -> Handler {
        let soa = zone.soa();
        Handler {
            view,
            zone,
            soa,
            forwarder,
            ready,
        }
    }
}

impl Handler {
    /// CoreDNS answers an ExternalName Service's CNAME with the target's records appended where it can
    /// resolve them (stub resolvers expect the chain from a recursive server): from the zone, or from the
    /// upstreams. One hop; a failure leaves the CNAME alone.
    async fn chase(&self, mut answers: Vec<Record>, qtype: RecordType, id: u16, tcp: bool) -> Vec<Record> {
        let target = match answers.as_slice() {
            [only] if qtype != RecordType::CNAME => match &only.data {
                RData::CNAME(target) => target.0.clone(),
                _ => return answers,
            },
            _ => return answers,
        };
        let name = target.to_string().to_ascii_lowercase();
        if self.zone.is_local(name.trim_end_matches('.')) {
            if let Answer::Records { answers: more, .. } =
                resolve(self.view.as_ref(), &self.zone, &target, &name, qtype)
            {
                answers.extend(more);
            }
            return answers;
        }
        let mut query = Message::new(id, MessageType::Query, OpCode::Query);
        query.metadata.recursion_desired = true;
        query.add_query(Query::query(target, qtype));
        let Ok(raw) = query.to_vec() else { return answers };
        if let Ok(reply) = self.forwarder.forward(&raw, tcp).await {
            answers.extend(reply.answers);
        }
        answers
    }
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::new(&request.queries, request.edns.as_ref());
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.recursion_available = true;
        let send_error = |code: ResponseCode| {
            let mut m = metadata;
            m.response_code = code;
            m
        };
        if request.metadata.op_code != OpCode::Query || request.metadata.message_type != MessageType::Query {
            let builder = MessageResponseBuilder::new(&request.queries, request.edns.as_ref());
            return send(
                &mut response,
                builder.build_no_records(send_error(ResponseCode::NotImp)),
            )
            .await;
        }
        let [query] = request.queries.queries() else {
            return send(
                &mut response,
                builder.build_no_records(send_error(ResponseCode::FormErr)),
            )
            .await;
        };
        let qname = query.name().to_string().to_ascii_lowercase();
        let qtype = query.query_type();
        let local = self.zone.is_local(qname.trim_end_matches('.'));
        let tcp = request.protocol() == Protocol::Tcp;
        let answer = if local && !self.ready.load(Ordering::Acquire) {
            return send(
                &mut response,
                builder.build_no_records(send_error(ResponseCode::ServFail)),
            )
            .await;
        } else if local {
            resolve(
                self.view.as_ref(),
                &self.zone,
                query.original().name(),
                &qname,
                qtype,
            )
        } else {
            Answer::Forward
        };
        let none: Vec<Record> = Vec::new();
        match answer {
            Answer::Records { answers, additionals } => {
                metadata.authoritative = true;
                let answers = self.chase(answers, qtype, request.metadata.id, tcp).await;
                let msg = builder.build(
                    metadata,
                    answers.iter(),
                    none.iter(),
                    none.iter(),
                    additionals.iter(),
                );
                send(&mut response, msg).await
            }
            Answer::NoData | Answer::NxDomain => {
                metadata.authoritative = true;
                if answer == Answer::NxDomain {
                    metadata.response_code = ResponseCode::NXDomain;
                }
                let soa = [self.soa.clone()];
                let msg = builder.build(metadata, none.iter(), none.iter(), soa.iter(), none.iter());
                send(&mut response, msg).await
            }
            Answer::Forward => match self.forwarder.forward(request.as_slice(), tcp).await {
                Ok(upstream) => {
                    metadata.response_code = upstream.metadata.response_code;
                    let msg = builder.build(
                        metadata,
                        upstream.answers.iter(),
                        upstream.authorities.iter(),
                        none.iter(),
                        upstream.additionals.iter(),
                    );
                    send(&mut response, msg).await
                }
                Err(e) => {
                    tracing::debug!(name = %qname, %qtype, error = %e, "forwarding failed");
                    send(
                        &mut response,
                        builder.build_no_records(send_error(ResponseCode::ServFail)),
                    )
                    .await
                }
            },
        }
    }
}

async fn send<'a, R: ResponseHandler>(
    response: &mut R,
    msg: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
) -> ResponseInfo {
    let mut fallback = *msg.metadata();
    match response.send_response(msg).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(error = %e, "sending a DNS response");
            fallback.response_code = ResponseCode::ServFail;
            ResponseInfo::from(hickory_proto::op::Header {
                metadata: fallback,
                counts: Default::default(),
            })
        }
    }
}

/// Binds UDP and TCP on the same address and port (a free one when the port is 0).
pub async fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener), ServerError> {
    let err = |source| ServerError::Bind { addr, source };
    // With port 0 the UDP port is chosen first and TCP must get the same one: retry a few times.
    let mut last = None;
    for _ in 0..16 {
        let udp = UdpSocket::bind(addr).await.map_err(err)?;
        let port = udp.local_addr().map_err(err)?.port();
        match TcpListener::bind(SocketAddr::new(addr.ip(), port)).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if addr.port() == 0 => last = Some(e),
            Err(e) => return Err(err(e)),
        }
    }
    Err(err(
        last.unwrap_or_else(|| std::io::Error::other("no common port"))
    ))
}

/// Starts serving `handler` on the bound sockets; the returned server stops with
/// [`Server::shutdown_gracefully`].
pub fn serve(udp: UdpSocket, tcp: TcpListener, handler: Handler) -> Server<Handler> {
    let mut server = Server::new(handler);
    server.register_socket(udp);
    server.register_listener(tcp, TCP_TIMEOUT, 65535);
    server
}
