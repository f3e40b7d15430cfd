//! `pods/portforward`: the API server ends the client's port-forward protocol itself and relays the
//! session's forwarded TCP connections to the pod's node agent over ONE WebSocket per session
//! (`/portForward/{ns}/{pod}`, opened as the session starts; [`link`], node/src/portforward).
//!
//! ```text
//! kubectl 1.32   GET  + WebSocket "SPDY/3.1+portforward.k8s.io" ─┐ (SPDY bytes in binary messages)
//! kubectl (env)  POST + Upgrade: SPDY/3.1                        ─┼─► spdy_session ─┐ forward() per
//! kube-rs/Python GET  + WebSocket "v4.channel.k8s.io" ?ports=…   ─┴─► channel_session┤ connection
//!                                                                                    ▼
//!                        link: wss node /portForward/ns/pod, one per session ⇄ OPEN/DATA/FIN/CLOSE ⇄ pod
//! ```
//!
//! SPDY (client-go `tools/portforward`, kubelet `cri/streaming/portforward/httpstream.go`): each local
//! connection opens an error stream and a data stream with headers `streamtype`, `port`, `requestid`;
//! streams pair by `requestid`, every accepted stream gets a SYN_REPLY before any DATA, pings are echoed,
//! and every pair ends with a FIN on its error stream (kubectl waits for it). An error text on the error
//! stream (a refused dial) makes kubectl end its whole session, as upstream; this side keeps the session.
//! The channel protocol (kubelet `websocket.go`): channel `2i` is data and `2i+1` error for the `i`th
//! port, and the first message on each carries the port, little-endian.
//!
//! Upstream's API server does not check the pod's phase (kubectl does); kubeling answers 400 for a pod
//! that is not Running, so the client libraries get an HTTP error instead of a dead stream. Sessions end
//! when the pod is deleted or replaced (kubectl then prints `lost connection to pod`).

mod channel;
mod link;
mod spdy_session;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::ws::{self, WebSocketUpgrade};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::proxy::{self, Target};
use super::request::ResourceRequest;
use super::{Query, ServerState, error_response};
use crate::error::ApiError;
use crate::registry::Registry;

/// kubectl 1.31+'s WebSocket subprotocol: SPDY tunnelled in binary messages
/// (apimachinery `WebsocketsSPDYTunnelingPortForwardV1`).
pub const SPDY_TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The stream protocol of the plain SPDY upgrade (`PortForwardV1Name`).
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
/// The channel protocol the kubelet speaks for port-forward (it does not accept v5 there).
pub const CHANNEL_PROTOCOL: &str = "v4.channel.k8s.io";

/// What the WebSocket upgrade accepts, in our order of preference.
const WS_PROTOCOLS: [&str; 2] = [SPDY_TUNNEL_PROTOCOL, CHANNEL_PROTOCOL];

/// kube-rs's limit, which also keeps every channel number in a byte.
const MAX_PORTS: usize = 128;

/// How often a session checks that its pod still exists.
const POD_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// How long the node may take to accept the session's WebSocket.
const NODE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes per DATA frame or channel message sent to the client (client-go copies 32 KiB).
const CHUNK: usize = 32 * 1024;

/// True for `GET|POST pods/{name}/portforward`.
pub fn handles(method: &Method, r: &ResourceRequest) -> bool {
    r.info.group.is_empty()
        && r.info.plural == "pods"
        && r.name.is_some()
        && r.subresource.as_deref() == Some("portforward")
        && (method == Method::GET || method == Method::POST)
}

/// Serves a request [`handles`] accepted.
pub async fn serve(st: &ServerState, parts: Parts, r: ResourceRequest, query: Query) -> Response {
    serve_inner(st, parts, &r, &query).await.unwrap_or_else(|e| {
        if e.code >= 500 {
            tracing::error!(error = %e, pod = ?r.name, "port-forward failed");
        }
        error_response(&e)
    })
}

