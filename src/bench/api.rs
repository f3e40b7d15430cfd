//! The API server as a child process (`kubeling apiserver`): start to ready, the OpenAPI documents' first
//! build, idle memory and CPU, sequential pod creates (typed and thin client), LIST of 1,000 pods, watch
//! fan-out latency after a write's acknowledgement, and disk use.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::{BenchArgs, client, cpu_percent, cpu_ticks, dir_size, ms, percentile, rss_kib, start};

pub(super) fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "kubeling/testbox:0.1", "ports": [{"containerPort": 8080}]}]}
    }))
    .expect("a valid pod")
}

/// The API server's figures, each against its target, on fresh data dirs under `dir`.
pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    println!(
        "kubeling bench (API server), {} cores",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    println!(
        "upstream kube-apiserver 1.32 + etcd 3.4 on the same kind of machine (from the issue): start to /readyz 2.1-2.8 s; idle RSS 239 MB + 45 MB; sequential pod creates 430-525/s (p99 6-8 ms); LIST of 1,000 pods 145 ms"
    );
    println!();

    // 1. Start to ready, on empty data dirs: spawn to the ready line, then the first /readyz answered.
    let mut starts = Vec::new();
    let mut readyz = Vec::new();
    for i in 0..args.starts {
        let t0 = Instant::now();
        let srv = start(&dir.join(format!("start{i}")))?;
        let c = client(&srv.kubeconfig).await?;
        let req = http::Request::get("/readyz").body(Vec::new())?;
        c.request_text(req).await.context("/readyz")?;
        starts.push(srv.ready_after);
        readyz.push(t0.elapsed());
    }
    starts.sort();
    readyz.sort();
    println!(
        "start to ready line (empty data dir): median {}, min {}",
        ms(percentile(&starts, 0.5)),
        ms(starts[0])
    );
    println!(
        "start to first /readyz answered:     median {}, min {}  (target < 100 ms; includes the client's TLS set-up)",
        ms(percentile(&readyz, 0.5)),
        ms(readyz[0])
    );

    // 1b. The OpenAPI documents are built on the first request (kubectl apply/create/explain ask for them).
    {
        let srv = start(&dir.join("openapi"))?;
        let c = client(&srv.kubeconfig).await?;
        let index: serde_json::Value = serde_json::from_str(
            &c.request_text(http::Request::get("/openapi/v3").body(Vec::new())?)
                .await?,
        )?;
        let url = index["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .context("api/v1 in the index")?
            .to_string();
        let t = Instant::now();
        let doc = c
            .request_text(http::Request::get(url.as_str()).body(Vec::new())?)
            .await?;
        let first = t.elapsed();
        let t = Instant::now();
        c.request_text(http::Request::get(url.as_str()).body(Vec::new())?)
            .await?;
        println!(
            "OpenAPI v3 api/v1 document ({} KB): first request {} (builds every document), then {}",
            doc.len() / 1024,
            ms(first),
            ms(t.elapsed())
        );
    }

    // 2. Idle footprint.
    let data = dir.join("main");
    let srv = start(&data)?;
    let pid = srv.child.id();
    let c = client(&srv.kubeconfig).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t0 = cpu_ticks(pid).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t1 = cpu_ticks(pid).unwrap_or(0);
    println!(
        "idle RSS: {} MB (target < 25 MB); idle CPU over 5 s: {:.2}% of a core",
        rss_kib(pid).unwrap_or(0) / 1024,
        cpu_percent(t1 - t0, Duration::from_secs(5))
    );

    // 3. One client creating pods one at a time (each answered only after it is on disk).
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bench"}}))?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "bench");
    let mut lat = Vec::with_capacity(args.pods);
    let t0 = Instant::now();
    for i in 0..args.pods {
        let t = Instant::now();
        pods.create(&PostParams::default(), &pod(&format!("p{i:05}")))
            .await?;
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    let create_rate = args.pods as f64 / total.as_secs_f64();
    println!(
        "sequential pod creates: {} pods in {:.2} s = {:.0}/s; p50 {}, p99 {} (target >= 2000/s)",
        args.pods,
        total.as_secs_f64(),
        create_rate,
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );
    // The floors of that figure on this machine, measured now: the same client's round trip with no work
    // behind it (`GET /version`: HTTP + TLS), and one fsync of the data dir's disk (durability). A serial
    // durable create cannot beat 1 / (the two together).
    let version = serial_version_gets(&c, args.pods.clamp(100, 1000)).await?;
    let fsync = serial_fsyncs(dir, 200)?;
    let limit = 1.0 / (version + fsync).as_secs_f64();
    println!(
        "floors: GET /version (same client) median {} = {:.0}/s; the disk's serial fsync median {} = {:.0}/s; limit for a serial durable create {:.0}/s: the creates reach {:.0}% of it (target >= 85%)",
        ms(version),
        1.0 / version.as_secs_f64(),
        ms(fsync),
        1.0 / fsync.as_secs_f64(),
        limit,
        100.0 * create_rate / limit
    );

    // 3a. Eight clients at once, each on its own connection, creating pods one at a time (group commit:
    // one fsync covers the writes that arrive while the previous one runs).
    concurrent_creates(
        &srv.kubeconfig,
        "bench",
        8,
        args.pods / 2,
        Some(srv.child.id()),
        " (target >= 12000/s, p99 < 2 ms)",
    )
    .await?;

    // 3b. The same with a thin client (pre-serialised body, response not decoded), to separate the server's
    // share from kube-rs's typed (de)serialisation.
    let mut lat = Vec::with_capacity(args.pods);
    let t0 = Instant::now();
    for i in 0..args.pods {
        let body = serde_json::to_vec(&pod(&format!("raw{i:05}")))?;
        let req = http::Request::post("/api/v1/namespaces/bench/pods")
            .header("content-type", "application/json")
            .body(body)?;
        let t = Instant::now();
        c.request_text(req).await?;
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    println!(
        "sequential pod creates, thin client: {:.0}/s; p50 {}, p99 {}",
        args.pods as f64 / total.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );

    // 4. LIST of 1,000 pods (first 1,000 of the namespace), client-measured, JSON.
    let mut lists = Vec::new();
    for _ in 0..20 {
        let req = http::Request::get("/api/v1/namespaces/bench/pods?limit=1000").body(Vec::new())?;
        let t = Instant::now();
        let body = c.request_text(req).await?;
        lists.push(t.elapsed());
        anyhow::ensure!(body.len() > 1000, "empty list");
    }
    lists.sort();
    println!(
        "LIST of 1,000 pods: median {}, p99 {} (target < 20 ms)",
        ms(percentile(&lists, 0.5)),
        ms(percentile(&lists, 0.99))
    );

    // 5. Watch fan-out: how long after a write is acknowledged each of N watchers has the event.
    let writes = 50;
    let (delivered, delays) = fan_out(&pods, &pods, args.watchers, writes, "fan").await?;
    println!(
        "watch fan-out to {} watchers: {delivered} of {} deliveries; after the write's acknowledgement p50 {}, p99 {} (target p99 < 2 ms; 0 = before the ack)",
        args.watchers,
        writes * args.watchers,
        ms(percentile(&delays, 0.5)),
        ms(percentile(&delays, 0.99))
    );

    // 6. CustomResourceDefinitions: time to a usable CRD, and custom objects against ConfigMaps.
    super::crd::run(&c, "bench", args.pods / 2).await?;

    let objects = 2 * args.pods + writes;
    println!(
        "disk: {} MB for {} pods and the system objects (sled; watched because of its space amplification)",
        dir_size(&data.join("db")) / 1024 / 1024,
        objects
    );
    println!("RSS after the run: {} MB", rss_kib(pid).unwrap_or(0) / 1024);
    drop(srv);
    Ok(())
}

/// `watchers` watches on `watch_on` (from its current revision: an old pod's could be older than the watch
/// history) of the pods labelled `app=fanout`, then `writes` such pods created through `write_to`, one every
/// 20 ms: how many events arrived, and how long after each write's acknowledgement (sorted).
pub(super) async fn fan_out(
    write_to: &Api<Pod>,
    watch_on: &Api<Pod>,
    watchers: usize,
    writes: usize,
    prefix: &str,
) -> anyhow::Result<(usize, Vec<Duration>)> {
    let rv = watch_on
        .list(&kube::api::ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut stream = watch_on
            .watch(&WatchParams::default().labels("app=fanout"), &rv)
            .await?
            .boxed();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(Ok(ev)) = stream.next().await {
                if let WatchEvent::Added(p) = ev {
                    let _ = tx.send((p.metadata.name.unwrap_or_default(), Instant::now()));
                }
            }
        }));
    }
    drop(tx);
    let mut acked = std::collections::HashMap::new();
    for i in 0..writes {
        let name = format!("{prefix}{i:03}");
        let mut p = pod(&name);
        p.metadata.labels = Some([("app".to_string(), "fanout".to_string())].into());
        write_to.create(&PostParams::default(), &p).await?;
        acked.insert(name, Instant::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut delays = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while delays.len() < writes * watchers && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
            Ok(Some((name, at))) => {
                if let Some(ack) = acked.get(&name) {
                    delays.push(at.saturating_duration_since(*ack));
                }
            }
            _ => break,
        }
    }
    for t in tasks {
        t.abort();
    }
    delays.sort();
    Ok((delays.len(), delays))
}

