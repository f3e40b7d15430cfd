//! The pod side of the node agent: the informer, one worker per pod UID, and the status manager.
//!
//! ```text
//! informer (kube watcher, fieldSelector spec.nodeName=<node>)
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{PodConfig, PodOp};
use crate::events::{EventType, Recorder, node_ref, pod_ref};
use crate::lifecycle::backoff::{BackoffState, image_pull_key};
use crate::lifecycle::hash::hash_container;
use crate::lifecycle::plan::{self, ObservedContainer, ObservedPod, ObservedSandbox, PodActions};
use crate::lifecycle::status::{StatusContext, WaitingReason, pod_status};
use crate::mirror::{self, API_SOURCE, MirrorAction};
use crate::runtime::{
    ContainerConfig, ContainerKind, ContainerRuntime, CriState, ListFilter, PortMapping, Protocol,
    PullPolicy, Resources, SandboxConfig, SecurityConfig,
};
use crate::sources::{CONFIG_SOURCE_ANNOTATION, SourceUpdate};

/// upstream: the generic PLEG relists every second.
const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// upstream: `minimumGracePeriodInSeconds` = 2.
const MINIMUM_GRACE_PERIOD: i64 = 2;
/// How long one sync waits on the API server for a static pod's mirror pod.
const MIRROR_SYNC_TIMEOUT: Duration = Duration::from_secs(2);
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
}

