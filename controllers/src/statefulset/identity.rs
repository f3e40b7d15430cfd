//! A StatefulSet pod's identity and storage (`stateful_set_utils.go`): the name `<set>-<ordinal>`, hostname
//! and subdomain, the identity labels, the claims from `volumeClaimTemplates` and the pod volumes that
//! point at them, and the claims' owner references under `persistentVolumeClaimRetentionPolicy`. All pure.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::controller_ref;

/// `apps.StatefulSetPodNameLabel`.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// `apps.PodIndexLabel` (GA 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// `apps.StatefulSetRevisionLabel` / `ControllerRevisionHashLabelKey`: the pod's revision (full name).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// `getParentNameAndOrdinal`: `(.*)-([0-9]+)$` on the pod name; `None` when it does not match.
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, digits.parse().ok()?))
}

/// The ordinal of a pod name (-1 when it has none, as upstream).
pub fn ordinal_of(pod: &Pod) -> i32 {
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or(""))
        .map(|(_, o)| o)
        .unwrap_or(-1)
}

/// `isMemberOf`: the pod's parsed parent name is the set's.
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or(""))
        .is_some_and(|(p, _)| Some(p) == set.metadata.name.as_deref())
}

/// `spec.ordinals.start` (0 when unset).
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// `spec.replicas` (the default 1 when unset).
pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0)
}

/// `podInOrdinalRange`: start ≤ ordinal < start + replicas.
pub fn in_ordinal_range(set: &StatefulSet, ordinal: i32) -> bool {
    let start = start_ordinal(set);
    ordinal >= start && ordinal < start + replicas(set)
}

/// `<set>-<ordinal>`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set_name(set))
}

fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or("")
}

/// The set's controller reference (what its pods and revisions carry).
pub fn owner_ref(set: &StatefulSet) -> OwnerReference {
    controller_ref::controller_ref(
        "apps/v1",
        "StatefulSet",
        set_name(set),
        set.metadata.uid.as_deref().unwrap_or(""),
    )
}

/// `getPersistentVolumeClaimName`: `<template>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &str, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", set_name(set))
}

/// `getPersistentVolumeClaims`: the claims of the pod at `ordinal`, by template name, in template order;
/// labels are the template's with the selector's matchLabels merged in.
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let spec = set.spec.as_ref();
    let match_labels = spec
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    spec.and_then(|s| s.volume_claim_templates.as_ref())
        .into_iter()
        .flatten()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(set, &tname, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            claim.metadata.uid = None;
            claim.metadata.resource_version = None;
            claim.metadata.creation_timestamp = None;
            claim.status = None;
            let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(match_labels.clone());
            (tname, claim)
        })
        .collect()
}

/// `updateStorage`: one `persistentVolumeClaim` volume per claim template (replacing the template's volume of
/// the same name), then the pod's other volumes.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod, ordinal: i32) {
    let claims = claims_for(set, ordinal);
    let Some(spec) = pod.spec.as_mut() else { return };
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(tname, claim)| Volume {
            name: tname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: Some(false),
            }),
            ..Default::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| !claims.iter().any(|(t, _)| *t == v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
}

/// `storageMatches`: every pod volume named after a claim template points at that ordinal's claim.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal_of(pod);
    if ordinal < 0 {
        return false;
    }
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    claims_for(set, ordinal).iter().all(|(tname, claim)| {
        volumes.iter().find(|v| v.name == *tname).is_none_or(|v| {
            v.persistent_volume_claim
                .as_ref()
                .is_some_and(|p| Some(&p.claim_name) == claim.metadata.name.as_ref())
        })
    })
}

/// `identityMatches`: name, namespace and the identity labels are the ordinal's.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let Some((parent, ordinal)) = parent_and_ordinal(name) else {
        return false;
    };
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    ordinal >= 0
        && parent == set_name(set)
        && name == pod_name(set, ordinal)
        && pod.metadata.namespace == set.metadata.namespace
        && label(POD_NAME_LABEL) == Some(name)
        && label(POD_INDEX_LABEL) == Some(ordinal.to_string().as_str())
}

/// The labels `updateIdentity` gives the pod.
pub fn identity_labels(pod: &Pod) -> BTreeMap<String, String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut labels = pod.metadata.labels.clone().unwrap_or_default();
    labels.insert(POD_INDEX_LABEL.into(), ordinal_of(pod).to_string());
    labels.insert(POD_NAME_LABEL.into(), name);
    labels
}

