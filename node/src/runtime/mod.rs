//! The container runtime boundary of the node agent: everything the pod workers ask of Docker goes through
//! the [`ContainerRuntime`] trait, which speaks in plain kubelet terms (sandboxes, containers, images,
//! logs, exec) and never in bollard types. [`docker::DockerRuntime`] implements it over the Docker API the
//! way dockershim did (`pkg/kubelet/dockershim` in v1.23); [`fake::FakeRuntime`] implements it in memory
//! for the unit tests of everything above it; [`sim::SimRuntime`] simulates containers at scale
//! (`--runtime sim`: thousands of pods without Docker, lifecycles set by pod annotations).
//!
//! ```text
//! pod_workers ── lifecycle::plan() ──► actions ──► Arc<dyn ContainerRuntime>
//!                                                     ├── DockerRuntime (bollard → /var/run/docker.sock)
//!                                                     ├── FakeRuntime  (in memory, scripted)
//!                                                     └── SimRuntime   (in memory, simulated, for scale)
//! ```
//!
//! There is no database of containers: like dockershim, every answer is rebuilt from Docker, using the
//! names and labels in [`naming`]. Each runtime stamps the containers it creates with the kubeling cluster
//! and node it belongs to and only ever lists those, so several kubeling clusters (or test runs) can share
//! one Docker engine without touching each other's containers.

pub mod docker;
pub mod fake;
pub mod naming;
pub mod sim;

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use jiff::Timestamp;
use tokio::io::AsyncWrite;

pub use docker::{DEFAULT_PAUSE_IMAGE, DockerRuntime, PAUSE_BINARY, PAUSE_BINARY_SHA256};
pub use fake::FakeRuntime;
pub use sim::SimRuntime;

/// Result of every runtime call.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// What went wrong in the runtime, and on which object.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// kubelet: `ErrImageNeverPull`; the message is upstream's event text.
    #[error("container image \"{image}\" is not present with pull policy of Never")]
    ImageNeverPull {
        /// The image reference as normalized (with `:latest` added when it had no tag).
        image: String,
    },
    /// kubelet: `ErrImagePull`; the message is the runtime's error text.
    #[error("failed to pull image \"{image}\": {message}")]
    ImagePull {
        /// The image reference.
        image: String,
        /// Docker's error text.
        message: String,
    },
    /// kubelet: `InvalidImageName`.
    #[error("invalid image name \"{image}\"")]
    InvalidImageName {
        /// The reference as given.
        image: String,
    },
    /// The container, exec session or image does not exist (Docker answered 404).
    #[error("{kind} {id} not found")]
    NotFound {
        /// "container", "image" or "exec".
        kind: &'static str,
        /// The identifier that was asked for.
        id: String,
    },
    /// Building kubeling's pause image failed.
    #[error("building pause image {image}: {message}")]
    PauseImageBuild {
        /// The image name being built.
        image: String,
        /// Why.
        message: String,
    },
    /// An exec did not finish within its timeout (probes turn this into a failure).
    #[error("exec {cmd:?} in container {id} timed out after {timeout:?}")]
    ExecTimeout {
        /// The container.
        id: String,
        /// The command.
        cmd: Vec<String>,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// Any other failure of a runtime call.
    #[error("{op} {target}: {message}")]
    Runtime {
        /// The call that failed ("create container", "stop container", ...).
        op: &'static str,
        /// The object it was about (a container id or name, an image).
        target: String,
        /// The runtime's error text.
        message: String,
    },
}

impl RuntimeError {
    /// True for [`RuntimeError::NotFound`], so callers can treat an already-gone container as done.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PullPolicy {
    /// Pull every time.
    Always,
    /// Pull only when the image is missing.
    IfNotPresent,
    /// Never pull: a missing image is `ErrImageNeverPull`.
    Never,
}