/// What a worker is told: the latest pod, or that it is gone.
#[derive(Clone)]
enum Desired {
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
type PodKey = (String, String);

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

fn pod_key(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pod side of the node agent.
pub struct Kubelet {
    /// What logs and exec reach.
    containers: Arc<Mutex<HashMap<ContainerKey, Instances>>>,
    client: kube::Client,
    runtime: Arc<dyn ContainerRuntime>,
    cfg: KubeletConfig,
    recorder: Arc<Recorder>,
    /// The latest desired state of each pod UID, read by its worker.
    workers: Mutex<HashMap<String, watch::Sender<Desired>>>,
    /// Mirror pods on this node, as the informer (or the last create) saw them.
    mirrors: Mutex<HashMap<PodKey, Pod>>,
    /// Static pods being stopped, by name: a successor of the same name (an edited manifest) waits for
    /// them, and their mirror pods are not orphans yet (upstream's `allowStaticPodStart`).
    stopping: Mutex<HashMap<PodKey, HashSet<String>>>,
    /// A housekeeping pass is running.
    housekeeping: std::sync::atomic::AtomicBool,
}

impl Kubelet {
    /// A kubelet for `cfg.node_name` over `runtime`.
    pub fn new(client: kube::Client, runtime: Arc<dyn ContainerRuntime>, cfg: KubeletConfig) -> Arc<Kubelet> {
        let recorder = Arc::new(Recorder::new(client.clone(), "kubelet", Some(&cfg.node_name)));
        Arc::new(Kubelet {
            containers: Arc::new(Mutex::new(HashMap::new())),
            client,
            runtime,
            cfg,
            recorder,
            workers: Mutex::new(HashMap::new()),
            mirrors: Mutex::new(HashMap::new()),
            stopping: Mutex::new(HashMap::new()),
            housekeeping: std::sync::atomic::AtomicBool::new(false),
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
        let pods: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.cfg.node_name));
        let stream = watcher(pods, config).default_backoff();
        futures_util::pin_mut!(stream);
        let mut state = RunState {
            config: PodConfig::new(static_sources),
            ..Default::default()
        };
        let mut sources_open = true;
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_PERIOD);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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

    fn on_api_event(
        self: &Arc<Self>,
        event: Result<watcher::Event<Pod>, watcher::Error>,
        state: &mut RunState,
        cancel: &CancellationToken,
    ) {
        match event {
            Ok(watcher::Event::Init) => {
                state.listed.clear();
                state.mirrors_listed.clear();
            }
            Ok(watcher::Event::InitApply(pod)) if mirror::is_mirror_pod(&pod) => {
                state.mirrors_listed.insert(pod_key(&pod), pod);
            }
            Ok(watcher::Event::InitApply(pod)) => {
                state.listed.insert(pod.metadata.uid.clone().unwrap_or_default());
                self.dispatch(api_pod(pod), cancel);
            }
            Ok(watcher::Event::InitDone) => {
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
            Ok(watcher::Event::Apply(pod)) if mirror::is_mirror_pod(&pod) => self.upsert_mirror(pod),
            Ok(watcher::Event::Apply(pod)) => self.dispatch(api_pod(pod), cancel),
            Ok(watcher::Event::Delete(pod)) if mirror::is_mirror_pod(&pod) => {
                self.forget_mirror(&pod_key(&pod), pod.metadata.uid.as_deref().unwrap_or_default());
            }
            Ok(watcher::Event::Delete(pod)) => {
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
    fn upsert_mirror(&self, pod: Pod) {
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

    fn forget_mirror(&self, key: &PodKey, uid: &str) {
        let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        if mirrors
            .get(key)
            .is_some_and(|m| m.metadata.uid.as_deref() == Some(uid))
        {
            mirrors.remove(key);
        }
    }

    /// The current mirror pod of a static pod, if the API server has one.
    fn mirror_of(&self, static_pod: &Pod) -> Option<Pod> {
        let mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        mirrors
            .get(&pod_key(static_pod))
            .filter(|m| m.metadata.deletion_timestamp.is_none() && mirror::is_mirror_of(m, static_pod))
            .cloned()
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
    fn stopped_static(&self, key: &PodKey, uid: &str) {
        let mut stopping = self.stopping.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(uids) = stopping.get_mut(key) {
            uids.remove(uid);
            if uids.is_empty() {
                stopping.remove(key);
            }
        }
    }

    /// Whether another static pod of this name is still stopping.
    fn name_in_use(&self, key: &PodKey, uid: &str) -> bool {
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
                        Worker::new(me.clone(), uid.clone()).run(rx, cancel.clone()).await;
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

struct Worker {
    k: Arc<Kubelet>,
    uid: String,
    crash_backoff: BackoffState,
    pull_backoff: BackoffState,
    waiting: BTreeMap<String, WaitingReason>,
    last_status: Option<PodStatus>,
    /// The UID of the pod the last status was written to (the mirror pod's, for a static pod).
    reported_to: Option<String>,
    /// (namespace, name) of the pod, once known.
    pod_names: Option<(String, String)>,
    /// The last desired pod.
    last_pod: Option<Pod>,
}

impl Worker {
    fn new(k: Arc<Kubelet>, uid: String) -> Worker {
        Worker {
            k,
            uid,
            crash_backoff: BackoffState::crash_loop(),
            pull_backoff: BackoffState::image_pull(),
            waiting: BTreeMap::new(),
            last_status: None,
            reported_to: None,
            pod_names: None,
            last_pod: None,
        }
    }

    async fn run(mut self, mut rx: watch::Receiver<Desired>, cancel: CancellationToken) {
        loop {
            let desired = rx.borrow_and_update().clone();
            let pod = match desired {
                Desired::Gone => {
                    self.remove_everything().await;
                    return;
                }
                Desired::Removed => {
                    let pod = self.last_pod.take();
                    if let Some(pod) = &pod {
                        self.stop_static(pod).await;
                    }
                    self.remove_everything().await;
                    if let Some(pod) = &pod {
                        self.k.stopped_static(&pod_key(pod), &self.uid);
                    }
                    return;
                }
                Desired::Pod(p) => *p,
            };
            self.last_pod = Some(pod.clone());
            if self.pod_names.is_none() {
                self.pod_names = Some((
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                ));
            }
            if pod.metadata.deletion_timestamp.is_some() && !mirror::is_static_pod(&pod) {
                self.terminate(&pod).await;
                // Wait until the API server confirms the pod is gone, then clean up.
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        r = rx.changed() => if r.is_err() { return },
                    }
                    if matches!(*rx.borrow(), Desired::Gone) {
                        self.remove_everything().await;
                        return;
                    }
                }
            }
            let next_check = self.sync(&pod).await;
            let wait = match next_check {
                Some(t) => {
                    let d = t.duration_since(Timestamp::now()).unsigned_abs();
                    d.min(RELIST_PERIOD)
                }
                None => RELIST_PERIOD,
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                r = rx.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn observe(&self) -> ObservedPod {
        let out = self.observe_runtime().await;
        // Publish the newest and previous instance of each container for logs and exec.
        let mut by_name: BTreeMap<&str, Vec<&ObservedContainer>> = BTreeMap::new();
        for c in &out.containers {
            by_name.entry(c.name.as_str()).or_default().push(c);
        }
        if let Some((ns, pod)) = self.pod_names.clone() {
            let mut map = self.k.containers.lock().unwrap_or_else(|e| e.into_inner());
            for (name, mut instances) in by_name {
                instances.sort_by_key(|c| std::cmp::Reverse(c.created));
                let current = instances.first().map(|c| c.id.clone());
                let previous = instances.get(1).map(|c| c.id.clone());
                let key = (ns.clone(), pod.clone(), name.to_string());
                map.insert(key, (self.uid.clone(), current, previous));
            }
        }
        out
    }

    async fn observe_runtime(&self) -> ObservedPod {
        let mut out = ObservedPod::default();
        let Ok(list) = self.k.runtime.list(&ListFilter::all().pod_uid(&self.uid)).await else {
            return out;
        };
        for c in list {
            let Ok(st) = self.k.runtime.inspect(&c.id).await else {
                continue;
            };
            match c.kind() {
                Some(ContainerKind::Sandbox) => out.sandboxes.push(ObservedSandbox {
                    id: c.id.clone(),
                    attempt: c.attempt().unwrap_or(0),
                    ready: st.cri_state() == CriState::Running,
                    ip: Some(st.ip_address.clone()).filter(|ip| !ip.is_empty()),
                    host_network: st.network_mode == "host",
                    created: c.created,
                }),
                Some(ContainerKind::Container) => {
                    let state = match st.cri_state() {
                        CriState::Running => plan::ContainerState::Running {
                            started_at: st.started_at.unwrap_or(c.created),
                        },
                        CriState::Created => plan::ContainerState::Created,
                        CriState::Exited { reason } => plan::ContainerState::Exited {
                            exit_code: st.exit_code as i32,
                            reason: Some(reason.to_string()),
                            message: Some(st.error.clone()).filter(|e| !e.is_empty()),
                            started_at: st.started_at.unwrap_or(c.created),
                            finished_at: st.finished_at.unwrap_or(c.created),
                            oom_killed: st.oom_killed,
                        },
                    };
                    out.containers.push(ObservedContainer {
                        id: c.id.clone(),
                        name: c.container_name().unwrap_or("").to_string(),
                        restart_count: c.restart_count().unwrap_or(0),
                        hash: c.hash().unwrap_or("").to_string(),
                        image: c.image.clone(),
                        image_ref: format!("docker://{}", st.image_id),
                        created: c.created,
                        state,
                        liveness: None,
                        readiness: None,
                        startup: None,
                    });
                }
                None => {}
            }
        }
        out
    }

    /// One pass: plan, act, report. Returns when to look again at the latest.
    async fn sync(&mut self, pod: &Pod) -> Option<Timestamp> {
        // A static pod waits for the one it replaces (same name, older manifest) to stop.
        if mirror::is_static_pod(pod) && self.k.name_in_use(&pod_key(pod), &self.uid) {
            return None;
        }
        // Upstream reconciles the mirror pod first in SyncPod, before anything starts. Bounded, so an API
        // server that does not answer never holds up a static pod.
        if mirror::is_static_pod(pod) {
            let _ = tokio::time::timeout(MIRROR_SYNC_TIMEOUT, self.sync_mirror(pod)).await;
        }
        let now = Timestamp::now();
        let observed = self.observe().await;
        let actions = plan::plan(pod, &observed, &self.crash_backoff, now);
        let acted = self.execute(pod, &observed, &actions).await;
        self.crash_backoff.record_starts(&actions, Timestamp::now());
        for b in &actions.backoff {
            self.waiting.insert(
                b.name.clone(),
                WaitingReason {
                    reason: plan::CRASH_LOOP_BACK_OFF.to_string(),
                    message: Some(b.message.clone()),
                },
            );
        }
        let observed = if acted { self.observe().await } else { observed };
        self.report(pod, &observed, false).await;
        actions.next_check
    }

    async fn execute(&mut self, pod: &Pod, observed: &ObservedPod, actions: &PodActions) -> bool {
        let mut acted = false;
        let grace = Duration::from_secs(2);
        if actions.kill_pod {
            acted = true;
            self.kill_all(pod, observed, grace.as_secs() as i64).await;
        }
        for k in &actions.containers_to_kill {
            acted = true;
            self.k
                .recorder
                .record(&pod_ref(pod), EventType::Normal, "Killing", &k.message)
                .await;
            let _ = self.k.runtime.stop_container(&k.id, grace_of(pod), None).await;
        }
        let mut sandbox = observed
            .sandboxes
            .iter()
            .filter(|s| s.ready)
            .max_by_key(|s| s.created)
            .cloned();
        if let Some(attempt) = actions.create_sandbox {
            acted = true;
            match self.create_sandbox(pod, attempt).await {
                Ok(s) => sandbox = Some(s),
                Err(e) => {
                    let msg = format!("Failed to create pod sandbox: {e}");
                    self.k
                        .recorder
                        .record(&pod_ref(pod), EventType::Warning, "FailedCreatePodSandBox", &msg)
                        .await;
                    return acted;
                }
            }
        }
        let Some(sandbox) = sandbox else { return acted };
        let spec = pod.spec.clone().unwrap_or_default();
        let inits = spec.init_containers.clone().unwrap_or_default();
        for &i in &actions.init_containers_to_start {
            acted = true;
            if let Some(c) = inits.get(i) {
                self.start_container(pod, c, &sandbox, observed).await;
            }
        }
        for &i in &actions.containers_to_start {
            acted = true;
            if let Some(c) = spec.containers.get(i) {
                self.start_container(pod, c, &sandbox, observed).await;
            }
        }
        acted
    }

    async fn create_sandbox(&mut self, pod: &Pod, attempt: u32) -> Result<ObservedSandbox, String> {
        let spec = pod.spec.clone().unwrap_or_default();
        let meta = &pod.metadata;
        let mut ports = Vec::new();
        for c in &spec.containers {
            for p in c.ports.iter().flatten() {
                if let Some(hp) = p.host_port.filter(|h| *h > 0) {
                    ports.push(PortMapping {
                        container_port: p.container_port as u16,
                        host_port: hp as u16,
                        protocol: match p.protocol.as_deref() {
                            Some("UDP") => Protocol::Udp,
                            Some("SCTP") => Protocol::Sctp,
                            _ => Protocol::Tcp,
                        },
                        host_ip: p.host_ip.clone(),
                    });
                }
            }
        }
        let cfg = SandboxConfig {
            pod_name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: self.uid.clone(),
            attempt,
            image: self.k.cfg.pause_image.clone(),
            hostname: Some(
                spec.hostname
                    .clone()
                    .unwrap_or_else(|| meta.name.clone().unwrap_or_default()),
            ),
            host_network: spec.host_network.unwrap_or(false),
            host_pid: spec.host_pid.unwrap_or(false),
            host_ipc: spec.host_ipc.unwrap_or(false),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            port_mappings: ports,
            ..Default::default()
        };
        let id = self
            .k
            .runtime
            .create_sandbox(&cfg)
            .await
            .map_err(|e| e.to_string())?;
        self.k.runtime.start(&id).await.map_err(|e| e.to_string())?;
        let st = self.k.runtime.inspect(&id).await.map_err(|e| e.to_string())?;
        Ok(ObservedSandbox {
            id,
            attempt,
            ready: true,
            ip: Some(st.ip_address).filter(|ip| !ip.is_empty()),
            host_network: cfg.host_network,
            created: st.created_at.unwrap_or_else(Timestamp::now),
        })
    }

    async fn start_container(
        &mut self,
        pod: &Pod,
        c: &Container,
        sandbox: &ObservedSandbox,
        observed: &ObservedPod,
    ) {
        let r = pod_ref(pod);
        let image = c.image.clone().unwrap_or_default();
        let policy = PullPolicy::from_api(c.image_pull_policy.as_deref(), &image);
        let pull_key = image_pull_key(&self.uid, &image);
        let now = Timestamp::now();
        if self.pull_backoff.is_in_backoff_since_update(&pull_key, now) {
            let msg = format!("Back-off pulling image {image:?}");
            self.waiting.insert(
                c.name.clone(),
                WaitingReason {
                    reason: "ImagePullBackOff".into(),
                    message: Some(msg.clone()),
                },
            );
            self.k
                .recorder
                .record(&r, EventType::Normal, "BackOff", &msg)
                .await;
            return;
        }
        match self.k.runtime.ensure_image(&image, policy).await {
            Ok(_) => {
                let msg = format!("Container image {image:?} already present on machine");
                self.k
                    .recorder
                    .record(&r, EventType::Normal, "Pulled", &msg)
                    .await;
            }
            Err(e) => {
                let never = matches!(policy, PullPolicy::Never);
                let reason = if never {
                    "ErrImageNeverPull"
                } else {
                    "ErrImagePull"
                };
                let msg = e.to_string();
                self.pull_backoff.next(&pull_key, now, now);
                self.waiting.insert(
                    c.name.clone(),
                    WaitingReason {
                        reason: reason.into(),
                        message: Some(msg.clone()),
                    },
                );
                let text = format!("Failed to pull image {image:?}: {msg}");
                self.k
                    .recorder
                    .record(&r, EventType::Warning, "Failed", &text)
                    .await;
                self.k
                    .recorder
                    .record(&r, EventType::Warning, "Failed", &format!("Error: {reason}"))
                    .await;
                return;
            }
        }
        let restart_count = observed
            .containers
            .iter()
            .filter(|o| o.name == c.name)
            .map(|o| o.restart_count + 1)
            .max()
            .unwrap_or(0);
        // Environment and volumes need the ConfigMaps and Secrets the pod refers to; a missing one is
        // CreateContainerConfigError, retried on the next sync (never a crash).
        let (env, mounts) = match self.container_config_inputs(pod, c, sandbox).await {
            Ok(v) => v,
            Err(msg) => {
                self.container_failed(&r, &c.name, "CreateContainerConfigError", msg.to_string())
                    .await;
                return;
            }
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let limits = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap_or_default();
        let cfg = ContainerConfig {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            uid: self.uid.clone(),
            name: c.name.clone(),
            restart_count,
            sandbox_id: sandbox.id.clone(),
            image: image.clone(),
            command: env.command,
            args: env.args,
            env: env.env,
            mounts: mounts.binds,
            tmpfs: mounts.tmpfs,
            working_dir: c.working_dir.clone(),
            resources: Resources {
                memory_limit: limits.get("memory").and_then(|q| parse_bytes(&q.0)),
                cpu_limit_millis: limits.get("cpu").and_then(|q| parse_millis(&q.0)),
                // CPU shares follow the request (upstream MilliCPUToShares), defaulted from the limit.
                cpu_request_millis: c
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("cpu"))
                    .and_then(|q| parse_millis(&q.0))
                    .or_else(|| limits.get("cpu").and_then(|q| parse_millis(&q.0))),
            },
            security: security_config(&spec, c),
            tty: c.tty.unwrap_or(false),
            stdin: c.stdin.unwrap_or(false),
            share_process_namespace: spec.share_process_namespace.unwrap_or(false),
            host_network: spec.host_network.unwrap_or(false),
            hash: hash_container(c),
            termination_message_path: c
                .termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".into()),
            termination_message_policy: c
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".into()),
            termination_grace_period: spec.termination_grace_period_seconds,
            ..Default::default()
        };
        let id = match self.k.runtime.create_container(&cfg).await {
            Ok(id) => id,
            Err(e) => {
                self.container_failed(&r, &c.name, "CreateContainerError", e.to_string())
                    .await;
                return;
            }
        };
        self.k
            .recorder
            .record(
                &r,
                EventType::Normal,
                "Created",
                &format!("Created container: {}", c.name),
            )
            .await;
        if let Err(e) = self.k.runtime.start(&id).await {
            self.container_failed(&r, &c.name, "RunContainerError", e.to_string())
                .await;
            return;
        }
        self.waiting.remove(&c.name);
        self.k
            .recorder
            .record(
                &r,
                EventType::Normal,
                "Started",
                &format!("Started container {}", c.name),
            )
            .await;
        // Keep the newest dead instance for `logs --previous`; older ones go (upstream container GC).
        let mut dead: Vec<&ObservedContainer> = observed
            .containers
            .iter()
            .filter(|o| o.name == c.name && matches!(o.state, plan::ContainerState::Exited { .. }))
            .collect();
        dead.sort_by_key(|o| std::cmp::Reverse(o.created));
        for old in dead.iter().skip(1) {
            let _ = self.k.runtime.remove_container(&old.id).await;
        }
    }

    /// A container could not be created or started: its waiting reason and a `Failed` event say why.
    async fn container_failed(
        &mut self,
        r: &k8s_openapi::api::core::v1::ObjectReference,
        name: &str,
        reason: &str,
        msg: String,
    ) {
        let event = format!("Error: {msg}");
        self.waiting.insert(
            name.to_string(),
            WaitingReason {
                reason: reason.into(),
                message: Some(msg),
            },
        );
        self.k
            .recorder
            .record(r, EventType::Warning, "Failed", &event)
            .await;
    }

    /// Fetch the ConfigMaps and Secrets the pod refers to, set up its volumes, and resolve the container's
    /// environment and mounts.
    async fn container_config_inputs(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &ObservedSandbox,
    ) -> Result<(crate::env::ContainerEnv, crate::volumes::ContainerMounts), String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let refs = crate::env::references(pod);
        let mut objects = crate::env::Objects::default();
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(self.k.client.clone(), ns);
        for name in &refs.config_maps {
            if let Ok(Some(cm)) = cms.get_opt(name).await {
                objects.insert_config_map(cm);
            }
        }
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(self.k.client.clone(), ns);
        for name in &refs.secrets {
            if let Ok(Some(s)) = secrets.get_opt(name).await {
                objects.insert_secret(s);
            }
        }
        let info = crate::env::RuntimeInfo {
            pod_ips: sandbox.ip.iter().cloned().collect(),
            host_ips: vec![self.k.cfg.node_ip.clone()],
            node_allocatable: Default::default(),
        };
        let env = crate::env::make_environment(pod, c, &objects, &info).map_err(|e| e.to_string())?;
        let host = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir).map_err(|e| e.to_string())?;
        let volumes = host.setup_pod(pod, &objects, &info).map_err(|e| e.to_string())?;
        let mounts = volumes.container_mounts(c, &env.env).map_err(|e| e.to_string())?;
        Ok((env, mounts))
    }

    async fn kill_all(&self, pod: &Pod, observed: &ObservedPod, grace: i64) {
        let grace = Duration::from_secs(grace.max(MINIMUM_GRACE_PERIOD) as u64);
        let running: Vec<&ObservedContainer> = observed
            .containers
            .iter()
            .filter(|c| matches!(c.state, plan::ContainerState::Running { .. }))
            .collect();
        let mut stops = Vec::new();
        for c in &running {
            let msg = format!("Stopping container {}", c.name);
            self.k
                .recorder
                .record(&pod_ref(pod), EventType::Normal, "Killing", &msg)
                .await;
            stops.push(self.k.runtime.stop_container(&c.id, grace, None));
        }
        futures_util::future::join_all(stops).await;
        for s in observed.sandboxes.iter().filter(|s| s.ready) {
            let _ = self
                .k
                .runtime
                .stop_container(&s.id, Duration::from_secs(MINIMUM_GRACE_PERIOD as u64), None)
                .await;
        }
    }

    /// Graceful termination (upstream SyncTerminatingPod + the status manager's final delete): stop the
    /// containers with the pod's remaining grace, stop the sandbox, write the terminal status, then delete
    /// the pod with grace 0 and a UID precondition so it leaves the API.
    async fn terminate(&mut self, pod: &Pod) {
        let observed = self.observe().await;
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
        self.kill_all(pod, &observed, grace).await;
        let observed = self.observe().await;
        self.report(pod, &observed, true).await;
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.k.client.clone(), ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        if let Err(e) = api.delete(name, &dp).await {
            tracing::debug!(pod = %name, error = %e, "final delete");
        }
    }

    /// A static pod left its source (upstream's REMOVE): stop its containers with the pod's grace period,
    /// then delete its mirror pod (housekeeping would find it orphaned; this is sooner). No status is
    /// written: a static pod is never given a terminal phase.
    async fn stop_static(&mut self, pod: &Pod) {
        let observed = self.observe().await;
        let grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        self.kill_all(pod, &observed, grace).await;
        if let Some(m) = self.k.mirror_of(pod) {
            let (ns, name) = pod_key(&m);
            let uid = m.metadata.uid.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.k.client.clone(), &ns);
            if delete_now(&api, &name, Some(&uid)).await {
                self.k.forget_mirror(&(ns, name), &uid);
            }
        }
    }

    /// Upstream's `tryReconcileMirrorPods` for this static pod: a mirror pod deleted by a user or made
    /// for an older manifest is deleted (grace 0, its UID as precondition) and a new one created, owned by
    /// the Node. Failures (the API server is down, the Node is not registered yet) are retried on the next
    /// sync; the static pod runs meanwhile.
    async fn sync_mirror(&mut self, pod: &Pod) {
        let (ns, name) = pod_key(pod);
        let current = self
            .k
            .mirrors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ns.clone(), name.clone()))
            .cloned();
        let api: Api<Pod> = Api::namespaced(self.k.client.clone(), &ns);
        match mirror::mirror_action(pod, current.as_ref()) {
            MirrorAction::Keep => return,
            MirrorAction::Create => {}
            MirrorAction::Replace(uid) => {
                if !delete_now(&api, &name, Some(&uid)).await {
                    return;
                }
                self.k.forget_mirror(&(ns.clone(), name.clone()), &uid);
            }
        }
        let nodes: Api<Node> = Api::all(self.k.client.clone());
        let node_uid = loop {
            match nodes.get_opt(&self.k.cfg.node_name).await {
                Ok(Some(n)) if n.metadata.deletion_timestamp.is_none() => {
                    break n.metadata.uid.unwrap_or_default();
                }
                Ok(Some(_)) => return,
                // Registering right now (a static pod read at start-up): poll, as upstream's
                // fastStaticPodsRegistration, within the caller's bound.
                Ok(None) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "mirror pod: cannot read the node");
                    return;
                }
            }
        };
        let wanted = mirror::mirror_pod(pod, &self.k.cfg.node_name, &node_uid);
        match api.create(&PostParams::default(), &wanted).await {
            Ok(created) => self.k.upsert_mirror(created),
            // Made already (our informer has not told us yet): fine when it mirrors this pod.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                if let Ok(Some(existing)) = api.get_opt(&name).await
                    && mirror::is_mirror_of(&existing, pod)
                {
                    self.k.upsert_mirror(existing);
                }
            }
            Err(e) => tracing::debug!(pod = %name, error = %e, "creating the mirror pod"),
        }
    }

    async fn remove_everything(&self) {
        if let Ok(list) = self.k.runtime.list(&ListFilter::all().pod_uid(&self.uid)).await {
            for c in list {
                let grace = Duration::from_secs(MINIMUM_GRACE_PERIOD as u64);
                let _ = self.k.runtime.stop_container(&c.id, grace, None).await;
                let _ = self.k.runtime.remove_container(&c.id).await;
            }
        }
        if let Ok(host) = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir) {
            let _ = host.remove_pod(&self.uid);
        }
        if let Some((ns, pod)) = &self.pod_names {
            self.k
                .containers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(n, p, _), (uid, _, _)| !(n == ns && p == pod && *uid == self.uid));
        }
    }

    /// The status manager: compute the status and PATCH it when it changed, with the pod's UID as a
    /// precondition (a recreated pod of the same name is not overwritten).
    async fn report(&mut self, pod: &Pod, observed: &ObservedPod, terminal: bool) {
        let host_ips = vec![self.k.cfg.node_ip.clone()];
        let ctx = StatusContext {
            host_ips: &host_ips,
            waiting: &self.waiting,
            previous: self.last_status.as_ref(),
            pod_is_terminal: terminal,
            now: Timestamp::now(),
        };
        let status = pod_status(pod, observed, &ctx);
        // A static pod's status goes to its mirror pod; none yet, no status (upstream skips the update too).
        let (target_uid, old_status) = if mirror::is_static_pod(pod) {
            match self.k.mirror_of(pod) {
                Some(m) => (m.metadata.uid.unwrap_or_default(), m.status),
                None => return,
            }
        } else {
            (self.uid.clone(), pod.status.clone())
        };
        if self.last_status.as_ref() == Some(&status) && self.reported_to.as_ref() == Some(&target_uid) {
            return;
        }
        let old = serde_json::to_value(old_status.unwrap_or_default()).unwrap_or(json!({}));
        let new = serde_json::to_value(&status).unwrap_or(json!({}));
        let mut body = new.clone();
        // Keys the new status no longer has are removed explicitly (a merge patch keeps absent keys).
        if let (Some(o), Some(b)) = (old.as_object(), body.as_object_mut()) {
            for k in o.keys() {
                if !b.contains_key(k) {
                    b.insert(k.clone(), Value::Null);
                }
            }
        }
        let patch = json!({"metadata": {"uid": target_uid}, "status": body});
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.k.client.clone(), ns);
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.last_status = Some(status);
                self.reported_to = Some(target_uid);
            }
            Err(e) => tracing::debug!(pod = %name, error = %e, "status update"),
        }
    }
}

