//! The fault suite's crash tests: 8 writers storm `kubeling apiserver` and something is killed with SIGKILL
//! at a random moment, then restarted on the same (accumulating) data, 20 times; after each restart nothing
//! acknowledged is lost, nothing unacknowledged is half there, resourceVersions keep rising and a resumed
//! watch is exact or 410 (see `tests/storm/mod.rs`). What is killed: the API server on sled, the API server
//! on etcd, and etcd under a running API server. `STORM_SEED=N` replays a run's choices.

mod common;
mod storm;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Cluster, eventually};
use kubeling_testing::etcd::Etcd;
use storm::Target;

/// How long the API server may take to notice etcd is down, or back.
const OUTAGE_BOUND: Duration = Duration::from_secs(30);

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

/// etcd under a running `kubeling apiserver --store etcd=URL`: `crash` is etcd's `kill -9`; `restart` first
/// checks that the API server, left running, says it is not ready and refuses a write with 503, then starts
/// etcd again on its data dir and waits for the API server to be ready again by itself.
struct EtcdUnderApiServer {
    etcd: Etcd,
    server: Cluster,
    /// Per outage: from etcd answering `/health` again to the API server's `/readyz` answering 200.
    recoveries: Vec<Duration>,
}

impl EtcdUnderApiServer {
    fn readyz(&self) -> u16 {
        let token = self.server.token();
        self.server
            .curl("GET", "/readyz", Some(&token), "application/json", None)
            .0
    }
}

impl Target for EtcdUnderApiServer {
    fn kubeconfig(&self) -> PathBuf {
        self.server.kubeconfig.clone()
    }

    fn crash(&mut self) {
        self.etcd.kill9();
    }

    fn restart(&mut self) {
        let outage = self.recoveries.len();
        eventually(OUTAGE_BOUND, "/readyz to answer 503 while etcd is down", || {
            (self.readyz() == 503).then_some(())
        });
        let name = format!("during-outage-{outage}");
        let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#);
        let (code, status) = self.server.curl(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&self.server.token()),
            "application/json",
            Some(body.as_bytes()),
        );
        assert_eq!(
            (code, &status["reason"]),
            (503, &"ServiceUnavailable".into()),
            "a write while etcd is down: {status}"
        );

        self.etcd.run().expect("etcd restarts");
        let back = Instant::now();
        eventually(OUTAGE_BOUND, "/readyz to answer 200 once etcd is back", || {
            (self.readyz() == 200).then_some(())
        });
        self.recoveries.push(back.elapsed());
        let (code, status) = self.server.curl(
            "GET",
            &format!("/api/v1/namespaces/default/configmaps/{name}"),
            Some(&self.server.token()),
            "application/json",
            None,
        );
        assert_eq!(code, 404, "the write refused with 503 is there: {status}");
    }
}

/// Runs the standard storms against `target`, printing the seed, and on failure the last lines of `log`.
fn run_storms(what: &str, target: &mut dyn Target, log: &Path) -> (storm::Options, storm::Figures) {
    let opts = storm::Options::standard();
    eprintln!(
        "fault storm against {what}: seed {} (STORM_SEED={0} replays it)",
        opts.seed
    );
    let started = Instant::now();
    let figures = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| storm::run(target, &opts)))
        .unwrap_or_else(|panic| {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "fault storm against {what} failed with seed {}; the API server's last log lines:\n{}",
                opts.seed,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
            std::panic::resume_unwind(panic)
        });
    eprintln!(
        "fault storm against {what}, {:.1} s:\n{figures}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(figures.runs, opts.runs);
    assert!(
        figures.acknowledged > opts.runs,
        "the storms hardly wrote: {figures:?}"
    );
    (opts, figures)
}

#[test]
fn acknowledged_writes_survive_kill_9_storms_and_resource_versions_keep_rising() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("apiserver.log");
    let mut server = ApiServer::start(&tmp.path().join("data"), &log, &[]);
    run_storms("kubeling apiserver (kill -9)", &mut server, &log);
}

#[test]
fn acknowledged_writes_on_etcd_survive_kill_9_storms_of_the_api_server() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("apiserver.log");
    let store = etcd.store_arg();
    let mut server = ApiServer::start(&tmp.path().join("data"), &log, &["--store", &store]);
    run_storms(
        "kubeling apiserver --store etcd (kill -9 of the API server)",
        &mut server,
        &log,
    );
}

#[test]
fn an_api_server_on_etcd_answers_503_while_etcd_is_killed_in_a_storm_and_loses_nothing_when_it_returns() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("apiserver.log");
    let store = etcd.store_arg();
    let server = Cluster::start_with(
        &tmp.path().join("data"),
        0,
        "apiserver",
        &["--store", &store],
        Some(&log),
    );
    let mut target = EtcdUnderApiServer {
        etcd,
        server,
        recoveries: Vec::new(),
    };
    let (opts, figures) = run_storms(
        "kubeling apiserver --store etcd (kill -9 of etcd)",
        &mut target,
        &log,
    );
    let mut recoveries = target.recoveries.clone();
    recoveries.sort();
    eprintln!(
        "etcd down: /readyz 503 and a write refused with 503 each time; ready again {} ms (median), {} ms \
         (max) after etcd answered",
        recoveries[recoveries.len() / 2].as_millis(),
        recoveries[recoveries.len() - 1].as_millis()
    );
    // The writers stop at their first write without an answer: with the API server up, each is a 503.
    let other: Vec<_> = figures
        .in_flight_answers
        .iter()
        .filter(|(answer, _)| answer.as_str() != "503 ServiceUnavailable")
        .collect();
    assert!(
        other.is_empty(),
        "writes in flight while etcd was down were answered otherwise than 503: {other:?}"
    );
    // The API server kept its watch history: a watch resumed from any revision it served is exact.
    assert_eq!(
        figures.watch_exact, opts.runs,
        "a resumed watch got 410 Gone from an API server that never restarted: {figures:?}"
    );
}
