//! Step 3 with the real binary, kubectl and Docker: pods scheduled to the node agent run as pause-first
//! Docker containers, report status and events, stop gracefully, and survive a kill -9 of kubeling.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Cluster, running_containers};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

fn pod_yaml(name: &str, args: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  containers:\n  - name: main\n    image: {}\n    args: {args}\n",
        testbox_image::ensure_testbox_image()
    )
}

fn phase(v: &Value) -> &str {
    v["status"]["phase"].as_str().unwrap_or("")
}

fn docker_ids(cluster_label: &str) -> Vec<String> {
    running_containers(&[("io.kubeling.cluster", cluster_label)])
}

fn cluster_id(c: &Cluster) -> String {
    std::fs::read_to_string(c.data_dir.join("node/cluster-id"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn applied_pod_runs_with_an_ip_node_events_and_a_pause_container() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml("web", r#"["serve", "--port", "8080"]"#, ""),
    );
    let pod = c.wait_json(&["pod", "web"], WAIT, |p| {
        phase(p) == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    });
    assert!(
        pod["status"]["podIP"].as_str().is_some_and(|ip| !ip.is_empty()),
        "{pod}"
    );
    assert!(
        pod["status"]["containerStatuses"][0]["containerID"]
            .as_str()
            .unwrap()
            .starts_with("docker://")
    );
    let wide = c.ok(&["get", "pods", "-o", "wide"]);
    let row: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["web", "1/1", "Running"], "{wide}");
    let describe = c.ok(&["describe", "pod", "web"]);
    for reason in ["Scheduled", "Pulled", "Created", "Started"] {
        assert!(describe.contains(reason), "{reason} missing from:\n{describe}");
    }
    let names = Command::new("docker")
        .args([
            "ps",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("label=io.kubeling.cluster={}", cluster_id(&c)),
        ])
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&names.stdout);
    assert!(names.contains("k8s_POD_web_default_"), "{names}");
    assert!(names.contains("k8s_main_web_default_"), "{names}");
}

#[test]
fn delete_returns_when_the_pod_is_gone_and_a_sigterm_ignoring_container_is_killed_after_its_grace() {
    let c = Cluster::up();
    c.ok_stdin(&["apply", "-f", "-"], &pod_yaml("quick", r#"["sleep"]"#, ""));
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml(
            "stubborn",
            r#"["sleep", "--ignore-sigterm"]"#,
            "  terminationGracePeriodSeconds: 3\n",
        ),
    );
    c.wait_json(&["pod", "quick"], WAIT, |p| phase(p) == "Running");
    c.wait_json(&["pod", "stubborn"], WAIT, |p| phase(p) == "Running");
    let t = Instant::now();
    c.ok(&["delete", "pod", "quick"]);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "delete of a SIGTERM-honouring pod took {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    c.ok(&["delete", "pod", "stubborn"]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "the grace period was not waited out: {took:?}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(c.fails(&["get", "pod", "stubborn"]).contains("NotFound"));
}

#[test]
fn unmatched_node_selector_stays_pending_with_failed_scheduling() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml("nowhere", r#"["sleep"]"#, "  nodeSelector:\n    disk: ssd\n"),
    );
    let pod = c.wait_json(&["pod", "nowhere"], WAIT, |p| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "Unschedulable"))
    });
    assert_eq!(phase(&pod), "Pending");
    // The first verdict may predate the node's registration ("no nodes available"); the scheduler tries
    // again when the node appears and reports the new reason.
    let deadline = Instant::now() + WAIT;
    loop {
        let describe = c.ok(&["describe", "pod", "nowhere"]);
        if describe.contains("FailedScheduling")
            && describe.contains("didn't match Pod's node affinity/selector")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{describe}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn missing_image_reports_err_image_pull_then_image_pull_back_off() {
    let c = Cluster::up();
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ghost\nspec:\n  containers:\n  - name: main\n    image: kubeling/does-not-exist:1.0\n";
    c.ok_stdin(&["apply", "-f", "-"], yaml);
    let mut seen = Vec::new();
    c.wait_json(&["pod", "ghost"], WAIT, |p| {
        if let Some(r) = p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"].as_str()
            && seen.last().map(String::as_str) != Some(r)
        {
            seen.push(r.to_string());
        }
        seen.iter().any(|r| r == "ImagePullBackOff")
    });
    // ErrImagePull is the state of each failed attempt (short-lived between back-offs); the events keep it.
    let describe = c.ok(&["describe", "pod", "ghost"]);
    assert!(describe.contains("Error: ErrImagePull"), "{describe}");
    assert!(describe.contains("Back-off pulling image"), "{describe}");
}

#[test]
fn kill_9_of_kubeling_then_up_again_keeps_the_same_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut c = Cluster::start_in(&dir, 0, "up");
    c.ok_stdin(&["apply", "-f", "-"], &pod_yaml("keep", r#"["sleep"]"#, ""));
    c.wait_json(&["pod", "keep"], WAIT, |p| phase(p) == "Running");
    let id = cluster_id(&c);
    let before = docker_ids(&id);
    assert_eq!(before.len(), 2, "pause and app: {before:?}");
    c.kill9();
    let c = Cluster::start_in(&dir, 0, "up");
    // The restarted agent reports the pod Running again from the containers it adopted.
    let pod = c.wait_json(&["pod", "keep"], WAIT, |p| {
        phase(p) == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    });
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0, "{pod}");
    assert_eq!(docker_ids(&id), before, "containers were recreated");
}

#[test]
fn crashing_container_restarts_and_counts_restarts() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml("crash", r#"["exit", "--code", "3", "--after", "0.2"]"#, ""),
    );
    let pod = c.wait_json(&["pod", "crash"], WAIT, |p| {
        p["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 1
    });
    let last = &pod["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 3, "{pod}");
    assert_eq!(last["reason"], "Error", "{pod}");
}

fn docker_logs(c: &Cluster, pod: &str) -> String {
    let out = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=io.kubeling.cluster={}", cluster_id(c)),
            "--filter",
            &format!("name=k8s_main_{pod}_"),
        ])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let logs = Command::new("docker").args(["logs", &id]).output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr)
    )
}

