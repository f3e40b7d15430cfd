use serde_json::json;
use tokio::time::Instant;

use super::channel::{channel_frame, data_port, port_frame};
use super::spdy_session::{Kind, Pairs, StreamRequest, stream_request};
use super::*;

fn headers(pairs: &[(&str, &str)]) -> spdy::Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn stream_headers_are_checked_as_the_kubelet_checks_them() {
    let ok = |kind, port: u16, id: &str| {
        Ok(StreamRequest {
            kind,
            port,
            request_id: id.to_owned(),
        })
    };
    type Case<'a> = (&'a [(&'a str, &'a str)], Result<StreamRequest, String>);
    let cases: Vec<Case> = vec![
        (
            &[("streamtype", "data"), ("port", "8080"), ("requestid", "0")],
            ok(Kind::Data, 8080, "0"),
        ),
        (
            &[("streamtype", "error"), ("port", "1"), ("requestid", "7")],
            ok(Kind::Error, 1, "7"),
        ),
        (
            &[("streamtype", "data"), ("requestid", "0")],
            Err("\"port\" header is required".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "0"), ("requestid", "0")],
            Err("port \"0\" must be > 0".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "http"), ("requestid", "0")],
            Err("unable to parse \"http\" as a port: invalid syntax".to_owned()),
        ),
        (
            &[("streamtype", "stdin"), ("port", "80"), ("requestid", "0")],
            Err("invalid stream type \"stdin\"".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "80")],
            Err("\"requestid\" header is required".to_owned()),
        ),
    ];
    for (h, want) in cases {
        assert_eq!(stream_request(&headers(h)), want, "{h:?}");
    }
}

#[test]
fn streams_pair_by_request_id_in_either_order() {
    let now = Instant::now();
    let req = |kind, id: &str| StreamRequest {
        kind,
        port: 80,
        request_id: id.to_owned(),
    };
    let mut pairs = Pairs::default();
    assert_eq!(pairs.add(1, &req(Kind::Error, "0"), now), Ok(None));
    assert_eq!(pairs.add(5, &req(Kind::Data, "1"), now), Ok(None));
    assert_eq!(pairs.add(3, &req(Kind::Data, "0"), now), Ok(Some((3, 1, 80))));
    assert_eq!(pairs.add(7, &req(Kind::Error, "1"), now), Ok(Some((5, 7, 80))));
    assert_eq!(pairs.add(9, &req(Kind::Data, "2"), now), Ok(None));
    assert_eq!(
        pairs.add(11, &req(Kind::Data, "2"), now),
        Err("data stream already assigned".to_owned())
    );
    assert!(pairs.expire(now + Duration::from_secs(29)).is_empty());
    let expired = pairs.expire(now + Duration::from_secs(30));
    assert_eq!(expired.len(), 1);
    assert_eq!((expired[0].0.as_str(), expired[0].1.data), ("2", Some(9)));
}

#[test]
fn ports_parse_as_the_api_parses_them() {
    assert_eq!(parse_ports(&["80,443", "8080"]).unwrap(), vec![80, 443, 8080]);
    let cases: [(&[&str], &str); 4] = [
        (&[], "query parameter \"port\" is required"),
        (&["0"], "port \"0\" must be > 0"),
        (&["http"], "unable to parse \"http\" as a port: invalid syntax"),
        (&["70000"], "unable to parse \"70000\" as a port: invalid syntax"),
    ];
    for (values, message) in cases {
        let err = parse_ports(values).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, message), "{values:?}");
    }
    let many: Vec<String> = (1..=129).map(|p: u16| p.to_string()).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(parse_ports(&many).unwrap_err().code, 400);
}

#[test]
fn the_plain_spdy_upgrade_needs_the_port_forward_protocol() {
    let mut h = HeaderMap::new();
    assert_eq!(negotiate_stream_protocol(&h).unwrap_err().code, 400);
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("v4.channel.k8s.io"),
    );
    assert_eq!(negotiate_stream_protocol(&h).unwrap_err().code, 403);
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("portforward.k8s.io"),
    );
    assert!(negotiate_stream_protocol(&h).is_ok());
    let mut h = HeaderMap::new();
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("v2.portforward.k8s.io, portforward.k8s.io"),
    );
    assert!(negotiate_stream_protocol(&h).is_ok());
}

