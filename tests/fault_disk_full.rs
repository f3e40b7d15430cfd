//! The fault suite's full disk: `kubeling apiserver` with its data dir on a small tmpfs, filled up by a
//! ballast file while ConfigMaps are written. Writes are refused with 507 InsufficientStorage (a
//! `metav1.Status`; reads keep working, `/readyz` fails), every acknowledged object stays readable, the
//! refused ones are not there, and writes are accepted again once the ballast is removed; then the same
//! after a restart (SIGTERM) and after a `kill -9` while the disk is full. A real ENOSPC from a real file
//! system: mounting the tmpfs needs root and CAP_SYS_ADMIN (CI runs as root), and the test fails without.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Cluster;
use serde_json::{Value, json};

/// The tmpfs: room for the API server's first start (about 2 MiB of sled and certificates) and a few
/// hundred ConfigMaps before the ballast fills it.
const TMPFS_SIZE: &str = "32m";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// A refused write must come within this many attempts once the disk is full (each writes 32 KiB).
const ATTEMPTS: usize = 64;
const WAIT: Duration = Duration::from_secs(30);

/// A tmpfs mounted on a directory for the test's life.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs on {} failed (the test needs root and CAP_SYS_ADMIN): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a process that outlived its test): detach it now, freed when the last user goes.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Fills the file system holding `dir` with `dir/ballast` until it refuses another byte (ENOSPC).
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("ballast");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    for chunk in [1 << 20, 4096, 1] {
        let buf = vec![0u8; chunk];
        loop {
            match f.write(&buf) {
                Ok(n) if n == chunk => {}
                Ok(_) => continue,
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
                    break;
                }
            }
        }
    }
    path
}

struct Api<'a> {
    c: &'a Cluster,
    token: String,
}

impl<'a> Api<'a> {
    fn new(c: &'a Cluster) -> Api<'a> {
        Api { c, token: c.token() }
    }

    fn create(&self, name: &str, blob: &str) -> (u16, Value) {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"blob": blob}});
        self.send("POST", CONFIGMAPS, Some(&body))
    }

    fn get(&self, name: &str) -> (u16, Value) {
        self.send("GET", &format!("{CONFIGMAPS}/{name}"), None)
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
        self.c.curl(
            method,
            path,
            Some(&self.token),
            "application/json",
            bytes.as_deref(),
        )
    }

    /// The ConfigMaps in `default` by name: (resourceVersion, blob).
    fn list(&self) -> BTreeMap<String, (String, String)> {
        let (code, v) = self.send("GET", CONFIGMAPS, None);
        assert_eq!(code, 200, "{v}");
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cm| (name(cm), (rv(cm), blob(cm))))
            .filter(|(n, _)| n != "kube-root-ca.crt")
            .collect()
    }

    fn readyz(&self) -> (u16, Value) {
        self.send("GET", "/readyz?verbose", None)
    }
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn blob(v: &Value) -> String {
    v["data"]["blob"].as_str().unwrap_or_default().to_string()
}

/// A blob of `len` bytes, different for every name.
fn blob_for(name: &str, len: usize) -> String {
    name.bytes()
        .cycle()
        .map(|b| (b'a' + b % 26) as char)
        .take(len)
        .collect()
}

/// Asserts `answer` is the refusal of a full disk: 507, a Status saying so.
fn assert_refused_as_full(answer: &(u16, Value)) {
    let (code, status) = answer;
    assert_eq!(*code, 507, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["code"], 507, "{status}");
    assert_eq!(status["reason"], "InsufficientStorage", "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("storage is full: no space left on the device holding ")
            && message.ends_with("; writes are refused until space is freed"),
        "{status}"
    );
}

/// Writes ConfigMaps `<prefix>-N` of 32 KiB until one is refused; returns the acknowledged ones (name →
/// resourceVersion, blob) and the refused one's name.
fn write_until_refused(api: &Api, prefix: &str) -> (BTreeMap<String, (String, String)>, String) {
    let mut acked = BTreeMap::new();
    for i in 0..ATTEMPTS {
        let name = format!("{prefix}-{i}");
        let blob = blob_for(&name, 32 * 1024);
        let answer = api.create(&name, &blob);
        if answer.0 == 201 {
            acked.insert(name, (rv(&answer.1), blob));
            continue;
        }
        assert_refused_as_full(&answer);
        return (acked, name);
    }
    panic!("{ATTEMPTS} writes of 32 KiB to a full disk were all acknowledged");
}

/// Every acknowledged ConfigMap is there with its resourceVersion and content, and nothing else is but
/// `also` (names that may or may not be there: a write in flight at a crash).
fn assert_exactly(api: &Api, acked: &BTreeMap<String, (String, String)>, also: &[String]) {
    let mut listed = api.list();
    for n in also {
        if let Some((_, blob)) = listed.remove(n) {
            // Wholly there or absent: never part of a write.
            assert!(blob == blob_for(n, 32 * 1024), "{n} is half written");
        }
    }
    assert_eq!(
        &listed, acked,
        "the listed ConfigMaps differ from the acknowledged ones"
    );
    for (n, (rv, _)) in acked {
        let (code, cm) = api.get(n);
        assert_eq!((code, self::rv(&cm)), (200, rv.clone()), "{cm}");
    }
}

