//! `pods/log`, `pods/exec` and `pods/attach`: the subresources the API server does not answer itself but
//! proxies to the node agent running the pod, as kube-apiserver proxies them to the kubelet.
//!
//! ```text
//! kubectl logs / exec ──► http (this module): pod → container → spec.nodeName → Node address and port
//!                              │ HTTPS, bearer node token
//!                              ▼
//!                 node agent  GET /containerLogs/{ns}/{pod}/{container}   (streamed back as text/plain)
//!                             GET /exec|/attach/{ns}/{pod}/{container}    (WebSocket, frames piped both ways)
//! ```
//!
//! Checks happen here, before anything reaches the node, with upstream's messages (`LogLocation`,
//! `streamLocation` in `pkg/registry/core/pod/strategy.go`); whatever the node then refuses comes back with
//! the node's code and text as a `metav1.Status`. An exec connects to the node *before* answering the
//! client's upgrade, so a node error is still an ordinary HTTP error the client can show.
//!
//! TLS to the node: node agents serve a self-signed certificate, so the proxy accepts any certificate
//! the node presents (still checking the handshake signatures) and connects only when a node token is
//! configured, which the node demands. This matches kube-apiserver's default, which does not verify
//! kubelet serving certificates unless `--kubelet-certificate-authority` is given; verifying against the
//! cluster CA is the better design once node certificates are issued by it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use super::request::ResourceRequest;
use super::{Query, ServerState, error_response};
use crate::error::{ApiError, FieldError};
use crate::registry::resources;
use crate::storage::Stored;

/// The channel-protocol subprotocols, in our order of preference (kube-rs and Python v36 offer both).
const CHANNEL_PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// kubelet's default port (`ports.KubeletPort`), for a Node that does not publish its daemon endpoint.
const DEFAULT_KUBELET_PORT: i64 = 10250;

/// How long to wait for a node to accept a connection and finish the TLS and HTTP handshakes.
const NODE_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long each side may take to answer a Close before the connection is dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The most of a node's error body put into the Status message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// True for the requests this module serves: `GET pods/log`, `GET|POST pods/exec` and `pods/attach`.
pub fn handles(method: &Method, r: &ResourceRequest) -> bool {
    let pod_sub = r.info.group.is_empty() && r.info.plural == "pods" && r.name.is_some();
    match (pod_sub, r.subresource.as_deref()) {
        (true, Some("log")) => method == Method::GET,
        (true, Some("exec" | "attach")) => method == Method::GET || method == Method::POST,
        _ => false,
    }
}

/// Serves a request [`handles`] accepted.
pub async fn serve(st: &ServerState, parts: Parts, r: ResourceRequest, query: Query) -> Response {
    let result = match r.subresource.as_deref() {
        Some("log") => logs(st, &r, &query).await,
        Some(sub) => stream(st, parts, &r, &query, sub).await,
        None => Err(ApiError::no_route()),
    };
    result.unwrap_or_else(|e| {
        if e.code >= 500 {
            tracing::error!(error = %e, pod = ?r.name, "proxying to the node failed");
        }
        error_response(&e)
    })
}

/// Where a pod's node agent listens, and which container the request is for.
pub(super) struct Target {
    pub(super) namespace: String,
    pub(super) pod: String,
    pub(super) container: String,
    /// `host:port`, brackets around an IPv6 host.
    pub(super) authority: String,
    pub(super) host: String,
    pub(super) port: u16,
}

/// Looks up the pod, picks and checks the container, and finds its node's address.
fn target(st: &ServerState, r: &ResourceRequest, query: &Query) -> Result<Target, ApiError> {
    let (namespace, name, pod, node_name) = scheduled_pod(st, r)?;
    let container = pick_container(&pod.value(), &name, query.get("container"))?;
    node_target(st, &node_name, namespace, name, container)
}

