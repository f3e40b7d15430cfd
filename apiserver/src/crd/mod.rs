//! CustomResourceDefinitions: the served-kinds table that changes at run time, and what a custom
//! resource needs beyond a built-in kind (its schema, CEL rules, printer columns, scale paths,
//! selectable fields).
//!
//! ```text
//! CRD write ─► registry (definition::validate, conflicts) ─► storage ─► controller (watch of CRDs)
//!                                                                    ├─ status: NamesAccepted, Established
//!                                                                    ├─ set(): the served table below
//!                                                                    └─ deleted CRD: delete its objects,
//!                                                                       unserve, drop the finalizer
//! resources::all()/find() = built-in table + served() ─► http (router, discovery, OpenAPI, Table)
//! custom object write ─► registry: prune ─► default ─► validate (schema, CEL) ─► storage
//! ```
//!
//! **Why leaked entries.** Every layer holds `&'static ResourceInfo` (requests, watch encoders, the
//! router). A served CRD version gets one boxed `ResourceInfo` leaked for the life of the process,
//! interned by everything it holds (group, version, names, scope, subresources): deleting and
//! re-creating the same CRD, or restarting its controller, reuses the entry, so the leak is bounded by
//! the number of distinct CRD shapes a process ever sees (a few hundred bytes each). What changes with a
//! CRD's edits (schema, columns, rules) lives beside it in an `Arc<Custom>`, replaced on every change.
//!
//! The table is process-wide (as `resources::all()` is a free function): two API servers in one process
//! (tests) share it, so their CRDs must have different names.

pub mod cel;
pub mod controller;
pub mod default;
pub mod definition;
pub mod printer;
pub mod prune;
pub mod schema;
pub mod validate;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use crate::registry::resources::{self, ResourceInfo, Subresource};
use crate::registry::validation::NameRule;
use schema::Schema;

/// A printer column of a CRD version.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean`, `date`.
    pub ty: String,
    /// `format`.
    pub format: String,
    /// `description`.
    pub description: String,
    /// 0 in `kubectl get`, more in `-o wide`.
    pub priority: i64,
    /// A simple JSONPath (`.spec.replicas`).
    pub json_path: String,
}

/// The `scale` subresource's paths.
#[derive(Debug, Clone)]
pub struct ScalePaths {
    /// `.spec.replicas`.
    pub spec_replicas: String,
    /// `.status.replicas`.
    pub status_replicas: String,
    /// `.status.selector`, if any.
    pub label_selector: Option<String>,
}

/// One served version of a CRD.
#[derive(Debug)]
pub struct Custom {
    /// The table entry.
    pub info: &'static ResourceInfo,
    /// The CRD's name.
    pub crd: String,
    /// The structural schema.
    pub schema: Schema,
    /// The schema as written (published in OpenAPI).
    pub schema_json: Value,
    /// Compiled CEL rules.
    pub rules: cel::Rules,
    /// `additionalPrinterColumns` (empty: NAME and AGE).
    pub columns: Vec<Column>,
    /// `selectableFields`, as field names (`spec.color`).
    pub selectable: Vec<String>,
    /// The `scale` subresource.
    pub scale: Option<ScalePaths>,
    /// The version objects are stored as.
    pub storage_version: String,
    /// The CRD is being deleted: no creates.
    pub terminating: bool,
}

#[derive(Default)]
struct Table {
    /// CRD name → its served versions, preferred first.
    by_crd: BTreeMap<String, Vec<Arc<Custom>>>,
    /// Bumped on every change (OpenAPI documents rebuild when it moves).
    generation: u64,
}

fn table() -> &'static RwLock<Table> {
    static TABLE: std::sync::OnceLock<RwLock<Table>> = std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn read() -> std::sync::RwLockReadGuard<'static, Table> {
    table().read().unwrap_or_else(|e| e.into_inner())
}

/// The table entries of every served custom resource version.
pub fn served() -> Vec<&'static ResourceInfo> {
    read().by_crd.values().flatten().map(|c| c.info).collect()
}

