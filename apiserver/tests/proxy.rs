//! `pods/log` and `pods/exec` through the API server's node proxy, with the real `kube` client: a fake
//! node endpoint (an axum router over TLS with a self-signed certificate, as node agents serve) stands in
//! for the node agent, and a Node object points at it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::TestServer;
use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{AttachParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The node endpoint's fake: logs echo what was asked, exec echoes the command and stdin.
fn fake_node(token: String) -> Router {
    Router::new()
        .route("/containerLogs/{ns}/{pod}/{container}", get(logs))
        .route("/exec/{ns}/{pod}/{container}", get(exec))
        .with_state(Arc::new(token))
}

fn authorized(headers: &HeaderMap, token: &str) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {token}"))
}

async fn logs(
    State(token): State<Arc<String>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers, &token) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let query = query.unwrap_or_default();
    if query.contains("previous=true") {
        let message = format!("previous terminated container {container:?} in pod {pod:?} not found");
        return (StatusCode::BAD_REQUEST, message).into_response();
    }
    let first = format!("{ns}/{pod}/{container}?{query}\n");
    if query.contains("follow=true") {
        let chunks = futures_util::stream::iter([first, "line 2\n".to_owned(), "line 3\n".to_owned()]).then(
            |chunk| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, std::io::Error>(chunk)
            },
        );
        return Body::from_stream(chunks).into_response();
    }
    first.into_response()
}

async fn exec(
    State(token): State<Arc<String>>,
    Path((_, _, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !authorized(&headers, &token) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    if container == "gone" {
        return (
            StatusCode::NOT_FOUND,
            format!("container not found ({container:?})"),
        )
            .into_response();
    }
    let command: Vec<String> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.into_owned())
        .collect();
    ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |socket| run(socket, command))
}

fn frame(channel: u8, data: &[u8]) -> Message {
    Message::Binary([&[channel][..], data].concat().into())
}

async fn run(mut socket: WebSocket, command: Vec<String>) {
    let exit = match command.first().map(String::as_str) {
        Some("cat") => {
            // Echo stdin to stdout until v5's close of stdin.
            while let Some(Ok(message)) = socket.next().await {
                let data = match message {
                    Message::Binary(b) => b.to_vec(),
                    Message::Text(t) => t.as_str().as_bytes().to_vec(),
                    _ => continue,
                };
                match data.as_slice() {
                    [0, rest @ ..] => socket.send(frame(1, rest)).await.unwrap(),
                    [255, 0] => break,
                    _ => {}
                }
            }
            0
        }
        Some("fail") => {
            socket.send(frame(2, b"failing\n")).await.unwrap();
            3
        }
        _ => {
            socket
                .send(frame(1, format!("ran {}\n", command.join(" ")).as_bytes()))
                .await
                .unwrap();
            socket.send(frame(2, b"to stderr\n")).await.unwrap();
            0
        }
    };
    let status = if exit == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
               "message": format!("command terminated with non-zero exit code: exit status {exit}"),
               "details": {"causes": [{"reason": "ExitCode", "message": exit.to_string()}]}})
    };
    socket
        .send(frame(3, status.to_string().as_bytes()))
        .await
        .unwrap();
    let close = CloseFrame {
        code: 1000,
        reason: "".into(),
    };
    let _ = socket.send(Message::Close(Some(close))).await;
    while let Some(Ok(_)) = socket.next().await {}
}

/// Serves the fake node over TLS with a fresh self-signed certificate; returns its port.
fn start_fake_node(token: String) -> u16 {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config));
    let server = axum_server::from_tcp_rustls(listener, tls).unwrap();
    tokio::spawn(server.serve(fake_node(token).into_make_service()));
    port
}

