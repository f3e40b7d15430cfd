//! `kubeling test`: the command line of the suite runner (`testrunner` crate) and the cluster it runs
//! against: `--kubeconfig`'s, or one of its own started in this process for the run by [`start_cluster`].

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use kubeling_testing::TestCluster;

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReportFormat {
    Xml,
    Json,
}

#[derive(Args)]
pub(crate) struct TestArgs {
    /// Suite directories (kuttl test directories, chainsaw test trees, or a directory holding both).
    paths: Vec<PathBuf>,
    /// Run against this cluster instead of starting one.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A kuttl TestSuite file (default: the suite's or ./kuttl-test.yaml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Tests of a suite running at once (kuttl default 8).
    #[arg(long)]
    parallel: Option<usize>,
    /// Only tests whose name matches this regular expression.
    #[arg(long)]
    test: Option<String>,
    /// Step timeout in seconds (kuttl default 30).
    #[arg(long)]
    timeout: Option<u64>,
    /// Keep test namespaces and the objects created.
    #[arg(long)]
    skip_delete: bool,
    /// Skip the tests not yet started once one fails.
    #[arg(long)]
    fail_fast: bool,
    /// Where the report goes (default: the current directory when --report-format is given).
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Write a report: JUnit XML or JSON (`kuttl-report.xml|json`, or the TestSuite's reportName); a kuttl
    /// TestSuite's `reportFormat`, `artifactsDir` and `reportGranularity` apply when the flags are not given.
    #[arg(long, value_enum)]
    report_format: Option<ReportFormat>,
    /// Labels of this run, `k=v[,k2=v2]`: a kuttl file whose `TestFile` `testRunSelector` does not select
    /// them is skipped.
    #[arg(long, value_parser = parse_run_labels)]
    test_run_labels: Option<std::collections::BTreeMap<String, String>>,
}

/// `--test-run-labels k=v[,k2=v2]`.
fn parse_run_labels(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    testrunner::kuttl::config::parse_labels(s)
}

/// Starts the run's own cluster in this process (`kubeling_testing::TestCluster`: a temp data dir, the API
/// server, controllers, DNS and a node agent on Docker); [`TestCluster::stop`] ends it and removes its
/// containers, gateway and network. (One function, so the cluster the runner uses is chosen in one place.)
pub(crate) async fn start_cluster() -> anyhow::Result<TestCluster> {
    let c = TestCluster::start().await.context("starting the cluster")?;
    eprintln!(
        "kubeling is ready at {} in {} ms (data dir {})",
        c.url(),
        c.started_in().as_millis(),
        c.data_dir().display()
    );
    Ok(c)
}

/// The kuttl TestSuite that names the run's report: `--config`, else a single PATH's `kuttl-test.yaml`, else
/// `./kuttl-test.yaml`; defaults when there is none (or it does not load: the run reports that itself).
fn kuttl_suite(config: &Option<PathBuf>, paths: &[PathBuf]) -> testrunner::kuttl::config::TestSuite {
    let single = match paths {
        [p] => Some(p.join("kuttl-test.yaml")),
        _ => None,
    };
    [config.clone(), single, Some(PathBuf::from("kuttl-test.yaml"))]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .and_then(|p| testrunner::kuttl::config::load(&p).ok())
        .unwrap_or_default()
}

/// Runs `kubeling test`; returns the exit code (0: every test passed, 1: a failure, as kuttl and chainsaw;
/// 255 when interrupted, as kuttl).
pub(crate) async fn run(args: TestArgs) -> anyhow::Result<i32> {
    // Caught from here on: a signal while the cluster starts still stops it (after it is up).
    let signals = crate::Signals::install()?;
    let (owned, kubeconfig) = match &args.kubeconfig {
        Some(k) => (None, k.clone()),
        None => {
            let c = start_cluster().await?;
            let k = c.kubeconfig().to_path_buf();
            (Some(c), k)
        }
    };
    let client = crate::client_from(&kubeconfig).await?;
    let cluster = Arc::new(testrunner::engine::Cluster::new(
        client,
        Some(std::path::absolute(&kubeconfig)?),
    ));
    let opts = testrunner::RunOptions {
        config: args.config.clone(),
        parallel: args.parallel,
        test: args.test,
        timeout: args.timeout,
        skip_delete: args.skip_delete,
        fail_fast: args.fail_fast,
        report_dir: args.report_dir.clone(),
        report_format: args.report_format.map(|f| match f {
            ReportFormat::Xml => testrunner::report::Format::Xml,
            ReportFormat::Json => testrunner::report::Format::Json,
        }),
        test_run_labels: args.test_run_labels.clone().unwrap_or_default(),
    };
    // A kuttl TestSuite's report settings apply when the flags do not say otherwise.
    let suite = kuttl_suite(&args.config, &args.paths);
    let format = opts
        .report_format
        .or_else(|| match suite.report_format.to_ascii_lowercase().as_str() {
            "xml" => Some(testrunner::report::Format::Xml),
            "json" => Some(testrunner::report::Format::Json),
            _ => None,
        });
    let report_dir = args
        .report_dir
        .clone()
        .or_else(|| (!suite.artifacts_dir.is_empty()).then(|| PathBuf::from(&suite.artifacts_dir)))
        .unwrap_or_else(|| PathBuf::from("."));
    let report_name = if suite.report_name.is_empty() {
        "kuttl-report".to_string()
    } else {
        suite.report_name.clone()
    };
    let granularity = if suite.report_granularity.eq_ignore_ascii_case("test") {
        testrunner::report::Granularity::Test
    } else {
        testrunner::report::Granularity::Step
    };
    // SIGINT/SIGTERM end the run at once (kuttl exits 255), still stopping the cluster started for it.
    let result = tokio::select! {
        r = testrunner::run(cluster, args.paths, opts) => r,
        _ = signals.wait() => {
            eprintln!("interrupted");
            if let Some(c) = owned {
                c.stop().await;
            }
            return Ok(255);
        }
    };
    if let Some(c) = owned {
        // Pods may still be being started when the cluster stops (kept with --skip-delete, or left by a
        // failure); a container Docker finishes creating after the clean-up is removed by a second sweep.
        let late_sweep = args.skip_delete || !result.as_ref().is_ok_and(|r| r.success());
        let id_dir = tempfile::tempdir().ok().filter(|d| {
            std::fs::copy(
                c.data_dir().join("data/node/cluster-id"),
                d.path().join("cluster-id"),
            )
            .is_ok()
        });
        c.stop().await;
        if let (true, Some(d)) = (late_sweep, id_dir) {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let _ = node::cleanup::remove_cluster_of(d.path()).await;
        }
    }
    let mut result = result?;
    if result.name.is_empty() {
        result.name = suite.name.clone();
    }
    println!("{}", result.summary());
    if let Some(f) = format {
        let path = testrunner::report::write(&result, &report_dir, &report_name, f, granularity)
            .with_context(|| format!("writing the report into {}", report_dir.display()))?;
        println!("report: {}", path.display());
    }
    Ok(if result.success() { 0 } else { 1 })
}
