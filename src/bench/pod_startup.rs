//! `bench --node`: pod start-up on Docker under `kubeling up` (create request to Ready seen through a watch,
//! one pod after another and all at once; static pods, manifest written to mirror pod Ready), against
//! Docker creating and starting the same pause and app containers itself; and the idle footprint of
//! `kubeling up`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchEvent};
use serde_json::json;

use super::{
    BenchArgs, client, cpu_percent, cpu_ticks, pod_ready, remove_cluster_containers, rss_kib, start_cmd,
    stats, wait_node_ready, watch_from_now,
};

/// One pod as Docker alone would make it: the pause container, then the app container joining it.
pub(super) async fn docker_pod(
    docker: &node::runtime::docker::DockerRuntime,
    name: &str,
) -> anyhow::Result<()> {
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

/// Pod start-up: from the create request to Ready seen through a watch, for pods created one after another
/// and all at once; the baseline is Docker creating and starting the same pause and app containers itself.
pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
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
    wait_node_ready(&c).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t0 = cpu_ticks(pid).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t1 = cpu_ticks(pid).unwrap_or(0);
    println!(
        "idle kubeling up (API server + scheduler + node agent, no pods): RSS {} MB (target < 30 MB), CPU {:.2}% of a core (target < 1%)",
        rss_kib(pid).unwrap_or(0) / 1024,
        cpu_percent(t1 - t0, Duration::from_secs(5))
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
    remove_cluster_containers(&dir.join("pods/node")).await
}
