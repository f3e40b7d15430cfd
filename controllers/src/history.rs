//! ControllerRevision history (`pkg/controller/history/controller_history.go`), shared by the StatefulSet
//! and DaemonSet controllers: a revision is a snapshot of the owner's pod template (`data` = a strategic
//! merge patch `{"spec":{"template":{…,"$patch":"replace"}}}`), named `<owner>-<hash>`, numbered, owned
//! through a controller reference, and trimmed down to `revisionHistoryLimit` once no pod uses it.
//!
//! The API server hands `data` back as parsed JSON, so revisions are compared as JSON values (upstream
//! compares the raw bytes) and hashed from a canonical serialisation (keys sorted), so the comparison and
//! the hash do not depend on how the server orders keys.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::controller_ref::{self, Claim};
use crate::{Error, selector};

/// `ControllerRevisionHashLabel`: the hash on every revision (StatefulSets); also the key DaemonSet
/// revisions and pods carry (`controller-revision-hash`, `DefaultDaemonSetUniqueLabelKey`).
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to 223 characters so the name fits.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let prefix = if prefix.len() > 223 {
        &prefix[..223]
    } else {
        prefix
    };
    format!("{prefix}-{hash}")
}

/// JSON with every object's keys sorted, the bytes revisions are hashed from.
pub fn canonical_bytes(v: &Value) -> Vec<u8> {
    fn canon(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, canon(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&canon(v)).unwrap_or_default()
}

/// The revision data of a pod template: `{"spec":{"template":{…,"$patch":"replace"}}}` (upstream
/// `getPatch` of both controllers).
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// The pod template a revision holds (`ApplyRevision` of a template-only patch).
pub fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// The data of a revision as JSON (null when it has none).
pub fn data_of(rev: &ControllerRevision) -> &Value {
    static NULL: Value = Value::Null;
    rev.data.as_ref().map(|d| &d.0).unwrap_or(&NULL)
}

/// `HashControllerRevision` for StatefulSets: FNV-32 of the data, then the collision count.
pub fn statefulset_hash(data: &Value, collision_count: Option<i32>) -> String {
    crate::hash::revision_hash(&canonical_bytes(data), collision_count)
}

/// `EqualRevision`: the same hash label (when both have one) and the same data.
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let label = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .cloned()
    };
    if let (Some(x), Some(y)) = (label(a), label(b))
        && x != y
    {
        return false;
    }
    data_of(a) == data_of(b)
}

/// `SortControllerRevisions`: by revision number, then creation time, then name.
pub fn sort_revisions(revs: &mut [Arc<ControllerRevision>]) {
    revs.sort_by(|a, b| {
        let ka = (
            a.revision,
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.metadata.name.clone(),
        );
        let kb = (
            b.revision,
            b.metadata.creation_timestamp.as_ref().map(|t| t.0),
            b.metadata.name.clone(),
        );
        ka.cmp(&kb)
    });
}

/// `nextRevision`: one past the highest revision number (1 for none); `revs` sorted.
pub fn next_revision(revs: &[Arc<ControllerRevision>]) -> i64 {
    revs.last().map(|r| r.revision + 1).unwrap_or(1)
}

/// `NewControllerRevision`: the revision object for `data` under `owner` (name and hash label from `hash`).
pub fn new_revision(
    owner_meta: &ObjectMeta,
    owner: &OwnerReference,
    labels: BTreeMap<String, String>,
    data: Value,
    revision: i64,
    name: String,
) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: owner_meta.namespace.clone(),
            labels: Some(labels),
            annotations: owner_meta.annotations.clone(),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// Revisions to delete so that at most `limit` revisions outside `live` stay, oldest first (`revs` sorted;
/// upstream `truncateHistory` and the DaemonSet's `cleanupHistory`).
pub fn to_truncate(revs: &[Arc<ControllerRevision>], live: &HashSet<String>, limit: i32) -> Vec<String> {
    let history: Vec<&Arc<ControllerRevision>> = revs
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or("")))
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if history.len() <= limit {
        return Vec::new();
    }
    history[..history.len() - limit]
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect()
}

