//! The StatefulSet decision (`stateful_set_control.go`, v1.30+ `updateStatefulSet`), pure: from the set,
//! its pods and claims, and the current and update revisions, what to create, delete or fix, in which
//! order, and the status to write. [`plan`] returns groups of actions: the sync runs one group after the
//! other (the actions of a group at once, in slow-start batches) and stops at the first failure, which is
//! exactly upstream's `runForAll` (one action per group for OrderedReady, whose pass stops where upstream
//! returns).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use super::identity::{self, ordinal_of, pod_revision};
use crate::history;
use crate::podutil;

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the missing claims, then the pod. `blocked` says why it cannot be made (a claim being
    /// deleted): a `FailedCreate` event and an error.
    Create {
        /// The pod.
        pod: Box<Pod>,
        /// Its claims that do not exist yet.
        missing_claims: Vec<PersistentVolumeClaim>,
        /// The reason it must wait.
        blocked: Option<String>,
    },
    /// Delete a pod (a failed or finished one, a condemned one, or one to roll).
    Delete {
        /// Its name.
        name: String,
        /// Its UID (a precondition, so a namesake made since is not hit).
        uid: String,
    },
    /// Bring an existing pod in line: create its missing claims, reset its identity labels, fix its claims'
    /// owner references for the retention policy.
    Fix {
        /// The pod.
        pod_name: String,
        /// Claims to create.
        missing_claims: Vec<PersistentVolumeClaim>,
        /// The pod's labels with the identity restored, when they drifted.
        labels: Option<BTreeMap<String, String>>,
        /// Claims whose ownerReferences must become these.
        claim_refs: Vec<(String, Vec<OwnerReference>)>,
        /// Whether this counts as updating the pod (`update Pod …` event); creating claims alone does not.
        pod_update: bool,
    },
}

/// The status fields the controller owns (`apps/v1 StatefulSetStatus` without conditions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `observedGeneration`.
    pub observed_generation: i64,
    /// `replicas`: pods that exist.
    pub replicas: i32,
    /// `readyReplicas`: Running and Ready.
    pub ready_replicas: i32,
    /// `availableReplicas`: ready for minReadySeconds.
    pub available_replicas: i32,
    /// `currentReplicas`: existing, not terminating, at the current revision.
    pub current_replicas: i32,
    /// `updatedReplicas`: existing, not terminating, at the update revision.
    pub updated_replicas: i32,
    /// `currentRevision`.
    pub current_revision: String,
    /// `updateRevision`.
    pub update_revision: String,
    /// `collisionCount`.
    pub collision_count: i32,
}

impl Status {
    /// The status as the set carries it now.
    pub fn of(set: &StatefulSet) -> Status {
        let s = set.status.clone().unwrap_or_default();
        Status {
            observed_generation: s.observed_generation.unwrap_or(0),
            replicas: s.replicas,
            ready_replicas: s.ready_replicas.unwrap_or(0),
            available_replicas: s.available_replicas.unwrap_or(0),
            current_replicas: s.current_replicas.unwrap_or(0),
            updated_replicas: s.updated_replicas.unwrap_or(0),
            current_revision: s.current_revision.unwrap_or_default(),
            update_revision: s.update_revision.unwrap_or_default(),
            collision_count: s.collision_count.unwrap_or(0),
        }
    }

    /// The body of a merge patch of `/status` (every field written, zeroes too).
    pub fn patch(&self) -> Value {
        json!({"status": {
            "observedGeneration": self.observed_generation,
            "replicas": self.replicas,
            "readyReplicas": self.ready_replicas,
            "availableReplicas": self.available_replicas,
            "currentReplicas": self.current_replicas,
            "updatedReplicas": self.updated_replicas,
            "currentRevision": self.current_revision,
            "updateRevision": self.update_revision,
            "collisionCount": self.collision_count,
        }})
    }
}

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Groups of actions, run in order.
    pub groups: Vec<Vec<Action>>,
    /// The status after this pass (`completeRollingUpdate` applied).
    pub status: Status,
    /// Whether it differs from the set's (`inconsistentStatus`).
    pub write_status: bool,
    /// Sync again after this long (minReadySeconds pending).
    pub requeue: Option<Duration>,
}

