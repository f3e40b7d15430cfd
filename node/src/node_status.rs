//! Node registration, status heartbeats and the node Lease (upstream `kubelet_node_status.go`,
//! `pkg/kubelet/nodestatus/setters.go`, and the lease controller in `component-helpers`).
//!
//! The Node is created with upstream's labels and annotation, capacity and allocatable measured on the
//! host, `nodeInfo` with the container runtime's version, and the four conditions (Ready last). Its status is
//! patched every 10 s (`nodeStatusUpdateFrequency`) and its Lease in `kube-node-lease` renewed every 10 s
//! (0.25 × `leaseDurationSeconds` 40). When the runtime does not answer, Ready turns False with
//! `container runtime is down`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

/// kubelet: `nodeStatusUpdateFrequency` = 10s.
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// kubelet: `nodeLeaseDurationSeconds` = 40; renewed every 0.25 × that.
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// kubelet: `maxPods` = 110.
pub const MAX_PODS: u32 = 110;
/// Pods a simulated node takes: many, as kwok's nodes (and fewer than its 4,093 pod IPs).
pub const SIM_MAX_PODS: u32 = 4000;
/// CPUs a simulated node reports (kwok's fake node).
pub const SIM_CPUS: u32 = 32;
/// Memory a simulated node reports (kwok's fake node).
pub const SIM_MEMORY: &str = "256Gi";
/// The Kubernetes version the node reports (the API server speaks the same).
pub const KUBELET_VERSION: &str = "v1.33.0";

/// What the node reports about its host and runtime.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// The IP the node is reached at (InternalIP; pods' hostIP).
    pub ip: String,
    /// Port of the node agent's own HTTPS endpoint (logs, exec).
    pub kubelet_port: u16,
    /// Directory whose filesystem is the node's ephemeral storage.
    pub data_dir: std::path::PathBuf,
    /// A simulated node (`--runtime sim`): kwok's fake capacity ([`SIM_CPUS`], [`SIM_MEMORY`],
    /// [`SIM_MAX_PODS`] pods) instead of the host's.
    pub simulated: bool,
}

/// The runtime's answer for the node status: its version, or why it is down.
pub type RuntimeHealth = Result<String, String>;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

fn memory_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

fn disk_bytes(path: &Path) -> u64 {
    rustix::fs::statvfs(path)
        .map(|s| s.f_blocks * s.f_frsize)
        .unwrap_or(0)
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The labels a kubelet registers with.
pub fn node_labels(name: &str) -> BTreeMap<String, String> {
    let arch = go_arch().to_string();
    BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), arch.clone()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), arch),
    ])
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, now: Time) -> NodeCondition {
    NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

/// The node status the setters would compute now. `previous` keeps `lastTransitionTime` of conditions that
/// did not change.
pub fn node_status(cfg: &NodeConfig, runtime: &RuntimeHealth, previous: Option<&NodeStatus>) -> NodeStatus {
    let now = Time(jiff::Timestamp::now());
    let disk = disk_bytes(&cfg.data_dir);
    let (capacity, allocatable) = if cfg.simulated {
        let capacity = BTreeMap::from([
            ("cpu".to_string(), Quantity(SIM_CPUS.to_string())),
            ("memory".to_string(), Quantity(SIM_MEMORY.to_string())),
            ("pods".to_string(), Quantity(SIM_MAX_PODS.to_string())),
            (
                "ephemeral-storage".to_string(),
                Quantity(format!("{}Ki", disk / 1024)),
            ),
        ]);
        (capacity.clone(), capacity)
    } else {
        host_capacity(disk)
    };
    let (ready, ready_reason, ready_message, runtime_version) = match runtime {
        Ok(v) => (
            "True",
            "KubeletReady",
            "kubelet is posting ready status".to_string(),
            // A runtime that names its scheme (`sim://0.1`) is reported as it is.
            if v.contains("://") {
                v.clone()
            } else {
                format!("docker://{v}")
            },
        ),
        Err(e) => (
            "False",
            "KubeletNotReady",
            format!("container runtime is down: {e}"),
            String::new(),
        ),
    };
    let mut conditions = vec![
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            now.clone(),
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            now.clone(),
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            now.clone(),
        ),
        condition("Ready", ready, ready_reason, &ready_message, now.clone()),
    ];
    if let Some(prev) = previous.and_then(|p| p.conditions.as_ref()) {
        for c in conditions.iter_mut() {
            if let Some(p) = prev.iter().find(|p| p.type_ == c.type_ && p.status == c.status) {
                c.last_transition_time = p.last_transition_time.clone();
            }
        }
    }
    let machine_id = read_trimmed("/etc/machine-id");
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: cfg.ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: cfg.name.clone(),
            },
        ]),
        allocatable: Some(allocatable),
        capacity: Some(capacity),
        conditions: Some(conditions),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(cfg.kubelet_port),
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: go_arch().to_string(),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            container_runtime_version: runtime_version,
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            kube_proxy_version: String::new(),
            kubelet_version: KUBELET_VERSION.to_string(),
            machine_id: machine_id.clone(),
            operating_system: "linux".to_string(),
            os_image: os_image(),
            system_uuid: machine_id,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The host's capacity and allocatable (with the kubelet's default hard eviction thresholds).
