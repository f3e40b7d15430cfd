//! [`DockerRuntime`]: the [`ContainerRuntime`] over the Docker Engine API with bollard 0.21, doing what
//! dockershim did for the kubelet (kubelet-behaviour §8): pause containers as sandboxes, app containers
//! joining their namespaces, names and labels as the only record, `docker stop` semantics for kills.
//!
//! It also owns kubeling's pause image. No registry may be reachable, so the image is built on the spot
//! from the static pause binary that `build.rs` compiles and this crate embeds ([`PAUSE_BINARY`]), with a
//! `FROM scratch` Dockerfile sent to `POST /build` as an in-memory tar ([`DockerRuntime::ensure_pause_image`]).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary, HealthConfig, HostConfig, ImageInspect,
    PortBinding, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, BuildImageOptionsBuilder, CreateContainerOptionsBuilder,
    CreateImageOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder, ResizeContainerTTYOptionsBuilder, StopContainerOptionsBuilder,
    WaitContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use jiff::Timestamp;
use tracing::{debug, info, warn};

use super::naming::{self, LABEL_KUBELING_CLUSTER, LABEL_KUBELING_NODE, LABEL_KUBELING_PAUSE};
use super::{
    ContainerConfig, ContainerInfo, ContainerRuntime, ContainerState, ContainerStatus, ExecConfig,
    ExecControl, ExecSession, ImageInfo, ListFilter, LogOptions, LogStream, OutputFrame, Owner, PullPolicy,
    Result, RuntimeError, SandboxConfig, StdStream,
};

/// The sandbox image kubeling builds for itself. The tag follows the upstream pause version it mirrors
/// (cri-dockerd's default is `registry.k8s.io/pause:3.10`); `-1`: kubeling's pause also understands `--route`.
pub const DEFAULT_PAUSE_IMAGE: &str = "kubeling/pause:3.10-1";

/// The static pause executable compiled by `build.rs` from `pause/pause.c`.
pub const PAUSE_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pause"));

/// SHA-256 of [`PAUSE_BINARY`], hex; the pause image carries it as `io.kubeling.pause`.
pub const PAUSE_BINARY_SHA256: &str = env!("KUBELING_PAUSE_SHA256");

/// bollard's client timeout bounds every request that waits for response headers, `docker stop` included
/// (its default of 120 s makes a stop with a longer grace fail). Five minutes covers `docker stop` for the
/// usual graces; longer ones use kill + wait, whose wait is a stream the timeout does not cut.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

/// Slack between a `docker stop` grace and the client timeout: after the grace Docker still SIGKILLs and
/// waits for the exit before it answers.
const STOP_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// dockershim: `defaultSandboxCPUshares`.
const DEFAULT_SANDBOX_CPU_SHARES: i64 = 2;

/// dockershim `ExecInDocker`: an exec still reported running after its stream ended is polled this often,
/// this many times.
const EXEC_EXIT_POLL_INTERVAL: Duration = Duration::from_secs(2);
const EXEC_EXIT_POLL_TRIES: u32 = 5;

/// The Docker-backed runtime. Cheap to clone (bollard's client is reference counted).
#[derive(Debug, Clone)]
pub struct DockerRuntime {
    docker: Docker,
    owner: Owner,
    pod_network: Option<PodNetwork>,
}

/// The cluster's own Docker network that sandboxes join (see `crate::network`), and the route each sandbox's
/// pause adds to reach Services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetwork {
    /// The Docker network's name.
    pub name: String,
    /// The Service range (`10.96.0.0/12`).
    pub service_cidr: String,
    /// The gateway container's IP on that network, the next hop for the Service range.
    pub gateway_ip: String,
    /// The pause image is kubeling's own (it understands `--route`); another pause image gets no route.
    pub route: bool,
}

