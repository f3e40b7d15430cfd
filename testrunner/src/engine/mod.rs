//! What both suite formats do to a cluster. kuttl (`crate::kuttl`) and chainsaw (`crate::chainsaw`) are
//! front ends over this module; it knows nothing of either file format.
//!
//! The API (stable; later changes only add):
//! - [`Cluster`]: a handle over a `kube::Client` with cached discovery ([`Cluster::resolve`]: apiVersion +
//!   kind → resource and scope; a kind that is not known is looked up again each time, so a kind served
//!   after a CRD apply is found). Object operations take the object as `serde_json::Value` and the test
//!   namespace, which is filled in for namespaced kinds that name none:
//!   [`Cluster::apply`] (kuttl's and chainsaw's CreateOrUpdate: GET, then POST or a whole-object JSON merge
//!   patch carrying the live `resourceVersion`, retrying 409/AlreadyExists until a deadline),
//!   [`Cluster::create`], [`Cluster::update`] (PUT with the live `resourceVersion`), [`Cluster::patch`]
//!   (merge patch, optionally of a subresource), [`Cluster::delete`] (by name or by list and labels; waits
//!   until the objects are gone, bounded), [`Cluster::get`], [`Cluster::list`].
//! - Assertions ([`assert`]): [`Cluster::eventually`] evaluates a set of [`Expectation`]s (present or
//!   absent) on every watch event of the kinds they name and passes the moment all hold at once;
//!   [`Cluster::assert_eventually`] and [`Cluster::absent_eventually`] are the one-object forms. The
//!   comparison is a [`Matcher`] (`Fn(actual, expected) -> Result<(), Vec<FieldDiff>>`): kuttl uses
//!   [`subset::kuttl_subset`], chainsaw plugs in its assertion trees. A timeout returns a
//!   [`assert::CheckFailure`] with the closest candidate and its field-level diff.
//! - Commands ([`command`]): `$VAR` expansion (kuttl's and chainsaw's rules), processes with env, working
//!   directory, timeout and output capture, background processes.
//! - Namespaces and reports ([`namespace`]): generated names, create, bounded delete, and the failure
//!   report (the namespace's events, the logs of its failing pods).

pub mod assert;
pub mod command;
pub mod namespace;
pub mod subset;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
    ValidationDirective,
};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;
use tokio::time::Instant;

pub use assert::{CheckFailure, Expectation, ExtraCheck};
pub use subset::FieldDiff;

/// The comparison of an actual object against an expected one. Any
/// `Fn(&Value /*actual*/, &Value /*expected*/) -> Result<(), Vec<FieldDiff>>` is a matcher.
pub trait Matcher: Send + Sync {
    /// `Ok` when `actual` satisfies `expected`, else the differing fields (at least one).
    fn diff(&self, actual: &Value, expected: &Value) -> Result<(), Vec<FieldDiff>>;
}

impl<F> Matcher for F
where
    F: Fn(&Value, &Value) -> Result<(), Vec<FieldDiff>> + Send + Sync,
{
    fn diff(&self, actual: &Value, expected: &Value) -> Result<(), Vec<FieldDiff>> {
        self(actual, expected)
    }
}

/// Errors of the engine's cluster operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object has no usable `apiVersion`/`kind`/`metadata.name`.
    #[error("invalid object: {0}")]
    Invalid(String),
    /// Discovery does not know the kind (kuttl's wording).
    #[error("retrieving API resource for {api_version}, Kind={kind} failed: {reason}")]
    UnknownKind {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// Why discovery failed.
        reason: String,
    },
    /// The API server answered with an error.
    #[error("{op} {what}: {source}")]
    Api {
        /// The operation (`create`, `patch`, ...).
        op: &'static str,
        /// `Kind:ns/name`.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// The objects were still there when the wait ended.
    #[error("timed out after {secs:.1}s waiting for {what} to be deleted")]
    DeleteTimedOut {
        /// The objects still present.
        what: String,
        /// The bound.
        secs: f64,
    },
}

/// The result of a discovery lookup.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The resource (group, version, kind, plural).
    pub resource: ApiResource,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

