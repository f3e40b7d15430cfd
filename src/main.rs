//! The `kubeling` binary: the command line and the wiring (storage → API server → controller manager → node
//! agent). The work itself lives in the `apiserver`, `controllers` and `node` crates.

mod bench;
mod testcmd;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
// A Go duration as the kubelet's flags take it: `500ms`, `2s`, `1m`, `1m30s`, `1h` (the node agent's parser, which
// its simulated runtime's annotations use too).
use clap::{Args, Parser, Subcommand};
use cluster::{client_from, controllers_config, default_data_dir, kubeconfig_ca, kubeconfig_token};
use node::runtime::sim::parse_duration;

/// A whole Kubernetes cluster for local development, in one binary.
#[derive(Parser)]
#[command(name = "kubeling", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the cluster in the foreground: the API server, the controller manager (with the scheduler) and
    /// a node agent on Docker.
    Up(Box<UpArgs>),
    /// Start the API server alone.
    Apiserver(ServeArgs),
    /// Run a node agent alone against any API server.
    Node(NodeArgs),
    /// Run the controller manager (and the scheduler) alone against any API server.
    Controllers(ControllersArgs),
    /// Run the cluster DNS server alone against any API server (it applies the `kube-dns` Service).
    Dns(DnsArgs),
    /// Print the version.
    Version,
    /// Measure the API server (start-up, memory, create rate, LIST, watch fan-out) and print the figures;
    /// `--node` adds pod start-up on Docker, `--probes` the cost and latency of probes.
    Bench(bench::BenchArgs),
    /// Run kuttl and chainsaw suites (each recognised as written) against a cluster of its own, or
    /// `--kubeconfig`'s; exits 0 when every test passes, 1 otherwise.
    Test(testcmd::TestArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Data directory (database, certificates, token, kubeconfig).
    /// Default: $XDG_DATA_HOME/kubeling, else ~/.local/share/kubeling.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// HTTPS port; 0 takes a free port (the kubeconfig records the real one).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Do not merge a `kubeling` context into the user's kubeconfig ($KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    no_kubeconfig_merge: bool,
    /// Admission plugins to switch off, as kube-apiserver's flag: `ServiceAccount` (which needs the
    /// controller manager's `default` ServiceAccounts) is the one that can be.
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
    /// How long an event is kept after its last change (kube-apiserver's flag; a Go duration).
    #[arg(long, default_value = "1h", value_parser = parse_period)]
    event_ttl: Duration,
    /// Where objects are stored: `sled` (in the data directory) or `etcd=http://host:2379[,...]` (several
    /// API servers may share one etcd; they must share the data directory's certificates and token;
    /// `https://` URLs with --etcd-cafile).
    #[arg(long, default_value = "sled")]
    store: apiserver::StoreChoice,
    /// The key prefix of this cluster's objects in etcd (kube-apiserver's `--etcd-prefix`).
    #[arg(long, default_value = apiserver::DEFAULT_ETCD_PREFIX)]
    etcd_prefix: String,
    /// The CA that signed etcd's certificates, for `https://` etcd URLs (kube-apiserver's flag).
    #[arg(long, value_name = "FILE")]
    etcd_cafile: Option<PathBuf>,
    /// The client certificate etcd asks for (`--client-cert-auth`; kube-apiserver's flag).
    #[arg(long, value_name = "FILE")]
    etcd_certfile: Option<PathBuf>,
    /// The client certificate's key (kube-apiserver's flag).
    #[arg(long, value_name = "FILE")]
    etcd_keyfile: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct UpArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// The container runtime of the nodes: `docker`, or `sim` (simulated pods, no Docker: see README).
    #[arg(long, value_enum, default_value_t = RuntimeArg::Docker)]
    runtime: RuntimeArg,
    /// Node agents to run, named `<name>`, `<name>-2`, ... with data dirs DATA/node, DATA/node-2, ...
    /// (only the first runs static pods). On Docker they share the one engine and the cluster network.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=node::runtime::sim::MAX_SIM_NODES as i64))]
    nodes: u32,
    #[command(flatten)]
    node: NodeOptions,
    #[command(flatten)]
    controllers: ControllerOptions,
    #[command(flatten)]
    dns: DnsOptions,
}

/// `up --runtime`.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum RuntimeArg {
    /// Pods run as Docker containers.
    Docker,
    /// Pods are simulated in memory (`sim.kubeling.dev/*` annotations set their lifecycle).
    Sim,
}

