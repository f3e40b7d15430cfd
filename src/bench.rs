//! `kubeling bench`: measures the API server the way the issues state their targets, on this machine, and
//! prints the figures. Nothing here asserts: timings on a shared 2-core machine are for reading, not gating.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// Options of `kubeling bench`.
#[derive(clap::Args, Clone)]
pub(crate) struct BenchArgs {
    /// Pods created one at a time by one client.
    #[arg(long, default_value_t = 2000)]
    pub(crate) pods: usize,
    /// Watchers for the fan-out measurement.
    #[arg(long, default_value_t = 100)]
    pub(crate) watchers: usize,
    /// Start-ups to time.
    #[arg(long, default_value_t = 5)]
    pub(crate) starts: usize,
    /// Also measure pod start-up on Docker (`kubeling up`) against Docker creating the same containers.
    #[arg(long)]
    pub(crate) node: bool,
    /// Pods for the pod start-up measurement.
    #[arg(long, default_value_t = 50)]
    pub(crate) node_pods: usize,
}

struct Server {
    child: Child,
    kubeconfig: std::path::PathBuf,
    ready_after: Duration,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data_dir: &Path) -> anyhow::Result<Server> {
    start_cmd(data_dir, "apiserver")
}

fn start_cmd(data_dir: &Path, subcommand: &str) -> anyhow::Result<Server> {
    use std::io::{BufRead, BufReader};
    let t0 = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args([subcommand, "--port", "0", "--no-kubeconfig-merge", "--data-dir"])
        .arg(data_dir)
        .env("KUBELING_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting kubeling apiserver")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    let ready_after = t0.elapsed();
    let kubeconfig = line
        .rsplit("KUBECONFIG=")
        .next()
        .context("ready line")?
        .trim()
        .into();
    Ok(Server {
        child,
        kubeconfig,
        ready_after,
    })
}

async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "kubeling/testbox:0.1", "ports": [{"containerPort": 8080}]}]}
    }))
    .expect("a valid pod")
}