impl DockerRuntime {
    /// Connects to the local engine (`DOCKER_HOST` or `/var/run/docker.sock`), raises the client timeout and
    /// negotiates the API version down to what the daemon speaks.
    pub async fn connect(owner: Owner) -> Result<Self> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(|err| runtime_error("connect", "docker", err))?
            .with_timeout(CLIENT_TIMEOUT)
            .negotiate_version()
            .await
            .map_err(|err| runtime_error("negotiate version", "docker", err))?;
        Ok(Self::with_client(docker, owner))
    }

    /// Wraps an existing client; its timeout should be [`CLIENT_TIMEOUT`] or more.
    pub fn with_client(docker: Docker, owner: Owner) -> Self {
        Self {
            docker,
            owner,
            pod_network: None,
        }
    }

    /// Sandboxes created from now on join `network` (instead of Docker's default bridge), and their pause
    /// routes the Service range through the gateway container.
    pub fn with_pod_network(mut self, network: PodNetwork) -> Self {
        self.pod_network = Some(network);
        self
    }

    /// The cluster and node this runtime stamps on and lists.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The bollard client, for the few callers (tests, image listing) that need more than the trait.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// Makes sure the pause image `name` exists, building it from [`PAUSE_BINARY`] when it is missing or was
    /// built from a different binary. An image of that name without our label is someone else's pause image
    /// (say `registry.k8s.io/pause:3.10`, loaded by hand): it is used as it is.
    pub async fn ensure_pause_image(&self, name: &str) -> Result<ImageInfo> {
        self.ensure_embedded_image(
            name,
            LABEL_KUBELING_PAUSE,
            PAUSE_BINARY_SHA256,
            "pause",
            PAUSE_BINARY,
        )
        .await
    }

    /// Makes sure the image `name` holding only the static program `binary` (at `/<file>`, its entrypoint)
    /// exists, building it when missing or when its `label` is not `sha`. An image without the label is used
    /// as it is.
    pub async fn ensure_embedded_image(
        &self,
        name: &str,
        label: &str,
        sha: &str,
        file: &str,
        binary: &'static [u8],
    ) -> Result<ImageInfo> {
        match self.docker.inspect_image(name).await {
            Ok(image) => {
                let image = image_info(image);
                match image.labels.get(label) {
                    Some(old) if old != sha => {
                        info!(image = name, old = %old, new = sha, "rebuilding stale image");
                    }
                    _ => return Ok(image),
                }
            }
            Err(err) if status_code(&err) == Some(404) => {
                info!(image = name, "building image");
            }
            Err(err) => return Err(runtime_error("inspect image", name, err)),
        }
        let context = embedded_build_context(label, sha, file, binary);
        self.build_image_from(name, context).await?;
        self.docker
            .inspect_image(name)
            .await
            .map(image_info)
            .map_err(|err| runtime_error("inspect image", name, err))
    }

    async fn build_image_from(&self, name: &str, context: std::io::Result<Vec<u8>>) -> Result<()> {
        let failed = |message: String| RuntimeError::PauseImageBuild {
            image: name.to_owned(),
            message,
        };
        let context = context.map_err(|err| failed(format!("writing build context: {err}")))?;
        // rm + forcerm: the classic builder leaves an intermediate container per step otherwise. nocache: the
        // build is one small COPY, and a cache hit would share an image with other tags, which a concurrent
        // `docker rmi` of the last of those tags can delete between the hit and our tagging.
        let options = BuildImageOptionsBuilder::new()
            .dockerfile("Dockerfile")
            .t(name)
            .rm(true)
            .forcerm(true)
            .nocache(true)
            .build();
        let mut progress = self
            .docker
            .build_image(options, None, Some(bollard::body_full(context.into())));
        while let Some(step) = progress.next().await {
            let step = step.map_err(|err| failed(err.to_string()))?;
            if let Some(detail) = step.error_detail {
                return Err(failed(
                    detail.message.unwrap_or_else(|| "unknown build error".to_owned()),
                ));
            }
            if let Some(line) = step
                .stream
                .as_deref()
                .map(str::trim_end)
                .filter(|l| !l.is_empty())
            {
                debug!(image = name, "{line}");
            }
        }
        Ok(())
    }

    async fn create_named(&self, name: &str, body: ContainerCreateBody) -> Result<String> {
        let create = |body| {
            let options = CreateContainerOptionsBuilder::new().name(name).build();
            self.docker.create_container(Some(options), body)
        };
        match create(body.clone()).await {
            Ok(created) => Ok(created.id),
            // dockershim: a name conflict is a leftover of an earlier attempt whose create answer was lost;
            // remove it and try once more.
            Err(err) if status_code(&err) == Some(409) => {
                warn!(
                    container = name,
                    "name in use, removing the old container and retrying"
                );
                self.remove_container(name).await?;
                create(body)
                    .await
                    .map(|created| created.id)
                    .map_err(|err| runtime_error("create container", name, err))
            }
            Err(err) if status_code(&err) == Some(404) => Err(RuntimeError::NotFound {
                kind: "image",
                id: body.image.unwrap_or_default(),
            }),
            Err(err) => Err(runtime_error("create container", name, err)),
        }
    }

    /// The container's stop signal: its config's `StopSignal` (set from the image's `STOPSIGNAL`), else
    /// SIGTERM, as `docker stop` chooses.
    async fn stop_signal(&self, id: &str) -> Result<String> {
        let inspected = self.inspect_raw(id).await?;
        Ok(inspected
            .config
            .and_then(|config| config.stop_signal)
            .filter(|signal| !signal.is_empty())
            .unwrap_or_else(|| "SIGTERM".to_owned()))
    }

    /// Sends a signal; false when the container was not running (Docker answers 409).
    async fn kill(&self, id: &str, signal: &str) -> Result<bool> {
        let options = KillContainerOptionsBuilder::new().signal(signal).build();
        match self.docker.kill_container(id, Some(options)).await {
            Ok(()) => Ok(true),
            Err(err) if status_code(&err) == Some(409) => Ok(false),
            Err(err) => Err(not_found_or("kill container", "container", id, err)),
        }
    }

    /// Waits until the container is not running. The wait is a stream, so bollard's timeout does not end it.
    async fn wait_not_running(&self, id: &str) -> Result<()> {
        let options = WaitContainerOptionsBuilder::new()
            .condition("not-running")
            .build();
        let mut wait = self.docker.wait_container(id, Some(options));
        while let Some(item) = wait.next().await {
            match item {
                Ok(_) | Err(BollardError::DockerContainerWaitError { .. }) => {}
                Err(err) => return Err(not_found_or("wait container", "container", id, err)),
            }
        }
        Ok(())
    }

    async fn inspect_raw(&self, id: &str) -> Result<ContainerInspectResponse> {
        self.docker
            .inspect_container(id, None)
            .await
            .map_err(|err| not_found_or("inspect container", "container", id, err))
    }
}

