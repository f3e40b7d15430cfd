//! `--dns`: the cluster DNS server (in process, against a `kubeling apiserver` child): how long a created
//! Service takes to resolve, and the time of a query for a cluster name, an unknown cluster name (NXDOMAIN)
//! over UDP from the host.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use tokio::net::UdpSocket;

use super::{BenchArgs, client, ms, start, stats};

/// An A query for `name` with id `id`.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Asks `name`; returns the response code and the answer count.
async fn ask(socket: &UdpSocket, id: u16, name: &str) -> anyhow::Result<(u8, u16)> {
    socket.send(&query(id, name)).await?;
    let mut buf = [0u8; 1500];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(2), socket.recv(&mut buf))
            .await
            .context("no DNS answer within 2 s")??;
        if n >= 12 && buf[..2] == id.to_be_bytes() {
            return Ok((buf[3] & 0x0f, u16::from_be_bytes([buf[6], buf[7]])));
        }
    }
}

pub(super) async fn run(args: &BenchArgs, tmp: &Path) -> anyhow::Result<()> {
    println!("== cluster DNS ==");
    let server = start(&tmp.join("dns"))?;
    let c = client(&server.kubeconfig).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = dns::start(c.clone(), dns::Config::new(), cancel.clone()).await?;
    let addr: SocketAddr = running.addr;
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(addr).await?;
    let services: Api<Service> = Api::namespaced(c, "default");
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}
    }))?;
    let t0 = Instant::now();
    services.create(&PostParams::default(), &svc).await?;
    let mut id = 0u16;
    loop {
        id = id.wrapping_add(1);
        if ask(&socket, id, "web.default.svc.cluster.local").await? == (0, 1) {
            break;
        }
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(30),
            "the Service never resolved"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("Service created → resolvable: {}", ms(t0.elapsed()));
    for (label, name, want) in [
        ("query, cluster name (A)", "web.default.svc.cluster.local", 0u8),
        (
            "query, unknown cluster name (NXDOMAIN)",
            "nope.default.svc.cluster.local",
            3,
        ),
    ] {
        let mut times = Vec::with_capacity(args.dns_queries);
        for _ in 0..args.dns_queries {
            id = id.wrapping_add(1);
            let t = Instant::now();
            let (rcode, _) = ask(&socket, id, name).await?;
            times.push(t.elapsed());
            anyhow::ensure!(rcode == want, "{name}: response code {rcode}, not {want}");
        }
        stats(
            &format!("{label}, {} sequential over UDP", args.dns_queries),
            times,
        );
    }
    cancel.cancel();
    running.shutdown().await;
    Ok(())
}
