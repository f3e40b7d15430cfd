//! The pod status the kubelet reports, computed from the pod, what the runtime shows and what the worker
//! and prober know. A port of upstream `generateAPIPodStatus` and `convertToAPIContainerStatuses`
//! (`pkg/kubelet/kubelet_pods.go`), `getPhase`, the condition generators of `pkg/kubelet/status/generate.go`,
//! the prober's `UpdatePodStatus` (`started`/`ready`), `GetPodQOS`, and the status manager's
//! `lastTransitionTime` and `startTime` rules. The status manager sends the result as a PATCH of
//! `pods/status`; nothing here talks to the API server.
//!
//! Left to the caller (the status manager): dropping an update that would move a container out of a
//! terminal state, `TerminatePod`'s forced `Failed`, eviction overrides and rejected-pod statuses.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
    VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan::{
    ContainerState, ObservedContainer, ObservedPod, ProbeResult, RestartPolicy, is_restartable_init,
    sandbox_changed, should_container_be_restarted,
};

/// Default waiting reason of a container that has no instance yet (upstream `ContainerCreating`).
pub const CONTAINER_CREATING: &str = "ContainerCreating";
/// Default waiting reason while the pod has init containers (upstream `PodInitializing`).
pub const POD_INITIALIZING: &str = "PodInitializing";
/// Terminated reason of a container that vanished from the runtime (upstream `ContainerReasonStatusUnknown`).
pub const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";
/// Condition reason: the pod has no container statuses at all.
pub const UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
/// Condition reason: the pod succeeded.
pub const POD_COMPLETED: &str = "PodCompleted";
/// Condition reason: the pod failed.
pub const POD_FAILED: &str = "PodFailed";
/// Condition reason: a container is not ready.
pub const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
/// Condition reason: an init container has not completed.
pub const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
/// Condition reason: a readiness gate is not True.
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// Annotation naming a pod's config source (`kubernetes.io/config.source`); anything but `api` is static.
const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// The condition types the kubelet owns (upstream `PodConditionByKubelet`).
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// The last start error the worker recorded for a container (upstream reasonCache entry), e.g.
/// `CrashLoopBackOff`, `ErrImagePull`, `ImagePullBackOff`, `CreateContainerConfigError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingReason {
    /// The reason (the error's name).
    pub reason: String,
    /// The message, e.g. `back-off 10s restarting failed container=c pod=p_ns(uid)`.
    pub message: Option<String>,
}

/// What the status needs besides the pod and the runtime view.
#[derive(Clone, Debug)]
pub struct StatusContext<'a> {
    /// The node's IPs, primary first (at most one per family is used).
    pub host_ips: &'a [String],
    /// Waiting reasons the worker recorded, by container name; cleared by the worker on a good start.
    pub waiting: &'a BTreeMap<String, WaitingReason>,
    /// The status manager's cached status for the pod; `None` falls back to `pod.status`.
    pub previous: Option<&'a PodStatus>,
    /// Set on the termination path after the containers were killed: the phase becomes terminal from
    /// the exit codes (upstream `podIsTerminal`).
    pub pod_is_terminal: bool,
    /// An internal module's verdict that the pod must fail (upstream `PodSyncHandler.ShouldEvict`), e.g.
    /// `activeDeadlineSeconds`: phase `Failed` with this reason and message.
    pub eviction: Option<(&'a str, &'a str)>,
    /// Now, for `startTime` and condition transitions.
    pub now: Timestamp,
}

