//! `kubeling bench --port-forward`: `kubeling up` on Docker with one testbox pod (HTTP on 8080, an echo
//! server on 9000), then the same work twice in one run, through `kubectl port-forward` and straight to the
//! pod IP: per-request latency of sequential HTTP GETs (a new local connection each, as curl does), of
//! request/response round trips on one kept-alive connection (a line through the echo server), the latency
//! port-forward adds to each (median and p99 against direct), and the throughput of a bulk transfer up and
//! back down through the echo server. Needs kubectl on PATH and a pod IP reachable from the host (Docker
//! on Linux) for the direct figures.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::{BenchArgs, client, ms, percentile, pod_ready, stats, wait_node_ready};

const POD: &str = "pf-bench";
const HTTP_PORT: u16 = 8080;
const ECHO_PORT: u16 = 9000;

/// A running `kubectl port-forward`, killed when dropped.
struct Forward(Child);

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    super::with_testbox_cluster(&dir.join("port-forward-up"), &[], async |kubeconfig, image| {
        measure(args, kubeconfig, image).await
    })
    .await
}

async fn measure(args: &BenchArgs, kubeconfig: &Path, image: &str) -> anyhow::Result<()> {
    let c = client(kubeconfig).await?;
    wait_node_ready(&c).await?;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": POD},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "http", "image": image, "args": ["serve", "--port", HTTP_PORT.to_string()]},
                {"name": "echo", "image": image, "args": ["tcp", "--port", ECHO_PORT.to_string(), "--reply", "hello"]},
            ]
        }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let ip = ip_when_ready(&pods, Duration::from_secs(60)).await?;
    let ip: std::net::IpAddr = ip.parse().context("the pod IP")?;

    let mut child = Command::new("kubectl")
        .args([
            "port-forward",
            &format!("pod/{POD}"),
            ":8080",
            ":9000",
            "--address",
            "127.0.0.1",
        ])
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("running kubectl port-forward (is kubectl on PATH?)")?;
    let stdout = child.stdout.take().context("kubectl's stdout")?;
    let forward = Forward(child);
    let mut lines = BufReader::new(stdout).lines();
    let mut local = std::collections::HashMap::new();
    while local.len() < 2 {
        let line = lines.next().context("kubectl port-forward ended")??;
        if let Some((from, remote)) = line
            .strip_prefix("Forwarding from ")
            .and_then(|r| r.split_once(" -> "))
        {
            let port: u16 = from.rsplit_once(':').context("a local port")?.1.parse()?;
            local.insert(remote.trim().parse::<u16>()?, port);
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let via = |remote: u16| SocketAddr::from(([127, 0, 0, 1], local[&remote]));

    println!(
        "port-forward ({} GETs on new connections, {} round trips on one kept-alive connection, {} MiB echoed up and down):",
        args.pf_requests, args.pf_requests, args.pf_mib
    );
    // The first connection through a new session pays for opening it; not a per-request cost.
    latency(via(HTTP_PORT), 1).await?;
    let direct = latency(SocketAddr::new(ip, HTTP_PORT), args.pf_requests).await;
    let forwarded = latency(via(HTTP_PORT), args.pf_requests).await?;
    compare("GET /hostname, new connection each", forwarded, direct);
    let direct = round_trips(SocketAddr::new(ip, ECHO_PORT), args.pf_requests).await;
    let forwarded = round_trips(via(ECHO_PORT), args.pf_requests).await?;
    compare("echo round trip, kept-alive connection", forwarded, direct);
    let bytes = args.pf_mib << 20;
    let through = throughput(via(ECHO_PORT), bytes).await?;
    println!("  echo through port-forward: {through:.1} MiB/s each way");
    match throughput(SocketAddr::new(ip, ECHO_PORT), bytes).await {
        Ok(t) => println!("  echo straight to the pod IP: {t:.1} MiB/s each way"),
        Err(e) => println!("  echo straight to the pod IP: unreachable ({e})"),
    }
    drop(forward);
    Ok(())
}

/// Polls the bench pod until it is Ready; its IP.
async fn ip_when_ready(pods: &Api<Pod>, timeout: Duration) -> anyhow::Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get(POD).await?;
        if pod_ready(&pod)
            && let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone())
        {
            return Ok(ip);
        }
        anyhow::ensure!(Instant::now() < deadline, "the pod {POD} never became Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Prints the forwarded and direct figures and what port-forward adds (median and p99 each way).
fn compare(what: &str, mut forwarded: Vec<Duration>, direct: anyhow::Result<Vec<Duration>>) {
    forwarded.sort();
    stats(&format!("  {what} through port-forward"), forwarded.clone());
    match direct {
        Ok(mut d) => {
            d.sort();
            stats(&format!("  {what} straight to the pod IP"), d.clone());
            let added = |p| percentile(&forwarded, p).saturating_sub(percentile(&d, p));
            println!(
                "  {what}: port-forward adds {} median, {} p99",
                ms(added(0.5)),
                ms(added(0.99))
            );
        }
        Err(e) => println!("  {what} straight to the pod IP: unreachable ({e})"),
    }
}

/// Sequential line round trips through the echo server on one connection (after its greeting).
async fn round_trips(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<Duration>> {
    let exchange = async {
        let conn = tokio::net::TcpStream::connect(addr).await?;
        conn.set_nodelay(true)?;
        let (r, mut w) = conn.into_split();
        let mut r = tokio::io::BufReader::new(r);
        let mut line = String::new();
        r.read_line(&mut line).await?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let request = format!("ping {i}\n");
            line.clear();
            let t0 = Instant::now();
            w.write_all(request.as_bytes()).await?;
            r.read_line(&mut line).await?;
            out.push(t0.elapsed());
            anyhow::ensure!(line == request, "the echo answered {line:?} to {request:?}");
        }
        anyhow::Ok(out)
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .with_context(|| format!("echo round trips with {addr}: no answer"))?
}

/// Sequential GETs, each on a new connection: the time from connect to the end of the response.
async fn latency(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let exchange = async {
            let mut conn = tokio::net::TcpStream::connect(addr).await?;
            conn.set_nodelay(true)?;
            conn.write_all(b"GET /hostname HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await?;
            let mut response = Vec::new();
            conn.read_to_end(&mut response).await?;
            anyhow::ensure!(response.starts_with(b"HTTP/1.1 200"), "not a 200 from {addr}");
            anyhow::Ok(())
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .with_context(|| format!("GET http://{addr}/hostname: no answer"))??;
        out.push(t0.elapsed());
    }
    Ok(out)
}

/// Sends `bytes` to the echo server while reading them back; MiB/s of the whole exchange.
async fn throughput(addr: SocketAddr, bytes: usize) -> anyhow::Result<f64> {
    let conn = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .context("connect timed out")??;
    conn.set_nodelay(true)?;
    let (r, mut w) = conn.into_split();
    let mut r = tokio::io::BufReader::new(r);
    let mut greeting = String::new();
    r.read_line(&mut greeting).await?;
    let t0 = Instant::now();
    let writer = tokio::spawn(async move {
        let chunk = vec![7u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            w.write_all(&chunk[..n]).await?;
            left -= n;
        }
        anyhow::Ok(w)
    });
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    while got < bytes {
        let n = tokio::time::timeout(Duration::from_secs(30), r.read(&mut buf))
            .await
            .context("the echo stalled")??;
        anyhow::ensure!(n > 0, "the echo ended after {got} bytes");
        got += n;
    }
    drop(writer.await??);
    Ok((bytes as f64 / (1 << 20) as f64) / t0.elapsed().as_secs_f64())
}
