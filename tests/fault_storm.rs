//! The fault suite's crash test: 8 writers storm `kubeling apiserver`, which is killed with SIGKILL at a
//! random moment and restarted on the same (accumulating) data dir, 20 times; after each restart nothing
//! acknowledged is lost, nothing unacknowledged is half there, resourceVersions keep rising and a resumed
//! watch is exact or 410 (see `tests/storm/mod.rs`). `STORM_SEED=N` replays a run's choices.

mod common;
mod storm;

use std::path::{Path, PathBuf};

use common::Cluster;
use storm::Target;

/// `kubeling apiserver` on one data dir: `crash` is `kill -9`, `restart` starts it again (on a new free port).
struct ApiServer {
    cluster: Option<Cluster>,
    data_dir: PathBuf,
    log: PathBuf,
    extra_args: Vec<String>,
}

impl ApiServer {
    fn start(data_dir: &Path, log: &Path, extra_args: &[&str]) -> ApiServer {
        let mut s = ApiServer {
            cluster: None,
            data_dir: data_dir.to_path_buf(),
            log: log.to_path_buf(),
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
        };
        s.restart();
        s
    }
}

impl Target for ApiServer {
    fn kubeconfig(&self) -> PathBuf {
        self.cluster.as_ref().expect("running").kubeconfig.clone()
    }

    fn crash(&mut self) {
        self.cluster.as_mut().expect("running").kill9();
    }

    fn restart(&mut self) {
        let args: Vec<&str> = self.extra_args.iter().map(String::as_str).collect();
        self.cluster = Some(Cluster::start_with(
            &self.data_dir,
            0,
            "apiserver",
            &args,
            Some(&self.log),
        ));
    }
}

#[test]
fn acknowledged_writes_survive_kill_9_storms_and_resource_versions_keep_rising() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("apiserver.log");
    let mut server = ApiServer::start(&tmp.path().join("data"), &log, &[]);
    let opts = storm::Options::standard();
    eprintln!("fault storm: seed {} (STORM_SEED={0} replays it)", opts.seed);
    let started = std::time::Instant::now();
    let figures = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| storm::run(&mut server, &opts)))
        .unwrap_or_else(|panic| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "fault storm failed with seed {}; the API server's last log lines:\n{}",
                opts.seed,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
            std::panic::resume_unwind(panic)
        });
    eprintln!(
        "fault storm against kubeling apiserver (kill -9), {:.1} s:\n{figures}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(figures.runs, opts.runs);
    assert!(
        figures.acknowledged > opts.runs,
        "the storms hardly wrote: {figures:?}"
    );
}
