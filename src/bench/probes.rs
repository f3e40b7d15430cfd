//! `bench --probes`: step 5's probe targets, in three parts.
//!
//! 1. [`machinery`]: the probe manager in this process with the fake prober (every probe passes, no I/O),
//!    the fake event recorder and a status cache holding, per pod, a running and started container. With
//!    two workers per pod probing every second: this process's CPU, the probe runs made and the results
//!    updates published in a window (a probe that keeps passing publishes none), next to the same process
//!    idle for the same window.
//! 2. [`kubelet_writes`]: the whole kubelet in this process (fake runtime, fake prober) against a child
//!    `kubeling apiserver`. Once every pod is Ready, the pod writes a watch sees in a window (each one is an
//!    API write by the kubelet; none is expected while no result changes) and what they changed, the events
//!    written, and the CPU of this process and of the API server. A write that changes nothing makes no
//!    watch event (the API server keeps no-op writes no-ops), so the API server's CPU is the tell for those.
//! 3. [`readiness_flips`]: `kubeling up` on Docker with one testbox pod whose readiness probe (httpGet,
//!    period 1 s, failureThreshold 1) is flipped through its HTTP server: from the health path answering 200
//!    again to the pod's Ready condition True seen by a watch.

#[path = "../../fixtures/testbox/image.rs"]
pub(super) mod testbox_image;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use node::lifecycle::plan::ProbeResult;
use node::prober::fake::{FakeEvents, FakeProber};
use node::prober::{Manager, ManagerConfig, ProbeType};
use node::status_cache::PodStatusCache;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    BenchArgs, CpuMeter, PodWatch, client, percentile, pod_ready, remove_cluster_containers, start,
    start_cmd, wait_node_ready, watch_from_now,
};

/// `periodSeconds` of every probe here.
const PERIOD_SECONDS: u64 = 1;
/// The one container of every probed pod.
const CONTAINER: &str = "c";

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    println!();
    println!(
        "probes ({} pods, each with a readiness and a liveness probe, period {PERIOD_SECONDS}s; windows of {}s)",
        args.probe_pods, args.probe_window
    );
    machinery(args).await?;
    kubelet_writes(args, dir).await?;
    readiness_flips(args, dir).await
}

/// A pod whose container `c` has an exec readiness and an exec liveness probe, period 1 s.
fn probed_pod(name: &str, image: &str) -> anyhow::Result<Pod> {
    let probe = json!({"exec": {"command": ["true"]}, "periodSeconds": PERIOD_SECONDS});
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": CONTAINER, "image": image,
                "readinessProbe": probe, "livenessProbe": probe,
            }]
        }
    }))?)
}

/// What a pod worker would have cached for a pod whose container `c` runs as instance `container_id` and
/// has started (so neither probe waits for a startup probe).
fn running_status(container_id: &str) -> anyhow::Result<PodStatus> {
    Ok(serde_json::from_value(json!({
        "phase": "Running",
        "podIP": "10.0.0.1",
        "containerStatuses": [{
            "name": CONTAINER, "image": "bench", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": format!("docker://{container_id}"), "started": true,
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
        }]
    }))?)
}