/// `newStatefulSetPod` for `template` (the current or update revision's) plus `setPodRevision`: the pod
/// `<set>-<ordinal>` with its identity, storage and revision label.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let ns = set.metadata.namespace.as_deref().unwrap_or("default");
    let mut pod = crate::pod_control::pod_from_template(template, ns, &owner_ref(set));
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let service = set
        .spec
        .as_ref()
        .map(|s| s.service_name.clone())
        .unwrap_or_default();
    if let Some(spec) = pod.spec.as_mut() {
        spec.hostname = Some(name);
        if let Some(svc) = service.filter(|s| !s.is_empty()) {
            spec.subdomain = Some(svc);
        }
    }
    update_storage(set, &mut pod, ordinal);
    pod
}

/// The pod's revision label ("" when none).
pub fn pod_revision(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map(String::as_str)
        .unwrap_or("")
}

/// `whenDeleted` / `whenScaled` of the retention policy (`Retain` when unset).
pub fn retention(set: &StatefulSet) -> (bool, bool) {
    let p = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let delete = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    (
        delete(p.and_then(|p| p.when_deleted.as_ref())),
        delete(p.and_then(|p| p.when_scaled.as_ref())),
    )
}

fn has_ref(claim: &PersistentVolumeClaim, uid: &str) -> bool {
    !uid.is_empty()
        && claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.uid == uid)
}

/// A non-controller reference (what the retention policy puts on claims).
fn plain_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// `updateClaimOwnerRefForSetAndPod`: the claim's owner references as the retention policy wants them
/// (a reference to the set for `whenDeleted: Delete`; to the pod for `whenScaled: Delete` once the pod is
/// out of range). `None` when they are right already, or when another controller owns the claim.
pub fn claim_refs_for_policy(
    set: &StatefulSet,
    pod: &Pod,
    claim: &PersistentVolumeClaim,
) -> Option<Vec<OwnerReference>> {
    let set_uid = set.metadata.uid.as_deref().unwrap_or("");
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or("");
    // 1.32 `hasUnexpectedController`: a claim controlled by something else is left alone.
    if let Some(c) = controller_ref::controller_of(&claim.metadata)
        && c.uid != set_uid
        && c.uid != pod_uid
    {
        return None;
    }
    let (when_deleted, when_scaled) = retention(set);
    let scaled_down = !in_ordinal_range(set, ordinal_of(pod));
    let want_set = when_deleted && !(when_scaled && scaled_down);
    let want_pod = when_scaled && scaled_down && !pod_uid.is_empty();
    if has_ref(claim, set_uid) == want_set && has_ref(claim, pod_uid) == want_pod {
        return None;
    }
    let mut refs: Vec<OwnerReference> = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != set_uid && (pod_uid.is_empty() || r.uid != pod_uid))
        .cloned()
        .collect();
    if want_set {
        refs.push(plain_ref("apps/v1", "StatefulSet", set_name(set), set_uid));
    }
    if want_pod {
        refs.push(plain_ref(
            "v1",
            "Pod",
            pod.metadata.name.as_deref().unwrap_or(""),
            pod_uid,
        ));
    }
    Some(refs)
}

