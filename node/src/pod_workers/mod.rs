//! One worker per pod UID (upstream `pod_workers.go` and the kubelet-level `SyncPod`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::{EventType, pod_ref};
use crate::lifecycle::backoff::{BackoffState, image_pull_key};
use crate::lifecycle::deadline;
use crate::lifecycle::hash::hash_container;
use crate::lifecycle::plan::{self, ObservedContainer, ObservedPod, ObservedSandbox, PodActions};
use crate::lifecycle::status::{StatusContext, WaitingReason, pod_status};
use crate::mirror::{self, MirrorAction};
use crate::prober::ProbeType;
use crate::runtime::{
    ContainerConfig, ContainerKind, CriState, ListFilter, NextChange, PortMapping, Protocol, PullPolicy,
    Resources, SandboxConfig, SecurityConfig,
};

use crate::kubelet::{
    Desired, Kubelet, MINIMUM_GRACE_PERIOD, MIRROR_SYNC_TIMEOUT, RELIST_PERIOD, delete_now, pod_key,
};

mod hooks;
mod kill;
mod start;
mod status;

pub(crate) struct Worker {
    k: Arc<Kubelet>,
    uid: String,
    /// Kills and hooks.
    ops: kill::Ops,
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
    /// The desired state as the loop sees it, for hooks that a deletion interrupts.
    desired: Option<watch::Receiver<Desired>>,
    /// The kubelet stopping.
    cancel: CancellationToken,
    /// Termination messages of exited container instances (they never change), by container ID.
    messages: HashMap<String, String>,
    /// Why the kubelet failed the pod itself (activeDeadlineSeconds): reason and message.
    eviction: Option<(&'static str, &'static str)>,
    /// Container instances whose readiness worker was triggered already.
    triggered: HashSet<String>,
}

/// When a worker looks at its pod again.
enum Next {
    /// At this time (at the latest after the relist period), or after the relist period.
    At(Option<Timestamp>),
    /// Only when the desired pod changes (or a probe result wakes it): a terminal pod, all stopped.
    Idle,
}

/// upstream kubelet `--sync-frequency`: how often a pod is synced when nothing wakes its worker, for a
/// runtime that tells its containers' next change ([`NextChange`]).
pub(crate) const SYNC_FREQUENCY: Duration = Duration::from_secs(60);

/// How long a worker sleeps after a sync (`None`: until woken). The plan's next check and the runtime's
/// next change both bound it; a runtime that cannot tell its next change is relisted every
/// [`RELIST_PERIOD`] (upstream's PLEG), one that can is synced at least every [`SYNC_FREQUENCY`].
fn next_wait(next: Next, runtime: NextChange, now: Timestamp) -> Option<Duration> {
    let until = |t: Timestamp| t.duration_since(now).unsigned_abs();
    let relist = match runtime {
        NextChange::Unknown => RELIST_PERIOD,
        NextChange::Never => SYNC_FREQUENCY,
        NextChange::At(t) => until(t).min(SYNC_FREQUENCY),
    };
    match next {
        Next::At(Some(t)) => Some(until(t).min(relist)),
        Next::At(None) => Some(relist),
        Next::Idle => None,
    }
}

impl Worker {
    pub(crate) fn new(k: Arc<Kubelet>, uid: String) -> Worker {
        Worker {
            ops: kill::Ops {
                k: k.clone(),
                uid: uid.clone(),
            },
            k,
            uid,
            crash_backoff: BackoffState::crash_loop(),
            pull_backoff: BackoffState::image_pull(),
            waiting: BTreeMap::new(),
            last_status: None,
            reported_to: None,
            pod_names: None,
            last_pod: None,
            desired: None,
            cancel: CancellationToken::new(),
            messages: HashMap::new(),
            eviction: None,
            triggered: HashSet::new(),
        }
    }

