//! What the volume controller does about one claim or one volume: pure functions of the cached objects
//! (upstream `pkg/controller/volume/persistentvolume/pv_controller.go` `syncClaim` / `syncVolume`, with the
//! provisioning a local-path provisioner would do inline).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The built-in provisioner's name.
pub const PROVISIONER: &str = "kubeling.io/local-path";
/// The StorageClass made at start.
pub const DEFAULT_CLASS: &str = "standard";
/// `storageclass.kubernetes.io/is-default-class`.
pub const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta spelling upstream still honours.
pub const IS_DEFAULT_CLASS_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// `pv.kubernetes.io/bind-completed`.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// `pv.kubernetes.io/bound-by-controller`.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// `pv.kubernetes.io/provisioned-by`.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// `volume.kubernetes.io/storage-provisioner` (and its beta spelling) on claims being provisioned.
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta spelling.
pub const STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";

/// The StorageClass `standard` ensured at start.
pub fn standard_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(DEFAULT_CLASS.into()),
            annotations: Some(BTreeMap::from([(IS_DEFAULT_CLASS.into(), "true".into())])),
            ..Default::default()
        },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        ..Default::default()
    }
}

fn is_default(class: &StorageClass) -> bool {
    class.metadata.annotations.as_ref().is_some_and(|a| {
        a.get(IS_DEFAULT_CLASS).map(String::as_str) == Some("true")
            || a.get(IS_DEFAULT_CLASS_BETA).map(String::as_str) == Some("true")
    })
}

/// The default class: of several, the newest (then by name), as `GetDefaultClass`.
pub fn default_class(classes: &[&StorageClass]) -> Option<String> {
    classes
        .iter()
        .filter(|c| is_default(c))
        .max_by_key(|c| {
            (
                c.metadata.creation_timestamp.as_ref().map(|t| t.0),
                c.metadata.name.clone(),
            )
        })
        .and_then(|c| c.metadata.name.clone())
}

fn phase_of_claim(c: &PersistentVolumeClaim) -> &str {
    c.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn phase_of_volume(v: &PersistentVolume) -> &str {
    v.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// `pvc-<claim uid>`, the name the provisioner gives a claim's volume.
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// Whether `volume`'s claimRef is `claim` (by UID when the ref has one).
pub fn refers_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            r.name == claim.metadata.name
                && r.namespace == claim.metadata.namespace
                && (r.uid.as_deref().unwrap_or("").is_empty() || r.uid == claim.metadata.uid)
        })
}

/// One write for a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// `spec.storageClassName` is unset and a default class exists (retroactive default class assignment).
    SetClass(String),
    /// Make the directory and the volume.
    Provision {
        /// The volume to create.
        volume: Box<PersistentVolume>,
        /// Its directory.
        dir: PathBuf,
    },
    /// The volume's `status.phase` becomes Bound.
    VolumeBound(String),
    /// The claim gets `spec.volumeName`, the bind annotations, and status Bound with the volume's capacity
    /// and access modes.
    ClaimBound {
        /// The volume.
        volume: Box<PersistentVolume>,
    },
    /// Its bound volume is gone: phase Lost, Warning `ClaimLost`.
    Lost,
    /// The class does not exist: Warning `ProvisioningFailed`.
    NoClass(String),
}

/// `syncClaim` for `claim`, given every cached volume and class.
pub fn claim_steps(
    claim: &PersistentVolumeClaim,
    volumes: &[&PersistentVolume],
    classes: &[&StorageClass],
    volumes_dir: &Path,
) -> Vec<ClaimStep> {
    if claim.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let spec = claim.spec.clone().unwrap_or_default();
    let bound_name = spec.volume_name.clone().filter(|n| !n.is_empty());
    if let Some(name) = bound_name {
        let Some(v) = volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name.as_str()))
        else {
            return if phase_of_claim(claim) == "Bound" {
                vec![ClaimStep::Lost]
            } else {
                Vec::new()
            };
        };
        if !refers_to(v, claim) {
            return Vec::new();
        }
        let mut steps = Vec::new();
        if phase_of_volume(v) != "Bound" {
            steps.push(ClaimStep::VolumeBound(name));
        }
        if phase_of_claim(claim) != "Bound" || annotation(&claim.metadata, BIND_COMPLETED) != Some("yes") {
            steps.push(ClaimStep::ClaimBound {
                volume: Box::new((*v).clone()),
            });
        }
        return steps;
    }
    // A volume made for this claim already (an earlier pass stopped half way): bind it.
    if let Some(v) = volumes.iter().find(|v| refers_to(v, claim)) {
        let mut steps = Vec::new();
        if phase_of_volume(v) != "Bound" {
            steps.push(ClaimStep::VolumeBound(
                v.metadata.name.clone().unwrap_or_default(),
            ));
        }
        steps.push(ClaimStep::ClaimBound {
            volume: Box::new((*v).clone()),
        });
        return steps;
    }
    let Some(class_name) = spec.storage_class_name.clone() else {
        return default_class(classes)
            .map(ClaimStep::SetClass)
            .into_iter()
            .collect();
    };
    if class_name.is_empty() {
        // "" asks for no class: only pre-provisioned volumes, which kubeling does not match.
        return Vec::new();
    }
    let Some(class) = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()))
    else {
        return vec![ClaimStep::NoClass(class_name)];
    };
    if class.provisioner != PROVISIONER {
        // Someone else's provisioner.
        return Vec::new();
    }
    let (volume, dir) = provisioned_volume(claim, class, volumes_dir);
    vec![ClaimStep::Provision {
        volume: Box::new(volume),
        dir,
    }]
}