/// `hasStaleOwnerRef` for `PodClaimIsStale`: the claim has a reference to a pod of this name but another
/// UID (a previous incarnation's claim, about to be collected).
pub fn claim_is_stale(claim: &PersistentVolumeClaim, pod_name: &str, pod_uid: &str) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == "Pod" && r.name == pod_name && r.uid != pod_uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn set(extra: serde_json::Value) -> StatefulSet {
        let mut v = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
            "spec": {
                "replicas": 3,
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "sts"}},
                "template": {"metadata": {"labels": {"app": "sts"}},
                             "spec": {"containers": [{"name": "c", "image": "i",
                                      "volumeMounts": [{"name": "www", "mountPath": "/data"}]}],
                                      "volumes": [{"name": "www", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www", "labels": {"tier": "db"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]
            }
        });
        json_patch_merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn json_patch_merge(a: &mut serde_json::Value, b: serde_json::Value) {
        if let (Some(a), serde_json::Value::Object(b)) = (a.as_object_mut(), &b) {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(x) if x.is_object() && v.is_object() => json_patch_merge(x, v.clone()),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }

    #[test]
    fn ordinals_parse_from_names_as_upstreams_regex() {
        assert_eq!(parent_and_ordinal("web-0"), Some(("web", 0)));
        assert_eq!(parent_and_ordinal("my-web-12"), Some(("my-web", 12)));
        assert_eq!(parent_and_ordinal("web-"), None);
        assert_eq!(parent_and_ordinal("web-1a"), None);
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(
            parent_and_ordinal("web-99999999999"),
            None,
            "overflow is no ordinal"
        );
    }

    #[test]
    fn new_pods_carry_identity_storage_and_revision() {
        let s = set(json!({}));
        let t = s.spec.as_ref().unwrap().template.clone();
        let p = new_pod(&s, &t, 1, "web-abc");
        assert_eq!(p.metadata.name.as_deref(), Some("web-1"));
        let l = p.metadata.labels.as_ref().unwrap();
        assert_eq!(l[POD_NAME_LABEL], "web-1");
        assert_eq!(l[POD_INDEX_LABEL], "1");
        assert_eq!(l[REVISION_LABEL], "web-abc");
        assert_eq!(l["app"], "sts");
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let vols = spec.volumes.as_ref().unwrap();
        assert_eq!(vols.len(), 2);
        assert_eq!(vols[0].name, "www");
        assert_eq!(
            vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "www-web-1"
        );
        assert!(vols[0].empty_dir.is_none());
        assert_eq!(vols[1].name, "tmp");
        assert!(identity_matches(&s, &p));
        assert!(storage_matches(&s, &p));
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((r.kind.as_str(), r.controller), ("StatefulSet", Some(true)));
    }

    #[test]
    fn claims_merge_the_selector_labels() {
        let s = set(json!({}));
        let c = claims_for(&s, 2);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, "www");
        let m = &c[0].1.metadata;
        assert_eq!(m.name.as_deref(), Some("www-web-2"));
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        let l = m.labels.as_ref().unwrap();
        assert_eq!((l["app"].as_str(), l["tier"].as_str()), ("sts", "db"));
    }

    #[test]
    fn drifted_identity_is_detected() {
        let s = set(json!({}));
        let t = s.spec.as_ref().unwrap().template.clone();
        let mut p = new_pod(&s, &t, 0, "r");
        p.metadata.labels.as_mut().unwrap().remove(POD_INDEX_LABEL);
        assert!(!identity_matches(&s, &p));
        assert_eq!(identity_labels(&p)[POD_INDEX_LABEL], "0");
        p.spec.as_mut().unwrap().volumes.as_mut().unwrap()[0]
            .persistent_volume_claim
            .as_mut()
            .unwrap()
            .claim_name = "other".into();
        assert!(!storage_matches(&s, &p));
    }

    #[test]
    fn retention_policy_sets_owner_refs_on_claims() {
        let claim = |refs: serde_json::Value| -> PersistentVolumeClaim {
            serde_json::from_value(json!({"metadata": {"name": "www-web-0", "ownerReferences": refs}}))
                .unwrap()
        };
        let pod = |name: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "uid": format!("{name}-uid")}})).unwrap()
        };
        let set_ref =
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "set-uid"});
        let pod_ref =
            |n: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": n, "uid": format!("{n}-uid")});
        let policy = |d: &str, s: &str| {
            set(
                json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": d, "whenScaled": s}}}),
            )
        };
        let uids =
            |r: Option<Vec<OwnerReference>>| r.map(|v| v.into_iter().map(|r| r.uid).collect::<Vec<_>>());
        // (policy, pod, existing refs, expected refs or None for no change)
        let cases: Vec<(StatefulSet, Pod, serde_json::Value, Option<Vec<&str>>)> = vec![
            (policy("Retain", "Retain"), pod("web-0"), json!([]), None),
            (
                policy("Retain", "Retain"),
                pod("web-0"),
                json!([set_ref.clone()]),
                Some(vec![]),
            ),
            (
                policy("Delete", "Retain"),
                pod("web-0"),
                json!([]),
                Some(vec!["set-uid"]),
            ),
            (
                policy("Delete", "Retain"),
                pod("web-0"),
                json!([set_ref.clone()]),
                None,
            ),
            (policy("Retain", "Delete"), pod("web-0"), json!([]), None),
            (
                policy("Retain", "Delete"),
                pod("web-5"),
                json!([]),
                Some(vec!["web-5-uid"]),
            ),
            (
                policy("Retain", "Delete"),
                pod("web-5"),
                json!([pod_ref("web-5")]),
                None,
            ),
            (
                policy("Retain", "Delete"),
                pod("web-1"),
                json!([pod_ref("web-1")]),
                Some(vec![]),
            ),
            (
                policy("Delete", "Delete"),
                pod("web-5"),
                json!([set_ref.clone()]),
                Some(vec!["web-5-uid"]),
            ),
            (
                policy("Delete", "Delete"),
                pod("web-1"),
                json!([]),
                Some(vec!["set-uid"]),
            ),
        ];
        for (i, (s, p, refs, want)) in cases.into_iter().enumerate() {
            let got = uids(claim_refs_for_policy(&s, &p, &claim(refs)));
            let want = want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(got, want, "case {i}");
        }
        let foreign =
            claim(json!([{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x", "controller": true}]));
        assert!(claim_refs_for_policy(&policy("Delete", "Delete"), &pod("web-0"), &foreign).is_none());
        assert!(claim_is_stale(&claim(json!([pod_ref("web-0")])), "web-0", ""));
        assert!(!claim_is_stale(
            &claim(json!([pod_ref("web-0")])),
            "web-0",
            "web-0-uid"
        ));
    }
}
