//! `--harness`: the Rust test harness (`kubeling-testing`) and `kubeling test`'s in-process cluster: how long
//! `TestCluster::start` takes to a serving API server, control plane only (envtest's shape) and with a node
//! agent on Docker (plus the time to the node Ready), each timed `--starts` times in this process.

use std::time::{Duration, Instant};

use kubeling_testing::{Options, TestCluster};

use super::{BenchArgs, ms, percentile};

pub(super) async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    println!("\n== test harness: a fresh cluster in this process ==");
    let mut control = Vec::new();
    for _ in 0..args.starts.max(1) {
        let c = TestCluster::start_with(Options::control_plane_only()).await?;
        control.push(c.started_in());
        c.stop().await;
    }
    control.sort();
    println!(
        "TestCluster::start, control plane only (API server + controllers): median {}, min {} over {} starts (target < 100 ms)",
        ms(percentile(&control, 0.5)),
        ms(control[0]),
        control.len()
    );
    let mut whole = Vec::new();
    let mut ready = Vec::new();
    for _ in 0..args.starts.clamp(1, 3) {
        let t0 = Instant::now();
        let c = TestCluster::start().await?;
        whole.push(c.started_in());
        c.wait_for_nodes(Duration::from_secs(60)).await?;
        ready.push(t0.elapsed());
        c.stop().await;
    }
    whole.sort();
    ready.sort();
    println!(
        "TestCluster::start with a Docker node: API serving median {}, node Ready median {} over {} starts",
        ms(percentile(&whole, 0.5)),
        ms(percentile(&ready, 0.5)),
        whole.len()
    );
    Ok(())
}
