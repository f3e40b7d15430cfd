//! CustomResourceDefinitions with the Rust `kube` crate, as a controller author uses them:
//! `#[derive(CustomResource)]`, the CRD from `Widget::crd()`, waiting for Established, typed CRUD, a
//! watcher, a finalizer, server-side apply, the status and scale subresources, schema validation, and a
//! deleted CRD taking its objects with it. Every test uses its own API group (the served-CRD table is
//! process-wide).

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use common::TestServer;

const WAIT: Duration = Duration::from_secs(20);

mod widgets_a {
    use super::*;

    /// A widget.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "a.crd-test.example.com",
        version = "v1",
        kind = "Widget",
        namespaced,
        status = "WidgetStatus",
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.replicas"
        ),
        printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas")
    )]
    pub(super) struct WidgetSpec {
        pub(super) replicas: i32,
        pub(super) color: Option<String>,
    }

    /// Its status.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub(super) struct WidgetStatus {
        pub replicas: i32,
    }
}

async fn install(client: &kube::Client, crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the CRD is Established before the deadline")
    .unwrap();
}

fn widget(name: &str, replicas: i32) -> widgets_a::Widget {
    widgets_a::Widget::new(
        name,
        widgets_a::WidgetSpec {
            replicas,
            color: Some("red".into()),
        },
    )
}

#[tokio::test]
async fn derived_crd_serves_typed_crud_watch_finalizers_apply_status_and_scale() {
    use kube::CustomResourceExt;
    let srv = TestServer::start().await;
    let client = srv.client();
    install(&client, widgets_a::Widget::crd()).await;

    let api: Api<widgets_a::Widget> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    // The first event of a watcher is its initial list.
    tokio::time::timeout(WAIT, events.next()).await.unwrap();

    let created = api
        .create(&PostParams::default(), &widget("w1", 2))
        .await
        .unwrap();
    assert_eq!(created.spec.replicas, 2);
    assert_eq!(created.metadata.generation, Some(1));
    let got = api.get("w1").await.unwrap();
    assert_eq!(got.spec, created.spec);
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    // The watcher sees the create.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let watcher::Event::Apply(w) | watcher::Event::InitApply(w) = ev
            && w.metadata.name.as_deref() == Some("w1")
        {
            break;
        }
    }

    // Server-side apply: the manager owns what it sent; a change of spec bumps the generation.
    let applied = api
        .patch(
            "w1",
            &PatchParams::apply("widget-controller").force(),
            &Patch::Apply(
                json!({"apiVersion": "a.crd-test.example.com/v1", "kind": "Widget",
                                 "spec": {"replicas": 3, "color": "blue"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.replicas, 3);
    assert_eq!(applied.metadata.generation, Some(2));
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"widget-controller".to_string()),
        "{managers:?}"
    );

    // Status through its subresource only, without a generation bump.
    let with_status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.status, Some(widgets_a::WidgetStatus { replicas: 3 }));
    assert_eq!(with_status.metadata.generation, Some(2));
    let ignored = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(ignored.status, Some(widgets_a::WidgetStatus { replicas: 3 }));

    // Scale.
    let scale = api.get_scale("w1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    api.patch_scale(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("w1").await.unwrap().spec.replicas, 5);

    // A finalizer holds a deletion until it is removed.
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/cleanup"]}})),
    )
    .await
    .unwrap();
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    let held = api.get("w1").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}])).unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(api.get_opt("w1").await.unwrap().is_none());
}

