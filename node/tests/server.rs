//! The node endpoint (`node::server`) over real sockets: container logs over HTTP/1.1 (tail, previous,
//! follow ending with the container), exec over a real WebSocket client (channels, status, subprotocol,
//! Close 1000), the bearer token, and `serve` over TLS.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use node::runtime::fake::FakeExecResult;
use node::runtime::{
    ContainerConfig, ContainerRuntime, DEFAULT_PAUSE_IMAGE, FakeRuntime, PullPolicy, SandboxConfig,
};
use node::server::{self, ServerState};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "node-secret";

/// A fake node with pod `default/web`: container `app` runs (restart 1) after a previous instance died,
/// and container `side` runs with no previous instance.
struct Node {
    fake: FakeRuntime,
    app: String,
    old_app: String,
    addr: std::net::SocketAddr,
}

async fn container(fake: &FakeRuntime, sandbox: &str, name: &str, restart_count: u32) -> String {
    let config = ContainerConfig {
        pod_name: "web".into(),
        namespace: "default".into(),
        uid: "uid-1".into(),
        name: name.into(),
        restart_count,
        sandbox_id: sandbox.into(),
        image: "busybox:1.36".into(),
        ..ContainerConfig::default()
    };
    let id = fake.create_container(&config).await.unwrap();
    fake.start(&id).await.unwrap();
    id
}

fn state(fake: &FakeRuntime, ids: HashMap<(String, bool), String>) -> Arc<ServerState> {
    let lookup: server::ContainerLookup = Arc::new(move |ns, pod, container, previous| {
        if (ns, pod) != ("default", "web") {
            return None;
        }
        ids.get(&(container.to_owned(), previous)).cloned()
    });
    Arc::new(ServerState {
        runtime: Arc::new(fake.clone()),
        lookup,
        token: TOKEN.into(),
    })
}

impl Node {
    async fn start() -> Node {
        let fake = FakeRuntime::new();
        fake.ensure_image("busybox:1.36", PullPolicy::IfNotPresent)
            .await
            .unwrap();
        let sandbox = fake
            .create_sandbox(&SandboxConfig {
                pod_name: "web".into(),
                namespace: "default".into(),
                uid: "uid-1".into(),
                image: DEFAULT_PAUSE_IMAGE.into(),
                ..SandboxConfig::default()
            })
            .await
            .unwrap();
        fake.start(&sandbox).await.unwrap();
        let old_app = container(&fake, &sandbox, "app", 0).await;
        fake.set_logs(&old_app, "old 1\nold 2\n");
        fake.exit_container(&old_app, 1, false).unwrap();
        let app = container(&fake, &sandbox, "app", 1).await;
        fake.set_logs(&app, "a\nb\nc\n");
        let side = container(&fake, &sandbox, "side", 0).await;
        let ids = HashMap::from([
            (("app".to_owned(), false), app.clone()),
            (("app".to_owned(), true), old_app.clone()),
            (("side".to_owned(), false), side),
        ]);
        let router = server::router(state(&fake, ids));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Node {
            fake,
            app,
            old_app,
            addr,
        }
    }

    async fn get(&self, path: &str, token: Option<&str>) -> hyper::Response<hyper::body::Incoming> {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        get_over(tcp, path, token).await
    }
}

async fn get_over<S>(io: S, path: &str, token: Option<&str>) -> hyper::Response<hyper::body::Incoming>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "node");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap()
}