/// Computes the pod's status (port of `generateAPIPodStatus`).
pub fn pod_status(pod: &Pod, observed: &ObservedPod, ctx: &StatusContext<'_>) -> PodStatus {
    let default_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    let api = pod.status.clone().unwrap_or_default();
    let old = ctx.previous.cloned().unwrap_or_else(|| api.clone());
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    let has_init = !inits.is_empty();
    let mut s = PodStatus::default();

    // Pod IPs come from the newest sandbox, and only while it is ready; a pod on its way down keeps them.
    let sandbox_ip = observed
        .newest_sandbox()
        .filter(|sb| sb.ready)
        .and_then(|sb| sb.ip.clone());
    if let Some(ip) = sandbox_ip.filter(|ip| !ip.is_empty()) {
        s.pod_ip = Some(ip.clone());
        s.pod_ips = Some(vec![PodIP { ip }]);
    } else if pod.metadata.deletion_timestamp.is_some() || ctx.pod_is_terminal {
        s.pod_ip = old.pod_ip.clone();
        s.pod_ips = old.pod_ips.clone();
    }
    s.qos_class = Some(qos_class(spec).to_owned());

    let regular = convert_statuses(
        pod,
        observed,
        &old.container_statuses,
        &spec.containers,
        has_init,
        false,
        ctx,
    );
    let init = convert_statuses(
        pod,
        observed,
        &old.init_container_statuses,
        inits,
        has_init,
        true,
        ctx,
    );
    let ephemeral_specs: Vec<Container> = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| Container {
            name: e.name.clone(),
            image: e.image.clone(),
            volume_mounts: e.volume_mounts.clone(),
            ..Default::default()
        })
        .collect();
    let mut ephemeral = convert_statuses(
        pod,
        observed,
        &old.ephemeral_container_statuses,
        &ephemeral_specs,
        has_init,
        false,
        ctx,
    );
    // The prober sets started and ready for regular and init containers only: an ephemeral container is
    // never ready and has no started flag (upstream's UpdatePodStatus skips them).
    for st in &mut ephemeral {
        st.ready = false;
        st.started = None;
    }

    // Phase, never leaving a terminal phase; reason and message stay while the phase does.
    let all: Vec<&ContainerStatus> = regular.iter().chain(init.iter()).collect();
    let mut phase = get_phase(pod, spec, &all, ctx.pod_is_terminal);
    if !is_terminal(phase) {
        if let Some(p) = old.phase.as_deref().filter(|p| is_terminal(p)) {
            phase = terminal_str(p);
        } else if let Some(p) = api.phase.as_deref().filter(|p| is_terminal(p)) {
            phase = terminal_str(p);
        }
    }
    if old.phase.as_deref() == Some(phase) {
        s.reason = old
            .reason
            .clone()
            .filter(|r| !r.is_empty())
            .or_else(|| api.reason.clone());
        s.message = old
            .message
            .clone()
            .filter(|m| !m.is_empty())
            .or_else(|| api.message.clone());
    }
    if let Some((reason, message)) = ctx.eviction {
        phase = "Failed";
        s.reason = Some(reason.to_owned());
        s.message = Some(message.to_owned());
    }
    s.phase = Some(phase.to_owned());

    // Conditions: keep those the kubelet does not own, copy DisruptionTarget from the cache, then add ours.
    let mut conditions: Vec<PodCondition> = api
        .conditions
        .iter()
        .flatten()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    if let Some(dt) = old
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
    {
        match conditions.iter_mut().find(|c| c.type_ == "DisruptionTarget") {
            Some(c) => *c = dt.clone(),
            None => conditions.push(dt.clone()),
        }
    }
    let (new_sandbox_needed, _, _) = sandbox_changed(pod, observed);
    conditions.push(condition(
        "PodReadyToStartContainers",
        !new_sandbox_needed,
        None,
        None,
    ));
    let all_statuses: Vec<&ContainerStatus> = init.iter().chain(regular.iter()).collect();
    conditions.push(initialized_condition(spec, &all_statuses, phase));
    conditions.push(ready_condition(spec, &conditions, &all_statuses, phase));
    conditions.push(containers_ready_condition(spec, &all_statuses, phase));
    conditions.push(condition("PodScheduled", true, None, None));
    for c in conditions
        .iter_mut()
        .filter(|c| KUBELET_CONDITIONS.contains(&c.type_.as_str()))
    {
        let kept = old
            .conditions
            .iter()
            .flatten()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            .and_then(|o| o.last_transition_time.clone());
        c.last_transition_time = Some(kept.unwrap_or_else(|| seconds(ctx.now)));
    }
    s.conditions = Some(conditions);

    // Host IPs; host-network pods take the node's IPs as theirs.
    if let Some(primary) = ctx.host_ips.first() {
        s.host_ip = Some(primary.clone());
        s.host_ips = Some(
            ctx.host_ips
                .iter()
                .take(2)
                .map(|ip| HostIP { ip: ip.clone() })
                .collect(),
        );
        if spec.host_network == Some(true) {
            if s.pod_ip.as_deref().unwrap_or("").is_empty() {
                s.pod_ip = Some(primary.clone());
                s.pod_ips = Some(vec![PodIP { ip: primary.clone() }]);
            }
            if let (Some(second), Some(ips)) = (ctx.host_ips.get(1), s.pod_ips.as_mut())
                && ips.len() == 1
                && ips[0].ip != *second
            {
                ips.push(PodIP { ip: second.clone() });
            }
        }
    }

    // startTime is set once, on the first status, and never changes.
    s.start_time = old
        .start_time
        .clone()
        .or_else(|| api.start_time.clone())
        .or_else(|| Some(seconds(ctx.now)));
    s.nominated_node_name = api.nominated_node_name.clone();
    s.container_statuses = Some(regular);
    s.init_container_statuses = (!init.is_empty()).then_some(init);
    s.ephemeral_container_statuses = (!ephemeral.is_empty()).then_some(ephemeral);
    s
}

fn is_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

fn terminal_str(phase: &str) -> &'static str {
    if phase == "Succeeded" {
        "Succeeded"
    } else {
        "Failed"
    }
}

/// Times in status are whole seconds (upstream `normalizeStatus` truncates to RFC 3339 seconds).
fn seconds(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..Default::default()
    }
}

/// Go's `fmt.Sprintf("%s", []string{...})`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn find<'a>(statuses: &[&'a ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().copied().find(|s| s.name == name)
}

fn state(s: &ContainerStatus) -> (bool, Option<&ContainerStateTerminated>, bool) {
    let st = s.state.as_ref();
    (
        st.is_some_and(|x| x.running.is_some()),
        st.and_then(|x| x.terminated.as_ref()),
        st.is_some_and(|x| x.waiting.is_some()),
    )
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|x| x.terminated.as_ref())
}