/// Creates `name` until it is acknowledged (writes resume by themselves once there is space); returns the
/// time it took.
fn create_once_writable(api: &Api, name: &str, acked: &mut BTreeMap<String, (String, String)>) -> Duration {
    let t0 = Instant::now();
    let blob = blob_for(name, 1024);
    loop {
        let answer = api.create(name, &blob);
        if answer.0 == 201 {
            acked.insert(name.to_string(), (rv(&answer.1), blob));
            return t0.elapsed();
        }
        assert_refused_as_full(&answer);
        assert!(
            t0.elapsed() < WAIT,
            "writes still refused {WAIT:?} after space was freed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kubeling apiserver` on `data`, its log appended to `log` (shown if it does not start).
fn start(data: &Path, log: &Path) -> Cluster {
    std::panic::catch_unwind(|| Cluster::start_with(data, 0, "apiserver", &[], Some(log))).unwrap_or_else(
        |e| {
            eprintln!(
                "the API server's log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::panic::resume_unwind(e)
        },
    )
}

/// `kubeling apiserver` on `data`, expected to exit with an error within 30 s; returns its stderr.
fn start_fails(data: &Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubeling"))
        .args(["apiserver", "--port", "0", "--no-kubeconfig-merge", "--data-dir"])
        .arg(data)
        .env("KUBELING_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::eventually(WAIT, "the API server to exit", || child.try_wait().unwrap());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        !status.success(),
        "the API server started on a full disk:\n{stderr}"
    );
    stderr
}

#[test]
fn a_full_disk_refuses_writes_with_507_loses_nothing_acknowledged_and_writes_resume_when_space_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("apiserver.log");
    let fs = Tmpfs::mount(&tmp.path().join("fs"), TMPFS_SIZE);
    let data = fs.dir.join("data");
    let mut c = start(&data, &log);
    let mut acked = BTreeMap::new();
    {
        let api = Api::new(&c);
        for i in 0..20 {
            let name = format!("before-{i}");
            let blob = blob_for(&name, 4096);
            let (code, cm) = api.create(&name, &blob);
            assert_eq!(code, 201, "{cm}");
            acked.insert(name, (rv(&cm), blob));
        }

        // Round 1: the disk fills up under a running server.
        let ballast = fill(&fs.dir);
        let (more, refused) = write_until_refused(&api, "full");
        acked.extend(more);
        // Refused at once from now on: creates, updates and deletes, with the same Status; kubectl says so.
        assert_refused_as_full(&api.create("refused-too", "x"));
        let (_, mut first) = api.get("before-0");
        first["data"]["blob"] = json!("changed");
        assert_refused_as_full(&api.send("PUT", &format!("{CONFIGMAPS}/before-0"), Some(&first)));
        assert_refused_as_full(&api.send("DELETE", &format!("{CONFIGMAPS}/before-1"), None));
        let out = c.kubectl_stdin(
            &["create", "-f", "-"],
            Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\n"),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && stderr.contains("Error from server (InsufficientStorage)")
                && stderr.contains("storage is full: no space left on the device holding"),
            "{stderr}"
        );
        let (code, body) = api.readyz();
        assert_eq!(code, 503, "{body}");
        assert!(
            body.as_str().unwrap_or_default().contains("[-]storage failed"),
            "{body}"
        );
        // Reads keep working, and show exactly what was acknowledged.
        assert_exactly(&api, &acked, &[]);

        std::fs::remove_file(&ballast).unwrap();
        let took = create_once_writable(&api, "after-0", &mut acked);
        eprintln!("writes accepted again {took:?} after the ballast was removed");
        assert_eq!(api.readyz().0, 200);
        for n in [refused.as_str(), "refused-too", "from-kubectl"] {
            assert_eq!(api.get(n).0, 404, "the refused {n} is there");
        }
        assert_exactly(&api, &acked, &[]);
    }

    // A clean restart on the same data dir: everything acknowledged is there, the refused writes are not.
    assert!(c.terminate().success(), "kubeling did not exit 0 on SIGTERM");
    let mut c = start(&data, &log);
    let in_flight = {
        let api = Api::new(&c);
        assert_exactly(&api, &acked, &[]);
        create_once_writable(&api, "after-restart", &mut acked);

        // Round 2: full again, then killed while it refuses writes.
        let ballast = fill(&fs.dir);
        let (more, refused) = write_until_refused(&api, "again");
        acked.extend(more);
        assert_refused_as_full(&api.create("refused-again", "x"));
        c.kill9();
        // Started again while the disk is still full, it says so and stops.
        let stderr = start_fails(&data);
        assert!(stderr.contains("No space left on device"), "{stderr}");
        eprintln!(
            "start on the full disk: {}",
            stderr.trim().lines().last().unwrap_or_default()
        );
        std::fs::remove_file(&ballast).unwrap();
        vec![refused]
    };
    let c = start(&data, &log);
    let api = Api::new(&c);
    // The write whose flush failed was in flight when the process died: like a crash's, it may be there
    // (wholly) or not. Everything acknowledged is.
    assert_exactly(&api, &acked, &in_flight);
    let back = in_flight.iter().filter(|n| api.get(n).0 == 200).count();
    eprintln!(
        "{} acknowledged ConfigMaps all there; of the write in flight at the kill, {back} there",
        acked.len()
    );
    assert_eq!(api.get("refused-again").0, 404);
    create_once_writable(&api, "after-kill", &mut acked);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("panicked"), "the API server panicked:\n{log}");
}
