//! The pod worker's decision: given the desired pod, what the runtime shows for it and the crash-loop
//! backoff table, which sandbox and containers to kill and to start. A port of upstream
//! `computePodActions` (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`) with `PodSandboxChanged`,
//! `computeInitContainerActions` (the sidecar-aware init path, which upstream now uses for every pod),
//! `ShouldContainerBeRestarted` and the `doBackOff` check that upstream makes later, at start time.
//!
//! The worker turns the runtime's view into an [`ObservedPod`] (plain data, no Docker types), calls
//! [`plan`] with the current time, then executes the [`PodActions`] in upstream's order: kill the pod or
//! the listed containers, create the sandbox, start ephemeral containers, the listed init containers,
//! then the regular containers. It records the starts in its [`BackoffState`]
//! ([`BackoffState::record_starts`]) and, when [`PodActions::next_check`] is set, plans again at that
//! time instead of polling.
//!
//! Deliberate differences from upstream: a container in backoff is left out of the start lists and
//! reported in [`PodActions::backoff`] instead of failing later with `ErrCrashLoopBackOff`; a pod with a
//! `deletionTimestamp` gets `kill_pod` here, where upstream's pod worker sends it down a separate
//! terminating path; in-place resize and per-container restart rules are not modelled.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::backoff::{BackoffState, crash_loop_key, go_duration};
use super::hash::hash_container;

/// What the runtime shows for one pod: every sandbox and every container instance carrying its UID.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedPod {
    /// Sandboxes (pause containers), in any order.
    pub sandboxes: Vec<ObservedSandbox>,
    /// Container instances, old exited ones included, in any order.
    pub containers: Vec<ObservedContainer>,
}

/// One sandbox (the pause container holding the pod's namespaces).
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedSandbox {
    /// Runtime ID.
    pub id: String,
    /// The attempt number it was created with (upstream `Metadata.Attempt`).
    pub attempt: u32,
    /// READY in CRI terms: the pause container runs.
    pub ready: bool,
    /// The pod IP. A ready sandbox of a pod without `hostNetwork` and without an IP is replaced.
    pub ip: Option<String>,
    /// Whether it was created in the host's network namespace.
    pub host_network: bool,
    /// Creation time; the newest sandbox is the one that counts.
    pub created: Timestamp,
}

/// One container instance.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedContainer {
    /// Runtime ID (without the `docker://` prefix).
    pub id: String,
    /// The spec container name (label `io.kubernetes.container.name`).
    pub name: String,
    /// The restart count it was created with (label `annotation.io.kubernetes.container.restartCount`).
    pub restart_count: u32,
    /// The [`hash_container`] of the spec it was created from (label `...container.hash`).
    pub hash: String,
    /// The image as the runtime names it (status `image`).
    pub image: String,
    /// The image reference (status `imageID`), e.g. `docker-pullable://repo@sha256:...`.
    pub image_ref: String,
    /// Creation time; instances of one name are ordered by it.
    pub created: Timestamp,
    /// Runtime state.
    pub state: ContainerState,
    /// Latest liveness result for this instance, if the prober has one.
    pub liveness: Option<ProbeResult>,
    /// Latest readiness result for this instance, if the prober has one.
    pub readiness: Option<ProbeResult>,
    /// Latest startup result for this instance, if the prober has one.
    pub startup: Option<ProbeResult>,
}

/// The CRI state of a container instance.
#[derive(Clone, Debug, PartialEq)]
pub enum ContainerState {
    /// Created, never started (or start failed).
    Created,
    /// Running since `started_at`.
    Running {
        /// `State.StartedAt`.
        started_at: Timestamp,
    },
    /// Exited.
    Exited {
        /// Process exit code.
        exit_code: i32,
        /// A reason the runtime knows better (`ContainerCannotRun`); `None` derives `OOMKilled`,
        /// `Completed` or `Error`.
        reason: Option<String>,
        /// `State.Error`, then `: ` and the termination message, as the runtime layer assembled it.
        message: Option<String>,
        /// `State.StartedAt`.
        started_at: Timestamp,
        /// `State.FinishedAt`.
        finished_at: Timestamp,
        /// `State.OOMKilled`.
        oom_killed: bool,
    },
    /// The runtime could not tell.
    Unknown,
}

impl ContainerState {
    /// The terminated reason upstream reports: the runtime's own, else `OOMKilled`, `Completed` for exit 0,
    /// `Error` otherwise. `None` when not exited.
    pub fn exited_reason(&self) -> Option<&str> {
        match self {
            ContainerState::Exited { reason: Some(r), .. } => Some(r),
            ContainerState::Exited { oom_killed: true, .. } => Some("OOMKilled"),
            ContainerState::Exited { exit_code: 0, .. } => Some("Completed"),
            ContainerState::Exited { .. } => Some("Error"),
            _ => None,
        }
    }

    fn name(&self) -> &'static str {
        // kubecontainer.ContainerState values, used in upstream's kill messages.
        match self {
            ContainerState::Created => "created",
            ContainerState::Running { .. } => "running",
            ContainerState::Exited { .. } => "exited",
            ContainerState::Unknown => "unknown",
        }
    }
}

/// A probe result (upstream `proberesults.Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeResult {
    /// Not yet known (the startup prober's initial value).
    Unknown,
    /// Passed.
    Success,
    /// Failed `failureThreshold` times.
    Failure,
}

impl ObservedPod {
    /// The newest sandbox (by creation time, then attempt).
    pub fn newest_sandbox(&self) -> Option<&ObservedSandbox> {
        sorted_sandboxes(self).into_iter().next()
    }

    /// All instances named `name`, newest first.
    pub fn instances(&self, name: &str) -> Vec<&ObservedContainer> {
        let mut v: Vec<_> = self.containers.iter().filter(|c| c.name == name).collect();
        v.sort_by(|a, b| newest_first(a, b));
        v
    }

    /// The newest instance named `name` (upstream `FindContainerStatusByName`).
    pub fn newest(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers
            .iter()
            .filter(|c| c.name == name)
            .min_by(|a, b| newest_first(a, b))
    }

