//! Stopping containers (upstream `killContainer`, `killPodWithSyncResult`, `setTerminationGracePeriod` and
//! `executePreStopHook`): a `Killing` event, the preStop hook within the grace period, then the stop signal
//! (`lifecycle.stopSignal`, else the image's, else SIGTERM) and SIGKILL after what is left of the grace,
//! at least 2 s.

use std::time::Instant;

use k8s_openapi::api::core::v1::Container;

use super::*;
use crate::lifecycle::plan::KillReason;

/// What kills and hooks need of a worker: the kubelet and the pod's UID. A handle of its own, so a
/// worker can keep its pod's status current while its containers are being stopped.
#[derive(Clone)]
pub(super) struct Ops {
    pub(super) k: Arc<Kubelet>,
    pub(super) uid: String,
}

impl Ops {
    /// Stops every running container of the pod in parallel, then its sandboxes. `grace_override` is the
    /// pod worker's effective grace period on the termination path (upstream's `gracePeriodOverride`);
    /// without one each container gets [`termination_grace`].
    pub(super) async fn kill_all(&self, pod: &Pod, observed: &ObservedPod, grace_override: Option<i64>) {
        let stops = observed
            .containers
            .iter()
            .filter(|c| matches!(c.state, plan::ContainerState::Running { .. }))
            .map(|c| self.kill_container(pod, &c.id, &c.name, None, None, grace_override));
        futures_util::future::join_all(stops).await;
        for s in observed.sandboxes.iter().filter(|s| s.ready) {
            let _ = self
                .k
                .runtime
                .stop_container(&s.id, Duration::from_secs(MINIMUM_GRACE_PERIOD as u64), None)
                .await;
        }
    }

    /// Upstream `killContainer`: `message` defaults to `Stopping container <name>`.
    pub(super) async fn kill_container(
        &self,
        pod: &Pod,
        id: &str,
        name: &str,
        message: Option<&str>,
        reason: Option<KillReason>,
        grace_override: Option<i64>,
    ) {
        let spec = container_spec(pod, name);
        let mut grace = grace_override.unwrap_or_else(|| termination_grace(pod, spec.as_ref(), reason));
        let r = container_ref(pod, name);
        let default_message = format!("Stopping container {name}");
        self.k
            .recorder
            .record(
                &r,
                EventType::Normal,
                "Killing",
                message.unwrap_or(&default_message),
            )
            .await;
        let lifecycle = spec.as_ref().and_then(|c| c.lifecycle.as_ref());
        if let (Some(c), Some(hook)) = (spec.as_ref(), lifecycle.and_then(|l| l.pre_stop.as_ref()))
            && grace > 0
        {
            let started = Instant::now();
            let window = Duration::from_secs(grace as u64);
            let pod_ip = self.hook_pod_ip(pod, None);
            match tokio::time::timeout(window, self.run_hook(pod, c, id, hook, pod_ip.as_deref())).await {
                Ok(Ok(())) => {}
                Ok(Err(msg)) => {
                    tracing::info!(pod = %pod.metadata.name.as_deref().unwrap_or(""), %msg, "preStop hook failed");
                    // upstream leaves the error out of the event so that secrets do not leak.
                    self.k.recorder.emit(
                        r,
                        EventType::Warning,
                        "FailedPreStopHook",
                        "PreStopHook failed".to_owned(),
                    );
                }
                Err(_) => {
                    tracing::info!(container = %name, ?window, "preStop hook not completed in the grace period")
                }
            }
            grace -= started.elapsed().as_secs() as i64;
        }
        let grace = Duration::from_secs(grace.max(MINIMUM_GRACE_PERIOD) as u64);
        let signal = lifecycle.and_then(|l| l.stop_signal.as_deref());
        if let Err(e) = self.k.runtime.stop_container(id, grace, signal).await {
            tracing::warn!(container = %name, error = %e, "stopping a container");
        }
    }

    /// The IP an HTTP hook without `host` goes to: the sandbox's, the node's for a hostNetwork pod, else
    /// the one in the pod's last generated status (upstream reads the pod status's IPs).
    pub(super) fn hook_pod_ip(&self, pod: &Pod, sandbox: Option<&ObservedSandbox>) -> Option<String> {
        if let Some(ip) = sandbox.and_then(|s| s.ip.clone()) {
            return Some(ip);
        }
        if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            return Some(self.k.cfg.node_ip.clone());
        }
        use crate::prober::StatusProvider;
        self.k
            .statuses
            .pod_status(&self.uid)
            .and_then(|s| s.pod_ip.clone())
    }
}

/// Upstream `setTerminationGracePeriod`: a deleted pod's `deletionGracePeriodSeconds`; for a liveness or
/// startup kill the probe's own `terminationGracePeriodSeconds` when set; else the pod's; else 2.
pub(crate) fn termination_grace(pod: &Pod, container: Option<&Container>, reason: Option<KillReason>) -> i64 {
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        return g;
    }
    let Some(pod_grace) = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds) else {
        return MINIMUM_GRACE_PERIOD;
    };
    let probe = match (container, reason) {
        (Some(c), Some(KillReason::LivenessProbe)) => c.liveness_probe.as_ref(),
        (Some(c), Some(KillReason::StartupProbe)) => c.startup_probe.as_ref(),
        _ => None,
    };
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .unwrap_or(pod_grace)
}

/// The spec of a pod's container by name, among the regular, init and ephemeral containers (an ephemeral
/// container as the `Container` it is run as).
pub(crate) fn container_spec(pod: &Pod, name: &str) -> Option<Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            spec.ephemeral_containers
                .iter()
                .flatten()
                .find(|e| e.name == name)
                .map(api::pod::ephemeral_as_container)
        })
}

/// The event reference of a container of a pod (`involvedObject.fieldPath`).
pub(crate) fn container_ref(pod: &Pod, name: &str) -> k8s_openapi::api::core::v1::ObjectReference {
    let mut r = pod_ref(pod);
    r.field_path = Some(crate::prober::field_path(pod, name));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(deletion: Option<i64>, grace: Option<i64>) -> Pod {
        let mut p = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c",
                "livenessProbe": {"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 7},
                "startupProbe": {"exec": {"command": ["x"]}}}]}
        });
        if let Some(g) = grace {
            p["spec"]["terminationGracePeriodSeconds"] = json!(g);
        }
        if let Some(d) = deletion {
            p["metadata"]["deletionGracePeriodSeconds"] = json!(d);
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn grace_periods_follow_upstreams_priority() {
        use KillReason::*;
        let cases = [
            // (deletion grace, pod grace, reason, want)
            (Some(5), Some(30), Some(LivenessProbe), 5),
            (None, Some(30), Some(LivenessProbe), 7),
            (None, Some(30), Some(StartupProbe), 30),
            (None, Some(30), Some(DefinitionChanged), 30),
            (None, Some(30), None, 30),
            (None, None, Some(LivenessProbe), 2),
            (Some(0), Some(30), None, 0),
        ];
        for (deletion, grace, reason, want) in cases {
            let p = pod(deletion, grace);
            let c = container_spec(&p, "c");
            assert_eq!(
                termination_grace(&p, c.as_ref(), reason),
                want,
                "{deletion:?} {grace:?} {reason:?}"
            );
        }
    }
}
