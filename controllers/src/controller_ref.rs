//! ControllerRef adoption and release (`pkg/controller/controller_ref_manager.go`): a controller claims the
//! objects its selector matches. The decision is [`claim`], pure; the patches are upstream's wire forms.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

/// The controlling ownerReference of `meta`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller reference to an owner, as controllers write it (controller and blockOwnerDeletion true).
pub fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What to do with one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Ours and still matching: keep.
    Owned,
    /// Orphan that matches: adopt (after a live check that the owner is not being deleted).
    Adopt,
    /// Ours but no longer matching: release.
    Release,
    /// Not ours (another controller, or an orphan that does not match): leave alone.
    Ignore,
}

/// Upstream's rules for one candidate: `owner_uid` is the claimer, `matches` whether its selector matches
/// the candidate, `owner_deleting` whether the claimer has a deletionTimestamp.
pub fn claim(candidate: &ObjectMeta, owner_uid: &str, matches: bool, owner_deleting: bool) -> Claim {
    match controller_of(candidate) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Owned,
        // Being deleted: the GC handles dependents; do not release them.
        Some(_) if owner_deleting => Claim::Owned,
        Some(_) => Claim::Release,
        None if matches && !owner_deleting && candidate.deletion_timestamp.is_none() => Claim::Adopt,
        None => Claim::Ignore,
    }
}

/// The strategic-merge patch that adopts a dependent (keyed by its UID, so a recreated namesake is
/// refused with a conflict).
pub fn adopt_patch(owner: &OwnerReference, dependent_uid: &str, finalizers: &[&str]) -> Value {
    let mut m = json!({"ownerReferences": [owner], "uid": dependent_uid});
    if !finalizers.is_empty() {
        m["finalizers"] = json!(finalizers);
    }
    json!({ "metadata": m })
}

/// The strategic-merge patch that releases a dependent: our ownerReference deleted by UID.
pub fn release_patch(owner_uid: &str, dependent_uid: &str) -> Value {
    json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}], "uid": dependent_uid}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(owner: Option<(&str, bool)>) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            uid: Some("p-uid".into()),
            owner_references: owner.map(|(uid, controller)| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(controller),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn claims_follow_the_controller_ref_rules() {
        let cases = [
            // (candidate owner, matches, owner deleting, expected)
            (Some(("other", true)), true, false, Claim::Ignore),
            (Some(("me", true)), true, false, Claim::Owned),
            (Some(("me", true)), false, false, Claim::Release),
            (Some(("me", true)), false, true, Claim::Owned),
            (None, true, false, Claim::Adopt),
            (None, true, true, Claim::Ignore),
            (None, false, false, Claim::Ignore),
            // A non-controller owner reference does not make it owned.
            (Some(("me", false)), true, false, Claim::Adopt),
        ];
        for (owner, matches, deleting, want) in cases {
            assert_eq!(
                claim(&meta(owner), "me", matches, deleting),
                want,
                "{owner:?} {matches} {deleting}"
            );
        }
        let mut dying = meta(None);
        dying.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert_eq!(
            claim(&dying, "me", true, false),
            Claim::Ignore,
            "a dying orphan is not adopted"
        );
    }

    #[test]
    fn patches_have_upstreams_wire_form() {
        let r = controller_ref("apps/v1", "ReplicaSet", "web", "rs-uid");
        let p = adopt_patch(&r, "p-uid", &[]);
        assert_eq!(p["metadata"]["uid"], "p-uid");
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(p["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], true);
        let p = release_patch("rs-uid", "p-uid");
        assert_eq!(
            p,
            json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "rs-uid"}], "uid": "p-uid"}})
        );
    }
}
