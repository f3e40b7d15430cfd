//! [`FakeRuntime`]: an in-memory [`ContainerRuntime`] for the unit tests of the pod workers, prober and
//! status code. It keeps containers the way Docker would (names, labels, states and timestamps, built with
//! the same [`naming`] helpers), records every call, and lets a test script what Docker cannot be made to
//! do on demand: a container that crashes on start, an exit at a chosen moment, a failing pull, an exec
//! result, an error from any call.
//!
//! It enforces the few rules the real runtime would, so the fake cannot hide a bug: an image must be present
//! before a container is created from it, and a container can only start while its sandbox runs.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use jiff::Timestamp;

use super::naming;
use super::{
    ContainerConfig, ContainerInfo, ContainerKind, ContainerRuntime, ContainerState, ContainerStatus,
    DEFAULT_PAUSE_IMAGE, ExecConfig, ExecControl, ExecSession, ImageInfo, ListFilter, LogOptions, LogStream,
    OutputFrame, Owner, PullPolicy, Result, RuntimeError, SandboxConfig, StdStream,
};

/// A runtime call, as recorded by [`FakeRuntime::calls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `ensure_image`.
    EnsureImage {
        /// The image as asked.
        image: String,
        /// The policy.
        policy: PullPolicy,
    },
    /// A pull that `ensure_image` performed.
    Pull {
        /// The normalized image.
        image: String,
    },
    /// `create_sandbox`.
    CreateSandbox(Box<SandboxConfig>),
    /// `create_container`.
    CreateContainer(Box<ContainerConfig>),
    /// `start`.
    Start {
        /// Container ID.
        id: String,
    },
    /// `stop_container`.
    Stop {
        /// Container ID.
        id: String,
        /// Grace period.
        grace: Duration,
        /// Signal override.
        signal: Option<String>,
    },
    /// `remove_container`.
    Remove {
        /// Container ID.
        id: String,
    },
    /// `exec` (and `exec_sync`, which goes through it).
    Exec {
        /// Container ID.
        id: String,
        /// Command.
        cmd: Vec<String>,
    },
    /// `logs`.
    Logs {
        /// Container ID.
        id: String,
        /// Options.
        options: LogOptions,
    },
}

/// The calls [`FakeRuntime::fail_next`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `version`.
    Version,
    /// `ping`.
    Ping,
    /// `ensure_image`.
    EnsureImage,
    /// `create_sandbox`.
    CreateSandbox,
    /// `create_container`.
    CreateContainer,
    /// `start`.
    Start,
    /// `stop_container`.
    Stop,
    /// `remove_container`.
    Remove,
    /// `list`.
    List,
    /// `inspect`.
    Inspect,
    /// `logs`.
    Logs,
    /// `exec`.
    Exec,
}

/// What a scripted exec returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeExecResult {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Exit code.
    pub exit_code: i64,
}

type ExecHandler = Arc<dyn Fn(&str, &[String]) -> FakeExecResult + Send + Sync>;

/// One container the fake holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeContainer {
    /// What `list` shows.
    pub info: ContainerInfo,
    /// What `inspect` shows.
    pub state: ContainerState,
    /// The sandbox config it was created from, for sandboxes.
    pub sandbox: Option<SandboxConfig>,
    /// The container config it was created from, for app containers.
    pub container: Option<ContainerConfig>,
}

struct State {
    next_id: u64,
    now: Option<Timestamp>,
    version: String,
    images: BTreeMap<String, ImageInfo>,
    pull_errors: HashMap<String, String>,
    containers: BTreeMap<String, FakeContainer>,
    /// Container IDs by pod UID: the pod workers list by UID every second, which must not scan everything.
    by_uid: HashMap<String, std::collections::BTreeSet<String>>,
    calls: Vec<Call>,
    failures: HashMap<Op, VecDeque<String>>,
    /// While set, every call fails with this message (the daemon is unreachable).
    down: Option<String>,
    exit_on_start: HashMap<String, i64>,
    stop_exit_code: i64,
    logs: HashMap<String, Bytes>,
    /// Woken when logs grow or a container stops, for `logs` with `follow`.
    log_changed: Arc<tokio::sync::Notify>,
    exec_handler: Option<ExecHandler>,
}

