//! DockerRuntime against the real local Docker engine: the pause image built offline, a sandbox and an app
//! container joined to it, labels and names as `docker inspect` shows them, listing scoped to one cluster,
//! stop with grace and with SIGKILL escalation, logs, exec, exit codes. These tests need Docker and do not
//! skip without it. Each test uses its own random cluster ID and pause image tag, and a guard removes both
//! on drop (even when the test panics), so tests can run in parallel on a shared engine.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use node::runtime::naming::{LABEL_KUBELING_CLUSTER, LABEL_KUBELING_PAUSE};
use node::runtime::{
    ContainerConfig, ContainerRuntime, ContainerStatus, CriState, DockerRuntime, ExecConfig, ImageInfo,
    ListFilter, LogOptions, Owner, PAUSE_BINARY_SHA256, PullPolicy, Resources, RuntimeError, SandboxConfig,
    StdStream,
};

/// Removes every container of the test's cluster, then its pause image, when dropped.
struct Cleanup {
    cluster: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Synchronous on purpose: Drop may run while a panic unwinds the test's runtime.
        let filter = format!("label={LABEL_KUBELING_CLUSTER}={}", self.cluster);
        let listed = Command::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output();
        if let Ok(listed) = listed {
            let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            if !ids.is_empty() {
                let _ = Command::new("docker").args(["rm", "-fv"]).args(&ids).output();
            }
        }
        let _ = Command::new("docker").args(["rmi", &self.image]).output();
    }
}

fn unique() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{:x}{:x}{:x}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

struct Env {
    runtime: DockerRuntime,
    cluster: String,
    pause: ImageInfo,
    pause_name: String,
    _cleanup: Cleanup,
}

/// A runtime for a fresh cluster, with its own pause image tag built (or found) through ensure_pause_image.
async fn env() -> Env {
    let cluster = format!("test-{}", unique());
    let pause_name = format!("kubeling-test/pause:{}", unique());
    let cleanup = Cleanup {
        cluster: cluster.clone(),
        image: pause_name.clone(),
    };
    let owner = Owner {
        cluster: cluster.clone(),
        node: "test-node".to_owned(),
    };
    let runtime = DockerRuntime::connect(owner)
        .await
        .expect("docker must be reachable for these tests");
    let pause = runtime.ensure_pause_image(&pause_name).await.unwrap();
    Env {
        runtime,
        cluster,
        pause,
        pause_name,
        _cleanup: cleanup,
    }
}

