//! Step 5's rest of the container lifecycle with the real binary, kubectl and Docker: postStart and preStop
//! hooks, activeDeadlineSeconds, termination messages, OOMKilled, `kubectl debug` with ephemeral
//! containers, and probed pods across a restart of kubeling.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Cluster;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str, spec_extra: &str, containers: &str) -> String {
    common::pod_manifest(
        &testbox_image::ensure_testbox_image(),
        name,
        spec_extra,
        containers,
    )
}

use common::container_status as status;

fn main_status(p: &Value) -> &Value {
    status(p, "containerStatuses", "main")
}

#[test]
fn post_start_hook_writes_a_file_the_main_process_reads() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "hooked",
            "",
            "  - name: main
    image: IMAGE
    args: [sleep, --wait-for-file, /tmp/hook]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, \"echo from-post-start > /tmp/hook\"]}
",
        ),
    );
    let p = c.wait_json(&["pod", "hooked"], WAIT, |p| main_status(p)["ready"] == true);
    assert_eq!(main_status(&p)["restartCount"], 0);
    common::eventually(WAIT, "the main process's output", || {
        let logs = c.ok(&["logs", "hooked"]);
        logs.contains("/tmp/hook: from-post-start").then_some(())
    });
}

#[test]
fn a_failing_post_start_hook_kills_and_restarts_the_container() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "badhook",
            "  terminationGracePeriodSeconds: 1\n",
            "  - name: main
    image: IMAGE
    args: [sleep]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, \"exit 3\"]}
",
        ),
    );
    c.wait_json(&["pod", "badhook"], WAIT, |p| {
        main_status(p)["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    let evs = c.wait_event("badhook", "FailedPostStartHook", WAIT);
    assert!(
        evs.iter()
            .any(|e| e == "FailedPostStartHook: PostStartHook failed"),
        "{evs:#?}"
    );
    assert!(
        evs.iter().any(|e| e == "Killing: FailedPostStartHook"),
        "{evs:#?}"
    );
}

#[test]
fn a_hanging_post_start_hook_does_not_block_deletion() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "stuck",
            "  terminationGracePeriodSeconds: 2\n",
            "  - name: main
    image: IMAGE
    args: [sleep]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, \"sleep 3600\"]}
",
        ),
    );
    // The container runs in Docker (its Started event is out), but the status keeps it waiting while
    // postStart has not returned.
    c.wait_event("stuck", "Started container main", WAIT);
    let docker = Command::new("docker")
        .args([
            "ps",
            "--filter",
            "name=k8s_main_stuck_",
            "--filter",
            "status=running",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&docker.stdout).trim().is_empty(),
        "not running in Docker"
    );
    let p = c.wait_json(&["pod", "stuck"], WAIT, |_| true);
    let waiting = &main_status(&p)["state"]["waiting"];
    assert!(waiting.is_object(), "{p}");
    assert_ne!(waiting["reason"], "PostStartHookError");
    let t = Instant::now();
    c.ok(&["delete", "pod", "stuck", "--timeout=60s"]);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "delete took {:?}",
        t.elapsed()
    );
}

#[test]
fn pre_stop_runs_before_sigterm_and_counts_against_the_grace_period() {
    let c = Cluster::up();
    let shared = tempfile::tempdir().unwrap();
    let dir = shared.path().display().to_string();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "stopper",
            &format!(
                "  terminationGracePeriodSeconds: 20\n  volumes:\n  - name: shared\n    hostPath: {{path: {dir}}}\n"
            ),
            "  - name: main
    image: IMAGE
    args: [sleep, --on-sigterm-copy, /shared/prestop:/shared/seen-at-sigterm]
    volumeMounts: [{name: shared, mountPath: /shared}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, \"echo prestop-ran > /shared/prestop; sleep 2\"]}
",
        ),
    );
    c.wait_json(&["pod", "stopper"], WAIT, |p| main_status(p)["ready"] == true);
    let t = Instant::now();
    c.ok(&["delete", "pod", "stopper", "--timeout=60s"]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "the 2 s preStop hook was not waited for: {took:?}"
    );
    assert!(
        took < Duration::from_secs(15),
        "took {took:?}: SIGTERM came late or SIGKILL waited the grace out"
    );
    let seen = std::fs::read_to_string(shared.path().join("seen-at-sigterm")).unwrap();
    assert_eq!(
        seen.trim(),
        "prestop-ran",
        "the hook's file did not exist when SIGTERM arrived"
    );
}

#[test]
fn a_hanging_pre_stop_hook_is_cut_at_the_grace_period() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "hangstop",
            "  terminationGracePeriodSeconds: 3\n",
            "  - name: main
    image: IMAGE
    args: [sleep]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, \"sleep 3600\"]}
