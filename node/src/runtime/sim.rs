//! [`SimRuntime`]: a simulated [`ContainerRuntime`] for clusters of many pods without Docker
//! (`kubeling up --runtime sim`). The pod workers, the status manager and the prober above it are the real
//! ones; only the containers are imaginary. It is built for scale, not for tests: no call is recorded, a
//! container costs a few hundred bytes, every call is O(1) in the number of pods (a pod's containers are
//! indexed by its UID), and the one lock is never held across an await.
//!
//! A container's life is computed from timestamps, so no task or timer runs per container:
//!
//! ```text
//! create_container ──► Created ──start()──► (start-delay) ──► Running ──(exit-after)──► Exited(exit-code)
//!                                                                └──stop_container──► Exited(128+signal)
//! ```
//!
//! Timings and outcomes are set per pod by annotations (in the spirit of kwok's stages). Each value is
//! either one value for every container, or `container=value` entries, comma-separated, where a bare entry
//! is the default of the others: `exit-code: "app=1"`, `start-delay: "2s,sidecar=0s"`.
//!
//! | annotation | value | default |
//! |---|---|---|
//! | `sim.kubeling.dev/start-delay` | duration the container takes to start | `0s` |
//! | `sim.kubeling.dev/exit-after` | duration the container runs, or `never` | `never`; `0s` for init containers and Job pods' containers (kwok's `pod-complete`), and when `exit-code` is set |
//! | `sim.kubeling.dev/exit-code` | exit code of that exit | `0` |
//! | `sim.kubeling.dev/readiness`, `.../liveness`, `.../startup` | `pass` or `fail`: what the container's probe of that kind answers | `pass` |
//! | `sim.kubeling.dev/ready-after` | duration: the readiness probe fails until the container has run this long | `0s` |
//!
//! Durations are Go's (`500ms`, `2s`, `1m30s`). A bad value makes the container's creation fail with a
//! message naming the annotation (`CreateContainerError`). A Job's pod is one with the Job controller's
//! `batch.kubernetes.io/job-name` (or legacy `job-name`) label.
//!
//! Images are always present; logs are a few lines naming the container; exec succeeds with no output (so
//! exec probes pass: the simulated prober answers every probe from the annotations); sandboxes get pod IPs
//! from the node's own range ([`PodCidr`]), which nothing routes to. A stopped container exits with
//! `128 + signal` (143 for the default SIGTERM) at once, whatever the grace period.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use jiff::{SignedDuration, Timestamp};
use tokio::io::AsyncWrite;

use super::naming;
use super::{
    ContainerConfig, ContainerInfo, ContainerKind, ContainerRuntime, ContainerState, ContainerStatus,
    ExecConfig, ExecControl, ExecSession, ImageInfo, ListFilter, LogOptions, LogStream, NextChange, Owner,
    PullPolicy, Result, RuntimeError, SandboxConfig,
};

/// `nodeInfo.containerRuntimeVersion` of a simulated node.
pub const RUNTIME_VERSION: &str = "sim://0.1";
/// The prefix of every annotation the simulated runtime reads.
pub const ANNOTATION_PREFIX: &str = "sim.kubeling.dev/";
/// How long `start` takes.
pub const START_DELAY: &str = "sim.kubeling.dev/start-delay";
/// How long a container runs before it exits (`never`: until stopped).
pub const EXIT_AFTER: &str = "sim.kubeling.dev/exit-after";
/// The exit code of that exit.
pub const EXIT_CODE: &str = "sim.kubeling.dev/exit-code";
/// What readiness probes answer.
pub const READINESS: &str = "sim.kubeling.dev/readiness";
/// What liveness probes answer.
pub const LIVENESS: &str = "sim.kubeling.dev/liveness";
/// What startup probes answer.
pub const STARTUP: &str = "sim.kubeling.dev/startup";
/// The readiness probe fails until the container has run this long.
pub const READY_AFTER: &str = "sim.kubeling.dev/ready-after";
/// Every annotation the simulated runtime reads, for validation.
pub const ANNOTATIONS: [&str; 7] = [
    START_DELAY,
    EXIT_AFTER,
    EXIT_CODE,
    READINESS,
    LIVENESS,
    STARTUP,
    READY_AFTER,
];

/// The Job controller's labels on its pods (current and legacy).
const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];