    /// Resolves when the pod is deleted or removed, or the kubelet stops.
    fn interrupted(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let rx = self.desired.clone();
        let cancel = self.cancel.clone();
        async move {
            let Some(mut rx) = rx else {
                return cancel.cancelled().await;
            };
            loop {
                let stop = match &*rx.borrow_and_update() {
                    Desired::Pod(p) => p.metadata.deletion_timestamp.is_some(),
                    Desired::Gone | Desired::Removed => true,
                };
                if stop {
                    return;
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = rx.changed() => if r.is_err() { return },
                }
            }
        }
    }

    pub(crate) async fn run(mut self, mut rx: watch::Receiver<Desired>, cancel: CancellationToken) {
        self.desired = Some(rx.clone());
        self.cancel = cancel.clone();
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
            let next = self.sync(&pod).await;
            let wait = next_wait(next, self.k.runtime.next_change(&self.uid), Timestamp::now());
            tokio::select! {
                _ = cancel.cancelled() => return,
                r = rx.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(wait.unwrap_or_default()), if wait.is_some() => {}
            }
        }
    }

    /// What the runtime runs for this pod; `None` when the runtime cannot say (Docker down or
    /// restarting): then nothing is decided or reported from it, as upstream's kubelet skips pod syncs
    /// while its runtime is down. An empty answer would read as every container gone (each counted as a
    /// restart) and every sandbox to be made anew.
    async fn observe(&mut self) -> Option<ObservedPod> {
        let out = self.observe_runtime().await?;
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
        Some(out)
    }

    /// [`Worker::observe`], tried again every relist period until the runtime answers; `None` only when
    /// the kubelet stops first. For what must see the containers to act (killing them).
    async fn observe_when_up(&mut self) -> Option<ObservedPod> {
        loop {
            if let Some(observed) = self.observe().await {
                return Some(observed);
            }
            tokio::select! {
                _ = self.cancel.cancelled() => return None,
                _ = tokio::time::sleep(RELIST_PERIOD) => {}
            }
        }
    }

    async fn observe_runtime(&mut self) -> Option<ObservedPod> {
        let mut out = ObservedPod::default();
        let limit = crate::termination::per_container_limit(self.container_count());
        let mut seen_exited = HashMap::new();
        let list = match self.k.runtime.list(&ListFilter::all().pod_uid(&self.uid)).await {
            Ok(list) => list,
            Err(e) => {
                tracing::debug!(pod_uid = %self.uid, error = %e, "cannot list the pod's containers; sync skipped");
                return None;
            }
        };
        for c in list {
            let st = match self.k.runtime.inspect(&c.id).await {
                Ok(st) => st,
                // Removed since the list: it is not there.
                Err(crate::runtime::RuntimeError::NotFound { .. }) => continue,
                Err(e) => {
                    tracing::debug!(pod_uid = %self.uid, error = %e, "cannot inspect a container; sync skipped");
                    return None;
                }
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
                            message: {
                                let message = match self.messages.get(&c.id) {
                                    Some(m) => m.clone(),
                                    None => self.termination_message(&c, st.exit_code as i32, reason).await,
                                };
                                seen_exited.insert(c.id.clone(), message.clone());
                                let message = crate::termination::truncate(&message, limit);
                                Some(crate::termination::join(&st.error, message)).filter(|m| !m.is_empty())
                            },
                            started_at: st.started_at.unwrap_or(c.created),
                            finished_at: st.finished_at.unwrap_or(c.created),
                            oom_killed: st.oom_killed,
                        },
                    };
                    let result = |t| self.k.probes.results(t).get(&c.id);
                    out.containers.push(ObservedContainer {
                        liveness: result(ProbeType::Liveness),
                        readiness: result(ProbeType::Readiness),
                        startup: result(ProbeType::Startup),
                        id: c.id.clone(),
                        name: c.container_name().unwrap_or("").to_string(),
                        restart_count: c.restart_count().unwrap_or(0),
                        hash: c.hash().unwrap_or("").to_string(),
                        image: c.image.clone(),
                        image_ref: format!("docker://{}", st.image_id),
                        created: c.created,
                        state,
                    });
                }
                None => {}
            }
        }
        // Exited instances never change: their messages are read once, and forgotten with them.
        self.messages = seen_exited;
        Some(out)
    }

    /// Regular, init and ephemeral containers in the spec (they share the pod's 12 KiB of messages).
    fn container_count(&self) -> usize {
        self.last_pod
            .as_ref()
            .and_then(|p| p.spec.as_ref())
            .map_or(1, |s| {
                s.containers.len()
                    + s.init_containers.as_ref().map_or(0, Vec::len)
                    + s.ephemeral_containers.as_ref().map_or(0, Vec::len)
            })
    }

    /// The termination message of an exited instance: its file, or with `FallbackToLogsOnError` the end
    /// of its log (upstream `getTerminationMessage` / `readLastStringFromContainerLogs`).
    async fn termination_message(
        &self,
        c: &crate::runtime::ContainerInfo,
        exit_code: i32,
        reason: &str,
    ) -> String {
        use crate::runtime::naming::ANNOTATION_TERMINATION_MESSAGE_POLICY;
        let name = c.container_name().unwrap_or("");
        let restart_count = c.restart_count().unwrap_or(0);
        let message = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir)
            .ok()
            .and_then(|h| h.pod_dir(&self.uid).ok())
            .map(|dir| {
                crate::termination::read_message(&crate::termination::message_file(&dir, name, restart_count))
            })
            .unwrap_or_default();
        let policy = c
            .annotation(ANNOTATION_TERMINATION_MESSAGE_POLICY)
            .unwrap_or("File");
        if !crate::termination::falls_back_to_logs(policy, &message, exit_code, Some(reason)) {
            return message;
        }
        let options = crate::runtime::LogOptions {
            tail: Some(crate::termination::LOG_LINES),
            ..Default::default()
        };
        let Ok(mut stream) = self.k.runtime.logs(&c.id, &options).await else {
            return message;
        };
        let mut tail = Vec::new();
        while let Some(Ok(chunk)) = futures_util::StreamExt::next(&mut stream).await {
            tail.extend_from_slice(&chunk);
            if tail.len() >= crate::termination::MAX_LOG_MESSAGE {
                break;
            }
        }
        crate::termination::from_logs(&tail)
    }

    /// One pass: plan, act, report. Returns when to look again at the latest.
    async fn sync(&mut self, pod: &Pod) -> Next {
        // A static pod waits for the one it replaces (same name, older manifest) to stop.
        if mirror::is_static_pod(pod) && self.k.name_in_use(&pod_key(pod), &self.uid) {
            return Next::At(None);
        }
        // Upstream reconciles the mirror pod first in SyncPod, before anything starts. Bounded, so an API
        // server that does not answer never holds up a static pod.
        if mirror::is_static_pod(pod) {
            let _ = tokio::time::timeout(MIRROR_SYNC_TIMEOUT, self.sync_mirror(pod)).await;
        }
        // upstream SyncPod: probeManager.AddPod on every sync (idempotent). The status last reported (the
        // mirror pod's for a static pod) seeds the results of containers this kubelet adopted.
        let reported = if mirror::is_static_pod(pod) {
            self.k.mirror_of(pod).and_then(|m| m.status)
        } else {
            pod.status.clone()
        };
        let now = Timestamp::now();
        let start_time = self.start_time_of(pod);
        let terminal = self.is_terminal(pod);
        // upstream consults the deadline in SyncPod only, which never runs for a terminal pod.
        if !terminal && self.eviction.is_none() && deadline::past_deadline(pod, start_time, now) {
            self.eviction = Some((deadline::DEADLINE_EXCEEDED, deadline::DEADLINE_MESSAGE));
            self.k.recorder.emit(
                pod_ref(pod),
                EventType::Normal,
                deadline::DEADLINE_EXCEEDED,
                deadline::DEADLINE_MESSAGE.to_owned(),
            );
        }
        if self.eviction.is_some() || terminal {
            // A terminal phase never goes back (upstream's pod worker moves the pod to terminated): stop
            // what still runs, start nothing, keep the status current.
            let Some(observed) = self.observe().await else {
                return Next::At(None);
            };
            let running = observed
                .containers
                .iter()
                .any(|c| matches!(c.state, plan::ContainerState::Running { .. }))
                || observed.sandboxes.iter().any(|s| s.ready);
            let observed = if running {
                self.k.probes.stop_liveness_and_startup(pod);
                self.ops.kill_all(pod, &observed, None).await;
                match self.observe().await {
                    Some(observed) => observed,
                    None => return Next::At(None),
                }
            } else {
                observed
            };
            let written = self.report(pod, &observed, false).await;
            // Done (upstream's SyncTerminatedPod): nothing to relist until the pod changes.
            return if written && !running {
                Next::Idle
            } else {
                Next::At(None)
            };
        }
        self.k.probes.add_pod(pod, reported.as_ref());
        let Some(observed) = self.observe().await else {
            return Next::At(None);
        };
        self.refresh_tokens(pod, &observed).await;
        // upstream generates and records the status first in SyncPod, before acting: a pod whose
        // postStart hook or image pull takes long shows its containers waiting meanwhile.
        self.report(pod, &observed, false).await;
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
        let observed = if acted {
            match self.observe().await {
                Some(observed) => observed,
                None => return Next::At(None),
            }
        } else {
            observed
        };
        self.report(pod, &observed, false).await;
        let deadline = deadline::deadline(pod, start_time.or_else(|| self.start_time_of(pod)));
        Next::At(match (actions.next_check, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// The pod's phase, as last reported or as the API has it, is Succeeded or Failed.
    fn is_terminal(&self, pod: &Pod) -> bool {
        let terminal = |p: Option<&str>| matches!(p, Some("Succeeded" | "Failed"));
        terminal(self.last_status.as_ref().and_then(|s| s.phase.as_deref()))
            || terminal(pod.status.as_ref().and_then(|s| s.phase.as_deref()))
    }

    /// `status.startTime`, as this worker reported it, else as the API has it (the mirror pod's, for a
    /// static pod): the clock of activeDeadlineSeconds.
    fn start_time_of(&self, pod: &Pod) -> Option<Timestamp> {
        let reported = self.last_status.as_ref().and_then(|s| s.start_time.clone());
        let api = || {
            if mirror::is_static_pod(pod) {
                self.k
                    .mirror_of(pod)
                    .and_then(|m| m.status)
                    .and_then(|s| s.start_time)
            } else {
                pod.status.as_ref().and_then(|s| s.start_time.clone())
            }
        };
        reported.or_else(api).map(|t| t.0)
    }

    async fn execute(&mut self, pod: &Pod, observed: &ObservedPod, actions: &PodActions) -> bool {
        let mut acted = false;
        // upstream SyncPod: either the whole pod goes down, or the listed containers.
        if actions.kill_pod {
            acted = true;
            self.ops.kill_all(pod, observed, None).await;
        } else {
            for k in &actions.containers_to_kill {
                acted = true;
                self.ops
                    .kill_container(pod, &k.id, &k.name, Some(&k.message), Some(k.reason), None)
                    .await;
            }
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
        // upstream starts ephemeral containers before init containers, so a debugger runs even when init fails.
        for &i in &actions.ephemeral_containers_to_start {
            acted = true;
            if let Some(e) = spec.ephemeral_containers.as_ref().and_then(|v| v.get(i)) {
                let c = api::pod::ephemeral_as_container(e);
                // upstream getTargetID: the target's newest instance, whatever its state (Docker refuses a
                // PID namespace of a container that does not run: RunContainerError, retried).
                let target = match e.target_container_name.as_deref() {
                    None => None,
                    Some(t) => match observed.newest(t) {
                        Some(instance) => Some(instance.id.clone()),
                        None => {
                            let r = kill::container_ref(pod, &c.name);
                            let msg = format!("unable to find target container {t}");
                            self.container_failed(&r, &c.name, "CreateContainerConfigError", msg)
                                .await;
                            continue;
                        }
                    },
                };
                self.start_container(pod, &c, &sandbox, observed, target.as_deref())
                    .await;
            }
        }
        let inits = spec.init_containers.clone().unwrap_or_default();
        for &i in &actions.init_containers_to_start {
            acted = true;
            if let Some(c) = inits.get(i) {
                self.start_container(pod, c, &sandbox, observed, None).await;
            }
        }
        for &i in &actions.containers_to_start {
            acted = true;
            if let Some(c) = spec.containers.get(i) {
                self.start_container(pod, c, &sandbox, observed, None).await;
            }
        }
        acted
    }
    /// Graceful termination (upstream SyncTerminatingPod + the status manager's final delete): stop the
    /// containers with the pod's remaining grace, stop the sandbox, write the terminal status, then delete
    /// the pod with grace 0 and a UID precondition so it leaves the API.
    async fn terminate(&mut self, pod: &Pod) {
        // Readiness keeps running through graceful termination (upstream StopLivenessAndStartup).
        self.k.probes.stop_liveness_and_startup(pod);
        let Some(observed) = self.observe_when_up().await else {
            return;
        };
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
        // While the containers stop (preStop hooks, the grace period), readiness is still probed: its
        // changes are written as they come (upstream keeps the status current through termination).
        let ops = self.ops.clone();
        let kill = ops.kill_all(pod, &observed, Some(grace));
        tokio::pin!(kill);
        let mut wake = self.desired.clone();
        loop {
            let woken = async {
                match wake.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut kill => break,
                alive = woken => {
                    if !alive {
                        wake = None;
                        continue;
                    }
                    if let Some(observed) = self.observe().await {
                        self.report(pod, &observed, false).await;
                    }
                }
            }
        }
        self.k.probes.remove_pod(&self.uid);
        let Some(observed) = self.observe_when_up().await else {
            return;
        };
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
        let Some(observed) = self.observe_when_up().await else {
            return;
        };
        let grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        self.k.probes.stop_liveness_and_startup(pod);
        self.ops.kill_all(pod, &observed, Some(grace)).await;
        self.k.probes.remove_pod(&self.uid);
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
        self.k.probes.remove_pod(&self.uid);
        self.k.tokens.forget_pod(&self.uid);
        self.k.statuses.remove(&self.uid);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_after_a_sync_is_bounded_by_the_plan_and_the_runtime() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |secs: i64| now.checked_add(jiff::SignedDuration::from_secs(secs)).unwrap();
        let s = Duration::from_secs;
        let cases = [
            // Docker: relist every second whatever the plan says later.
            (Next::At(None), NextChange::Unknown, Some(s(1))),
            (Next::At(Some(at(10))), NextChange::Unknown, Some(s(1))),
            // A plan check sooner than the relist wins.
            (Next::At(Some(at(0))), NextChange::Unknown, Some(s(0))),
            // Simulated: nothing changes on its own, so only the sync frequency.
            (Next::At(None), NextChange::Never, Some(SYNC_FREQUENCY)),
            (Next::At(Some(at(5))), NextChange::Never, Some(s(5))),
            // A container exits in 3 s: look then.
            (Next::At(None), NextChange::At(at(3)), Some(s(3))),
            (Next::At(Some(at(2))), NextChange::At(at(3)), Some(s(2))),
            // Far exits are still bounded by the sync frequency.
            (Next::At(None), NextChange::At(at(3600)), Some(SYNC_FREQUENCY)),
            // Idle stays idle: the pod is terminal and everything stopped.
            (Next::Idle, NextChange::Unknown, None),
            (Next::Idle, NextChange::At(at(3)), None),
        ];
        for (next, runtime, want) in cases {
            assert_eq!(next_wait(next, runtime, now), want, "{runtime:?}");
        }
    }
}