#[tokio::test]
async fn a_custom_object_violating_its_schema_is_refused_naming_each_field() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "gadgets.b.crd-test.example.com"},
        "spec": {
            "group": "b.crd-test.example.com",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must not exceed max"}],
                    "properties": {
                        "min": {"type": "integer", "default": 0},
                        "max": {"type": "integer", "default": 10},
                        "size": {"type": "string", "enum": ["small", "large"]},
                    }
                }}
            }}}],
        }
    }))
    .unwrap();
    install(&client, crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("b.crd-test.example.com", "v1", "Gadget"),
        "gadgets",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj = |spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "b.crd-test.example.com/v1", "kind": "Gadget",
                                      "metadata": {"name": "g"}, "spec": spec}),
        )
        .unwrap()
    };
    let err = api
        .create(
            &PostParams::default(),
            &obj(json!({"min": "one", "size": "medium"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains(
            r#"spec.min: Invalid value: "string": spec.min in body must be of type integer: "string""#
        ),
        "{}",
        status.message
    );
    assert!(
        status
            .message
            .contains(r#"spec.size: Unsupported value: "medium""#),
        "{}",
        status.message
    );

    let err = api
        .create(&PostParams::default(), &obj(json!({"min": 20})))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert!(
        status.message.contains("min must not exceed max"),
        "{}",
        status.message
    );

    // Unknown fields are pruned and defaults filled.
    let created = api
        .create(
            &PostParams::default(),
            &obj(json!({"size": "small", "colour": "red"})),
        )
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"size": "small", "min": 0, "max": 10})
    );
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_then_the_resource() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "things.c.crd-test.example.com"},
        "spec": {
            "group": "c.crd-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    }))
    .unwrap();
    install(&client, crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("c.crd-test.example.com", "v1", "Thing"),
        "things",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    for n in ["t1", "t2"] {
        let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "c.crd-test.example.com/v1",
            "kind": "Thing", "metadata": {"name": n}, "spec": {"x": 1}}))
        .unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let uid = crds
        .get("things.c.crd-test.example.com")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    crds.delete("things.c.crd-test.example.com", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(
            crds.clone(),
            "things.c.crd-test.example.com",
            conditions::is_deleted(&uid),
        ),
    )
    .await
    .expect("the CRD is gone before the deadline")
    .unwrap();
    // At once: the resource is no longer served.
    let err = api.list(&ListParams::default()).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 404);
    // Re-created, it starts empty: the objects went with it.
    let again: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "things.c.crd-test.example.com"},
        "spec": {
            "group": "c.crd-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    }))
    .unwrap();
    install(&client, again).await;
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn bad_crds_are_refused_with_422_and_stored_crds_are_served_after_a_restart() {
    let mut srv = TestServer::start().await;
    let client = srv.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = |name: &str, plural: &str, schema: serde_json::Value| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "group": "d.crd-test.example.com",
                "scope": "Namespaced",
                "names": {"plural": plural, "kind": "Doohickey"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": schema}}],
            }
        }))
        .unwrap()
    };
    let ok_schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"n": {"type": "integer"}}}}});
    let cases = [
        (
            crd("wrong.d.crd-test.example.com", "doohickeys", ok_schema.clone()),
            r#"metadata.name: Invalid value: "wrong.d.crd-test.example.com": must be spec.names.plural+"."+spec.group"#,
        ),
        (
            crd(
                "doohickeys.d.crd-test.example.com",
                "doohickeys",
                json!({"type": "object", "properties": {"spec": {"properties": {}}}}),
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ),
    ];
    for (bad, want) in cases {
        let err = crds.create(&PostParams::default(), &bad).await.unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{err:?}")
        };
        assert_eq!(status.code, 422);
        assert!(status.message.contains(want), "{}", status.message);
    }
    install(
        &client,
        crd(
            "doohickeys.d.crd-test.example.com",
            "doohickeys",
            ok_schema.clone(),
        ),
    )
    .await;
    // Another CRD may not take its kind.
    let err = crds
        .create(
            &PostParams::default(),
            &crd("others.d.crd-test.example.com", "others", ok_schema),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains(r#""Doohickey" is already in use"#),
        "{}",
        status.message
    );

    srv.restart().await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("d.crd-test.example.com", "v1", "Doohickey"),
        "doohickeys",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(srv.client(), "default", &ar);
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn a_crd_appears_in_discovery_and_openapi_with_its_schema() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let get = |path: &str| {
        let client = client.clone();
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        async move { client.request::<serde_json::Value>(req).await }
    };
    let index_before = get("/openapi/v3").await.unwrap();
    assert!(
        index_before["paths"]
            .get("apis/e.crd-test.example.com/v1")
            .is_none()
    );
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "sprockets.e.crd-test.example.com"},
        "spec": {
            "group": "e.crd-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "sprockets", "kind": "Sprocket", "shortNames": ["spr"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "spec": {"type": "object", "description": "The sprocket's spec.",
                                       "properties": {"teeth": {"type": "integer"}}}}}}}],
        }
    }))
    .unwrap();
    install(&client, crd).await;

    let groups = get("/apis").await.unwrap();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "e.crd-test.example.com")
    );
    let list = get("/apis/e.crd-test.example.com/v1").await.unwrap();
    let res = &list["resources"];
    assert_eq!(res[0]["name"], "sprockets");
    assert_eq!(res[0]["shortNames"], json!(["spr"]));
    assert_eq!(res[0]["categories"], json!(["all"]));
    assert_eq!(res[1]["name"], "sprockets/status");

    let index = get("/openapi/v3").await.unwrap();
    let url = index["paths"]["apis/e.crd-test.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("the CRD's group-version is in the OpenAPI index")
        .to_string();
    assert!(url.contains("?hash="), "{url}");
    let doc = get(&url).await.unwrap();
    let schema = &doc["components"]["schemas"]["com.example.crd-test.e.v1.Sprocket"];
    assert_eq!(
        schema["properties"]["spec"]["description"],
        "The sprocket's spec."
    );
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "e.crd-test.example.com", "version": "v1", "kind": "Sprocket"}])
    );
    let patch =
        &doc["paths"]["/apis/e.crd-test.example.com/v1/namespaces/{namespace}/sprockets/{name}"]["patch"];
    assert!(patch["requestBody"]["content"]["application/merge-patch+json"].is_object());
    assert!(patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_null());
}

