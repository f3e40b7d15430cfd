//! Storage: the one writer, the committed in-memory view, durable group commit, and the [`Store`] engines.
//!
//! ```text
//! registry ──write(key, decide)──► Writer (one lock): current (pending-aware) → decide → next revision
//!                                    → Store::write(object + revision, atomically) → pending queue
//! commit (the leader: the writer that finds no commit under way, on its own thread, so a lone write
//! waits for no hand-off; writes queued meanwhile are handed to the flusher thread, which leads until
//! the queue is empty): Store::flush (fsync, once for every write queued meanwhile = group commit)
//!                 → apply to the committed view + Hub::publish (same lock, revision order)
//!                 → wake the writers: their requests are answered only now
//! readers (get, list, watch start) see the committed view only: nothing that could still be lost.
//!
//! a failed write or flush (disk full): every write not yet acknowledged fails, writes are refused
//! ──► the flusher retries every second: Store::recover (reopen) → rewrite what differs from the
//!     committed view → flush → writes accepted again
//! ```
//!
//! All objects live in memory (like upstream's watch cache); the `Store` is the durable copy, read once at
//! start-up. That keeps reads fast and lets the engine be swapped (sled today; an in-memory store for tests).

mod etcd_store;
#[cfg(test)]
mod faulty;
mod key_lock;
mod memory;
mod sled_store;

pub use etcd_store::EtcdConfig;
pub use memory::MemoryStore;
pub use sled_store::SledStore;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::watch as tokio_watch;

use crate::selector::{Fields, Selectable};
use crate::watch::{Event, EventType, Hub, HubConfig, Start, Subscription};

/// Failures of the storage engine (never a client's fault).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The engine failed.
    #[error("storage engine: {0}")]
    Engine(String),
    /// The file system holding the data is full (ENOSPC, EDQUOT): nothing can be written until space is
    /// freed.
    #[error("no space left on the device holding {path}")]
    NoSpace {
        /// The engine's directory.
        path: String,
    },
    /// A stored value could not be decoded.
    #[error("corrupt value under key {key}: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The storage is shutting down.
    #[error("storage is shut down")]
    Closed,
    /// The engine cannot be reached now (etcd down); the request may be retried.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Another API server changed the key between this write's read and its commit (etcd store).
    #[error(
        "the object under {key} has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict {
        /// The key.
        key: String,
    },
}

/// A value a write's decision moves into its result, kept for a second run of the decision when the
/// store may run it again (etcd, after a lost race; see [`Storage::write`]). The first run takes the
/// value itself; a copy is made only for a store that may rerun, so sled's writes clone nothing.
#[derive(Debug)]
pub struct Reusable<T: Clone> {
    first: Option<T>,
    spare: Option<T>,
}

impl<T: Clone> Reusable<T> {
    /// `value` for the decisions of writes to `storage`.
    pub fn new(value: T, storage: &Storage) -> Self {
        let spare = storage.inner.etcd.is_some().then(|| value.clone());
        Reusable {
            first: Some(value),
            spare,
        }
    }

    /// The value: itself on the first run, a copy on a rerun.
    pub fn take(&mut self) -> T {
        match self.first.take() {
            Some(v) => v,
            None => self
                .spare
                .clone()
                .expect("only a store that reruns decisions runs one twice"),
        }
    }
}

/// How often a write to etcd is decided again after losing a race to another API server before it is
/// refused with 409 (upstream retries without a bound; a bound keeps a hot key from holding a request).
const ETCD_WRITE_ATTEMPTS: usize = 16;

/// Why one attempt at an etcd write did not commit.
enum Lost<E> {
    /// Another API server changed the key after `decide` read it.
    Race,
    /// `decide` refused, or the store failed.
    Refused(E),
}

/// One key's new value (`None`: removed).
#[derive(Debug, Clone)]
pub struct Change {
    /// Object key.
    pub key: String,
    /// JSON bytes, or `None` for a deletion.
    pub value: Option<Bytes>,
}

/// What a [`Store`] holds.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The last revision written.
    pub revision: u64,
    /// Every object, key to JSON bytes.
    pub objects: Vec<(String, Bytes)>,
}

/// A durable key-value engine. Calls come from one writer at a time, plus the flusher.
pub trait Store: Send + Sync + 'static {
    /// Read everything (at start-up).
    fn load(&self) -> Result<Loaded, StoreError>;
    /// Persist `changes` and `revision` (durable once `flush` returns). Each change is whole, several are
    /// atomic together, and after a crash the revision found is at least that of every change found.
    fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError>;
    /// Make every earlier `write` durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// Make the engine usable again after a failed `write` or `flush` (sled keeps the first I/O error and
    /// fails every later call until it is reopened). What the failed writes left on disk is whatever the
    /// engine's recovery keeps: [`Storage`] reloads and rewrites it.
    fn recover(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Bytes used on disk, if the engine knows.
    fn size_on_disk(&self) -> Option<u64>;
}

/// A stored object: the exact bytes served, and what selectors read of it. The object is not kept parsed
/// (a parsed pod takes about nine times its JSON): [`Stored::value`] parses it when a write or a conversion
/// needs it.
#[derive(Debug)]
pub struct Stored {
    /// The revision it was written at (its `metadata.resourceVersion`).
    pub revision: u64,
    /// The object serialised, compact.
    pub bytes: Bytes,
    selectable: Selectable,
}

impl Stored {
    /// Stamp `value` with `revision` as its resourceVersion and serialise it.
    pub fn new(revision: u64, mut value: Value) -> Stored {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(revision.to_string()));
        }
        let mut bytes = crate::encode::to_vec(&value);
        // Kept for the object's life: without the growth slack the serialiser left (up to half of it).
        bytes.shrink_to_fit();
        Stored {
            revision,
            selectable: Selectable::of(&value),
            bytes: Bytes::from(bytes),
        }
    }

    /// The object, parsed from its bytes (which this process wrote, so they parse).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    fn decode(key: &str, bytes: Bytes) -> Result<Stored, StoreError> {
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            key: key.to_string(),
            reason: e.to_string(),
        })?;
        let revision = value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        // Objects written before keys were put in upstream's order are re-encoded once, at load.
        let bytes = if crate::encode::is_ordered(&bytes) {
            bytes
        } else {
            Bytes::from(crate::encode::to_vec(&value))
        };
        Ok(Stored {
            revision,
            selectable: Selectable::of(&value),
            bytes,
        })
    }
}