fn docker_inspect(id: &str) -> serde_json::Value {
    let out = Command::new("docker").args(["inspect", id]).output().unwrap();
    assert!(
        out.status.success(),
        "docker inspect {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    all.remove(0)
}

fn sandbox_config(env: &Env, uid: &str) -> SandboxConfig {
    SandboxConfig {
        pod_name: "web".to_owned(),
        namespace: "default".to_owned(),
        uid: uid.to_owned(),
        attempt: 0,
        image: env.pause_name.clone(),
        hostname: Some("web-host".to_owned()),
        labels: BTreeMap::from([("app".to_owned(), "web".to_owned())]),
        annotations: BTreeMap::from([("kubernetes.io/config.source".to_owned(), "api".to_owned())]),
        ..SandboxConfig::default()
    }
}

/// An app container running the pause binary (the only executable in the image), `args` as its arguments.
fn app_config(env: &Env, uid: &str, sandbox_id: &str, name: &str, args: &[&str]) -> ContainerConfig {
    ContainerConfig {
        pod_name: "web".to_owned(),
        namespace: "default".to_owned(),
        uid: uid.to_owned(),
        name: name.to_owned(),
        restart_count: 0,
        sandbox_id: sandbox_id.to_owned(),
        image: env.pause.id.clone(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: vec![("GREETING".to_owned(), "hello".to_owned())],
        resources: Resources {
            memory_limit: Some(64 << 20),
            cpu_limit_millis: Some(500),
            cpu_request_millis: Some(250),
        },
        hash: "0123abcd".to_owned(),
        termination_message_path: "/dev/termination-log".to_owned(),
        termination_message_policy: "File".to_owned(),
        termination_grace_period: Some(30),
        ..ContainerConfig::default()
    }
}

async fn wait_exited(runtime: &DockerRuntime, id: &str) -> node::runtime::ContainerState {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = runtime.inspect(id).await.unwrap();
        if state.status == ContainerStatus::Exited {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "container {id} did not exit: {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn read_logs(runtime: &DockerRuntime, id: &str, options: LogOptions) -> String {
    let chunks: Vec<_> = runtime
        .logs(id, &options)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    String::from_utf8(chunks.concat()).unwrap()
}

#[tokio::test]
async fn ensure_pause_image_builds_the_image_when_missing() {
    let name = format!("kubeling-test/pause:{}", unique());
    let _cleanup = Cleanup {
        cluster: format!("unused-{}", unique()),
        image: name.clone(),
    };
    let runtime = DockerRuntime::connect(Owner {
        cluster: "unused".into(),
        node: "n".into(),
    })
    .await
    .unwrap();
    let absent = Command::new("docker")
        .args(["image", "inspect", &name])
        .output()
        .unwrap();
    assert!(!absent.status.success(), "{name} should not exist yet");

    let built = runtime.ensure_pause_image(&name).await.unwrap();
    assert!(built.id.starts_with("sha256:"), "{built:?}");
    assert!(built.repo_tags.contains(&name), "{built:?}");
    assert_eq!(built.entrypoint, vec!["/pause".to_owned()]);
    assert_eq!(
        built.labels.get(LABEL_KUBELING_PAUSE).map(String::as_str),
        Some(PAUSE_BINARY_SHA256)
    );

    // Present and current: found, not rebuilt.
    let again = runtime.ensure_pause_image(&name).await.unwrap();
    assert_eq!(again.id, built.id);
    // And ensure_image sees it like any local image, without a registry.
    let image = runtime
        .ensure_image(&name, PullPolicy::IfNotPresent)
        .await
        .unwrap();
    assert_eq!(image.id, built.id);
    assert_eq!(image.image_ref(), format!("docker://{}", built.id));
}

#[tokio::test]
async fn sandbox_and_app_container_share_namespaces_and_carry_labels() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    assert!(runtime.version().await.unwrap().starts_with("docker://"));
    runtime.ping().await.unwrap();

    let sandbox = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    runtime.start(&sandbox).await.unwrap();
    let sandbox_state = runtime.inspect(&sandbox).await.unwrap();
    assert!(sandbox_state.is_running(), "{sandbox_state:?}");
    assert!(
        !sandbox_state.ip_address.is_empty(),
        "bridge sandbox has an IP: {sandbox_state:?}"
    );
    assert!(sandbox_state.pid.is_some());

    let app = runtime
        .create_container(&app_config(&env, &uid, &sandbox, "app", &[]))
        .await
        .unwrap();
    runtime.start(&app).await.unwrap();

    let sandbox_json = docker_inspect(&sandbox);
    assert_eq!(sandbox_json["Name"], format!("/k8s_POD_web_default_{uid}_0"));
    assert_eq!(sandbox_json["HostConfig"]["IpcMode"], "shareable");
    assert_eq!(sandbox_json["Config"]["Hostname"], "web-host");
    let labels = &sandbox_json["Config"]["Labels"];
    assert_eq!(labels["io.kubernetes.pod.name"], "web");
    assert_eq!(labels["io.kubernetes.pod.namespace"], "default");
    assert_eq!(labels["io.kubernetes.pod.uid"], uid.as_str());
    assert_eq!(labels["io.kubernetes.docker.type"], "podsandbox");
    assert_eq!(labels["io.kubernetes.container.name"], "POD");
    assert_eq!(labels["annotation.kubernetes.io/config.source"], "api");
    assert_eq!(labels["app"], "web");
    assert_eq!(labels["io.kubeling.cluster"], env.cluster.as_str());
    assert_eq!(labels["io.kubeling.node"], "test-node");

    let app_json = docker_inspect(&app);
    assert_eq!(app_json["Name"], format!("/k8s_app_web_default_{uid}_0"));
    assert_eq!(
        app_json["HostConfig"]["NetworkMode"],
        format!("container:{sandbox}")
    );
    assert_eq!(app_json["HostConfig"]["IpcMode"], format!("container:{sandbox}"));
    assert_eq!(app_json["HostConfig"]["RestartPolicy"]["Name"], "no");
    assert_eq!(app_json["HostConfig"]["NanoCpus"], 500_000_000);
    assert_eq!(app_json["HostConfig"]["CpuShares"], 256);
    assert_eq!(app_json["HostConfig"]["Memory"], 64 << 20);
    assert_eq!(app_json["Image"], env.pause.id.as_str());
    assert!(
        app_json["Config"]["Env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "GREETING=hello")
    );
    let labels = &app_json["Config"]["Labels"];
    assert_eq!(labels["io.kubernetes.container.name"], "app");
    assert_eq!(labels["io.kubernetes.docker.type"], "container");
    assert_eq!(labels["io.kubernetes.sandbox.id"], sandbox.as_str());
    assert_eq!(labels["annotation.io.kubernetes.container.hash"], "0123abcd");
    assert_eq!(labels["annotation.io.kubernetes.container.restartCount"], "0");
    assert_eq!(
        labels["annotation.io.kubernetes.container.terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(
        labels["annotation.io.kubernetes.container.terminationMessagePolicy"],
        "File"
    );
    assert_eq!(labels["io.kubeling.cluster"], env.cluster.as_str());

    // The app sees the sandbox's network: the same IP.
    let app_state = runtime.inspect(&app).await.unwrap();
    assert!(app_state.is_running());
    assert_eq!(app_state.network_mode, format!("container:{sandbox}"));

    // Listing is scoped to this cluster: exactly the two, whatever else runs on the engine.
    let all = runtime.list(&ListFilter::all()).await.unwrap();
    let ids: BTreeSet<_> = all.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids, BTreeSet::from([sandbox.clone(), app.clone()]));
    let sandboxes = runtime
        .list(&ListFilter::sandboxes().pod_uid(&uid))
        .await
        .unwrap();
    assert_eq!(sandboxes.len(), 1);
    assert_eq!(sandboxes[0].name, format!("k8s_POD_web_default_{uid}_0"));
    assert_eq!(sandboxes[0].state, ContainerStatus::Running);
    assert_eq!(sandboxes[0].attempt(), Some(0));
    let apps = runtime
        .list(&ListFilter::containers().pod_uid(&uid))
        .await
        .unwrap();
    assert_eq!(apps.len(), 1);
    assert_eq!(
        (apps[0].id.as_str(), apps[0].hash(), apps[0].restart_count()),
        (app.as_str(), Some("0123abcd"), Some(0))
    );
    assert_eq!(apps[0].sandbox_id(), Some(sandbox.as_str()));
    let other = DockerRuntime::connect(Owner {
        cluster: format!("other-{}", unique()),
        node: "test-node".into(),
    })
    .await
    .unwrap();
    assert!(other.list(&ListFilter::all()).await.unwrap().is_empty());

    // Removing the sandbox's app container and the sandbox leaves nothing behind.
    runtime.remove_container(&app).await.unwrap();
    runtime.remove_container(&sandbox).await.unwrap();
    runtime.remove_container(&sandbox).await.unwrap();
    assert!(runtime.list(&ListFilter::all()).await.unwrap().is_empty());
    assert!(runtime.inspect(&app).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn stop_with_grace_ends_pause_promptly_with_exit_code_zero() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    let sandbox = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    runtime.start(&sandbox).await.unwrap();
    let app = runtime
        .create_container(&app_config(&env, &uid, &sandbox, "app", &[]))
        .await
        .unwrap();
    runtime.start(&app).await.unwrap();

    // `docker stop -t 30` path: pause exits on SIGTERM, so the grace is not waited out.
    let started = Instant::now();
    runtime
        .stop_container(&app, Duration::from_secs(30), None)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        started.elapsed()
    );
    let state = runtime.inspect(&app).await.unwrap();
    assert_eq!(
        (state.status, state.exit_code),
        (ContainerStatus::Exited, 0),
        "{state:?}"
    );
    assert_eq!(state.cri_state(), CriState::Exited { reason: "Completed" });
    assert!(state.finished_at.is_some() && state.started_at.is_some());

    // Explicit signal: the kill + wait path.
    let started = Instant::now();
    runtime
        .stop_container(&sandbox, Duration::from_secs(30), Some("SIGTERM"))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        started.elapsed()
    );
    let state = runtime.inspect(&sandbox).await.unwrap();
    assert_eq!(
        (state.status, state.exit_code),
        (ContainerStatus::Exited, 0),
        "{state:?}"
    );

    // Stopping what is already stopped is fine.
    runtime
        .stop_container(&sandbox, Duration::from_secs(2), None)
        .await
        .unwrap();
    runtime
        .stop_container(&sandbox, Duration::from_secs(2), Some("SIGTERM"))
        .await
        .unwrap();

    // pause said why it exited.
    let logs = read_logs(runtime, &sandbox, LogOptions::default()).await;
    assert!(logs.contains("pause: shutting down, got signal 15"), "{logs:?}");
}

#[tokio::test]
async fn stop_sends_sigkill_when_the_grace_period_runs_out() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    let sandbox = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    runtime.start(&sandbox).await.unwrap();

    // PID 1 of a PID namespace ignores signals it has no handler for, and pause has none for SIGUSR1: the
    // container outlives the grace and must be killed.
    let started = Instant::now();
    runtime
        .stop_container(&sandbox, Duration::from_secs(1), Some("SIGUSR1"))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(10),
        "stop took {elapsed:?}"
    );
    let state = runtime.inspect(&sandbox).await.unwrap();
    assert_eq!(
        (state.status, state.exit_code),
        (ContainerStatus::Exited, 137),
        "{state:?}"
    );
    assert_eq!(state.cri_state(), CriState::Exited { reason: "Error" });
}

