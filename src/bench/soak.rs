//! `bench --soak MINUTES`: pod churn on Docker under `kubeling up` for that long, batches of pods created,
//! run until Ready, and deleted until gone, one batch after another; the `kubeling` process's RSS and open
//! file descriptors are sampled every minute. A leak shows as a rise from the first samples to the last.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::{BenchArgs, client, pod_ready, rss_kib, wait_node_ready, with_testbox_cluster};

/// Open file descriptors of a process.
fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The pid of the `kubeling up` serving `kubeconfig` (the child the cluster helper started): the process
/// listening on the kubeconfig's port is found through /proc by its command line and data dir.
fn server_pid(data: &Path) -> Option<u32> {
    let want = data.to_string_lossy().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (cmd.contains(" up ") && cmd.contains(&want)).then_some(pid)
    })
}

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    let minutes = args.soak;
    let batch = args.soak_batch;
    let data = dir.join("soak");
    let ttl = args.soak_event_ttl.as_str();
    with_testbox_cluster(&data, &["--event-ttl", ttl], async |kubeconfig: &Path, image: &str| {
        let c = client(kubeconfig).await?;
        wait_node_ready(&c).await?;
        let pid = server_pid(&data).ok_or_else(|| anyhow::anyhow!("the kubeling process"))?;
        let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
        println!();
        println!(
            "soak: {minutes} min of pod churn on Docker, {batch} pods per batch (create, Ready, delete, gone); Events kept {ttl}"
        );
        println!("minute  batches  pods  RSS MB  open fds");
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(60 * minutes);
        let mut next_sample = t0;
        let (mut batches, mut total) = (0u64, 0u64);
        let mut samples = Vec::new();
        while Instant::now() < end {
            if Instant::now() >= next_sample {
                let (rss, fds) = (rss_kib(pid).unwrap_or(0) / 1024, open_fds(pid).unwrap_or(0));
                println!(
                    "{:>6}  {batches:>7}  {total:>4}  {rss:>6}  {fds:>8}",
                    t0.elapsed().as_secs() / 60
                );
                samples.push((rss, fds));
                next_sample += Duration::from_secs(60);
            }
            let names: Vec<String> = (0..batch).map(|i| format!("soak-{batches}-{i}")).collect();
            for n in &names {
                let p: Pod = serde_json::from_value(json!({
                    "metadata": {"name": n, "labels": {"app": "soak"}},
                    "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": image, "args": ["serve", "--port", "8080"]}]}
                }))?;
                pods.create(&PostParams::default(), &p).await?;
            }
            wait_until(&pods, Duration::from_secs(120), |l| {
                l.iter().filter(|p| pod_ready(p)).count() == names.len()
            })
            .await?;
            pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=soak"))
                .await?;
            wait_until(&pods, Duration::from_secs(120), |l| l.is_empty()).await?;
            batches += 1;
            total += batch as u64;
        }
        let (rss, fds) = (rss_kib(pid).unwrap_or(0) / 1024, open_fds(pid).unwrap_or(0));
        println!(
            "{:>6}  {batches:>7}  {total:>4}  {rss:>6}  {fds:>8}",
            t0.elapsed().as_secs() / 60
        );
        samples.push((rss, fds));
        // The first minute includes start-up allocation; compare from the second sample on.
        let base = samples.get(1).or(samples.first()).copied().unwrap_or((0, 0));
        println!(
            "soak: {total} pods in {batches} batches; RSS {} -> {} MB, open fds {} -> {} (from the second sample to the end)",
            base.0, rss, base.1, fds
        );
        Ok(())
    })
    .await
}

/// Polls the `app=soak` pods until `done` holds.
async fn wait_until(pods: &Api<Pod>, limit: Duration, done: impl Fn(&[Pod]) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    let lp = ListParams::default().labels("app=soak");
    loop {
        let l = pods.list(&lp).await?.items;
        if done(&l) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "soak pods did not settle within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