impl PullPolicy {
    /// Parses the API value; unknown or empty values get upstream's defaulting from the image reference
    /// (`SetDefaults_Container`: `Always` for `:latest` or no tag, `IfNotPresent` otherwise).
    pub fn from_api(value: Option<&str>, image: &str) -> Self {
        match value {
            Some("Always") => Self::Always,
            Some("IfNotPresent") => Self::IfNotPresent,
            Some("Never") => Self::Never,
            _ => {
                let (_, tag, digest) = naming::split_image_reference(image);
                match (tag, digest) {
                    (None, None) | (Some("latest"), _) => Self::Always,
                    _ => Self::IfNotPresent,
                }
            }
        }
    }
}

/// An image present on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageInfo {
    /// Docker's image ID, `sha256:<hex>`; containers are created from this, as dockershim did.
    pub id: String,
    /// `repo:tag` names.
    pub repo_tags: Vec<String>,
    /// `repo@sha256:…` names, present for pulled images.
    pub repo_digests: Vec<String>,
    /// Size in bytes.
    pub size: i64,
    /// The image's `ENTRYPOINT`.
    pub entrypoint: Vec<String>,
    /// The image's `CMD`.
    pub cmd: Vec<String>,
    /// The image's `WORKDIR`, empty when unset.
    pub working_dir: String,
    /// The image's `USER`, empty when unset.
    pub user: String,
    /// The image's `STOPSIGNAL`, when set.
    pub stop_signal: Option<String>,
    /// The image's labels.
    pub labels: BTreeMap<String, String>,
}

impl ImageInfo {
    /// `status.containerStatuses[].imageID`: `docker-pullable://repo@sha256:…` when the image has a repo
    /// digest, otherwise `docker://sha256:…` (kubelet-behaviour §8.11).
    pub fn image_ref(&self) -> String {
        match self.repo_digests.first() {
            Some(digest) => format!("docker-pullable://{digest}"),
            None => format!("docker://{}", self.id),
        }
    }
}

/// `containerPort` protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// TCP (the API default).
    #[default]
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Docker's spelling, as in `80/tcp`.
    pub fn as_docker(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

/// A `hostPort` binding, set on the sandbox because app containers share its network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// `containerPort`.
    pub container_port: u16,
    /// `hostPort`.
    pub host_port: u16,
    /// `protocol`.
    pub protocol: Protocol,
    /// `hostIP`, when set.
    pub host_ip: Option<String>,
}

/// The pod's DNS settings, already resolved from `dnsPolicy` and `dnsConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    /// Name servers.
    pub servers: Vec<String>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options (`ndots:5`).
    pub options: Vec<String>,
}

/// Everything needed to run a pod's sandbox (pause) container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxConfig {
    /// `metadata.name`.
    pub pod_name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Sandbox attempt: 0 for the first, then the previous sandbox's attempt plus one (§4.4).
    pub attempt: u32,
    /// The pause image (normally [`DEFAULT_PAUSE_IMAGE`]).
    pub image: String,
    /// The pod hostname (`spec.hostname` or the pod name); truncated to 63 characters here, and ignored for
    /// hostNetwork pods.
    pub hostname: Option<String>,
    /// The pod's domain (`<subdomain>.<ns>.svc.<cluster domain>`): Docker writes the hostname's FQDN line
    /// into the hosts file from it. Ignored for hostNetwork pods.
    pub domainname: Option<String>,
    /// `hostAliases` as Docker `ExtraHosts` entries (`hostname:ip`).
    pub extra_hosts: Vec<String>,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// `spec.hostPID`.
    pub host_pid: bool,
    /// `spec.hostIPC`.
    pub host_ipc: bool,
    /// Pod labels, copied onto the sandbox.
    pub labels: BTreeMap<String, String>,
    /// Pod annotations, stored as `annotation.<key>` labels.
    pub annotations: BTreeMap<String, String>,
    /// `hostPort`s of all containers.
    pub port_mappings: Vec<PortMapping>,
    /// DNS settings.
    pub dns: DnsConfig,
    /// `securityContext.sysctls`.
    pub sysctls: BTreeMap<String, String>,
}