/// What [`plan`] looks at.
pub struct Inputs<'a> {
    /// The set.
    pub set: &'a StatefulSet,
    /// Its pods (claimed, members by name).
    pub pods: &'a [Arc<Pod>],
    /// The claims of its namespace, by name.
    pub claims: &'a HashMap<String, Arc<PersistentVolumeClaim>>,
    /// The current revision.
    pub current: &'a ControllerRevision,
    /// The update revision.
    pub update: &'a ControllerRevision,
    /// `status.collisionCount` after the revision was found.
    pub collision_count: i32,
    /// Now.
    pub now: Timestamp,
}

fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

fn strategy_type(set: &StatefulSet) -> &str {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// `rollingUpdate.partition`: `Some(0)` when the strategy was defaulted (type unset), `None` for a
/// RollingUpdate without `rollingUpdate` (the legacy form).
fn partition(set: &StatefulSet) -> Option<i32> {
    let u = set.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    match u {
        None => Some(0),
        Some(u) if u.type_.is_none() && u.rolling_update.is_none() => Some(0),
        Some(u) => u.rolling_update.as_ref().map(|r| r.partition.unwrap_or(0)),
    }
}

fn is_running_and_ready(pod: &Pod) -> bool {
    podutil::phase(pod) == "Running" && podutil::is_ready(pod)
}

fn is_running_and_available(pod: &Pod, min_ready: i32, now: Timestamp) -> bool {
    podutil::phase(pod) == "Running" && podutil::is_available(pod, min_ready, now)
}

fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !podutil::is_terminating(pod)
}

/// A replica slot: a pod that exists, or the one that would be created.
enum Slot<'a> {
    Existing(&'a Pod),
    Missing(Box<Pod>),
}

impl Slot<'_> {
    fn pod(&self) -> &Pod {
        match self {
            Slot::Existing(p) => p,
            Slot::Missing(p) => p,
        }
    }
}

/// `newVersionedStatefulSetPod`: below the partition (or, with the legacy strategy, below the current
/// replica count) a new pod gets the current revision, else the update revision.
fn versioned_pod(
    set: &StatefulSet,
    current: (&PodTemplateSpec, &str),
    update: (&PodTemplateSpec, &str),
    ordinal: i32,
) -> Pod {
    let start = identity::start_ordinal(set);
    let rolling = strategy_type(set) == "RollingUpdate";
    let current_replicas = set.status.as_ref().and_then(|s| s.current_replicas).unwrap_or(0);
    let use_current = match partition(set) {
        // Upstream's `A && B || C`: the partition applies whatever the type says.
        Some(p) => ordinal < start + p,
        None => rolling && ordinal < start + current_replicas,
    };
    let (t, r) = if use_current { current } else { update };
    identity::new_pod(set, t, ordinal, r)
}

/// `computeReplicaStatus` over the pods that exist.
fn count(status: &mut Status, pods: &[&Pod], min_ready: i32, now: Timestamp) {
    for p in pods {
        status.replicas += 1;
        if is_running_and_ready(p) {
            status.ready_replicas += 1;
            if is_running_and_available(p, min_ready, now) {
                status.available_replicas += 1;
            }
        }
        if !podutil::is_terminating(p) {
            let rev = pod_revision(p);
            if rev == status.current_revision {
                status.current_replicas += 1;
            }
            if rev == status.update_revision {
                status.updated_replicas += 1;
            }
        }
    }
}

/// The claims of a pod: those missing from `claims`, and the reason to wait if one is being deleted.
fn missing_claims(
    set: &StatefulSet,
    ordinal: i32,
    claims: &HashMap<String, Arc<PersistentVolumeClaim>>,
) -> (Vec<PersistentVolumeClaim>, Option<String>) {
    let mut missing = Vec::new();
    let mut blocked = None;
    for (_, c) in identity::claims_for(set, ordinal) {
        let name = c.metadata.name.clone().unwrap_or_default();
        match claims.get(&name) {
            None => missing.push(c),
            Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                blocked.get_or_insert(format!("pvc {name} is being deleted"));
            }
            Some(_) => {}
        }
    }
    (missing, blocked)
}

