//! Server-side apply and managed fields (upstream `apimachinery/pkg/util/managedfields` and
//! `structured-merge-diff`, reduced to what a local cluster needs).
//!
//! Every write records, per field manager, the set of fields it set (`metadata.managedFields`, `FieldsV1`).
//! An apply (`application/apply-patch+yaml`) merges the applied configuration into the live object with the
//! same list keys as strategic merge patch (never replacing the object), refuses to change a field another
//! manager set to a different value unless forced (409 with `FieldManagerConflict` causes), and removes the
//! fields the manager applied last time but no longer does, when no other manager owns them.
//!
//! Map-typed fields (labels, data, ...) get their own `.` entry in non-apply writes that add them, as
//! upstream; which fields are maps is a table of the built-in kinds (`is_map_field`), not read from schemas.
//! Deliberate simplification: the field set of an atomic list is the list itself, as upstream, but
//! atomicity is taken from the strategic merge patch metadata rather than from `x-kubernetes-list-type`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::strategic::ListStrategy;

/// How server-side apply merges a list: a custom resource's `x-kubernetes-list-type` (and map keys)
/// from its CRD's schema, a built-in kind's patch metadata otherwise.
fn list_strategy(kind_key: &str, names: &[&str]) -> ListStrategy {
    let (group, kind) = kind_key.split_once('/').unwrap_or(("", kind_key));
    match crate::crd::list_strategy(group, kind, names) {
        Some(s) => s,
        None => super::strategic::list_strategy(kind_key, names),
    }
}

/// One element of a field path, as `FieldsV1` spells it: `f:name`, `k:{"name":"c"}`, `v:"x"`, or `.`.
pub type PathElement = String;
/// A path from the object root.
pub type FieldPath = Vec<PathElement>;

/// Top-level fields no manager owns.
const IGNORED_TOP: &[&str] = &["apiVersion", "kind"];
/// Metadata fields no manager owns (identity and server-owned fields).
const IGNORED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "selfLink",
    "generateName",
];

/// The member paths of `value`'s fields, with lists split by their strategy.
pub fn field_paths(value: &Value, kind_key: &str, skip: &[&str]) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(obj) = value.as_object() else { return out };
    for (k, v) in obj {
        if IGNORED_TOP.contains(&k.as_str()) || skip.contains(&k.as_str()) || v.is_null() {
            continue;
        }
        let mut path = vec![format!("f:{k}")];
        let mut names = vec![k.as_str()];
        if k == "metadata" {
            if let Some(m) = v.as_object() {
                for (mk, mv) in m {
                    if IGNORED_META.contains(&mk.as_str()) || mv.is_null() {
                        continue;
                    }
                    path.push(format!("f:{mk}"));
                    names.push(mk.as_str());
                    collect(mv, kind_key, &mut names, &mut path, &mut out);
                    path.pop();
                    names.pop();
                }
            }
            continue;
        }
        collect(v, kind_key, &mut names, &mut path, &mut out);
    }
    out
}

fn key_of(el: &Value, keys: &[&str]) -> Option<String> {
    let obj = el.as_object()?;
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = obj.get(*k) {
            m.insert((*k).to_string(), v.clone());
        }
    }
    if m.is_empty() {
        return None;
    }
    Some(format!("k:{}", Value::Object(m)))
}

