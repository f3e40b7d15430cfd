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
        /// `http://host:2379`, ... (or `https://`, with `tls`).
        endpoints: Vec<String>,
        /// The key prefix (`--etcd-prefix`).
        prefix: String,
        /// TLS to the members (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`).
        tls: EtcdTlsFiles,
    },
}

/// The files of TLS to etcd, as kube-apiserver's flags: the CA that signed the members' certificates, and
/// the client certificate and key (etcd with `--client-cert-auth` asks for them). Unset: plain `http://`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTlsFiles {
    /// `--etcd-cafile`.
    pub ca: Option<PathBuf>,
    /// `--etcd-certfile`.
    pub cert: Option<PathBuf>,
    /// `--etcd-keyfile`.
    pub key: Option<PathBuf>,
}

impl EtcdTlsFiles {
    /// Read and check the files: `None` when none is given; an error naming the flag and file when one
    /// cannot be read or holds no certificate or key, when the client certificate comes without its key
    /// (or the other way round), or when it comes without the CA.
    pub fn load(&self) -> Result<Option<etcd::Tls>, String> {
        let read = |flag: &str, path: &Path| {
            std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
        };
        let identity = match (&self.cert, &self.key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((read("--etcd-certfile", cert)?, read("--etcd-keyfile", key)?)),
            (Some(_), None) => {
                return Err("--etcd-certfile needs --etcd-keyfile (the client certificate's key)".into());
            }
            (None, Some(_)) => {
                return Err("--etcd-keyfile needs --etcd-certfile (the client certificate)".into());
            }
        };
        let Some(ca) = &self.ca else {
            return match identity {
                None => Ok(None),
                Some(_) => Err(
                    "a client certificate for etcd needs --etcd-cafile (the CA that signed etcd's \
                                certificate)"
                        .into(),
                ),
            };
        };
        let tls = etcd::Tls {
            ca_pem: read("--etcd-cafile", ca)?,
            identity,
        };
        let name = |flag: &str, path: &Option<PathBuf>| {
            format!("{flag} {}", path.as_deref().unwrap_or(Path::new("")).display())
        };
        tls.check(&etcd::TlsNames {
            ca: name("--etcd-cafile", &self.ca),
            cert: name("--etcd-certfile", &self.cert),
            key: name("--etcd-keyfile", &self.key),
        })
        .map_err(|e| e.to_string())?;
        Ok(Some(tls))
    }
}

impl std::str::FromStr for StoreChoice {
    type Err = String;

    /// `sled`, or `etcd=http://host:2379[,http://host2:2379...]` (or `https://` URLs: TLS, whose files are
    /// flags of their own).
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
                        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => {}
                        _ => {
                            return Err(format!(
                                "{e:?} is not an etcd URL: use http://host:port, or https://host:port with \
                                 --etcd-cafile"
                            ));
                        }
                    }
                }
                Ok(StoreChoice::Etcd {
                    endpoints,
                    prefix: DEFAULT_ETCD_PREFIX.to_string(),
                    tls: EtcdTlsFiles::default(),
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
    /// The files of TLS to etcd.
    #[error("etcd TLS: {0}")]
    EtcdTls(String),
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
            StoreChoice::Etcd {
                endpoints,
                prefix,
                tls: tls_files,
            } => {
                let cluster_id = cluster_id(&config.data_dir).map_err(|source| StartError::DataDir {
                    path: config.data_dir.clone(),
                    source,
                })?;
                let cfg = storage::EtcdConfig {
                    endpoints: endpoints.clone(),
                    prefix: prefix.clone(),
                    cluster_id,
                    tls: tls_files.load().map_err(StartError::EtcdTls)?,
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
                tls: EtcdTlsFiles::default(),
            })
        );
        assert!("etcd=https://a:2379".parse::<StoreChoice>().is_ok());
        for bad in [
            "",
            "mysql",
            "etcd=",
            "etcd=a:2379",
            "etcd=unix:///run/etcd",
            "sled=x",
        ] {
            assert!(bad.parse::<StoreChoice>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn etcd_tls_files_are_read_in_the_combinations_kube_apiserver_takes() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nMA==\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let missing = dir.path().join("missing.pem");
        let files = |ca: Option<&PathBuf>, c: Option<&PathBuf>, k: Option<&PathBuf>| EtcdTlsFiles {
            ca: ca.cloned(),
            cert: c.cloned(),
            key: k.cloned(),
        };
        assert_eq!(files(None, None, None).load().unwrap().map(|_| ()), None);
        let ca_only = files(Some(&cert), None, None).load().unwrap().unwrap();
        assert!(ca_only.identity.is_none());
        let mutual = files(Some(&cert), Some(&cert), Some(&key))
            .load()
            .unwrap()
            .unwrap();
        assert!(mutual.identity.is_some());
        for (f, want) in [
            (
                files(None, Some(&cert), None),
                "--etcd-certfile needs --etcd-keyfile",
            ),
            (
                files(Some(&cert), None, Some(&key)),
                "--etcd-keyfile needs --etcd-certfile",
            ),
            (files(None, Some(&cert), Some(&key)), "needs --etcd-cafile"),
            (files(Some(&missing), None, None), "--etcd-cafile"),
            (files(Some(&key), None, None), "no PEM certificate"),
            (files(Some(&cert), Some(&cert), Some(&cert)), "no PEM private key"),
        ] {
            let err = f.load().unwrap_err();
            assert!(err.contains(want), "{f:?}: {err}");
        }
        let err = files(Some(&missing), None, None).load().unwrap_err();
        assert!(err.contains(&missing.display().to_string()), "{err}");
    }

    #[test]
    fn a_data_dir_keeps_its_cluster_id() {
        let dir = tempfile::tempdir().unwrap();
        let first = cluster_id(dir.path()).unwrap();
        assert_eq!(cluster_id(dir.path()).unwrap(), first);
        assert_ne!(cluster_id(&dir.path().join("other")).unwrap(), first);
    }
}