async fn body_text(resp: hyper::Response<hyper::body::Incoming>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn logs_honour_tail_and_previous_reads_the_dead_instance() {
    let node = Node::start().await;
    let resp = node
        .get("/containerLogs/default/web/app?tailLines=2", Some(TOKEN))
        .await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(body_text(resp).await, "b\nc\n");

    let resp = node
        .get("/containerLogs/default/web/app?previous=true", Some(TOKEN))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(body_text(resp).await, "old 1\nold 2\n");
    assert!(node.fake.calls().iter().any(|c| matches!(
        c,
        node::runtime::fake::Call::Logs { id, .. } if *id == node.old_app
    )));

    let resp = node
        .get("/containerLogs/default/web/side?previous=1", Some(TOKEN))
        .await;
    assert_eq!(resp.status(), 400);
    assert_eq!(
        body_text(resp).await,
        r#"previous terminated container "side" in pod "web" not found"#
    );

    let resp = node
        .get("/containerLogs/default/web/app?tailLines=x", Some(TOKEN))
        .await;
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn follow_streams_new_output_and_ends_when_the_container_stops() {
    let node = Node::start().await;
    let resp = node
        .get("/containerLogs/default/web/app?follow=true", Some(TOKEN))
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    let mut next_chunk = async || loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("a chunk within 5 s");
        match frame {
            Some(frame) => {
                if let Ok(data) = frame.unwrap().into_data() {
                    return Some(data);
                }
            }
            None => return None,
        }
    };
    seen.extend_from_slice(&next_chunk().await.unwrap());
    assert_eq!(seen, b"a\nb\nc\n");
    node.fake.append_logs(&node.app, b"d\n");
    seen.extend_from_slice(&next_chunk().await.unwrap());
    assert_eq!(seen, b"a\nb\nc\nd\n");
    node.fake.exit_container(&node.app, 0, false).unwrap();
    assert_eq!(next_chunk().await, None, "the stream ends with the container");
}

#[tokio::test]
async fn requests_without_the_token_are_unauthorized() {
    let node = Node::start().await;
    let resp = node.get("/containerLogs/default/web/app", None).await;
    assert_eq!(resp.status(), 401);
    let resp = node.get("/containerLogs/default/web/app", Some("wrong")).await;
    assert_eq!(resp.status(), 401);
    let err = connect_ws(
        node.addr,
        "/exec/default/web/app?command=ls&stdout=1",
        &["v5.channel.k8s.io"],
        None,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, tungstenite::Error::Http(r) if r.status() == 401),
        "{err}"
    );
}

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn connect_ws(
    addr: std::net::SocketAddr,
    path: &str,
    protocols: &[&str],
    token: Option<&str>,
) -> Result<(Ws, Option<String>), tungstenite::Error> {
    let mut req = format!("ws://{addr}{path}").into_client_request().unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", protocols.join(", ").parse().unwrap());
    if let Some(token) = token {
        req.headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, resp) = tokio_tungstenite::client_async(req, tcp).await?;
    let protocol = resp
        .headers()
        .get("sec-websocket-protocol")
        .map(|v| v.to_str().unwrap().to_owned());
    Ok((ws, protocol))
}

/// Everything the server sent, by channel, and the close code.
#[derive(Debug, Default)]
struct Session {
    channels: HashMap<u8, Vec<u8>>,
    close: Option<CloseCode>,
    text_frames: usize,
}

async fn read_session(ws: &mut Ws) -> Session {
    let mut session = Session::default();
    while let Some(msg) = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .expect("the server ends the session")
    {
        match msg.unwrap() {
            Message::Binary(b) => session
                .channels
                .entry(b[0])
                .or_default()
                .extend_from_slice(&b[1..]),
            Message::Text(_) => session.text_frames += 1,
            Message::Close(frame) => session.close = frame.map(|f| f.code),
            _ => {}
        }
    }
    session
}

fn status(session: &Session) -> Value {
    serde_json::from_slice(&session.channels[&3]).unwrap()
}

#[tokio::test]
async fn exec_sends_stdout_and_stderr_then_success_and_close_1000_over_v5() {
    let node = Node::start().await;
    node.fake.set_exec_handler(|_, cmd| FakeExecResult {
        stdout: format!("ran {}\n", cmd.join(" ")).into_bytes(),
        stderr: b"warning\n".to_vec(),
        exit_code: 0,
    });
    let (mut ws, protocol) = connect_ws(
        node.addr,
        "/exec/default/web/app?command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&stderr=true",
        &["v5.channel.k8s.io", "v4.channel.k8s.io"],
        Some(TOKEN),
    )
    .await
    .unwrap();
    assert_eq!(protocol.as_deref(), Some("v5.channel.k8s.io"));
    // The Python client writes stdin and resize as text frames; both must be accepted.
    ws.send(Message::text("\u{0}input")).await.unwrap();
    ws.send(Message::binary(b"\x04{\"Width\":80,\"Height\":24}\n".to_vec()))
        .await
        .unwrap();
    let session = read_session(&mut ws).await;
    assert_eq!(session.text_frames, 0, "the server sends binary frames only");
    assert_eq!(session.channels[&1], b"ran sh -c echo hi\n");
    assert_eq!(session.channels[&2], b"warning\n");
    assert_eq!(status(&session), json!({"metadata": {}, "status": "Success"}));
    assert_eq!(session.close, Some(CloseCode::Normal));
    assert!(node.fake.calls().iter().any(|c| matches!(
        c,
        node::runtime::fake::Call::Exec { id, cmd } if *id == node.app && cmd == &["sh", "-c", "echo hi"]
    )));
}

