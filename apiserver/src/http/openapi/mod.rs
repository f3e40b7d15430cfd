//! OpenAPI v3 (`/openapi/v3`): an index and one OpenAPI 3.0 document per served group-version.
//!
//! kubectl reads these documents in three places (reference §1.6 and §10). Its validator looks for the
//! PATCH operation of an object's kind (`x-kubernetes-group-version-kind` as an object on the operation)
//! and, when it declares `fieldValidation`, delegates validation to the server. `kubectl apply` computes
//! strategic-merge patches from the component schemas when the PATCH operation accepts
//! `application/strategic-merge-patch+json`. `kubectl explain` finds the component schema whose
//! `x-kubernetes-group-version-kind` array names the kind and walks `$ref`/`allOf` for field paths.
//! The component schemas are k8s-openapi's, generated with schemars' OpenAPI 3 settings so that
//! references read `#/components/schemas/io.k8s.api.core.v1.Pod`, as upstream's do, and kept as data
//! (`schemas.rs`); we add what k8s-openapi leaves out (the GVK arrays, list kinds, the patch merge keys
//! kubectl needs).
//! Documents are built once, on the first request, and served as bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;

use serde_json::{Map, Value, json};

use super::discovery::KUBE_VERSION;
use crate::registry::{ResourceInfo, resources};

mod schemas;

pub(crate) use schemas::components_json;

/// Upstream's patch metadata (`patchStrategy`/`patchMergeKey` struct tags) for the lists of the served
/// kinds, which k8s-openapi's schemas lack: one `schema property strategy [merge-key]` a line. Without a
/// merge key kubectl's v3 strategic-merge path would replace `containers` wholesale instead of merging
/// by name.
const PATCH_META: &str = "
    io.k8s.api.core.v1.PodSpec containers merge name
    io.k8s.api.core.v1.PodSpec initContainers merge name
    io.k8s.api.core.v1.PodSpec ephemeralContainers merge name
    io.k8s.api.core.v1.PodSpec volumes merge,retainKeys name
    io.k8s.api.core.v1.PodSpec imagePullSecrets merge name
    io.k8s.api.core.v1.PodSpec hostAliases merge ip
    io.k8s.api.core.v1.PodSpec resourceClaims merge,retainKeys name
    io.k8s.api.core.v1.PodSpec schedulingGates merge name
    io.k8s.api.core.v1.PodSpec topologySpreadConstraints merge topologyKey
    io.k8s.api.core.v1.Container env merge name
    io.k8s.api.core.v1.Container ports merge containerPort
    io.k8s.api.core.v1.Container volumeMounts merge mountPath
    io.k8s.api.core.v1.Container volumeDevices merge devicePath
    io.k8s.api.core.v1.EphemeralContainer env merge name
    io.k8s.api.core.v1.EphemeralContainer ports merge containerPort
    io.k8s.api.core.v1.EphemeralContainer volumeMounts merge mountPath
    io.k8s.api.core.v1.EphemeralContainer volumeDevices merge devicePath
    io.k8s.api.core.v1.PodStatus conditions merge type
    io.k8s.api.core.v1.PodStatus podIPs merge ip
    io.k8s.api.core.v1.PodStatus hostIPs merge ip
    io.k8s.api.core.v1.NodeSpec podCIDRs merge
    io.k8s.api.core.v1.NodeStatus conditions merge type
    io.k8s.api.core.v1.NodeStatus addresses merge type
    io.k8s.api.core.v1.NamespaceStatus conditions merge type
    io.k8s.api.core.v1.ServiceSpec ports merge port
    io.k8s.api.core.v1.ServiceAccount secrets merge name
    io.k8s.api.core.v1.PersistentVolumeClaimStatus conditions merge type
    io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta finalizers merge
    io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta ownerReferences merge uid
    io.k8s.api.apps.v1.DeploymentSpec strategy retainKeys
    io.k8s.api.apps.v1.DeploymentStatus conditions merge type
    io.k8s.api.apps.v1.ReplicaSetStatus conditions merge type
    io.k8s.api.apps.v1.StatefulSetStatus conditions merge type
    io.k8s.api.apps.v1.DaemonSetStatus conditions merge type
    io.k8s.api.batch.v1.JobStatus conditions merge type
";

