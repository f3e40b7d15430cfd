//! The pod side of the node agent: the informer, one worker per pod UID, and the status manager.
//!
//! ```text
//! informer (client::watch events, fieldSelector spec.nodeName=<node>)
//!    └─► pod_workers: one task per pod UID holding only the latest desired pod (a watch channel)
//!          loop: observe (Docker, by labels) → lifecycle::plan() → execute actions → lifecycle::pod_status()
//!                → status manager (PATCH pods/status, UID precondition, only when changed)
//!                → wait for a new spec, the next backoff deadline, or the 1 s relist (upstream's PLEG period)
//! ```
//! The worker keeps no database: what runs is read back from Docker by the kubelet's labels, so a restarted
//! kubeling adopts its containers (same IDs, same restart counts).
//!
//! Static pods (manifest directory, manifest URL) arrive as [`SourceUpdate`]s, merged by [`PodConfig`] into
//! ADD / UPDATE / REMOVE and handed to the same workers. A static pod's worker also keeps its mirror pod
//! in the API server ([`crate::mirror`]) and writes the status there. Mirror pods seen by the informer are
//! never run; they are kept in a map by name for the static workers. Nothing is removed at start-up before
//! every source (the informer's first full list, and each static source's first snapshot) has reported.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use client::watch::{Event, Selector, Target};

use crate::config::{PodConfig, PodOp};
use crate::events::{EventType, Recorder, node_ref, pod_ref};
use crate::lifecycle::plan::ProbeResult;
use crate::mirror::{self, API_SOURCE};
use crate::prober::{self, ProbeEvents, handlers::RealProber};
use crate::runtime::{ContainerRuntime, ListFilter};
use crate::sources::{CONFIG_SOURCE_ANNOTATION, SourceUpdate};
use crate::status_cache::PodStatusCache;

/// upstream: the generic PLEG relists every second.
pub(crate) const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// upstream: `minimumGracePeriodInSeconds` = 2.
pub(crate) const MINIMUM_GRACE_PERIOD: i64 = 2;
/// How long one sync waits on the API server for a static pod's mirror pod.
pub(crate) const MIRROR_SYNC_TIMEOUT: Duration = Duration::from_secs(2);
/// upstream: `housekeepingPeriod` (orphaned mirror pods are deleted then).
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);

/// What the pod side needs to know about its node.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node name.
    pub node_name: String,
    /// Node IP: pods' hostIP.
    pub node_ip: String,
    /// The pause image.
    pub pause_image: String,
    /// Where pod volumes live (`<dir>/pods/<uid>/volumes/...`).
    pub data_dir: std::path::PathBuf,
    /// How often dead containers are collected (upstream `ContainerGCPeriod`, 1 min).
    pub container_gc_period: Duration,
    /// Cluster DNS, cluster domain and the host's resolv.conf for pods' DNS settings.
    pub dns: crate::dns::DnsSettings,
}

/// What a worker is told: the latest pod, or that it is gone.
#[derive(Clone)]
pub(crate) enum Desired {
    Pod(Box<Pod>),
    /// An API pod left the API server: remove what is left of it.
    Gone,
    /// A static pod left its source: stop it with its grace period, remove it and its mirror pod.
    Removed,
}

/// (namespace, pod, container).
type ContainerKey = (String, String, String);
/// (pod UID, newest instance, the one before).
type Instances = (String, Option<String>, Option<String>);
/// (namespace, name).
pub(crate) type PodKey = (String, String);

/// What the kubelet's main loop tracks between events.
#[derive(Default)]
struct RunState {
    /// The static pods.
    config: PodConfig,
    /// UIDs of the API pods in the informer's current (re)list.
    listed: HashSet<String>,
    /// Mirror pods of the current (re)list, published when it is complete.
    mirrors_listed: HashMap<PodKey, Pod>,
    /// The informer has completed a list.
    api_synced: bool,
    /// The start-up sweep of orphaned containers has run.
    orphans_cleaned: bool,
}

/// The kubelet's local copy of an API pod carries `config.source=api`, as upstream's, so a pod is static
/// exactly when its source says `file` or `http`.
fn api_pod(mut pod: Pod) -> Pod {
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.to_string(), API_SOURCE.to_string());
    pod
}

fn without_managed_fields(mut pod: Pod) -> Pod {
    pod.metadata.managed_fields = None;
    pod
}