#[tokio::test]
async fn exited_containers_report_exit_codes_and_logs() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    let sandbox = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    runtime.start(&sandbox).await.unwrap();

    let version = runtime
        .create_container(&app_config(&env, &uid, &sandbox, "version", &["-v"]))
        .await
        .unwrap();
    runtime.start(&version).await.unwrap();
    let state = wait_exited(runtime, &version).await;
    assert_eq!(
        (state.exit_code, state.cri_state()),
        (0, CriState::Exited { reason: "Completed" })
    );
    assert_eq!(
        read_logs(runtime, &version, LogOptions::default()).await,
        "pause 3.10-kubeling\n"
    );
    let stamped = read_logs(
        runtime,
        &version,
        LogOptions {
            timestamps: true,
            ..LogOptions::default()
        },
    )
    .await;
    let (stamp, line) = stamped.split_once(' ').unwrap();
    assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{stamped:?}");
    assert_eq!(line, "pause 3.10-kubeling\n");
    let limited = read_logs(
        runtime,
        &version,
        LogOptions {
            limit_bytes: Some(5),
            ..LogOptions::default()
        },
    )
    .await;
    assert_eq!(limited, "pause");

    // stderr reaches the logs too, and a non-zero exit is an Error.
    let bad = runtime
        .create_container(&app_config(&env, &uid, &sandbox, "bad", &["--bogus"]))
        .await
        .unwrap();
    runtime.start(&bad).await.unwrap();
    let state = wait_exited(runtime, &bad).await;
    assert_eq!(
        (state.exit_code, state.cri_state()),
        (2, CriState::Exited { reason: "Error" })
    );
    let logs = read_logs(
        runtime,
        &bad,
        LogOptions {
            tail: Some(1),
            ..LogOptions::default()
        },
    )
    .await;
    assert!(logs.contains("unknown argument"), "{logs:?}");

    // A container whose entrypoint does not exist cannot run; Docker refuses the start.
    let mut broken = app_config(&env, &uid, &sandbox, "broken", &[]);
    broken.command = vec!["/no-such-binary".to_owned()];
    let broken = runtime.create_container(&broken).await.unwrap();
    let err = runtime.start(&broken).await.unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Runtime {
                op: "start container",
                ..
            }
        ),
        "{err}"
    );
    let state = runtime.inspect(&broken).await.unwrap();
    assert_eq!(
        state.cri_state(),
        CriState::Exited {
            reason: "ContainerCannotRun"
        },
        "{state:?}"
    );

    let missing = runtime.logs("no-such-container", &LogOptions::default()).await;
    assert!(missing.is_err_and(|err| err.is_not_found()));
}

