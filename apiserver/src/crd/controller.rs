//! The API server's own CRD controllers, in one task (upstream runs naming, establishing and finalizing
//! controllers inside apiextensions-apiserver): it watches CRDs in storage and, for each change,
//! writes the status ([`definition::status`]), serves the CRD's versions ([`super::set`]) and, for a
//! deleted CRD, deletes its objects, stops serving it, and removes the cleanup finalizer so the CRD goes.
//!
//! A new CRD is served as soon as its first event arrives (before its status write is durable), so a
//! custom object can be created a few milliseconds after the CRD. At start [`sync_all`] serves every
//! stored CRD before the API server accepts requests.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::definition::{self, CLEANUP_FINALIZER};
use crate::error::ApiError;
use crate::registry::{DeleteOptions, Registry, ResourceInfo, now_rfc3339, resources};
use crate::storage::{Decision, WatchFrom};
use crate::watch::Next;

/// How often CRDs being deleted are looked at again (objects with finalizers hold them).
const RETRY: Duration = Duration::from_secs(1);

/// The CRD kind's table entry.
pub fn crd_info() -> &'static ResourceInfo {
    resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("CRDs are served")
}

fn names(registry: &Registry) -> Vec<String> {
    let info = crd_info();
    registry
        .storage()
        .list(&info.prefix(None), None, None, |_| true)
        .items
        .iter()
        .filter_map(|o| {
            o.value()
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Reconcile every stored CRD.
pub async fn sync_all(registry: &Registry) {
    sync(registry, false).await
}

/// Reconcile every stored CRD; with `unserve_missing`, also stop serving CRDs no longer stored (after a
/// watch fell behind and missed their deletion). Not at start: the table is process-wide, and another
/// API server in the process (tests) serves its own CRDs.
async fn sync(registry: &Registry, unserve_missing: bool) {
    let stored = names(registry);
    if unserve_missing {
        for gone in super::served_crds().into_iter().filter(|n| !stored.contains(n)) {
            super::set(&gone, Vec::new());
        }
    }
    for name in stored {
        if let Err(e) = reconcile(registry, &name).await {
            tracing::warn!(crd = %name, error = %e, "reconciling a CustomResourceDefinition failed");
        }
    }
}

/// Watch CRDs until `cancel`.
pub fn spawn(registry: Registry, cancel: CancellationToken) -> JoinHandle<()> {
    let subscribe = |registry: &Registry| {
        registry
            .storage()
            .watch(&crd_info().prefix(None), WatchFrom::Now)
            .ok()
            .map(|start| start.subscription)
    };
    // The first subscription is taken before this returns, so the server starts with its watcher
    // registered (tests count the hub's watchers).
    let mut first = subscribe(&registry);
    tokio::spawn(async move {
        let mut resync = false;
        loop {
            let Some(mut sub) = first.take().or_else(|| subscribe(&registry)) else {
                return;
            };
            sync(&registry, resync).await;
            resync = true;
            loop {
                let next = tokio::select! {
                    _ = cancel.cancelled() => return,
                    n = sub.next() => Some(n),
                    _ = tokio::time::sleep(RETRY) => None,
                };
                match next {
                    Some(Next::Event(ev)) => {
                        let name = ev
                            .object
                            .value()
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if let Err(e) = reconcile(&registry, &name).await {
                            tracing::warn!(crd = %name, error = %e, "reconciling a CustomResourceDefinition failed");
                        }
                    }
                    Some(Next::Closed) => return,
                    // Fell behind: start over from a fresh list.
                    Some(Next::Overflowed) => break,
                    None => {
                        for name in terminating(&registry) {
                            if let Err(e) = reconcile(&registry, &name).await {
                                tracing::warn!(crd = %name, error = %e, "deleting a CRD's objects failed");
                            }
                        }
                    }
                }
            }
        }
    })
}

fn terminating(registry: &Registry) -> Vec<String> {
    let info = crd_info();
    registry
        .storage()
        .list(&info.prefix(None), None, None, |o| {
            o.value().pointer("/metadata/deletionTimestamp").is_some()
        })
        .items
        .iter()
        .filter_map(|o| {
            o.value()
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Bring one CRD's status, serving and deletion up to date.
pub async fn reconcile(registry: &Registry, name: &str) -> Result<(), ApiError> {
    let info = crd_info();
    let key = info.key(None, name);
    let Some(current) = registry.storage().get(&key) else {
        super::set(name, Vec::new());
        return Ok(());
    };
    let current = current.value();
    let deleting = current.pointer("/metadata/deletionTimestamp").is_some();
    let mut wanted = current.clone();
    wanted["status"] = definition::status(&current, deleting, &now_rfc3339());
    // Serve from the status about to be written: objects can be created before that write is durable.
    super::set(name, super::from_crd(&wanted));
    if wanted.get("status") != current.get("status") {
        write_status(registry, &key, name, deleting).await?;
    }
    if deleting {
        finalize(registry, name, &key, &wanted).await?;
    }
    Ok(())
}

async fn write_status(registry: &Registry, key: &str, name: &str, deleting: bool) -> Result<(), ApiError> {
    registry
        .storage()
        .write(key, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(
                    "customresourcedefinitions",
                    "apiextensions.k8s.io",
                    name,
                ));
            };
            let cur = cur.value();
            let mut obj = cur.clone();
            obj["status"] = definition::status(&cur, deleting, &now_rfc3339());
            Ok(if obj == cur {
                Decision::Keep
            } else {
                Decision::Put(obj)
            })
        })
        .await?;
    Ok(())
}

/// Delete every object of a deleted CRD; once none is left, stop serving it and release the CRD.
async fn finalize(registry: &Registry, name: &str, key: &str, crd: &Value) -> Result<(), ApiError> {
    let served = super::from_crd(crd);
    let Some(custom) = served.first().cloned() else {
        // Never established: nothing was stored.
        return release(registry, name, key).await;
    };
    let info = custom.info;
    let objects = registry
        .storage()
        .list(&info.prefix(None), None, None, |_| true)
        .items;
    let mut left = 0;
    for o in &objects {
        let o = o.value();
        if o.pointer("/metadata/deletionTimestamp").is_some() {
            left += 1;
            continue;
        }
        let obj_name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
        match registry
            .delete(info, ns, obj_name, &DeleteOptions::default())
            .await
        {
            Ok(w) if w.event == Some(crate::watch::EventType::Deleted) => {}
            Ok(_) => left += 1,
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    if left > 0 {
        return Ok(());
    }
    // Unserve before the CRD disappears, so its resource answers 404 the moment the CRD is gone.
    super::set(name, Vec::new());
    release(registry, name, key).await
}

async fn release(registry: &Registry, name: &str, key: &str) -> Result<(), ApiError> {
    registry
        .storage()
        .write(key, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(
                    "customresourcedefinitions",
                    "apiextensions.k8s.io",
                    name,
                ));
            };
            let mut obj = cur.value();
            let finalizers: Vec<Value> = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|f| f.as_str() != Some(CLEANUP_FINALIZER))
                .cloned()
                .collect();
            if finalizers.is_empty() {
                return Ok(Decision::Delete);
            }
            obj["metadata"]["finalizers"] = json!(finalizers);
            Ok(if obj == cur.value() {
                Decision::Keep
            } else {
                Decision::Put(obj)
            })
        })
        .await?;
    Ok(())
}