impl Fields for Stored {
    fn labels(&self) -> Option<&serde_json::Map<String, Value>> {
        self.selectable.labels()
    }

    fn at(&self, path: &[&str]) -> Option<crate::selector::Scalar<'_>> {
        self.selectable.at(path)
    }

    fn whole(&self) -> std::borrow::Cow<'_, Value> {
        std::borrow::Cow::Owned(self.value())
    }
}

/// What the registry decided to do with a key, given its current state.
#[derive(Debug)]
pub enum Decision {
    /// Store this object (the storage stamps the resourceVersion).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Change nothing; answer with the current object.
    Keep,
    /// Dry run: answer with this object, persist nothing.
    Preview(Value),
}

/// What a write's caller decides on the current object (see [`Storage::write`]).
type Decide<'a, E> = dyn FnMut(Option<&Arc<Stored>>) -> Result<Decision, E> + Send + 'a;

/// The result of a write.
#[derive(Debug)]
pub struct Written {
    /// The object as stored (for a deletion: its last state with the deletion's revision; for a preview:
    /// the would-be object with no revision).
    pub object: Arc<Stored>,
    /// What happened, if anything was written.
    pub event: Option<EventType>,
}

/// A consistent list: objects and the revision they are current at.
pub struct ListResult {
    /// The matching objects in key order (namespace, then name).
    pub items: Vec<Arc<Stored>>,
    /// The committed revision of the snapshot.
    pub revision: u64,
    /// The key to continue after, if `limit` cut the list.
    pub next_key: Option<String>,
    /// How many more objects follow the page.
    pub remaining: usize,
}

/// A watch's starting point.
pub enum WatchFrom {
    /// Synthetic ADDED events for the current objects, then changes.
    Now,
    /// Changes strictly after this revision.
    After(u64),
}

/// A registered watch: what to send first, and the live subscription.
pub struct WatchStart {
    /// Objects to send as synthetic ADDED events.
    pub initial: Vec<Arc<Stored>>,
    /// History events to replay.
    pub replay: Vec<Arc<Event>>,
    /// The revision the initial objects or replay bring the watcher up to.
    pub revision: u64,
    /// Live events after that.
    pub subscription: Subscription,
}

/// A watch that cannot start: the revision is older than the history (upstream `Expired`).
#[derive(Debug)]
pub struct TooOld {
    /// The requested revision.
    pub requested: u64,
    /// The oldest revision still resumable.
    pub oldest: u64,
}

struct Writer {
    revision: u64,
    /// Writes not yet committed (flushed), so the next writer sees them.
    overlay: HashMap<String, (u64, Option<Arc<Stored>>)>,
    /// Set after a failed write or flush, until the flusher has recovered the engine: every write is
    /// refused with this error meanwhile.
    refusing: Option<StoreError>,
}

struct Committed {
    revision: u64,
    objects: BTreeMap<String, Arc<Stored>>,
}

/// A queued write: its event, and who waits for its flush.
struct Queued {
    event: Arc<Event>,
    done: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
}

struct Pending {
    events: VecDeque<Queued>,
    shutdown: bool,
    /// A commit is under way (a writer's or the flusher's): writes queued meanwhile wait for it.
    leading: bool,
    /// A writer handed what was queued behind its own write to the flusher thread, which leads now.
    handed_off: bool,
    /// The engine failed: the flusher recovers it before anything else (writes are refused meanwhile).
    recovering: bool,
}

struct Inner {
    /// The local engine (none with etcd, which is written directly).
    store: Option<Arc<dyn Store>>,
    etcd: Option<Arc<etcd_store::Etcd>>,
    /// Ends the etcd watch and compaction tasks.
    stop: tokio_util::sync::CancellationToken,
    writer: Mutex<Writer>,
    committed: RwLock<Committed>,
    hub: Arc<Hub>,
    pending: Mutex<Pending>,
    wake: Condvar,
    /// The last revision made durable and published (etcd: applied from the watch).
    durable: tokio_watch::Sender<u64>,
}

/// The storage handle, cheap to clone.
#[derive(Clone)]
pub struct Storage {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Storage {
    /// Load everything from `store` and start the flusher thread.
    pub fn open(store: Arc<dyn Store>, hub_config: HubConfig) -> Result<Storage, StoreError> {
        let loaded = store.load()?;
        let mut objects = BTreeMap::new();
        // The engine's revision, or an object's if higher (an engine may persist the two apart).
        let mut revision = loaded.revision;
        for (key, bytes) in loaded.objects {
            let stored = Stored::decode(&key, bytes)?;
            revision = revision.max(stored.revision);
            objects.insert(key, Arc::new(stored));
        }
        let inner = Inner::new(Some(store), None, revision, objects, hub_config);
        let flusher = inner.clone();
        std::thread::Builder::new()
            .name("kubeling-flusher".into())
            .spawn(move || flusher.flush_loop())
            .map_err(|e| StoreError::Engine(format!("starting the flusher thread: {e}")))?;
        Ok(Storage { inner })
    }

    /// Connect to etcd, check the prefix belongs to this cluster, load every object, and follow etcd's
    /// changes from there (see [`etcd_store`]). Needs a tokio runtime.
    pub async fn open_etcd(cfg: &EtcdConfig, hub_config: HubConfig) -> Result<Storage, StoreError> {
        let (etcd, revision, loaded) = etcd_store::Etcd::open(cfg).await?;
        let objects = etcd_store::objects(loaded);
        let etcd = Arc::new(etcd);
        let inner = Inner::new(None, Some(etcd.clone()), revision, objects, hub_config);
        tokio::spawn(inner.clone().etcd_watch_loop(etcd.clone()));
        tokio::spawn(etcd_store::compact_loop(etcd, inner.stop.clone()));
        Ok(Storage { inner })
    }