#[tokio::test]
async fn exec_runs_in_the_container_and_reports_its_exit_code() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    let sandbox = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    runtime.start(&sandbox).await.unwrap();

    let out = runtime
        .exec_sync(
            &sandbox,
            &["/pause".into(), "-v".into()],
            Some(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "pause 3.10-kubeling\n");
    assert_eq!(out.exit_code, 0);

    let out = runtime
        .exec_sync(&sandbox, &["/pause".into(), "-x".into()], None)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 2);
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("unknown argument")
    );

    // A streaming session with a tty: output arrives as stdout, resize works while it runs or after.
    let config = ExecConfig {
        cmd: vec!["/pause".into(), "--version".into()],
        tty: true,
        stdin: false,
    };
    let mut session = runtime.exec(&sandbox, &config).await.unwrap();
    assert!(session.stdin.is_none());
    let mut text = Vec::new();
    while let Some(frame) = session.output.next().await {
        let frame = frame.unwrap();
        assert_eq!(frame.stream, StdStream::Stdout);
        text.extend_from_slice(&frame.data);
    }
    assert!(String::from_utf8(text).unwrap().contains("pause 3.10-kubeling"));
    assert_eq!(session.control.exit_code().await.unwrap(), 0);

    // Exec of a missing binary fails inside Docker, not in our call.
    let missing = runtime
        .exec_sync(&sandbox, &["/bin/sh".into()], Some(Duration::from_secs(10)))
        .await;
    match missing {
        Ok(out) => assert_ne!(out.exit_code, 0),
        Err(err) => assert!(matches!(err, RuntimeError::Runtime { .. }), "{err}"),
    }
    assert!(
        runtime
            .exec_sync("no-such-container", &["/pause".into()], None)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn ensure_image_follows_the_pull_policy_without_a_registry() {
    let env = env().await;
    let runtime = &env.runtime;
    let missing = format!("kubeling-test/missing:{}", unique());
    let err = runtime
        .ensure_image(&missing, PullPolicy::Never)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::ImageNeverPull { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("container image \"{missing}\" is not present with pull policy of Never")
    );

    // Nothing listens on port 1: the pull fails fast with ErrImagePull and Docker's message.
    let err = runtime
        .ensure_image("localhost:1/kubeling-test/none:1", PullPolicy::IfNotPresent)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::ImagePull { .. }), "{err}");

    let err = runtime
        .ensure_image("Not A Name", PullPolicy::IfNotPresent)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::InvalidImageName { .. }), "{err}");

    let found = runtime
        .ensure_image(&env.pause_name, PullPolicy::Never)
        .await
        .unwrap();
    assert_eq!(found.id, env.pause.id);
}

#[tokio::test]
async fn a_name_conflict_replaces_the_leftover_container() {
    let env = env().await;
    let runtime = &env.runtime;
    let uid = format!("uid-{}", unique());
    let first = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    let second = runtime.create_sandbox(&sandbox_config(&env, &uid)).await.unwrap();
    assert_ne!(first, second);
    let listed: Vec<_> = runtime
        .list(&ListFilter::sandboxes())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(listed, vec![second]);
}