#[tokio::test]
async fn versions_without_conversion_share_objects_and_selectable_fields_filter_lists() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"color": {"type": "string"}}}}}});
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "gears.f.crd-test.example.com"},
        "spec": {
            "group": "f.crd-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gears", "kind": "Gear"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema,
                 "selectableFields": [{"jsonPath": ".spec.color"}]},
                {"name": "v1alpha1", "served": false, "storage": false, "schema": schema},
            ],
        }
    }))
    .unwrap();
    install(&client, crd).await;
    let api = |version: &str| -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("f.crd-test.example.com", version, "Gear"),
            "gears",
        );
        Api::namespaced_with(client.clone(), "default", &ar)
    };
    for (name, color) in [("red-one", "red"), ("blue-one", "blue")] {
        let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "f.crd-test.example.com/v1beta1",
            "kind": "Gear", "metadata": {"name": name, "labels": {"color": color}}, "spec": {"color": color}}))
        .unwrap();
        let created = api("v1beta1").create(&PostParams::default(), &o).await.unwrap();
        assert_eq!(
            created.types.unwrap().api_version,
            "f.crd-test.example.com/v1beta1"
        );
    }
    let via_v1 = api("v1").get("red-one").await.unwrap();
    assert_eq!(via_v1.types.unwrap().api_version, "f.crd-test.example.com/v1");
    let listed = api("v1beta1").list(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .all(|o| o.types.as_ref().unwrap().api_version == "f.crd-test.example.com/v1beta1")
    );
    // v1alpha1 is not served.
    assert!(api("v1alpha1").list(&ListParams::default()).await.is_err());

    let names = |l: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        l.items.into_iter().filter_map(|o| o.metadata.name).collect()
    };
    let by_field = api("v1")
        .list(&ListParams::default().fields("spec.color=blue"))
        .await
        .unwrap();
    assert_eq!(names(by_field), vec!["blue-one"]);
    let by_label = api("v1")
        .list(&ListParams::default().labels("color=red"))
        .await
        .unwrap();
    assert_eq!(names(by_label), vec!["red-one"]);
    let by_name = api("v1")
        .list(&ListParams::default().fields("metadata.name=red-one"))
        .await
        .unwrap();
    assert_eq!(names(by_name), vec!["red-one"]);
    let err = api("v1")
        .list(&ListParams::default().fields("spec.size=1"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 400);
}