/// `+listType`/`+listMapKey` markers upstream sets on some of those lists (read by server-side apply
/// clients): `schema property list-type [key,key]` a line.
const LIST_TYPES: &str = "
    io.k8s.api.core.v1.Container ports map containerPort,protocol
    io.k8s.api.core.v1.EphemeralContainer ports map containerPort,protocol
    io.k8s.api.core.v1.ServiceSpec ports map port,protocol
    io.k8s.api.core.v1.PodSpec topologySpreadConstraints map topologyKey,whenUnsatisfiable
    io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta finalizers set
";

/// The rows of `PATCH_META` or `LIST_TYPES`: (schema, property, value, optional fourth word).
fn table(
    text: &'static str,
) -> impl Iterator<Item = (&'static str, &'static str, &'static str, Option<&'static str>)> {
    text.lines().filter_map(|l| {
        let mut w = l.split_whitespace();
        Some((w.next()?, w.next()?, w.next()?, w.next()))
    })
}

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn base_path(r: &ResourceInfo) -> String {
    format!("/{}", doc_path(r.group, r.version))
}

/// The collection path of a resource (namespaced kinds: within a namespace).
fn collection_path(r: &ResourceInfo) -> String {
    if r.namespaced {
        format!("{}/namespaces/{{namespace}}/{}", base_path(r), r.plural)
    } else {
        format!("{}/{}", base_path(r), r.plural)
    }
}

fn item_path(r: &ResourceInfo) -> String {
    format!("{}/{{name}}", collection_path(r))
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn gvk_value(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// `CoreV1`, `AppsV1`, `CoordinationV1`: the infix of upstream's operation ids.
fn op_infix(group: &str, version: &str) -> String {
    let g = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    format!("{}{}", capitalise(g), capitalise(version))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn query(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
           "schema": {"type": "string"}})
}

fn write_params(with_force: bool) -> Vec<Value> {
    let mut p = vec![
        query(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query(
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor making these changes.",
        ),
        query(
            "fieldValidation",
            "string",
            "How the server handles unknown or duplicate fields in the body: Ignore, Warn or Strict.",
        ),
    ];
    if with_force {
        p.push(query(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests.",
        ));
    }
    p
}

fn list_params(watchable: bool) -> Vec<Value> {
    let mut p = vec![
        query(
            "allowWatchBookmarks",
            "boolean",
            "Requests watch events with type BOOKMARK.",
        ),
        query(
            "continue",
            "string",
            "The continue token of a previous list call.",
        ),
        query(
            "fieldSelector",
            "string",
            "A selector to restrict the list of returned objects by their fields.",
        ),
        query(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels.",
        ),
        query(
            "limit",
            "integer",
            "The maximum number of responses to return for a list call.",
        ),
        query(
            "resourceVersion",
            "string",
            "Constraint on which resource versions a request may be served from.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "How resourceVersion is applied to list calls.",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "Whether a watch starts with synthetic events for the current state.",
        ),
        query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    ];
    if watchable {
        p.push(query(
            "watch",
            "boolean",
            "Watch for changes and return them as a stream of events.",
        ));
    }
    p
}

fn delete_params() -> Vec<Value> {
    vec![
        query(
            "dryRun",
            "string",
            "When present, indicates that modifications should not be persisted.",
        ),
        query(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection will be performed.",
        ),
    ]
}

fn json_content(schema: &Value) -> Value {
    json!({"application/json": {"schema": schema}, "application/yaml": {"schema": schema}})
}

fn ok(code: &str, schema: &Value) -> Value {
    let mut m = Map::new();
    m.insert(
        code.into(),
        json!({"description": "OK", "content": json_content(schema)}),
    );
    m.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(m)
}

/// One operation. `gvk` is a single object here (an array only on component schemas).
fn operation(
    id: String,
    action: &str,
    gvk: &Value,
    params: Vec<Value>,
    body: Option<Value>,
    responses: Value,
) -> Value {
    let mut op = json!({
        "operationId": id,
        "parameters": params,
        "responses": responses,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    });
    if let Some(body) = body {
        op["requestBody"] = body;
    }
    op
}

fn patch_body(patch_schema: &Value, strategic: bool) -> Value {
    // kubectl's apply uses the v3 strategic-merge path only when this content type is listed; custom
    // resources do not list it (they take no strategic merge patches), so kubectl sends merge patches.
    let types: &[&str] = if strategic {
        &[
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ]
    } else {
        &[
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
        ]
    };
    let content: Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({"schema": patch_schema})))
        .collect();
    json!({"content": content, "required": true})
}

