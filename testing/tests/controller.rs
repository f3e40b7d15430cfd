//! The harness's controller example: a small controller (it copies ConfigMaps labelled `copy-to=<ns>` into that
//! namespace) tested against a control-plane-only cluster started in this process, as one would with envtest.

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;
use kubeling_testing::{Options, TestCluster};

/// The controller under test: for every ConfigMap with a `copy-to` label, a copy in that namespace.
async fn copier(client: kube::Client) {
    let all: Api<ConfigMap> = Api::all(client.clone());
    let config = watcher::Config::default().labels("copy-to");
    let mut events = watcher(all, config).boxed();
    while let Some(Ok(event)) = events.next().await {
        let cms = match event {
            watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) => vec![cm],
            _ => continue,
        };
        for cm in cms {
            let target = cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("copy-to"))
                .cloned();
            let (Some(target), Some(name)) = (target, cm.metadata.name.clone()) else {
                continue;
            };
            let copy = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..Default::default()
                },
                data: cm.data.clone(),
                ..Default::default()
            };
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &target);
            let _ = api.create(&PostParams::default(), &copy).await;
        }
    }
}

#[tokio::test]
async fn the_copier_copies_a_labelled_config_map() {
    let cluster = TestCluster::start_with(Options::control_plane_only())
        .await
        .unwrap();
    println!("control plane started in {:?}", cluster.started_in());
    let client = cluster.client();
    let controller = tokio::spawn(copier(client.clone()));

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("target".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let source: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            labels: Some([("copy-to".to_string(), "target".to_string())].into()),
            ..Default::default()
        },
        data: Some([("greeting".to_string(), "hello".to_string())].into()),
        ..Default::default()
    };
    source.create(&PostParams::default(), &cm).await.unwrap();

    // Poll with a deadline for what the controller should make.
    let target: Api<ConfigMap> = Api::namespaced(client, "target");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let copy = loop {
        if let Some(c) = target.get_opt("settings").await.unwrap() {
            break c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no copy in namespace target after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(copy.data.unwrap()["greeting"], "hello");
    controller.abort();
    cluster.stop().await;
}
