//! Step 5 with the real binary, kubectl and Docker: liveness, readiness and startup probes of every handler
//! kind drive `ready`, `started`, the Ready condition and restarts, as `kubectl get`, `wait` and `describe`
//! show them.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::Duration;

use common::Cluster;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// A pod with the given containers and a 1 s grace period (`common::pod_manifest`).
fn pod(name: &str, spec_extra: &str, containers: &str) -> String {
    let spec = format!("  terminationGracePeriodSeconds: 1\n{spec_extra}");
    common::pod_manifest(&testbox_image::ensure_testbox_image(), name, &spec, containers)
}

fn status<'a>(p: &'a Value, container: &str) -> &'a Value {
    common::container_status(p, "containerStatuses", container)
}

fn condition(p: &Value, type_: &str) -> String {
    condition_field(p, type_, "status")
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn condition_field(p: &Value, type_: &str, field: &str) -> Value {
    p["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == type_))
        .map(|c| c[field].clone())
        .unwrap_or(Value::Null)
}

/// An RFC 3339 time in status, as Unix seconds.
fn time(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a time: {v}"));
    s.parse::<jiff::Timestamp>().unwrap().as_second()
}

/// The READY column of `kubectl get pod`.
fn ready_column(c: &Cluster, name: &str) -> String {
    let out = c.ok(&["get", "pod", name, "--no-headers"]);
    out.split_whitespace().nth(1).unwrap_or("").to_string()
}

#[test]
fn readiness_http_probe_gates_ready_and_follows_the_health_path_without_restarts() {
    let c = Cluster::up();
    // /ready answers 503 for 8 s, then 200 while /tmp/unready does not exist.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "web",
            "",
            "  - name: main
    image: IMAGE
    args: [serve, --port, \"8080\", --ready-after, \"8\"]
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
",
        ),
    );
    let running = c.wait_json(&["pod", "web"], WAIT, |p| {
        status(p, "main")["state"]["running"].is_object()
    });
    assert_eq!(status(&running, "main")["ready"], false, "{running}");
    assert_eq!(ready_column(&c, "web"), "0/1");
    // kubectl wait returns only once the probe passes.
    c.ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    assert_eq!(ready_column(&c, "web"), "1/1");
    let p = c.wait_json(&["pod", "web"], WAIT, |p| {
        condition(p, "ContainersReady") == "True"
    });
    // Not before /ready answered 200, 8 s after the process started (status times are whole seconds).
    let started = time(&status(&p, "main")["state"]["running"]["startedAt"]);
    let ready = time(&condition_field(&p, "Ready", "lastTransitionTime"));
    assert!(ready - started >= 7, "Ready {}s after the start", ready - started);
    assert_eq!(condition(&p, "Ready"), "True");
    assert_eq!(status(&p, "main")["started"], true);

    // The path fails: not ready, no restart.
    c.ok(&["exec", "web", "--", "touch", "/tmp/unready"]);
    let p = c.wait_json(&["pod", "web"], WAIT, |p| condition(p, "Ready") == "False");
    let ready = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["reason"], "ContainersNotReady", "{ready}");
    assert_eq!(
        ready["message"], "containers with unready status: [main]",
        "{ready}"
    );
    assert_eq!(ready_column(&c, "web"), "0/1");
    assert!(
        c.events("web")
            .iter()
            .any(|e| e
                .starts_with("Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503")),
        "{:#?}",
        c.events("web")
    );

    // And passes again.
    c.ok(&["exec", "web", "--", "rm", "/tmp/unready"]);
    let p = c.wait_json(&["pod", "web"], WAIT, |p| condition(p, "Ready") == "True");
    assert_eq!(status(&p, "main")["restartCount"], 0, "{p}");
    assert_eq!(
        status(&p, "main")["containerID"],
        status(&running, "main")["containerID"],
        "the container was not replaced"
    );
}

