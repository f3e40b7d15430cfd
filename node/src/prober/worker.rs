//! One probe worker (upstream `pkg/kubelet/prober/worker.go`): a task that probes one container's liveness,
//! readiness or startup every `periodSeconds` until its container terminates for good or it is stopped.
//!
//! Each round ([`Worker::do_probe`]) reads the pod's status from the status cache, follows the container
//! instance (a new container ID resets the result to the worker's initial value and ends a hold), asks
//! [`gate`] whether to probe at all, runs the handler (retrying only errors, up to three times), and lets a
//! [`Counter`] decide when `successThreshold` or `failureThreshold` consecutive results change the cached
//! result. A liveness failure, or any startup result, puts the worker on hold until a new container ID
//! appears (upstream v1.32: no exec into a container that is being killed).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus, Probe};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::manager::Shared;
use super::{Outcome, ProbeKey, ProbeType, ResultsManager, Target, Timing};
use crate::events::EventType;
use crate::lifecycle::plan::ProbeResult;

/// upstream `maxProbeRetries`: a handler that errors is tried this many times in a row.
const MAX_PROBE_RETRIES: usize = 3;

/// The worker's result before its first probe of a new container instance (upstream `initialValue`):
/// not ready until proven ready, alive until proven dead, not started until started.
pub fn initial_value(probe_type: ProbeType) -> ProbeResult {
    match probe_type {
        ProbeType::Readiness => ProbeResult::Failure,
        ProbeType::Liveness => ProbeResult::Success,
        ProbeType::Startup => ProbeResult::Unknown,
    }
}

/// What a round does once it knows the container instance (the gating part of upstream's `doProbe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Probe now.
    Probe,
    /// Nothing to do this round.
    Skip,
    /// The container does not run: the result is Failure; the worker goes on unless the container will
    /// never run again (terminated under `restartPolicy: Never`).
    NotRunning {
        /// Whether the worker keeps going.
        keep_going: bool,
    },
    /// The pod is being deleted: a liveness or startup worker stores Success (a quiet shutdown) and ends.
    Deleting,
}

/// Port of the checks in `doProbe` between finding the container and probing it.
pub fn gate(
    probe_type: ProbeType,
    status: &ContainerStatus,
    pod_deleting: bool,
    restart_never: bool,
    initial_delay: i32,
    now: Timestamp,
) -> Gate {
    let state = status.state.as_ref();
    let Some(running) = state.and_then(|s| s.running.as_ref()) else {
        let terminated = state.is_some_and(|s| s.terminated.is_some());
        return Gate::NotRunning {
            keep_going: !terminated || !restart_never,
        };
    };
    if pod_deleting && matches!(probe_type, ProbeType::Liveness | ProbeType::Startup) {
        return Gate::Deleting;
    }
    // Whole seconds, truncated, as upstream's int32(time.Since(startedAt).Seconds()).
    let started_at = running.started_at.as_ref().map(|t| t.0).unwrap_or(now);
    let age = now.duration_since(started_at).as_secs();
    if age < i64::from(initial_delay) {
        return Gate::Skip;
    }
    let started = status.started == Some(true);
    match (started, probe_type) {
        // A started container has no more use for its startup probe; the worker stays for the next instance.
        (true, ProbeType::Startup) => Gate::Skip,
        // Liveness and readiness wait for the startup probe.
        (false, ProbeType::Liveness | ProbeType::Readiness) => Gate::Skip,
        _ => Gate::Probe,
    }
}

/// Consecutive identical results (upstream `lastResult` and `resultRun`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    last: Option<ProbeResult>,
    run: i32,
}

impl Counter {
    /// Counts `result`; returns the result to store once it has come `successThreshold` (Success) or
    /// `failureThreshold` (Failure) times in a row, and `None` while below the threshold.
    pub fn record(&mut self, result: ProbeResult, timing: &Timing) -> Option<ProbeResult> {
        if self.last == Some(result) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(result);
            self.run = 1;
        }
        let below = match result {
            ProbeResult::Failure => self.run < timing.failure_threshold,
            ProbeResult::Success => self.run < timing.success_threshold,
            ProbeResult::Unknown => false,
        };
        (!below).then_some(result)
    }

    /// Starts counting afresh (after going on hold).
    pub fn reset(&mut self) {
        self.run = 0;
    }
}