/// Upstream `HasAnyRegularContainerStarted`: a regular container is running or has terminated.
fn any_regular_container_started(spec: &PodSpec, statuses: &[&ContainerStatus]) -> bool {
    spec.containers.iter().any(|c| {
        find(statuses, &c.name).is_some_and(|s| {
            let (running, terminated, _) = state(s);
            running || terminated.is_some()
        })
    })
}

/// Port of `getPhase`.
fn get_phase(pod: &Pod, spec: &PodSpec, info: &[&ContainerStatus], pod_is_terminal: bool) -> &'static str {
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    let (mut pending_init, mut failed_init) = (0, 0);
    for c in inits.iter().filter(|c| !is_restartable_init(c)) {
        let Some(s) = find(info, &c.name) else {
            pending_init += 1;
            continue;
        };
        match state(s) {
            (true, _, _) => pending_init += 1,
            (_, Some(t), _) => failed_init += usize::from(t.exit_code != 0),
            (_, _, true) => match last_terminated(s) {
                Some(t) => failed_init += usize::from(t.exit_code != 0),
                None => pending_init += 1,
            },
            _ => pending_init += 1,
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in inits.iter().filter(|c| is_restartable_init(c)) {
        let Some(s) = find(info, &c.name) else {
            unknown += 1;
            continue;
        };
        match state(s) {
            (true, _, _) => {
                if s.started != Some(true) {
                    pending_init += 1;
                }
                running += 1;
            }
            (_, Some(_), _) => {}
            (_, _, true) => {
                if last_terminated(s).is_none() {
                    pending_init += 1;
                    waiting += 1;
                }
            }
            _ => {
                pending_init += 1;
                unknown += 1;
            }
        }
    }
    for c in &spec.containers {
        let Some(s) = find(info, &c.name) else {
            unknown += 1;
            continue;
        };
        match state(s) {
            (true, _, _) => running += 1,
            (_, Some(t), _) => {
                stopped += 1;
                succeeded += usize::from(t.exit_code == 0);
            }
            (_, _, true) => {
                if last_terminated(s).is_some() {
                    stopped += 1;
                } else {
                    waiting += 1;
                }
            }
            _ => unknown += 1,
        }
    }
    let policy = RestartPolicy::of(spec);
    if failed_init > 0 && policy == RestartPolicy::Never {
        return "Failed";
    }
    if (pending_init > 0 && !any_regular_container_started(spec, info)) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if pod_is_terminal && !is_static(pod) {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        return match policy {
            RestartPolicy::Always => "Running",
            _ if stopped == succeeded => "Succeeded",
            RestartPolicy::Never => "Failed",
            RestartPolicy::OnFailure => "Running",
        };
    }
    "Pending"
}

fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| source != "api")
}

/// Port of `GenerateContainersReadyCondition`.
fn containers_ready_condition(spec: &PodSpec, statuses: &[&ContainerStatus], phase: &str) -> PodCondition {
    const TYPE: &str = "ContainersReady";
    if statuses.is_empty() {
        return condition(TYPE, false, Some(UNKNOWN_CONTAINER_STATUSES), None);
    }
    let (mut unknown, mut unready) = (Vec::new(), Vec::new());
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_restartable_init(c));
    for c in sidecars.chain(spec.containers.iter()) {
        match find(statuses, &c.name) {
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
            None => unknown.push(c.name.as_str()),
        }
    }
    if (phase == "Succeeded" && unknown.is_empty()) || phase == "Failed" {
        let reason = if phase == "Failed" {
            POD_FAILED
        } else {
            POD_COMPLETED
        };
        return condition(TYPE, false, Some(reason), None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !unready.is_empty() {
        messages.push(format!("containers with unready status: {}", go_list(&unready)));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(TYPE, false, Some(CONTAINERS_NOT_READY), Some(messages.join(", ")))
    }
}

/// Port of `GeneratePodReadyCondition`.
fn ready_condition(
    spec: &PodSpec,
    conditions: &[PodCondition],
    statuses: &[&ContainerStatus],
    phase: &str,
) -> PodCondition {
    let containers_ready = containers_ready_condition(spec, statuses, phase);
    if containers_ready.status != "True" {
        return PodCondition {
            type_: "Ready".into(),
            ..containers_ready
        };
    }
    let mut messages = Vec::new();
    for gate in spec.readiness_gates.iter().flatten() {
        match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gate.condition_type
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some(READINESS_GATES_NOT_READY),
            Some(messages.join(", ")),
        )
    }
}

