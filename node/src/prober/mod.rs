//! The probe manager, shaped like upstream's `pkg/kubelet/prober` (kubelet-behaviour.md §1).
//!
//! ```text
//! pod worker sync ── Manager::add_pod ──► one Worker task per (pod UID, container, probe type)
//!                                           │ every periodSeconds (or at once, on a readiness trigger):
//!                                           │ read the pod's status from the status cache (StatusProvider),
//!                                           │ gate (container running, initialDelay, startup), Prober::probe
//!                                           │ (exec / httpGet / tcpSocket / grpc), count to the threshold
//!                                           ▼
//!                        ResultsManager (liveness, readiness, startup): container ID → result;
//!                        set() publishes an Update only when the result changes
//!                                           │
//!                        kubelet update loop: wake the pod's worker ──► plan() kills on liveness/startup
//!                                                                        Failure; pod_status() sets ready,
//!                                                                        started, the Ready conditions
//! ```
//!
//! The worker's decisions ([`worker::gate`], [`worker::Counter`]) are pure and table-tested; the side
//! effects sit behind three traits with fakes beside them: [`Prober`] (running a handler), [`StatusProvider`]
//! (the status cache) and [`ProbeEvents`] (the event recorder). Time is tokio's, so tests run with paused time.

pub mod fake;
pub mod handlers;
pub mod manager;
pub mod results;
pub mod sim;
pub mod worker;

#[cfg(test)]
mod manager_tests;

use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};

use crate::events::EventType;
pub use crate::lifecycle::plan::pod_full_name;

pub use manager::{Manager, ManagerConfig};
pub use results::{ResultsManager, Update};

/// Which probe (upstream `probeType`); it prints as upstream's does in event messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeType {
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
    /// `startupProbe`.
    Startup,
}

impl ProbeType {
    /// `Liveness`, `Readiness`, `Startup`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The container's probe of this type.
    pub fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => c.liveness_probe.as_ref(),
            ProbeType::Readiness => c.readiness_probe.as_ref(),
            ProbeType::Startup => c.startup_probe.as_ref(),
        }
    }
}

impl std::fmt::Display for ProbeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One probe of one container of one pod: the key of a worker (upstream `probeKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeKey {
    /// The pod's UID.
    pub pod_uid: String,
    /// The container's name.
    pub container: String,
    /// Which probe.
    pub probe_type: ProbeType,
}

/// What a handler found (upstream `probe.Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Passed.
    Success,
    /// Passed, with something to say (an HTTP redirect that was not followed): a `ProbeWarning` event.
    Warning,
    /// Failed: an `Unhealthy` event with the output.
    Failure,
    /// The handler could not tell; counts as a failure, as upstream's prober turns it into one.
    Unknown,
}

impl Outcome {
    /// Upstream's `probe.Result` strings, as they appear in "resulted in unknown state".
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Warning => "warning",
            Outcome::Failure => "failure",
            Outcome::Unknown => "unknown",
        }
    }
}

/// A handler's result and its output (the exec output, the HTTP failure, the dial error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// What it found.
    pub outcome: Outcome,
    /// Shown in the event: `Liveness probe failed: <output>`.
    pub output: String,
}

impl Report {
    /// A report.
    pub fn new(outcome: Outcome, output: impl Into<String>) -> Report {
        Report {
            outcome,
            output: output.into(),
        }
    }
}

/// A probe that could not be run at all (upstream returns an error: the result is thrown away and counts
/// toward no threshold).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// A named port the container does not declare, or a number out of range (upstream's messages).
    #[error("{0}")]
    Port(String),
    /// The probe has no handler.
    #[error("missing probe handler for {pod}:{container}")]
    MissingHandler {
        /// `name_namespace(uid)`.
        pod: String,
        /// The container.
        container: String,
    },
    /// The runtime could not run the exec (not a non-zero exit, which is a failure).
    #[error("{0}")]
    Runtime(String),
    /// No pod IP to send the probe to yet.
    #[error("pod has no IP address yet")]
    NoPodIp,
}

/// What a handler needs to run one attempt.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The container, as the pod spec has it (its `ports` resolve named ports, its `env` expands `$(VAR)`).
    pub container: &'a Container,
    /// The running instance.
    pub container_id: &'a str,
    /// The pod's IP, from its status.
    pub pod_ip: Option<&'a str>,
    /// The probe.
    pub probe: &'a Probe,
    /// Which probe, for messages.
    pub probe_type: ProbeType,
}