#[async_trait]
impl ContainerRuntime for DockerRuntime {
    async fn version(&self) -> Result<String> {
        let version = self
            .docker
            .version()
            .await
            .map_err(|err| runtime_error("version", "docker", err))?;
        Ok(format!("docker://{}", version.version.unwrap_or_default()))
    }

    async fn ping(&self) -> Result<()> {
        self.docker
            .ping()
            .await
            .map(drop)
            .map_err(|err| runtime_error("ping", "docker", err))
    }

    async fn ensure_image(&self, image: &str, pull_policy: PullPolicy) -> Result<ImageInfo> {
        if !naming::is_valid_image_reference(image) {
            return Err(RuntimeError::InvalidImageName {
                image: image.to_owned(),
            });
        }
        let image = naming::normalize_image(image);
        let present = match self.docker.inspect_image(&image).await {
            Ok(found) => Some(image_info(found)),
            Err(err) if status_code(&err) == Some(404) => None,
            Err(err) => return Err(runtime_error("inspect image", &image, err)),
        };
        match (pull_policy, &present) {
            (PullPolicy::Never, None) => return Err(RuntimeError::ImageNeverPull { image }),
            (PullPolicy::Never | PullPolicy::IfNotPresent, Some(found)) => return Ok(found.clone()),
            _ => {}
        }
        let pull_failed = |message: String| RuntimeError::ImagePull {
            image: image.clone(),
            message,
        };
        let (name, tag, digest) = naming::split_image_reference(&image);
        let mut options = CreateImageOptionsBuilder::new();
        options = match (tag, digest) {
            (_, Some(_)) => options.from_image(&image),
            (Some(tag), None) => options.from_image(name).tag(tag),
            (None, None) => options.from_image(&image),
        };
        let mut pull = self.docker.create_image(Some(options.build()), None, None);
        let mut failure = None;
        while let Some(step) = pull.next().await {
            match step {
                Err(err) => {
                    failure = Some(error_message(&err));
                    break;
                }
                Ok(step) => {
                    if let Some(detail) = step.error_detail {
                        failure = Some(detail.message.unwrap_or_default());
                        break;
                    }
                }
            }
        }
        if let Some(message) = failure {
            // Deliberate difference from upstream: with `Always` (`:latest` or untagged), an image the
            // developer built into this Docker is used when the pull fails, because a local cluster's
            // images usually exist nowhere else (kind needs a load step and IfNotPresent for this).
            if let Some(found) = present {
                warn!(image = %image, error = %message, "pull failed; using the image present locally");
                return Ok(found);
            }
            return Err(pull_failed(message));
        }
        self.docker
            .inspect_image(&image)
            .await
            .map(image_info)
            .map_err(|err| pull_failed(error_message(&err)))
    }

    async fn create_sandbox(&self, config: &SandboxConfig) -> Result<String> {
        let name = naming::sandbox_name(&config.pod_name, &config.namespace, &config.uid, config.attempt);
        let (exposed_ports, port_bindings) = port_bindings(config);
        let dns = &config.dns;
        // The cluster's network when there is one (pause then routes the Service range to the gateway and
        // needs NET_ADMIN for that, app containers do not get it); else Docker's default bridge.
        let network = self.pod_network.as_ref().filter(|_| !config.host_network);
        let route = network.filter(|n| n.route);
        let network_mode = match (config.host_network, network) {
            (true, _) => "host".to_owned(),
            (false, Some(n)) => n.name.clone(),
            (false, None) => "default".to_owned(),
        };
        let host_config = HostConfig {
            network_mode: Some(network_mode),
            cap_add: route.map(|_| vec!["NET_ADMIN".to_owned()]),
            ipc_mode: Some(if config.host_ipc { "host" } else { "shareable" }.to_owned()),
            pid_mode: config.host_pid.then(|| "host".to_owned()),
            port_bindings,
            dns: (!dns.servers.is_empty()).then(|| dns.servers.clone()),
            dns_search: (!dns.searches.is_empty()).then(|| dns.searches.clone()),
            dns_options: (!dns.options.is_empty()).then(|| dns.options.clone()),
            extra_hosts: (!config.extra_hosts.is_empty()).then(|| config.extra_hosts.clone()),
            sysctls: (!config.sysctls.is_empty()).then(|| config.sysctls.clone().into_iter().collect()),
            // Upstream sets OomScoreAdj = -998 (qos `PodInfraOOMAdj`). Not here: nested and rootless Docker
            // refuse a negative score at start ("can't get final child's PID"), and pause uses ~1 MiB anyway.
            cpu_shares: Some(DEFAULT_SANDBOX_CPU_SHARES),
            restart_policy: Some(no_restart()),
            ..HostConfig::default()
        };
        let body = ContainerCreateBody {
            image: Some(config.image.clone()),
            hostname: config
                .hostname
                .as_deref()
                .filter(|_| !config.host_network)
                .map(|hostname| naming::truncate_pod_hostname(hostname).to_owned()),
            domainname: config.domainname.clone().filter(|_| !config.host_network),
            labels: Some(naming::sandbox_labels(config, &self.owner)),
            cmd: route.map(|n| vec!["--route".to_owned(), n.service_cidr.clone(), n.gateway_ip.clone()]),
            exposed_ports,
            host_config: Some(host_config),
            ..ContainerCreateBody::default()
        };
        self.create_named(&name, body).await
    }