/// Deletes a pod with grace 0 (and the UID as precondition when given). True when it is gone: deleted now,
/// already gone (404), or replaced by another pod of the same name (409 on the precondition).
async fn delete_now(api: &Api<Pod>, name: &str, uid: Option<&str>) -> bool {
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

/// The container's security settings, falling back to the pod's (upstream's effective security context).
fn security_config(spec: &k8s_openapi::api::core::v1::PodSpec, c: &Container) -> SecurityConfig {
    let csc = c.security_context.as_ref();
    let psc = spec.security_context.as_ref();
    let uid = csc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|s| s.run_as_user));
    let gid = csc
        .and_then(|s| s.run_as_group)
        .or(psc.and_then(|s| s.run_as_group));
    let user = match (uid, gid) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        // Docker needs a user to set a group; the image's user stays (upstream leaves it to the image).
        (None, Some(_)) | (None, None) => None,
    };
    let caps = csc.and_then(|s| s.capabilities.as_ref());
    SecurityConfig {
        user,
        privileged: csc.and_then(|s| s.privileged).unwrap_or(false),
        cap_add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        cap_drop: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
        readonly_rootfs: csc.and_then(|s| s.read_only_root_filesystem).unwrap_or(false),
    }
}

fn grace_of(pod: &Pod) -> Duration {
    let g = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(g.max(MINIMUM_GRACE_PERIOD) as u64)
}

/// `128Mi` → bytes (the units a memory limit uses).
fn parse_bytes(q: &str) -> Option<i64> {
    let units: [(&str, i64); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("m", 0),
        ("", 1),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix)
            && let Ok(v) = n.parse::<f64>()
        {
            return if mult == 0 {
                Some((v / 1000.0) as i64)
            } else {
                Some((v * mult as f64) as i64)
            };
        }
    }
    None
}

/// `500m` or `2` → millicores.
fn parse_millis(q: &str) -> Option<i64> {
    match q.strip_suffix('m') {
        Some(n) => n.parse().ok(),
        None => q.parse::<f64>().ok().map(|v| (v * 1000.0) as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_convert_to_docker_units() {
        assert_eq!(parse_bytes("128Mi"), Some(128 << 20));
        assert_eq!(parse_bytes("1G"), Some(1_000_000_000));
        assert_eq!(parse_millis("500m"), Some(500));
        assert_eq!(parse_millis("2"), Some(2000));
    }
}