/// The newest status of `name`, among the regular containers, then the init containers; only one that has
/// a container ID counts.
fn container_status<'a>(status: &'a PodStatus, name: &str) -> Option<&'a ContainerStatus> {
    let find = |list: &'a Option<Vec<ContainerStatus>>| {
        list.iter()
            .flatten()
            .find(|c| c.name == name && c.container_id.as_deref().is_some_and(|id| !id.is_empty()))
    };
    find(&status.container_statuses).or_else(|| find(&status.init_container_statuses))
}

/// `docker://abc` → `abc`.
pub fn runtime_id(container_id: &str) -> &str {
    container_id.split_once("://").map_or(container_id, |(_, id)| id)
}

/// One probe worker's state.
pub(crate) struct Worker {
    pub(crate) key: ProbeKey,
    pod: Arc<Pod>,
    container: Container,
    probe: Probe,
    field_path: String,
    timing: Timing,
    results: Arc<ResultsManager>,
    initial: ProbeResult,
    /// The container instance the worker last saw.
    container_id: Option<String>,
    counter: Counter,
    on_hold: bool,
    /// Its container already ran when the worker was made (a restarted kubelet adopting it).
    adopted: bool,
    /// A terminated instance is never restarted: the pod's policy is Never and the container is not a
    /// sidecar (a restartable init container restarts whatever the pod's policy).
    restart_never: bool,
}

impl Worker {
    /// A worker for `key`; `seed` is a result already known for an instance (after a kubelet restart, from
    /// the status last reported), stored at once so the first status does not flap.
    pub(crate) fn new(
        key: ProbeKey,
        pod: Arc<Pod>,
        container: Container,
        results: Arc<ResultsManager>,
        seed: Option<(String, ProbeResult)>,
        adopted: bool,
    ) -> Option<Worker> {
        let probe = key.probe_type.of(&container)?.clone();
        let field_path = super::field_path(&pod, &container.name);
        let timing = Timing::of(&probe);
        let spec = pod.spec.as_ref();
        let sidecar = spec.and_then(|s| s.init_containers.as_ref()).is_some_and(|l| {
            l.iter()
                .any(|i| i.name == container.name && i.restart_policy.as_deref() == Some("Always"))
        });
        let restart_never = !sidecar && spec.and_then(|s| s.restart_policy.as_deref()) == Some("Never");
        let mut w = Worker {
            initial: initial_value(key.probe_type),
            key,
            pod,
            container,
            probe,
            field_path,
            timing,
            results,
            container_id: None,
            counter: Counter::default(),
            on_hold: false,
            adopted,
            restart_never,
        };
        if let Some((id, result)) = seed {
            w.results.set(&id, result, &w.key.pod_uid);
            w.container_id = Some(id);
        }
        Some(w)
    }

