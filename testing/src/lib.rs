//! envtest for Rust, with real pods: [`TestCluster::start`] gives a [`kube::Client`] to a fresh kubeling cluster
//! (API server, controller manager with the scheduler, cluster DNS and a node agent) running inside the test's
//! own process, on a data dir of its own, in milliseconds. Pods run as real Docker containers by default; many
//! clusters can run side by side in one test binary (each has its own Docker network and its own containers).
//! Dropping the cluster stops it and removes its containers; [`TestCluster::stop`] does the same and waits.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! let cluster = kubeling_testing::TestCluster::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! cluster.stop().await;
//! # Ok(())
//! # }
//! ```

pub mod etcd;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

/// Where the pods of a [`TestCluster`]'s nodes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// Real Docker containers.
    Docker,
    /// The simulated runtime of `kubeling up --runtime sim`: no Docker, lifecycles set by
    /// `sim.kubeling.dev/*` annotations, many nodes and thousands of pods.
    Sim,
}

/// What a [`TestCluster`] runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Node agents (0: none, an API server and controllers only, as envtest). More than one needs
    /// [`Runtime::Sim`].
    pub nodes: usize,
    /// Where their pods run.
    pub runtime: Runtime,
    /// The controller manager and the scheduler.
    pub controllers: bool,
    /// The cluster DNS server (`kube-dns`).
    pub dns: bool,
    /// Pods on the cluster's own Docker network with the Service proxy (off: Docker's default bridge, which
    /// saves the network and gateway set-up when a test needs no Services).
    pub services: bool,
}

impl Default for Options {
    /// A whole cluster as `kubeling up` makes it: one node, controllers, DNS, Services.
    fn default() -> Self {
        Options {
            nodes: 1,
            runtime: Runtime::Docker,
            controllers: true,
            dns: true,
            services: true,
        }
    }
}

impl Options {
    /// An API server and the controller manager, no node and no DNS: what envtest gives, without the wait.
    pub fn control_plane_only() -> Options {
        Options {
            nodes: 0,
            runtime: Runtime::Docker,
            controllers: true,
            dns: false,
            services: false,
        }
    }

    /// `nodes` simulated nodes with the controller manager: real scheduling and workload controllers, pods that
    /// become Ready without Docker.
    pub fn simulated(nodes: usize) -> Options {
        Options {
            nodes,
            runtime: Runtime::Sim,
            controllers: true,
            dns: false,
            services: false,
        }
    }
}

/// A running cluster owned by a test. See the crate documentation.
pub struct TestCluster {
    cluster: Option<cluster::Cluster>,
    node_dirs: Vec<PathBuf>,
    node_names: Vec<String>,
    // Last: removed after the cluster has stopped using it.
    dir: tempfile::TempDir,
}

impl TestCluster {
    /// A whole cluster with the default [`Options`].
    pub async fn start() -> anyhow::Result<TestCluster> {
        Self::start_with(Options::default()).await
    }

