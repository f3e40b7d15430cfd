//! One lock per key: an etcd store's writes of one key wait for each other on this server (so they do not
//! lose races to each other in etcd and retry), while writes of different keys go to etcd at once, where
//! etcd commits concurrent transactions together. An entry lives only while someone holds or waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// The locks of the keys being written.
#[derive(Default)]
pub(super) struct KeyLocks {
    held: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// `key`'s lock, held until dropped. Made before the wait, so a wait given up (its future dropped, even
/// after the lock was handed to it) still removes the key's entry when it is the last.
pub(super) struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    key: String,
    mutex: Option<Arc<tokio::sync::Mutex<()>>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyLocks {
    /// Wait for `key`'s lock.
    pub(super) async fn lock(&self, key: &str) -> KeyGuard<'_> {
        let mutex = super::lock(&self.held)
            .entry(key.to_string())
            .or_default()
            .clone();
        let mut guard = KeyGuard {
            locks: self,
            key: key.to_string(),
            mutex: Some(mutex.clone()),
            guard: None,
        };
        guard.guard = Some(mutex.lock_owned().await);
        guard
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        super::lock(&self.held).len()
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        let mut held = super::lock(&self.locks.held);
        drop(self.guard.take());
        drop(self.mutex.take());
        // Only the map's own reference left: nobody holds or waits for the key.
        if held.get(&self.key).is_some_and(|m| Arc::strong_count(m) == 1) {
            held.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_key_waits_other_keys_do_not_and_nothing_is_kept() {
        let locks = Arc::new(KeyLocks::default());
        let a = locks.lock("a").await;
        // Another key at once.
        let b = tokio::time::timeout(Duration::from_secs(5), locks.lock("b")).await;
        assert!(b.is_ok(), "a lock of another key waited");
        drop(b);
        // The same key waits until the first guard goes.
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move {
                let _g = locks.lock("a").await;
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a second lock of one key did not wait");
        assert_eq!(
            locks.len(),
            1,
            "the waited-for key is kept while it is waited for"
        );
        drop(a);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter gets the lock once it is free")
            .unwrap();
        assert_eq!(locks.len(), 0, "no entry outlives its holders");
    }

    #[tokio::test]
    async fn a_wait_given_up_after_the_lock_was_handed_to_it_leaves_no_entry() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks.lock("a").await;
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move {
                let _g = locks.lock("a").await;
                std::future::pending::<()>().await;
            }
        });
        // Let the waiter queue up, then hand it the lock and give up the wait before it runs again (this
        // test's runtime has one thread: the waiter runs only when this task yields).
        tokio::task::yield_now().await;
        assert_eq!(locks.len(), 1);
        drop(first);
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(locks.len(), 0);
        // And the key can be locked again.
        let again = tokio::time::timeout(Duration::from_secs(5), locks.lock("a")).await;
        assert!(again.is_ok());
    }
}
