//! `pkg/controller/deployment/util` as pure functions: defaults, fenceposts, the annotations a Deployment
//! keeps on its ReplicaSets, template equality ignoring the hash, new/old ReplicaSets, counts, conditions.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, DeploymentStrategy, ReplicaSet,
    ReplicaSetCondition, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::replicaset::{spec_replicas, status};

/// `apps.DefaultDeploymentUniqueLabelKey`.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The rollout sequence number, on ReplicaSets and the Deployment.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a reused ReplicaSet served (comma list).
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` then.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// The extensions/v1beta1 rollback request.
pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// kubectl apply's annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// `maxRevHistoryLengthInChars`.
pub const MAX_REV_HISTORY_CHARS: usize = 2000;

/// Annotations never copied from a Deployment to its ReplicaSets (`annotationsToSkip`).
pub const ANNOTATIONS_TO_SKIP: &[&str] = &[
    LAST_APPLIED,
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    ROLLBACK_TO,
];

// Condition reasons (`deployment_util.go`).
/// Progressing: a ReplicaSet was scaled as part of the rollout.
pub const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
/// Progressing: the new ReplicaSet could not be created.
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
/// Progressing: a new ReplicaSet was created.
pub const NEW_REPLICA_SET: &str = "NewReplicaSetCreated";
/// Progressing: an existing ReplicaSet was found to be the new one.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// Progressing: the rollout is complete.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// Progressing: no progress within progressDeadlineSeconds.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// Progressing: paused.
pub const PAUSED: &str = "DeploymentPaused";
/// Progressing: resumed.
pub const RESUMED: &str = "DeploymentResumed";
/// Available: enough replicas available.
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available: not enough.
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// `math.MaxInt32`, which means "no deadline" / "keep everything".
const MAX_INT32: i32 = i32::MAX;

/// The Deployment with the apps/v1 defaults filled in where the API server left them out
/// (`SetDefaults_Deployment`): replicas 1, RollingUpdate 25%/25%, revisionHistoryLimit 10,
/// progressDeadlineSeconds 600. A server that defaults (as upstream does) makes this a no-op.
pub fn with_defaults(d: &Deployment) -> Deployment {
    let mut d = d.clone();
    let spec = d.spec.get_or_insert_with(DeploymentSpec::default);
    spec.replicas.get_or_insert(1);
    let strategy = spec.strategy.get_or_insert_with(DeploymentStrategy::default);
    let ty = strategy.type_.get_or_insert_with(|| "RollingUpdate".to_string());
    if ty == "RollingUpdate" {
        let ru = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDeployment::default);
        ru.max_unavailable
            .get_or_insert_with(|| IntOrString::String("25%".into()));
        ru.max_surge
            .get_or_insert_with(|| IntOrString::String("25%".into()));
    }
    spec.revision_history_limit.get_or_insert(10);
    spec.progress_deadline_seconds.get_or_insert(600);
    d
}

fn spec(d: &Deployment) -> &DeploymentSpec {
    static EMPTY: std::sync::OnceLock<DeploymentSpec> = std::sync::OnceLock::new();
    d.spec
        .as_ref()
        .unwrap_or_else(|| EMPTY.get_or_init(DeploymentSpec::default))
}

/// `spec.replicas` (1 when unset).
pub fn replicas(d: &Deployment) -> i32 {
    spec(d).replicas.unwrap_or(1)
}

/// The strategy type ("RollingUpdate" when unset).
pub fn strategy_type(d: &Deployment) -> &str {
    spec(d)
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

/// `IsRollingUpdate`.
pub fn is_rolling(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

/// `spec.paused`.
pub fn paused(d: &Deployment) -> bool {
    spec(d).paused.unwrap_or(false)
}

/// `spec.minReadySeconds`.
pub fn min_ready_seconds(d: &Deployment) -> i32 {
    spec(d).min_ready_seconds.unwrap_or(0)
}

/// `HasProgressDeadline`: set and not MaxInt32.
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    spec(d).progress_deadline_seconds.filter(|s| *s != MAX_INT32)
}

/// `HasRevisionHistoryLimit`: set and not MaxInt32.
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    spec(d).revision_history_limit.filter(|s| *s != MAX_INT32)
}

/// The Deployment's status (all zero when it has none).
pub fn dstatus(d: &Deployment) -> DeploymentStatus {
    d.status.clone().unwrap_or_default()
}

/// `intstr.GetScaledValueFromIntOrPercent`: an int as is; "N%" of `total`, rounded up or down. Anything
/// else is an error (validation rejects it; callers count it as 0, as upstream's fenceposts do).
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(|| {
                format!("invalid value for IntOrString: invalid type: string is not a percentage: {s}")
            })?;
            let x = pct as f64 * f64::from(total) / 100.0;
            Ok(if round_up { x.ceil() } else { x.floor() } as i32)
        }
    }
}

/// `ResolveFenceposts`: maxSurge rounded up, maxUnavailable rounded down; both 0 makes unavailable 1.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> (i32, i32) {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true).unwrap_or(0);
    let mut unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let ru = spec(d).strategy.as_ref().and_then(|s| s.rolling_update.as_ref());
    resolve_fenceposts(
        ru.and_then(|r| r.max_surge.as_ref()),
        ru.and_then(|r| r.max_unavailable.as_ref()),
        replicas(d),
    )
}

/// `MaxSurge`: 0 unless RollingUpdate.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `MaxUnavailable`: 0 unless RollingUpdate with replicas > 0; never more than replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

fn annotation<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `Revision`: the revision annotation as int64 (0 when absent, `None` when not a number).
pub fn revision(rs: &ReplicaSet) -> Option<i64> {
    match annotation(rs, REVISION) {
        None => Some(0),
        Some(v) => v.parse().ok(),
    }
}

/// `MaxRevision` (unparsable revisions are skipped).
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a Arc<ReplicaSet>>) -> i64 {
    rss.into_iter()
        .filter_map(|rs| revision(rs))
        .max()
        .unwrap_or(0)
        .max(0)
}

/// `LastRevision`: the second-highest revision.
pub fn last_revision<'a>(rss: impl IntoIterator<Item = &'a Arc<ReplicaSet>>) -> i64 {
    let (mut max, mut sec) = (0i64, 0i64);
    for v in rss.into_iter().filter_map(|rs| revision(rs)) {
        if v >= max {
            sec = max;
            max = v;
        } else if v > sec {
            sec = v;
        }
    }
    sec
}

/// `getIntFromAnnotation` (int32).
fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(rs, key).and_then(|v| v.parse().ok())
}

/// `GetDesiredReplicasAnnotation`.
pub fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    int_annotation(rs, DESIRED_REPLICAS)
}

/// `SetReplicasAnnotations`: true when it changed anything.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.to_string(), v);
            changed = true;
        }
    }
    changed
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    annotation(rs, DESIRED_REPLICAS) != Some(desired.to_string().as_str())
        || annotation(rs, MAX_REPLICAS) != Some(max.to_string().as_str())
}

fn skip_copy(key: &str) -> bool {
    ANNOTATIONS_TO_SKIP.contains(&key)
}

/// `copyDeploymentAnnotationsToReplicaSet`: true when it changed anything.
fn copy_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || a.get(k) == Some(v) {
            continue;
        }
        a.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, raise the revision to `new_revision`
/// (keeping the old one in the revision history, capped at 2000 characters), and on a ReplicaSet about to be
/// created (`exists` false) set the replicas annotations. True when it changed anything.
pub fn set_new_rs_annotations(d: &Deployment, rs: &mut ReplicaSet, new_revision: i64, exists: bool) -> bool {
    let mut changed = copy_annotations(d, rs);
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let old = a.get(REVISION).cloned();
    let old_int = match old.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            // Upstream gives up on an unparsable revision.
            Err(_) => return false,
        },
    };
    if old_int < new_revision {
        a.insert(REVISION.to_string(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = a.get(REVISION_HISTORY).cloned().unwrap_or_default();
            if history.is_empty() {
                a.insert(REVISION_HISTORY.to_string(), old);
            } else {
                let entries: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > MAX_REV_HISTORY_CHARS && start < entries.len() {
                    total -= entries[start].len() + 1;
                    start += 1;
                }
                if total <= MAX_REV_HISTORY_CHARS {
                    let mut kept: Vec<&str> = entries[start..].to_vec();
                    kept.push(&old);
                    a.insert(REVISION_HISTORY.to_string(), kept.join(","));
                }
            }
        }
    }
    if !exists && set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)) {
        changed = true;
    }
    changed
}

/// `SetDeploymentAnnotationsTo`: keep the Deployment's skipped annotations, take every other one from the
/// ReplicaSet rolled back to.
pub fn annotations_for_rollback(d: &Deployment, rs: &ReplicaSet) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| skip_copy(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !skip_copy(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Remove nulls, zero scalars (`false`, `0`, `""`) and empty arrays and objects, bottom up. Upstream compares
/// Go structs, where an omitted field and its zero value are the same thing and nil equals empty; the stored
/// JSON may carry either (a protobuf create fills in zero values that a JSON patch leaves out). The one
/// thing this loses is a pointer field set to its zero value against unset (`privileged: false` against
/// nothing), which no rollout turns on.
fn normalise(v: &mut Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !*b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => {
            for x in a.iter_mut() {
                normalise(x);
            }
            a.is_empty()
        }
        Value::Object(m) => {
            let empty: Vec<String> = m
                .iter_mut()
                .filter_map(|(k, x)| normalise(x).then(|| k.clone()))
                .collect();
            for k in empty {
                m.remove(&k);
            }
            m.is_empty()
        }
    }
}

fn comparable(t: &PodTemplateSpec) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(labels) = v.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    normalise(&mut v);
    v
}

/// `EqualIgnoreHash`: the templates are semantically equal apart from the `pod-template-hash` label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}

/// A ReplicaSet's template (empty when unset).
pub fn rs_template(rs: &ReplicaSet) -> PodTemplateSpec {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default()
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, ties by name.
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let t = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `ReplicaSetsByRevision`: revision ascending, ties (or unparsable) by creation.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    match (revision(a), revision(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        _ => by_creation(a, b),
    }
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's (ignoring the hash).
pub fn find_new(d: &Deployment, rss: &[Arc<ReplicaSet>]) -> Option<Arc<ReplicaSet>> {
    let mut sorted = rss.to_vec();
    sorted.sort_by(|a, b| by_creation(a, b));
    let template = &spec(d).template;
    sorted
        .into_iter()
        .find(|rs| equal_ignore_hash(&rs_template(rs), template))
}

/// `FindOldReplicaSets` (all of them): every ReplicaSet but the new one.
pub fn find_old(d: &Deployment, rss: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    let new_uid = find_new(d, rss).and_then(|rs| rs.metadata.uid.clone());
    rss.iter()
        .filter(|rs| new_uid.is_none() || rs.metadata.uid != new_uid)
        .cloned()
        .collect()
}

/// `FilterActiveReplicaSets`: spec.replicas > 0.
pub fn active(rss: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    rss.iter().filter(|rs| spec_replicas(rs) > 0).cloned().collect()
}

/// Σ spec.replicas.
pub fn sum_spec(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| spec_replicas(rs)).sum()
}

/// Σ status.replicas.
pub fn sum_actual(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| status(rs).replicas).sum()
}

/// Σ status.readyReplicas.
pub fn sum_ready(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| status(rs).ready_replicas.unwrap_or(0)).sum()
}

/// Σ status.availableReplicas.
pub fn sum_available(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter()
        .map(|rs| status(rs).available_replicas.unwrap_or(0))
        .sum()
}

/// `NewRSNewReplicas`: RollingUpdate scales the new ReplicaSet up as far as the surge allows (never past
/// spec.replicas); Recreate goes straight to spec.replicas.
pub fn new_rs_new_replicas(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new_rs: &ReplicaSet,
) -> Result<i32, String> {
    match strategy_type(d) {
        "RollingUpdate" => {
            let current = spec_replicas(new_rs);
            let max_total = replicas(d) + max_surge(d);
            let count = sum_spec(all);
            if count >= max_total {
                return Ok(current);
            }
            Ok(current + (max_total - count).min(replicas(d) - current))
        }
        "Recreate" => Ok(replicas(d)),
        other => Err(format!("deployment type {other} isn't supported")),
    }
}

/// `IsSaturated`: the new ReplicaSet has, wants and has available all of spec.replicas.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(desired) = desired_replicas_annotation(rs) else {
        return false;
    };
    let r = replicas(d);
    spec_replicas(rs) == r && desired == r && status(rs).available_replicas.unwrap_or(0) == r
}

/// `DeploymentComplete`.
pub fn complete(d: &Deployment, st: &DeploymentStatus) -> bool {
    let r = replicas(d);
    st.updated_replicas.unwrap_or(0) == r
        && st.replicas.unwrap_or(0) == r
        && st.available_replicas.unwrap_or(0) == r
        && st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: compared with the Deployment's current status, more updated, fewer old, more
/// ready or more available replicas.
pub fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = dstatus(d);
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: the Progressing condition in `new` is already ProgressDeadlineExceeded, or its
/// lastUpdateTime + deadline is before `now` (never after NewReplicaSetAvailable).
pub fn timed_out(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(c) = condition(new, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + SignedDuration::from_secs(i64::from(deadline)) < now),
    }
}

/// `GetDeploymentCondition`.
pub fn condition<'a>(st: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    st.conditions.iter().flatten().find(|c| c.type_ == type_)
}

/// `NewDeploymentCondition` at `now`.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.to_string()),
        message: Some(message),
    }
}

/// `SetDeploymentCondition`: same status and reason leaves the condition alone; otherwise it is replaced
/// (appended at the end), keeping lastTransitionTime when the status did not change.
pub fn set_condition(st: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(st, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(st, &c.type_);
    st.conditions.get_or_insert_with(Vec::new).push(c);
}

/// `RemoveDeploymentCondition` (no conditions left leaves the list empty, as Go's nil slice: omitted).
pub fn remove_condition(st: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = st.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
        if cs.is_empty() {
            st.conditions = None;
        }
    }
}

/// `ReplicaSetToDeploymentCondition`.
pub fn from_rs_condition(c: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        last_update_time: c.last_transition_time.clone(),
        last_transition_time: c.last_transition_time.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

/// `SetDeploymentRevision`: true when it changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let a = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if a.get(REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    a.insert(REVISION.to_string(), revision.to_string());
    true
}

/// `getRollbackTo`: the deprecated rollback annotation as a revision (ignored when not a number).
pub fn rollback_to(d: &Deployment) -> Option<i64> {
    let v = d.metadata.annotations.as_ref()?.get(ROLLBACK_TO)?;
    if v.is_empty() {
        return None;
    }
    v.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::deployment;
    use serde_json::json;

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let p = |s: &str| IntOrString::String(s.into());
        // (replicas, maxSurge, maxUnavailable) with 25%/25%: the reference's table.
        for (r, surge, unavail) in [(1, 1, 0), (3, 1, 0), (4, 1, 1), (10, 3, 2), (100, 25, 25)] {
            let got = resolve_fenceposts(Some(&p("25%")), Some(&p("25%")), r);
            // 1 replica: 25% → surge 1, unavailable 0 — not both zero, so it stays 0.
            assert_eq!(got, (surge, unavail), "replicas {r}");
        }
        assert_eq!(
            resolve_fenceposts(Some(&p("0%")), Some(&p("10%")), 3),
            (0, 1),
            "both 0 → unavailable 1"
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(2)), Some(&IntOrString::Int(0)), 3),
            (2, 0)
        );
        assert_eq!(
            resolve_fenceposts(Some(&p("nope")), None, 3),
            (0, 1),
            "bad values count as 0"
        );
        let d = deployment(
            json!({"spec": {"replicas": 2, "strategy": {"rollingUpdate": {"maxUnavailable": 5}}}}),
        );
        assert_eq!(max_unavailable(&d), 2, "clamped to replicas");
        let r = deployment(json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}));
        assert_eq!((max_surge(&r), max_unavailable(&r)), (0, 0));
        let z = deployment(json!({"spec": {"replicas": 0}}));
        assert_eq!(max_unavailable(&z), 0);
    }

    #[test]
    fn defaults_are_the_apps_v1_ones() {
        let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {
            "selector": {}, "template": {}}}))
        .unwrap();
        let d = with_defaults(&d);
        let s = d.spec.unwrap();
        assert_eq!(s.replicas, Some(1));
        assert_eq!(s.revision_history_limit, Some(10));
        assert_eq!(s.progress_deadline_seconds, Some(600));
        let st = s.strategy.unwrap();
        assert_eq!(st.type_.as_deref(), Some("RollingUpdate"));
        assert_eq!(
            st.rolling_update.unwrap().max_surge,
            Some(IntOrString::String("25%".into()))
        );
    }

    fn rs(name: &str, annotations: Value) -> ReplicaSet {
        serde_json::from_value(
            json!({"metadata": {"name": name, "annotations": annotations}, "spec": {"selector": {}}}),
        )
        .unwrap()
    }

    #[test]
    fn new_rs_annotations_copy_skip_and_keep_revision_history() {
        let d = deployment(json!({"metadata": {"annotations": {
            "kubernetes.io/change-cause": "bump",
            LAST_APPLIED: "{}",
            REVISION: "7",
        }}}));
        let mut fresh = rs("web-1", json!({}));
        assert!(set_new_rs_annotations(&d, &mut fresh, 1, false));
        let a = fresh.metadata.annotations.clone().unwrap();
        assert_eq!(
            a.get("kubernetes.io/change-cause").map(String::as_str),
            Some("bump")
        );
        assert_eq!(a.get(REVISION).map(String::as_str), Some("1"));
        assert_eq!(a.get(DESIRED_REPLICAS).map(String::as_str), Some("3"));
        assert_eq!(a.get(MAX_REPLICAS).map(String::as_str), Some("4"));
        assert!(!a.contains_key(LAST_APPLIED));
        assert!(!set_new_rs_annotations(&d, &mut fresh, 1, true), "nothing new");

        // Rolled back to: revision 1 becomes 3, "1" goes into the history.
        assert!(set_new_rs_annotations(&d, &mut fresh, 3, true));
        let a = fresh.metadata.annotations.clone().unwrap();
        assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
        assert!(set_new_rs_annotations(&d, &mut fresh, 5, true));
        assert_eq!(
            fresh.metadata.annotations.as_ref().unwrap()[REVISION_HISTORY],
            "1,3"
        );
        // A lower revision never replaces a higher one.
        assert!(!set_new_rs_annotations(&d, &mut fresh, 2, true));
        // int64 revisions (the upstream e2e's "3546343826724305832").
        let mut big = rs("x", json!({REVISION: "3546343826724305832"}));
        assert!(set_new_rs_annotations(&d, &mut big, 3546343826724305833, true));
        assert_eq!(big.metadata.annotations.unwrap()[REVISION], "3546343826724305833");
    }

    #[test]
    fn the_revision_history_is_capped_by_dropping_the_oldest() {
        let d = deployment(json!({}));
        let long: Vec<String> = (0..400).map(|i| format!("{}", 1000 + i)).collect();
        let history = long.join(",");
        assert!(history.len() < MAX_REV_HISTORY_CHARS);
        let mut r = rs("x", json!({REVISION: "99999", REVISION_HISTORY: history}));
        set_new_rs_annotations(&d, &mut r, 100_000, true);
        let h = &r.metadata.annotations.unwrap()[REVISION_HISTORY];
        assert!(h.len() <= MAX_REV_HISTORY_CHARS, "{}", h.len());
        assert!(h.ends_with(",99999"));
        assert!(!h.starts_with("1000,"), "the oldest went");
    }

    #[test]
    fn templates_compare_without_the_hash_label_and_empties() {
        let a: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: "abc"}},
            "spec": {"containers": [{"name": "c", "image": "i:1", "env": [], "stdin": false}], "hostPID": false}
        }))
        .unwrap();
        let b: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {}, "generation": 0},
            "spec": {"containers": [{"name": "c", "image": "i:1"}]}
        }))
        .unwrap();
        assert!(equal_ignore_hash(&a, &b));
        let mut c = b.clone();
        c.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
        assert!(!equal_ignore_hash(&a, &c));
    }

    #[test]
    fn conditions_keep_transition_times_and_move_to_the_end() {
        let t1: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t2 = t1 + SignedDuration::from_secs(60);
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            new_condition("Progressing", "True", NEW_REPLICA_SET, "m".into(), t1),
        );
        set_condition(
            &mut st,
            new_condition("Available", "True", MIN_AVAILABLE, "m".into(), t1),
        );
        set_condition(
            &mut st,
            new_condition("Progressing", "True", NEW_RS_AVAILABLE, "m2".into(), t2),
        );
        let cs = st.conditions.clone().unwrap();
        assert_eq!(cs[0].type_, "Available");
        assert_eq!(cs[1].type_, "Progressing");
        assert_eq!(cs[1].last_transition_time, Some(Time(t1)), "status unchanged");
        assert_eq!(cs[1].last_update_time, Some(Time(t2)));
        // Same status and reason: untouched.
        set_condition(
            &mut st,
            new_condition("Progressing", "True", NEW_RS_AVAILABLE, "other".into(), t2),
        );
        assert_eq!(
            condition(&st, "Progressing").unwrap().message.as_deref(),
            Some("m2")
        );
        set_condition(
            &mut st,
            new_condition("Progressing", "False", TIMED_OUT, "m".into(), t2),
        );
        assert_eq!(
            condition(&st, "Progressing").unwrap().last_transition_time,
            Some(Time(t2))
        );
        remove_condition(&mut st, "Progressing");
        remove_condition(&mut st, "Available");
        assert!(st.conditions.is_none());
    }

    #[test]
    fn revisions_max_and_last() {
        let rss: Vec<Arc<ReplicaSet>> = ["1", "5", "x", "3"]
            .iter()
            .map(|r| Arc::new(rs("a", json!({REVISION: r}))))
            .collect();
        assert_eq!(max_revision(&rss), 5);
        assert_eq!(last_revision(&rss), 3);
        assert_eq!(last_revision(&rss[..1]), 0);
    }

    #[test]
    fn timing_out_needs_the_deadline_strictly_passed() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let d = deployment(json!({"spec": {"progressDeadlineSeconds": 10}}));
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            new_condition("Progressing", "True", REPLICA_SET_UPDATED, "m".into(), t),
        );
        assert!(!timed_out(&d, &st, t + SignedDuration::from_secs(10)));
        assert!(timed_out(&d, &st, t + SignedDuration::from_secs(11)));
        let none = deployment(json!({"spec": {"progressDeadlineSeconds": i32::MAX}}));
        assert!(!timed_out(&none, &st, t + SignedDuration::from_secs(3600)));
    }
}
