//! Registry behaviour against the in-memory store.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::storage::MemoryStore;
use crate::watch::HubConfig;

async fn registry() -> Registry {
    let storage = Storage::open(Arc::new(MemoryStore::default()), HubConfig::default()).unwrap();
    let r = Registry::new(storage);
    r.bootstrap().await.unwrap();
    r
}

fn info(plural: &str) -> &'static ResourceInfo {
    resources::all()
        .into_iter()
        .find(|r| r.plural == plural && r.group.is_empty())
        .unwrap()
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn opts() -> WriteOptions {
    WriteOptions::default()
}

#[tokio::test]
async fn bootstrap_creates_the_system_namespaces_once() {
    let r = registry().await;
    let rev = r.storage().revision();
    r.bootstrap().await.unwrap();
    assert_eq!(r.storage().revision(), rev, "a second bootstrap writes nothing");
    for ns in SYSTEM_NAMESPACES {
        let n = r.get(info("namespaces"), None, ns).unwrap();
        assert_eq!(n.value()["status"]["phase"], "Active");
    }
}

#[tokio::test]
async fn created_pod_is_defaulted_and_starts_pending_with_a_qos_class() {
    let r = registry().await;
    let p = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let v = &p.value();
    assert_eq!(v["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    assert_eq!(v["spec"]["restartPolicy"], "Always");
    assert_eq!(v["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(v["metadata"]["namespace"], "default");
    assert!(v["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert_eq!(v["metadata"]["resourceVersion"], p.revision.to_string());
}

#[tokio::test]
async fn create_into_a_missing_namespace_is_not_found() {
    let r = registry().await;
    let e = r
        .create(info("configmaps"), Some("nope"), cm("a"), &opts())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );
}

#[tokio::test]
async fn duplicate_create_is_already_exists() {
    let r = registry().await;
    r.create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let e = r
        .create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
}

#[tokio::test]
async fn generate_name_appends_five_characters() {
    let r = registry().await;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}});
    let c = r
        .create(info("configmaps"), Some("default"), body, &opts())
        .await
        .unwrap();
    let c = c.value();
    let name = c["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn wrong_kind_for_the_url_is_bad_request() {
    let r = registry().await;
    let e = r
        .create(info("configmaps"), Some("default"), pod("p"), &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 400, "{e}");
}

#[tokio::test]
async fn missing_container_image_is_invalid_with_the_field_path() {
    let r = registry().await;
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c"}]}});
    let e = r
        .create(info("pods"), Some("default"), body, &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 422);
    let causes = e.details.unwrap()["causes"].clone();
    assert!(
        causes
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"] == "spec.containers[0].image"),
        "{causes}"
    );
}

#[tokio::test]
async fn stale_update_conflicts_and_a_no_op_update_keeps_the_revision() {
    let r = registry().await;
    let c = r
        .create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let mut body = c.value();
    let same = r
        .update(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            body.clone(),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(
        same.revision, c.revision,
        "no-op update must not bump the revision"
    );
    body["data"]["a"] = json!("2");
    let changed = r
        .update(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            body.clone(),
            &opts(),
        )
        .await
        .unwrap();
    assert!(changed.revision > c.revision);
    let e = r
        .update(info("configmaps"), Some("default"), "a", None, body, &opts())
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
}

#[tokio::test]
async fn main_resource_update_cannot_change_status_and_status_update_cannot_change_spec() {
    let r = registry().await;
    let p = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let mut body = p.value();
    body["status"]["phase"] = json!("Running");
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let u = r
        .update(info("pods"), Some("default"), "p", None, body.clone(), &opts())
        .await
        .unwrap();
    assert_eq!(u.value()["status"]["phase"], "Pending");
    body["spec"]["activeDeadlineSeconds"] = json!(5);
    let s = r
        .update(info("pods"), Some("default"), "p", Some("status"), body, &opts())
        .await
        .unwrap();
    assert_eq!(s.value()["status"]["phase"], "Running");
    assert!(s.value()["spec"].get("activeDeadlineSeconds").is_none());
}

#[tokio::test]
async fn merge_patch_adds_a_label_and_null_removes_it() {
    let r = registry().await;
    r.create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let add = br#"{"metadata":{"labels":{"x":"1"}}}"#;
    let p = r
        .patch(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            (PatchType::Merge, add),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(p.value()["metadata"]["labels"]["x"], "1");
    let del = br#"{"metadata":{"labels":{"x":null}}}"#;
    let p = r
        .patch(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            (PatchType::Merge, del),
            &opts(),
        )
        .await
        .unwrap();
    assert!(
        p.value()["metadata"].get("labels").is_none(),
        "empty labels are dropped"
    );
}

#[tokio::test]
async fn json_patch_test_of_null_passes_on_a_missing_path() {
    let r = registry().await;
    r.create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let patch = br#"[{"op":"test","path":"/metadata/finalizers","value":null},
                     {"op":"add","path":"/metadata/finalizers","value":["example.com/x"]}]"#;
    let p = r
        .patch(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            (PatchType::Json, patch),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(p.value()["metadata"]["finalizers"], json!(["example.com/x"]));
    let bad = br#"[{"op":"test","path":"/data/a","value":"nope"}]"#;
    let e = r
        .patch(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            (PatchType::Json, bad),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, 422);
}

#[tokio::test]
async fn patch_with_a_different_resource_version_conflicts() {
    let r = registry().await;
    r.create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let patch = br#"{"metadata":{"resourceVersion":"1"}}"#;
    let e = r
        .patch(
            info("configmaps"),
            Some("default"),
            "a",
            None,
            (PatchType::Merge, patch),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn delete_with_finalizers_marks_then_removing_the_last_finalizer_deletes() {
    let r = registry().await;
    let mut body = cm("a");
    body["metadata"]["finalizers"] = json!(["example.com/x"]);
    r.create(info("configmaps"), Some("default"), body, &opts())
        .await
        .unwrap();
    let w = r
        .delete(
            info("configmaps"),
            Some("default"),
            "a",
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert!(w.object.value()["metadata"]["deletionTimestamp"].is_string());
    assert!(r.get(info("configmaps"), Some("default"), "a").is_ok());
    let patch = br#"{"metadata":{"finalizers":null}}"#;
    r.patch(
        info("configmaps"),
        Some("default"),
        "a",
        None,
        (PatchType::Merge, patch),
        &opts(),
    )
    .await
    .unwrap();
    assert_eq!(
        r.get(info("configmaps"), Some("default"), "a").unwrap_err().code,
        404
    );
}

#[tokio::test]
async fn unscheduled_pod_is_deleted_at_once_and_a_bound_pod_gracefully() {
    let r = registry().await;
    r.create(info("pods"), Some("default"), pod("free"), &opts())
        .await
        .unwrap();
    let w = r
        .delete(info("pods"), Some("default"), "free", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(w.event, Some(crate::watch::EventType::Deleted));
    let mut bound = pod("bound");
    bound["spec"]["nodeName"] = json!("n1");
    r.create(info("pods"), Some("default"), bound, &opts())
        .await
        .unwrap();
    let w = r
        .delete(info("pods"), Some("default"), "bound", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(w.object.value()["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(r.get(info("pods"), Some("default"), "bound").is_ok());
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    r.delete(info("pods"), Some("default"), "bound", &force)
        .await
        .unwrap();
    assert_eq!(
        r.get(info("pods"), Some("default"), "bound").unwrap_err().code,
        404
    );
}

/// Regression: the deletionTimestamp was now + grace in jiff arithmetic, which panics on overflow, so a
/// DELETE with `gracePeriodSeconds=9223372036854775807` (or a pod with that terminationGracePeriodSeconds)
/// killed the request's connection instead of being answered.
#[tokio::test]
async fn deleting_a_bound_pod_with_a_grace_period_of_i64_max_saturates_the_deletion_timestamp() {
    let r = registry().await;
    let mut asked = pod("asked");
    asked["spec"]["nodeName"] = json!("n1");
    r.create(info("pods"), Some("default"), asked, &opts())
        .await
        .unwrap();
    let huge = DeleteOptions {
        grace_period_seconds: Some(i64::MAX),
        ..Default::default()
    };
    let w = r
        .delete(info("pods"), Some("default"), "asked", &huge)
        .await
        .unwrap();
    let m = &w.object.value()["metadata"];
    // jiff's last timestamp.
    assert_eq!(m["deletionTimestamp"], "9999-12-30T22:00:00Z");
    assert_eq!(m["deletionGracePeriodSeconds"], i64::MAX);
    // A shorter grace still shortens it.
    let w = r
        .delete(info("pods"), Some("default"), "asked", &DeleteOptions::default())
        .await
        .unwrap();
    let m = &w.object.value()["metadata"];
    assert_eq!(m["deletionGracePeriodSeconds"], 30);

    let mut spec = pod("spec");
    spec["spec"]["nodeName"] = json!("n1");
    spec["spec"]["terminationGracePeriodSeconds"] = json!(i64::MAX);
    r.create(info("pods"), Some("default"), spec, &opts())
        .await
        .unwrap();
    let w = r
        .delete(info("pods"), Some("default"), "spec", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        w.object.value()["metadata"]["deletionTimestamp"],
        "9999-12-30T22:00:00Z"
    );
}

#[tokio::test]
async fn foreground_deletion_of_a_bound_pod_is_graceful_and_keeps_the_gc_finalizer() {
    let r = registry().await;
    let mut bound = pod("fg");
    bound["spec"]["nodeName"] = json!("n1");
    r.create(info("pods"), Some("default"), bound, &opts())
        .await
        .unwrap();
    let foreground = DeleteOptions {
        policy: gc::Policy {
            propagation: Some(gc::Propagation::Foreground),
            orphan_dependents: None,
        },
        ..Default::default()
    };
    let w = r
        .delete(info("pods"), Some("default"), "fg", &foreground)
        .await
        .unwrap();
    let m = &w.object.value()["metadata"];
    assert_eq!(m["deletionGracePeriodSeconds"], 30);
    assert_eq!(m["finalizers"], json!(["foregroundDeletion"]));
    // During the grace period DeleteOptions cannot change the finalizers (upstream pendingGraceful).
    let orphan = DeleteOptions {
        policy: gc::Policy {
            propagation: Some(gc::Propagation::Orphan),
            orphan_dependents: None,
        },
        ..Default::default()
    };
    r.delete(info("pods"), Some("default"), "fg", &orphan)
        .await
        .unwrap();
    let p = r.get(info("pods"), Some("default"), "fg").unwrap();
    assert_eq!(p.value()["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    // The node agent's final delete (grace 0) leaves the pod to its finalizer.
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    r.delete(info("pods"), Some("default"), "fg", &force)
        .await
        .unwrap();
    let p = r.get(info("pods"), Some("default"), "fg").unwrap();
    assert_eq!(p.value()["metadata"]["deletionGracePeriodSeconds"], 0);
}

#[tokio::test]
async fn delete_precondition_on_uid_conflicts() {
    let r = registry().await;
    r.create(info("configmaps"), Some("default"), cm("a"), &opts())
        .await
        .unwrap();
    let o = DeleteOptions {
        uid: Some("other".into()),
        ..Default::default()
    };
    let e = r
        .delete(info("configmaps"), Some("default"), "a", &o)
        .await
        .unwrap_err();
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn dry_run_create_persists_nothing() {
    let r = registry().await;
    let rev = r.storage().revision();
    let dry = WriteOptions {
        dry_run: true,
        ..Default::default()
    };
    let c = r
        .create(info("configmaps"), Some("default"), cm("a"), &dry)
        .await
        .unwrap();
    assert_eq!(c.value()["metadata"]["name"], "a");
    assert_eq!(r.storage().revision(), rev);
    assert_eq!(
        r.get(info("configmaps"), Some("default"), "a").unwrap_err().code,
        404
    );
}

#[tokio::test]
async fn binding_assigns_the_node_once() {
    let r = registry().await;
    r.create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    r.bind("default", "p", b.clone()).await.unwrap();
    let p = r.get(info("pods"), Some("default"), "p").unwrap();
    assert_eq!(p.value()["spec"]["nodeName"], "n1");
    assert_eq!(p.value()["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(r.bind("default", "p", b).await.unwrap_err().code, 409);
}

#[tokio::test]
async fn services_get_a_cluster_ip_and_the_kubernetes_service_exists() {
    let r = registry().await;
    let k = r.get(info("services"), Some("default"), "kubernetes").unwrap();
    assert_eq!(k.value()["spec"]["clusterIP"], "10.96.0.1");
    let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                      "spec": {"ports": [{"port": 80}]}});
    let s = r
        .create(info("services"), Some("default"), body, &opts())
        .await
        .unwrap();
    // The upper band first (KEP-3070); 10.96.0.10 stays for the cluster DNS.
    assert_eq!(s.value()["spec"]["clusterIP"], "10.96.1.0");
    assert_eq!(s.value()["spec"]["ports"][0]["targetPort"], 80);
    assert_eq!(s.value()["spec"]["type"], "ClusterIP");
}

#[tokio::test]
async fn a_deleted_namespace_stays_terminating_until_finalized_then_goes() {
    let r = registry().await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    r.create(info("namespaces"), None, ns, &opts()).await.unwrap();
    r.create(info("configmaps"), Some("team"), cm("a"), &opts())
        .await
        .unwrap();
    let marked = r
        .delete(info("namespaces"), None, "team", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(marked.object.value()["status"]["phase"], "Terminating");
    // No controller in the API server: the namespace and its content stay (kube-apiserver alone).
    let got = r.get(info("namespaces"), None, "team").unwrap();
    assert_eq!(got.value()["spec"]["finalizers"], json!(["kubernetes"]));
    r.get(info("configmaps"), Some("team"), "a").unwrap();
    let e = r
        .create(info("configmaps"), Some("team"), cm("b"), &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 403);
    // A main-resource update cannot drop spec.finalizers, and does not complete the deletion.
    let mut body = got.value();
    body["spec"]["finalizers"] = json!([]);
    body["metadata"]["labels"] = json!({"x": "y"});
    let updated = r
        .update(info("namespaces"), None, "team", None, body.clone(), &opts())
        .await
        .unwrap();
    assert_eq!(updated.value()["spec"]["finalizers"], json!(["kubernetes"]));
    // Status conditions go through `status` and leave spec alone.
    let mut status = updated.value();
    status["status"]["conditions"] = json!([{"type": "NamespaceContentRemaining", "status": "True"}]);
    status["spec"]["finalizers"] = json!([]);
    let updated = r
        .update(info("namespaces"), None, "team", Some("status"), status, &opts())
        .await
        .unwrap();
    assert_eq!(updated.value()["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(updated.value()["status"]["phase"], "Terminating");
    // `finalize` empties spec.finalizers: with no metadata finalizers the namespace is removed.
    let mut fin = updated.value();
    fin["spec"]["finalizers"] = json!([]);
    fin["status"] = json!({"phase": "Active"});
    r.update(info("namespaces"), None, "team", Some("finalize"), fin, &opts())
        .await
        .unwrap();
    assert_eq!(r.get(info("namespaces"), None, "team").unwrap_err().code, 404);
}

#[tokio::test]
async fn a_finalized_namespace_with_metadata_finalizers_waits_for_them() {
    let r = registry().await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    r.create(info("namespaces"), None, ns, &opts()).await.unwrap();
    r.delete(info("namespaces"), None, "held", &DeleteOptions::default())
        .await
        .unwrap();
    let mut fin = r.get(info("namespaces"), None, "held").unwrap().value();
    fin["spec"]["finalizers"] = json!([]);
    let after = r
        .update(info("namespaces"), None, "held", Some("finalize"), fin, &opts())
        .await
        .unwrap();
    assert_eq!(after.value()["spec"]["finalizers"], json!([]));
    assert_eq!(after.value()["status"]["phase"], "Terminating");
    let mut body = after.value();
    body["metadata"]["finalizers"] = json!([]);
    r.update(info("namespaces"), None, "held", None, body, &opts())
        .await
        .unwrap();
    assert_eq!(r.get(info("namespaces"), None, "held").unwrap_err().code, 404);
}

#[tokio::test]
async fn strict_field_validation_names_the_unknown_field_and_warn_only_warns() {
    let r = registry().await;
    let mut body = cm("a");
    body["spec"] = json!({"nope": 1});
    body["data"] = json!({"k": "v"});
    let strict = WriteOptions {
        field_validation: FieldValidation::Strict,
        ..Default::default()
    };
    let e = r
        .create(info("configmaps"), Some("default"), body.clone(), &strict)
        .await
        .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .ends_with("strict decoding error: unknown field \"spec\""),
        "{}",
        e.message
    );
    let warn = WriteOptions::default();
    r.create(info("configmaps"), Some("default"), body, &warn)
        .await
        .unwrap();
    assert_eq!(
        *warn.warnings.lock().unwrap(),
        vec!["unknown field \"spec\"".to_string()]
    );
}

#[test]
fn unknown_fields_reports_nested_paths_with_list_indexes() {
    let input = json!({"spec": {"containers": [{"name": "a", "bogus": 1}], "x": null}});
    let output = json!({"spec": {"containers": [{"name": "a"}]}});
    assert_eq!(
        unknown_fields(&input, &output),
        vec!["spec.containers[0].bogus".to_string()]
    );
}

#[tokio::test]
async fn forbidden_pod_spec_change_is_refused_with_upstreams_message() {
    let r = registry().await;
    let p = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let mut body = p.value();
    body["spec"]["containers"][0]["command"] = json!(["sh"]);
    let e = r
        .update(info("pods"), Some("default"), "p", None, body, &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("pod updates may not change fields other than"),
        "{}",
        e.message
    );
    let mut body = p.value();
    body["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    let u = r
        .update(info("pods"), Some("default"), "p", None, body, &opts())
        .await
        .unwrap();
    assert_eq!(u.value()["spec"]["containers"][0]["image"], "busybox:1.37");
}

// ---- pods/ephemeralcontainers -------------------------------------------------------------------

const EPHEMERAL: Option<&str> = Some(pod_strategy::EPHEMERAL_CONTAINERS);

fn debug_container(name: &str) -> Value {
    json!({"name": name, "image": "kubeling/testbox:0.1", "targetContainerName": "c"})
}

async fn patch_ephemeral(
    r: &Registry,
    name: &str,
    kind: PatchType,
    patch: &Value,
    opts: &WriteOptions,
) -> Result<Arc<Stored>, ApiError> {
    let body = patch.to_string();
    r.patch(
        info("pods"),
        Some("default"),
        name,
        EPHEMERAL,
        (kind, body.as_bytes()),
        opts,
    )
    .await
}

/// The `managedFields` entry of `manager`.
fn managed_entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|m| m["manager"] == manager))
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}: {obj}"))
}

fn manager(name: &str) -> WriteOptions {
    WriteOptions {
        field_manager: Some(name.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn ephemeral_containers_patch_adds_a_defaulted_container_and_changes_nothing_else() {
    let r = registry().await;
    let mut p = pod("p");
    p["metadata"]["labels"] = json!({"app": "a"});
    let before = r.create(info("pods"), Some("default"), p, &opts()).await.unwrap();
    // What kubectl debug sends, plus changes this endpoint must drop.
    let patch = json!({
        "metadata": {"labels": {"app": "b"}, "annotations": {"x": "y"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:9"}],
                 "activeDeadlineSeconds": 5,
                 "ephemeralContainers": [{"name": "dbg", "image": "kubeling/testbox:0.1",
                                          "targetContainerName": "c", "resources": {},
                                          "terminationMessagePolicy": "File"}]},
        "status": {"phase": "Running"},
    });
    let after = patch_ephemeral(&r, "p", PatchType::Strategic, &patch, &manager("kubectl"))
        .await
        .unwrap();
    let v = &after.value();
    let ec = &v["spec"]["ephemeralContainers"][0];
    assert_eq!(
        (
            &ec["name"],
            &ec["targetContainerName"],
            &ec["imagePullPolicy"],
            &ec["terminationMessagePath"]
        ),
        (
            &json!("dbg"),
            &json!("c"),
            &json!("IfNotPresent"),
            &json!("/dev/termination-log")
        )
    );
    let mut spec_without = v["spec"].clone();
    spec_without
        .as_object_mut()
        .unwrap()
        .remove("ephemeralContainers");
    assert_eq!(
        spec_without,
        before.value()["spec"],
        "the rest of the spec is the stored one"
    );
    assert_eq!(v["metadata"]["labels"], json!({"app": "a"}));
    assert!(v["metadata"].get("annotations").is_none());
    assert_eq!(v["status"], before.value()["status"]);
    assert!(after.revision > before.revision);
    let entry = managed_entry(v, "kubectl");
    assert_eq!(
        (&entry["operation"], &entry["subresource"]),
        (&json!("Update"), &json!("ephemeralcontainers"))
    );
    let owned = entry["fieldsV1"].as_object().unwrap();
    assert_eq!(owned.keys().collect::<Vec<_>>(), ["f:spec"]);
    assert!(owned["f:spec"].get("f:ephemeralContainers").is_some(), "{entry}");

    // JSON patch and merge patch reach the same list.
    let ops = json!([{"op": "add", "path": "/spec/ephemeralContainers/-", "value": debug_container("j")}]);
    patch_ephemeral(&r, "p", PatchType::Json, &ops, &opts())
        .await
        .unwrap();
    let all =
        r.get(info("pods"), Some("default"), "p").unwrap().value()["spec"]["ephemeralContainers"].clone();
    let mut list = all.as_array().unwrap().clone();
    list.push(debug_container("m"));
    let merged = patch_ephemeral(
        &r,
        "p",
        PatchType::Merge,
        &json!({"spec": {"ephemeralContainers": list}}),
        &opts(),
    )
    .await
    .unwrap();
    let merged = merged.value();
    let names: Vec<&str> = merged["spec"]["ephemeralContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dbg", "j", "m"]);
}

#[tokio::test]
async fn ephemeral_containers_put_keeps_existing_ones_and_checks_preconditions() {
    let r = registry().await;
    let created = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let o = opts();
    let put = |body: Value| r.update(info("pods"), Some("default"), "p", EPHEMERAL, body, &o);
    let mut body = created.value();
    body["spec"]["ephemeralContainers"] = json!([debug_container("dbg")]);
    let added = put(body.clone()).await.unwrap();
    assert_eq!(added.value()["spec"]["ephemeralContainers"][0]["name"], "dbg");

    // The body still carries the old resourceVersion: a stale write.
    let e = put(body.clone()).await.unwrap_err();
    assert_eq!((e.code, e.reason), (409, "Conflict"));
    let mut wrong_uid = added.value();
    wrong_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let e = put(wrong_uid).await.unwrap_err();
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains("Precondition failed: UID in precondition"),
        "{}",
        e.message
    );

    let mut changed = added.value();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("busybox:1.37");
    let e = put(changed).await.unwrap_err();
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    assert!(
        e.message.starts_with(
            "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may \
             not be changed\n"
        ),
        "{}",
        e.message
    );
    let mut removed = added.value();
    removed["spec"]
        .as_object_mut()
        .unwrap()
        .remove("ephemeralContainers");
    let e = put(removed).await.unwrap_err();
    assert_eq!(
        e.message,
        "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not \
         be removed\n"
    );
    assert_eq!(
        r.get(info("pods"), Some("default"), "p").unwrap().revision,
        added.revision
    );
}

#[tokio::test]
async fn invalid_ephemeral_containers_are_422_with_a_cause_per_field() {
    let r = registry().await;
    r.create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let patch = json!({"spec": {"ephemeralContainers": [
        {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}], "targetContainerName": "nope"}]}});
    let e = patch_ephemeral(&r, "p", PatchType::Strategic, &patch, &opts())
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    let details = e.details.unwrap();
    assert_eq!((&details["name"], &details["kind"]), (&json!("p"), &json!("Pod")));
    let causes: Vec<(&str, &str)> = details["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        causes,
        [
            ("spec.ephemeralContainers[0].name", "Duplicate value: \"c\""),
            (
                "spec.ephemeralContainers[0].targetContainerName",
                "Not found: \"nope\""
            ),
            (
                "spec.ephemeralContainers[0].ports",
                "Forbidden: cannot be set for an Ephemeral Container"
            ),
        ]
    );
}

#[tokio::test]
async fn ephemeral_containers_of_a_missing_pod_are_not_found_with_its_name() {
    let r = registry().await;
    let patch = json!({"spec": {"ephemeralContainers": [debug_container("dbg")]}});
    let e = patch_ephemeral(&r, "nope", PatchType::Strategic, &patch, &opts())
        .await
        .unwrap_err();
    // kubectl debug reads a 404 without details.name as "ephemeral containers are disabled".
    assert_eq!(
        (e.code, e.reason, e.message.as_str()),
        (404, "NotFound", "pods \"nope\" not found")
    );
    assert_eq!(e.details.unwrap()["name"], "nope");
    let e = r
        .apply(
            info("pods"),
            Some("default"),
            "nope",
            EPHEMERAL,
            pod("nope"),
            false,
            &manager("m"),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, 404, "a subresource never creates");
}

#[tokio::test]
async fn dry_run_of_an_ephemeral_container_answers_it_and_stores_nothing() {
    let r = registry().await;
    let created = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let dry = WriteOptions {
        dry_run: true,
        ..Default::default()
    };
    let patch = json!({"spec": {"ephemeralContainers": [debug_container("dbg")]}});
    let answer = patch_ephemeral(&r, "p", PatchType::Strategic, &patch, &dry)
        .await
        .unwrap();
    assert_eq!(answer.value()["spec"]["ephemeralContainers"][0]["name"], "dbg");
    let stored = r.get(info("pods"), Some("default"), "p").unwrap();
    assert_eq!(
        (stored.revision, &stored.value()),
        (created.revision, &created.value())
    );
}

#[tokio::test]
async fn the_pod_itself_cannot_change_its_ephemeral_containers() {
    let r = registry().await;
    r.create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let patch = json!({"spec": {"ephemeralContainers": [debug_container("dbg")]}}).to_string();
    let e = r
        .patch(
            info("pods"),
            Some("default"),
            "p",
            None,
            (PatchType::Strategic, patch.as_bytes()),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("spec: Forbidden: pod updates may not change fields other than")
            && e.message.contains("spec.ephemeralContainers"),
        "{}",
        e.message
    );
    // Once added through the subresource, a PUT of the pod as read keeps them.
    let patch = json!({"spec": {"ephemeralContainers": [debug_container("dbg")]}});
    let added = patch_ephemeral(&r, "p", PatchType::Strategic, &patch, &opts())
        .await
        .unwrap();
    let mut body = added.value();
    body["metadata"]["labels"] = json!({"x": "y"});
    let u = r
        .update(info("pods"), Some("default"), "p", None, body, &opts())
        .await
        .unwrap();
    assert_eq!(
        u.value()["spec"]["ephemeralContainers"],
        added.value()["spec"]["ephemeralContainers"]
    );
}

#[tokio::test]
async fn server_side_apply_through_the_subresource_owns_only_ephemeral_containers() {
    let r = registry().await;
    let created = r
        .create(info("pods"), Some("default"), pod("p"), &opts())
        .await
        .unwrap();
    let mut applied = pod("p");
    applied["spec"]["containers"][0]["image"] = json!("busybox:9");
    applied["spec"]["ephemeralContainers"] = json!([debug_container("dbg")]);
    let (p, created_now) = r
        .apply(
            info("pods"),
            Some("default"),
            "p",
            EPHEMERAL,
            applied.clone(),
            false,
            &manager("ssa"),
        )
        .await
        .unwrap();
    assert!(!created_now);
    assert_eq!(
        p.value()["spec"]["containers"],
        created.value()["spec"]["containers"]
    );
    assert_eq!(
        p.value()["spec"]["ephemeralContainers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let p_value = p.value();
    let entry = managed_entry(&p_value, "ssa");
    assert_eq!(
        (&entry["operation"], &entry["subresource"]),
        (&json!("Apply"), &json!("ephemeralcontainers"))
    );
    assert_eq!(
        entry["fieldsV1"]["f:spec"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["f:ephemeralContainers"]
    );
    // Applying the same again changes nothing, also once the clock has moved on (the entry's time stays).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (again, _) = r
        .apply(
            info("pods"),
            Some("default"),
            "p",
            EPHEMERAL,
            applied,
            false,
            &manager("ssa"),
        )
        .await
        .unwrap();
    assert_eq!(again.revision, p.revision);
    let e = r
        .apply(
            info("pods"),
            Some("default"),
            "p",
            Some("binding"),
            pod("p"),
            false,
            &manager("ssa"),
        )
        .await
        .unwrap_err();
    // status and scale take apply too; a subresource that is not the object's own does not.
    assert_eq!(e.code, 415);
}

/// The fault suite: the four patch types with any body, on a pod and a ConfigMap (and on their status),
/// are applied or refused with a 4xx, never a panic or a 5xx.
#[test]
fn patches_of_every_type_with_arbitrary_bodies_apply_or_fail_with_a_4xx() {
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            select(vec![
                "c",
                "x",
                "busybox",
                "/metadata/labels/a",
                "/spec/containers/0",
                "add",
                "remove",
                "delete"
            ])
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map(
                    select(vec![
                        "apiVersion",
                        "kind",
                        "metadata",
                        "name",
                        "labels",
                        "finalizers",
                        "resourceVersion",
                        "uid",
                        "spec",
                        "containers",
                        "image",
                        "nodeName",
                        "data",
                        "status",
                        "phase",
                        "op",
                        "path",
                        "value",
                        "from",
                        "$patch",
                        "$retainKeys",
                        "$setElementOrder/containers",
                    ]),
                    inner,
                    0..5,
                )
                .prop_map(|m| json!(m)),
            ]
        })
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(registry());
    rt.block_on(async {
        r.create(info("pods"), Some("default"), pod("p"), &opts())
            .await
            .unwrap();
        r.create(info("configmaps"), Some("default"), cm("c"), &opts())
            .await
            .unwrap();
    });
    let strategy = (
        0..4u8,
        select(vec![
            ("pods", "p", None),
            ("pods", "p", Some("status")),
            ("configmaps", "c", None),
        ]),
        json_value(),
        any::<bool>(),
    );
    let mut runner = TestRunner::new(Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |(kind, (plural, name, sub), body, force)| {
        let opts = WriteOptions {
            field_manager: Some("m".into()),
            ..Default::default()
        };
        let bytes = body.to_string().into_bytes();
        let answer = rt.block_on(async {
            match kind {
                0 => {
                    r.patch(
                        info(plural),
                        Some("default"),
                        name,
                        sub,
                        (PatchType::Json, &bytes),
                        &opts,
                    )
                    .await
                }
                1 => {
                    r.patch(
                        info(plural),
                        Some("default"),
                        name,
                        sub,
                        (PatchType::Merge, &bytes),
                        &opts,
                    )
                    .await
                }
                2 => {
                    r.patch(
                        info(plural),
                        Some("default"),
                        name,
                        sub,
                        (PatchType::Strategic, &bytes),
                        &opts,
                    )
                    .await
                }
                _ => r
                    .apply(info(plural), Some("default"), name, sub, body, force, &opts)
                    .await
                    .map(|(o, _)| o),
            }
        });
        if let Err(e) = answer {
            prop_assert!((400..500).contains(&e.code), "{} {}", e.code, e);
        }
        Ok::<(), TestCaseError>(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn a_full_disk_is_507_insufficient_storage_and_other_refusals_503() {
    let e = ApiError::from(StoreError::NoSpace {
        path: "/data/db".into(),
    });
    assert_eq!((e.code, e.reason), (507, "InsufficientStorage"));
    assert_eq!(
        e.message,
        "storage is full: no space left on the device holding /data/db; writes are refused until space is freed"
    );
    let e = ApiError::from(StoreError::Unavailable("the storage engine failed".into()));
    assert_eq!((e.code, e.reason), (503, "ServiceUnavailable"));
}

fn ip_addresses() -> &'static ResourceInfo {
    resources::find("networking.k8s.io", "v1", "ipaddresses").unwrap()
}

/// A 422 whose message holds `want`.
fn assert_invalid(e: &ApiError, want: &str) {
    assert_eq!(e.code, 422, "{}", e.message);
    assert!(e.message.contains(want), "{}", e.message);
}

/// Make the object at `key` look long made (left over by a crash long ago).
async fn backdate(r: &Registry, key: &str) {
    r.storage()
        .write(key, |cur| {
            let mut v = cur.unwrap().value();
            v["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            Ok::<_, ApiError>(Decision::Put(v))
        })
        .await
        .unwrap();
}

fn service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn ip_address_of(r: &Registry, ip: &str) -> Result<Value, ApiError> {
    let ips = ip_addresses();
    r.get(ips, None, ip).map(|a| a.value())
}

#[tokio::test]
async fn a_service_holds_its_cluster_ip_with_an_ip_address_that_goes_with_it() {
    let r = registry().await;
    let svc = info("services");
    let parent =
        |name: &str| json!({"group": "", "resource": "services", "namespace": "default", "name": name});
    let k = ip_address_of(&r, "10.96.0.1").unwrap();
    assert_eq!(k["spec"]["parentRef"], parent("kubernetes"));
    assert_eq!(
        k["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"],
        "ipallocator.k8s.io"
    );
    let ports = json!({"ports": [{"port": 80}]});
    let web = r
        .create(svc, Some("default"), service("web", ports.clone()), &opts())
        .await
        .unwrap();
    assert_eq!(web.value()["spec"]["clusterIP"], "10.96.1.0");
    assert_eq!(
        ip_address_of(&r, "10.96.1.0").unwrap()["spec"]["parentRef"],
        parent("web")
    );

    // A requested IP another Service holds: 422, and nothing written.
    let mut taken = ports.clone();
    taken["clusterIP"] = json!("10.96.1.0");
    let e = r
        .create(svc, Some("default"), service("copy", taken), &opts())
        .await
        .unwrap_err();
    assert_invalid(&e, "provided IP is already allocated");

    // Another API server's reservation, its Service not written yet: dynamic allocation passes it by, and a
    // request for it is refused.
    let ips = ip_addresses();
    let theirs = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
                        "metadata": {"name": "10.96.1.1",
                                     "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
                        "spec": {"parentRef": parent("elsewhere")}});
    r.create(ips, None, theirs, &opts()).await.unwrap();
    let next = r
        .create(svc, Some("default"), service("next", ports.clone()), &opts())
        .await
        .unwrap();
    assert_eq!(next.value()["spec"]["clusterIP"], "10.96.1.2");
    let mut wanted = ports.clone();
    wanted["clusterIP"] = json!("10.96.1.1");
    let e = r
        .create(svc, Some("default"), service("want", wanted.clone()), &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 422, "{}", e.message);

    // Left over by a crash between the two writes (old, its Service gone): taken over.
    let key = ips.key(None, "10.96.1.1");
    backdate(&r, &key).await;
    r.create(svc, Some("default"), service("want", wanted), &opts())
        .await
        .unwrap();
    assert_eq!(
        ip_address_of(&r, "10.96.1.1").unwrap()["spec"]["parentRef"],
        parent("want")
    );

    // An IPAddress made by a user for something else (no allocator label), however old, is never taken.
    let users = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.1.3"},
                       "spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "gateways",
                                              "namespace": "default", "name": "edge"}}});
    r.create(ips, None, users, &opts()).await.unwrap();
    backdate(&r, &ips.key(None, "10.96.1.3")).await;
    let mut users_ip = ports.clone();
    users_ip["clusterIP"] = json!("10.96.1.3");
    let e = r
        .create(svc, Some("default"), service("users", users_ip), &opts())
        .await
        .unwrap_err();
    assert_eq!(e.code, 422, "{}", e.message);

    // Headless and dry-run creates hold nothing.
    let headless = r
        .create(
            svc,
            Some("default"),
            service("headless", json!({"clusterIP": "None"})),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(headless.value()["spec"]["clusterIP"], "None");
    let dry = WriteOptions {
        dry_run: true,
        ..opts()
    };
    let preview = r
        .create(svc, Some("default"), service("dry", ports.clone()), &dry)
        .await
        .unwrap();
    let preview_ip = preview.value()["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert_eq!(preview_ip, "10.96.1.4", "the user's IPAddress is passed by");
    assert!(
        ip_address_of(&r, &preview_ip).is_err(),
        "a dry run reserved {preview_ip}"
    );

    // Deleted: the IP is released. Deleted once its last finalizer goes (a patch): released too.
    r.delete(svc, Some("default"), "web", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(ip_address_of(&r, "10.96.1.0").unwrap_err().code, 404);
    let held = json!({"apiVersion": "v1", "kind": "Service",
                      "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "spec": ports});
    let held = r.create(svc, Some("default"), held, &opts()).await.unwrap();
    let held_ip = held.value()["spec"]["clusterIP"].as_str().unwrap().to_string();
    r.delete(svc, Some("default"), "held", &DeleteOptions::default())
        .await
        .unwrap();
    assert!(
        ip_address_of(&r, &held_ip).is_ok(),
        "still held while the Service waits for its finalizer"
    );
    r.patch(
        svc,
        Some("default"),
        "held",
        None,
        (PatchType::Merge, br#"{"metadata": {"finalizers": null}}"#),
        &opts(),
    )
    .await
    .unwrap();
    assert_eq!(ip_address_of(&r, &held_ip).unwrap_err().code, 404);
}

#[tokio::test]
async fn bootstrap_gives_services_from_before_the_allocator_their_ip_addresses() {
    let r = registry().await;
    let ips = ip_addresses();
    let s = r
        .create(
            info("services"),
            Some("default"),
            service("old", json!({"ports": [{"port": 80}]})),
            &opts(),
        )
        .await
        .unwrap();
    let ip = s.value()["spec"]["clusterIP"].as_str().unwrap().to_string();
    r.storage()
        .write(&ips.key(None, &ip), |_| Ok::<_, ApiError>(Decision::Delete))
        .await
        .unwrap();
    assert!(ip_address_of(&r, &ip).is_err());
    r.bootstrap().await.unwrap();
    assert_eq!(
        ip_address_of(&r, &ip).unwrap()["spec"]["parentRef"]["name"],
        "old"
    );
}

fn node_port_record(r: &Registry, port: i64) -> Option<Value> {
    r.storage()
        .get(&format!("kubeling.io/servicenodeports//{port}"))
        .map(|s| s.value())
}

#[tokio::test]
async fn node_ports_are_checked_and_held_by_records_that_go_with_the_service() {
    let r = registry().await;
    let svc = info("services");
    let node_port = |port: Option<i64>| {
        let mut p = json!({"port": 80});
        if let Some(n) = port {
            p["nodePort"] = json!(n);
        }
        json!({"type": "NodePort", "ports": [p]})
    };
    let first = r
        .create(svc, Some("default"), service("first", node_port(None)), &opts())
        .await
        .unwrap();
    assert_eq!(first.value()["spec"]["ports"][0]["nodePort"], 30000);
    assert_eq!(
        node_port_record(&r, 30000).unwrap()["spec"]["parentRef"]["name"],
        "first"
    );

    // Requested: in the range, and free (upstream's messages, on spec.ports[i].nodePort).
    for (port, message) in [
        (
            30000,
            "spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated",
        ),
        (
            8080,
            "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of \
             valid ports is 30000-32767",
        ),
    ] {
        let e = r
            .create(
                svc,
                Some("default"),
                service("clash", node_port(Some(port))),
                &opts(),
            )
            .await
            .unwrap_err();
        assert_invalid(&e, message);
    }
    assert!(r.get(svc, Some("default"), "clash").is_err());

    // Another API server's reservation, its Service not written yet: passed by, and refused when asked for.
    r.storage()
        .write("kubeling.io/servicenodeports//30001", |_| {
            Ok::<_, ApiError>(Decision::Put(json!({
                "metadata": {"name": "30001", "creationTimestamp": now_rfc3339()},
                "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "elsewhere"}},
            })))
        })
        .await
        .unwrap();
    let second = r
        .create(svc, Some("default"), service("second", node_port(None)), &opts())
        .await
        .unwrap();
    assert_eq!(second.value()["spec"]["ports"][0]["nodePort"], 30002);
    let e = r
        .create(
            svc,
            Some("default"),
            service("wants", node_port(Some(30001))),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_invalid(&e, "provided port is already allocated");
    // Its cluster IP was released with the refusal.
    let ips = ip_addresses();
    let held: Vec<String> = r
        .list(ips, None, &Selection::default(), None, None)
        .items
        .iter()
        .map(|a| {
            a.value()["spec"]["parentRef"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(!held.contains(&"wants".to_string()), "{held:?}");

    // A dry run holds nothing; a deleted Service's ports are released.
    let dry = WriteOptions {
        dry_run: true,
        ..opts()
    };
    let preview = r
        .create(svc, Some("default"), service("dry", node_port(None)), &dry)
        .await
        .unwrap();
    assert_eq!(preview.value()["spec"]["ports"][0]["nodePort"], 30003);
    assert!(node_port_record(&r, 30003).is_none());
    r.delete(svc, Some("default"), "first", &DeleteOptions::default())
        .await
        .unwrap();
    assert!(node_port_record(&r, 30000).is_none());
    assert!(node_port_record(&r, 30002).is_some());

    // A Service from before the records gets them at start.
    r.storage()
        .write("kubeling.io/servicenodeports//30002", |_| {
            Ok::<_, ApiError>(Decision::Delete)
        })
        .await
        .unwrap();
    r.bootstrap().await.unwrap();
    assert_eq!(
        node_port_record(&r, 30002).unwrap()["spec"]["parentRef"]["name"],
        "second"
    );
}

#[tokio::test]
async fn requested_cluster_ips_and_node_ports_are_checked_as_upstream_does() {
    let r = registry().await;
    let svc = info("services");
    let with = |ip: &str| json!({"clusterIP": ip, "ports": [{"port": 80}]});
    for (ip, message) in [
        (
            "foo",
            r#"spec.clusterIPs[0]: Invalid value: "foo": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#,
        ),
        (
            "10.96.0.010",
            r#"Invalid value: "10.96.0.010": must be a valid IP address"#,
        ),
        (
            "1.1.1.1",
            r#"spec.clusterIPs: Invalid value: []string{"1.1.1.1"}: failed to allocate IP 1.1.1.1: the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"#,
        ),
        ("10.112.0.1", "is not in the valid range"),
        ("fd00::1", "is not in the valid range"),
        (
            "10.96.0.1",
            r#"spec.clusterIPs: Invalid value: []string{"10.96.0.1"}: failed to allocate IP 10.96.0.1: provided IP is already allocated"#,
        ),
    ] {
        let e = r
            .create(svc, Some("default"), service("s", with(ip)), &opts())
            .await
            .unwrap_err();
        assert_eq!(e.code, 422, "{ip}: {}", e.message);
        assert!(e.message.contains(message), "{ip}: {}", e.message);
    }
    // The last address of 10.96.0.0/12 is in the range.
    let last = r
        .create(
            svc,
            Some("default"),
            service("last", with("10.111.255.254")),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(last.value()["spec"]["clusterIP"], "10.111.255.254");
    // A node port on a ClusterIP Service.
    let e = r
        .create(
            svc,
            Some("default"),
            service(
                "cip",
                json!({"ports": [{"port": 80}, {"port": 81, "nodePort": 30100}]}),
            ),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_invalid(
        &e,
        "spec.ports[1].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
    );
}

#[tokio::test]
async fn updates_keep_check_and_move_node_ports_and_the_cluster_ip_stays() {
    let r = registry().await;
    let svc = info("services");
    let merge = |body: &'static str| (PatchType::Merge, body.as_bytes());
    let node_port_svc = json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}]});
    let a = r
        .create(svc, Some("default"), service("a", node_port_svc.clone()), &opts())
        .await
        .unwrap();
    let b = r
        .create(svc, Some("default"), service("b", node_port_svc), &opts())
        .await
        .unwrap();
    assert_eq!(a.value()["spec"]["ports"][0]["nodePort"], 30000);
    assert_eq!(b.value()["spec"]["ports"][0]["nodePort"], 30001);

    // A replace that leaves the node port out keeps it (kubectl replace of a file without it).
    let mut body = a.value();
    body["spec"]["ports"] = json!([{"name": "http", "port": 8080}]);
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let replaced = r
        .update(svc, Some("default"), "a", None, body, &opts())
        .await
        .unwrap();
    assert_eq!(replaced.value()["spec"]["ports"][0]["nodePort"], 30000);

    // Another Service's node port, or one out of the range: refused.
    let e = r
        .patch(
            svc,
            Some("default"),
            "a",
            None,
            merge(r#"{"spec": {"ports": [{"name": "http", "port": 80, "nodePort": 30001}]}}"#),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_invalid(&e, "provided port is already allocated");
    let e = r
        .patch(
            svc,
            Some("default"),
            "a",
            None,
            merge(r#"{"spec": {"ports": [{"name": "http", "port": 80, "nodePort": 80}]}}"#),
            &opts(),
        )
        .await
        .unwrap_err();
    assert!(
        e.message.contains("provided port is not in the valid range"),
        "{}",
        e.message
    );

    // Moved to a free port: its record follows.
    r.patch(
        svc,
        Some("default"),
        "a",
        None,
        merge(r#"{"spec": {"ports": [{"name": "http", "port": 80, "nodePort": 30050}]}}"#),
        &opts(),
    )
    .await
    .unwrap();
    assert_eq!(
        node_port_record(&r, 30050).unwrap()["spec"]["parentRef"]["name"],
        "a"
    );
    assert!(node_port_record(&r, 30000).is_none());

    // The cluster IP may not change.
    let e = r
        .patch(
            svc,
            Some("default"),
            "a",
            None,
            merge(r#"{"spec": {"clusterIP": "10.96.7.7"}}"#),
            &opts(),
        )
        .await
        .unwrap_err();
    assert_invalid(
        &e,
        "spec.clusterIPs[0]: Invalid value: \"10.96.7.7\": may not change once set",
    );

    // To ClusterIP: the node ports go, and their records.
    let cip = r
        .patch(
            svc,
            Some("default"),
            "a",
            None,
            merge(r#"{"spec": {"type": "ClusterIP"}}"#),
            &opts(),
        )
        .await
        .unwrap();
    assert!(
        cip.value()["spec"]["ports"][0].get("nodePort").is_none(),
        "{}",
        cip.value()
    );
    assert!(node_port_record(&r, 30050).is_none());
    // And back to NodePort: a node port again, held.
    let np = r
        .patch(
            svc,
            Some("default"),
            "a",
            None,
            merge(r#"{"spec": {"type": "NodePort"}}"#),
            &opts(),
        )
        .await
        .unwrap();
    let port = np.value()["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert_eq!(port, 30000);
    assert_eq!(
        node_port_record(&r, port).unwrap()["spec"]["parentRef"]["name"],
        "a"
    );
}