",
        ),
    );
    c.wait_json(&["pod", "hangstop"], WAIT, |p| main_status(p)["ready"] == true);
    let t = Instant::now();
    c.ok(&["delete", "pod", "hangstop", "--timeout=60s"]);
    let took = t.elapsed();
    // The grace (3 s) goes to the hook, then the stop still gets its minimum 2 s.
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[test]
fn active_deadline_fails_the_pod_with_deadline_exceeded_and_kills_its_containers() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "deadline",
            "  activeDeadlineSeconds: 5\n  terminationGracePeriodSeconds: 1\n",
            "  - name: main\n    image: IMAGE\n    args: [sleep]\n",
        ),
    );
    let running = c.wait_json(&["pod", "deadline"], WAIT, |p| p["status"]["phase"] == "Running");
    let p = c.wait_json(&["pod", "deadline"], WAIT, |p| p["status"]["phase"] == "Failed");
    assert_eq!(p["status"]["reason"], "DeadlineExceeded", "{p}");
    assert_eq!(
        p["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let p = c.wait_json(&["pod", "deadline"], WAIT, |p| {
        main_status(p)["state"]["terminated"].is_object()
    });
    assert_eq!(
        main_status(&p)["containerID"],
        main_status(&running)["containerID"],
        "killed, not restarted"
    );
    assert!(
        c.events("deadline")
            .iter()
            .any(|e| e == "DeadlineExceeded: Pod was active on the node longer than the specified deadline"),
        "{:#?}",
        c.events("deadline")
    );
    // Failed stays Failed: nothing is started again.
    std::thread::sleep(Duration::from_secs(2));
    let later = c.wait_json(&["pod", "deadline"], WAIT, |_| true);
    assert_eq!(main_status(&later)["restartCount"], 0, "{later}");
}

#[test]
fn a_pod_that_completed_is_not_failed_by_its_deadline() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "done",
            "  restartPolicy: Never\n  activeDeadlineSeconds: 3\n",
            "  - name: main\n    image: IMAGE\n    args: [exit, --code, \"0\"]\n",
        ),
    );
    let p = c.wait_json(&["pod", "done"], WAIT, |p| p["status"]["phase"] == "Succeeded");
    let start = p["status"]["startTime"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap();
    // Well past the deadline, it is still Succeeded.
    let past = start.as_second() + 6;
    while jiff::Timestamp::now().as_second() < past {
        std::thread::sleep(Duration::from_millis(200));
    }
    let p = c.wait_json(&["pod", "done"], WAIT, |_| true);
    assert_eq!(p["status"]["phase"], "Succeeded", "{p}");
    assert!(p["status"]["reason"].is_null(), "{p}");
    assert!(!c.events("done").iter().any(|e| e.starts_with("DeadlineExceeded")));
}

#[test]
fn termination_messages_come_from_the_file_or_the_log() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "farewell",
            "  restartPolicy: Never\n",
            "  - name: main
    image: IMAGE
    args: [sh, -c, \"echo goodbye > /dev/termination-log; exit 1\"]
  - name: custom
    image: IMAGE
    args: [sh, -c, \"echo custom-path > /tmp/why; exit 0\"]
    terminationMessagePath: /tmp/why
  - name: logs
    image: IMAGE
    args: [sh, -c, \"echo line-one; echo from-the-log; exit 2\"]
    terminationMessagePolicy: FallbackToLogsOnError
",
        ),
    );
    let p = c.wait_json(&["pod", "farewell"], WAIT, |p| p["status"]["phase"] == "Failed");
    let term = |name: &str| status(&p, "containerStatuses", name)["state"]["terminated"].clone();
    assert_eq!(term("main")["message"], "goodbye\n", "{p}");
    assert_eq!(term("main")["exitCode"], 1);
    assert_eq!(term("main")["reason"], "Error");
    assert_eq!(term("custom")["message"], "custom-path\n", "{p}");
    assert_eq!(term("custom")["reason"], "Completed");
    assert_eq!(term("logs")["message"], "line-one\nfrom-the-log\n", "{p}");
    let yaml = c.ok(&["get", "pod", "farewell", "-o", "yaml"]);
    assert!(yaml.contains("message: |\n          goodbye"), "{yaml}");
}

#[test]
fn a_container_over_its_memory_limit_is_oom_killed_with_exit_code_137() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "hungry",
            "  restartPolicy: Never\n",
            "  - name: main
    image: IMAGE
    args: [sleep, --alloc-mib, \"256\"]
    resources:
      limits: {memory: 32Mi}
",
        ),
    );
    let p = c.wait_json(&["pod", "hungry"], WAIT, |p| p["status"]["phase"] == "Failed");
    let t = &main_status(&p)["state"]["terminated"];
    assert_eq!(t["reason"], "OOMKilled", "{p}");
    assert_eq!(t["exitCode"], 137, "{p}");
    let row = c.ok(&["get", "pod", "hungry", "--no-headers"]);
    assert!(row.contains("OOMKilled"), "{row}");
}

