//! The node agent's own HTTPS endpoint, the kubelet's `:10250` server: `GET /containerLogs/...` streams a
//! container's log and `/exec/...` runs a command in it over a WebSocket speaking the Kubernetes channel
//! protocol (`v5.channel.k8s.io`, `v4.channel.k8s.io`). Only the API server calls it, proxying `pods/log`
//! and `pods/exec` for kubectl and the client libraries, and it proves itself with the cluster's shared
//! bearer token.
//!
//! ```text
//! kubectl ──► apiserver pods/log|exec ──HTTPS+WebSocket──► server (this module)
//!                                                             │ lookup(ns, pod, container, previous) → id
//!                                                             ▼
//!                                                  Arc<dyn ContainerRuntime>::logs / exec
//! ```
//!
//! The server knows nothing of pods: the pod workers, which own the mapping from a pod's container to a
//! Docker container (the current one and the previous dead one), hand it in as [`ContainerLookup`].
//! Errors are plain text, as the kubelet writes them; the API server turns them into `metav1.Status`.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get};
use futures_util::stream::SplitStream;
use futures_util::{SinkExt, StreamExt};
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ContainerRuntime, ExecConfig, ExecControl, ExecSession, LogOptions, StdStream};

/// Finds the Docker container of `(namespace, pod, container)`: the current instance, or with `previous`
/// the last dead one (kubelet: `lastState.terminated.containerID`). `None` when there is none.
pub type ContainerLookup = Arc<dyn Fn(&str, &str, &str, bool) -> Option<String> + Send + Sync>;

/// The channel-protocol subprotocols, in the server's order of preference.
pub const CHANNEL_PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// How long to wait for the client's answer to our Close frame before dropping the connection.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

// Channel numbers (apimachinery `remotecommand/constants.go`).
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
/// v5 only: `[255, channel]` closes that channel (stdin EOF).
const CLOSE: u8 = 255;

/// What the handlers share.
pub struct ServerState {
    /// The container runtime.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// From pod and container names to container IDs.
    pub lookup: ContainerLookup,
    /// The bearer token every request must carry (the cluster token the API server sends).
    pub token: String,
}

/// The node endpoint's router: `/containerLogs/{ns}/{pod}/{container}`, `/exec/...`, `/attach/...` and
/// `/portForward/{ns}/{pod}`, all behind the bearer token.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(exec))
        .route("/attach/{namespace}/{pod}/{container}", any(attach))
        .route(
            "/portForward/{namespace}/{pod}",
            get(crate::portforward::port_forward),
        )
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

/// Serves [`router`] over HTTPS on `listener` until `cancel`, then gives open connections (long log
/// follows, exec sessions) a few seconds before dropping them.
pub async fn serve(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    state: Arc<ServerState>,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = axum_server::Handle::new();
    let rustls = axum_server::tls_rustls::RustlsConfig::from_config(tls_config);
    // TCP_NODELAY: exec and port-forward relay small writes that must not wait for delayed ACKs.
    let server = axum_server::from_tcp_rustls(listener, rustls)?
        .map(|tls| tls.acceptor(axum_server::accept::NoDelayAcceptor::new()))
        .handle(handle.clone());
    let shutdown = {
        let handle = handle.clone();
        async move {
            cancel.cancelled().await;
            handle.graceful_shutdown(Some(Duration::from_secs(5)));
        }
    };
    let watcher = tokio::spawn(shutdown);
    let result = server.serve(router(state).into_make_service()).await;
    watcher.abort();
    result
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn authenticate(State(st): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), st.token.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        text(StatusCode::UNAUTHORIZED, "Unauthorized".to_owned())
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

fn bad_request(message: String) -> Response {
    text(StatusCode::BAD_REQUEST, message)
}

/// Query parameters with repeated keys kept (`command=sh&command=-c`).
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>) -> Self {
        Self(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Go's `strconv.ParseBool`; absent or empty is false.
    fn flag(&self, key: &str) -> Result<bool, String> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(format!("invalid boolean value for {key}: {other:?}")),
        }
    }

    fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("invalid value for {key}: {v:?}: not an integer")),
        }
    }
}