// ---------------------------------------------------------------------------------------------------------
// Annotation parsing: pure functions.

/// The value of a per-container annotation for `container`: its `container=value` entry, else the bare
/// entry, else none. Entries are comma-separated; spaces around them are ignored.
pub fn per_container<'a>(value: &'a str, container: &str) -> Option<&'a str> {
    let mut default = None;
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once('=') {
            Some((name, v)) if name.trim() == container => return Some(v.trim()),
            Some(_) => {}
            None => default = Some(entry),
        }
    }
    default
}

/// A Go duration (`500ms`, `2s`, `1m30s`, `1h`; `0` alone is zero): the `api` crate's parser.
pub use api::duration::parse_go as parse_duration;

/// What one container does, from its pod's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Behaviour {
    /// How long `start` takes.
    pub start_delay: Duration,
    /// How long it runs before exiting; `None`: until stopped.
    pub exit_after: Option<Duration>,
    /// The exit code of that exit.
    pub exit_code: i32,
}

/// A probe's simulated answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// The probe passes.
    Pass,
    /// The probe fails.
    Fail,
}

fn annotation_error(key: &str, value: &str, message: impl std::fmt::Display) -> String {
    format!("annotation {key}={value:?}: {message}")
}

/// The annotation's value for `container`, if the pod sets one.
fn lookup<'a>(annotations: &'a BTreeMap<String, String>, key: &str, container: &str) -> Option<&'a str> {
    annotations.get(key).and_then(|v| per_container(v, container))
}

fn duration_of(
    annotations: &BTreeMap<String, String>,
    key: &str,
    container: &str,
) -> Result<Option<Duration>, String> {
    match lookup(annotations, key, container) {
        None => Ok(None),
        Some(v) => parse_duration(v)
            .map(Some)
            .map_err(|e| annotation_error(key, &annotations[key], e)),
    }
}

/// Whether the pod's labels are those the Job controller gives its pods.
pub fn is_job_pod(labels: &BTreeMap<String, String>) -> bool {
    JOB_NAME_LABELS.iter().any(|l| labels.contains_key(*l))
}

/// The behaviour of `container` (an `init` container or not) of a pod with these annotations and labels.
pub fn behaviour(
    annotations: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    container: &str,
    init: bool,
) -> Result<Behaviour, String> {
    let start_delay = duration_of(annotations, START_DELAY, container)?.unwrap_or_default();
    let exit_code = match lookup(annotations, EXIT_CODE, container) {
        None => None,
        Some(v) => Some(
            v.parse::<i32>()
                .ok()
                .filter(|c| (0..=255).contains(c))
                .ok_or_else(|| {
                    annotation_error(EXIT_CODE, &annotations[EXIT_CODE], "not an exit code (0-255)")
                })?,
        ),
    };
    let exit_after = match lookup(annotations, EXIT_AFTER, container) {
        Some("never") => None,
        Some(v) => {
            Some(parse_duration(v).map_err(|e| annotation_error(EXIT_AFTER, &annotations[EXIT_AFTER], e))?)
        }
        // Init containers and Job pods run to completion at once (kwok's fast stages); an exit code alone
        // asks for an exit.
        None if init || is_job_pod(labels) || exit_code.is_some() => Some(Duration::ZERO),
        None => None,
    };
    Ok(Behaviour {
        start_delay,
        exit_after,
        exit_code: exit_code.unwrap_or(0),
    })
}

/// What a probe annotation (`READINESS`, `LIVENESS`, `STARTUP`) says for `container`, the container having
/// run for `running_for`; `ready_after` applies to readiness only.
pub fn probe_answer(
    annotations: &BTreeMap<String, String>,
    key: &str,
    container: &str,
    running_for: Option<Duration>,
) -> Result<ProbeAnswer, String> {
    if key == READINESS
        && let Some(after) = duration_of(annotations, READY_AFTER, container)?
        && running_for.is_none_or(|r| r < after)
    {
        return Ok(ProbeAnswer::Fail);
    }
    match lookup(annotations, key, container) {
        None | Some("pass") => Ok(ProbeAnswer::Pass),
        Some("fail") => Ok(ProbeAnswer::Fail),
        Some(_) => Err(annotation_error(key, &annotations[key], "expected pass or fail")),
    }
}

