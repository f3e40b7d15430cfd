//! The watch hub: fan-out of committed changes to watchers, and the bounded history they resume from.
//!
//! `storage` publishes each durable batch of events here, in revision order, while it holds its committed-view
//! lock; a new watcher registers under the same lock, so the snapshot or history it starts from and the live
//! events it receives meet at one cut point, with no gap and no duplicate. Each watcher has a bounded channel:
//! a watcher that falls that far behind is cut off and told so (the HTTP layer then sends a 410 `Expired`
//! event); a slow watcher never blocks the writers. Dropping a [`Subscription`] unregisters it at once
//! (Xline's `WatchHandle: Drop`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use crate::storage::Stored;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed; the object is its last state, carrying the revision of the deletion.
    Deleted,
}

impl EventType {
    /// The watch event `type` on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    /// The revision this change was committed at.
    pub revision: u64,
    /// Storage key of the object (`<group>/<resource>/<namespace>/<name>`).
    pub key: String,
    /// What happened.
    pub kind: EventType,
    /// The new state (for a deletion: the last state, with the deletion's resourceVersion).
    pub object: Arc<Stored>,
    /// The state before the change, if there was one: selector watches need it (an object leaving a
    /// selector is a DELETED for that watcher).
    pub previous: Option<Arc<Stored>>,
}

/// Hub settings.
#[derive(Debug, Clone, Copy)]
pub struct HubConfig {
    /// How many recent events are kept for resuming watches.
    pub history: usize,
    /// How many undelivered events one watcher may have before it is cut off.
    pub watcher_buffer: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            history: 10_000,
            watcher_buffer: 4_096,
        }
    }
}

struct Subscriber {
    prefix: String,
    tx: mpsc::Sender<Arc<Event>>,
    overflowed: Arc<AtomicBool>,
}

struct HubState {
    history: VecDeque<Arc<Event>>,
    /// A watch may resume from any revision >= this: every event after it is still in `history`.
    oldest_resumable: u64,
    /// The last published revision.
    revision: u64,
    subscribers: HashMap<u64, Subscriber>,
}

/// The fan-out point; shared behind an `Arc`.
pub struct Hub {
    config: HubConfig,
    state: Mutex<HubState>,
    next_id: AtomicU64,
}

/// Where a registered watcher starts, decided under the hub lock.
pub enum Start {
    /// Replay these history events (all with revision > the requested one), then live events.
    Replay(Vec<Arc<Event>>),
    /// The requested revision is older than the history: the watcher must relist.
    TooOld {
        /// The requested revision.
        requested: u64,
        /// The oldest revision that could still be resumed from.
        oldest: u64,
    },
}