    /// False while the storage engine cannot be reached (etcd down) or refuses writes (a full disk):
    /// `/readyz` says not ready.
    pub fn ready(&self) -> bool {
        match &self.inner.etcd {
            Some(e) => e.healthy.load(std::sync::atomic::Ordering::Acquire),
            None => lock(&self.inner.writer).refusing.is_none(),
        }
    }

    /// The name of the `/readyz` check that [`Storage::ready`] answers: `etcd` with etcd (upstream's),
    /// else `storage`.
    pub fn check_name(&self) -> &'static str {
        if self.inner.etcd.is_some() {
            "etcd"
        } else {
            "storage"
        }
    }

    /// Wait until this server has applied every change committed anywhere before this call (etcd: several
    /// API servers write; sled: nothing to wait for). Consistent reads call it first, as upstream's
    /// consistent list from the watch cache waits for etcd's current revision.
    pub async fn catch_up(&self) -> Result<(), StoreError> {
        let Some(etcd) = &self.inner.etcd else {
            return Ok(());
        };
        let target = etcd.current_revision().await?;
        self.wait_applied(etcd, target).await
    }

    /// Wait until this server has applied `revision` (a resourceVersion a client got from another API server).
    pub async fn wait_for_revision(&self, revision: u64) -> Result<(), StoreError> {
        match &self.inner.etcd {
            Some(etcd) if revision > self.revision() => self.wait_applied(etcd, revision).await,
            _ => Ok(()),
        }
    }

    async fn wait_applied(&self, etcd: &etcd_store::Etcd, target: u64) -> Result<(), StoreError> {
        if self.revision() >= target {
            return Ok(());
        }
        // The changes up to `target` may be on their way, or be outside the watched keys (no event will
        // come): the marker's event comes after them either way.
        etcd.mark_after(target).await?;
        let mut rx = self.inner.durable.subscribe();
        match tokio::time::timeout(etcd_store::CATCH_UP, rx.wait_for(|&d| d >= target)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => Err(StoreError::Unavailable(format!(
                "this API server has not yet seen etcd's revision {target} (it is at {})",
                self.revision()
            ))),
        }
    }

    /// The last committed revision.
    pub fn revision(&self) -> u64 {
        self.read().revision
    }

    /// The watch hub.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }

