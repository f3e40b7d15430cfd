//! kubeling's controller manager (kube-controller-manager's job) and scheduler: clients of the API server
//! over HTTPS like the node agent, never callers into the `apiserver` crate, so they run against any API
//! server (`kubeling controllers --kubeconfig F`).
//!
//! ```text
//!  API server ──watch──► informers (one cache per kind, shared) ──handlers──► work queues (per controller)
//!                                                                              │ N workers, one key at a time
//!                                                                              ▼
//!                                       sync(key): read caches → pure decision → writes over HTTPS
//!                                                                              │ errors: rate-limited requeue
//! ```
//!
//! Only the holder of the Lease `kube-system/kubeling-controller-manager` runs controllers ([`leader`]).
//! Every controller is a module with `start(ctx, cancel)`: it registers its informer handlers at once
//! (before the informers start, so it sees the first list) and returns the future that runs its workers.

pub mod clusterroleaggregation;
pub mod controller_ref;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod discovery;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod expectations;
pub mod garbage_collector;
pub mod hash;
pub mod history;
pub mod job;
pub mod leader;
pub mod namespace;
pub mod nodelifecycle;
pub mod pod_control;
pub mod podgc;
pub mod podutil;
pub mod queue;
pub mod replicaset;
pub mod replication;
pub mod resourcequota;
pub mod rootca;
pub mod scheduler;
pub mod selector;
pub mod serviceaccount;
pub mod statefulset;
pub mod tainteviction;
pub mod ttl_after_finished;
pub mod volume;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use client::events::Recorder;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use client::informer::{self, Informer, Informers};
pub use queue::WorkQueue;

/// What a controller's sync can fail with; the key is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// Anything else, said in words.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// True for a 409 (conflict or already exists): retried at once from fresh state.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

/// Settings of the controller manager.
#[derive(Debug, Clone)]
pub struct Config {
    /// The CA bundle published in every namespace's `kube-root-ca.crt` ConfigMap.
    pub root_ca_pem: String,
    /// Where the built-in local provisioner keeps volume directories.
    pub volumes_dir: PathBuf,
    /// Our identity in the leader lease.
    pub identity: String,
    /// Whether to take the leader lease first (off only in tests that run one manager).
    pub leader_elect: bool,
    /// Controllers to run: `*` for all, or names; `-name` switches one off (`--controllers`).
    pub controllers: Vec<String>,
    /// `--node-monitor-grace-period`: a node whose heartbeats stop this long is marked Unknown.
    pub node_monitor_grace_period: Duration,
    /// `--terminated-pod-gc-threshold`.
    pub terminated_pod_gc_threshold: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            root_ca_pem: String::new(),
            volumes_dir: std::env::temp_dir().join("kubeling-volumes"),
            identity: format!("kubeling-{}", std::process::id()),
            leader_elect: true,
            controllers: vec!["*".into()],
            // kube-controller-manager 1.32 defaults.
            node_monitor_grace_period: Duration::from_secs(50),
            terminated_pod_gc_threshold: 12500,
        }
    }
}

impl Config {
    /// Whether the controller `name` is switched on.
    pub fn enabled(&self, name: &str) -> bool {
        let off = self.controllers.iter().any(|c| c.strip_prefix('-') == Some(name));
        let on = self.controllers.iter().any(|c| c == "*" || c == name);
        on && !off
    }
}

/// What every controller gets: the client, the shared informers, the settings.
pub struct Context {
    /// The API server.
    pub client: kube::Client,
    /// Shared caches.
    pub informers: Arc<Informers>,
    /// Settings.
    pub config: Config,
}

impl Context {
    /// An event recorder writing as `component` (e.g. `deployment-controller`).
    pub fn recorder(&self, component: &str) -> Arc<Recorder> {
        Arc::new(Recorder::new(self.client.clone(), component, None))
    }
}

/// A controller's reconcile of one key: `Ok(Some(d))` asks to be called again after `d`.
#[async_trait::async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// Bring the object under `key` (and what it owns) toward its spec.
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error>;
}