/// The component schema of a kind we have no k8s-openapi type for: an open object, so that its
/// operations still exist (validation is the server's) without pretending to know its fields.
fn fallback_schema(kind: &str) -> Value {
    json!({
        "description": format!("{kind} (schema not published by this server)."),
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Builds one group-version's document.
struct DocBuilder {
    /// The k8s-openapi components named so far; `finish` adds what they reference.
    roots: BTreeSet<String>,
    /// Schemas we write by hand (list kinds, fallbacks), added after generation.
    extra: Map<String, Value>,
    /// Component schema name -> the GVKs it carries.
    gvks: BTreeMap<String, Vec<Value>>,
    paths: Map<String, Value>,
}

impl DocBuilder {
    fn new() -> Self {
        DocBuilder {
            roots: BTreeSet::new(),
            extra: Map::new(),
            gvks: BTreeMap::new(),
            paths: Map::new(),
        }
    }

    /// A k8s-openapi component the document names; its name.
    fn component(&mut self, name: &str) -> String {
        self.roots.insert(name.to_string());
        name.to_string()
    }

    /// The component name of a kind, registering its schema and GVK.
    fn kind(&mut self, group: &str, version: &str, kind: &str) -> String {
        let custom = crate::crd::custom_for(group, version, kind);
        let name = match schemas::kind_schema(group, version, kind) {
            _ if custom.is_some() => {
                let c = custom.expect("checked");
                let object_meta = self.component(schemas::OBJECT_META);
                let name = custom_schema_name(group, version, kind);
                self.extra
                    .insert(name.clone(), custom_schema(&c.schema_json, &object_meta));
                name
            }
            Some(name) => self.component(name),
            None => {
                let g = if group.is_empty() { "core" } else { group };
                let name = format!("io.k8s.kubeling.{g}.{version}.{kind}");
                self.extra.insert(name.clone(), fallback_schema(kind));
                name
            }
        };
        let gvk = gvk_value(group, version, kind);
        let list = self.gvks.entry(name.clone()).or_default();
        if !list.contains(&gvk) {
            list.push(gvk);
        }
        name
    }

    /// `PodList`: k8s-openapi has a generic `List<T>` without a schema, so we write upstream's shape.
    fn list_kind(&mut self, r: &ResourceInfo, item: &str) -> String {
        let list_meta = self.component(schemas::LIST_META);
        let name = format!("{item}List");
        let list_kind = r.list_kind();
        self.extra.insert(
            name.clone(),
            json!({
                "description": format!("{list_kind} is a list of {}.", r.kind),
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {
                        "type": "string",
                        "description": "APIVersion defines the versioned schema of this object.",
                    },
                    "items": {
                        "type": "array",
                        "description": format!("List of {}.", r.plural),
                        "items": schema_ref(item),
                    },
                    "kind": {
                        "type": "string",
                        "description": "Kind is the REST resource this object represents.",
                    },
                    "metadata": {"allOf": [schema_ref(&list_meta)], "description": "Standard list metadata."},
                },
            }),
        );
        self.gvks
            .insert(name.clone(), vec![gvk_value(r.group, r.version, &list_kind)]);
        name
    }

    fn add(&mut self, path: String, method: &str, op: Value, params: &[Value]) {
        let item = self
            .paths
            .entry(path)
            .or_insert_with(|| json!({"parameters": params}));
        item[method] = op;
    }

    fn resource(&mut self, r: &ResourceInfo) {
        let gvk = gvk_value(r.group, r.version, r.kind);
        let kind = self.kind(r.group, r.version, r.kind);
        let list = self.list_kind(r, &kind);
        let patch = schema_ref(&self.component(schemas::PATCH));
        let status = schema_ref(&self.component(schemas::STATUS));
        let delete_options = schema_ref(&self.component(schemas::DELETE_OPTIONS));
        let (kref, lref) = (schema_ref(&kind), schema_ref(&list));
        let infix = op_infix(r.group, r.version);
        let scoped = if r.namespaced { "Namespaced" } else { "" };
        let k = r.kind;
        let verbs = r.verbs();
        let strategic = crate::crd::custom(r).is_none();

        let name_p = path_param("name", &format!("name of the {k}"));
        let ns_p = path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        );
        let coll_params: Vec<Value> = if r.namespaced { vec![ns_p.clone()] } else { vec![] };
        let mut item_params = vec![name_p];
        item_params.extend(coll_params.iter().cloned());

        let coll = collection_path(r);
        let list_op = operation(
            format!("list{infix}{scoped}{k}"),
            "list",
            &gvk,
            list_params(true),
            None,
            ok("200", &lref),
        );
        if verbs.contains(&"list") {
            self.add(coll.clone(), "get", list_op, &coll_params);
        }
        let create = operation(
            format!("create{infix}{scoped}{k}"),
            "post",
            &gvk,
            write_params(false),
            Some(json!({"content": json_content(&kref), "required": true})),
            ok("201", &kref),
        );
        if verbs.contains(&"create") {
            self.add(coll.clone(), "post", create, &coll_params);
        }
        if verbs.contains(&"deletecollection") {
            let mut params = delete_params();
            params.extend(list_params(false));
            let op = operation(
                format!("deletecollection{infix}{scoped}{k}"),
                "deletecollection",
                &gvk,
                params,
                Some(json!({"content": json_content(&delete_options)})),
                ok("200", &status),
            );
            self.add(coll, "delete", op, &coll_params);
        }
        if r.namespaced && verbs.contains(&"list") {
            let op = operation(
                format!("list{infix}{k}ForAllNamespaces"),
                "list",
                &gvk,
                list_params(true),
                None,
                ok("200", &lref),
            );
            self.add(format!("{}/{}", base_path(r), r.plural), "get", op, &[]);
        }

        let item = item_path(r);
        let read = operation(
            format!("read{infix}{scoped}{k}"),
            "get",
            &gvk,
            vec![],
            None,
            ok("200", &kref),
        );
        if verbs.contains(&"get") {
            self.add(item.clone(), "get", read, &item_params);
        }
        let replace = operation(
            format!("replace{infix}{scoped}{k}"),
            "put",
            &gvk,
            write_params(false),
            Some(json!({"content": json_content(&kref), "required": true})),
            ok("200", &kref),
        );
        if verbs.contains(&"update") {
            self.add(item.clone(), "put", replace, &item_params);
        }
        let patch_op = operation(
            format!("patch{infix}{scoped}{k}"),
            "patch",
            &gvk,
            write_params(true),
            Some(patch_body(&patch, strategic)),
            ok("200", &kref),
        );
        if verbs.contains(&"patch") {
            self.add(item.clone(), "patch", patch_op, &item_params);
        }
        let delete = operation(
            format!("delete{infix}{scoped}{k}"),
            "delete",
            &gvk,
            delete_params(),
            Some(json!({"content": json_content(&delete_options)})),
            ok("200", &status),
        );
        if verbs.contains(&"delete") {
            self.add(item.clone(), "delete", delete, &item_params);
        }

        for s in r.subresources {
            let (g, v) = s.group_version.unwrap_or((r.group, r.version));
            let sgvk = gvk_value(g, v, s.kind);
            let sref = schema_ref(&self.kind(g, v, s.kind));
            let path = format!("{item}/{}", s.name);
            let suffix = format!("{infix}{scoped}{k}{}", capitalise(s.name));
            for verb in s.verbs {
                // Every PATCH operation of a kind carries `fieldValidation`: kubectl's verifier stops at
                // the first one it meets for the GVK, in map order.
                let (method, op) = match *verb {
                    "get" => (
                        "get",
                        operation(
                            format!("read{suffix}"),
                            "get",
                            &sgvk,
                            vec![],
                            None,
                            ok("200", &sref),
                        ),
                    ),
                    "update" => (
                        "put",
                        operation(
                            format!("replace{suffix}"),
                            "put",
                            &sgvk,
                            write_params(false),
                            Some(json!({"content": json_content(&sref), "required": true})),
                            ok("200", &sref),
                        ),
                    ),
                    "patch" => (
                        "patch",
                        operation(
                            format!("patch{suffix}"),
                            "patch",
                            &sgvk,
                            write_params(true),
                            Some(patch_body(&patch, strategic)),
                            ok("200", &sref),
                        ),
                    ),
                    "create" => (
                        "post",
                        operation(
                            format!("create{suffix}"),
                            "post",
                            &sgvk,
                            write_params(false),
                            Some(json!({"content": json_content(&sref), "required": true})),
                            ok("201", &sref),
                        ),
                    ),
                    _ => continue,
                };
                self.add(path.clone(), method, op, &item_params);
            }
        }
    }

    fn finish(self) -> Value {
        let mut schemas = schemas::closure(&self.roots);
        schemas.extend(self.extra);
        for (name, gvks) in self.gvks {
            let Some(Value::Object(s)) = schemas.get_mut(&name) else {
                continue;
            };
            // k8s-openapi marks `metadata` required because its Rust field is not optional; upstream
            // does not, and `kubectl explain` would print `-required-` next to it.
            if let Some(Value::Array(req)) = s.get_mut("required") {
                req.retain(|f| f != "metadata");
                if req.is_empty() {
                    s.remove("required");
                }
            }
            s.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
        }
        for (schema, prop, strategy, key) in table(PATCH_META) {
            if let Some(Value::Object(p)) = property(&mut schemas, schema, prop) {
                p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
                if let Some(key) = key {
                    p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                }
            }
        }
        for (schema, prop, list_type, keys) in table(LIST_TYPES) {
            if let Some(Value::Object(p)) = property(&mut schemas, schema, prop) {
                p.insert("x-kubernetes-list-type".into(), json!(list_type));
                if let Some(keys) = keys {
                    let keys: Vec<&str> = keys.split(',').collect();
                    p.insert("x-kubernetes-list-map-keys".into(), json!(keys));
                }
            }
        }
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": KUBE_VERSION},
            "paths": self.paths,
            "components": {"schemas": schemas},
        })
    }
}

