//! `/portForward/{namespace}/{pod}?port=P`: one TCP connection to a pod's port, relayed over a WebSocket.
//! The API server terminates the client's protocols (SPDY/3.1 for kubectl, the v4 channel protocol for
//! client libraries) and opens one of these per forwarded connection.
//!
//! ```text
//! apiserver pods/portforward ──wss /portForward/ns/pod?port=P──► this module
//!                                                                   │ sandbox of (ns, pod) → its IP
//!                                                                   ▼
//!                                                       TCP podIP:P (TCP_NODELAY), piped both ways
//! ```
//!
//! The dial happens before the upgrade, so a pod that does not exist (404), a sandbox that does not run
//! (400) or a refused connection (500) is a plain HTTP error whose text the API server writes on that
//! connection's error stream. After the upgrade, binary messages carry the bytes; an empty binary message
//! from the API server is the client's half-close (the pod socket's write side is shut down); the pod
//! closing its side ends the WebSocket.
//!
//! Reaching the pod: first the fast path, a direct dial of the pod IP, which works where the Docker
//! bridge is routable from the node agent (rootful Docker on Linux). When that fails (refused: the app may
//! listen on loopback only; unreachable or timed out: Docker Desktop, rootless Docker) the connection goes
//! through [`helper`], exec'd inside the sandbox, which dials `localhost` in the pod's network namespace
//! as upstream's runtimes do. Once a pod IP proved unreachable, later connections skip the direct dial.

pub mod helper;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::runtime::{ContainerInfo, ContainerStatus, ListFilter};
use crate::server::ServerState;

/// How long the direct dial of the pod IP may take before the helper is tried (an unroutable pod IP
/// times out rather than failing).
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// Set once a direct dial found pod IPs unreachable from the node agent: then only the helper is used.
static POD_IPS_UNREACHABLE: AtomicBool = AtomicBool::new(false);

/// Makes every port-forward go through the helper (`--port-forward-via-helper`).
pub fn disable_direct_dial() {
    POD_IPS_UNREACHABLE.store(true, Ordering::Relaxed);
}

/// What a failed direct dial means: the helper is always tried next; a pod IP that is unreachable (rather
/// than refused) means pod IPs are not routable from here, so later connections skip the direct dial.
pub fn pod_ips_unreachable(error: Option<std::io::ErrorKind>) -> bool {
    use std::io::ErrorKind::{HostUnreachable, NetworkUnreachable, TimedOut};
    // `None`: the dial timed out.
    error.is_none_or(|kind| matches!(kind, TimedOut | HostUnreachable | NetworkUnreachable))
}

/// A connection into the pod: direct, or through the helper in the sandbox.
enum Conn {
    Tcp(TcpStream),
    Helper(helper::HelperConn),
}

/// The most bytes read from the pod per WebSocket message (the API server cuts SPDY frames of 32 KiB).
const READ_CHUNK: usize = 32 * 1024;

/// Why a port-forward connection could not be made: an HTTP status and the kubelet-style text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The status code.
    pub code: StatusCode,
    /// The message.
    pub message: String,
}

fn refuse(code: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

/// upstream kubelet: the `port` parameter is required and must be a port number above 0.
pub fn parse_port(value: Option<&str>) -> Result<u16, Refusal> {
    let value =
        value.ok_or_else(|| refuse(StatusCode::BAD_REQUEST, "query parameter \"port\" is required"))?;
    match value.parse::<u16>() {
        Ok(0) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("port {value:?} must be > 0"),
        )),
        Ok(port) => Ok(port),
        Err(_) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("unable to parse {value:?} as a port: invalid syntax"),
        )),
    }
}

/// The pod's sandbox to forward into: the newest running one of `(namespace, pod)`. A pod with no
/// sandbox on this node does not exist here (404, as the kubelet's `GetPodByName` miss); one whose
/// sandboxes all stopped is not running (400).
pub fn choose_sandbox<'a>(
    sandboxes: &'a [ContainerInfo],
    namespace: &str,
    pod: &str,
) -> Result<&'a ContainerInfo, Refusal> {
    let mut of_pod: Vec<&ContainerInfo> = sandboxes
        .iter()
        .filter(|s| s.pod_namespace() == Some(namespace) && s.pod_name() == Some(pod))
        .collect();
    if of_pod.is_empty() {
        return Err(refuse(StatusCode::NOT_FOUND, "pod does not exist"));
    }
    of_pod.sort_by_key(|s| std::cmp::Reverse(s.created));
    of_pod
        .into_iter()
        .find(|s| s.state == ContainerStatus::Running)
        .ok_or_else(|| {
            refuse(
                StatusCode::BAD_REQUEST,
                format!("pod {namespace}/{pod} is not running"),
            )
        })
}

