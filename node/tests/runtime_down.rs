//! The pod worker with the fake runtime against the in-process API server while the runtime is down (Docker
//! stopped or restarting): nothing is decided or reported from a runtime that cannot be listed (upstream's
//! kubelet skips pod syncs while its runtime is down), and once it is back, a pod whose containers Docker
//! stopped meanwhile gets a new sandbox and its container one restart.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, PostParams};
use node::kubelet::{Kubelet, KubeletConfig};
use node::runtime::fake::Call;
use node::runtime::{ContainerKind, CriState, DEFAULT_PAUSE_IMAGE, FakeRuntime};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
/// How long the runtime stays down: several relists (one a second).
const OUTAGE: Duration = Duration::from_secs(4);

fn client(server: &apiserver::ApiServer) -> kube::Client {
    let pem = &server.tls.ca_pem;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
    let mut cfg = kube::Config::new(
        format!("https://127.0.0.1:{}", server.addr.port())
            .parse()
            .unwrap(),
    );
    cfg.root_cert = Some(vec![der]);
    cfg.auth_info.token = Some(server.tls.token.clone().into());
    cfg.default_namespace = "default".into();
    kube::Client::try_from(cfg).unwrap()
}

async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status of the pod's one container, once it runs.
async fn running_status(pods: &Api<Pod>, restarts: i32) -> ContainerStatus {
    until(
        &format!("the container running with {restarts} restarts"),
        async || {
            let pod = pods.get("web").await.ok()?;
            let st = pod.status?.container_statuses?.into_iter().next()?;
            (st.restart_count == restarts && st.state.as_ref()?.running.is_some()).then_some(st)
        },
    )
    .await
}

/// The fake's running containers of kind `kind`.
fn running(runtime: &FakeRuntime, kind: ContainerKind) -> Vec<String> {
    runtime
        .containers()
        .into_iter()
        .filter(|c| c.info.kind() == Some(kind) && c.state.cri_state() == CriState::Running)
        .map(|c| c.info.id)
        .collect()
}

#[tokio::test]
async fn nothing_is_reported_while_the_runtime_is_down_and_stopped_containers_restart_once_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = apiserver::ApiServer::start(apiserver::Config {
        data_dir: dir.path().join("server"),
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: 0,
        hub: Default::default(),
        service_account_admission: false,
        event_ttl: apiserver::registry::event_ttl::DEFAULT_EVENT_TTL,
        store: Default::default(),
    })
    .await
    .unwrap();
    let admin = client(&server);
    let runtime = FakeRuntime::new();
    runtime.add_image("busybox:1.36");
    let kubelet = Kubelet::new(
        admin.clone(),
        Arc::new(runtime.clone()),
        KubeletConfig {
            node_name: "node1".into(),
            node_ip: "10.0.0.1".into(),
            pause_image: DEFAULT_PAUSE_IMAGE.into(),
            data_dir: dir.path().join("node"),
            container_gc_period: Duration::from_secs(60),
            dns: Default::default(),
        },
    );
    let cancel = CancellationToken::new();
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let run = tokio::spawn(kubelet.run(rx, &[], cancel.clone()));

    let pods: Api<Pod> = Api::default_namespaced(admin.clone());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"nodeName": "node1",
        "containers": [{"name": "c", "image": "busybox:1.36"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let before = running_status(&pods, 0).await;
    let (app, sandbox) = (
        running(&runtime, ContainerKind::Container),
        running(&runtime, ContainerKind::Sandbox),
    );
    assert_eq!((app.len(), sandbox.len()), (1, 1), "{app:?} {sandbox:?}");

    // Docker stops: every call fails, and it stops the containers on its way down.
    runtime.set_down(Some(
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock",
    ));
    runtime.exit_container(&app[0], 143, false).unwrap();
    runtime.exit_container(&sandbox[0], 0, false).unwrap();
    runtime.take_calls();
    let deadline = tokio::time::Instant::now() + OUTAGE;
    while tokio::time::Instant::now() < deadline {
        let now = pods.get("web").await.unwrap();
        let st = now.status.and_then(|s| s.container_statuses).unwrap_or_default();
        assert_eq!(
            st.first(),
            Some(&before),
            "the status changed while the runtime could not be seen"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let calls = runtime.take_calls();
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::CreateSandbox(_) | Call::CreateContainer(_))),
        "the worker acted on an unseen runtime: {calls:?}"
    );

    // Docker is back with the pod's containers stopped: a new sandbox, the container restarted once.
    runtime.set_down(None);
    let after = running_status(&pods, 1).await;
    assert_ne!(after.container_id, before.container_id);
    let last = after.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    assert_eq!(last.map(|t| t.exit_code), Some(143), "{after:?}");
    let (app_now, sandbox_now) = (
        running(&runtime, ContainerKind::Container),
        running(&runtime, ContainerKind::Sandbox),
    );
    assert_eq!(
        (app_now.len(), sandbox_now.len()),
        (1, 1),
        "{app_now:?} {sandbox_now:?}"
    );
    assert_ne!(sandbox_now, sandbox);
    assert_eq!(
        after.container_id.as_deref(),
        Some(format!("docker://{}", app_now[0]).as_str())
    );

    cancel.cancel();
    let _ = run.await;
    server.shutdown().await;
}