    /// Bytes on disk, if known.
    pub fn size_on_disk(&self) -> Option<u64> {
        self.inner.store.as_ref().and_then(|s| s.size_on_disk())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Committed> {
        self.inner.committed.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The committed object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Stored>> {
        self.read().objects.get(key).cloned()
    }

    /// Committed objects under `prefix`, from `start` (exclusive of nothing: the first key >= start), keeping
    /// those `keep` accepts, at most `limit` of them.
    pub fn list(
        &self,
        prefix: &str,
        start: Option<&str>,
        limit: Option<usize>,
        mut keep: impl FnMut(&Stored) -> bool,
    ) -> ListResult {
        let c = self.read();
        let lower = match start {
            Some(s) if s > prefix => Bound::Included(s.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let mut items = Vec::new();
        let mut next_key = None;
        let mut remaining = 0;
        for (key, obj) in c.objects.range((lower, Bound::Unbounded)) {
            if !key.starts_with(prefix) {
                break;
            }
            if !keep(obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                if next_key.is_none() {
                    next_key = Some(key.clone());
                }
                remaining += 1;
                continue;
            }
            items.push(obj.clone());
        }
        ListResult {
            items,
            revision: c.revision,
            next_key,
            remaining,
        }
    }

    /// Start a watch of keys under `prefix`: the snapshot or history and the live subscription meet at one cut.
    pub fn watch(&self, prefix: &str, from: WatchFrom) -> Result<WatchStart, TooOld> {
        let c = self.read();
        match from {
            WatchFrom::Now => {
                let initial: Vec<Arc<Stored>> = c
                    .objects
                    .range(prefix.to_string()..)
                    .take_while(|(k, _)| k.starts_with(prefix))
                    .map(|(_, v)| v.clone())
                    .collect();
                let (_, subscription) = self.inner.hub.subscribe(prefix.to_string(), None);
                Ok(WatchStart {
                    initial,
                    replay: Vec::new(),
                    revision: c.revision,
                    subscription,
                })
            }
            WatchFrom::After(n) => match self.inner.hub.subscribe(prefix.to_string(), Some(n)) {
                (Start::TooOld { requested, oldest }, _) => Err(TooOld { requested, oldest }),
                (Start::Replay(replay), subscription) => Ok(WatchStart {
                    initial: Vec::new(),
                    replay,
                    revision: c.revision,
                    subscription,
                }),
            },
        }
    }

    /// Change one key under the single writer: `decide` sees the current object (including writes not yet
    /// durable) and says what to do. Returns once the change is durable and published.
    ///
    /// On etcd, another API server may change the key between `decide`'s read and the commit: then
    /// `decide` runs again on the object that won (upstream's `GuaranteedUpdate`), so a write without a
    /// resourceVersion precondition (a patch, an unconditional update) is not refused for a race the
    /// client never saw, and one with a precondition is refused by `decide` itself, with the usual 409.
    pub async fn write<E>(
        &self,
        key: &str,
        mut decide: impl FnMut(Option<&Arc<Stored>>) -> Result<Decision, E> + Send,
    ) -> Result<Written, E>
    where
        E: From<StoreError>,
    {
        self.write_with(key, &mut decide).await
    }

    /// [`Storage::write`] compiled once per error type, not once per caller's closure (each copy of this
    /// function and of [`Storage::write_etcd`] is about 2,000 lines of LLVM IR).
    async fn write_with<E>(&self, key: &str, decide: &mut Decide<'_, E>) -> Result<Written, E>
    where
        E: From<StoreError>,
    {
        if let Some(etcd) = &self.inner.etcd {
            let mut attempts = 0;
            return loop {
                attempts += 1;
                match self.write_etcd(etcd, key, decide).await {
                    Err(Lost::Race) if attempts < ETCD_WRITE_ATTEMPTS => {}
                    Err(Lost::Race) => break Err(StoreError::Conflict { key: key.to_string() }.into()),
                    Err(Lost::Refused(e)) => break Err(e),
                    Ok(written) => break Ok(written),
                }
            };
        }
        let Some(store) = &self.inner.store else {
            return Err(StoreError::Closed.into());
        };
        let (written, done, lead) = {
            let mut w = lock(&self.inner.writer);
            if let Some(e) = &w.refusing {
                return Err(e.clone().into());
            }
            let current = match w.overlay.get(key) {
                Some((_, pending)) => pending.clone(),
                None => self.get(key),
            };
            let decision = decide(current.as_ref())?;
            let revision = w.revision + 1;
            let (event, change) = match decision {
                Decision::Keep => {
                    let Some(object) = current else {
                        return Err(StoreError::Engine(format!(
                            "nothing to keep at {key}: it does not exist"
                        ))
                        .into());
                    };
                    return Ok(Written { object, event: None });
                }
                Decision::Preview(value) => return Ok(preview(value)),
                Decision::Put(value) => {
                    let stored = Arc::new(Stored::new(revision, value));
                    let kind = if current.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    (kind, (stored.clone(), Some(stored)))
                }
                Decision::Delete => {
                    let Some(old) = current.as_ref() else {
                        return Err(StoreError::Engine(format!("delete of missing key {key}")).into());
                    };
                    let tombstone = Arc::new(Stored::new(revision, old.value()));
                    (EventType::Deleted, (tombstone, None))
                }
            };
            let (object, new_state) = change;
            let bytes = new_state.as_ref().map(|s| s.bytes.clone());
            if let Err(e) = store.write(
                revision,
                &[Change {
                    key: key.to_string(),
                    value: bytes,
                }],
            ) {
                // The engine may hold part of this write: refuse writes until the flusher has recovered it
                // and made it match what was acknowledged.
                tracing::error!(error = %e, key, "writing to storage failed; writes are refused until it recovers");
                let e = refusal(e);
                w.refusing = Some(e.clone());
                let mut p = lock(&self.inner.pending);
                p.recovering = true;
                self.inner.wake.notify_all();
                return Err(e.into());
            }
            w.revision = revision;
            w.overlay.insert(key.to_string(), (revision, new_state));
            let ev = Arc::new(Event {
                revision,
                key: key.to_string(),
                kind: event,
                object: object.clone(),
                previous: current,
            });
            let mut p = lock(&self.inner.pending);
            if p.shutdown {
                return Err(StoreError::Closed.into());
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            p.events.push_back(Queued { event: ev, done: tx });
            // Queued writes always have a leader: a commit under way, or else this writer, which leads one
            // below, outside the writer lock.
            let lead = !p.leading;
            p.leading = true;
            (
                Written {
                    object,
                    event: Some(event),
                },
                rx,
                lead,
            )
        };
        if lead {
            // The flush blocks this thread for one fsync; a runtime worker's other tasks can be stolen
            // meanwhile, and only one writer leads at a time.
            self.inner.lead(store.as_ref());
        }
        // Answered only once it is durable and published, or failed.
        done.await.unwrap_or(Err(StoreError::Closed))?;
        Ok(written)
    }

    /// The etcd write: decide on the current object, then a transaction that writes only if the key is still
    /// at that object's revision; answered once this server's watch has applied it.
    async fn write_etcd<E>(
        &self,
        etcd: &Arc<etcd_store::Etcd>,
        key: &str,
        decide: &mut Decide<'_, E>,
    ) -> Result<Written, Lost<E>>
    where
        E: From<StoreError>,
    {
        let guard = etcd.writers.lock(key).await;
        if self.inner.stop.is_cancelled() {
            return Err(Lost::Refused(StoreError::Closed.into()));
        }
        let current = {
            let w = lock(&self.inner.writer);
            match w.overlay.get(key) {
                Some((_, pending)) => pending.clone(),
                None => self.get(key),
            }
        };
        let (kind, value) = match decide(current.as_ref()).map_err(Lost::Refused)? {
            Decision::Keep => {
                let Some(object) = current else {
                    let e = StoreError::Engine(format!("nothing to keep at {key}: it does not exist"));
                    return Err(Lost::Refused(e.into()));
                };
                return Ok(Written { object, event: None });
            }
            Decision::Preview(value) => return Ok(preview(value)),
            Decision::Put(value) if current.is_some() => (EventType::Modified, Some(value)),
            Decision::Put(value) => (EventType::Added, Some(value)),
            Decision::Delete if current.is_none() => {
                let e = StoreError::Engine(format!("delete of missing key {key}"));
                return Err(Lost::Refused(e.into()));
            }
            Decision::Delete => (EventType::Deleted, None),
        };
        let expected = current.as_ref().map_or(0, |c| c.revision);
        let bytes = value.as_ref().map(etcd_store::etcd_bytes);
        let put = etcd.put_if(key, expected, bytes).await;
        let Some(revision) = put.map_err(|e| Lost::Refused(e.into()))? else {
            drop(guard);
            // Another API server wrote the key first: its change is applied before `decide` runs again.
            // A server that cannot catch up refuses with 409 rather than decide on the same stale view.
            if self.catch_up().await.is_err() {
                return Err(Lost::Refused(
                    StoreError::Conflict { key: key.to_string() }.into(),
                ));
            }
            return Err(Lost::Race);
        };
        let (object, new_state) = match (value, current) {
            (Some(v), _) => {
                let s = Arc::new(Stored::new(revision, v));
                (s.clone(), Some(s))
            }
            (None, Some(old)) => (Arc::new(Stored::new(revision, old.value())), None),
            (None, None) => unreachable!("a delete has a current object"),
        };
        {
            let mut w = lock(&self.inner.writer);
            // The watch may have applied it already; then the committed view has it.
            if revision > self.revision() {
                w.overlay.insert(key.to_string(), (revision, new_state));
            }
        }
        drop(guard);
        let mut rx = self.inner.durable.subscribe();
        if tokio::time::timeout(etcd_store::CATCH_UP, rx.wait_for(|&d| d >= revision))
            .await
            .is_err()
        {
            // Committed in etcd (so acknowledged, as upstream), but this server's watch is behind.
            tracing::warn!(
                key,
                revision,
                "written to etcd, but the watch has not delivered it yet"
            );
        }
        Ok(Written {
            object,
            event: Some(kind),
        })
    }

    /// Stop accepting writes, flush what is queued, end every watch. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
        let Some(store) = &self.inner.store else {
            self.inner.hub.close_all();
            return;
        };
        {
            let mut p = lock(&self.inner.pending);
            p.shutdown = true;
            self.inner.wake.notify_all();
        }
        // Wait for the flusher (or a leading writer) to drain the queue.
        let mut p = lock(&self.inner.pending);
        while !p.events.is_empty() || p.leading {
            p = self.inner.wake.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        drop(p);
        if let Err(e) = store.flush() {
            tracing::error!(error = %e, "final flush failed");
        }
        self.inner.hub.close_all();
    }
}

/// A dry run's answer: the would-be object, with no revision.
fn preview(value: Value) -> Written {
    let bytes = Bytes::from(crate::encode::to_vec(&value));
    Written {
        object: Arc::new(Stored {
            revision: 0,
            selectable: Selectable::of(&value),
            bytes,
        }),
        event: None,
    }
}

impl Inner {
    fn new(
        store: Option<Arc<dyn Store>>,
        etcd: Option<Arc<etcd_store::Etcd>>,
        revision: u64,
        objects: BTreeMap<String, Arc<Stored>>,
        hub_config: HubConfig,
    ) -> Arc<Inner> {
        let (durable, _) = tokio_watch::channel(revision);
        Arc::new(Inner {
            store,
            etcd,
            stop: tokio_util::sync::CancellationToken::new(),
            writer: Mutex::new(Writer {
                revision,
                overlay: HashMap::new(),
                refusing: None,
            }),
            committed: RwLock::new(Committed { revision, objects }),
            hub: Hub::new(hub_config, revision),
            pending: Mutex::new(Pending {
                events: VecDeque::new(),
                shutdown: false,
                leading: false,
                handed_off: false,
                recovering: false,
            }),
            wake: Condvar::new(),
            durable,
        })
    }

    /// The flusher thread: leads the commits writers hand to it, drains the queue at shutdown, and
    /// recovers a failed engine.
    fn flush_loop(self: Arc<Self>) {
        let Some(store) = self.store.clone() else {
            return;
        };
        loop {
            let handed_off = {
                let mut p = lock(&self.pending);
                loop {
                    if p.handed_off {
                        p.handed_off = false;
                        break true;
                    }
                    // Queued writes always have a leader, so with none the queue is empty.
                    if p.shutdown && !p.leading {
                        self.wake.notify_all();
                        return;
                    }
                    if p.recovering && !p.leading {
                        break false;
                    }
                    p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                }
            };
            if handed_off {
                // Lead until the queue is empty.
                while self.commit_batch(store.as_ref()) {}
                continue;
            }
            // Recovering: retry until the engine takes writes again, or the server stops.
            match self.recover(store.as_ref()) {
                Ok(restored) => {
                    tracing::warn!(restored, "storage is writable again; writes are accepted");
                }
                Err(e) => {
                    tracing::debug!(error = %e, "storage still cannot be written; retrying");
                    let p = lock(&self.pending);
                    if !p.shutdown {
                        let _ = self.wake.wait_timeout(p, RECOVERY_RETRY);
                    }
                }
            }
        }
    }

    /// A writer's commit (it set `leading`): one batch, its own write included; whatever was queued
    /// behind it meanwhile is handed to the flusher thread, so this writer is answered after one fsync.
    fn lead(&self, store: &dyn Store) {
        if self.commit_batch(store) {
            lock(&self.pending).handed_off = true;
            self.wake.notify_all();
        }
    }

    /// Flush and commit what is queued now, as the leader. Returns whether more was queued meanwhile (the
    /// caller still leads); otherwise leadership ends here.
    fn commit_batch(&self, store: &dyn Store) -> bool {
        let batch: Vec<Arc<Event>> = {
            let mut p = lock(&self.pending);
            if p.events.is_empty() {
                self.end_leading(&mut p);
                return false;
            }
            p.events.iter().map(|q| q.event.clone()).collect()
        };
        if let Err(e) = store.flush() {
            self.fail_pending(e);
            return false;
        }
        let last = batch.last().map(|e| e.revision).unwrap_or(0);
        {
            let mut c = self.committed.write().unwrap_or_else(|e| e.into_inner());
            for ev in &batch {
                match ev.kind {
                    EventType::Deleted => c.objects.remove(&ev.key),
                    _ => c.objects.insert(ev.key.clone(), ev.object.clone()),
                };
                c.revision = ev.revision;
            }
            self.hub.publish(&batch);
        }
        {
            let mut w = lock(&self.writer);
            w.overlay.retain(|_, (rev, _)| *rev > last);
        }
        let more = {
            let mut p = lock(&self.pending);
            let n = batch.len().min(p.events.len());
            for q in p.events.drain(..n) {
                let _ = q.done.send(Ok(()));
            }
            let more = !p.events.is_empty();
            if !more {
                self.end_leading(&mut p);
            }
            more
        };
        self.durable.send_replace(last);
        more
    }

    /// The queue is empty: no commit is under way any more. The flusher waits for that before it recovers
    /// the engine or stops, and shutdown before it returns.
    fn end_leading(&self, p: &mut Pending) {
        p.leading = false;
        if p.shutdown || p.recovering {
            self.wake.notify_all();
        }
    }

    /// A flush failed: nothing queued can be acknowledged (the engine may hold any part of it). Every
    /// waiting write fails with `e`, and writes are refused until [`Inner::recover`] succeeds.
    fn fail_pending(&self, e: StoreError) {
        tracing::error!(error = %e, "flushing storage failed; writes are refused until it recovers");
        let e = refusal(e);
        // Writer before pending, as writers take them: no write is queued between the two.
        let mut w = lock(&self.writer);
        w.overlay.clear();
        w.refusing = Some(e.clone());
        let mut p = lock(&self.pending);
        for q in p.events.drain(..) {
            let _ = q.done.send(Err(e.clone()));
        }
        p.recovering = true;
        p.leading = false;
        self.wake.notify_all();
    }

    /// Recover the engine and make what it holds equal to the committed view: writes that failed may
    /// have reached the disk in part, and must not come back at the next start. Then writes are accepted
    /// again. Returns how many keys were rewritten.
    fn recover(&self, store: &dyn Store) -> Result<usize, StoreError> {
        store.recover()?;
        let loaded = store.load()?;
        // Writes are refused while recovering, so neither the writer's revision nor the committed view
        // (only this thread changes it) moves meanwhile.
        let revision = lock(&self.writer).revision.max(loaded.revision);
        let changes: Vec<Change> = {
            let c = self.committed.read().unwrap_or_else(|e| e.into_inner());
            let mut on_disk: HashMap<String, Bytes> = loaded.objects.into_iter().collect();
            let mut changes = Vec::new();
            for (key, object) in &c.objects {
                if on_disk.remove(key).as_ref() != Some(&object.bytes) {
                    changes.push(Change {
                        key: key.clone(),
                        value: Some(object.bytes.clone()),
                    });
                }
            }
            changes.extend(on_disk.into_keys().map(|key| Change { key, value: None }));
            changes
        };
        // Written even when nothing differs: a write and a flush that succeed are what shows the disk
        // takes writes again.
        store.write(revision, &changes)?;
        store.flush()?;
        let mut w = lock(&self.writer);
        w.revision = revision;
        w.refusing = None;
        lock(&self.pending).recovering = false;
        Ok(changes.len())
    }
}

/// What writes get while the engine recovers from `e`: a full disk as such (507), anything else as
/// unavailable (503, like etcd out of reach), never a 500: the server retries by itself.
fn refusal(e: StoreError) -> StoreError {
    match e {
        StoreError::NoSpace { .. } | StoreError::Unavailable(_) | StoreError::Closed => e,
        other => StoreError::Unavailable(format!(
            "the storage engine failed ({other}); writes are refused until it recovers"
        )),
    }
}

/// How often a failed engine is tried again (reopened, rewritten, flushed).
const RECOVERY_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn storage() -> Storage {
        Storage::open(Arc::new(MemoryStore::default()), HubConfig::default()).unwrap()
    }

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name}})
    }

    async fn put(s: &Storage, key: &str, v: Value) -> Written {
        s.write::<StoreError>(key, |_| Ok(Decision::Put(v.clone())))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn every_write_gets_the_next_revision_as_its_resource_version() {
        let s = storage();
        let a = put(&s, "core/pods/ns/a", obj("a")).await;
        let b = put(&s, "core/pods/ns/b", obj("b")).await;
        assert_eq!((a.object.revision, b.object.revision), (1, 2));
        assert_eq!(b.object.value()["metadata"]["resourceVersion"], "2");
        assert_eq!(s.revision(), 2);
    }

    #[tokio::test]
    async fn a_write_is_visible_to_readers_once_acknowledged() {
        let s = storage();
        put(&s, "core/pods/ns/a", obj("a")).await;
        assert_eq!(s.get("core/pods/ns/a").unwrap().revision, 1);
    }

    #[tokio::test]
    async fn keep_changes_nothing_and_does_not_bump_the_revision() {
        let s = storage();
        put(&s, "k/a", obj("a")).await;
        let w = s
            .write::<StoreError>("k/a", |_| Ok(Decision::Keep))
            .await
            .unwrap();
        assert!(w.event.is_none());
        assert_eq!(s.revision(), 1);
        // Keeping what is not there is an error, not a panic.
        let e = s
            .write::<StoreError>("k/missing", |_| Ok(Decision::Keep))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert_eq!(s.revision(), 1);
    }

    #[tokio::test]
    async fn delete_event_carries_the_deletion_revision() {
        let s = storage();
        put(&s, "k/a", obj("a")).await;
        let w = s
            .write::<StoreError>("k/a", |_| Ok(Decision::Delete))
            .await
            .unwrap();
        assert_eq!(w.event, Some(EventType::Deleted));
        assert_eq!(w.object.value()["metadata"]["resourceVersion"], "2");
        assert!(s.get("k/a").is_none());
    }

    #[tokio::test]
    async fn list_pages_in_key_order_and_reports_what_remains() {
        let s = storage();
        for n in ["c", "a", "b"] {
            put(&s, &format!("core/pods/ns/{n}"), obj(n)).await;
        }
        put(&s, "core/pods/other/z", obj("z")).await;
        let page = s.list("core/pods/ns/", None, Some(2), |_| true);
        let names: Vec<_> = page
            .items
            .iter()
            .map(|o| o.value()["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, vec![json!("a"), json!("b")]);
        assert_eq!(page.next_key.as_deref(), Some("core/pods/ns/c"));
        assert_eq!(page.remaining, 1);
        let rest = s.list("core/pods/ns/", page.next_key.as_deref(), Some(2), |_| true);
        assert_eq!(rest.items.len(), 1);
        assert!(rest.next_key.is_none());
    }

    #[tokio::test]
    async fn concurrent_writers_are_serialised_and_all_acknowledged() {
        let s = storage();
        let mut tasks = Vec::new();
        for i in 0..50 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                put(&s, &format!("k/{i}"), obj("x")).await.object.revision
            }));
        }
        let mut revs = Vec::new();
        for t in tasks {
            revs.push(t.await.unwrap());
        }
        revs.sort();
        assert_eq!(revs, (1..=50).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn watch_now_starts_with_current_objects_then_live_changes_without_duplicates() {
        let s = storage();
        put(&s, "k/a", obj("a")).await;
        let mut w = s.watch("k/", WatchFrom::Now).unwrap();
        assert_eq!(w.initial.len(), 1);
        put(&s, "k/b", obj("b")).await;
        match w.subscription.next().await {
            crate::watch::Next::Event(e) => assert_eq!(e.revision, 2),
            _ => panic!("expected an event"),
        }
    }

    /// A memory store whose flush waits while the gate is closed, and records which thread flushed.
    #[derive(Default)]
    struct GateStore {
        inner: MemoryStore,
        closed: Mutex<bool>,
        opened: Condvar,
        flushers: Mutex<Vec<String>>,
    }

    impl GateStore {
        fn set_closed(&self, closed: bool) {
            *self.closed.lock().unwrap() = closed;
            self.opened.notify_all();
        }

        fn flushes(&self) -> Vec<String> {
            self.flushers.lock().unwrap().clone()
        }
    }

    impl Store for GateStore {
        fn load(&self) -> Result<Loaded, StoreError> {
            self.inner.load()
        }
        fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError> {
            self.inner.write(revision, changes)
        }
        fn flush(&self) -> Result<(), StoreError> {
            let mut closed = self.closed.lock().unwrap();
            while *closed {
                closed = self.opened.wait(closed).unwrap();
            }
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.flushers.lock().unwrap().push(name);
            Ok(())
        }
        fn size_on_disk(&self) -> Option<u64> {
            None
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_write_is_flushed_by_its_own_writer_not_handed_to_the_flusher_thread() {
        let store = Arc::new(GateStore::default());
        let s = Storage::open(store.clone(), HubConfig::default()).unwrap();
        for i in 0..5 {
            let w = put(&s, &format!("k/{i}"), obj("x")).await;
            assert_eq!(w.object.revision, i + 1);
            assert!(s.get(&format!("k/{i}")).is_some(), "acknowledged means committed");
        }
        let flushes = store.flushes();
        assert_eq!(flushes.len(), 5, "one flush per serial write: {flushes:?}");
        assert!(
            flushes.iter().all(|t| t != "kubeling-flusher"),
            "a serial write waited for the flusher thread: {flushes:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_queued_behind_a_writers_flush_are_committed_by_the_flusher_even_if_their_writer_gives_up()
    {
        let store = Arc::new(GateStore::default());
        let s = Storage::open(store.clone(), HubConfig::default()).unwrap();
        store.set_closed(true);
        // The first writer leads and blocks in the flush.
        let first = tokio::spawn({
            let s = s.clone();
            async move { put(&s, "k/a", obj("a")).await.object.revision }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lock(&s.inner.pending).events.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the first write was never queued"
            );
            tokio::task::yield_now().await;
        }
        assert!(lock(&s.inner.pending).leading);
        // Two more queue behind it; one of them stops waiting.
        let second = tokio::spawn({
            let s = s.clone();
            async move { put(&s, "k/b", obj("b")).await.object.revision }
        });
        let third = tokio::spawn({
            let s = s.clone();
            async move { put(&s, "k/c", obj("c")).await.object.revision }
        });
        while lock(&s.inner.pending).events.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "writes not queued");
            tokio::task::yield_now().await;
        }
        third.abort();
        assert!(s.get("k/a").is_none(), "nothing is visible before its flush");
        store.set_closed(false);
        assert_eq!(first.await.unwrap(), 1);
        assert_eq!(second.await.unwrap(), 2);
        // The abandoned write was flushed and committed all the same.
        let mut rx = s.inner.durable.subscribe();
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.wait_for(|&d| d >= 3))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.get("k/c").unwrap().revision, 3);
        let flushes = store.flushes();
        // The first writer's own flush may have covered the writes queued before it started; whatever
        // remained went to the flusher thread, never to another writer waiting for its answer.
        assert!(!flushes.is_empty() && flushes.len() <= 2, "{flushes:?}");
        assert!(flushes[0] != "kubeling-flusher", "{flushes:?}");
        assert!(
            flushes[1..].iter().all(|t| t == "kubeling-flusher"),
            "{flushes:?}"
        );
        let p = lock(&s.inner.pending);
        assert!(!p.leading && p.events.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_on_worker_threads_are_all_acknowledged_once_durable_in_shared_flushes() {
        let store = Arc::new(GateStore::default());
        let s = Storage::open(store.clone(), HubConfig::default()).unwrap();
        let mut tasks = Vec::new();
        for i in 0..200 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let w = put(&s, &format!("k/{i}"), obj("x")).await;
                // Acknowledged means committed: readers see it.
                assert!(s.get(&format!("k/{i}")).is_some());
                w.object.revision
            }));
        }
        let mut revs = Vec::new();
        for t in tasks {
            revs.push(t.await.unwrap());
        }
        revs.sort();
        assert_eq!(revs, (1..=200).collect::<Vec<_>>());
        assert!(store.flushes().len() <= 200);
        s.shutdown();
        let p = lock(&s.inner.pending);
        assert!(!p.leading && p.events.is_empty());
    }