/// The in-memory runtime. Clones share state, so a test can keep one handle and give the other away as
/// `Arc<dyn ContainerRuntime>`.
#[derive(Clone)]
pub struct FakeRuntime {
    owner: Owner,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRuntime")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRuntime {
    /// A fake for cluster `fake`, node `fake-node`, holding only [`DEFAULT_PAUSE_IMAGE`] (which the real node
    /// builds at startup).
    pub fn new() -> Self {
        Self::with_owner(Owner {
            cluster: "fake".to_owned(),
            node: "fake-node".to_owned(),
        })
    }

    /// A fake stamping the given owner labels.
    pub fn with_owner(owner: Owner) -> Self {
        let fake = Self {
            owner,
            state: Arc::new(Mutex::new(State {
                next_id: 0,
                now: None,
                version: "docker://20.10.24-fake".to_owned(),
                images: BTreeMap::new(),
                pull_errors: HashMap::new(),
                containers: BTreeMap::new(),
                by_uid: HashMap::new(),
                calls: Vec::new(),
                failures: HashMap::new(),
                down: None,
                exit_on_start: HashMap::new(),
                stop_exit_code: 0,
                logs: HashMap::new(),
                log_changed: Arc::new(tokio::sync::Notify::new()),
                exec_handler: None,
            })),
        };
        fake.add_image(DEFAULT_PAUSE_IMAGE);
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already; keep the state readable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Puts an image on the fake node (as if pulled earlier) and returns it.
    pub fn add_image(&self, image: &str) -> ImageInfo {
        let name = naming::normalize_image(image);
        let mut state = self.lock();
        let info = fake_image(&name);
        state.images.insert(name, info.clone());
        info
    }

    /// Makes pulls of `image` fail with `message` (Docker's text).
    pub fn fail_pull(&self, image: &str, message: &str) {
        self.lock()
            .pull_errors
            .insert(naming::normalize_image(image), message.to_owned());
    }

    /// Makes the next call of `op` fail with a [`RuntimeError::Runtime`] carrying `message`; queued calls
    /// fail in order.
    pub fn fail_next(&self, op: Op, message: &str) {
        self.lock()
            .failures
            .entry(op)
            .or_default()
            .push_back(message.to_owned());
    }

    /// While `message` is set, every call fails with it, as when the Docker daemon is stopped or
    /// restarting; `None` brings the runtime back, its containers as they were left.
    pub fn set_down(&self, message: Option<&str>) {
        self.lock().down = message.map(str::to_owned);
    }

    /// Containers named `container` in their pod spec exit with `exit_code` as soon as they start (a crash
    /// loop), until [`FakeRuntime::clear_exit_on_start`].
    pub fn exit_on_start(&self, container: &str, exit_code: i64) {
        self.lock().exit_on_start.insert(container.to_owned(), exit_code);
    }

    /// Undoes [`FakeRuntime::exit_on_start`].
    pub fn clear_exit_on_start(&self, container: &str) {
        self.lock().exit_on_start.remove(container);
    }

    /// The running container `id` exits now with `exit_code` (OOM-killed if `oom_killed`).
    pub fn exit_container(&self, id: &str, exit_code: i64, oom_killed: bool) -> Result<()> {
        let mut state = self.lock();
        let now = state.now();
        let container = state.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        container.exit(now, exit_code);
        container.state.oom_killed = oom_killed;
        state.log_changed.notify_waiters();
        Ok(())
    }

    /// Exit code a container gets when stopped (0 by default, as pause; a process that ignores SIGTERM
    /// would be 137, one killed by it 143).
    pub fn set_stop_exit_code(&self, exit_code: i64) {
        self.lock().stop_exit_code = exit_code;
    }

    /// The output `logs` returns for `id`.
    pub fn set_logs(&self, id: &str, output: impl Into<Bytes>) {
        let mut state = self.lock();
        state.logs.insert(id.to_owned(), output.into());
        state.log_changed.notify_waiters();
    }

    /// Adds output to `id`'s log, as a running container would (seen by `logs` with `follow`).
    pub fn append_logs(&self, id: &str, output: &[u8]) {
        let mut state = self.lock();
        let mut log = state.logs.get(id).map(|b| b.to_vec()).unwrap_or_default();
        log.extend_from_slice(output);
        state.logs.insert(id.to_owned(), Bytes::from(log));
        state.log_changed.notify_waiters();
    }

    /// How execs answer; without a handler every exec exits 0 with no output.
    pub fn set_exec_handler(
        &self,
        handler: impl Fn(&str, &[String]) -> FakeExecResult + Send + Sync + 'static,
    ) {
        self.lock().exec_handler = Some(Arc::new(handler));
    }

    /// Freezes the fake's clock (for created/started/finished times); `None` returns to the real clock.
    pub fn set_time(&self, now: Option<Timestamp>) {
        self.lock().now = now;
    }

    /// The version string `version` returns.
    pub fn set_version(&self, version: &str) {
        self.lock().version = version.to_owned();
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls so far, clearing the record.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.lock().calls)
    }

