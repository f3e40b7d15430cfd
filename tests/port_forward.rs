//! `kubectl port-forward` and the client libraries' port-forward against `kubeling up` on real Docker,
//! with the testbox image as the server (`serve` for HTTP on 8080, `tcp` for an echo on 9000). One
//! cluster serves every scenario; local ports are always chosen by kubectl (`:REMOTE`) or the OS, so
//! the file runs beside others.

mod common;

#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Cluster, KUBECTL, eventually};

const TIMEOUT: Duration = Duration::from_secs(90);

/// A running `kubectl port-forward`, its `Forwarding from ADDR:LOCAL -> REMOTE` lines, and its stderr.
struct Forward {
    child: Child,
    /// `(address, local port, remote port)`.
    ports: Vec<(String, u16, u16)>,
    stderr: mpsc::Receiver<String>,
}

impl Forward {
    /// Starts kubectl with `args` after `port-forward` and waits until it listens on `listeners`
    /// addresses.
    fn start(c: &Cluster, args: &[&str], env: &[(&str, &str)], listeners: usize) -> Forward {
        let mut child = Command::new(KUBECTL)
            .arg("port-forward")
            .args(args)
            .env("KUBECONFIG", &c.kubeconfig)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kubectl port-forward");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (etx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = etx.send(line);
            }
        });
        let mut ports = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while ports.len() < listeners {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "kubectl port-forward {args:?} never listened: {:?}",
                    drain(&stderr)
                )
            });
            // "Forwarding from 127.0.0.1:40123 -> 8080" or "Forwarding from [::1]:40123 -> 8080"
            if let Some(rest) = line.strip_prefix("Forwarding from ") {
                let (from, remote) = rest.split_once(" -> ").unwrap();
                let (addr, local) = from.rsplit_once(':').unwrap();
                ports.push((
                    addr.trim_matches(['[', ']']).to_owned(),
                    local.parse().unwrap(),
                    remote.trim().parse().unwrap(),
                ));
            }
        }
        // "Handling connection for …" lines keep coming; nobody needs them.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        Forward { child, ports, stderr }
    }

    /// The local port forwarding to `remote` on 127.0.0.1 (or the only address given).
    fn local(&self, remote: u16) -> (String, u16) {
        self.ports
            .iter()
            .find(|(a, _, r)| *r == remote && !a.contains(':'))
            .map(|(a, l, _)| (a.clone(), *l))
            .unwrap_or_else(|| panic!("no forward to {remote} in {:?}", self.ports))
    }

    /// Waits for kubectl to exit; returns its success and stderr.
    fn wait_exit(&mut self, timeout: Duration) -> (bool, String) {
        let status = eventually(timeout, "kubectl port-forward to exit", || {
            self.child.try_wait().unwrap()
        });
        // The stderr reader ends with the process.
        std::thread::sleep(Duration::from_millis(100));
        (status.success(), drain(&self.stderr))
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn drain(rx: &mpsc::Receiver<String>) -> String {
    rx.try_iter().collect::<Vec<_>>().join("\n")
}

/// One HTTP/1.1 GET with `Connection: close`: the status code and body, or the I/O error.
fn http_get(addr: &str, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect((addr, port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {text:?}")))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head:?}")))?;
    Ok((code, body.to_owned()))
}

fn hostname(addr: &str, port: u16) -> String {
    let (code, body) = http_get(addr, port, "/hostname").expect("GET /hostname through the forward");
    assert_eq!(code, 200, "{body}");
    body.trim().to_owned()
}

/// A pod serving HTTP on 8080 and an echo on 9000, Ready only once both listen.
fn web_pod(image: &str, name: &str, app: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {app}}}\nspec:\n  containers:\n  - name: http\n    image: {image}\n    args: [serve, --port, \"8080\"]\n    ports: [{{name: http, containerPort: 8080}}]\n    readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}\n  - name: echo\n    image: {image}\n    args: [tcp, --port, \"9000\", --reply, hello]\n    readinessProbe: {{tcpSocket: {{port: 9000}}, periodSeconds: 1}}\n"
    )
}

