//! The etcd store, as a user tries it: a real etcd (Debian's `etcd-server`, which ./test.sh installs when
//! missing), several `kubeling apiserver --store etcd=...` on it, kubectl against each, etcd and API
//! servers killed with SIGKILL.

mod common;

#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::io::{BufRead, BufReader};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{Cluster, NodeAgent, eventually};
use kubeling_testing::etcd::{Etcd, EtcdCluster, TlsFiles, free_port};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

/// `kubeling apiserver --store etcd=...` on `data_dir`, with a kubeconfig of its own.
fn apiserver(data_dir: &Path, etcd: &Etcd, extra: &[&str]) -> Cluster {
    apiserver_on(data_dir, &etcd.store_arg(), extra)
}

/// `kubeling apiserver --store STORE` on `data_dir`, with a kubeconfig of its own.
fn apiserver_on(data_dir: &Path, store: &str, extra: &[&str]) -> Cluster {
    let mut args = vec!["--store", store];
    args.extend_from_slice(extra);
    let mut c = Cluster::start_with(data_dir, 0, "apiserver", &args, None);
    c.own_kubeconfig();
    c
}

/// A TCP proxy to etcd that can be cut: the API server behind it loses etcd while the others keep it.
struct Proxy {
    port: u16,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(to: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (o, c) = (open.clone(), connections.clone());
        // The thread ends with the test process.
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                // Cut: a connection is closed at once, as by a network that drops it.
                if !o.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let mut conns = c.lock().unwrap();
                for s in [&client, &server] {
                    conns.push(s.try_clone().unwrap());
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy {
            port,
            open,
            connections,
        }
    }

    fn store_arg(&self) -> String {
        format!("etcd=http://127.0.0.1:{}", self.port)
    }

    /// Close every connection through the proxy and refuse new ones.
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for s in self.connections.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// Copy `from` to `to` until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
    });
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// A raw watch stream (`kubectl get --raw ...?watch=1`): its events as JSON, one per line.
struct Watch {
    child: Child,
    rx: mpsc::Receiver<Value>,
}

impl Watch {
    fn start(c: &Cluster, path: &str) -> Watch {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .args(["get", "--raw", path])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Watch { child, rx }
    }