#[test]
fn env_from_config_map_and_secret_and_a_config_map_volume_have_the_right_contents() {
    let c = Cluster::up();
    c.ok(&[
        "create",
        "configmap",
        "cfg",
        "--from-literal=greeting=hello-from-cm",
        "--from-literal=color=blue",
    ]);
    c.ok(&[
        "create",
        "secret",
        "generic",
        "sec",
        "--from-literal=password=s3cret",
    ]);
    let yaml = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: envy
spec:
  volumes:
  - name: cfg
    configMap:
      name: cfg
  containers:
  - name: main
    image: {}
    args: [\"sleep\", \"--print-env\", \"--cat\", \"/etc/cfg/greeting\"]
    env:
    - name: COLOR
      valueFrom:
        configMapKeyRef: {{name: cfg, key: color}}
    - name: PASSWORD
      valueFrom:
        secretKeyRef: {{name: sec, key: password}}
    - name: DERIVED
      value: \"$(COLOR)-sky\"
    volumeMounts:
    - name: cfg
      mountPath: /etc/cfg
",
        testbox_image::ensure_testbox_image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    c.wait_json(&["pod", "envy"], WAIT, |p| phase(p) == "Running");
    let deadline = Instant::now() + WAIT;
    let logs = loop {
        let logs = docker_logs(&c, "envy");
        if logs.contains("hello-from-cm") || Instant::now() > deadline {
            break logs;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for want in [
        "COLOR=blue",
        "PASSWORD=s3cret",
        "DERIVED=blue-sky",
        "hello-from-cm",
    ] {
        assert!(logs.contains(want), "{want} missing from:\n{logs}");
    }
}

#[test]
fn missing_config_map_is_create_container_config_error_then_runs_once_it_exists() {
    let c = Cluster::up();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: waits\nspec:\n  containers:\n  - name: main\n    image: {}\n    args: [\"sleep\"]\n    env:\n    - name: X\n      valueFrom:\n        configMapKeyRef: {{name: later, key: x}}\n",
        testbox_image::ensure_testbox_image()
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    c.wait_json(&["pod", "waits"], WAIT, |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    c.ok(&["create", "configmap", "later", "--from-literal=x=1"]);
    c.wait_json(&["pod", "waits"], WAIT, |p| phase(p) == "Running");
}

#[test]
fn logs_and_exec_reach_the_container_and_exec_returns_the_exit_code() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml(
            "talk",
            r#"["sleep", "--stdout", "hello-logs", "--stderr", "to-stderr"]"#,
            "",
        ),
    );
    c.wait_json(&["pod", "talk"], WAIT, |p| phase(p) == "Running");
    let deadline = Instant::now() + WAIT;
    loop {
        let logs = c.kubectl(&["logs", "talk"]);
        let text = String::from_utf8_lossy(&logs.stdout).to_string();
        if text.contains("hello-logs") && text.contains("to-stderr") {
            break;
        }
        assert!(Instant::now() < deadline, "logs never showed the output: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = c.kubectl(&["exec", "talk", "--", "sh", "-c", "echo from-exec; exit 3"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "from-exec");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.ok(&["exec", "talk", "--", "hostname"]).trim(), "talk");
}

#[test]
fn two_containers_in_a_pod_reach_each_other_on_localhost() {
    let c = Cluster::up();
    let image = testbox_image::ensure_testbox_image();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: duo\nspec:\n  containers:\n  - name: server\n    image: {image}\n    args: [\"serve\", \"--port\", \"8080\"]\n  - name: client\n    image: {image}\n    args: [\"sleep\"]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    c.wait_json(&["pod", "duo"], WAIT, |p| {
        phase(p) == "Running"
            && p["status"]["containerStatuses"]
                .as_array()
                .is_some_and(|a| a.iter().all(|s| s["ready"] == true))
    });
    let out = c.ok(&[
        "exec",
        "duo",
        "-c",
        "client",
        "--",
        "testbox",
        "get",
        "http://localhost:8080/hostname",
        "--retry",
        "10",
    ]);
    assert!(out.contains("duo"), "{out}");
}

#[test]
fn node_agent_alone_joins_another_api_server_and_runs_its_pods() {
    // An API server without a node agent or scheduler, then `kubeling node` pointed at its kubeconfig.
    let api = Cluster::start();
    let tmp = tempfile::tempdir().unwrap();
    let _node = common::NodeAgent::spawn(&api.kubeconfig, tmp.path(), &["--node-name", "joined"]);
    let n = api.wait_json(&["node", "joined"], WAIT, |n| {
        n["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    });
    assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "joined");
    assert!(
        n["status"]["nodeInfo"]["containerRuntimeVersion"]
            .as_str()
            .unwrap()
            .starts_with("docker://")
    );
    let lease = json_lease(&api);
    assert_eq!(lease["spec"]["holderIdentity"], "joined");
    // No scheduler runs beside a bare API server: bind the pod by name.
    c_apply_bound(&api);
    api.wait_json(&["pod", "bound"], WAIT, |p| phase(p) == "Running");
}

fn json_lease(c: &Cluster) -> Value {
    c.wait_json(&["lease", "joined", "-n", "kube-node-lease"], WAIT, |l| {
        l["spec"]["renewTime"].is_string()
    })
}

fn c_apply_bound(c: &Cluster) {
    let yaml = pod_yaml("bound", r#"["sleep"]"#, "  nodeName: joined\n");
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
}

#[test]
fn logs_follow_and_previous_after_a_restart() {
    let c = Cluster::up();
    // Prints a tick every 200 ms and exits 1 after 1.5 s: it restarts, so there is a previous instance.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml(
            "ticker",
            r#"["exit", "--code", "1", "--after", "1.5", "--print-every", "0.2"]"#,
            "",
        ),
    );
    c.wait_json(&["pod", "ticker"], WAIT, |p| {
        p["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 1
    });
    let prev = c.ok(&["logs", "ticker", "--previous"]);
    assert!(prev.contains("tick 1"), "{prev}");
    // Follow the current instance until it exits; the stream ends by itself.
    let out = Command::new(common::KUBECTL)
        .args(["logs", "-f", "ticker"])
        .env("KUBECONFIG", &c.kubeconfig)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tick 2"), "{text}");
}

#[test]
fn exec_with_a_tty_gives_a_working_shell() {
    let c = Cluster::up();
    c.ok_stdin(&["apply", "-f", "-"], &pod_yaml("tty", r#"["sleep"]"#, ""));
    c.wait_json(&["pod", "tty"], WAIT, |p| phase(p) == "Running");
    // `script` gives kubectl a terminal, so `-it` really allocates a TTY in the container.
    let out = Command::new("script")
        .args(["-qec", "kubectl exec -it tty -- sh", "/dev/null"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"echo tty-$((1))ok\nhostname\nexit 4\n")?;
            drop(stdin);
            child.wait_with_output()
        })
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tty"), "{text}");
    assert!(text.contains("$ "), "no prompt: {text}");
}

#[test]
fn attach_streams_the_main_process_output() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml("att", r#"["sleep", "--print-every", "0.2"]"#, ""),
    );
    c.wait_json(&["pod", "att"], WAIT, |p| phase(p) == "Running");
    let mut child = Command::new(common::KUBECTL)
        .args(["attach", "att"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("kubectl attach printed nothing");
    assert!(line.starts_with("tick "), "{line}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn force_delete_with_grace_zero_removes_the_pod_and_its_containers() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_yaml(
            "forced",
            r#"["sleep", "--ignore-sigterm"]"#,
            "  terminationGracePeriodSeconds: 60\n",
        ),
    );
    c.wait_json(&["pod", "forced"], WAIT, |p| phase(p) == "Running");
    let t = Instant::now();
    c.ok(&["delete", "pod", "forced", "--force", "--grace-period=0"]);
    assert!(t.elapsed() < Duration::from_secs(10), "took {:?}", t.elapsed());
    assert!(c.fails(&["get", "pod", "forced"]).contains("NotFound"));
    let id = cluster_id(&c);
    let deadline = Instant::now() + WAIT;
    while !docker_ids(&id).is_empty() {
        assert!(
            Instant::now() < deadline,
            "containers of a force-deleted pod kept running"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_locally_built_latest_image_runs_without_a_registry() {
    let c = Cluster::up();
    let base = testbox_image::ensure_testbox_image();
    let local = format!("kubeling-e2e/local-{}:latest", std::process::id());
    assert!(
        Command::new("docker")
            .args(["tag", &base, &local])
            .status()
            .unwrap()
            .success()
    );
    // `:latest` means imagePullPolicy Always; the pull fails offline and the local image is used.
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: local\nspec:\n  containers:\n  - name: main\n    image: {local}\n    args: [\"sleep\"]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    let pod = c.wait_json(&["pod", "local"], WAIT, |p| phase(p) == "Running");
    let _ = Command::new("docker").args(["rmi", &local]).output();
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
}
