//! Typed reads and writes of a pod, its spec and object metadata from and to JSON trees (`serde_json::Value`),
//! compiled once, here.
//!
//! The API server keeps objects as JSON trees and reads a typed Pod (k8s-openapi's) to default, admit and
//! validate it, as this crate does to validate it and to compute its QoS class. Both crates are built at
//! opt-level 3, where rustc does not reuse a generic instance a dependency has compiled: each compiled
//! serde's code for the Pod and every type in it (containers, volumes, probes...), from and to trees.
//! These functions are not generic, so the API server calls this crate's copy.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Pod read from a tree (no copy of the tree first).
pub fn pod(v: &Value) -> serde_json::Result<Pod> {
    Pod::deserialize(v)
}

/// A Pod as a tree.
pub fn pod_to_tree(p: &Pod) -> serde_json::Result<Value> {
    p.serialize(serde_json::value::Serializer)
}

/// A PodSpec read from a tree.
pub fn pod_spec(v: &Value) -> serde_json::Result<PodSpec> {
    PodSpec::deserialize(v)
}

/// A PodSpec as a tree.
pub fn pod_spec_to_tree(s: &PodSpec) -> serde_json::Result<Value> {
    s.serialize(serde_json::value::Serializer)
}

/// Object metadata read from a tree.
pub fn object_meta(v: &Value) -> serde_json::Result<ObjectMeta> {
    ObjectMeta::deserialize(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_and_its_spec_read_back_as_written() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        let p = pod(&v).unwrap();
        assert_eq!(pod_to_tree(&p).unwrap(), v);
        let spec = pod_spec(&v["spec"]).unwrap();
        assert_eq!(pod_spec_to_tree(&spec).unwrap(), v["spec"]);
        assert_eq!(object_meta(&v["metadata"]).unwrap().labels.unwrap()["a"], "b");
        let err = pod(&json!({"spec": {"containers": "no"}})).unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid type: string \"no\", expected a sequence"),
            "{err}"
        );
    }
}