    /// The restart count for the next instance of `name`: one more than the newest instance's, or 0
    /// (upstream also recovers it from log file names after a runtime wipe; kubeling does not).
    pub fn next_restart_count(&self, name: &str) -> u32 {
        self.newest(name).map_or(0, |c| c.restart_count + 1)
    }

    fn newest_exited(&self, name: &str) -> Option<(&ObservedContainer, Timestamp)> {
        self.instances(name).into_iter().find_map(|c| match c.state {
            ContainerState::Exited { finished_at, .. } => Some((c, finished_at)),
            _ => None,
        })
    }
}

fn newest_first(a: &ObservedContainer, b: &ObservedContainer) -> std::cmp::Ordering {
    b.created
        .cmp(&a.created)
        .then(b.restart_count.cmp(&a.restart_count))
        .then(a.id.cmp(&b.id))
}

fn sorted_sandboxes(observed: &ObservedPod) -> Vec<&ObservedSandbox> {
    let mut v: Vec<_> = observed.sandboxes.iter().collect();
    v.sort_by(|a, b| {
        b.created
            .cmp(&a.created)
            .then(b.attempt.cmp(&a.attempt))
            .then(a.id.cmp(&b.id))
    });
    v
}

/// What the worker should do now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodActions {
    /// Kill every container and stop every sandbox of the pod (before creating a new sandbox, if
    /// [`PodActions::create_sandbox`] is set). Also set when nothing is left to run.
    pub kill_pod: bool,
    /// Create a new sandbox with this attempt number.
    pub create_sandbox: Option<u32>,
    /// The existing sandbox being replaced, for the `SandboxChanged` event ("Pod sandbox changed, it will
    /// be killed and re-created."). `kill_pod` already stops it.
    pub sandbox_to_kill: Option<String>,
    /// Indices into `spec.initContainers` to start, in spec order. Usually one; with sidecars
    /// (`restartPolicy: Always` init containers) several.
    pub init_containers_to_start: Vec<usize>,
    /// Indices into `spec.containers` to start, in spec order.
    pub containers_to_start: Vec<usize>,
    /// Indices into `spec.ephemeralContainers` to start (never restarted).
    pub ephemeral_containers_to_start: Vec<usize>,
    /// Running (or unknown) instances to kill when `kill_pod` is false.
    pub containers_to_kill: Vec<ContainerToKill>,
    /// Containers that should start but are in CrashLoopBackOff; the worker records their waiting reason.
    pub backoff: Vec<BackedOff>,
    /// Backoff entries to advance for the starts above ([`BackoffState::record_starts`]).
    pub backoff_advance: Vec<BackoffAdvance>,
    /// Plan again at this time: the earliest end of a backoff in [`PodActions::backoff`].
    pub next_check: Option<Timestamp>,
}

/// A container instance to kill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerToKill {
    /// Runtime ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// The `Killing` event text, e.g. `Container web definition changed, will be restarted`.
    pub message: String,
    /// Why; a liveness or startup kill uses the probe-level grace period when one is set.
    pub reason: KillReason,
}

/// Why a container is killed (upstream `containerKillReason`, plus the definition change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillReason {
    /// The hash differs from the spec.
    DefinitionChanged,
    /// Liveness probe failed.
    LivenessProbe,
    /// Startup probe failed.
    StartupProbe,
    /// The runtime state is unknown; killed before a restart so two instances never run.
    Unknown,
}

/// A start held back by CrashLoopBackOff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackedOff {
    /// Container name.
    pub name: String,
    /// Whether it is an init container.
    pub init: bool,
    /// When the backoff ends (crashed instance's `finishedAt` + current delay).
    pub until: Timestamp,
    /// Time left from `now`.
    pub remaining: Duration,
    /// The waiting message: `back-off 20s restarting failed container=c pod=p_ns(uid)`.
    pub message: String,
}

/// A `backoff.Next(key, eventTime)` to record when the start goes ahead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackoffAdvance {
    /// The crash-loop key ([`crash_loop_key`]).
    pub key: String,
    /// The `finishedAt` of the newest exited instance.
    pub event_time: Timestamp,
}

