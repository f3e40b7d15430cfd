//! Stopping containers (upstream `killContainer`, `killPod`).

use super::*;

impl Worker {
    pub(super) async fn kill_all(&self, pod: &Pod, observed: &ObservedPod, grace: i64) {
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
}

pub(super) fn grace_of(pod: &Pod) -> Duration {
    let g = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(g.max(MINIMUM_GRACE_PERIOD) as u64)
}
