//! End-to-end harness: runs the real `kubeling` binary on a free port with a temp data dir and drives it with
//! the real kubectl.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const KUBECTL: &str = "kubectl";

pub struct Cluster {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub url: String,
    pub port: u16,
    pub startup: Duration,
    _tmp: Option<tempfile::TempDir>,
    cache_dir: tempfile::TempDir,
}

impl Cluster {
    /// `kubeling up --port 0` (API server, scheduler, node agent on Docker) on a fresh data dir.
    pub fn up() -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut c = Self::start_in(&dir, 0, "up");
        c._tmp = Some(tmp);
        c
    }

    /// `up()` with `extra_args` after the harness's own flags, and stderr appended to `log` when given.
    pub fn up_with(extra_args: &[&str], log: Option<&Path>) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut c = Self::start_with(&dir, 0, "up", extra_args, log);
        c._tmp = Some(tmp);
        c
    }

    /// Wait until `kubectl get <what> -o json` satisfies `cond`.
    pub fn wait_json(
        &self,
        what: &[&str],
        timeout: Duration,
        mut cond: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend_from_slice(&["-o", "json"]);
        let mut last = serde_json::Value::Null;
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.kubectl(&args);
            if out.status.success()
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            {
                if cond(&v) {
                    return v;
                }
                last = v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting on {what:?}; last: {last}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `kubeling apiserver --port 0` on a fresh data dir.
    pub fn start() -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut c = Self::start_in(&dir, 0, "apiserver");
        c._tmp = Some(tmp);
        c
    }

    /// Start the binary with `subcommand` on `data_dir` and `port`.
    pub fn start_in(data_dir: &Path, port: u16, subcommand: &str) -> Cluster {
        Self::start_with(data_dir, port, subcommand, &[], None)
    }

    /// `start_in` with `extra_args` after the harness's own flags; stderr (the log) is appended to `log` when
    /// given, else inherited.
    pub fn start_with(
        data_dir: &Path,
        port: u16,
        subcommand: &str,
        extra_args: &[&str],
        log: Option<&Path>,
    ) -> Cluster {
        let t0 = Instant::now();
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap_or_else(|e| panic!("opening the log {}: {e}", path.display())),
            ),
            None => Stdio::inherit(),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubeling"))
            .args([subcommand, "--data-dir"])
            .arg(data_dir)
            .args(["--port", &port.to_string(), "--no-kubeconfig-merge"])
            // The API server alone has no controller manager to make `default` ServiceAccounts.
            .args(if subcommand == "apiserver" {
                &["--disable-admission-plugins=ServiceAccount"][..]
            } else {
                &[]
            })
            .args(extra_args)
            .env("KUBELING_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawning kubeling");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(l)) = lines.next() {
                let _ = tx.send(l);
            }
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("kubeling never printed its ready line");
        let startup = t0.elapsed();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("https://"))
            .expect("url in ready line")
            .to_string();
        let kubeconfig = PathBuf::from(line.rsplit("KUBECONFIG=").next().unwrap().trim());
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        Cluster {
            child: Some(child),
            data_dir: data_dir.to_path_buf(),
            kubeconfig,
            url,
            port,
            startup,
            _tmp: None,
            cache_dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Give this API server a kubeconfig of its own (a copy naming its URL): API servers sharing a data
    /// directory (etcd store) each rewrite `DATA/kubeconfig` with their own address.
    pub fn own_kubeconfig(&mut self) {
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let fixed: String = text
            .lines()
            .map(|l| match l.trim_start().strip_prefix("server: ") {
                Some(_) => format!("{}server: {}\n", &l[..l.len() - l.trim_start().len()], self.url),
                None => format!("{l}\n"),
            })
            .collect();
        let own = self.cache_dir.path().join("kubeconfig");
        std::fs::write(&own, fixed).unwrap();
        self.kubeconfig = own;
    }

    /// Run kubectl with this cluster's kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(KUBECTL);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.cache_dir.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("running kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// kubectl that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_stdin(args, Some(stdin));
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// kubectl that must fail; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should have failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// True while the kubeling process has not exited (false once killed or terminated).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGKILL, then wait.
    pub fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// SIGTERM; returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "kubeling did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The events about `pod` as `reason: message` lines.
    pub fn events(&self, pod: &str) -> Vec<String> {
        let selector = format!("involvedObject.name={pod}");
        let out = self.ok(&["get", "events", "--field-selector", &selector, "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e["reason"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    /// Waits until an event about `pod` contains `want`; returns all of them then.
    pub fn wait_event(&self, pod: &str, want: &str, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let evs = self.events(pod);
            if evs.iter().any(|e| e.contains(want)) {
                return evs;
            }
            assert!(Instant::now() < deadline, "no event {want:?} for {pod}: {evs:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The bearer token from the data dir.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("pki/token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// A raw HTTPS request with curl (for bad-input tests that kubectl would refuse to send).
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: &str,
        body: Option<&[u8]>,
    ) -> (u16, serde_json::Value) {
        let ca = self.data_dir.join("pki/ca.crt");
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
            .arg(&ca)
            .args(["-X", method]);
        if let Some(t) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        cmd.args(["-H", &format!("Content-Type: {content_type}")]);
        if body.is_some() {
            cmd.args(["--data-binary", "@-"]);
        }
        cmd.arg(format!("{}{}", self.url, path));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("curl");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            if let Some(b) = body {
                stdin.write_all(b).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').expect("status line");
        let json = serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.to_string()));
        (code.trim().parse().unwrap(), json)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Containers this cluster made (they outlive kubeling by design).
        remove_cluster_containers(&self.data_dir.join("node"));
    }
}

/// Removes every container of the cluster whose node data dir is `node_dir`, by the `io.kubeling.cluster`
/// label its `cluster-id` file gives.
pub fn remove_cluster_containers(node_dir: &Path) {
    let Ok(id) = std::fs::read_to_string(node_dir.join("cluster-id")) else {
        return;
    };
    let filter = format!("label=io.kubeling.cluster={}", id.trim());
    let Ok(out) = Command::new("docker")
        .args(["ps", "-aq", "--filter", &filter])
        .output()
    else {
        return;
    };
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    if !ids.is_empty() {
        let _ = Command::new("docker").arg("rm").arg("-f").args(&ids).output();
    }
    // The cluster's service gateway and Docker network (node/src/network.rs), once its pods are gone.
    let id = id.trim();
    let _ = Command::new("docker")
        .args(["rm", "-f", &format!("kubeling-gateway-{id}")])
        .output();
    let _ = Command::new("docker")
        .args(["network", "rm", &format!("kubeling-{id}")])
        .output();
}

/// `kubeling node --kubeconfig K --data-dir D <args>` started by hand: killed when dropped, and its
/// cluster's containers removed, as `Cluster`'s Drop does for the clusters it starts.
pub struct NodeAgent {
    child: Child,
    data_dir: PathBuf,
}

impl NodeAgent {
    pub fn spawn(kubeconfig: &Path, data_dir: &Path, args: &[&str]) -> NodeAgent {
        let child = Command::new(env!("CARGO_BIN_EXE_kubeling"))
            .args(["node", "--kubeconfig"])
            .arg(kubeconfig)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env("KUBELING_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning kubeling node");
        NodeAgent {
            child,
            data_dir: data_dir.to_path_buf(),
        }
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_cluster_containers(&self.data_dir);
    }
}

/// Poll `f` until it returns Some, or panic after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status of container `name` in `list` (`containerStatuses`, `initContainerStatuses`,
/// `ephemeralContainerStatuses`) of a pod as JSON; null when absent.
pub fn container_status<'a>(pod: &'a serde_json::Value, list: &str, name: &str) -> &'a serde_json::Value {
    static NULL: serde_json::Value = serde_json::Value::Null;
    pod["status"][list]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == name))
        .unwrap_or(&NULL)
}