/// What a served custom resource needs beyond its table entry; `None` for built-in kinds.
pub fn custom(info: &ResourceInfo) -> Option<Arc<Custom>> {
    let t = read();
    t.by_crd
        .values()
        .flatten()
        .find(|c| std::ptr::eq(c.info, info) || *c.info == *info)
        .cloned()
}

/// Every served version of `group`/`plural` (field selectors are per resource, not per version).
pub fn custom_by_plural(group: &str, plural: &str) -> Option<Arc<Custom>> {
    read()
        .by_crd
        .values()
        .flatten()
        .find(|c| c.info.group == group && c.info.plural == plural)
        .cloned()
}

/// The served custom resource of a group, version and kind.
pub fn custom_for(group: &str, version: &str, kind: &str) -> Option<Arc<Custom>> {
    read()
        .by_crd
        .values()
        .flatten()
        .find(|c| (c.info.group, c.info.version, c.info.kind) == (group, version, kind))
        .cloned()
}

/// How server-side apply merges the list at `names` (field names from the root; list items add none) of
/// a custom resource: `x-kubernetes-list-type: map` by its keys, `set` as a set, anything else (`atomic`,
/// no type) replaced whole, as upstream's structured-merge-diff does for CRDs. `None` for built-in kinds.
pub fn list_strategy(
    group: &str,
    kind: &str,
    names: &[&str],
) -> Option<crate::patch::strategic::ListStrategy> {
    use crate::patch::strategic::ListStrategy;
    let c = {
        let t = read();
        t.by_crd
            .values()
            .flatten()
            .find(|c| c.info.group == group && c.info.kind == kind)
            .cloned()?
    };
    let mut s = &c.schema;
    for (i, name) in names.iter().enumerate() {
        s = s.property(name)?;
        if i + 1 < names.len() && s.ty == "array" {
            s = s.items.as_deref()?;
        }
    }
    Some(match s.list_type.as_str() {
        "map" if !s.list_map_keys.is_empty() => ListStrategy::MergeByKey(intern_keys(&s.list_map_keys)),
        "set" => ListStrategy::Set,
        _ => ListStrategy::Replace,
    })
}

/// `x-kubernetes-list-map-keys` as the `'static` slice `ListStrategy` holds, leaked once per distinct list.
fn intern_keys(keys: &[String]) -> &'static [&'static str] {
    static KEYS: std::sync::OnceLock<Mutex<HashMap<Vec<String>, &'static [&'static str]>>> =
        std::sync::OnceLock::new();
    let mut map = KEYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(k) = map.get(keys) {
        return k;
    }
    let leaked = leak_strs(keys.to_vec());
    map.insert(keys.to_vec(), leaked);
    leaked
}

/// The change counter of the table.
pub fn generation() -> u64 {
    read().generation
}

/// Serve `versions` for the CRD `name` (replacing what it served), or nothing when empty.
pub fn set(name: &str, versions: Vec<Arc<Custom>>) {
    let mut t = table().write().unwrap_or_else(|e| e.into_inner());
    let changed = match t.by_crd.get(name) {
        None => !versions.is_empty(),
        Some(old) => {
            old.len() != versions.len()
                || old.iter().zip(&versions).any(|(a, b)| {
                    !std::ptr::eq(a.info, b.info)
                        || a.schema_json != b.schema_json
                        || a.terminating != b.terminating
                        || a.columns.len() != b.columns.len()
                })
        }
    };
    if versions.is_empty() {
        t.by_crd.remove(name);
    } else {
        t.by_crd.insert(name.to_string(), versions);
    }
    if changed {
        t.generation += 1;
    }
}

/// The names of the CRDs served now.
pub fn served_crds() -> Vec<String> {
    read().by_crd.keys().cloned().collect()
}