#[test]
fn failing_liveness_exec_probe_kills_and_restarts_the_container_which_then_passes() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "alive",
            "",
            "  - name: main
    image: IMAGE
    args: [sleep]
    livenessProbe:
      exec: {command: [sh, -c, \"test ! -e /tmp/dead\"]}
      periodSeconds: 1
      failureThreshold: 2
",
        ),
    );
    let first = c.wait_json(&["pod", "alive"], WAIT, |p| status(p, "main")["ready"] == true);
    c.ok(&["exec", "alive", "--", "touch", "/tmp/dead"]);
    let p = c.wait_json(&["pod", "alive"], WAIT, |p| {
        status(p, "main")["restartCount"] == 1 && status(p, "main")["state"]["running"].is_object()
    });
    assert_ne!(
        status(&p, "main")["containerID"],
        status(&first, "main")["containerID"]
    );
    let last = &status(&p, "main")["lastState"]["terminated"];
    assert!(last["exitCode"].as_i64().is_some(), "{p}");
    let evs = c.events("alive");
    assert!(
        evs.iter()
            .any(|e| e.starts_with("Unhealthy: Liveness probe failed")),
        "{evs:#?}"
    );
    assert!(
        evs.iter()
            .any(|e| e == "Killing: Container main failed liveness probe, will be restarted"),
        "{evs:#?}"
    );
    // The new container (a fresh filesystem) passes: no second restart over several periods.
    std::thread::sleep(Duration::from_secs(4));
    let p = c.wait_json(&["pod", "alive"], WAIT, |_| true);
    assert_eq!(status(&p, "main")["restartCount"], 1, "{p}");
    assert_eq!(status(&p, "main")["ready"], true, "{p}");
}

