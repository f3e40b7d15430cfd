//! The harness on simulated nodes: no Docker, several nodes, a Deployment's pods scheduled over all of them
//! and Ready through the real controllers, scheduler and kubelets.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kubeling_testing::{Options, TestCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_spreads_over_simulated_nodes_and_gets_ready() {
    let cluster = TestCluster::start_with(Options::simulated(3)).await.unwrap();
    cluster.wait_for_nodes(Duration::from_secs(30)).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), "default");
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 30,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "example.com/web:1"}]}
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &d).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let d = deployments.get("web").await.unwrap();
        let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        if ready == 30 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{ready} of 30 Ready after 90 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    let nodes: BTreeSet<String> = list
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let expected: BTreeSet<String> = cluster.node_names().iter().cloned().collect();
    assert_eq!(nodes, expected, "pods on every simulated node");
    cluster.stop().await;
}
