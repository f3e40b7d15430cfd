//! The real gateway binary (`pause/gateway.c`, the one embedded in the node agent) on loopback, driven over its
//! control port with the sets [`super::gateway_set`] writes: round robin in the endpoints' order, ClientIP
//! affinity, half-close both ways, a refused backend resetting the client, a port without endpoints
//! refused, endpoints replaced by a new set, and the set kept across a lost control connection.
//! Runs without NET_ADMIN: SERVICE_CIDR `-` adds no route, and Service addresses are 127.0.0.1 ports.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::gateway_set;
use super::table::{Protocol, ServicePort, ServicePortName};
use crate::network::GATEWAY_BINARY;

const DEADLINE: Duration = Duration::from_secs(10);

struct Gateway {
    child: Child,
    control: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Gateway {
    fn start() -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway");
        std::fs::write(&path, GATEWAY_BINARY).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let port = free_port();
        let child = Command::new(&path)
            .args(["-", "127.0.0.1", &port.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Gateway {
            child,
            control: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            _dir: dir,
        }
    }

    /// A control connection (retried until the gateway listens).
    fn control(&self) -> BufReader<TcpStream> {
        let start = Instant::now();
        loop {
            match TcpStream::connect(self.control) {
                Ok(c) => return BufReader::new(c),
                Err(e) if start.elapsed() > DEADLINE => panic!("gateway control: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// Sends `set` and waits for the gateway's `ok`.
fn send(control: &mut BufReader<TcpStream>, set: &str) {
    control.get_mut().write_all(set.as_bytes()).unwrap();
    let mut line = String::new();
    control.read_line(&mut line).unwrap();
    assert_eq!(line, "ok\n");
}

/// A backend answering each connection, after the client's EOF, with `name:` and what it read.
fn backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                if conn.read_to_end(&mut got).is_ok() {
                    let _ = conn.write_all(format!("{name}:").as_bytes());
                    let _ = conn.write_all(&got);
                }
            });
        }
    });
    addr
}

/// One request through the Service address: what came back, or the error kind.
fn request(service: SocketAddr, body: &[u8]) -> Result<String, ErrorKind> {
    let mut conn = TcpStream::connect_timeout(&service, DEADLINE).map_err(|e| e.kind())?;
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    conn.write_all(body).map_err(|e| e.kind())?;
    conn.shutdown(Shutdown::Write).map_err(|e| e.kind())?;
    let mut got = Vec::new();
    conn.read_to_end(&mut got).map_err(|e| e.kind())?;
    Ok(String::from_utf8_lossy(&got).into_owned())
}

fn table(service_port: u16, endpoints: &[SocketAddr], affinity: Option<u64>) -> Vec<ServicePort> {
    vec![ServicePort {
        id: ServicePortName {
            namespace: "ns".into(),
            name: "web".into(),
            port: String::new(),
            protocol: Protocol::Tcp,
        },
        cluster_ip: Ipv4Addr::LOCALHOST,
        port: service_port,
        node_port: None,
        load_balancer: false,
        affinity: affinity.map(Duration::from_secs),
        endpoints: endpoints.to_vec(),
    }]
}

fn names(service: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let answer = request(service, b"x").unwrap();
            answer.trim_end_matches(":x").to_owned()
        })
        .collect()
}

#[test]
fn the_gateway_balances_tcp_itself_as_the_balancer_does() {
    let gw = Gateway::start();
    let mut control = gw.control();
    let (a, b, c) = (backend("a"), backend("b"), backend("c"));
    let port = free_port();
    let service = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    control.get_mut().write_all(b"A 127.0.0.1 9\n").unwrap();

    // Round robin in the order sent; the request and the answer both cross the half-close.
    send(&mut control, &gateway_set(&table(port, &[a, b, c], None)));
    assert_eq!(request(service, b"hello").unwrap(), "a:hello");
    assert_eq!(names(service, 5), ["b", "c", "a", "b", "c"]);

    // Larger than a relay buffer, both ways.
    let big = vec![b'z'; 200_000];
    let answer = request(service, &big).unwrap();
    assert_eq!(answer.len(), 2 + big.len());

    // ClientIP affinity: one client, one endpoint.
    send(&mut control, &gateway_set(&table(port, &[a, b, c], Some(60))));
    let first = names(service, 1).remove(0);
    assert_eq!(names(service, 4), vec![first.clone(); 4]);

    // The client's endpoint leaves: it moves to another and sticks there; the new one gets traffic.
    let d = backend("d");
    let rest: Vec<SocketAddr> = [(a, "a"), (b, "b"), (c, "c")]
        .into_iter()
        .filter(|(_, n)| *n != first)
        .map(|(e, _)| e)
        .chain([d])
        .collect();
    send(&mut control, &gateway_set(&table(port, &rest, Some(60))));
    let second = names(service, 1).remove(0);
    assert_ne!(second, first);
    assert_eq!(names(service, 3), vec![second; 3]);
    send(&mut control, &gateway_set(&table(port, &rest, None)));
    let seen = names(service, 3);
    assert!(seen.contains(&"d".to_owned()), "{seen:?}");
    assert!(!seen.contains(&first), "{seen:?}");

    // A refused backend resets the client.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = closed.local_addr().unwrap();
    drop(closed);
    send(&mut control, &gateway_set(&table(port, &[refused], None)));
    let got = request(service, b"x");
    assert!(
        matches!(got, Err(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)),
        "{got:?}"
    );

    // No ready endpoint: the port is not listened on.
    send(&mut control, &gateway_set(&table(port, &[], None)));
    assert_eq!(request(service, b"x"), Err(ErrorKind::ConnectionRefused));

    // The set survives a lost control connection; a new connection's set replaces it.
    send(&mut control, &gateway_set(&table(port, &[a], None)));
    drop(control);
    assert_eq!(names(service, 2), ["a", "a"]);
    let mut control = gw.control();
    send(&mut control, &gateway_set(&table(port, &[b], None)));
    assert_eq!(names(service, 2), ["b", "b"]);

    // An unfinished set (no `.`) changes nothing.
    control
        .get_mut()
        .write_all(
            gateway_set(&table(port, &[c], None))
                .trim_end_matches(".\n")
                .as_bytes(),
        )
        .unwrap();
    drop(control);
    assert_eq!(names(service, 2), ["b", "b"]);
}