fn collect<'a>(
    v: &'a Value,
    kind_key: &str,
    names: &mut Vec<&'a str>,
    path: &mut FieldPath,
    out: &mut BTreeSet<FieldPath>,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                if child.is_null() {
                    continue;
                }
                path.push(format!("f:{k}"));
                names.push(k.as_str());
                collect(child, kind_key, names, path, out);
                names.pop();
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match list_strategy(kind_key, names) {
            ListStrategy::MergeByKey(keys) => {
                for el in items {
                    let Some(pe) = key_of(el, keys) else {
                        out.insert(path.clone());
                        continue;
                    };
                    path.push(pe);
                    let mut own = path.clone();
                    own.push(".".into());
                    out.insert(own);
                    // Inside an element the field names continue from the list's own name.
                    collect(el, kind_key, names, path, out);
                    path.pop();
                }
            }
            ListStrategy::Set => {
                for el in items {
                    let mut p = path.clone();
                    p.push(format!("v:{el}"));
                    out.insert(p);
                }
            }
            ListStrategy::Replace => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The `FieldsV1` of every field of `value`, maps' own `.` entries included: what
/// `to_fields_v1(&with_map_entries(kind_key, field_paths(value, kind_key, skip)))` gives, built in one walk
/// with one string per node instead of a path vector per field (a create's managed fields, on every create).
pub fn fields_v1_of(value: &Value, kind_key: &str, skip: &[&str]) -> Value {
    let mut root = FieldsNode::default();
    if let Some(obj) = value.as_object() {
        for (k, v) in obj {
            if IGNORED_TOP.contains(&k.as_str()) || skip.contains(&k.as_str()) || v.is_null() {
                continue;
            }
            let mut names = vec![k.as_str()];
            let node = if k == "metadata" {
                v.as_object().and_then(|m| {
                    let mut meta = FieldsNode::default();
                    for (mk, mv) in m {
                        if IGNORED_META.contains(&mk.as_str()) || mv.is_null() {
                            continue;
                        }
                        names.push(mk.as_str());
                        meta.add_field(mk, fields_node(mv, kind_key, &mut names), kind_key, &names);
                        names.pop();
                    }
                    (!meta.0.is_empty()).then_some(meta)
                })
            } else {
                fields_node(v, kind_key, &mut names)
            };
            root.add_field(k, node, kind_key, &names);
        }
    }
    root.into_value()
}

/// A `FieldsV1` tree under construction; children sorted as the path set's order sorts them.
#[derive(Default)]
struct FieldsNode(std::collections::BTreeMap<String, FieldsNode>);

impl FieldsNode {
    /// Add field `name` (`f:name`) with its subtree, if it has one, and the map's own `.` entry when the
    /// field at `names` is a map with members (as [`with_map_entries`]).
    fn add_field(&mut self, name: &str, node: Option<FieldsNode>, kind_key: &str, names: &[&str]) {
        let Some(mut node) = node else { return };
        if node.0.keys().any(|k| k != ".") && is_map_field(kind_key, names) {
            node.0.entry(".".into()).or_default();
        }
        self.merge(format!("f:{name}"), node);
    }

    /// Union `node` in under `key` (two list elements with one key share a node).
    fn merge(&mut self, key: String, node: FieldsNode) {
        match self.0.entry(key) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(node);
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                for (k, child) in node.0 {
                    e.get_mut().merge(k, child);
                }
            }
        }
    }

    fn into_value(self) -> Value {
        Value::Object(self.0.into_iter().map(|(k, n)| (k, n.into_value())).collect())
    }
}

/// The subtree of the fields under `v` (whose field names from the root are `names`), or none when `v`
/// holds no field (an object of nulls only), as [`field_paths`]' `collect` inserts nothing for it.
fn fields_node<'a>(v: &'a Value, kind_key: &str, names: &mut Vec<&'a str>) -> Option<FieldsNode> {
    let mut node = FieldsNode::default();
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                if child.is_null() {
                    continue;
                }
                names.push(k.as_str());
                let sub = fields_node(child, kind_key, names);
                node.add_field(k, sub, kind_key, names);
                names.pop();
            }
            if node.0.is_empty() {
                return None;
            }
        }
        Value::Array(items) if !items.is_empty() => match list_strategy(kind_key, names) {
            ListStrategy::MergeByKey(keys) => {
                for el in items {
                    // An element without its key makes the list itself a member (no subtree of its own).
                    let Some(pe) = key_of(el, keys) else { continue };
                    let mut element = fields_node(el, kind_key, names).unwrap_or_default();
                    element.0.entry(".".into()).or_default();
                    node.merge(pe, element);
                }
            }
            ListStrategy::Set => {
                for el in items {
                    node.0.entry(format!("v:{el}")).or_default();
                }
            }
            ListStrategy::Replace => {}
        },
        _ => {}
    }
    Some(node)
}

/// Whether the field at `names` (field names from the root, list keys left out) is a Go map
/// (`map[string]...`): upstream records such a field with its own `.` entry beside its keys when a
/// non-apply write adds it (the map itself is a member of the set), and none for structs, whose zero value
/// always exists. A table of the built-in kinds' map fields, like the list-key table.
pub fn is_map_field(kind_key: &str, names: &[&str]) -> bool {
    let kind = kind_key.rsplit('/').next().unwrap_or("");
    match names {
        [.., "metadata", "labels" | "annotations"] => true,
        [
            ..,
            "matchLabels" | "nodeSelector" | "volumeAttributes" | "overhead" | "allocatedResources",
        ] => true,
        [.., "resources", "limits" | "requests"] => true,
        ["data" | "binaryData"] => matches!(kind, "ConfigMap" | "Secret"),
        ["stringData"] => kind == "Secret",
        ["parameters"] => kind == "StorageClass",
        ["spec", "selector"] => matches!(kind, "Service" | "ReplicationController"),
        ["status", "capacity" | "allocatable"] => matches!(kind, "Node" | "PersistentVolumeClaim"),
        ["spec", "capacity"] => kind == "PersistentVolume",
        ["spec" | "status", "hard"] | ["status", "used"] => kind == "ResourceQuota",
        _ => false,
    }
}

