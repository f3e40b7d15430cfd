//! The probe manager (upstream `prober_manager.go`): the map of workers, one per probe key, and the three
//! results managers. The pod worker calls [`Manager::add_pod`] on every sync (idempotent: a worker is
//! created once per key and its parameters never change), [`Manager::stop_liveness_and_startup`] when the
//! pod starts terminating (readiness keeps running through graceful termination), [`Manager::remove_pod`]
//! once its containers are stopped, and housekeeping calls [`Manager::cleanup_pods`] with the pods still
//! wanted. A worker that exits by itself (its container will never run again, its pod is terminal) takes
//! its entry and its cached result with it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::worker::{Worker, runtime_id};
use super::{Clock, ProbeEvents, ProbeKey, ProbeType, Prober, ResultsManager, StatusProvider};
use crate::lifecycle::plan::ProbeResult;

/// What the manager is built from: the three side-effect boundaries and the clock.
#[derive(Clone)]
pub struct ManagerConfig {
    /// The status cache workers read.
    pub status: Arc<dyn StatusProvider>,
    /// The handlers.
    pub prober: Arc<dyn Prober>,
    /// The event recorder.
    pub events: Arc<dyn ProbeEvents>,
    /// Wall-clock time, for `initialDelaySeconds`.
    pub clock: Clock,
}

/// A running worker, as the map holds it.
struct Handle {
    /// Tells this worker from a later one of the same key.
    id: u64,
    stop: CancellationToken,
    trigger: Arc<Notify>,
}

/// What every worker shares.
pub(crate) struct Shared {
    pub(crate) status: Arc<dyn StatusProvider>,
    pub(crate) prober: Arc<dyn Prober>,
    pub(crate) events: Arc<dyn ProbeEvents>,
    pub(crate) clock: Clock,
    /// When the manager (the kubelet) started: workers made within one period of it start with jitter.
    pub(crate) started: tokio::time::Instant,
    workers: Mutex<HashMap<ProbeKey, Handle>>,
    /// Probes whose worker ended by itself (its container will never run again, or the pod is terminal):
    /// `add_pod` does not start them again, until the pod is removed. (Upstream recreates such a worker
    /// on every sync; here a new worker's initial result would wake the pod worker, which would sync and
    /// recreate it, for ever.)
    finished: Mutex<HashSet<ProbeKey>>,
}

impl Shared {
    /// A worker ends: its entry goes, unless a newer worker of the same key took its place; `finished`
    /// when it ended by itself rather than by a stop.
    pub(crate) fn remove_worker(&self, key: &ProbeKey, id: u64, finished: bool) {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if workers.get(key).is_some_and(|h| h.id == id) {
            workers.remove(key);
            if finished {
                self.finished
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key.clone());
            }
        }
    }

    fn forget_finished(&self, keep: impl Fn(&ProbeKey) -> bool) {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k| keep(k));
    }
}

/// The probe manager.
pub struct Manager {
    shared: Arc<Shared>,
    liveness: Arc<ResultsManager>,
    readiness: Arc<ResultsManager>,
    startup: Arc<ResultsManager>,
    next_id: AtomicU64,
    /// Stops every worker (kubelet shutdown).
    cancel: CancellationToken,
}

impl Manager {
    /// A manager with no workers; its workers end when `cancel` is cancelled.
    pub fn new(cfg: ManagerConfig, cancel: CancellationToken) -> Arc<Manager> {
        Arc::new(Manager {
            shared: Arc::new(Shared {
                status: cfg.status,
                prober: cfg.prober,
                events: cfg.events,
                clock: cfg.clock,
                started: tokio::time::Instant::now(),
                workers: Mutex::new(HashMap::new()),
                finished: Mutex::new(HashSet::new()),
            }),
            liveness: Arc::new(ResultsManager::new()),
            readiness: Arc::new(ResultsManager::new()),
            startup: Arc::new(ResultsManager::new()),
            next_id: AtomicU64::new(0),
            cancel,
        })
    }

    /// The results of one probe type.
    pub fn results(&self, probe_type: ProbeType) -> &Arc<ResultsManager> {
        match probe_type {
            ProbeType::Liveness => &self.liveness,
            ProbeType::Readiness => &self.readiness,
            ProbeType::Startup => &self.startup,
        }
    }