/// Run every measurement and print the figures.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
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
        let srv = start(&tmp.path().join(format!("start{i}")))?;
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
        let srv = start(&tmp.path().join("openapi"))?;
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
    let data = tmp.path().join("main");
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
        (t1 - t0) as f64 / 100.0 / 5.0 * 100.0
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
    println!(
        "sequential pod creates: {} pods in {:.2} s = {:.0}/s; p50 {}, p99 {} (target >= 2000/s)",
        args.pods,
        total.as_secs_f64(),
        args.pods as f64 / total.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );

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
    let rv = pods
        .get("p00000")
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..args.watchers {
        let mut stream = pods
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
    let writes = 50;
    let mut acked = std::collections::HashMap::new();
    for i in 0..writes {
        let name = format!("fan{i:03}");
        let mut p = pod(&name);
        p.metadata.labels = Some([("app".to_string(), "fanout".to_string())].into());
        pods.create(&PostParams::default(), &p).await?;
        acked.insert(name, Instant::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut delays = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while delays.len() < writes * args.watchers && Instant::now() < deadline {
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
    println!(
        "watch fan-out to {} watchers: {} of {} deliveries; after the write's acknowledgement p50 {}, p99 {} (target p99 < 2 ms; 0 = before the ack)",
        args.watchers,
        delays.len(),
        writes * args.watchers,
        ms(percentile(&delays, 0.5)),
        ms(percentile(&delays, 0.99))
    );

    let objects = 2 * args.pods + writes;
    println!(
        "disk: {} MB for {} pods and the system objects (sled; watched because of its space amplification)",
        dir_size(&data.join("db")) / 1024 / 1024,
        objects
    );
    println!("RSS after the run: {} MB", rss_kib(pid).unwrap_or(0) / 1024);
    drop(srv);
    if args.node {
        pod_startup(&args, tmp.path()).await?;
    }
    Ok(())
}

fn stats(label: &str, mut v: Vec<Duration>) -> Duration {
    v.sort();
    let median = percentile(&v, 0.5);
    println!(
        "{label}: median {}, p99 {}, max {}",
        ms(median),
        ms(percentile(&v, 0.99)),
        ms(*v.last().unwrap_or(&Duration::ZERO))
    );
    median
}

/// One pod as Docker alone would make it: the pause container, then the app container joining it.
async fn docker_pod(docker: &node::runtime::docker::DockerRuntime, name: &str) -> anyhow::Result<()> {
    use node::runtime::docker::DEFAULT_PAUSE_IMAGE;
    use node::runtime::{ContainerConfig, ContainerRuntime, SandboxConfig};
    let uid = format!("bench-uid-{name}");
    let sandbox = SandboxConfig {
        pod_name: name.to_string(),
        namespace: "bench".into(),
        uid: uid.clone(),
        image: DEFAULT_PAUSE_IMAGE.into(),
        ..Default::default()
    };
    let sid = docker.create_sandbox(&sandbox).await?;
    docker.start(&sid).await?;
    docker.inspect(&sid).await?;
    let app = ContainerConfig {
        pod_name: name.to_string(),
        namespace: "bench".into(),
        uid,
        name: "app".into(),
        sandbox_id: sid,
        image: DEFAULT_PAUSE_IMAGE.into(),
        ..Default::default()
    };
    let cid = docker.create_container(&app).await?;
    docker.start(&cid).await?;
    Ok(())
}

/// Pod start-up: from the create request to Ready seen through a watch, for pods created one after another
/// and all at once; the baseline is Docker creating and starting the same pause and app containers itself.
/// A watch of `pods` from the current list's resourceVersion: every change after this moment.
async fn watch_from_now(
    pods: &Api<Pod>,
) -> anyhow::Result<futures_util::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>> {
    let rv = pods
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    Ok(pods.watch(&WatchParams::default(), &rv).await?.boxed())
}

/// Whether the pod's Ready condition is True.
fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Static pods, one after another: a manifest written into the manifest directory, to its mirror pod Ready
/// seen by a watch (the file watch settles for 100 ms before the directory is read).
async fn static_pod_startup(
    pods: &Api<Pod>,
    manifests: &Path,
    n: usize,
    baseline: Duration,
) -> anyhow::Result<()> {
    use node::runtime::docker::DEFAULT_PAUSE_IMAGE;
    let node = node::agent::default_node_name();
    let mut lat = Vec::new();
    for i in 0..n {
        let name = format!("st{i:03}");
        let mirror = format!("{name}-{node}");
        let mut stream = watch_from_now(pods).await?;
        let manifest = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": DEFAULT_PAUSE_IMAGE}]}
        });
        let t = Instant::now();
        std::fs::write(manifests.join(format!("{name}.json")), manifest.to_string())?;
        let ready = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(Ok(ev)) = stream.next().await {
                if let WatchEvent::Added(p) | WatchEvent::Modified(p) = ev
                    && p.metadata.name.as_deref() == Some(mirror.as_str())
                    && pod_ready(&p)
                {
                    return Some(t.elapsed());
                }
            }
            None
        })
        .await?;
        lat.push(ready.context("watch ended")?);
    }
    let median = stats(
        "kubeling static pods, manifest written to mirror pod Ready seen by a watch, one after another",
        lat,
    );
    println!(
        "  median ratio to Docker directly (one after another): {:.2} (includes the 100 ms file-watch settle)",
        median.as_secs_f64() / baseline.as_secs_f64()
    );
    for i in 0..n {
        let _ = std::fs::remove_file(manifests.join(format!("st{i:03}.json")));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pods.list(&Default::default()).await?.items.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

async fn pod_startup(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    use node::runtime::docker::{DEFAULT_PAUSE_IMAGE, DockerRuntime};
    use node::runtime::{ContainerRuntime, ListFilter, Owner};
    let n = args.node_pods;
    println!();
    println!("pod start-up on Docker ({n} pods; the app container runs the pause image, always present)");

    // Baseline: the same two containers per pod, created and started through the Docker API directly.
    let owner = Owner {
        cluster: format!("bench-{}", std::process::id()),
        node: "bench".into(),
    };
    let docker = DockerRuntime::connect(owner).await?;
    docker.ensure_pause_image(DEFAULT_PAUSE_IMAGE).await?;
    let mut base = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        docker_pod(&docker, &format!("b{i}")).await?;
        base.push(t.elapsed());
    }
    for c in docker.list(&ListFilter::all()).await? {
        let _ = docker.remove_container(&c.id).await;
    }
    let t0 = Instant::now();
    let all = futures_util::future::join_all((0..n).map(|i| {
        let docker = docker.clone();
        async move {
            docker_pod(&docker, &format!("a{i}")).await?;
            anyhow::Ok(t0.elapsed())
        }
    }))
    .await;
    let base_all: Vec<Duration> = all.into_iter().collect::<anyhow::Result<_>>()?;
    for c in docker.list(&ListFilter::all()).await? {
        let _ = docker.remove_container(&c.id).await;
    }
    let baseline = stats("Docker directly, pause + app, one pod after another", base);
    let baseline_all = stats("Docker directly, pause + app, all pods at once", base_all);

    let srv = start_cmd(&dir.join("pods"), "up")?;
    let pid = srv.child.id();
    let c = client(&srv.kubeconfig).await?;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !nodes.list(&Default::default()).await?.items.iter().any(|n| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }) {
        anyhow::ensure!(Instant::now() < deadline, "the node never became Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t0 = cpu_ticks(pid).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t1 = cpu_ticks(pid).unwrap_or(0);
    println!(
        "idle kubeling up (API server + scheduler + node agent, no pods): RSS {} MB (target < 30 MB), CPU {:.2}% of a core (target < 1%)",
        rss_kib(pid).unwrap_or(0) / 1024,
        (t1 - t0) as f64 / 100.0 / 5.0 * 100.0
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for (label, concurrent) in [("one after another", false), ("all at once", true)] {
        let prefix = if concurrent { "c" } else { "s" };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
        let mut stream = watch_from_now(&pods).await?;
        let watch = tokio::spawn(async move {
            let mut seen = std::collections::HashSet::new();
            while let Some(Ok(ev)) = stream.next().await {
                if let WatchEvent::Modified(p) = ev {
                    let ready = pod_ready(&p);
                    let name = p.metadata.name.unwrap_or_default();
                    if ready && seen.insert(name.clone()) {
                        let _ = tx.send((name, Instant::now()));
                    }
                }
            }
        });
        let mut created = std::collections::HashMap::new();
        let make = |i: usize| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{prefix}{i:03}")},
                "spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": DEFAULT_PAUSE_IMAGE}]}
            }))
            .expect("a valid pod")
        };
        if concurrent {
            let mut handles = Vec::new();
            for i in 0..n {
                let pods = pods.clone();
                let p = make(i);
                handles.push(tokio::spawn(async move {
                    let t = Instant::now();
                    pods.create(&PostParams::default(), &p)
                        .await
                        .map(|_| (p.metadata.name.unwrap_or_default(), t))
                }));
            }
            for h in handles {
                let (name, t) = h.await??;
                created.insert(name, t);
            }
        }
        let mut lat = Vec::new();
        if !concurrent {
            // One after another: each pod is created once the previous one is Ready.
            for i in 0..n {
                let p = make(i);
                let name = p.metadata.name.clone().unwrap_or_default();
                let t = Instant::now();
                pods.create(&PostParams::default(), &p).await?;
                loop {
                    let (ready, at) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                        .await?
                        .context("watch ended")?;
                    if ready == name {
                        lat.push(at.saturating_duration_since(t));
                        break;
                    }
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while lat.len() < n && Instant::now() < deadline {
            if let Ok(Some((name, at))) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await
                && let Some(t) = created.get(&name)
            {
                lat.push(at.saturating_duration_since(*t));
            }
        }
        watch.abort();
        anyhow::ensure!(lat.len() == n, "only {} of {n} pods became Ready", lat.len());
        let median = stats(
            &format!("kubeling, create request to Ready seen by a watch, {label}"),
            lat,
        );
        let base = if concurrent { baseline_all } else { baseline };
        println!(
            "  median ratio to Docker directly ({label}): {:.2} (target <= 1.25; p99 target < 1 s)",
            median.as_secs_f64() / base.as_secs_f64()
        );
        pods.delete_collection(&Default::default(), &Default::default())
            .await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !pods.list(&Default::default()).await?.items.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    static_pod_startup(&pods, &dir.join("pods/manifests"), n.min(20), baseline).await?;
    drop(srv);
    // Whatever the stopped cluster left in Docker goes too.
    let cluster = std::fs::read_to_string(dir.join("pods/node/cluster-id")).unwrap_or_default();
    let leftovers = DockerRuntime::connect(Owner {
        cluster: cluster.trim().to_string(),
        node: node::agent::default_node_name(),
    })
    .await?;
    for c in leftovers.list(&ListFilter::all()).await? {
        let _ = leftovers.remove_container(&c.id).await;
    }
    Ok(())
}