/// The [`LogOptions`] of a `/containerLogs` query, and whether the previous instance is wanted.
fn log_options(query: &Query, now: Timestamp) -> Result<(LogOptions, bool), String> {
    let non_negative = |key: &str| -> Result<Option<u64>, String> {
        query
            .int(key)?
            .map(|v| u64::try_from(v).map_err(|_| format!("{key} must be non-negative")))
            .transpose()
    };
    let since = match (query.int("sinceSeconds")?, query.get("sinceTime")) {
        (Some(_), Some(t)) if !t.is_empty() => {
            return Err("at most one of `sinceTime` or `sinceSeconds` may be specified".to_owned());
        }
        (Some(seconds), _) => Some(now - jiff::SignedDuration::from_secs(seconds.max(0))),
        (None, Some(t)) if !t.is_empty() => Some(
            t.parse::<Timestamp>()
                .map_err(|e| format!("invalid value for sinceTime: {t:?}: {e}"))?,
        ),
        (None, _) => None,
    };
    let options = LogOptions {
        follow: query.flag("follow")?,
        tail: non_negative("tailLines")?,
        since,
        timestamps: query.flag("timestamps")?,
        limit_bytes: non_negative("limitBytes")?,
    };
    Ok((options, query.flag("previous")?))
}

async fn container_logs(
    State(st): State<Arc<ServerState>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let query = Query::parse(request.uri().query());
    let (options, previous) = match log_options(&query, Timestamp::now()) {
        Ok(parsed) => parsed,
        Err(message) => return bad_request(message),
    };
    let Some(id) = (st.lookup)(&namespace, &pod, &container, previous) else {
        // kubelet `validateContainerLogStatus` wording.
        return bad_request(if previous {
            format!("previous terminated container {container:?} in pod {pod:?} not found")
        } else {
            format!("container {container:?} in pod {pod:?} is not available")
        });
    };
    match st.runtime.logs(&id, &options).await {
        Ok(stream) => {
            let mut resp = Response::new(Body::from_stream(stream));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp
        }
        Err(e) if e.is_not_found() => text(
            StatusCode::NOT_FOUND,
            format!("container {container:?} in pod {pod:?} not found: {e}"),
        ),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("reading logs: {e}")),
    }
}

/// The parameters of an exec (upstream's `remotecommand.Options`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct StreamOptions {
    command: Vec<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

fn stream_options(query: &Query) -> Result<StreamOptions, String> {
    let options = StreamOptions {
        command: query.all("command"),
        stdin: query.flag("stdin")?,
        stdout: query.flag("stdout")?,
        stderr: query.flag("stderr")?,
        tty: query.flag("tty")?,
    };
    if !(options.stdin || options.stdout || options.stderr) {
        return Err("you must specify at least 1 of stdin, stdout, stderr".to_owned());
    }
    Ok(options)
}

async fn exec(
    State(st): State<Arc<ServerState>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    stream_to_container(st, (namespace, pod, container), request, Stream::Exec).await
}

async fn attach(
    State(st): State<Arc<ServerState>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    stream_to_container(st, (namespace, pod, container), request, Stream::Attach).await
}

/// Which kind of session a WebSocket streams.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// A new process (`command` required).
    Exec,
    /// The container's main process.
    Attach,
}