    async fn create_container(&self, config: &ContainerConfig) -> Result<String> {
        let name = naming::container_name(
            &config.name,
            &config.pod_name,
            &config.namespace,
            &config.uid,
            config.restart_count,
        );
        let sandbox = format!("container:{}", config.sandbox_id);
        let resources = &config.resources;
        let security = &config.security;
        let host_config = HostConfig {
            network_mode: Some(sandbox.clone()),
            ipc_mode: Some(sandbox.clone()),
            pid_mode: if config.host_pid {
                Some("host".to_owned())
            } else if let Some(target) = &config.target_container_id {
                Some(format!("container:{target}"))
            } else if config.share_process_namespace {
                Some(sandbox)
            } else {
                None
            },
            uts_mode: config.host_network.then(|| "host".to_owned()),
            binds: (!config.mounts.is_empty()).then(|| {
                config
                    .mounts
                    .iter()
                    .map(|m| {
                        let mode = if m.read_only { ":ro" } else { "" };
                        format!("{}:{}{mode}", m.host_path, m.container_path)
                    })
                    .collect()
            }),
            memory: resources.memory_limit,
            // No swap beyond the limit, as the kubelet sets MemorySwap = Memory.
            memory_swap: resources.memory_limit,
            nano_cpus: resources.cpu_limit_millis.map(naming::milli_cpu_to_nano_cpus),
            cpu_shares: Some(naming::milli_cpu_to_shares(
                resources.cpu_request_millis.unwrap_or(0),
            )),
            privileged: Some(security.privileged),
            cap_add: (!security.cap_add.is_empty()).then(|| security.cap_add.clone()),
            cap_drop: (!security.cap_drop.is_empty()).then(|| security.cap_drop.clone()),
            readonly_rootfs: Some(security.readonly_rootfs),
            // The kubelet restarts containers, never Docker.
            restart_policy: Some(no_restart()),
            // emptyDir with medium Memory.
            tmpfs: (!config.tmpfs.is_empty()).then(|| {
                config
                    .tmpfs
                    .iter()
                    .map(|t| {
                        let mut o = Vec::new();
                        if let Some(s) = t.size_bytes {
                            o.push(format!("size={s}"));
                        }
                        if t.read_only {
                            o.push("ro".to_owned());
                        }
                        (t.container_path.clone(), o.join(","))
                    })
                    .collect()
            }),
            ..HostConfig::default()
        };
        let body = ContainerCreateBody {
            image: Some(config.image.clone()),
            entrypoint: (!config.command.is_empty()).then(|| config.command.clone()),
            cmd: (!config.args.is_empty()).then(|| config.args.clone()),
            env: Some(config.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: config.working_dir.clone().filter(|dir| !dir.is_empty()),
            user: security.user.clone(),
            tty: Some(config.tty),
            open_stdin: Some(config.stdin),
            stdin_once: Some(config.stdin_once),
            attach_stdin: Some(config.stdin),
            labels: Some(naming::container_labels(config, &self.owner)),
            // The image's HEALTHCHECK is off: probes are the kubelet's.
            healthcheck: Some(HealthConfig {
                test: Some(vec!["NONE".to_owned()]),
                ..HealthConfig::default()
            }),
            host_config: Some(host_config),
            ..ContainerCreateBody::default()
        };
        self.create_named(&name, body).await
    }

    async fn start(&self, id: &str) -> Result<()> {
        self.docker
            .start_container(id, None)
            .await
            .map_err(|err| match status_code(&err) {
                Some(404) => RuntimeError::NotFound {
                    kind: "container",
                    id: id.to_owned(),
                },
                _ => RuntimeError::Runtime {
                    op: "start container",
                    target: id.to_owned(),
                    // dockershim rewrites Docker's message to the one kubectl users know.
                    message: error_message(&err).replace("executable file not found", "executable not found"),
                },
            })
    }

    async fn stop_container(&self, id: &str, grace: Duration, signal: Option<&str>) -> Result<()> {
        let grace_secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        if signal.is_none() && grace + STOP_TIMEOUT_MARGIN <= self.docker.timeout() {
            // The upstream path: one `docker stop -t <grace>` (stop signal, then SIGKILL).
            let options = StopContainerOptionsBuilder::new()
                .t(grace_secs.min(i32::MAX as u64) as i32)
                .build();
            return self
                .docker
                .stop_container(id, Some(options))
                .await
                .map_err(|err| not_found_or("stop container", "container", id, err));
        }
        // What `docker stop` does, spelled out: for graces past the client timeout, and for a chosen signal
        // (the `signal` query parameter of stop needs API 1.42; Docker 20.10 speaks 1.41).
        let signal = match signal {
            Some(signal) => signal.to_owned(),
            None => self.stop_signal(id).await?,
        };
        if !self.kill(id, &signal).await? {
            return Ok(());
        }
        if tokio::time::timeout(grace, self.wait_not_running(id))
            .await
            .is_ok()
        {
            return Ok(());
        }
        debug!(container = id, ?grace, "grace period over, sending SIGKILL");
        if self.kill(id, "SIGKILL").await? {
            tokio::time::timeout(self.docker.timeout(), self.wait_not_running(id))
                .await
                .map_err(|_| RuntimeError::Runtime {
                    op: "stop container",
                    target: id.to_owned(),
                    message: "still running after SIGKILL".to_owned(),
                })??;
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(err) if status_code(&err) == Some(404) => Ok(()),
            Err(err) => Err(runtime_error("remove container", id, err)),
        }
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>> {
        let mut labels = vec![
            format!("{LABEL_KUBELING_CLUSTER}={}", self.owner.cluster),
            format!("{LABEL_KUBELING_NODE}={}", self.owner.node),
        ];
        if let Some(kind) = filter.kind {
            labels.push(format!("{}={}", naming::LABEL_CONTAINER_TYPE, kind.as_label()));
        }
        labels.extend(filter.labels.iter().map(|(k, v)| format!("{k}={v}")));
        let filters = HashMap::from([("label", labels)]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let found = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|err| runtime_error("list containers", &self.owner.cluster, err))?;
        Ok(found.into_iter().filter_map(container_info).collect())
    }

    async fn inspect(&self, id: &str) -> Result<ContainerState> {
        Ok(container_state(self.inspect_raw(id).await?))
    }

    async fn write_resolv_conf(&self, sandbox_id: &str, content: &str) -> Result<()> {
        let failed = |message: String| RuntimeError::Runtime {
            op: "write resolv.conf",
            target: sandbox_id.to_owned(),
            message,
        };
        let path = self
            .inspect_raw(sandbox_id)
            .await?
            .resolv_conf_path
            .filter(|p| !p.is_empty())
            .ok_or_else(|| failed("no resolv.conf path".to_owned()))?;
        // A daemon whose files this process cannot reach (remote, rootless, Docker Desktop's VM) keeps the
        // file Docker wrote from the same settings.
        tokio::fs::write(&path, content)
            .await
            .map_err(|e| failed(format!("{path}: {e}")))
    }

    async fn logs(&self, id: &str, options: &LogOptions) -> Result<LogStream> {
        // Docker reports a missing container only inside the stream; ask first so callers get NotFound.
        self.inspect_raw(id).await?;
        // LogsOptions defaults to neither stream: both must be asked for.
        let mut builder = LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .follow(options.follow)
            .timestamps(options.timestamps);
        if let Some(tail) = options.tail {
            builder = builder.tail(&tail.to_string());
        }
        if let Some(since) = options.since {
            // Whole seconds only (Docker's `since` is an integer here), so round down to include the second.
            builder = builder.since(since.as_second().clamp(0, i64::from(i32::MAX)) as i32);
        }
        let owned_id = id.to_owned();
        let output = self
            .docker
            .logs(id, Some(builder.build()))
            .map(move |item| match item {
                Ok(frame) => Ok(frame.into_bytes()),
                Err(err) => Err(runtime_error("read logs", &owned_id, err)),
            });
        Ok(match options.limit_bytes {
            None => output.boxed(),
            Some(limit) => limit_bytes(output, limit),
        })
    }

    async fn copy_file(&self, id: &str, path: &str, mode: u32, data: &[u8]) -> Result<()> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let dir = if dir.is_empty() { "/" } else { dir };
        let mut archive = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        let tar = archive
            .append_data(&mut header, name, data)
            .and_then(|()| archive.into_inner())
            .map_err(|err| RuntimeError::Runtime {
                op: "copy",
                target: id.to_owned(),
                message: err.to_string(),
            })?;
        let options = bollard::query_parameters::UploadToContainerOptions {
            path: dir.to_owned(),
            ..Default::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|err| not_found_or("copy", "container", id, err))
    }

    async fn exec(&self, id: &str, config: &ExecConfig) -> Result<ExecSession> {
        let create = CreateExecOptions {
            cmd: Some(config.cmd.clone()),
            attach_stdin: Some(config.stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(config.tty),
            ..CreateExecOptions::default()
        };
        let exec = self
            .docker
            .create_exec(id, create)
            .await
            .map_err(|err| not_found_or("exec", "container", id, err))?;
        let start = StartExecOptions {
            detach: false,
            tty: config.tty,
            output_capacity: None,
        };
        let started = self
            .docker
            .start_exec(&exec.id, Some(start))
            .await
            .map_err(|err| runtime_error("exec", id, err))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(RuntimeError::Runtime {
                op: "exec",
                target: id.to_owned(),
                message: "docker started the exec detached".to_owned(),
            });
        };
        let output = output_frames(output, "exec output", id);
        Ok(ExecSession {
            output,
            stdin: config.stdin.then_some(input),
            control: Box::new(DockerExec {
                docker: self.docker.clone(),
                exec_id: exec.id,
            }),
        })
    }

    async fn attach(&self, id: &str, config: &ExecConfig) -> Result<ExecSession> {
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .logs(false)
            .stdin(config.stdin)
            .stdout(true)
            .stderr(true)
            .build();
        let attached = self
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(|err| not_found_or("attach", "container", id, err))?;
        let output = output_frames(attached.output, "attach output", id);
        // Docker ends an attach's output as soon as its stdin closes, unless the container has StdinOnce
        // and no TTY (moby `container/stream/attach.go`): then the process gets EOF and its output goes on.
        // Otherwise the client's end of input must not cut what the process still prints (`kubectl debug
        // -i` piping a script), so the half-close is kept back until the session ends.
        let config_of = self
            .docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|c| c.config);
        let forwards_eof = config_of
            .as_ref()
            .is_some_and(|c| c.stdin_once == Some(true) && c.tty != Some(true));
        let input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>> = if forwards_eof {
            attached.input
        } else {
            Box::pin(KeepOpen(attached.input))
        };
        Ok(ExecSession {
            output,
            stdin: config.stdin.then_some(input),
            control: Box::new(DockerAttach {
                docker: self.docker.clone(),
                id: id.to_owned(),
            }),
        })
    }
}