    fn next(&self) -> Value {
        self.rx.recv_timeout(WAIT).expect("the watch sent no event")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every client (an API server and the client's name) sends `requests` requests, one after another, all
/// clients at once; `request(client, i)` is the method, path, content type and body of the client's `i`th.
/// Returns every answer that was not `want`.
fn at_once(
    clients: &[(&Cluster, String)],
    requests: usize,
    want: u16,
    request: impl Fn(&str, usize) -> (&'static str, &'static str, &'static str, String) + Sync,
) -> Vec<String> {
    std::thread::scope(|s| {
        let workers: Vec<_> = clients
            .iter()
            .map(|(c, client)| {
                let request = &request;
                s.spawn(move || {
                    let token = c.token();
                    let mut failed = Vec::new();
                    for i in 0..requests {
                        let (method, path, content_type, body) = request(client, i);
                        let (code, answer) =
                            c.curl(method, path, Some(&token), content_type, Some(body.as_bytes()));
                        if code != want {
                            failed.push(format!("{code} {answer}"));
                        }
                    }
                    failed
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    })
}

fn readyz(c: &Cluster) -> u16 {
    c.curl("GET", "/readyz", Some(&c.token()), "application/json", None)
        .0
}

#[test]
fn two_api_servers_on_one_etcd_serve_the_same_objects_and_every_watcher_sees_every_change() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut a = apiserver(&dir, &etcd, &[]);
    let b = apiserver(&dir, &etcd, &[]);
    assert_ne!(a.url, b.url);

    // A watch on B from its current revision, opened before any write through A.
    let start = rv(&json_of(&b.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
    ])));
    let watch = Watch::start(
        &b,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={start}"),
    );

    let created = json_of(&a.ok(&[
        "create",
        "configmap",
        "shared",
        "--from-literal=k=1",
        "-o",
        "json",
    ]));
    // Read your write through the other server: at once, no polling.
    let seen = json_of(&b.ok(&["get", "configmap", "shared", "-o", "json"]));
    assert_eq!(rv(&seen), rv(&created), "B serves the object A acknowledged");
    // (kubectl label -o json prints the object it sent, with the old resourceVersion: read it back.)
    a.ok(&["label", "configmap", "shared", "step=2"]);
    let labelled = json_of(&a.ok(&["get", "configmap", "shared", "-o", "json"]));
    assert!(rv(&labelled) > rv(&created));
    a.ok(&["delete", "configmap", "shared"]);

    let events: Vec<(String, u64)> = (0..3)
        .map(|_| {
            let e = watch.next();
            (e["type"].as_str().unwrap().to_string(), rv(&e["object"]))
        })
        .collect();
    assert_eq!(events[0], ("ADDED".to_string(), rv(&created)));
    assert_eq!(events[1], ("MODIFIED".to_string(), rv(&labelled)));
    assert_eq!(events[2].0, "DELETED");
    assert!(events[2].1 > rv(&labelled), "{events:?}");
    // Each change once: nothing more arrives.
    assert!(watch.rx.recv_timeout(Duration::from_millis(500)).is_err());

    // A stale update through B of an object A changed is a 409, as upstream.
    let obj = json_of(&a.ok(&["create", "configmap", "raced", "--from-literal=k=1", "-o", "json"]));
    a.ok(&["label", "configmap", "raced", "by=a"]);
    let mut stale = obj.clone();
    stale["data"]["k"] = "2".into();
    let out = b.kubectl_stdin(&["replace", "-f", "-"], Some(&stale.to_string()));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the object has been modified"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Many writes through A, then A dies by SIGKILL: B serves every acknowledged one and keeps writing.
    let mut acked = Vec::new();
    for i in 0..20 {
        let o = json_of(&a.ok(&[
            "create",
            "configmap",
            &format!("n{i}"),
            "--from-literal=i=1",
            "-o",
            "json",
        ]));
        acked.push((format!("n{i}"), rv(&o)));
    }
    a.kill9();
    let listed = json_of(&b.ok(&["get", "configmaps", "-o", "json"]));
    for (name, version) in &acked {
        let found = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} lost after the other API server was killed"));
        assert_eq!(rv(found), *version);
    }
    let after = json_of(&b.ok(&["create", "configmap", "after", "--from-literal=k=1", "-o", "json"]));
    assert!(
        rv(&after) > acked.last().unwrap().1,
        "resourceVersions never go back"
    );
}

/// Patches carry no resourceVersion, so upstream's `GuaranteedUpdate` applies each to whatever object
/// won a race between API servers instead of answering 409. Four clients on each of two API servers
/// patch one ConfigMap at once, each adding keys of its own: every patch succeeds and none is lost.
#[test]
fn concurrent_patches_through_two_api_servers_all_apply_without_a_conflict() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let a = apiserver(&dir, &etcd, &[]);
    let b = apiserver(&dir, &etcd, &[]);
    a.ok(&["create", "configmap", "hot", "--from-literal=k=0"]);
    const CLIENTS: usize = 4;
    const PATCHES: usize = 15;
    let path = "/api/v1/namespaces/default/configmaps/hot";
    let clients: Vec<(&Cluster, String)> = [&a, &b]
        .into_iter()
        .enumerate()
        .flat_map(|(server, c)| (0..CLIENTS).map(move |client| (c, format!("s{server}-c{client}"))))
        .collect();
    let failures = at_once(&clients, PATCHES, 200, |client, i| {
        let body = format!(r#"{{"data":{{"{client}-{i}":"x"}}}}"#);
        ("PATCH", path, "application/merge-patch+json", body)
    });
    assert!(
        failures.is_empty(),
        "{} patches refused: {failures:?}",
        failures.len()
    );
    for c in [&a, &b] {
        let cm = json_of(&c.ok(&["get", "configmap", "hot", "-o", "json"]));
        let keys = cm["data"].as_object().unwrap().len();
        assert_eq!(keys, 1 + 2 * CLIENTS * PATCHES, "{cm}");
    }
}

#[test]
fn an_api_server_is_not_ready_while_etcd_is_down_and_resumes_its_watches_when_it_returns() {
    let mut etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let a = apiserver(&tmp.path().join("data"), &etcd, &[]);
    assert_eq!(readyz(&a), 200);
    let first = json_of(&a.ok(&[
        "create",
        "configmap",
        "before",
        "--from-literal=k=1",
        "-o",
        "json",
    ]));
    let watch = Watch::start(
        &a,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
            rv(&first)
        ),
    );

    etcd.kill9();
    eventually(WAIT, "/readyz to say 503 while etcd is down", || {
        (readyz(&a) == 503).then_some(())
    });
    // A write is refused with a Status, not lost and not a 500.
    let (code, status) = a.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&a.token()),
        "application/json",
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}}"#),
    );
    assert_eq!(code, 503, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");

    etcd.run().expect("etcd restarts");
    eventually(WAIT, "/readyz to say 200 once etcd is back", || {
        (readyz(&a) == 200).then_some(())
    });
    let names = a.ok(&["get", "configmaps", "-o", "name"]);
    assert!(names.contains("configmap/before"), "{names}");
    assert!(!names.contains("configmap/during"), "{names}");
    let later = json_of(&a.ok(&["create", "configmap", "later", "--from-literal=k=1", "-o", "json"]));
    assert!(rv(&later) > rv(&first));
    // The watch opened before the outage goes on: it sees the write made after it.
    let e = watch.next();
    assert_eq!(e["type"], "ADDED", "{e}");
    assert_eq!(e["object"]["metadata"]["name"], "later", "{e}");
}