    /// All containers, by ID.
    pub fn containers(&self) -> Vec<FakeContainer> {
        self.lock().containers.values().cloned().collect()
    }

    /// One container.
    pub fn container(&self, id: &str) -> Option<FakeContainer> {
        self.lock().containers.get(id).cloned()
    }

    /// Records the call and takes a scripted failure for `op`, if any.
    fn enter(&self, op: Op, call: Option<Call>) -> Result<MutexGuard<'_, State>> {
        let mut state = self.lock();
        if let Some(call) = call {
            state.calls.push(call);
        }
        let failure = match &state.down {
            Some(message) => Some(message.clone()),
            None => state.failures.get_mut(&op).and_then(VecDeque::pop_front),
        };
        match failure {
            Some(message) => Err(RuntimeError::Runtime {
                op: "fake",
                target: format!("{op:?}").to_lowercase(),
                message,
            }),
            None => Ok(state),
        }
    }

    fn insert(
        &self,
        state: &mut State,
        name: String,
        image: &str,
        labels: BTreeMap<String, String>,
        network_mode: String,
    ) -> Result<String> {
        let image = state.resolve_image(image).ok_or_else(|| RuntimeError::NotFound {
            kind: "image",
            id: image.to_owned(),
        })?;
        // Docker's name conflict, resolved as DockerRuntime does: the old one goes.
        let taken: Vec<String> = state
            .containers
            .values()
            .filter(|c| c.info.name == name)
            .map(|c| c.info.id.clone())
            .collect();
        for old in taken {
            state.forget(&old);
        }
        state.next_id += 1;
        let id = format!("{:064x}", state.next_id);
        let now = state.now();
        let info = ContainerInfo {
            id: id.clone(),
            name: name.clone(),
            labels: labels.clone(),
            state: ContainerStatus::Created,
            created: now,
            image: image.id.clone(),
            image_id: image.id.clone(),
        };
        let container_state = ContainerState {
            id: id.clone(),
            name,
            status: ContainerStatus::Created,
            exit_code: 0,
            error: String::new(),
            oom_killed: false,
            pid: None,
            created_at: Some(now),
            started_at: None,
            finished_at: None,
            image_id: image.id,
            ip_address: String::new(),
            network_mode,
            labels,
        };
        if let Some(uid) = labels_uid(&info.labels) {
            state.by_uid.entry(uid).or_default().insert(id.clone());
        }
        state.containers.insert(
            id.clone(),
            FakeContainer {
                info,
                state: container_state,
                sandbox: None,
                container: None,
            },
        );
        Ok(id)
    }
}

fn labels_uid(labels: &BTreeMap<String, String>) -> Option<String> {
    labels.get(naming::LABEL_POD_UID).cloned()
}

impl State {
    /// Drops a container and its index entry.
    fn forget(&mut self, id: &str) {
        if let Some(c) = self.containers.remove(id)
            && let Some(uid) = labels_uid(&c.info.labels)
            && let Some(ids) = self.by_uid.get_mut(&uid)
        {
            ids.remove(id);
            if ids.is_empty() {
                self.by_uid.remove(&uid);
            }
        }
    }
    fn now(&self) -> Timestamp {
        self.now.unwrap_or_else(Timestamp::now)
    }

    fn resolve_image(&self, image: &str) -> Option<ImageInfo> {
        self.images
            .get(&naming::normalize_image(image))
            .or_else(|| self.images.values().find(|i| i.id == image))
            .cloned()
    }
}

impl FakeContainer {
    fn set_status(&mut self, status: ContainerStatus) {
        self.info.state = status;
        self.state.status = status;
    }