impl Hub {
    /// A hub whose history starts at `revision` (the store's revision at start-up).
    pub fn new(config: HubConfig, revision: u64) -> Arc<Hub> {
        Arc::new(Hub {
            config,
            state: Mutex::new(HubState {
                history: VecDeque::new(),
                oldest_resumable: revision,
                revision,
                subscribers: HashMap::new(),
            }),
            next_id: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last published revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Number of registered watchers.
    pub fn watchers(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// Publish committed events, in revision order. Called by storage under its committed-view lock.
    pub fn publish(&self, events: &[Arc<Event>]) {
        let mut st = self.lock();
        for ev in events {
            st.revision = ev.revision;
            st.history.push_back(ev.clone());
            if st.history.len() > self.config.history
                && let Some(old) = st.history.pop_front()
            {
                st.oldest_resumable = old.revision;
            }
            st.subscribers.retain(|_, sub| {
                if !ev.key.starts_with(&sub.prefix) {
                    return true;
                }
                match sub.tx.try_send(ev.clone()) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        // Too slow: cut it off rather than wait or skip events silently.
                        sub.overflowed.store(true, Ordering::Release);
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            });
        }
    }

    /// Register a watcher of keys under `prefix`. `after`: resume strictly after this revision (replaying
    /// history); `None`: live events only (the caller took a snapshot under the same lock as this call).
    pub fn subscribe(self: &Arc<Self>, prefix: String, after: Option<u64>) -> (Start, Subscription) {
        let mut st = self.lock();
        let start = match after {
            None => Start::Replay(Vec::new()),
            Some(n) if n < st.oldest_resumable || n > st.revision => Start::TooOld {
                requested: n,
                oldest: st.oldest_resumable,
            },
            Some(n) => {
                let from = st.history.partition_point(|e| e.revision <= n);
                Start::Replay(
                    st.history
                        .range(from..)
                        .filter(|e| e.key.starts_with(&prefix))
                        .cloned()
                        .collect(),
                )
            }
        };
        let (tx, rx) = mpsc::channel(self.config.watcher_buffer);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let overflowed = Arc::new(AtomicBool::new(false));
        if !matches!(start, Start::TooOld { .. }) {
            st.subscribers.insert(
                id,
                Subscriber {
                    prefix,
                    tx,
                    overflowed: overflowed.clone(),
                },
            );
        }
        let sub = Subscription {
            id,
            hub: self.clone(),
            rx,
            overflowed,
            start_revision: st.revision,
        };
        (start, sub)
    }

    fn unsubscribe(&self, id: u64) {
        self.lock().subscribers.remove(&id);
    }

    /// Every change up to `revision` has been published (a store whose revisions also count changes
    /// elsewhere: etcd's progress notifications).
    pub fn advance(&self, revision: u64) {
        let mut st = self.lock();
        st.revision = st.revision.max(revision);
    }

    /// Start over at `revision` with no history: the events before it are unknown (the store reloaded
    /// after missing changes). Every watcher ends; resuming from before `revision` is refused (410).
    pub fn reset(&self, revision: u64) {
        let mut st = self.lock();
        st.history.clear();
        st.oldest_resumable = revision;
        st.revision = revision;
        st.subscribers.clear();
    }

    /// Drop every watcher: their streams end (used at shutdown).
    pub fn close_all(&self) {
        self.lock().subscribers.clear();
    }
}

/// A registered watcher's end of the hub. Dropping it unregisters.
pub struct Subscription {
    id: u64,
    hub: Arc<Hub>,
    rx: mpsc::Receiver<Arc<Event>>,
    overflowed: Arc<AtomicBool>,
    /// The hub's revision when the watcher registered.
    pub start_revision: u64,
}

/// What a watcher's next read gives.
pub enum Next {
    /// A live event.
    Event(Arc<Event>),
    /// The watcher fell behind and was cut off.
    Overflowed,
    /// The hub closed (shutdown).
    Closed,
}

impl Subscription {
    /// The next live event.
    pub async fn next(&mut self) -> Next {
        match self.rx.recv().await {
            Some(ev) => Next::Event(ev),
            None if self.overflowed.load(Ordering::Acquire) => Next::Overflowed,
            None => Next::Closed,
        }
    }

    /// The revision up to which this watcher has been sent everything: the hub's revision if no event is
    /// waiting in the channel (for bookmarks).
    pub fn caught_up_revision(&mut self) -> Option<u64> {
        let rev = self.hub.revision();
        if self.rx.is_empty() { Some(rev) } else { None }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unsubscribe(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Stored;
    use serde_json::json;

    fn event(rev: u64, key: &str) -> Arc<Event> {
        Arc::new(Event {
            revision: rev,
            key: key.to_string(),
            kind: EventType::Added,
            object: Arc::new(Stored::new(rev, json!({"metadata": {"name": key}}))),
            previous: None,
        })
    }

    #[tokio::test]
    async fn resume_replays_strictly_after_the_revision_and_only_matching_keys() {
        let hub = Hub::new(HubConfig::default(), 0);
        hub.publish(&[
            event(1, "core/pods/a/x"),
            event(2, "core/configmaps/a/y"),
            event(3, "core/pods/a/z"),
        ]);
        let (start, _sub) = hub.subscribe("core/pods/".into(), Some(1));
        let Start::Replay(evs) = start else {
            panic!("expected replay")
        };
        assert_eq!(evs.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![3]);
    }

    #[tokio::test]
    async fn resume_from_before_history_is_too_old() {
        let hub = Hub::new(
            HubConfig {
                history: 2,
                watcher_buffer: 8,
            },
            0,
        );
        hub.publish(&[event(1, "k/a"), event(2, "k/b"), event(3, "k/c")]);
        let (start, _sub) = hub.subscribe("k/".into(), Some(0));
        assert!(matches!(
            start,
            Start::TooOld {
                requested: 0,
                oldest: 1
            }
        ));
        let (start, _sub) = hub.subscribe("k/".into(), Some(1));
        assert!(matches!(start, Start::Replay(ref v) if v.len() == 2));
    }

    #[tokio::test]
    async fn resume_from_the_future_is_too_old() {
        let hub = Hub::new(HubConfig::default(), 5);
        let (start, _sub) = hub.subscribe("k/".into(), Some(9));
        assert!(matches!(start, Start::TooOld { requested: 9, .. }));
    }

    #[tokio::test]
    async fn slow_watcher_is_cut_off_without_blocking_the_publisher() {
        let hub = Hub::new(
            HubConfig {
                history: 100,
                watcher_buffer: 2,
            },
            0,
        );
        let (_, mut sub) = hub.subscribe("k/".into(), None);
        for rev in 1..=5 {
            hub.publish(&[event(rev, "k/a")]);
        }
        assert_eq!(hub.watchers(), 0);
        assert!(matches!(sub.next().await, Next::Event(e) if e.revision == 1));
        assert!(matches!(sub.next().await, Next::Event(e) if e.revision == 2));
        assert!(matches!(sub.next().await, Next::Overflowed));
    }

    #[tokio::test]
    async fn dropping_a_subscription_unregisters_it() {
        let hub = Hub::new(HubConfig::default(), 0);
        let (_, sub) = hub.subscribe("k/".into(), None);
        assert_eq!(hub.watchers(), 1);
        drop(sub);
        assert_eq!(hub.watchers(), 0);
    }
}
