//! `bench --sim`: the simulated runtime at scale. The API server runs alone as a child process (with the
//! ServiceAccount admission plugin on, as `up` has it), so its RSS and CPU are its own; the controller
//! manager (with the scheduler) and `--sim-nodes` node agents on the simulated runtime run in this process.
//! A Deployment of `--sim-pods` replicas is created and a watch times when every pod exists, is bound, and
//! is Ready; then, with them all running, a list of every pod (through kube, and `kubectl get pods -A` when
//! kubectl is on PATH) and the latency of a watch event are timed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{BenchArgs, CpuMeter, Server, client, pod_ready, rss_kib, stats, watch_from_now};

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    let (n, node_count) = (args.sim_pods, args.sim_nodes);
    println!();
    println!("simulated runtime ({node_count} nodes, {n} pods)");
    let srv = start_apiserver(&dir.join("sim"))?;
    let api_pid = srv.child.id();
    let c = client(&srv.kubeconfig).await?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let manager = tokio::spawn(controllers::run(
        c.clone(),
        controllers::Config {
            // Any PEM: only published into ConfigMaps here.
            root_ca_pem: "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".into(),
            leader_elect: false,
            ..Default::default()
        },
        cancel.clone(),
    ));
    let mut agents = Vec::new();
    for i in 0..node_count {
        let mut cfg = node::agent::AgentConfig::new(&dir.join(format!("sim-node-{i}")));
        cfg.node_name = format!("sim-{}", i + 1);
        cfg.runtime = node::agent::RuntimeChoice::Sim(
            node::runtime::sim::PodCidr::for_node(i).map_err(anyhow::Error::msg)?,
        );
        cfg.services = false;
        agents.push(tokio::spawn(node::agent::run(c.clone(), cfg, cancel.clone())));
    }
    wait_nodes_ready(&c, node_count as usize).await?;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(c.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sas.get_opt("default").await?.is_none() {
        anyhow::ensure!(Instant::now() < deadline, "no default ServiceAccount");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let stream = watch_from_now(&pods).await?;
    let api_cpu = CpuMeter::start(api_pid);
    let own_cpu = CpuMeter::this_process();
    let t0 = Instant::now();
    deploys.create(&PostParams::default(), &deployment(n)?).await?;
    let marks = watch_rollout(&pods, stream, n, t0, Duration::from_secs(args.sim_timeout)).await?;
    let (api_pct, own_pct) = (api_cpu.percent(), own_cpu.percent());
    println!(
        "Deployment of {n} replicas on {node_count} simulated nodes: all created {:.1} s, all bound {:.1} s, all Ready (watch) {:.1} s (target < 60 s)",
        marks.created.as_secs_f64(),
        marks.bound.as_secs_f64(),
        marks.ready.as_secs_f64()
    );
    println!(
        "meanwhile CPU: API server {api_pct:.0}% of a core, controller manager + {node_count} node agents {own_pct:.0}%"
    );
    println!(
        "pods per node: {}",
        marks
            .per_node
            .iter()
            .map(|(node, count)| format!("{node} {count}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Let the last status writes land before measuring the steady state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "RSS with {n} pods Ready: API server process {:.0} MB (target < 300 MB); bench process (controller manager, {node_count} node agents, the watch) {:.0} MB",
        rss_kib(api_pid).unwrap_or(0) as f64 / 1024.0,
        rss_kib(std::process::id()).unwrap_or(0) as f64 / 1024.0
    );
    let all: Api<Pod> = Api::all(c.clone());
    let mut lists = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let got = all.list(&Default::default()).await?;
        lists.push(t.elapsed());
        anyhow::ensure!(got.items.len() >= n, "the list has {} pods", got.items.len());
    }
    stats(&format!("LIST of all {n}+ pods through kube (5 runs)"), lists);
    if let Some(kubectl) = kubectl() {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let status = Command::new(&kubectl)
                .args(["get", "pods", "-A", "--kubeconfig"])
                .arg(&srv.kubeconfig)
                .stdout(Stdio::null())
                .status()?;
            runs.push(t.elapsed());
            anyhow::ensure!(status.success(), "kubectl get pods -A failed");
        }
        stats("kubectl get pods -A (3 runs)", runs);
    }
    watch_latency(&c).await?;
    cancel.cancel();
    let _ = manager.await;
    for a in agents {
        let _ = a.await;
    }
    drop(srv);
    Ok(())
}

/// `kubeling apiserver` on a free port, the ServiceAccount admission plugin on (the controller manager in
/// this process makes the `default` ServiceAccounts).
fn start_apiserver(data_dir: &Path) -> anyhow::Result<Server> {
    use std::io::{BufRead, BufReader};
    let t0 = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["apiserver", "--port", "0", "--no-kubeconfig-merge", "--data-dir"])
        .arg(data_dir)
        .env("KUBELING_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting kubeling apiserver")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    let kubeconfig = line
        .rsplit("KUBECONFIG=")
        .next()
        .context("ready line")?
        .trim()
        .into();
    Ok(Server {
        child,
        kubeconfig,
        ready_after: t0.elapsed(),
    })
}