    fn exit(&mut self, now: Timestamp, exit_code: i64) {
        self.set_status(ContainerStatus::Exited);
        self.state.exit_code = exit_code;
        self.state.finished_at = Some(now);
        self.state.pid = None;
    }
}

fn fake_image(name: &str) -> ImageInfo {
    // A stable fake ID derived from the name, shaped like Docker's.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    ImageInfo {
        id: format!("sha256:{hash:064x}"),
        repo_tags: vec![name.to_owned()],
        ..ImageInfo::default()
    }
}

fn not_found(id: &str) -> RuntimeError {
    RuntimeError::NotFound {
        kind: "container",
        id: id.to_owned(),
    }
}

#[async_trait]
impl ContainerRuntime for FakeRuntime {
    async fn version(&self) -> Result<String> {
        Ok(self.enter(Op::Version, None)?.version.clone())
    }

    async fn ping(&self) -> Result<()> {
        self.enter(Op::Ping, None).map(drop)
    }

    async fn ensure_image(&self, image: &str, pull_policy: PullPolicy) -> Result<ImageInfo> {
        let call = Call::EnsureImage {
            image: image.to_owned(),
            policy: pull_policy,
        };
        let mut state = self.enter(Op::EnsureImage, Some(call))?;
        if !naming::is_valid_image_reference(image) {
            return Err(RuntimeError::InvalidImageName {
                image: image.to_owned(),
            });
        }
        let name = naming::normalize_image(image);
        match (pull_policy, state.images.get(&name)) {
            (PullPolicy::Never, None) => return Err(RuntimeError::ImageNeverPull { image: name }),
            (PullPolicy::Never | PullPolicy::IfNotPresent, Some(found)) => return Ok(found.clone()),
            _ => {}
        }
        state.calls.push(Call::Pull { image: name.clone() });
        if let Some(message) = state.pull_errors.get(&name) {
            return Err(RuntimeError::ImagePull {
                image: name,
                message: message.clone(),
            });
        }
        let info = fake_image(&name);
        state.images.insert(name, info.clone());
        Ok(info)
    }

    async fn create_sandbox(&self, config: &SandboxConfig) -> Result<String> {
        let mut state = self.enter(
            Op::CreateSandbox,
            Some(Call::CreateSandbox(Box::new(config.clone()))),
        )?;
        let name = naming::sandbox_name(&config.pod_name, &config.namespace, &config.uid, config.attempt);
        let labels = naming::sorted(naming::sandbox_labels(config, &self.owner));
        let network_mode = if config.host_network { "host" } else { "default" }.to_owned();
        let id = self.insert(&mut state, name, &config.image, labels, network_mode)?;
        state.containers.get_mut(&id).expect("just inserted").sandbox = Some(config.clone());
        Ok(id)
    }

    async fn create_container(&self, config: &ContainerConfig) -> Result<String> {
        let mut state = self.enter(
            Op::CreateContainer,
            Some(Call::CreateContainer(Box::new(config.clone()))),
        )?;
        if !state.containers.contains_key(&config.sandbox_id) {
            return Err(not_found(&config.sandbox_id));
        }
        let name = naming::container_name(
            &config.name,
            &config.pod_name,
            &config.namespace,
            &config.uid,
            config.restart_count,
        );
        let labels = naming::sorted(naming::container_labels(config, &self.owner));
        let network_mode = format!("container:{}", config.sandbox_id);
        let id = self.insert(&mut state, name, &config.image, labels, network_mode)?;
        state.containers.get_mut(&id).expect("just inserted").container = Some(config.clone());
        Ok(id)
    }