/// The waiting reason the worker records for a container in [`PodActions::backoff`] (upstream
/// `ErrCrashLoopBackOff`); the message is [`BackedOff::message`].
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// Computes what to do for `pod` given what the runtime shows (port of `computePodActions`).
pub fn plan(pod: &Pod, observed: &ObservedPod, backoff: &BackoffState, now: Timestamp) -> PodActions {
    let mut actions = PodActions::default();
    // A deleted pod only goes down: upstream's pod worker moves it to SyncTerminatingPod (killPod), and
    // ShouldContainerBeRestarted is false once deletionTimestamp is set.
    if pod.metadata.deletion_timestamp.is_some() {
        actions.kill_pod = true;
        return actions;
    }
    let default_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    let policy = RestartPolicy::of(spec);

    let (create_sandbox, attempt, sandbox_id) = sandbox_changed(pod, observed);
    if create_sandbox {
        actions.kill_pod = true;
        actions.sandbox_to_kill = sandbox_id;
        if policy == RestartPolicy::Never && attempt != 0 && !observed.containers.is_empty() {
            // The pod has run and must not run again: just kill what is left.
            return actions;
        }
        let to_start: Vec<usize> = spec
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !(policy == RestartPolicy::OnFailure && container_succeeded(c, observed)))
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() && has_any_regular_container_created(spec, observed) {
            return actions;
        }
        actions.create_sandbox = Some(attempt);
        if spec.init_containers.as_ref().is_some_and(|v| !v.is_empty()) {
            // A new sandbox starts over from the first init container.
            actions.init_containers_to_start = vec![0];
        } else {
            actions.containers_to_start = to_start;
        }
        apply_backoff(pod, spec, observed, backoff, now, &mut actions);
        return actions;
    }

    for (i, e) in spec.ephemeral_containers.iter().flatten().enumerate() {
        if observed.newest(&e.name).is_none() {
            actions.ephemeral_containers_to_start.push(i);
        }
    }

    let initialized = init_container_actions(spec, observed, policy, &mut actions);
    if actions.kill_pod || !initialized {
        apply_backoff(pod, spec, observed, backoff, now, &mut actions);
        return actions;
    }

    let mut keep = 0;
    for (idx, container) in spec.containers.iter().enumerate() {
        let newest = observed.newest(&container.name);
        let running = newest.filter(|c| matches!(c.state, ContainerState::Running { .. }));
        let Some(running) = running else {
            if should_container_be_restarted(container, pod, observed) {
                actions.containers_to_start.push(idx);
                if let Some(c) = newest.filter(|c| c.state == ContainerState::Unknown) {
                    kill(
                        &mut actions,
                        c,
                        unknown_message("Container", &c.state),
                        KillReason::Unknown,
                    );
                }
            }
            continue;
        };
        let mut restart = policy != RestartPolicy::Never;
        let (message, reason) = if running.hash != hash_container(container) {
            // Restarted whatever the restart policy: the spec changed.
            restart = true;
            (
                format!("Container {} definition changed", container.name),
                KillReason::DefinitionChanged,
            )
        } else if running.liveness == Some(ProbeResult::Failure) {
            (
                format!("Container {} failed liveness probe", container.name),
                KillReason::LivenessProbe,
            )
        } else if running.startup == Some(ProbeResult::Failure) {
            (
                format!("Container {} failed startup probe", container.name),
                KillReason::StartupProbe,
            )
        } else {
            keep += 1;
            continue;
        };
        let message = if restart {
            actions.containers_to_start.push(idx);
            format!("{message}, will be restarted")
        } else {
            message
        };
        kill(&mut actions, running, message, reason);
    }

    if keep == 0 && actions.containers_to_start.is_empty() {
        // Nothing runs and nothing will: stop the sandbox. Sidecars must not keep the pod alive.
        actions.kill_pod = true;
        actions.init_containers_to_start.clear();
    }
    apply_backoff(pod, spec, observed, backoff, now, &mut actions);
    actions
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub(crate) fn of(spec: &PodSpec) -> Self {
        match spec.restart_policy.as_deref() {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        }
    }
}

/// `restartPolicy: Always` on an init container makes it a sidecar (upstream `IsRestartableInitContainer`).
pub(crate) fn is_restartable_init(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Upstream `PodSandboxChanged`: (needs a new sandbox, attempt for it, ID of the sandbox it replaces).
pub(crate) fn sandbox_changed(pod: &Pod, observed: &ObservedPod) -> (bool, u32, Option<String>) {
    let sandboxes = sorted_sandboxes(observed);
    let Some(newest) = sandboxes.first() else {
        return (true, 0, None);
    };
    let ready = sandboxes.iter().filter(|s| s.ready).count();
    let max_attempt = sandboxes.iter().map(|s| s.attempt).max().unwrap_or(0);
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    if ready > 1 || !newest.ready {
        return (true, max_attempt + 1, Some(newest.id.clone()));
    }
    if newest.host_network != host_network {
        return (true, max_attempt + 1, None);
    }
    if !host_network && newest.ip.as_deref().unwrap_or("").is_empty() {
        return (true, max_attempt + 1, Some(newest.id.clone()));
    }
    (false, max_attempt, Some(newest.id.clone()))
}

/// Upstream `ShouldContainerBeRestarted`.
pub(crate) fn should_container_be_restarted(
    container: &Container,
    pod: &Pod,
    observed: &ObservedPod,
) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(newest) = observed.newest(&container.name) else {
        return true;
    };
    let policy = pod.spec.as_ref().map_or(RestartPolicy::Always, RestartPolicy::of);
    match newest.state {
        ContainerState::Running { .. } => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited { exit_code, .. } => match policy {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Always => true,
        },
    }
}

fn container_succeeded(c: &Container, observed: &ObservedPod) -> bool {
    observed
        .newest(&c.name)
        .is_some_and(|s| matches!(s.state, ContainerState::Exited { exit_code: 0, .. }))
}

fn has_any_regular_container_created(spec: &PodSpec, observed: &ObservedPod) -> bool {
    spec.containers.iter().any(|c| {
        observed.newest(&c.name).is_some_and(|s| {
            matches!(
                s.state,
                ContainerState::Created | ContainerState::Running { .. } | ContainerState::Exited { .. }
            )
        })
    })
}

/// Upstream `isInitContainerFailed`.
fn is_init_container_failed(c: &ObservedContainer) -> bool {
    match &c.state {
        ContainerState::Exited { exit_code, .. } => {
            *exit_code != 0 || c.state.exited_reason() == Some("OOMKilled")
        }
        ContainerState::Unknown => true,
        _ => false,
    }
}

fn unknown_message(what: &str, state: &ContainerState) -> String {
    format!(
        "{what} is in \"{}\" state, try killing it before restart",
        state.name()
    )
}

fn kill(actions: &mut PodActions, c: &ObservedContainer, message: String, reason: KillReason) {
    if actions.containers_to_kill.iter().any(|k| k.id == c.id) {
        return;
    }
    actions.containers_to_kill.push(ContainerToKill {
        id: c.id.clone(),
        name: c.name.clone(),
        message,
        reason,
    });
}