#[tokio::test]
async fn a_non_zero_exit_is_reported_as_non_zero_exit_code_over_v4() {
    let node = Node::start().await;
    node.fake.set_exec_handler(|_, _| FakeExecResult {
        stdout: b"out".to_vec(),
        stderr: b"err".to_vec(),
        exit_code: 3,
    });
    let (mut ws, protocol) = connect_ws(
        node.addr,
        "/exec/default/web/app?command=false&stdout=1",
        &["v4.channel.k8s.io"],
        Some(TOKEN),
    )
    .await
    .unwrap();
    assert_eq!(protocol.as_deref(), Some("v4.channel.k8s.io"));
    let session = read_session(&mut ws).await;
    assert_eq!(session.channels[&1], b"out");
    assert!(!session.channels.contains_key(&2), "stderr was not asked for");
    let st = status(&session);
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "NonZeroExitCode");
    assert_eq!(
        st["message"],
        "command terminated with non-zero exit code: exit status 3"
    );
    assert_eq!(
        st["details"]["causes"][0],
        json!({"reason": "ExitCode", "message": "3"})
    );
    assert_eq!(session.close, Some(CloseCode::Normal));
}

#[tokio::test]
async fn exec_and_attach_errors_come_before_the_upgrade() {
    let node = Node::start().await;
    let err = connect_ws(
        node.addr,
        "/exec/default/web/nope?command=ls&stdout=1",
        &["v5.channel.k8s.io"],
        Some(TOKEN),
    )
    .await
    .unwrap_err();
    match err {
        tungstenite::Error::Http(resp) => {
            assert_eq!(resp.status(), 404);
            let body = String::from_utf8(resp.into_body().unwrap_or_default()).unwrap();
            assert_eq!(body, r#"container not found ("nope")"#);
        }
        other => panic!("{other}"),
    }
    let resp = node.get("/exec/default/web/app?stdout=1", Some(TOKEN)).await;
    assert_eq!(resp.status(), 400, "no command");
    // A plain GET (no WebSocket upgrade) of attach is refused before anything is attached.
    let resp = node.get("/attach/default/web/app?stdout=1", Some(TOKEN)).await;
    assert_eq!(resp.status(), 400);
    assert!(body_text(resp).await.contains("unable to upgrade"));
    let resp = node.get("/attach/default/web/nope?stdout=1", Some(TOKEN)).await;
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn exec_in_a_stopped_container_reports_a_failure_status() {
    let node = Node::start().await;
    node.fake.exit_container(&node.app, 0, false).unwrap();
    let (mut ws, _) = connect_ws(
        node.addr,
        "/exec/default/web/app?command=ls&stdout=1",
        &["v5.channel.k8s.io"],
        Some(TOKEN),
    )
    .await
    .unwrap();
    let session = read_session(&mut ws).await;
    let st = status(&session);
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "InternalError");
    assert!(st["message"].as_str().unwrap().contains("is not running"), "{st}");
    assert_eq!(session.close, Some(CloseCode::Normal));
}

#[tokio::test]
async fn serve_speaks_tls_and_stops_on_cancel() {
    let node = Node::start().await;
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let ids = HashMap::from([(("app".to_owned(), false), node.app.clone())]);
    let task = tokio::spawn(server::serve(
        listener,
        Arc::new(server_config),
        state(&node.fake, ids),
        cancel.clone(),
    ));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let resp = get_over(tls, "/containerLogs/default/web/app?tailLines=1", Some(TOKEN)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(body_text(resp).await, "c\n");

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("serve returns after cancel")
        .unwrap()
        .unwrap();
}
