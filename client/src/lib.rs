//! What kubeling's components (the node agent, the controller manager, cluster DNS, the test runner) share
//! as clients of the API server: the list-and-watch loop and informers, the event recorder, serde's code.
//! Nothing here calls into the `apiserver` crate: everything goes over HTTPS through `kube::Client`.

pub mod codec;
pub mod events;
pub mod informer;
pub mod watch;

#[cfg(test)]
mod fake;
