//! The cluster as the zone sees it: informer caches of every Service and EndpointSlice, filled over HTTPS
//! (CoreDNS's `kubernetes` plugin watches the same two kinds, plus Namespaces).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use client::informer::{Informer, Informers};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio_util::sync::CancellationToken;

use crate::records::{ClusterView, slice_of};

/// The caches behind the zone.
#[derive(Clone)]
pub struct Stores {
    services: Arc<Informer<Service>>,
    slices: Arc<Informer<EndpointSlice>>,
}

impl ClusterView for Stores {
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services.get_in(namespace, name)
    }

    fn services(&self) -> Vec<Arc<Service>> {
        self.services.list()
    }

    fn endpoint_slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>> {
        self.slices
            .list_ns(namespace)
            .into_iter()
            .filter(|s| slice_of(s, namespace, service))
            .collect()
    }
}

/// Starts the watches; `ready` is set once both have listed everything. They stop with `cancel`.
pub fn start(client: kube::Client, ready: Arc<AtomicBool>, cancel: CancellationToken) -> Stores {
    let informers = Informers::new();
    let stores = Stores {
        services: informers.get(),
        slices: informers.get(),
    };
    stores.services.want();
    stores.slices.want();
    informers.start(&client, &cancel);
    tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = informers.wait_synced() => ready.store(true, Ordering::Release),
        }
    });
    stores
}
