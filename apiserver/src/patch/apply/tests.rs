//! Server-side apply and managed-field tracking.

use serde_json::json;

use super::*;

fn ctx<'a>(manager: &'a str) -> Context<'a> {
    Context {
        kind_key: "apps/Deployment",
        api_version: "apps/v1",
        manager,
        subresource: "",
        skip: &["status"],
        now: "2026-01-01T00:00:00Z",
    }
}

fn deployment(image: &str, env: serde_json::Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": image, "env": env}]}}}
    })
}

#[test]
fn field_paths_key_merge_lists_by_their_merge_key() {
    let d = deployment("nginx:1", json!([{"name": "A", "value": "1"}]));
    let paths = field_paths(&d, "apps/Deployment", &["status"]);
    let image: FieldPath = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        r#"k:{"name":"c"}"#,
        "f:image",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert!(paths.contains(&image), "{paths:?}");
    assert_eq!(
        display(&image),
        r#".spec.template.spec.containers[name="c"].image"#
    );
    assert!(
        !paths
            .iter()
            .any(|p| p.contains(&"f:name".to_string()) && p.len() == 2),
        "metadata.name is not owned"
    );
}

#[test]
fn fields_v1_round_trips() {
    let d = deployment("nginx:1", json!([]));
    let paths = field_paths(&d, "apps/Deployment", &["status"]);
    assert_eq!(from_fields_v1(&to_fields_v1(&paths)), paths);
}

#[test]
fn first_apply_creates_with_an_apply_entry() {
    let d = deployment("nginx:1", json!([{"name": "A", "value": "1"}]));
    let out = apply(None, &d, false, &ctx("kubectl")).unwrap();
    let m = managers(&out);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].name.as_str(), m[0].operation.as_str()),
        ("kubectl", "Apply")
    );
}

