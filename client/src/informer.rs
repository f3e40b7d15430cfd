//! Shared informers (client-go's `SharedInformerFactory`): one list+watch per kind for a whole component
//! (the controller manager, the scheduler, the node agent's proxy, cluster DNS), a local cache its parts
//! read, and handlers told of each change with the old and the
//! new object (a controllerRef change must enqueue both owners). Handlers only enqueue keys; they run on
//! the informer's task, so they must not block.
//!
//! The list-and-watch loop is [`crate::watch`]'s. A relist after a broken watch is diffed against the
//! cache: changed objects are updates, objects no longer listed are deletes, as client-go's `Replace`.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, RwLock};

use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::watch::{RawSink, Selector, Target};

/// A kind an informer can cache: a built-in resource, decoded from JSON, shared between tasks.
pub trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

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

/// An object of any kind, as a [`Cache`] holds it.
type Entry = Arc<dyn Any + Send + Sync>;

/// The map behind an informer, the same type for every kind: a map per kind (`BTreeMap<String, Arc<K>>`)
/// had compiled the B-tree's code once per cached kind, about a fifth of the controller manager's LLVM IR.
/// Keys sort by namespace first, so one namespace is a range (names cannot contain '/').
#[derive(Default)]
struct Cache(RwLock<BTreeMap<String, Entry>>);

impl Cache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, key: &str) -> Option<Entry> {
        self.read().get(key).cloned()
    }

    /// Calls `f` on every entry, or on those of one namespace, in key order, under the read lock.
    fn each(&self, namespace: Option<&str>, f: &mut dyn FnMut(&Entry)) {
        let map = self.read();
        match namespace {
            None => map.values().for_each(f),
            Some(ns) => {
                let lo = format!("{ns}/");
                let hi = format!("{ns}0"); // '0' follows '/'
                map.range(lo..hi).for_each(|(_, v)| f(v));
            }
        }
    }

    fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn len(&self) -> usize {
        self.read().len()
    }

    fn insert(&self, key: String, entry: Entry) -> Option<Entry> {
        self.write().insert(key, entry)
    }

    fn remove(&self, key: &str) -> Option<Entry> {
        self.write().remove(key)
    }
}

/// The cache of one kind, filled by its informer.
pub struct Informer<K> {
    cache: Cache,
    handlers: Mutex<Vec<Handler<K>>>,
    synced: tokio::sync::watch::Sender<bool>,
    selector: Selector,
    wanted: std::sync::atomic::AtomicBool,
}

impl<K> Informer<K>
where
    K: Cached,
{
    fn new(selector: Selector) -> Informer<K> {
        Informer {
            cache: Cache::default(),
            handlers: Mutex::new(Vec::new()),
            synced: tokio::sync::watch::channel(false).0,
            selector,
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

    /// An entry of this informer's cache, as its kind.
    fn typed(entry: Entry) -> Arc<K> {
        entry
            .downcast::<K>()
            .expect("an informer caches objects of its own kind")
    }

    /// One object by key.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.cache.get(key).map(Self::typed)
    }

    /// One object by namespace and name.
    pub fn get_in(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get(&key(Some(namespace), name))
    }

    /// Every cached object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.collect(None)
    }

    fn collect(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        let mut out = Vec::new();
        self.cache
            .each(namespace, &mut |e| out.push(Self::typed(e.clone())));
        out
    }

    /// Every cached object, as an owned copy.
    pub fn list_cloned(&self) -> Vec<K> {
        self.list().iter().map(|k| (**k).clone()).collect()
    }

    /// The objects of one namespace.
    pub fn list_ns(&self, namespace: &str) -> Vec<Arc<K>> {
        self.collect(Some(namespace))
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.cache.len()
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
        let old = self.cache.insert(k, new.clone()).map(Self::typed);
        match old {
            Some(old) if old.resource_version() == new.resource_version() => {}
            Some(old) => self.notify(Change::Updated { old: &old, new: &new }),
            None => self.notify(Change::Added(&new)),
        }
    }

    /// Drop the object under `key` and tell the handlers.
    pub fn remove(&self, key: &str) {
        let old = self.cache.remove(key).map(Self::typed);
        if let Some(old) = old {
            self.notify(Change::Deleted(&old));
        }
    }

    /// Mark the informer synced without a server (tests fill the cache with [`Informer::apply`]).
    pub fn mark_synced(&self) {
        self.synced.send_replace(true);
    }

    async fn run(self: Arc<Self>, client: kube::Client, cancel: CancellationToken) {
        let target = Target::of::<K>(self.selector.clone());
        crate::watch::run(&*self, client, target, cancel).await
    }
}

impl<K> RawSink for Informer<K>
where
    K: Cached,
{
    fn apply_json(&self, json: &str, _listing: bool) -> Result<(String, Option<String>), serde_json::Error> {
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

    /// Objects cached but no longer listed are deleted, as client-go's `Replace`.
    fn list_done(&self, seen: HashSet<String>) {
        let keys = self.cache.keys();
        for key in keys.into_iter().filter(|k| !seen.contains(k)) {
            self.remove(&key);
        }
        self.synced.send_replace(true);
    }

    fn not_served(&self) {
        self.synced.send_replace(true);
    }

    fn synced(&self) -> bool {
        self.has_synced()
    }

    fn kind(&self) -> String {
        K::kind(&()).into_owned()
    }
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
        K: Cached,
    {
        self.filtered("", Selector::all())
    }

    /// An informer of the `K` that `selector` selects (e.g. one ConfigMap by field selector), told apart by
    /// `tag`.
    pub fn filtered<K>(&self, tag: &'static str, selector: Selector) -> Arc<Informer<K>>
    where
        K: Cached,
    {
        let mut map = self.by_type.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = map.get(&(TypeId::of::<K>(), tag)) {
            return i
                .clone()
                .downcast::<Informer<K>>()
                .expect("informer of its own type");
        }
        let informer = Arc::new(Informer::<K>::new(selector));
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
    use crate::fake::{
        cm, error_event, event, fake, fake_with_status, list, param, undecodable_cm, wait_for,
    };
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::time::Duration;

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
        let script = vec![
            (200, list(&[cm("a", "9")], "10")),
            // A change, an object that is no ConfigMap (left out), another change, then a failure.
            (
                200,
                event("MODIFIED", cm("a", "11"))
                    + &event("ADDED", undecodable_cm())
                    + &event("ADDED", cm("c", "13"))
                    + &error_event(500, "boom"),
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
            error_event(410, "too old"),
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
        let informer = informers.filtered::<ConfigMap>("one", Selector::all().fields("metadata.name=a"));
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
