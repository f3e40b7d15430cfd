//! `sync.go` as pure decisions: which ReplicaSet is new and what must be written about it
//! (`getNewReplicaSet`), proportional scaling (`scale`), one ReplicaSet's scaled copy (`scaleReplicaSet`),
//! the revision-history cleanup (`cleanupDeployment`) and the status (`calculateStatus`).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::util::{self, replicas};
use crate::controller_ref;
use crate::hash;
use crate::replicaset::{spec_replicas, status};

/// What `getNewReplicaSet` has to do.
#[derive(Debug, Clone)]
pub enum NewRs {
    /// There is none and creating one is not allowed now.
    Missing,
    /// The new ReplicaSet's annotations or minReadySeconds must be updated first (the Deployment side
    /// follows on the next pass).
    Update(ReplicaSet),
    /// The new ReplicaSet is up to date; `write` is the Deployment to write through `/status` when its
    /// revision annotation or Progressing condition must follow.
    Found {
        /// The new ReplicaSet.
        rs: Arc<ReplicaSet>,
        /// The Deployment to write, if anything changed.
        write: Option<Deployment>,
    },
    /// Create this ReplicaSet.
    Create {
        /// The ReplicaSet to create.
        rs: ReplicaSet,
        /// Its revision (the Deployment gets it once it exists).
        revision: i64,
    },
}

/// `getNewReplicaSet`'s decision. `old` are all the old ReplicaSets.
pub fn plan_new_rs(
    d: &Deployment,
    rss: &[Arc<ReplicaSet>],
    old: &[Arc<ReplicaSet>],
    create: bool,
    now: Timestamp,
) -> NewRs {
    let new_revision = util::max_revision(old) + 1;
    if let Some(existing) = util::find_new(d, rss) {
        let mut copy = (*existing).clone();
        let annotations_changed = util::set_new_rs_annotations(d, &mut copy, new_revision, true);
        let min_ready = util::min_ready_seconds(d);
        let rs_min_ready = copy.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
        if annotations_changed || rs_min_ready != min_ready {
            let spec = copy.spec.get_or_insert_with(ReplicaSetSpec::default);
            spec.min_ready_seconds = (min_ready != 0).then_some(min_ready);
            return NewRs::Update(copy);
        }
        let mut dd = d.clone();
        let revision = copy
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(util::REVISION))
            .cloned()
            .unwrap_or_default();
        let mut write = util::set_deployment_revision(&mut dd, &revision);
        let st = dd.status.get_or_insert_with(DeploymentStatus::default);
        if util::progress_deadline(d).is_some() && util::condition(st, "Progressing").is_none() {
            let msg = format!(
                "Found new replica set {:?}",
                existing.metadata.name.as_deref().unwrap_or("")
            );
            util::set_condition(
                st,
                util::new_condition("Progressing", "True", util::FOUND_NEW_RS, msg, now),
            );
            write = true;
        }
        return NewRs::Found {
            rs: existing,
            write: write.then_some(dd),
        };
    }
    if !create {
        return NewRs::Missing;
    }
    NewRs::Create {
        rs: new_replica_set(d, old, new_revision),
        revision: new_revision,
    }
}

/// The ReplicaSet a Deployment creates for its current template: `<name>-<hash>`, the hash label on the
/// template, its labels and the selector, the controller reference, minReadySeconds, the copied
/// annotations with revision and replicas annotations, and `NewRSNewReplicas` replicas.
pub fn new_replica_set(d: &Deployment, old: &[Arc<ReplicaSet>], revision: i64) -> ReplicaSet {
    let spec = d.spec.clone().unwrap_or_default();
    let collision = util::dstatus(d).collision_count;
    let hash = hash::compute_hash(&spec.template, collision);
    let mut template = spec.template.clone();
    let tm = template.metadata.get_or_insert_with(ObjectMeta::default);
    tm.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(util::POD_TEMPLATE_HASH.to_string(), hash.clone());
    let labels = tm.labels.clone();
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(util::POD_TEMPLATE_HASH.to_string(), hash.clone());
    let name = d.metadata.name.clone().unwrap_or_default();
    let min_ready = util::min_ready_seconds(d);
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{hash}")),
            namespace: d.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref::controller_ref(
                "apps/v1",
                "Deployment",
                &name,
                d.metadata.uid.as_deref().unwrap_or(""),
            )]),
            labels,
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: (min_ready != 0).then_some(min_ready),
            selector,
            template: Some(template),
        }),
        status: None,
    };
    let mut all: Vec<Arc<ReplicaSet>> = old.to_vec();
    all.push(Arc::new(rs.clone()));
    let n = util::new_rs_new_replicas(d, &all, &rs).unwrap_or(0);
    rs.spec.as_mut().expect("set above").replicas = Some(n);
    util::set_new_rs_annotations(d, &mut rs, revision, false);
    rs
}

