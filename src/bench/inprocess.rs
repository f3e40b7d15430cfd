//! The server's own work per pod create, measured in this process with no HTTP, TLS or client in the way:
//! what the registry costs over an in-memory store (decode, defaulting, validation, managed fields, the
//! storage's commit), what the durable commit costs over sled (the same storage on a real data dir), and
//! the engine's floor (sled's write plus flush, with no storage layer). Beside the end-to-end figures these
//! say where a create's time goes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::registry::{Registry, WriteOptions, resources};
use apiserver::storage::{Change, Decision, MemoryStore, Reusable, SledStore, Storage, Store};
use apiserver::watch::HubConfig;
use serde_json::{Value, json};

use super::{cpu_ticks, percentile};

fn pod_body(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "kubeling/testbox:0.1", "ports": [{"containerPort": 8080}]}]}
    })
}

/// Median, mean and p99 of `lat`, and this process's CPU per operation since `ticks_before` (its threads:
/// the caller's, sled's and the flusher), formatted.
fn summary(lat: &mut [Duration], ticks_before: u64) -> String {
    let ticks = cpu_ticks(std::process::id())
        .unwrap_or(ticks_before)
        .saturating_sub(ticks_before);
    let cpu = Duration::from_secs_f64(ticks as f64 / super::CLK_TCK / lat.len().max(1) as f64);
    lat.sort();
    let mean = lat.iter().sum::<Duration>() / lat.len().max(1) as u32;
    format!(
        "median {}, mean {}, p99 {}; CPU {} each",
        us(percentile(lat, 0.5)),
        us(mean),
        us(percentile(lat, 0.99)),
        us(cpu)
    )
}

fn ticks() -> u64 {
    cpu_ticks(std::process::id()).unwrap_or(0)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Serial pod creates through a registry over `storage`, each timed.
async fn registry_creates(storage: Storage, n: usize) -> anyhow::Result<Vec<Duration>> {
    let registry = Registry::new(storage);
    registry.bootstrap().await?;
    let info = resources::find("", "v1", "pods").ok_or_else(|| anyhow::anyhow!("pods are served"))?;
    let opts = WriteOptions::default();
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let body = pod_body(&format!("p{i:06}"));
        let t = Instant::now();
        registry
            .create(info, Some("default"), body, &opts)
            .await
            .map_err(|e| anyhow::anyhow!("create: {e:?}"))?;
        lat.push(t.elapsed());
    }
    Ok(lat)
}

/// A stored pod's bytes as the registry writes them, for the storage-only figures.
fn stored_pod(name: &str) -> Value {
    let mut v = pod_body(name);
    v["metadata"]["namespace"] = json!("default");
    v["metadata"]["uid"] = json!("6f1c1a52-33a4-4bd6-9c1e-6c5d1c0e8a11");
    v["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    v
}

pub(super) async fn run(dir: &Path, n: usize) -> anyhow::Result<()> {
    println!();
    println!("server work per pod create, in process (no HTTP, TLS or client), {n} serial creates each:");

    let memory = Storage::open(Arc::new(MemoryStore::default()), HubConfig::default())?;
    let t0 = ticks();
    let mut lat = registry_creates(memory.clone(), n).await?;
    memory.shutdown();
    println!(
        "  registry create over an in-memory store:         {}",
        summary(&mut lat, t0)
    );

    let sled_dir = dir.join("inprocess-registry");
    let sled = Storage::open(Arc::new(SledStore::open(&sled_dir)?), HubConfig::default())?;
    let t0 = ticks();
    let mut lat = registry_creates(sled.clone(), n).await?;
    sled.shutdown();
    println!(
        "  registry create over sled (durable):             {}",
        summary(&mut lat, t0)
    );

    // The storage layer alone over sled: one key written and made durable per call.
    let sled_dir = dir.join("inprocess-storage");
    let storage = Storage::open(Arc::new(SledStore::open(&sled_dir)?), HubConfig::default())?;
    let t0 = ticks();
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("s{i:06}");
        let mut value = Reusable::new(stored_pod(&name), &storage);
        let t = Instant::now();
        storage
            .write::<apiserver::storage::StoreError>(&format!("/pods/default/{name}"), |_| {
                Ok(Decision::Put(value.take()))
            })
            .await?;
        lat.push(t.elapsed());
    }
    storage.shutdown();
    println!(
        "  storage write over sled (commit, flush, publish): {}",
        summary(&mut lat, t0)
    );

    // The engine's floor: sled's write of the same bytes and its flush, on this thread.
    let engine_dir = dir.join("inprocess-engine");
    let engine = SledStore::open(&engine_dir)?;
    let bytes = serde_json::to_vec(&stored_pod("e"))?;
    let t0 = ticks();
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let change = Change {
            key: format!("/pods/default/e{i:06}"),
            value: Some(bytes.clone().into()),
        };
        let t = Instant::now();
        engine.write(i as u64 + 1, &[change])?;
        engine.flush()?;
        lat.push(t.elapsed());
    }
    println!(
        "  sled write + flush alone (the engine's floor):   {}",
        summary(&mut lat, t0)
    );
    Ok(())
}