/// Every `$ref` in a schema or document, in document order.
pub(super) fn collect_refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(s)) => out.push(s),
                    _ => collect_refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// A property of a component schema, where the patch tables add their extensions.
fn property<'a>(schemas: &'a mut Map<String, Value>, schema: &str, prop: &str) -> Option<&'a mut Value> {
    schemas.get_mut(schema)?.get_mut("properties")?.get_mut(prop)
}

/// Upstream's component name of a custom resource: the group reversed (`com.example.v1.Widget`).
fn custom_schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A CRD version's schema as upstream publishes it: `apiVersion`, `kind` and `metadata` (ObjectMeta)
/// added to the CRD's own properties.
fn custom_schema(schema: &Value, object_meta: &str) -> Value {
    let mut s = schema.clone();
    if !s.is_object() {
        s = json!({"type": "object"});
    }
    s["properties"]["apiVersion"] = json!({"type": "string", "description": "APIVersion defines the \
        versioned schema of this representation of an object."});
    s["properties"]["kind"] = json!({"type": "string", "description": "Kind is a string value representing \
        the REST resource this object represents."});
    s["properties"]["metadata"] = json!({"allOf": [schema_ref(object_meta)],
        "description": "Standard object's metadata."});
    s
}

/// The kinds the documents describe: the served resources and the review kinds (create only).
fn described() -> impl Iterator<Item = &'static ResourceInfo> {
    resources::all().into_iter().chain(super::reviews::KINDS)
}

