//! The registry: per-kind strategy over storage (upstream `pkg/registry` and the generic store).
//!
//! `http` hands each request here as an operation on a [`ResourceInfo`]; the registry decodes, defaults,
//! validates, applies upstream's metadata rules (server-owned fields, optimistic concurrency, no-op writes,
//! finalizers, graceful deletion) and decides, under the storage's single writer, what is written.

pub mod apps;
pub mod batch;
pub mod builtin_kinds;
pub mod custom;
pub mod disruption_budget;
pub mod event_ttl;
pub mod events;
pub mod eviction;
pub mod gc;
pub mod ipaddress;
pub mod limit_range;
pub mod namespace;
pub mod nodeport;
pub mod pod_strategy;
pub mod quota;
pub mod rbac;
pub mod replication;
pub mod resources;
pub mod service;
pub mod serviceaccount_admission;
pub mod volume;
pub mod workload;

pub use api::{pod, validation};

use std::sync::Arc;

use serde_json::{Map, Value, json};

pub use resources::{ResourceInfo, Subresource};

use crate::error::{ApiError, FieldError};
use crate::patch;
use crate::selector::{FieldSelector, Fields, LabelSelector};
use crate::storage::{
    Decision, ListResult, Reusable, Storage, StoreError, Stored, WatchFrom, WatchStart, Written,
};

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Closed => ApiError::unavailable("the server is shutting down"),
            StoreError::Unavailable(why) => ApiError::unavailable(why),
            // upstream answers etcd's "mvcc: database space exceeded" with a 500; a 507 tells a full disk
            // from a server bug, and the server takes writes again by itself once space is freed.
            e @ StoreError::NoSpace { .. } => ApiError::insufficient_storage(format!(
                "storage is full: {e}; writes are refused until space is freed"
            )),
            StoreError::Conflict { key } => {
                // `<group>/<resource>/<namespace>/<name>` (cluster-scoped: no namespace).
                let mut parts = key.split('/');
                let group = parts.next().unwrap_or_default();
                let resource = parts.next().unwrap_or_default();
                let name = key.rsplit('/').next().unwrap_or_default();
                ApiError::stale(resource, group, name)
            }
            other => ApiError::internal(other),
        }
    }
}

/// The namespaces every cluster has from its first start.
pub const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: compute, persist nothing.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// Warnings for the response's `Warning` headers (unknown fields under `Warn`).
    pub warnings: Arc<std::sync::Mutex<Vec<String>>>,
}

/// `fieldValidation`: what to do with fields the kind does not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn (upstream's default when the parameter is absent).
    #[default]
    Warn,
    /// Refuse the request (kubectl sends this by default).
    Strict,
}

impl FieldValidation {
    /// Parse the query value; `None` (absent) is Warn.
    pub fn parse(s: Option<&str>) -> Result<FieldValidation, String> {
        match s {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            )),
        }
    }
}

