//! A whole kubeling cluster in this process: the API server, then (each optional) the cluster DNS server, the
//! controller manager (with the scheduler) and node agents, all clients of the API server over HTTPS with the
//! kubeconfig this crate writes. `kubeling up`, `kubeling test` and the `kubeling-testing` harness start
//! clusters through [`Cluster::start`]; the separate commands (`kubeling node`, `controllers`, `dns`) use the
//! kubeconfig helpers here.

pub mod kubeconfig;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The name of the cluster, user and context in the kubeconfigs kubeling writes.
pub const CONTEXT: &str = "kubeling";

/// What to start.
pub struct ClusterConfig {
    /// The API server (its data dir is the cluster's: database, certificates, token, kubeconfig).
    pub server: apiserver::Config,
    /// Merge a `kubeling` context into the user's kubeconfig ($KUBECONFIG or ~/.kube/config).
    pub merge_user_kubeconfig: bool,
    /// The cluster DNS server (it applies the `kube-dns` Service); none: no cluster DNS.
    pub dns: Option<dns::Config>,
    /// The controller manager; none: no controllers and no scheduler (pods must name their node). An empty
    /// `root_ca_pem` is filled in with the cluster CA.
    pub controllers: Option<controllers::Config>,
    /// Node agents. Each one's `node_token` and (when unset) `apiserver` are filled in from the started API
    /// server.
    pub nodes: Vec<node::agent::AgentConfig>,
}

/// A running cluster. [`Cluster::shutdown`] stops it in order; dropping it cancels its components without
/// waiting (containers keep running either way, as after `kubeling up` ends).
pub struct Cluster {
    /// The API server's address.
    pub addr: SocketAddr,
    /// The URL clients use.
    pub url: String,
    /// `DATA/kubeconfig`.
    pub kubeconfig: PathBuf,
    /// The cluster CA (PEM).
    pub ca_pem: String,
    /// The cluster token (system:masters).
    pub token: String,
    /// The cluster data dir.
    pub data_dir: PathBuf,
    /// How long [`Cluster::start`] took.
    pub started_in: Duration,
    client: kube::Client,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    dns: Option<dns::Running>,
    server: Option<apiserver::ApiServer>,
}

impl Cluster {
    /// Starts the API server, writes `DATA/kubeconfig` (and merges it into the user's when asked), then starts
    /// the DNS server and spawns the controller manager and the node agents. Returns once the API server
    /// serves; nodes register in the background.
    pub async fn start(cfg: ClusterConfig) -> anyhow::Result<Cluster> {
        let started = Instant::now();
        let data_dir = cfg.server.data_dir.clone();
        let server = apiserver::ApiServer::start(cfg.server)
            .await
            .context("starting the API server")?;
        let url = server_url(server.addr);
        let kubeconfig_path = data_dir.join("kubeconfig");
        let (ca_pem, token) = (server.tls.ca_pem.clone(), server.tls.token.clone());
        kubeconfig::write(&kubeconfig_path, CONTEXT, &url, &ca_pem, &token)
            .with_context(|| format!("writing {}", kubeconfig_path.display()))?;
        if cfg.merge_user_kubeconfig {
            merge_user_kubeconfig(&url, &ca_pem, &token);
        }
        let client = client_for(&url, &ca_pem, &token).await?;
        let cancel = CancellationToken::new();
        let dns = match cfg.dns {
            Some(d) => {
                let running = dns::start(client.clone(), d, cancel.clone())
                    .await
                    .context("starting the cluster DNS server")?;
                tracing::info!(addr = %running.addr, "cluster DNS listening");
                Some(running)
            }
            None => None,
        };
        let mut tasks = Vec::new();
        if let Some(mut c) = cfg.controllers {
            if c.root_ca_pem.is_empty() {
                c.root_ca_pem = ca_pem.clone();
            }
            tasks.push(tokio::spawn(controllers::run(client.clone(), c, cancel.clone())));
        }
        for mut n in cfg.nodes {
            n.node_token = token.clone();
            n.apiserver.get_or_insert(server.addr);
            let (client, cancel, name) = (client.clone(), cancel.clone(), n.node_name.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = node::agent::run(client, n, cancel).await {
                    tracing::error!(node = %name, error = %e, "node agent stopped");
                }
            }));
        }
        Ok(Cluster {
            addr: server.addr,
            url,
            kubeconfig: kubeconfig_path,
            ca_pem,
            token,
            data_dir,
            started_in: started.elapsed(),
            client,
            cancel,
            tasks,
            dns,
            server: Some(server),
        })
    }

    /// A client of this cluster with the cluster token.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Cancels every component without waiting (what dropping does).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Stops in order: the node agents and the controller manager (containers keep running), the DNS server,
    /// then the API server ends its watches, drains requests and flushes storage.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(d) = self.dns.take() {
            d.shutdown().await;
        }
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn merge_user_kubeconfig(url: &str, ca_pem: &str, token: &str) {
    match kubeconfig::user_kubeconfig_path() {
        Some(path) => match kubeconfig::merge(&path, CONTEXT, url, ca_pem, token) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "merged the kubeling context into the kubeconfig")
            }
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "could not merge the kubeconfig"),
        },
        None => tracing::warn!("no user kubeconfig path (HOME unset); skipping the merge"),
    }
}

