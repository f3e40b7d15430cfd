//! The garbage collector's decisions (`attemptToDeleteItem`'s switch, `classifyReferences`,
//! `processDeletingDependentsItem`) and the wire form of its patches, as pure functions of what the graph
//! and the live GETs showed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

/// upstream `metav1.FinalizerOrphanDependents`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// upstream `metav1.FinalizerDeleteDependents`.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// What a live GET says about one ownerReference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// Exists with that UID and is not waiting for its dependents.
    Solid,
    /// Absent, or the name now belongs to another UID.
    Dangling,
    /// Exists and is being deleted in the foreground (deletionTimestamp + `foregroundDeletion`).
    WaitingForDependentsDeletion,
}

/// upstream `metav1.DeletionPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Leave the dependents.
    Orphan,
    /// Delete now, the dependents afterwards.
    Background,
    /// Delete the blocking dependents first.
    Foreground,
}

impl Propagation {
    /// The `propagationPolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// What to do with an item whose owners were classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Keep it as it is.
    Nothing,
    /// Keep it, but drop these ownerReferences (by owner UID): a solid owner remains.
    RemoveOwnerRefs(Vec<String>),
    /// Delete it in the foreground (an owner waits for it and it has dependents of its own); first make
    /// its ownerReferences non-blocking when a dependent is itself deleting in the foreground (cycles).
    DeleteForeground {
        /// Patch `blockOwnerDeletion: false` first.
        unblock_first: bool,
    },
    /// Delete it, with the propagation its own finalizers ask for.
    Delete(Propagation),
}

fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers.iter().flatten().any(|x| x == f)
}

/// Being deleted in the foreground: deletionTimestamp and `foregroundDeletion`.
pub fn deleting_dependents(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, FINALIZER_FOREGROUND)
}

/// Waiting for its dependents to be orphaned: deletionTimestamp and `orphan`.
pub fn orphaning(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, FINALIZER_ORPHAN)
}

/// One reference's state from the live GET of its owner (`None`: 404).
pub fn classify(reference: &OwnerReference, live: Option<&ObjectMeta>) -> OwnerState {
    match live {
        None => OwnerState::Dangling,
        Some(m) if m.uid.as_deref() != Some(reference.uid.as_str()) => OwnerState::Dangling,
        Some(m) if deleting_dependents(m) => OwnerState::WaitingForDependentsDeletion,
        Some(_) => OwnerState::Solid,
    }
}

/// upstream `attemptToDeleteItem`'s decision. `refs` are the item's ownerReferences with their states,
/// `has_dependents` whether the graph knows dependents of the item, `dependent_deleting_dependents`
/// whether one of them is itself deleting in the foreground, `finalizers` the item's own.
pub fn decide(
    refs: &[(OwnerReference, OwnerState)],
    has_dependents: bool,
    dependent_deleting_dependents: bool,
    finalizers: &[String],
) -> Action {
    if refs.is_empty() {
        return Action::Nothing;
    }
    let of = |s: OwnerState| refs.iter().filter(move |(_, st)| *st == s).map(|(r, _)| r);
    if of(OwnerState::Solid).next().is_some() {
        // Dangling refs go, and so do waiting ones: otherwise that owner would wait for us for ever.
        let drop: Vec<String> = of(OwnerState::Dangling)
            .chain(of(OwnerState::WaitingForDependentsDeletion))
            .map(|r| r.uid.clone())
            .collect();
        return if drop.is_empty() {
            Action::Nothing
        } else {
            Action::RemoveOwnerRefs(drop)
        };
    }
    if of(OwnerState::WaitingForDependentsDeletion).next().is_some() && has_dependents {
        return Action::DeleteForeground {
            unblock_first: dependent_deleting_dependents,
        };
    }
    let policy = if finalizers.iter().any(|f| f == FINALIZER_ORPHAN) {
        Propagation::Orphan
    } else if finalizers.iter().any(|f| f == FINALIZER_FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    Action::Delete(policy)
}

/// Whether `dependent_refs` block deletion of the owner `owner_uid` (`blockOwnerDeletion: true`).
pub fn blocks(dependent_refs: &[OwnerReference], owner_uid: &str) -> bool {
    dependent_refs
        .iter()
        .any(|r| r.uid == owner_uid && r.block_owner_deletion == Some(true))
}

/// The strategic-merge patch that deletes ownerReferences by UID (upstream
/// `GenerateDeleteOwnerRefStrategicMergeBytes`), with the dependent's UID as precondition.
pub fn delete_owner_refs_patch(dependent_uid: &str, owner_uids: &[String]) -> Value {
    let refs: Vec<Value> = owner_uids
        .iter()
        .map(|u| json!({"$patch": "delete", "uid": u}))
        .collect();
    json!({"metadata": {"ownerReferences": refs, "uid": dependent_uid}})
}

/// The JSON merge patch doing the same for kinds without strategic merge (custom resources): the whole
/// remaining list, guarded by the resourceVersion it was computed from.
pub fn delete_owner_refs_merge_patch(current: &ObjectMeta, owner_uids: &[String]) -> Value {
    let kept: Vec<&OwnerReference> = current
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !owner_uids.contains(&r.uid))
        .collect();
    json!({"metadata": {"ownerReferences": kept, "resourceVersion": current.resource_version, "uid": current.uid}})
}