pub(crate) fn pod_key(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pod side of the node agent.
pub struct Kubelet {
    /// What logs and exec reach.
    pub(crate) containers: Arc<Mutex<HashMap<ContainerKey, Instances>>>,
    pub(crate) client: kube::Client,
    pub(crate) runtime: Arc<dyn ContainerRuntime>,
    pub(crate) cfg: KubeletConfig,
    pub(crate) recorder: Arc<Recorder>,
    /// The latest desired state of each pod UID, read by its worker.
    pub(crate) workers: Mutex<HashMap<String, watch::Sender<Desired>>>,
    /// Mirror pods on this node, as the informer (or the last create) saw them.
    pub(crate) mirrors: Mutex<HashMap<PodKey, Pod>>,
    /// Static pods being stopped, by name: a successor of the same name (an edited manifest) waits for
    /// them, and their mirror pods are not orphans yet (upstream's `allowStaticPodStart`).
    pub(crate) stopping: Mutex<HashMap<PodKey, HashSet<String>>>,
    /// A housekeeping pass is running.
    pub(crate) housekeeping: std::sync::atomic::AtomicBool,
    /// A container garbage collection is running.
    collecting: std::sync::atomic::AtomicBool,
    /// The probe manager: a worker per container probe.
    pub(crate) probes: Arc<prober::Manager>,
    /// The status manager's cache, which the probe workers read.
    pub(crate) statuses: Arc<PodStatusCache>,
    /// Ends the probe workers when the kubelet stops.
    probe_cancel: CancellationToken,
    /// The tokens of pods' projected serviceAccountToken sources.
    pub(crate) tokens: Arc<crate::token_manager::TokenManager>,
}

impl Kubelet {
    /// A kubelet for `cfg.node_name` over `runtime`.
    pub fn new(client: kube::Client, runtime: Arc<dyn ContainerRuntime>, cfg: KubeletConfig) -> Arc<Kubelet> {
        let prober = Arc::new(RealProber::new(runtime.clone()));
        Self::with_prober(client, runtime, cfg, prober)
    }

    /// A kubelet whose probes run through `prober` (a fake, in benchmarks and tests).
    pub fn with_prober(
        client: kube::Client,
        runtime: Arc<dyn ContainerRuntime>,
        cfg: KubeletConfig,
        prober: Arc<dyn prober::Prober>,
    ) -> Arc<Kubelet> {
        let recorder = Arc::new(Recorder::new(client.clone(), "kubelet", Some(&cfg.node_name)));
        let statuses = Arc::new(PodStatusCache::new());
        let probe_cancel = CancellationToken::new();
        let probes = prober::Manager::new(
            prober::ManagerConfig {
                status: statuses.clone(),
                prober,
                events: Arc::new(RecorderEvents(recorder.clone())),
                clock: prober::system_clock(),
            },
            probe_cancel.clone(),
        );
        let tokens = Arc::new(crate::token_manager::TokenManager::new(Arc::new(
            crate::token_manager::KubeRequester(client.clone()),
        )));
        Arc::new(Kubelet {
            containers: Arc::new(Mutex::new(HashMap::new())),
            tokens,
            client,
            runtime,
            cfg,
            recorder,
            workers: Mutex::new(HashMap::new()),
            mirrors: Mutex::new(HashMap::new()),
            stopping: Mutex::new(HashMap::new()),
            housekeeping: std::sync::atomic::AtomicBool::new(false),
            collecting: std::sync::atomic::AtomicBool::new(false),
            probes,
            statuses,
            probe_cancel,
        })
    }

    /// The lookup the node's logs/exec endpoint uses: the current (or, with `previous`, the previous)
    /// container instance of a pod's container, as the workers last saw them.
    pub fn container_lookup(&self) -> crate::server::ContainerLookup {
        let map = self.containers.clone();
        Arc::new(move |ns: &str, pod: &str, container: &str, previous: bool| {
            let m = map.lock().unwrap_or_else(|e| e.into_inner());
            let (_, current, prev) = m.get(&(ns.to_string(), pod.to_string(), container.to_string()))?;
            if previous { prev.clone() } else { current.clone() }
        })
    }

    /// Run the informer, the static pod sources' updates (from `sources`, sent by the sources named
    /// `static_sources`) and the pod workers until `cancel`. Containers keep running after that (a restart
    /// adopts them).
    pub async fn run(
        self: Arc<Self>,
        mut sources: mpsc::Receiver<SourceUpdate>,
        static_sources: &[&'static str],
        cancel: CancellationToken,
    ) {
        let selector = Selector::all().fields(&format!("spec.nodeName={}", self.cfg.node_name));
        let mut stream = client::watch::events::<Pod>(self.client.clone(), Target::of::<Pod>(selector));
        let mut state = RunState {
            config: PodConfig::new(static_sources),
            ..Default::default()
        };
        let mut sources_open = true;
        let _stop_probes = self.probe_cancel.clone().drop_guard();
        tokio::spawn(self.clone().probe_updates(cancel.clone()));
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_PERIOD);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut container_gc = tokio::time::interval(self.cfg.container_gc_period);
        container_gc.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                event = stream.next() => match event {
                    Some(event) => self.on_api_event(event, &mut state, &cancel),
                    None => return,
                },
                update = sources.recv(), if sources_open => match update {
                    Some(update) => self.on_source_update(update, &mut state.config, &cancel),
                    None => sources_open = false,
                },
                _ = housekeeping.tick() => {
                    if state.api_synced && state.config.seen_all() {
                        self.start_housekeeping(&state.config);
                        let desired: HashSet<String> =
                            self.workers.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
                        self.probes.cleanup_pods(&desired);
                    }
                }
                _ = container_gc.tick() => {
                    // Nothing is removed before every source has said which pods exist.
                    if state.api_synced && state.config.seen_all() {
                        self.start_container_gc();
                    }
                }
            }
            if !state.orphans_cleaned && state.api_synced && state.config.seen_all() {
                state.orphans_cleaned = true;
                let mut keep = state.listed.clone();
                keep.extend(state.config.pods().filter_map(|p| p.metadata.uid.clone()));
                let me = self.clone();
                tokio::spawn(async move { me.clean_orphans(&keep).await });
            }
        }
    }

    /// The probe results' update loop (upstream `syncLoopIteration`'s probe cases): a readiness or startup
    /// change, or a liveness failure, syncs the pod at once, so its status (ready, started, the Ready
    /// conditions) is written and a failed container is killed without waiting for the next relist.
    async fn probe_updates(self: Arc<Self>, cancel: CancellationToken) {
        let take = |t| self.probes.results(t).updates();
        let (Some(mut live), Some(mut ready), Some(mut started)) = (
            take(prober::ProbeType::Liveness),
            take(prober::ProbeType::Readiness),
            take(prober::ProbeType::Startup),
        ) else {
            return;
        };
        loop {
            let update = tokio::select! {
                _ = cancel.cancelled() => return,
                Some(u) = live.recv() => (u.result == ProbeResult::Failure).then_some(u),
                Some(u) = ready.recv() => Some(u),
                Some(u) = started.recv() => Some(u),
                else => return,
            };
            if let Some(u) = update {
                self.wake(&u.pod_uid);
            }
        }
    }

    /// Makes a pod's worker sync now (its desired pod unchanged).
    pub(crate) fn wake(&self, uid: &str) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = workers.get(uid) {
            tx.send_modify(|_| {});
        }
    }

    fn on_api_event(
        self: &Arc<Self>,
        event: Result<Event<Pod>, kube::Error>,
        state: &mut RunState,
        cancel: &CancellationToken,
    ) {
        // The kubelet never reads managedFields: dropping them keeps each pod it holds small.
        let event = event.map(|e| match e {
            Event::InitApply(p) => Event::InitApply(without_managed_fields(p)),
            Event::Apply(p) => Event::Apply(without_managed_fields(p)),
            e => e,
        });
        match event {
            Ok(Event::Init) => {
                state.listed.clear();
                state.mirrors_listed.clear();
            }
            Ok(Event::InitApply(pod)) if mirror::is_mirror_pod(&pod) => {
                state.mirrors_listed.insert(pod_key(&pod), pod);
            }
            Ok(Event::InitApply(pod)) => {
                state.listed.insert(pod.metadata.uid.clone().unwrap_or_default());
                self.dispatch(api_pod(pod), cancel);
            }
            Ok(Event::InitDone) => {
                *self.mirrors.lock().unwrap_or_else(|e| e.into_inner()) =
                    std::mem::take(&mut state.mirrors_listed);
                // API pods that vanished while we were not watching: tell their workers.
                let gone: Vec<String> = {
                    let w = self.workers.lock().unwrap_or_else(|e| e.into_inner());
                    w.keys()
                        .filter(|uid| !state.listed.contains(*uid))
                        .cloned()
                        .collect()
                };
                for uid in gone {
                    self.api_pod_gone(&uid);
                }
                state.api_synced = true;
            }
            Ok(Event::Apply(pod)) if mirror::is_mirror_pod(&pod) => self.upsert_mirror(pod),
            Ok(Event::Apply(pod)) => self.dispatch(api_pod(pod), cancel),
            Ok(Event::Delete(pod)) if mirror::is_mirror_pod(&pod) => {
                self.forget_mirror(&pod_key(&pod), pod.metadata.uid.as_deref().unwrap_or_default());
            }
            Ok(Event::Delete(pod)) => {
                self.api_pod_gone(pod.metadata.uid.as_deref().unwrap_or_default());
            }
            Err(e) => tracing::warn!(error = %e, "pod informer"),
        }
    }

    fn on_source_update(
        self: &Arc<Self>,
        update: SourceUpdate,
        config: &mut PodConfig,
        cancel: &CancellationToken,
    ) {
        match update {
            SourceUpdate::Snapshot { source, pods } => {
                let ops = config.merge(source, pods, Timestamp::now());
                // Removals first, so a replaced pod's name is marked as stopping before its successor starts.
                for op in &ops {
                    if let PodOp::Remove(uid) = op {
                        self.remove_static(uid);
                    }
                }
                for op in ops {
                    match op {
                        PodOp::Add(pod) | PodOp::Update(pod) => self.dispatch(*pod, cancel),
                        PodOp::Rejected(message) => {
                            tracing::warn!(%message, "static pod skipped");
                            self.node_warning(message);
                        }
                        PodOp::Remove(_) => {}
                    }
                }
            }
            // The source has logged it.
            SourceUpdate::Invalid { origin, error, .. } => self.node_warning(format!("{origin}: {error}")),
        }
    }

    /// A `FailedValidation` Warning event on the Node: best effort, never blocking the loop.
    fn node_warning(&self, message: String) {
        let recorder = self.recorder.clone();
        let node = node_ref(&self.cfg.node_name);
        tokio::spawn(async move {
            recorder
                .record(&node, EventType::Warning, "FailedValidation", &message)
                .await;
        });
    }

    /// Keeps the newer of two mirror pods of one name: a stale informer event never replaces a mirror the
    /// kubelet has just created.
    pub(crate) fn upsert_mirror(&self, pod: Pod) {
        let rv = |p: &Pod| {
            p.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        let key = pod_key(&pod);
        if let Some(existing) = mirrors.get(&key)
            && let (Some(old), Some(new)) = (rv(existing), rv(&pod))
            && old > new
        {
            return;
        }
        mirrors.insert(key, pod);
    }

    pub(crate) fn forget_mirror(&self, key: &PodKey, uid: &str) {
        let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        if mirrors
            .get(key)
            .is_some_and(|m| m.metadata.uid.as_deref() == Some(uid))
        {
            mirrors.remove(key);
        }
    }

    /// The current mirror pod of a static pod, if the API server has one.
    pub(crate) fn mirror_of(&self, static_pod: &Pod) -> Option<Pod> {
        let mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        mirrors
            .get(&pod_key(static_pod))
            .filter(|m| m.metadata.deletion_timestamp.is_none() && mirror::is_mirror_of(m, static_pod))
            .cloned()
    }

    /// Starts a container garbage collection unless one is still running, off the main loop.
    fn start_container_gc(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.collecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut alive = HashSet::new();
            let removed = crate::gc::collect_garbage(me.runtime.as_ref(), || {
                alive = me
                    .workers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .keys()
                    .cloned()
                    .collect();
                alive.clone()
            })
            .await;
            // The termination message files of removed instances of living pods (a gone pod's directory
            // goes with its worker).
            if let Ok(host) = crate::volumes::VolumeHost::new(&me.cfg.data_dir) {
                for e in removed.iter().filter(|e| alive.contains(&e.pod_uid)) {
                    if let (Ok(dir), Some(n)) = (host.pod_dir(&e.pod_uid), e.restart_count) {
                        let _ = std::fs::remove_file(crate::termination::message_file(&dir, &e.name, n));
                    }
                }
            }
            me.collecting.store(false, Ordering::Release);
        });
    }

    /// Starts a housekeeping pass unless one is still running, off the main loop (it talks to the API
    /// server).
    fn start_housekeeping(self: &Arc<Self>, config: &PodConfig) {
        use std::sync::atomic::Ordering;
        if self.housekeeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let statics: HashSet<PodKey> = config.pods().map(pod_key).collect();
        let me = self.clone();
        tokio::spawn(async move {
            me.delete_orphaned_mirrors(&statics).await;
            me.housekeeping.store(false, Ordering::Release);
        });
    }

    /// Housekeeping: mirror pods on this node whose static pod is gone and done stopping (upstream's orphan
    /// mirror cleanup, grace 0, no precondition).
    async fn delete_orphaned_mirrors(&self, statics: &HashSet<PodKey>) {
        let orphans: Vec<Pod> = {
            let stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
            let mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
            mirrors
                .iter()
                .filter(|(key, _)| !statics.contains(*key) && !stopping.contains_key(*key))
                .map(|(_, m)| m.clone())
                .collect()
        };
        for m in orphans {
            let (ns, name) = pod_key(&m);
            tracing::info!(pod = %name, namespace = %ns, "deleting an orphaned mirror pod");
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            if !delete_now(&api, &name, None).await {
                continue;
            }
            self.forget_mirror(&(ns, name), m.metadata.uid.as_deref().unwrap_or_default());
        }
    }

    /// An API pod left the API server. Static pods' workers are never told (the same UID cannot be both).
    fn api_pod_gone(&self, uid: &str) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = workers.get(uid) {
            let api = matches!(&*tx.borrow(), Desired::Pod(p) if !mirror::is_static_pod(p));
            if api {
                tx.send_replace(Desired::Gone);
            }
        }
    }

    /// A static pod left its source: its name is marked as stopping, and its worker told.
    fn remove_static(&self, uid: &str) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = workers.get(uid) else { return };
        let key = match &*tx.borrow() {
            Desired::Pod(p) => Some(pod_key(p)),
            _ => None,
        };
        if let Some(key) = key {
            let mut stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
            stopping.entry(key).or_default().insert(uid.to_string());
        }
        tx.send_replace(Desired::Removed);
    }

    /// The static pod `uid` has stopped: its name is free.
    pub(crate) fn stopped_static(&self, key: &PodKey, uid: &str) {
        let mut stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(uids) = stopping.get_mut(key) {
            uids.remove(uid);
            if uids.is_empty() {
                stopping.remove(key);
            }
        }
    }

    /// Whether another static pod of this name is still stopping.
    pub(crate) fn name_in_use(&self, key: &PodKey, uid: &str) -> bool {
        let stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
        stopping
            .get(key)
            .is_some_and(|uids| uids.iter().any(|u| u != uid))
    }

    fn dispatch(self: &Arc<Self>, pod: Pod, cancel: &CancellationToken) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        match workers.get(&uid) {
            Some(tx) => {
                tx.send_replace(Desired::Pod(Box::new(pod)));
            }
            None => {
                let (tx, mut rx) = watch::channel(Desired::Pod(Box::new(pod)));
                workers.insert(uid.clone(), tx);
                let me = self.clone();
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    loop {
                        crate::pod_workers::Worker::new(me.clone(), uid.clone())
                            .run(rx, cancel.clone())
                            .await;
                        // A static pod may come back (same UID) while its worker was stopping it: the last
                        // word is checked under the lock dispatch() takes, so it is never lost.
                        let mut workers = me.workers.lock().unwrap_or_else(|e| e.into_inner());
                        match workers.get(&uid) {
                            Some(tx) if !cancel.is_cancelled() && matches!(*tx.borrow(), Desired::Pod(_)) => {
                                rx = tx.subscribe();
                            }
                            _ => {
                                workers.remove(&uid);
                                return;
                            }
                        }
                    }
                });
            }
        }
    }

    /// Containers of pods that no source has (`keep` holds every pod UID the sources reported), found once
    /// every source has reported.
    async fn clean_orphans(&self, keep: &HashSet<String>) {
        let Ok(all) = self.runtime.list(&ListFilter::all()).await else {
            return;
        };
        let orphans: Vec<_> = all
            .into_iter()
            .filter(|c| c.pod_uid().is_some_and(|u| !keep.contains(u)))
            .filter(|c| {
                !self
                    .workers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains_key(c.pod_uid().unwrap_or(""))
            })
            .collect();
        for c in orphans {
            tracing::info!(container = %c.name, "removing a container of a pod that no longer exists");
            let _ = self
                .runtime
                .stop_container(&c.id, Duration::from_secs(2), None)
                .await;
            let _ = self.runtime.remove_container(&c.id).await;
        }
    }
}

/// Probe events through the kubelet's recorder, about the container (`involvedObject.fieldPath`).
struct RecorderEvents(Arc<Recorder>);

impl ProbeEvents for RecorderEvents {
    fn record(&self, pod: &Pod, field_path: &str, ty: EventType, reason: &'static str, message: String) {
        let mut object = pod_ref(pod);
        object.field_path = Some(field_path.to_owned());
        let recorder = self.0.clone();
        tokio::spawn(async move { recorder.record(&object, ty, reason, &message).await });
    }
}

/// Deletes a pod with grace 0 (and the UID as precondition when given). True when it is gone: deleted now,
/// already gone (404), or replaced by another pod of the same name (409 on the precondition).
pub(crate) async fn delete_now(api: &Api<Pod>, name: &str, uid: Option<&str>) -> bool {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => true,
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => true,
        Err(e) => {
            tracing::debug!(pod = %name, error = %e, "deleting a mirror pod");
            false
        }
    }
}