/// `paths` with a `.` entry for every map field that has members in it (see [`is_map_field`]).
pub fn with_map_entries(kind_key: &str, paths: BTreeSet<FieldPath>) -> BTreeSet<FieldPath> {
    let mut out = paths.clone();
    for p in &paths {
        let mut names: Vec<&str> = Vec::new();
        for (i, pe) in p.iter().enumerate() {
            let Some(name) = pe.strip_prefix("f:") else {
                continue;
            };
            names.push(name);
            // Only a map with members below it: an empty map is a leaf of its own.
            if i + 1 < p.len() && p[i + 1] != "." && is_map_field(kind_key, &names) {
                let mut own = p[..=i].to_vec();
                own.push(".".into());
                out.insert(own);
            }
        }
    }
    out
}

/// The value at a field path, if present.
pub fn value_at<'a>(root: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    let mut cur = root;
    for pe in path {
        if pe == "." {
            continue;
        }
        cur = step(cur, pe)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, pe: &str) -> Option<&'a Value> {
    if let Some(name) = pe.strip_prefix("f:") {
        return cur.as_object()?.get(name);
    }
    let items = cur.as_array()?;
    if let Some(k) = pe.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items
            .iter()
            .find(|el| want.iter().all(|(wk, wv)| el.get(wk) == Some(wv)));
    }
    if let Some(v) = pe.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        return items.iter().find(|el| **el == want);
    }
    None
}

/// Remove what a field path names from `root` (missing paths are ignored).
fn remove_at(root: &mut Value, path: &[PathElement]) {
    let (last, parent_path) = match path.split_last() {
        Some((l, rest)) if l == "." => match rest.split_last() {
            Some((l2, rest2)) => (l2, rest2),
            None => return,
        },
        Some((l, rest)) => (l, rest),
        None => return,
    };
    let mut cur = root;
    for pe in parent_path {
        let next = match step(cur, pe) {
            Some(_) => step_mut(cur, pe),
            None => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(name) = last.strip_prefix("f:") {
        if let Some(o) = cur.as_object_mut() {
            o.remove(name);
        }
    } else if let Some(items) = cur.as_array_mut() {
        let target = step(&Value::Array(items.clone()), last).cloned();
        if let Some(t) = target
            && let Some(i) = items.iter().position(|el| *el == t)
        {
            items.remove(i);
        }
    }
}

fn step_mut<'a>(cur: &'a mut Value, pe: &str) -> Option<&'a mut Value> {
    if let Some(name) = pe.strip_prefix("f:") {
        return cur.as_object_mut()?.get_mut(name);
    }
    let target = step(cur, pe)?.clone();
    cur.as_array_mut()?.iter_mut().find(|el| **el == target)
}

/// `.spec.containers[name="c"].image`: how upstream prints a field path in conflicts.
pub fn display(path: &[PathElement]) -> String {
    let mut out = String::new();
    for pe in path {
        if let Some(name) = pe.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(k) = pe.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = pe.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        }
    }
    out
}

/// Build the `FieldsV1` JSON of a set of paths.
pub fn to_fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for pe in p {
            let entry = cur.entry(pe.clone()).or_insert_with(|| json!({}));
            cur = entry.as_object_mut().expect("built as objects");
        }
    }
    Value::Object(root)
}

/// Read a `FieldsV1` JSON into its member paths (leaves, and `.` entries).
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn walk(m: &Map<String, Value>, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        for (k, child) in m {
            path.push(k.clone());
            match child.as_object() {
                Some(c) if !c.is_empty() => walk(c, path, out),
                _ => {
                    out.insert(path.clone());
                }
            }
            path.pop();
        }
    }
    let mut out = BTreeSet::new();
    if let Some(m) = v.as_object() {
        walk(m, &mut Vec::new(), &mut out);
    }
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub struct Manager {
    /// `manager`.
    pub name: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `apiVersion` the fields were set through.
    pub api_version: String,
    /// `subresource` (`status`) or empty.
    pub subresource: String,
    /// `time`.
    pub time: Option<String>,
    /// The owned fields.
    pub fields: BTreeSet<FieldPath>,
}