/// A bind mount into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Path on the host.
    pub host_path: String,
    /// Path in the container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A tmpfs mounted into a container: an `emptyDir` with `medium: Memory` (Docker `HostConfig.Tmpfs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsMount {
    /// Path in the container.
    pub container_path: String,
    /// `size=` in bytes, from the volume's `sizeLimit`; `None` leaves Docker's default.
    pub size_bytes: Option<i64>,
    /// Mounted read-only.
    pub read_only: bool,
}

/// Resource settings, already converted from quantities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// `limits.memory` in bytes.
    pub memory_limit: Option<i64>,
    /// `limits.cpu` in millicores.
    pub cpu_limit_millis: Option<i64>,
    /// `requests.cpu` in millicores (turned into CPU shares).
    pub cpu_request_millis: Option<i64>,
}

/// Security settings of one container, already resolved from the pod and container security contexts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `uid`, `uid:gid` or a user name.
    pub user: Option<String>,
    /// `privileged`.
    pub privileged: bool,
    /// `capabilities.add`, without the `CAP_` prefix as the API writes them.
    pub cap_add: Vec<String>,
    /// `capabilities.drop`.
    pub cap_drop: Vec<String>,
    /// `readOnlyRootFilesystem`.
    pub readonly_rootfs: bool,
}

/// Everything needed to create one app or init container in a running sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    /// `metadata.name` of the pod.
    pub pod_name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The container's name in the pod spec.
    pub name: String,
    /// restartCount, which is also the attempt in the Docker name (§8.1).
    pub restart_count: u32,
    /// The sandbox (pause container) ID whose namespaces this container joins.
    pub sandbox_id: String,
    /// The image: the resolved ID from [`ContainerRuntime::ensure_image`], as dockershim used.
    pub image: String,
    /// `command`, Docker's `Entrypoint`; empty keeps the image's.
    pub command: Vec<String>,
    /// `args`, Docker's `Cmd`; empty keeps the image's.
    pub args: Vec<String>,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// `workingDir`.
    pub working_dir: Option<String>,
    /// Volume and file mounts.
    pub mounts: Vec<Mount>,
    /// tmpfs mounts (memory-backed emptyDir volumes).
    pub tmpfs: Vec<TmpfsMount>,
    /// Limits and requests.
    pub resources: Resources,
    /// Security context.
    pub security: SecurityConfig,
    /// `tty`.
    pub tty: bool,
    /// `stdin`.
    pub stdin: bool,
    /// `stdinOnce`.
    pub stdin_once: bool,
    /// `spec.shareProcessNamespace`: join the sandbox's PID namespace.
    pub share_process_namespace: bool,
    /// `spec.hostPID`.
    pub host_pid: bool,
    /// An ephemeral container's `targetContainerName`, resolved to the running container's ID: the PID
    /// namespace to join.
    pub target_container_id: Option<String>,
    /// `spec.hostNetwork`: the container also takes the host's UTS namespace.
    pub host_network: bool,
    /// Container hash (hex), stored as `annotation.io.kubernetes.container.hash` (§4.5).
    pub hash: String,
    /// `terminationMessagePath`.
    pub termination_message_path: String,
    /// `terminationMessagePolicy`.
    pub termination_message_policy: String,
    /// The pod's `terminationGracePeriodSeconds`, kept so a kill without the spec can recover it.
    pub termination_grace_period: Option<i64>,
    /// `lifecycle.preStop` as JSON, kept for the same reason.
    pub pre_stop_handler: Option<String>,
    /// `ports` as JSON, when there are any.
    pub ports: Option<String>,
    /// Further annotations, stored as `annotation.<key>` labels.
    pub annotations: BTreeMap<String, String>,
    /// A run-to-completion init container (not a restartable sidecar): Docker ignores it; the simulated
    /// runtime lets such a container exit 0 by default, as kwok's stages complete init containers.
    pub init: bool,
}