/// An API server with node `n1` at the fake node; pods `web` (containers app and side), `solo` and `ghost`
/// (whose container the node does not know) bound to it, and pod `pending` unbound.
async fn cluster() -> (TestServer, Api<Pod>) {
    let server = TestServer::start().await;
    let client = server.client();
    let port = start_fake_node(server.token());
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    let status = json!({"status": {
        "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    for (name, containers, node) in [
        ("web", vec!["app", "side"], Some("n1")),
        ("solo", vec!["only"], Some("n1")),
        ("pending", vec!["only"], None),
        ("ghost", vec!["gone"], Some("n1")),
    ] {
        let containers: Vec<_> = containers
            .iter()
            .map(|c| json!({"name": c, "image": "busybox"}))
            .collect();
        let pod = json!({"metadata": {"name": name}, "spec": {"containers": containers, "nodeName": node}});
        pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap())
            .await
            .unwrap();
    }
    (server, pods)
}

fn bad_request(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn logs_are_proxied_to_the_node_with_the_container_and_options() {
    let (_server, pods) = cluster().await;
    let lp = LogParams {
        container: Some("app".into()),
        tail_lines: Some(2),
        timestamps: true,
        ..LogParams::default()
    };
    let text = pods.logs("web", &lp).await.unwrap();
    assert_eq!(text, "default/web/app?timestamps=true&tailLines=2\n");
    // A single-container pod needs no container name.
    let text = pods.logs("solo", &LogParams::default()).await.unwrap();
    assert_eq!(text, "default/solo/only?\n");
}

#[tokio::test]
async fn log_stream_follows_until_the_node_ends_the_body() {
    let (_server, pods) = cluster().await;
    let lp = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let lines: Vec<String> = pods
        .log_stream("solo", &lp)
        .await
        .unwrap()
        .lines()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(lines, ["default/solo/only?follow=true", "line 2", "line 3"]);
}

#[tokio::test]
async fn log_errors_name_the_container_problem() {
    let (_server, pods) = cluster().await;
    let err = pods.logs("web", &LogParams::default()).await.unwrap_err();
    assert_eq!(
        bad_request(err),
        (
            400,
            "a container name must be specified for pod web, choose one of: [app side]".to_owned()
        )
    );
    let lp = LogParams {
        container: Some("c".into()),
        ..LogParams::default()
    };
    let err = pods.logs("web", &lp).await.unwrap_err();
    assert_eq!(
        bad_request(err),
        (400, "container c is not valid for pod web".to_owned())
    );
    let err = pods.logs("pending", &LogParams::default()).await.unwrap_err();
    assert_eq!(
        bad_request(err),
        (400, "pod pending does not have a host assigned".to_owned())
    );
    let err = pods.logs("nope", &LogParams::default()).await.unwrap_err();
    assert_eq!(bad_request(err).0, 404);
    // What the node refuses comes back with the node's code and text.
    let lp = LogParams {
        previous: true,
        ..LogParams::default()
    };
    let err = pods.logs("solo", &lp).await.unwrap_err();
    assert_eq!(
        bad_request(err),
        (
            400,
            r#"previous terminated container "only" in pod "solo" not found"#.to_owned()
        )
    );
}

#[tokio::test]
async fn exec_streams_output_and_status_through_the_proxy() {
    let (_server, pods) = cluster().await;
    let ap = AttachParams::default().container("app");
    let mut process = pods.exec("web", ["echo", "hi"], &ap).await.unwrap();
    let mut stdout = process.stdout().unwrap();
    let mut stderr = process.stderr().unwrap();
    let status = process.take_status().unwrap();
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.unwrap();
    let mut err = String::new();
    stderr.read_to_string(&mut err).await.unwrap();
    assert_eq!(out, "ran echo hi\n");
    assert_eq!(err, "to stderr\n");
    assert_eq!(status.await.unwrap().status.as_deref(), Some("Success"));
    process.join().await.unwrap();
}

#[tokio::test]
async fn exec_reports_a_non_zero_exit_code() {
    let (_server, pods) = cluster().await;
    let mut process = pods
        .exec("solo", ["fail"], &AttachParams::default())
        .await
        .unwrap();
    let status = process.take_status().unwrap().await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Failure"));
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let causes = status.details.unwrap().causes.unwrap();
    assert_eq!(causes[0].message.as_deref(), Some("3"));
}

#[tokio::test]
async fn exec_stdin_reaches_the_node_and_its_close_ends_the_command() {
    let (_server, pods) = cluster().await;
    let ap = AttachParams::default().stdin(true).stderr(false);
    let mut process = pods.exec("solo", ["cat"], &ap).await.unwrap();
    let mut stdin = process.stdin().unwrap();
    let mut stdout = process.stdout().unwrap();
    let status = process.take_status().unwrap();
    stdin.write_all(b"echo me\n").await.unwrap();
    let mut buf = [0u8; 8];
    stdout.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"echo me\n");
    // kube's stdin is a simplex pipe: shutting it down (not dropping it) sends v5's close of stdin.
    stdin.shutdown().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), status)
        .await
        .expect("closing stdin ends cat");
    assert_eq!(status.unwrap().status.as_deref(), Some("Success"));
}

