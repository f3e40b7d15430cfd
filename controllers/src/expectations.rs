//! Expectations (`pkg/controller/controller_utils.go`): before a controller creates N pods or deletes some,
//! it records what it expects to see; until the informer has shown all of it (or 5 minutes pass), the
//! controller's sync does no create/delete work. This is what keeps a lagging cache from causing double
//! creates. Deletions are tracked by pod key (upstream's `UIDTrackingControllerExpectations`), so the
//! update that sets a deletionTimestamp and the delete that follows count once.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// client-go `ExpectationsTimeout`.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Expected {
    adds: i64,
    deletes: HashSet<String>,
    since: Instant,
}

/// Expectations per controller key.
#[derive(Default)]
pub struct Expectations {
    map: Mutex<HashMap<String, Expected>>,
}

impl Expectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Expected>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when `key` may create or delete again: nothing outstanding, or the record expired.
    pub fn satisfied(&self, key: &str) -> bool {
        self.satisfied_at(key, Instant::now())
    }

    fn satisfied_at(&self, key: &str, now: Instant) -> bool {
        match self.lock().get(key) {
            None => true,
            Some(e) => {
                (e.adds <= 0 && e.deletes.is_empty()) || now.duration_since(e.since) > EXPECTATIONS_TIMEOUT
            }
        }
    }

    /// `key` is about to create `adds` objects.
    pub fn expect_creations(&self, key: &str, adds: usize) {
        let mut m = self.lock();
        let e = m.entry(key.to_string()).or_insert_with(|| Expected {
            adds: 0,
            deletes: HashSet::new(),
            since: Instant::now(),
        });
        e.adds = adds as i64;
        e.since = Instant::now();
    }

    /// `key` is about to delete the objects `deleted` (their keys).
    pub fn expect_deletions(&self, key: &str, deleted: impl IntoIterator<Item = String>) {
        let mut m = self.lock();
        let e = m.entry(key.to_string()).or_insert_with(|| Expected {
            adds: 0,
            deletes: HashSet::new(),
            since: Instant::now(),
        });
        e.deletes.extend(deleted);
        e.since = Instant::now();
    }

    /// One creation was seen (or failed, or was skipped).
    pub fn creation_observed(&self, key: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.adds -= 1;
        }
    }

    /// `n` creations will not happen (skipped after an error).
    pub fn lower_creations(&self, key: &str, n: usize) {
        if let Some(e) = self.lock().get_mut(key) {
            e.adds -= n as i64;
        }
    }

    /// The deletion of `object` was seen (or failed).
    pub fn deletion_observed(&self, key: &str, object: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.deletes.remove(object);
        }
    }

    /// Forget `key` (its controller object is gone).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_are_expected_until_each_is_observed() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs"));
        e.expect_creations("ns/rs", 2);
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(e.satisfied("ns/rs"));
    }

    #[test]
    fn a_deletion_seen_twice_counts_once() {
        let e = Expectations::default();
        e.expect_deletions("ns/rs", ["ns/a".to_string(), "ns/b".to_string()]);
        e.deletion_observed("ns/rs", "ns/a");
        e.deletion_observed("ns/rs", "ns/a");
        assert!(!e.satisfied("ns/rs"), "b is still expected");
        e.deletion_observed("ns/rs", "ns/b");
        assert!(e.satisfied("ns/rs"));
    }

    #[test]
    fn expectations_expire_after_five_minutes() {
        let e = Expectations::default();
        e.expect_creations("k", 1);
        let later = Instant::now() + EXPECTATIONS_TIMEOUT + Duration::from_secs(1);
        assert!(!e.satisfied_at("k", Instant::now()));
        assert!(e.satisfied_at("k", later));
    }
}