/// Every simulation annotation of the pod, checked for `container`: the first bad one's message.
pub fn validate(annotations: &BTreeMap<String, String>, container: &str) -> Result<(), String> {
    behaviour(annotations, &BTreeMap::new(), container, false)?;
    for key in [READINESS, LIVENESS, STARTUP] {
        probe_answer(annotations, key, container, Some(Duration::MAX))?;
    }
    Ok(())
}

/// The exit code of a process killed by `signal` (default SIGTERM): 128 + the signal's number.
pub fn signal_exit_code(signal: Option<&str>) -> i64 {
    let name = signal.unwrap_or("SIGTERM").trim().to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name);
    let number = match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        other => other.parse().unwrap_or(15),
    };
    128 + number
}

// ---------------------------------------------------------------------------------------------------------
// Pod IPs.

/// A node's pod IP range: a /20 of 10.128.0.0/10 (4,093 pods per node, 1,024 nodes), which overlaps
/// neither the Service range (10.96.0.0/12) nor Docker's default pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCidr {
    /// The network address.
    pub base: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

/// Nodes a [`PodCidr::for_node`] range exists for.
pub const MAX_SIM_NODES: u32 = 1024;
const NODE_PREFIX: u8 = 20;

impl PodCidr {
    /// The range of the node with this index (0 for the first node).
    pub fn for_node(index: u32) -> Result<PodCidr, String> {
        if index >= MAX_SIM_NODES {
            return Err(format!(
                "at most {MAX_SIM_NODES} simulated nodes have a pod IP range (node index {index})"
            ));
        }
        let base = u32::from(Ipv4Addr::new(10, 128, 0, 0)) + (index << (32 - NODE_PREFIX));
        Ok(PodCidr {
            base: Ipv4Addr::from(base),
            prefix: NODE_PREFIX,
        })
    }

    /// Addresses in the range that pods can have (not the network, the gateway `.1` or the broadcast).
    fn usable(&self) -> u32 {
        (1u32 << (32 - self.prefix)).saturating_sub(3)
    }
}

impl std::fmt::Display for PodCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// Free addresses of a [`PodCidr`]: released ones first, then the next never used.
#[derive(Debug)]
struct IpPool {
    cidr: PodCidr,
    next: u32,
    free: Vec<u32>,
}

impl IpPool {
    fn new(cidr: PodCidr) -> IpPool {
        IpPool {
            cidr,
            next: 0,
            free: Vec::new(),
        }
    }

