//! The status manager's cache (upstream `status_manager.go`'s `podStatuses`): the status each pod worker
//! last generated, by pod UID. Pod workers write it after every status computation; probe workers read
//! it to learn their container's ID, state and `started` flag, and the pod's phase and IP, without asking
//! Docker or the API server.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::PodStatus;

use crate::prober::StatusProvider;

/// Pod UID → last generated status.
#[derive(Debug, Default)]
pub struct PodStatusCache {
    map: RwLock<HashMap<String, Arc<PodStatus>>>,
}

impl PodStatusCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores the pod's latest status.
    pub fn set(&self, uid: &str, status: PodStatus) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.to_owned(), Arc::new(status));
    }

    /// Forgets a pod.
    pub fn remove(&self, uid: &str) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).remove(uid);
    }

    /// How many pods have a status.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl StatusProvider for PodStatusCache {
    fn pod_status(&self, pod_uid: &str) -> Option<Arc<PodStatus>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(pod_uid)
            .cloned()
    }
}