/// Options of the writes (chainsaw sends `fieldValidation=Strict` and supports dry runs; kuttl sends neither).
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// `fieldValidation=Strict` on every write.
    pub strict: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl WriteOptions {
    fn post(&self) -> PostParams {
        PostParams {
            dry_run: self.dry_run,
            ..Default::default()
        }
    }
    fn patch(&self) -> PatchParams {
        PatchParams {
            dry_run: self.dry_run,
            field_validation: self.strict.then_some(ValidationDirective::Strict),
            ..Default::default()
        }
    }
}

/// What [`Cluster::apply`] did.
#[derive(Clone, Debug)]
pub enum Applied {
    /// The object did not exist and was created (register it for clean-up).
    Created(Value),
    /// The object existed and was merge-patched.
    Updated(Value),
}

impl Applied {
    /// The object the server returned.
    pub fn object(&self) -> &Value {
        match self {
            Applied::Created(v) | Applied::Updated(v) => v,
        }
    }
}

/// Which objects an operation or assertion is about: by name, else every object of the kind in the
/// namespace (cluster-wide for cluster-scoped kinds) carrying the labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// The namespace, if given (else the test namespace for namespaced kinds).
    pub namespace: Option<String>,
    /// The name, if given.
    pub name: Option<String>,
    /// An equality label selector (empty: every object).
    pub labels: BTreeMap<String, String>,
}

impl Selector {
    /// The selector an expected object describes: its apiVersion, kind, namespace and name, and its
    /// labels when it has no name. A label whose value is not a string drops the whole selector
    /// (chainsaw's `unstructured.GetLabels` behaviour; kuttl labels are always strings).
    pub fn of_object(obj: &Value) -> Result<Selector, Error> {
        let s = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let api_version =
            s(obj.get("apiVersion")).ok_or_else(|| Error::Invalid("the object has no apiVersion".into()))?;
        let kind = s(obj.get("kind")).ok_or_else(|| Error::Invalid("the object has no kind".into()))?;
        let meta = obj.get("metadata");
        let name = s(meta.and_then(|m| m.get("name")));
        let namespace = s(meta.and_then(|m| m.get("namespace")));
        let mut labels = BTreeMap::new();
        if let Some(Value::Object(m)) = meta.and_then(|m| m.get("labels")) {
            for (k, v) in m {
                match v.as_str() {
                    Some(v) => {
                        labels.insert(k.clone(), v.to_string());
                    }
                    None => {
                        labels.clear();
                        break;
                    }
                }
            }
        }
        Ok(Selector {
            api_version,
            kind,
            namespace,
            name,
            labels,
        })
    }

    /// The label selector string (`a=b,c=d`).
    pub fn label_selector(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `Kind:ns/name` for messages (`*` for no name).
    pub fn describe(&self, ns: Option<&str>) -> String {
        let name = self.name.as_deref().unwrap_or("*");
        match ns {
            Some(ns) => format!("{}:{ns}/{name}", self.kind),
            None => format!("{}:{name}", self.kind),
        }
    }
}

/// `Kind:ns/name` of an object for messages.
pub fn describe_object(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("?");
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("*");
    match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{kind}:{ns}/{name}"),
        None => format!("{kind}:{name}"),
    }
}

/// A handle over a cluster: the client, the kubeconfig commands get, and cached discovery.
pub struct Cluster {
    client: kube::Client,
    kubeconfig: Option<std::path::PathBuf>,
    discovery: Mutex<HashMap<(String, String), Resolved>>,
}

/// The interval of retries of conflicting writes and of deletion waits (kuttl: 100 ms).
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

