//! Volume kinds: PersistentVolume, PersistentVolumeClaim (core/v1) and StorageClass (storage.k8s.io/v1).
//! Their scheme defaults (`pkg/apis/core/v1/defaults.go`, `pkg/apis/storage/v1/defaults.go`) and the
//! create-time status of upstream `pkg/registry/core/persistentvolume{,claim}/strategy.go`.
//!
//! Nothing binds claims to volumes yet (no PV controller): a claim stays `Pending`, a volume `Pending`
//! until some controller writes their status.

use serde_json::{Value, json};

use super::workload::{ensure_object, set_default};

/// The resources with defaults here, as `(group, plural)`.
pub fn handles(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("", "persistentvolumes" | "persistentvolumeclaims") | ("storage.k8s.io", "storageclasses")
    )
}

/// `SetDefaults_PersistentVolumeClaim` and `SetDefaults_PersistentVolumeClaimSpec`: also what a
/// StatefulSet's `volumeClaimTemplates` entries get.
pub fn default_claim(claim: &mut Value) {
    let spec = ensure_object(claim, &["spec"]);
    set_default(spec, "volumeMode", json!("Filesystem"));
    let status = ensure_object(claim, &["status"]);
    if status
        .get("phase")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        status["phase"] = json!("Pending");
    }
}

/// The scheme defaults, on every decoded object.
pub fn default(group: &str, plural: &str, obj: &mut Value) {
    match (group, plural) {
        ("", "persistentvolumeclaims") => default_claim(obj),
        ("", "persistentvolumes") => {
            let spec = ensure_object(obj, &["spec"]);
            if spec
                .get("persistentVolumeReclaimPolicy")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                spec["persistentVolumeReclaimPolicy"] = json!("Retain");
            }
            set_default(spec, "volumeMode", json!("Filesystem"));
            let status = ensure_object(obj, &["status"]);
            if status
                .get("phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                status["phase"] = json!("Pending");
            }
        }
        ("storage.k8s.io", "storageclasses") => {
            set_default(obj, "reclaimPolicy", json!("Delete"));
            set_default(obj, "volumeBindingMode", json!("Immediate"));
        }
        _ => {}
    }
}

/// Create: the status starts over (`PrepareForCreate`), then defaults give it phase `Pending`; a volume
/// also records when it entered that phase (PersistentVolumeLastPhaseTransitionTime, GA in 1.31).
pub fn prepare_create(group: &str, plural: &str, obj: &mut Value, now: &str) {
    if let Some(o) = obj.as_object_mut()
        && plural != "storageclasses"
    {
        o.remove("status");
    }
    default(group, plural, obj);
    if plural == "persistentvolumes" {
        obj["status"]["lastPhaseTransitionTime"] = json!(now);
    }
}

/// Update: defaults; a volume status write that changes the phase without a new transition time gets
/// one (`persistentvolumeStatusStrategy.PrepareForUpdate`).
pub fn prepare_update(
    group: &str,
    plural: &str,
    new: &mut Value,
    old: &Value,
    status_update: bool,
    now: &str,
) {
    default(group, plural, new);
    if plural == "persistentvolumes" && status_update {
        let phase = |v: &Value| v.pointer("/status/phase").cloned();
        let time = |v: &Value| v.pointer("/status/lastPhaseTransitionTime").cloned();
        if phase(new) != phase(old) && time(new) == time(old) {
            new["status"]["lastPhaseTransitionTime"] = json!(now);
        }
    }
}

/// `storageclass.kubernetes.io/is-default-class`: the annotation marking the cluster's default class
/// (also its beta spelling, which upstream still honours).
pub fn is_default_class(obj: &Value) -> bool {
    [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|a| {
        obj.pointer("/metadata/annotations")
            .and_then(|m| m.get(*a))
            .and_then(Value::as_str)
            == Some("true")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_volumes_and_claims_start_pending_with_filesystem_mode() {
        let mut pv = json!({"spec": {"capacity": {"storage": "1Gi"}}, "status": {"phase": "Bound"}});
        prepare_create("", "persistentvolumes", &mut pv, "2025-01-01T00:00:00Z");
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        assert_eq!(
            pv["status"],
            json!({"phase": "Pending", "lastPhaseTransitionTime": "2025-01-01T00:00:00Z"})
        );
        let mut pvc = json!({"spec": {"volumeMode": "Block"}});
        prepare_create("", "persistentvolumeclaims", &mut pvc, "t");
        assert_eq!(pvc["spec"]["volumeMode"], "Block");
        assert_eq!(pvc["status"], json!({"phase": "Pending"}));
        let mut sc = json!({"provisioner": "x"});
        prepare_create("storage.k8s.io", "storageclasses", &mut sc, "t");
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
    }

    #[test]
    fn volume_phase_changes_record_their_time() {
        let old = json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "a"}});
        let mut new = json!({"status": {"phase": "Available", "lastPhaseTransitionTime": "a"}});
        prepare_update("", "persistentvolumes", &mut new, &old, true, "b");
        assert_eq!(new["status"]["lastPhaseTransitionTime"], "b");
    }
}
