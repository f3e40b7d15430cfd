//! Wire fidelity against the in-process server with the `kube` client: bodies byte for byte as
//! kube-apiserver writes them, metadata-only answers.

mod common;

use common::TestServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

fn get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

async fn create_cm(client: &kube::Client, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "x"}},
        "data": {"k": "v"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn objects_lists_and_statuses_have_upstream_key_order_and_a_trailing_newline() {
    let srv = TestServer::start().await;
    let client = srv.client();
    create_cm(&client, "ordered").await;

    let body = client
        .request_text(get("/api/v1/namespaces/default/configmaps/ordered"))
        .await
        .unwrap();
    assert!(
        body.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","namespace":"default","uid":"#),
        "{body}"
    );
    assert!(body.ends_with("}\n") && !body.ends_with("\n\n"), "{body:?}");

    let list = client
        .request_text(get("/api/v1/namespaces/default/configmaps"))
        .await
        .unwrap();
    assert!(
        list.starts_with(r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#),
        "{list}"
    );
    assert!(list.contains(r#""items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered""#));
    assert!(list.ends_with("]}\n"), "{list:?}");

    let (status, text) = raw_error(&client, "/api/v1/namespaces/default/configmaps/nope").await;
    assert_eq!(status, 404);
    assert_eq!(
        text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"configmaps \\\"nope\\\" not found\",\"reason\":\"NotFound\",\
         \"details\":{\"name\":\"nope\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );
}

/// An error answer's status and body as sent (the kube client turns errors into typed values).
async fn raw_error(client: &kube::Client, path: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let resp = client
        .send(get(path).map(kube::client::Body::from))
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn metadata_only_get_list_and_watch_answer_partial_object_metadata() {
    use futures_util::StreamExt;
    use kube::api::{ListParams, Patch, PatchParams};
    use kube::core::PartialObjectMeta;
    use kube::runtime::{WatchStreamExt, watcher};

    let srv = TestServer::start().await;
    let client = srv.client();
    create_cm(&client, "meta").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let one = api.get_metadata("meta").await.unwrap();
    assert_eq!(one.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(one.types.as_ref().unwrap().api_version, "meta.k8s.io/v1");
    assert_eq!(one.metadata.labels.unwrap()["app"], "x");

    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("meta"));

    // The raw answers carry metadata only, not the data.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps/meta")
        .header(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.unwrap();
    assert!(
        text.starts_with(
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"meta""#
        ),
        "{text}"
    );
    assert!(!text.contains("\"data\""), "{text}");

    // A metadata watcher sees the label change.
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(meta_api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("meta"));
    let patch = serde_json::json!({"metadata": {"labels": {"app": "y"}}});
    api.patch("meta", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let changed = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(changed.metadata.labels.unwrap()["app"], "y");
    let watch_req = http::Request::get("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
        .header(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(Vec::new())
        .unwrap();
    let stream = client.request_text(watch_req).await.unwrap();
    let line = stream.lines().next().unwrap();
    assert!(
        line.starts_with(
            r#"{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1""#
        ),
        "{line}"
    );
    assert!(!line.contains("\"data\""), "{line}");
}

#[tokio::test]
async fn a_metadata_kind_that_does_not_fit_the_request_is_406() {
    let srv = TestServer::start().await;
    let client = srv.client();
    create_cm(&client, "x").await;
    for (path, accept) in [
        (
            "/api/v1/namespaces/default/configmaps/x",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            "application/json;as=Unknown;g=meta.k8s.io;v=v1",
        ),
    ] {
        let req = http::Request::get(path)
            .header("Accept", accept)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        let resp = client.send(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 406, "{path} {accept}");
    }
}

/// `k8s\0` + runtime.Unknown{typeMeta{v1, DeleteOptions}, raw}, as client-go's typed clients write it.
fn protobuf_delete_options(raw: &[u8]) -> Vec<u8> {
    fn field(tag: u8, b: &[u8]) -> Vec<u8> {
        assert!(b.len() < 128);
        [&[tag << 3 | 2, b.len() as u8][..], b].concat()
    }
    let type_meta = [field(1, b"v1"), field(2, b"DeleteOptions")].concat();
    let unknown = [field(1, &type_meta), field(2, raw)].concat();
    [&b"k8s\0"[..], &unknown].concat()
}

#[tokio::test]
async fn a_protobuf_delete_options_body_is_honoured() {
    let srv = TestServer::start().await;
    let client = srv.client();
    create_cm(&client, "pb").await;
    let delete = |raw: Vec<u8>| {
        http::Request::delete("/api/v1/namespaces/default/configmaps/pb")
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .body(kube::client::Body::from(protobuf_delete_options(&raw)))
            .unwrap()
    };
    // preconditions {uid: "wrong"}: a 409 shows the body was read.
    let pre = [&[2 << 3 | 2, 7, 1 << 3 | 2, 5][..], b"wrong"].concat();
    let resp = client.send(delete(pre)).await.unwrap();
    assert_eq!(resp.status().as_u16(), 409);
    // gracePeriodSeconds: 0
    let resp = client.send(delete(vec![1 << 3, 0])).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(api.get_opt("pb").await.unwrap().is_none());
}

#[tokio::test]
async fn events_expire_ttl_after_their_last_write() {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{Patch, PatchParams};
    use std::time::{Duration, Instant};

    let ttl = Duration::from_secs(2);
    let srv = TestServer::start_with_event_ttl(ttl).await;
    let api: Api<Event> = Api::namespaced(srv.client(), "default");
    let event = |name: &str| -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Test", "message": "m", "type": "Normal",
        }))
        .unwrap()
    };
    let t0 = Instant::now();
    api.create(&PostParams::default(), &event("short")).await.unwrap();
    api.create(&PostParams::default(), &event("kept")).await.unwrap();

    // "kept" is written every 500 ms for longer than the TTL: it stays while "short" goes.
    let mut count = 1;
    while t0.elapsed() < ttl + Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        count += 1;
        let patch = serde_json::json!({"count": count});
        api.patch("kept", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("a rewritten event must not expire");
    }
    assert!(
        api.get_opt("short").await.unwrap().is_none(),
        "short outlived its TTL"
    );

    let t1 = Instant::now();
    loop {
        if api.get_opt("kept").await.unwrap().is_none() {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(15), "kept never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        t1.elapsed() >= ttl - Duration::from_millis(600),
        "kept expired early: {:?}",
        t1.elapsed()
    );
}

#[tokio::test]
async fn server_side_apply_to_the_status_and_scale_subresources() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams};

    let srv = TestServer::start().await;
    let api: Api<Deployment> = Api::namespaced(srv.client(), "default");
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    });
    api.patch("web", &PatchParams::apply("kubectl"), &Patch::Apply(&deployment))
        .await
        .unwrap();

    let status = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 9},
        "status": {"observedGeneration": 1, "conditions": [{"type": "Available", "status": "False"}]}});
    let d = api
        .patch_status("web", &PatchParams::apply("ctrl"), &Patch::Apply(&status))
        .await
        .unwrap();
    assert_eq!(
        d.spec.as_ref().unwrap().replicas,
        Some(1),
        "the status endpoint leaves spec alone"
    );
    assert_eq!(d.status.as_ref().unwrap().observed_generation, Some(1));

    // The scale's replicas are the parent's spec.replicas: kubectl owns them, so only a forced apply wins.
    let scale = serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
        "spec": {"replicas": 4}});
    let err = api
        .patch_scale("web", &PatchParams::apply("hpa"), &Patch::Apply(&scale))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err}");
    let s = api
        .patch_scale("web", &PatchParams::apply("hpa").force(), &Patch::Apply(&scale))
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(4));

    let d = api.get("web").await.unwrap();
    let entries = d.metadata.managed_fields.unwrap();
    let entry = |m: &str| entries.iter().find(|e| e.manager.as_deref() == Some(m)).unwrap();
    assert_eq!(entry("ctrl").subresource.as_deref(), Some("status"));
    assert_eq!(entry("hpa").subresource.as_deref(), Some("scale"));
    assert_eq!(
        entry("hpa").fields_v1.as_ref().unwrap().0,
        serde_json::json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(
        entry("kubectl").fields_v1.as_ref().unwrap().0["f:spec"]
            .get("f:replicas")
            .is_none()
    );
}
