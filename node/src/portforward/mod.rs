//! `/portForward/{namespace}/{pod}`: one WebSocket per port-forward session, carrying every forwarded TCP
//! connection of that session to the pod ([`wire`] numbers them). The API server terminates the client's
//! protocols (SPDY/3.1 for kubectl, the v4 channel protocol for client libraries) and keeps this one
//! WebSocket for the whole session, as the kubelet serves a whole session on one upgraded connection.
//!
//! ```text
//! apiserver pods/portforward ──wss /portForward/ns/pod──► this module: the pod's sandbox and IP, once
//!     OPEN id port, DATA, FIN, CLOSE ─►│ per connection id:
//!     ◄─ DATA, CLOSE, ERROR text       ▼
//!                                 TCP podIP:P (TCP_NODELAY), piped both ways
//! ```
//!
//! The sandbox is found before the upgrade, so a pod that does not exist here (404) or whose sandbox does
//! not run (400) is a plain HTTP error, whose text the API server writes on each connection's error
//! stream. A connection that cannot be made gets ERROR with the kubelet-style text; the pod closing its
//! side ends the connection (CLOSE). Closing the WebSocket ends every connection of the session.
//!
//! Reaching the pod: first the fast path, a direct dial of the pod IP, which works where the Docker
//! bridge is routable from the node agent (rootful Docker on Linux). When that fails (refused: the app may
//! listen on loopback only; unreachable or timed out: Docker Desktop, rootless Docker) the connection goes
//! through [`helper`], exec'd inside the sandbox, which dials `localhost` in the pod's network namespace
//! as upstream's runtimes do. Once a pod IP proved unreachable, later connections skip the direct dial.
//!
//! All connections share the WebSocket, so a pod that stops reading one connection's bytes holds up the
//! others' uploads once that connection's queue is full (SPDY, which kubectl speaks, has the same
//! property: spdystream does no flow control).

pub mod helper;
pub mod wire;

use std::collections::HashMap;
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
use tokio::sync::mpsc;

use crate::runtime::{ContainerInfo, ContainerStatus, ListFilter};
use crate::server::ServerState;

/// How long the direct dial of the pod IP may take before the helper is tried (an unroutable pod IP
/// times out rather than failing).
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// Messages for the API server waiting to be written to the WebSocket.
const OUT_QUEUE: usize = 64;

/// Messages for one connection waiting for its pod socket (the dial, or a pod that reads slowly).
const CONN_QUEUE: usize = 64;

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

/// The most bytes read from the pod per message (the API server cuts SPDY frames of 32 KiB).
const READ_CHUNK: usize = 32 * 1024;

/// Why a port-forward session could not start: an HTTP status and the kubelet-style text.
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

/// The sandbox a session forwards into, found once when it starts (as the kubelet finds it per session).
struct Sandbox {
    id: String,
    ip: String,
}

/// Finds the pod's running sandbox and its IP.
async fn find_sandbox(st: &ServerState, namespace: &str, pod: &str) -> Result<Sandbox, Refusal> {
    let internal = |e: &dyn std::fmt::Display| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let sandboxes = st
        .runtime
        .list(&ListFilter::sandboxes())
        .await
        .map_err(|e| internal(&e))?;
    let sandbox = choose_sandbox(&sandboxes, namespace, pod)?;
    let state = st.runtime.inspect(&sandbox.id).await.map_err(|e| internal(&e))?;
    Ok(Sandbox {
        id: sandbox.id.clone(),
        ip: state.ip_address,
    })
}