fn running(c: &Cluster, pod: &str) {
    c.wait_json(&["pod", pod], TIMEOUT, |p| {
        p["status"]["phase"] == "Running"
            && p["status"]["containerStatuses"]
                .as_array()
                .is_some_and(|s| s.iter().all(|c| c["ready"] == true))
    });
}

#[test]
fn port_forward_relays_tcp_to_pods_for_kubectl_and_the_client_libraries() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up();
    c.ok_stdin(&["apply", "-f", "-"], &web_pod(&image, "web", "web"));
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n",
    );
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web-deploy}}\n  template:\n    metadata:\n      labels: {{app: web-deploy}}\n    spec:\n      containers:\n      - name: http\n        image: {image}\n        args: [serve, --port, \"8080\"]\n        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &deploy);
    running(&c, "web");

    kubectl_forwards_several_ports_of_a_pod(&c);
    kubectl_serves_parallel_connections_and_large_transfers(&c);
    kubectl_forwards_services_and_deployments(&c);
    kubectl_listens_on_the_given_address(&c);
    kubectl_falls_back_to_plain_spdy_when_told(&c);
    a_refused_port_reports_an_error_as_upstream(&c);
    kube_rs_forwards_over_the_channel_protocol(&c);
    python_forwards_over_the_channel_protocol(&c);
    the_api_refuses_missing_and_pending_pods(&c);
    // Last: it deletes the pod the others use.
    the_session_ends_when_the_pod_goes_away(&c);
}

fn kubectl_forwards_several_ports_of_a_pod(c: &Cluster) {
    let f = Forward::start(c, &["pod/web", ":8080", ":9000"], &[], 4);
    let (addr, http) = f.local(8080);
    assert_eq!(hostname(&addr, http), "web");
    let (addr, echo) = f.local(9000);
    let mut s = TcpStream::connect((addr.as_str(), echo)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "hello\n");
    s.write_all(b"ping\n").unwrap();
    line.clear();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "ping\n");
}

fn kubectl_serves_parallel_connections_and_large_transfers(c: &Cluster) {
    let f = Forward::start(c, &["pod/web", ":8080", ":9000"], &[], 4);
    let (addr, http) = f.local(8080);
    let workers: Vec<_> = (0..100)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || http_get(&addr, http, "/hostname"))
        })
        .collect();
    for w in workers {
        let (code, body) = w.join().unwrap().expect("a parallel GET");
        assert_eq!((code, body.trim()), (200, "web"));
    }

    // 100 MiB up and the same 100 MiB back down through the echo server.
    let (addr, echo) = f.local(9000);
    let s = TcpStream::connect((addr.as_str(), echo)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut greeting = String::new();
    r.read_line(&mut greeting).unwrap();
    assert_eq!(greeting, "hello\n");
    const TOTAL: usize = 100 << 20;
    let mut w = s.try_clone().unwrap();
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        for _ in 0..TOTAL / chunk.len() {
            w.write_all(&chunk).unwrap();
        }
    });
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0usize;
    let mut sum = 0u64;
    while got < TOTAL {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "the echo ended after {got} bytes");
        for (i, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, ((got + i) % (64 * 1024) % 251) as u8, "byte {}", got + i);
        }
        sum += n as u64;
        got += n;
    }
    writer.join().unwrap();
    assert_eq!(sum as usize, TOTAL);
    eprintln!(
        "100 MiB up and down through port-forward in {:?}",
        started.elapsed()
    );
}