/// exec and attach: check the request, find the container, upgrade, then pipe the session.
async fn stream_to_container(
    st: Arc<ServerState>,
    (namespace, pod, container): (String, String, String),
    request: Request,
    kind: Stream,
) -> Response {
    let query = Query::parse(request.uri().query());
    let options = match stream_options(&query) {
        Ok(options) if kind == Stream::Exec && options.command.is_empty() => {
            return bad_request("you must specify at least one command for the container".to_owned());
        }
        Ok(options) => options,
        Err(message) => return bad_request(message),
    };
    let Some(id) = (st.lookup)(&namespace, &pod, &container, false) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("container not found ({container:?})"),
        );
    };
    let ws = match upgrade(request).await {
        Ok(ws) => ws,
        Err(resp) => return resp,
    };
    let v5 = ws.selected_protocol().is_some_and(|p| p == CHANNEL_PROTOCOLS[0]);
    let runtime = st.runtime.clone();
    ws.on_upgrade(move |socket| async move {
        let config = ExecConfig {
            cmd: options.command.clone(),
            tty: options.tty,
            stdin: options.stdin,
        };
        let session = match kind {
            Stream::Exec => runtime.exec(&id, &config).await,
            Stream::Attach => runtime.attach(&id, &config).await,
        };
        run_session(socket, session, &options, v5).await;
    })
}

/// The WebSocket upgrade with the channel subprotocol chosen, or the error response for a request that
/// is not one (a SPDY `POST` from client-go's fallback gets a clear 400).
async fn upgrade(request: Request) -> Result<WebSocketUpgrade, Response> {
    let method = request.method().clone();
    let (mut parts, _) = request.into_parts();
    match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        // axum picks the first of *our* protocols that the client offered (its `requested_protocols`
        // is sorted, so never pick from it by hand).
        Ok(ws) => Ok(ws.protocols(CHANNEL_PROTOCOLS)),
        Err(rejection) if method == Method::POST => Err(bad_request(format!(
            "only WebSocket streaming ({}) is supported, not SPDY: {rejection}",
            CHANNEL_PROTOCOLS.join(", ")
        ))),
        Err(rejection) => Err(bad_request(format!("unable to upgrade connection: {rejection}"))),
    }
}

/// `metav1.Status` for the end of an exec, as the kubelet writes it on channel 3.
fn exit_status(exit_code: i64) -> Value {
    if exit_code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {exit_code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": exit_code.to_string()}]},
        })
    }
}

/// Upstream's `apierrors.NewInternalError` for an exec that failed rather than exited.
fn failure_status(message: impl std::fmt::Display) -> Value {
    let message = format!("Internal error occurred: error executing command in container: {message}");
    json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    })
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(data);
    Message::Binary(bytes.into())
}

/// Pumps one exec session: output to channels 1 and 2, the socket to stdin and resize, then the status on
/// channel 3 and a Close 1000, which clients read as a clean end of every stream.
async fn run_session(
    socket: WebSocket,
    session: crate::runtime::Result<ExecSession>,
    options: &StreamOptions,
    v5: bool,
) {
    let (mut sink, stream) = socket.split();
    let (status, mut reader) = match session {
        Err(e) => (
            failure_status(e),
            tokio::spawn(read_input(stream, None, None, v5)),
        ),
        Ok(ExecSession {
            mut output,
            stdin,
            control,
        }) => {
            let control: Arc<dyn ExecControl> = Arc::from(control);
            let stdin = if options.stdin { stdin } else { None };
            // The socket is read all along, so pings get their pongs however long the command runs.
            let reader = tokio::spawn(read_input(stream, stdin, Some(control.clone()), v5));
            let mut failed = None;
            while let Some(item) = output.next().await {
                let out = match item {
                    Ok(out) => out,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                };
                let (wanted, channel) = match out.stream {
                    StdStream::Stdout => (options.stdout, STDOUT),
                    // With a tty the runtime has merged stderr into stdout already.
                    StdStream::Stderr => (options.stderr, STDERR),
                };
                if wanted && sink.send(frame(channel, &out.data)).await.is_err() {
                    // The client went away: nothing left to tell it.
                    reader.abort();
                    return;
                }
            }
            let status = match failed {
                Some(e) => failure_status(e),
                None => match control.exit_code().await {
                    Ok(code) => exit_status(code),
                    Err(e) => failure_status(e),
                },
            };
            (status, reader)
        }
    };
    let _ = sink.send(frame(ERROR, status.to_string().as_bytes())).await;
    let close = CloseFrame {
        code: 1000,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(close))).await;
    // Let the reader see the client's answering Close, then drop the connection.
    if tokio::time::timeout(CLOSE_WAIT, &mut reader).await.is_err() {
        reader.abort();
    }
}