/// A Pod manifest named `name` running `image`: `spec_extra` (indented spec lines) before the
/// `containers` (YAML list items indented by two spaces, `IMAGE` standing for the image).
pub fn pod_manifest(image: &str, name: &str, spec_extra: &str, containers: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec_extra}  containers:\n{}",
        containers.replace("IMAGE", image)
    )
}

/// Runs `kubeling test <args>` in `cwd`, bounded by `limit`; returns (exit code, stdout + stderr).
pub fn kubeling_test(cwd: &Path, args: &[&str], limit: Duration) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeling"))
        .arg("test")
        .args(args)
        .current_dir(cwd)
        .env("KUBELING_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("spawning kubeling test");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            // SIGTERM lets `kubeling test` stop its own cluster; SIGKILL is the last resort.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            panic!("kubeling test {args:?} did not finish within {limit:?}; output so far:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&out_path).unwrap() + &std::fs::read_to_string(&err_path).unwrap();
    (status.code().unwrap_or(-1), text)
}

/// The repository root (where `fixtures/` is).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Running containers carrying every `label=value`, full ids, sorted.
pub fn running_containers(labels: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = Command::new("docker");
    cmd.args(["ps", "-q", "--no-trunc"]);
    for (k, v) in labels {
        cmd.args(["--filter", &format!("label={k}={v}")]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "docker ps: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    ids.sort();
    ids
}