/// Regression: etcd before 3.4.31 and 3.5.13 answers a requested progress notification at once with its
/// current revision, ahead of the events a watch that started from an older revision is still to receive
/// (etcd#15220, #17557). An API server that reopened its etcd watch after missing changes and then served
/// a consistent read took that revision for its own and skipped the changes for good: it never served
/// them, and refused every later update of those objects with 409.
#[test]
fn an_api_server_cut_off_from_etcd_applies_every_change_it_missed_even_when_read_at_once() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let proxy = Proxy::start(etcd.client_port());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let a = apiserver(&dir, &etcd, &[]);
    let b = apiserver_on(&dir, &proxy.store_arg(), &[]);
    let list = |c: &Cluster| {
        let (code, list) = c.curl(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            Some(&c.token()),
            "application/json",
            None,
        );
        assert_eq!(code, 200, "{list}");
        let mut names: Vec<(String, u64)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), rv(o)))
            .collect();
        names.sort();
        names
    };
    for cut in 0..8 {
        proxy.cut();
        eventually(WAIT, "B to be not ready once cut off from etcd", || {
            (readyz(&b) == 503).then_some(())
        });
        for i in 0..5 {
            let body =
                format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cut{cut}-{i}"}}}}"#);
            let (code, created) = a.curl(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                Some(&a.token()),
                "application/json",
                Some(body.as_bytes()),
            );
            assert_eq!(code, 201, "{created}");
        }
        proxy.restore();
        // Read as soon as B has its watch again, while etcd may still be sending it the missed changes.
        let deadline = Instant::now() + WAIT;
        while readyz(&b) != 200 {
            assert!(Instant::now() < deadline, "B never became ready again");
        }
        let first = list(&b);
        let want = list(&a);
        let deadline = Instant::now() + WAIT;
        loop {
            let got = list(&b);
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "after cut {cut}, B serves {got:?} (its first read: {first:?}); A and etcd have {want:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `kubeling apiserver ARGS` on `dir`, expected to exit at start: its exit code and stderr.
fn run(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kubeling"))
        .arg("apiserver")
        .arg("--data-dir")
        .arg(dir)
        .args(["--port", "0", "--no-kubeconfig-merge"])
        .args(args)
        .env("KUBELING_LOG", "warn")
        .output()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(20), "exits promptly");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn bad_store_settings_fail_at_start_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, err) = run(&["--store", "mysql"], &tmp.path().join("a"));
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a store"), "{err}");
    let (code, err) = run(&["--store", "etcd=127.0.0.1:2379"], &tmp.path().join("a"));
    assert_eq!(code, Some(2));
    assert!(err.contains("is not an etcd URL"), "{err}");

    // Nothing listens there.
    let closed = format!("etcd=http://127.0.0.1:{}", free_port().unwrap());
    let (code, err) = run(&["--store", &closed], &tmp.path().join("a"));
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach etcd"), "{err}");

    // A prefix owned by another cluster (another data directory's) is refused, and left as it was.
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let owner = apiserver(&tmp.path().join("owner"), &etcd, &[]);
    owner.ok(&["create", "configmap", "mine", "--from-literal=k=1"]);
    let (code, err) = run(&["--store", &etcd.store_arg()], &tmp.path().join("other"));
    assert_eq!(code, Some(1));
    assert!(err.contains("another cluster's objects"), "{err}");
    assert!(
        owner
            .ok(&["get", "configmap", "mine", "-o", "name"])
            .contains("configmap/mine")
    );
    // Its own prefix is free.
    let mut other = Cluster::start_with(
        &tmp.path().join("other"),
        0,
        "apiserver",
        &["--store", &etcd.store_arg(), "--etcd-prefix", "/other"],
        None,
    );
    other.own_kubeconfig();
    assert!(!other.ok(&["get", "configmaps", "-o", "name"]).contains("mine"));
}