fn kubectl() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("kubectl"))
        .find(|p| p.is_file())
}

fn deployment(replicas: usize) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": "sim"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "sim"}},
                 "template": {"metadata": {"labels": {"app": "sim"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))?)
}

async fn wait_nodes_ready(c: &kube::Client, n: usize) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(c.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = nodes
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= n {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{ready} of {n} nodes Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When every pod of the rollout existed, was bound, and was Ready, and where they went.
struct Marks {
    created: Duration,
    bound: Duration,
    ready: Duration,
    per_node: std::collections::BTreeMap<String, usize>,
}

/// Follows the pods until `n` are Ready; a watch the server ends (its timeout) is resumed from the last
/// resourceVersion seen.
async fn watch_rollout(
    pods: &Api<Pod>,
    mut stream: super::PodWatch,
    n: usize,
    t0: Instant,
    limit: Duration,
) -> anyhow::Result<Marks> {
    let (mut seen, mut bound, mut ready) = (HashSet::new(), HashSet::new(), HashSet::new());
    let mut per_node = std::collections::BTreeMap::new();
    let (mut created_at, mut bound_at) = (None, None);
    let mut last_rv = String::new();
    let watched = tokio::time::timeout(limit, async {
        while ready.len() < n {
            let Some(event) = stream.next().await else {
                stream = if last_rv.is_empty() {
                    watch_from_now(pods).await?
                } else {
                    pods.watch(&WatchParams::default(), &last_rv).await?.boxed()
                };
                continue;
            };
            match event? {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                    if let Some(rv) = &p.metadata.resource_version {
                        last_rv.clone_from(rv);
                    }
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone())
                        && bound.insert(name.clone())
                    {
                        *per_node.entry(node).or_insert(0) += 1;
                    }
                    if pod_ready(&p) {
                        ready.insert(name.clone());
                    }
                    seen.insert(name);
                    if created_at.is_none() && seen.len() >= n {
                        created_at = Some(t0.elapsed());
                    }
                    if bound_at.is_none() && bound.len() >= n {
                        bound_at = Some(t0.elapsed());
                    }
                }
                WatchEvent::Error(e) => anyhow::bail!("watch error: {}", e.message),
                _ => {}
            }
        }
        anyhow::Ok(())
    })
    .await;
    match watched {
        Ok(r) => r?,
        Err(_) => anyhow::bail!(
            "after {limit:?}: {} pods created, {} bound, {} Ready of {n}",
            seen.len(),
            bound.len(),
            ready.len()
        ),
    }
    let ready_at = t0.elapsed();
    Ok(Marks {
        created: created_at.unwrap_or(ready_at),
        bound: bound_at.unwrap_or(ready_at),
        ready: ready_at,
        per_node,
    })
}

/// Create → ADDED latency of ConfigMaps on a watch, with the pods all running.
async fn watch_latency(c: &kube::Client) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let rv = cms
        .list(&Default::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut stream = cms.watch(&Default::default(), &rv).await?.boxed();
    let mut times = Vec::new();
    for i in 0..20 {
        let name = format!("sim-watch-{i}");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        let t = Instant::now();
        cms.create(&PostParams::default(), &cm).await?;
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let WatchEvent::Added(got) = stream.next().await.context("watch ended")??
                    && got.metadata.name.as_deref() == Some(name.as_str())
                {
                    return anyhow::Ok(());
                }
            }
        })
        .await
        .context("waiting for the watch event")??;
        times.push(t.elapsed());
    }
    stats(
        "watch latency with the pods running (ConfigMap create → ADDED, 20 runs)",
        times,
    );
    Ok(())
}
