//! Mirror pods (upstream's `pkg/kubelet/pod/mirror_client.go` and `tryReconcileMirrorPods`): the read-only
//! copy of a static pod in the API server, so that kubectl sees it. The decisions are pure functions here;
//! the kubelet's static-pod workers carry them out.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::sources::{CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION, FILE_SOURCE, HTTP_SOURCE};

/// Upstream's `kubernetes.io/config.mirror`: on a mirror pod, the hash of its static pod.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Upstream's `kubernetes.io/config.seen`: when the kubelet first saw the pod.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// The `config.source` of pods from the API server (set on the kubelet's local copy only).
pub const API_SOURCE: &str = "api";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// A mirror pod carries `config.mirror`.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

/// A static pod came from a manifest file or URL (`config.source` is `file` or `http`).
pub fn is_static_pod(pod: &Pod) -> bool {
    matches!(
        annotation(pod, CONFIG_SOURCE_ANNOTATION),
        Some(FILE_SOURCE | HTTP_SOURCE)
    )
}

/// The static pod's hash (its UID), as its mirror pods carry it.
pub fn static_hash(pod: &Pod) -> &str {
    annotation(pod, CONFIG_HASH_ANNOTATION).unwrap_or_default()
}

/// Upstream's `IsMirrorPodOf`: same name and namespace, and the mirror annotation equals the hash.
pub fn is_mirror_of(mirror: &Pod, static_pod: &Pod) -> bool {
    mirror.metadata.name == static_pod.metadata.name
        && mirror.metadata.namespace == static_pod.metadata.namespace
        && annotation(mirror, CONFIG_MIRROR_ANNOTATION).is_some_and(|h| h == static_hash(static_pod))
}

/// What to do about a static pod's mirror pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorAction {
    /// The mirror is current.
    Keep,
    /// There is none: create it.
    Create,
    /// The mirror with this UID was deleted by a user (it has a deletionTimestamp) or belongs to an older
    /// version of the manifest: delete it with grace 0 and the UID as precondition, then create a new one.
    Replace(String),
}

/// Upstream's reconciliation for one static pod and the mirror pod of the same name, if any.
pub fn mirror_action(static_pod: &Pod, mirror: Option<&Pod>) -> MirrorAction {
    match mirror {
        None => MirrorAction::Create,
        Some(m) if m.metadata.deletion_timestamp.is_some() || !is_mirror_of(m, static_pod) => {
            MirrorAction::Replace(m.metadata.uid.clone().unwrap_or_default())
        }
        Some(_) => MirrorAction::Keep,
    }
}

/// The mirror pod to create for `static_pod` (upstream's `CreateMirrorPod`): the static pod's metadata and
/// spec, `config.mirror` set to its hash, and the Node as the single, controlling owner.
pub fn mirror_pod(static_pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let m = &static_pod.metadata;
    let mut annotations = m.annotations.clone().unwrap_or_default();
    annotations.insert(
        CONFIG_MIRROR_ANNOTATION.to_string(),
        static_hash(static_pod).to_string(),
    );
    Pod {
        metadata: ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            labels: m.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: node_name.to_string(),
                uid: node_uid.to_string(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn static_pod(hash: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-n1", "namespace": "default", "uid": hash,
                "labels": {"app": "web"},
                "annotations": {
                    "kubernetes.io/config.hash": hash,
                    "kubernetes.io/config.source": "file",
                    "kubernetes.io/config.seen": "2026-11-29T10:00:00.000000000Z",
                }},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }))
        .unwrap()
    }

    fn created(mut p: Pod, uid: &str) -> Pod {
        p.metadata.uid = Some(uid.to_string());
        p
    }

    #[test]
    fn mirror_copies_metadata_and_spec_with_the_hash_and_the_node_owner() {
        let s = static_pod("h1");
        let m = mirror_pod(&s, "n1", "node-uid");
        assert_eq!(m.metadata.name.as_deref(), Some("web-n1"));
        assert_eq!(m.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(m.metadata.uid, None, "the API server assigns the mirror's UID");
        assert_eq!(m.metadata.labels, s.metadata.labels);
        let a = m.metadata.annotations.as_ref().unwrap();
        assert_eq!(a["kubernetes.io/config.mirror"], "h1");
        assert_eq!(a["kubernetes.io/config.hash"], "h1");
        assert_eq!(a["kubernetes.io/config.source"], "file");
        assert!(a.contains_key("kubernetes.io/config.seen"));
        let owners = m.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (
                owners[0].kind.as_str(),
                owners[0].name.as_str(),
                owners[0].uid.as_str()
            ),
            ("Node", "n1", "node-uid")
        );
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(m.spec, s.spec);
        assert_eq!(m.status, None);
        // A mirror also carries config.source=file: callers ask is_mirror_pod first.
        assert!(is_mirror_pod(&m) && is_static_pod(&m));
        assert!(is_mirror_of(&m, &s));
    }

    #[test]
    fn missing_mirror_is_created_current_kept() {
        let s = static_pod("h1");
        assert_eq!(mirror_action(&s, None), MirrorAction::Create);
        let m = created(mirror_pod(&s, "n1", "u"), "m1");
        assert_eq!(mirror_action(&s, Some(&m)), MirrorAction::Keep);
    }

    #[test]
    fn deleted_or_stale_mirror_is_replaced() {
        let s = static_pod("h1");
        let mut deleted = created(mirror_pod(&s, "n1", "u"), "m1");
        deleted.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-29T10:00:00Z".parse().unwrap(),
        ));
        assert_eq!(
            mirror_action(&s, Some(&deleted)),
            MirrorAction::Replace("m1".into())
        );
        // The manifest changed: a new hash; the old mirror does not mirror it.
        let old = created(mirror_pod(&static_pod("h0"), "n1", "u"), "m0");
        assert_eq!(mirror_action(&s, Some(&old)), MirrorAction::Replace("m0".into()));
    }

    #[test]
    fn static_and_mirror_are_told_apart_by_annotations() {
        let s = static_pod("h1");
        assert!(is_static_pod(&s) && !is_mirror_pod(&s));
        let mut api = s.clone();
        api.metadata.annotations = Some(
            [(CONFIG_SOURCE_ANNOTATION.to_string(), API_SOURCE.to_string())]
                .into_iter()
                .collect(),
        );
        assert!(!is_static_pod(&api) && !is_mirror_pod(&api));
        assert_eq!(static_hash(&s), "h1");
    }
}