#[test]
fn a_pod_created_through_one_api_server_runs_on_a_node_agent_of_the_other() {
    let image = testbox_image::ensure_testbox_image();
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let a = apiserver(&dir, &etcd, &[]);
    let b = apiserver(&dir, &etcd, &[]);
    let _node = NodeAgent::spawn(
        &a.kubeconfig,
        &tmp.path().join("node"),
        &["--node-name", "etcd-node"],
    );
    b.wait_json(&["node", "etcd-node"], WAIT, |n| {
        n["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    });
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  nodeName: etcd-node\n  containers:\n  - name: main\n    image: {image}\n    args: [\"serve\", \"--port\", \"8080\"]\n"
    );
    b.ok_stdin(&["create", "-f", "-"], &pod);
    b.wait_json(&["pod", "web"], Duration::from_secs(60), |p| {
        p["status"]["phase"] == "Running"
    });
    b.ok(&["delete", "pod", "web", "--grace-period=1"]);
    eventually(Duration::from_secs(60), "the pod to be gone", || {
        let out = a.kubectl(&["get", "pod", "web"]);
        (!out.status.success()).then_some(())
    });
}

/// POST a ConfigMap named `name` until etcd answers: a 201, or a 409 AlreadyExists when an earlier try
/// was committed although its answer was lost (etcd electing a leader). Every refusal is a Status.
fn create_until_acknowledged(c: &Cluster, name: &str) -> u64 {
    let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#);
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, answer) = c.curl(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&c.token()),
            "application/json",
            Some(body.as_bytes()),
        );
        match code {
            201 => return rv(&answer),
            409 => {
                assert_eq!(answer["reason"], "AlreadyExists", "{answer}");
                return rv(&json_of(&c.ok(&["get", "configmap", name, "-o", "json"])));
            }
            _ => {
                assert_eq!(answer["kind"], "Status", "{code} {answer}");
                assert!(code == 503 || code == 504, "{code} {answer}");
                assert!(
                    Instant::now() < deadline,
                    "{name} never acknowledged: {code} {answer}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// etcd as it runs in production: three members, the API server given all three URLs. Each member in
/// turn (the one the API server talks to first, and at some point the leader) is killed with SIGKILL while
/// writes go on, then started again: every write is acknowledged, read back and seen once, in order, by a
/// watch opened before the first kill.
#[test]
fn an_api_server_on_three_etcd_members_keeps_serving_while_each_member_in_turn_is_killed() {
    let mut etcd = EtcdCluster::start(3).expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let a = apiserver_on(&tmp.path().join("data"), &etcd.store_arg(), &[]);
    let first = create_until_acknowledged(&a, "before");
    let watch = Watch::start(
        &a,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first}"),
    );
    let mut acked = Vec::new();
    for down in 0..3 {
        etcd.members[down].kill9();
        for i in 0..4 {
            let name = format!("m{down}-{i}");
            let version = create_until_acknowledged(&a, &name);
            acked.push((name, version));
        }
        etcd.members[down].run().expect("the member restarts");
    }
    eventually(WAIT, "/readyz to say 200", || (readyz(&a) == 200).then_some(()));
    let listed = json_of(&a.ok(&["get", "configmaps", "-o", "json"]));
    for (name, version) in &acked {
        let found = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} was acknowledged but is gone"));
        assert_eq!(rv(found), *version, "{name}");
    }
    let seen: Vec<(String, u64)> = (0..acked.len())
        .map(|_| {
            let e = watch.next();
            assert_eq!(e["type"], "ADDED", "{e}");
            (
                e["object"]["metadata"]["name"].as_str().unwrap().to_string(),
                rv(&e["object"]),
            )
        })
        .collect();
    assert_eq!(seen, acked, "the watch sees each write once, in order");
    assert!(
        watch.rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "and nothing more"
    );
}

/// etcd serving TLS and asking for client certificates (`--client-cert-auth`), as kubeadm sets it up: the
/// API server connects with `--etcd-cafile`, `--etcd-certfile` and `--etcd-keyfile`; without its
/// certificate, or trusting another CA, it exits at start with an error that says why.
#[test]
fn an_api_server_reaches_etcd_over_tls_with_a_client_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let tls = TlsFiles::make(&tmp.path().join("tls")).unwrap();
    let etcd = Etcd::start_tls(&tls).expect("etcd (./test.sh installs etcd-server when missing)");
    assert!(etcd.url().starts_with("https://"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (path(&tls.ca), path(&tls.client_cert), path(&tls.client_key));
    let flags = [
        "--etcd-cafile",
        &ca,
        "--etcd-certfile",
        &cert,
        "--etcd-keyfile",
        &key,
    ];
    let dir = tmp.path().join("data");
    let mut a = apiserver(&dir, &etcd, &flags);
    assert_eq!(readyz(&a), 200);
    let created = json_of(&a.ok(&[
        "create",
        "configmap",
        "sealed",
        "--from-literal=k=1",
        "-o",
        "json",
    ]));
    a.terminate();
    // Started again on the same data directory: the object is in etcd.
    let a = apiserver(&dir, &etcd, &flags);
    let read = json_of(&a.ok(&["get", "configmap", "sealed", "-o", "json"]));
    assert_eq!(rv(&read), rv(&created));
    assert_eq!(read["data"]["k"], "1");

    let store = etcd.store_arg();
    // No client certificate: etcd refuses the handshake.
    let (code, err) = run(&["--store", &store, "--etcd-cafile", &ca], &dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot reach etcd"), "{err}");
    assert!(
        err.contains("--etcd-certfile"),
        "names what may be missing: {err}"
    );
    // Another CA: kubeling refuses etcd's certificate.
    let other = TlsFiles::make(&tmp.path().join("other")).unwrap();
    let other_ca = path(&other.ca);
    let (code, err) = run(
        &[
            "--store",
            &store,
            "--etcd-cafile",
            &other_ca,
            "--etcd-certfile",
            &cert,
            "--etcd-keyfile",
            &key,
        ],
        &dir,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("certificate"), "{err}");
    // https:// without the CA, and a key without its certificate: refused before dialling.
    let (code, err) = run(&["--store", &store], &dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("needs the CA"), "{err}");
    let (code, err) = run(
        &["--store", &store, "--etcd-cafile", &ca, "--etcd-keyfile", &key],
        &dir,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--etcd-keyfile needs --etcd-certfile"), "{err}");
    // TLS files without etcd: refused, not ignored.
    let (code, err) = run(&["--etcd-cafile", &ca], &tmp.path().join("sled"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("are for --store etcd="), "{err}");
    // The running API server was not disturbed.
    assert_eq!(readyz(&a), 200);
}

/// Each API server serialises its own cluster IP and node port allocation; across servers the IPAddress
/// object named by the IP (upstream's allocator) and a record per node port decide. Services created at
/// once through two API servers on one etcd all get different IPs and node ports, each IP held by its
/// IPAddress, and their IPs are released when they are deleted.
#[test]
fn services_created_at_once_through_two_api_servers_never_share_a_cluster_ip_or_node_port() {
    let etcd = Etcd::start().expect("etcd (./test.sh installs etcd-server when missing)");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let a = apiserver(&dir, &etcd, &[]);
    let b = apiserver(&dir, &etcd, &[]);
    const PER_CLIENT: usize = 6;
    let clients: Vec<(&Cluster, String)> = [(&a, "a"), (&b, "b"), (&a, "c"), (&b, "d")]
        .map(|(c, n)| (c, n.to_string()))
        .to_vec();
    let failures = at_once(&clients, PER_CLIENT, 201, |client, i| {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s-{client}-{i}"}},"spec":{{"type":"NodePort","ports":[{{"port":80}}]}}}}"#
        );
        (
            "POST",
            "/api/v1/namespaces/default/services",
            "application/json",
            body,
        )
    });
    assert!(failures.is_empty(), "creates refused: {failures:?}");
    let services = json_of(&b.ok(&["get", "services", "-A", "-o", "json"]));
    let mut by_ip: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in services["items"].as_array().unwrap() {
        let ip = s["spec"]["clusterIP"].as_str().unwrap().to_string();
        let name = format!(
            "{}/{}",
            s["metadata"]["namespace"].as_str().unwrap(),
            s["metadata"]["name"].as_str().unwrap()
        );
        by_ip.entry(ip).or_default().push(name);
    }
    let shared: Vec<_> = by_ip.iter().filter(|(_, names)| names.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "cluster IPs held by more than one Service: {shared:?}"
    );
    let mut node_ports: Vec<i64> = services["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["spec"]["ports"][0]["nodePort"].as_i64())
        .collect();
    assert_eq!(
        node_ports.len(),
        4 * PER_CLIENT,
        "every NodePort Service has a node port"
    );
    node_ports.sort();
    node_ports.dedup();
    assert_eq!(
        node_ports.len(),
        4 * PER_CLIENT,
        "node ports held by more than one Service"
    );
    assert_eq!(by_ip.len(), 4 * PER_CLIENT + 1, "{by_ip:?}");
    let addresses = json_of(&a.ok(&["get", "ipaddresses", "-o", "json"]));
    let held: std::collections::BTreeMap<String, String> = addresses["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let p = &a["spec"]["parentRef"];
            (
                a["metadata"]["name"].as_str().unwrap().to_string(),
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                ),
            )
        })
        .collect();
    let want: std::collections::BTreeMap<String, String> = by_ip
        .into_iter()
        .map(|(ip, mut names)| (ip, names.remove(0)))
        .collect();
    assert_eq!(held, want, "one IPAddress per Service, naming it");

    a.ok(&[
        "delete",
        "services",
        "-n",
        "default",
        "--field-selector",
        "metadata.name!=kubernetes",
    ]);
    eventually(WAIT, "every deleted Service's IPAddress to be gone", || {
        let left = b.ok(&["get", "ipaddresses", "-o", "name"]);
        (left.trim() == "ipaddress.networking.k8s.io/10.96.0.1").then_some(())
    });

    // One name created through both servers at once: one create wins, and the loser's clean-up does not
    // delete the winner's IPAddress (both servers pick the same free IP, and the reservation names the same
    // Service).
    for round in 0..5 {
        let body = br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"same"},"spec":{"type":"NodePort","ports":[{"port":80}]}}"#;
        let codes: Vec<u16> = std::thread::scope(|s| {
            let creates: Vec<_> = [&a, &b]
                .into_iter()
                .map(|c| {
                    s.spawn(move || {
                        c.curl(
                            "POST",
                            "/api/v1/namespaces/default/services",
                            Some(&c.token()),
                            "application/json",
                            Some(body),
                        )
                        .0
                    })
                })
                .collect();
            creates.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut sorted = codes.clone();
        sorted.sort();
        assert_eq!(sorted, vec![201, 409], "round {round}: {codes:?}");
        let same = json_of(&a.ok(&["get", "service", "same", "-o", "json"]));
        let ip = same["spec"]["clusterIP"].as_str().unwrap().to_string();
        let held = json_of(&b.ok(&["get", "ipaddress", &ip, "-o", "json"]));
        assert_eq!(held["spec"]["parentRef"]["name"], "same", "round {round}: {held}");
        // Its node port is its own: another Service asking for it is refused.
        let port = same["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        let clash = format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"clash"}},"spec":{{"type":"NodePort","ports":[{{"port":80,"nodePort":{port}}}]}}}}"#
        );
        let (code, answer) = b.curl(
            "POST",
            "/api/v1/namespaces/default/services",
            Some(&b.token()),
            "application/json",
            Some(clash.as_bytes()),
        );
        assert_eq!(code, 422, "round {round}: {answer}");
        a.ok(&["delete", "service", "same"]);
    }
}