    fn allocate(&mut self) -> Option<Ipv4Addr> {
        let offset = match self.free.pop() {
            Some(o) => o,
            None if self.next < self.cidr.usable() => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        Some(Ipv4Addr::from(u32::from(self.cidr.base) + 2 + offset))
    }

    fn release(&mut self, ip: Ipv4Addr) {
        let offset = u32::from(ip).wrapping_sub(u32::from(self.cidr.base) + 2);
        if offset < self.next {
            self.free.push(offset);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// The runtime.

/// What a pod's sandbox and containers share: its identity and its simulation annotations.
#[derive(Debug)]
struct PodInfo {
    name: String,
    namespace: String,
    uid: String,
    /// Only the `sim.kubeling.dev/` annotations.
    annotations: BTreeMap<String, String>,
    job: bool,
}

/// One simulated container or sandbox.
#[derive(Debug)]
struct Entry {
    pod: Arc<PodInfo>,
    kind: ContainerKind,
    /// Docker's name (`k8s_<container>_<pod>_<ns>_<uid>_<attempt>`).
    docker_name: String,
    /// The container's name in the pod spec; `POD` for a sandbox.
    container: String,
    sandbox_id: Option<String>,
    image: String,
    hash: String,
    restart_count: u32,
    termination_message_policy: String,
    grace: Option<i64>,
    created: Timestamp,
    started: Option<Timestamp>,
    /// Stopped by the kubelet: when, and the exit code.
    stopped: Option<(Timestamp, i64)>,
    behaviour: Behaviour,
    ip: Option<Ipv4Addr>,
    host_network: bool,
}

/// A container's state at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Created,
    Running {
        started: Timestamp,
    },
    Exited {
        started: Timestamp,
        finished: Timestamp,
        code: i64,
    },
}

impl Entry {
    /// When a running container exits on its own (`exit-after` from its start), if it will.
    fn natural_exit(&self) -> Option<Timestamp> {
        let started = self.started?;
        if self.stopped.is_some() {
            return None;
        }
        let after = self.behaviour.exit_after?;
        Some(
            started
                .checked_add(SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MAX),
        )
    }

    fn phase(&self, now: Timestamp) -> Phase {
        let Some(started) = self.started else {
            return Phase::Created;
        };
        let natural = self.behaviour.exit_after.map(|after| {
            started
                .checked_add(SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MAX)
        });
        match (self.stopped, natural) {
            (Some((at, _)), Some(exit)) if exit < at => Phase::Exited {
                started,
                finished: exit,
                code: i64::from(self.behaviour.exit_code),
            },
            (Some((at, code)), _) => Phase::Exited {
                started,
                finished: at,
                code,
            },
            (None, Some(exit)) if exit <= now => Phase::Exited {
                started,
                finished: exit,
                code: i64::from(self.behaviour.exit_code),
            },
            _ => Phase::Running { started },
        }
    }

    fn labels(&self, owner: &Owner, id_of_sandbox: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            labels.insert(k.to_owned(), v.to_owned());
        };
        put(naming::LABEL_POD_NAME, &self.pod.name);
        put(naming::LABEL_POD_NAMESPACE, &self.pod.namespace);
        put(naming::LABEL_POD_UID, &self.pod.uid);
        put(naming::LABEL_CONTAINER_NAME, &self.container);
        put(naming::LABEL_CONTAINER_TYPE, self.kind.as_label());
        put(naming::LABEL_KUBELING_CLUSTER, &owner.cluster);
        put(naming::LABEL_KUBELING_NODE, &owner.node);
        if let Some(sandbox) = id_of_sandbox {
            put(naming::LABEL_SANDBOX_ID, sandbox);
        }
        if self.kind == ContainerKind::Container {
            let annotation = |k: &str| format!("{}{k}", naming::ANNOTATION_PREFIX);
            labels.insert(annotation(naming::ANNOTATION_CONTAINER_HASH), self.hash.clone());
            labels.insert(
                annotation(naming::ANNOTATION_CONTAINER_RESTART_COUNT),
                self.restart_count.to_string(),
            );
            labels.insert(
                annotation(naming::ANNOTATION_TERMINATION_MESSAGE_POLICY),
                self.termination_message_policy.clone(),
            );
            if let Some(grace) = self.grace {
                labels.insert(
                    annotation(naming::ANNOTATION_POD_TERMINATION_GRACE_PERIOD),
                    grace.to_string(),
                );
            }
        }
        labels
    }
}

#[derive(Debug)]
struct State {
    containers: HashMap<String, Entry>,
    /// Pod UID → its containers' IDs (sandboxes included).
    by_pod: HashMap<String, Vec<String>>,
    ips: IpPool,
}

#[derive(Debug)]
struct Inner {
    owner: Owner,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// Makes IDs unique across the simulated nodes of one process.
    id_prefix: u64,
}

/// The simulated runtime of one node; clones share it.
#[derive(Debug, Clone)]
pub struct SimRuntime {
    inner: Arc<Inner>,
}

/// The image ID of a simulated image: a digest of its name.
fn image_id(image: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(image.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn not_found(id: &str) -> RuntimeError {
    RuntimeError::NotFound {
        kind: "container",
        id: id.to_owned(),
    }
}

impl SimRuntime {
    /// The runtime of `owner.node`, giving pods addresses of `cidr`.
    pub fn new(owner: Owner, cidr: PodCidr) -> SimRuntime {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(owner.node.as_bytes());
        SimRuntime {
            inner: Arc::new(Inner {
                id_prefix: h.finish(),
                owner,
                state: Mutex::new(State {
                    containers: HashMap::new(),
                    by_pod: HashMap::new(),
                    ips: IpPool::new(cidr),
                }),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_id(&self) -> String {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{n:048x}", self.inner.id_prefix)
    }

    /// When the container started, if it did (the simulated prober's `ready-after` clock).
    pub fn started_at(&self, id: &str) -> Option<Timestamp> {
        self.lock().containers.get(id).and_then(|e| e.started)
    }

    /// How many containers and sandboxes exist (running or not).
    pub fn container_count(&self) -> usize {
        self.lock().containers.len()
    }

    fn insert(&self, id: String, entry: Entry) {
        let mut state = self.lock();
        state
            .by_pod
            .entry(entry.pod.uid.clone())
            .or_default()
            .push(id.clone());
        state.containers.insert(id, entry);
    }

    fn info(&self, id: &str, e: &Entry, now: Timestamp) -> ContainerInfo {
        ContainerInfo {
            id: id.to_owned(),
            name: e.docker_name.clone(),
            labels: e.labels(&self.inner.owner, e.sandbox_id.as_deref()),
            state: match e.phase(now) {
                Phase::Created => ContainerStatus::Created,
                Phase::Running { .. } => ContainerStatus::Running,
                Phase::Exited { .. } => ContainerStatus::Exited,
            },
            created: e.created,
            image: e.image.clone(),
            image_id: image_id(&e.image),
        }
    }

    /// The log lines of a container at `now`: (time, text).
    fn log_lines(e: &Entry, now: Timestamp) -> Vec<(Timestamp, String)> {
        let who = format!(
            "container {} of pod {}/{}",
            e.container, e.pod.namespace, e.pod.name
        );
        match e.phase(now) {
            Phase::Created => Vec::new(),
            Phase::Running { started } => vec![(started, format!("sim: {who} started (image {})", e.image))],
            Phase::Exited {
                started,
                finished,
                code,
            } => vec![
                (started, format!("sim: {who} started (image {})", e.image)),
                (finished, format!("sim: {who} exited with code {code}")),
            ],
        }
    }
}

/// Renders log lines as `kubectl logs` options ask (since, tail, timestamps, limit).
fn render_logs(lines: &[(Timestamp, String)], options: &LogOptions) -> Vec<u8> {
    let kept: Vec<&(Timestamp, String)> = lines
        .iter()
        .filter(|(t, _)| options.since.is_none_or(|s| *t >= s))
        .collect();
    let skip = options.tail.map_or(0, |n| kept.len().saturating_sub(n as usize));
    let mut out = Vec::new();
    for (t, text) in kept.into_iter().skip(skip) {
        if options.timestamps {
            out.extend_from_slice(format!("{t} ").as_bytes());
        }
        out.extend_from_slice(text.as_bytes());
        out.push(b'\n');
    }
    if let Some(limit) = options.limit_bytes {
        out.truncate(limit as usize);
    }
    out
}

struct SimExec;

#[async_trait]
impl ExecControl for SimExec {
    async fn resize(&self, _width: u16, _height: u16) -> Result<()> {
        Ok(())
    }

    async fn exit_code(&self) -> Result<i64> {
        Ok(0)
    }
}

#[async_trait]
impl ContainerRuntime for SimRuntime {
    async fn version(&self) -> Result<String> {
        Ok(RUNTIME_VERSION.to_owned())
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    fn next_change(&self, pod_uid: &str) -> NextChange {
        let now = Timestamp::now();
        let state = self.lock();
        let ids = state.by_pod.get(pod_uid).into_iter().flatten();
        let next = ids
            .filter_map(|id| state.containers.get(id))
            .filter_map(Entry::natural_exit)
            .filter(|t| *t > now)
            .min();
        next.map_or(NextChange::Never, NextChange::At)
    }

    async fn ensure_image(&self, image: &str, _pull_policy: PullPolicy) -> Result<ImageInfo> {
        if !naming::is_valid_image_reference(image) {
            return Err(RuntimeError::InvalidImageName {
                image: image.to_owned(),
            });
        }
        let name = naming::normalize_image(image);
        let id = image_id(&name);
        let (repo, _, _) = naming::split_image_reference(&name);
        Ok(ImageInfo {
            repo_digests: vec![format!("{repo}@{id}")],
            repo_tags: vec![name],
            id,
            ..ImageInfo::default()
        })
    }

    async fn create_sandbox(&self, config: &SandboxConfig) -> Result<String> {
        let annotations: BTreeMap<String, String> = config
            .annotations
            .iter()
            .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let pod = Arc::new(PodInfo {
            name: config.pod_name.clone(),
            namespace: config.namespace.clone(),
            uid: config.uid.clone(),
            annotations,
            job: is_job_pod(&config.labels),
        });
        let id = self.new_id();
        let entry = Entry {
            docker_name: naming::sandbox_name(
                &config.pod_name,
                &config.namespace,
                &config.uid,
                config.attempt,
            ),
            pod,
            kind: ContainerKind::Sandbox,
            container: naming::POD_INFRA_CONTAINER_NAME.to_owned(),
            sandbox_id: None,
            image: config.image.clone(),
            hash: String::new(),
            restart_count: 0,
            termination_message_policy: String::new(),
            grace: None,
            created: Timestamp::now(),
            started: None,
            stopped: None,
            behaviour: Behaviour::default(),
            ip: None,
            host_network: config.host_network,
        };
        self.insert(id.clone(), entry);
        Ok(id)
    }

    async fn create_container(&self, config: &ContainerConfig) -> Result<String> {
        let pod = {
            let state = self.lock();
            match state.containers.get(&config.sandbox_id) {
                Some(sandbox) => sandbox.pod.clone(),
                None => {
                    return Err(RuntimeError::Runtime {
                        op: "create container",
                        target: config.name.clone(),
                        message: format!("sandbox {} not found", config.sandbox_id),
                    });
                }
            }
        };
        let labels = if pod.job {
            BTreeMap::from([(JOB_NAME_LABELS[0].to_owned(), String::new())])
        } else {
            BTreeMap::new()
        };
        let behaviour = validate(&pod.annotations, &config.name)
            .and_then(|()| behaviour(&pod.annotations, &labels, &config.name, config.init))
            .map_err(|message| RuntimeError::Runtime {
                op: "create container",
                target: config.name.clone(),
                message,
            })?;
        let id = self.new_id();
        let entry = Entry {
            docker_name: naming::container_name(
                &config.name,
                &config.pod_name,
                &config.namespace,
                &config.uid,
                config.restart_count,
            ),
            pod,
            kind: ContainerKind::Container,
            container: config.name.clone(),
            sandbox_id: Some(config.sandbox_id.clone()),
            image: config.image.clone(),
            hash: config.hash.clone(),
            restart_count: config.restart_count,
            termination_message_policy: config.termination_message_policy.clone(),
            grace: config.termination_grace_period,
            created: Timestamp::now(),
            started: None,
            stopped: None,
            behaviour,
            ip: None,
            host_network: config.host_network,
        };
        self.insert(id.clone(), entry);
        Ok(id)
    }

    async fn start(&self, id: &str) -> Result<()> {
        let delay = {
            let mut state = self.lock();
            let now = Timestamp::now();
            let sandbox_running = {
                let e = state.containers.get(id).ok_or_else(|| not_found(id))?;
                if e.started.is_some() {
                    // Docker: starting a started container is a no-op (304).
                    return Ok(());
                }
                e.sandbox_id.as_ref().map(|s| {
                    state
                        .containers
                        .get(s)
                        .is_some_and(|s| matches!(s.phase(now), Phase::Running { .. }))
                })
            };
            if sandbox_running == Some(false) {
                return Err(RuntimeError::Runtime {
                    op: "start container",
                    target: id.to_owned(),
                    message: "its pod sandbox is not running".to_owned(),
                });
            }
            let State { containers, ips, .. } = &mut *state;
            let e = containers.get_mut(id).ok_or_else(|| not_found(id))?;
            if e.kind == ContainerKind::Sandbox && !e.host_network {
                match ips.allocate() {
                    Some(ip) => e.ip = Some(ip),
                    None => {
                        return Err(RuntimeError::Runtime {
                            op: "start sandbox",
                            target: id.to_owned(),
                            message: format!("no free pod IP in {}", ips.cidr),
                        });
                    }
                }
            }
            e.behaviour.start_delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.lock();
        let e = state.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        e.started.get_or_insert_with(Timestamp::now);
        Ok(())
    }

    async fn stop_container(&self, id: &str, _grace: Duration, signal: Option<&str>) -> Result<()> {
        let mut state = self.lock();
        let now = Timestamp::now();
        let State { containers, ips, .. } = &mut *state;
        let Some(e) = containers.get_mut(id) else {
            return Ok(());
        };
        match e.phase(now) {
            Phase::Running { .. } => e.stopped = Some((now, signal_exit_code(signal))),
            // `docker stop` leaves a created container created, and an exited one as it was.
            Phase::Created | Phase::Exited { .. } => {}
        }
        if let Some(ip) = e.ip.take() {
            ips.release(ip);
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut state = self.lock();
        let State {
            containers,
            by_pod,
            ips,
        } = &mut *state;
        let Some(e) = containers.remove(id) else {
            return Ok(());
        };
        if let Some(ip) = e.ip {
            ips.release(ip);
        }
        if let Some(ids) = by_pod.get_mut(&e.pod.uid) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                by_pod.remove(&e.pod.uid);
            }
        }
        Ok(())
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>> {
        let now = Timestamp::now();
        let state = self.lock();
        let mut out = Vec::new();
        let mut consider = |id: &str, e: &Entry| {
            if filter.kind.is_some_and(|k| k != e.kind) {
                return;
            }
            let info = self.info(id, e, now);
            if filter.matches(&info.labels) {
                out.push(info);
            }
        };
        match filter.labels.get(naming::LABEL_POD_UID) {
            Some(uid) => {
                for id in state.by_pod.get(uid).into_iter().flatten() {
                    if let Some(e) = state.containers.get(id) {
                        consider(id, e);
                    }
                }
            }
            None => {
                for (id, e) in &state.containers {
                    consider(id, e);
                }
            }
        }
        Ok(out)
    }

    async fn inspect(&self, id: &str) -> Result<ContainerState> {
        let now = Timestamp::now();
        let state = self.lock();
        let e = state.containers.get(id).ok_or_else(|| not_found(id))?;
        let (status, exit_code, started_at, finished_at) = match e.phase(now) {
            Phase::Created => (ContainerStatus::Created, 0, None, None),
            Phase::Running { started } => (ContainerStatus::Running, 0, Some(started), None),
            Phase::Exited {
                started,
                finished,
                code,
            } => (ContainerStatus::Exited, code, Some(started), Some(finished)),
        };
        Ok(ContainerState {
            id: id.to_owned(),
            name: e.docker_name.clone(),
            status,
            exit_code,
            error: String::new(),
            oom_killed: false,
            pid: (status == ContainerStatus::Running).then_some(1),
            created_at: Some(e.created),
            started_at,
            finished_at,
            image_id: image_id(&e.image),
            ip_address: e.ip.map(|ip| ip.to_string()).unwrap_or_default(),
            network_mode: if e.host_network { "host" } else { "default" }.to_owned(),
            labels: e.labels(&self.inner.owner, e.sandbox_id.as_deref()),
        })
    }

    async fn logs(&self, id: &str, options: &LogOptions) -> Result<LogStream> {
        let now = Timestamp::now();
        let (lines, running) = {
            let state = self.lock();
            let e = state.containers.get(id).ok_or_else(|| not_found(id))?;
            (
                Self::log_lines(e, now),
                matches!(e.phase(now), Phase::Running { .. }),
            )
        };
        let first = Bytes::from(render_logs(&lines, options));
        let head = futures_util::stream::once(async move { Ok(first) });
        if !(options.follow && running) {
            return Ok(head.boxed());
        }
        // Follow: the exit line once the container exits (or nothing, if it is removed), polled.
        let me = self.clone();
        let id = id.to_owned();
        let mut options = options.clone();
        options.tail = None;
        let known = lines.len();
        let tail = futures_util::stream::once(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let now = Timestamp::now();
                let lines = {
                    let state = me.lock();
                    match state.containers.get(&id) {
                        None => return Ok(Bytes::new()),
                        Some(e) if matches!(e.phase(now), Phase::Running { .. }) => continue,
                        Some(e) => Self::log_lines(e, now),
                    }
                };
                let new = lines.get(known..).unwrap_or_default();
                return Ok(Bytes::from(render_logs(new, &options)));
            }
        });
        Ok(head.chain(tail).boxed())
    }

    async fn exec(&self, id: &str, config: &ExecConfig) -> Result<ExecSession> {
        let now = Timestamp::now();
        {
            let state = self.lock();
            let e = state.containers.get(id).ok_or_else(|| not_found(id))?;
            if !matches!(e.phase(now), Phase::Running { .. }) {
                return Err(RuntimeError::Runtime {
                    op: "exec",
                    target: id.to_owned(),
                    message: format!("container {id} is not running"),
                });
            }
        }
        let stdin: Option<Pin<Box<dyn AsyncWrite + Send>>> = config
            .stdin
            .then(|| Box::pin(tokio::io::sink()) as Pin<Box<dyn AsyncWrite + Send>>);
        Ok(ExecSession {
            output: futures_util::stream::empty().boxed(),
            stdin,
            control: Box::new(SimExec),
        })
    }
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
