//! `--runner`: what `kubeling test` itself costs, against a cluster of this process (control plane and one
//! simulated node, `kubeling_testing::Options::simulated(1)`):
//! - per step: a kuttl test of `--runner-steps` steps, each applying a ConfigMap and asserting it (true by
//!   the time it is checked), beside the floor measured in the same run: the same apply and GET made
//!   directly with a kube client. The difference is the runner's overhead per step.
//! - in parallel: a kuttl suite of 20 independent pod tests (each a pod whose simulated container takes
//!   `--runner-pod-delay-ms` to start, asserted Running and Ready), run with `--parallel 20`: the suite's
//!   time beside its slowest test's.
//!
//! The suites are generated into a temporary directory and run through `testrunner::run`, as
//! `kubeling test --kubeconfig` runs them.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubeling_testing::{Options, TestCluster};
use serde_json::json;

use super::{BenchArgs, ms, percentile};

const POD_TESTS: usize = 20;

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    println!("\n== kubeling test: the runner's own cost ==");
    let cluster = TestCluster::start_with(Options::simulated(1)).await?;
    cluster.wait_for_nodes(Duration::from_secs(60)).await?;
    let result = measure(args, dir, &cluster).await;
    cluster.stop().await;
    result
}

async fn measure(args: &BenchArgs, dir: &Path, cluster: &TestCluster) -> anyhow::Result<()> {
    let client = cluster.client();
    let engine = Arc::new(testrunner::engine::Cluster::new(
        client.clone(),
        Some(cluster.kubeconfig().to_path_buf()),
    ));
    let steps = args.runner_steps.max(1);

    // The floor: the same apply and GET, made directly, in a namespace of their own.
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns = "bench-runner-floor";
    ns_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut floor = Vec::new();
    for i in 0..steps {
        let t0 = Instant::now();
        let name = format!("cm-{i}");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"step": i.to_string()}});
        cms.patch(&name, &PatchParams::apply("bench").force(), &Patch::Apply(&cm))
            .await?;
        cms.get(&name).await?;
        floor.push(t0.elapsed());
    }
    ns_api.delete(ns, &DeleteParams::default()).await?;
    floor.sort();

    // The same through the runner: one kuttl test, one apply and one assert per step.
    let suite = dir.join("runner-steps");
    let test = suite.join("steps");
    std::fs::create_dir_all(&test)?;
    for i in 0..steps {
        let cm =
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  step: \"{i}\"\n");
        std::fs::write(test.join(format!("{i:02}-apply.yaml")), &cm)?;
        std::fs::write(test.join(format!("{i:02}-assert.yaml")), &cm)?;
    }
    let run = testrunner::run(engine.clone(), vec![suite.clone()], options(None)).await?;
    anyhow::ensure!(run.success(), "the step suite failed:\n{}", run.summary());
    let t = &run.suites[0].tests[0];
    let mut step_times: Vec<Duration> = t.steps.iter().map(|s| s.duration).collect();
    step_times.sort();
    let (step, base) = (percentile(&step_times, 0.5), percentile(&floor, 0.5));
    println!(
        "step with one apply and one assert that holds: median {} through the runner, {} for the same apply + GET direct: overhead {} per step (target < 50 ms; kuttl: about 4 s)",
        ms(step),
        ms(base),
        ms(step.saturating_sub(base))
    );
    let in_steps: Duration = t.steps.iter().map(|s| s.duration).sum();
    println!(
        "that test ({steps} steps) took {} in all: {} outside its steps (its namespace created, then deleted and gone)",
        ms(t.duration),
        ms(t.duration.saturating_sub(in_steps))
    );

    // 20 independent pod tests in parallel.
    let suite = dir.join("runner-pods");
    let delay = Duration::from_millis(args.runner_pod_delay_ms);
    for i in 0..POD_TESTS {
        let test = suite.join(format!("pod-{i:02}"));
        std::fs::create_dir_all(&test)?;
        std::fs::write(
            test.join("00-pod.yaml"),
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    sim.kubeling.dev/start-delay: {}ms\nspec:\n  containers:\n  - name: app\n    image: testbox\n",
                delay.as_millis()
            ),
        )?;
        std::fs::write(
            test.join("00-assert.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: app\n    ready: true\n",
        )?;
    }
    let t0 = Instant::now();
    let run = testrunner::run(engine, vec![suite], options(Some(POD_TESTS))).await?;
    let wall = t0.elapsed();
    anyhow::ensure!(run.success(), "the pod suite failed:\n{}", run.summary());
    let tests = &run.suites[0].tests;
    let slowest = tests.iter().map(|t| t.duration).max().unwrap_or_default();
    let fastest = tests.iter().map(|t| t.duration).min().unwrap_or_default();
    println!(
        "{POD_TESTS} independent pod tests (container start {}), --parallel {POD_TESTS}: suite {} vs slowest test {} = {:.2}x (target < 1.5x); fastest test {}",
        ms(delay),
        ms(wall),
        ms(slowest),
        wall.as_secs_f64() / slowest.as_secs_f64().max(f64::EPSILON),
        ms(fastest)
    );
    Ok(())
}

fn options(parallel: Option<usize>) -> testrunner::RunOptions {
    testrunner::RunOptions {
        config: None,
        parallel,
        test: None,
        timeout: Some(60),
        skip_delete: false,
        fail_fast: false,
        report_dir: None,
        report_format: None,
        test_run_labels: Default::default(),
    }
}