/// What [`ContainerRuntime::list`] returns, beyond the cluster and node it is always scoped to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only sandboxes or only app containers.
    pub kind: Option<ContainerKind>,
    /// Further `label=value` matches, e.g. `io.kubernetes.pod.uid`.
    pub labels: BTreeMap<String, String>,
}

impl ListFilter {
    /// Everything of this cluster and node.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only the pod sandboxes.
    pub fn sandboxes() -> Self {
        Self {
            kind: Some(ContainerKind::Sandbox),
            ..Self::default()
        }
    }

    /// Only app and init containers.
    pub fn containers() -> Self {
        Self {
            kind: Some(ContainerKind::Container),
            ..Self::default()
        }
    }

    /// Narrows to one pod, by UID.
    pub fn pod_uid(mut self, uid: &str) -> Self {
        self.labels
            .insert(naming::LABEL_POD_UID.to_owned(), uid.to_owned());
        self
    }

    /// True when `labels` satisfy this filter (used by the fake; Docker filters itself).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let kind_ok = self
            .kind
            .is_none_or(|kind| ContainerKind::from_labels(labels) == Some(kind));
        kind_ok && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// dockershim's `io.kubernetes.docker.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// `podsandbox`: the pause container.
    Sandbox,
    /// `container`: an app or init container.
    Container,
}

impl ContainerKind {
    /// The label value.
    pub fn as_label(self) -> &'static str {
        match self {
            Self::Sandbox => naming::CONTAINER_TYPE_SANDBOX,
            Self::Container => naming::CONTAINER_TYPE_CONTAINER,
        }
    }

    /// Reads the kind back from a container's labels.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Option<Self> {
        match labels.get(naming::LABEL_CONTAINER_TYPE).map(String::as_str) {
            Some(naming::CONTAINER_TYPE_SANDBOX) => Some(Self::Sandbox),
            Some(naming::CONTAINER_TYPE_CONTAINER) => Some(Self::Container),
            _ => None,
        }
    }
}

/// Docker's container state, as `State.Status` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerStatus {
    /// Created, never started.
    Created,
    /// Running.
    Running,
    /// Paused (kubeling never pauses; seen only if someone ran `docker pause`).
    Paused,
    /// Restarting (never with restart policy `no`).
    Restarting,
    /// Being removed.
    Removing,
    /// Exited.
    Exited,
    /// Dead (a failed removal).
    Dead,
    /// Anything else.
    Unknown,
}

impl ContainerStatus {
    /// Parses Docker's `State.Status` / `State` string.
    pub fn from_docker(status: &str) -> Self {
        match status {
            "created" => Self::Created,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "restarting" => Self::Restarting,
            "removing" => Self::Removing,
            "exited" => Self::Exited,
            "dead" => Self::Dead,
            _ => Self::Unknown,
        }
    }
}

/// One entry of [`ContainerRuntime::list`] (`docker ps -a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Full container ID.
    pub id: String,
    /// Name without Docker's leading `/`.
    pub name: String,
    /// All labels.
    pub labels: BTreeMap<String, String>,
    /// State.
    pub state: ContainerStatus,
    /// Creation time.
    pub created: Timestamp,
    /// The image as the container was created with it (an ID for app containers).
    pub image: String,
    /// The image ID.
    pub image_id: String,
}

impl ContainerInfo {
    /// Sandbox or app container.
    pub fn kind(&self) -> Option<ContainerKind> {
        ContainerKind::from_labels(&self.labels)
    }

    /// `io.kubernetes.pod.uid`.
    pub fn pod_uid(&self) -> Option<&str> {
        self.labels.get(naming::LABEL_POD_UID).map(String::as_str)
    }

