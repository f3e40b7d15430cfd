//! `pods/portforward`: the API server ends the client's port-forward protocol itself and relays each
//! forwarded TCP connection to the pod's node agent as one WebSocket (`/portForward/{ns}/{pod}?port=P`,
//! binary messages carrying bytes; node/src/portforward).
//!
//! ```text
//! kubectl 1.32   GET  + WebSocket "SPDY/3.1+portforward.k8s.io" ─┐ (SPDY bytes in binary messages)
//! kubectl (env)  POST + Upgrade: SPDY/3.1                        ─┼─► spdy_session ─┐
//! kube-rs/Python GET  + WebSocket "v4.channel.k8s.io" ?ports=…   ─┴─► channel_session┤ per connection
//!                                                                                    ▼
//!                                              forward(): wss node /portForward/ns/pod?port=P ⇄ pod
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
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
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

/// How long the node may take to accept one forwarded connection.
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
}

impl Ctx {
    /// True once the pod was deleted or replaced by another of the same name.
    fn pod_gone(&self) -> bool {
        let current = self
            .registry
            .get(self.info, Some(&self.target.namespace), &self.target.pod)
            .ok();
        pod_gone(current.as_ref().map(|p| &p.value), &self.uid)
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
    check_running(&pod.value)?;
    let ctx = Arc::new(Ctx {
        target: proxy::node_target(st, &node_name, namespace, name, String::new())?,
        uid: pod
            .value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        token: proxy::node_token(st)?.to_owned(),
        registry: st.registry.clone(),
        info: r.info,
        // The session's own token: the session cancels it when it ends, shutdown cancels it too.
        cancel: st.cancel.child_token(),
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
        return Ok(upgrade.on_upgrade(move |socket| channel::session(ctx, socket, ports)));
    }
    if header_has(&parts.headers, header::UPGRADE, "SPDY/3.1") {
        negotiate_stream_protocol(&parts.headers)?;
        let on_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or_else(|| ApiError::bad_request("unable to upgrade: this connection cannot be upgraded"))?;
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

type NodeSocket = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// Opens the node's WebSocket for one connection to `port`; a refusal comes back as its text.
async fn open(ctx: &Ctx, port: u16) -> Result<NodeSocket, String> {
    let t = &ctx.target;
    let path = format!(
        "/portForward/{}/{}?port={port}",
        proxy::segment(&t.namespace),
        proxy::segment(&t.pod)
    );
    let uri = format!("wss://{}{path}", t.authority);
    let mut request = uri.into_client_request().map_err(|e| e.to_string())?;
    let value = HeaderValue::from_str(&format!("Bearer {}", ctx.token)).map_err(|e| e.to_string())?;
    request.headers_mut().insert(header::AUTHORIZATION, value);
    let tls = proxy::connect(t).await.map_err(|e| e.message)?;
    match tokio::time::timeout(NODE_TIMEOUT, tokio_tungstenite::client_async(request, tls)).await {
        Err(_) => Err("timed out waiting for the node".to_owned()),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tungstenite::Error::Http(resp))) => {
            let body = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default());
            Err(proxy::node_refused(resp.status().as_u16(), body.trim()).message)
        }
        Ok(Err(e)) => Err(e.to_string()),
    }
}

/// One forwarded connection: dial through the node, then pipe until the pod or the client ends it.
async fn forward(ctx: Arc<Ctx>, port: u16, sink: impl Sink, mut up: mpsc::Receiver<Up>) {
    let node = tokio::select! {
        node = open(&ctx, port) => node,
        () = ctx.cancel.cancelled() => return,
    };
    let mut node = match node {
        Ok(node) => node,
        Err(cause) => {
            // kubelet: "error forwarding port %d to pod %s, uid %v: %v".
            let t = &ctx.target;
            sink.error(format!(
                "error forwarding port {port} to pod {}/{}, uid {}: {cause}",
                t.namespace, t.pod, ctx.uid
            ))
            .await;
            sink.finish(true).await;
            return;
        }
    };
    let mut client_open = true;
    loop {
        tokio::select! {
            message = up.recv(), if client_open => match message {
                Some(Up::Data(b)) => {
                    if node.send(tungstenite::Message::Binary(b)).await.is_err() {
                        break;
                    }
                }
                // An empty binary message is the node protocol's half-close.
                Some(Up::Fin) => {
                    client_open = false;
                    if node.send(tungstenite::Message::Binary(Bytes::new())).await.is_err() {
                        break;
                    }
                }
                // The client reset the stream or the session ended.
                None => {
                    let _ = node.close(None).await;
                    return;
                }
            },
            () = ctx.cancel.cancelled() => {
                let _ = node.close(None).await;
                return;
            }
            message = node.next() => match message {
                Some(Ok(tungstenite::Message::Binary(b))) => {
                    for chunk in b.chunks(CHUNK) {
                        if !sink.data(b.slice_ref(chunk)).await {
                            let _ = node.close(None).await;
                            return;
                        }
                    }
                }
                Some(Ok(tungstenite::Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    sink.finish(false).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), node.close(None)).await;
}

#[cfg(test)]
mod tests;