fn kubectl_forwards_services_and_deployments(c: &Cluster) {
    // svc/web port 80 maps to targetPort 8080 of the pod kubectl picks.
    let f = Forward::start(c, &["svc/web", ":80"], &[], 2);
    assert_eq!(f.ports[0].2, 8080, "{:?}", f.ports);
    let (addr, local) = f.local(8080);
    assert_eq!(hostname(&addr, local), "web");
    drop(f);

    let pod = c.wait_json(&["pods", "-l", "app=web-deploy"], TIMEOUT, |l| {
        l["items"].as_array().is_some_and(|i| {
            i.len() == 1
                && i[0]["status"]["phase"] == "Running"
                && i[0]["status"]["containerStatuses"][0]["ready"] == true
        })
    });
    let name = pod["items"][0]["metadata"]["name"].as_str().unwrap().to_owned();
    let f = Forward::start(c, &["deploy/web", ":8080"], &[], 2);
    let (addr, local) = f.local(8080);
    assert_eq!(hostname(&addr, local), name);
}

fn kubectl_listens_on_the_given_address(c: &Cluster) {
    let f = Forward::start(c, &["--address", "127.0.0.2", "pod/web", ":8080"], &[], 1);
    let (addr, local) = f.local(8080);
    assert_eq!(addr, "127.0.0.2");
    assert_eq!(hostname(&addr, local), "web");
    assert!(
        TcpStream::connect(("127.0.0.1", local)).is_err(),
        "kubectl listened on 127.0.0.1 too"
    );
}

fn kubectl_falls_back_to_plain_spdy_when_told(c: &Cluster) {
    let f = Forward::start(
        c,
        &["pod/web", ":8080"],
        &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
        2,
    );
    let (addr, local) = f.local(8080);
    for _ in 0..5 {
        assert_eq!(hostname(&addr, local), "web");
    }
}

fn a_refused_port_reports_an_error_as_upstream(c: &Cluster) {
    // Nothing listens on 7777. The first connection gets the error on its error stream; kubectl 1.32
    // then ends the session itself (client-go handleConnection), as against a real kubelet.
    let mut f = Forward::start(c, &["pod/web", ":7777", ":8080"], &[], 4);
    let (addr, local) = f.local(8080);
    assert_eq!(hostname(&addr, local), "web", "the other port works first");
    let (addr, refused) = f.local(7777);
    if let Ok((code, body)) = http_get(&addr, refused, "/") {
        panic!("a refused port answered {code}: {body}");
    }
    let (ok, stderr) = f.wait_exit(TIMEOUT);
    assert!(!ok, "kubectl exited 0: {stderr}");
    // The direct dial was refused, so the helper inside the sandbox tried localhost too (an app may
    // listen on loopback only); its refusal is the one reported.
    assert!(
        stderr.contains("error forwarding port 7777 to pod default/web")
            && stderr.contains("inside the pod's network namespace")
            && stderr.contains("connection refused"),
        "{stderr}"
    );
    assert!(stderr.contains("lost connection to pod"), "{stderr}");
    // A new session works.
    let f = Forward::start(c, &["pod/web", ":8080"], &[], 2);
    let (addr, local) = f.local(8080);
    assert_eq!(hostname(&addr, local), "web");
}

fn kube_rs_forwards_over_the_channel_protocol(c: &Cluster) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::Api;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let kubeconfig = c.kubeconfig.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let pods: Api<Pod> = Api::default_namespaced(client);
        // Two ports in one WebSocket: the refused one reports on its error channel only.
        let mut pf = pods.portforward("web", &[8080, 7777]).await.unwrap();
        let refused = pf.take_error(7777).unwrap();
        let mut stream = pf.take_stream(8080).unwrap();
        stream
            .write_all(b"GET /hostname HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut raw))
            .await
            .expect("the response ends")
            .unwrap();
        let text = String::from_utf8_lossy(&raw);
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("\r\n\r\nweb\n"),
            "{text}"
        );
        let error = tokio::time::timeout(TIMEOUT, refused).await.unwrap();
        let error = error.expect("an error for the refused port");
        assert!(
            error.contains("error forwarding port 7777") && error.contains("connection refused"),
            "{error}"
        );
        // The server closes the WebSocket once every port's connection has ended, as the kubelet does;
        // kube-rs's `join` then fails sending its own Close (SendAfterClosing), so the test does not join.
        drop(stream);
        pf.abort();

        // A pod that does not exist is an HTTP error, not a stream.
        let err = pods.portforward("nope", &[80]).await.err().expect("an error");
        assert!(
            err.to_string().contains("404") || err.to_string().contains("not found"),
            "{err}"
        );
    });
}

