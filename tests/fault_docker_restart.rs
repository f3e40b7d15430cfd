//! The fault suite's Docker restart: the Docker daemon is restarted under `kubeling up` running a
//! Deployment. Without live-restore, Docker stops every container when it stops and starts none of
//! kubeling's again (they have no restart policy, as under upstream's kubelet): the node agent sees the
//! sandboxes gone and makes each pod a new sandbox and new containers, counting one restart, as upstream's
//! kubelet does. The pods (the same ones: nothing is evicted) are Ready again, the node is Ready, and no pod
//! ever has two running containers or sandboxes.
//!
//! Alone in its binary: restarting the daemon stops every container on the machine, so no other test may
//! run beside it (cargo runs one test binary at a time). It first waits for other containers to finish
//! and fails if some still run after a while rather than stop them. It restarts Docker the way it runs here:
//! systemd's unit, else an init script that manages it, else the `dockerd` process itself (SIGTERM, then the
//! same command line, environment and output file, in a session of its own).

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Cluster, container_status, eventually};
use serde_json::Value;

const NODE: &str = "dr";
const WAIT: Duration = Duration::from_secs(120);
/// How long other containers on the machine may take to finish before the test gives up on them.
const QUIET_WAIT: Duration = Duration::from_secs(180);

const LABEL_CLUSTER: &str = "io.kubeling.cluster";
const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
const LABEL_TYPE: &str = "io.kubernetes.docker.type";
const LABEL_RESTART_COUNT: &str = "annotation.io.kubernetes.container.restartCount";
/// The service gateway's label (node/src/network.rs).
const LABEL_GATEWAY: &str = "io.kubeling.gateway";

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("running docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Running containers carrying every `label=value`, full ids, sorted.
fn running(labels: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec!["ps".to_string(), "-q".into(), "--no-trunc".into()];
    for (k, v) in labels {
        args.push("--filter".into());
        args.push(format!("label={k}={v}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut ids: Vec<String> = docker(&args).split_whitespace().map(String::from).collect();
    ids.sort();
    ids
}

fn label(id: &str, key: &str) -> String {
    docker(&[
        "inspect",
        "--format",
        &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
        id,
    ])
    .trim()
    .to_string()
}

fn condition<'a>(v: &'a Value, kind: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or(&NULL)
}

/// The pods of the Deployment by UID: (name, the main container's status).
fn pods(c: &Cluster) -> BTreeMap<String, (String, Value)> {
    let v: Value = serde_json::from_str(&c.ok(&["get", "pods", "-l", "app=web", "-o", "json"])).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["uid"].as_str().unwrap().to_string(),
                (
                    p["metadata"]["name"].as_str().unwrap().to_string(),
                    container_status(p, "containerStatuses", "main").clone(),
                ),
            )
        })
        .collect()
}

/// Every pod Ready, with the Deployment's replicas all available.
fn all_ready(c: &Cluster, replicas: usize) -> bool {
    let v: Value = match serde_json::from_str(&c.ok(&["get", "pods", "-l", "app=web", "-o", "json"])) {
        Ok(v) => v,
        Err(_) => return false,
    };
    let items = v["items"].as_array().cloned().unwrap_or_default();
    items.len() == replicas && items.iter().all(|p| condition(p, "Ready")["status"] == "True")
}

/// The running containers (app and sandbox) of the pod with `uid`.
fn pod_containers(cluster: &str, uid: &str) -> (Vec<String>, Vec<String>) {
    (
        running(&[
            (LABEL_CLUSTER, cluster),
            (LABEL_POD_UID, uid),
            (LABEL_TYPE, "container"),
        ]),
        running(&[
            (LABEL_CLUSTER, cluster),
            (LABEL_POD_UID, uid),
            (LABEL_TYPE, "podsandbox"),
        ]),
    )
}

/// Running containers that are not this cluster's (its pods' and its service gateway).
fn foreign_containers(cluster: &str) -> Vec<String> {
    let mut ours = running(&[(LABEL_CLUSTER, cluster)]);
    ours.extend(running(&[(LABEL_GATEWAY, cluster)]));
    let all: Vec<String> = docker(&["ps", "-q", "--no-trunc"])
        .split_whitespace()
        .map(String::from)
        .collect();
    all.into_iter().filter(|id| !ours.contains(id)).collect()
}

