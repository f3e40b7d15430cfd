//! The DNS server over real sockets: every record kind over UDP and TCP, NXDOMAIN and NODATA with the zone's
//! SOA in the authority section, forwarding of outside names to an upstream, SERVFAIL before the watches
//! have synced.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use dns::records::{Objects, Zone};
use dns::server::{Forwarder, Handler, bind, serve};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

fn objects() -> Objects {
    let svc = |v: serde_json::Value| Arc::new(serde_json::from_value(v).unwrap());
    Objects {
        services: vec![
            svc(serde_json::json!({"metadata": {"name": "web", "namespace": "ns"},
                "spec": {"clusterIP": "10.96.1.5", "ports": [{"name": "http", "port": 80}]}})),
            svc(serde_json::json!({"metadata": {"name": "web", "namespace": "sts"},
                "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}})),
            svc(serde_json::json!({"metadata": {"name": "ext", "namespace": "ns"},
                "spec": {"type": "ExternalName", "externalName": "example.com"}})),
            svc(serde_json::json!({"metadata": {"name": "alias", "namespace": "ns"},
                "spec": {"type": "ExternalName", "externalName": "web.ns.svc.cluster.local"}})),
        ],
        slices: vec![Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web-x", "namespace": "sts", "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["10.0.0.7"], "hostname": "web-0", "conditions": {"ready": true}}]
            }))
            .unwrap(),
        )],
    }
}

/// The upstream's answer to a query: 192.0.2.1 for any A question.
fn upstream_reply(raw: &[u8]) -> Vec<u8> {
    let query = Message::from_vec(raw).unwrap();
    let mut reply = Message::response(query.metadata.id, OpCode::Query);
    reply.add_queries(query.queries.clone());
    let name = query.queries[0].name().clone();
    reply.add_answer(Record::from_rdata(name, 60, RData::A(A::new(192, 0, 2, 1))));
    reply.to_vec().unwrap()
}

/// An upstream resolver on UDP and TCP (one port) that answers every A question with 192.0.2.1.
async fn fake_upstream() -> SocketAddr {
    let (socket, listener) = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let _ = socket.send_to(&upstream_reply(&buf[..n]), from).await;
        }
    });
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut len = [0u8; 2];
            if stream.read_exact(&mut len).await.is_err() {
                continue;
            }
            let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
            if stream.read_exact(&mut q).await.is_err() {
                continue;
            }
            let reply = upstream_reply(&q);
            let _ = stream.write_all(&(reply.len() as u16).to_be_bytes()).await;
            let _ = stream.write_all(&reply).await;
        }
    });
    addr
}

async fn start(ready: bool) -> SocketAddr {
    let upstream = fake_upstream().await;
    let (udp, tcp) = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = udp.local_addr().unwrap();
    let handler = Handler::new(
        Arc::new(objects()),
        Zone::new("cluster.local", 7),
        Forwarder::new(vec![upstream]),
        Arc::new(AtomicBool::new(ready)),
    );
    let server = serve(udp, tcp, handler);
    // The server runs as long as the test: its tasks are owned by `server`.
    std::mem::forget(server);
    addr
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(4242, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_str(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

async fn ask_udp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&query(name, qtype), server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(std::time::Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

async fn ask_tcp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut stream = TcpStream::connect(server).await.unwrap();
    let q = query(name, qtype);
    stream.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
    stream.write_all(&q).await.unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await.unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf).await.unwrap();
    Message::from_vec(&buf).unwrap()
}

fn answers(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .map(|r| format!("{} {}", r.record_type(), r.data))
        .collect()
}

#[tokio::test]
async fn every_record_kind_over_udp_and_tcp() {
    let server = start(true).await;
    let cases: &[(&str, RecordType, &[&str])] = &[
        ("web.ns.svc.cluster.local.", RecordType::A, &["A 10.96.1.5"]),
        (
            "_http._tcp.web.ns.svc.cluster.local.",
            RecordType::SRV,
            &["SRV 0 100 80 web.ns.svc.cluster.local."],
        ),
        ("web.sts.svc.cluster.local.", RecordType::A, &["A 10.0.0.7"]),
        ("web-0.web.sts.svc.cluster.local.", RecordType::A, &["A 10.0.0.7"]),
        ("10-0-0-9.ns.pod.cluster.local.", RecordType::A, &["A 10.0.0.9"]),
        // ExternalName: the CNAME and the target's records, from upstream or from the zone.
        (
            "ext.ns.svc.cluster.local.",
            RecordType::A,
            &["CNAME example.com.", "A 192.0.2.1"],
        ),
        (
            "alias.ns.svc.cluster.local.",
            RecordType::A,
            &["CNAME web.ns.svc.cluster.local.", "A 10.96.1.5"],
        ),
        (
            "ext.ns.svc.cluster.local.",
            RecordType::CNAME,
            &["CNAME example.com."],
        ),
        (
            "5.1.96.10.in-addr.arpa.",
            RecordType::PTR,
            &["PTR web.ns.svc.cluster.local."],
        ),
    ];
    for (name, qtype, want) in cases {
        for m in [
            ask_udp(server, name, *qtype).await,
            ask_tcp(server, name, *qtype).await,
        ] {
            assert_eq!(m.metadata.id, 4242);
            assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
            assert!(m.metadata.authoritative, "{name}");
            assert_eq!(answers(&m), *want, "{name} {qtype}");
        }
    }
    // The SRV answer carries its target's address.
    let srv = ask_udp(server, "_http._tcp.web.ns.svc.cluster.local.", RecordType::SRV).await;
    assert_eq!(srv.additionals.len(), 1);
    assert_eq!(srv.additionals[0].data.to_string(), "10.96.1.5");
}

#[tokio::test]
async fn unknown_cluster_names_are_nxdomain_with_the_soa() {
    let server = start(true).await;
    for m in [
        ask_udp(server, "nope.ns.svc.cluster.local.", RecordType::A).await,
        ask_tcp(server, "nope.ns.svc.cluster.local.", RecordType::A).await,
    ] {
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        assert!(m.answers.is_empty());
        assert_eq!(m.authorities.len(), 1);
        assert_eq!(m.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(m.authorities[0].name.to_string(), "cluster.local.");
    }
    let nodata = ask_udp(server, "web.ns.svc.cluster.local.", RecordType::AAAA).await;
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty());
    assert_eq!(nodata.authorities[0].record_type(), RecordType::SOA);
}

#[tokio::test]
async fn outside_names_are_forwarded_upstream() {
    let server = start(true).await;
    for m in [
        ask_udp(server, "example.org.", RecordType::A).await,
        ask_tcp(server, "example.org.", RecordType::A).await,
        ask_udp(server, "9.9.9.9.in-addr.arpa.", RecordType::A).await,
    ] {
        assert_eq!(m.metadata.id, 4242);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(!m.metadata.authoritative);
        assert_eq!(answers(&m), ["A 192.0.2.1"]);
    }
}

#[tokio::test]
async fn cluster_names_are_servfail_until_the_watches_sync() {
    let server = start(false).await;
    let m = ask_udp(server, "web.ns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    let m = ask_udp(server, "example.org.", RecordType::A).await;
    assert_eq!(answers(&m), ["A 192.0.2.1"]);
}