/// One group-version's document.
pub(super) fn document(group: &str, version: &str) -> Value {
    document_of(described().filter(|r| r.group == group && r.version == version))
}

fn document_of<'a>(resources: impl Iterator<Item = &'a ResourceInfo>) -> Value {
    let mut b = DocBuilder::new();
    for r in resources {
        b.resource(r);
    }
    b.finish()
}

/// The served group-versions: core first, then the groups in discovery order.
pub(super) fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
    gvs.extend(resources::group_versions());
    for r in super::reviews::KINDS {
        if !gvs.contains(&(r.group, r.version)) {
            gvs.push((r.group, r.version));
        }
    }
    gvs
}

struct Docs {
    /// doc path -> serialised document
    docs: BTreeMap<String, Bytes>,
    index: Bytes,
}

/// The documents of the built-in group-versions (built-in resources only), built once.
fn builtin_docs() -> &'static BTreeMap<String, Bytes> {
    // Built on first use: the first `/openapi/v3` request pays for it (about 17 ms in release, 100 ms
    // in debug), not server start-up.
    static DOCS: OnceLock<BTreeMap<String, Bytes>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let mut gvs: Vec<(&str, &str)> = Vec::new();
        for r in resources::builtin().chain(super::reviews::KINDS) {
            if !gvs.contains(&(r.group, r.version)) {
                gvs.push((r.group, r.version));
            }
        }
        gvs.into_iter()
            .map(|(g, v)| {
                let doc = document_of(
                    resources::builtin()
                        .chain(super::reviews::KINDS)
                        .filter(|r| r.group == g && r.version == v),
                );
                (
                    doc_path(g, v),
                    Bytes::from(serde_json::to_vec(&doc).expect("JSON serialises")),
                )
            })
            .collect()
    })
}