/// Connects to `port` in the sandbox: the pod IP directly, else through the helper; the error is the
/// text for the client.
async fn dial(st: &ServerState, sandbox: &Sandbox, port: u16) -> Result<Conn, String> {
    if !sandbox.ip.is_empty() && !POD_IPS_UNREACHABLE.load(Ordering::Relaxed) {
        let address = format!("{}:{port}", sandbox.ip);
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&address)).await {
            Ok(Ok(tcp)) => {
                // Interactive protocols through port-forward would otherwise wait on Nagle's algorithm.
                tcp.set_nodelay(true).map_err(|e| e.to_string())?;
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
    let result = async {
        let (mut parts, _) = request.into_parts();
        let ws = WebSocketUpgrade::from_request_parts(&mut parts, &())
            .await
            .map_err(|e| {
                refuse(
                    StatusCode::BAD_REQUEST,
                    format!("unable to upgrade connection: {e}"),
                )
            })?;
        let sandbox = Arc::new(find_sandbox(&st, &namespace, &pod).await?);
        Ok::<_, Refusal>(ws.on_upgrade(move |socket| session(st, sandbox, socket)))
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

/// What the API server sends one connection.
enum Up {
    /// Bytes for the pod.
    Data(Bytes),
    /// The client will send no more.
    Fin,
}

/// Serves one session: reads the API server's messages and hands them to the connections, while a
/// writer sends what the connections produce. Ends when the API server closes the WebSocket.
async fn session(st: Arc<ServerState>, sandbox: Arc<Sandbox>, socket: WebSocket) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
    let writer = async move {
        while let Some(b) = out_rx.recv().await {
            if ws_tx.send(Message::Binary(b)).await.is_err() {
                return;
            }
        }
        let _ = ws_tx.send(Message::Close(None)).await;
    };
    let reader = async move {
        let mut conns: HashMap<u32, mpsc::Sender<Up>> = HashMap::new();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u32>();
        loop {
            tokio::select! {
                message = ws_rx.next() => {
                    let b = match message {
                        Some(Ok(Message::Binary(b))) => b,
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                        Some(Ok(_)) => continue,
                    };
                    let Some((op, id, payload)) = wire::decode(&b) else {
                        tracing::debug!("port-forward: a message shorter than its header, ending the session");
                        break;
                    };
                    match op {
                        wire::OPEN => {
                            let Some(port) = wire::open_port(&payload) else {
                                let text = wire::encode(wire::ERROR, id, b"invalid port");
                                let _ = out_tx.send(text).await;
                                continue;
                            };
                            let (tx, rx) = mpsc::channel(CONN_QUEUE);
                            conns.insert(id, tx);
                            let out = out_tx.clone();
                            let done = done_tx.clone();
                            let (st, sandbox) = (st.clone(), sandbox.clone());
                            tokio::spawn(async move {
                                connection(&st, &sandbox, id, port, rx, &out).await;
                                let _ = done.send(id);
                            });
                        }
                        wire::DATA | wire::FIN => {
                            let up = if op == wire::DATA { Up::Data(payload) } else { Up::Fin };
                            if let Some(tx) = conns.get(&id)
                                && tx.send(up).await.is_err()
                            {
                                conns.remove(&id);
                            }
                        }
                        // Dropping the sender ends the connection.
                        wire::CLOSE => {
                            conns.remove(&id);
                        }
                        _ => {}
                    }
                }
                Some(id) = done_rx.recv() => {
                    conns.remove(&id);
                }
            }
        }
        // Dropping every sender ends every connection; the writer ends once they are gone.
    };
    tokio::join!(reader, writer);
}

/// One forwarded connection: dial, then pipe until the pod or the client ends it.
async fn connection(
    st: &ServerState,
    sandbox: &Sandbox,
    id: u32,
    port: u16,
    up: mpsc::Receiver<Up>,
    out: &mpsc::Sender<Bytes>,
) {
    match dial(st, sandbox, port).await {
        Err(text) => {
            let _ = out.send(wire::encode(wire::ERROR, id, text.as_bytes())).await;
            return;
        }
        Ok(Conn::Tcp(tcp)) => relay(id, tcp, up, out).await,
        Ok(Conn::Helper(h)) => relay_helper(id, h, up, out).await,
    }
    let _ = out.send(wire::encode(wire::CLOSE, id, &[])).await;
}

/// Pipes bytes between the session and the pod until the pod closes its side or the client is gone.
async fn relay(id: u32, tcp: TcpStream, mut up: mpsc::Receiver<Up>, out: &mpsc::Sender<Bytes>) {
    let (mut pod_rx, mut pod_tx) = tcp.into_split();
    let upstream = async {
        while let Some(message) = up.recv().await {
            match message {
                Up::Data(b) => {
                    if pod_tx.write_all(&b).await.is_err() {
                        break;
                    }
                }
                Up::Fin => {
                    let _ = pod_tx.shutdown().await;
                }
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; wire::HEADER + READ_CHUNK];
        buf[..wire::HEADER].copy_from_slice(&wire::encode(wire::DATA, id, &[]));
        loop {
            match pod_rx.read(&mut buf[wire::HEADER..]).await {
                // A reset from the pod after the connection was made is an ordinary end, not an error
                // (kubectl ends the whole session on any error text).
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let message = Bytes::copy_from_slice(&buf[..wire::HEADER + n]);
                    if out.send(message).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    // The pod's end of the stream ends the relay; the client's close ends it too.
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// [`relay`] for a connection made by the helper: its stdin and stdout stand for the socket.
async fn relay_helper(
    id: u32,
    conn: helper::HelperConn,
    mut up: mpsc::Receiver<Up>,
    out: &mpsc::Sender<Bytes>,
) {
    let helper::HelperConn {
        mut output,
        mut stdin,
        early,
        _control,
    } = conn;
    let upstream = async {
        while let Some(message) = up.recv().await {
            match message {
                Up::Data(b) => {
                    if stdin.write_all(&b).await.is_err() {
                        break;
                    }
                    let _ = stdin.flush().await;
                }
                Up::Fin => {
                    let _ = stdin.shutdown().await;
                }
            }
        }
    };
    let downstream = async {
        for b in early {
            if out.send(wire::encode(wire::DATA, id, &b)).await.is_err() {
                return;
            }
        }
        while let Some(Ok(frame)) = output.next().await {
            if let Some(b) = helper::stdout_bytes(frame)
                && !b.is_empty()
                && out.send(wire::encode(wire::DATA, id, &b)).await.is_err()
            {
                return;
            }
        }
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
