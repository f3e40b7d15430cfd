//! etcd for runs of kubeling on etcd (`kubeling apiserver --store etcd=URL`): the `etcd` on PATH (Debian's
//! `etcd-server`) on free loopback ports, with its data in a directory of its own. One member, one member
//! serving TLS, or a cluster of several members. A member can be killed with SIGKILL and started again on
//! the same data and ports, and is killed on drop. Used by the etcd tests, the fault suite and
//! `kubeling bench --etcd`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// How long etcd may take to answer `/health` after a start.
const WAIT: Duration = Duration::from_secs(30);

/// One etcd member; [`Etcd::kill9`] and [`Etcd::run`] kill and restart it on the same data dir and ports.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    name: String,
    client_port: u16,
    peer_port: u16,
    /// A plain-HTTP listener for `/health` (etcd's `--listen-metrics-urls`), whatever the client URL's
    /// scheme.
    health_port: u16,
    /// `--initial-cluster`: every member's name and peer URL.
    initial_cluster: String,
    tls: Option<TlsFiles>,
    _tmp: Option<tempfile::TempDir>,
}

/// A loopback port free at the time of asking.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Etcd {
    /// A new member on a fresh temp dir, answering `/health` when this returns.
    pub fn start() -> anyhow::Result<Etcd> {
        let tmp = tempfile::tempdir()?;
        let mut e = Etcd::new(tmp.path().join("etcd"), "default", None)?;
        e._tmp = Some(tmp);
        e.run()?;
        Ok(e)
    }

    /// A new member with its data under `dir` (which it does not remove), answering `/health` when this
    /// returns.
    pub fn start_in(dir: &Path) -> anyhow::Result<Etcd> {
        let mut e = Etcd::new(dir.join("etcd"), "default", None)?;
        e.run()?;
        Ok(e)
    }

    /// A new member serving `https://` with a certificate of `tls`'s CA, and asking clients for a
    /// certificate of the same CA (`--client-cert-auth`), as a production etcd is set up.
    pub fn start_tls(tls: &TlsFiles) -> anyhow::Result<Etcd> {
        let tmp = tempfile::tempdir()?;
        let mut e = Etcd::new(tmp.path().join("etcd"), "default", Some(tls.clone()))?;
        e._tmp = Some(tmp);
        e.run()?;
        Ok(e)
    }

    fn new(dir: PathBuf, name: &str, tls: Option<TlsFiles>) -> anyhow::Result<Etcd> {
        let peer_port = free_port()?;
        Ok(Etcd {
            child: None,
            dir,
            name: name.to_string(),
            client_port: free_port()?,
            peer_port,
            health_port: free_port()?,
            initial_cluster: format!("{name}=http://127.0.0.1:{peer_port}"),
            tls,
            _tmp: None,
        })
    }

    /// The client port.
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The client URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// `etcd=URL`, for `--store`.
    pub fn store_arg(&self) -> String {
        format!("etcd={}", self.url())
    }

    /// Start etcd on its data dir and ports; return once it answers `/health`.
    pub fn run(&mut self) -> anyhow::Result<()> {
        self.spawn()?;
        self.wait_healthy()
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let client = self.url();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let health = format!("http://127.0.0.1:{}", self.health_port);
        let mut cmd = Command::new("etcd");
        cmd.arg("--data-dir")
            .arg(&self.dir)
            .args(["--name", &self.name])
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--listen-metrics-urls", &health])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", "kubeling-test"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(tls) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        self.child = Some(
            cmd.spawn()
                .context("starting etcd (install it: apt-get install etcd-server)")?,
        );
        Ok(())
    }

    fn wait_healthy(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + WAIT;
        while !healthy(self.health_port) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "etcd member {} did not answer /health within {WAIT:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// SIGKILL, then wait for it to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// An etcd cluster of several members on loopback, each a process of its own.
pub struct EtcdCluster {
    /// The members, in the order of [`EtcdCluster::store_arg`]'s URLs.
    pub members: Vec<Etcd>,
    _tmp: tempfile::TempDir,
}

impl EtcdCluster {
    /// `n` members on a fresh temp dir, each answering `/health` (so the cluster has a leader) when this
    /// returns.
    pub fn start(n: usize) -> anyhow::Result<EtcdCluster> {
        let tmp = tempfile::tempdir()?;
        let mut members = (1..=n)
            .map(|i| Etcd::new(tmp.path().join(format!("m{i}")), &format!("m{i}"), None))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let initial_cluster = members
            .iter()
            .map(|m| m.initial_cluster.clone())
            .collect::<Vec<_>>()
            .join(",");
        // Every member is started before any is waited for: none is healthy before a quorum runs.
        for m in &mut members {
            m.initial_cluster = initial_cluster.clone();
            m.spawn()?;
        }
        for m in &members {
            m.wait_healthy()?;
        }
        Ok(EtcdCluster { members, _tmp: tmp })
    }

    /// `etcd=URL1,URL2,...`, for `--store`.
    pub fn store_arg(&self) -> String {
        let urls: Vec<String> = self.members.iter().map(Etcd::url).collect();
        format!("etcd={}", urls.join(","))
    }
}

/// The files of TLS to and from etcd, made by [`TlsFiles::make`]: a CA, etcd's serving certificate for
/// 127.0.0.1 and localhost, and a client certificate, all signed by the CA.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA certificate (`--etcd-cafile`, etcd's `--trusted-ca-file`).
    pub ca: PathBuf,
    /// etcd's certificate and key.
    pub server_cert: PathBuf,
    /// etcd's key.
    pub server_key: PathBuf,
    /// The client certificate (`--etcd-certfile`).
    pub client_cert: PathBuf,
    /// The client key (`--etcd-keyfile`).
    pub client_key: PathBuf,
}

impl TlsFiles {
    /// A new CA and its certificates, written to `dir`.
    pub fn make(dir: &Path) -> anyhow::Result<TlsFiles> {
        std::fs::create_dir_all(dir)?;
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name.push(DnType::CommonName, "etcd test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);
        let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| -> anyhow::Result<(String, String)> {
            let key = KeyPair::generate()?;
            let mut p = CertificateParams::new(vec!["localhost".to_string()])?;
            p.subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            p.distinguished_name.push(DnType::CommonName, name);
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            p.extended_key_usages = vec![usage];
            Ok((p.signed_by(&key, &issuer)?.pem(), key.serialize_pem()))
        };
        let (server_cert, server_key) = leaf("etcd", ExtendedKeyUsagePurpose::ServerAuth)?;
        let (client_cert, client_key) = leaf("kubeling", ExtendedKeyUsagePurpose::ClientAuth)?;
        let files = TlsFiles {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("etcd.pem"),
            server_key: dir.join("etcd-key.pem"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client-key.pem"),
        };
        for (path, pem) in [
            (&files.ca, ca_cert.pem()),
            (&files.server_cert, server_cert),
            (&files.server_key, server_key),
            (&files.client_cert, client_cert),
            (&files.client_key, client_key),
        ] {
            std::fs::write(path, pem).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(files)
    }
}

/// Whether etcd's `/health` on `port` answers `"health":"true"` (the member is up and the cluster has a
/// leader).
fn healthy(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}
