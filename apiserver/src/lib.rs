//! kubeling's Kubernetes API server: storage in sled, a watch hub, and an HTTPS front end that kubectl, the
//! Rust `kube` crate and the Python client accept as a real API server.
//!
//! ```text
//! kubectl / kube::Client / python client
//!    │ HTTPS (axum + rustls, bearer token)
//!    ▼
//! http (routing, query parsing, content negotiation, Status errors, Table)
//!    │                                  └──► watch streams (http/watch) ◄── watch::Hub
//! registry (per-kind strategy: defaulting, validation, status/spec split, graceful delete)   ▲
//!    │                                                                                         │
//! storage::Storage::write ── one writer: next revision, Store::write (object + revision) ──► flusher:
//!                            fsync once per batch (group commit) → committed view + Hub::publish → ack
//! ```
//!
//! Layers point one way: `http → registry → storage → watch`; `storage` and `watch` know nothing of HTTP.
//! `http` authenticates every request (the admin token, or a service account JWT checked by
//! [`serviceaccount`] against the registry), honours impersonation headers and authorizes it with
//! [`rbac`] (upstream's RBAC authorizer over the stored roles and bindings; `system:masters` at once),
//! and serves `serviceaccounts/token` through it; the registry
//! runs the ServiceAccount admission on pod creation when [`Config::service_account_admission`] is on.
//! [`crd`] adds the kinds of CustomResourceDefinitions to the served table at run time (an in-server
//! controller watches CRDs in storage) and holds the schema validation, pruning, defaulting and CEL rules
//! of custom objects.

pub mod crd;
pub mod encode;
pub mod error;
pub mod http;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod selector;
pub mod serviceaccount;
pub mod storage;
pub mod table;
pub mod tls;
pub mod user;
pub mod watch;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;
use crate::storage::{SledStore, Storage, Store, StoreError};
use crate::tls::TlsMaterial;
use crate::watch::HubConfig;

/// How to run the API server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the database and the PKI live.
    pub data_dir: PathBuf,
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port; 0 takes a free one.
    pub port: u16,
    /// Watch history and per-watcher buffer.
    pub hub: HubConfig,
    /// Run the ServiceAccount admission plugin on pod creation (default `serviceAccountName`, require the
    /// ServiceAccount, add the `kube-api-access-*` token volume). On in a real cluster, where the
    /// controller manager creates each namespace's `default` ServiceAccount; tests that run the API
    /// server alone turn it off.
    pub service_account_admission: bool,
    /// How long an event lives after its last write (kube-apiserver's `--event-ttl`, 1 h by default:
    /// [`registry::event_ttl::DEFAULT_EVENT_TTL`]).
    pub event_ttl: Duration,
    /// Where objects are stored.
    pub store: StoreChoice,
}

/// The storage engine (`--store`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreChoice {
    /// sled in the data directory (`DATA/db`): nothing else to run.
    #[default]
    Sled,
    /// etcd v3: its members' URLs and the key prefix of this cluster (several API servers may share it).
    Etcd {
        /// `http://host:2379`, ...
        endpoints: Vec<String>,
        /// The key prefix (`--etcd-prefix`).
        prefix: String,
    },
}

impl std::str::FromStr for StoreChoice {
    type Err = String;

    /// `sled`, or `etcd=http://host:2379[,http://host2:2379...]`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('=') {
            None if s == "sled" => Ok(StoreChoice::Sled),
            Some(("etcd", urls)) => {
                let endpoints: Vec<String> = urls
                    .split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_string)
                    .collect();
                if endpoints.is_empty() {
                    return Err(format!(
                        "{s:?}: etcd= needs at least one URL, e.g. etcd=http://127.0.0.1:2379"
                    ));
                }
                for e in &endpoints {
                    match e.parse::<::http::Uri>() {
                        Ok(u) if u.scheme_str() == Some("http") && u.host().is_some() => {}
                        _ => {
                            return Err(format!(
                                "{e:?} is not an etcd URL: use http://host:port (TLS to etcd is not supported)"
                            ));
                        }
                    }
                }
                Ok(StoreChoice::Etcd {
                    endpoints,
                    prefix: DEFAULT_ETCD_PREFIX.to_string(),
                })
            }
            _ => Err(format!(
                "{s:?} is not a store: use `sled` or `etcd=http://host:2379[,http://host2:2379...]`"
            )),
        }
    }
}

/// The etcd key prefix of a cluster unless `--etcd-prefix` says otherwise.
pub const DEFAULT_ETCD_PREFIX: &str = "/kubeling";

/// The id of the cluster whose data directory this is: made once, kept in `DATA/cluster-id`. An etcd prefix
/// belongs to one cluster id.
pub fn cluster_id(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("cluster-id");
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        _ => {
            std::fs::create_dir_all(data_dir)?;
            let id = uuid::Uuid::new_v4().to_string();
            std::fs::write(&path, &id)?;
            Ok(id)
        }
    }
}