    /// A cluster with the given options. Returns once the API server serves; node agents register in the
    /// background (see [`TestCluster::wait_for_nodes`]); pods created before are scheduled once they have.
    pub async fn start_with(options: Options) -> anyhow::Result<TestCluster> {
        anyhow::ensure!(
            options.nodes <= 1 || options.runtime == Runtime::Sim,
            "one Docker node per test cluster for now (got {}); use Runtime::Sim or several clusters",
            options.nodes
        );
        let dir = tempfile::Builder::new()
            .prefix("kubeling-test-")
            .tempdir()
            .context("creating the cluster's data dir")?;
        let data_dir = dir.path().join("data");
        let server = apiserver::Config {
            data_dir: data_dir.clone(),
            bind: Ipv4Addr::LOCALHOST.into(),
            port: 0,
            hub: Default::default(),
            service_account_admission: options.controllers,
            event_ttl: Duration::from_secs(3600),
            store: Default::default(),
        };
        let mut cfg = cluster::ClusterConfig {
            server,
            merge_user_kubeconfig: false,
            dns: None,
            controllers: None,
            nodes: Vec::new(),
        };
        if options.dns {
            cfg.dns = Some(dns::Config {
                listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                domain: dns::DEFAULT_CLUSTER_DOMAIN.to_string(),
                resolv_conf: "/etc/resolv.conf".into(),
                publish_service: true,
            });
        }
        if options.controllers {
            cfg.controllers = Some(cluster::controllers_config(
                String::new(),
                data_dir.join("volumes"),
            ));
        }
        let mut node_dirs = Vec::new();
        let mut node_names = Vec::new();
        for i in 0..options.nodes {
            let host = node::agent::default_node_name();
            let (name, node_dir) = cluster::nth_node(&host, &data_dir, i);
            let mut n = node::agent::AgentConfig::new(&node_dir);
            n.node_name = name;
            n.services = options.services;
            if options.runtime == Runtime::Sim {
                let cidr = node::runtime::sim::PodCidr::for_node(i as u32).map_err(anyhow::Error::msg)?;
                n.runtime = node::agent::RuntimeChoice::Sim(cidr);
            }
            if options.dns {
                n.dns.cluster_dns = vec![dns::DEFAULT_CLUSTER_DNS_IP.to_string()];
                n.dns.resolv_conf = Some("/etc/resolv.conf".into());
            }
            if options.runtime == Runtime::Docker {
                node_dirs.push(node_dir);
            }
            node_names.push(n.node_name.clone());
            cfg.nodes.push(n);
        }
        let cluster = cluster::Cluster::start(cfg).await?;
        Ok(TestCluster {
            cluster: Some(cluster),
            node_dirs,
            node_names,
            dir,
        })
    }

    fn inner(&self) -> &cluster::Cluster {
        self.cluster
            .as_ref()
            .expect("the cluster runs until stop or drop")
    }

    /// A client with the cluster's admin token.
    pub fn client(&self) -> kube::Client {
        self.inner().client()
    }

    /// The cluster's kubeconfig file, for kubectl or another process.
    pub fn kubeconfig(&self) -> &Path {
        &self.inner().kubeconfig
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.inner().url
    }

    /// How long the start took (to the API server serving).
    pub fn started_in(&self) -> Duration {
        self.inner().started_in
    }

    /// The names of the cluster's nodes.
    pub fn node_names(&self) -> &[String] {
        &self.node_names
    }

    /// The cluster's data dir (database, certificates, kubeconfig, node data).
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until every node of the cluster has registered and is Ready.
    pub async fn wait_for_nodes(&self, timeout: Duration) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client());
        let deadline = Instant::now() + timeout;
        loop {
            let list = nodes.list(&ListParams::default()).await?;
            let ready = list.items.iter().filter(|n| is_ready(n)).count();
            if ready >= self.node_names.len() {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{ready} of {} nodes Ready after {timeout:?}",
                self.node_names.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the cluster in order, then removes its containers, gateway and network.
    pub async fn stop(mut self) {
        if let Some(c) = self.cluster.take() {
            c.shutdown().await;
        }
        for d in &self.node_dirs {
            if let Err(e) = node::cleanup::remove_cluster_of(d).await {
                tracing::warn!(error = %e, "cannot remove the test cluster's containers");
            }
        }
        self.node_dirs.clear();
    }
}

impl Drop for TestCluster {
    /// Cancels the cluster's components and removes its containers (on a thread of its own, so this works
    /// inside or outside an async runtime).
    fn drop(&mut self) {
        if let Some(c) = self.cluster.take() {
            c.cancel();
        }
        let dirs = std::mem::take(&mut self.node_dirs);
        if dirs.is_empty() {
            return;
        }
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    for d in &dirs {
                        let _ = node::cleanup::remove_cluster_of(d).await;
                    }
                });
            }
        });
        let _ = cleanup.join();
    }
}

fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
