//! The owner graph (upstream `graph.go`, `graph_builder.go`'s `processGraphChanges`): one node per object
//! UID with its identity, its ownerReferences and the UIDs of its dependents. An owner that has not been
//! seen becomes a *virtual* node, queued so a live GET can tell whether it exists.
//!
//! Applying a change is pure: it updates the graph and returns the UIDs to queue for `attemptToDelete`
//! and `attemptToOrphan`; the caller queues them.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Who an object is (upstream `objectReference`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace, empty for cluster objects (for a virtual node: its first dependent's).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// One object as a watch delivered it.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Who it is.
    pub identity: Identity,
    /// Its ownerReferences.
    pub owners: Vec<OwnerReference>,
    /// It has a deletionTimestamp.
    pub being_deleted: bool,
    /// Being deleted in the foreground.
    pub deleting_dependents: bool,
    /// Being deleted with the `orphan` finalizer.
    pub orphaning: bool,
}

/// A node of the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Who it is.
    pub identity: Identity,
    /// Its ownerReferences.
    pub owners: Vec<OwnerReference>,
    /// UIDs of the objects whose ownerReferences name it.
    pub dependents: BTreeSet<String>,
    /// Never seen through a watch: made up from a dependent's reference.
    pub virtual_: bool,
    /// Has a deletionTimestamp.
    pub being_deleted: bool,
    /// Being deleted in the foreground.
    pub deleting_dependents: bool,
    /// Being deleted with the `orphan` finalizer.
    pub orphaning: bool,
}

/// What a change asks to be looked at.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// UIDs for `attemptToDelete`.
    pub attempt_to_delete: Vec<String>,
    /// UIDs for `attemptToOrphan`.
    pub attempt_to_orphan: Vec<String>,
    /// Identities now known absent (for the absent-owner cache).
    pub absent: Vec<Identity>,
}

impl Work {
    fn delete(&mut self, uid: &str) {
        if !self.attempt_to_delete.iter().any(|u| u == uid) {
            self.attempt_to_delete.push(uid.to_string());
        }
    }
}

/// The graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
}

