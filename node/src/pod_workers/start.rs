//! Starting a pod: its sandbox and its containers (upstream `startContainer`).

use k8s_openapi::api::core::v1::LifecycleHandler;

use super::kill::container_ref;
use super::*;

impl Worker {
    /// upstream: postStart runs synchronously right after the start, so the status shows the container
    /// waiting until it returns. A failure kills the container (`FailedPostStartHook`) and leaves the
    /// waiting reason `PostStartHookError`; the restart follows the restart policy. A deletion (or the
    /// kubelet stopping) interrupts a hook that hangs.
    async fn post_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        id: &str,
        hook: &LifecycleHandler,
        pod_ip: Option<&str>,
    ) {
        let outcome = {
            let interrupted = self.interrupted();
            tokio::select! {
                r = self.ops.run_hook(pod, c, id, hook, pod_ip) => Some(r),
                _ = interrupted => None,
            }
        };
        // A deletion ends the hook: terminate() stops the container with the deletion's grace. The kubelet
        // stopping leaves it running, as every container.
        let Some(Err(msg)) = outcome else { return };
        tracing::info!(pod = %pod.metadata.name.as_deref().unwrap_or(""), container = %c.name, %msg, "postStart hook failed");
        let r = container_ref(pod, &c.name);
        self.k.recorder.emit(
            r,
            EventType::Warning,
            "FailedPostStartHook",
            "PostStartHook failed".to_owned(),
        );
        self.ops
            .kill_container(pod, id, &c.name, Some("FailedPostStartHook"), None, None)
            .await;
        self.waiting.insert(
            c.name.clone(),
            WaitingReason {
                reason: "PostStartHookError".into(),
                message: Some(msg),
            },
        );
    }

    /// The node file behind a container instance's termination message, created empty.
    fn termination_message_file(&self, name: &str, restart_count: u32) -> Result<std::path::PathBuf, String> {
        let host = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir).map_err(|e| e.to_string())?;
        let dir = host.pod_dir(&self.uid).map_err(|e| e.to_string())?;
        let path = crate::termination::message_file(&dir, name, restart_count);
        crate::termination::prepare(&path)
            .map_err(|e| format!("creating the termination message file {}: {e}", path.display()))?;
        Ok(path)
    }

    pub(super) async fn create_sandbox(
        &mut self,
        pod: &Pod,
        attempt: u32,
    ) -> Result<ObservedSandbox, String> {
        let spec = pod.spec.clone().unwrap_or_default();
        let meta = &pod.metadata;
        let mut ports = Vec::new();
        for c in &spec.containers {
            for p in c.ports.iter().flatten() {
                if let Some(hp) = p.host_port.filter(|h| *h > 0) {
                    ports.push(PortMapping {
                        container_port: p.container_port as u16,
                        host_port: hp as u16,
                        protocol: match p.protocol.as_deref() {
                            Some("UDP") => Protocol::Udp,
                            Some("SCTP") => Protocol::Sctp,
                            _ => Protocol::Tcp,
                        },
                        host_ip: p.host_ip.clone(),
                    });
                }
            }
        }
        let dns_settings = &self.k.cfg.dns;
        let host_resolv_conf = dns_settings
            .resolv_conf
            .as_ref()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default());
        let dns = crate::dns::pod_dns(pod, dns_settings, host_resolv_conf.as_deref());
        for warning in &dns.warnings {
            self.k
                .recorder
                .record(
                    &pod_ref(pod),
                    EventType::Warning,
                    warning.reason,
                    &warning.message,
                )
                .await;
        }
        let (hostname, domainname) = crate::dns::hostname_and_domain(pod, &dns_settings.cluster_domain);
        let cfg = SandboxConfig {
            pod_name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: self.uid.clone(),
            attempt,
            image: self.k.cfg.pause_image.clone(),
            hostname: Some(hostname),
            domainname,
            extra_hosts: crate::dns::extra_hosts(pod),
            dns: dns.config,
            host_network: spec.host_network.unwrap_or(false),
            host_pid: spec.host_pid.unwrap_or(false),
            host_ipc: spec.host_ipc.unwrap_or(false),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            port_mappings: ports,
            ..Default::default()
        };
        let id = self
            .k
            .runtime
            .create_sandbox(&cfg)
            .await
            .map_err(|e| e.to_string())?;
        self.k.runtime.start(&id).await.map_err(|e| e.to_string())?;
        if !cfg.dns.servers.is_empty() {
            let text = crate::dns::resolv_conf_text(&cfg.dns);
            if let Err(e) = self.k.runtime.write_resolv_conf(&id, &text).await {
                tracing::debug!(error = %e, "keeping Docker's resolv.conf");
            }
        }
        let st = self.k.runtime.inspect(&id).await.map_err(|e| e.to_string())?;
        Ok(ObservedSandbox {
            id,
            attempt,
            ready: true,
            ip: Some(st.ip_address).filter(|ip| !ip.is_empty()),
            host_network: cfg.host_network,
            created: st.created_at.unwrap_or_else(Timestamp::now),
        })
    }

    pub(super) async fn start_container(
        &mut self,
        pod: &Pod,
        c: &Container,
        sandbox: &ObservedSandbox,
        observed: &ObservedPod,
        target: Option<&str>,
    ) {
        let r = container_ref(pod, &c.name);
        let image = c.image.clone().unwrap_or_default();
        let policy = PullPolicy::from_api(c.image_pull_policy.as_deref(), &image);
        let pull_key = image_pull_key(&self.uid, &image);
        let now = Timestamp::now();
        if self.pull_backoff.is_in_backoff_since_update(&pull_key, now) {
            let msg = format!("Back-off pulling image {image:?}");
            self.waiting.insert(
                c.name.clone(),
                WaitingReason {
                    reason: "ImagePullBackOff".into(),
                    message: Some(msg.clone()),
                },
            );
            self.k
                .recorder
                .record(&r, EventType::Normal, "BackOff", &msg)
                .await;
            return;
        }
        match self.k.runtime.ensure_image(&image, policy).await {
            Ok(_) => {
                let msg = format!("Container image {image:?} already present on machine");
                self.k
                    .recorder
                    .record(&r, EventType::Normal, "Pulled", &msg)
                    .await;
            }
            Err(e) => {
                let never = matches!(policy, PullPolicy::Never);
                let reason = if never {
                    "ErrImageNeverPull"
                } else {
                    "ErrImagePull"
                };
                let msg = e.to_string();
                self.pull_backoff.next(&pull_key, now, now);
                self.waiting.insert(
                    c.name.clone(),
                    WaitingReason {
                        reason: reason.into(),
                        message: Some(msg.clone()),
                    },
                );
                let text = format!("Failed to pull image {image:?}: {msg}");
                self.k
                    .recorder
                    .record(&r, EventType::Warning, "Failed", &text)
                    .await;
                self.k
                    .recorder
                    .record(&r, EventType::Warning, "Failed", &format!("Error: {reason}"))
                    .await;
                return;
            }
        }
        let restart_count = observed
            .containers
            .iter()
            .filter(|o| o.name == c.name)
            .map(|o| o.restart_count + 1)
            .max()
            .unwrap_or(0);
        // Environment and volumes need the ConfigMaps and Secrets the pod refers to; a missing one is
        // CreateContainerConfigError, retried on the next sync (never a crash).
        let (env, mounts) = match self.container_config_inputs(pod, c, sandbox).await {
            Ok(v) => v,
            Err(ConfigError::Env(msg)) => {
                self.container_failed(&r, &c.name, "CreateContainerConfigError", msg)
                    .await;
                return;
            }
            // upstream: the volume manager's failure keeps the container ContainerCreating and records
            // a FailedMount event on the pod; the next sync tries again.
            Err(ConfigError::Volume(msg)) => {
                self.waiting.remove(&c.name);
                self.k
                    .recorder
                    .record(&pod_ref(pod), EventType::Warning, "FailedMount", &msg)
                    .await;
                return;
            }
        };
        let mut binds = mounts.binds;
        let message_path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        if !message_path.is_empty() {
            match self.termination_message_file(&c.name, restart_count) {
                Ok(host_path) => binds.push(crate::runtime::Mount {
                    host_path: host_path.to_string_lossy().into_owned(),
                    container_path: message_path.clone(),
                    read_only: false,
                }),
                Err(msg) => {
                    self.container_failed(&r, &c.name, "CreateContainerConfigError", msg)
                        .await;
                    return;
                }
            }
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let limits = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap_or_default();
        let cfg = ContainerConfig {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            uid: self.uid.clone(),
            name: c.name.clone(),
            restart_count,
            sandbox_id: sandbox.id.clone(),
            image: image.clone(),
            command: env.command,
            args: env.args,
            env: env.env,
            mounts: binds,
            tmpfs: mounts.tmpfs,
            working_dir: c.working_dir.clone(),
            resources: Resources {
                memory_limit: limits.get("memory").and_then(|q| parse_bytes(&q.0)),
                cpu_limit_millis: limits.get("cpu").and_then(|q| parse_millis(&q.0)),
                // CPU shares follow the request (upstream MilliCPUToShares), defaulted from the limit.
                cpu_request_millis: c
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("cpu"))
                    .and_then(|q| parse_millis(&q.0))
                    .or_else(|| limits.get("cpu").and_then(|q| parse_millis(&q.0))),
            },
            security: security_config(&spec, c),
            tty: c.tty.unwrap_or(false),
            stdin: c.stdin.unwrap_or(false),
            stdin_once: c.stdin_once.unwrap_or(false),
            target_container_id: target.map(str::to_owned),
            share_process_namespace: spec.share_process_namespace.unwrap_or(false),
            host_network: spec.host_network.unwrap_or(false),
            hash: hash_container(c),
            termination_message_path: message_path,
            termination_message_policy: c
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".into()),
            termination_grace_period: spec.termination_grace_period_seconds,
            init: spec
                .init_containers
                .iter()
                .flatten()
                .any(|i| i.name == c.name && i.restart_policy.as_deref() != Some("Always")),
            ..Default::default()
        };
        let id = match self.k.runtime.create_container(&cfg).await {
            Ok(id) => id,
            Err(e) => {
                self.container_failed(&r, &c.name, "CreateContainerError", e.to_string())
                    .await;
                return;
            }
        };
        self.k
            .recorder
            .record(
                &r,
                EventType::Normal,
                "Created",
                &format!("Created container: {}", c.name),
            )
            .await;
        if let Err(e) = self.k.runtime.start(&id).await {
            self.container_failed(&r, &c.name, "RunContainerError", e.to_string())
                .await;
            return;
        }
        self.waiting.remove(&c.name);
        self.k
            .recorder
            .record(
                &r,
                EventType::Normal,
                "Started",
                &format!("Started container {}", c.name),
            )
            .await;
        if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
            let pod_ip = self.ops.hook_pod_ip(pod, Some(sandbox));
            self.post_start(pod, c, &id, hook, pod_ip.as_deref()).await;
        }
        // Keep the newest dead instance for `logs --previous`; older ones go (upstream container GC).
        let mut dead: Vec<&ObservedContainer> = observed
            .containers
            .iter()
            .filter(|o| o.name == c.name && matches!(o.state, plan::ContainerState::Exited { .. }))
            .collect();
        dead.sort_by_key(|o| std::cmp::Reverse((o.created, o.restart_count)));
        for old in dead.iter().skip(1) {
            let _ = self.k.runtime.remove_container(&old.id).await;
        }
    }

    /// A container could not be created or started: its waiting reason and a `Failed` event say why.
    pub(super) async fn container_failed(
        &mut self,
        r: &k8s_openapi::api::core::v1::ObjectReference,
        name: &str,
        reason: &str,
        msg: String,
    ) {
        let event = format!("Error: {msg}");
        self.waiting.insert(
            name.to_string(),
            WaitingReason {
                reason: reason.into(),
                message: Some(msg),
            },
        );
        self.k
            .recorder
            .record(r, EventType::Warning, "Failed", &event)
            .await;
    }

    /// Fetch the ConfigMaps and Secrets the pod refers to, set up its volumes, and resolve the container's
    /// environment and mounts.
    pub(super) async fn container_config_inputs(
        &self,
        pod: &Pod,
        c: &Container,
        sandbox: &ObservedSandbox,
    ) -> Result<(crate::env::ContainerEnv, crate::volumes::ContainerMounts), ConfigError> {
        let objects = self.pod_objects(pod).await;
        let info = crate::env::RuntimeInfo {
            pod_ips: sandbox.ip.iter().cloned().collect(),
            host_ips: vec![self.k.cfg.node_ip.clone()],
            node_allocatable: Default::default(),
            service_env: self.service_env(pod).await,
        };
        let env = crate::env::make_environment(pod, c, &objects, &info)
            .map_err(|e| ConfigError::Env(e.to_string()))?;
        let host = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir)
            .map_err(|e| ConfigError::Env(e.to_string()))?;
        let volumes = host.setup_pod(pod, &objects, &info).map_err(|e| match e {
            e @ crate::volumes::VolumeError::SetUp { .. } => ConfigError::Volume(e.to_string()),
            e => ConfigError::Env(e.to_string()),
        })?;
        let mounts = volumes
            .container_mounts(c, &env.env)
            .map_err(|e| ConfigError::Env(e.to_string()))?;
        Ok((env, mounts))
    }

    /// Rewrite the pod's volumes when a projected service account token is due for renewal (upstream's
    /// volume manager remounts them each sync and the token manager decides; here only a due token
    /// triggers it). Before the first container was set up there is nothing to rewrite.
    pub(super) async fn refresh_tokens(&self, pod: &Pod, observed: &ObservedPod) {
        let keys = crate::token_manager::pod_token_keys(pod);
        if keys.is_empty() || !keys.iter().any(|k| self.k.tokens.needs_refresh(k)) {
            return;
        }
        let Ok(host) = crate::volumes::VolumeHost::new(&self.k.cfg.data_dir) else {
            return;
        };
        if !host.pod_dir(&self.uid).is_ok_and(|d| d.join("volumes").exists()) {
            return;
        }
        let objects = self.pod_objects(pod).await;
        let sandbox_ip = observed
            .sandboxes
            .iter()
            .filter(|s| s.ready)
            .max_by_key(|s| s.created)
            .and_then(|s| s.ip.clone());
        let info = crate::env::RuntimeInfo {
            pod_ips: sandbox_ip.into_iter().collect(),
            host_ips: vec![self.k.cfg.node_ip.clone()],
            node_allocatable: Default::default(),
            service_env: Vec::new(),
        };
        if let Err(e) = host.update_pod(pod, &objects, &info) {
            self.k
                .recorder
                .record(&pod_ref(pod), EventType::Warning, "FailedMount", &e.to_string())
                .await;
        }
    }

    /// The Service variables of the pod's containers, from the Services of its namespace (unless
    /// `enableServiceLinks` is false) and `default/kubernetes`. Listed at each container start (upstream reads
    /// an informer's cache); a Service list that fails leaves those variables out rather than the container.
    async fn service_env(&self, pod: &Pod) -> Vec<(String, String)> {
        use k8s_openapi::api::core::v1::Service;
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let links = pod
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let mut namespaces = vec!["default"];
        if links && ns != "default" {
            namespaces.push(ns);
        }
        let mut services = Vec::new();
        for namespace in namespaces {
            let api: Api<Service> = Api::namespaced(self.k.client.clone(), namespace);
            match api.list(&Default::default()).await {
                Ok(list) => services.extend(list.items),
                Err(e) => tracing::warn!(%namespace, error = %e, "listing Services for the environment"),
            }
        }
        crate::envvars::service_env(&services, ns, links)
    }

    /// The ConfigMaps and Secrets the pod refers to, and the tokens of its projections.
    async fn pod_objects(&self, pod: &Pod) -> crate::env::Objects {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let refs = crate::env::references(pod);
        let mut objects = crate::env::Objects::default();
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(self.k.client.clone(), ns);
        for name in &refs.config_maps {
            if let Ok(Some(cm)) = cms.get_opt(name).await {
                objects.insert_config_map(cm);
            }
        }
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(self.k.client.clone(), ns);
        for name in &refs.secrets {
            if let Ok(Some(s)) = secrets.get_opt(name).await {
                objects.insert_secret(s);
            }
        }
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(self.k.client.clone(), ns);
        let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(self.k.client.clone());
        for name in &refs.claims {
            if let Ok(Some(c)) = claims.get_opt(name).await {
                let bound = c.spec.as_ref().and_then(|s| s.volume_name.clone());
                objects.insert_claim(c);
                if let Some(v) = bound.filter(|v| !v.is_empty())
                    && let Ok(Some(pv)) = volumes.get_opt(&v).await
                {
                    objects.insert_volume(pv);
                }
            }
        }
        for key in crate::token_manager::pod_token_keys(pod) {
            let token = self.k.tokens.get(&key).await;
            objects.insert_token(&key.audience, key.expiration_seconds, token);
        }
        objects
    }
}