    /// `io.kubernetes.pod.name`.
    pub fn pod_name(&self) -> Option<&str> {
        self.labels.get(naming::LABEL_POD_NAME).map(String::as_str)
    }

    /// `io.kubernetes.pod.namespace`.
    pub fn pod_namespace(&self) -> Option<&str> {
        self.labels.get(naming::LABEL_POD_NAMESPACE).map(String::as_str)
    }

    /// `io.kubernetes.container.name` (`POD` for sandboxes).
    pub fn container_name(&self) -> Option<&str> {
        self.labels.get(naming::LABEL_CONTAINER_NAME).map(String::as_str)
    }

    /// `io.kubernetes.sandbox.id`, for app containers.
    pub fn sandbox_id(&self) -> Option<&str> {
        self.labels.get(naming::LABEL_SANDBOX_ID).map(String::as_str)
    }

    /// The container hash annotation.
    pub fn hash(&self) -> Option<&str> {
        self.annotation(naming::ANNOTATION_CONTAINER_HASH)
    }

    /// The restartCount annotation.
    pub fn restart_count(&self) -> Option<u32> {
        self.annotation(naming::ANNOTATION_CONTAINER_RESTART_COUNT)?
            .parse()
            .ok()
    }

    /// The attempt field of the Docker name: restartCount for containers, the sandbox attempt for
    /// sandboxes (§8.10: "the attempt comes from the name").
    pub fn attempt(&self) -> Option<u32> {
        naming::parse_container_name(&self.name).map(|parsed| parsed.attempt)
    }

    /// A CRI annotation, stored by Docker as the label `annotation.<key>`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.labels
            .get(&format!("{}{key}", naming::ANNOTATION_PREFIX))
            .map(String::as_str)
    }
}

/// The result of [`ContainerRuntime::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// Full container ID.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// `State.Status`.
    pub status: ContainerStatus,
    /// `State.ExitCode`.
    pub exit_code: i64,
    /// `State.Error`, empty when none.
    pub error: String,
    /// `State.OOMKilled`.
    pub oom_killed: bool,
    /// `State.Pid` while running.
    pub pid: Option<u32>,
    /// `Created`.
    pub created_at: Option<Timestamp>,
    /// `State.StartedAt`, `None` if never started.
    pub started_at: Option<Timestamp>,
    /// `State.FinishedAt`, `None` if not finished.
    pub finished_at: Option<Timestamp>,
    /// The image ID (`sha256:…`).
    pub image_id: String,
    /// The container's IP address (meaningful for sandboxes in bridge mode; empty otherwise).
    pub ip_address: String,
    /// `HostConfig.NetworkMode` (`host`, `container:<id>`, `default`/`bridge`), so the pod worker can tell
    /// when `hostNetwork` changed (§4.4).
    pub network_mode: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// CRI's view of a container's state (§8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CriState {
    /// Created, not started.
    Created,
    /// Running.
    Running,
    /// Exited, with the reason a container status shows.
    Exited {
        /// `OOMKilled`, `Completed`, `Error` or `ContainerCannotRun`.
        reason: &'static str,
    },
}

impl ContainerState {
    /// dockershim's `ContainerStatus` mapping (§8.6), so the status manager does not re-derive it. The order
    /// matters: Docker 20.10 leaves a container it could not start in `created` with exit code 127 and
    /// `State.Error` set, which is `ContainerCannotRun`, not Created.
    pub fn cri_state(&self) -> CriState {
        match self.status {
            ContainerStatus::Running | ContainerStatus::Paused | ContainerStatus::Restarting => {
                CriState::Running
            }
            _ if self.finished_at.is_some() => CriState::Exited {
                reason: if self.oom_killed {
                    "OOMKilled"
                } else if self.exit_code == 0 {
                    "Completed"
                } else {
                    "Error"
                },
            },
            _ if self.exit_code != 0 => CriState::Exited {
                reason: "ContainerCannotRun",
            },
            _ => CriState::Created,
        }
    }