/// Why the API server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Certificates or token.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The database.
    #[error("storage: {0}")]
    Storage(#[from] StoreError),
    /// Creating the built-in objects.
    #[error("creating the system namespaces: {0}")]
    Bootstrap(error::ApiError),
    /// Listening.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// A running API server.
pub struct ApiServer {
    /// The address it listens on (the real port when 0 was asked).
    pub addr: SocketAddr,
    /// The CA, serving certificate and token.
    pub tls: TlsMaterial,
    storage: Storage,
    cancel: CancellationToken,
    handle: axum_server::Handle<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

fn make_private_dir(path: &Path) -> Result<(), StartError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| StartError::DataDir {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    Ok(())
}

impl ApiServer {
    /// Open storage, make or load the PKI, create the system namespaces, and start serving HTTPS.
    pub async fn start(config: Config) -> Result<ApiServer, StartError> {
        make_private_dir(&config.data_dir)?;
        let extra_sans: Vec<String> = if config.bind.is_loopback() || config.bind.is_unspecified() {
            Vec::new()
        } else {
            vec![config.bind.to_string()]
        };
        let tls = tls::load_or_create(&config.data_dir.join("pki"), &extra_sans)?;
        let storage = match &config.store {
            StoreChoice::Sled => {
                let store: Arc<dyn Store> = Arc::new(SledStore::open(&config.data_dir.join("db"))?);
                Storage::open(store, config.hub)?
            }
            StoreChoice::Etcd { endpoints, prefix } => {
                let cluster_id = cluster_id(&config.data_dir).map_err(|source| StartError::DataDir {
                    path: config.data_dir.clone(),
                    source,
                })?;
                let cfg = storage::EtcdConfig {
                    endpoints: endpoints.clone(),
                    prefix: prefix.clone(),
                    cluster_id,
                };
                Storage::open_etcd(&cfg, config.hub).await?
            }
        };
        Self::start_with(config, storage, tls).await
    }

    /// Start over an already opened storage (tests use the in-memory store).
    pub async fn start_with(
        config: Config,
        storage: Storage,
        tls: TlsMaterial,
    ) -> Result<ApiServer, StartError> {
        // The table of schemas every write walks: compiled on the other core while this one starts.
        drop(tokio::task::spawn_blocking(registry::resources::canonical::warm));
        let registry =
            Registry::new(storage.clone()).with_service_account_admission(config.service_account_admission);
        let signer = serviceaccount::Signer::load_or_create(&config.data_dir.join("pki"))?;
        registry.bootstrap().await.map_err(StartError::Bootstrap)?;
        // CRDs in storage are served before the first request.
        crd::controller::sync_all(&registry).await;
        let addr = SocketAddr::new(config.bind, config.port);
        let listener =
            std::net::TcpListener::bind(addr).map_err(|source| StartError::Listen { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| StartError::Listen { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| StartError::Listen { addr, source })?;
        let cancel = CancellationToken::new();
        let state = Arc::new(http::ServerState {
            registry: registry.clone(),
            token: tls.token.clone(),
            cancel: cancel.clone(),
            server_address: addr.to_string(),
            node_token: Some(tls.token.clone()),
            tokens: Arc::new(serviceaccount::Tokens::new(signer)),
        });
        let server_config = tls::server_config(&tls)?;
        let rustls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(server_config));
        let handle = axum_server::Handle::new();
        // TCP_NODELAY on every accepted connection: streams (watch, exec, port-forward) write small
        // frames that must not wait for the client's delayed ACK (40 ms each on Linux).
        let server = axum_server::from_tcp_rustls(listener, rustls)
            .map_err(|source| StartError::Listen { addr, source })?
            .map(|tls| tls.acceptor(axum_server::accept::NoDelayAcceptor::new()))
            .handle(handle.clone());
        let app = http::router(state);
        let mut tasks = vec![crd::controller::spawn(registry.clone(), cancel.clone())];
        tasks.push(registry::event_ttl::spawn(
            registry.clone(),
            config.event_ttl,
            cancel.clone(),
        ));
        tasks.push(tokio::spawn(async move {
            if let Err(e) = server.serve(app.into_make_service()).await {
                tracing::error!(error = %e, "the HTTPS server stopped");
            }
        }));
        Ok(ApiServer {
            addr,
            tls,
            storage,
            cancel,
            handle,
            tasks,
        })
    }

    /// The storage (for benchmarks: revision, size on disk).
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Shut down in order: end watch streams, stop accepting and drain requests, flush storage.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.handle.graceful_shutdown(Some(Duration::from_secs(5)));
        for t in self.tasks {
            let _ = t.await;
        }
        let storage = self.storage.clone();
        let _ = tokio::task::spawn_blocking(move || storage.shutdown()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_flags_parse_as_sled_or_etcd_urls() {
        assert_eq!("sled".parse::<StoreChoice>(), Ok(StoreChoice::Sled));
        assert_eq!(
            "etcd=http://a:2379, http://b:2379".parse::<StoreChoice>(),
            Ok(StoreChoice::Etcd {
                endpoints: vec!["http://a:2379".into(), "http://b:2379".into()],
                prefix: DEFAULT_ETCD_PREFIX.into(),
            })
        );
        for bad in [
            "",
            "mysql",
            "etcd=",
            "etcd=a:2379",
            "etcd=https://a:2379",
            "sled=x",
        ] {
            assert!(bad.parse::<StoreChoice>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_data_dir_keeps_its_cluster_id() {
        let dir = tempfile::tempdir().unwrap();
        let first = cluster_id(dir.path()).unwrap();
        assert_eq!(cluster_id(dir.path()).unwrap(), first);
        assert_ne!(cluster_id(&dir.path().join("other")).unwrap(), first);
    }
}