/// Kubernetes version priority (`v1` > `v1beta2` > `v1beta1` > `v1alpha1` > anything else by name), as
/// upstream orders a CRD's versions in discovery.
pub fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    /// (level: GA 3, beta 2, alpha 1; major; minor), or `None` for a name of another form.
    fn key(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major = digits.parse::<u64>().ok()?;
        match &rest[digits.len()..] {
            "" => Some((3, major, 0)),
            t => {
                let (level, n) = if let Some(n) = t.strip_prefix("beta") {
                    (2, n)
                } else {
                    (1, t.strip_prefix("alpha")?)
                };
                Some((level, major, n.parse().ok()?))
            }
        }
    }
    match (key(a), key(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn leak_strs(v: Vec<String>) -> &'static [&'static str] {
    let refs: Vec<&'static str> = v.into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect();
    Box::leak(refs.into_boxed_slice())
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Custom objects are JSON as sent: pruning, defaulting and validation happen in the registry with the
/// schema ([`custom`]); this only insists on an object.
fn custom_canonical(v: &Value) -> Result<Value, String> {
    if v.is_object() {
        Ok(v.clone())
    } else {
        Err("the body is not a JSON object".into())
    }
}

/// The interned table entry of one version.
fn intern(
    group: &str,
    version: &str,
    names: &Value,
    namespaced: bool,
    has_status: bool,
    has_scale: bool,
) -> &'static ResourceInfo {
    static INTERNED: std::sync::OnceLock<Mutex<HashMap<String, &'static ResourceInfo>>> =
        std::sync::OnceLock::new();
    let text = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let list = |k: &str| -> Vec<String> {
        names
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let (plural, singular, kind) = (text("plural"), text("singular"), text("kind"));
    let (shorts, categories) = (list("shortNames"), list("categories"));
    let key = format!(
        "{group}|{version}|{plural}|{singular}|{kind}|{namespaced}|{shorts:?}|{categories:?}|{has_status}|{has_scale}"
    );
    let mut map = INTERNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(info) = map.get(&key) {
        return info;
    }
    let kind: &'static str = leak(&kind);
    let mut subs = Vec::new();
    if has_status {
        subs.push(resources::status(kind));
    }
    if has_scale {
        subs.push(resources::scale());
    }
    let subresources: &'static [Subresource] = Box::leak(subs.into_boxed_slice());
    let info: &'static ResourceInfo = Box::leak(Box::new(ResourceInfo {
        group: leak(group),
        version: leak(version),
        plural: leak(&plural),
        singular: leak(&singular),
        kind,
        namespaced,
        short_names: leak_strs(shorts),
        categories: leak_strs(categories),
        subresources,
        has_status,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: resources::Canonical::Function(custom_canonical),
        #[cfg(test)]
        typed: custom_canonical,
        only_verbs: None,
        alias: None,
    }));
    map.insert(key, info);
    info
}

fn columns(v: &Value) -> Vec<Column> {
    v.get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let t = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Column {
                name: t("name"),
                ty: t("type"),
                format: t("format"),
                description: t("description"),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                json_path: t("jsonPath"),
            }
        })
        .collect()
}