#[test]
fn reapply_without_a_field_removes_it_and_keeps_fields_of_other_managers() {
    let first = deployment(
        "nginx:1",
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
    );
    let live = apply(None, &first, false, &ctx("kubectl")).unwrap();
    // Another manager adds an annotation.
    let mut edited = live.clone();
    edited["metadata"]["annotations"] = json!({"note": "x"});
    record_update(
        Some(&live),
        &mut edited,
        &Context {
            ..ctx("kubectl-edit")
        },
    );
    let second = deployment("nginx:1", json!([{"name": "A", "value": "1"}]));
    let mut second = second;
    second["metadata"].as_object_mut().unwrap().remove("labels");
    let out = apply(Some(&edited), &second, false, &ctx("kubectl")).unwrap();
    let env = &out["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env, &json!([{"name": "A", "value": "1"}]), "{out}");
    // The map is emptied (the registry then drops an empty labels map, as Go's omitempty does).
    assert!(
        out["metadata"]["labels"].as_object().is_none_or(|l| l.is_empty()),
        "{out}"
    );
    assert_eq!(
        out["metadata"]["annotations"]["note"], "x",
        "the other manager's field stays"
    );
}

#[test]
fn changing_a_field_another_manager_set_conflicts_unless_forced() {
    let first = deployment("nginx:1", json!([]));
    let live = apply(None, &first, false, &ctx("kubectl")).unwrap();
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    record_update(Some(&live), &mut scaled, &ctx("kubectl-scale"));
    let mut again = first.clone();
    again["spec"]["replicas"] = json!(3);
    let conflicts = apply(Some(&scaled), &again, false, &ctx("kubectl")).unwrap_err();
    assert_eq!(
        conflicts,
        vec![Conflict {
            manager: "kubectl-scale".into(),
            api_version: "apps/v1".into(),
            field: ".spec.replicas".into()
        }]
    );
    let forced = apply(Some(&scaled), &again, true, &ctx("kubectl")).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    assert!(
        managers(&forced).iter().all(|m| m.name != "kubectl-scale"),
        "the forced field changed hands"
    );
}

#[test]
fn applying_the_same_value_another_manager_set_is_no_conflict() {
    let first = deployment("nginx:1", json!([]));
    let live = apply(None, &first, false, &ctx("a")).unwrap();
    assert!(apply(Some(&live), &first, false, &ctx("b")).is_ok());
}

#[test]
fn an_update_that_changes_nothing_leaves_managed_fields_alone() {
    let d = deployment("nginx:1", json!([]));
    let live = apply(None, &d, false, &ctx("kubectl")).unwrap();
    let mut same = live.clone();
    record_update(Some(&live), &mut same, &ctx("other"));
    assert_eq!(same, live);
}

#[test]
fn an_update_takes_the_fields_it_changes_from_their_old_manager() {
    let d = deployment("nginx:1", json!([]));
    let live = apply(None, &d, false, &ctx("kubectl")).unwrap();
    let mut edited = live.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    record_update(Some(&live), &mut edited, &ctx("kubectl-edit"));
    let m = managers(&edited);
    let edit = m.iter().find(|m| m.name == "kubectl-edit").unwrap();
    assert_eq!(edit.fields.len(), 1);
    let applier = m.iter().find(|m| m.name == "kubectl").unwrap();
    assert!(!applier.fields.iter().any(|p| p.last().unwrap() == "f:image"));
}

/// A Deployment as `kubectl apply` (client-side) leaves it: the last-applied annotation, and every field
/// owned by `kubectl-client-side-apply`.
fn client_side_applied(image: &str) -> Value {
    let mut config = deployment(image, json!([{"name": "A", "value": "1"}]));
    let mut text = serde_json::to_string(&config).unwrap();
    text.push('\n');
    config["metadata"]["annotations"] = json!({ LAST_APPLIED: text });
    record_update(None, &mut config, &ctx("kubectl-client-side-apply"));
    config
}

#[test]
fn kubectl_server_side_apply_takes_over_fields_of_the_last_client_side_apply() {
    let live = client_side_applied("nginx:1");
    let changed = deployment("nginx:2", json!([{"name": "A", "value": "1"}]));
    let out = apply(Some(&live), &changed, false, &ctx("kubectl")).expect("no conflict for kubectl");
    assert_eq!(
        out.pointer("/spec/template/spec/containers/0/image"),
        Some(&json!("nginx:2"))
    );
    let entries = managers(&out);
    let image = field_paths(&changed, "apps/Deployment", &["status"])
        .into_iter()
        .find(|p| p.last().is_some_and(|l| l == "f:image"))
        .unwrap();
    let owner = |name: &str| entries.iter().find(|e| e.name == name).unwrap();
    assert!(owner("kubectl").fields.contains(&image));
    assert!(!owner("kubectl-client-side-apply").fields.contains(&image));
    // The annotation now holds what was applied, so a later client-side apply diffs against it.
    let annotation = out["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
    assert!(annotation.ends_with('\n'));
    let last: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(last, changed);
}

#[test]
fn other_managers_and_fields_changed_since_the_last_client_side_apply_still_conflict() {
    let live = client_side_applied("nginx:1");
    let changed = deployment("nginx:2", json!([{"name": "A", "value": "1"}]));
    let err = apply(Some(&live), &changed, false, &ctx("my-operator")).unwrap_err();
    assert_eq!(err[0].manager, "kubectl-client-side-apply");
    // Someone edited the image after the client-side apply: that is a real conflict, also for kubectl.
    let mut edited = live.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:edited");
    record_update(Some(&live), &mut edited, &ctx("kubectl-edit"));
    let err = apply(Some(&edited), &changed, false, &ctx("kubectl")).unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].manager, "kubectl-edit");
    assert_eq!(err[0].field, r#".spec.template.spec.containers[name="c"].image"#);
}

#[test]
fn a_write_that_adds_a_map_gives_it_its_own_dot_entry_and_an_apply_does_not() {
    let mut created = deployment("nginx:1", json!([]));
    record_update(None, &mut created, &ctx("kubectl-create"));
    let f = &created["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(f["f:metadata"]["f:labels"], json!({".": {}, "f:app": {}}));
    assert_eq!(
        f["f:spec"]["f:template"]["f:metadata"]["f:labels"],
        json!({".": {}, "f:app": {}})
    );
    // Structs (spec, template) have none; neither does matchLabels' parent, a struct.
    assert!(f["f:spec"].get(".").is_none() && f["f:spec"]["f:template"].get(".").is_none());
    assert_eq!(f["f:spec"]["f:selector"]["f:matchLabels"]["."], json!({}));
    assert!(f["f:spec"]["f:selector"].get(".").is_none());
    // A later write adding a label owns the label, not the map, which was there already.
    let mut labelled = created.clone();
    labelled["metadata"]["labels"]["team"] = json!("x");
    record_update(Some(&created), &mut labelled, &ctx("kubectl-label"));
    let entries = managers(&labelled);
    let label = entries.iter().find(|e| e.name == "kubectl-label").unwrap();
    let want: BTreeSet<FieldPath> = [vec!["f:metadata".to_string(), "f:labels".into(), "f:team".into()]]
        .into_iter()
        .collect();
    assert_eq!(label.fields, want);
    // Apply sets list leaves only, as upstream.
    let applied = apply(None, &deployment("nginx:1", json!([])), false, &ctx("ssa")).unwrap();
    let f = &applied["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(f["f:metadata"]["f:labels"], json!({"f:app": {}}));
}

#[test]
fn map_fields_are_the_built_in_kinds_maps() {
    assert!(is_map_field("/ConfigMap", &["data"]));
    assert!(!is_map_field("apps/Deployment", &["data"]));
    assert!(is_map_field("/Service", &["spec", "selector"]));
    assert!(!is_map_field("apps/Deployment", &["spec", "selector"]));
    assert!(is_map_field(
        "apps/Deployment",
        &["spec", "template", "spec", "containers", "resources", "limits"]
    ));
}

// --- properties: no stored object or configuration makes apply panic (the fault suite) --------------------

mod properties {
    use proptest::collection::{btree_map, vec};
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::*;

    /// Field-set keys of every kind (well formed or not) for `managedFields` a client wrote.
    const FIELD_KEYS: &[&str] = &[
        "f:spec",
        "f:metadata",
        "f:labels",
        "f:app",
        "f:template",
        "f:containers",
        "f:image",
        "f:env",
        "f:replicas",
        r#"k:{"name":"c"}"#,
        r#"k:{"name":"A"}"#,
        r#"k:{"containerPort":80,"protocol":"TCP"}"#,
        "k:{bad",
        "k:[]",
        r#"v:"x""#,
        "v:1",
        "v:",
        "i:0",
        ".",
        "",
    ];

    fn fields_v1() -> impl Strategy<Value = Value> {
        Just(json!({})).prop_recursive(4, 24, 4, |inner| {
            btree_map(select(FIELD_KEYS).prop_map(String::from), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        })
    }

    fn managed_fields() -> impl Strategy<Value = Value> {
        vec(
            (
                select(vec!["kubectl", "a", "b", ""]),
                select(vec!["Apply", "Update", "x"]),
                select(vec!["apps/v1", "v1", ""]),
                proptest::option::of(select(vec!["status", "scale", ""])),
                fields_v1(),
            )
                .prop_map(|(manager, operation, api_version, sub, fields)| {
                    let mut e = json!({"manager": manager, "operation": operation, "apiVersion": api_version,
                        "fieldsType": "FieldsV1", "fieldsV1": fields});
                    if let Some(s) = sub {
                        e["subresource"] = json!(s);
                    }
                    e
                }),
            0..3,
        )
        .prop_map(Value::Array)
    }

    /// JSON with a Deployment's vocabulary of keys.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0..4i64).prop_map(|n| json!(n)),
            select(vec!["c", "A", "nginx", "TCP", ""]).prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map(
                    select(vec![
                        "replicas",
                        "template",
                        "spec",
                        "containers",
                        "name",
                        "image",
                        "env",
                        "value",
                        "ports",
                        "containerPort",
                        "protocol",
                        "selector",
                        "matchLabels",
                        "metadata",
                        "labels",
                    ]),
                    inner,
                    0..5,
                )
                .prop_map(|m| json!(m)),
            ]
        })
    }

    /// A Deployment with any spec, labels, `managedFields` and last-applied annotation.
    fn object() -> impl Strategy<Value = Value> {
        (
            json_value(),
            proptest::option::of(managed_fields()),
            proptest::option::of(prop_oneof![
                json_value().prop_map(|v| v.to_string()),
                "\\PC{0,20}"
            ]),
            btree_map(select(vec!["app", "tier"]), select(vec!["web", "db"]), 0..3),
        )
            .prop_map(|(spec, managed, last_applied, labels)| {
                let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "web", "labels": labels}, "spec": spec});
                if let Some(m) = managed {
                    d["metadata"]["managedFields"] = m;
                }
                if let Some(a) = last_applied {
                    d["metadata"]["annotations"] = json!({LAST_APPLIED: a});
                }
                d
            })
    }

    proptest! {
        #[test]
        fn apply_and_update_records_never_panic(
            current in object(),
            applied in object(),
            force in any::<bool>(),
            manager in select(vec!["kubectl", "a", "b"]),
        ) {
            let ctx = ctx(manager);
            if let Ok(obj) = apply(Some(&current), &applied, force, &ctx) {
                // What it made reads back.
                let _ = managers(&obj);
            }
            let _ = apply(None, &applied, force, &ctx);
            let mut updated = applied.clone();
            record_update(Some(&current), &mut updated, &ctx);
            let _ = managers(&updated);
        }
    }
}