    /// Creates the workers of `pod`'s probes that do not exist yet: regular containers and restartable init
    /// containers, startup first, then readiness, then liveness. `reported` is the status last reported for
    /// the pod (the API's, or the mirror pod's for a static pod): a running container it shows ready or
    /// started keeps that result until its next probe says otherwise, so a restarted kubelet does not
    /// flip Ready (a deliberate difference: upstream's readiness goes false until the first probe).
    pub fn add_pod(&self, pod: &Pod, reported: Option<&PodStatus>) {
        let Some(uid) = pod.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
            return;
        };
        let Some(spec) = pod.spec.as_ref() else { return };
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let containers: Vec<&Container> = spec.containers.iter().chain(sidecars).collect();
        let mut shared_pod: Option<Arc<Pod>> = None;
        // Locked in remove_worker's order: workers, then finished.
        let mut workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        let finished = self.shared.finished.lock().unwrap_or_else(|e| e.into_inner());
        for c in containers {
            for probe_type in [ProbeType::Startup, ProbeType::Readiness, ProbeType::Liveness] {
                if probe_type.of(c).is_none() {
                    continue;
                }
                let key = ProbeKey {
                    pod_uid: uid.to_owned(),
                    container: c.name.clone(),
                    probe_type,
                };
                if workers.contains_key(&key) || finished.contains(&key) {
                    continue;
                }
                let pod = shared_pod.get_or_insert_with(|| Arc::new(pod.clone())).clone();
                let seed = reported.and_then(|s| seed(s, &c.name, probe_type));
                let adopted = reported.is_some_and(|s| running_in(s, &c.name));
                let results = self.results(probe_type).clone();
                let Some(worker) = Worker::new(key.clone(), pod, c.clone(), results, seed, adopted) else {
                    continue;
                };
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let stop = self.cancel.child_token();
                let trigger = Arc::new(Notify::new());
                workers.insert(
                    key,
                    Handle {
                        id,
                        stop: stop.clone(),
                        trigger: trigger.clone(),
                    },
                );
                tokio::spawn(worker.run(self.shared.clone(), id, stop, trigger));
            }
        }
    }

    /// Termination started: stop the liveness and startup workers of the regular containers.
    pub fn stop_liveness_and_startup(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        let Some(spec) = pod.spec.as_ref() else { return };
        let workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        for c in &spec.containers {
            for probe_type in [ProbeType::Liveness, ProbeType::Startup] {
                let key = ProbeKey {
                    pod_uid: uid.to_owned(),
                    container: c.name.clone(),
                    probe_type,
                };
                if let Some(h) = workers.get(&key) {
                    h.stop.cancel();
                }
            }
        }
    }

    /// Stops every worker of the pod `uid`.
    pub fn remove_pod(&self, uid: &str) {
        self.shared.forget_finished(|k| k.pod_uid != uid);
        let workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        for (_, h) in workers.iter().filter(|(k, _)| k.pod_uid == uid) {
            h.stop.cancel();
        }
    }

    /// Stops the workers of every pod not in `desired` (housekeeping).
    pub fn cleanup_pods(&self, desired: &HashSet<String>) {
        self.shared.forget_finished(|k| desired.contains(&k.pod_uid));
        let workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        for (_, h) in workers.iter().filter(|(k, _)| !desired.contains(&k.pod_uid)) {
            h.stop.cancel();
        }
    }

    /// Runs the readiness worker of a container now (upstream's manual trigger, sent when a started
    /// container has no readiness result yet); a trigger while one is pending is one trigger.
    pub fn trigger_readiness(&self, uid: &str, container: &str) {
        let key = ProbeKey {
            pod_uid: uid.to_owned(),
            container: container.to_owned(),
            probe_type: ProbeType::Readiness,
        };
        let workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = workers.get(&key) {
            h.trigger.notify_one();
        }
    }

    /// Whether a worker runs for `key` (upstream `getWorker`).
    pub fn has_worker(&self, key: &ProbeKey) -> bool {
        let workers = self.shared.workers.lock().unwrap_or_else(|e| e.into_inner());
        workers.get(key).is_some_and(|h| !h.stop.is_cancelled())
    }

    /// How many workers run.
    pub fn worker_count(&self) -> usize {
        self.shared
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

fn reported_status<'a>(status: &'a PodStatus, container: &str) -> Option<&'a ContainerStatus> {
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == container)
}

/// Whether the reported status shows the container running (a kubelet restart adopting it).
fn running_in(status: &PodStatus, container: &str) -> bool {
    reported_status(status, container).is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

/// The result a new worker starts from, when the reported status shows the container running and ready
/// (readiness) or started (startup).
fn seed(status: &PodStatus, container: &str, probe_type: ProbeType) -> Option<(String, ProbeResult)> {
    let c = reported_status(status, container)?;
    let id = runtime_id(c.container_id.as_deref().filter(|id| !id.is_empty())?).to_owned();
    let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
    let known = match probe_type {
        ProbeType::Readiness => c.ready,
        ProbeType::Startup => c.started == Some(true),
        ProbeType::Liveness => false,
    };
    (running && known).then_some((id, ProbeResult::Success))
}