/// A client of `url` trusting `ca_pem`, authenticating with `token`.
pub async fn client_for(url: &str, ca_pem: &str, token: &str) -> anyhow::Result<kube::Client> {
    let text = kubeconfig::render(CONTEXT, url, ca_pem, token);
    let kc = kube::config::Kubeconfig::from_yaml(&text).context("reading the kubeconfig just written")?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// A client from a kubeconfig file (its current context).
pub async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// The controller manager's settings for a cluster whose CA is `ca_pem`.
pub fn controllers_config(ca_pem: String, volumes_dir: PathBuf) -> controllers::Config {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    controllers::Config {
        root_ca_pem: ca_pem,
        volumes_dir,
        identity: format!("{}_{}", host.trim(), std::process::id()),
        ..Default::default()
    }
}

/// The current context's cluster in a kubeconfig.
fn current_cluster(path: &Path) -> Option<kube::config::Cluster> {
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let current = kc.current_context.clone()?;
    let ctx = kc.contexts.iter().find(|c| c.name == current)?.context.clone()?;
    kc.clusters.into_iter().find(|c| c.name == ctx.cluster)?.cluster
}

/// The server URL of the current context's cluster in a kubeconfig.
pub fn kubeconfig_server(path: &Path) -> Option<String> {
    current_cluster(path)?.server
}

/// The CA bundle of the current context's cluster in a kubeconfig (`certificate-authority-data`).
pub fn kubeconfig_ca(path: &Path) -> Option<String> {
    let cluster = current_cluster(path)?;
    if let Some(data) = cluster.certificate_authority_data {
        use base64::Engine;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?;
        return String::from_utf8(pem).ok();
    }
    std::fs::read_to_string(cluster.certificate_authority?).ok()
}

/// The bearer token of the current context's user in a kubeconfig.
pub fn kubeconfig_token(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_norway::Value = serde_norway::from_str(&text).ok()?;
    let current = v.get("current-context")?.as_str()?;
    let ctx = v
        .get("contexts")?
        .as_sequence()?
        .iter()
        .find(|c| c.get("name").and_then(|n| n.as_str()) == Some(current))?;
    let user = ctx.get("context")?.get("user")?.as_str()?;
    let u = v
        .get("users")?
        .as_sequence()?
        .iter()
        .find(|u| u.get("name").and_then(|n| n.as_str()) == Some(user))?;
    u.get("user")?.get("token")?.as_str().map(str::to_string)
}

/// Node `i` (0-based) of a cluster of several: its name and data dir (`<base>`, `<base>-2`, ... in `DATA/node`,
/// `DATA/node-2`, ...).
pub fn nth_node(base: &str, data_dir: &Path, i: usize) -> (String, PathBuf) {
    match i {
        0 => (base.to_string(), data_dir.join("node")),
        i => (
            format!("{base}-{}", i + 1),
            data_dir.join(format!("node-{}", i + 1)),
        ),
    }
}

/// `$XDG_DATA_HOME/kubeling`, else `~/.local/share/kubeling`.
pub fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("kubeling"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_DATA_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".local/share/kubeling"))
}

/// The URL clients use: a wildcard bind is reached on loopback.
pub fn server_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    match ip {
        IpAddr::V4(v4) => format!("https://{v4}:{}", addr.port()),
        IpAddr::V6(v6) => format!("https://[{v6}]:{}", addr.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_named_and_placed_as_issue_14_says() {
        let data = Path::new("/d");
        let cases = [
            (0, "h", "/d/node"),
            (1, "h-2", "/d/node-2"),
            (9, "h-10", "/d/node-10"),
        ];
        for (i, name, dir) in cases {
            assert_eq!(nth_node("h", data, i), (name.to_string(), PathBuf::from(dir)));
        }
    }

    #[test]
    fn wildcard_binds_are_reached_on_loopback() {
        let cases = [
            ("0.0.0.0:6443", "https://127.0.0.1:6443"),
            ("[::]:6443", "https://[::1]:6443"),
            ("10.1.2.3:443", "https://10.1.2.3:443"),
            ("[fd00::1]:8443", "https://[fd00::1]:8443"),
        ];
        for (addr, want) in cases {
            assert_eq!(server_url(addr.parse().unwrap()), want, "{addr}");
        }
    }
}