/// The Deployment to write after its new ReplicaSet was created (or found already there): the revision
/// annotation and, for a fresh one with a deadline, `NewReplicaSetCreated`. `None` when nothing changed.
pub fn after_create(
    d: &Deployment,
    rs_name: &str,
    revision: i64,
    already_existed: bool,
    now: Timestamp,
) -> Option<Deployment> {
    let mut dd = d.clone();
    let mut changed = util::set_deployment_revision(&mut dd, &revision.to_string());
    if !already_existed && util::progress_deadline(d).is_some() {
        let st = dd.status.get_or_insert_with(DeploymentStatus::default);
        util::set_condition(
            st,
            util::new_condition(
                "Progressing",
                "True",
                util::NEW_REPLICA_SET,
                format!("Created new replica set {rs_name:?}"),
                now,
            ),
        );
        changed = true;
    }
    changed.then_some(dd)
}

/// A hash collision: the Deployment with `collisionCount` one higher (from 0), to write so the next try
/// computes another name.
pub fn with_collision(d: &Deployment) -> Deployment {
    let mut dd = d.clone();
    let st = dd.status.get_or_insert_with(DeploymentStatus::default);
    st.collision_count = Some(st.collision_count.unwrap_or(0) + 1);
    dd
}

/// The message of a failed creation, and the Deployment with `Progressing=False ReplicaSetCreateError` to
/// write when it has a deadline.
pub fn create_failed(
    d: &Deployment,
    rs_name: &str,
    err: &str,
    now: Timestamp,
) -> (String, Option<Deployment>) {
    let msg = format!("Failed to create new replica set {rs_name:?}: {err}");
    if util::progress_deadline(d).is_none() {
        return (msg, None);
    }
    let mut dd = d.clone();
    let st = dd.status.get_or_insert_with(DeploymentStatus::default);
    util::set_condition(
        st,
        util::new_condition("Progressing", "False", util::FAILED_RS_CREATE, msg.clone(), now),
    );
    (msg, Some(dd))
}

/// The copy of `rs` to write to scale it to `to` (`scaleReplicaSet`): when the size or the replicas
/// annotations differ from the Deployment's. `None` when nothing needs writing.
pub fn scaled_rs(rs: &ReplicaSet, to: i32, d: &Deployment) -> Option<ReplicaSet> {
    let desired = replicas(d);
    let max = desired + util::max_surge(d);
    let size_differs = spec_replicas(rs) != to;
    if !size_differs && !util::replicas_annotations_need_update(rs, desired, max) {
        return None;
    }
    let mut copy = rs.clone();
    copy.spec.get_or_insert_with(ReplicaSetSpec::default).replicas = Some(to);
    util::set_replicas_annotations(&mut copy, desired, max);
    Some(copy)
}

/// The `ScalingReplicaSet` message (v1.31+ wording).
pub fn scaling_message(op: &str, rs: &str, from: i32, to: i32) -> String {
    format!("Scaled {op} replica set {rs} from {from} to {to}")
}

/// How one step of a scale is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `scaleReplicaSetAndRecordEvent`: nothing when the size is already right; the direction from the sizes.
    SizeOnly,
    /// `scaleReplicaSet` with this operation word: written when the size or the annotations differ.
    Always(&'static str),
}

/// One ReplicaSet to scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The ReplicaSet's name.
    pub name: String,
    /// Its new size.
    pub to: i32,
    /// How.
    pub via: Via,
}

/// `ReplicaSetsBySizeNewer` (scaling up: larger first, ties newest first) or `ReplicaSetsBySizeOlder`.
fn by_size(a: &ReplicaSet, b: &ReplicaSet, newer_first: bool) -> Ordering {
    spec_replicas(b).cmp(&spec_replicas(a)).then_with(|| {
        if newer_first {
            util::by_creation(b, a)
        } else {
            util::by_creation(a, b)
        }
    })
}

