//! `kubeling bench`: measures kubeling the way the issues state their targets, on this machine, and prints
//! the figures. Nothing here asserts: timings on a shared 2-core machine are for reading, not gating.
//!
//! [`api`] always runs (the API server as a child process); `--node` adds [`pod_startup`] (pod start-up on
//! Docker against Docker alone), `--probes` adds [`probes`] (the probe machinery's cost, the kubelet's API
//! writes while probes keep passing, and readiness flip latency on Docker), `--dns` adds [`dns`] (the cluster
//! DNS server's time to a Service resolving and its query times), `--port-forward` adds [`port_forward`]
//! (latency and throughput through `kubectl port-forward` against the pod IP), `--sim` adds [`sim`] (a
//! Deployment of 10,000 pods on simulated nodes: time to Ready, API server memory, list and watch latency
//! under that load). This module holds the options
//! and what the parts share: starting a child `kubeling`, a client for it, CPU and memory of a process,
//! percentiles, and watches.

mod api;
mod controllers;
mod crd;
mod dns;
mod etcd;
mod harness;
mod inprocess;
mod pod_startup;
mod port_forward;
mod probes;
mod runner;
mod services;
mod sim;
mod soak;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, WatchEvent, WatchParams};

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
    /// Also measure probes: the probe machinery's CPU (in process, fake prober), the kubelet's API writes
    /// while probes keep passing (fake runtime), and readiness flip latency on Docker (`kubeling up`;
    /// builds the kubeling/testbox:0.1 image when it is missing).
    #[arg(long)]
    pub(crate) probes: bool,
    /// Pods (each with a readiness and a liveness probe, period 1 s) for the probe measurements.
    #[arg(long, default_value_t = 1000)]
    pub(crate) probe_pods: usize,
    /// Seconds over which the probe measurements count CPU, probe runs and writes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) probe_window: u64,
    /// Readiness flips to time on Docker.
    #[arg(long, default_value_t = 20)]
    pub(crate) flips: usize,
    /// Also measure the controller manager: its idle cost, a Deployment on the fake runtime (create and a
    /// rollout) and a Deployment on Docker against Docker alone.
    #[arg(long)]
    pub(crate) controllers: bool,
    /// Replicas of the fake-runtime Deployment.
    #[arg(long, default_value_t = 100)]
    pub(crate) deployment_replicas: usize,
    /// Replicas of the Docker Deployment.
    #[arg(long, default_value_t = 20)]
    pub(crate) docker_replicas: usize,
    /// Also measure the cluster DNS server: a Service's time to resolve, and query times from the host.
    #[arg(long)]
    pub(crate) dns: bool,
    /// Queries to time per kind of name.
    #[arg(long, default_value_t = 1000)]
    pub(crate) dns_queries: usize,
    /// Also measure port-forward on Docker: per-request latency and echo throughput through
    /// `kubectl port-forward` against a direct connection to the pod IP (needs kubectl on PATH).
    #[arg(long)]
    pub(crate) port_forward: bool,
    /// Sequential GETs timed each way for the port-forward measurement.
    #[arg(long, default_value_t = 200)]
    pub(crate) pf_requests: usize,
    /// MiB echoed up and back down each way for the port-forward measurement.
    #[arg(long, default_value_t = 64)]
    pub(crate) pf_mib: usize,
    /// Also measure Services: HTTP through a ClusterIP against straight to the pod IP, from a pod on Docker
    /// (`kubeling up`; builds the kubeling/testbox:0.1 image when it is missing).
    #[arg(long)]
    pub(crate) services: bool,
    /// HTTP requests per path for the Services measurement.
    #[arg(long, default_value_t = 2000)]
    pub(crate) service_requests: usize,
    /// Client threads for the Services measurement.
    #[arg(long, default_value_t = 4)]
    pub(crate) service_concurrency: usize,
    /// Also measure the test harness: `TestCluster::start` in this process, control plane only and with a
    /// node on Docker.
    #[arg(long)]
    pub(crate) harness: bool,
    /// Also measure `kubeling test`'s own cost: the overhead of a step (apply + assert) over the same
    /// requests made directly, and a suite of 20 independent pod tests in parallel against its slowest test.
    #[arg(long)]
    pub(crate) runner: bool,
    /// Steps of the runner's step-overhead test.
    #[arg(long, default_value_t = 20)]
    pub(crate) runner_steps: usize,
    /// How long each simulated container of the runner's pod tests takes to start.
    #[arg(long, default_value_t = 2000)]
    pub(crate) runner_pod_delay_ms: u64,
    /// Also measure the simulated runtime: the API server as a child, the controller manager and
    /// `--sim-nodes` simulated node agents in process, a Deployment of `--sim-pods` replicas.
    #[arg(long)]
    pub(crate) sim: bool,
    /// Replicas of the simulated Deployment.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) sim_pods: usize,
    /// Simulated nodes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) sim_nodes: u32,
    /// Seconds to wait for the simulated Deployment's pods to be Ready before giving up.
    #[arg(long, default_value_t = 600)]
    pub(crate) sim_timeout: u64,
    /// Also measure the etcd store: two API servers on one etcd (started from `etcd` on PATH, in a temp
    /// dir): serial pod creates through one, and watch fan-out from it to watchers on the other.
    #[arg(long)]
    pub(crate) etcd: bool,
    /// Also run a soak: this many minutes of pod churn on Docker (`kubeling up`), printing the process's RSS
    /// and open file descriptors every minute (e.g. 60).
    #[arg(long, default_value_t = 0)]
    pub(crate) soak: u64,
    /// Pods per batch of the soak.
    #[arg(long, default_value_t = 10)]
    pub(crate) soak_batch: usize,
    /// The soak cluster's `--event-ttl` (a Go duration). Shorter than the default hour, so that the Events
    /// kept reach their steady state early in the soak and a rise after that is a leak, not retention.
    #[arg(long, default_value = "10m")]
    pub(crate) soak_event_ttl: String,
    /// Skip the API server measurements that otherwise always run.
    #[arg(long)]
    pub(crate) no_api: bool,
}

