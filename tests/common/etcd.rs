//! One etcd member for the tests that run kubeling on etcd (`tests/etcd_store.rs`, `tests/fault_storm.rs`):
//! the `etcd` on PATH (Debian's `etcd-server`, which ./test.sh installs when missing) on free loopback ports,
//! its data in a temp dir, killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::eventually;

/// How long etcd may take to answer `/health` after a start.
const WAIT: Duration = Duration::from_secs(30);

/// One etcd member; [`Etcd::kill9`] and [`Etcd::run`] kill and restart it on the same data dir and ports.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    _tmp: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Etcd {
    /// A new member on a fresh data dir, answering `/health` when this returns.
    pub fn start() -> Etcd {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = Etcd {
            child: None,
            dir: tmp.path().join("etcd"),
            client_port: free_port(),
            peer_port: free_port(),
            _tmp: tmp,
        };
        e.run();
        e
    }

    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// `etcd=URL`, for `--store`.
    pub fn store_arg(&self) -> String {
        format!("etcd={}", self.url())
    }

    /// Start etcd on its data dir and ports; return once it answers `/health`.
    pub fn run(&mut self) {
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
            .expect("etcd is installed (./test.sh installs etcd-server when missing)");
        self.child = Some(child);
        eventually(WAIT, "etcd to answer /health", || {
            let out = Command::new("curl")
                .args(["-s", "-m", "2", &format!("{client}/health")])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains("\"health\":\"true\"")
                .then_some(())
        });
    }

    /// SIGKILL, then wait.
    pub fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