/// The entries of `metadata.managedFields`.
pub fn managers(obj: &Value) -> Vec<Manager> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Manager {
                    name: e.get("manager").and_then(Value::as_str).unwrap_or("").to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    time: e.get("time").and_then(Value::as_str).map(str::to_string),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Write `entries` into `metadata.managedFields` (empty ones dropped).
pub fn set_managers(obj: &mut Value, entries: &[Manager]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|m| !m.fields.is_empty())
        .map(|m| entry_json(m, to_fields_v1(&m.fields)))
        .collect();
    put_managed_fields(obj, list);
}

/// One `managedFields` entry of `m`, its fields given as `FieldsV1`.
fn entry_json(m: &Manager, fields_v1: Value) -> Value {
    let mut e = json!({
        "manager": m.name,
        "operation": m.operation,
        "apiVersion": m.api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1,
    });
    if let Some(t) = &m.time {
        e["time"] = json!(t);
    }
    if !m.subresource.is_empty() {
        e["subresource"] = json!(m.subresource);
    }
    e
}

/// Set `metadata.managedFields` to `list`, or remove it when empty.
fn put_managed_fields(obj: &mut Value, list: Vec<Value>) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// What a write is, for managed fields.
pub struct Context<'a> {
    /// `"<group>/<Kind>"`, for list strategies.
    pub kind_key: &'a str,
    /// The object's apiVersion.
    pub api_version: &'a str,
    /// The manager's name.
    pub manager: &'a str,
    /// `status` for status-subresource writes, else empty.
    pub subresource: &'a str,
    /// Top-level fields outside this endpoint's reach (`status` for the main resource of kinds with a
    /// status subresource, `spec` for their status endpoint).
    pub skip: &'a [&'a str],
    /// Now, RFC 3339.
    pub now: &'a str,
}

/// Record a non-apply write (create, update, patch): the fields it changed become the manager's (an
/// `Update` entry), and leave every other manager. Nothing changes if no field changed, so a no-op write
/// stays a no-op. A write that itself sets `managedFields` (kubectl's apply migration) is taken as is.
pub fn record_update(old: Option<&Value>, new: &mut Value, ctx: &Context<'_>) {
    let old_managed = old.and_then(|o| o.pointer("/metadata/managedFields")).cloned();
    let new_managed = new.pointer("/metadata/managedFields").cloned();
    // A body without managedFields keeps the stored ones (upstream); one that sets them is taken as is.
    if new_managed.as_ref().is_some_and(|n| !n.is_null()) && (old.is_none() || new_managed != old_managed) {
        return;
    }
    if old.is_none() {
        // A create: every field is the creator's, in one walk.
        let fields = fields_v1_of(new, ctx.kind_key, ctx.skip);
        let mine = Manager {
            name: ctx.manager.to_string(),
            operation: "Update".into(),
            api_version: ctx.api_version.to_string(),
            subresource: ctx.subresource.to_string(),
            time: Some(ctx.now.to_string()),
            fields: BTreeSet::new(),
        };
        let has_fields = fields.as_object().is_some_and(|m| !m.is_empty());
        put_managed_fields(
            new,
            if has_fields {
                vec![entry_json(&mine, fields)]
            } else {
                Vec::new()
            },
        );
        return;
    }
    let after = with_map_entries(ctx.kind_key, field_paths(new, ctx.kind_key, ctx.skip));
    let before = old
        .map(|o| with_map_entries(ctx.kind_key, field_paths(o, ctx.kind_key, ctx.skip)))
        .unwrap_or_default();
    // A list element's own entry (`.`) changes only when the element appears; its fields speak for
    // themselves.
    let changed: BTreeSet<FieldPath> = after
        .iter()
        .filter(|p| {
            let is_element = p.last().is_some_and(|l| l == ".");
            !before.contains(*p) || (!is_element && old.is_some_and(|o| value_at(o, p) != value_at(new, p)))
        })
        .cloned()
        .collect();
    let removed: BTreeSet<FieldPath> = before.difference(&after).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        if let Some(m) = old_managed {
            new["metadata"]["managedFields"] = m;
        }
        return;
    }
    let mut entries = old.map(managers).unwrap_or_default();
    for e in entries.iter_mut() {
        e.fields.retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    let mine = entries
        .iter_mut()
        .find(|e| e.name == ctx.manager && e.operation == "Update" && e.subresource == ctx.subresource);
    match mine {
        Some(e) => {
            e.fields.extend(changed);
            e.time = Some(ctx.now.to_string());
            e.api_version = ctx.api_version.to_string();
        }
        None => entries.push(Manager {
            name: ctx.manager.to_string(),
            operation: "Update".into(),
            api_version: ctx.api_version.to_string(),
            subresource: ctx.subresource.to_string(),
            time: Some(ctx.now.to_string()),
            fields: changed,
        }),
    }
    set_managers(new, &entries);
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// Its apiVersion.
    pub api_version: String,
    /// The field, as upstream prints it.
    pub field: String,
}