    /// True when running (a sandbox is READY iff its pause container runs, §8.3).
    pub fn is_running(&self) -> bool {
        self.status == ContainerStatus::Running
    }
}

/// Options of [`ContainerRuntime::logs`] (`kubectl logs` query parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep streaming new output.
    pub follow: bool,
    /// Only the last N lines.
    pub tail: Option<u64>,
    /// Only output since this time (whole seconds: Docker's `since` takes seconds).
    pub since: Option<Timestamp>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
}

/// Which standard stream a frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StdStream {
    /// Standard output (and everything of a tty).
    Stdout,
    /// Standard error.
    Stderr,
}

/// A piece of exec output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFrame {
    /// stdout or stderr.
    pub stream: StdStream,
    /// The bytes.
    pub data: Bytes,
}

/// A stream of container log bytes, ended by the container (follow) or by the end of the log.
pub type LogStream = BoxStream<'static, Result<Bytes>>;

/// What to run in [`ContainerRuntime::exec`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecConfig {
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// Allocate a terminal (stdout and stderr then arrive merged as stdout).
    pub tty: bool,
    /// Attach standard input.
    pub stdin: bool,
}

/// Controls of a running exec besides its streams.
#[async_trait]
pub trait ExecControl: Send + Sync {
    /// Resizes the exec's terminal.
    async fn resize(&self, width: u16, height: u16) -> Result<()>;
    /// The exit code, once the output stream has ended.
    async fn exit_code(&self) -> Result<i64>;
}

/// A running exec: read `output` to the end, write `stdin` (then shut it down for EOF), then ask
/// `control.exit_code()`.
pub struct ExecSession {
    /// stdout and stderr frames, in order.
    pub output: BoxStream<'static, Result<OutputFrame>>,
    /// Standard input, when [`ExecConfig::stdin`] was set.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Resize and exit code.
    pub control: Box<dyn ExecControl>,
}

impl fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecSession")
            .field("stdin", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

/// The buffered result of [`ContainerRuntime::exec_sync`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Standard output, at most [`EXEC_SYNC_OUTPUT_LIMIT`] bytes.
    pub stdout: Vec<u8>,
    /// Standard error, at most [`EXEC_SYNC_OUTPUT_LIMIT`] bytes.
    pub stderr: Vec<u8>,
    /// The exit code: non-zero is a result, not an error (as CRI `ExecSync`).
    pub exit_code: i64,
}

/// How much of each stream [`ContainerRuntime::exec_sync`] keeps. Probes keep only 10 KiB of it
/// (kubelet: `maxReadLength`), hooks log it; a bound keeps a chatty command from filling memory.
pub const EXEC_SYNC_OUTPUT_LIMIT: usize = 1 << 20;

/// When a pod's containers next change state without the kubelet acting ([`ContainerRuntime::next_change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextChange {
    /// The runtime cannot tell: poll.
    Unknown,
    /// Nothing changes until the kubelet acts.
    Never,
    /// A container changes state (exits) at this moment.
    At(Timestamp),
}

/// The runtime the pod workers drive. Object-safe: used as `Arc<dyn ContainerRuntime>`.
#[async_trait]
pub trait ContainerRuntime: Send + Sync {
    /// `nodeInfo.containerRuntimeVersion`, e.g. `docker://20.10.24`.
    async fn version(&self) -> Result<String>;

    /// Checks that the runtime answers.
    async fn ping(&self) -> Result<()>;

    /// kubelet `EnsureImageExists`: inspect, and pull when missing (or always, for `Always`).
    async fn ensure_image(&self, image: &str, pull_policy: PullPolicy) -> Result<ImageInfo>;

    /// Creates (but does not start) the pod's pause container; returns its ID, the sandbox ID.
    async fn create_sandbox(&self, config: &SandboxConfig) -> Result<String>;