/// The strategic-merge patch that makes every blocking ownerReference non-blocking (upstream
/// `unblockOwnerReferencesStrategicMergePatch`).
pub fn unblock_patch(dependent_uid: &str, refs: &[OwnerReference]) -> Value {
    let refs: Vec<Value> = refs
        .iter()
        .filter(|r| r.block_owner_deletion == Some(true))
        .map(|r| json!({"uid": r.uid, "blockOwnerDeletion": false}))
        .collect();
    json!({"metadata": {"ownerReferences": refs, "uid": dependent_uid}})
}

/// The JSON merge patch doing the same: the whole list with `blockOwnerDeletion: false`.
pub fn unblock_merge_patch(current: &ObjectMeta) -> Value {
    let refs: Vec<OwnerReference> = current
        .owner_references
        .iter()
        .flatten()
        .map(|r| {
            let mut r = r.clone();
            if r.block_owner_deletion == Some(true) {
                r.block_owner_deletion = Some(false);
            }
            r
        })
        .collect();
    json!({"metadata": {"ownerReferences": refs, "resourceVersion": current.resource_version, "uid": current.uid}})
}

/// The JSON merge patch that removes `finalizer` (upstream `removeFinalizer`), or `None` when it is not
/// there.
pub fn remove_finalizer_patch(current: &ObjectMeta, finalizer: &str) -> Option<Value> {
    let all = current.finalizers.clone().unwrap_or_default();
    if !all.iter().any(|f| f == finalizer) {
        return None;
    }
    let kept: Vec<String> = all.into_iter().filter(|f| f != finalizer).collect();
    Some(json!({"metadata": {"finalizers": kept, "resourceVersion": current.resource_version}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn r(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: format!("n-{uid}"),
            uid: uid.into(),
            controller: None,
            block_owner_deletion: Some(true),
        }
    }

    fn meta(uid: &str, deleting: bool, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            deletion_timestamp: deleting.then(|| Time(jiff::Timestamp::now())),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            resource_version: Some("7".into()),
            ..Default::default()
        }
    }

    #[test]
    fn owners_are_classified_from_the_live_get() {
        let cases = [
            (None, OwnerState::Dangling),
            (Some(meta("other", false, &[])), OwnerState::Dangling),
            (Some(meta("a", false, &[])), OwnerState::Solid),
            (Some(meta("a", true, &[])), OwnerState::Solid),
            (Some(meta("a", true, &["orphan"])), OwnerState::Solid),
            (
                Some(meta("a", true, &["foregroundDeletion"])),
                OwnerState::WaitingForDependentsDeletion,
            ),
            (Some(meta("a", false, &["foregroundDeletion"])), OwnerState::Solid),
        ];
        for (live, want) in cases {
            assert_eq!(classify(&r("a"), live.as_ref()), want, "{live:?}");
        }
    }

    #[test]
    fn decisions_follow_attempt_to_delete_item() {
        use Action::*;
        use OwnerState::*;
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        type Case = (Vec<(OwnerReference, OwnerState)>, bool, bool, Vec<String>, Action);
        let cases: Vec<Case> = vec![
            (vec![], false, false, s(&[]), Nothing),
            (vec![(r("a"), Solid)], false, false, s(&[]), Nothing),
            // A solid owner keeps the item; dangling and waiting refs go.
            (
                vec![
                    (r("a"), Solid),
                    (r("b"), Dangling),
                    (r("c"), WaitingForDependentsDeletion),
                ],
                true,
                false,
                s(&[]),
                RemoveOwnerRefs(s(&["b", "c"])),
            ),
            // Every owner gone: deleted in the background...
            (
                vec![(r("a"), Dangling)],
                true,
                false,
                s(&[]),
                Delete(Propagation::Background),
            ),
            // ...or as its own finalizers ask.
            (
                vec![(r("a"), Dangling)],
                true,
                false,
                s(&["orphan"]),
                Delete(Propagation::Orphan),
            ),
            (
                vec![(r("a"), Dangling)],
                false,
                false,
                s(&["foregroundDeletion"]),
                Delete(Propagation::Foreground),
            ),
            // An owner waits and the item has dependents: nested foreground deletion.
            (
                vec![(r("a"), WaitingForDependentsDeletion)],
                true,
                false,
                s(&[]),
                DeleteForeground { unblock_first: false },
            ),
            (
                vec![(r("a"), WaitingForDependentsDeletion), (r("b"), Dangling)],
                true,
                true,
                s(&[]),
                DeleteForeground { unblock_first: true },
            ),
            // An owner waits and the item has no dependents: a plain delete.
            (
                vec![(r("a"), WaitingForDependentsDeletion)],
                false,
                false,
                s(&[]),
                Delete(Propagation::Background),
            ),
        ];
        for (refs, deps, deps_deleting, fin, want) in cases {
            assert_eq!(decide(&refs, deps, deps_deleting, &fin), want, "{refs:?}");
        }
    }

    #[test]
    fn patches_have_upstreams_wire_form() {
        assert_eq!(
            delete_owner_refs_patch("d", &["a".into(), "b".into()]),
            json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "a"}, {"$patch": "delete", "uid": "b"}], "uid": "d"}})
        );
        let mut m = meta("d", false, &["x", "orphan"]);
        let mut unblocked = r("b");
        unblocked.block_owner_deletion = None;
        m.owner_references = Some(vec![r("a"), unblocked]);
        let p = delete_owner_refs_merge_patch(&m, &["a".into()]);
        assert_eq!(p["metadata"]["ownerReferences"].as_array().unwrap().len(), 1);
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "b");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(
            unblock_patch("d", m.owner_references.as_ref().unwrap()),
            json!({"metadata": {"ownerReferences": [{"uid": "a", "blockOwnerDeletion": false}], "uid": "d"}})
        );
        let p = unblock_merge_patch(&m);
        assert_eq!(p["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false);
        assert_eq!(
            remove_finalizer_patch(&m, "orphan"),
            Some(json!({"metadata": {"finalizers": ["x"], "resourceVersion": "7"}}))
        );
        assert_eq!(remove_finalizer_patch(&m, "foregroundDeletion"), None);
        assert!(blocks(m.owner_references.as_ref().unwrap(), "a"));
        assert!(!blocks(m.owner_references.as_ref().unwrap(), "b"));
    }
}