/// Run every measurement asked for and print the figures.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    if !args.no_api {
        api::run(&args, tmp.path()).await?;
        inprocess::run(tmp.path(), args.pods.min(5000)).await?;
    }
    if args.node {
        pod_startup::run(&args, tmp.path()).await?;
    }
    if args.probes {
        probes::run(&args, tmp.path()).await?;
    }
    if args.controllers {
        controllers::run(&args, tmp.path()).await?;
    }
    if args.dns {
        dns::run(&args, tmp.path()).await?;
    }
    if args.port_forward {
        port_forward::run(&args, tmp.path()).await?;
    }
    if args.services {
        services::run(&args, tmp.path()).await?;
    }
    if args.harness {
        harness::run(&args).await?;
    }
    if args.runner {
        runner::run(&args, tmp.path()).await?;
    }
    if args.sim {
        sim::run(&args, tmp.path()).await?;
    }
    if args.etcd {
        etcd::run(&args, tmp.path()).await?;
    }
    if args.soak > 0 {
        soak::run(&args, tmp.path()).await?;
    }
    Ok(())
}

/// A `kubeling` child process, killed when dropped.
struct Server {
    child: Child,
    kubeconfig: PathBuf,
    ready_after: Duration,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kubeling apiserver` on a free port.
fn start(data_dir: &Path) -> anyhow::Result<Server> {
    start_cmd(data_dir, "apiserver")
}

/// `kubeling <subcommand>` on a free port, once it has printed its ready line.
fn start_cmd(data_dir: &Path, subcommand: &str) -> anyhow::Result<Server> {
    start_with(data_dir, subcommand, &[])
}

/// `start_cmd` with `extra` flags.
fn start_with(data_dir: &Path, subcommand: &str, extra: &[&str]) -> anyhow::Result<Server> {
    use std::io::{BufRead, BufReader};
    let t0 = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args([subcommand, "--port", "0", "--no-kubeconfig-merge", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        // The API server alone has no controller manager to make `default` ServiceAccounts.
        .args(if subcommand == "apiserver" {
            &["--disable-admission-plugins=ServiceAccount"][..]
        } else {
            &[]
        })
        .env("KUBELING_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting kubeling {subcommand}"))?;
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

/// The value at fraction `p` of `sorted` (nearest rank, rounding to the closer one; the median of an even
/// count is the upper middle value).
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

/// Prints median, p99 and max of `v` after `label`; returns the median.
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

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Clock ticks per second of the CPU times in `/proc/<pid>/stat` (USER_HZ: 100 on Linux).
const CLK_TCK: f64 = 100.0;

/// User + system CPU time of a process so far, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// CPU time of `ticks` over `window`, as a percentage of one core.
fn cpu_percent(ticks: u64, window: Duration) -> f64 {
    ticks as f64 / CLK_TCK / window.as_secs_f64() * 100.0
}

/// A process's CPU use from the moment it is made.
struct CpuMeter {
    pid: u32,
    ticks: u64,
    at: Instant,
}

impl CpuMeter {
    fn start(pid: u32) -> CpuMeter {
        CpuMeter {
            pid,
            ticks: cpu_ticks(pid).unwrap_or(0),
            at: Instant::now(),
        }
    }

    /// This process (the bench itself, with what it runs in process).
    fn this_process() -> CpuMeter {
        CpuMeter::start(std::process::id())
    }

    /// Percent of one core since the start.
    fn percent(&self) -> f64 {
        let now = cpu_ticks(self.pid).unwrap_or(self.ticks);
        cpu_percent(now.saturating_sub(self.ticks), self.at.elapsed())
    }
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

type PodWatch = futures_util::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>;

/// A watch of `pods` from the current list's resourceVersion: every change after this moment.
async fn watch_from_now(pods: &Api<Pod>) -> anyhow::Result<PodWatch> {
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

/// Waits (polling the Node list) until a Node reports Ready: `kubeling up`'s node agent has registered.
async fn wait_node_ready(c: &kube::Client) -> anyhow::Result<()> {
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
    Ok(())
}

/// Builds the testbox image, runs `measure(kubeconfig, image)` against a `kubeling up` in `data`, then stops
/// it and removes the containers it left in Docker (whatever `measure` returned).
async fn with_testbox_cluster(
    data: &Path,
    extra: &[&str],
    measure: impl AsyncFnOnce(&Path, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let image = tokio::task::spawn_blocking(probes::testbox_image::ensure_testbox_image)
        .await
        .map_err(|e| anyhow::anyhow!("building the testbox image: {e}"))?;
    let srv = start_with(data, "up", extra)?;
    let result = measure(&srv.kubeconfig, &image).await;
    drop(srv);
    remove_cluster_containers(&data.join("node")).await?;
    result
}

/// Removes the containers a stopped `kubeling up` left in Docker (they outlive it by design): those of the
/// cluster whose node data dir is `node_dir`, by the cluster id kept there.
async fn remove_cluster_containers(node_dir: &Path) -> anyhow::Result<()> {
    use node::runtime::docker::DockerRuntime;
    use node::runtime::{ContainerRuntime, ListFilter, Owner};
    let cluster = std::fs::read_to_string(node_dir.join("cluster-id")).unwrap_or_default();
    let leftovers = DockerRuntime::connect(Owner {
        cluster: cluster.trim().to_string(),
        node: node::agent::default_node_name(),
    })
    .await?;
    for c in leftovers.list(&ListFilter::all()).await? {
        let _ = leftovers.remove_container(&c.id).await;
    }
    // The cluster's service gateway and Docker network.
    node::network::remove(leftovers.client(), cluster.trim()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 0.0), Duration::from_millis(1));
        assert_eq!(
            percentile(&v, 0.5),
            Duration::from_millis(11),
            "upper middle of an even count"
        );
        assert_eq!(percentile(&v, 0.9), Duration::from_millis(18));
        assert_eq!(percentile(&v, 1.0), Duration::from_millis(20));
        assert_eq!(percentile(&v[..3], 0.5), Duration::from_millis(2));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn cpu_ticks_are_a_share_of_one_core() {
        assert_eq!(cpu_percent(100, Duration::from_secs(10)), 10.0);
        assert_eq!(cpu_percent(0, Duration::from_secs(5)), 0.0);
    }
}