/// A writer whose shutdown does nothing: the connection closes when it is dropped.
struct KeepOpen(std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>);

impl tokio::io::AsyncWrite for KeepOpen {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }
}

/// Docker's multiplexed output as stdout/stderr frames (stdin echoes dropped), shared by exec and attach.
fn output_frames(
    output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = std::result::Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    op: &'static str,
    id: &str,
) -> futures_util::stream::BoxStream<'static, Result<OutputFrame>> {
    let owned_id = id.to_owned();
    output
        .map_err(move |err| runtime_error(op, &owned_id, err))
        .try_filter_map(|frame| async move {
            Ok(match frame {
                LogOutput::StdOut { message } | LogOutput::Console { message } => Some(OutputFrame {
                    stream: StdStream::Stdout,
                    data: message,
                }),
                LogOutput::StdErr { message } => Some(OutputFrame {
                    stream: StdStream::Stderr,
                    data: message,
                }),
                LogOutput::StdIn { .. } => None,
            })
        })
        .boxed()
}

/// Resize and exit code of an attach: the container's own TTY and exit code.
struct DockerAttach {
    docker: Docker,
    id: String,
}

#[async_trait]
impl ExecControl for DockerAttach {
    async fn resize(&self, width: u16, height: u16) -> Result<()> {
        let options = ResizeContainerTTYOptionsBuilder::new()
            .w(i32::from(width))
            .h(i32::from(height))
            .build();
        self.docker
            .resize_container_tty(&self.id, options)
            .await
            .map_err(|err| not_found_or("resize", "container", &self.id, err))
    }