/// Every document: the built-in ones as built once, those holding custom resources rebuilt whenever
/// the served CRDs change (each with a new content hash, so kubectl refetches it).
fn build() -> Docs {
    let mut docs = BTreeMap::new();
    let mut index = Map::new();
    let custom = crate::crd::served();
    for (g, v) in group_versions() {
        let path = doc_path(g, v);
        let has_custom = custom.iter().any(|r| r.group == g && r.version == v);
        let bytes = match builtin_docs().get(&path) {
            Some(b) if !has_custom => b.clone(),
            _ => Bytes::from(serde_json::to_vec(&document(g, v)).expect("JSON serialises")),
        };
        // The hash is of the content: a changed document gets a new URL, so kubectl's HTTP cache
        // (keyed by URL) fetches it again.
        let url = format!("/openapi/v3/{path}?hash={}", content_hash(&bytes));
        index.insert(path.clone(), json!({"serverRelativeURL": url}));
        docs.insert(path, bytes);
    }
    let index = Bytes::from(serde_json::to_vec(&json!({"paths": index})).expect("JSON serialises"));
    Docs { docs, index }
}

fn docs() -> Arc<Docs> {
    static CACHE: Mutex<Option<(u64, Arc<Docs>)>> = Mutex::new(None);
    let generation = crate::crd::generation();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    match &*cache {
        Some((g, d)) if *g == generation => d.clone(),
        _ => {
            let d = Arc::new(build());
            *cache = Some((generation, d.clone()));
            d
        }
    }
}

/// A content hash for `?hash=` (64-bit FNV-1a, upper-case hex, as upstream prints its hashes).
pub(super) fn content_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

/// The `/openapi/v3` index.
pub fn index() -> Bytes {
    docs().index.clone()
}

