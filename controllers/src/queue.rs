//! The work queue every controller pulls keys from (client-go's `workqueue`): a key is queued at most once
//! however many events name it (`dirty`), is never handed to two workers at once (`processing`: a key
//! added while it is being worked on is queued again when its worker calls [`WorkQueue::done`]), can be
//! added after a delay, and failures are retried with a per-key exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// client-go `DefaultControllerRateLimiter`'s per-item part: 5 ms doubling up to 1000 s.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// The cap of the per-item backoff.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);

/// The delay before the `failures`-th retry (1-based): `base × 2^(failures−1)`, at most `max`.
pub fn backoff(failures: u32, base: Duration, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(40);
    base.checked_mul(1u32 << exp.min(31))
        .map(|d| if exp > 31 { max } else { d })
        .unwrap_or(max)
        .min(max)
}

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    dirty: HashSet<String>,
    processing: HashSet<String>,
    failures: HashMap<String, u32>,
    /// Keys waiting for a delayed add, with when: one timer per key, the earliest (client-go's delaying
    /// queue keeps the earlier of two times for a key).
    waiting: HashMap<String, tokio::time::Instant>,
    shut_down: bool,
}

/// A deduplicating, rate-limited queue of object keys (`namespace/name`, or `name` for cluster objects).
pub struct WorkQueue {
    name: &'static str,
    state: Mutex<State>,
    ready: Notify,
    base: Duration,
    max: Duration,
    /// Retries before a failing key is dropped until its next event; 0: never dropped.
    max_retries: std::sync::atomic::AtomicU32,
}

impl WorkQueue {
    /// A queue with client-go's default rate limiter.
    pub fn new(name: &'static str) -> Arc<WorkQueue> {
        WorkQueue::with_backoff(name, BASE_DELAY, MAX_DELAY)
    }

    /// A queue whose failed keys wait `base × 2^n`, at most `max` (the Job controller: 1 s to 60 s).
    pub fn with_backoff(name: &'static str, base: Duration, max: Duration) -> Arc<WorkQueue> {
        Arc::new(WorkQueue {
            name,
            state: Mutex::new(State::default()),
            ready: Notify::new(),
            base,
            max,
            max_retries: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Drop a key after `n` failed retries (the Deployment controller's `maxRetries` = 15); other
    /// controllers retry forever, with backoff.
    pub fn set_max_retries(&self, n: u32) {
        self.max_retries.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a key that failed `retries` times is retried again.
    pub fn retry_allowed(&self, retries: u32) -> bool {
        let max = self.max_retries.load(std::sync::atomic::Ordering::Relaxed);
        max == 0 || retries < max
    }

    /// The controller this queue feeds.
    pub fn name(&self) -> &'static str {
        self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `key` unless it is queued already.
    pub fn add(&self, key: impl Into<String>) {
        let key = key.into();
        let mut s = self.lock();
        if s.shut_down || !s.dirty.insert(key.clone()) {
            return;
        }
        if !s.processing.contains(&key) {
            s.queue.push_back(key);
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Queue `key` after `delay` (at once when it is zero). A key already waiting for an earlier time keeps
    /// that; a later one is brought forward.
    pub fn add_after(self: &Arc<Self>, key: impl Into<String>, delay: Duration) {
        let key = key.into();
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let at = tokio::time::Instant::now() + delay;
        {
            let mut s = self.lock();
            if s.shut_down || s.waiting.get(&key).is_some_and(|t| *t <= at) {
                return;
            }
            s.waiting.insert(key.clone(), at);
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(q) = me.upgrade() {
                let due = {
                    let mut s = q.lock();
                    // A timer brought forward since has fired (or will) in our place.
                    let mine = s.waiting.get(&key) == Some(&at);
                    if mine {
                        s.waiting.remove(&key);
                    }
                    mine
                };
                if due {
                    q.add(key);
                }
            }
        });
    }

    /// Queue `key` again after its backoff, one step longer each time until [`WorkQueue::forget`].
    pub fn add_rate_limited(self: &Arc<Self>, key: impl Into<String>) {
        let key = key.into();
        let n = {
            let mut s = self.lock();
            let n = s.failures.entry(key.clone()).or_default();
            *n += 1;
            *n
        };
        self.add_after(key, backoff(n, self.base, self.max));
    }

    /// How many times `key` has been retried since it last succeeded.
    pub fn retries(&self, key: &str) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// `key` succeeded: its next failure starts the backoff afresh.
    pub fn forget(&self, key: &str) {
        self.lock().failures.remove(key);
    }

    /// The next key to work on, or `None` once the queue is shut down.
    pub async fn get(&self) -> Option<String> {
        loop {
            let notified = self.ready.notified();
            {
                let mut s = self.lock();
                if s.shut_down {
                    return None;
                }
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    if !s.queue.is_empty() {
                        // Several keys wait: make sure another worker wakes for the next one.
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// The worker is finished with `key`; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &str) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Stop handing out keys; workers waiting in [`WorkQueue::get`] get `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.ready.notify_waiters();
    }

    /// Keys waiting (not counting those being worked on).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// True when no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let b = Duration::from_millis(5);
        let m = Duration::from_secs(1000);
        assert_eq!(backoff(1, b, m), Duration::from_millis(5));
        assert_eq!(backoff(2, b, m), Duration::from_millis(10));
        assert_eq!(backoff(5, b, m), Duration::from_millis(80));
        assert_eq!(backoff(30, b, m), m);
        assert_eq!(backoff(u32::MAX, b, m), m);
        assert_eq!(
            backoff(4, Duration::from_secs(1), Duration::from_secs(60)),
            Duration::from_secs(8)
        );
        assert_eq!(
            backoff(9, Duration::from_secs(1), Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }

    #[tokio::test]
    async fn a_key_added_many_times_is_handed_out_once() {
        let q = WorkQueue::new("t");
        q.add("a");
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await.as_deref(), Some("a"));
        assert_eq!(q.get().await.as_deref(), Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done_and_not_before() {
        let q = WorkQueue::new("t");
        q.add("a");
        let k = q.get().await.unwrap();
        q.add("a");
        assert!(
            q.is_empty(),
            "not handed to a second worker while the first works on it"
        );
        q.done(&k);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done("a");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_keys_wait_longer_each_failure_until_forgotten() {
        let q = WorkQueue::with_backoff("t", Duration::from_secs(1), Duration::from_secs(60));
        q.add_rate_limited("a");
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(q.is_empty());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done("a");
        q.add_rate_limited("a");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(q.is_empty(), "second failure waits 2 s");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.retries("a"), 2);
        q.forget("a");
        assert_eq!(q.retries("a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_keeps_its_earliest_time_and_is_added_once() {
        let q = WorkQueue::new("t");
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(60));
        q.add_after("a", Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(5100)).await;
        assert_eq!(q.get().await.as_deref(), Some("a"), "brought forward to 5 s");
        q.done("a");
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(q.is_empty(), "the superseded timers do not add it again");
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers() {
        let q = WorkQueue::new("t");
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.get().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }
}