fn host_capacity(disk: u64) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let memory = memory_bytes();
    let capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpus.to_string())),
        ("memory".to_string(), Quantity(format!("{}Ki", memory / 1024))),
        ("pods".to_string(), Quantity(MAX_PODS.to_string())),
        (
            "ephemeral-storage".to_string(),
            Quantity(format!("{}Ki", disk / 1024)),
        ),
    ]);
    // kubelet's default hard eviction thresholds: memory.available<100Mi, nodefs.available<10%.
    let allocatable = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpus.to_string())),
        (
            "memory".to_string(),
            Quantity(format!("{}Ki", memory.saturating_sub(100 << 20) / 1024)),
        ),
        ("pods".to_string(), Quantity(MAX_PODS.to_string())),
        (
            "ephemeral-storage".to_string(),
            Quantity(format!("{}", disk / 10 * 9)),
        ),
    ]);
    (capacity, allocatable)
}

/// The Node a kubelet creates when it registers.
pub fn initial_node(cfg: &NodeConfig, runtime: &RuntimeHealth) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(cfg.name.clone()),
            labels: Some(node_labels(&cfg.name)),
            annotations: Some(BTreeMap::from([(
                "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(Default::default()),
        status: Some(node_status(cfg, runtime, None)),
    }
}

/// Register the node (retrying 100 ms doubling to 7 s, as upstream), then keep its status and Lease fresh
/// until `cancel`. `runtime` is asked for its health before every status update.
pub async fn run<F, Fut>(client: kube::Client, cfg: NodeConfig, runtime: F, cancel: CancellationToken)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = RuntimeHealth>,
{
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let mut delay = Duration::from_millis(100);
    let node = loop {
        let health = runtime().await;
        match register(&nodes, &cfg, &health).await {
            Ok(n) => break n,
            Err(e) => tracing::warn!(node = %cfg.name, error = %e, "registering the node; retrying"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(7));
    };
    tracing::info!(node = %cfg.name, "node registered");
    let uid = node.metadata.uid.clone().unwrap_or_default();
    let mut previous = node.status.clone();
    let mut ticker = tokio::time::interval(NODE_STATUS_UPDATE_FREQUENCY);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let health = runtime().await;
        let status = node_status(&cfg, &health, previous.as_ref());
        let patch = serde_json::json!({"status": status});
        match nodes
            .patch_status(&cfg.name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(n) => previous = n.status,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                // Someone deleted the Node: register again.
                if let Ok(n) = register(&nodes, &cfg, &health).await {
                    previous = n.status;
                }
            }
            Err(e) => tracing::warn!(error = %e, "updating the node status"),
        }
        if let Err(e) = renew_lease(&leases, &cfg.name, &uid).await {
            tracing::warn!(error = %e, "renewing the node lease");
        }
    }
}

async fn register(nodes: &Api<Node>, cfg: &NodeConfig, health: &RuntimeHealth) -> Result<Node, kube::Error> {
    let node = initial_node(cfg, health);
    match nodes.create(&PostParams::default(), &node).await {
        Ok(n) => Ok(n),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            // Already registered (a restart): reconcile labels and status as upstream does.
            let patch = serde_json::json!({"metadata": {"labels": node.metadata.labels}});
            nodes
                .patch(&cfg.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let status = serde_json::json!({"status": node.status});
            nodes
                .patch_status(&cfg.name, &PatchParams::default(), &Patch::Strategic(&status))
                .await
        }
        Err(e) => Err(e),
    }
}

async fn renew_lease(leases: &Api<Lease>, name: &str, node_uid: &str) -> Result<(), kube::Error> {
    let now = MicroTime(jiff::Timestamp::now());
    match leases.get_opt(name).await? {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.renew_time = Some(now);
            spec.holder_identity = Some(name.to_string());
            spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
            leases.replace(name, &PostParams::default(), &lease).await?;
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(LEASE_NAMESPACE.to_string()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: name.to_string(),
                        uid: node_uid.to_string(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(name.to_string()),
                    lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            leases.create(&PostParams::default(), &lease).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NodeConfig {
        NodeConfig {
            name: "n1".into(),
            ip: "127.0.0.1".into(),
            kubelet_port: 10250,
            data_dir: "/".into(),
            simulated: false,
        }
    }

    #[test]
    fn a_simulated_node_reports_kwoks_capacity_and_its_runtime_as_named() {
        let cfg = NodeConfig {
            simulated: true,
            ..cfg()
        };
        let s = node_status(&cfg, &Ok("sim://0.1".into()), None);
        assert_eq!(s.node_info.unwrap().container_runtime_version, "sim://0.1");
        for list in [s.capacity.unwrap(), s.allocatable.unwrap()] {
            assert_eq!(list["pods"].0, "4000");
            assert_eq!(list["cpu"].0, "32");
            assert_eq!(list["memory"].0, "256Gi");
        }
    }

    #[test]
    fn healthy_runtime_makes_the_node_ready_with_conditions_in_upstream_order() {
        let s = node_status(&cfg(), &Ok("20.10.24".into()), None);
        let conditions = s.conditions.unwrap();
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]);
        assert_eq!(conditions[3].status, "True");
        assert_eq!(conditions[3].reason.as_deref(), Some("KubeletReady"));
        assert_eq!(
            s.node_info.unwrap().container_runtime_version,
            "docker://20.10.24"
        );
        assert_eq!(s.capacity.unwrap()["pods"].0, "110");
    }

    #[test]
    fn runtime_down_makes_ready_false_with_the_reason() {
        let s = node_status(&cfg(), &Err("cannot connect to the Docker daemon".into()), None);
        let ready = s.conditions.unwrap().pop().unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(
            ready.message.as_deref(),
            Some("container runtime is down: cannot connect to the Docker daemon")
        );
    }

    #[test]
    fn unchanged_condition_keeps_its_transition_time() {
        let first = node_status(&cfg(), &Ok("1".into()), None);
        let mut prev = first.clone();
        let old = Time("2020-01-01T00:00:00Z".parse().unwrap());
        for c in prev.conditions.as_mut().unwrap() {
            c.last_transition_time = Some(old.clone());
        }
        let next = node_status(&cfg(), &Ok("1".into()), Some(&prev));
        assert!(
            next.conditions
                .unwrap()
                .iter()
                .all(|c| c.last_transition_time.as_ref() == Some(&old))
        );
    }

    #[test]
    fn registration_labels_are_upstreams() {
        let l = node_labels("n1");
        assert_eq!(l["kubernetes.io/hostname"], "n1");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert!(l.contains_key("beta.kubernetes.io/arch"));
    }
}
