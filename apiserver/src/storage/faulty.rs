//! A [`Store`] that fails on demand, for the storage's own tests. Writes land in a live map; `flush` makes
//! them durable. A failing flush lets the first half of the unflushed changes reach the "disk" (a disk
//! that filled up half way) and, like sled, fails every later call until `recover`, which drops what was
//! not made durable, as a reopened engine does.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::{Change, Loaded, Store, StoreError};

/// Revision and objects.
pub(crate) type Contents = (u64, BTreeMap<String, Bytes>);

#[derive(Default)]
pub(crate) struct FaultyStore {
    state: Mutex<State>,
    /// Every flush fails while set.
    pub(crate) fail_flush: AtomicBool,
    /// Every write fails while set.
    pub(crate) fail_write: AtomicBool,
    /// Every recover fails while set.
    pub(crate) fail_recover: AtomicBool,
}

#[derive(Default)]
struct State {
    live: Contents,
    disk: Contents,
    /// Changes written since the last flush, in order, with their revision.
    unflushed: Vec<(u64, Change)>,
    /// A write or flush failed: every call fails until `recover`.
    broken: bool,
}

fn no_space() -> StoreError {
    StoreError::NoSpace {
        path: "/faulty".into(),
    }
}

fn apply(to: &mut Contents, revision: u64, c: &Change) {
    to.0 = revision;
    match &c.value {
        Some(v) => to.1.insert(c.key.clone(), v.clone()),
        None => to.1.remove(&c.key),
    };
}

impl FaultyStore {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is on the "disk": what a restart would load.
    pub(crate) fn durable(&self) -> Contents {
        self.state().disk.clone()
    }
}

impl Store for FaultyStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let st = self.state();
        Ok(Loaded {
            revision: st.live.0,
            objects: st.live.1.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }

    fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError> {
        let mut st = self.state();
        if st.broken || self.fail_write.load(Ordering::SeqCst) {
            st.broken = true;
            return Err(no_space());
        }
        for c in changes {
            apply(&mut st.live, revision, c);
            st.unflushed.push((revision, c.clone()));
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        let mut st = self.state();
        if st.broken {
            return Err(no_space());
        }
        if self.fail_flush.load(Ordering::SeqCst) {
            let torn = st.unflushed.len().div_ceil(2);
            let reached: Vec<(u64, Change)> = st.unflushed.drain(..torn).collect();
            for (revision, c) in &reached {
                apply(&mut st.disk, *revision, c);
            }
            st.broken = true;
            return Err(no_space());
        }
        st.disk = st.live.clone();
        st.unflushed.clear();
        Ok(())
    }

    fn recover(&self) -> Result<(), StoreError> {
        if self.fail_recover.load(Ordering::SeqCst) {
            return Err(no_space());
        }
        let mut st = self.state();
        st.live = st.disk.clone();
        st.unflushed.clear();
        st.broken = false;
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        None
    }
}