#[test]
fn only_running_pods_are_forwarded_to() {
    for (phase, ok) in [
        (Some("Running"), true),
        (Some("Pending"), false),
        (Some("Succeeded"), false),
        (None, false),
    ] {
        let pod = json!({"status": {"phase": phase}});
        assert_eq!(check_running(&pod).is_ok(), ok, "{phase:?}");
    }
    let err = check_running(&json!({"status": {"phase": "Pending"}})).unwrap_err();
    assert_eq!(
        err.message,
        "unable to forward port because pod is not running. Current status=Pending"
    );
}

#[test]
fn a_session_ends_when_its_pod_is_deleted_replaced_or_finished() {
    let pod = |uid: &str, phase: &str| json!({"metadata": {"uid": uid}, "status": {"phase": phase}});
    assert!(!pod_gone(Some(&pod("u1", "Running")), "u1"));
    assert!(pod_gone(None, "u1"));
    assert!(pod_gone(Some(&pod("u2", "Running")), "u1"));
    assert!(pod_gone(Some(&pod("u1", "Succeeded")), "u1"));
    assert!(pod_gone(Some(&pod("u1", "Failed")), "u1"));
}

#[test]
fn channel_frames_carry_the_port_little_endian_first() {
    assert_eq!(&port_frame(0, 8080)[..], &[0, 0x90, 0x1f]);
    assert_eq!(&port_frame(3, 443)[..], &[3, 0xbb, 0x01]);
    assert_eq!(&channel_frame(2, b"hi")[..], &[2, b'h', b'i']);
    // Client messages are for data channels of requested ports only.
    assert_eq!(data_port(0, 2), Some(0));
    assert_eq!(data_port(2, 2), Some(1));
    assert_eq!(data_port(1, 2), None);
    assert_eq!(data_port(4, 2), None);
}

/// A SPDY session against a registry holding pod `default/web`, whose node address accepts no
/// connections: every stream pair fails to reach the node.
mod session {
    use std::sync::Arc;

    use bytes::{Bytes, BytesMut};
    use serde_json::json;
    use spdy::{Codec, FLAG_FIN, Frame};
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::super::proxy::Target;
    use super::super::{Ctx, spdy_session};
    use crate::registry::{DeleteOptions, Registry, WriteOptions, resources};
    use crate::storage::{MemoryStore, Storage};
    use crate::watch::HubConfig;

    struct Client {
        codec: Codec,
        decoder: Codec,
        buf: BytesMut,
        tx: mpsc::Sender<Bytes>,
        rx: mpsc::Receiver<Bytes>,
    }

    impl Client {
        async fn send(&mut self, frame: Frame) {
            let mut out = BytesMut::new();
            self.codec.encode(&frame, &mut out).unwrap();
            self.tx.send(out.freeze()).await.unwrap();
        }

        async fn send_raw(&mut self, bytes: &[u8]) {
            self.tx.send(Bytes::copy_from_slice(bytes)).await.unwrap();
        }