/// Part 1: the probe manager and its workers alone.
async fn machinery(args: &BenchArgs) -> anyhow::Result<()> {
    let n = args.probe_pods;
    let window = Duration::from_secs(args.probe_window);
    let prober = Arc::new(FakeProber::new());
    let statuses = Arc::new(PodStatusCache::new());
    let cancel = CancellationToken::new();
    let manager = Manager::new(
        ManagerConfig {
            status: statuses.clone(),
            prober: prober.clone(),
            events: Arc::new(FakeEvents::new()),
            clock: node::prober::system_clock(),
        },
        cancel.clone(),
    );
    let _stop_workers = cancel.drop_guard();
    let take = |t: ProbeType| {
        manager
            .results(t)
            .updates()
            .context("the results updates are taken")
    };
    let mut updates = [
        take(ProbeType::Liveness)?,
        take(ProbeType::Readiness)?,
        take(ProbeType::Startup)?,
    ];

    // The baseline: this process with the manager and no workers. It also takes the manager past its
    // start-up jitter window (one period), so the workers added next probe at once, and then every second
    // all together: the burstiest case, with the same total work as a jittered start.
    let idle = CpuMeter::this_process();
    tokio::time::sleep(window.max(Duration::from_millis(PERIOD_SECONDS * 1000 + 100))).await;
    let idle = idle.percent();

    let mut pods = Vec::with_capacity(n);
    for i in 0..n {
        let uid = format!("bench-uid-{i}");
        statuses.set(&uid, running_status(&format!("bench-{i}"))?);
        let mut pod = probed_pod(&format!("probed{i:05}"), "bench")?;
        pod.metadata.uid = Some(uid);
        pods.push(pod);
    }
    for pod in &pods {
        manager.add_pod(pod, None);
    }
    // Every container Ready: its readiness result went from the initial Failure to Success.
    let mut ready = HashSet::new();
    let readiness = &mut updates[1];
    tokio::time::timeout(Duration::from_secs(60), async {
        while ready.len() < n {
            let u = readiness.recv().await.context("the readiness updates ended")?;
            if u.result == ProbeResult::Success {
                ready.insert(u.container_id);
            } else {
                ready.remove(&u.container_id);
            }
        }
        anyhow::Ok(())
    })
    .await
    .context("waiting for every container's readiness to pass")??;
    for rx in &mut updates {
        while rx.try_recv().is_ok() {}
    }

    let calls = prober.total_calls();
    let cpu = CpuMeter::this_process();
    tokio::time::sleep(window).await;
    let busy = cpu.percent();
    let calls = prober.total_calls() - calls;
    let published: usize = updates
        .iter_mut()
        .map(|rx| std::iter::from_fn(|| rx.try_recv().ok()).count())
        .sum();
    println!(
        "probes: {} workers ({n} pods × readiness+liveness, exec, period {PERIOD_SECONDS}s; added after the start-up jitter window, so they tick together): {busy:.1}% of one core over {}s, {calls} probe runs (expected {}), {published} result updates (expected 0)",
        manager.worker_count(),
        window.as_secs(),
        2 * n as u64 * window.as_secs() / PERIOD_SECONDS,
    );
    println!(
        "  baseline: the same process idle (probe manager, no workers) over {}s: {idle:.1}% of one core",
        window.as_secs()
    );
    Ok(())
}