    /// Creates (but does not start) a container in the sandbox `config.sandbox_id`; returns its ID.
    async fn create_container(&self, config: &ContainerConfig) -> Result<String>;

    /// Starts a created container (sandbox or app).
    async fn start(&self, id: &str) -> Result<()>;

    /// When the containers of pod `pod_uid` next change state on their own, if this runtime knows it:
    /// [`NextChange::Unknown`] (Docker: a container may exit at any moment, so the pod worker relists every
    /// [`RELIST_PERIOD`](crate::kubelet::RELIST_PERIOD), as upstream's PLEG), or, for a runtime that decides
    /// its containers' lifecycles itself (the simulated one), the moment of the next exit or `Never`.
    fn next_change(&self, _pod_uid: &str) -> NextChange {
        NextChange::Unknown
    }

    /// Replaces the started sandbox's resolv.conf, which its app containers share, with `content`
    /// (dockershim `rewriteResolvFile`): the kubelet's exact file, also on a user-defined network where
    /// Docker would write its embedded resolver instead. Runtimes without such a file do nothing.
    async fn write_resolv_conf(&self, sandbox_id: &str, content: &str) -> Result<()> {
        let _ = (sandbox_id, content);
        Ok(())
    }

    /// Sends `signal` (default: the container's stop signal, from the image, else SIGTERM), waits up to
    /// `grace`, then SIGKILLs. A container that is not running is already stopped: `Ok`.
    async fn stop_container(&self, id: &str, grace: Duration, signal: Option<&str>) -> Result<()>;

    /// Removes a container with its anonymous volumes, forcing it if it still runs. Already gone: `Ok`.
    async fn remove_container(&self, id: &str) -> Result<()>;

    /// `docker ps -a` of this cluster's and node's containers, narrowed by `filter`.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>>;

    /// `docker inspect` of one container.
    async fn inspect(&self, id: &str) -> Result<ContainerState>;

    /// The container's output (stdout and stderr merged, as `kubectl logs` shows it).
    async fn logs(&self, id: &str, options: &LogOptions) -> Result<LogStream>;

    /// Starts `config.cmd` in a running container with attached streams.
    async fn exec(&self, id: &str, config: &ExecConfig) -> Result<ExecSession>;

    /// Attaches to the running container's main process (`kubectl attach`); `config.cmd` is ignored.
    async fn attach(&self, id: &str, _config: &ExecConfig) -> Result<ExecSession> {
        Err(RuntimeError::Runtime {
            op: "attach",
            target: id.to_owned(),
            message: "this runtime cannot attach".to_owned(),
        })
    }

    /// Writes `data` as the file `path` (mode `mode`) into a container, running or not (Docker's
    /// `PUT /containers/{id}/archive`); port-forward puts its helper into sandboxes this way.
    async fn copy_file(&self, id: &str, path: &str, mode: u32, _data: &[u8]) -> Result<()> {
        let _ = (path, mode);
        Err(RuntimeError::Runtime {
            op: "copy",
            target: id.to_owned(),
            message: "this runtime cannot copy files into containers".to_owned(),
        })
    }

    /// CRI `ExecSync`, for exec probes and hooks: run without stdin or tty, buffer the output, and give
    /// up after `timeout` (the process may keep running, as with upstream's Docker exec).
    async fn exec_sync(&self, id: &str, cmd: &[String], timeout: Option<Duration>) -> Result<ExecOutput> {
        let run = async {
            let config = ExecConfig {
                cmd: cmd.to_vec(),
                tty: false,
                stdin: false,
            };
            let mut session = self.exec(id, &config).await?;
            let mut out = ExecOutput::default();
            while let Some(frame) = session.output.next().await {
                let frame = frame?;
                let buf = match frame.stream {
                    StdStream::Stdout => &mut out.stdout,
                    StdStream::Stderr => &mut out.stderr,
                };
                let room = EXEC_SYNC_OUTPUT_LIMIT.saturating_sub(buf.len());
                buf.extend_from_slice(&frame.data[..frame.data.len().min(room)]);
            }
            out.exit_code = session.control.exit_code().await?;
            Ok(out)
        };
        match timeout {
            None => run.await,
            Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or_else(|_| {
                Err(RuntimeError::ExecTimeout {
                    id: id.to_owned(),
                    cmd: cmd.to_vec(),
                    timeout: limit,
                })
            }),
        }
    }
}

