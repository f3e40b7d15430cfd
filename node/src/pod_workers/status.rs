//! The status manager side of a pod worker.

use super::*;

impl Worker {
    /// The status manager: compute the status and PATCH it when it changed, with the pod's UID as a
    /// precondition (a recreated pod of the same name is not overwritten).
    pub(super) async fn report(&mut self, pod: &Pod, observed: &ObservedPod, terminal: bool) {
        let host_ips = vec![self.k.cfg.node_ip.clone()];
        let ctx = StatusContext {
            host_ips: &host_ips,
            waiting: &self.waiting,
            previous: self.last_status.as_ref(),
            pod_is_terminal: terminal,
            eviction: self.eviction,
            now: Timestamp::now(),
        };
        let status = pod_status(pod, observed, &ctx);
        self.k.statuses.set(&self.uid, status.clone());
        self.trigger_first_readiness(pod, &status, observed);
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

    /// upstream `UpdatePodStatus`: a started container whose readiness probe has no result yet is probed
    /// now rather than a period later, so a new container becomes ready as soon as it can.
    fn trigger_first_readiness(&self, pod: &Pod, status: &PodStatus, observed: &ObservedPod) {
        let Some(spec) = pod.spec.as_ref() else { return };
        let statuses = status
            .container_statuses
            .iter()
            .chain(status.init_container_statuses.iter())
            .flatten();
        for st in statuses {
            let running = st.state.as_ref().is_some_and(|s| s.running.is_some());
            if !running || st.started != Some(true) {
                continue;
            }
            let probed = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .any(|c| c.name == st.name && c.readiness_probe.is_some());
            let unknown = observed.newest(&st.name).is_some_and(|c| c.readiness.is_none());
            if probed && unknown {
                self.k.probes.trigger_readiness(&self.uid, &st.name);
            }
        }
    }
}