/// Paths (`spec.foo`, `spec.containers[0].bar`) of fields in `input` that decoding dropped from `output`.
pub fn unknown_fields(input: &Value, output: &Value) -> Vec<String> {
    /// One step of the path: a field name or a list index. The path is spelled out only for a field
    /// that was dropped, so a body without unknown fields costs no string.
    enum Step<'a> {
        Field(&'a str),
        Index(usize),
    }
    fn spell(path: &[Step<'_>]) -> String {
        let mut s = String::new();
        for step in path {
            match step {
                Step::Field(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Step::Index(n) => {
                    s.push('[');
                    s.push_str(&n.to_string());
                    s.push(']');
                }
            }
        }
        s
    }
    fn walk<'a>(input: &'a Value, output: &Value, path: &mut Vec<Step<'a>>, out: &mut Vec<String>) {
        match (input, output) {
            (Value::Object(i), Value::Object(o)) => {
                for (k, v) in i {
                    if v.is_null() {
                        continue;
                    }
                    path.push(Step::Field(k));
                    match o.get(k) {
                        None => out.push(spell(path)),
                        Some(ov) => walk(v, ov, path, out),
                    }
                    path.pop();
                }
            }
            (Value::Array(i), Value::Array(o)) => {
                for (n, (a, b)) in i.iter().zip(o).enumerate() {
                    path.push(Step::Index(n));
                    walk(a, b, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, output, &mut Vec::new(), &mut out);
    out
}

/// `DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy` and `orphanDependents`: what happens to the object's dependents.
    pub policy: gc::Policy,
}

/// Selection of a list or watch.
#[derive(Default)]
pub struct Selection {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
}

impl Selection {
    /// Whether the object is selected.
    pub fn matches(&self, info: &ResourceInfo, obj: &(impl Fields + ?Sized)) -> bool {
        let labels_ok = self
            .labels
            .as_ref()
            .is_none_or(|l| l.is_empty() || l.matches(obj.labels()));
        labels_ok
            && self
                .fields
                .as_ref()
                .is_none_or(|f| f.is_empty() || f.matches(info.group, info.plural, obj))
    }
}

/// The patch kinds served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
}

/// Now as upstream's `metav1.Time`: RFC 3339, whole seconds, UTC.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `now_rfc3339` `seconds` from now, saturating at the last representable second (a grace period of
/// `i64::MAX` seconds is accepted, as upstream accepts it; Go's time arithmetic wraps instead).
fn rfc3339_in(seconds: i64) -> String {
    let t = jiff::Timestamp::now()
        .saturating_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(jiff::Timestamp::MAX);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta(obj: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    obj.get("metadata")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata is an object")
}

fn object_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    obj.as_object_mut().expect("an object")
}

/// Give `new` the stored object's value of each of `fields`, or none where the stored one has none: what
/// a write through one endpoint may not change.
fn keep(old: Option<&Map<String, Value>>, new: &mut Map<String, Value>, fields: &[&str]) {
    for f in fields {
        match old.and_then(|o| o.get(*f)) {
            Some(v) => new.insert((*f).to_string(), v.clone()),
            None => new.remove(*f),
        };
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).get(field).and_then(Value::as_str)
}

/// Drop what Go's `omitempty` would leave out of metadata (clients rely on absent, not empty).
fn normalise(obj: &mut Value) {
    let m = meta_mut(obj);
    for f in [
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
        "managedFields",
    ] {
        let empty = match m.get(f) {
            Some(Value::Null) => true,
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            _ => false,
        };
        if empty {
            m.remove(f);
        }
    }
    m.retain(|_, v| !v.is_null());
    m.remove("selfLink");
}

fn has_finalizers(obj: &Value) -> bool {
    meta(obj)
        .get("finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// The registry over one storage.
#[derive(Clone)]
pub struct Registry {
    storage: Storage,
    /// Serialises service IP allocation (scan + create).
    allocator: Arc<tokio::sync::Mutex<()>>,
    /// Run the ServiceAccount admission on pod creation ([`serviceaccount_admission`]).
    service_account_admission: bool,
}

impl Registry {
    /// A registry over `storage`.
    pub fn new(storage: Storage) -> Registry {
        Registry {
            storage,
            allocator: Arc::new(tokio::sync::Mutex::new(())),
            service_account_admission: false,
        }
    }

    /// Switch the ServiceAccount admission on pod creation on or off (off by default: a registry without
    /// a controller manager has no `default` ServiceAccounts).
    pub fn with_service_account_admission(mut self, on: bool) -> Registry {
        self.service_account_admission = on;
        self
    }

    /// The storage below.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The allocation lock, for the writes of Services: their cluster IPs and node ports are checked and
    /// chosen under it.
    async fn service_allocation(&self, info: &ResourceInfo) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if (info.group, info.plural) == ("", "services") {
            Some(self.allocator.lock().await)
        } else {
            None
        }
    }

    /// Create the system namespaces and the `kubernetes` service if missing (first start).
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        // Another API server on the same etcd may be making the same objects: a lost race is a Conflict,
        // and the next round finds its objects in place.
        let mut rounds = 0;
        loop {
            match self.bootstrap_once().await {
                Err(e) if e.reason == "Conflict" && rounds < 5 => {
                    rounds += 1;
                    self.storage.catch_up().await?;
                }
                other => return other,
            }
        }
    }

    async fn bootstrap_once(&self) -> Result<(), ApiError> {
        let ns = resources::find("", "v1", "namespaces").expect("namespaces are served");
        for name in SYSTEM_NAMESPACES {
            if self.storage.get(&ns.key(None, name)).is_none() {
                let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
                match self.create(ns, None, body, &WriteOptions::default()).await {
                    Ok(_) => {}
                    Err(e) if e.reason == "AlreadyExists" => {}
                    Err(e) => return Err(e),
                }
            }
        }
        service::bootstrap(self).await?;
        ipaddress::repair(self).await?;
        nodeport::repair(self).await?;
        builtin_kinds::bootstrap(self).await?;
        rbac::bootstrap(self).await
    }

    fn decode(&self, info: &ResourceInfo, body: Value, opts: &WriteOptions) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: the body is not a JSON object",
                info.kind, info.version, info.kind
            )));
        }
        let api_version = info.api_version();
        if let Some(v) = body.get("apiVersion").and_then(Value::as_str)
            && v != api_version
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
        if let Some(k) = body.get("kind").and_then(Value::as_str)
            && k != info.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )));
        }
        let mut value = info.canonical_form(&body).map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: {e}",
                info.kind, info.version, info.kind
            ))
        })?;
        if opts.field_validation != FieldValidation::Ignore {
            let unknown = unknown_fields(&body, &value);
            if !unknown.is_empty() {
                let each: Vec<String> = unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
                if opts.field_validation == FieldValidation::Strict {
                    return Err(ApiError::bad_request(format!(
                        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
                        info.kind,
                        info.version,
                        info.kind,
                        each.join(", ")
                    )));
                }
                opts.warnings
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(each);
            }
        }
        if let Some(c) = crate::crd::custom(info) {
            custom::prune_and_default(info, &c, &mut value, opts)?;
        }
        value["apiVersion"] = json!(api_version);
        value["kind"] = json!(info.kind);
        Ok(value)
    }

    /// One object.
    pub fn get(&self, info: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Arc<Stored>, ApiError> {
        self.storage
            .get(&info.key(ns, name))
            .map(|o| view(info, &o))
            .ok_or_else(|| ApiError::not_found(info.plural, info.group, name))
    }

    /// A page of objects.
    pub fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        sel: &Selection,
        limit: Option<usize>,
        start: Option<&str>,
    ) -> ListResult {
        let prefix = info.prefix(ns);
        match info.alias {
            None if crate::crd::custom(info).is_some() => {
                let mut l = self.storage.list(&prefix, start, limit, |o| sel.matches(info, o));
                if l.items.iter().any(|o| custom::other_version(info, &**o)) {
                    l.items = l.items.iter().map(|o| view(info, o)).collect();
                }
                l
            }
            None => self.storage.list(&prefix, start, limit, |o| sel.matches(info, o)),
            Some(a) => {
                let mut l = self.storage.list(&prefix, start, limit, |o| {
                    sel.matches(info, &(a.from_storage)(&o.value()))
                });
                l.items = l.items.iter().map(|o| view(info, o)).collect();
                l
            }
        }
    }

    /// Start a watch.
    pub fn watch(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, crate::storage::TooOld> {
        self.storage.watch(&info.prefix(ns), from)
    }

    fn check_namespace(&self, info: &ResourceInfo, ns: &str, name: &str) -> Result<(), ApiError> {
        const TERMINATING: &[u8] = b"\"deletionTimestamp\"";
        let ns_info = resources::find("", "v1", "namespaces").expect("namespaces are served");
        match self.storage.get(&ns_info.key(None, ns)) {
            None => Err(ApiError::not_found("namespaces", "", ns)),
            // Parsed only when the bytes may hold the field (a namespace's JSON is parsed on every create
            // otherwise).
            Some(n)
                if n.bytes.windows(TERMINATING.len()).any(|w| w == TERMINATING)
                    && meta(&n.value()).contains_key("deletionTimestamp") =>
            {
                Err(ApiError::forbidden(
                    info.plural,
                    info.group,
                    name,
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// Create (POST). `ns` is the namespace from the URL.
    pub async fn create(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        if let Some(a) = info.alias {
            let decoded = self.decode(info, body, opts)?;
            let stored = Box::pin(self.create(stored_info(a), ns, (a.to_storage)(&decoded), opts)).await?;
            return Ok(view(info, &stored));
        }
        let custom = crate::crd::custom(info);
        if custom.as_ref().is_some_and(|c| c.terminating) {
            return Err(custom::terminating_error());
        }
        let mut obj = self.decode(info, body, opts)?;
        {
            let m = meta_mut(&mut obj);
            if info.namespaced {
                let url_ns = ns.unwrap_or("default");
                match m.get("namespace").and_then(Value::as_str) {
                    Some(b) if !b.is_empty() && b != url_ns => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    _ => {
                        m.insert("namespace".into(), json!(url_ns));
                    }
                }
            } else {
                m.remove("namespace");
            }
            if m.get("resourceVersion")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
            {
                return Err(ApiError::bad_request(
                    "resourceVersion should not be set on objects to be created",
                ));
            }
            let name = m.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty()
                && let Some(prefix) = m
                    .get("generateName")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
            {
                let generated = generate_name(prefix);
                m.insert("name".into(), json!(generated));
            }
            for f in [
                "uid",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "resourceVersion",
            ] {
                m.remove(f);
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now_rfc3339()));
            if info.tracks_generation {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        if self.service_account_admission && (info.group, info.plural) == ("", "pods") {
            // NamespaceLifecycle runs first upstream: a missing namespace is a 404, not a wait for its
            // default ServiceAccount.
            let ns = meta_str(&obj, "namespace").unwrap_or("default").to_string();
            self.check_namespace(info, &ns, meta_str(&obj, "name").unwrap_or(""))?;
            self.admit_service_account(&ns, &mut obj).await?;
        }
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let ns = if info.namespaced {
            meta_str(&obj, "namespace").map(str::to_string)
        } else {
            None
        };

        // Held until the Service is written.
        let allocation = self.service_allocation(info).await;
        let requested = allocation.is_some().then(|| service::Requested::of(&obj));
        self.prepare_create(info, &mut obj)?;
        if (info.group, info.plural) == ("", "pods") {
            // LimitRanger, mutating: after the scheme defaults, as upstream's admission runs after decoding.
            self.limit_ranger_defaults(&mut obj);
        }
        normalise(&mut obj);
        crate::rbac::escalation::check(self, info, &obj, None)?;
        {
            let now = now_rfc3339();
            let kind_key = format!("{}/{}", info.group, info.kind);
            let api_version = info.api_version();
            let ctx = managed_context(info, &kind_key, &api_version, opts, None, &now);
            patch::apply::record_update(None, &mut obj, &ctx);
        }
        let errors = self.validate(info, &obj, None, None);
        if !errors.is_empty() {
            return Err(ApiError::invalid(info.kind, info.group, &name, &errors));
        }
        if let Some(ns) = &ns {
            self.check_namespace(info, ns, &name)?;
        }
        if let Some(c) = &custom {
            custom::to_storage_version(info, c, &mut obj);
        }
        // Validating admission: LimitRanger, then ResourceQuota (upstream's order).
        self.limit_ranger_validate(info, &obj)?;
        // Events are not subject to quota (upstream's ignored resources).
        if info.plural != "events" {
            self.admit_quota(info, &obj, opts.dry_run).await?;
        }
        let key = info.key(ns.as_deref(), &name);
        let dry_run = opts.dry_run;
        let service_ns = ns.as_deref().unwrap_or("default");
        let reserved = match &requested {
            Some(requested) if !dry_run && self.storage.get(&key).is_none() => {
                Some(service::reserve(self, &mut obj, service_ns, requested).await?)
            }
            _ => None,
        };
        let mut obj = Reusable::new(obj, &self.storage);
        let written = self
            .storage
            .write(&key, |current| {
                if let Some(cur) = current {
                    if meta(&cur.value()).contains_key("deletionTimestamp") {
                        let mut e = ApiError::already_exists(info.plural, info.group, &name);
                        e.message = format!("object is being deleted: {}", e.message);
                        return Err(e);
                    }
                    return Err(ApiError::already_exists(info.plural, info.group, &name));
                }
                Ok(if dry_run {
                    Decision::Preview(obj.take())
                } else {
                    Decision::Put(obj.take())
                })
            })
            .await;
        let written = match written {
            Ok(w) => w,
            Err(e) => {
                if let Some(reserved) = reserved {
                    reserved.release(self, service_ns, &name).await;
                }
                return Err(e);
            }
        };
        Ok(view(info, &written.object))
    }

    fn prepare_create(&self, info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
        match (info.group, info.plural) {
            ("", "pods") => pod_strategy::prepare_create(obj).map_err(ApiError::bad_request),
            ("", "namespaces") => {
                namespace::prepare_create(obj);
                Ok(())
            }
            ("", "services") => service::prepare_create(self, obj),
            ("apps", plural) if apps::handles(plural) => {
                apps::prepare_create(plural, obj);
                Ok(())
            }
            ("batch", plural) if batch::handles(plural) => {
                batch::prepare_create(plural, obj);
                Ok(())
            }
            (group, plural) if volume::handles(group, plural) => {
                volume::prepare_create(group, plural, obj, &now_rfc3339());
                Ok(())
            }
            (group, plural) if builtin_kinds::handles(group, plural) => {
                builtin_kinds::prepare_create(group, plural, obj);
                Ok(())
            }
            (group, plural) if rbac::handles(group, plural) => {
                rbac::prepare(plural, obj);
                Ok(())
            }
            (group, plural) if replication::handles(group, plural) => {
                replication::prepare_create(obj);
                Ok(())
            }
            (group, plural) if limit_range::handles(group, plural) => {
                limit_range::default(obj);
                Ok(())
            }
            custom::CRDS => {
                crate::crd::definition::set_defaults(obj);
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
                Ok(())
            }
            _ => {
                if info.has_status
                    && let Some(o) = obj.as_object_mut()
                {
                    // Upstream strategies reset status on create: it is written by controllers, later.
                    o.remove("status");
                }
                Ok(())
            }
        }
    }

    fn validate(
        &self,
        info: &ResourceInfo,
        obj: &Value,
        old: Option<&Value>,
        subresource: Option<&str>,
    ) -> Vec<FieldError> {
        let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta = obj
            .get("metadata")
            .and_then(|m| api::tree::object_meta(m).ok())
            .unwrap_or_default();
        let mut errors = validation::validate_object_meta(&meta, info.namespaced, info.name_rule);
        match (info.group, info.plural) {
            ("", "pods") => errors.extend(pod_strategy::validate(obj, old, subresource)),
            ("", "configmaps") => errors.extend(validation::validate_configmap(obj)),
            ("", "secrets") => errors.extend(validation::validate_secret(obj)),
            ("apps", plural) if apps::handles(plural) => {
                errors.extend(apps::validate(plural, obj, old, subresource == Some("status")))
            }
            ("batch", plural) if batch::handles(plural) => {
                errors.extend(batch::validate(plural, obj, old, subresource == Some("status")))
            }
            (group, plural) if replication::handles(group, plural) => {
                errors.extend(replication::validate(obj, subresource == Some("status")))
            }
            (group, plural) if disruption_budget::handles(group, plural) => {
                errors.extend(disruption_budget::validate(obj, subresource == Some("status")))
            }
            (group, plural) if quota::handles(group, plural) => {
                errors.extend(quota::validate(obj, subresource == Some("status")))
            }
            (group, plural) if limit_range::handles(group, plural) => {
                errors.extend(limit_range::validate(obj))
            }
            (group, plural) if builtin_kinds::handles(group, plural) => {
                errors.extend(builtin_kinds::validate(group, plural, obj, old, subresource))
            }
            (group, plural) if rbac::handles(group, plural) => {
                errors.extend(rbac::validate(plural, obj, old))
            }
            custom::CRDS => errors.extend(custom::validate_crd(&self.storage, obj)),
            _ => {
                if let Some(c) = crate::crd::custom(info) {
                    errors.extend(custom::validate(&c, obj, old));
                }
            }
        }
        errors
    }

    /// Update (PUT) of the object or of its `status` subresource.
    pub async fn update(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        if let Some(a) = info.alias {
            let decoded = self.decode(info, body, opts)?;
            let core = (a.to_storage)(&decoded);
            let stored = Box::pin(self.update(stored_info(a), ns, name, subresource, core, opts)).await?;
            return Ok(view(info, &stored));
        }
        let new = self.decode(info, body, opts)?;
        self.check_identity(info, ns, name, &new)?;
        let key = info.key(ns, name);
        let mut new = Reusable::new(new, &self.storage);
        let _alloc = self.service_allocation(info).await;
        let written = self
            .storage
            .write(&key, |current| {
                let Some(old) = current else {
                    return Err(ApiError::not_found(info.plural, info.group, name));
                };
                self.decide_update(info, old, new.take(), subresource, opts)
            })
            .await?;
        service::after_write(self, info, &written).await;
        Ok(view(info, &written.object))
    }

    fn check_identity(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        new: &Value,
    ) -> Result<(), ApiError> {
        if let Some(n) = meta_str(new, "name")
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        if info.namespaced
            && let Some(b) = meta_str(new, "namespace")
            && !b.is_empty()
            && Some(b) != ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        Ok(())
    }

    /// Upstream's update path (`BeforeUpdate` + strategy) as a pure decision over the old and new object.
    fn decide_update(
        &self,
        info: &ResourceInfo,
        old: &Stored,
        mut new: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<Decision, ApiError> {
        let dry_run = opts.dry_run;
        let old_value = old.value();
        let name = meta_str(&old_value, "name").unwrap_or("").to_string();
        let old_rv = old.revision.to_string();
        if let Some(rv) = meta_str(&new, "resourceVersion").filter(|s| !s.is_empty())
            && rv != old_rv
        {
            return Err(ApiError::stale(info.plural, info.group, &name));
        }
        let old_uid = meta_str(&old_value, "uid").unwrap_or("").to_string();
        if let Some(uid) = meta_str(&new, "uid").filter(|s| !s.is_empty())
            && uid != old_uid
        {
            return Err(ApiError::conflict(
                info.plural,
                info.group,
                &name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: \
                     Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}",
                    info.key(meta_str(&old_value, "namespace"), &name)
                ),
            ));
        }
        {
            let m = meta_mut(&mut new);
            keep(
                Some(meta(&old_value)),
                m,
                &[
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "namespace",
                ],
            );
            m.insert("name".into(), json!(name));
            m.insert("resourceVersion".into(), json!(old_rv));
        }
        // A CSR's `approval` is a status subresource too (of the conditions alone).
        let status_update = matches!(subresource, Some("status" | "approval"));
        if status_update {
            // The status endpoint changes status (and metadata), never spec.
            keep(old_value.as_object(), object_mut(&mut new), &["spec"]);
            keep(Some(meta(&old_value)), meta_mut(&mut new), &["ownerReferences"]);
        } else if info.has_status {
            keep(old_value.as_object(), object_mut(&mut new), &["status"]);
        }
        match (info.group, info.plural) {
            ("", "pods") => pod_strategy::prepare_update(&mut new, &old_value, subresource)
                .map_err(ApiError::bad_request)?,
            ("", "namespaces") => namespace::prepare_update(&mut new, &old_value, subresource),
            ("", "services") if !status_update => service::prepare_update(self, &mut new, &old_value)?,
            ("apps", plural) if apps::handles(plural) => {
                apps::prepare_update(plural, &mut new, &old_value, status_update)
            }
            ("batch", plural) if batch::handles(plural) => batch::prepare_update(plural, &mut new),
            (group, plural) if volume::handles(group, plural) => {
                volume::prepare_update(group, plural, &mut new, &old_value, status_update, &now_rfc3339())
            }
            (group, plural) if builtin_kinds::handles(group, plural) => {
                builtin_kinds::prepare_update(group, plural, &mut new, &old_value, subresource)
            }
            (group, plural) if rbac::handles(group, plural) => rbac::prepare(plural, &mut new),
            custom::CRDS if !status_update => crate::crd::definition::set_defaults(&mut new),
            (group, plural) if replication::handles(group, plural) => replication::default(&mut new),
            (group, plural) if limit_range::handles(group, plural) => limit_range::default(&mut new),
            _ => {}
        }
        let custom = crate::crd::custom(info);
        if let Some(c) = &custom {
            custom::to_storage_version(info, c, &mut new);
        }
        normalise(&mut new);
        crate::rbac::escalation::check(self, info, &new, Some(&old_value))?;
        let spec_changed = match (info.group, info.plural) {
            ("apps", plural) => apps::bumps_generation(plural, &new, &old_value),
            ("batch", _) => batch::bumps_generation(&new, &old_value),
            _ if custom.is_some() => custom::bumps_generation(info, &new, &old_value),
            _ => new.get("spec") != old_value.get("spec"),
        };
        if info.tracks_generation && !status_update && spec_changed {
            let g = meta(&old_value)
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let now = now_rfc3339();
        let kind_key = format!("{}/{}", info.group, info.kind);
        let api_version = info.api_version();
        patch::apply::record_update(
            Some(&old_value),
            &mut new,
            &managed_context(info, &kind_key, &api_version, opts, subresource, &now),
        );
        let errors = self.validate(info, &new, Some(&old_value), subresource);
        if !errors.is_empty() {
            return Err(ApiError::invalid(info.kind, info.group, &name, &errors));
        }
        if new == old_value {
            return Ok(Decision::Keep);
        }
        let m = meta(&new);
        if m.contains_key("deletionTimestamp")
            && !has_finalizers(&new)
            && (info.plural != "namespaces" || !info.group.is_empty() || namespace::finalized(&new))
            && m.get("deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0
        {
            // The last finalizer is gone: the deletion completes (upstream ShouldDeleteDuringUpdate).
            return Ok(if dry_run {
                Decision::Preview(new)
            } else {
                Decision::Delete
            });
        }
        Ok(if dry_run {
            Decision::Preview(new)
        } else {
            Decision::Put(new)
        })
    }

    /// Patch the object or its `status` subresource.
    pub async fn patch(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        (kind, patch): (PatchType, &[u8]),
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        if kind == PatchType::Strategic && crate::crd::custom(info).is_some() {
            return Err(custom::strategic_refused());
        }
        let patch: Value = serde_json::from_slice(patch)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        let json_patch = match kind {
            PatchType::Json => Some(parse_json_patch(&patch)?),
            PatchType::Merge | PatchType::Strategic => {
                if !patch.is_object() {
                    return Err(ApiError::bad_request(
                        "error decoding patch: a merge patch must be a JSON object",
                    ));
                }
                None
            }
        };
        let key = info.key(ns, name);
        let _alloc = self.service_allocation(info).await;
        let written = self
            .storage
            .write(&key, |current| {
                let Some(old) = current else {
                    return Err(ApiError::not_found(info.plural, info.group, name));
                };
                let mut doc = match info.alias {
                    Some(a) => (a.from_storage)(&old.value()),
                    None => view(info, old).value(),
                };
                match &json_patch {
                    Some(ops) => apply_json_patch(&mut doc, ops)?,
                    None if kind == PatchType::Strategic => {
                        let kind_key = format!("{}/{}", info.group, info.kind);
                        doc = patch::strategic::apply(&doc, &patch, &kind_key).map_err(|e| {
                            if e.is_bad_request() {
                                ApiError::bad_request(e.to_string())
                            } else {
                                ApiError::unprocessable(e.to_string())
                            }
                        })?;
                    }
                    None => json_patch::merge(&mut doc, &patch),
                }
                let old_rv = old.revision.to_string();
                if let Some(rv) = meta_str(&doc, "resourceVersion")
                    && rv != old_rv
                {
                    return Err(ApiError::stale(info.plural, info.group, name));
                }
                let new = self.decode(info, doc, opts)?;
                self.check_identity(info, ns, name, &new)?;
                match info.alias {
                    None => self.decide_update(info, old, new, subresource, opts),
                    Some(a) => {
                        let target = stored_info(a);
                        let ignore = WriteOptions {
                            field_validation: FieldValidation::Ignore,
                            ..opts.clone()
                        };
                        let core = self.decode(target, (a.to_storage)(&new), &ignore)?;
                        self.decide_update(target, old, core, subresource, opts)
                    }
                }
            })
            .await?;
        service::after_write(self, info, &written).await;
        Ok(view(info, &written.object))
    }

    /// Server-side apply (`application/apply-patch+yaml`): merge the manager's configuration into the
    /// object, or create it (not through a subresource: upstream's subresources never create). Returns the
    /// object and whether it was created.
    #[allow(clippy::too_many_arguments)]
    pub async fn apply(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        applied: Value,
        force: bool,
        opts: &WriteOptions,
    ) -> Result<(Arc<Stored>, bool), ApiError> {
        if info.alias.is_some() {
            return Err(ApiError::unsupported_media_type(format!(
                "server-side apply of {}.{} is not supported by kubeling; apply the core/v1 form",
                info.plural, info.group
            )));
        }
        let Some(manager) = opts.field_manager.clone().filter(|m| !m.is_empty()) else {
            return Err(ApiError::unprocessable(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        };
        if !applied.is_object() {
            return Err(ApiError::bad_request(
                "error decoding patch: an apply patch must be an object",
            ));
        }
        // Validate the configuration as the kind (types, unknown fields), but merge the configuration as
        // sent: decoding fills in required fields the manager did not set, which it must not own.
        self.decode(info, applied.clone(), opts)?;
        self.check_identity(info, ns, name, &applied)?;
        let mut applied = within_reach(info, subresource, applied)?;
        applied["apiVersion"] = json!(info.api_version());
        applied["kind"] = json!(info.kind);
        let now = now_rfc3339();
        let kind_key = format!("{}/{}", info.group, info.kind);
        let api_version = info.api_version();
        let mut opts = opts.clone();
        opts.field_manager = Some(manager);
        let ctx = managed_context(info, &kind_key, &api_version, &opts, subresource, &now);
        let key = info.key(ns, name);
        if subresource.is_none() && self.storage.get(&key).is_none() {
            let mut obj = patch::apply::apply(None, &applied, force, &ctx)
                .map_err(|c| conflict_error(info, name, &c))?;
            meta_mut(&mut obj).insert("name".into(), json!(name));
            match self.create(info, ns, obj, &opts).await {
                Ok(created) => return Ok((created, true)),
                // Created meanwhile: apply to it below.
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        let _alloc = self.service_allocation(info).await;
        let written = self
            .storage
            .write(&key, |current| {
                let Some(old) = current else {
                    return Err(ApiError::not_found(info.plural, info.group, name));
                };
                let merged = patch::apply::apply(Some(&old.value()), &applied, force, &ctx)
                    .map_err(|c| conflict_error(info, name, &c))?;
                let new = self.decode(
                    info,
                    merged,
                    &WriteOptions {
                        field_validation: FieldValidation::Ignore,
                        ..opts.clone()
                    },
                )?;
                self.decide_update(info, old, new, subresource, &opts)
            })
            .await?;
        service::after_write(self, info, &written).await;
        Ok((view(info, &written.object), false))
    }

    /// The `scale` subresource of a workload: an autoscaling/v1 Scale.
    pub fn scale(&self, info: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let obj = self.get(info, ns, name)?;
        Ok(match crate::crd::custom(info) {
            Some(c) => custom::scale_of(&c, &obj.value()),
            None => scale_of(&obj.value()),
        })
    }

    /// Change a workload's replicas through its `scale` subresource: `change` turns the current Scale into
    /// the new one (a PUT body, or a patch applied to the current Scale).
    pub async fn update_scale(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        mut change: impl FnMut(Value) -> Result<Value, ApiError> + Send,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let key = info.key(ns, name);
        let written = self
            .storage
            .write(&key, |current| {
                let Some(old) = current else {
                    return Err(ApiError::not_found(info.plural, info.group, name));
                };
                let custom = crate::crd::custom(info);
                let current = match &custom {
                    Some(c) => custom::scale_of(c, &old.value()),
                    None => scale_of(&old.value()),
                };
                let new_scale = change(current)?;
                if let Some(rv) = new_scale
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    && !rv.is_empty()
                    && rv != old.revision.to_string()
                {
                    return Err(ApiError::stale(info.plural, info.group, name));
                }
                let replicas = new_scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
                let Some(n) = replicas.as_i64().filter(|n| *n >= 0 && *n <= i64::from(i32::MAX)) else {
                    return Err(ApiError::invalid(
                        "Scale",
                        "autoscaling",
                        name,
                        &[FieldError::invalid(
                            "spec.replicas",
                            &replicas,
                            "must be greater than or equal to 0",
                        )],
                    ));
                };
                let mut new = old.value();
                match &custom {
                    Some(c) => custom::set_replicas(c, &mut new, n),
                    None => new["spec"]["replicas"] = json!(n),
                }
                self.decide_update(info, old, new, None, opts)
            })
            .await?;
        Ok(match crate::crd::custom(info) {
            Some(c) => custom::scale_of(&c, &written.object.value()),
            None => scale_of(&written.object.value()),
        })
    }

    /// Delete one object: immediately, or by marking it (finalizers, graceful pod deletion, namespaces).
    pub async fn delete(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Written, ApiError> {
        let key = info.key(ns, name);
        let written = self
            .storage
            .write(&key, |current| self.decide_delete(info, name, current, opts))
            .await?;
        service::after_write(self, info, &written).await;
        Ok(Written {
            object: view(info, &written.object),
            event: written.event,
        })
    }

    fn decide_delete(
        &self,
        info: &ResourceInfo,
        name: &str,
        current: Option<&Arc<Stored>>,
        opts: &DeleteOptions,
    ) -> Result<Decision, ApiError> {
        let Some(cur) = current else {
            return Err(ApiError::not_found(info.plural, info.group, name));
        };
        let cur_value = cur.value();
        let m = meta(&cur_value);
        if let Some(uid) = &opts.uid {
            let actual = m.get("uid").and_then(Value::as_str).unwrap_or("");
            if uid != actual {
                return Err(ApiError::conflict(
                    info.plural,
                    info.group,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}. The object \
                         might have been deleted and then recreated"
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version
            && *rv != cur.revision.to_string()
        {
            return Err(ApiError::conflict(
                info.plural,
                info.group,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}. \
                     The object might have been modified",
                    cur.revision
                ),
            ));
        }
        let dry = |d: Decision, obj: &Value| {
            if opts.dry_run {
                Decision::Preview(obj.clone())
            } else {
                d
            }
        };
        let is_pod = info.group.is_empty() && info.plural == "pods";
        let is_namespace = info.group.is_empty() && info.plural == "namespaces";
        let grace = if is_pod {
            pod_strategy::grace_period(&cur_value, opts.grace_period_seconds)
        } else {
            0
        };
        let being_deleted = m.contains_key("deletionTimestamp");
        let finalizers: Vec<String> = m
            .get("finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();

        if is_namespace {
            if being_deleted {
                return Ok(Decision::Keep);
            }
            let mut obj = cur_value.clone();
            meta_mut(&mut obj).insert("deletionTimestamp".into(), json!(now_rfc3339()));
            meta_mut(&mut obj).insert("deletionGracePeriodSeconds".into(), json!(0));
            obj["status"] = json!({"phase": "Terminating"});
            return Ok(dry(Decision::Put(obj.clone()), &obj));
        }
        if being_deleted {
            let current_grace = m
                .get("deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if is_pod && current_grace > 0 {
                // A graceful deletion is pending (upstream BeforeDelete's pendingGraceful): a shorter grace
                // shortens it, and DeleteOptions cannot change the finalizers meanwhile.
                if grace < current_grace {
                    if grace == 0 && finalizers.is_empty() {
                        return Ok(dry(Decision::Delete, &cur_value));
                    }
                    let mut obj = cur_value.clone();
                    meta_mut(&mut obj).insert("deletionTimestamp".into(), json!(rfc3339_in(grace)));
                    meta_mut(&mut obj).insert("deletionGracePeriodSeconds".into(), json!(grace));
                    return Ok(dry(Decision::Put(obj.clone()), &obj));
                }
                return Ok(Decision::Keep);
            }
            // Marked and waiting for finalizers: another DELETE may only switch the GC finalizer
            // (upstream keeps going through deletionFinalizersForGarbageCollection here). The
            // deletionTimestamp stays as first set.
            return Ok(match gc::deletion_finalizers(info, &finalizers, &opts.policy) {
                None => Decision::Keep,
                Some(f) if f.is_empty() => dry(Decision::Delete, &cur_value),
                Some(f) => {
                    let mut obj = cur_value.clone();
                    meta_mut(&mut obj).insert("finalizers".into(), json!(f));
                    dry(Decision::Put(obj.clone()), &obj)
                }
            });
        }
        let mut finalizers = gc::deletion_finalizers(info, &finalizers, &opts.policy).unwrap_or(finalizers);
        if (info.group, info.plural) == custom::CRDS
            && !finalizers
                .iter()
                .any(|f| f == crate::crd::definition::CLEANUP_FINALIZER)
        {
            // Upstream's CRD store: a deleted CRD waits until the finalizing controller has deleted
            // its objects.
            finalizers.push(crate::crd::definition::CLEANUP_FINALIZER.to_string());
        }
        if finalizers.is_empty() && grace == 0 {
            return Ok(dry(Decision::Delete, &cur_value));
        }
        // Graceful deletion (pods) or finalizers, or both: mark the object (upstream BeforeDelete /
        // markAsDeleting); the node agent, or whoever owns a finalizer, finishes it.
        let mut obj = cur_value.clone();
        let mm = meta_mut(&mut obj);
        mm.insert("deletionTimestamp".into(), json!(rfc3339_in(grace)));
        mm.insert("deletionGracePeriodSeconds".into(), json!(grace));
        if !finalizers.is_empty() {
            mm.insert("finalizers".into(), json!(finalizers));
        }
        if info.tracks_generation {
            let g = mm.get("generation").and_then(Value::as_i64).unwrap_or(0);
            mm.insert("generation".into(), json!(g + 1));
        }
        Ok(dry(Decision::Put(obj.clone()), &obj))
    }

    /// Delete every selected object of a collection; returns what was deleted or marked.
    pub async fn delete_collection(
        &self,
        info: &'static ResourceInfo,
        ns: Option<&str>,
        sel: &Selection,
        opts: &DeleteOptions,
    ) -> Result<(Vec<Arc<Stored>>, u64), ApiError> {
        let listed = self.list(info, ns, sel, None, None);
        let mut out = Vec::new();
        for obj in listed.items {
            let name = meta_str(&obj.value(), "name").unwrap_or("").to_string();
            let obj_ns = meta_str(&obj.value(), "namespace").map(str::to_string);
            match self.delete(info, obj_ns.as_deref(), &name, opts).await {
                Ok(w) => out.push(w.object),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((out, self.storage.revision()))
    }

    /// `pods/binding`: assign a pod to a node.
    pub async fn bind(&self, ns: &str, name: &str, binding: Value) -> Result<(), ApiError> {
        let info = resources::find("", "v1", "pods").expect("pods are served");
        let target = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(n) = binding.pointer("/metadata/name").and_then(Value::as_str)
            && n != name
        {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        if target.is_empty() {
            return Err(ApiError::invalid(
                "Binding",
                "",
                name,
                &[FieldError::required("target.name", "")],
            ));
        }
        self.storage
            .write(&info.key(Some(ns), name), |current| {
                let Some(cur) = current else {
                    return Err(ApiError::not_found("pods", "", name));
                };
                pod_strategy::bind(&cur.value(), &target)
                    .map(Decision::Put)
                    .map_err(|why| ApiError::conflict("pods/binding", "", name, &why))
            })
            .await?;
        Ok(())
    }
}

/// The autoscaling/v1 Scale of a workload object.
pub fn scale_of(obj: &Value) -> Value {
    let m = meta(obj);
    let mut metadata = json!({});
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = m.get(f) {
            metadata[f] = v.clone();
        }
    }
    // A ReplicationController's selector is a plain map; the others' a LabelSelector.
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .or_else(|| {
            let rc = obj.get("kind").and_then(Value::as_str) == Some("ReplicationController");
            obj.pointer("/spec/selector").filter(|_| rc)
        })
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// What of an applied configuration an endpoint acts on: everything for the object itself, only
/// `spec.ephemeralContainers` for `pods/ephemeralcontainers` (upstream's reset-fields filter: the rest is
/// reset by the strategy, so the manager must not come to own it).
fn within_reach(info: &ResourceInfo, subresource: Option<&str>, applied: Value) -> Result<Value, ApiError> {
    match subresource {
        None => Ok(applied),
        Some(pod_strategy::EPHEMERAL_CONTAINERS) => {
            let mut reach = json!({"metadata": {}});
            keep(
                applied.get("metadata").and_then(Value::as_object),
                meta_mut(&mut reach),
                &["name", "namespace"],
            );
            if let Some(e) = applied.pointer("/spec/ephemeralContainers") {
                reach["spec"] = json!({"ephemeralContainers": e});
            }
            Ok(reach)
        }
        // The status endpoint takes the status; the scale endpoint (its Scale turned into the parent's
        // terms by the HTTP layer) the replicas. Managed fields record them with the subresource's name.
        Some("status") | Some("scale") => {
            let mut reach = json!({"metadata": {}});
            keep(
                applied.get("metadata").and_then(Value::as_object),
                meta_mut(&mut reach),
                &["name", "namespace"],
            );
            if subresource == Some("status") {
                if let Some(st) = applied.get("status") {
                    reach["status"] = st.clone();
                }
            } else if let Some(r) = applied.pointer("/spec/replicas") {
                reach["spec"] = json!({"replicas": r});
            }
            Ok(reach)
        }
        Some(other) => Err(ApiError::unsupported_media_type(format!(
            "server-side apply of {}/{other} is not supported by kubeling",
            info.plural
        ))),
    }
}

/// The resource an aliased resource is stored as.
fn stored_info(a: &resources::Alias) -> &'static ResourceInfo {
    resources::all()
        .into_iter()
        .find(|r| (r.group, r.plural) == a.stored_as && r.alias.is_none())
        .expect("an alias names a served resource")
}

/// A stored object as `info` shows it (converted for aliased resources).
pub fn view(info: &ResourceInfo, obj: &Arc<Stored>) -> Arc<Stored> {
    match info.alias {
        // A custom resource's other versions (`conversion: None`): only apiVersion changes.
        None if info.tracks_generation && custom::other_version(info, &**obj) => {
            let mut v = obj.value();
            v["apiVersion"] = json!(info.api_version());
            Arc::new(Stored::new(obj.revision, v))
        }
        None => obj.clone(),
        Some(a) => Arc::new(Stored::new(obj.revision, (a.from_storage)(&obj.value()))),
    }
}

/// 409 `Conflict` listing each conflicting field as upstream's apply does.
fn conflict_error(info: &ResourceInfo, name: &str, conflicts: &[patch::apply::Conflict]) -> ApiError {
    let lines: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "conflict with {:?} using {}: {}",
                c.manager, c.api_version, c.field
            )
        })
        .collect();
    let message = if conflicts.len() == 1 {
        format!("Apply failed with 1 conflict: {}", lines[0])
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with {:?} using {}", c.manager, c.api_version),
                   "field": c.field})
        })
        .collect();
    let mut details = json!({"name": name, "kind": info.plural, "causes": causes});
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(details),
    }
}

/// The managed-fields context of a write by `opts.field_manager` (upstream falls back to the user agent;
/// the http layer fills that in).
fn managed_context<'a>(
    info: &ResourceInfo,
    kind_key: &'a str,
    api_version: &'a str,
    opts: &'a WriteOptions,
    subresource: Option<&'a str>,
    now: &'a str,
) -> patch::apply::Context<'a> {
    let skip: &'static [&'static str] = match subresource {
        Some("status") => &["spec"],
        _ if info.has_status => &["status"],
        _ => &[],
    };
    patch::apply::Context {
        kind_key,
        api_version,
        manager: opts.field_manager.as_deref().unwrap_or("unknown"),
        subresource: subresource.unwrap_or(""),
        skip,
        now,
    }
}

/// Upstream `names.SimpleNameGenerator`: the prefix cut to 58 characters plus 5 random ones.
fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let cut: String = prefix.chars().take(58).collect();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{cut}{suffix}")
}

fn parse_json_patch(patch: &Value) -> Result<json_patch::Patch, ApiError> {
    let Some(ops) = patch.as_array() else {
        return Err(ApiError::bad_request(
            "error decoding patch: a JSON patch must be an array of operations",
        ));
    };
    if ops.len() > 10_000 {
        return Err(ApiError::too_large(format!(
            "The allowed maximum operations in a JSON patch is 10000, got {}",
            ops.len()
        )));
    }
    serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// RFC 6902 with upstream's one deviation: `test` against `null` passes when the path is missing.
fn apply_json_patch(doc: &mut Value, patch: &json_patch::Patch) -> Result<(), ApiError> {
    let ops: Vec<json_patch::PatchOperation> = patch
        .0
        .iter()
        .filter(|op| match op {
            json_patch::PatchOperation::Test(t) if t.value.is_null() => {
                !doc.pointer(t.path.as_str()).is_none_or(Value::is_null)
            }
            _ => true,
        })
        .cloned()
        .collect();
    json_patch::patch(doc, &ops).map_err(|e| {
        ApiError::unprocessable(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })
}

#[cfg(test)]
mod tests;