/// The claim ownerReferences the retention policy wants changed for `pod`.
fn claim_fixes(
    set: &StatefulSet,
    pod: &Pod,
    claims: &HashMap<String, Arc<PersistentVolumeClaim>>,
) -> Vec<(String, Vec<OwnerReference>)> {
    identity::claims_for(set, ordinal_of(pod))
        .into_iter()
        .filter_map(|(_, c)| {
            let name = c.metadata.name.unwrap_or_default();
            let existing = claims.get(&name)?;
            identity::claim_refs_for_policy(set, pod, existing).map(|refs| (name, refs))
        })
        .collect()
}

/// `processReplica`: the action for one replica, and whether an OrderedReady pass stops there.
fn process_replica(inp: &Inputs<'_>, slot: &Slot<'_>, monotonic: bool) -> (Option<Action>, bool) {
    let set = inp.set;
    let min_ready = min_ready_seconds(set);
    let pod = match slot {
        Slot::Missing(pod) => {
            let ordinal = ordinal_of(pod);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let (_, when_scaled) = identity::retention(set);
            if when_scaled {
                // `PodClaimIsStale`: a claim still owned by the previous pod of this name waits for the GC.
                let stale = identity::claims_for(set, ordinal).iter().any(|(_, c)| {
                    c.metadata
                        .name
                        .as_ref()
                        .and_then(|n| inp.claims.get(n))
                        .is_some_and(|existing| identity::claim_is_stale(existing, &name, ""))
                });
                if stale {
                    return (None, true);
                }
            }
            let (missing, blocked) = missing_claims(set, ordinal, inp.claims);
            let action = Action::Create {
                pod: pod.clone(),
                missing_claims: missing,
                blocked,
            };
            return (Some(action), monotonic);
        }
        Slot::Existing(p) => *p,
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    if podutil::is_terminal(pod) {
        // v1.30+: delete it; the replacement is made on a later sync, once it is gone.
        let action = pod.metadata.deletion_timestamp.is_none().then(|| Action::Delete {
            name,
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        });
        return (action, true);
    }
    let mut missing = Vec::new();
    if podutil::phase(pod) == "Pending" {
        missing = missing_claims(set, ordinal_of(pod), inp.claims).0;
    }
    let claims_only = |missing: Vec<PersistentVolumeClaim>| {
        (!missing.is_empty()).then(|| Action::Fix {
            pod_name: name.clone(),
            missing_claims: missing,
            labels: None,
            claim_refs: Vec::new(),
            pod_update: false,
        })
    };
    if monotonic
        && (podutil::is_terminating(pod)
            || !is_running_and_ready(pod)
            || !is_running_and_available(pod, min_ready, inp.now))
    {
        return (claims_only(missing), true);
    }
    let labels = (!identity::identity_matches(set, pod)).then(|| identity::identity_labels(pod));
    let claim_refs = claim_fixes(set, pod, inp.claims);
    if !identity::storage_matches(set, pod) {
        // Pod volumes cannot change after creation; upstream's update would fail the same way. The
        // claims the pod names are still made.
        for (_, c) in identity::claims_for(set, ordinal_of(pod)) {
            if c.metadata
                .name
                .as_ref()
                .is_some_and(|n| !inp.claims.contains_key(n))
                && !missing.iter().any(|m| m.metadata.name == c.metadata.name)
            {
                missing.push(c);
            }
        }
    }
    if labels.is_none() && claim_refs.is_empty() {
        return (claims_only(missing), false);
    }
    (
        Some(Action::Fix {
            pod_name: name,
            missing_claims: missing,
            labels,
            claim_refs,
            pod_update: true,
        }),
        false,
    )
}

/// `completeRollingUpdate`: a RollingUpdate whose every pod is updated and ready is complete.
fn complete_rolling_update(set: &StatefulSet, status: &mut Status) {
    if strategy_type(set) == "RollingUpdate"
        && status.updated_replicas == status.replicas
        && status.ready_replicas == status.replicas
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

/// `inconsistentStatus` (plus the collision count).
fn inconsistent(old: &Status, new: &Status) -> bool {
    new.observed_generation > old.observed_generation
        || new.replicas != old.replicas
        || new.current_replicas != old.current_replicas
        || new.ready_replicas != old.ready_replicas
        || new.updated_replicas != old.updated_replicas
        || new.current_revision != old.current_revision
        || new.available_replicas != old.available_replicas
        || new.update_revision != old.update_revision
        || new.collision_count != old.collision_count
}

/// The whole pass. See the module docs.
pub fn plan(inp: &Inputs<'_>) -> Plan {
    let set = inp.set;
    let start = identity::start_ordinal(set);
    let n = identity::replicas(set);
    let min_ready = min_ready_seconds(set);
    let set_template = set.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let current_t = history::template_of(inp.current).unwrap_or_else(|| set_template.clone());
    let update_t = history::template_of(inp.update).unwrap_or(set_template);
    let current_name = inp.current.metadata.name.clone().unwrap_or_default();
    let update_name = inp.update.metadata.name.clone().unwrap_or_default();

    let mut existing: Vec<Option<&Pod>> = vec![None; n as usize];
    let mut condemned: Vec<&Pod> = Vec::new();
    for p in inp.pods {
        let o = ordinal_of(p);
        if identity::in_ordinal_range(set, o) {
            existing[(o - start) as usize] = Some(p);
        } else if o >= 0 {
            condemned.push(p);
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(p)));
    let replicas: Vec<Slot<'_>> = existing
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Some(p) => Slot::Existing(p),
            None => Slot::Missing(Box::new(versioned_pod(
                set,
                (&current_t, &current_name),
                (&update_t, &update_name),
                start + i as i32,
            ))),
        })
        .collect();
    // `firstUnhealthyPod`: the lowest replica (a missing one counts), else the lowest condemned pod.
    let first_unhealthy: Option<String> = replicas
        .iter()
        .find(|s| match s {
            Slot::Missing(_) => true,
            Slot::Existing(p) => !is_healthy(p),
        })
        .map(Slot::pod)
        .or_else(|| condemned.iter().rev().find(|p| !is_healthy(p)).copied())
        .and_then(|p| p.metadata.name.clone());

    let mut status = Status {
        observed_generation: set.metadata.generation.unwrap_or(0),
        current_revision: current_name,
        update_revision: update_name.clone(),
        collision_count: inp.collision_count,
        ..Default::default()
    };
    let observed: Vec<&Pod> = replicas
        .iter()
        .filter_map(|s| match s {
            Slot::Existing(p) => Some(*p),
            Slot::Missing(_) => None,
        })
        .chain(condemned.iter().copied())
        .collect();
    count(&mut status, &observed, min_ready, inp.now);

    let groups = if set.metadata.deletion_timestamp.is_some() {
        Vec::new()
    } else {
        actions(
            inp,
            &replicas,
            &condemned,
            first_unhealthy.as_deref(),
            &mut status,
        )
    };

    complete_rolling_update(set, &mut status);
    let write_status = inconsistent(&Status::of(set), &status);
    let requeue =
        (min_ready > 0 && status.available_replicas != n).then(|| Duration::from_secs(min_ready as u64 + 1));
    Plan {
        groups,
        status,
        write_status,
        requeue,
    }
}