/// Options of the cluster DNS server, shared by `up` and `dns`.
#[derive(Args, Clone)]
struct DnsOptions {
    /// Where the cluster DNS server listens, UDP and TCP on one port (port 0: a free one); the `kube-dns`
    /// Service's endpoints name the real address.
    #[arg(long, default_value = "127.0.0.1:0")]
    dns_listen: SocketAddr,
}

#[derive(Args, Clone)]
struct DnsArgs {
    /// The kubeconfig of the API server to serve the names of.
    #[arg(long)]
    kubeconfig: PathBuf,
    #[command(flatten)]
    dns: DnsOptions,
    /// The cluster domain.
    #[arg(long, default_value = dns::DEFAULT_CLUSTER_DOMAIN)]
    cluster_domain: String,
    /// The resolv.conf whose nameservers answer the names outside the cluster domain.
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: PathBuf,
}

/// Options of the controller manager, shared by `up` and `controllers` (kube-controller-manager's names).
#[derive(Args, Clone)]
struct ControllerOptions {
    /// How long a node may go without a heartbeat before it is marked Unknown (e.g. 50s).
    #[arg(long, default_value = "50s", value_parser = parse_period)]
    node_monitor_grace_period: Duration,
    /// Terminated pods kept before the oldest are deleted (0: no limit).
    #[arg(long, default_value_t = 12500)]
    terminated_pod_gc_threshold: usize,
}

impl ControllerOptions {
    fn apply(&self, cfg: &mut controllers::Config) {
        cfg.node_monitor_grace_period = self.node_monitor_grace_period;
        cfg.terminated_pod_gc_threshold = self.terminated_pod_gc_threshold;
    }
}

/// Options of the node agent, shared by `up` and `node`.
#[derive(Args, Clone)]
struct NodeOptions {
    /// Node name (default: the host name).
    #[arg(long)]
    node_name: Option<String>,
    /// The node's IP: its InternalIP and the pods' hostIP, where its logs/exec endpoint listens. `up`:
    /// default 127.0.0.1; `node`: default this machine's address on the route to the API server.
    #[arg(long)]
    node_ip: Option<IpAddr>,
    /// The pause image; built locally when missing.
    #[arg(long, default_value = node::runtime::docker::DEFAULT_PAUSE_IMAGE)]
    pod_infra_image: String,
    /// Port of the node agent's own HTTPS endpoint (logs, exec); 0 takes a free one.
    #[arg(long, default_value_t = 0)]
    kubelet_port: u16,
    /// Directory of static pod manifests, one Pod per file. `up`: default DATA/manifests (created);
    /// `node`: none.
    #[arg(long, visible_alias = "pod-manifest-path")]
    static_pod_path: Option<PathBuf>,
    /// How often the manifest directory is listed in full, besides being watched (e.g. 2s, 20s, 1m).
    #[arg(long, default_value = "20s", value_parser = parse_period)]
    file_check_frequency: Duration,
    /// URL of static pod manifests: a Pod or a PodList in YAML or JSON (http:// only).
    #[arg(long, value_parser = parse_manifest_url)]
    manifest_url: Option<String>,
    /// Header for the manifest URL's requests, `Name:Value` (repeatable; `A:1,B:2` sets two).
    #[arg(long = "manifest-url-header", value_parser = parse_headers)]
    manifest_url_headers: Vec<Headers>,
    /// How often the manifest URL is fetched (e.g. 2s, 20s, 1m).
    #[arg(long, default_value = "20s", value_parser = parse_period)]
    http_check_frequency: Duration,
    /// IPs of the cluster DNS server that ClusterFirst pods use (comma-separated). `up`: default the
    /// `kube-dns` Service's 10.96.0.10; `node`: none (ClusterFirst pods then fall back to Default).
    #[arg(long, value_delimiter = ',')]
    cluster_dns: Vec<String>,
    /// The cluster domain, searched by ClusterFirst pods.
    #[arg(long, default_value = dns::DEFAULT_CLUSTER_DOMAIN)]
    cluster_domain: String,
    /// The host's resolver configuration, the base of pods' DNS settings; "" gives pods nameserver
    /// 127.0.0.1 and no search path.
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: PathBuf,
    /// Port-forward only through the helper exec'd in the pod's sandbox, never by dialing the pod IP
    /// (the path taken where pod IPs are unreachable, e.g. Docker Desktop).
    #[arg(long)]
    port_forward_via_helper: bool,
}

/// Header pairs from one `--manifest-url-header`.
#[derive(Clone, Debug)]
struct Headers(Vec<(String, String)>);

/// `Name:Value[,Name:Value...]`, as the kubelet's `--manifest-url-header`.
fn parse_headers(s: &str) -> Result<Headers, String> {
    s.split(',')
        .map(|pair| match pair.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(format!("{pair:?} is not Name:Value")),
        })
        .collect::<Result<_, _>>()
        .map(Headers)
}

