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
