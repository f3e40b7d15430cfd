//! Shared informers (client-go's `SharedInformerFactory`): one list+watch per kind for the whole controller
//! manager, a local cache every controller reads, and handlers told of each change with the old and the
//! new object (a controllerRef change must enqueue both owners). Handlers only enqueue keys; they run on
//! the informer's task, so they must not block.
//!
//! A relist after a broken watch is diffed against the cache: changed objects are updates, objects no
//! longer listed are deletes, as client-go's `Replace`.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock};

use futures_util::StreamExt;
use futures_util::io::AsyncBufReadExt;
use kube::api::{ListParams, WatchParams};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, DefaultBackoff};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// What a handler is told.
pub enum Change<'a, K> {
    /// A new object (also the first list).
    Added(&'a Arc<K>),
    /// An object changed (or was relisted with another resourceVersion).
    Updated {
        /// As cached before.
        old: &'a Arc<K>,
        /// As now.
        new: &'a Arc<K>,
    },
    /// An object is gone (the last state seen).
    Deleted(&'a Arc<K>),
}

impl<K> Change<'_, K> {
    /// The object as it is now (or was last, for a delete).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Change::Added(o) | Change::Deleted(o) => o,
            Change::Updated { new, .. } => new,
        }
    }
}

type Handler<K> = Box<dyn Fn(&Change<'_, K>) + Send + Sync>;

/// `namespace/name`, or `name` for a cluster-scoped object: the key controllers queue.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// The key of an object.
pub fn key_of<K: Resource>(obj: &K) -> String {
    key(
        obj.meta().namespace.as_deref(),
        obj.meta().name.as_deref().unwrap_or(""),
    )
}

/// Splits a key into namespace (empty for cluster objects) and name.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// The cache of one kind, filled by its informer.
pub struct Informer<K> {
    // Keys sort by namespace first, so one namespace is a range (names cannot contain '/').
    cache: RwLock<BTreeMap<String, Arc<K>>>,
    handlers: Mutex<Vec<Handler<K>>>,
    synced: tokio::sync::watch::Sender<bool>,
    config: watcher::Config,
    wanted: std::sync::atomic::AtomicBool,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn new(config: watcher::Config) -> Informer<K> {
        Informer {
            cache: RwLock::new(BTreeMap::new()),
            handlers: Mutex::new(Vec::new()),
            synced: tokio::sync::watch::channel(false).0,
            config,
            wanted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Call `f` on every change from now on (register before [`Informers::start`] to see the first list).
    pub fn on_change(&self, f: impl Fn(&Change<'_, K>) + Send + Sync + 'static) {
        self.wanted.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handlers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// Mark the kind as needed without a handler (a controller only reads the cache).
    pub fn want(&self) {
        self.wanted.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// One object by key.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().get(key).cloned()
    }

    /// One object by namespace and name.
    pub fn get_in(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get(&key(Some(namespace), name))
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    /// The objects of one namespace.
    pub fn list_ns(&self, namespace: &str) -> Vec<Arc<K>> {
        let lo = format!("{namespace}/");
        let hi = format!("{namespace}0"); // '0' follows '/'
        self.read().range(lo..hi).map(|(_, v)| v.clone()).collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the first list has been applied.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Wait for the first list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<K>>> {
        self.cache.read().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self, change: Change<'_, K>) {
        for h in self.handlers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // A panicking handler must not end the informer (every controller reads its cache).
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h(&change))).is_err() {
                tracing::error!(kind = %K::kind(&()), "an informer handler panicked");
            }
        }
    }

    /// Put `obj` in the cache and tell the handlers; an unchanged resourceVersion tells nobody.
    pub fn apply(&self, obj: K) {
        let k = key_of(&obj);
        let new = Arc::new(obj);
        let old = self
            .cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k, new.clone());
        match old {
            Some(old) if old.resource_version() == new.resource_version() => {}
            Some(old) => self.notify(Change::Updated { old: &old, new: &new }),
            None => self.notify(Change::Added(&new)),
        }
    }

    /// Drop the object under `key` and tell the handlers.
    pub fn remove(&self, key: &str) {
        let old = self.cache.write().unwrap_or_else(|e| e.into_inner()).remove(key);
        if let Some(old) = old {
            self.notify(Change::Deleted(&old));
        }
    }

    /// Mark the informer synced without a server (tests fill the cache with [`Informer::apply`]).
    pub fn mark_synced(&self) {
        self.synced.send_replace(true);
    }

    async fn run(self: Arc<Self>, client: kube::Client, cancel: CancellationToken) {
        let target = Target {
            path: K::url_path(&(), None),
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        };
        run_raw(self, client, target, cancel).await
    }
}

/// An informer as its watch loop sees it: objects arrive as JSON text and only decoding them is per kind.
/// kube's watcher is generic over the object type, and each kind's copy of it (its state machine, and its
/// watch events decoded through serde's buffered content) was about a fifth of this crate's compiled code;
/// [`run_raw`] is compiled once.
trait RawSink: Send + Sync {
    /// Decode one object, cache it and tell the handlers; returns its key and resourceVersion.
    fn apply_json(&self, json: &str) -> Result<(String, Option<String>), serde_json::Error>;
    /// Decode one deleted object and drop it; returns its resourceVersion.
    fn delete_json(&self, json: &str) -> Result<Option<String>, serde_json::Error>;
    /// The cached keys.
    fn keys(&self) -> Vec<String>;
    /// Drop one key and tell the handlers.
    fn remove_key(&self, key: &str);
    /// Whether the first list has been applied.
    fn synced(&self) -> bool;
    /// The first list has been applied.
    fn set_synced(&self);
    /// The kind, for logs.
    fn kind(&self) -> String;
}

impl<K> RawSink for Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn apply_json(&self, json: &str) -> Result<(String, Option<String>), serde_json::Error> {
        let mut obj: K = serde_json::from_str(json)?;
        // No controller reads managedFields: dropped at once, as client-go users' informer transforms do (a
        // Pod's take several times the rest of it parsed, and every cached copy is cloned). Writes without
        // them keep the stored ones.
        obj.meta_mut().managed_fields = None;
        let key = key_of(&obj);
        let rv = obj.meta().resource_version.clone();
        self.apply(obj);
        Ok((key, rv))
    }

    fn delete_json(&self, json: &str) -> Result<Option<String>, serde_json::Error> {
        let obj: K = serde_json::from_str(json)?;
        self.remove(&key_of(&obj));
        Ok(obj.meta().resource_version.clone())
    }

    fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn remove_key(&self, key: &str) {
        self.remove(key)
    }

    fn synced(&self) -> bool {
        self.has_synced()
    }

    fn set_synced(&self) {
        self.synced.send_replace(true);
    }

    fn kind(&self) -> String {
        K::kind(&()).into_owned()
    }
}

/// What one informer lists and watches.
struct Target {
    /// The collection's path (`/api/v1/pods`).
    path: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

/// Why a list or a watch ended.
#[derive(Debug)]
enum WatchEnd {
    /// The resourceVersion is too old (410): list again.
    Gone,
    /// Anything else: try again after a backoff, from the same resourceVersion.
    Failed(kube::Error),
}

impl From<kube::Error> for WatchEnd {
    fn from(e: kube::Error) -> WatchEnd {
        match e {
            kube::Error::Api(s) if s.code == 410 => WatchEnd::Gone,
            e => WatchEnd::Failed(e),
        }
    }
}

impl From<serde_json::Error> for WatchEnd {
    fn from(e: serde_json::Error) -> WatchEnd {
        WatchEnd::Failed(kube::Error::SerdeError(e))
    }
}

/// List, then watch from the list's resourceVersion, as client-go's reflector: a watch that ends (its
/// timeout, a dropped connection, nothing read for 295 s) is resumed from the last resourceVersion seen (an
/// object's or a bookmark's, also after a failure), a 410 lists again, and a failure, a 410 or a watch that
/// ended at once with nothing in it waits kube's default backoff (client-go's: 0.8 s doubling to 30 s, with
/// jitter) first, so a server that keeps refusing is never asked in a loop.
async fn run_raw(sink: Arc<dyn RawSink>, client: kube::Client, target: Target, cancel: CancellationToken) {
    let mut backoff = DefaultBackoff::default();
    // None: list (first, or after a 410).
    let mut version: Option<String> = None;
    loop {
        let outcome = if let Some(v) = version.as_mut() {
            tokio::select! {
                _ = cancel.cancelled() => return,
                o = watch(&*sink, &client, &target, v) => o,
            }
        } else {
            let listed = tokio::select! {
                _ = cancel.cancelled() => return,
                o = list(&*sink, &client, &target) => o,
            };
            listed.map(|v| {
                version = Some(v);
                Progress::Some
            })
        };
        match outcome {
            Ok(Progress::Some) => {
                backoff.reset();
                continue;
            }
            Ok(Progress::None) => {}
            Err(WatchEnd::Gone) => version = None,
            Err(WatchEnd::Failed(e)) => {
                let listing = version.is_none();
                // A kind this server does not serve counts as listed (empty), so one missing kind does not
                // hold every controller's workers back; the list is retried all the same.
                if listing
                    && !sink.synced()
                    && let kube::Error::Api(s) = &e
                    && s.code == 404
                {
                    tracing::warn!(kind = %sink.kind(), "the API server does not serve this kind");
                    sink.set_synced();
                }
                if !sink.synced() {
                    // Every controller's workers wait for every first list: say why this one is late.
                    tracing::warn!(kind = %sink.kind(), error = %e, "listing failed; retrying")
                } else {
                    tracing::debug!(kind = %sink.kind(), error = %e, "watch failed; retrying")
                }
            }
        }
        let delay = backoff.next().unwrap_or(std::time::Duration::from_secs(30));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Whether a list or a watch got anywhere: a watch that ended at once with nothing in it did not, and the
/// next one waits for the backoff (client-go's "very short watch").
enum Progress {
    Some,
    None,
}

/// One page of a list: its items left as JSON text until the kind decodes them.
#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Vec<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// One watch event, its object left as JSON text.
#[derive(serde::Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

/// What a bookmark's or an error's object says.
#[derive(serde::Deserialize, Default)]
struct Small {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// Lists every object (pages of 500) into the cache; objects cached but no longer listed are deleted, as
/// client-go's `Replace`. Returns the list's resourceVersion.
async fn list(sink: &dyn RawSink, client: &kube::Client, target: &Target) -> Result<String, WatchEnd> {
    let mut seen = HashSet::new();
    let mut continue_token: Option<String> = None;
    loop {
        let params = ListParams {
            label_selector: target.label_selector.clone(),
            field_selector: target.field_selector.clone(),
            limit: Some(500),
            continue_token: continue_token.take(),
            ..ListParams::default()
        };
        let request = kube::core::Request::new(&target.path)
            .list(&params)
            .map_err(|e| WatchEnd::Failed(kube::Error::BuildRequest(e)))?;
        let text = client.request_text(request).await?;
        let page: RawList<'_> = serde_json::from_str(&text)?;
        for item in page.items {
            match sink.apply_json(item.get()) {
                Ok((key, _)) => {
                    seen.insert(key);
                }
                // One object this kind cannot hold must not stop the rest (kube's watcher skipped it too).
                Err(e) => skip(sink, item.get(), &e),
            }
        }
        match page.metadata.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => continue_token = Some(c),
            None => {
                for key in sink.keys().into_iter().filter(|k| !seen.contains(k)) {
                    sink.remove_key(&key);
                }
                sink.set_synced();
                return Ok(page.metadata.resource_version.unwrap_or_default());
            }
        }
    }
}

/// An object that does not decode as its kind: logged and left out. A list or a watch goes on without it.
fn skip(sink: &dyn RawSink, json: &str, e: &serde_json::Error) {
    let meta = serde_json::from_str::<Small>(json).unwrap_or_default().metadata;
    tracing::warn!(kind = %sink.kind(), name = ?meta.name, namespace = ?meta.namespace, error = %e,
        "an object that does not decode as its kind is left out of the cache");
}

/// How long a watch may stay silent before it is taken as dead and resumed: the server's timeout (290 s)
/// plus 5 s, as kube's watcher. The API server also sends an empty line every 3 s while idle.
const WATCH_SILENCE: std::time::Duration = std::time::Duration::from_secs(295);

/// Watches from `version` until the server ends the watch (its timeout, or a dropped connection), keeping
/// `version` at the last resourceVersion seen, so a failure resumes from there too.
async fn watch(
    sink: &dyn RawSink,
    client: &kube::Client,
    target: &Target,
    version: &mut String,
) -> Result<Progress, WatchEnd> {
    let params = WatchParams {
        label_selector: target.label_selector.clone(),
        field_selector: target.field_selector.clone(),
        timeout: Some(290),
        bookmarks: true,
        send_initial_events: false,
    };
    let mut request = kube::core::Request::new(&target.path)
        .watch(&params, version)
        .map_err(|e| WatchEnd::Failed(kube::Error::BuildRequest(e)))?;
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    let started = tokio::time::Instant::now();
    let body = client.request_stream(request).await?;
    let mut lines = body.lines();
    let mut progress = Progress::None;
    loop {
        let line = match tokio::time::timeout(WATCH_SILENCE, lines.next()).await {
            // Silent too long: taken as a dead connection, resumed.
            Err(_) | Ok(None) => break,
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(e))) => return Err(WatchEnd::Failed(kube::Error::ReadEvents(e))),
        };
        if line.trim().is_empty() {
            continue;
        }
        // A line that is not an event (a torn last line when the connection drops) is skipped, as kube
        // does; the watch is resumed from the last version seen.
        let event: RawEvent<'_> = match serde_json::from_str(&line) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(kind = %sink.kind(), error = %e, "a watch line that is not an event");
                continue;
            }
        };
        let json = event.object.get();
        let seen = match event.kind.as_ref() {
            "ADDED" | "MODIFIED" | "DELETED" => {
                let decoded = if event.kind == "DELETED" {
                    sink.delete_json(json)
                } else {
                    sink.apply_json(json).map(|(_, v)| v)
                };
                match decoded {
                    Ok(v) => v,
                    Err(e) => {
                        skip(sink, json, &e);
                        serde_json::from_str::<Small>(json)
                            .ok()
                            .and_then(|o| o.metadata.resource_version)
                    }
                }
            }
            "BOOKMARK" => serde_json::from_str::<Small>(json)
                .ok()
                .and_then(|o| o.metadata.resource_version),
            "ERROR" => {
                let status: Small = serde_json::from_str(json).unwrap_or_default();
                return Err(if status.code == 410 {
                    WatchEnd::Gone
                } else {
                    WatchEnd::Failed(kube::Error::Service(
                        format!("watch error {}: {}", status.code, status.message).into(),
                    ))
                });
            }
            _ => None,
        };
        progress = Progress::Some;
        if let Some(v) = seen.filter(|v| !v.is_empty()) {
            *version = v;
        }
    }
    // A watch that ran its course without events (the server's timeout) got somewhere all the same.
    if started.elapsed() >= std::time::Duration::from_secs(1) {
        progress = Progress::Some;
    }
    Ok(progress)
}

/// Informers by the kind they cache and a tag telling filtered ones apart.
type ByType = HashMap<(TypeId, &'static str), Arc<dyn Any + Send + Sync>>;
type Starter = Box<dyn FnOnce(kube::Client, CancellationToken) -> Option<tokio::task::JoinHandle<()>> + Send>;
type Waiter = Box<dyn Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

/// The informers of one controller manager, made on first use and started together.
#[derive(Default)]
pub struct Informers {
    by_type: Mutex<ByType>,
    starters: Mutex<Vec<(Starter, Waiter)>>,
    waiters: Mutex<Vec<Waiter>>,
}

impl Informers {
    /// An empty set.
    pub fn new() -> Arc<Informers> {
        Arc::new(Informers::default())
    }

    /// The informer of every `K` in the cluster.
    pub fn get<K>(&self) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.filtered("", watcher::Config::default())
    }

    /// An informer of the `K` that `config` selects (e.g. one ConfigMap by field selector), told apart by
    /// `tag`.
    pub fn filtered<K>(&self, tag: &'static str, config: watcher::Config) -> Arc<Informer<K>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let mut map = self.by_type.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = map.get(&(TypeId::of::<K>(), tag)) {
            return i
                .clone()
                .downcast::<Informer<K>>()
                .expect("informer of its own type");
        }
        let informer = Arc::new(Informer::<K>::new(config));
        map.insert((TypeId::of::<K>(), tag), informer.clone());
        let for_start = informer.clone();
        let for_wait = informer.clone();
        self.starters.lock().unwrap_or_else(|e| e.into_inner()).push((
            Box::new(move |client, cancel| {
                if !for_start.wanted.load(std::sync::atomic::Ordering::Relaxed) {
                    return None;
                }
                Some(tokio::spawn(for_start.run(client, cancel)))
            }),
            Box::new(move || {
                let i = for_wait.clone();
                Box::pin(async move {
                    if i.wanted.load(std::sync::atomic::Ordering::Relaxed) {
                        i.wait_synced().await
                    }
                })
            }),
        ));
        informer
    }

    /// Start every informer that a controller wanted; returns their tasks.
    pub fn start(
        &self,
        client: &kube::Client,
        cancel: &CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut starters = self.starters.lock().unwrap_or_else(|e| e.into_inner());
        let mut tasks = Vec::new();
        let mut waiters = Vec::new();
        for (start, wait) in starters.drain(..) {
            if let Some(t) = start(client.clone(), cancel.clone()) {
                tasks.push(t);
            }
            waiters.push(wait);
        }
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(waiters);
        tasks
    }

    /// Wait until every started informer has its first list.
    pub async fn wait_synced(&self) {
        let futures: Vec<_> = self
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|w| w())
            .collect();
        futures_util::future::join_all(futures).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{Full, StreamBody};
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::convert::Infallible;
    use std::time::Duration;

    type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

    fn cm(name: &str, rv: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
    }

    fn list(items: &[serde_json::Value], rv: &str) -> String {
        serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": rv}, "items": items})
        .to_string()
    }

    fn event(kind: &str, object: serde_json::Value) -> String {
        format!("{}\n", serde_json::json!({"type": kind, "object": object}))
    }

    /// A fake API server answering each request with the next scripted body (the last one stays open), and
    /// recording each request's path and query.
    fn fake(script: Vec<String>) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        fake_with_status(script.into_iter().map(|b| (200, b)).collect())
    }

    /// [`fake`] with a status code for each answer.
    fn fake_with_status(script: Vec<(u16, String)>) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(std::collections::VecDeque::from(script)));
        let log = seen.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            log.lock().unwrap().push(req.uri().to_string());
            let next = script.lock().unwrap().pop_front();
            async move {
                let status = next.as_ref().map_or(200, |(s, _)| *s);
                let body: Body = match next {
                    Some((_, text)) => http_body_util::BodyExt::boxed(Full::new(Bytes::from(text))),
                    // Out of script: a watch that never sends anything.
                    None => http_body_util::BodyExt::boxed(StreamBody::new(futures_util::stream::pending::<
                        Result<http_body::Frame<Bytes>, Infallible>,
                    >())),
                };
                let mut response = http::Response::new(body);
                *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                Ok::<_, Infallible>(response)
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    /// The value of one query parameter of a recorded request.
    fn param(uri: &str, name: &str) -> Option<String> {
        let query = uri.split_once('?')?.1;
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    /// Records each change as "what name resourceVersion".
    fn record(informer: &Informer<ConfigMap>) -> Arc<Mutex<Vec<String>>> {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let log = changes.clone();
        informer.on_change(move |c| {
            let o = c.object();
            let what = match c {
                Change::Added(_) => "added",
                Change::Updated { .. } => "updated",
                Change::Deleted(_) => "deleted",
            };
            log.lock().unwrap().push(format!(
                "{what} {} {}",
                o.metadata.name.as_deref().unwrap_or(""),
                o.metadata.resource_version.as_deref().unwrap_or("")
            ));
        });
        changes
    }

    /// Waits (10 s at most) until `lines` (changes recorded, or requests seen) holds `n`.
    async fn wait_for(lines: &Arc<Mutex<Vec<String>>>, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while lines.lock().unwrap().len() < n {
            assert!(tokio::time::Instant::now() < deadline, "so far: {lines:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A ConfigMap informer run against `client` until it has recorded `n` changes; the informer, its
    /// changes, and the token that stops it.
    async fn run_until_changes(
        client: &kube::Client,
        n: usize,
    ) -> (
        Arc<Informer<ConfigMap>>,
        Arc<Mutex<Vec<String>>>,
        CancellationToken,
    ) {
        let informers = Informers::new();
        let informer = informers.get::<ConfigMap>();
        let changes = record(&informer);
        let cancel = CancellationToken::new();
        informers.start(client, &cancel);
        wait_for(&changes, n).await;
        (informer, changes, cancel)
    }

    #[tokio::test]
    async fn a_failed_watch_resumes_from_the_last_object_seen_and_bad_objects_are_left_out() {
        let bad = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "12"}, "data": 5});
        let script = vec![
            (200, list(&[cm("a", "9")], "10")),
            // A change, an object that is no ConfigMap (left out), another change, then a failure.
            (
                200,
                event("MODIFIED", cm("a", "11"))
                    + &event("ADDED", bad)
                    + &event("ADDED", cm("c", "13"))
                    + &event(
                        "ERROR",
                        serde_json::json!({"kind": "Status", "code": 500, "message": "boom"}),
                    ),
            ),
            // Resumed from 13; a delete, then a torn last line (skipped) as the connection drops.
            (200, event("DELETED", cm("c", "14")) + "{\"type\":\"ADDED\",\"obj"),
            // Resumed from 14: too old, as an HTTP status this time.
            (
                410,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": 410, "reason": "Expired", "message": "too old"})
                .to_string(),
            ),
            (200, list(&[cm("a", "11"), cm("d", "20")], "20")),
        ];
        let (client, seen) = fake_with_status(script);
        let (_informer, changes, cancel) = run_until_changes(&client, 5).await;
        wait_for(&seen, 6).await;
        cancel.cancel();
        assert_eq!(
            *changes.lock().unwrap(),
            [
                "added a 9",
                "updated a 11",
                "added c 13",
                "deleted c 13",
                "added d 20"
            ]
        );
        let seen = seen.lock().unwrap().clone();
        let version = |i: usize| param(&seen[i], "resourceVersion");
        assert_eq!(param(&seen[1], "watch").as_deref(), Some("true"));
        assert_eq!(version(1).as_deref(), Some("10"));
        assert_eq!(
            version(2).as_deref(),
            Some("13"),
            "resumed after the failure: {seen:?}"
        );
        assert_eq!(
            version(3).as_deref(),
            Some("14"),
            "resumed after the torn line: {seen:?}"
        );
        assert_eq!(
            param(&seen[4], "watch"),
            None,
            "listed again after the 410: {seen:?}"
        );
        assert_eq!(version(5).as_deref(), Some("20"), "{seen:?}");
    }

    #[tokio::test]
    async fn lists_watches_resumes_from_the_last_version_and_relists_after_410() {
        let script = vec![
            list(&[cm("a", "9"), cm("b", "10")], "10"),
            // The first watch: a change, a bookmark, then the server ends it.
            event("MODIFIED", cm("a", "11"))
                + &event(
                    "BOOKMARK",
                    serde_json::json!({"kind": "ConfigMap", "metadata": {"resourceVersion": "12"}}),
                ),
            // Resumed from the bookmark: too old.
            event(
                "ERROR",
                serde_json::json!({"kind": "Status", "code": 410, "message": "too old"}),
            ),
            // The relist no longer has b: deleted from the cache. A delete tells the last state cached.
            list(&[cm("a", "11")], "20"),
            event("DELETED", cm("a", "21")),
        ];
        let (client, seen) = fake(script);
        let (informer, changes, cancel) = run_until_changes(&client, 5).await;
        cancel.cancel();
        assert_eq!(
            *changes.lock().unwrap(),
            [
                "added a 9",
                "added b 10",
                "updated a 11",
                "deleted b 10",
                "deleted a 11"
            ]
        );
        assert!(informer.is_empty());
        let seen = seen.lock().unwrap().clone();
        let version = |i: usize| param(&seen[i], "resourceVersion");
        assert_eq!(seen[0].split('?').next(), Some("/api/v1/configmaps"));
        assert_eq!(param(&seen[0], "limit").as_deref(), Some("500"));
        assert_eq!(param(&seen[0], "watch"), None);
        assert_eq!(param(&seen[1], "watch").as_deref(), Some("true"));
        assert_eq!(param(&seen[1], "allowWatchBookmarks").as_deref(), Some("true"));
        assert_eq!(version(1).as_deref(), Some("10"));
        assert_eq!(
            version(2).as_deref(),
            Some("12"),
            "resumed from the bookmark: {seen:?}"
        );
        assert_eq!(
            param(&seen[3], "watch"),
            None,
            "listed again after the 410: {seen:?}"
        );
        assert_eq!(version(4).as_deref(), Some("20"), "{seen:?}");
    }

    #[tokio::test]
    async fn a_list_page_continues_and_a_field_selector_is_sent() {
        let first = serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "5", "continue": "next-page"}, "items": [cm("a", "4")]})
        .to_string();
        let (client, seen) = fake(vec![first, list(&[cm("b", "5")], "5")]);
        let informers = Informers::new();
        let informer =
            informers.filtered::<ConfigMap>("one", watcher::Config::default().fields("metadata.name=a"));
        informer.want();
        let cancel = CancellationToken::new();
        informers.start(&client, &cancel);
        tokio::time::timeout(Duration::from_secs(10), informers.wait_synced())
            .await
            .expect("synced");
        cancel.cancel();
        assert_eq!(informer.len(), 2);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            param(&seen[0], "fieldSelector").as_deref(),
            Some("metadata.name=a")
        );
        assert_eq!(
            param(&seen[1], "continue").as_deref(),
            Some("next-page"),
            "{seen:?}"
        );
        assert_eq!(
            param(&seen[1], "fieldSelector").as_deref(),
            Some("metadata.name=a")
        );
    }
}