/// The volume the local provisioner makes for `claim`: `pvc-<uid>`, a hostPath directory
/// `<volumes_dir>/<pv>_<ns>_<claim>`, the claim's size, access modes and mode, the class's reclaim policy,
/// and a claimRef.
pub fn provisioned_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    volumes_dir: &Path,
) -> (PersistentVolume, PathBuf) {
    let name = volume_name(claim);
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let cname = claim.metadata.name.clone().unwrap_or_default();
    let dir = volumes_dir.join(format!("{name}_{ns}_{cname}"));
    let spec = claim.spec.clone().unwrap_or_default();
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned())
        .unwrap_or_else(|| Quantity("0".into()));
    let volume = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(BTreeMap::from([(PROVISIONED_BY.into(), PROVISIONER.into())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), storage)])),
            access_modes: spec.access_modes.clone(),
            persistent_volume_reclaim_policy: Some(
                class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: Some(spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into())),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(ns),
                name: Some(cname),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..Default::default()
            }),
            host_path: Some(HostPathVolumeSource {
                path: dir.to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            mount_options: class.mount_options.clone(),
            ..Default::default()
        }),
        status: None,
    };
    (volume, dir)
}

/// One write for a volume.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeStep {
    /// Phase Available (no claimRef).
    Available,
    /// Phase Bound.
    Bound,
    /// Its claim is gone: phase Released.
    Released,
    /// Released with reclaim policy Delete and made by us: remove the directory, then the volume.
    Delete {
        /// The directory (only ever under the volumes dir).
        dir: Option<PathBuf>,
    },
}