/// Port of `GeneratePodInitializedCondition`.
fn initialized_condition(spec: &PodSpec, statuses: &[&ContainerStatus], phase: &str) -> PodCondition {
    const TYPE: &str = "Initialized";
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    if statuses.is_empty() && !inits.is_empty() {
        return condition(TYPE, false, Some(UNKNOWN_CONTAINER_STATUSES), None);
    }
    let (mut unknown, mut incomplete) = (Vec::new(), Vec::new());
    for c in inits {
        let Some(s) = find(statuses, &c.name) else {
            unknown.push(c.name.as_str());
            continue;
        };
        let done = if is_restartable_init(c) {
            s.started == Some(true)
        } else {
            s.ready
        };
        if !done {
            incomplete.push(c.name.as_str());
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return condition(TYPE, true, Some(POD_COMPLETED), None);
    }
    if any_regular_container_started(spec, statuses) {
        return condition(TYPE, true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        condition(TYPE, true, None, None)
    } else {
        condition(
            TYPE,
            false,
            Some(CONTAINERS_NOT_INITIALIZED),
            Some(messages.join(", ")),
        )
    }
}

/// Port of `convertToAPIContainerStatuses` plus the prober's `UpdatePodStatus` for one list of containers.
fn convert_statuses(
    pod: &Pod,
    observed: &ObservedPod,
    previous: &Option<Vec<ContainerStatus>>,
    containers: &[Container],
    has_init: bool,
    is_init: bool,
    ctx: &StatusContext<'_>,
) -> Vec<ContainerStatus> {
    let old: BTreeMap<&str, &ContainerStatus> =
        previous.iter().flatten().map(|s| (s.name.as_str(), s)).collect();
    let default_reason = if has_init {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };
    let default_state = || ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(default_reason.to_owned()),
            message: None,
        }),
        ..Default::default()
    };

    // Start from the default waiting state, carrying restart count and last state over from before; a
    // container whose old status was terminated keeps it whole.
    let mut statuses: BTreeMap<&str, ContainerStatus> = BTreeMap::new();
    for c in containers {
        let mut st = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(default_state()),
            volume_mounts: volume_mount_statuses(c),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if o.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                st = (*o).clone();
            } else {
                st.restart_count = o.restart_count;
                st.last_state = o.last_state.clone();
            }
        }
        statuses.insert(c.name.as_str(), st);
    }

    // A container that was running and vanished from the runtime did terminate, even if nobody saw how.
    for c in containers {
        if observed.containers.iter().any(|x| x.name == c.name) {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else {
            continue;
        };
        let o_state = o.state.as_ref();
        if o_state.is_some_and(|s| s.terminated.is_some()) || o_state.is_none_or(|s| s.running.is_none()) {
            continue;
        }
        let Some(st) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        let is_default = st
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        if !is_default || st.last_state.as_ref().is_some_and(|s| s.terminated.is_some()) {
            continue;
        }
        st.last_state = Some(ApiState {
            terminated: Some(ContainerStateTerminated {
                reason: Some(CONTAINER_STATUS_UNKNOWN.to_owned()),
                message: Some(
                    "The container could not be located when the pod was deleted.  The container used to be Running"
                        .to_owned(),
                ),
                exit_code: 137,
                ..Default::default()
            }),
            ..Default::default()
        });
        if pod.metadata.deletion_timestamp.is_none() {
            st.restart_count += 1;
        }
    }

    // The newest instance gives the state, the one before it the last state.
    for c in containers {
        let instances = observed.instances(&c.name);
        let old_status = old.get(c.name.as_str()).copied();
        if let Some(newest) = instances.first() {
            let mut st = convert_one(newest, old_status);
            st.volume_mounts = statuses
                .get(c.name.as_str())
                .and_then(|s| s.volume_mounts.clone());
            if let Some(second) = instances.get(1) {
                st.last_state = convert_one(second, old_status).state;
            }
            statuses.insert(c.name.as_str(), st);
        }
    }

    // A container that will be (re)started shows the last start error as its waiting reason.
    for c in containers {
        let newest = observed.newest(&c.name);
        if is_init && newest.is_some_and(|n| matches!(n.state, ContainerState::Exited { exit_code: 0, .. })) {
            continue;
        }
        if !should_container_be_restarted(c, pod, observed) {
            continue;
        }
        let Some(w) = ctx.waiting.get(&c.name) else {
            continue;
        };
        let Some(st) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        if st.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
            st.last_state = st.state.clone();
        }
        st.state = Some(ApiState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(w.reason.clone()),
                message: w.message.clone(),
            }),
            ..Default::default()
        });
    }

    // started / ready (the prober's UpdatePodStatus).
    for c in containers {
        let Some(st) = statuses.get_mut(c.name.as_str()) else {
            continue;
        };
        let newest = observed.newest(&c.name);
        apply_probe_results(st, c, newest, is_init && !is_restartable_init(c));
    }

    if is_init {
        containers
            .iter()
            .filter_map(|c| statuses.remove(c.name.as_str()))
            .collect()
    } else {
        // BTreeMap order: sorted by name, as upstream sorts containerStatuses.
        statuses.into_values().collect()
    }
}