/// `FindActiveOrLatest`: the only active ReplicaSet; with none active, the new one or else the newest old
/// one; `None` when several are active.
pub fn active_or_latest(new: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>]) -> Option<Arc<ReplicaSet>> {
    if new.is_none() && old.is_empty() {
        return None;
    }
    let mut olds = old.to_vec();
    olds.sort_by(|a, b| util::by_creation(b, a));
    let mut all = olds.clone();
    all.extend(new.cloned());
    let active = util::active(&all);
    match active.len() {
        0 => new.cloned().or_else(|| olds.first().cloned()),
        1 => Some(active[0].clone()),
        _ => None,
    }
}

/// `getReplicaSetFraction`.
fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    if replicas(d) == 0 {
        return -spec_replicas(rs);
    }
    let deployment_replicas = replicas(d) + util::max_surge(d);
    let annotated = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(util::MAX_REPLICAS))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or_else(|| util::dstatus(d).replicas.unwrap_or(0));
    if annotated <= 0 {
        // Upstream divides by zero here (it "never happens"); no share is the safe answer.
        return 0;
    }
    let size = f64::from(spec_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
    size.round() as i32 - spec_replicas(rs)
}

/// `GetProportion`: this ReplicaSet's share of `to_add`, never past what is left to add.
fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let f = fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        f.min(allowed)
    } else {
        f.max(allowed)
    }
}

/// `scale`: what to scale on a scaling event or while paused (§2.5).
pub fn proportional(d: &Deployment, new: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>]) -> Vec<Step> {
    if let Some(only) = active_or_latest(new, old) {
        if spec_replicas(&only) == replicas(d) {
            return Vec::new();
        }
        return vec![Step {
            name: only.metadata.name.clone().unwrap_or_default(),
            to: replicas(d),
            via: Via::SizeOnly,
        }];
    }
    if util::is_saturated(d, new.map(|r| r.as_ref())) {
        return util::active(old)
            .iter()
            .map(|rs| Step {
                name: rs.metadata.name.clone().unwrap_or_default(),
                to: 0,
                via: Via::SizeOnly,
            })
            .collect();
    }
    if !util::is_rolling(d) {
        return Vec::new();
    }
    let mut all: Vec<Arc<ReplicaSet>> = old.to_vec();
    all.extend(new.cloned());
    let mut all = util::active(&all);
    let current = util::sum_spec(&all);
    let allowed = if replicas(d) > 0 {
        replicas(d) + util::max_surge(d)
    } else {
        0
    };
    let to_add = allowed - current;
    let op = match to_add.cmp(&0) {
        Ordering::Greater => {
            all.sort_by(|a, b| by_size(a, b, true));
            "up"
        }
        Ordering::Less => {
            all.sort_by(|a, b| by_size(a, b, false));
            "down"
        }
        Ordering::Equal => "",
    };
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
    for rs in &all {
        if to_add != 0 {
            let p = proportion(rs, d, to_add, added);
            sizes.push(spec_replicas(rs) + p);
            added += p;
        } else {
            sizes.push(spec_replicas(rs));
        }
    }
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        *first = (*first + to_add - added).max(0);
    }
    all.iter()
        .zip(sizes)
        .map(|(rs, to)| Step {
            name: rs.metadata.name.clone().unwrap_or_default(),
            to,
            via: Via::Always(op),
        })
        .collect()
}

