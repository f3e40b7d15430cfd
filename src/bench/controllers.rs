//! `bench --controllers`: the controller manager. Its idle cost (RSS it adds to a process and CPU, with an
//! API server holding a handful of namespaces); a Deployment of many replicas on the fake runtime (create
//! to every pod Ready seen by a watch, and a rolling update of all of them to the Deployment reporting the
//! rollout complete); and a Deployment on Docker against Docker alone creating the same pods' containers.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    BenchArgs, CpuMeter, client, pod_ready, remove_cluster_containers, rss_kib, start, start_cmd,
    wait_node_ready, watch_from_now,
};

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    println!();
    println!("controller manager");
    idle(dir).await?;
    fake_deployment(args, dir).await?;
    docker_deployment(args, dir).await?;
    Ok(())
}

fn manager_config(leader_elect: bool) -> controllers::Config {
    controllers::Config {
        // Any PEM: only published into ConfigMaps here.
        root_ca_pem: "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".into(),
        leader_elect,
        ..Default::default()
    }
}

async fn idle(dir: &Path) -> anyhow::Result<()> {
    let srv = start(&dir.join("ctl-idle"))?;
    let c = client(&srv.kubeconfig).await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    for i in 0..10 {
        let ns = serde_json::from_value(json!({"metadata": {"name": format!("idle-{i}")}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let me = std::process::id();
    let before = rss_kib(me).unwrap_or(0);
    let cancel = CancellationToken::new();
    let manager = tokio::spawn(controllers::run(c.clone(), manager_config(true), cancel.clone()));
    // Synced and the namespaces' ServiceAccounts and ConfigMaps written; then idle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let meter = CpuMeter::this_process();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let cpu = meter.percent();
    let after = rss_kib(me).unwrap_or(0);
    println!(
        "idle controller manager (every controller and the scheduler, 12 namespaces): adds {:.1} MB of RSS (target < 5 MB), CPU {cpu:.2}% of a core (target < 0.5%)",
        after.saturating_sub(before) as f64 / 1024.0
    );
    cancel.cancel();
    let _ = manager.await;
    Ok(())
}

fn deployment(name: &str, replicas: usize, node: Option<&str>) -> anyhow::Result<Deployment> {
    use node::runtime::docker::DEFAULT_PAUSE_IMAGE;
    let mut spec = json!({"terminationGracePeriodSeconds": 1,
                          "containers": [{"name": "app", "image": DEFAULT_PAUSE_IMAGE}]});
    if let Some(n) = node {
        // Bound in the template: the fake-runtime node has no Node object for the scheduler to pick.
        spec["nodeName"] = json!(n);
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    }))?)
}

/// Watch pods until `n` distinct ones are Ready at once; the time from `t0`.
async fn ready_pods(pods: &Api<Pod>, n: usize, t0: Instant, limit: Duration) -> anyhow::Result<Duration> {
    let mut stream = watch_from_now(pods).await?;
    let mut ready = HashSet::new();
    // Pods made before the watch started are counted from a list.
    for p in pods.list(&Default::default()).await?.items {
        if pod_ready(&p) {
            ready.insert(p.metadata.name.unwrap_or_default());
        }
    }
    tokio::time::timeout(limit, async {
        while ready.len() < n {
            match stream.next().await.context("watch ended")?? {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if pod_ready(&p) && p.metadata.deletion_timestamp.is_none() {
                        ready.insert(name);
                    } else {
                        ready.remove(&name);
                    }
                }
                WatchEvent::Deleted(p) => {
                    ready.remove(&p.metadata.name.unwrap_or_default());
                }
                _ => {}
            }
        }
        anyhow::Ok(())
    })
    .await
    .with_context(|| format!("waiting for {n} Ready pods"))??;
    Ok(t0.elapsed())
}

/// Watch the Deployment until its status says the rollout of generation `generation` is complete.
async fn rolled_out(
    deploys: &Api<Deployment>,
    name: &str,
    n: i32,
    generation: i64,
    limit: Duration,
) -> anyhow::Result<()> {
    let done = |d: &Deployment| {
        let s = d.status.clone().unwrap_or_default();
        s.observed_generation.unwrap_or(0) >= generation
            && s.updated_replicas.unwrap_or(0) == n
            && s.replicas.unwrap_or(0) == n
            && s.available_replicas.unwrap_or(0) == n
    };
    let list = deploys.list(&Default::default()).await?;
    if list
        .items
        .iter()
        .any(|d| d.metadata.name.as_deref() == Some(name) && done(d))
    {
        return Ok(());
    }
    let rv = list.metadata.resource_version.unwrap_or_default();
    let mut stream = deploys.watch(&WatchParams::default(), &rv).await?.boxed();
    tokio::time::timeout(limit, async {
        loop {
            if let WatchEvent::Modified(d) = stream.next().await.context("watch ended")??
                && d.metadata.name.as_deref() == Some(name)
                && done(&d)
            {
                return anyhow::Ok(());
            }
        }
    })
    .await
    .context("waiting for the rollout")?
}