/// Part 2: the whole kubelet, fake runtime and fake prober, against a real API server.
async fn kubelet_writes(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    use node::kubelet::{Kubelet, KubeletConfig};
    use node::runtime::docker::DEFAULT_PAUSE_IMAGE;
    use node::runtime::{ContainerRuntime, ListFilter, Owner, fake::FakeRuntime};
    const NODE: &str = "bench-probes";
    let n = args.probe_pods;
    let window = Duration::from_secs(args.probe_window);
    let srv = start(&dir.join("probes-kubelet"))?;
    let c = client(&srv.kubeconfig).await?;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    // Bound to the node already (spec.nodeName): no scheduler, and no Node object is needed for API pods.
    for i in 0..n {
        let mut pod = probed_pod(&format!("probed{i:05}"), DEFAULT_PAUSE_IMAGE)?;
        pod.spec.as_mut().context("spec")?.node_name = Some(NODE.into());
        pods.create(&PostParams::default(), &pod).await?;
    }
    let mut stream = watch_from_now(&pods).await?;

    // The fake runtime holds the pause image, which the pods' container runs.
    let runtime = FakeRuntime::with_owner(Owner {
        cluster: "bench".into(),
        node: NODE.into(),
    });
    let kubelet = Kubelet::with_prober(
        c.clone(),
        Arc::new(runtime.clone()),
        KubeletConfig {
            node_name: NODE.into(),
            node_ip: "127.0.0.1".into(),
            pause_image: DEFAULT_PAUSE_IMAGE.into(),
            data_dir: dir.join("probes-kubelet-node"),
            container_gc_period: node::gc::CONTAINER_GC_PERIOD,
        },
        Arc::new(FakeProber::new()),
    );
    let cancel = CancellationToken::new();
    let _stop_kubelet = cancel.clone().drop_guard();
    // No static pod sources: an empty channel, its sender kept so it stays open.
    let (_no_static_pods, sources) = tokio::sync::mpsc::channel(1);
    let t0 = Instant::now();
    let kubelet_task = tokio::spawn(kubelet.run(sources, &[], cancel.clone()));

    let mut ready = HashSet::new();
    tokio::time::timeout(Duration::from_secs(300), async {
        while ready.len() < n {
            let p = match next_pod(&mut stream).await? {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => p,
                _ => continue,
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            if pod_ready(&p) {
                ready.insert(name);
            } else {
                ready.remove(&name);
            }
        }
        anyhow::Ok(())
    })
    .await
    .with_context(|| format!("waiting for {n} pods to be Ready"))??;
    let all_ready = t0.elapsed();
    drop(stream);

    // The window: every pod change from now on is a write by the kubelet.
    let list = pods.list(&Default::default()).await?;
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    let mut last: HashMap<String, Value> = HashMap::new();
    for p in &list.items {
        last.insert(
            p.metadata.name.clone().unwrap_or_default(),
            serde_json::to_value(p)?,
        );
    }
    let mut stream = pods.watch(&WatchParams::default(), &rv).await?.boxed();
    let events: Api<Event> = Api::all(c.clone());
    let erv = events
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut event_stream = events.watch(&WatchParams::default(), &erv).await?.boxed();
    let me = CpuMeter::this_process();
    let api = CpuMeter::start(srv.child.id());
    let deadline = tokio::time::Instant::now() + window;
    let (mut writes, mut other, mut event_writes) = (0usize, 0usize, 0usize);
    let mut changed: BTreeMap<String, usize> = BTreeMap::new();
    let mut example = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            ev = next_pod(&mut stream) => match ev? {
                WatchEvent::Modified(p) => {
                    writes += 1;
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let new = serde_json::to_value(&p)?;
                    if let Some(old) = last.insert(name.clone(), new.clone()) {
                        let diff = json_diff(&old, &new);
                        for (path, ..) in &diff {
                            *changed.entry(path.clone()).or_default() += 1;
                        }
                        if example.is_none() {
                            example = Some((name, diff));
                        }
                    }
                }
                WatchEvent::Bookmark(_) => {}
                _ => other += 1,
            },
            ev = event_stream.next() => match ev {
                Some(Ok(WatchEvent::Added(_) | WatchEvent::Modified(_))) => event_writes += 1,
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("the event watch failed: {e}"),
                None => anyhow::bail!("the event watch ended"),
            },
        }
    }
    let (me, api) = (me.percent(), api.percent());
    cancel.cancel();
    let _ = kubelet_task.await;
    // The fake runtime's own share: one relist round of the calls the pod workers make (per pod, a list by
    // pod UID, which the fake answers by scanning every container, and an inspect per container), alone.
    let round = Instant::now();
    for uid in list.items.iter().filter_map(|p| p.metadata.uid.as_deref()) {
        for found in runtime.list(&ListFilter::all().pod_uid(uid)).await? {
            runtime.inspect(&found.id).await?;
        }
    }
    let round = round.elapsed();
    println!(
        "kubelet (fake runtime, fake prober), {n} pods Ready {:.1} s after it started: {writes} pod writes in {}s of steady probing{}, {event_writes} events written; this process (kubelet: {n} pod workers relisting every 1s, {} probe workers) {me:.1}% of one core, the API server {api:.1}%",
        all_ready.as_secs_f64(),
        window.as_secs(),
        if other > 0 {
            format!(" (and {other} pods added or deleted)")
        } else {
            String::new()
        },
        2 * n,
    );
    println!(
        "  of which the fake runtime's calls: one relist round ({n} lists by pod UID and {} inspects) takes {:.0} ms alone, about {:.0}% of one core at one round a second",
        2 * n,
        round.as_secs_f64() * 1000.0,
        round.as_secs_f64() * 100.0,
    );
    if !changed.is_empty() {
        let fields: Vec<String> = changed.iter().map(|(path, n)| format!("{path} ×{n}")).collect();
        println!("  fields the writes changed: {}", fields.join(", "));
    }
    if let Some((name, diff)) = example {
        println!("  first write, pod {name}:");
        for (path, old, new) in diff {
            println!("    {path}: {old} → {new}");
        }
    }
    Ok(())
}