    async fn exit_code(&self) -> Result<i64> {
        // The stream ends when the process exits (its exit code) or when we detach (still running: 0).
        let inspected = self
            .docker
            .inspect_container(
                &self.id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(|err| not_found_or("inspect", "container", &self.id, err))?;
        let state = inspected.state.unwrap_or_default();
        if state.running == Some(true) {
            Ok(0)
        } else {
            Ok(state.exit_code.unwrap_or(0))
        }
    }
}

/// Resize and exit code of one Docker exec.
struct DockerExec {
    docker: Docker,
    exec_id: String,
}

#[async_trait]
impl ExecControl for DockerExec {
    async fn resize(&self, width: u16, height: u16) -> Result<()> {
        self.docker
            .resize_exec(&self.exec_id, ResizeExecOptions { height, width })
            .await
            .map_err(|err| not_found_or("resize exec", "exec", &self.exec_id, err))
    }

    async fn exit_code(&self) -> Result<i64> {
        for attempt in 0..=EXEC_EXIT_POLL_TRIES {
            let inspected = self
                .docker
                .inspect_exec(&self.exec_id)
                .await
                .map_err(|err| not_found_or("inspect exec", "exec", &self.exec_id, err))?;
            if inspected.running != Some(true) {
                return Ok(inspected.exit_code.unwrap_or(-1));
            }
            if attempt < EXEC_EXIT_POLL_TRIES {
                tokio::time::sleep(EXEC_EXIT_POLL_INTERVAL).await;
            }
        }
        Err(RuntimeError::Runtime {
            op: "exec exit code",
            target: self.exec_id.clone(),
            message: "exec still running after its output ended".to_owned(),
        })
    }
}

/// Ends the stream after `limit` bytes, without waiting for more output once the limit is reached.
fn limit_bytes(
    inner: impl futures_util::Stream<Item = Result<Bytes>> + Send + 'static,
    limit: u64,
) -> LogStream {
    stream::unfold((Box::pin(inner), limit), |(mut inner, left)| async move {
        if left == 0 {
            return None;
        }
        let item = inner.next().await?;
        Some(match item {
            Ok(chunk) => {
                let take = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                (Ok(chunk.slice(..take)), (inner, left - take as u64))
            }
            Err(err) => (Err(err), (inner, left)),
        })
    })
    .boxed()
}

/// The build context of the pause image: the Dockerfile and the binary.
#[cfg(test)]
fn pause_build_context() -> std::io::Result<Vec<u8>> {
    embedded_build_context(LABEL_KUBELING_PAUSE, PAUSE_BINARY_SHA256, "pause", PAUSE_BINARY)
}

/// The build context of an image holding one static program: the Dockerfile and the binary.
fn embedded_build_context(label: &str, sha: &str, file: &str, binary: &[u8]) -> std::io::Result<Vec<u8>> {
    let dockerfile = format!(
        "FROM scratch\nLABEL {label}=\"{sha}\"\nCOPY {file} /{file}\n\
         ENTRYPOINT [\"/{file}\"]\n"
    );
    let mut archive = tar::Builder::new(Vec::new());
    for (path, mode, data) in [
        ("Dockerfile", 0o644, dockerfile.as_bytes()),
        (file, 0o755, binary),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        archive.append_data(&mut header, path, data)?;
    }
    archive.into_inner()
}

fn no_restart() -> RestartPolicy {
    RestartPolicy {
        name: Some(RestartPolicyNameEnum::NO),
        maximum_retry_count: None,
    }
}

type PortMap = HashMap<String, Option<Vec<PortBinding>>>;

/// `ExposedPorts` and `PortBindings` for the sandbox's hostPorts (they only take effect in bridge mode).
fn port_bindings(config: &SandboxConfig) -> (Option<Vec<String>>, Option<PortMap>) {
    let ports: Vec<_> = config.port_mappings.iter().filter(|p| p.host_port != 0).collect();
    if ports.is_empty() {
        return (None, None);
    }
    let mut bindings: PortMap = HashMap::new();
    for port in &ports {
        let key = format!("{}/{}", port.container_port, port.protocol.as_docker());
        let binding = PortBinding {
            host_ip: port.host_ip.clone(),
            host_port: Some(port.host_port.to_string()),
        };
        bindings
            .entry(key)
            .or_insert_with(|| Some(Vec::new()))
            .get_or_insert_with(Vec::new)
            .push(binding);
    }
    let mut exposed: Vec<String> = bindings.keys().cloned().collect();
    exposed.sort();
    (Some(exposed), Some(bindings))
}

fn image_info(image: ImageInspect) -> ImageInfo {
    let config = image.config.unwrap_or_default();
    ImageInfo {
        id: image.id.unwrap_or_default(),
        repo_tags: image.repo_tags.unwrap_or_default(),
        repo_digests: image.repo_digests.unwrap_or_default(),
        size: image.size.unwrap_or_default(),
        entrypoint: config.entrypoint.unwrap_or_default(),
        cmd: config.cmd.unwrap_or_default(),
        working_dir: config.working_dir.unwrap_or_default(),
        user: config.user.unwrap_or_default(),
        stop_signal: config.stop_signal.filter(|s| !s.is_empty()),
        labels: config.labels.unwrap_or_default().into_iter().collect(),
    }
}

fn container_info(summary: ContainerSummary) -> Option<ContainerInfo> {
    let name = summary
        .names
        .unwrap_or_default()
        .into_iter()
        .next()
        .unwrap_or_default();
    Some(ContainerInfo {
        id: summary.id?,
        name: name.trim_start_matches('/').to_owned(),
        labels: naming::sorted(summary.labels.unwrap_or_default()),
        state: summary.state.map_or(ContainerStatus::Unknown, |s| {
            ContainerStatus::from_docker(s.as_ref())
        }),
        created: Timestamp::from_second(summary.created.unwrap_or_default()).unwrap_or(Timestamp::UNIX_EPOCH),
        image: summary.image.unwrap_or_default(),
        image_id: summary.image_id.unwrap_or_default(),
    })
}

fn container_state(inspected: ContainerInspectResponse) -> ContainerState {
    let state = inspected.state.unwrap_or_default();
    let network_mode = inspected
        .host_config
        .and_then(|host| host.network_mode)
        .unwrap_or_default();
    let networks = inspected
        .network_settings
        .and_then(|settings| settings.networks)
        .unwrap_or_default();
    // Docker 20.10 also has a top-level NetworkSettings.IPAddress, which bollard's 1.53 models no longer
    // carry; the bridge endpoint holds the same address.
    let ip_address = networks
        .get("bridge")
        .into_iter()
        .chain(networks.values())
        .find_map(|endpoint| endpoint.ip_address.clone().filter(|ip| !ip.is_empty()))
        .unwrap_or_default();
    ContainerState {
        id: inspected.id.unwrap_or_default(),
        name: inspected
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_owned(),
        status: state.status.map_or(ContainerStatus::Unknown, |s| {
            ContainerStatus::from_docker(s.as_ref())
        }),
        exit_code: state.exit_code.unwrap_or_default(),
        error: state.error.unwrap_or_default(),
        oom_killed: state.oom_killed.unwrap_or_default(),
        pid: state
            .pid
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|pid| *pid != 0),
        created_at: inspected.created.as_deref().and_then(parse_docker_time),
        started_at: state.started_at.as_deref().and_then(parse_docker_time),
        finished_at: state.finished_at.as_deref().and_then(parse_docker_time),
        image_id: inspected.image.unwrap_or_default(),
        ip_address,
        network_mode,
        labels: inspected
            .config
            .and_then(|config| config.labels)
            .map(naming::sorted)
            .unwrap_or_default(),
    }
}