/// The pod and node a session forwards to, and what it needs to reach the node.
pub(crate) struct Ctx {
    target: Target,
    uid: String,
    token: String,
    registry: Registry,
    info: &'static crate::registry::resources::ResourceInfo,
    cancel: CancellationToken,
    /// The WebSocket to the node, once open.
    link: tokio::sync::Mutex<Option<Arc<link::Link>>>,
}

impl Ctx {
    /// The session's WebSocket to the node, opened on first use and again after it ended.
    async fn link(&self) -> Result<Arc<link::Link>, String> {
        let mut slot = self.link.lock().await;
        if let Some(l) = slot.as_ref()
            && !l.is_ended()
        {
            return Ok(l.clone());
        }
        let l = Arc::new(link::Link::open(&self.target, &self.token, self.cancel.clone()).await?);
        *slot = Some(l.clone());
        Ok(l)
    }

    /// Opens the link as the session starts, so the first connection does not wait for it (a failure
    /// is reported to, and retried by, the first connection).
    fn warm_up(self: &Arc<Self>) {
        let ctx = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = ctx.link() => {}
                () = ctx.cancel.cancelled() => {}
            }
        });
    }

    /// True once the pod was deleted or replaced by another of the same name.
    fn pod_gone(&self) -> bool {
        let current = self
            .registry
            .get(self.info, Some(&self.target.namespace), &self.target.pod)
            .ok();
        let current = current.map(|p| p.value());
        pod_gone(current.as_ref(), &self.uid)
    }
}

/// True when `current` (the pod now, `None` once deleted) is no longer the pod with `uid`, or has
/// finished: its sandbox is gone or going.
pub fn pod_gone(current: Option<&Value>, uid: &str) -> bool {
    let Some(pod) = current else { return true };
    let same = pod.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid);
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    !same || matches!(phase, Some("Succeeded" | "Failed"))
}

/// kubectl's own check, made here too: only a Running pod can be forwarded to.
pub fn check_running(pod: &Value) -> Result<(), ApiError> {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    if phase == "Running" {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to forward port because pod is not running. Current status={phase}"
        )))
    }
}

/// The channel protocol's `ports` parameter (repeated or comma-separated, each a non-zero port).
pub fn parse_ports(values: &[&str]) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for value in values.iter().flat_map(|v| v.split(',')) {
        let value = value.trim();
        let port: u16 = value.parse().map_err(|_| {
            ApiError::bad_request(format!("unable to parse {value:?} as a port: invalid syntax"))
        })?;
        if port == 0 {
            return Err(ApiError::bad_request(format!("port {value:?} must be > 0")));
        }
        ports.push(port);
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request("query parameter \"port\" is required"));
    }
    if ports.len() > MAX_PORTS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_PORTS} ports may be forwarded"
        )));
    }
    Ok(ports)
}

/// The plain SPDY upgrade's protocol negotiation (apimachinery `httpstream.Handshake`): the client's
/// `X-Stream-Protocol-Version` values, repeated or comma-separated, must include ours.
pub fn negotiate_stream_protocol(headers: &HeaderMap) -> Result<(), ApiError> {
    let offered: Vec<String> = headers
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if offered.is_empty() {
        return Err(ApiError::bad_request(
            "unable to upgrade: X-Stream-Protocol-Version is required",
        ));
    }
    if offered.iter().any(|p| p == PORT_FORWARD_PROTOCOL) {
        Ok(())
    } else {
        Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts [{PORT_FORWARD_PROTOCOL:?}]"
            ),
            details: None,
        })
    }
}

fn header_has(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case(token))
}