#[tokio::test]
async fn server_side_apply_merges_custom_lists_by_their_list_type() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "pulleys.g.crd-test.example.com"},
        "spec": {
            "group": "g.crd-test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "pulleys", "kind": "Pulley"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"}, "port": {"type": "integer"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                }}}}}}],
        }
    }))
    .unwrap();
    install(&client, crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("g.crd-test.example.com", "v1", "Pulley"),
        "pulleys",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let apply = |manager: &'static str, spec: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch(
                "p",
                &PatchParams::apply(manager),
                &Patch::Apply(
                    json!({"apiVersion": "g.crd-test.example.com/v1", "kind": "Pulley",
                                     "metadata": {"name": "p"}, "spec": spec}),
                ),
            )
            .await
            .unwrap()
        }
    };
    apply(
        "a",
        json!({"ports": [{"name": "http", "port": 80}], "tags": ["x"], "args": ["1"]}),
    )
    .await;
    let merged = apply(
        "b",
        json!({"ports": [{"name": "https", "port": 443}], "tags": ["y"]}),
    )
    .await;
    assert_eq!(
        merged.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );
    assert_eq!(merged.data["spec"]["tags"], json!(["x", "y"]));
    // An atomic list belongs to one manager: another one applying it conflicts.
    let err = api
        .patch(
            "p",
            &PatchParams::apply("b"),
            &Patch::Apply(
                json!({"apiVersion": "g.crd-test.example.com/v1", "kind": "Pulley",
                                 "metadata": {"name": "p"}, "spec": {"args": ["2"]}}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 409, "{}", status.message);
}

#[tokio::test]
async fn a_deleted_crd_waits_for_its_objects_finalizers_and_refuses_creates_meanwhile() {
    let srv = TestServer::start().await;
    let client = srv.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "cogs.h.crd-test.example.com"},
        "spec": {
            "group": "h.crd-test.example.com",
            "scope": "Cluster",
            "names": {"plural": "cogs", "kind": "Cog"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    }))
    .unwrap();
    install(&client, crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("h.crd-test.example.com", "v1", "Cog"),
        "cogs",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let cog = |name: &str, finalizers: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "h.crd-test.example.com/v1", "kind": "Cog",
            "metadata": {"name": name, "finalizers": finalizers}}))
        .unwrap()
    };
    api.create(&PostParams::default(), &cog("held", json!(["example.com/hold"])))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "cogs.h.crd-test.example.com";
    crds.delete(name, &DeleteParams::default()).await.unwrap();

    // Terminating: the CRD stays, with the condition, while its object is held by a finalizer.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let c = crds.get(name).await.unwrap();
        let terminating = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Terminating" && c.status == "True");
        if terminating {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never Terminating");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The controller sets the condition and then deletes the objects (as upstream's finalizer controller
    // does), so the object's deletion may follow the condition by a moment.
    let deadline = tokio::time::Instant::now() + WAIT;
    while api
        .get("held")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the held object was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = api
        .create(&PostParams::default(), &cog("new", json!([])))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 405);
    assert_eq!(
        status.message,
        "create not allowed while custom resource definition is terminating"
    );

    // Releasing the object lets the CRD go.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let uid = crds.get(name).await.map(|c| c.metadata.uid.unwrap_or_default());
    if let Ok(uid) = uid {
        tokio::time::timeout(
            WAIT,
            await_condition(crds.clone(), name, conditions::is_deleted(&uid)),
        )
        .await
        .expect("the CRD is gone before the deadline")
        .unwrap();
    }
    assert!(api.list(&ListParams::default()).await.is_err());
}