/// kubectl's client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The manager `kubectl apply --server-side` uses: the only one upstream upgrades from client-side apply.
const KUBECTL: &str = "kubectl";

/// Apply `applied` (the manager's whole intent) to `current` (None: the object does not exist yet).
/// Returns the new object with its managed fields, or the conflicts.
///
/// For the `kubectl` manager this is upstream's client-side to server-side apply upgrade
/// (`managedfields/internal/lastappliedmanager.go` and `lastappliedupdater.go`): conflicts on fields the
/// last-applied annotation holds with the live value are no conflicts (the apply takes them over, as if
/// forced), and an object that has the annotation gets it rewritten to the applied configuration, so a
/// later client-side apply computes its patch from what was applied last.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    force: bool,
    ctx: &Context<'_>,
) -> Result<Value, Vec<Conflict>> {
    let result = match apply_as_asked(current, applied, force, ctx) {
        Err(conflicts) if ctx.manager == KUBECTL => {
            let Some(allowed) = current.and_then(|c| allowed_from_last_applied(c, ctx)) else {
                return Err(conflicts);
            };
            let rest: Vec<Conflict> = conflicts
                .into_iter()
                .filter(|c| !allowed.contains(&c.field))
                .collect();
            if !rest.is_empty() {
                return Err(rest);
            }
            apply_as_asked(current, applied, true, ctx)
        }
        other => other,
    };
    let mut obj = result?;
    if ctx.manager == KUBECTL && obj.pointer(&last_applied_pointer()).is_some() {
        let value = build_last_applied(applied);
        obj["metadata"]["annotations"][LAST_APPLIED] = Value::String(value);
    }
    Ok(obj)
}

fn last_applied_pointer() -> String {
    format!("/metadata/annotations/{}", LAST_APPLIED.replace('/', "~1"))
}

/// upstream `allowedConflictsFromLastApplied`: the fields of the last-applied configuration whose value
/// the live object still has (printed as conflicts print them). None without a usable annotation.
fn allowed_from_last_applied(live: &Value, ctx: &Context<'_>) -> Option<BTreeSet<String>> {
    let text = live.pointer(&last_applied_pointer())?.as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(ctx.api_version) {
        return None;
    }
    Some(
        field_paths(&last, ctx.kind_key, ctx.skip)
            .into_iter()
            .filter(|p| {
                let live_value = value_at(live, p);
                live_value.is_some()
                    && (p.last().is_some_and(|l| l == ".") || live_value == value_at(&last, p))
            })
            .map(|p| display(&p))
            .collect(),
    )
}

/// upstream `buildLastApplied`: the applied configuration without the annotation itself, as JSON with
/// Go's encoder's trailing newline (what kubectl writes there too).
fn build_last_applied(applied: &Value) -> String {
    let mut obj = applied.clone();
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    let mut text = serde_json::to_string(&obj).expect("JSON serialises");
    text.push('\n');
    text
}