/// The next event of a pod watch; an error or the watch's end is an error.
async fn next_pod(stream: &mut PodWatch) -> anyhow::Result<WatchEvent<Pod>> {
    match stream.next().await {
        Some(Ok(WatchEvent::Error(e))) => anyhow::bail!("the pod watch failed: {}", e.message),
        Some(Ok(ev)) => Ok(ev),
        Some(Err(e)) => anyhow::bail!("the pod watch failed: {e}"),
        None => anyhow::bail!("the pod watch ended"),
    }
}

/// Fields the API server changes on every write, left out of the diffs.
const WRITE_FIELDS: &[&str] = &["metadata.resourceVersion", "metadata.managedFields"];

/// The leaves where `new` differs from `old`: (path, old value, new value), `null` for a missing one.
/// Arrays of the same length are compared element by element (`status.conditions[1].status`).
fn json_diff(old: &Value, new: &Value) -> Vec<(String, Value, Value)> {
    fn walk(old: &Value, new: &Value, path: String, out: &mut Vec<(String, Value, Value)>) {
        if WRITE_FIELDS.contains(&path.as_str()) {
            return;
        }
        let join = |key: &str| {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        };
        match (old, new) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in keys {
                    let (o, n) = (a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null));
                    walk(o, n, join(k), out);
                }
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                for (i, (o, n)) in a.iter().zip(b).enumerate() {
                    walk(o, n, format!("{path}[{i}]"), out);
                }
            }
            (o, n) if o != n => out.push((path, o.clone(), n.clone())),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(old, new, String::new(), &mut out);
    out
}

/// Port of testbox's HTTP server in the flip pod.
const FLIP_PORT: u16 = 8080;
const FLIP_POD: &str = "flip";

/// Part 3: readiness flips on Docker.
async fn readiness_flips(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    let built = Instant::now();
    let image = tokio::task::spawn_blocking(testbox_image::ensure_testbox_image)
        .await
        .map_err(|e| anyhow::anyhow!("building the testbox image: {e}"))?;
    let built = built.elapsed();
    let data = dir.join("probes-up");
    let srv = start_cmd(&data, "up")?;
    let result = flips(args, &srv.kubeconfig, &image, built).await;
    drop(srv);
    // The stopped cluster's containers keep running by design: they go now.
    remove_cluster_containers(&data.join("node")).await?;
    result
}

