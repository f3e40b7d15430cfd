//! The status manager side of a pod worker.

use super::*;
use crate::lifecycle::plan::ProbeResult;

impl Worker {
    /// The status manager: compute the status and PATCH it when it changed, with the pod's UID as a
    /// precondition (a recreated pod of the same name is not overwritten). True when the API has it (it
    /// was written now or before); false when it could not be written.
    pub(super) async fn report(&mut self, pod: &Pod, observed: &ObservedPod, terminal: bool) -> bool {
        let host_ips = vec![self.k.cfg.node_ip.clone()];
        // A static pod's status lives in its mirror pod: after a restart, that is where startTime and
        // the conditions' transition times come from (upstream's updateStatusInternal does the same).
        let mirror_status = match (&self.last_status, mirror::is_static_pod(pod)) {
            (None, true) => self.k.mirror_of(pod).and_then(|m| m.status),
            _ => None,
        };
        let ctx = StatusContext {
            host_ips: &host_ips,
            waiting: &self.waiting,
            previous: self.last_status.as_ref().or(mirror_status.as_ref()),
            pod_is_terminal: terminal,
            eviction: self.eviction,
            now: Timestamp::now(),
        };
        let status = pod_status(pod, observed, &ctx);
        self.k.statuses.set(&self.uid, status.clone());
        self.trigger_readiness(pod, &status, observed);
        // A static pod's status goes to its mirror pod; none yet, no status (upstream skips the update too).
        let (target_uid, old_status) = if mirror::is_static_pod(pod) {
            match self.k.mirror_of(pod) {
                Some(m) => (m.metadata.uid.unwrap_or_default(), m.status),
                None => return false,
            }
        } else {
            (self.uid.clone(), pod.status.clone())
        };
        if self.last_status.as_ref() == Some(&status) && self.reported_to.as_ref() == Some(&target_uid) {
            return true;
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
                true
            }
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "status update");
                false
            }
        }
    }

    /// upstream `UpdatePodStatus`'s manual trigger: a started container whose readiness probe has not
    /// passed is probed now rather than a period later (once per container instance), so a new container,
    /// or one whose startup probe just passed, becomes ready as soon as it can.
    fn trigger_readiness(&mut self, pod: &Pod, status: &PodStatus, observed: &ObservedPod) {
        let wanted = readiness_triggers(pod, status, observed);
        self.triggered
            .retain(|id| observed.containers.iter().any(|c| &c.id == id));
        for (name, id) in wanted {
            if self.triggered.insert(id) {
                self.k.probes.trigger_readiness(&self.uid, &name);
            }
        }
    }
}

/// The containers (name, instance) whose readiness worker should run now: running, started, with a
/// readiness probe whose result for this instance is not Success.
pub(crate) fn readiness_triggers(
    pod: &Pod,
    status: &PodStatus,
    observed: &ObservedPod,
) -> Vec<(String, String)> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .filter(|st| st.state.as_ref().is_some_and(|s| s.running.is_some()) && st.started == Some(true))
        .filter(|st| {
            spec.containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .any(|c| c.name == st.name && c.readiness_probe.is_some())
        })
        .filter_map(|st| {
            let newest = observed.newest(&st.name)?;
            (newest.readiness != Some(ProbeResult::Success)).then(|| (st.name.clone(), newest.id.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::plan::ContainerState;

    fn observed(readiness: Option<ProbeResult>) -> ObservedPod {
        ObservedPod {
            containers: vec![ObservedContainer {
                id: "c1".into(),
                name: "app".into(),
                restart_count: 0,
                hash: String::new(),
                image: String::new(),
                image_ref: String::new(),
                created: Timestamp::UNIX_EPOCH,
                state: ContainerState::Running {
                    started_at: Timestamp::UNIX_EPOCH,
                },
                liveness: None,
                readiness,
                startup: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn readiness_is_triggered_for_started_containers_not_yet_ready() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "app", "readinessProbe": {"exec": {"command": ["x"]}}}]}
        }))
        .unwrap();
        let status = |started: bool| -> PodStatus {
            serde_json::from_value(json!({"containerStatuses": [{
                "name": "app", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                "started": started, "state": {"running": {}}
            }]}))
            .unwrap()
        };
        let want = vec![("app".to_owned(), "c1".to_owned())];
        // A new container (no result), and one whose startup probe just passed (the initial Failure).
        assert_eq!(readiness_triggers(&pod, &status(true), &observed(None)), want);
        assert_eq!(
            readiness_triggers(&pod, &status(true), &observed(Some(ProbeResult::Failure))),
            want
        );
        // Not started yet, or ready already: nothing.
        assert!(readiness_triggers(&pod, &status(false), &observed(None)).is_empty());
        assert!(readiness_triggers(&pod, &status(true), &observed(Some(ProbeResult::Success))).is_empty());
    }
}
