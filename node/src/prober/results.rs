//! The results manager (upstream `pkg/kubelet/prober/results/results_manager.go`): one per probe type, a
//! cache from container ID to the last result a worker stored, and a channel of updates. [`ResultsManager::set`]
//! publishes an [`Update`] only when the result differs from the cached one (or the container had none), so
//! a probe that keeps passing costs nothing downstream: no pod sync, no status write.
//!
//! The channel is unbounded where upstream's has a buffer of 20 and blocks the worker when it is full: here a
//! worker never waits for the consumer, and the queue cannot grow past one entry per result change.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use tokio::sync::mpsc;

use crate::lifecycle::plan::ProbeResult;

/// A changed result (upstream `results.Update`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The container instance, as the runtime names it (no `docker://`).
    pub container_id: String,
    /// The new result.
    pub result: ProbeResult,
    /// The pod the container belongs to.
    pub pod_uid: String,
}

/// The cache of one probe type's results.
#[derive(Debug)]
pub struct ResultsManager {
    cache: RwLock<HashMap<String, ProbeResult>>,
    tx: mpsc::UnboundedSender<Update>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Update>>>,
}

impl Default for ResultsManager {
    fn default() -> Self {
        Self::new()
    }
}

impl ResultsManager {
    /// An empty cache.
    pub fn new() -> ResultsManager {
        let (tx, rx) = mpsc::unbounded_channel();
        ResultsManager {
            cache: RwLock::new(HashMap::new()),
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }

    /// The cached result of a container instance.
    pub fn get(&self, container_id: &str) -> Option<ProbeResult> {
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(container_id)
            .copied()
    }

    /// Stores a result; publishes an update and returns true only when it changed.
    pub fn set(&self, container_id: &str, result: ProbeResult, pod_uid: &str) -> bool {
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        let previous = cache.insert(container_id.to_owned(), result);
        if previous == Some(result) {
            return false;
        }
        // Sent under the lock, so updates leave in the order the cache saw them. Nobody listening (the
        // kubelet is shutting down) is not an error.
        let _ = self.tx.send(Update {
            container_id: container_id.to_owned(),
            result,
            pod_uid: pod_uid.to_owned(),
        });
        true
    }

    /// Forgets a container instance; publishes nothing.
    pub fn remove(&self, container_id: &str) {
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(container_id);
    }

    /// The updates channel; there is one consumer, so the first call takes it and later calls get `None`.
    pub fn updates(&self) -> Option<mpsc::UnboundedReceiver<Update>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// How many container instances have a cached result.
    pub fn len(&self) -> usize {
        self.cache.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when no container has a cached result.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_publishes_only_changes() {
        let m = ResultsManager::new();
        let mut rx = m.updates().unwrap();
        assert!(m.updates().is_none(), "one consumer");
        assert!(m.set("c1", ProbeResult::Failure, "p"), "first value");
        assert!(!m.set("c1", ProbeResult::Failure, "p"), "same value again");
        assert!(m.set("c1", ProbeResult::Success, "p"));
        assert!(m.set("c2", ProbeResult::Success, "p"), "another container");
        assert_eq!(m.get("c1"), Some(ProbeResult::Success));
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|u| (u.container_id, u.result))
            .collect();
        assert_eq!(
            got,
            [
                ("c1".to_owned(), ProbeResult::Failure),
                ("c1".to_owned(), ProbeResult::Success),
                ("c2".to_owned(), ProbeResult::Success),
            ]
        );
    }

    #[test]
    fn remove_forgets_without_an_update_and_the_next_set_publishes() {
        let m = ResultsManager::new();
        let mut rx = m.updates().unwrap();
        m.set("c", ProbeResult::Success, "p");
        m.remove("c");
        assert_eq!(m.get("c"), None);
        assert!(m.is_empty());
        assert_eq!(rx.try_recv().unwrap().result, ProbeResult::Success);
        assert!(rx.try_recv().is_err(), "remove publishes nothing");
        assert!(
            m.set("c", ProbeResult::Success, "p"),
            "no entry: a set publishes again"
        );
    }
}