    async fn start(&self, id: &str) -> Result<()> {
        let mut state = self.enter(Op::Start, Some(Call::Start { id: id.to_owned() }))?;
        let now = state.now();
        let pid = 1000 + state.next_id as u32;
        let container = state.containers.get(id).ok_or_else(|| not_found(id))?.clone();
        if let Some(config) = &container.container {
            let sandbox_running = state
                .containers
                .get(&config.sandbox_id)
                .is_some_and(|sandbox| sandbox.state.is_running());
            if !sandbox_running {
                return Err(RuntimeError::Runtime {
                    op: "start container",
                    target: id.to_owned(),
                    message: format!(
                        "cannot join network of a non running container: {}",
                        config.sandbox_id
                    ),
                });
            }
        }
        let crash = container
            .container
            .as_ref()
            .and_then(|config| state.exit_on_start.get(&config.name).copied());
        let is_sandbox = container.info.kind() == Some(ContainerKind::Sandbox);
        let host_network = container
            .sandbox
            .as_ref()
            .is_some_and(|config| config.host_network);
        let sequence = state.next_id;
        let entry = state.containers.get_mut(id).expect("checked above");
        entry.set_status(ContainerStatus::Running);
        entry.state.started_at = Some(now);
        entry.state.finished_at = None;
        entry.state.exit_code = 0;
        entry.state.pid = Some(pid);
        if is_sandbox && !host_network {
            entry.state.ip_address = format!("10.88.{}.{}", (sequence >> 8) & 0xff, sequence & 0xff);
        }
        if let Some(exit_code) = crash {
            entry.exit(now, exit_code);
        }
        Ok(())
    }