/// `http://host[:port]/path`: the node agent has no TLS client for the manifest URL.
fn parse_manifest_url(s: &str) -> Result<String, String> {
    match s.parse::<http::Uri>() {
        Ok(uri) if uri.scheme_str() == Some("http") && uri.host().is_some() => Ok(s.to_string()),
        Ok(_) => Err(format!("{s:?}: only http://host[:port]/path URLs are supported")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

/// A check period: a duration greater than zero (zero would poll without pause).
fn parse_period(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: the period must be greater than 0")),
        d => Ok(d),
    }
}

#[derive(Args, Clone)]
struct NodeArgs {
    /// The kubeconfig of the API server to join.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Data directory of the node (cluster id, pod volumes). Default: DATA/node under the default dir.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    node: NodeOptions,
}

#[derive(Args, Clone)]
struct ControllersArgs {
    /// The kubeconfig of the API server to manage.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Data directory (the local volume provisioner's directories). Default: DATA/volumes under the default
    /// dir.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Controllers to run: `*` for all, names to pick, `-name` to leave one out (e.g. `*,-cronjob`).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Do not take the leader lease (only for a single controller manager).
    #[arg(long)]
    no_leader_elect: bool,
    #[command(flatten)]
    options: ControllerOptions,
}

async fn run_controllers(args: ControllersArgs) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => default_data_dir()?,
    };
    let client = client_from(&args.kubeconfig).await?;
    let mut cfg = controllers_config(
        kubeconfig_ca(&args.kubeconfig).unwrap_or_default(),
        data_dir.join("volumes"),
    );
    cfg.controllers = args.controllers;
    cfg.leader_elect = !args.no_leader_elect;
    args.options.apply(&mut cfg);
    let cancel = tokio_util::sync::CancellationToken::new();
    let manager = tokio::spawn(controllers::run(client, cfg, cancel.clone()));
    println!("kubeling controller manager started");
    signals.wait().await;
    cancel.cancel();
    manager.await?;
    Ok(())
}

fn agent_config(data_dir: &std::path::Path, o: &NodeOptions) -> node::agent::AgentConfig {
    let mut cfg = node::agent::AgentConfig::new(data_dir);
    // Lower-cased, as the kubelet's --hostname-override: a node name is a DNS subdomain.
    if let Some(n) = &o.node_name {
        cfg.node_name = n.trim().to_lowercase();
    }
    cfg.node_ip = o.node_ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)).to_string();
    cfg.pause_image = o.pod_infra_image.clone();
    cfg.kubelet_port = o.kubelet_port;
    cfg.static_pod_path = o.static_pod_path.clone();
    cfg.file_check_frequency = o.file_check_frequency;
    cfg.manifest_url = o.manifest_url.clone();
    cfg.manifest_url_headers = o.manifest_url_headers.iter().flat_map(|h| h.0.clone()).collect();
    cfg.http_check_frequency = o.http_check_frequency;
    cfg.dns = node::dns::DnsSettings {
        cluster_dns: o.cluster_dns.iter().filter(|s| !s.is_empty()).cloned().collect(),
        cluster_domain: o.cluster_domain.clone(),
        resolv_conf: (!o.resolv_conf.as_os_str().is_empty()).then(|| o.resolv_conf.clone()),
    };
    if o.port_forward_via_helper {
        node::portforward::disable_direct_dial();
    }
    cfg
}

async fn run_dns(args: DnsArgs) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let client = client_from(&args.kubeconfig).await?;
    let cfg = dns::Config {
        listen: args.dns.dns_listen,
        domain: args.cluster_domain,
        resolv_conf: args.resolv_conf,
        publish_service: true,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let running = dns::start(client, cfg, cancel.clone())
        .await
        .context("starting the cluster DNS server")?;
    println!("kubeling cluster DNS listening on {}", running.addr);
    signals.wait().await;
    cancel.cancel();
    running.shutdown().await;
    Ok(())
}

async fn run_node(args: NodeArgs) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => default_data_dir()?.join("node"),
    };
    let client = client_from(&args.kubeconfig).await?;
    let mut node_opts = args.node.clone();
    if node_opts.node_ip.is_none() {
        let server = cluster::kubeconfig_server(&args.kubeconfig).unwrap_or_default();
        node_opts.node_ip = Some(ip_towards(&server));
    }
    let mut cfg = agent_config(&data_dir, &node_opts);
    // The API server reaches the node's logs/exec endpoint with the kubeconfig's token.
    cfg.node_token = kubeconfig_token(&args.kubeconfig).unwrap_or_default();
    let cancel = tokio_util::sync::CancellationToken::new();
    let agent = tokio::spawn(node::agent::run(client, cfg, cancel.clone()));
    println!("kubeling node agent started: node data in {}", data_dir.display());
    signals.wait().await;
    cancel.cancel();
    agent.await??;
    Ok(())
}