/// The request's pod (namespace, name, stored object) and the node it is scheduled on; a 400 as upstream
/// when it has none.
pub(super) fn scheduled_pod(
    st: &ServerState,
    r: &ResourceRequest,
) -> Result<(String, String, Arc<Stored>, String), ApiError> {
    let namespace = r.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let name = r.name.clone().unwrap_or_default();
    let pod = st.registry.get(r.info, Some(&namespace), &name)?;
    let node_name = pod
        .value()
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if node_name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    Ok((namespace, name, pod, node_name))
}

/// The [`Target`] on node `node_name` (port-forward has no container: it passes an empty one).
pub(super) fn node_target(
    st: &ServerState,
    node_name: &str,
    namespace: String,
    pod: String,
    container: String,
) -> Result<Target, ApiError> {
    let nodes =
        resources::find("", "v1", "nodes").ok_or_else(|| ApiError::internal("nodes are not served"))?;
    let node = st.registry.get(nodes, None, node_name)?;
    let (host, port) = node_address(&node.value())?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(Target {
        namespace,
        pod,
        container,
        authority,
        host,
        port,
    })
}

fn names(pod: &Value, list: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// upstream `LogLocation`/`streamLocation`: an explicit container must exist in the pod (app, init or
/// ephemeral); without one, a single-container pod means its container.
fn pick_container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let containers = names(pod, "containers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) => {
            let known = ["containers", "initContainers", "ephemeralContainers"]
                .iter()
                .any(|list| names(pod, list).iter().any(|n| n == c));
            if known {
                Ok(c.to_owned())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let mut message = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                );
                let init = names(pod, "initContainers");
                if !init.is_empty() {
                    message.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
                }
                Err(ApiError::bad_request(message))
            }
        },
    }
}

/// The node's preferred address (InternalIP, else Hostname) and its kubelet port.
fn node_address(node: &Value) -> Result<(String, u16), ApiError> {
    let addresses = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let of_type = |t: &str| {
        addresses.iter().find_map(|a| {
            (a.get("type").and_then(Value::as_str) == Some(t))
                .then(|| a.get("address").and_then(Value::as_str))
                .flatten()
                .filter(|s| !s.is_empty())
        })
    };
    let host = of_type("InternalIP")
        .or_else(|| of_type("Hostname"))
        .ok_or_else(|| {
            ApiError::internal(format!(
                "no preferred addresses found; known addresses: {}",
                Value::Array(addresses.clone())
            ))
        })?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    let port = u16::try_from(port).map_err(|_| ApiError::internal(format!("invalid kubelet port {port}")))?;
    Ok((host.to_owned(), port))
}