/// `syncVolume` for `volume`, given its claim as cached (`None`: not found, or another claim of that name).
pub fn volume_steps(
    volume: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
    volumes_dir: &Path,
) -> Vec<VolumeStep> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let spec = volume.spec.clone().unwrap_or_default();
    let phase = phase_of_volume(volume);
    let Some(claim_ref) = spec.claim_ref.as_ref() else {
        return if phase == "Available" {
            Vec::new()
        } else {
            vec![VolumeStep::Available]
        };
    };
    let claim = claim
        .filter(|c| claim_ref.uid.as_deref().unwrap_or("").is_empty() || claim_ref.uid == c.metadata.uid);
    if let Some(c) = claim {
        let bound_here =
            c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == volume.metadata.name.as_deref();
        return if bound_here && phase != "Bound" {
            vec![VolumeStep::Bound]
        } else {
            Vec::new()
        };
    }
    let mut steps = Vec::new();
    if phase != "Released" && phase != "Failed" {
        steps.push(VolumeStep::Released);
    }
    let ours = annotation(&volume.metadata, PROVISIONED_BY) == Some(PROVISIONER);
    if spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete") && ours {
        let dir = spec
            .host_path
            .as_ref()
            .map(|h| PathBuf::from(&h.path))
            .filter(|p| p.starts_with(volumes_dir) && p != volumes_dir);
        steps.push(VolumeStep::Delete { dir });
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(v: serde_json::Value) -> PersistentVolumeClaim {
        let mut base = json!({
            "metadata": {"name": "www-web-0", "namespace": "ns", "uid": "c-uid", "resourceVersion": "7"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}},
                     "storageClassName": "standard"},
            "status": {"phase": "Pending"}
        });
        for (k, x) in v.as_object().unwrap() {
            for (k2, y) in x.as_object().unwrap() {
                base[k][k2] = y.clone();
            }
        }
        serde_json::from_value(base).unwrap()
    }

    fn dir() -> PathBuf {
        PathBuf::from("/data/volumes")
    }

    #[test]
    fn a_claim_of_the_local_class_gets_a_host_path_volume() {
        let class = standard_class();
        let steps = claim_steps(&claim(json!({})), &[], &[&class], &dir());
        let [ClaimStep::Provision { volume, dir: d }] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(d, &PathBuf::from("/data/volumes/pvc-c-uid_ns_www-web-0"));
        let v = serde_json::to_value(volume).unwrap();
        assert_eq!(v["metadata"]["name"], "pvc-c-uid");
        assert_eq!(v["metadata"]["annotations"][PROVISIONED_BY], PROVISIONER);
        assert_eq!(
            v["spec"]["hostPath"],
            json!({"path": "/data/volumes/pvc-c-uid_ns_www-web-0", "type": "DirectoryOrCreate"})
        );
        assert_eq!(v["spec"]["capacity"]["storage"], "1Mi");
        assert_eq!(v["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        assert_eq!(v["spec"]["storageClassName"], "standard");
        assert_eq!(
            v["spec"]["claimRef"],
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "ns", "name": "www-web-0",
                   "uid": "c-uid", "resourceVersion": "7"})
        );
    }

    #[test]
    fn claims_bind_to_their_volume_in_order_volume_first() {
        let class = standard_class();
        let (mut pv, _) = provisioned_volume(&claim(json!({})), &class, &dir());
        pv.status = Some(Default::default());
        let steps = claim_steps(&claim(json!({})), &[&pv], &[&class], &dir());
        assert!(
            matches!(steps.as_slice(), [ClaimStep::VolumeBound(n), ClaimStep::ClaimBound { .. }] if n == "pvc-c-uid")
        );
        let bound = claim(
            json!({"spec": {"volumeName": "pvc-c-uid"}, "status": {"phase": "Bound"},
                                 "metadata": {"annotations": {BIND_COMPLETED: "yes"}}}),
        );
        pv.status.as_mut().unwrap().phase = Some("Bound".into());
        assert!(claim_steps(&bound, &[&pv], &[&class], &dir()).is_empty());
        assert_eq!(claim_steps(&bound, &[], &[&class], &dir()), [ClaimStep::Lost]);
    }

    #[test]
    fn a_claim_without_a_class_gets_the_default_one_and_an_unknown_class_is_reported() {
        let mut c = claim(json!({}));
        c.spec.as_mut().unwrap().storage_class_name = None;
        let class = standard_class();
        assert_eq!(
            claim_steps(&c, &[], &[&class], &dir()),
            [ClaimStep::SetClass("standard".into())]
        );
        let mut not_default = standard_class();
        not_default.metadata.annotations = None;
        assert!(claim_steps(&c, &[], &[&not_default], &dir()).is_empty());
        c.spec.as_mut().unwrap().storage_class_name = Some("fast".into());
        assert_eq!(
            claim_steps(&c, &[], &[&class], &dir()),
            [ClaimStep::NoClass("fast".into())]
        );
        let mut other = standard_class();
        other.metadata.name = Some("fast".into());
        other.provisioner = "example.com/nfs".into();
        assert!(claim_steps(&c, &[], &[&other], &dir()).is_empty());
    }

    #[test]
    fn a_released_volume_is_deleted_with_its_directory_or_kept_when_retained() {
        let class = standard_class();
        let c = claim(json!({}));
        let (mut pv, d) = provisioned_volume(&c, &class, &dir());
        pv.status = Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        let bound = claim(json!({"spec": {"volumeName": "pvc-c-uid"}}));
        assert!(volume_steps(&pv, Some(&bound), &dir()).is_empty());
        assert_eq!(
            volume_steps(&pv, None, &dir()),
            [VolumeStep::Released, VolumeStep::Delete { dir: Some(d) }]
        );
        // A new claim of the same name is not this volume's claim.
        let mut again = claim(json!({}));
        again.metadata.uid = Some("other".into());
        assert_eq!(volume_steps(&pv, Some(&again), &dir()).len(), 2);
        pv.spec.as_mut().unwrap().persistent_volume_reclaim_policy = Some("Retain".into());
        assert_eq!(volume_steps(&pv, None, &dir()), [VolumeStep::Released]);
        pv.status.as_mut().unwrap().phase = Some("Released".into());
        assert!(volume_steps(&pv, None, &dir()).is_empty());
        // A directory outside the volumes dir is never removed.
        pv.spec.as_mut().unwrap().persistent_volume_reclaim_policy = Some("Delete".into());
        pv.spec.as_mut().unwrap().host_path.as_mut().unwrap().path = "/etc".into();
        assert_eq!(
            volume_steps(&pv, None, &dir()),
            [VolumeStep::Delete { dir: None }]
        );
    }
}