/// The interpreter with the `kubernetes` package (as tests/python_client.rs finds it).
fn python() -> String {
    if let Ok(p) = std::env::var("KUBELING_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/pyvenv/bin/python");
    if std::path::Path::new(venv).exists() {
        venv.to_string()
    } else {
        "python3".to_string()
    }
}

fn python_forwards_over_the_channel_protocol(c: &Cluster) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/portforward.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&c.kubeconfig)
        .arg("web")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("python portforward: ok"),
        "python portforward failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn the_api_refuses_missing_and_pending_pods(c: &Cluster) {
    let token = c.token();
    let (code, status) = c.curl(
        "GET",
        "/api/v1/namespaces/default/pods/nope/portforward?ports=80",
        Some(&token),
        "application/json",
        None,
    );
    assert_eq!((code, status["kind"].as_str()), (404, Some("Status")), "{status}");
    // No registry is reachable: this pod stays Pending.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pending\nspec:\n  containers:\n  - name: c\n    image: kubeling.invalid/none:1\n",
    );
    eventually(TIMEOUT, "the pending pod to be scheduled", || {
        let (code, status) = c.curl(
            "GET",
            "/api/v1/namespaces/default/pods/pending/portforward?ports=80",
            Some(&token),
            "application/json",
            None,
        );
        (code == 400
            && status["message"]
                .as_str()
                .is_some_and(|m| m.contains("not running")))
        .then_some(())
    });
    let out = c.kubectl(&["port-forward", "pod/nope", ":80"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pods \"nope\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn the_session_ends_when_the_pod_goes_away(c: &Cluster) {
    let mut f = Forward::start(c, &["pod/web", ":8080"], &[], 2);
    let (addr, local) = f.local(8080);
    assert_eq!(hostname(&addr, local), "web");
    c.ok(&["delete", "pod", "web", "--grace-period=1", "--wait=false"]);
    let (ok, stderr) = f.wait_exit(TIMEOUT);
    assert!(!ok, "kubectl exited 0: {stderr}");
    assert!(stderr.contains("lost connection to pod"), "{stderr}");
}

/// The general path (Docker Desktop, rootless Docker): every connection goes through the helper exec'd in
/// the pod's sandbox, which dials localhost inside the pod's network namespace.
#[test]
fn port_forward_through_the_sandbox_helper_relays_both_ways() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up_with(&["--port-forward-via-helper"], None);
    c.ok_stdin(&["apply", "-f", "-"], &web_pod(&image, "web", "web"));
    running(&c, "web");
    let f = Forward::start(&c, &["pod/web", ":8080", ":9000"], &[], 4);
    let (addr, http) = f.local(8080);
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || http_get(&addr, http, "/hostname"))
        })
        .collect();
    for w in workers {
        let (code, body) = w.join().unwrap().expect("a GET through the helper");
        assert_eq!((code, body.trim()), (200, "web"));
    }
    // 8 MiB up and back through the echo server.
    let (addr, echo) = f.local(9000);
    let s = TcpStream::connect((addr.as_str(), echo)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut greeting = String::new();
    r.read_line(&mut greeting).unwrap();
    assert_eq!(greeting, "hello\n");
    const TOTAL: usize = 8 << 20;
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let data: Vec<u8> = (0..TOTAL).map(|i| (i % 253) as u8).collect();
        w.write_all(&data).unwrap();
    });
    let mut got = vec![0u8; TOTAL];
    r.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(
        got.iter().enumerate().all(|(i, b)| *b == (i % 253) as u8),
        "the echo differs"
    );
}