pub(super) fn segment(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// The node path for `kind` (`containerLogs`, `exec`, `attach`) with a query.
fn node_path(kind: &str, t: &Target, query: &[(&str, String)]) -> String {
    let mut path = format!(
        "/{kind}/{}/{}/{}",
        segment(&t.namespace),
        segment(&t.pod),
        segment(&t.container)
    );
    if !query.is_empty() {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in query {
            q.append_pair(k, v);
        }
        path.push('?');
        path.push_str(&q.finish());
    }
    path
}

/// upstream `ValidatePodLogOptions`, then the query the node gets.
fn log_query(name: &str, query: &Query) -> Result<Vec<(&'static str, String)>, ApiError> {
    let mut errors = Vec::new();
    let tail = query.int("tailLines")?;
    if let Some(n) = tail.filter(|n| *n < 0) {
        errors.push(FieldError::invalid(
            "tailLines",
            &json!(n),
            "must be greater than or equal to 0",
        ));
    }
    let limit = query.int("limitBytes")?;
    if let Some(n) = limit.filter(|n| *n < 1) {
        errors.push(FieldError::invalid(
            "limitBytes",
            &json!(n),
            "must be greater than 0",
        ));
    }
    let since_seconds = query.int("sinceSeconds")?;
    let since_time = query.get("sinceTime").filter(|t| !t.is_empty());
    if since_seconds.is_some() && since_time.is_some() {
        errors.push(FieldError::forbidden(
            "",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    if let Some(n) = since_seconds.filter(|n| *n < 1) {
        errors.push(FieldError::invalid(
            "sinceSeconds",
            &json!(n),
            "must be greater than 0",
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid("PodLogOptions", "", name, &errors));
    }
    let mut out = Vec::new();
    for flag in ["follow", "previous", "timestamps"] {
        if query.flag(flag)? {
            out.push((flag, "true".to_owned()));
        }
    }
    for (key, value) in [
        ("tailLines", tail),
        ("limitBytes", limit),
        ("sinceSeconds", since_seconds),
    ] {
        if let Some(v) = value {
            out.push((key, v.to_string()));
        }
    }
    if let Some(t) = since_time {
        out.push(("sinceTime", t.to_owned()));
    }
    Ok(out)
}

async fn logs(st: &ServerState, r: &ResourceRequest, query: &Query) -> Result<Response, ApiError> {
    let name = r.name.as_deref().unwrap_or_default();
    let node_query = log_query(name, query)?;
    let t = target(st, r, query)?;
    let token = node_token(st)?;
    let path = node_path("containerLogs", &t, &node_query);
    let tls = connect(&t).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| node_error(&t, e))?;
    // Drives the connection; it ends when the response body is finished or dropped.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = http::Request::get(path)
        .header(header::HOST, &t.authority)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Empty::<Bytes>::new())
        .map_err(ApiError::internal)?;
    let response = tokio::time::timeout(NODE_CONNECT_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| node_error(&t, "timed out waiting for the node's answer"))?
        .map_err(|e| node_error(&t, e))?;
    let status = response.status();
    if status != StatusCode::OK {
        let body = read_limited(response.into_body()).await;
        return Err(node_refused(status.as_u16(), &body));
    }
    // A follow ends when the container stops, the client goes away, or the API server shuts down.
    let stream = response
        .into_body()
        .into_data_stream()
        .take_until(st.cancel.clone().cancelled_owned());
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

async fn read_limited(mut body: hyper::body::Incoming) -> String {
    let mut buf = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data[..data.len().min(MAX_ERROR_BODY - buf.len())]);
            if buf.len() >= MAX_ERROR_BODY {
                break;
            }
        }
    }
    String::from_utf8_lossy(&buf).trim().to_owned()
}

/// A node's non-success answer as a Status with the node's code and text.
pub(super) fn node_refused(code: u16, body: &str) -> ApiError {
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        _ => "InternalError",
    };
    // A node that answers with a Status (a real kubelet does, for some errors) keeps its message.
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| body.to_owned());
    ApiError {
        code,
        reason,
        message,
        details: None,
    }
}

pub(super) fn node_error(t: &Target, e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("connecting to node at {}: {e}", t.authority))
}

pub(super) fn node_token(st: &ServerState) -> Result<&str, ApiError> {
    st.node_token
        .as_deref()
        .ok_or_else(|| ApiError::unavailable("no node token is configured: cannot reach node agents"))
}