/// Waits until no container but this cluster's runs on the machine: restarting Docker would stop them.
fn wait_until_alone(cluster: &str) {
    let deadline = Instant::now() + QUIET_WAIT;
    loop {
        let others = foreign_containers(cluster);
        if others.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "other containers still run on this Docker after {QUIET_WAIT:?}, and restarting the daemon \
             would stop them: {}",
            docker(&["ps", "--format", "{{.ID}} {{.Names}} {{.Status}}"])
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The pid of the running `dockerd`: its pid file, else the process named so.
fn dockerd_pid() -> u32 {
    let is_dockerd = |pid: &str| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "dockerd"))
    };
    if let Ok(pid) = std::fs::read_to_string("/var/run/docker.pid")
        && is_dockerd(pid.trim())
    {
        return pid.trim().parse().unwrap();
    }
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && is_dockerd(pid))
        .expect("no dockerd process")
        .parse()
        .unwrap()
}

/// The `\0`-separated entries of `/proc/<pid>/<file>`.
fn proc_list(pid: u32, file: &str) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/{file}")).unwrap();
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn wait_for_docker(timeout: Duration) {
    eventually(timeout, "the Docker daemon to answer", || {
        Command::new("docker")
            .args(["version", "--format", "{{.Server.Version}}"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            .then_some(())
    });
}

/// Restarts the Docker daemon the way it is run on this machine; returns how.
fn restart_docker() -> String {
    if Path::new("/run/systemd/system").exists() {
        let ok = Command::new("systemctl")
            .args(["restart", "docker"])
            .status()
            .unwrap();
        assert!(ok.success(), "systemctl restart docker failed");
        wait_for_docker(WAIT);
        return "systemctl restart docker".into();
    }
    // An init script manages it when its status finds the daemon (Debian's knows only what it started).
    let managed = Command::new("service")
        .args(["docker", "status"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if managed {
        let ok = Command::new("service")
            .args(["docker", "restart"])
            .status()
            .unwrap();
        assert!(ok.success(), "service docker restart failed");
        wait_for_docker(WAIT);
        return "service docker restart".into();
    }
    // A plain process: stopped with SIGTERM, started again as it was.
    let pid = dockerd_pid();
    let argv = proc_list(pid, "cmdline");
    let env = proc_list(pid, "environ");
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| PathBuf::from("/"));
    let output = std::fs::read_link(format!("/proc/{pid}/fd/1"))
        .ok()
        .filter(|p| p.is_absolute() && p.is_file());
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -TERM {pid} failed");
    eventually(WAIT, "dockerd to exit", || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    let out = || match &output {
        Some(p) => Stdio::from(
            std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .unwrap_or_else(|e| panic!("opening {}: {e}", p.display())),
        ),
        None => Stdio::null(),
    };
    // `setsid -f` forks the daemon into a session of its own and returns: it outlives this test.
    let status = Command::new("setsid")
        .arg("-f")
        .args(&argv)
        .env_clear()
        .envs(env.iter().filter_map(|kv| kv.split_once('=')))
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(out())
        .stderr(out())
        .status()
        .expect("running setsid");
    assert!(status.success(), "starting {argv:?} again failed");
    wait_for_docker(WAIT);
    format!("SIGTERM to dockerd ({pid}), then {} again", argv.join(" "))
}

/// `kubectl get pods -w` on the Deployment's pods, keeping each update as `name restartCount containerID`.
struct PodWatch {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl PodWatch {
    fn start(c: &Cluster) -> PodWatch {
        let template = r#"{.metadata.name} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].containerID}{"\n"}"#;
        let mut child = Command::new(common::KUBECTL)
            .args(["get", "pods", "-l", "app=web", "--watch", "-o"])
            .arg(format!("jsonpath={template}"))
            .env("KUBECONFIG", &c.kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get --watch");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (out, sink) = (child.stdout.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        PodWatch { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn pods_come_back_ready_with_one_restart_after_the_docker_daemon_restarts() {
    let image = testbox_image::ensure_testbox_image();
    let c = Cluster::up_with(&["--node-name", NODE], None);
    let cluster = std::fs::read_to_string(c.data_dir.join("node/cluster-id"))
        .unwrap()
        .trim()
        .to_string();
    let deployment = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: {image}
        args: [serve, --port, \"8080\"]
        readinessProbe:
          httpGet: {{path: /ready, port: 8080}}
          periodSeconds: 1
"
    );
    c.ok_stdin(&["apply", "-f", "-"], &deployment);
    eventually(WAIT, "the Deployment's 2 pods Ready", || {
        all_ready(&c, 2).then_some(())
    });
    let before = pods(&c);
    let mut sandboxes = BTreeMap::new();
    for (uid, (name, st)) in &before {
        assert_eq!(st["restartCount"], 0, "{name}: {st}");
        let (apps, sbs) = pod_containers(&cluster, uid);
        assert_eq!(apps.len(), 1, "{name}: {apps:?}");
        assert_eq!(sbs.len(), 1, "{name}: {sbs:?}");
        sandboxes.insert(uid.clone(), sbs[0].clone());
    }

    let watch = PodWatch::start(&c);
    wait_until_alone(&cluster);
    let t0 = Instant::now();
    let how = restart_docker();
    eprintln!("restarted Docker ({how}) in {:?}", t0.elapsed());
    let restarted_at = jiff::Timestamp::now();

    // The same pods, each with a new sandbox and one restart of its container, Ready again.
    let after = eventually(WAIT, "the same pods Ready again with one restart each", || {
        let now = pods(&c);
        let done = all_ready(&c, 2)
            && now.keys().eq(before.keys())
            && now
                .values()
                .all(|(_, st)| st["restartCount"] == 1 && st["ready"] == true);
        done.then_some(now)
    });
    eprintln!("pods Ready again {:?} after the restart began", t0.elapsed());
    for (uid, (name, st)) in &after {
        let (apps, sbs) = pod_containers(&cluster, uid);
        assert_eq!(apps.len(), 1, "{name}: running app containers {apps:?}");
        assert_eq!(sbs.len(), 1, "{name}: running sandboxes {sbs:?}");
        assert_ne!(sbs[0], sandboxes[uid], "{name} kept a sandbox Docker stopped");
        assert_eq!(st["containerID"], format!("docker://{}", apps[0]), "{name}: {st}");
        assert_ne!(st["containerID"], before[uid].1["containerID"], "{name}: {st}");
        assert_eq!(label(&apps[0], LABEL_RESTART_COUNT), "1", "{name}");
        // The container Docker stopped is reported as the last state (SIGTERM from the daemon: 143 here,
        // the testbox server exits on it).
        assert!(st["lastState"]["terminated"]["exitCode"].is_i64(), "{name}: {st}");
    }
    // The node reports Ready, with a heartbeat after the restart.
    c.wait_json(&["node", NODE], WAIT, |n| {
        let ready = condition(n, "Ready");
        ready["status"] == "True"
            && ready["lastHeartbeatTime"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|t| t.as_second() >= restarted_at.as_second())
    });
    // The service gateway, stopped with everything else, is running again.
    eventually(WAIT, "the service gateway running again", || {
        (running(&[(LABEL_GATEWAY, &cluster)]).len() == 1).then_some(())
    });
    c.wait_json(&["deployment", "web"], WAIT, |d| {
        d["status"]["availableReplicas"] == 2 && d["status"]["readyReplicas"] == 2
    });
    // And it stays so: no duplicate container or sandbox appears, nothing restarts again.
    let settle = Instant::now() + Duration::from_secs(5);
    while Instant::now() < settle {
        for (uid, (name, _)) in &after {
            let (apps, sbs) = pod_containers(&cluster, uid);
            assert!(apps.len() == 1 && sbs.len() == 1, "{name}: {apps:?} {sbs:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(pods(&c), after, "the pods changed after they were Ready again");
    // Every status the pods went through: a restart count never goes back (the node agent must not
    // report what it cannot see while Docker is down as containers never started).
    let seen = watch.lines();
    eprintln!("pod updates seen by a watch:\n{}", seen.join("\n"));
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for line in &seen {
        let mut words = line.split_whitespace();
        let (Some(name), count) = (words.next(), words.next().and_then(|n| n.parse::<i64>().ok())) else {
            continue;
        };
        let count = count.unwrap_or(-1);
        let before = last.insert(name, count).unwrap_or(0);
        assert!(
            count >= before,
            "{name}'s restart count went from {before} to {count}:\n{}",
            seen.join("\n")
        );
    }
}