fn apply_as_asked(
    current: Option<&Value>,
    applied: &Value,
    force: bool,
    ctx: &Context<'_>,
) -> Result<Value, Vec<Conflict>> {
    let wanted = field_paths(applied, ctx.kind_key, ctx.skip);
    let Some(current) = current else {
        let mut obj = applied.clone();
        set_managers(&mut obj, &[apply_entry(ctx, wanted)]);
        return Ok(obj);
    };
    let mut entries = managers(current);
    let previous: BTreeSet<FieldPath> = entries
        .iter()
        .find(|e| e.name == ctx.manager && e.operation == "Apply" && e.subresource == ctx.subresource)
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    // Conflicts: a field we want that another manager set to something else.
    let mut conflicts = Vec::new();
    for e in entries.iter() {
        if e.name == ctx.manager && e.operation == "Apply" && e.subresource == ctx.subresource {
            continue;
        }
        for p in e.fields.intersection(&wanted) {
            if p.last().is_some_and(|l| l == ".") {
                continue;
            }
            if value_at(current, p) != value_at(applied, p) {
                conflicts.push(Conflict {
                    manager: e.name.clone(),
                    api_version: e.api_version.clone(),
                    field: display(p),
                });
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    // Forced or agreeing: the fields are ours now, not theirs (shared when the values agree, as upstream).
    if force {
        for e in entries.iter_mut() {
            if !(e.name == ctx.manager && e.operation == "Apply") {
                e.fields.retain(|p| {
                    !wanted.contains(p)
                        || p.last().is_some_and(|l| l == ".")
                        || value_at(current, p) == value_at(applied, p)
                });
            }
        }
    }

    let mut merged = current.clone();
    merge_into(&mut merged, applied, ctx.kind_key, &mut Vec::new());
    // Fields applied last time and not now, that no one else owns, go.
    let others: BTreeSet<FieldPath> = entries
        .iter()
        .filter(|e| !(e.name == ctx.manager && e.operation == "Apply" && e.subresource == ctx.subresource))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut gone: Vec<&FieldPath> = previous
        .difference(&wanted)
        .filter(|p| !others.contains(*p))
        .collect();
    // Shorter paths first: removing a list element makes its fields' removals moot.
    gone.sort_by_key(|p| p.len());
    for p in gone {
        remove_at(&mut merged, p);
    }
    // An apply that changes nothing, owning what it owned, leaves the object alone: not even the entry's
    // time moves (upstream's managed-fields updater keeps the old timestamp when nothing else changed), so a
    // repeated apply is not a write.
    if merged == *current && previous == wanted && !force {
        return Ok(merged);
    }
    entries
        .retain(|e| !(e.name == ctx.manager && e.operation == "Apply" && e.subresource == ctx.subresource));
    entries.push(apply_entry(ctx, wanted));
    set_managers(&mut merged, &entries);
    Ok(merged)
}

fn apply_entry(ctx: &Context<'_>, fields: BTreeSet<FieldPath>) -> Manager {
    Manager {
        name: ctx.manager.to_string(),
        operation: "Apply".into(),
        api_version: ctx.api_version.to_string(),
        subresource: ctx.subresource.to_string(),
        time: Some(ctx.now.to_string()),
        fields,
    }
}

/// Merge an applied configuration into a live object: maps merge, keyed lists merge by key, set lists
/// union, everything else is replaced by the applied value.
fn merge_into<'a>(target: &mut Value, applied: &'a Value, kind_key: &str, names: &mut Vec<&'a str>) {
    match (target, applied) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, av) in a {
                if names.is_empty() && (k == "apiVersion" || k == "kind") {
                    t.insert(k.clone(), av.clone());
                    continue;
                }
                if av.is_null() {
                    t.remove(k);
                    continue;
                }
                names.push(k.as_str());
                match t.get_mut(k) {
                    Some(tv) if tv.is_object() && av.is_object() => merge_into(tv, av, kind_key, names),
                    Some(tv) if tv.is_array() && av.is_array() => merge_list(tv, av, kind_key, names),
                    _ => {
                        t.insert(k.clone(), av.clone());
                    }
                }
                names.pop();
            }
        }
        (t, a) => *t = a.clone(),
    }
}

fn merge_list<'a>(target: &mut Value, applied: &'a Value, kind_key: &str, names: &mut Vec<&'a str>) {
    let (Some(t), Some(a)) = (target.as_array_mut(), applied.as_array()) else {
        return;
    };
    match list_strategy(kind_key, names) {
        ListStrategy::MergeByKey(keys) => {
            for el in a {
                let key = key_of(el, keys);
                let pos = key.as_ref().and_then(|k| {
                    let pe = k.clone();
                    t.iter().position(|cur| key_of(cur, keys).as_ref() == Some(&pe))
                });
                match pos {
                    Some(i) => merge_into(&mut t[i], el, kind_key, names),
                    None => t.push(el.clone()),
                }
            }
        }
        ListStrategy::Set => {
            for el in a {
                if !t.contains(el) {
                    t.push(el.clone());
                }
            }
        }
        ListStrategy::Replace => *t = a.clone(),
    }
}

#[cfg(test)]
mod tests;