/// The create's one-walk `FieldsV1` against the path-set construction it replaces.
fn fields_by_paths(v: &Value, kind_key: &str, skip: &[&str]) -> Value {
    to_fields_v1(&with_map_entries(kind_key, field_paths(v, kind_key, skip)))
}

#[test]
fn fields_v1_of_a_create_equals_the_path_set_construction_on_real_kinds() {
    let cases = [
        (
            deployment("nginx:1", json!([{"name": "A", "value": "1"}, {"name": "B"}])),
            "apps/Deployment",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "d", "uid": "u", "labels": {"a": "1"},
                                "annotations": {}, "finalizers": ["x", "y"], "generateName": "p-",
                                "ownerReferences": [{"uid": "o", "kind": "ReplicaSet", "name": "rs"}]},
                   "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                            "resources": {"limits": {"cpu": "1"}, "requests": {}},
                                            "args": ["a", "b"], "env": null}],
                            "nodeSelector": {"k": "v"}, "tolerations": [{"key": "t", "operator": "Exists"}],
                            "volumes": [{"name": "v", "emptyDir": {}}], "hostname": null},
                   "status": {"phase": "Pending"}}),
            "/Pod",
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "y"}},
                   "data": {"a": "1", "b": "2"}, "binaryData": {}}),
            "/ConfigMap",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81}],
                            "clusterIPs": ["10.0.0.1"]}}),
            "/Service",
        ),
        // Only ignored metadata, nulls everywhere: no field at all.
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": null},
                   "data": {"a": null}}),
            "/ConfigMap",
        ),
        // Containers without their merge key make the list itself a member.
        (
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"image": "x"}, {"name": "c", "image": "y"}]}}),
            "/Pod",
        ),
    ];
    for (obj, kind) in cases {
        for skip in [&["status"][..], &[][..]] {
            assert_eq!(
                fields_v1_of(&obj, kind, skip),
                fields_by_paths(&obj, kind, skip),
                "{kind} skipping {skip:?}: {obj}"
            );
        }
    }
}