    #[tokio::test]
    async fn a_revision_the_engine_lost_beside_its_object_is_never_given_again() {
        // An engine that kept an object written at revision 7 but only revision 5 for itself.
        let store = Arc::new(MemoryStore::default());
        let mut o = obj("kept");
        o["metadata"]["resourceVersion"] = json!("7");
        store
            .write(
                5,
                &[Change {
                    key: "k/kept".into(),
                    value: Some(Bytes::from(serde_json::to_vec(&o).unwrap())),
                }],
            )
            .unwrap();
        let s = Storage::open(store, HubConfig::default()).unwrap();
        assert_eq!(s.revision(), 7);
        assert_eq!(put(&s, "k/next", obj("next")).await.object.revision, 8);
    }

    #[tokio::test]
    async fn watch_after_replays_history() {
        let s = storage();
        put(&s, "k/a", obj("a")).await;
        put(&s, "k/b", obj("b")).await;
        let w = s.watch("k/", WatchFrom::After(1)).unwrap();
        assert_eq!(w.replay.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![2]);
    }

    // ---- a failing engine (a full disk) ----------------------------------------------------------------

    use std::sync::atomic::Ordering::SeqCst;

    fn faulty() -> (Arc<faulty::FaultyStore>, Storage) {
        let store = Arc::new(faulty::FaultyStore::default());
        let s = Storage::open(store.clone(), HubConfig::default()).unwrap();
        (store, s)
    }