/// Run `workers` workers pulling from `queue` until `cancel`. Waits for the informers' first list.
pub async fn run_workers(
    informers: Arc<Informers>,
    queue: Arc<WorkQueue>,
    workers: usize,
    reconciler: Arc<dyn Reconciler>,
    cancel: CancellationToken,
) {
    tokio::select! {
        _ = cancel.cancelled() => return,
        _ = informers.wait_synced() => {}
    }
    let mut tasks = Vec::new();
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let r = reconciler.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                // A panic in one sync must not take the worker, or leave the key marked in progress
                // forever: it becomes an error, retried with backoff.
                let outcome = std::panic::AssertUnwindSafe(r.sync(&key)).catch_unwind().await;
                let outcome = outcome.unwrap_or_else(|_| Err(Error::Other(format!("sync of {key} panicked"))));
                match outcome {
                    Ok(None) => queue.forget(&key),
                    Ok(Some(after)) => {
                        queue.forget(&key);
                        queue.add_after(key.clone(), after);
                    }
                    Err(e) => {
                        let retries = queue.retries(&key);
                        if queue.retry_allowed(retries) {
                            tracing::debug!(controller = queue.name(), key = %key, error = %e, "sync failed; retrying");
                            queue.add_rate_limited(key.clone());
                        } else {
                            tracing::warn!(controller = queue.name(), key = %key, error = %e, "sync keeps failing; dropped until the object changes");
                            queue.forget(&key);
                        }
                    }
                }
                queue.done(&key);
            }
        }));
    }
    cancel.cancelled().await;
    queue.shut_down();
    for t in tasks {
        let _ = t.await;
    }
}

/// A controller's entry point.
pub type StartFn = fn(&Arc<Context>, CancellationToken) -> BoxFuture<'static, ()>;

/// Every controller, by upstream's name (for `--controllers`).
pub fn all_controllers() -> Vec<(&'static str, StartFn)> {
    vec![
        ("serviceaccount", serviceaccount::start),
        ("root-ca-cert-publisher", rootca::start),
        ("nodelifecycle", nodelifecycle::start),
        ("taint-eviction-controller", tainteviction::start),
        ("podgc", podgc::start),
        ("namespace", namespace::start),
        ("garbagecollector", garbage_collector::start),
        ("endpoint", endpoints::start),
        ("endpointslice", endpointslice::start),
        ("job", job::start),
        ("cronjob", cronjob::start),
        ("ttl-after-finished", ttl_after_finished::start),
        ("replicaset", replicaset::start),
        ("replicationcontroller", replication::start),
        ("disruption", disruption::start),
        ("resourcequota", resourcequota::start),
        ("deployment", deployment::start),
        ("statefulset", statefulset::start),
        ("daemonset", daemonset::start),
        ("persistentvolume-binder", volume::start),
        ("clusterrole-aggregation", clusterroleaggregation::start),
    ]
}

/// Run the controller manager until `cancel`: take the leader lease (if configured), start every enabled
/// controller and the scheduler; if the lease is lost, stop them and campaign again.
pub async fn run(client: kube::Client, config: Config, cancel: CancellationToken) {
    let lease = leader::LeaderConfig::controller_manager(&config.identity);
    loop {
        if config.leader_elect && !leader::acquire(&client, &lease, &cancel).await {
            return;
        }
        let term = cancel.child_token();
        let ctx = Arc::new(Context {
            client: client.clone(),
            informers: Informers::new(),
            config: config.clone(),
        });
        let mut running: Vec<BoxFuture<'static, ()>> = Vec::new();
        for (name, start) in all_controllers() {
            if config.enabled(name) {
                running.push(start(&ctx, term.clone()));
            }
        }
        if config.enabled("scheduler") {
            running.push(Box::pin(scheduler::run(client.clone(), term.clone())));
        }
        let informer_tasks = ctx.informers.start(&client, &term);
        let controllers = tokio::spawn(futures_util::future::join_all(running));
        if config.leader_elect {
            leader::hold(&client, &lease, &cancel).await;
        } else {
            cancel.cancelled().await;
        }
        term.cancel();
        let _ = controllers.await;
        for t in informer_tasks {
            let _ = t.await;
        }
        if cancel.is_cancelled() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_are_switched_on_and_off_by_name() {
        let mut c = Config::default();
        assert!(c.enabled("deployment"));
        c.controllers = vec!["*".into(), "-deployment".into()];
        assert!(!c.enabled("deployment"));
        assert!(c.enabled("job"));
        c.controllers = vec!["job".into()];
        assert!(c.enabled("job"));
        assert!(!c.enabled("deployment"));
    }
}
