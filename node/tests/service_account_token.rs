//! The pod worker with the fake runtime against the in-process API server (ServiceAccount admission
//! on): a pod's `kube-api-access-*` volume gets a pod-bound token, the root CA and the namespace, the
//! container mounts it at the API token path, and a token that cannot be had is a FailedMount event.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use node::kubelet::{Kubelet, KubeletConfig};
use node::runtime::{DEFAULT_PAUSE_IMAGE, FakeRuntime};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn client(server: &apiserver::ApiServer, token: &str) -> kube::Client {
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
    cfg.auth_info.token = Some(token.to_string().into());
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

#[tokio::test]
async fn the_token_volume_carries_a_pod_bound_token_the_ca_and_the_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let server = apiserver::ApiServer::start(apiserver::Config {
        data_dir: dir.path().join("server"),
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: 0,
        hub: Default::default(),
        service_account_admission: true,
        event_ttl: apiserver::registry::event_ttl::DEFAULT_EVENT_TTL,
        store: Default::default(),
    })
    .await
    .unwrap();
    let admin = client(&server, &server.tls.token);
    let pp = PostParams::default();
    // What the controller manager would publish: the default account and the root CA.
    let sas: Api<ServiceAccount> = Api::default_namespaced(admin.clone());
    sas.create(
        &pp,
        &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
    )
    .await
    .unwrap();
    sas.create(
        &pp,
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(admin.clone());
    cms.create(
        &pp,
        &serde_json::from_value(json!({"metadata": {"name": "kube-root-ca.crt"},
            "data": {"ca.crt": server.tls.ca_pem}}))
        .unwrap(),
    )
    .await
    .unwrap();

    let runtime = FakeRuntime::new();
    runtime.add_image("busybox:1.36");
    let data_dir = dir.path().join("node");
    let kubelet = Kubelet::new(
        admin.clone(),
        Arc::new(runtime.clone()),
        KubeletConfig {
            node_name: "node1".into(),
            node_ip: "10.0.0.1".into(),
            pause_image: DEFAULT_PAUSE_IMAGE.into(),
            data_dir: data_dir.clone(),
            container_gc_period: Duration::from_secs(60),
            dns: Default::default(),
        },
    );
    let cancel = CancellationToken::new();
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let run = tokio::spawn(kubelet.run(rx, &[], cancel.clone()));

    let pods: Api<Pod> = Api::default_namespaced(admin.clone());
    let pod = |name: &str, sa: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": "node1",
            "serviceAccountName": sa, "containers": [{"name": "c", "image": "busybox:1.36"}]}}))
        .unwrap()
    };
    let created = pods.create(&pp, &pod("web", "default")).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let volume = created.spec.unwrap().volumes.unwrap()[0].name.clone();

    let container = until("the container", async || {
        runtime.containers().into_iter().find_map(|c| c.container)
    })
    .await;
    let mount = container
        .mounts
        .iter()
        .find(|m| m.container_path == TOKEN_PATH)
        .expect("the token volume is mounted");
    assert!(mount.read_only);
    let vol_dir = data_dir.join(format!("pods/{uid}/volumes/kubernetes.io~projected/{volume}"));
    assert_eq!(std::path::Path::new(&mount.host_path), vol_dir);
    assert_eq!(
        std::fs::read_to_string(vol_dir.join("ca.crt")).unwrap(),
        server.tls.ca_pem
    );
    assert_eq!(
        std::fs::read_to_string(vol_dir.join("namespace")).unwrap(),
        "default"
    );
    let token = std::fs::read_to_string(vol_dir.join("token")).unwrap();

    // The token authenticates as the pod's service account, bound to the pod.
    let reviews: Api<SelfSubjectReview> = Api::all(client(&server, &token));
    let me = reviews.create(&pp, &SelfSubjectReview::default()).await.unwrap();
    let user = serde_json::to_value(me.status.unwrap().user_info.unwrap()).unwrap();
    assert_eq!(user["username"], "system:serviceaccount:default:default");
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-uid"],
        json!([uid])
    );

    // A pod whose service account is gone by the time the node asks: FailedMount, no container.
    pods.create(&pp, &pod("orphan", "doomed")).await.unwrap();
    sas.delete("doomed", &DeleteParams::default()).await.unwrap();
    let events: Api<Event> = Api::default_namespaced(admin.clone());
    let message = until("a FailedMount event", async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            (e.reason.as_deref() == Some("FailedMount")
                && e.involved_object.name.as_deref() == Some("orphan"))
            .then(|| e.message.unwrap_or_default())
        })
    })
    .await;
    assert!(message.contains("failed to fetch token"), "{message}");
    assert!(
        message.starts_with("MountVolume.SetUp failed for volume"),
        "{message}"
    );
    let orphan = pods.get("orphan").await.unwrap();
    let waiting = orphan
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.waiting)
        .and_then(|w| w.reason);
    assert!(
        matches!(waiting.as_deref(), None | Some("ContainerCreating")),
        "{waiting:?}"
    );

    cancel.cancel();
    let _ = run.await;
    server.shutdown().await;
}