/// Why a container's environment or mounts could not be prepared.
pub(super) enum ConfigError {
    /// CreateContainerConfigError: a missing ConfigMap/Secret key in env, a bad subPath, ...
    Env(String),
    /// A volume could not be set up (the `FailedMount` text).
    Volume(String),
}

/// The container's security settings, falling back to the pod's (upstream's effective security context).
fn security_config(spec: &k8s_openapi::api::core::v1::PodSpec, c: &Container) -> SecurityConfig {
    let csc = c.security_context.as_ref();
    let psc = spec.security_context.as_ref();
    let uid = csc
        .and_then(|s| s.run_as_user)
        .or(psc.and_then(|s| s.run_as_user));
    let gid = csc
        .and_then(|s| s.run_as_group)
        .or(psc.and_then(|s| s.run_as_group));
    let user = match (uid, gid) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        // Docker needs a user to set a group; the image's user stays (upstream leaves it to the image).
        (None, Some(_)) | (None, None) => None,
    };
    let caps = csc.and_then(|s| s.capabilities.as_ref());
    SecurityConfig {
        user,
        privileged: csc.and_then(|s| s.privileged).unwrap_or(false),
        cap_add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        cap_drop: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
        readonly_rootfs: csc.and_then(|s| s.read_only_root_filesystem).unwrap_or(false),
    }
}

/// `128Mi` → bytes (the units a memory limit uses).
fn parse_bytes(q: &str) -> Option<i64> {
    let units: [(&str, i64); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("m", 0),
        ("", 1),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix)
            && let Ok(v) = n.parse::<f64>()
        {
            return if mult == 0 {
                Some((v / 1000.0) as i64)
            } else {
                Some((v * mult as f64) as i64)
            };
        }
    }
    None
}

/// `500m` or `2` → millicores.
fn parse_millis(q: &str) -> Option<i64> {
    match q.strip_suffix('m') {
        Some(n) => n.parse().ok(),
        None => q.parse::<f64>().ok().map(|v| (v * 1000.0) as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn quantities_convert_to_docker_units() {
        assert_eq!(parse_bytes("128Mi"), Some(128 << 20));
        assert_eq!(parse_bytes("1G"), Some(1_000_000_000));
        assert_eq!(parse_millis("500m"), Some(500));
        assert_eq!(parse_millis("2"), Some(2000));
    }
}