    async fn stop_container(&self, id: &str, grace: Duration, signal: Option<&str>) -> Result<()> {
        let call = Call::Stop {
            id: id.to_owned(),
            grace,
            signal: signal.map(str::to_owned),
        };
        let mut state = self.enter(Op::Stop, Some(call))?;
        let now = state.now();
        let exit_code = state.stop_exit_code;
        let container = state.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        if container.state.is_running() {
            container.exit(now, exit_code);
        }
        state.log_changed.notify_waiters();
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut state = self.enter(Op::Remove, Some(Call::Remove { id: id.to_owned() }))?;
        state.forget(id);
        state.logs.remove(id);
        state.log_changed.notify_waiters();
        Ok(())
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>> {
        let state = self.enter(Op::List, None)?;
        let matching = |c: &FakeContainer| filter.matches(&c.info.labels).then(|| c.info.clone());
        Ok(match filter.labels.get(naming::LABEL_POD_UID) {
            Some(uid) => state
                .by_uid
                .get(uid)
                .into_iter()
                .flatten()
                .filter_map(|id| state.containers.get(id))
                .filter_map(matching)
                .collect(),
            None => state.containers.values().filter_map(matching).collect(),
        })
    }

    async fn inspect(&self, id: &str) -> Result<ContainerState> {
        let state = self.enter(Op::Inspect, None)?;
        state
            .containers
            .get(id)
            .map(|c| c.state.clone())
            .ok_or_else(|| not_found(id))
    }

    async fn logs(&self, id: &str, options: &LogOptions) -> Result<LogStream> {
        let state = self.enter(
            Op::Logs,
            Some(Call::Logs {
                id: id.to_owned(),
                options: options.clone(),
            }),
        )?;
        if !state.containers.contains_key(id) {
            return Err(not_found(id));
        }
        let mut output = state.logs.get(id).cloned().unwrap_or_default();
        if let Some(tail) = options.tail {
            let lines: Vec<&[u8]> = output.split_inclusive(|b| *b == b'\n').collect();
            let keep = lines
                .len()
                .saturating_sub(usize::try_from(tail).unwrap_or(usize::MAX));
            output = Bytes::from(lines[keep..].concat());
        }
        if let Some(limit) = options.limit_bytes {
            output.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        let first = stream::iter([Ok(output)]);
        if !options.follow {
            return Ok(first.boxed());
        }
        // Follow: what the log gains after this call, until the container is not running (as Docker's
        // follow ends when the container stops). `limit_bytes` applies to the initial part only.
        let sent = state.logs.get(id).map_or(0, Bytes::len);
        drop(state);
        let fake = self.clone();
        let id = id.to_owned();
        let more = stream::unfold(sent, move |sent| {
            let (fake, id) = (fake.clone(), id.clone());
            async move {
                loop {
                    let notify = fake.lock().log_changed.clone();
                    let notified = notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    {
                        let state = fake.lock();
                        let log = state.logs.get(&id).cloned().unwrap_or_default();
                        if log.len() > sent {
                            return Some((Ok(log.slice(sent..)), log.len()));
                        }
                        let running = state.containers.get(&id).is_some_and(|c| c.state.is_running());
                        if !running {
                            return None;
                        }
                    }
                    notified.await;
                }
            }
        });
        Ok(first.chain(more).boxed())
    }

    async fn exec(&self, id: &str, config: &ExecConfig) -> Result<ExecSession> {
        let call = Call::Exec {
            id: id.to_owned(),
            cmd: config.cmd.clone(),
        };
        let state = self.enter(Op::Exec, Some(call))?;
        let running = state
            .containers
            .get(id)
            .ok_or_else(|| not_found(id))?
            .state
            .is_running();
        if !running {
            return Err(RuntimeError::Runtime {
                op: "exec",
                target: id.to_owned(),
                message: format!("container {id} is not running"),
            });
        }
        let handler = state.exec_handler.clone();
        drop(state);
        let result = handler
            .map(|handler| handler(id, &config.cmd))
            .unwrap_or_default();
        let mut frames = Vec::new();
        for (stream, data) in [
            (StdStream::Stdout, result.stdout),
            (StdStream::Stderr, result.stderr),
        ] {
            if !data.is_empty() {
                // A tty merges stderr into stdout, as Docker does.
                let stream = if config.tty { StdStream::Stdout } else { stream };
                frames.push(Ok(OutputFrame {
                    stream,
                    data: Bytes::from(data),
                }));
            }
        }
        Ok(ExecSession {
            output: stream::iter(frames).boxed(),
            stdin: config.stdin.then(|| Box::pin(tokio::io::sink()) as _),
            control: Box::new(FakeExec {
                exit_code: result.exit_code,
            }),
        })
    }
}

struct FakeExec {
    exit_code: i64,
}

#[async_trait]
impl ExecControl for FakeExec {
    async fn resize(&self, _width: u16, _height: u16) -> Result<()> {
        Ok(())
    }

    async fn exit_code(&self) -> Result<i64> {
        Ok(self.exit_code)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::TryStreamExt;

    use super::super::{CriState, ExecOutput};
    use super::*;

    fn sandbox_config() -> SandboxConfig {
        SandboxConfig {
            pod_name: "web".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            image: DEFAULT_PAUSE_IMAGE.into(),
            ..SandboxConfig::default()
        }
    }

    fn app_config(sandbox_id: &str, restart_count: u32) -> ContainerConfig {
        ContainerConfig {
            pod_name: "web".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            name: "app".into(),
            restart_count,
            sandbox_id: sandbox_id.into(),
            image: "busybox:1.36".into(),
            hash: "h1".into(),
            ..ContainerConfig::default()
        }
    }

    #[tokio::test]
    async fn a_pod_runs_stops_and_is_listed_by_kind_and_uid() {
        let fake = FakeRuntime::new();
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(fake.clone());
        runtime
            .ensure_image("busybox:1.36", PullPolicy::IfNotPresent)
            .await
            .unwrap();
        let sandbox = runtime.create_sandbox(&sandbox_config()).await.unwrap();
        runtime.start(&sandbox).await.unwrap();
        let app = runtime.create_container(&app_config(&sandbox, 0)).await.unwrap();
        runtime.start(&app).await.unwrap();

        let sandboxes = runtime
            .list(&ListFilter::sandboxes().pod_uid("uid-1"))
            .await
            .unwrap();
        assert_eq!(sandboxes.len(), 1);
        assert_eq!(sandboxes[0].name, "k8s_POD_web_default_uid-1_0");
        assert!(
            runtime
                .inspect(&sandbox)
                .await
                .unwrap()
                .ip_address
                .starts_with("10.88.")
        );
        let apps = runtime.list(&ListFilter::containers()).await.unwrap();
        assert_eq!(apps[0].name, "k8s_app_web_default_uid-1_0");
        assert_eq!(apps[0].hash(), Some("h1"));
        assert_eq!(apps[0].restart_count(), Some(0));
        assert_eq!(apps[0].sandbox_id(), Some(sandbox.as_str()));
        assert_eq!(apps[0].labels["io.kubeling.cluster"], "fake");

        runtime
            .stop_container(&app, Duration::from_secs(30), None)
            .await
            .unwrap();
        let state = runtime.inspect(&app).await.unwrap();
        assert_eq!(state.status, ContainerStatus::Exited);
        assert_eq!(state.cri_state(), CriState::Exited { reason: "Completed" });
        assert!(matches!(
            fake.calls().last(),
            Some(Call::Stop { grace, signal: None, .. }) if *grace == Duration::from_secs(30)
        ));
        runtime.remove_container(&app).await.unwrap();
        runtime.remove_container(&app).await.unwrap();
        assert!(runtime.inspect(&app).await.unwrap_err().is_not_found());
    }

    #[tokio::test]
    async fn a_scripted_crash_exits_on_start_and_the_sandbox_must_run() {
        let fake = FakeRuntime::new();
        fake.add_image("busybox:1.36");
        fake.exit_on_start("app", 2);
        let sandbox = fake.create_sandbox(&sandbox_config()).await.unwrap();
        let app = fake.create_container(&app_config(&sandbox, 0)).await.unwrap();
        let err = fake.start(&app).await.unwrap_err();
        assert!(err.to_string().contains("non running container"), "{err}");
        fake.start(&sandbox).await.unwrap();
        fake.start(&app).await.unwrap();
        let state = fake.inspect(&app).await.unwrap();
        assert_eq!((state.status, state.exit_code), (ContainerStatus::Exited, 2));
        assert_eq!(state.cri_state(), CriState::Exited { reason: "Error" });
    }

    #[tokio::test]
    async fn images_follow_the_pull_policy() {
        let fake = FakeRuntime::new();
        let err = fake.ensure_image("nginx", PullPolicy::Never).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "container image \"nginx:latest\" is not present with pull policy of Never"
        );
        fake.fail_pull("nginx", "registry unreachable");
        let err = fake
            .ensure_image("nginx", PullPolicy::IfNotPresent)
            .await
            .unwrap_err();
        assert!(matches!(err, RuntimeError::ImagePull { .. }), "{err}");
        fake.add_image("nginx:latest");
        fake.ensure_image("nginx", PullPolicy::IfNotPresent)
            .await
            .unwrap();
        assert!(fake.ensure_image("Bad Name", PullPolicy::Always).await.is_err());
        let pulls = fake
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Pull { .. }))
            .count();
        assert_eq!(pulls, 1);
    }

