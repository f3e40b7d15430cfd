//! One etcd member for runs of kubeling on etcd (`kubeling apiserver --store etcd=URL`): the `etcd` on PATH
//! (Debian's `etcd-server`) on free loopback ports, with its data in a directory of its own. It can be
//! killed with SIGKILL and started again on the same data and ports, and is killed on drop. Used by the
//! etcd tests, the fault suite and `kubeling bench --etcd`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// How long etcd may take to answer `/health` after a start.
const WAIT: Duration = Duration::from_secs(30);

/// One etcd member; [`Etcd::kill9`] and [`Etcd::run`] kill and restart it on the same data dir and ports.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
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
        let mut e = Etcd::new(tmp.path().join("etcd"))?;
        e._tmp = Some(tmp);
        e.run()?;
        Ok(e)
    }

    /// A new member with its data under `dir` (which it does not remove), answering `/health` when this
    /// returns.
    pub fn start_in(dir: &Path) -> anyhow::Result<Etcd> {
        let mut e = Etcd::new(dir.join("etcd"))?;
        e.run()?;
        Ok(e)
    }

    fn new(dir: PathBuf) -> anyhow::Result<Etcd> {
        Ok(Etcd {
            child: None,
            dir,
            client_port: free_port()?,
            peer_port: free_port()?,
            _tmp: None,
        })
    }

    /// The client port.
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// `etcd=URL`, for `--store`.
    pub fn store_arg(&self) -> String {
        format!("etcd={}", self.url())
    }

    /// Start etcd on its data dir and ports; return once it answers `/health`.
    pub fn run(&mut self) -> anyhow::Result<()> {
        let client = self.url();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--name", "default"])
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
            .args(["--initial-cluster", &format!("default={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting etcd (install it: apt-get install etcd-server)")?;
        self.child = Some(child);
        let deadline = Instant::now() + WAIT;
        while !healthy(self.client_port) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "etcd did not answer /health within {WAIT:?}"
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

/// Whether etcd on `port` answers `GET /health` with `"health":"true"`.
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