fn actions(
    inp: &Inputs<'_>,
    replicas: &[Slot<'_>],
    condemned: &[&Pod],
    first_unhealthy: Option<&str>,
    status: &mut Status,
) -> Vec<Vec<Action>> {
    let set = inp.set;
    let min_ready = min_ready_seconds(set);
    let monotonic = set.spec.as_ref().and_then(|s| s.pod_management_policy.as_deref()) != Some("Parallel");
    let mut groups: Vec<Vec<Action>> = Vec::new();
    // Adds a group of actions; for OrderedReady each action is a group of its own (run one by one).
    let push = |groups: &mut Vec<Vec<Action>>, actions: Vec<Action>| {
        if monotonic {
            groups.extend(actions.into_iter().map(|a| vec![a]));
        } else if !actions.is_empty() {
            groups.push(actions);
        }
    };

    // 1. Replicas in ordinal order.
    let mut batch = Vec::new();
    for slot in replicas {
        let (action, stop) = process_replica(inp, slot, monotonic);
        batch.extend(action);
        if stop && monotonic {
            push(&mut groups, batch);
            return groups;
        }
    }
    push(&mut groups, batch);

    // 2. Claims of condemned pods, for the retention policy.
    let fixes: Vec<Action> = condemned
        .iter()
        .filter_map(|p| {
            let refs = claim_fixes(set, p, inp.claims);
            (!refs.is_empty()).then(|| Action::Fix {
                pod_name: p.metadata.name.clone().unwrap_or_default(),
                missing_claims: Vec::new(),
                labels: None,
                claim_refs: refs,
                pod_update: false,
            })
        })
        .collect();
    push(&mut groups, fixes);

    // 3. Condemned pods, highest ordinal first.
    let mut batch = Vec::new();
    for p in condemned {
        let name = p.metadata.name.clone().unwrap_or_default();
        if podutil::is_terminating(p) {
            if monotonic {
                push(&mut groups, batch);
                return groups;
            }
            continue;
        }
        let first = first_unhealthy == Some(name.as_str());
        if monotonic
            && !first
            && (!is_running_and_ready(p) || !is_running_and_available(p, min_ready, inp.now))
        {
            push(&mut groups, batch);
            return groups;
        }
        batch.push(Action::Delete {
            name,
            uid: p.metadata.uid.clone().unwrap_or_default(),
        });
        if monotonic {
            push(&mut groups, batch);
            return groups;
        }
    }
    push(&mut groups, batch);

    // 4. OnDelete: pods change only when someone deletes them.
    if strategy_type(set) == "OnDelete" {
        return groups;
    }

    // 5. RollingUpdate: the highest pod not at the update revision, one at a time, down to the partition.
    let update_min = partition(set).unwrap_or(0).max(0) as usize;
    for slot in replicas.iter().skip(update_min).rev() {
        let pod = slot.pod();
        let existing = matches!(slot, Slot::Existing(_));
        if existing && pod_revision(pod) != status.update_revision && !podutil::is_terminating(pod) {
            groups.push(vec![Action::Delete {
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            }]);
            status.current_replicas -= 1;
            return groups;
        }
        if !existing || !is_healthy(pod) {
            return groups;
        }
    }
    groups
}

/// How the update revision is found (`getStatefulSetRevisions`).
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateRevision {
    /// The newest revision is equal: use it.
    Newest(usize),
    /// An older revision is equal (a rollback): give it the next revision number.
    Renumber(usize, i64),
    /// None is: create this one.
    Create(Box<ControllerRevision>),
}

/// The revision the set's template makes, as `newRevision` builds it (hash with the collision count).
pub fn revision_for(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let template = set.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let data = history::template_patch(&template);
    let hash = history::statefulset_hash(&data, Some(collision_count));
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(history::HASH_LABEL.into(), hash.clone());
    let name = history::revision_name(set.metadata.name.as_deref().unwrap_or(""), &hash);
    history::new_revision(
        &set.metadata,
        &identity::owner_ref(set),
        labels,
        data,
        revision,
        name,
    )
}

/// Which revision is the update revision, given the set's revisions sorted by number.
pub fn find_update_revision(
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
    collision_count: i32,
) -> UpdateRevision {
    let candidate = revision_for(set, history::next_revision(revisions), collision_count);
    let equal: Vec<usize> = revisions
        .iter()
        .enumerate()
        .filter(|(_, r)| history::equal_revision(r, &candidate))
        .map(|(i, _)| i)
        .collect();
    match equal.last() {
        Some(&i) if i + 1 == revisions.len() => UpdateRevision::Newest(i),
        Some(&i) => UpdateRevision::Renumber(i, candidate.revision),
        None => UpdateRevision::Create(Box::new(candidate)),
    }
}

#[cfg(test)]
mod tests;