/// The served versions of a stored CRD (none unless it is Established), preferred first.
pub fn from_crd(crd: &Value) -> Vec<Arc<Custom>> {
    let established = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Established")
                && c.get("status") == Some(&Value::from("True"))
        });
    if !established {
        return Vec::new();
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
    let namespaced = crd.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster");
    let names = crd
        .pointer("/status/acceptedNames")
        .filter(|n| n.get("plural").is_some())
        .or_else(|| crd.pointer("/spec/names"))
        .cloned()
        .unwrap_or(Value::Null);
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let storage_version = definition::storage_version(crd).unwrap_or("").to_string();
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .collect();
    versions.sort_by(|a, b| {
        version_order(
            a.get("name").and_then(Value::as_str).unwrap_or(""),
            b.get("name").and_then(Value::as_str).unwrap_or(""),
        )
    });
    versions
        .into_iter()
        .map(|v| {
            let version = v.get("name").and_then(Value::as_str).unwrap_or("");
            let has_status = v.pointer("/subresources/status").is_some();
            let scale = v.pointer("/subresources/scale").map(|s| ScalePaths {
                spec_replicas: s
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .to_string(),
                status_replicas: s
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .to_string(),
                label_selector: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
            let schema_json = v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or_else(
                || serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
            let schema = Schema::parse(&schema_json);
            let rules = cel::Rules::compile(&schema);
            let selectable = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                .map(|p| p.trim_start_matches('.').to_string())
                .collect();
            Arc::new(Custom {
                info: intern(group, version, &names, namespaced, has_status, scale.is_some()),
                crd: name.to_string(),
                schema,
                schema_json,
                rules,
                columns: columns(v),
                selectable,
                scale,
                storage_version: storage_version.clone(),
                terminating,
            })
        })
        .collect()
}

/// A simple JSONPath (`.spec.replicas`, `{.status.conditions[0].type}`, `.metadata.labels['app']`)
/// read from `obj`; what client-go's JSONPath does for the paths CRDs use.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim();
    let p = p.strip_prefix('{').and_then(|p| p.strip_suffix('}')).unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut cur = obj;
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if !key.is_empty() {
                cur = cur.get(key)?;
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            cur = if let Some(k) = inner
                .strip_prefix('\'')
                .and_then(|k| k.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|k| k.strip_suffix('"')))
            {
                cur.get(k)?
            } else {
                let i: usize = inner.parse().ok()?;
                cur.get(i)?
            };
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(cur)
}

/// Set a simple JSONPath (`.spec.replicas`) in `obj`, creating objects on the way.
pub fn set_json_path(obj: &mut Value, path: &str, value: Value) -> bool {
    let keys: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, k) in keys.iter().enumerate() {
        let Some(o) = cur.as_object_mut() else {
            return false;
        };
        if i + 1 == keys.len() {
            o.insert(k.to_string(), value);
            return true;
        }
        cur = o
            .entry(k.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    false
}

/// The value of a selectable field of a custom object (`metadata.name`, `metadata.namespace`, or one of
/// the CRD's `selectableFields`); `None` when the resource does not have it.
pub fn field_value(group: &str, plural: &str, obj: &Value, field: &str) -> Option<String> {
    let c = custom_by_plural(group, plural)?;
    if !c.selectable.iter().any(|f| f == field) {
        return None;
    }
    Some(match json_path(obj, &format!(".{field}")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut v = vec!["v1alpha1", "foo", "v1beta1", "v2", "v1", "v1beta2", "v10"];
        v.sort_by(|a, b| version_order(a, b));
        assert_eq!(
            v,
            vec!["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn json_paths_read_fields_items_and_quoted_keys() {
        let obj = json!({"spec": {"replicas": 3, "list": [{"a": "x"}]},
                         "metadata": {"labels": {"app.kubernetes.io/name": "w"}}});
        assert_eq!(json_path(&obj, ".spec.replicas"), Some(&json!(3)));
        assert_eq!(json_path(&obj, "{.spec.list[0].a}"), Some(&json!("x")));
        assert_eq!(
            json_path(&obj, ".metadata.labels['app.kubernetes.io/name']"),
            Some(&json!("w"))
        );
        assert_eq!(json_path(&obj, ".spec.missing"), None);
        let mut o = json!({});
        assert!(set_json_path(&mut o, ".spec.replicas", json!(2)));
        assert_eq!(o, json!({"spec": {"replicas": 2}}));
    }

    #[test]
    fn an_established_crd_serves_each_served_version_with_one_interned_entry() {
        let crd = json!({
            "metadata": {"name": "things.interned.example.com"},
            "spec": {"group": "interned.example.com", "scope": "Cluster",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                     "versions": [
                        {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
                         "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.n", "statusReplicasPath": ".status.n"}}},
                        {"name": "v0", "served": false, "storage": false},
                     ]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]},
        });
        let a = from_crd(&crd);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].info.version, "v1");
        assert!(!a[0].info.namespaced);
        assert_eq!(a[0].info.subresources.len(), 2);
        assert_eq!(a[0].storage_version, "v1");
        let b = from_crd(&crd);
        assert!(std::ptr::eq(a[0].info, b[0].info));
        let mut pending = crd.clone();
        pending["status"] = json!({});
        assert!(from_crd(&pending).is_empty());
    }
}