    #[tokio::test]
    async fn a_container_cannot_be_created_from_a_missing_image() {
        let fake = FakeRuntime::new();
        let sandbox = fake.create_sandbox(&sandbox_config()).await.unwrap();
        let err = fake.create_container(&app_config(&sandbox, 0)).await.unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }

    #[tokio::test]
    async fn scripted_failures_happen_once_in_order() {
        let fake = FakeRuntime::new();
        fake.fail_next(Op::CreateSandbox, "no space left on device");
        let err = fake.create_sandbox(&sandbox_config()).await.unwrap_err();
        assert!(err.to_string().contains("no space left"), "{err}");
        fake.create_sandbox(&sandbox_config()).await.unwrap();
    }

    #[tokio::test]
    async fn exec_sync_buffers_scripted_output_and_exit_code() {
        let fake = FakeRuntime::new();
        fake.set_exec_handler(|_, cmd| FakeExecResult {
            stdout: cmd.join(" ").into_bytes(),
            stderr: b"warn".to_vec(),
            exit_code: 3,
        });
        let sandbox = fake.create_sandbox(&sandbox_config()).await.unwrap();
        fake.start(&sandbox).await.unwrap();
        let out = fake
            .exec_sync(&sandbox, &["cat".into(), "/ready".into()], None)
            .await
            .unwrap();
        assert_eq!(
            out,
            ExecOutput {
                stdout: b"cat /ready".to_vec(),
                stderr: b"warn".to_vec(),
                exit_code: 3
            }
        );
    }

    #[tokio::test]
    async fn logs_apply_tail_and_limit() {
        let fake = FakeRuntime::new();
        let sandbox = fake.create_sandbox(&sandbox_config()).await.unwrap();
        fake.set_logs(&sandbox, "a\nb\nc\n");
        let read = |options: LogOptions| {
            let fake = fake.clone();
            let sandbox = sandbox.clone();
            async move {
                fake.logs(&sandbox, &options)
                    .await
                    .unwrap()
                    .try_collect::<Vec<_>>()
                    .await
                    .unwrap()
                    .concat()
            }
        };
        assert_eq!(
            read(LogOptions {
                tail: Some(2),
                ..LogOptions::default()
            })
            .await,
            b"b\nc\n"
        );
        assert_eq!(
            read(LogOptions {
                limit_bytes: Some(3),
                ..LogOptions::default()
            })
            .await,
            b"a\nb"
        );
    }
}