#[test]
fn startup_probe_holds_the_other_probes_and_one_that_never_passes_restarts_the_container() {
    let c = Cluster::up();
    // /ready answers 200 after 5 s: the startup probe. Readiness and liveness hit /healthz and /, which the
    // server logs, so the log shows whether they ran before startup passed.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "slow",
            "",
            "  - name: main
    image: IMAGE
    args: [serve, --port, \"8080\", --ready-after, \"5\", --log-requests]
    startupProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 30
    livenessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
",
        ),
    );
    let early = c.wait_json(&["pod", "slow"], WAIT, |p| {
        status(p, "main")["state"]["running"].is_object()
    });
    assert_eq!(status(&early, "main")["started"], false, "{early}");
    assert_eq!(status(&early, "main")["ready"], false, "{early}");
    let p = c.wait_json(&["pod", "slow"], WAIT, |p| status(p, "main")["ready"] == true);
    assert_eq!(status(&p, "main")["started"], true);
    // The readiness probe ran as soon as startup passed, not a period (30 s) later.
    let started_at = time(&status(&p, "main")["state"]["running"]["startedAt"]);
    let ready_at = time(&condition_field(&p, "Ready", "lastTransitionTime"));
    assert!(
        ready_at - started_at <= 12,
        "Ready {}s after the start (startup passes after 5 s, readiness period 30 s)",
        ready_at - started_at
    );
    let logs = c.ok(&["logs", "slow"]);
    let requests: Vec<&str> = logs
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .collect();
    let first_pass = logs
        .lines()
        .position(|l| l.contains("/ready") && l.contains(" 200"))
        .unwrap_or_else(|| panic!("no passing startup probe in the log:\n{logs}"));
    for (i, l) in logs.lines().enumerate().take(first_pass) {
        assert!(
            !l.contains("/healthz") && !l.contains("GET / "),
            "line {i}, a probe before startup passed: {l}\n{logs}"
        );
    }
    assert!(requests.contains(&"/healthz"), "{logs}");

    // A startup probe that never passes restarts the container after failureThreshold × periodSeconds.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "never",
            "",
            "  - name: main
    image: IMAGE
    args: [sleep]
    startupProbe:
      exec: {command: [\"false\"]}
      periodSeconds: 1
      failureThreshold: 3
",
        ),
    );
    let p = c.wait_json(&["pod", "never"], WAIT, |p| {
        status(p, "main")["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    assert_eq!(status(&p, "main")["started"], false);
    let evs = c.wait_event("never", "failed startup probe", WAIT);
    assert!(
        evs.iter()
            .any(|e| e == "Killing: Container main failed startup probe, will be restarted"),
        "{evs:#?}"
    );
    assert!(
        evs.iter()
            .any(|e| e.starts_with("Unhealthy: Startup probe failed")),
        "{evs:#?}"
    );
}

#[test]
fn tcp_and_grpc_probes_pass_and_fail_as_the_test_switches_them() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "nets",
            "",
            "  - name: tcp
    image: IMAGE
    args: [tcp, --port, \"7000\", --closed-file, /tmp/closed]
    readinessProbe:
      tcpSocket: {port: 7000}
      periodSeconds: 1
      failureThreshold: 1
  - name: grpc
    image: IMAGE
    args: [grpc, --port, \"9090\", --service, web]
    readinessProbe:
      grpc: {port: 9090, service: web}
      periodSeconds: 1
      failureThreshold: 1
",
        ),
    );
    c.wait_json(&["pod", "nets"], WAIT, |p| {
        status(p, "tcp")["ready"] == true && status(p, "grpc")["ready"] == true
    });
    c.ok(&["exec", "nets", "-c", "tcp", "--", "touch", "/tmp/closed"]);
    c.ok(&["exec", "nets", "-c", "grpc", "--", "touch", "/tmp/not-serving"]);
    let p = c.wait_json(&["pod", "nets"], WAIT, |p| {
        status(p, "tcp")["ready"] == false && status(p, "grpc")["ready"] == false
    });
    assert_eq!(status(&p, "tcp")["restartCount"], 0);
    let evs = c.events("nets");
    assert!(
        evs.iter().any(|e| e.contains("Readiness probe failed: dial tcp")
            && e.contains(":7000: connect: connection refused")),
        "{evs:#?}"
    );
    assert!(
        evs.iter()
            .any(|e| e
                == "Unhealthy: Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")"),
        "{evs:#?}"
    );
    c.ok(&["exec", "nets", "-c", "tcp", "--", "rm", "/tmp/closed"]);
    c.ok(&["exec", "nets", "-c", "grpc", "--", "rm", "/tmp/not-serving"]);
    c.wait_json(&["pod", "nets"], WAIT, |p| {
        status(p, "tcp")["ready"] == true && status(p, "grpc")["ready"] == true
    });
}

#[test]
fn http_probes_resolve_named_ports_time_out_and_report_unknown_port_names() {
    let c = Cluster::up();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "ports",
            "",
            "  - name: named
    image: IMAGE
    args: [serve, --port, \"8080\"]
    ports: [{name: web, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /ready, port: web}
      periodSeconds: 1
  - name: slow
    image: IMAGE
    args: [serve, --port, \"8081\"]
    readinessProbe:
      httpGet: {path: /sleep/3s, port: 8081}
      timeoutSeconds: 1
      periodSeconds: 2
  - name: unknown
    image: IMAGE
    args: [serve, --port, \"8082\"]
    readinessProbe:
      httpGet: {path: /ready, port: metrics}
      periodSeconds: 1
  - name: nobinary
    image: IMAGE
    args: [sleep]
    readinessProbe:
      exec: {command: [/no/such/binary]}
      periodSeconds: 1
",
        ),
    );
    let p = c.wait_json(&["pod", "ports"], WAIT, |p| status(p, "named")["ready"] == true);
    let ip = p["status"]["podIP"].as_str().unwrap().to_string();
    let evs = c.wait_event("ports", "context deadline exceeded", WAIT);
    let want = format!(
        "Unhealthy: Readiness probe failed: Get \"http://{ip}:8081/sleep/3s\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    );
    assert!(evs.contains(&want), "{want}\n{evs:#?}");
    let evs = c.wait_event("ports", "errored", WAIT);
    assert!(
        evs.iter().any(|e| e
            == "Unhealthy: Readiness probe errored and resulted in unknown state: strconv.Atoi: parsing \"metrics\": invalid syntax"),
        "{evs:#?}"
    );
    // An exec of a binary the image does not have is a failure with the runtime's error text.
    let evs = c.wait_event("ports", "/no/such/binary", WAIT);
    assert!(
        evs.iter()
            .any(|e| e.starts_with("Unhealthy: Readiness probe failed: ") && e.contains("/no/such/binary")),
        "{evs:#?}"
    );
    let p = c.wait_json(&["pod", "ports"], WAIT, |_| true);
    assert_eq!(status(&p, "nobinary")["ready"], false);
    assert_eq!(status(&p, "slow")["ready"], false);
    assert_eq!(status(&p, "unknown")["ready"], false);
    assert_eq!(status(&p, "unknown")["restartCount"], 0);
}

#[test]
fn invalid_probes_are_refused_with_the_field_path() {
    let c = Cluster::start();
    let cases = [
        (
            "livenessProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 2",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ),
        (
            "startupProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 3",
            "spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1",
        ),
        (
            "readinessProbe:\n      exec: {command: [\"true\"]}\n      periodSeconds: -1",
            "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1",
        ),
        (
            "readinessProbe:\n      exec: {command: [\"true\"]}\n      tcpSocket: {port: 80}",
            "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
        ),
        (
            "readinessProbe:\n      exec: {command: [\"true\"]}\n      terminationGracePeriodSeconds: 5",
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
        ),
    ];
    for (i, (probe, want)) in cases.iter().enumerate() {
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad{i}\nspec:\n  containers:\n  - name: main\n    image: x\n    {probe}\n"
        );
        let err = String::from_utf8(c.kubectl_stdin(&["create", "-f", "-"], Some(&yaml)).stderr).unwrap();
        assert!(err.contains("is invalid"), "{err}");
        assert!(err.contains(want), "case {i}: want {want:?} in:\n{err}");
    }
    // A named port the container does not declare is accepted (upstream checks only its syntax).
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: named\nspec:\n  containers:\n  - name: main\n    image: x\n    readinessProbe:\n      httpGet: {port: metrics}\n";
    c.ok_stdin(&["create", "-f", "-"], yaml);
}

#[test]
fn a_static_pods_readiness_probe_shows_on_its_mirror_pod() {
    let c = Cluster::up();
    let image = testbox_image::ensure_testbox_image();
    let manifest = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: staticweb
spec:
  containers:
  - name: main
    image: {image}
    args: [serve, --port, \"8080\", --ready-after, \"3\"]
    readinessProbe:
      httpGet: {{path: /ready, port: 8080}}
      periodSeconds: 1
      failureThreshold: 1
"
    );
    std::fs::write(c.data_dir.join("manifests/web.yaml"), manifest).unwrap();
    // The node registers itself after `up`'s ready line (it first sets up the cluster's Docker network).
    let node = common::eventually(WAIT, "the node registered", || {
        let out = c.kubectl(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
        let names = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !names.is_empty()).then_some(names)
    });
    let mirror = format!("staticweb-{node}");
    let p = c.wait_json(&["pod", &mirror], WAIT, |p| {
        status(p, "main")["state"]["running"].is_object()
    });
    assert_eq!(
        status(&p, "main")["ready"],
        false,
        "not ready before its probe passes: {p}"
    );
    let p = c.wait_json(&["pod", &mirror], WAIT, |p| condition(p, "Ready") == "True");
    assert_eq!(status(&p, "main")["restartCount"], 0);
}

#[test]
fn readiness_is_still_probed_and_written_while_the_pod_terminates() {
    let c = Cluster::up();
    // A preStop sleep keeps the container serving for 10 s after the delete.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &common::pod_manifest(
            &testbox_image::ensure_testbox_image(),
            "leaving",
            "  terminationGracePeriodSeconds: 20\n",
            "  - name: main
    image: IMAGE
    args: [serve, --port, \"8080\"]
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
    lifecycle:
      preStop:
        sleep: {seconds: 10}
",
        ),
    );
    c.wait_json(&["pod", "leaving"], WAIT, |p| condition(p, "Ready") == "True");
    c.ok(&["delete", "pod", "leaving", "--wait=false"]);
    c.wait_json(&["pod", "leaving"], WAIT, |p| {
        p["metadata"]["deletionTimestamp"].is_string()
    });
    c.ok(&["exec", "leaving", "--", "touch", "/tmp/unready"]);
    let p = c.wait_json(&["pod", "leaving"], WAIT, |p| condition(p, "Ready") == "False");
    assert!(p["metadata"]["deletionTimestamp"].is_string(), "{p}");
    assert!(
        status(&p, "main")["state"]["running"].is_object(),
        "still running: {p}"
    );
}
