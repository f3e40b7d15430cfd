//! One worker per pod UID (upstream `pod_workers.go` and the kubelet-level `SyncPod`).

use std::collections::BTreeMap;
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
use crate::lifecycle::hash::hash_container;
use crate::lifecycle::plan::{self, ObservedContainer, ObservedPod, ObservedSandbox, PodActions};
use crate::lifecycle::status::{StatusContext, WaitingReason, pod_status};
use crate::mirror::{self, MirrorAction};
use crate::runtime::{
    ContainerConfig, ContainerKind, CriState, ListFilter, PortMapping, Protocol, PullPolicy, Resources,
    SandboxConfig, SecurityConfig,
};

use crate::kubelet::{
    Desired, Kubelet, MINIMUM_GRACE_PERIOD, MIRROR_SYNC_TIMEOUT, RELIST_PERIOD, delete_now, pod_key,
};

mod kill;
mod start;
mod status;

use kill::grace_of;

pub(crate) struct Worker {
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
    pub(crate) fn new(k: Arc<Kubelet>, uid: String) -> Worker {
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

    pub(crate) async fn run(mut self, mut rx: watch::Receiver<Desired>, cancel: CancellationToken) {
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
}