/// `cleanupDeployment`: the old ReplicaSets to delete beyond revisionHistoryLimit, oldest revision first,
/// skipping any that still has or wants replicas, has an unobserved generation or is being deleted.
pub fn cleanup(d: &Deployment, old: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    let Some(limit) = util::revision_history_limit(d) else {
        return Vec::new();
    };
    let mut alive: Vec<Arc<ReplicaSet>> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let diff = alive.len() as i64 - i64::from(limit);
    if diff <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| util::by_revision(a, b));
    alive
        .into_iter()
        .take(diff as usize)
        .filter(|rs| {
            let st = status(rs);
            st.replicas == 0
                && spec_replicas(rs) == 0
                && rs.metadata.generation.unwrap_or(0) <= st.observed_generation.unwrap_or(0)
                && rs.metadata.deletion_timestamp.is_none()
        })
        .collect()
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// `calculateStatus`: counters over all ReplicaSets (`unavailableReplicas` from their spec), conditions
/// copied, and `Available` set from `availableReplicas ≥ replicas − maxUnavailable`.
pub fn calculate_status(
    all: &[Arc<ReplicaSet>],
    new: Option<&Arc<ReplicaSet>>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let available = util::sum_available(all);
    let unavailable = (util::sum_spec(all) - available).max(0);
    let old = util::dstatus(d);
    let generation = d.metadata.generation.unwrap_or(0);
    let mut st = DeploymentStatus {
        observed_generation: (generation != 0).then_some(generation),
        replicas: nonzero(util::sum_actual(all)),
        updated_replicas: nonzero(new.map(|rs| status(rs).replicas).unwrap_or(0)),
        ready_replicas: nonzero(util::sum_ready(all)),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero(unavailable),
        collision_count: old.collision_count,
        conditions: old.conditions.clone().filter(|c| !c.is_empty()),
        terminating_replicas: None,
    };
    let c = if available >= replicas(d) - util::max_unavailable(d) {
        util::new_condition(
            "Available",
            "True",
            util::MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        util::new_condition(
            "Available",
            "False",
            util::MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    util::set_condition(&mut st, c);
    st
}

/// `isScalingEvent`: an active ReplicaSet whose desired-replicas annotation differs from spec.replicas.
pub fn is_scaling_event(d: &Deployment, new: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>]) -> bool {
    let mut all: Vec<Arc<ReplicaSet>> = old.to_vec();
    all.extend(new.cloned());
    util::active(&all)
        .iter()
        .filter_map(|rs| util::desired_replicas_annotation(rs))
        .any(|desired| desired != replicas(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deployment, rs};
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_new_replica_set_is_named_labelled_and_annotated_from_the_template_hash() {
        let d = deployment(json!({"spec": {"minReadySeconds": 4}}));
        let NewRs::Create { rs, revision } = plan_new_rs(&d, &[], &[], true, now()) else {
            panic!("expected a create")
        };
        assert_eq!(revision, 1);
        let name = rs.metadata.name.clone().unwrap();
        let hash = name.strip_prefix("web-").unwrap();
        assert!(hash.chars().all(|c| "456789bcdf".contains(c)), "{hash}");
        let labels = rs.metadata.labels.clone().unwrap();
        assert_eq!(labels["pod-template-hash"], hash);
        assert_eq!(labels["app"], "web");
        let spec = rs.spec.clone().unwrap();
        assert_eq!(
            spec.selector.match_labels.unwrap(),
            [
                ("app".to_string(), "web".to_string()),
                ("pod-template-hash".to_string(), hash.to_string())
            ]
            .into()
        );
        assert_eq!(
            spec.replicas,
            Some(3),
            "nothing else exists: up to spec (surge allows 4)"
        );
        assert_eq!(spec.min_ready_seconds, Some(4));
        let owner = &rs.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("Deployment", "web", Some(true), Some(true))
        );
        let a = rs.metadata.annotations.clone().unwrap();
        assert_eq!(
            a,
            [
                (util::DESIRED_REPLICAS.to_string(), "3".to_string()),
                (util::MAX_REPLICAS.to_string(), "4".to_string()),
                (util::REVISION.to_string(), "1".to_string()),
            ]
            .into()
        );
        // Another collision count gives another name.
        let mut dc = d.clone();
        dc.status = Some(DeploymentStatus {
            collision_count: Some(1),
            ..Default::default()
        });
        assert_ne!(new_replica_set(&dc, &[], 1).metadata.name.unwrap(), name);
        assert!(matches!(plan_new_rs(&d, &[], &[], false, now()), NewRs::Missing));
    }

    #[test]
    fn an_existing_new_replica_set_is_updated_first_then_the_deployment_follows() {
        let d = deployment(json!({"metadata": {"annotations": {"kubernetes.io/change-cause": "bump"}}}));
        let old = Arc::new(rs(
            "web-old",
            0,
            json!({"metadata": {"annotations": {util::REVISION: "4"}}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:0"}]}}}}),
        ));
        let new = Arc::new(rs(
            "web-new",
            3,
            json!({"metadata": {"annotations": {util::REVISION: "2"}}}),
        ));
        let all = vec![old.clone(), new.clone()];
        let NewRs::Update(u) = plan_new_rs(&d, &all, std::slice::from_ref(&old), true, now()) else {
            panic!("expected an update")
        };
        let a = u.metadata.annotations.clone().unwrap();
        assert_eq!(a[util::REVISION], "5");
        assert_eq!(a[util::REVISION_HISTORY], "2");
        assert_eq!(a["kubernetes.io/change-cause"], "bump");
        let all = vec![old.clone(), Arc::new(u)];
        let NewRs::Found { rs, write } = plan_new_rs(&d, &all, &[old], true, now()) else {
            panic!("expected found")
        };
        assert_eq!(rs.metadata.name.as_deref(), Some("web-new"));
        let w = write.expect("the deployment's revision and FoundNewReplicaSet");
        assert_eq!(w.metadata.annotations.as_ref().unwrap()[util::REVISION], "5");
        let c = util::condition(w.status.as_ref().unwrap(), "Progressing").unwrap();
        assert_eq!(c.reason.as_deref(), Some(util::FOUND_NEW_RS));
        assert_eq!(c.message.as_deref(), Some("Found new replica set \"web-new\""));
    }

    #[test]
    fn after_create_sets_the_revision_and_new_replica_set_created() {
        let d = deployment(json!({}));
        let w = after_create(&d, "web-5d", 1, false, now()).unwrap();
        let c = util::condition(w.status.as_ref().unwrap(), "Progressing").unwrap();
        assert_eq!(c.reason.as_deref(), Some(util::NEW_REPLICA_SET));
        assert_eq!(c.message.as_deref(), Some("Created new replica set \"web-5d\""));
        let (msg, w) = create_failed(&d, "web-5d", "quota", now());
        assert_eq!(msg, "Failed to create new replica set \"web-5d\": quota");
        let c = util::condition(w.unwrap().status.as_ref().unwrap(), "Progressing")
            .cloned()
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(util::FAILED_RS_CREATE))
        );
        assert_eq!(with_collision(&d).status.unwrap().collision_count, Some(1));
    }

    #[test]
    fn scaling_one_replica_set_writes_size_or_stale_annotations() {
        let d = deployment(json!({"spec": {"replicas": 5}}));
        let r = rs(
            "web-a",
            3,
            json!({"metadata": {"annotations": {util::DESIRED_REPLICAS: "3", util::MAX_REPLICAS: "4"}}}),
        );
        let s = scaled_rs(&r, 5, &d).unwrap();
        assert_eq!(s.spec.as_ref().unwrap().replicas, Some(5));
        let a = s.metadata.annotations.clone().unwrap();
        assert_eq!(
            (a[util::DESIRED_REPLICAS].as_str(), a[util::MAX_REPLICAS].as_str()),
            ("5", "7")
        );
        assert!(scaled_rs(&s, 5, &d).is_none());
        assert!(scaled_rs(&r, 3, &d).is_some(), "annotations alone");
        assert_eq!(
            scaling_message("up", "web-a", 3, 5),
            "Scaled up replica set web-a from 3 to 5"
        );
    }

    #[test]
    fn a_single_active_replica_set_takes_the_whole_scale() {
        let d = deployment(json!({"spec": {"replicas": 5}}));
        let new = Arc::new(rs("web-new", 3, json!({})));
        let old = Arc::new(rs("web-old", 0, json!({})));
        assert_eq!(
            proportional(&d, Some(&new), std::slice::from_ref(&old)),
            vec![Step {
                name: "web-new".into(),
                to: 5,
                via: Via::SizeOnly
            }]
        );
        // None active: the newest old one when there is no new one.
        let older = Arc::new(rs(
            "web-older",
            0,
            json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}}),
        ));
        let newer = Arc::new(rs(
            "web-newer",
            0,
            json!({"metadata": {"creationTimestamp": "2025-06-01T00:00:00Z"}}),
        ));
        let steps = proportional(&d, None, &[older, newer]);
        assert_eq!(steps[0].name, "web-newer");
    }

    #[test]
    fn a_saturated_new_replica_set_scales_the_old_ones_to_zero() {
        let d = deployment(json!({}));
        let new = Arc::new(rs(
            "web-new",
            3,
            json!({"metadata": {"annotations": {util::DESIRED_REPLICAS: "3"}}, "status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        let old = Arc::new(rs("web-old", 1, json!({})));
        let steps = proportional(&d, Some(&new), &[old]);
        assert_eq!(
            steps,
            vec![Step {
                name: "web-old".into(),
                to: 0,
                via: Via::SizeOnly
            }]
        );
    }

    #[test]
    fn proportional_scaling_follows_the_max_replicas_annotation() {
        // The upstream unit case: 10 replicas mid-rollout (new 6, old 4, max-replicas 13 → 10+3), scaled to
        // 20 (surge 5): allowed 25, to add 15; old 4*25/13 = 7.69 → 8 (+4), new gets the rest (+11).
        let d = deployment(
            json!({"spec": {"replicas": 20, "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}}),
        );
        let ann =
            json!({"metadata": {"annotations": {util::MAX_REPLICAS: "13", util::DESIRED_REPLICAS: "10"}}});
        let mut new_v = ann.clone();
        new_v["metadata"]["creationTimestamp"] = json!("2025-06-01T00:00:00Z");
        let mut old_v = ann.clone();
        old_v["metadata"]["creationTimestamp"] = json!("2025-01-01T00:00:00Z");
        let new = Arc::new(rs("web-new", 6, new_v));
        let old = Arc::new(rs("web-old", 4, old_v));
        let steps = proportional(&d, Some(&new), &[old]);
        let sizes: BTreeMap<String, i32> = steps.iter().map(|s| (s.name.clone(), s.to)).collect();
        assert_eq!(sizes["web-old"], 8);
        assert_eq!(sizes["web-new"], 17);
        assert_eq!(sizes.values().sum::<i32>(), 25);
        assert!(steps.iter().all(|s| s.via == Via::Always("up")));
        // Scaling to 0 empties both.
        let z = deployment(json!({"spec": {"replicas": 0}}));
        let steps = proportional(&z, Some(&new), &[Arc::new(rs("web-old", 4, ann))]);
        assert!(steps.iter().all(|s| s.to == 0), "{steps:?}");
        assert!(steps.iter().all(|s| s.via == Via::Always("down")));
    }

    #[test]
    fn cleanup_keeps_the_limit_and_skips_busy_replica_sets() {
        let d = deployment(json!({"spec": {"revisionHistoryLimit": 1}}));
        let mk = |name: &str, rev: &str, replicas: i32| {
            Arc::new(rs(
                name,
                replicas,
                json!({"metadata": {"annotations": {util::REVISION: rev}}}),
            ))
        };
        let old = vec![mk("c", "3", 0), mk("a", "1", 0), mk("b", "2", 1)];
        let gone: Vec<_> = cleanup(&d, &old)
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(gone, ["a"], "b still has replicas; c is within the limit");
        let zero = deployment(json!({"spec": {"revisionHistoryLimit": 0}}));
        assert_eq!(cleanup(&zero, &old).len(), 2);
        let keep_all = deployment(json!({"spec": {"revisionHistoryLimit": i32::MAX}}));
        assert!(cleanup(&keep_all, &old).is_empty());
    }

    #[test]
    fn status_sums_the_replica_sets_and_sets_available() {
        let d = deployment(json!({}));
        let new = Arc::new(rs(
            "web-new",
            3,
            json!({"status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3}}),
        ));
        let st = calculate_status(std::slice::from_ref(&new), Some(&new), &d, now());
        assert_eq!(
            (
                st.replicas,
                st.updated_replicas,
                st.ready_replicas,
                st.available_replicas,
                st.unavailable_replicas
            ),
            (Some(3), Some(3), Some(3), Some(3), None)
        );
        assert_eq!(st.observed_generation, Some(1));
        let c = util::condition(&st, "Available").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some(util::MIN_AVAILABLE))
        );
        let bad = Arc::new(rs("web-bad", 1, json!({"status": {"replicas": 1}})));
        let st = calculate_status(
            std::slice::from_ref(&bad),
            Some(&bad),
            &deployment(json!({"spec": {"replicas": 1}})),
            now(),
        );
        assert_eq!(st.unavailable_replicas, Some(1));
        let c = util::condition(&st, "Available").unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("Deployment does not have minimum availability.")
        );
    }

    #[test]
    fn a_scaling_event_is_an_active_replica_set_with_another_desired_count() {
        let d = deployment(json!({"spec": {"replicas": 5}}));
        let r = |n: i32, desired: &str| {
            Arc::new(rs(
                "x",
                n,
                json!({"metadata": {"annotations": {util::DESIRED_REPLICAS: desired}}}),
            ))
        };
        assert!(is_scaling_event(&d, Some(&r(3, "3")), &[]));
        assert!(!is_scaling_event(&d, Some(&r(3, "5")), &[]));
        assert!(
            !is_scaling_event(&d, Some(&r(0, "3")), &[]),
            "inactive ones do not count"
        );
        assert!(!is_scaling_event(&d, Some(&Arc::new(rs("x", 3, json!({})))), &[]));
    }
}