/// One document, by its path below `/openapi/v3/` (`api/v1`, `apis/apps/v1`).
pub fn doc(path: &str) -> Option<Bytes> {
    docs().docs.get(path).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(group: &str, version: &str) -> Value {
        serde_json::from_slice(&doc(&doc_path(group, version)).expect("document served")).unwrap()
    }

    #[test]
    fn reviews_are_described_with_their_create_path_only_and_create_only_kinds_have_no_list() {
        let d = parsed("authorization.k8s.io", "v1");
        let paths = d["paths"].as_object().unwrap();
        let sar = &paths["/apis/authorization.k8s.io/v1/subjectaccessreviews"];
        assert!(sar["post"].is_object() && sar.get("get").is_none(), "{sar}");
        assert!(
            paths.contains_key(
                "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"
            )
        );
        assert!(d["components"]["schemas"]["io.k8s.api.authorization.v1.SubjectAccessReview"].is_object());
        let core = parsed("", "v1");
        let bindings = &core["paths"]["/api/v1/namespaces/{namespace}/bindings"];
        assert!(
            bindings["post"].is_object() && bindings.get("get").is_none(),
            "{bindings}"
        );
        assert!(index().len() > 2 && doc(&doc_path("authentication.k8s.io", "v1")).is_some());
    }

    #[test]
    fn every_patch_operation_declares_field_validation_and_its_gvk_object() {
        for r in resources::all()
            .into_iter()
            .filter(|r| r.verbs().contains(&"patch"))
        {
            let d = parsed(r.group, r.version);
            let op = &d["paths"][item_path(r)]["patch"];
            assert_eq!(
                op["x-kubernetes-group-version-kind"],
                gvk_value(r.group, r.version, r.kind)
            );
            assert!(op["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object());
            // Not only the item's: the verifier takes whichever PATCH op for the GVK it meets first.
            for (path, item) in d["paths"].as_object().unwrap() {
                if let Some(op) = item.get("patch") {
                    let names: Vec<&Value> = op["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| &p["name"])
                        .collect();
                    assert!(names.contains(&&json!("fieldValidation")), "{path}");
                    assert!(op["x-kubernetes-group-version-kind"].is_object(), "{path}");
                }
            }
        }
    }

    #[test]
    fn every_served_kind_has_a_component_schema_with_its_gvk_array() {
        for r in resources::all() {
            assert!(
                schemas::kind_schema(r.group, r.version, r.kind).is_some(),
                "no k8s-openapi type for {}",
                r.kind
            );
            let d = parsed(r.group, r.version);
            let gvk = gvk_value(r.group, r.version, r.kind);
            let found = d["components"]["schemas"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(_, s)| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|a| a.contains(&gvk))
                });
            let (name, schema) = found.unwrap_or_else(|| panic!("no schema for {gvk}"));
            assert!(name.ends_with(&format!(".{}", r.kind)), "{name}");
            assert!(schema["properties"]["metadata"].is_object(), "{name}");
        }
    }

    #[test]
    fn component_refs_resolve_within_the_same_document() {
        for (g, v) in group_versions() {
            let d = parsed(g, v);
            let mut refs = Vec::new();
            collect_refs(&d, &mut refs);
            assert!(!refs.is_empty());
            for r in refs {
                let name = r
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("{r}"));
                assert!(
                    d["components"]["schemas"].get(name).is_some(),
                    "{g}/{v}: dangling {r}"
                );
            }
        }
    }

    #[test]
    fn explain_paths_lead_to_described_fields() {
        // pod.spec.containers.livenessProbe: Pod -> PodSpec -> Container -> Probe, each hop by `allOf`.
        let d = parsed("", "v1");
        let schemas = &d["components"]["schemas"];
        let probe = &schemas["io.k8s.api.core.v1.Container"]["properties"]["livenessProbe"];
        assert_eq!(
            probe["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Probe"
        );
        assert!(probe["description"].as_str().unwrap().contains("liveness"));
        assert!(schemas["io.k8s.api.core.v1.Probe"]["properties"]["httpGet"]["description"].is_string());
        assert!(schemas["io.k8s.api.core.v1.Pod"].get("required").is_none());
    }

    #[test]
    fn merge_keyed_lists_carry_patch_metadata() {
        let d = parsed("", "v1");
        let spec = &d["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(spec["containers"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(spec["volumes"]["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let c = &d["components"]["schemas"]["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(c["env"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(
            c["ports"]["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        // Every table row names a property that exists in some document: a typo would go unnoticed.
        let all: Vec<Value> = group_versions().into_iter().map(|(g, v)| parsed(g, v)).collect();
        for (schema, prop, ..) in table(PATCH_META).chain(table(LIST_TYPES)) {
            let hit = all
                .iter()
                .any(|d| d["components"]["schemas"][schema]["properties"][prop].is_object());
            assert!(hit, "{schema}.{prop}");
        }
    }

    #[test]
    fn index_lists_each_served_group_version_with_its_content_hash() {
        let idx: Value = serde_json::from_slice(&index()).unwrap();
        let paths = idx["paths"].as_object().unwrap();
        assert_eq!(paths.len(), group_versions().len());
        for (g, v) in group_versions() {
            let p = doc_path(g, v);
            let url = paths[&p]["serverRelativeURL"].as_str().unwrap();
            assert_eq!(
                url,
                format!("/openapi/v3/{p}?hash={}", content_hash(&doc(&p).unwrap()))
            );
        }
    }

    #[test]
    fn content_hash_changes_with_the_bytes() {
        let a = content_hash(b"{\"openapi\":\"3.0.0\"}");
        assert_eq!(a, content_hash(b"{\"openapi\":\"3.0.0\"}"));
        assert_ne!(a, content_hash(b"{\"openapi\":\"3.0.1\"}"));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
    }
}
