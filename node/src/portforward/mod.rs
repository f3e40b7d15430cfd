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
//! Reaching the pod: the node agent dials the pod IP, which works where the Docker bridge is routable
//! from the node agent (rootful Docker on Linux). Upstream (containerd, cri-dockerd) dials `localhost`
//! inside the pod's network namespace instead, which also reaches apps bound to loopback only; doing
//! that without root needs a helper exec'd inside the sandbox, which kubeling does not have yet.

use std::sync::Arc;
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

/// How long a dial to the pod may take (the kubelet has no separate limit; the client's stream
/// creation timeout, 30 s, bounds it there).
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Finds the pod's sandbox IP and connects to `port` there.
async fn dial(st: &ServerState, namespace: &str, pod: &str, port: u16) -> Result<TcpStream, Refusal> {
    let internal = |e: &dyn std::fmt::Display| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let sandboxes = st
        .runtime
        .list(&ListFilter::sandboxes())
        .await
        .map_err(|e| internal(&e))?;
    let sandbox = choose_sandbox(&sandboxes, namespace, pod)?;
    let state = st.runtime.inspect(&sandbox.id).await.map_err(|e| internal(&e))?;
    if state.ip_address.is_empty() {
        return Err(refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("sandbox {} has no IP address", sandbox.id),
        ));
    }
    let address = format!("{}:{port}", state.ip_address);
    let connected = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&address)).await;
    let failure = |cause: String| {
        // containerd's wording, naming the pod's IP where it names the namespace.
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "failed to connect to {address} inside pod sandbox {}: {cause}",
                short_id(&sandbox.id)
            ),
        )
    };
    let tcp = match connected {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(failure(dial_error(&e))),
        Err(_) => return Err(failure("connection timed out".to_owned())),
    };
    // Interactive protocols through port-forward would otherwise wait on Nagle's algorithm.
    tcp.set_nodelay(true).map_err(|e| internal(&e))?;
    Ok(tcp)
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

fn short_id(id: &str) -> &str {
    &id[..id.len().min(12)]
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
        let tcp = dial(&st, &namespace, &pod, port).await?;
        Ok::<_, Refusal>(ws.on_upgrade(move |socket| relay(socket, tcp)))
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