/// Docker writes `0001-01-01T00:00:00Z` for "never"; that and anything unparsable is `None`.
fn parse_docker_time(text: &str) -> Option<Timestamp> {
    text.parse::<Timestamp>()
        .ok()
        .filter(|ts| *ts > Timestamp::UNIX_EPOCH)
}

fn status_code(err: &BollardError) -> Option<u16> {
    match err {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Docker's own message when there is one, not bollard's wrapping of it.
fn error_message(err: &BollardError) -> String {
    match err {
        BollardError::DockerResponseServerError { message, .. } => message.clone(),
        BollardError::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

fn runtime_error(op: &'static str, target: &str, err: BollardError) -> RuntimeError {
    RuntimeError::Runtime {
        op,
        target: target.to_owned(),
        message: error_message(&err),
    }
}

fn not_found_or(op: &'static str, kind: &'static str, id: &str, err: BollardError) -> RuntimeError {
    if status_code(&err) == Some(404) {
        RuntimeError::NotFound {
            kind,
            id: id.to_owned(),
        }
    } else {
        runtime_error(op, id, err)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::runtime::{PortMapping, Protocol};

    #[test]
    fn pause_binary_is_embedded_and_hashed() {
        assert_eq!(&PAUSE_BINARY[..4], b"\x7fELF");
        assert_eq!(PAUSE_BINARY_SHA256.len(), 64);
    }

    #[test]
    fn pause_context_holds_dockerfile_and_executable_binary() {
        let context = pause_build_context().unwrap();
        let mut archive = tar::Archive::new(context.as_slice());
        let mut seen = BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mode = entry.header().mode().unwrap();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
            seen.insert(entry.path().unwrap().display().to_string(), (mode, data));
        }
        let dockerfile = String::from_utf8(seen["Dockerfile"].1.clone()).unwrap();
        assert!(dockerfile.starts_with("FROM scratch\n"));
        assert!(dockerfile.contains(&format!("io.kubeling.pause=\"{PAUSE_BINARY_SHA256}\"")));
        assert!(dockerfile.contains("ENTRYPOINT [\"/pause\"]"));
        assert_eq!(seen["pause"].0, 0o755);
        assert_eq!(seen["pause"].1, PAUSE_BINARY);
    }

    #[test]
    fn host_ports_become_exposed_ports_and_bindings() {
        let config = SandboxConfig {
            port_mappings: vec![
                PortMapping {
                    container_port: 80,
                    host_port: 8080,
                    protocol: Protocol::Tcp,
                    host_ip: None,
                },
                PortMapping {
                    container_port: 53,
                    host_port: 5353,
                    protocol: Protocol::Udp,
                    host_ip: None,
                },
                PortMapping {
                    container_port: 90,
                    host_port: 0,
                    protocol: Protocol::Tcp,
                    host_ip: None,
                },
            ],
            ..SandboxConfig::default()
        };
        let (exposed, bindings) = port_bindings(&config);
        assert_eq!(exposed.unwrap(), vec!["53/udp".to_owned(), "80/tcp".to_owned()]);
        let bindings = bindings.unwrap();
        assert_eq!(
            bindings["80/tcp"].as_ref().unwrap()[0].host_port.as_deref(),
            Some("8080")
        );
        assert!(!bindings.contains_key("90/tcp"));
        assert_eq!(port_bindings(&SandboxConfig::default()), (None, None));
    }

    #[test]
    fn docker_zero_time_means_never() {
        assert_eq!(parse_docker_time("0001-01-01T00:00:00Z"), None);
        assert_eq!(
            parse_docker_time("2024-05-01T10:00:00.123456789Z"),
            Some("2024-05-01T10:00:00.123456789Z".parse().unwrap())
        );
    }

    #[tokio::test]
    async fn limit_bytes_stops_at_the_limit_without_waiting_for_more() {
        let chunks = stream::iter([
            Ok(Bytes::from_static(b"hello ")),
            Ok(Bytes::from_static(b"world")),
        ])
        .chain(stream::pending());
        let out: Vec<Bytes> = limit_bytes(chunks, 8).try_collect().await.unwrap();
        assert_eq!(out.concat(), b"hello wo");
    }
}
