//! The cluster as the zone sees it: reflector stores of every Service and EndpointSlice, filled by kube
//! watchers over HTTPS (CoreDNS's `kubernetes` plugin watches the same two kinds, plus Namespaces).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use crate::records::{ClusterView, slice_of};

/// The reflector stores behind the zone.
#[derive(Clone)]
pub struct Stores {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
}

impl ClusterView for Stores {
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services.get(&ObjectRef::new(name).within(namespace))
    }

    fn services(&self) -> Vec<Arc<Service>> {
        self.services.state()
    }

    fn endpoint_slices(&self, namespace: &str, service: &str) -> Vec<Arc<EndpointSlice>> {
        self.slices
            .state()
            .into_iter()
            .filter(|s| slice_of(s, namespace, service))
            .collect()
    }
}

/// Starts the watchers; `ready` is set once both have listed everything. They stop with `cancel`.
pub fn start(client: kube::Client, ready: Arc<AtomicBool>, cancel: CancellationToken) -> Stores {
    let (services, services_writer) = reflector::store();
    let (slices, slices_writer) = reflector::store();
    let svc_stream = watcher(Api::<Service>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(services_writer)
        .applied_objects();
    let slice_stream = watcher(Api::<EndpointSlice>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(slices_writer)
        .applied_objects();
    for mut stream in [
        svc_stream.map(|r| r.map(|_| ())).boxed(),
        slice_stream.map(|r| r.map(|_| ())).boxed(),
    ] {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    event = stream.next() => match event {
                        Some(Ok(())) => {}
                        Some(Err(e)) => tracing::debug!(error = %e, "cluster DNS watch"),
                        None => return,
                    },
                }
            }
        });
    }
    let stores = Stores { services, slices };
    let waiting = stores.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => {}
            r = async { tokio::try_join!(waiting.services.wait_until_ready(), waiting.slices.wait_until_ready()) } => {
                if r.is_ok() {
                    ready.store(true, Ordering::Release);
                }
            }
        }
    });
    stores
}