impl Cluster {
    /// A handle over `client`; `kubeconfig` is the file commands and scripts get as `KUBECONFIG`.
    pub fn new(client: kube::Client, kubeconfig: Option<std::path::PathBuf>) -> Cluster {
        Cluster {
            client,
            kubeconfig,
            discovery: Mutex::new(HashMap::new()),
        }
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The kubeconfig file commands get as `KUBECONFIG`, if known.
    pub fn kubeconfig(&self) -> Option<&std::path::Path> {
        self.kubeconfig.as_deref()
    }

    /// The resource and scope of `apiVersion`/`kind`, from the cache or discovery. Unknown kinds are not
    /// cached, so a later call finds a kind a CRD has since added.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, Error> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(r) = self.discovery.lock().expect("discovery cache").get(&key) {
            return Ok(r.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let unknown = |reason: String| Error::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            reason,
        };
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| unknown(e.to_string()))?;
        let resolved = Resolved {
            resource,
            namespaced: matches!(caps.scope, Scope::Namespaced),
        };
        self.discovery
            .lock()
            .expect("discovery cache")
            .insert(key, resolved.clone());
        Ok(resolved)
    }

    /// The API for a resource in a namespace (`None`: cluster-scoped or all namespaces).
    pub fn api(&self, r: &Resolved, ns: Option<&str>) -> Api<DynamicObject> {
        match (r.namespaced, ns) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &r.resource),
            _ => Api::all_with(self.client.clone(), &r.resource),
        }
    }

    /// Resolves an object's kind and the namespace it goes to: its own, else `default_ns` for namespaced
    /// kinds; the returned object has that namespace filled in.
    pub async fn place(
        &self,
        obj: &Value,
        default_ns: &str,
    ) -> Result<(Resolved, Option<String>, Value), Error> {
        let sel = Selector::of_object(obj)?;
        let r = self.resolve(&sel.api_version, &sel.kind).await?;
        let mut obj = obj.clone();
        let ns = if r.namespaced {
            let ns = sel.namespace.unwrap_or_else(|| default_ns.to_string());
            if let Some(m) = obj.as_object_mut() {
                let meta = m
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("namespace".into(), Value::String(ns.clone()));
                }
            }
            Some(ns)
        } else {
            None
        };
        Ok((r, ns, obj))
    }

    fn name_of(obj: &Value) -> Result<String, Error> {
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| Error::Invalid(format!("{} has no metadata.name", describe_object(obj))))
    }

    /// kuttl's CreateOrUpdate: GET; if found, a JSON merge patch of the whole object carrying the live
    /// `resourceVersion` (409 retried); else POST (AlreadyExists retried). Retries end at `deadline`;
    /// any other error ends at once. An object with `generateName` and no name is always created.
    pub async fn apply(
        &self,
        obj: &Value,
        default_ns: &str,
        opts: WriteOptions,
        deadline: Instant,
    ) -> Result<Applied, Error> {
        let (r, ns, obj) = self.place(obj, default_ns).await?;
        let api = self.api(&r, ns.as_deref());
        let what = describe_object(&obj);
        if obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            return self.create(&obj, default_ns, opts).await.map(Applied::Created);
        }
        let name = Self::name_of(&obj)?;
        loop {
            let err = match api.get_opt(&name).await {
                Ok(Some(live)) => {
                    let mut body = obj.clone();
                    if let (Some(rv), Some(meta)) = (
                        live.metadata.resource_version.clone(),
                        body.get_mut("metadata").and_then(Value::as_object_mut),
                    ) {
                        meta.insert("resourceVersion".into(), Value::String(rv));
                    }
                    match api.patch(&name, &opts.patch(), &Patch::Merge(&body)).await {
                        Ok(o) => return Ok(Applied::Updated(to_value(o))),
                        Err(e) => ("patch", e),
                    }
                }
                Ok(None) => match self.write(&api, None, &obj, opts).await {
                    Ok(o) => return Ok(Applied::Created(to_value(o))),
                    Err(e) => ("create", e),
                },
                Err(e) => ("get", e),
            };
            let retry = matches!(&err.1, kube::Error::Api(s) if s.code == 409);
            if !retry || Instant::now() >= deadline {
                return Err(Error::Api {
                    op: err.0,
                    what,
                    source: err.1,
                });
            }
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
    }

    /// A POST (`name: None`) or a PUT, with `fieldValidation=Strict` when asked (`PostParams` cannot say it).
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        name: Option<&str>,
        obj: &Value,
        opts: WriteOptions,
    ) -> Result<DynamicObject, kube::Error> {
        if !opts.strict {
            let o: DynamicObject = serde_json::from_value(obj.clone()).map_err(kube::Error::SerdeError)?;
            return match name {
                None => api.create(&opts.post(), &o).await,
                Some(n) => api.replace(n, &opts.post(), &o).await,
            };
        }
        let req = kube::core::Request::new(api.resource_url());
        let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
        let mut r = match name {
            None => req.create(&opts.post(), body),
            Some(n) => req.replace(n, &opts.post(), body),
        }
        .map_err(kube::Error::BuildRequest)?;
        let uri = r.uri().to_string();
        let sep = if uri.contains('?') { '&' } else { '?' };
        *r.uri_mut() =
            format!("{uri}{sep}fieldValidation=Strict")
                .parse()
                .map_err(|e: http::uri::InvalidUri| {
                    kube::Error::BuildRequest(kube::core::request::Error::Validation(e.to_string()))
                })?;
        self.client.request(r).await
    }

    /// POST; an existing object is an error.
    pub async fn create(&self, obj: &Value, default_ns: &str, opts: WriteOptions) -> Result<Value, Error> {
        let (r, ns, obj) = self.place(obj, default_ns).await?;
        let api = self.api(&r, ns.as_deref());
        self.write(&api, None, &obj, opts)
            .await
            .map(to_value)
            .map_err(|source| Error::Api {
                op: "create",
                what: describe_object(&obj),
                source,
            })
    }

    /// PUT with the live `resourceVersion` (a full replace); the object must exist.
    pub async fn update(&self, obj: &Value, default_ns: &str, opts: WriteOptions) -> Result<Value, Error> {
        let (r, ns, mut obj) = self.place(obj, default_ns).await?;
        let api = self.api(&r, ns.as_deref());
        let name = Self::name_of(&obj)?;
        let what = describe_object(&obj);
        let live = api.get(&name).await.map_err(|source| Error::Api {
            op: "get",
            what: what.clone(),
            source,
        })?;
        if let (Some(rv), Some(meta)) = (
            live.metadata.resource_version,
            obj.get_mut("metadata").and_then(Value::as_object_mut),
        ) {
            meta.insert("resourceVersion".into(), Value::String(rv));
        }
        self.write(&api, Some(&name), &obj, opts)
            .await
            .map(to_value)
            .map_err(|source| Error::Api {
                op: "update",
                what,
                source,
            })
    }

    /// A JSON merge patch of the whole object (with the live `resourceVersion`), optionally of a
    /// subresource such as `status`; the object must exist.
    pub async fn patch(
        &self,
        obj: &Value,
        default_ns: &str,
        subresource: Option<&str>,
        opts: WriteOptions,
    ) -> Result<Value, Error> {
        let (r, ns, mut obj) = self.place(obj, default_ns).await?;
        let api = self.api(&r, ns.as_deref());
        let name = Self::name_of(&obj)?;
        let what = describe_object(&obj);
        let live = api.get(&name).await.map_err(|source| Error::Api {
            op: "get",
            what: what.clone(),
            source,
        })?;
        if let (Some(rv), Some(meta)) = (
            live.metadata.resource_version,
            obj.get_mut("metadata").and_then(Value::as_object_mut),
        ) {
            meta.insert("resourceVersion".into(), Value::String(rv));
        }
        let res = match subresource {
            Some(sub) => {
                api.patch_subresource(sub, &name, &opts.patch(), &Patch::Merge(&obj))
                    .await
            }
            None => api.patch(&name, &opts.patch(), &Patch::Merge(&obj)).await,
        };
        res.map(to_value).map_err(|source| Error::Api {
            op: "patch",
            what,
            source,
        })
    }

    /// The namespace a selector's objects are in: its own, else `default_ns` for namespaced kinds.
    pub fn namespace_for(&self, r: &Resolved, sel: &Selector, default_ns: &str) -> Option<String> {
        r.namespaced
            .then(|| sel.namespace.clone().unwrap_or_else(|| default_ns.to_string()))
    }

    /// The object a named selector names, if it exists.
    pub async fn get(&self, sel: &Selector, default_ns: &str) -> Result<Option<Value>, Error> {
        let r = self.resolve(&sel.api_version, &sel.kind).await?;
        let ns = self.namespace_for(&r, sel, default_ns);
        let name = sel
            .name
            .clone()
            .ok_or_else(|| Error::Invalid(format!("{} has no name", sel.kind)))?;
        self.api(&r, ns.as_deref())
            .get_opt(&name)
            .await
            .map(|o| o.map(to_value))
            .map_err(|source| Error::Api {
                op: "get",
                what: sel.describe(ns.as_deref()),
                source,
            })
    }

    /// The objects a selector names: the one named (if it exists), else the kind's objects in the namespace
    /// (cluster-wide for cluster-scoped kinds) carrying the labels.
    pub async fn list(&self, sel: &Selector, default_ns: &str) -> Result<Vec<Value>, Error> {
        if sel.name.is_some() {
            return Ok(self.get(sel, default_ns).await?.into_iter().collect());
        }
        let r = self.resolve(&sel.api_version, &sel.kind).await?;
        let ns = self.namespace_for(&r, sel, default_ns);
        let lp = ListParams::default().labels(&sel.label_selector());
        self.api(&r, ns.as_deref())
            .list(&lp)
            .await
            .map(|l| l.items.into_iter().map(to_value).collect())
            .map_err(|source| Error::Api {
                op: "list",
                what: sel.describe(ns.as_deref()),
                source,
            })
    }

    /// Deletes the objects a selector names (NotFound is fine), then, with `wait`, waits until every one
    /// is gone (a recreated object with a new uid counts as gone), up to `wait`. Returns how many were
    /// deleted.
    pub async fn delete(
        &self,
        sel: &Selector,
        default_ns: &str,
        propagation: Option<PropagationPolicy>,
        wait: Option<Duration>,
    ) -> Result<usize, Error> {
        let r = self.resolve(&sel.api_version, &sel.kind).await?;
        let ns = self.namespace_for(&r, sel, default_ns);
        let api = self.api(&r, ns.as_deref());
        let objects = self.list(sel, default_ns).await?;
        let dp = DeleteParams {
            propagation_policy: propagation,
            ..Default::default()
        };
        let mut pending = Vec::new();
        for o in &objects {
            let name = Self::name_of(o)?;
            let uid = o
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string);
            match api.delete(&name, &dp).await {
                Ok(_) => pending.push((name, uid)),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    return Err(Error::Api {
                        op: "delete",
                        what: describe_object(o),
                        source,
                    });
                }
            }
        }
        let Some(wait) = wait else {
            return Ok(objects.len());
        };
        let deadline = Instant::now() + wait;
        loop {
            let mut still = Vec::new();
            for (name, uid) in &pending {
                match api.get_opt(name).await {
                    Ok(Some(o)) if o.metadata.uid == *uid => still.push((name.clone(), uid.clone())),
                    Ok(_) => {}
                    Err(source) => {
                        return Err(Error::Api {
                            op: "get",
                            what: format!("{}:{name}", sel.kind),
                            source,
                        });
                    }
                }
            }
            if still.is_empty() {
                return Ok(objects.len());
            }
            if Instant::now() >= deadline {
                let names: Vec<_> = still.iter().map(|(n, _)| n.as_str()).collect();
                return Err(Error::DeleteTimedOut {
                    what: format!("{} {}", sel.kind, names.join(", ")),
                    secs: wait.as_secs_f64(),
                });
            }
            pending = still;
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
    }
}

/// A server object as plain JSON.
pub fn to_value(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_selector_is_read_from_an_expected_object() {
        let s = Selector::of_object(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": {"app": "web", "tier": "a"}}}))
        .unwrap();
        assert_eq!(s.name, None);
        assert_eq!(s.label_selector(), "app=web,tier=a");
        let s = Selector::of_object(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "labels": {"app": {"x": 1}}}}))
        .unwrap();
        assert_eq!(
            (s.name.as_deref(), s.namespace.as_deref()),
            (Some("p"), Some("n"))
        );
        assert!(s.labels.is_empty(), "a non-string label drops the selector");
        assert!(Selector::of_object(&json!({"kind": "Pod"})).is_err());
        assert!(Selector::of_object(&json!({"apiVersion": "v1"})).is_err());
    }
}