/// Finds the pod's sandbox and connects to `port` in it: the pod IP directly, else through the helper.
async fn dial(st: &ServerState, namespace: &str, pod: &str, port: u16) -> Result<Conn, Refusal> {
    let internal = |e: &dyn std::fmt::Display| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let sandboxes = st
        .runtime
        .list(&ListFilter::sandboxes())
        .await
        .map_err(|e| internal(&e))?;
    let sandbox = choose_sandbox(&sandboxes, namespace, pod)?;
    let state = st.runtime.inspect(&sandbox.id).await.map_err(|e| internal(&e))?;
    if !state.ip_address.is_empty() && !POD_IPS_UNREACHABLE.load(Ordering::Relaxed) {
        let address = format!("{}:{port}", state.ip_address);
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&address)).await {
            Ok(Ok(tcp)) => {
                // Interactive protocols through port-forward would otherwise wait on Nagle's algorithm.
                tcp.set_nodelay(true).map_err(|e| internal(&e))?;
                return Ok(Conn::Tcp(tcp));
            }
            Ok(Err(e)) => {
                tracing::debug!(%address, error = %dial_error(&e), "port-forward: direct dial failed, using the helper");
                if pod_ips_unreachable(Some(e.kind())) {
                    POD_IPS_UNREACHABLE.store(true, Ordering::Relaxed);
                }
            }
            Err(_) => {
                tracing::info!(%address, "port-forward: pod IPs are unreachable from the node agent, using the helper");
                POD_IPS_UNREACHABLE.store(true, Ordering::Relaxed);
            }
        }
    }
    helper::connect(st.runtime.as_ref(), &sandbox.id, port)
        .await
        .map(Conn::Helper)
        .map_err(|cause| refuse(StatusCode::INTERNAL_SERVER_ERROR, cause))
}

/// Go's wording for the common dial failures (`connect: connection refused`), which users know from
/// the kubelet; Rust's `Display` adds "(os error 111)".
fn dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_owned(),
        std::io::ErrorKind::HostUnreachable => "connect: no route to host".to_owned(),
        std::io::ErrorKind::NetworkUnreachable => "connect: network is unreachable".to_owned(),
        _ => e.to_string(),
    }
}

/// The handler of `/portForward/{namespace}/{pod}`.
pub async fn port_forward(
    State(st): State<Arc<ServerState>>,
    Path((namespace, pod)): Path<(String, String)>,
    request: Request,
) -> Response {
    let port = form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "port")
        .map(|(_, v)| v.into_owned());
    let result = async {
        let port = parse_port(port.as_deref())?;
        let (mut parts, _) = request.into_parts();
        let ws = WebSocketUpgrade::from_request_parts(&mut parts, &())
            .await
            .map_err(|e| {
                refuse(
                    StatusCode::BAD_REQUEST,
                    format!("unable to upgrade connection: {e}"),
                )
            })?;
        let conn = dial(&st, &namespace, &pod, port).await?;
        Ok::<_, Refusal>(ws.on_upgrade(move |socket| async move {
            match conn {
                Conn::Tcp(tcp) => relay(socket, tcp).await,
                Conn::Helper(h) => relay_helper(socket, h).await,
            }
        }))
    };
    match result.await {
        Ok(resp) => resp,
        Err(r) => {
            let mut resp = Response::new(r.message.into());
            *resp.status_mut() = r.code;
            resp
        }
    }
}