#[tokio::test]
async fn exec_errors_come_back_before_the_upgrade() {
    let (_server, pods) = cluster().await;
    // Several containers and none named: refused before any node is asked.
    assert!(pods.exec("web", ["ls"], &AttachParams::default()).await.is_err());
    assert!(
        pods.exec("pending", ["ls"], &AttachParams::default())
            .await
            .is_err()
    );
}

/// Raw upgrades, to see the echoed subprotocol and the Status bodies kube's exec error hides.
#[tokio::test]
async fn the_upgrade_echoes_the_preferred_protocol_and_errors_are_status_objects() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let (server, _pods) = cluster().await;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let ca = common::rustls_pki_der(&server.server.as_ref().unwrap().tls.ca_pem);
    roots.add(ca.into()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connect = async |path: &str, protocols: &str| {
        let url = format!("wss://127.0.0.1:{}{path}", server.port);
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("sec-websocket-protocol", protocols.parse().unwrap());
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", server.token()).parse().unwrap(),
        );
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
            .await
            .unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config.clone()))
            .connect("127.0.0.1".try_into().unwrap(), tcp)
            .await
            .unwrap();
        tokio_tungstenite::client_async(req, tls).await
    };
    let (mut ws, resp) = connect(
        "/api/v1/namespaces/default/pods/solo/exec?command=date&stdout=true",
        "v4.channel.k8s.io",
    )
    .await
    .unwrap();
    assert_eq!(resp.headers()["sec-websocket-protocol"], "v4.channel.k8s.io");
    let mut close = None;
    while let Some(Ok(message)) = ws.next().await {
        if let tokio_tungstenite::tungstenite::Message::Close(frame) = message {
            close = frame.map(|f| u16::from(f.code));
        }
    }
    assert_eq!(close, Some(1000), "the node's Close 1000 is passed on");

    // The node's refusal comes back as a Status with the node's code and text.
    let err = connect(
        "/api/v1/namespaces/default/pods/ghost/exec?command=ls&stdout=true",
        "v5.channel.k8s.io",
    )
    .await
    .unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(resp) = err else {
        panic!("{err}")
    };
    assert_eq!(resp.status(), 404);
    let status: serde_json::Value = serde_json::from_slice(resp.body().as_deref().unwrap()).unwrap();
    assert_eq!(status["message"], r#"container not found ("gone")"#);

    let err = connect(
        "/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true",
        "v5.channel.k8s.io",
    )
    .await
    .unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(resp) = err else {
        panic!("{err}")
    };
    assert_eq!(resp.status(), 400);
    let status: serde_json::Value = serde_json::from_slice(resp.body().as_deref().unwrap()).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(
        status["message"],
        "a container name must be specified for pod web, choose one of: [app side]"
    );
}

#[tokio::test]
async fn discovery_lists_the_proxied_subresources() {
    let (server, _pods) = cluster().await;
    let resources = server.client().list_core_api_resources("v1").await.unwrap();
    let find = |name: &str| {
        resources
            .resources
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
    };
    assert_eq!(find("pods/log").kind, "Pod");
    assert_eq!(find("pods/log").verbs, ["get"]);
    assert_eq!(find("pods/exec").kind, "PodExecOptions");
    assert_eq!(find("pods/exec").verbs, ["create", "get"]);
    assert_eq!(find("pods/attach").kind, "PodAttachOptions");
}