/// The terminal size a client sends on channel 4 (`remotecommand.TerminalSize`, no JSON tags).
#[derive(serde::Deserialize)]
struct TerminalSize {
    #[serde(rename = "Width")]
    width: u16,
    #[serde(rename = "Height")]
    height: u16,
}

/// Reads client messages until the socket ends: stdin on channel 0, resizes on 4, and v5's close of
/// stdin on 255. Text frames are accepted as well as binary (the Python client writes text).
async fn read_input(
    mut stream: SplitStream<WebSocket>,
    mut stdin: Option<std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>>,
    control: Option<Arc<dyn ExecControl>>,
    v5: bool,
) {
    while let Some(Ok(message)) = stream.next().await {
        let (channel, data): (u32, Bytes) = match message {
            Message::Binary(bytes) if !bytes.is_empty() => (u32::from(bytes[0]), bytes.slice(1..)),
            Message::Text(text) => {
                let mut chars = text.as_str().chars();
                let Some(first) = chars.next() else { continue };
                (
                    u32::from(first),
                    Bytes::copy_from_slice(chars.as_str().as_bytes()),
                )
            }
            Message::Close(_) => break,
            _ => continue,
        };
        match channel {
            c if c == u32::from(STDIN) => {
                if let Some(writer) = stdin.as_mut() {
                    let written = async {
                        writer.write_all(&data).await?;
                        writer.flush().await
                    };
                    if written.await.is_err() {
                        stdin = None;
                    }
                }
            }
            c if c == u32::from(RESIZE) => {
                let Some(control) = control.as_ref() else { continue };
                match serde_json::from_slice::<TerminalSize>(data.trim_ascii()) {
                    Ok(size) => {
                        if let Err(e) = control.resize(size.width, size.height).await {
                            tracing::debug!(error = %e, "resizing an exec terminal");
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "ignoring a malformed resize message"),
                }
            }
            c if v5 && c == u32::from(CLOSE) => {
                if data.first() == Some(&STDIN)
                    && let Some(mut writer) = stdin.take()
                {
                    let _ = writer.shutdown().await;
                }
            }
            _ => {}
        }
    }
    if let Some(mut writer) = stdin {
        let _ = writer.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_carries_the_code_as_upstream_does() {
        assert_eq!(
            exit_status(0).to_string(),
            r#"{"metadata":{},"status":"Success"}"#
        );
        let failed = exit_status(3);
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(
            failed["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: exit status 3"
        );
    }

    #[test]
    fn log_options_parse_the_kubelet_query() {
        let now: Timestamp = "2025-01-01T00:01:00Z".parse().unwrap();
        let q = Query::parse(Some(
            "follow=true&tailLines=5&sinceSeconds=60&timestamps=1&limitBytes=9&previous=t",
        ));
        let (options, previous) = log_options(&q, now).unwrap();
        assert!(previous);
        assert_eq!(
            options,
            LogOptions {
                follow: true,
                tail: Some(5),
                since: Some("2025-01-01T00:00:00Z".parse().unwrap()),
                timestamps: true,
                limit_bytes: Some(9),
            }
        );
        let both = Query::parse(Some("sinceSeconds=1&sinceTime=2025-01-01T00:00:00Z"));
        assert!(log_options(&both, now).is_err());
        assert!(log_options(&Query::parse(Some("tailLines=-1")), now).is_err());
        assert!(log_options(&Query::parse(Some("follow=yes")), now).is_err());
    }

    #[test]
    fn stream_options_need_a_stream() {
        let q = Query::parse(Some("command=sh&command=-c&command=echo+hi&stdout=true"));
        assert_eq!(stream_options(&q).unwrap().command, ["sh", "-c", "echo hi"]);
        assert!(stream_options(&Query::parse(Some("command=ls"))).is_err());
    }
}
