//! Namespaces: the strategy (`pkg/registry/core/namespace`) and the namespace controller that empties a
//! deleted namespace, then removes it.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{DeleteOptions, Registry, Selection, resources};
use crate::storage::{Decision, WatchFrom};
use crate::watch::Next;

/// Create: phase Active and the `kubernetes` finalizer in spec, as upstream.
pub fn prepare_create(obj: &mut Value) {
    obj["spec"] = json!({"finalizers": ["kubernetes"]});
    obj["status"] = json!({"phase": "Active"});
}

/// Update: the main resource keeps spec.finalizers and status (only `finalize`/`status` change them).
pub fn prepare_update(new: &mut Value, old: &Value, status_update: bool) {
    if !status_update {
        match old.get("spec") {
            Some(s) => new["spec"] = s.clone(),
            None => {
                new.as_object_mut().map(|o| o.remove("spec"));
            }
        }
    }
}

/// Start the controller: it subscribes before this returns (so a server that has started has its controller
/// watching), then runs until `cancel`. Whenever something changes, every namespace being deleted has its
/// objects deleted and, once it is empty, is removed itself.
pub fn spawn_controller(registry: Registry, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    let first = subscribe(&registry, NAMESPACES_ONLY);
    tokio::spawn(run_controller(registry, first, cancel))
}

/// Storage key prefix of namespaces: all the controller watches while no namespace is terminating.
const NAMESPACES_ONLY: &str = "core/namespaces/";

fn subscribe(registry: &Registry, prefix: &str) -> Option<(String, crate::storage::WatchStart)> {
    registry
        .storage()
        .watch(prefix, WatchFrom::After(registry.storage().revision()))
        .ok()
        .map(|w| (prefix.to_string(), w))
}

async fn run_controller(
    registry: Registry,
    mut next_watch: Option<(String, crate::storage::WatchStart)>,
    cancel: CancellationToken,
) {
    let ns_info = resources::find("", "v1", "namespaces").expect("namespaces are served");
    let mut want = NAMESPACES_ONLY;
    loop {
        let Some((prefix, mut watch)) = next_watch.take().or_else(|| subscribe(&registry, want)) else {
            // Only possible if the revision moved between reading it and subscribing: try again.
            tokio::task::yield_now().await;
            continue;
        };
        // While a namespace is terminating, watch everything: a change anywhere may be the last object of
        // that namespace leaving. Otherwise namespaces alone, so ordinary writes do not wake us.
        want = if sweep(&registry, ns_info).await {
            ""
        } else {
            NAMESPACES_ONLY
        };
        if want != prefix {
            continue;
        }
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = registry.namespace_gc().notified() => {}
                next = watch.subscription.next() => match next {
                    Next::Event(_) => {}
                    Next::Overflowed => break,
                    Next::Closed => return,
                },
            }
            want = if sweep(&registry, ns_info).await {
                ""
            } else {
                NAMESPACES_ONLY
            };
            if want != prefix {
                break;
            }
        }
    }
}

/// Delete the contents of terminating namespaces, and the emptied ones; true if one is still terminating.
async fn sweep(registry: &Registry, ns_info: &'static resources::ResourceInfo) -> bool {
    let mut terminating_left = false;
    let terminating = registry.list(ns_info, None, &Selection::default(), None, None);
    for ns in terminating.items {
        if ns.value.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let name = ns
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut remaining = 0;
        for info in resources::RESOURCES.iter().filter(|r| r.namespaced) {
            let listed = registry.list(info, Some(&name), &Selection::default(), None, None);
            for obj in listed.items {
                remaining += 1;
                if obj.value.pointer("/metadata/deletionTimestamp").is_some() {
                    continue;
                }
                let obj_name = obj
                    .value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if let Err(e) = registry
                    .delete(info, Some(&name), obj_name, &DeleteOptions::default())
                    .await
                    && e.code != 404
                {
                    tracing::warn!(namespace = %name, object = %obj_name, error = %e, "namespace cleanup");
                }
            }
        }
        if remaining > 0 {
            // Deleting them produces events, which run this sweep again.
            terminating_left = true;
            continue;
        }
        let key = ns_info.key(None, &name);
        let result = registry
            .storage()
            .write::<crate::error::ApiError>(&key, |current| {
                let Some(cur) = current else {
                    return Ok(Decision::Keep);
                };
                if cur.value.pointer("/metadata/deletionTimestamp").is_none() {
                    return Ok(Decision::Keep);
                }
                let finalizers = cur
                    .value
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array);
                if finalizers.is_some_and(|f| !f.is_empty()) {
                    // Other finalizers: drop ours (spec.finalizers) and leave the rest to their owners.
                    let mut v = cur.value.clone();
                    if v.pointer("/spec/finalizers")
                        .and_then(Value::as_array)
                        .is_some_and(|f| f.is_empty())
                    {
                        return Ok(Decision::Keep);
                    }
                    v["spec"] = json!({});
                    return Ok(Decision::Put(v));
                }
                Ok(Decision::Delete)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(namespace = %name, error = %e, "removing a deleted namespace");
        }
    }
    terminating_left
}