    async fn try_put(s: &Storage, key: &str) -> Result<Written, StoreError> {
        s.write::<StoreError>(key, |_| Ok(Decision::Put(obj(key)))).await
    }

    /// Writes `key` until one is acknowledged (the flusher retries every second); panics after 10 s.
    async fn put_once_writable(s: &Storage, key: &str) -> Written {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match try_put(s, key).await {
                Ok(w) => return w,
                Err(e) => assert!(std::time::Instant::now() < deadline, "still refused: {e}"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    fn keys(c: &faulty::Contents) -> Vec<&str> {
        c.1.keys().map(String::as_str).collect()
    }

    #[tokio::test]
    async fn a_write_whose_flush_fails_is_refused_unseen_and_later_writes_are_refused_at_once() {
        let (store, s) = faulty();
        put(&s, "k/a", obj("a")).await;
        let mut w = s.watch("k/", WatchFrom::After(1)).unwrap();
        store.fail_flush.store(true, SeqCst);
        store.fail_recover.store(true, SeqCst);
        let err = try_put(&s, "k/b").await.unwrap_err();
        assert!(matches!(err, StoreError::NoSpace { .. }), "{err}");
        assert!(s.get("k/b").is_none());
        assert_eq!(s.revision(), 1);
        assert!(!s.ready());
        // Refused before anything reaches the engine: a write that cannot flush is never queued.
        let err = try_put(&s, "k/c").await.unwrap_err();
        assert!(matches!(err, StoreError::NoSpace { .. }), "{err}");
        assert!(s.get("k/c").is_none());
        // Reads still answer; no watcher saw the refused writes.
        assert_eq!(s.list("k/", None, None, |_| true).items.len(), 1);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(100), w.subscription.next())
                .await
                .is_err(),
            "a watcher saw a refused write"
        );
    }

    #[tokio::test]
    async fn writes_resume_once_the_engine_flushes_again_and_what_failed_is_gone_from_the_disk() {
        let (store, s) = faulty();
        put(&s, "k/a", obj("a")).await;
        let mut w = s.watch("k/", WatchFrom::After(1)).unwrap();
        store.fail_flush.store(true, SeqCst);
        store.fail_recover.store(true, SeqCst);
        // Concurrent writes: whether they shared the failed flush or came after it, none is acknowledged.
        let mut tasks = Vec::new();
        for i in 0..8 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move { try_put(&s, &format!("k/f{i}")).await }));
        }
        for t in tasks {
            assert!(
                t.await.unwrap().is_err(),
                "a write whose flush failed was acknowledged"
            );
        }
        // Half of a failed batch reached the disk: kept there, it would come back at the next start.
        assert!(keys(&store.durable()).len() > 1, "{:?}", keys(&store.durable()));
        store.fail_flush.store(false, SeqCst);
        store.fail_recover.store(false, SeqCst);
        let after = put_once_writable(&s, "k/z").await;
        assert!(s.ready());
        assert_eq!(keys(&store.durable()), ["k/a", "k/z"]);
        assert_eq!(store.durable().0, after.object.revision);
        assert_eq!(s.list("k/", None, None, |_| true).items.len(), 2);
        // Revisions never go back: the refused writes' revisions are skipped, not reused.
        assert!(after.object.revision > 2, "{}", after.object.revision);
        match w.subscription.next().await {
            crate::watch::Next::Event(e) => {
                assert_eq!((e.key.as_str(), e.revision), ("k/z", after.object.revision))
            }
            _ => panic!("expected the event of k/z"),
        }
    }

    #[tokio::test]
    async fn a_failed_engine_write_refuses_writes_until_the_engine_recovers() {
        let (store, s) = faulty();
        put(&s, "k/a", obj("a")).await;
        store.fail_write.store(true, SeqCst);
        assert!(matches!(
            try_put(&s, "k/x").await,
            Err(StoreError::NoSpace { .. })
        ));
        store.fail_write.store(false, SeqCst);
        put_once_writable(&s, "k/y").await;
        assert!(s.get("k/x").is_none());
        assert_eq!(keys(&store.durable()), ["k/a", "k/y"]);
    }

    #[tokio::test]
    async fn other_engine_failures_refuse_writes_as_unavailable_not_as_internal_errors() {
        assert!(matches!(
            refusal(StoreError::Engine("IO error: input/output error".into())),
            StoreError::Unavailable(m) if m.contains("input/output error") && m.contains("until it recovers")
        ));
        assert!(matches!(
            refusal(StoreError::NoSpace { path: "/d".into() }),
            StoreError::NoSpace { .. }
        ));
    }

    #[tokio::test]
    async fn shutdown_while_the_engine_cannot_recover_returns() {
        let (store, s) = faulty();
        store.fail_flush.store(true, SeqCst);
        store.fail_recover.store(true, SeqCst);
        assert!(try_put(&s, "k/a").await.is_err());
        let s2 = s.clone();
        let stopped = tokio::task::spawn_blocking(move || s2.shutdown());
        tokio::time::timeout(std::time::Duration::from_secs(5), stopped)
            .await
            .expect("shutdown hung while recovering")
            .unwrap();
        assert!(try_put(&s, "k/b").await.is_err());
    }
}
