//! What the controller manager relies on from the API server, through the real `kube` client: workload
//! defaults and generation, the Deployment status endpoint, GC deletion policies and their finalizers,
//! the strategic-merge directives the garbage collector and job controller send, and warning headers.

mod common;

use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::{Value, json};

use common::TestServer;

/// One raw request; returns the status code, the `Warning` headers and the JSON body.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Vec<String>, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(
            body.map(|b| b.to_string().into_bytes())
                .unwrap_or_default()
                .into(),
        )
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, warnings, value)
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}))
    .unwrap()
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}))
    .unwrap()
}

#[tokio::test]
async fn deployments_are_defaulted_and_bump_generation_on_spec_and_annotation_changes() {
    let srv = TestServer::start().await;
    let api: Api<Deployment> = Api::namespaced(srv.client(), "default");
    let d = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(v["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );

    let annotated = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"note": "x"}}})),
        )
        .await
        .unwrap();
    assert_eq!(annotated.metadata.generation, Some(2));

    // The deployment controller writes its revision annotation through /status; it stays, and a status
    // write never bumps the generation.
    let status = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}},
                                "status": {"observedGeneration": 2, "replicas": 0}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(2));
    let got = api.get("web").await.unwrap();
    assert_eq!(
        got.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(got.status.unwrap().observed_generation, Some(2));

    // kubectl rollout undo: a JSON patch replacing the template and the annotations.
    let mut template = serde_json::to_value(&got.spec.unwrap().template).unwrap();
    template["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let undo = json!([
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/metadata/annotations", "value": {"deployment.kubernetes.io/revision": "1"}},
    ]);
    let undone = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(undo).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(undone.metadata.generation, Some(3));
    assert_eq!(
        undone.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.26")
    );
}

#[tokio::test]
async fn invalid_deployments_are_422_with_upstream_messages() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let mut body = serde_json::to_value(deployment("bad")).unwrap();
    body["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    let (code, _, status) = raw(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        "application/json",
        Some(body),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "Deployment.apps \"bad\" is invalid: spec.template.metadata.labels: Invalid value: \
         map[string]string{\"app\":\"bad\"}: `selector` does not match template `labels`"
    );

    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("good"))
        .await
        .unwrap();
    let err = api
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"selector": {"matchLabels": {"app": "good", "v": "2"}},
                "template": {"metadata": {"labels": {"v": "2"}}}}}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else { panic!("{err}") };
    assert_eq!(e.code, 422);
    assert!(e.message.ends_with("field is immutable"), "{}", e.message);
}

#[tokio::test]
async fn jobs_get_a_generated_selector_and_orphan_by_default_with_a_warning() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let j = api.create(&PostParams::default(), &job("pi")).await.unwrap();
    let uid = j.metadata.uid.clone().unwrap();
    let labels = j
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(labels["job-name"], "pi");
    assert_eq!(
        j.spec
            .as_ref()
            .unwrap()
            .selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );

    // No policy: Orphan, so the Job waits for the garbage collector with the orphan finalizer.
    let (code, warnings, body) = raw(
        &client,
        "DELETE",
        "/apis/batch/v1/namespaces/default/jobs/pi",
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        warnings,
        [
            "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background \
          to remove them or set propagationPolicy=Orphan to suppress this warning\""
        ]
    );
    let marked = api.get("pi").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));

    // A second DELETE with another policy switches the GC finalizer...
    let foreground = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    api.delete("pi", &foreground).await.unwrap();
    assert_eq!(
        api.get("pi").await.unwrap().metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    // ...and the collector's removal of the last finalizer completes the deletion.
    api.patch(
        "pi",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["foregroundDeletion"]}}),
        ),
    )
    .await
    .unwrap();
    assert!(api.get_opt("pi").await.unwrap().is_none());

    // kubectl sends Background: gone at once, no warning.
    api.create(&PostParams::default(), &job("now")).await.unwrap();
    let (code, warnings, _) = raw(
        &client,
        "DELETE",
        "/apis/batch/v1/namespaces/default/jobs/now",
        "application/json",
        Some(json!({"propagationPolicy": "Background"})),
    )
    .await;
    assert_eq!((code, warnings.len()), (200, 0));
    assert!(api.get_opt("now").await.unwrap().is_none());
}