async fn flips(args: &BenchArgs, kubeconfig: &Path, image: &str, built: Duration) -> anyhow::Result<()> {
    let c = client(kubeconfig).await?;
    wait_node_ready(&c).await?;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut stream = watch_from_now(&pods).await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": FLIP_POD},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": image, "args": ["serve", "--port", FLIP_PORT.to_string(), "--log-requests"],
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": FLIP_PORT},
                    "periodSeconds": PERIOD_SECONDS, "failureThreshold": 1,
                },
            }]
        }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let (_, ready) = ready_seen(&mut stream, true, Duration::from_secs(60)).await?;
    let ip = ready
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("the flip pod has no IP")?;
    let addr = SocketAddr::new(ip.parse().context("the flip pod's IP")?, FLIP_PORT);
    let period = Duration::from_secs(PERIOD_SECONDS);
    let mut lat = Vec::with_capacity(args.flips);
    let mut seen_at = Vec::with_capacity(args.flips);
    let mut last = ready;
    for k in 0..args.flips {
        post(addr, "/unready").await?;
        ready_seen(&mut stream, false, Duration::from_secs(10)).await?;
        // The app turns ready at a moment independent of the probe timer: the flips are spread evenly over
        // one period after the Ready=False that followed a probe.
        tokio::time::sleep(phase(k, args.flips, period)).await;
        let t0 = Instant::now();
        post(addr, "/ready").await?;
        let (seen, pod) = ready_seen(&mut stream, true, Duration::from_secs(10)).await?;
        seen_at.push(Timestamp::now());
        lat.push(seen.saturating_duration_since(t0));
        last = pod;
    }
    // When the probe that got the 200 ran: testbox logs every request, and Docker stamps each log line.
    let container = last
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.container_id)
        .context("the flip pod's container has no ID")?;
    let log = container_log(container.trim_start_matches("docker://")).await?;
    let mut propagation: Vec<Duration> = passing_probes(&log)
        .iter()
        .zip(&seen_at)
        .map(|(probe, seen)| Duration::try_from(seen.duration_since(*probe)).unwrap_or_default())
        .collect();
    anyhow::ensure!(
        propagation.len() == seen_at.len(),
        "the container's log shows {} passing probes after POST /ready, not {}",
        propagation.len(),
        seen_at.len()
    );
    propagation.sort();
    lat.sort();
    let whole_ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let target = period + Duration::from_millis(100);
    println!(
        "readiness flip (health path answers 200 → Ready seen by a watch), {} flips, period {PERIOD_SECONDS}s: median {}, p90 {}, max {} (target: period + 100 ms = {})",
        lat.len(),
        whole_ms(percentile(&lat, 0.5)),
        whole_ms(percentile(&lat, 0.9)),
        whole_ms(lat.last().copied().unwrap_or_default()),
        whole_ms(target),
    );
    println!(
        "  the flips are spread evenly over the probe period; of the latency, the part after the wait for the next probe (the probe that got 200, by testbox's log timestamps in Docker, → Ready seen by the watch): median {}, max {}; testbox image ready in {:.1} s",
        whole_ms(percentile(&propagation, 0.5)),
        whole_ms(propagation.last().copied().unwrap_or_default()),
        built.as_secs_f64(),
    );
    Ok(())
}

/// The container's whole log, each line prefixed with Docker's timestamp.
async fn container_log(id: &str) -> anyhow::Result<String> {
    use node::runtime::docker::DockerRuntime;
    use node::runtime::{ContainerRuntime, LogOptions, Owner};
    let owner = Owner {
        cluster: "bench".into(),
        node: "bench".into(),
    };
    let docker = DockerRuntime::connect(owner).await?;
    let options = LogOptions {
        timestamps: true,
        ..Default::default()
    };
    let mut stream = docker.logs(id, &options).await?;
    let mut log = Vec::new();
    while let Some(chunk) = stream.next().await {
        log.extend_from_slice(&chunk?);
    }
    Ok(String::from_utf8_lossy(&log).into_owned())
}

/// From testbox's request log (`--log-requests`, with Docker's timestamps): when the first probe answered
/// 200 after each `POST /ready` ran.
fn passing_probes(log: &str) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut flipped = false;
    for line in log.lines() {
        let Some((at, text)) = line.split_once(' ') else {
            continue;
        };
        match text.trim() {
            "testbox: POST /ready -> 200" => flipped = true,
            "testbox: GET /ready -> 200" if flipped => {
                if let Ok(at) = at.parse::<Timestamp>() {
                    out.push(at);
                    flipped = false;
                }
            }
            _ => {}
        }
    }
    out
}

/// The delay before flip `k` of `n`: the middle of the `k`th of `n` equal slices of `period`.
fn phase(k: usize, n: usize, period: Duration) -> Duration {
    period.mul_f64((k as f64 + 0.5) / n.max(1) as f64)
}

/// Waits until the watch shows the flip pod with its Ready condition True (`want`) or not; returns when
/// that event arrived, and the pod.
async fn ready_seen(stream: &mut PodWatch, want: bool, limit: Duration) -> anyhow::Result<(Instant, Pod)> {
    tokio::time::timeout(limit, async {
        loop {
            if let WatchEvent::Added(p) | WatchEvent::Modified(p) = next_pod(stream).await?
                && p.metadata.name.as_deref() == Some(FLIP_POD)
                && pod_ready(&p) == want
            {
                return anyhow::Ok((Instant::now(), p));
            }
        }
    })
    .await
    .with_context(|| format!("waiting {limit:?} for the flip pod's Ready to be {want}"))?
}