/// Port of `computeInitContainerActions`: fills `init_containers_to_start` and kills, and returns whether
/// the pod is initialized. Walks the init containers from last to first, because completed ones may have
/// been garbage-collected and the last one that exists tells the most.
fn init_container_actions(
    spec: &PodSpec,
    observed: &ObservedPod,
    policy: RestartPolicy,
    actions: &mut PodActions,
) -> bool {
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    if inits.is_empty() {
        return true;
    }
    // A regular container that was created or is running means init finished before (perhaps in a
    // container that is gone now). Exited ones do not count: after a reboot every container is exited.
    let mut initialized = spec.containers.iter().any(|c| {
        observed
            .newest(&c.name)
            .is_some_and(|s| matches!(s.state, ContainerState::Created | ContainerState::Running { .. }))
    });
    let mut previously_initialized = initialized;
    let restart_on_failure = policy != RestartPolicy::Never;
    let mut to_start: Vec<usize> = Vec::new();
    let last = inits.len() - 1;

    for i in (0..inits.len()).rev() {
        let container = &inits[i];
        let sidecar = is_restartable_init(container);
        let Some(status) = observed.newest(&container.name) else {
            if previously_initialized && sidecar {
                to_start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match &status.state {
            ContainerState::Created => to_start.push(i),
            ContainerState::Running { .. } => {
                if sidecar {
                    sidecar_running(
                        container,
                        status,
                        i,
                        last,
                        previously_initialized,
                        &mut initialized,
                        &mut to_start,
                        actions,
                    );
                }
            }
            ContainerState::Exited { .. } => {
                if sidecar {
                    to_start.push(i);
                } else if is_init_container_failed(status) {
                    if !restart_on_failure {
                        actions.kill_pod = true;
                        actions.init_containers_to_start.clear();
                        return false;
                    }
                    to_start.push(i);
                } else if i == last {
                    initialized = true;
                } else {
                    to_start.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                if !sidecar && !restart_on_failure {
                    actions.kill_pod = true;
                    actions.init_containers_to_start.clear();
                    return false;
                }
                kill(
                    actions,
                    status,
                    unknown_message("Init container", &status.state),
                    KillReason::Unknown,
                );
                to_start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        to_start.push(0);
    }
    // Upstream reverses its backwards walk into spec order; sorting does that and drops repeats.
    to_start.sort_unstable();
    to_start.dedup();
    actions.init_containers_to_start = to_start;
    initialized
}

/// The running-sidecar arm of `computeInitContainerActions`.
#[allow(clippy::too_many_arguments)]
fn sidecar_running(
    container: &Container,
    status: &ObservedContainer,
    i: usize,
    last: usize,
    previously_initialized: bool,
    initialized: &mut bool,
    to_start: &mut Vec<usize>,
    actions: &mut PodActions,
) {
    if container.startup_probe.is_some() {
        match status.startup {
            // The startup probe has not run yet, or has not passed: wait.
            None | Some(ProbeResult::Unknown) => return,
            Some(ProbeResult::Failure) => {
                let message = format!("Init container {} failed startup probe", container.name);
                kill(actions, status, message, KillReason::StartupProbe);
                to_start.push(i);
                return;
            }
            Some(ProbeResult::Success) => {}
        }
    }
    // Running and started: the next init container may start.
    if i == last {
        *initialized = true;
    } else if !previously_initialized {
        to_start.push(i + 1);
    }
    if status.hash != hash_container(container) {
        let message = format!("Init container {} definition changed", container.name);
        kill(actions, status, message, KillReason::DefinitionChanged);
        to_start.push(i);
        return;
    }
    if container.liveness_probe.is_some() && status.liveness == Some(ProbeResult::Failure) {
        let message = format!("Init container {} failed liveness probe", container.name);
        kill(actions, status, message, KillReason::LivenessProbe);
        to_start.push(i);
    }
}

/// Upstream `doBackOff`, made at plan time: a start whose newest exited instance is still within its
/// backoff is held back and reported; the others are kept, with the backoff advance to record.
fn apply_backoff(
    pod: &Pod,
    spec: &PodSpec,
    observed: &ObservedPod,
    backoff: &BackoffState,
    now: Timestamp,
    actions: &mut PodActions,
) {
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    let check = |container: &Container, init: bool, actions: &mut PodActions| -> bool {
        let Some((_, finished_at)) = observed.newest_exited(&container.name) else {
            return true;
        };
        let key = crash_loop_key(pod, container);
        match backoff
            .backoff_until(&key, finished_at)
            .filter(|until| now < *until)
        {
            Some(until) => {
                let delay = backoff.get(&key).unwrap_or_default();
                let remaining = until.duration_since(now).unsigned_abs();
                let message = format!(
                    "back-off {} restarting failed container={} pod={}",
                    go_duration(delay),
                    container.name,
                    pod_full_name(pod)
                );
                actions.backoff.push(BackedOff {
                    name: container.name.clone(),
                    init,
                    until,
                    remaining,
                    message,
                });
                false
            }
            None => {
                actions.backoff_advance.push(BackoffAdvance {
                    key,
                    event_time: finished_at,
                });
                true
            }
        }
    };
    let init_starts = std::mem::take(&mut actions.init_containers_to_start);
    for i in init_starts {
        if check(&inits[i], true, actions) {
            actions.init_containers_to_start.push(i);
        }
    }
    let starts = std::mem::take(&mut actions.containers_to_start);
    for i in starts {
        if check(&spec.containers[i], false, actions) {
            actions.containers_to_start.push(i);
        }
    }
    actions.next_check = actions.backoff.iter().map(|b| b.until).min();
}

/// `<name>_<namespace>(<uid>)`, upstream `format.Pod`, used in event and backoff messages.
pub fn pod_full_name(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EphemeralContainer, Probe};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub(crate) fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    pub(crate) fn spec_container(name: &str) -> Container {
        Container {
            name: name.into(),
            image: Some(format!("img/{name}:1")),
            ..Default::default()
        }
    }

    /// A pod named `p` in `default` with UID `u1`. Init names starting with `sc` are sidecars.
    pub(crate) fn pod(policy: &str, inits: &[&str], containers: &[&str]) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some("u1".into());
        let init_containers: Vec<Container> = inits
            .iter()
            .map(|n| {
                let mut c = spec_container(n);
                if n.starts_with("sc") {
                    c.restart_policy = Some("Always".into());
                }
                c
            })
            .collect();
        p.spec = Some(PodSpec {
            restart_policy: Some(policy.into()),
            init_containers: (!init_containers.is_empty()).then_some(init_containers),
            containers: containers.iter().map(|n| spec_container(n)).collect(),
            ..Default::default()
        });
        p
    }

    pub(crate) fn sandbox(id: &str, attempt: u32, ready: bool, created: i64) -> ObservedSandbox {
        ObservedSandbox {
            id: id.into(),
            attempt,
            ready,
            ip: Some("10.88.0.5".into()),
            host_network: false,
            created: t(created),
        }
    }

    pub(crate) fn running(at: i64) -> ContainerState {
        ContainerState::Running { started_at: t(at) }
    }

    pub(crate) fn exited(code: i32, started: i64, finished: i64) -> ContainerState {
        ContainerState::Exited {
            exit_code: code,
            reason: None,
            message: None,
            started_at: t(started),
            finished_at: t(finished),
            oom_killed: false,
        }
    }

    /// An instance of `name` whose hash matches the pod's spec for it.
    pub(crate) fn inst(
        pod: &Pod,
        name: &str,
        id: &str,
        state: ContainerState,
        created: i64,
    ) -> ObservedContainer {
        let spec = pod.spec.as_ref().unwrap();
        let c = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned()
            .unwrap_or_else(|| spec_container(name));
        ObservedContainer {
            id: id.into(),
            name: name.into(),
            restart_count: 0,
            hash: hash_container(&c),
            image: c.image.clone().unwrap_or_default(),
            image_ref: format!("docker-pullable://img/{name}@sha256:abc"),
            created: t(created),
            state,
            liveness: None,
            readiness: None,
            startup: None,
        }
    }

    fn observed(sandboxes: Vec<ObservedSandbox>, containers: Vec<ObservedContainer>) -> ObservedPod {
        ObservedPod {
            sandboxes,
            containers,
        }
    }

    fn run(pod: &Pod, obs: &ObservedPod) -> PodActions {
        plan(pod, obs, &BackoffState::crash_loop(), t(1000))
    }

    #[test]
    fn new_pod_creates_sandbox_then_first_init_container() {
        let p = pod("Always", &["i0", "i1"], &["web"]);
        let a = run(&p, &ObservedPod::default());
        assert_eq!(a.create_sandbox, Some(0));
        assert_eq!(a.sandbox_to_kill, None);
        assert_eq!(a.init_containers_to_start, [0]);
        assert!(a.containers_to_start.is_empty());
    }

    #[test]
    fn new_pod_without_init_containers_starts_every_container_in_the_new_sandbox() {
        let p = pod("Always", &[], &["a", "b"]);
        let a = run(&p, &ObservedPod::default());
        assert_eq!(a.create_sandbox, Some(0));
        assert_eq!(a.containers_to_start, [0, 1]);
        assert_eq!(a.next_check, None);
    }

    #[test]
    fn init_containers_run_one_at_a_time_in_order() {
        let p = pod("Always", &["i0", "i1"], &["web"]);
        let sb = || vec![sandbox("s1", 0, true, 0)];
        // (what, observed containers, init containers to start, containers to start)
        type Case = (&'static str, Vec<ObservedContainer>, Vec<usize>, Vec<usize>);
        let cases: Vec<Case> = vec![
            ("sandbox up, nothing ran: first init", vec![], vec![0], vec![]),
            (
                "first init running: wait",
                vec![inst(&p, "i0", "c1", running(1), 1)],
                vec![],
                vec![],
            ),
            (
                "first init done: second",
                vec![inst(&p, "i0", "c1", exited(0, 1, 2), 1)],
                vec![1],
                vec![],
            ),
            (
                "all init done: app containers",
                vec![
                    inst(&p, "i0", "c1", exited(0, 1, 2), 1),
                    inst(&p, "i1", "c2", exited(0, 3, 4), 3),
                ],
                vec![],
                vec![0],
            ),
            (
                "app running: init is not re-run even if init containers are gone",
                vec![inst(&p, "web", "c3", running(5), 5)],
                vec![],
                vec![],
            ),
        ];
        for (what, containers, init, regular) in cases {
            let a = run(&p, &observed(sb(), containers));
            assert_eq!(a.create_sandbox, None, "{what}");
            assert!(!a.kill_pod, "{what}");
            assert_eq!(a.init_containers_to_start, init, "{what}");
            assert_eq!(a.containers_to_start, regular, "{what}");
        }
    }

    #[test]
    fn failed_init_container_fails_the_pod_under_never_and_restarts_otherwise() {
        let cases = [
            ("Never", true, vec![]),
            ("OnFailure", false, vec![1]),
            ("Always", false, vec![1]),
        ];
        for (policy, kill_pod, init) in cases {
            let p = pod(policy, &["i0", "i1"], &["web"]);
            let obs = observed(
                vec![sandbox("s1", 0, true, 0)],
                vec![
                    inst(&p, "i0", "c1", exited(0, 1, 2), 1),
                    inst(&p, "i1", "c2", exited(1, 3, 4), 3),
                ],
            );
            let a = run(&p, &obs);
            assert_eq!(a.kill_pod, kill_pod, "{policy}");
            assert_eq!(a.init_containers_to_start, init, "{policy}");
            assert!(a.containers_to_start.is_empty(), "{policy}");
        }
    }

    #[test]
    fn container_exited_with_restart_policy_never_is_not_restarted() {
        // `a` exited with the code, `b` keeps running so the pod stays up.
        let cases = [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 0, false),
            ("OnFailure", 1, true),
            ("Never", 0, false),
            ("Never", 1, false),
        ];
        for (policy, code, restarted) in cases {
            let p = pod(policy, &[], &["a", "b"]);
            let obs = observed(
                vec![sandbox("s1", 0, true, 0)],
                vec![
                    inst(&p, "a", "c1", exited(code, 1, 2), 1),
                    inst(&p, "b", "c2", running(1), 1),
                ],
            );
            let a = run(&p, &obs);
            assert_eq!(a.containers_to_start == [0], restarted, "{policy} exit {code}");
            assert!(!a.kill_pod, "{policy} exit {code}");
        }
    }

    #[test]
    fn pod_with_nothing_left_to_run_is_killed_without_a_new_sandbox() {
        let cases = [("Never", 1), ("Never", 0), ("OnFailure", 0)];
        for (policy, code) in cases {
            let p = pod(policy, &[], &["a"]);
            let running_sandbox = observed(
                vec![sandbox("s1", 0, true, 0)],
                vec![inst(&p, "a", "c1", exited(code, 1, 2), 1)],
            );
            let a = run(&p, &running_sandbox);
            assert!(
                a.kill_pod && a.create_sandbox.is_none(),
                "{policy} {code}: sandbox still up"
            );
            let stopped_sandbox = observed(
                vec![sandbox("s1", 0, false, 0)],
                vec![inst(&p, "a", "c1", exited(code, 1, 2), 1)],
            );
            let a = run(&p, &stopped_sandbox);
            assert!(
                a.kill_pod && a.create_sandbox.is_none(),
                "{policy} {code}: sandbox stopped"
            );
            assert!(a.containers_to_start.is_empty(), "{policy} {code}");
        }
    }

    #[test]
    fn changed_hash_kills_and_restarts_the_container() {
        for policy in ["Always", "OnFailure", "Never"] {
            let p = pod(policy, &[], &["web", "db"]);
            let mut web = inst(&p, "web", "c1", running(1), 1);
            web.hash = "deadbeef".into();
            let obs = observed(
                vec![sandbox("s1", 0, true, 0)],
                vec![web, inst(&p, "db", "c2", running(1), 1)],
            );
            let a = run(&p, &obs);
            assert_eq!(
                a.containers_to_kill,
                [ContainerToKill {
                    id: "c1".into(),
                    name: "web".into(),
                    message: "Container web definition changed, will be restarted".into(),
                    reason: KillReason::DefinitionChanged,
                }],
                "{policy}"
            );
            assert_eq!(a.containers_to_start, [0], "{policy}");
            assert!(!a.kill_pod, "{policy}");
        }
    }

    #[test]
    fn failed_liveness_kills_the_container_and_restarts_it_unless_never() {
        let cases = [
            (
                "Always",
                "Container web failed liveness probe, will be restarted",
                true,
            ),
            ("Never", "Container web failed liveness probe", false),
        ];
        for (policy, message, restarted) in cases {
            let p = pod(policy, &[], &["web", "db"]);
            let mut web = inst(&p, "web", "c1", running(1), 1);
            web.liveness = Some(ProbeResult::Failure);
            let obs = observed(
                vec![sandbox("s1", 0, true, 0)],
                vec![web, inst(&p, "db", "c2", running(1), 1)],
            );
            let a = run(&p, &obs);
            assert_eq!(a.containers_to_kill.len(), 1, "{policy}");
            assert_eq!(a.containers_to_kill[0].message, message, "{policy}");
            assert_eq!(
                a.containers_to_kill[0].reason,
                KillReason::LivenessProbe,
                "{policy}"
            );
            assert_eq!(a.containers_to_start == [0], restarted, "{policy}");
        }
    }

    #[test]
    fn failed_startup_probe_kills_and_restarts() {
        let p = pod("Always", &[], &["web"]);
        let mut web = inst(&p, "web", "c1", running(1), 1);
        web.startup = Some(ProbeResult::Failure);
        let a = run(&p, &observed(vec![sandbox("s1", 0, true, 0)], vec![web]));
        assert_eq!(
            a.containers_to_kill[0].message,
            "Container web failed startup probe, will be restarted"
        );
        assert_eq!(a.containers_to_start, [0]);
    }

    #[test]
    fn healthy_running_pod_needs_nothing() {
        let p = pod("Always", &["i0"], &["a", "b"]);
        let obs = observed(
            vec![sandbox("s1", 0, true, 0)],
            vec![
                inst(&p, "i0", "c0", exited(0, 1, 2), 1),
                inst(&p, "a", "c1", running(3), 3),
                inst(&p, "b", "c2", running(3), 3),
            ],
        );
        assert_eq!(run(&p, &obs), PodActions::default());
    }

    #[test]
    fn lost_sandbox_is_recreated_with_the_next_attempt_and_everything_restarts() {
        let p = pod("Always", &[], &["a", "b"]);
        let obs = observed(
            vec![sandbox("s0", 0, false, 0), sandbox("s1", 1, false, 10)],
            vec![
                inst(&p, "a", "c1", exited(137, 11, 20), 11),
                inst(&p, "b", "c2", running(11), 11),
            ],
        );
        let a = run(&p, &obs);
        assert!(a.kill_pod);
        assert_eq!(a.create_sandbox, Some(2));
        assert_eq!(a.sandbox_to_kill.as_deref(), Some("s1"));
        assert_eq!(a.containers_to_start, [0, 1]);
    }

    #[test]
    fn sandbox_changes_that_force_a_new_one() {
        let mut no_ip = sandbox("s1", 3, true, 10);
        no_ip.ip = None;
        let mut host = sandbox("s1", 3, true, 10);
        host.host_network = true;
        let cases = [
            ("no sandbox", vec![], Some(0), None),
            (
                "newest not ready",
                vec![sandbox("s1", 3, false, 10)],
                Some(4),
                Some("s1"),
            ),
            (
                "two ready",
                vec![sandbox("s0", 2, true, 0), sandbox("s1", 3, true, 10)],
                Some(4),
                Some("s1"),
            ),
            ("ready without IP", vec![no_ip], Some(4), Some("s1")),
            ("network mode changed", vec![host], Some(4), None),
            ("ready with IP", vec![sandbox("s1", 3, true, 10)], None, None),
        ];
        for (what, sandboxes, create, replaced) in cases {
            let p = pod("Always", &[], &["a"]);
            let mut containers = vec![];
            if create.is_none() {
                containers.push(inst(&p, "a", "c1", running(11), 11));
            }
            let a = run(&p, &observed(sandboxes, containers));
            assert_eq!(a.create_sandbox, create, "{what}");
            assert_eq!(a.sandbox_to_kill.as_deref(), replaced, "{what}");
        }
    }

    #[test]
    fn lost_sandbox_of_a_never_pod_that_already_ran_is_not_recreated() {
        let p = pod("Never", &[], &["a"]);
        let obs = observed(
            vec![sandbox("s1", 0, false, 0)],
            vec![inst(&p, "a", "c1", running(1), 1)],
        );
        let a = run(&p, &obs);
        assert!(a.kill_pod);
        assert_eq!(a.create_sandbox, None);
        assert!(a.containers_to_start.is_empty());
    }

    #[test]
    fn new_sandbox_for_on_failure_pod_skips_containers_that_succeeded() {
        let p = pod("OnFailure", &[], &["ok", "bad"]);
        let obs = observed(
            vec![sandbox("s1", 0, false, 0)],
            vec![
                inst(&p, "ok", "c1", exited(0, 1, 2), 1),
                inst(&p, "bad", "c2", exited(1, 1, 2), 1),
            ],
        );
        let a = run(&p, &obs);
        assert_eq!(a.create_sandbox, Some(1));
        assert_eq!(a.containers_to_start, [1]);
    }

    #[test]
    fn new_sandbox_reruns_init_containers_from_the_first() {
        let p = pod("Always", &["i0", "i1"], &["web"]);
        let obs = observed(
            vec![sandbox("s1", 0, false, 0)],
            vec![
                inst(&p, "i0", "c0", exited(0, 1, 2), 1),
                inst(&p, "i1", "c1", exited(0, 2, 3), 2),
                inst(&p, "web", "c2", exited(137, 4, 9), 4),
            ],
        );
        let a = run(&p, &obs);
        assert_eq!(a.create_sandbox, Some(1));
        assert_eq!(a.init_containers_to_start, [0]);
        assert!(a.containers_to_start.is_empty());
    }

    #[test]
    fn deleted_pod_kills_everything_and_starts_nothing() {
        let mut p = pod("Always", &[], &["a"]);
        p.metadata.deletion_timestamp = Some(Time(t(0)));
        for obs in [
            ObservedPod::default(),
            observed(vec![sandbox("s1", 0, true, 0)], vec![]),
        ] {
            let a = run(&p, &obs);
            assert_eq!(
                a,
                PodActions {
                    kill_pod: true,
                    ..Default::default()
                }
            );
        }
    }

    #[test]
    fn crashed_container_waits_out_its_backoff_and_plans_a_recheck() {
        let p = pod("Always", &[], &["web"]);
        let c = spec_container("web");
        let key = crash_loop_key(&p, &c);
        let mut backoff = BackoffState::crash_loop();
        backoff.next(&key, t(0), t(0)); // first restart, delay now 10 s
        backoff.next(&key, t(5), t(5)); // second restart, delay now 20 s
        let mut crashed = inst(&p, "web", "c3", exited(1, 5, 6), 5);
        crashed.restart_count = 2;
        let obs = observed(vec![sandbox("s1", 0, true, 0)], vec![crashed]);

        let a = plan(&p, &obs, &backoff, t(16));
        assert!(a.containers_to_start.is_empty());
        assert!(!a.kill_pod, "a container in backoff keeps the pod alive");
        assert_eq!(
            a.backoff,
            [BackedOff {
                name: "web".into(),
                init: false,
                until: t(26),
                remaining: Duration::from_secs(10),
                message: "back-off 20s restarting failed container=web pod=p_default(u1)".into(),
            }]
        );
        assert_eq!(a.next_check, Some(t(26)));

        let a = plan(&p, &obs, &backoff, t(26));
        assert_eq!(a.containers_to_start, [0]);
        assert_eq!(
            a.backoff_advance,
            [BackoffAdvance {
                key: key.clone(),
                event_time: t(6)
            }]
        );
        assert_eq!(a.next_check, None);
        backoff.record_starts(&a, t(26));
        assert_eq!(backoff.get(&key), Some(Duration::from_secs(40)));
    }

    #[test]
    fn first_crash_restarts_immediately() {
        let p = pod("Always", &[], &["web"]);
        let obs = observed(
            vec![sandbox("s1", 0, true, 0)],
            vec![inst(&p, "web", "c1", exited(1, 1, 2), 1)],
        );
        let a = plan(&p, &obs, &BackoffState::crash_loop(), t(2));
        assert_eq!(a.containers_to_start, [0]);
        assert_eq!(a.backoff_advance.len(), 1);
    }

    #[test]
    fn container_in_unknown_state_is_killed_before_restart() {
        let p = pod("Always", &[], &["web"]);
        let obs = observed(
            vec![sandbox("s1", 0, true, 0)],
            vec![inst(&p, "web", "c1", ContainerState::Unknown, 1)],
        );
        let a = run(&p, &obs);
        assert_eq!(a.containers_to_start, [0]);
        assert_eq!(
            a.containers_to_kill[0].message,
            "Container is in \"unknown\" state, try killing it before restart"
        );
    }

    #[test]
    fn sidecar_counts_as_initialized_once_running_and_started() {
        let mut p = pod("Always", &["sc", "i1"], &["web"]);
        let with_probe = {
            let mut p = p.clone();
            p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].startup_probe =
                Some(Probe::default());
            p
        };
        let sb = || vec![sandbox("s1", 0, true, 0)];
        let a = run(&p, &observed(sb(), vec![inst(&p, "sc", "c1", running(1), 1)]));
        assert_eq!(
            a.init_containers_to_start,
            [1],
            "no startup probe: started when running"
        );

        let a = run(
            &with_probe,
            &observed(sb(), vec![inst(&with_probe, "sc", "c1", running(1), 1)]),
        );
        assert!(
            a.init_containers_to_start.is_empty(),
            "startup probe not passed yet: wait"
        );

        let mut started = inst(&with_probe, "sc", "c1", running(1), 1);
        started.startup = Some(ProbeResult::Success);
        let a = run(&with_probe, &observed(sb(), vec![started]));
        assert_eq!(a.init_containers_to_start, [1]);

        // After init, an exited sidecar is restarted while the app runs.
        let obs = observed(
            sb(),
            vec![
                inst(&p, "sc", "c1", exited(1, 1, 9), 1),
                inst(&p, "i1", "c2", exited(0, 2, 3), 2),
                inst(&p, "web", "c3", running(4), 4),
            ],
        );
        let a = run(&p, &obs);
        assert_eq!(a.init_containers_to_start, [0]);
        assert!(a.containers_to_start.is_empty() && !a.kill_pod);

        // When the app is done for good, the sidecar is not restarted and the pod goes down.
        p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        let obs = observed(
            sb(),
            vec![
                inst(&p, "sc", "c1", exited(1, 1, 9), 1),
                inst(&p, "i1", "c2", exited(0, 2, 3), 2),
                inst(&p, "web", "c3", exited(0, 4, 8), 4),
            ],
        );
        let a = run(&p, &obs);
        assert!(a.kill_pod);
        assert!(a.init_containers_to_start.is_empty());
    }

    #[test]
    fn ephemeral_containers_start_once_and_never_restart() {
        let mut p = pod("Always", &[], &["web"]);
        let e = EphemeralContainer {
            name: "debug".into(),
            ..Default::default()
        };
        p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![e]);
        let base = vec![inst(&p, "web", "c1", running(1), 1)];
        let a = run(&p, &observed(vec![sandbox("s1", 0, true, 0)], base.clone()));
        assert_eq!(a.ephemeral_containers_to_start, [0]);
        let mut after = base;
        after.push(inst(&p, "debug", "c2", exited(0, 2, 3), 2));
        let a = run(&p, &observed(vec![sandbox("s1", 0, true, 0)], after));
        assert!(a.ephemeral_containers_to_start.is_empty());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn state_strategy() -> impl Strategy<Value = ContainerState> {
            prop_oneof![
                Just(ContainerState::Created),
                (0i64..50).prop_map(running),
                (0i32..3, 0i64..50, 0i64..50).prop_map(|(code, s, f)| exited(code, s, s + f)),
                Just(ContainerState::Unknown),
            ]
        }

        fn probe_strategy() -> impl Strategy<Value = Option<ProbeResult>> {
            prop_oneof![
                Just(None),
                Just(Some(ProbeResult::Unknown)),
                Just(Some(ProbeResult::Success)),
                Just(Some(ProbeResult::Failure)),
            ]
        }

        prop_compose! {
            fn case()(
                policy in prop_oneof![Just("Always"), Just("OnFailure"), Just("Never")],
                n_init in 0usize..3,
                sidecar_first in any::<bool>(),
                n_regular in 1usize..4,
                sandboxes in prop::collection::vec((0u32..4, any::<bool>(), any::<bool>(), 0i64..100), 0..3),
                instances in prop::collection::vec(
                    (0usize..6, state_strategy(), 0i64..100, any::<bool>(), probe_strategy(), probe_strategy()),
                    0..8,
                ),
                deleted in prop::bool::weighted(0.1),
                with_backoff in any::<bool>(),
                now in 0i64..200,
            ) -> (Pod, ObservedPod, BackoffState, Timestamp) {
                let init_names: Vec<String> = (0..n_init)
                    .map(|i| if i == 0 && sidecar_first { "sc0".to_owned() } else { format!("i{i}") })
                    .collect();
                let regular_names: Vec<String> = (0..n_regular).map(|i| format!("c{i}")).collect();
                let inits: Vec<&str> = init_names.iter().map(String::as_str).collect();
                let regular: Vec<&str> = regular_names.iter().map(String::as_str).collect();
                let mut p = pod(policy, &inits, &regular);
                if deleted {
                    p.metadata.deletion_timestamp = Some(Time(t(0)));
                }
                let all: Vec<&str> = inits.iter().chain(regular.iter()).copied().collect();
                let sandboxes = sandboxes
                    .into_iter()
                    .enumerate()
                    .map(|(i, (attempt, ready, has_ip, created))| {
                        let mut s = sandbox(&format!("s{i}"), attempt, ready, created);
                        if !has_ip {
                            s.ip = None;
                        }
                        s
                    })
                    .collect();
                let mut backoff = BackoffState::crash_loop();
                let containers = instances
                    .into_iter()
                    .enumerate()
                    .map(|(i, (which, state, created, stale, liveness, startup))| {
                        let name = all[which % all.len()];
                        let mut c = inst(&p, name, &format!("id{i}"), state, created);
                        if stale {
                            c.hash = "0".into();
                        }
                        c.liveness = liveness;
                        c.startup = startup;
                        if with_backoff {
                            let spec = spec_container(name);
                            backoff.next(&crash_loop_key(&p, &spec), t(created), t(created));
                        }
                        c
                    })
                    .collect();
                (p, ObservedPod { sandboxes, containers }, backoff, t(now))
            }
        }

        proptest! {
            #[test]
            fn plan_never_starts_a_running_container_or_creates_a_sandbox_beside_a_ready_one(
                (p, obs, backoff, now) in case()
            ) {
                let a = plan(&p, &obs, &backoff, now);
                let spec = p.spec.as_ref().unwrap();
                let killed = |id: &str| a.kill_pod || a.containers_to_kill.iter().any(|k| k.id == id);
                let names = a
                    .containers_to_start
                    .iter()
                    .map(|&i| spec.containers[i].name.clone())
                    .chain(a.init_containers_to_start.iter().map(|&i| spec.init_containers.as_ref().unwrap()[i].name.clone()));
                for name in names {
                    if let Some(newest) = obs.newest(&name)
                        && matches!(newest.state, ContainerState::Running { .. })
                    {
                            prop_assert!(killed(&newest.id), "{name} is running and would be started again");
                    }
                }
                if a.create_sandbox.is_some() {
                    prop_assert!(a.kill_pod, "a new sandbox is only created after killing the pod");
                }
                let sandboxes = sorted_sandboxes(&obs);
                let one_good = sandboxes.iter().filter(|s| s.ready).count() == 1
                    && sandboxes[0].ready
                    && sandboxes[0].ip.is_some();
                if one_good {
                    prop_assert_eq!(a.create_sandbox, None);
                }
                if p.metadata.deletion_timestamp.is_some() {
                    prop_assert!(a.kill_pod && a.containers_to_start.is_empty() && a.create_sandbox.is_none());
                }
                prop_assert!(a.backoff.iter().all(|b| b.until > now));
                prop_assert_eq!(a.next_check, a.backoff.iter().map(|b| b.until).min());
            }
        }
    }
}