/// `clients` clients at once, each on its own connection, creating `per_client` pods one at a time; then
/// the same clients sending as many `GET /version` (the floor of that figure: HTTP and TLS with no work
/// behind them). Each is printed with the CPU per request of the server (`server_pid`) and of this process
/// (the clients). Returns the create rate.
pub(super) async fn concurrent_creates(
    kubeconfig: &Path,
    ns: &str,
    clients: usize,
    per_client: usize,
    server_pid: Option<u32>,
    target: &str,
) -> anyhow::Result<f64> {
    let mut cs = Vec::with_capacity(clients);
    for _ in 0..clients {
        let c = client(kubeconfig).await?;
        // One request first, so the TLS set-up is not timed.
        c.apiserver_version().await?;
        cs.push(c);
    }
    let ns = ns.to_string();
    let creates = concurrently(cs.clone(), per_client, server_pid, move |c, k, i| {
        let api = Api::<Pod>::namespaced(c, &ns);
        async move {
            api.create(&PostParams::default(), &pod(&format!("c{k}-{i:05}")))
                .await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!(
        "{clients} concurrent clients creating pods: {}{target}",
        creates.describe("pods")
    );
    creates.print_cpu(clients);
    let floor = concurrently(cs, per_client, server_pid, |c, _, _| async move {
        let req = http::Request::get("/version").body(Vec::new())?;
        c.request_text(req).await.context("GET /version")?;
        anyhow::Ok(())
    })
    .await?;
    println!(
        "  floor: the same clients sending GET /version: {}",
        floor.describe("requests")
    );
    floor.print_cpu(clients);
    Ok(creates.rate)
}

/// What a concurrent run measured.
struct Concurrent {
    lat: Vec<Duration>,
    total: Duration,
    rate: f64,
    /// CPU ticks of the server (when its pid was given) and of this process over the run.
    server_ticks: Option<u64>,
    client_ticks: u64,
}

impl Concurrent {
    fn describe(&self, what: &str) -> String {
        format!(
            "{} {what} in {:.2} s = {:.0}/s; p50 {}, p99 {}",
            self.lat.len(),
            self.total.as_secs_f64(),
            self.rate,
            ms(percentile(&self.lat, 0.5)),
            ms(percentile(&self.lat, 0.99))
        )
    }

    /// Where the cores went: CPU per request of the server and of the clients.
    fn print_cpu(&self, clients: usize) {
        let Some(server_ticks) = self.server_ticks else {
            return;
        };
        let per_request = |ticks: u64| ticks as f64 / super::CLK_TCK / self.lat.len() as f64 * 1e6;
        println!(
            "    CPU per request: server {:.0} µs, the {clients} clients {:.0} µs ({:.0}% of the machine's cores busy)",
            per_request(server_ticks),
            per_request(self.client_ticks),
            cpu_percent(server_ticks + self.client_ticks, self.total)
                / std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
        );
    }
}

/// Runs `op(client, k, i)` for `i` in `0..per_client` on every client `k` at once, each client's requests
/// one after another, timing each.
async fn concurrently<F, Fut>(
    clients: Vec<kube::Client>,
    per_client: usize,
    server_pid: Option<u32>,
    op: F,
) -> anyhow::Result<Concurrent>
where
    F: Fn(kube::Client, usize, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let server_before = server_pid.map(|pid| (pid, cpu_ticks(pid).unwrap_or(0)));
    let client_before = cpu_ticks(std::process::id()).unwrap_or(0);
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(clients.len());
    for (k, c) in clients.into_iter().enumerate() {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let t = Instant::now();
                op(c.clone(), k, i).await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    let total = t0.elapsed();
    lat.sort();
    let rate = lat.len() as f64 / total.as_secs_f64();
    let client_ticks = cpu_ticks(std::process::id())
        .unwrap_or(client_before)
        .saturating_sub(client_before);
    let server_ticks =
        server_before.map(|(pid, before)| cpu_ticks(pid).unwrap_or(before).saturating_sub(before));
    Ok(Concurrent {
        lat,
        total,
        rate,
        server_ticks,
        client_ticks,
    })
}

/// The median latency of `n` serial `GET /version` on `c` (the request floor: HTTP, TLS, routing).
pub(super) async fn serial_version_gets(c: &kube::Client, n: usize) -> anyhow::Result<Duration> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let req = http::Request::get("/version").body(Vec::new())?;
        let t = Instant::now();
        c.request_text(req).await.context("GET /version")?;
        lat.push(t.elapsed());
    }
    lat.sort();
    Ok(percentile(&lat, 0.5))
}

/// The median time of `n` serial 4 KiB writes each followed by an fsync, in a file under `dir` (the
/// durability floor of the disk the data dirs are on).
fn serial_fsyncs(dir: &Path, n: usize) -> anyhow::Result<Duration> {
    use std::io::Write;
    let path = dir.join("fsync-floor");
    let mut f = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&block)?;
        f.sync_data()?;
        lat.push(t.elapsed());
    }
    drop(f);
    std::fs::remove_file(&path)?;
    lat.sort();
    Ok(percentile(&lat, 0.5))
}