/// Where this runtime's containers belong: stamped on every container as `io.kubeling.cluster` and
/// `io.kubeling.node`, and the scope of every list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The kubeling cluster ID.
    pub cluster: String,
    /// The node name.
    pub node: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: ContainerStatus, exit_code: i64, finished: bool, oom: bool) -> ContainerState {
        ContainerState {
            id: "c".into(),
            name: "n".into(),
            status,
            exit_code,
            error: String::new(),
            oom_killed: oom,
            pid: None,
            created_at: None,
            started_at: None,
            finished_at: finished.then_some(Timestamp::UNIX_EPOCH),
            image_id: String::new(),
            ip_address: String::new(),
            network_mode: String::new(),
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn cri_state_follows_dockershim_mapping() {
        use ContainerStatus::*;
        let cases = [
            (state(Running, 0, false, false), CriState::Running),
            (state(Created, 0, false, false), CriState::Created),
            (
                state(Exited, 0, true, false),
                CriState::Exited { reason: "Completed" },
            ),
            (
                state(Exited, 1, true, false),
                CriState::Exited { reason: "Error" },
            ),
            (
                state(Exited, 137, true, true),
                CriState::Exited { reason: "OOMKilled" },
            ),
            (
                state(Exited, 127, false, false),
                CriState::Exited {
                    reason: "ContainerCannotRun",
                },
            ),
            (
                state(Created, 127, false, false),
                CriState::Exited {
                    reason: "ContainerCannotRun",
                },
            ),
            (state(Exited, 0, false, false), CriState::Created),
        ];
        for (input, want) in cases {
            assert_eq!(input.cri_state(), want, "{input:?}");
        }
    }

    #[test]
    fn pull_policy_defaults_from_the_image_tag() {
        let cases = [
            (None, "nginx", PullPolicy::Always),
            (None, "nginx:latest", PullPolicy::Always),
            (None, "nginx:1.27", PullPolicy::IfNotPresent),
            (None, "localhost:5000/nginx", PullPolicy::Always),
            (None, "localhost:5000/nginx:1", PullPolicy::IfNotPresent),
            (None, "nginx@sha256:abcd", PullPolicy::IfNotPresent),
            (Some("Never"), "nginx", PullPolicy::Never),
            (Some("IfNotPresent"), "nginx", PullPolicy::IfNotPresent),
        ];
        for (policy, image, want) in cases {
            assert_eq!(PullPolicy::from_api(policy, image), want, "{policy:?} {image}");
        }
    }

    #[test]
    fn image_ref_prefers_the_repo_digest() {
        let mut image = ImageInfo {
            id: "sha256:aa".into(),
            ..ImageInfo::default()
        };
        assert_eq!(image.image_ref(), "docker://sha256:aa");
        image.repo_digests.push("nginx@sha256:bb".into());
        assert_eq!(image.image_ref(), "docker-pullable://nginx@sha256:bb");
    }

    #[test]
    fn list_filter_matches_kind_and_labels() {
        let labels: BTreeMap<String, String> = [
            (naming::LABEL_CONTAINER_TYPE, naming::CONTAINER_TYPE_SANDBOX),
            (naming::LABEL_POD_UID, "u1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert!(ListFilter::all().matches(&labels));
        assert!(ListFilter::sandboxes().pod_uid("u1").matches(&labels));
        assert!(!ListFilter::containers().matches(&labels));
        assert!(!ListFilter::sandboxes().pod_uid("u2").matches(&labels));
    }
}