#[test]
fn kubectl_debug_gives_a_shell_that_sees_the_target_containers_processes() {
    let c = Cluster::up();
    let image = testbox_image::ensure_testbox_image();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "mypod",
            "  terminationGracePeriodSeconds: 1\n",
            "  - name: app\n    image: IMAGE\n    args: [sleep, --stdout, marker-of-the-app]\n",
        ),
    );
    c.wait_json(&["pod", "mypod"], WAIT, |p| {
        status(p, "containerStatuses", "app")["ready"] == true
    });
    // `-i` without a terminal: kubectl attaches to the shell's stdin and prints its output.
    let out = c.kubectl_stdin(
        &[
            "debug",
            "-i",
            "mypod",
            &format!("--image={image}"),
            "--target=app",
            "-c",
            "dbg",
            "--",
            "sh",
        ],
        Some("cat /proc/1/cmdline\necho\necho shell-done\nexit\n"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // PID 1 in the debug shell is the app's testbox, as the --target PID namespace makes it.
    assert!(
        stdout.contains("marker-of-the-app"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("shell-done"), "{stdout}");
    // `-it` as a user types it, on a terminal (script(1) gives kubectl one): a TTY shell in the app's PID
    // namespace.
    let cmd = format!("kubectl debug -it mypod --image={image} --target=app -c tty -- sh",);
    let mut script = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = script.stdin.take().unwrap();
    let mut stdout = script.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let wait_for = |what: &str| {
        let deadline = Instant::now() + WAIT;
        while !seen.lock().unwrap().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no {what:?} in: {}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    use std::io::Write;
    // kubectl says this once it has attached to the shell (whose first prompt came before).
    wait_for("If you don't see a command prompt");
    // `$X` expands only in the output, so the marker is not the terminal's echo of the line typed.
    stdin
        .write_all(b"X=done; cat /proc/1/cmdline; echo tty-$X\n")
        .unwrap();
    wait_for("tty-done");
    stdin.write_all(b"exit\n").unwrap();
    let status_code = script.wait().unwrap();
    reader.join().unwrap();
    let tty_out = seen.lock().unwrap().clone();
    assert!(status_code.success(), "{tty_out}");
    assert!(tty_out.contains("marker-of-the-app"), "{tty_out}");
    let p = c.wait_json(&["pod", "mypod"], WAIT, |p| {
        status(p, "ephemeralContainerStatuses", "dbg")["state"]["terminated"].is_object()
            && status(p, "ephemeralContainerStatuses", "tty")["state"]["terminated"].is_object()
    });
    assert_eq!(status(&p, "ephemeralContainerStatuses", "tty")["restartCount"], 0);
    let dbg = status(&p, "ephemeralContainerStatuses", "dbg");
    assert_eq!(dbg["restartCount"], 0);
    assert_eq!(dbg["ready"], false);
    // Never restarted, and the app is untouched.
    std::thread::sleep(Duration::from_secs(2));
    let p = c.wait_json(&["pod", "mypod"], WAIT, |_| true);
    assert!(status(&p, "ephemeralContainerStatuses", "dbg")["state"]["terminated"].is_object());
    assert_eq!(status(&p, "containerStatuses", "app")["restartCount"], 0);
}

#[test]
fn probed_pods_keep_their_containers_and_stay_ready_across_a_restart_of_kubeling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut c = Cluster::start_in(&dir, 0, "up");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "steady",
            "",
            "  - name: main
    image: IMAGE
    args: [serve, --port, \"8080\"]
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
",
        ),
    );
    let before = c.wait_json(&["pod", "steady"], WAIT, |p| main_status(p)["ready"] == true);
    assert_eq!(c.terminate().code(), Some(0));
    let c = Cluster::start_in(&dir, 0, "up");
    // Ready never flipped: a flip, even one over before the watch below starts, moves the conditions'
    // transition times.
    let ready_since = |p: &Value| {
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
            .map(|c| (c["status"].clone(), c["lastTransitionTime"].clone()))
            .collect::<Vec<_>>()
    };
    // Watch the pod for several probe periods: every state it goes through must be Ready.
    let mut watch = Command::new(common::KUBECTL)
        .args(["get", "pod", "steady", "-w", "-o", "json", "--request-timeout=6s"])
        .env("KUBECONFIG", &c.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    watch.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let _ = watch.wait();
    let states: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    assert!(!states.is_empty(), "the watch saw nothing");
    for p in &states {
        assert_eq!(
            main_status(p)["ready"],
            true,
            "Ready flipped after the restart: {p}"
        );
        assert_eq!(main_status(p)["restartCount"], 0, "{p}");
        assert_eq!(
            main_status(p)["containerID"],
            main_status(&before)["containerID"],
            "{p}"
        );
        assert_eq!(ready_since(p), ready_since(&before), "{p}");
    }
    // And the probes run again: failing the health path now restarts the container.
    c.ok(&["exec", "steady", "--", "touch", "/tmp/unhealthy"]);
    let p = c.wait_json(&["pod", "steady"], WAIT, |p| main_status(p)["restartCount"] == 1);
    assert_ne!(
        main_status(&p)["containerID"],
        main_status(&before)["containerID"]
    );
}