    /// The loop (upstream `worker.run`): a random first delay only right after the kubelet started, for a
    /// container it adopted (so a restarted kubelet does not probe everything at once), then a round every
    /// period, or at once on a manual trigger (which restarts the period).
    pub(crate) async fn run(
        mut self,
        shared: Arc<Shared>,
        id: u64,
        stop: CancellationToken,
        trigger: Arc<Notify>,
    ) {
        let period = self.timing.period();
        let mut stopped = false;
        // Only for containers that already ran: upstream's jitter spreads the probes of a restarted
        // kubelet's pods; a pod created just after start (a fresh local cluster) is probed at once. A
        // manual trigger ends the wait.
        if self.adopted && period > shared.started.elapsed() {
            let jitter = period.mul_f64(rand::random::<f64>());
            tokio::select! {
                _ = stop.cancelled() => stopped = true,
                _ = tokio::time::sleep(jitter) => {}
                _ = trigger.notified() => {}
            }
        }
        let mut finished = false;
        if !stopped {
            let start = tokio::time::Instant::now() + period;
            let mut ticker = tokio::time::interval_at(start, period);
            // A late tick (a loaded machine) keeps the period's phase, as Go's ticker does.
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            finished = true;
            while self.do_probe(&shared).await {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => {
                        finished = false;
                        break;
                    }
                    _ = ticker.tick() => {}
                    _ = trigger.notified() => ticker.reset(),
                }
            }
        }
        if let Some(cid) = &self.container_id {
            self.results.remove(cid);
        }
        shared.remove_worker(&self.key, id, finished);
    }

    /// One round; false ends the worker.
    pub(crate) async fn do_probe(&mut self, shared: &Shared) -> bool {
        let Some(status) = shared.status.pod_status(&self.key.pod_uid) else {
            return true;
        };
        if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
            return false;
        }
        let Some(c) = container_status(&status, &self.key.container) else {
            return true;
        };
        let id = runtime_id(c.container_id.as_deref().unwrap_or("")).to_owned();
        if self.container_id.as_deref() != Some(id.as_str()) {
            if let Some(old) = self.container_id.take() {
                self.results.remove(&old);
            }
            self.results.set(&id, self.initial, &self.key.pod_uid);
            self.container_id = Some(id.clone());
            self.on_hold = false;
        }
        if self.on_hold {
            return true;
        }
        let deleting = self.pod.metadata.deletion_timestamp.is_some();
        let now = (shared.clock)();
        match gate(
            self.key.probe_type,
            c,
            deleting,
            self.restart_never,
            self.timing.initial_delay,
            now,
        ) {
            Gate::Probe => {}
            Gate::Skip => return true,
            Gate::NotRunning { keep_going } => {
                self.results.set(&id, ProbeResult::Failure, &self.key.pod_uid);
                return keep_going;
            }
            Gate::Deleting => {
                self.results.set(&id, ProbeResult::Success, &self.key.pod_uid);
                return false;
            }
        }
        let Some(result) = self
            .probe_with_retries(shared, &id, status.pod_ip.as_deref())
            .await
        else {
            // A probe error: the result is thrown away.
            return true;
        };
        if let Some(store) = self.counter.record(result, &self.timing) {
            self.results.set(&id, store, &self.key.pod_uid);
            let hold = match self.key.probe_type {
                ProbeType::Liveness => store == ProbeResult::Failure,
                ProbeType::Startup => true,
                ProbeType::Readiness => false,
            };
            if hold {
                self.on_hold = true;
                self.counter.reset();
            }
        }
        true
    }

    /// Upstream `prober.probe`: run the handler (again on errors, up to three times), record the events,
    /// and map the outcome to a result; `None` when it errored every time.
    async fn probe_with_retries(
        &self,
        shared: &Shared,
        container_id: &str,
        pod_ip: Option<&str>,
    ) -> Option<ProbeResult> {
        let target = Target {
            pod: &self.pod,
            container: &self.container,
            container_id,
            pod_ip,
            probe: &self.probe,
            probe_type: self.key.probe_type,
        };
        let mut last_error = None;
        for _ in 0..MAX_PROBE_RETRIES {
            match shared.prober.probe(&target).await {
                Ok(report) => return Some(self.judge(shared, report.outcome, report.output)),
                Err(e) => last_error = Some(e),
            }
        }
        if let Some(e) = last_error {
            let message = format!(
                "{} probe errored and resulted in {} state: {e}",
                self.key.probe_type,
                Outcome::Unknown.as_str()
            );
            self.event(shared, EventType::Warning, "Unhealthy", message);
        }
        None
    }

    fn judge(&self, shared: &Shared, outcome: Outcome, output: String) -> ProbeResult {
        let kind = self.key.probe_type;
        match outcome {
            Outcome::Success => ProbeResult::Success,
            Outcome::Warning => {
                self.event(
                    shared,
                    EventType::Warning,
                    "ProbeWarning",
                    format!("{kind} probe warning: {output}"),
                );
                ProbeResult::Success
            }
            Outcome::Failure => {
                self.event(
                    shared,
                    EventType::Warning,
                    "Unhealthy",
                    format!("{kind} probe failed: {output}"),
                );
                ProbeResult::Failure
            }
            Outcome::Unknown => ProbeResult::Failure,
        }
    }

    fn event(&self, shared: &Shared, ty: EventType, reason: &'static str, message: String) {
        shared
            .events
            .record(&self.pod, &self.field_path, ty, reason, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStateTerminated};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn running(started_at: i64, started: Option<bool>) -> ContainerStatus {
        ContainerStatus {
            name: "c".into(),
            container_id: Some("docker://c1".into()),
            started,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(Timestamp::from_second(started_at).unwrap())),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn terminated() -> ContainerStatus {
        ContainerStatus {
            name: "c".into(),
            container_id: Some("docker://c1".into()),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 1,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn waiting() -> ContainerStatus {
        ContainerStatus {
            name: "c".into(),
            container_id: Some("docker://c1".into()),
            state: Some(ContainerState::default()),
            ..Default::default()
        }
    }

    #[test]
    fn gate_follows_upstream_do_probe() {
        use ProbeType::*;
        let now = Timestamp::from_second(100).unwrap();
        let cases = [
            // (probe, status, deleting, never, initialDelay, want)
            (Readiness, running(90, Some(true)), false, false, 0, Gate::Probe),
            (Liveness, running(90, Some(true)), false, false, 0, Gate::Probe),
            (Startup, running(90, Some(false)), false, false, 0, Gate::Probe),
            // Startup gating: the others wait, startup stops once started.
            (Readiness, running(90, Some(false)), false, false, 0, Gate::Skip),
            (Liveness, running(90, None), false, false, 0, Gate::Skip),
            (Startup, running(90, Some(true)), false, false, 0, Gate::Skip),
            // initialDelaySeconds counts whole seconds from startedAt: 10 s old, delay 10 probes, 11 waits.
            (Liveness, running(90, Some(true)), false, false, 10, Gate::Probe),
            (Liveness, running(90, Some(true)), false, false, 11, Gate::Skip),
            // Not running.
            (
                Readiness,
                waiting(),
                false,
                false,
                0,
                Gate::NotRunning { keep_going: true },
            ),
            (
                Readiness,
                terminated(),
                false,
                false,
                0,
                Gate::NotRunning { keep_going: true },
            ),
            (
                Readiness,
                terminated(),
                false,
                true,
                0,
                Gate::NotRunning { keep_going: false },
            ),
            (
                Liveness,
                waiting(),
                false,
                true,
                0,
                Gate::NotRunning { keep_going: true },
            ),
            // Deletion: liveness and startup end quietly, readiness keeps probing.
            (Liveness, running(90, Some(true)), true, false, 0, Gate::Deleting),
            (Startup, running(90, Some(false)), true, false, 0, Gate::Deleting),
            (Readiness, running(90, Some(true)), true, false, 0, Gate::Probe),
        ];
        for (i, (probe, status, deleting, never, delay, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                gate(probe, &status, deleting, never, delay, now),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn counter_stores_a_result_once_its_threshold_is_reached() {
        let timing = Timing {
            initial_delay: 0,
            period: 1,
            timeout: 1,
            success_threshold: 2,
            failure_threshold: 3,
        };
        let mut c = Counter::default();
        use ProbeResult::*;
        let seq = [
            (Failure, None),
            (Failure, None),
            (Failure, Some(Failure)),
            (Failure, Some(Failure)),
            (Success, None),
            (Success, Some(Success)),
            (Failure, None),
            (Success, None),
            (Success, Some(Success)),
        ];
        for (i, (input, want)) in seq.into_iter().enumerate() {
            assert_eq!(c.record(input, &timing), want, "step {i}");
        }
        c.reset();
        assert_eq!(c.record(Success, &timing), None, "a reset starts the run over");
        assert_eq!(c.record(Success, &timing), Some(Success));
    }

    #[test]
    fn initial_values_are_upstreams() {
        assert_eq!(initial_value(ProbeType::Readiness), ProbeResult::Failure);
        assert_eq!(initial_value(ProbeType::Liveness), ProbeResult::Success);
        assert_eq!(initial_value(ProbeType::Startup), ProbeResult::Unknown);
        assert_eq!(runtime_id("docker://abc"), "abc");
        assert_eq!(runtime_id("abc"), "abc");
    }
}