impl Graph {
    /// The node of `uid`.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The dependents of `uid` that exist as nodes.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.nodes
            .get(uid)
            .map(|n| n.dependents.iter().filter_map(|d| self.nodes.get(d)).collect())
            .unwrap_or_default()
    }

    /// upstream `addDependentToOwners`: make `dependent` a dependent of each of `owners`, creating and
    /// queueing virtual nodes for owners not seen yet.
    fn add_dependent_to_owners(&mut self, dependent: &Identity, owners: &[OwnerReference], work: &mut Work) {
        for o in owners {
            let owner = self.nodes.entry(o.uid.clone()).or_insert_with(|| {
                work.delete(&o.uid);
                Node {
                    identity: Identity {
                        api_version: o.api_version.clone(),
                        kind: o.kind.clone(),
                        namespace: dependent.namespace.clone(),
                        name: o.name.clone(),
                        uid: o.uid.clone(),
                    },
                    owners: Vec::new(),
                    dependents: BTreeSet::new(),
                    virtual_: true,
                    being_deleted: false,
                    deleting_dependents: false,
                    orphaning: false,
                }
            });
            if !owner.virtual_ && (owner.identity.kind != o.kind || owner.identity.name != o.name) {
                // The reference disagrees with the owner we saw: let attemptToDelete look at it.
                work.delete(&dependent.uid);
            }
            owner.dependents.insert(dependent.uid.clone());
        }
    }

    fn remove_dependent_from_owners(&mut self, dependent: &str, owners: &[OwnerReference]) {
        for o in owners {
            if let Some(owner) = self.nodes.get_mut(&o.uid) {
                owner.dependents.remove(dependent);
            }
            self.forget_virtual(&o.uid);
        }
    }

    /// upstream `processTransitions`: an object entering orphan deletion is queued for attemptToOrphan; one
    /// entering foreground deletion is queued with all its dependents for attemptToDelete.
    fn transitions(&self, was: Option<(bool, bool)>, uid: &str, work: &mut Work) {
        let Some(n) = self.nodes.get(uid) else { return };
        let (was_orphaning, was_deleting_dependents) = was.unwrap_or((false, false));
        if n.orphaning && !was_orphaning {
            work.attempt_to_orphan.push(uid.to_string());
        }
        if n.deleting_dependents && !was_deleting_dependents {
            for d in &n.dependents {
                work.delete(d);
            }
            work.delete(uid);
        }
    }

    /// An add or update from a watch.
    pub fn observe(&mut self, obj: Observed) -> Work {
        let mut work = Work::default();
        let uid = obj.identity.uid.clone();
        let Some(existing) = self.nodes.get(&uid).cloned() else {
            self.add_dependent_to_owners(&obj.identity, &obj.owners, &mut work);
            self.nodes.insert(
                uid.clone(),
                Node {
                    identity: obj.identity,
                    owners: obj.owners,
                    dependents: BTreeSet::new(),
                    virtual_: false,
                    being_deleted: obj.being_deleted,
                    deleting_dependents: obj.deleting_dependents,
                    orphaning: obj.orphaning,
                },
            );
            // Dependents may have arrived first (their owner was virtual until now).
            self.transitions(None, &uid, &mut work);
            return work;
        };
        if existing.virtual_ && existing.identity != obj.identity {
            // A virtual node is now seen: dependents that named it by other coordinates get a look.
            for d in &existing.dependents {
                let mismatch = self.nodes.get(d).is_some_and(|dep| {
                    dep.owners
                        .iter()
                        .any(|r| r.uid == uid && (r.kind != obj.identity.kind || r.name != obj.identity.name))
                        || (!obj.identity.namespace.is_empty()
                            && dep.identity.namespace != obj.identity.namespace)
                });
                if mismatch {
                    work.delete(d);
                }
            }
        }
        // ownerReference changes (upstream `referencesDiffs`).
        let added: Vec<OwnerReference> = obj
            .owners
            .iter()
            .filter(|r| !existing.owners.iter().any(|o| o.uid == r.uid))
            .cloned()
            .collect();
        let removed: Vec<OwnerReference> = existing
            .owners
            .iter()
            .filter(|o| !obj.owners.iter().any(|r| r.uid == o.uid))
            .cloned()
            .collect();
        self.add_dependent_to_owners(&obj.identity, &added, &mut work);
        self.remove_dependent_from_owners(&uid, &removed);
        // upstream `addUnblockedOwnersToDeleteQueue`: an owner waiting in the foreground for this object
        // looks again when the object stops blocking it.
        let unblocked = removed
            .iter()
            .filter(|o| o.block_owner_deletion == Some(true))
            .chain(existing.owners.iter().filter(|o| {
                o.block_owner_deletion == Some(true)
                    && obj
                        .owners
                        .iter()
                        .any(|r| r.uid == o.uid && r.block_owner_deletion != Some(true))
            }));
        for o in unblocked {
            if self.nodes.get(&o.uid).is_some_and(|n| n.deleting_dependents) {
                work.delete(&o.uid);
            }
        }
        let was = (existing.orphaning, existing.deleting_dependents);
        if let Some(n) = self.nodes.get_mut(&uid) {
            n.identity = obj.identity;
            n.owners = obj.owners;
            n.virtual_ = false;
            n.being_deleted = obj.being_deleted;
            n.deleting_dependents = obj.deleting_dependents;
            n.orphaning = obj.orphaning;
        }
        self.transitions(Some(was), &uid, &mut work);
        work
    }

    /// A delete from a watch, or (virtual) a live GET that found the object gone: the node goes, its
    /// dependents are looked at, and owners waiting in the foreground look again.
    pub fn remove(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else {
            return work;
        };
        self.remove_dependent_from_owners(uid, &node.owners);
        if !node.dependents.is_empty() {
            work.absent.push(node.identity.clone());
        }
        for d in &node.dependents {
            work.delete(d);
            // The dependents still name it: keep it as a virtual node until they no longer do, so a
            // recreated namesake is not taken for it.
        }
        if !node.dependents.is_empty() {
            self.nodes.insert(
                uid.to_string(),
                Node {
                    virtual_: true,
                    owners: Vec::new(),
                    being_deleted: false,
                    deleting_dependents: false,
                    orphaning: false,
                    ..node.clone()
                },
            );
        }
        for o in &node.owners {
            if self.nodes.get(&o.uid).is_some_and(|n| n.deleting_dependents) {
                work.delete(&o.uid);
            }
        }
        work
    }

    /// Drop a virtual node that no dependent names any more.
    pub fn forget_virtual(&mut self, uid: &str) {
        if self
            .nodes
            .get(uid)
            .is_some_and(|n| n.virtual_ && n.dependents.is_empty())
        {
            self.nodes.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, name: &str, uid: &str) -> Identity {
        Identity {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn owner(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: format!("cm-{uid}"),
            uid: uid.into(),
            controller: None,
            block_owner_deletion: block.then_some(true),
        }
    }

    fn obj(uid: &str, owners: Vec<OwnerReference>) -> Observed {
        Observed {
            identity: id("ConfigMap", &format!("cm-{uid}"), uid),
            owners,
            being_deleted: false,
            deleting_dependents: false,
            orphaning: false,
        }
    }

    #[test]
    fn an_unseen_owner_becomes_a_queued_virtual_node_until_it_is_seen() {
        let mut g = Graph::default();
        let w = g.observe(obj("d", vec![owner("o", false)]));
        assert_eq!(w.attempt_to_delete, vec!["o".to_string()]);
        let o = g.get("o").unwrap();
        assert!(o.virtual_);
        assert_eq!(o.identity.namespace, "ns");
        assert!(o.dependents.contains("d"));
        let w = g.observe(obj("o", vec![]));
        assert_eq!(w, Work::default());
        assert!(!g.get("o").unwrap().virtual_);
        assert!(g.get("o").unwrap().dependents.contains("d"), "dependents kept");
    }

    #[test]
    fn a_deleted_owner_queues_its_dependents_and_stays_virtual_while_named() {
        let mut g = Graph::default();
        g.observe(obj("o", vec![]));
        g.observe(obj("d1", vec![owner("o", true)]));
        g.observe(obj("d2", vec![owner("o", false)]));
        let w = g.remove("o");
        assert_eq!(w.attempt_to_delete, vec!["d1".to_string(), "d2".to_string()]);
        assert_eq!(w.absent.len(), 1);
        assert!(g.get("o").unwrap().virtual_);
        g.remove("d1");
        assert!(g.get("o").is_some());
        g.remove("d2");
        assert!(
            g.get("o").is_none(),
            "a virtual node goes with its last dependent"
        );
    }

    #[test]
    fn entering_foreground_deletion_queues_the_owner_and_its_dependents() {
        let mut g = Graph::default();
        g.observe(obj("o", vec![]));
        g.observe(obj("d", vec![owner("o", true)]));
        let mut dying = obj("o", vec![]);
        dying.being_deleted = true;
        dying.deleting_dependents = true;
        let w = g.observe(dying.clone());
        assert_eq!(w.attempt_to_delete, vec!["d".to_string(), "o".to_string()]);
        // Seen again unchanged: nothing new.
        assert_eq!(g.observe(dying), Work::default());
        // The dependent goes: the waiting owner looks again.
        let w = g.remove("d");
        assert_eq!(w.attempt_to_delete, vec!["o".to_string()]);
    }

    #[test]
    fn entering_orphan_deletion_queues_for_orphaning_once() {
        let mut g = Graph::default();
        g.observe(obj("o", vec![]));
        let mut dying = obj("o", vec![]);
        dying.being_deleted = true;
        dying.orphaning = true;
        assert_eq!(g.observe(dying.clone()).attempt_to_orphan, vec!["o".to_string()]);
        assert!(g.observe(dying).attempt_to_orphan.is_empty());
        // Already orphaning when first seen.
        let mut g = Graph::default();
        let mut seen = obj("x", vec![]);
        seen.being_deleted = true;
        seen.orphaning = true;
        assert_eq!(g.observe(seen).attempt_to_orphan, vec!["x".to_string()]);
    }

    #[test]
    fn a_dependent_that_stops_blocking_wakes_its_waiting_owner() {
        let mut g = Graph::default();
        let mut o = obj("o", vec![]);
        o.being_deleted = true;
        o.deleting_dependents = true;
        g.observe(o);
        g.observe(obj("d", vec![owner("o", true)]));
        let w = g.observe(obj("d", vec![owner("o", false)]));
        assert_eq!(w.attempt_to_delete, vec!["o".to_string()]);
        // The reference is dropped altogether.
        g.observe(obj("e", vec![owner("o", true)]));
        let w = g.observe(obj("e", vec![]));
        assert_eq!(w.attempt_to_delete, vec!["o".to_string()]);
        assert!(!g.get("o").unwrap().dependents.contains("e"));
    }

    #[test]
    fn owner_reference_changes_move_the_dependent() {
        let mut g = Graph::default();
        g.observe(obj("a", vec![]));
        g.observe(obj("d", vec![owner("a", false)]));
        let w = g.observe(obj("d", vec![owner("b", false)]));
        assert_eq!(w.attempt_to_delete, vec!["b".to_string()], "b is virtual");
        assert!(!g.get("a").unwrap().dependents.contains("d"));
        assert!(g.get("b").unwrap().dependents.contains("d"));
        assert_eq!(g.dependents("b").len(), 1);
    }
}