/// Runs one probe attempt: the side-effect boundary (upstream `prober.runProbe`). Retries on errors, the
/// thresholds and the events are the worker's.
#[async_trait]
pub trait Prober: Send + Sync {
    /// Runs `target.probe`'s handler once, within its `timeoutSeconds`.
    async fn probe(&self, target: &Target<'_>) -> Result<Report, ProbeError>;
}

/// The status manager's cache, where a worker reads the container's ID, state and `started` flag, and the
/// pod's phase and IP (upstream `statusManager.GetPodStatus`).
pub trait StatusProvider: Send + Sync {
    /// The status the kubelet last generated for the pod, if any.
    fn pod_status(&self, pod_uid: &str) -> Option<Arc<PodStatus>>;
}

/// Where probe events go (the kubelet's event recorder); never blocks the worker.
pub trait ProbeEvents: Send + Sync {
    /// Records an event about `container` of `pod`; `field_path` is `spec.containers{name}` or
    /// `spec.initContainers{name}`.
    fn record(&self, pod: &Pod, field_path: &str, ty: EventType, reason: &'static str, message: String);
}

/// The clock workers read container ages from (upstream compares with `time.Since(startedAt)`); injected so
/// tests move it with tokio's paused time.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// A clock that follows tokio's (paused, in tests) time from `start`.
pub fn tokio_clock(start: Timestamp) -> Clock {
    let origin = tokio::time::Instant::now();
    Arc::new(move || {
        let elapsed = tokio::time::Instant::now().duration_since(origin);
        start
            .checked_add(jiff::SignedDuration::try_from(elapsed).unwrap_or_default())
            .unwrap_or(start)
    })
}

/// A probe's timing and thresholds with upstream's defaults applied (`SetDefaults_Probe`: 0 means unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// `initialDelaySeconds` (0).
    pub initial_delay: i32,
    /// `periodSeconds` (10).
    pub period: i32,
    /// `timeoutSeconds` (1).
    pub timeout: i32,
    /// `successThreshold` (1).
    pub success_threshold: i32,
    /// `failureThreshold` (3).
    pub failure_threshold: i32,
}

impl Timing {
    /// The probe's values, defaulted.
    pub fn of(p: &Probe) -> Timing {
        let or = |v: Option<i32>, default: i32| v.filter(|v| *v > 0).unwrap_or(default);
        Timing {
            initial_delay: p.initial_delay_seconds.unwrap_or(0).max(0),
            period: or(p.period_seconds, 10),
            timeout: or(p.timeout_seconds, 1),
            success_threshold: or(p.success_threshold, 1),
            failure_threshold: or(p.failure_threshold, 3),
        }
    }

    /// `periodSeconds` as a duration.
    pub fn period(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.period as u64)
    }

    /// `timeoutSeconds` as a duration.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout as u64)
    }
}

/// The field path of a container in a pod's spec, for events: `spec.containers{c}`,
/// `spec.initContainers{c}` or `spec.ephemeralContainers{c}`.
pub fn field_path(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref();
    let list = if spec.is_some_and(|s| s.containers.iter().any(|c| c.name == container)) {
        "containers"
    } else if spec.is_some_and(|s| s.init_containers.iter().flatten().any(|c| c.name == container)) {
        "initContainers"
    } else if spec.is_some_and(|s| {
        s.ephemeral_containers
            .iter()
            .flatten()
            .any(|c| c.name == container)
    }) {
        "ephemeralContainers"
    } else {
        "containers"
    };
    format!("spec.{list}{{{container}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_defaults_replace_zero_and_missing_values() {
        let p = Probe {
            period_seconds: Some(0),
            failure_threshold: Some(5),
            ..Default::default()
        };
        assert_eq!(
            Timing::of(&p),
            Timing {
                initial_delay: 0,
                period: 10,
                timeout: 1,
                success_threshold: 1,
                failure_threshold: 5,
            }
        );
    }

    #[test]
    fn field_paths_name_the_list_the_container_is_in() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"name": "app"}], "initContainers": [{"name": "init"}],
                     "ephemeralContainers": [{"name": "dbg"}]}
        }))
        .unwrap();
        assert_eq!(field_path(&pod, "app"), "spec.containers{app}");
        assert_eq!(field_path(&pod, "init"), "spec.initContainers{init}");
        assert_eq!(field_path(&pod, "dbg"), "spec.ephemeralContainers{dbg}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_moves_with_paused_time() {
        let start = Timestamp::from_second(1_000).unwrap();
        let clock = tokio_clock(start);
        assert_eq!(clock(), start);
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert_eq!(clock().as_second(), 1_005);
    }
}