/// This machine's address on the route to the API server at `server_url` (the kubelet's default node IP
/// is the host's own address): a connected UDP socket's local address, no packet sent. Loopback when the
/// server is on this machine or cannot be resolved.
fn ip_towards(server_url: &str) -> IpAddr {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let Ok(uri) = server_url.parse::<http::Uri>() else {
        return loopback;
    };
    let Some(host) = uri.host() else {
        return loopback;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(443);
    let Some(target) = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .ok()
        .and_then(|mut a| a.next())
    else {
        return loopback;
    };
    let local = if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    std::net::UdpSocket::bind(local)
        .and_then(|s| s.connect(target).and_then(|()| s.local_addr()))
        .map(|a| a.ip())
        .unwrap_or(loopback)
}

/// `up`'s nodes: how many, and on which runtime.
#[derive(Clone, Copy)]
struct Nodes {
    count: u32,
    runtime: RuntimeArg,
}

async fn serve(
    args: ServeArgs,
    node_opts: Option<NodeOptions>,
    controller_opts: Option<ControllerOptions>,
    dns_opts: Option<DnsOptions>,
    nodes: Nodes,
) -> anyhow::Result<()> {
    let signals = Signals::install()?;
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => default_data_dir()?,
    };
    let server = apiserver::Config {
        data_dir: data_dir.clone(),
        bind: args.bind,
        port: args.port,
        hub: Default::default(),
        service_account_admission: !args
            .disable_admission_plugins
            .iter()
            .any(|p| p == "ServiceAccount"),
        event_ttl: args.event_ttl,
        store: match args.store {
            apiserver::StoreChoice::Sled
                if args.etcd_cafile.is_some()
                    || args.etcd_certfile.is_some()
                    || args.etcd_keyfile.is_some() =>
            {
                anyhow::bail!(
                    "--etcd-cafile, --etcd-certfile and --etcd-keyfile are for --store etcd=https://...; the store \
                     is sled"
                );
            }
            apiserver::StoreChoice::Etcd { endpoints, .. } => apiserver::StoreChoice::Etcd {
                endpoints,
                prefix: args.etcd_prefix,
                tls: apiserver::EtcdTlsFiles {
                    ca: args.etcd_cafile,
                    cert: args.etcd_certfile,
                    key: args.etcd_keyfile,
                },
            },
            sled => sled,
        },
    };
    let mut cfg = cluster::ClusterConfig {
        server,
        merge_user_kubeconfig: !args.no_kubeconfig_merge,
        dns: None,
        controllers: None,
        nodes: Vec::new(),
    };
    // `up`: the controller manager, the cluster DNS server and a node agent with the defaults of a whole cluster.
    if let Some(opts) = node_opts {
        if let Some(d) = &dns_opts {
            cfg.dns = Some(dns::Config {
                listen: d.dns_listen,
                domain: opts.cluster_domain.clone(),
                resolv_conf: opts.resolv_conf.clone(),
                publish_service: true,
            });
        }
        // The CA is the one the API server makes or loads at start; the controller manager gets it from there.
        let mut c = controllers_config(String::new(), data_dir.join("volumes"));
        if let Some(o) = &controller_opts {
            o.apply(&mut c);
        }
        cfg.controllers = Some(c);
        let mut first = agent_config(&data_dir.join("node"), &opts);
        if first.dns.cluster_dns.is_empty() {
            first.dns.cluster_dns = vec![dns::DEFAULT_CLUSTER_DNS_IP.to_string()];
        }
        if first.static_pod_path.is_none() {
            // `up`'s default manifest directory exists by the time the ready line says so.
            let dir = data_dir.join("manifests");
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            first.static_pod_path = Some(dir);
        }
        // Every node of the cluster marks its containers with one cluster id and puts its pods on one Docker
        // network; the first node's agent runs the Service gateway for all of them.
        if nodes.runtime == RuntimeArg::Docker {
            first.cluster_id = Some(
                node::agent::cluster_id(&first.data_dir)
                    .with_context(|| format!("reading the cluster id in {}", first.data_dir.display()))?,
            );
        }
        for i in 0..nodes.count {
            let mut n = first.clone();
            (n.node_name, n.data_dir) = cluster::nth_node(&first.node_name, &data_dir, i as usize);
            if i > 0 {
                // Only the first node runs static pods; the others take a free kubelet port each.
                n.static_pod_path = None;
                n.manifest_url = None;
                n.kubelet_port = 0;
                n.service_proxy = false;
            }
            if nodes.runtime == RuntimeArg::Sim {
                n.runtime = node::agent::RuntimeChoice::Sim(
                    node::runtime::sim::PodCidr::for_node(i).map_err(anyhow::Error::msg)?,
                );
            }
            cfg.nodes.push(n);
        }
    }
    let cluster = cluster::Cluster::start(cfg).await?;
    println!(
        "kubeling is ready at {} in {} ms: export KUBECONFIG={}",
        cluster.url,
        cluster.started_in.as_millis(),
        cluster.kubeconfig.display()
    );
    signals.wait().await;
    tracing::info!("shutting down");
    // Order: the node agent and the controller manager stop (containers keep running), then the API server ends its
    // watches, drains requests and flushes storage.
    cluster.shutdown().await;
    Ok(())
}