async fn serve_inner(
    st: &ServerState,
    mut parts: Parts,
    r: &ResourceRequest,
    query: &Query,
) -> Result<Response, ApiError> {
    let (namespace, name, pod, node_name) = proxy::scheduled_pod(st, r)?;
    check_running(&pod.value())?;
    let ctx = Arc::new(Ctx {
        target: proxy::node_target(st, &node_name, namespace, name, String::new())?,
        uid: pod
            .value()
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        token: proxy::node_token(st)?.to_owned(),
        registry: st.registry.clone(),
        info: r.info,
        // The session's own token: the session cancels it when it ends, shutdown cancels it too.
        cancel: st.cancel.child_token(),
        link: Default::default(),
    });

    if header_has(&parts.headers, header::UPGRADE, "websocket") {
        let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &())
            .await
            .map_err(|e| ApiError::bad_request(format!("unable to upgrade connection: {e}")))?
            .protocols(WS_PROTOCOLS);
        let spdy = upgrade
            .selected_protocol()
            .is_some_and(|p| p == SPDY_TUNNEL_PROTOCOL);
        if spdy {
            ctx.warm_up();
            return Ok(upgrade.on_upgrade(move |socket| spdy_over_websocket(ctx, socket)));
        }
        // The channel protocol (also for a client that offered no subprotocol, as the kubelet allows).
        let values: Vec<&str> = query
            .0
            .iter()
            .filter(|(k, _)| k == "ports")
            .map(|(_, v)| v.as_str())
            .collect();
        let ports = parse_ports(&values)?;
        ctx.warm_up();
        return Ok(upgrade.on_upgrade(move |socket| channel::session(ctx, socket, ports)));
    }
    if header_has(&parts.headers, header::UPGRADE, "SPDY/3.1") {
        negotiate_stream_protocol(&parts.headers)?;
        let on_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or_else(|| ApiError::bad_request("unable to upgrade: this connection cannot be upgraded"))?;
        ctx.warm_up();
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => spdy_over_upgrade(ctx, upgraded).await,
                Err(e) => tracing::debug!(error = %e, "port-forward SPDY upgrade failed"),
            }
        });
        let mut resp = Response::new(axum::body::Body::empty());
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = resp.headers_mut();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        h.insert(
            "x-stream-protocol-version",
            HeaderValue::from_static(PORT_FORWARD_PROTOCOL),
        );
        return Ok(resp);
    }
    Err(ApiError::bad_request(
        "unable to upgrade connection: port-forward needs a WebSocket (SPDY/3.1+portforward.k8s.io or v4.channel.k8s.io) or SPDY/3.1 upgrade",
    ))
}

/// kubectl's default: the SPDY byte stream in WebSocket binary messages, both ways.
async fn spdy_over_websocket(ctx: Arc<Ctx>, socket: ws::WebSocket) {
    let (mut tx, mut rx) = socket.split();
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(16);
    let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(64);
    let reader = tokio::spawn(async move {
        while let Some(Ok(message)) = rx.next().await {
            match message {
                ws::Message::Binary(b) => {
                    if in_tx.send(b).await.is_err() {
                        break;
                    }
                }
                ws::Message::Close(_) => break,
                // client-go fails on text messages; a text message here ends the session too.
                ws::Message::Text(_) => break,
                ws::Message::Ping(_) | ws::Message::Pong(_) => {}
            }
        }
    });
    let writer = async move {
        while let Some(b) = out_rx.recv().await {
            if tx.send(ws::Message::Binary(b)).await.is_err() {
                return;
            }
        }
        let _ = tx
            .send(ws::Message::Close(Some(ws::CloseFrame {
                code: 1000,
                reason: "".into(),
            })))
            .await;
    };
    tokio::join!(spdy_session::run(ctx, in_rx, out_tx), writer);
    // The client answers our Close; the reader ends then, or is stopped here.
    let abort = reader.abort_handle();
    if tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .is_err()
    {
        abort.abort();
    }
}

