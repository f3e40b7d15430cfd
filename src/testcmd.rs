//! `kubeling test`: the command line of the suite runner (`testrunner` crate) and the cluster it runs
//! against: `--kubeconfig`'s, or one of its own started for the run by [`start_cluster`].

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};

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
    /// Write a report: JUnit XML or JSON (`kuttl-report.xml|json`).
    #[arg(long, value_enum)]
    report_format: Option<ReportFormat>,
}

/// A cluster started for the run: `kubeling up` as a child on a temp data dir; stopped, and its containers
/// removed, when dropped.
pub(crate) struct OwnedCluster {
    child: Child,
    data_dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
}

/// Starts `kubeling up --port 0 --no-kubeconfig-merge` on a temp data dir and waits for its ready line.
/// (One function so an in-process cluster library can replace it.)
pub(crate) fn start_cluster() -> anyhow::Result<OwnedCluster> {
    let data_dir = tempfile::Builder::new()
        .prefix("kubeling-test-")
        .tempdir()
        .context("creating a data dir")?;
    let exe = std::env::current_exe().context("finding the kubeling binary")?;
    let mut child = Command::new(exe)
        .args(["up", "--port", "0", "--no-kubeconfig-merge", "--data-dir"])
        .arg(data_dir.path())
        .env(
            "KUBELING_LOG",
            std::env::var("KUBELING_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting kubeling up")?;
    let stdout = child.stdout.take().context("kubeling up's stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("kubeling is ready") {
                let _ = tx.send(line);
            }
        }
    });
    let mut cluster = OwnedCluster {
        child,
        kubeconfig: data_dir.path().join("kubeconfig"),
        data_dir,
    };
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => {
            eprintln!("{line}");
            Ok(cluster)
        }
        Err(_) => {
            let _ = cluster.child.kill();
            anyhow::bail!("the cluster did not become ready within 60 s")
        }
    }
}

impl Drop for OwnedCluster {
    fn drop(&mut self) {
        // SIGTERM for an orderly stop, bounded; then the containers it ran (they outlive the node agent by design).
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_cluster_containers(&self.data_dir.path().join("node"));
    }
}

/// Removes the containers, gateway and network of the cluster whose node data dir is `node_dir` (by the
/// `io.kubeling.cluster` label its `cluster-id` names).
fn remove_cluster_containers(node_dir: &std::path::Path) {
    let Ok(id) = std::fs::read_to_string(node_dir.join("cluster-id")) else {
        return;
    };
    let id = id.trim();
    let filter = format!("label=io.kubeling.cluster={id}");
    if let Ok(out) = Command::new("docker")
        .args(["ps", "-aq", "--filter", &filter])
        .output()
    {
        let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect();
        if !ids.is_empty() {
            let _ = Command::new("docker").arg("rm").arg("-f").args(&ids).output();
        }
    }
    let _ = Command::new("docker")
        .args(["rm", "-f", &format!("kubeling-gateway-{id}")])
        .output();
    let _ = Command::new("docker")
        .args(["network", "rm", &format!("kubeling-{id}")])
        .output();
}

/// Runs `kubeling test`; returns the exit code (0: every test passed, 1: a failure, as kuttl and chainsaw).
pub(crate) async fn run(args: TestArgs) -> anyhow::Result<i32> {
    let (owned, kubeconfig) = match &args.kubeconfig {
        Some(k) => (None, k.clone()),
        None => {
            let c = tokio::task::spawn_blocking(start_cluster).await??;
            let k = c.kubeconfig.clone();
            (Some(c), k)
        }
    };
    let client = crate::client_from(&kubeconfig).await?;
    let cluster = Arc::new(testrunner::engine::Cluster::new(
        client,
        Some(std::path::absolute(&kubeconfig)?),
    ));
    let opts = testrunner::RunOptions {
        config: args.config,
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
    };
    let format = opts.report_format;
    let result = testrunner::run(cluster, args.paths, opts).await;
    drop(owned);
    let result = result?;
    println!("{}", result.summary());
    if let Some(f) = format {
        let dir = args.report_dir.unwrap_or_else(|| PathBuf::from("."));
        let g = testrunner::report::Granularity::Step;
        let path = testrunner::report::write(&result, &dir, "kuttl-report", f, g)
            .with_context(|| format!("writing the report into {}", dir.display()))?;
        println!("report: {}", path.display());
    }
    Ok(if result.success() { 0 } else { 1 })
}
