//! The `kubeling` binary: the command line and the wiring (storage → API server → node agent). The work
//! itself lives in the `apiserver` and `node` crates.

mod bench;
pub mod kubeconfig;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

/// A whole Kubernetes cluster for local development, in one binary.
#[derive(Parser)]
#[command(name = "kubeling", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the cluster in the foreground (today: the API server; the node agent arrives with step 3).
    Up(ServeArgs),
    /// Start the API server alone.
    Apiserver(ServeArgs),
    /// Print the version.
    Version,
    /// Measure the API server (start-up, memory, create rate, LIST, watch fan-out) and print the figures.
    Bench(bench::BenchArgs),
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
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("kubeling"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_DATA_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".local/share/kubeling"))
}

/// The URL clients use: a wildcard bind is reached on loopback.
fn server_url(addr: SocketAddr) -> String {
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => default_data_dir()?,
    };
    let config = apiserver::Config {
        data_dir: data_dir.clone(),
        bind: args.bind,
        port: args.port,
        hub: Default::default(),
    };
    let server = apiserver::ApiServer::start(config)
        .await
        .context("starting the API server")?;
    let url = server_url(server.addr);
    let kubeconfig_path = data_dir.join("kubeconfig");
    kubeconfig::write(
        &kubeconfig_path,
        "kubeling",
        &url,
        &server.tls.ca_pem,
        &server.tls.token,
    )
    .with_context(|| format!("writing {}", kubeconfig_path.display()))?;
    if !args.no_kubeconfig_merge {
        match kubeconfig::user_kubeconfig_path() {
            Some(path) => {
                match kubeconfig::merge(&path, "kubeling", &url, &server.tls.ca_pem, &server.tls.token) {
                    Ok(()) => {
                        tracing::info!(path = %path.display(), "merged the kubeling context into the kubeconfig")
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "could not merge the kubeconfig")
                    }
                }
            }
            None => tracing::warn!("no user kubeconfig path (HOME unset); skipping the merge"),
        }
    }
    println!(
        "kubeling is ready at {url} in {} ms: export KUBECONFIG={}",
        started.elapsed().as_millis(),
        kubeconfig_path.display()
    );
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUBELING_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
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
        Command::Up(args) | Command::Apiserver(args) => runtime()?.block_on(serve(args)),
        Command::Bench(args) => runtime()?.block_on(bench::run(args)),
    }
}