/// The plain `Upgrade: SPDY/3.1`: SPDY on the hijacked connection.
async fn spdy_over_upgrade(ctx: Arc<Ctx>, upgraded: hyper::upgrade::Upgraded) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = hyper_util::rt::TokioIo::new(upgraded);
    let (mut read, mut write) = tokio::io::split(io);
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(16);
    let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(64);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if in_tx.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let writer = async move {
        while let Some(b) = out_rx.recv().await {
            if write.write_all(&b).await.is_err() {
                return;
            }
        }
        let _ = write.shutdown().await;
    };
    tokio::join!(spdy_session::run(ctx, in_rx, out_tx), writer);
    reader.abort();
}

/// How one forwarded connection's output reaches the client, and how the client's input reaches it.
pub(crate) enum Up {
    /// Bytes for the pod.
    Data(Bytes),
    /// The client will send no more (SPDY half-close).
    Fin,
}

/// Where a forwarded connection writes: a SPDY stream pair or a channel pair.
pub(crate) trait Sink: Send + 'static {
    /// Bytes from the pod, at most [`CHUNK`] at a time.
    fn data(&self, b: Bytes) -> impl Future<Output = bool> + Send;
    /// The connection could not be made: the text for the error stream or channel.
    fn error(&self, text: String) -> impl Future<Output = ()> + Send;
    /// The pod closed its side (or the dial failed): end the pair.
    fn finish(&self, failed: bool) -> impl Future<Output = ()> + Send;
}

/// How a connection ended.
enum End {
    /// The client reset it, or the session is over.
    ClientGone,
    /// The pod closed its side, or the node went away.
    Closed,
    /// The connection could not be made.
    Failed(String),
}

/// One forwarded connection over the session's link: the client's bytes to the node and the pod's
/// bytes to the client, until either ends it.
async fn forward(ctx: Arc<Ctx>, port: u16, sink: impl Sink, mut up: mpsc::Receiver<Up>) {
    let link = tokio::select! {
        link = ctx.link() => link,
        () = ctx.cancel.cancelled() => return,
    };
    let link = match link {
        Ok(link) => link,
        Err(cause) => {
            report(&ctx, port, &sink, &cause).await;
            return;
        }
    };
    let (id, mut events) = link.connect(port).await;
    let upstream = async {
        loop {
            let sent = match up.recv().await {
                Some(Up::Data(b)) => link.send(link::DATA, id, &b).await,
                Some(Up::Fin) => link.send(link::FIN, id, &[]).await,
                // The client reset the stream or the session ended.
                None => return End::ClientGone,
            };
            if !sent {
                return End::Closed;
            }
        }
    };
    let downstream = async {
        while let Some(event) = events.recv().await {
            match event {
                link::Event::Data(b) => {
                    for chunk in b.chunks(CHUNK) {
                        if !sink.data(b.slice_ref(chunk)).await {
                            return End::ClientGone;
                        }
                    }
                }
                link::Event::Closed => return End::Closed,
                link::Event::Error(cause) => return End::Failed(cause),
            }
        }
        // The link to the node ended.
        End::Closed
    };
    let end = tokio::select! {
        end = upstream => end,
        end = downstream => end,
        () = ctx.cancel.cancelled() => End::ClientGone,
    };
    match end {
        End::ClientGone => link.close(id).await,
        End::Closed => {
            link.forget(id);
            sink.finish(false).await;
        }
        End::Failed(cause) => {
            link.forget(id);
            report(&ctx, port, &sink, &cause).await;
        }
    }
}

/// The kubelet's text for a connection that could not be made, on its error stream or channel.
async fn report(ctx: &Ctx, port: u16, sink: &impl Sink, cause: &str) {
    // kubelet: "error forwarding port %d to pod %s, uid %v: %v".
    let t = &ctx.target;
    sink.error(format!(
        "error forwarding port {port} to pod {}/{}, uid {}: {cause}",
        t.namespace, t.pod, ctx.uid
    ))
    .await;
    sink.finish(true).await;
}

#[cfg(test)]
mod tests;