#[tokio::test]
async fn orphan_deletion_waits_for_the_collector_and_dry_run_changes_nothing() {
    let srv = TestServer::start().await;
    let api: Api<Deployment> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    let dry = DeleteParams {
        dry_run: true,
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete("web", &dry).await.unwrap();
    assert!(
        api.get("web")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );

    api.delete("web", &DeleteParams::orphan()).await.unwrap();
    let marked = api.get("web").await.unwrap();
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));
    // Generation moves on with the deletion mark, as upstream's markAsDeleting does.
    assert_eq!(marked.metadata.generation, Some(2));
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("web").await.unwrap().is_none());
}

#[tokio::test]
async fn collector_patches_remove_owner_refs_by_uid_and_check_the_object_uid() {
    let srv = TestServer::start().await;
    let api: Api<Pod> = Api::namespaced(srv.client(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p",
        "finalizers": ["batch.kubernetes.io/job-tracking", "example.com/keep"],
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "uid-a", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "uid-b"}]},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    let uid = created.metadata.uid.unwrap();

    let patched = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "uid-a"}],
                                                  "uid": uid}}),
            ),
        )
        .await
        .unwrap();
    let refs = patched.metadata.owner_references.unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, "uid-b");

    let untracked = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"$deleteFromPrimitiveList/finalizers":
                ["batch.kubernetes.io/job-tracking"]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        untracked.metadata.finalizers,
        Some(vec!["example.com/keep".to_string()])
    );

    // A patch naming another uid (the object was deleted and recreated) must not apply.
    let err = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "uid-b"}],
                                                  "uid": "someone-else"}}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else { panic!("{err}") };
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"), "{}", e.message);
    let after = api.get("p").await.unwrap();
    assert_eq!(after.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(after.metadata.owner_references.unwrap().len(), 1);
}

#[tokio::test]
async fn endpoints_requests_carry_the_v1_33_deprecation_warning() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let want = vec![
        "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"".to_string(),
    ];
    let (code, warnings, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/endpoints",
        "application/json",
        None,
    )
    .await;
    assert_eq!((code, &warnings), (200, &want));
    let (code, warnings, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/endpoints/none",
        "application/json",
        None,
    )
    .await;
    assert_eq!((code, &warnings), (404, &want));
    let (_, warnings, _) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods",
        "application/json",
        None,
    )
    .await;
    assert!(warnings.is_empty());
}

#[tokio::test]
async fn new_kinds_are_served_with_their_defaults() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let (code, _, sc) = raw(
        &client,
        "POST",
        "/apis/storage.k8s.io/v1/storageclasses",
        "application/json",
        Some(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": "standard"}, "provisioner": "kubeling.dev/hostpath"})),
    )
    .await;
    assert_eq!(code, 201, "{sc}");
    assert_eq!(
        (sc["reclaimPolicy"].as_str(), sc["volumeBindingMode"].as_str()),
        (Some("Delete"), Some("Immediate"))
    );

    let (code, _, pv) = raw(
        &client,
        "POST",
        "/api/v1/persistentvolumes",
        "application/json",
        Some(
            json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv1"}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{pv}");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(pv["status"]["phase"], "Pending");

    let (code, _, cj) = raw(
        &client,
        "POST",
        "/apis/batch/v1/namespaces/default/cronjobs",
        "application/json",
        Some(
            json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/1 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{cj}");
    assert_eq!(
        (
            cj["metadata"]["generation"].as_i64(),
            cj["spec"]["concurrencyPolicy"].as_str()
        ),
        (Some(1), Some("Allow"))
    );

    let (code, _, bad) = raw(
        &client,
        "POST",
        "/apis/batch/v1/namespaces/default/cronjobs",
        "application/json",
        Some(
            json!({"metadata": {"name": "tz"}, "spec": {"schedule": "TZ=UTC * * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{bad}");

    let (code, _, slice) = raw(
        &client,
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        "application/json",
        Some(json!({"metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
                    "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]})),
    )
    .await;
    assert_eq!(code, 201, "{slice}");
    let (code, _, list) = raw(
        &client,
        "GET",
        "/apis/apps/v1/namespaces/default/controllerrevisions",
        "application/json",
        None,
    )
    .await;
    assert_eq!(
        (code, list["kind"].as_str()),
        (200, Some("ControllerRevisionList"))
    );
}
