//! An in-memory [`Store`] for unit tests: nothing survives the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;

use super::{Change, Loaded, Store, StoreError};

/// Keeps everything in a map; `flush` does nothing.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<(u64, BTreeMap<String, Bytes>)>,
}

impl Store for MemoryStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Loaded {
            revision: st.0,
            objects: st.1.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }

    fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = revision;
        for c in changes {
            match &c.value {
                Some(v) => st.1.insert(c.key.clone(), v.clone()),
                None => st.1.remove(&c.key),
            };
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        None
    }
}