fn convert_one(c: &ObservedContainer, old: Option<&ContainerStatus>) -> ContainerStatus {
    let container_id = format!("docker://{}", c.id);
    let mut st = ContainerStatus {
        name: c.name.clone(),
        restart_count: i32::try_from(c.restart_count).unwrap_or(i32::MAX),
        image: c.image.clone(),
        image_id: c.image_ref.clone(),
        container_id: Some(container_id.clone()),
        ..Default::default()
    };
    let state = match &c.state {
        ContainerState::Running { started_at } => ApiState {
            running: Some(ContainerStateRunning {
                started_at: Some(seconds(*started_at)),
            }),
            ..Default::default()
        },
        ContainerState::Exited {
            exit_code,
            message,
            started_at,
            finished_at,
            ..
        } => ApiState {
            terminated: Some(ContainerStateTerminated {
                exit_code: *exit_code,
                reason: c.state.exited_reason().map(str::to_owned),
                message: message.clone().filter(|m| !m.is_empty()),
                started_at: Some(seconds(*started_at)),
                finished_at: Some(seconds(*finished_at)),
                container_id: Some(container_id),
                signal: None,
            }),
            ..Default::default()
        },
        ContainerState::Unknown
            if old.is_some_and(|o| o.state.as_ref().is_some_and(|s| s.running.is_some())) =>
        {
            st.restart_count = old.map_or(0, |o| o.restart_count + 1);
            ApiState {
                terminated: Some(ContainerStateTerminated {
                    reason: Some(CONTAINER_STATUS_UNKNOWN.to_owned()),
                    message: Some(
                        "The container could not be located when the pod was terminated".to_owned(),
                    ),
                    exit_code: 137,
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        // Created but not started, or unknown: "waiting to be running", with no reason.
        ContainerState::Created | ContainerState::Unknown => ApiState {
            waiting: Some(ContainerStateWaiting::default()),
            ..Default::default()
        },
    };
    st.state = Some(state);
    st
}

/// The prober's `UpdatePodStatus`: `started` is true for a running container whose startup probe passed
/// (or that has none); `ready` needs `started` and a passed readiness probe (or none). A regular init
/// container is ready once it exited 0.
fn apply_probe_results(
    st: &mut ContainerStatus,
    spec: &Container,
    newest: Option<&ObservedContainer>,
    regular_init: bool,
) {
    let (running, terminated, _) = state(st);
    let exited_zero = terminated.is_some_and(|t| t.exit_code == 0);
    // Probe results belong to the instance the status shows, which is the newest when it runs.
    let instance = newest.filter(|_| running);
    let started = running
        && match instance.and_then(|i| i.startup) {
            Some(result) => result == ProbeResult::Success,
            None => spec.startup_probe.is_none(),
        };
    st.started = Some(started);
    st.ready = if regular_init {
        exited_zero
    } else {
        started
            && match instance.and_then(|i| i.readiness) {
                Some(result) => result == ProbeResult::Success,
                None => spec.readiness_probe.is_none(),
            }
    };
}

/// `status.volumeMounts` (RecursiveReadOnlyMounts, beta and on since 1.31). Docker cannot make read-only
/// mounts recursively read-only, so every read-only mount reports `Disabled`.
fn volume_mount_statuses(c: &Container) -> Option<Vec<VolumeMountStatus>> {
    let mounts = c.volume_mounts.as_ref().filter(|m| !m.is_empty())?;
    Some(
        mounts
            .iter()
            .map(|m| {
                let read_only = m.read_only.unwrap_or(false);
                VolumeMountStatus {
                    name: m.name.clone(),
                    mount_path: m.mount_path.clone(),
                    read_only: read_only.then_some(true),
                    recursive_read_only: read_only.then(|| "Disabled".to_owned()),
                }
            })
            .collect(),
    )
}

/// The pod's QoS class (upstream `GetPodQOS`, `pkg/apis/core/v1/helper/qos`), from CPU and memory of
/// all containers and init containers: `BestEffort` with no requests or limits, `Guaranteed` when both
/// are limited everywhere and requests equal limits, `Burstable` otherwise. A missing request counts as
/// equal to its limit (API defaulting does that before the kubelet sees the pod).
pub fn qos_class(spec: &PodSpec) -> &'static str {
    const RESOURCES: [&str; 2] = ["cpu", "memory"];
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in all {
        let res = c.resources.as_ref();
        let get =
            |map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
             name: &str| {
                map.and_then(|m| m.get(name))
                    .and_then(|q| parse_quantity(&q.0))
                    .filter(|v| *v > 0)
            };
        let mut limits_found = 0;
        for name in RESOURCES {
            let limit = get(res.and_then(|r| r.limits.as_ref()), name);
            let request = get(res.and_then(|r| r.requests.as_ref()), name).or(limit);
            if let Some(v) = request {
                *requests.entry(name).or_default() += v;
            }
            if let Some(v) = limit {
                *limits.entry(name).or_default() += v;
                limits_found += 1;
            }
        }
        if limits_found < RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.len() == limits.len() && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// A resource quantity in nano-units (`1` → 1e9, `100m` → 1e8, `1Ki` → 1024e9), enough to compare
/// requests with limits. `None` when it does not parse.
fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let (negative, number) = match number.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut nanos: i128 = if int.is_empty() {
        0
    } else {
        int.parse::<i128>().ok()? * 1_000_000_000
    };
    let mut scale = 100_000_000i128;
    for d in frac.chars().take(9) {
        nanos += i128::from(d.to_digit(10)?) * scale;
        scale /= 10;
    }
    let (mul, div): (i128, i128) = match suffix {
        "" => (1, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        exp => {
            let e: u32 = exp.strip_prefix(['e', 'E'])?.parse().ok()?;
            (10i128.checked_pow(e)?, 1)
        }
    };
    let v = nanos.checked_mul(mul)? / div;
    Some(if negative { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::plan::tests::{exited, inst, pod, running, sandbox, t};
    use crate::lifecycle::plan::{ObservedSandbox, ProbeResult};
    use k8s_openapi::api::core::v1::{Probe, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const HOST: &[&str] = &["192.168.1.10"];

    fn status_with(
        pod: &Pod,
        obs: &ObservedPod,
        waiting: &BTreeMap<String, WaitingReason>,
        previous: Option<&PodStatus>,
    ) -> PodStatus {
        let host: Vec<String> = HOST.iter().map(|s| s.to_string()).collect();
        let ctx = StatusContext {
            host_ips: &host,
            waiting,
            previous,
            pod_is_terminal: false,
            eviction: None,
            now: t(100),
        };
        pod_status(pod, obs, &ctx)
    }

    fn status(pod: &Pod, obs: &ObservedPod) -> PodStatus {
        status_with(pod, obs, &BTreeMap::new(), None)
    }

    fn up(containers: Vec<ObservedContainer>) -> ObservedPod {
        ObservedPod {
            sandboxes: vec![sandbox("s1", 0, true, 0)],
            containers,
        }
    }

    fn cond<'a>(s: &'a PodStatus, type_: &str) -> &'a PodCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    fn cstatus<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
        s.container_statuses
            .iter()
            .chain(s.init_container_statuses.iter())
            .flatten()
            .find(|c| c.name == name)
            .unwrap()
    }

    #[test]
    fn phase_is_succeeded_when_all_containers_exited_zero_with_restart_never() {
        let cases = [
            ("Never", [0, 0], "Succeeded"),
            ("Never", [0, 1], "Failed"),
            ("OnFailure", [0, 0], "Succeeded"),
            ("OnFailure", [0, 1], "Running"),
            ("Always", [0, 0], "Running"),
            ("Always", [1, 1], "Running"),
        ];
        for (policy, codes, phase) in cases {
            let p = pod(policy, &[], &["a", "b"]);
            let obs = up(vec![
                inst(&p, "a", "c1", exited(codes[0], 1, 2), 1),
                inst(&p, "b", "c2", exited(codes[1], 1, 2), 1),
            ]);
            assert_eq!(
                status(&p, &obs).phase.as_deref(),
                Some(phase),
                "{policy} {codes:?}"
            );
        }
    }

    #[test]
    fn phase_follows_upstream_get_phase() {
        let p = pod("Never", &["i0"], &["a"]);
        let cases = [
            ("nothing yet", vec![], "Pending"),
            (
                "init running",
                vec![inst(&p, "i0", "c0", running(1), 1)],
                "Pending",
            ),
            (
                "init failed under Never",
                vec![inst(&p, "i0", "c0", exited(2, 1, 2), 1)],
                "Failed",
            ),
            (
                "app running",
                vec![
                    inst(&p, "i0", "c0", exited(0, 1, 2), 1),
                    inst(&p, "a", "c1", running(3), 3),
                ],
                "Running",
            ),
        ];
        for (what, containers, phase) in cases {
            assert_eq!(
                status(&p, &up(containers)).phase.as_deref(),
                Some(phase),
                "{what}"
            );
        }
    }

    #[test]
    fn terminal_phase_never_goes_back() {
        let p = pod("Always", &[], &["a"]);
        let previous = PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        };
        let s = status_with(
            &p,
            &up(vec![inst(&p, "a", "c1", running(1), 1)]),
            &BTreeMap::new(),
            Some(&previous),
        );
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    }

    #[test]
    fn deleted_pod_becomes_terminal_from_exit_codes() {
        let p = pod("Always", &[], &["a"]);
        let host = vec!["192.168.1.10".to_owned()];
        let waiting = BTreeMap::new();
        for (code, phase) in [(0, "Succeeded"), (143, "Failed")] {
            let ctx = StatusContext {
                host_ips: &host,
                waiting: &waiting,
                previous: None,
                pod_is_terminal: true,
                eviction: None,
                now: t(100),
            };
            let s = pod_status(&p, &up(vec![inst(&p, "a", "c1", exited(code, 1, 2), 1)]), &ctx);
            assert_eq!(s.phase.as_deref(), Some(phase));
            assert_eq!(cond(&s, "Ready").status, "False");
        }
    }

    #[test]
    fn running_pod_without_probes_has_every_condition_true() {
        let p = pod("Always", &[], &["a"]);
        let s = status(&p, &up(vec![inst(&p, "a", "c1", running(1), 1)]));
        let types: Vec<(&str, &str)> = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("PodReadyToStartContainers", "True"),
                ("Initialized", "True"),
                ("Ready", "True"),
                ("ContainersReady", "True"),
                ("PodScheduled", "True"),
            ]
        );
        let a = cstatus(&s, "a");
        assert!(a.ready);
        assert_eq!(a.started, Some(true));
    }

    #[test]
    fn ready_condition_false_lists_unready_containers() {
        let mut p = pod("Always", &[], &["b", "a", "c"]);
        for c in &mut p.spec.as_mut().unwrap().containers {
            if c.name != "c" {
                c.readiness_probe = Some(Probe::default());
            }
        }
        let mut a = inst(&p, "a", "c1", running(1), 1);
        a.readiness = Some(ProbeResult::Failure);
        let obs = up(vec![
            a,
            inst(&p, "b", "c2", running(1), 1),
            inst(&p, "c", "c3", running(1), 1),
        ]);
        let s = status(&p, &obs);
        for type_ in ["Ready", "ContainersReady"] {
            let c = cond(&s, type_);
            assert_eq!(c.status, "False", "{type_}");
            assert_eq!(c.reason.as_deref(), Some(CONTAINERS_NOT_READY), "{type_}");
            // Spec order, as upstream walks spec.containers.
            assert_eq!(
                c.message.as_deref(),
                Some("containers with unready status: [b a]"),
                "{type_}"
            );
        }
        assert!(cstatus(&s, "c").ready);
        assert_eq!(s.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn startup_probe_gates_started_and_ready() {
        let mut p = pod("Always", &[], &["a"]);
        p.spec.as_mut().unwrap().containers[0].startup_probe = Some(Probe::default());
        let cases = [
            (None, false),
            (Some(ProbeResult::Unknown), false),
            (Some(ProbeResult::Success), true),
        ];
        for (startup, started) in cases {
            let mut a = inst(&p, "a", "c1", running(1), 1);
            a.startup = startup;
            let s = status(&p, &up(vec![a]));
            assert_eq!(cstatus(&s, "a").started, Some(started), "{startup:?}");
            assert_eq!(cstatus(&s, "a").ready, started, "{startup:?}");
        }
    }

    #[test]
    fn init_in_progress_is_not_initialized_and_apps_wait_pod_initializing() {
        let p = pod("Always", &["i0", "i1"], &["web"]);
        let s = status(
            &p,
            &up(vec![
                inst(&p, "i0", "c0", exited(0, 1, 2), 1),
                inst(&p, "i1", "c1", running(3), 3),
            ]),
        );
        let init = cond(&s, "Initialized");
        assert_eq!(init.status, "False");
        assert_eq!(init.reason.as_deref(), Some(CONTAINERS_NOT_INITIALIZED));
        assert_eq!(
            init.message.as_deref(),
            Some("containers with incomplete status: [i1]")
        );
        let web = cstatus(&s, "web");
        assert_eq!(
            web.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some(POD_INITIALIZING)
        );
        assert!(cstatus(&s, "i0").ready, "a completed init container is ready");
        let names: Vec<&str> = s
            .init_container_statuses
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["i0", "i1"]);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn container_statuses_carry_ids_restart_count_and_last_state_sorted_by_name() {
        let p = pod("Always", &[], &["zeta", "alpha"]);
        let mut old = inst(&p, "alpha", "old1", exited(137, 1, 5), 1);
        old.restart_count = 1;
        let mut new = inst(&p, "alpha", "new1", running(6), 6);
        new.restart_count = 2;
        let obs = up(vec![old, new, inst(&p, "zeta", "z1", running(1), 1)]);
        let s = status(&p, &obs);
        let names: Vec<&str> = s
            .container_statuses
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["alpha", "zeta"]);
        let a = cstatus(&s, "alpha");
        assert_eq!(a.container_id.as_deref(), Some("docker://new1"));
        assert_eq!(a.restart_count, 2);
        assert_eq!(a.image_id, "docker-pullable://img/alpha@sha256:abc");
        let last = a.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((last.exit_code, last.reason.as_deref()), (137, Some("Error")));
        assert_eq!(last.container_id.as_deref(), Some("docker://old1"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.88.0.5"));
        assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
        assert_eq!(s.start_time, Some(Time(t(100))));
    }

    #[test]
    fn terminated_reasons_follow_the_runtime() {
        let p = pod("Never", &[], &["a"]);
        let oom = ContainerState::Exited {
            exit_code: 137,
            reason: None,
            message: None,
            started_at: t(1),
            finished_at: t(2),
            oom_killed: true,
        };
        let cases = [
            (exited(0, 1, 2), "Completed"),
            (exited(3, 1, 2), "Error"),
            (oom, "OOMKilled"),
        ];
        for (state, reason) in cases {
            let s = status(&p, &up(vec![inst(&p, "a", "c1", state, 1)]));
            let term = cstatus(&s, "a")
                .state
                .as_ref()
                .unwrap()
                .terminated
                .clone()
                .unwrap();
            assert_eq!(term.reason.as_deref(), Some(reason));
        }
    }

    #[test]
    fn recorded_waiting_reason_shows_for_a_container_to_be_restarted() {
        let p = pod("Always", &[], &["a"]);
        let waiting = BTreeMap::from([(
            "a".to_owned(),
            WaitingReason {
                reason: "CrashLoopBackOff".into(),
                message: Some("back-off 10s restarting failed container=a pod=p_default(u1)".into()),
            },
        )]);
        let s = status_with(
            &p,
            &up(vec![inst(&p, "a", "c1", exited(1, 1, 2), 1)]),
            &waiting,
            None,
        );
        let a = cstatus(&s, "a");
        let w = a.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(
            a.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
        assert_eq!(
            s.phase.as_deref(),
            Some("Running"),
            "waiting after a termination counts as stopped"
        );

        // A never-started container shows an image error instead of ContainerCreating.
        let waiting = BTreeMap::from([(
            "a".to_owned(),
            WaitingReason {
                reason: "ErrImagePull".into(),
                message: None,
            },
        )]);
        let s = status_with(&p, &up(vec![]), &waiting, None);
        let w = cstatus(&s, "a").state.clone().unwrap().waiting.unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
        assert_eq!(s.phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn last_transition_time_is_kept_while_the_condition_status_holds() {
        let p = pod("Always", &[], &["a"]);
        let first = status(&p, &up(vec![inst(&p, "a", "c1", running(1), 1)]));
        let host = vec!["192.168.1.10".to_owned()];
        let waiting = BTreeMap::new();
        let mut a = inst(&p, "a", "c1", running(1), 1);
        a.readiness = Some(ProbeResult::Failure);
        let mut p2 = p.clone();
        p2.spec.as_mut().unwrap().containers[0].readiness_probe = Some(Probe::default());
        let ctx = StatusContext {
            host_ips: &host,
            waiting: &waiting,
            previous: Some(&first),
            pod_is_terminal: false,
            eviction: None,
            now: t(500),
        };
        let second = pod_status(&p2, &up(vec![a]), &ctx);
        assert_eq!(
            cond(&second, "Initialized").last_transition_time,
            Some(Time(t(100)))
        );
        assert_eq!(cond(&second, "Ready").last_transition_time, Some(Time(t(500))));
        assert_eq!(second.start_time, Some(Time(t(100))), "startTime never changes");
    }

    #[test]
    fn pod_ip_only_from_a_ready_sandbox_and_host_network_pods_use_the_node_ip() {
        let p = pod("Always", &[], &["a"]);
        let stopped = ObservedPod {
            sandboxes: vec![sandbox("s1", 0, false, 0)],
            containers: vec![],
        };
        assert_eq!(status(&p, &stopped).pod_ip, None);
        let mut hp = p.clone();
        hp.spec.as_mut().unwrap().host_network = Some(true);
        let host_sandbox = ObservedSandbox {
            ip: None,
            host_network: true,
            ..sandbox("s1", 0, true, 0)
        };
        let s = status(
            &hp,
            &ObservedPod {
                sandboxes: vec![host_sandbox],
                containers: vec![],
            },
        );
        assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.10"));
        assert_eq!(cond(&s, "PodReadyToStartContainers").status, "True");
    }

    #[test]
    fn vanished_running_container_is_recorded_as_terminated_unknown() {
        let p = pod("Always", &[], &["a"]);
        let before = status(&p, &up(vec![inst(&p, "a", "c1", running(1), 1)]));
        let s = status_with(&p, &up(vec![]), &BTreeMap::new(), Some(&before));
        let a = cstatus(&s, "a");
        let last = a.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (last.reason.as_deref(), last.exit_code),
            (Some(CONTAINER_STATUS_UNKNOWN), 137)
        );
        assert_eq!(a.restart_count, 1);
    }

    #[test]
    fn qos_class_from_cpu_and_memory() {
        fn res(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Option<ResourceRequirements> {
            let map = |v: &[(&str, &str)]| {
                (!v.is_empty()).then(|| {
                    v.iter()
                        .map(|(k, q)| (k.to_string(), Quantity(q.to_string())))
                        .collect()
                })
            };
            Some(ResourceRequirements {
                requests: map(requests),
                limits: map(limits),
                ..Default::default()
            })
        }
        let cases = [
            ("nothing", None, "BestEffort"),
            ("requests only", res(&[("cpu", "100m")], &[]), "Burstable"),
            (
                "equal",
                res(
                    &[("cpu", "1"), ("memory", "1Gi")],
                    &[("cpu", "1000m"), ("memory", "1024Mi")],
                ),
                "Guaranteed",
            ),
            (
                "limits only (requests default to them)",
                res(&[], &[("cpu", "1"), ("memory", "1Gi")]),
                "Guaranteed",
            ),
            ("cpu limit only", res(&[], &[("cpu", "1")]), "Burstable"),
            (
                "request below limit",
                res(
                    &[("cpu", "500m"), ("memory", "1Gi")],
                    &[("cpu", "1"), ("memory", "1Gi")],
                ),
                "Burstable",
            ),
            (
                "other resources ignored",
                res(&[("nvidia.com/gpu", "1")], &[("nvidia.com/gpu", "1")]),
                "BestEffort",
            ),
        ];
        for (what, resources, class) in cases {
            let mut p = pod("Always", &[], &["a"]);
            p.spec.as_mut().unwrap().containers[0].resources = resources;
            assert_eq!(qos_class(p.spec.as_ref().unwrap()), class, "{what}");
        }
    }

    #[test]
    fn quantities_parse_to_comparable_values() {
        let cases = [
            ("1", 1_000_000_000),
            ("100m", 100_000_000),
            ("1.5", 1_500_000_000),
            ("1Ki", 1024 * 1_000_000_000),
            ("1e3", 1_000_000_000_000),
            ("2k", 2_000_000_000_000),
        ];
        for (q, want) in cases {
            assert_eq!(parse_quantity(q), Some(want), "{q}");
        }
        assert_eq!(parse_quantity("abc"), None);
    }
}