/// SIGTERM and SIGINT, caught from the start of a command: a signal sent as soon as the process says it
/// is ready (or while it starts) stops it cleanly, rather than killing it by the default disposition
/// before a handler exists.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        })
    }

    /// The first of the two (at once if one came already).
    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// mimalloc, not glibc's malloc: a quarter less server CPU per durable create (ARCHITECTURE, Decisions).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUBELING_LOG")
                // hickory logs refused and malformed queries at info and above.
                .unwrap_or_else(|_| {
                    // `test` runs its cluster in this process: only its warnings go between the test lines.
                    tracing_subscriber::EnvFilter::new(if matches!(cli.command, Command::Test(_)) {
                        "warn,kube_client=off,hickory_server=error,hickory_proto=error,hickory_net=error"
                    } else {
                        "info,hickory_server=warn,hickory_proto=warn,hickory_net=warn"
                    })
                }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Version => {
            println!(
                "kubeling {} (Kubernetes {})",
                env!("CARGO_PKG_VERSION"),
                apiserver::http::discovery::KUBE_VERSION
            );
            Ok(())
        }
        Command::Up(args) => {
            let args = *args;
            runtime()?.block_on(serve(
                args.serve,
                Some(args.node),
                Some(args.controllers),
                Some(args.dns),
                Nodes {
                    count: args.nodes,
                    runtime: args.runtime,
                },
            ))
        }
        Command::Apiserver(args) => runtime()?.block_on(serve(
            args,
            None,
            None,
            None,
            Nodes {
                count: 0,
                runtime: RuntimeArg::Docker,
            },
        )),
        Command::Dns(args) => runtime()?.block_on(run_dns(args)),
        Command::Node(args) => runtime()?.block_on(run_node(args)),
        Command::Controllers(args) => runtime()?.block_on(run_controllers(args)),
        Command::Bench(args) => runtime()?.block_on(bench::run(args)),
        Command::Test(args) => std::process::exit(runtime()?.block_on(testcmd::run(args))?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_ip_is_the_address_on_the_route_to_the_api_server() {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(ip_towards("https://127.0.0.1:6443"), loopback);
        assert_eq!(ip_towards("https://localhost:6443"), loopback);
        assert_eq!(ip_towards("not a url"), loopback);
        assert_eq!(ip_towards(""), loopback);
        // A server elsewhere is reached from one of this machine's own addresses, never loopback.
        if let Some(ip) = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect("192.0.2.1:6443").and_then(|()| s.local_addr()))
            .ok()
            .map(|a| a.ip())
        {
            assert_eq!(ip_towards("https://192.0.2.1:6443"), ip);
            assert!(!ip.is_loopback());
        }
    }

    #[test]
    fn durations_are_read_as_the_kubelet_flags_write_them() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "20", "s", "2x", "1m30", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_period("0s").is_err());
        assert_eq!(parse_period("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn manifest_urls_are_plain_http() {
        assert!(parse_manifest_url("http://127.0.0.1:8080/pods").is_ok());
        assert!(parse_manifest_url("https://example.com/pods").is_err());
        assert!(parse_manifest_url("/pods").is_err());
        assert!(parse_manifest_url("http://").is_err());
    }

    #[test]
    fn headers_are_name_value_pairs() {
        let h = parse_headers("X-A:1,X-B: two").unwrap();
        assert_eq!(h.0, [("X-A".into(), "1".into()), ("X-B".into(), "two".into())]);
        assert!(parse_headers("novalue").is_err());
        assert!(parse_headers(":x").is_err());
    }
}