/// Pipes bytes between the WebSocket and the pod until the pod closes its side or the WebSocket ends.
async fn relay(socket: WebSocket, tcp: TcpStream) {
    let (mut pod_rx, mut pod_tx) = tcp.into_split();
    let (mut ws_tx, mut ws_rx) = socket.split();
    let upstream = async {
        while let Some(Ok(message)) = ws_rx.next().await {
            match message {
                Message::Binary(b) if b.is_empty() => {
                    let _ = pod_tx.shutdown().await;
                }
                Message::Binary(b) if pod_tx.write_all(&b).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            match pod_rx.read(&mut buf).await {
                // A reset from the pod after the connection was made is an ordinary end, not an error
                // (kubectl ends the whole session on any error text).
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if ws_tx
                        .send(Message::Binary(Bytes::copy_from_slice(&buf[..n])))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = ws_tx.send(Message::Close(None)).await;
    };
    // The pod's end of the stream ends the relay; the client's close ends it too.
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// [`relay`] for a connection made by the helper: its stdin and stdout stand for the socket.
async fn relay_helper(socket: WebSocket, conn: helper::HelperConn) {
    let helper::HelperConn {
        mut output,
        mut stdin,
        early,
        _control,
    } = conn;
    let (mut ws_tx, mut ws_rx) = socket.split();
    let upstream = async {
        while let Some(Ok(message)) = ws_rx.next().await {
            match message {
                Message::Binary(b) if b.is_empty() => {
                    let _ = stdin.shutdown().await;
                }
                Message::Binary(b) if stdin.write_all(&b).await.is_err() => break,
                Message::Binary(_) => {
                    let _ = stdin.flush().await;
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    let downstream = async {
        for b in early {
            if ws_tx.send(Message::Binary(b)).await.is_err() {
                return;
            }
        }
        while let Some(Ok(frame)) = output.next().await {
            if let Some(b) = helper::stdout_bytes(frame)
                && !b.is_empty()
                && ws_tx.send(Message::Binary(b)).await.is_err()
            {
                return;
            }
        }
        let _ = ws_tx.send(Message::Close(None)).await;
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
    // Ends the helper: its stdin closes, it half-closes the connection, and the exec finishes.
    let _ = stdin.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use jiff::Timestamp;

    use super::*;
    use crate::runtime::naming;

    fn sandbox(id: &str, ns: &str, pod: &str, state: ContainerStatus, created: i64) -> ContainerInfo {
        let labels = BTreeMap::from([
            (naming::LABEL_POD_NAMESPACE.to_owned(), ns.to_owned()),
            (naming::LABEL_POD_NAME.to_owned(), pod.to_owned()),
        ]);
        ContainerInfo {
            id: id.to_owned(),
            name: id.to_owned(),
            labels,
            state,
            created: Timestamp::from_second(created).unwrap(),
            image: String::new(),
            image_id: String::new(),
        }
    }

    #[test]
    fn the_port_parameter_is_checked_as_the_kubelet_checks_it() {
        let cases = [
            (None, Err(StatusCode::BAD_REQUEST)),
            (Some("0"), Err(StatusCode::BAD_REQUEST)),
            (Some("x"), Err(StatusCode::BAD_REQUEST)),
            (Some("65536"), Err(StatusCode::BAD_REQUEST)),
            (Some("8080"), Ok(8080)),
        ];
        for (value, want) in cases {
            assert_eq!(parse_port(value).map_err(|r| r.code), want, "{value:?}");
        }
    }

    #[test]
    fn only_unreachable_pod_ips_turn_the_direct_dial_off() {
        use std::io::ErrorKind::*;
        for (error, unreachable) in [
            (None, true),
            (Some(TimedOut), true),
            (Some(HostUnreachable), true),
            (Some(NetworkUnreachable), true),
            // Refused: the pod is reachable, the app may listen on loopback only.
            (Some(ConnectionRefused), false),
            (Some(ConnectionReset), false),
        ] {
            assert_eq!(pod_ips_unreachable(error), unreachable, "{error:?}");
        }
    }

    #[test]
    fn dial_errors_read_as_go_writes_them() {
        use std::io::{Error, ErrorKind};
        assert_eq!(
            dial_error(&Error::from(ErrorKind::ConnectionRefused)),
            "connect: connection refused"
        );
        assert_eq!(dial_error(&Error::other("boom")), "boom");
    }

    #[test]
    fn the_newest_running_sandbox_of_the_pod_is_chosen() {
        use ContainerStatus::{Exited, Running};
        let all = [
            sandbox("old", "ns", "web", Exited, 1),
            sandbox("new", "ns", "web", Running, 2),
            sandbox("other", "ns2", "web", Running, 3),
        ];
        assert_eq!(choose_sandbox(&all, "ns", "web").unwrap().id, "new");
        assert_eq!(
            choose_sandbox(&all, "ns", "nope").unwrap_err().code,
            StatusCode::NOT_FOUND
        );
        let stopped = [sandbox("old", "ns", "web", Exited, 1)];
        assert_eq!(
            choose_sandbox(&stopped, "ns", "web").unwrap_err(),
            refuse(StatusCode::BAD_REQUEST, "pod ns/web is not running")
        );
    }
}
