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
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_stream};
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
        let api: Api<K> = Api::all(client);
        // No controller reads managedFields: dropped at once, as client-go users' informer transforms do
        // (a Pod's take several times the rest of it parsed, and every cached copy is cloned). Writes
        // without them keep the stored ones.
        let stream = watch_stream(api, self.config.clone())
            .modify(|o| o.meta_mut().managed_fields = None)
            .default_backoff();
        futures_util::pin_mut!(stream);
        let mut relisted: Option<HashSet<String>> = None;
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return,
                n = stream.next() => n,
            };
            match next {
                Some(Ok(Event::Init)) => relisted = Some(HashSet::new()),
                Some(Ok(Event::InitApply(obj))) => {
                    if let Some(seen) = relisted.as_mut() {
                        seen.insert(key_of(&obj));
                    }
                    self.apply(obj);
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(seen) = relisted.take() {
                        let gone: Vec<String> = self
                            .read()
                            .keys()
                            .filter(|k| !seen.contains(*k))
                            .cloned()
                            .collect();
                        for k in gone {
                            self.remove(&k);
                        }
                    }
                    self.synced.send_replace(true);
                }
                Some(Ok(Event::Apply(obj))) => self.apply(obj),
                Some(Ok(Event::Delete(obj))) => self.remove(&key_of(&obj)),
                Some(Err(e)) => {
                    // A kind this server does not serve counts as listed (empty), so one missing kind does
                    // not hold every controller's workers back; the list is retried all the same.
                    if let watcher::Error::InitialListFailed(kube::Error::Api(s)) = &e
                        && s.code == 404
                        && !self.has_synced()
                    {
                        tracing::warn!(kind = %K::kind(&()), "the API server does not serve this kind");
                        self.synced.send_replace(true);
                    }
                    if !self.has_synced() {
                        // Every controller's workers wait for every first list: say why this one is late.
                        tracing::warn!(kind = %K::kind(&()), error = %e, "listing failed; retrying")
                    } else {
                        tracing::debug!(kind = %K::kind(&()), error = %e, "watch failed; retrying")
                    }
                }
                None => return,
            }
        }
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