/// `POST path` to testbox's HTTP server: one HTTP/1.1 request on its own connection; 200 is expected.
async fn post(addr: SocketAddr, path: &str) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let request =
            format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        conn.read_to_end(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .with_context(|| format!("POST http://{addr}{path}: no answer"))?
        .with_context(|| format!("POST http://{addr}{path}"))?;
    match status_code(&response) {
        Some(200) => Ok(()),
        Some(code) => anyhow::bail!("POST http://{addr}{path}: {code}"),
        None => anyhow::bail!("POST http://{addr}{path}: not an HTTP response"),
    }
}

/// The status code of an HTTP/1.x response's status line (`HTTP/1.1 200 OK`).
fn status_code(response: &[u8]) -> Option<u16> {
    let line = response.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    let code = parts.next()?;
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_come_from_the_status_line() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnow ready\n";
        assert_eq!(status_code(ok), Some(200));
        assert_eq!(
            status_code(b"HTTP/1.0 503 Service Unavailable\r\n\r\n"),
            Some(503)
        );
        assert_eq!(
            status_code(b"HTTP/1.1 404\r\n\r\n"),
            Some(404),
            "no reason phrase"
        );
        assert_eq!(status_code(b"HTTP/1.1 200 OK"), Some(200), "no line end yet");
        for bad in [
            &b""[..],
            b"SSH-2.0-OpenSSH\r\n",
            b"HTTP/1.1 20 OK\r\n",
            b"HTTP/2 200\r\n",
        ] {
            assert_eq!(status_code(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn diffs_name_the_changed_leaves_and_skip_what_every_write_changes() {
        let old = json!({
            "metadata": {"name": "p", "resourceVersion": "5", "managedFields": [{"time": "a"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "1"}
        });
        let new = json!({
            "metadata": {"name": "p", "resourceVersion": "6", "managedFields": [{"time": "b"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}], "hostIP": "2"}
        });
        assert_eq!(
            json_diff(&old, &new),
            [
                (
                    "status.conditions[0].status".into(),
                    json!("True"),
                    json!("False")
                ),
                ("status.hostIP".into(), Value::Null, json!("2")),
                ("status.podIP".into(), json!("1"), Value::Null),
            ]
        );
        assert!(json_diff(&old, &old).is_empty());
        let longer = json!({"a": [1, 2, 3]});
        assert_eq!(
            json_diff(&json!({"a": [1, 2]}), &longer),
            [("a".into(), json!([1, 2]), json!([1, 2, 3]))],
            "a list that grew is shown whole"
        );
    }

    #[test]
    fn the_passing_probe_of_each_flip_is_the_first_200_after_post_ready() {
        let log = "\
2025-01-01T00:00:00.100000000Z testbox: serving HTTP on port 8080
2025-01-01T00:00:00.200000000Z testbox: GET /ready -> 200
2025-01-01T00:00:01.000000000Z testbox: POST /unready -> 200
2025-01-01T00:00:01.200000000Z testbox: GET /ready -> 503
2025-01-01T00:00:01.500000000Z testbox: POST /ready -> 200
2025-01-01T00:00:02.200000000Z testbox: GET /ready -> 200
2025-01-01T00:00:03.200000000Z testbox: GET /ready -> 200
2025-01-01T00:00:03.300000000Z testbox: POST /unready -> 200
2025-01-01T00:00:03.400000000Z testbox: POST /ready -> 200
2025-01-01T00:00:04.200000000Z testbox: GET /ready -> 200
";
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(
            passing_probes(log),
            [at("2025-01-01T00:00:02.2Z"), at("2025-01-01T00:00:04.2Z")]
        );
        assert!(passing_probes("garbage\n\n").is_empty());
    }

    #[test]
    fn flips_are_spread_evenly_over_the_period() {
        let period = Duration::from_secs(1);
        let phases: Vec<Duration> = (0..4).map(|k| phase(k, 4, period)).collect();
        assert_eq!(
            phases,
            [125, 375, 625, 875].map(Duration::from_millis),
            "the middle of each quarter"
        );
        assert_eq!(phase(0, 1, period), Duration::from_millis(500));
        assert_eq!(
            phase(0, 0, period),
            Duration::from_millis(500),
            "no division by zero"
        );
    }
}
