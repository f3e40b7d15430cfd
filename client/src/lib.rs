//! What kubeling's components (the node agent, the controller manager) share as clients of the API server.
//! Nothing here calls into the `apiserver` crate: everything goes over HTTPS through `kube::Client`.

pub mod codec;
pub mod events;
