//! serde's code for the kinds both components read and write, compiled once, here.
//!
//! The node agent and the controller manager are built at opt-level 1 (Cargo.toml), where rustc reuses
//! an instance of a generic function that a dependency built the same way has compiled already, instead
//! of compiling its own. Both components read and write Pods, Nodes, Services, EndpointSlices, Leases and
//! ServiceAccounts through kube, whose requests decode with `serde_json::from_str` and encode bodies
//! with `serde_json::to_vec`; both also convert them from and to `serde_json::Value`, and the watch loop
//! ([`crate::watch`]) decodes their objects with `serde_json::from_str` too. Naming those instances in
//! this crate, which both depend on, compiles each once for the two (the Pod's is the largest serde code
//! of the API). Measured with `cargo llvm-lines` (release): the node agent 2.37 → 1.60 M lines of LLVM
//! IR, the controller manager 2.34 → 1.55 M, this crate +1.07 M.
//!
//! Lists (`ObjectList`) and kube's watch events (`WatchEvent`, decoded through serde's buffered
//! `Content`, a second copy of the kind's code) are named only where something still asks kube for them:
//! the node agent's Service lists, and `kubeling bench`'s pod and node lists and pod watches (the binary's
//! crate is built last, alone, so its share is better compiled here, beside the API server).
//!
//! Nothing calls these functions; they exist to be compiled. A kind added to both components' traffic
//! belongs in the list.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::core::{ObjectList, WatchEvent};

macro_rules! shared {
    ($($module:ident: $kind:ty),* $(,)?) => {$(
        #[doc(hidden)]
        pub mod $module {
            use super::*;

            /// A response body (`Client::request`).
            pub fn decode(s: &str) -> serde_json::Result<$kind> {
                serde_json::from_str(s)
            }

            /// A request body (create, replace).
            pub fn encode(v: &$kind) -> serde_json::Result<Vec<u8>> {
                serde_json::to_vec(v)
            }

            /// From a JSON tree (patches built as `Value`s, objects read from a list of several kinds).
            pub fn from_value(v: serde_json::Value) -> serde_json::Result<$kind> {
                serde_json::from_value(v)
            }

            /// To a JSON tree.
            pub fn to_value(v: &$kind) -> serde_json::Result<serde_json::Value> {
                serde_json::to_value(v)
            }
        }
    )*};
}

shared!(
    pod: Pod,
    node: Node,
    service: Service,
    endpoint_slice: EndpointSlice,
    lease: Lease,
    service_account: ServiceAccount,
);

/// The lists and watches still asked of kube (see the module's documentation).
#[doc(hidden)]
pub mod lists {
    use super::*;

    /// A Pod list response (`Api::list`).
    pub fn pods(s: &str) -> serde_json::Result<ObjectList<Pod>> {
        serde_json::from_str(s)
    }

    /// A Pod watch event line (`Api::watch`).
    pub fn pod_event(line: &[u8]) -> serde_json::Result<WatchEvent<Pod>> {
        serde_json::from_slice(line)
    }

    /// A Node list response.
    pub fn nodes(s: &str) -> serde_json::Result<ObjectList<Node>> {
        serde_json::from_str(s)
    }

    /// A Service list response.
    pub fn services(s: &str) -> serde_json::Result<ObjectList<Service>> {
        serde_json::from_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_back_what_it_writes_in_every_form() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let text = String::from_utf8(pod::encode(&pod).unwrap()).unwrap();
        assert_eq!(pod::decode(&text).unwrap(), pod);
        assert_eq!(pod::from_value(pod::to_value(&pod).unwrap()).unwrap(), pod);
        let list = format!(
            r#"{{"apiVersion":"v1","kind":"PodList","metadata":{{"resourceVersion":"9"}},"items":[{text}]}}"#
        );
        assert_eq!(lists::pods(&list).unwrap().items, vec![pod.clone()]);
        let event = format!(r#"{{"type":"MODIFIED","object":{text}}}"#);
        assert!(matches!(lists::pod_event(event.as_bytes()).unwrap(), WatchEvent::Modified(p) if p == pod));

        macro_rules! round_trip {
            ($($module:ident: $kind:ty),*) => {$(
                let v = <$kind>::default();
                let text = String::from_utf8($module::encode(&v).unwrap()).unwrap();
                assert_eq!($module::decode(&text).unwrap(), v, stringify!($kind));
                assert_eq!($module::from_value($module::to_value(&v).unwrap()).unwrap(), v, stringify!($kind));
            )*};
        }
        round_trip!(node: Node, service: Service, endpoint_slice: EndpointSlice, lease: Lease,
                    service_account: ServiceAccount);
    }
}
