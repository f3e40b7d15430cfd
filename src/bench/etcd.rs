//! `bench --etcd`: the etcd store. A real etcd (the `etcd` on PATH, in a temp dir, on free ports), two
//! `kubeling apiserver --store etcd=...` sharing one data dir: serial pod creates through one (against the
//! same client's `GET /version` floor and upstream's figure), and how long after a write's acknowledgement
//! by one server each of `--watchers` watchers on the other has the event.

use std::path::Path;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

use super::api::{concurrent_creates, fan_out, pod, serial_version_gets};
use super::{BenchArgs, client, ms, percentile, start_with};

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    let base = dir.join("etcd-bench");
    std::fs::create_dir_all(&base)?;
    let etcd = tokio::task::spawn_blocking({
        let base = base.clone();
        move || kubeling_testing::etcd::Etcd::start_in(&base)
    })
    .await??;
    let url = etcd.url();
    let store = format!("etcd={url}");
    let data = base.join("data");
    let flags = [
        "--store",
        store.as_str(),
        "--disable-admission-plugins=ServiceAccount",
    ];
    let a = start_with(&data, "apiserver", &flags)?;
    // Read before the second server rewrites DATA/kubeconfig with its own address.
    let ca = client(&a.kubeconfig).await?;
    let b = start_with(&data, "apiserver", &flags)?;
    let cb = client(&b.kubeconfig).await?;
    println!();
    println!(
        "etcd store: two API servers on one etcd ({url}); upstream kube-apiserver on etcd: 400-525 serial creates/s"
    );

    Api::<Namespace>::all(ca.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "bench"}}))?,
        )
        .await?;
    let pods_a: Api<Pod> = Api::namespaced(ca.clone(), "bench");
    let n = args.pods.min(1000);
    let mut lat = Vec::with_capacity(n);
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        pods_a
            .create(&PostParams::default(), &pod(&format!("e{i:05}")))
            .await?;
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    let version = serial_version_gets(&ca, 200).await?;
    println!(
        "etcd store, sequential pod creates through one server: {:.0}/s; p50 {}, p99 {}; GET /version floor {}",
        n as f64 / total.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(version)
    );

    // Eight clients at once through B (DATA/kubeconfig is B's now): writes of different keys go to etcd
    // concurrently, where etcd commits them together.
    print!("etcd store, ");
    concurrent_creates(&b.kubeconfig, "bench", 8, n / 8, Some(b.child.id()), "").await?;

    // Watchers on B, writes through A.
    let pods_b: Api<Pod> = Api::namespaced(cb.clone(), "bench");
    let writes = 50;
    let (delivered, delays) = fan_out(&pods_a, &pods_b, args.watchers, writes, "efan").await?;
    println!(
        "etcd store, watch fan-out to {} watchers on the other API server: {delivered} of {} deliveries; after the write's acknowledgement p50 {}, p99 {} (target p99 < 5 ms)",
        args.watchers,
        writes * args.watchers,
        ms(percentile(&delays, 0.5)),
        ms(percentile(&delays, 0.99))
    );
    drop((a, b));
    Ok(())
}
