//! The harness's example: two clusters started in parallel in one test, a pod running on each (real Docker
//! containers), both torn down with their containers.

#[path = "../../fixtures/testbox/image.rs"]
mod testbox_image;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchParams};
use kube::core::WatchEvent;
use kubeling_testing::TestCluster;

fn pod(name: &str, image: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "args": ["sleep"]}],
            "terminationGracePeriodSeconds": 1
        }
    }))
    .unwrap()
}

/// Waits, on a watch, for the pod to be Running; returns the pod.
async fn running(pods: &Api<Pod>, name: &str) -> Pod {
    let current = pods.get(name).await.unwrap();
    if current.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
        return current;
    }
    let rv = current.metadata.resource_version.clone().unwrap();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(60);
    let mut events = pods.watch(&params, &rv).await.unwrap().boxed();
    while let Some(event) = events.try_next().await.unwrap() {
        if let WatchEvent::Modified(p) = event
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            return p;
        }
    }
    panic!("pod {name} not Running within the watch's 60 s");
}

fn cluster_id(cluster_dir: &std::path::Path) -> String {
    let id = std::fs::read_to_string(cluster_dir.join("data/node/cluster-id")).unwrap();
    id.trim().to_string()
}

async fn docker(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new("docker")
        .args(args)
        .output()
        .await
        .unwrap()
}

/// The cluster's containers (pods' and the gateway).
async fn containers_of(cluster_id: &str) -> Vec<String> {
    let out = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=io.kubeling.cluster={cluster_id}"),
    ])
    .await;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_each_run_a_pod_and_are_removed() {
    let image = tokio::task::spawn_blocking(testbox_image::ensure_testbox_image)
        .await
        .unwrap();
    let (a, b) = tokio::join!(TestCluster::start(), TestCluster::start());
    let (a, b) = (a.unwrap(), b.unwrap());
    println!("started in {:?} and {:?}", a.started_in(), b.started_in());
    assert_ne!(a.url(), b.url());

    let pods_a: Api<Pod> = Api::namespaced(a.client(), "default");
    let pods_b: Api<Pod> = Api::namespaced(b.client(), "default");
    pods_a
        .create(&PostParams::default(), &pod("on-a", &image))
        .await
        .unwrap();
    pods_b
        .create(&PostParams::default(), &pod("on-b", &image))
        .await
        .unwrap();
    let (pa, pb) = tokio::join!(running(&pods_a, "on-a"), running(&pods_b, "on-b"));
    // Each cluster sees only its own pod, and each pod has an IP of its own cluster's network.
    assert!(pods_a.get_opt("on-b").await.unwrap().is_none());
    assert!(pods_b.get_opt("on-a").await.unwrap().is_none());
    let ip = |p: &Pod| p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    assert_ne!(ip(&pa), ip(&pb));

    let ids = [cluster_id(a.data_dir()), cluster_id(b.data_dir())];
    for id in &ids {
        assert!(
            !containers_of(id).await.is_empty(),
            "cluster {id} has its containers"
        );
    }

    // stop() waits for the clean-up; drop does it too.
    a.stop().await;
    drop(b);
    for id in &ids {
        assert_eq!(
            containers_of(id).await,
            Vec::<String>::new(),
            "cluster {id}'s containers are removed"
        );
        let net = docker(&["network", "inspect", &format!("kubeling-{id}")]).await;
        assert!(!net.status.success(), "cluster {id}'s network is removed");
    }
}