        /// The next frame from the server; `None` once the session closed its output.
        async fn next(&mut self) -> Option<Frame> {
            loop {
                if let Some(f) = self.decoder.decode(&mut self.buf).unwrap() {
                    return Some(f);
                }
                let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), self.rx.recv())
                    .await
                    .expect("the session answers");
                self.buf.extend_from_slice(&chunk?);
            }
        }
    }

    fn syn(stream_id: u32, kind: &str, request: &str) -> Frame {
        Frame::SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![
                ("streamtype".into(), kind.into()),
                ("port".into(), "80".into()),
                ("requestid".into(), request.into()),
            ],
        }
    }

    async fn start() -> (Client, Registry) {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        start_with(port).await
    }

    /// A session whose pod's node listens on `port`.
    async fn start_with(port: u16) -> (Client, Registry) {
        let storage = Storage::open(Arc::new(MemoryStore::default()), HubConfig::default()).unwrap();
        let registry = Registry::new(storage);
        registry.bootstrap().await.unwrap();
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                         "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let created = registry
            .create(pods, Some("default"), pod, &WriteOptions::default())
            .await
            .unwrap();
        let ctx = Arc::new(Ctx {
            target: Target {
                namespace: "default".into(),
                pod: "web".into(),
                container: String::new(),
                authority: format!("127.0.0.1:{port}"),
                host: "127.0.0.1".into(),
                port,
            },
            uid: created.value()["metadata"]["uid"].as_str().unwrap().to_owned(),
            token: "t".into(),
            registry: registry.clone(),
            info: pods,
            cancel: CancellationToken::new(),
            link: Default::default(),
        });
        let (in_tx, in_rx) = mpsc::channel(16);
        let (out_tx, out_rx) = mpsc::channel(64);
        tokio::spawn(spdy_session::run(ctx, in_rx, out_tx));
        let client = Client {
            codec: Codec::new(),
            decoder: Codec::new(),
            buf: BytesMut::new(),
            tx: in_tx,
            rx: out_rx,
        };
        (client, registry)
    }

    #[tokio::test]
    async fn a_session_echoes_pings_rejects_bad_streams_and_reports_a_failed_pair() {
        let (mut c, _registry) = start().await;
        c.send(Frame::Ping { id: 1 }).await;
        assert_eq!(c.next().await, Some(Frame::Ping { id: 1 }));

        // No port header: the stream is refused, the session goes on.
        c.send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![("streamtype".into(), "data".into())],
        })
        .await;
        assert_eq!(
            c.next().await,
            Some(Frame::RstStream {
                stream_id: 1,
                status: spdy::rst::REFUSED_STREAM
            })
        );

        // kubectl's order: the error stream, then the data stream; each gets its SYN_REPLY.
        c.send(syn(3, "error", "0")).await;
        c.send(syn(5, "data", "0")).await;
        for id in [3, 5] {
            assert_eq!(
                c.next().await,
                Some(Frame::SynReply {
                    stream_id: id,
                    flags: 0,
                    headers: vec![]
                })
            );
        }
        // The node cannot be reached: the text on the error stream, its FIN, then the data stream reset.
        let Some(Frame::Data {
            stream_id: 3, data, ..
        }) = c.next().await
        else {
            panic!("no error text")
        };
        let text = String::from_utf8_lossy(&data);
        assert!(
            text.starts_with("error forwarding port 80 to pod default/web, uid "),
            "{text}"
        );
        assert!(matches!(
            c.next().await,
            Some(Frame::Data {
                stream_id: 3,
                flags: FLAG_FIN,
                ..
            })
        ));
        assert_eq!(
            c.next().await,
            Some(Frame::RstStream {
                stream_id: 5,
                status: spdy::rst::CANCEL
            })
        );

        // Still usable.
        c.send(Frame::Ping { id: 3 }).await;
        assert_eq!(c.next().await, Some(Frame::Ping { id: 3 }));

        // A frame of another SPDY version ends this session only, with GOAWAY PROTOCOL_ERROR.
        c.send_raw(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 5])
            .await;
        assert_eq!(
            c.next().await,
            Some(Frame::GoAway {
                last_good_stream_id: 5,
                status: spdy::goaway::PROTOCOL_ERROR
            })
        );
        assert_eq!(c.next().await, None);
    }

    #[tokio::test]
    async fn a_session_ends_when_its_pod_is_deleted() {
        let (mut c, registry) = start().await;
        c.send(Frame::Ping { id: 1 }).await;
        assert_eq!(c.next().await, Some(Frame::Ping { id: 1 }));
        let pods = resources::find("", "v1", "pods").unwrap();
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        registry.delete(pods, Some("default"), "web", &now).await.unwrap();
        assert_eq!(
            c.next().await,
            Some(Frame::GoAway {
                last_good_stream_id: 0,
                status: spdy::goaway::OK
            })
        );
        assert_eq!(c.next().await, None);
    }

    /// A node agent speaking the node's port-forward messages over TLS: port 80 answers each connection
    /// with "hello <id>" and closes it, any other port is refused. Counts the WebSockets it accepted.
    async fn fake_node() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;

        let dir = tempfile::tempdir().unwrap();
        let material = crate::tls::load_or_create(dir.path(), &[]).unwrap();
        let config = crate::tls::server_config(&material).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let _dir = dir;
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let tls = acceptor.accept(tcp).await.unwrap();
                    let mut ws = tokio_tungstenite::accept_async(tls).await.unwrap();
                    while let Some(Ok(Message::Binary(b))) = ws.next().await {
                        let id = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
                        if b[0] != super::super::link::OPEN {
                            continue;
                        }
                        let port = u16::from_be_bytes([b[5], b[6]]);
                        let replies = if port == 80 {
                            vec![
                                super::super::link::encode(
                                    super::super::link::DATA,
                                    id,
                                    format!("hello {id}").as_bytes(),
                                ),
                                super::super::link::encode(super::super::link::CLOSE, id, &[]),
                            ]
                        } else {
                            vec![super::super::link::encode(
                                super::super::link::ERROR,
                                id,
                                b"connect: connection refused",
                            )]
                        };
                        for r in replies {
                            ws.send(Message::Binary(r)).await.unwrap();
                        }
                    }
                });
            }
        });
        (port, accepted)
    }

    fn syn_port(stream_id: u32, kind: &str, request: &str, port: &str) -> Frame {
        Frame::SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![
                ("streamtype".into(), kind.into()),
                ("port".into(), port.into()),
                ("requestid".into(), request.into()),
            ],
        }
    }

    /// The frames of one stream pair after its SYN_REPLYs, until both of its streams ended.
    async fn pair_frames(c: &mut Client, error: u32, data: u32) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut open = 2;
        while open > 0 {
            let f = c.next().await.expect("a frame");
            match &f {
                Frame::SynReply { .. } => continue,
                Frame::Data { stream_id, flags, .. } if *flags & FLAG_FIN != 0 => {
                    assert!([error, data].contains(stream_id), "{f:?}");
                    open -= 1;
                }
                Frame::RstStream { stream_id, .. } => {
                    assert!([error, data].contains(stream_id), "{f:?}");
                    open -= 1;
                }
                _ => {}
            }
            frames.push(f);
        }
        frames
    }

    #[tokio::test]
    async fn every_connection_of_a_session_shares_one_websocket_to_the_node() {
        let (node, accepted) = fake_node().await;
        let (mut c, _registry) = start_with(node).await;
        for (i, (error, data)) in [(1, 3), (5, 7), (9, 11)].into_iter().enumerate() {
            let request = i.to_string();
            c.send(syn(error, "error", &request)).await;
            c.send(syn(data, "data", &request)).await;
            let frames = pair_frames(&mut c, error, data).await;
            let want = format!("hello {}", i + 1);
            assert!(
                frames.contains(&Frame::Data {
                    stream_id: data,
                    flags: 0,
                    data: Bytes::from(want.clone())
                }),
                "{want}: {frames:?}"
            );
        }
        // A refused port: the text on its error stream, and the session (and its link) go on.
        c.send(syn_port(13, "error", "r", "7")).await;
        c.send(syn_port(15, "data", "r", "7")).await;
        let frames = pair_frames(&mut c, 13, 15).await;
        let text = frames.iter().find_map(|f| match f {
            Frame::Data {
                stream_id: 13, data, ..
            } if !data.is_empty() => Some(String::from_utf8_lossy(data).into_owned()),
            _ => None,
        });
        let text = text.expect("an error text");
        assert!(
            text.starts_with("error forwarding port 7 to pod default/web, uid ")
                && text.ends_with(": connect: connection refused"),
            "{text}"
        );
        c.send(syn(17, "error", "x")).await;
        c.send(syn(19, "data", "x")).await;
        let frames = pair_frames(&mut c, 17, 19).await;
        assert!(
            frames
                .iter()
                .any(|f| matches!(f, Frame::Data { stream_id: 19, data, .. } if data == "hello 5")),
            "{frames:?}"
        );
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
