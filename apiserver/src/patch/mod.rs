//! Patch algorithms that need more than a library call.
//!
//! JSON patch and JSON merge patch are applied with the `json-patch` crate in the HTTP layer (with the
//! `test`-against-null deviation of §3.2). Strategic merge patch has no maintained Rust implementation, so
//! [`strategic`] is our own, over `serde_json::Value`; its per-kind patch metadata (list strategies, merge
//! keys, retainKeys) is shared with server-side apply.
//!
//! [`apply`] is server-side apply with managed fields; it takes its list keys from
//! [`strategic::list_strategy`].
//!
//! Data flow: http (content type → algorithm) → registry (load current JSON) → `strategic::apply` or
//! `apply::apply` → registry update path (validation, RV check, commit).

pub mod apply;
pub mod strategic;