async fn stream(
    st: &ServerState,
    mut parts: Parts,
    r: &ResourceRequest,
    query: &Query,
    sub: &str,
) -> Result<Response, ApiError> {
    let t = target(st, r, query)?;
    let token = node_token(st)?;
    let mut node_query = Vec::new();
    if sub == "exec" {
        node_query.extend(
            query
                .0
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| ("command", v.clone())),
        );
    }
    for flag in ["stdin", "stdout", "stderr", "tty"] {
        if query.flag(flag)? {
            node_query.push((flag, "true".to_owned()));
        }
    }
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws.protocols(CHANNEL_PROTOCOLS),
        Err(rejection) if parts.method == Method::POST => {
            return Err(ApiError::bad_request(format!(
                "only WebSocket streaming ({}) is supported, not SPDY: {rejection}",
                CHANNEL_PROTOCOLS.join(", ")
            )));
        }
        Err(rejection) => {
            return Err(ApiError::bad_request(format!(
                "unable to upgrade connection: {rejection}"
            )));
        }
    };
    // Ask the node for the protocol the client gets; a client that offered none gets v4's framing.
    let protocol = upgrade
        .selected_protocol()
        .and_then(|p| p.to_str().ok())
        .unwrap_or(CHANNEL_PROTOCOLS[1])
        .to_owned();
    let kind = if sub == "exec" { "exec" } else { "attach" };
    let uri = format!("wss://{}{}", t.authority, node_path(kind, &t, &node_query));
    let mut request = uri.into_client_request().map_err(ApiError::internal)?;
    let headers = request.headers_mut();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(ApiError::internal)?,
    );
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_str(&protocol).map_err(ApiError::internal)?,
    );
    let tls = connect(&t).await?;
    let handshake = tokio::time::timeout(
        NODE_CONNECT_TIMEOUT,
        tokio_tungstenite::client_async(request, tls),
    )
    .await
    .map_err(|_| node_error(&t, "timed out waiting for the node's answer"))?;
    let node = match handshake {
        Ok((node, _)) => node,
        Err(tungstenite::Error::Http(resp)) => {
            let body = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default());
            return Err(node_refused(resp.status().as_u16(), body.trim()));
        }
        Err(e) => return Err(node_error(&t, e)),
    };
    let cancel = st.cancel.clone();
    Ok(upgrade.on_upgrade(move |client| pipe(client, node, cancel)))
}

type NodeSocket = tokio_tungstenite::WebSocketStream<TlsStream<TcpStream>>;

fn to_node(message: ws::Message) -> Option<tungstenite::Message> {
    Some(match message {
        ws::Message::Binary(b) => tungstenite::Message::Binary(b),
        ws::Message::Text(t) => tungstenite::Message::text(t.as_str()),
        ws::Message::Close(frame) => {
            tungstenite::Message::Close(frame.map(|f| tungstenite::protocol::CloseFrame {
                code: f.code.into(),
                reason: f.reason.as_str().into(),
            }))
        }
        // Each connection answers its own pings.
        ws::Message::Ping(_) | ws::Message::Pong(_) => return None,
    })
}

fn to_client(message: tungstenite::Message) -> Option<ws::Message> {
    Some(match message {
        tungstenite::Message::Binary(b) => ws::Message::Binary(b),
        tungstenite::Message::Text(t) => ws::Message::Text(t.as_str().into()),
        tungstenite::Message::Close(frame) => ws::Message::Close(frame.map(|f| ws::CloseFrame {
            code: f.code.into(),
            reason: f.reason.as_str().into(),
        })),
        _ => return None,
    })
}

fn close(code: u16, reason: &str) -> ws::Message {
    ws::Message::Close(Some(ws::CloseFrame {
        code,
        reason: reason.into(),
    }))
}

/// Pipes frames both ways until either side closes, passing the Close on, then lets both sides finish
/// their closing handshakes.
async fn pipe(client: WebSocket, node: NodeSocket, cancel: CancellationToken) {
    let (mut client_tx, mut client_rx) = client.split();
    let (mut node_tx, mut node_rx) = node.split();
    loop {
        tokio::select! {
            message = client_rx.next() => {
                let Some(Ok(message)) = message else {
                    // The client vanished without a Close: end the node's session too.
                    let _ = node_tx.send(tungstenite::Message::Close(None)).await;
                    break;
                };
                let closing = matches!(message, ws::Message::Close(_));
                if let Some(m) = to_node(message)
                    && node_tx.send(m).await.is_err()
                {
                    let _ = client_tx.send(close(1011, "node connection lost")).await;
                    break;
                }
                if closing {
                    break;
                }
            }
            message = node_rx.next() => {
                let Some(Ok(message)) = message else {
                    let _ = client_tx.send(close(1011, "node connection lost")).await;
                    break;
                };
                let closing = matches!(message, tungstenite::Message::Close(_));
                if let Some(m) = to_client(message)
                    && client_tx.send(m).await.is_err()
                {
                    let _ = node_tx.send(tungstenite::Message::Close(None)).await;
                    break;
                }
                if closing {
                    break;
                }
            }
            () = cancel.cancelled() => {
                let _ = client_tx.send(close(1001, "the API server is shutting down")).await;
                let _ = node_tx.send(tungstenite::Message::Close(None)).await;
                break;
            }
        }
    }
    // Reading on lets each library answer or receive the closing Close frame.
    let drain = async {
        tokio::join!(
            async { while let Some(Ok(_)) = client_rx.next().await {} },
            async { while let Some(Ok(_)) = node_rx.next().await {} },
        )
    };
    let _ = tokio::time::timeout(CLOSE_WAIT, drain).await;
}