/// `ClaimControllerRevisions`: the revisions (of one namespace) `owner` controls, adopting orphans its
/// selector matches and releasing its revisions that no longer match (nothing is adopted while the owner
/// is being deleted; an empty selector matches nothing here).
pub async fn claim_revisions(
    client: &kube::Client,
    all: Vec<Arc<ControllerRevision>>,
    selector: &LabelSelector,
    owner: &OwnerReference,
    owner_deleting: bool,
) -> Result<Vec<Arc<ControllerRevision>>, Error> {
    let mut owned = Vec::new();
    for rev in all {
        let matches =
            !selector::is_empty(selector) && selector::matches(selector, rev.metadata.labels.as_ref());
        let ns = rev.metadata.namespace.as_deref().unwrap_or("default");
        let name = rev.metadata.name.as_deref().unwrap_or("");
        let uid = rev.metadata.uid.as_deref().unwrap_or("");
        let api: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
        match controller_ref::claim(&rev.metadata, &owner.uid, matches, owner_deleting) {
            Claim::Owned => owned.push(rev),
            Claim::Adopt => {
                let patch = controller_ref::adopt_patch(owner, uid, &[]);
                match api
                    .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Ok(r) => owned.push(Arc::new(r)),
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 || s.code == 422 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Claim::Release => {
                let patch = controller_ref::release_patch(&owner.uid, uid);
                match api
                    .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 || s.code == 422 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Claim::Ignore => {}
        }
    }
    Ok(owned)
}

/// `CreateControllerRevision`: create `rev` named by `name_for(collision_count)`; on AlreadyExists with
/// other data, bump `collision_count` and try the next name. An existing equal revision is returned.
pub async fn create_revision(
    client: &kube::Client,
    mut rev: ControllerRevision,
    collision_count: &mut i32,
    name_for: impl Fn(i32) -> (String, String),
) -> Result<ControllerRevision, Error> {
    let ns = rev.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    // Bounded: upstream loops until it finds a free name; a hundred collisions means something else.
    for _ in 0..100 {
        let (name, hash) = name_for(*collision_count);
        rev.metadata.name = Some(name.clone());
        rev.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash);
        match api.create(&PostParams::default(), &rev).await {
            Ok(created) => return Ok(created),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = api.get(&name).await?;
                if data_of(&existing) == data_of(&rev) {
                    return Ok(existing);
                }
                *collision_count += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Other(format!(
        "too many revision name collisions for {ns}/{}",
        rev.metadata.name.unwrap_or_default()
    )))
}

/// `UpdateControllerRevision`: give `rev` the revision number `revision` (a rollback reuses an old one).
pub async fn set_revision_number(
    client: &kube::Client,
    rev: &ControllerRevision,
    revision: i64,
) -> Result<ControllerRevision, Error> {
    let ns = rev.metadata.namespace.as_deref().unwrap_or("default");
    let name = rev.metadata.name.as_deref().unwrap_or("");
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    let patch = json!({"revision": revision});
    Ok(api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?)
}

/// Delete the revisions `names` of namespace `ns` (gone already counts as done).
pub async fn delete_revisions(client: &kube::Client, ns: &str, names: &[String]) -> Result<(), Error> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    for name in names {
        match api.delete(name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(name: &str, n: i64, data: Value, hash: Option<&str>) -> Arc<ControllerRevision> {
        let mut labels = BTreeMap::new();
        if let Some(h) = hash {
            labels.insert(HASH_LABEL.to_string(), h.to_string());
        }
        Arc::new(ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            },
            data: Some(RawExtension(data)),
            revision: n,
        })
    }

    #[test]
    fn template_patches_replace_the_template_and_round_trip() {
        let t: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let p = template_patch(&t);
        assert_eq!(p["spec"]["template"]["$patch"], "replace");
        let r = rev("web-1", 1, p, None);
        assert_eq!(template_of(&r), Some(t));
    }

    #[test]
    fn hashes_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"spec":{"b":1,"a":{"y":2,"x":3}}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"spec":{"a":{"x":3,"y":2},"b":1}}"#).unwrap();
        assert_eq!(statefulset_hash(&a, None), statefulset_hash(&b, None));
        assert_ne!(statefulset_hash(&a, None), statefulset_hash(&a, Some(1)));
    }

    #[test]
    fn revisions_sort_by_number_and_equal_ones_compare_data_and_hash() {
        let mut revs = vec![
            rev("c", 3, json!(1), None),
            rev("a", 1, json!(2), None),
            rev("b", 2, json!(3), None),
        ];
        sort_revisions(&mut revs);
        let names: Vec<_> = revs.iter().map(|r| r.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(next_revision(&revs), 4);
        assert_eq!(next_revision(&[]), 1);
        assert!(equal_revision(
            &rev("x", 1, json!({"a": 1}), Some("h")),
            &rev("y", 2, json!({"a": 1}), Some("h"))
        ));
        assert!(!equal_revision(
            &rev("x", 1, json!({"a": 1}), Some("h")),
            &rev("y", 2, json!({"a": 1}), Some("g"))
        ));
        assert!(!equal_revision(
            &rev("x", 1, json!({"a": 1}), None),
            &rev("y", 2, json!({"a": 2}), None)
        ));
    }

    #[test]
    fn truncation_keeps_live_revisions_and_the_newest_history() {
        let revs: Vec<_> = (1..=5)
            .map(|i| rev(&format!("r{i}"), i, json!(i), None))
            .collect();
        let live: HashSet<String> = ["r5".to_string(), "r2".to_string()].into();
        // History (not live): r1 r3 r4; keep 1 → delete r1 r3.
        assert_eq!(to_truncate(&revs, &live, 1), ["r1", "r3"]);
        assert!(to_truncate(&revs, &live, 3).is_empty());
        assert_eq!(to_truncate(&revs, &live, 0), ["r1", "r3", "r4"]);
        assert_eq!(revision_name(&"x".repeat(300), "h").len(), 225);
    }
}