async fn fake_deployment(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    use node::kubelet::{Kubelet, KubeletConfig};
    use node::runtime::Owner;
    use node::runtime::docker::DEFAULT_PAUSE_IMAGE;
    use node::runtime::fake::FakeRuntime;
    const NODE: &str = "bench-ctl";
    let n = args.deployment_replicas;
    let srv = start(&dir.join("ctl-fake"))?;
    let c = client(&srv.kubeconfig).await?;
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    let manager = tokio::spawn(controllers::run(c.clone(), manager_config(false), cancel.clone()));
    let runtime = FakeRuntime::with_owner(Owner {
        cluster: "bench".into(),
        node: NODE.into(),
    });
    let kubelet = Kubelet::new(
        c.clone(),
        Arc::new(runtime),
        KubeletConfig {
            node_name: NODE.into(),
            node_ip: "127.0.0.1".into(),
            pause_image: DEFAULT_PAUSE_IMAGE.into(),
            data_dir: dir.join("ctl-fake-node"),
            container_gc_period: node::gc::CONTAINER_GC_PERIOD,
            dns: Default::default(),
        },
    );
    let (_no_static_pods, sources) = tokio::sync::mpsc::channel(1);
    let kubelet_task = tokio::spawn(kubelet.run(sources, &[], cancel.clone()));
    // The namespace's `default` ServiceAccount comes from the controller manager: wait for it.
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(c.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sas.get_opt("default").await?.is_none() {
        anyhow::ensure!(Instant::now() < deadline, "no default ServiceAccount");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let t0 = Instant::now();
    deploys
        .create(&PostParams::default(), &deployment("web", n, Some(NODE))?)
        .await?;
    let created = ready_pods(&pods, n, t0, Duration::from_secs(120)).await?;
    rolled_out(&deploys, "web", n as i32, 1, Duration::from_secs(60)).await?;
    println!(
        "Deployment of {n} replicas, fake runtime: create → all {n} pods Ready (watch) {:.0} ms (target < 2000 ms)",
        created.as_secs_f64() * 1000.0
    );
    let t1 = Instant::now();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"bench/rollout": "1"}}}}});
    let d = deploys
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    rolled_out(
        &deploys,
        "web",
        n as i32,
        d.metadata.generation.unwrap_or(2),
        Duration::from_secs(120),
    )
    .await?;
    println!(
        "rolling update of those {n} pods (maxSurge 25%, maxUnavailable 25%): template change → rollout complete {:.0} ms (target < 5000 ms)",
        t1.elapsed().as_secs_f64() * 1000.0
    );
    cancel.cancel();
    let _ = manager.await;
    let _ = kubelet_task.await;
    Ok(())
}

async fn docker_deployment(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    use node::runtime::docker::{DEFAULT_PAUSE_IMAGE, DockerRuntime};
    use node::runtime::{ContainerRuntime, ListFilter, Owner};
    let n = args.docker_replicas;
    // Baseline: Docker alone creating and starting the same n pods' containers, all at once.
    let docker = DockerRuntime::connect(Owner {
        cluster: format!("bench-ctl-{}", std::process::id()),
        node: "bench".into(),
    })
    .await?;
    docker.ensure_pause_image(DEFAULT_PAUSE_IMAGE).await?;
    let t0 = Instant::now();
    let all = futures_util::future::join_all((0..n).map(|i| {
        let docker = docker.clone();
        async move { super::pod_startup::docker_pod(&docker, &format!("ctl{i}")).await }
    }))
    .await;
    let baseline = t0.elapsed();
    for r in all {
        r?;
    }
    for c in docker.list(&ListFilter::all()).await? {
        let _ = docker.remove_container(&c.id).await;
    }

    let data = dir.join("ctl-docker");
    let srv = start_cmd(&data, "up")?;
    let c = client(&srv.kubeconfig).await?;
    wait_node_ready(&c).await?;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(c.clone(), "default");
    while sas.get_opt("default").await?.is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let t0 = Instant::now();
    deploys
        .create(&PostParams::default(), &deployment("web", n, None)?)
        .await?;
    let took = ready_pods(&pods, n, t0, Duration::from_secs(300)).await;
    drop(srv);
    remove_cluster_containers(&data.join("node")).await?;
    let took = took?;
    println!(
        "Deployment of {n} replicas on Docker: create → all Ready {:.0} ms; Docker alone, the same {n} pods' containers at once: {:.0} ms; ratio {:.2} (target ≤ 1.3)",
        took.as_secs_f64() * 1000.0,
        baseline.as_secs_f64() * 1000.0,
        took.as_secs_f64() / baseline.as_secs_f64()
    );
    Ok(())
}
