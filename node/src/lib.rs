//! kubeling's node agent (a kubelet on Docker). It arrives with step 3; this crate holds its place in the
//! workspace so the layout is final from the start.

pub mod agent;
pub mod cleanup;
pub mod config;
pub mod dns;
pub mod env;
pub mod envvars;
pub use client::events;
pub mod gc;
pub mod kubelet;
pub mod lifecycle;
pub mod mirror;
pub mod network;
pub mod node_status;
mod pod_workers;
pub mod portforward;
pub mod prober;
pub mod proxy;
pub mod runtime;
pub mod server;
pub mod sources;
pub mod status_cache;
pub mod termination;
pub mod token_manager;
pub mod volumes;