/// A TCP and TLS connection to the node, offering only HTTP/1.1 (upgrades need it).
pub(super) async fn connect(t: &Target) -> Result<TlsStream<TcpStream>, ApiError> {
    let server_name = ServerName::try_from(t.host.clone()).map_err(|e| node_error(t, e))?;
    let connector = tokio_rustls::TlsConnector::from(client_config());
    let connecting = async {
        let tcp = TcpStream::connect((t.host.as_str(), t.port)).await?;
        // Before the TLS handshake, whose small writes would otherwise meet the node's delayed ACK.
        tcp.set_nodelay(true)?;
        connector.connect(server_name, tcp).await
    };
    tokio::time::timeout(NODE_CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| node_error(t, "timed out"))?
        .map_err(|e| node_error(t, e))
}

fn client_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| Arc::new(api::tls::accept_any_certificate()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: &[&str], init: &[&str]) -> Value {
        let list = |names: &[&str]| names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>();
        json!({"spec": {"containers": list(containers), "initContainers": list(init)}})
    }

    #[test]
    fn the_container_defaults_only_in_a_single_container_pod() {
        assert_eq!(pick_container(&pod(&["a"], &[]), "p", None).unwrap(), "a");
        let err = pick_container(&pod(&["a", "b"], &[]), "p", None).unwrap_err();
        assert_eq!(
            err.message,
            "a container name must be specified for pod p, choose one of: [a b]"
        );
        let err = pick_container(&pod(&["a", "b"], &["i"]), "p", None).unwrap_err();
        assert!(
            err.message.ends_with(" or one of the init containers: [i]"),
            "{}",
            err.message
        );
        let err = pick_container(&pod(&["a"], &[]), "p", Some("c")).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "container c is not valid for pod p")
        );
        assert_eq!(pick_container(&pod(&["a"], &["i"]), "p", Some("i")).unwrap(), "i");
    }

    #[test]
    fn the_node_address_prefers_internal_ip_and_defaults_the_port() {
        let node = json!({"status": {"addresses": [
            {"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "10.0.0.5"},
        ], "daemonEndpoints": {"kubeletEndpoint": {"Port": 10251}}}});
        assert_eq!(node_address(&node).unwrap(), ("10.0.0.5".to_owned(), 10251));
        let node = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(node_address(&node).unwrap(), ("n1".to_owned(), 10250));
        assert_eq!(node_address(&json!({})).unwrap_err().code, 500);
    }

    #[test]
    fn log_options_are_validated_as_upstream_does() {
        let q = Query::parse(Some("tailLines=-1&sinceSeconds=5&sinceTime=2025-01-01T00:00:00Z"));
        let err = log_query("p", &q).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.starts_with("PodLogOptions \"p\" is invalid"),
            "{}",
            err.message
        );
        let q = Query::parse(Some("follow=1&tailLines=3&container=x"));
        assert_eq!(
            log_query("p", &q).unwrap(),
            [("follow", "true".to_owned()), ("tailLines", "3".to_owned())]
        );
    }
}
