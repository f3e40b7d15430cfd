//! `pods/ephemeralcontainers` through the Rust `kube` crate's own helpers (`get_`, `patch_`,
//! `replace_ephemeral_containers`), as a debugging tool built on kube-rs would use them.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use common::TestServer;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}))
    .unwrap()
}

fn debug_patch(name: &str) -> Patch<serde_json::Value> {
    Patch::Strategic(json!({"spec": {"ephemeralContainers": [
        {"name": name, "image": "kubeling/testbox:0.1", "targetContainerName": "app"}]}}))
}

fn ephemeral(p: &Pod) -> Vec<EphemeralContainer> {
    p.spec
        .as_ref()
        .unwrap()
        .ephemeral_containers
        .clone()
        .unwrap_or_default()
}

fn api_error(r: kube::Result<Pod>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn discovery_lists_the_subresource_with_upstreams_verbs() {
    let srv = TestServer::start().await;
    let list = srv.client().list_core_api_resources("v1").await.unwrap();
    let sub = list
        .resources
        .iter()
        .find(|r| r.name == "pods/ephemeralcontainers")
        .expect("pods/ephemeralcontainers is served");
    assert_eq!((sub.kind.as_str(), sub.namespaced), ("Pod", true));
    assert_eq!(sub.verbs, ["get", "patch", "update"]);
}

#[tokio::test]
async fn an_added_ephemeral_container_is_served_and_watched_and_cannot_be_changed() {
    let srv = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let created = pods.create(&PostParams::default(), &pod("p")).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut events = pods
        .watch(&WatchParams::default().fields("metadata.name=p"), &rv)
        .await
        .unwrap()
        .boxed();

    let patched = pods
        .patch_ephemeral_containers("p", &PatchParams::default(), &debug_patch("dbg"))
        .await
        .unwrap();
    let ec = &ephemeral(&patched)[0];
    assert_eq!(
        (
            ec.name.as_str(),
            ec.target_container_name.as_deref(),
            ec.image_pull_policy.as_deref()
        ),
        ("dbg", Some("app"), Some("IfNotPresent"))
    );
    // The node agent learns of the new container through its watch.
    match tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .unwrap()
    {
        Some(Ok(WatchEvent::Modified(p))) => assert_eq!(ephemeral(&p), ephemeral(&patched)),
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    let mut read = pods.get_ephemeral_containers("p").await.unwrap();
    assert_eq!(read, patched);
    let spec = read.spec.as_mut().unwrap();
    spec.ephemeral_containers.as_mut().unwrap()[0].image = Some("busybox:1.37".into());
    let s = api_error(
        pods.replace_ephemeral_containers("p", &PostParams::default(), &read)
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .contains("existing ephemeral containers \"dbg\" may not be changed"),
        "{}",
        s.message
    );

    // Appending through a PUT of the pod as read works.
    let mut read = pods.get_ephemeral_containers("p").await.unwrap();
    let more: EphemeralContainer =
        serde_json::from_value(json!({"name": "more", "image": "busybox:1.36"})).unwrap();
    read.spec
        .as_mut()
        .unwrap()
        .ephemeral_containers
        .as_mut()
        .unwrap()
        .push(more);
    let replaced = pods
        .replace_ephemeral_containers("p", &PostParams::default(), &read)
        .await
        .unwrap();
    let names: Vec<String> = ephemeral(&replaced).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["dbg", "more"]);
}

#[tokio::test]
async fn a_missing_pod_is_not_found_with_its_name_and_apply_works_through_the_subresource() {
    let srv = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let s = api_error(
        pods.patch_ephemeral_containers("nope", &PatchParams::default(), &debug_patch("dbg"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    // An empty name would tell kubectl debug that the cluster has no ephemeral containers.
    assert_eq!(s.details.unwrap().name, "nope");

    pods.create(&PostParams::default(), &pod("p")).await.unwrap();
    let applied = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"ephemeralContainers": [{"name": "dbg", "image": "kubeling/testbox:0.1"}]}});
    let p = pods
        .patch_ephemeral_containers("p", &PatchParams::apply("debugger"), &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(ephemeral(&p)[0].name, "dbg");
    let entry = p
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("debugger"))
        .unwrap();
    assert_eq!(
        (entry.operation.as_deref(), entry.subresource.as_deref()),
        (Some("Apply"), Some("ephemeralcontainers"))
    );
}