#[test]
fn record_update_on_create_makes_one_update_entry_of_every_field() {
    let mut created = deployment("nginx:1", json!([]));
    record_update(None, &mut created, &ctx("kubectl-create"));
    let entries = created["metadata"]["managedFields"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["manager"], "kubectl-create");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "apps/v1");
    assert_eq!(entries[0]["time"], "2026-01-01T00:00:00Z");
    assert!(entries[0].get("subresource").is_none());
    let mut bare = created.clone();
    bare["metadata"].as_object_mut().unwrap().remove("managedFields");
    assert_eq!(
        entries[0]["fieldsV1"],
        fields_by_paths(&bare, "apps/Deployment", &["status"])
    );
    // An object with no field of its own gets no entry.
    let mut empty = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    record_update(None, &mut empty, &ctx("m"));
    assert!(empty["metadata"].get("managedFields").is_none());
}

mod equivalence {
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::*;

    /// Field names that hit the built-in kinds' list strategies and map fields.
    const NAMES: &[&str] = &[
        "metadata",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "spec",
        "status",
        "containers",
        "ports",
        "env",
        "name",
        "image",
        "containerPort",
        "protocol",
        "resources",
        "limits",
        "requests",
        "selector",
        "matchLabels",
        "template",
        "data",
        "volumes",
        "tolerations",
        "key",
        "uid",
        "args",
        "nodeSelector",
        "conditions",
        "type",
        "capacity",
        "hard",
        "x",
    ];

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0..3i64).prop_map(Value::from),
            select(NAMES).prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(select(NAMES).prop_map(str::to_string), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn fields_v1_of_equals_the_path_set_construction(
            v in value(),
            kind in select(&["/Pod", "apps/Deployment", "/ConfigMap", "/Service", "/Node", "/ResourceQuota", "x.io/Widget"][..]),
        ) {
            prop_assert_eq!(fields_v1_of(&v, kind, &["status"]), fields_by_paths(&v, kind, &["status"]));
            prop_assert_eq!(fields_v1_of(&v, kind, &[]), fields_by_paths(&v, kind, &[]));
        }
    }
}
