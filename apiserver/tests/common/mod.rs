//! An in-process API server on 127.0.0.1:0 with a temp data dir, and a `kube::Client` for it.

#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use apiserver::watch::HubConfig;
use apiserver::{ApiServer, Config};

pub struct TestServer {
    pub server: Option<ApiServer>,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(HubConfig::default()).await
    }

    pub async fn start_with(hub: HubConfig) -> TestServer {
        Self::start_config(|c| c.hub = hub).await
    }

    /// With the ServiceAccount admission on, as `kubeling up` runs it.
    pub async fn start_with_admission() -> TestServer {
        Self::start_config(|c| c.service_account_admission = true).await
    }

    /// With events expiring `ttl` after their last write.
    pub async fn start_with_event_ttl(ttl: std::time::Duration) -> TestServer {
        Self::start_config(|c| c.event_ttl = ttl).await
    }

    async fn start_config(edit: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path().into(), 0, HubConfig::default());
        edit(&mut cfg);
        let server = ApiServer::start(cfg).await.unwrap();
        let port = server.addr.port();
        TestServer {
            server: Some(server),
            dir,
            port,
        }
    }

    /// Stop and start again on the same port and data directory.
    pub async fn restart(&mut self) {
        self.server.take().unwrap().shutdown().await;
        let server = ApiServer::start(config(self.dir.path().into(), self.port, HubConfig::default()))
            .await
            .unwrap();
        self.server = Some(server);
    }

    pub fn client(&self) -> kube::Client {
        self.client_with_token(&self.server.as_ref().unwrap().tls.token.clone())
    }

    /// A client that sends `token` (a service account's, say) instead of the admin token.
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        let server = self.server.as_ref().unwrap();
        let url = format!("https://127.0.0.1:{}", self.port).parse().unwrap();
        let mut cfg = kube::Config::new(url);
        let ca = rustls_pki_der(&server.tls.ca_pem);
        cfg.root_cert = Some(vec![ca]);
        cfg.auth_info.token = Some(token.to_string().into());
        cfg.default_namespace = "default".into();
        kube::Client::try_from(cfg).unwrap()
    }

    pub fn token(&self) -> String {
        self.server.as_ref().unwrap().tls.token.clone()
    }

    /// An admin client without kube's default retries of 429/503/504 (up to 15, backing off to 1000 s),
    /// for tests that expect a 429.
    pub fn client_without_retries(&self) -> kube::Client {
        let server = self.server.as_ref().unwrap();
        let url = format!("https://127.0.0.1:{}", self.port).parse().unwrap();
        let mut cfg = kube::Config::new(url);
        cfg.root_cert = Some(vec![rustls_pki_der(&server.tls.ca_pem)]);
        cfg.auth_info.token = Some(server.tls.token.clone().into());
        cfg.default_namespace = "default".into();
        cfg.default_retry = false;
        kube::Client::try_from(cfg).unwrap()
    }
}

fn config(data_dir: PathBuf, port: u16, hub: HubConfig) -> Config {
    Config {
        data_dir,
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
        hub,
        // No controller manager here to create `default` ServiceAccounts; tests that want the admission
        // create the ServiceAccount and use `start_with_admission`.
        service_account_admission: false,
        event_ttl: apiserver::registry::event_ttl::DEFAULT_EVENT_TTL,
        store: Default::default(),
    }
}

/// DER bytes of the first certificate in a PEM text.
pub fn rustls_pki_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).unwrap()
}
