//! The disruption controller (`pkg/controller/disruption`, component `controllermanager`, upstream's
//! event source for it): keeps each PodDisruptionBudget's `status` (expected and healthy pod counts,
//! `disruptionsAllowed`, the `disruptedPods` the eviction subresource recorded, `observedGeneration` and
//! the `DisruptionAllowed` condition) from the pods it selects and the scale of their controllers.
//!
//! ```text
//!  PDB / Pod informers ──handlers (the PDBs selecting a pod)──► queue ──► sync(ns/name)
//!  sync: pods of the selector ─► expected_counts (pure; controllers' scale from the caches)
//!        ─► disrupted_pods + count_healthy (pure) ─► status_to_write (pure) ─► PUT /status
//!        an error other than a conflict ─► fail_safe: disruptionsAllowed 0, DisruptionAllowed=False SyncFailed
//! ```
//!
//! The scale of a pod's controller is read from the ReplicationController, ReplicaSet (or its
//! Deployment) and StatefulSet caches, as upstream's finders; upstream also asks any other kind's `scale`
//! subresource (custom resources), which this controller does not.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer, key_of, split_key};
use crate::{Context, Error, Reconciler, WorkQueue, controller_ref, pod_control, podutil, selector};

/// The event source (upstream records as `controllermanager`).
pub const COMPONENT: &str = "controllermanager";
/// `--concurrent-...`: upstream runs one worker for PDBs.
pub const WORKERS: usize = 1;
/// upstream `DeletionTimeout`: a pod the eviction subresource recorded is expected gone within this.
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
/// The condition type.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// The PDB's selector over `labels`: none selects nothing, an empty one everything (policy/v1).
pub fn selects(pdb: &PodDisruptionBudget, labels: Option<&BTreeMap<String, String>>) -> bool {
    pdb.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|sel| selector::matches(sel, labels))
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp)`.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%').and_then(|n| n.parse().ok()).ok_or_else(|| {
                "invalid value for IntOrString: invalid type: string is not a percentage".to_string()
            })?;
            let product = pct * i64::from(total);
            let value = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            Ok(value as i32)
        }
    }
}

/// What `getExpectedPodCount` finds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    /// `expectedPods`.
    pub expected: i32,
    /// `desiredHealthy`.
    pub desired: i32,
    /// Pods without a controller (reported in an event when the scale was needed).
    pub unmanaged: Vec<String>,
}

/// `getExpectedPodCount`: from an integer `minAvailable` the pods themselves; otherwise the sum of the
/// scales of the pods' controllers (`scale` resolves a controllerRef to the controller's UID and scale,
/// `None` when no supported controller has it: an error, as upstream's "found no controllers").
pub fn expected_counts(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    scale: impl Fn(&Pod, &OwnerReference) -> Option<(String, i32)>,
) -> Result<Counts, String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let expected_scale = || -> Result<(i32, Vec<String>), String> {
        let mut scales: BTreeMap<String, i32> = BTreeMap::new();
        let mut unmanaged = Vec::new();
        for p in pods {
            let Some(r) = controller_ref::controller_of(&p.metadata) else {
                unmanaged.push(p.name_any());
                continue;
            };
            if scales.contains_key(&r.uid) {
                continue;
            }
            match scale(p, r) {
                Some((uid, n)) => {
                    scales.insert(uid, n);
                }
                None => return Err(format!("found no controllers for pod {:?}", p.name_any())),
            }
        }
        Ok((scales.values().sum(), unmanaged))
    };
    if let Some(max) = &spec.max_unavailable {
        let (expected, unmanaged) = expected_scale()?;
        let max = scaled_value(max, expected, true)?;
        return Ok(Counts {
            expected,
            desired: (expected - max).max(0),
            unmanaged,
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Counts {
            expected: pods.len() as i32,
            desired: *n,
            unmanaged: Vec::new(),
        }),
        Some(min) => {
            let (expected, unmanaged) = expected_scale()?;
            Ok(Counts {
                expected,
                desired: scaled_value(min, expected, true)?,
                unmanaged,
            })
        }
        None => Ok(Counts::default()),
    }
}

/// `buildDisruptedPodMap`: the recorded disruptions still expected to happen (pods not yet being
/// deleted, recorded less than [`DELETION_TIMEOUT`] ago), and when the earliest of them expires.
pub fn disrupted_pods(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut out = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(recorded) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (out, None);
    };
    for p in pods {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = p.name_any();
        let Some(at) = recorded.get(&name) else { continue };
        let expected = at.0 + DELETION_TIMEOUT;
        if expected < now {
            // Not deleted in time: no longer counted as going (upstream also warns, NotDeleted).
            continue;
        }
        if recheck.is_none_or(|r| expected < r) {
            recheck = Some(expected);
        }
        out.insert(name, at.clone());
    }
    (out, recheck)
}

/// `countHealthyPods`: ready pods neither being deleted nor about to be.
pub fn count_healthy(pods: &[Arc<Pod>], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            disrupted
                .get(&p.name_any())
                .is_none_or(|at| at.0 + DELETION_TIMEOUT <= now)
        })
        .filter(|p| podutil::is_ready(p))
        .count() as i32
}

/// `meta.SetStatusCondition`: the transition time changes only with the status.
fn set_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => conditions.push(new),
        Some(c) => {
            let time = if c.status == new.status {
                c.last_transition_time.clone()
            } else {
                new.last_transition_time.clone()
            };
            *c = Condition {
                last_transition_time: time,
                ..new
            };
        }
    }
}

/// `UpdateDisruptionAllowedCondition`.
pub fn update_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    let (st, reason) = if status.disruptions_allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: st.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: status.observed_generation,
            last_transition_time: Time(now),
        },
    );
    status.conditions = Some(conditions);
}

/// `ConditionsAreUpToDate`.
fn conditions_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let st = pdb.status.clone().unwrap_or_default();
    let Some(c) = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if st.observed_generation != pdb.metadata.generation {
        return false;
    }
    if st.disruptions_allowed > 0 {
        c.status == "True" && c.reason == "SufficientPods"
    } else {
        c.status == "False" && c.reason == "InsufficientPods"
    }
}

/// `updatePdbStatus`: the status to write, or `None` when the stored one says the same. No disruption is
/// allowed while no pod is expected (a PDB's first pods must not be evicted before this ran).
pub fn status_to_write(
    pdb: &PodDisruptionBudget,
    healthy: i32,
    counts: &Counts,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let mut allowed = healthy - counts.desired;
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = pdb.status.clone().unwrap_or_default();
    let disrupted = (!disrupted.is_empty()).then_some(disrupted);
    if old.current_healthy == healthy
        && old.desired_healthy == counts.desired
        && old.expected_pods == counts.expected
        && old.disruptions_allowed == allowed
        && old.disrupted_pods.clone().filter(|d| !d.is_empty()) == disrupted
        && old.observed_generation == pdb.metadata.generation
        && conditions_up_to_date(pdb)
    {
        return None;
    }
    let mut st = PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: counts.desired,
        expected_pods: counts.expected,
        disruptions_allowed: allowed,
        disrupted_pods: disrupted,
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    update_condition(&mut st, now);
    Some(st)
}

/// `failSafe`: no disruption allowed, and why, when the status cannot be computed.
pub fn fail_safe_status(pdb: &PodDisruptionBudget, error: &str, now: Timestamp) -> PodDisruptionBudgetStatus {
    let mut st = pdb.status.clone().unwrap_or_default();
    st.disruptions_allowed = 0;
    let mut conditions = st.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: "False".into(),
            reason: "SyncFailed".into(),
            message: error.to_string(),
            observed_generation: st.observed_generation,
            last_transition_time: Time(now),
        },
    );
    st.conditions = Some(conditions);
    st
}

/// The scale of the controller a pod's controllerRef names (upstream's finders), from the caches.
struct Finders {
    rcs: Arc<Informer<ReplicationController>>,
    rss: Arc<Informer<ReplicaSet>>,
    deployments: Arc<Informer<Deployment>>,
    statefulsets: Arc<Informer<StatefulSet>>,
}

impl Finders {
    fn scale(&self, pod: &Pod, r: &OwnerReference) -> Option<(String, i32)> {
        let ns = pod.namespace().unwrap_or_default();
        let uid_is = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, uid: &str| {
            m.uid.as_deref() == Some(uid)
        };
        match r.kind.as_str() {
            "ReplicationController" => {
                let rc = self
                    .rcs
                    .get_in(&ns, &r.name)
                    .filter(|o| uid_is(&o.metadata, &r.uid))?;
                Some((
                    r.uid.clone(),
                    rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                ))
            }
            "ReplicaSet" => {
                let rs = self
                    .rss
                    .get_in(&ns, &r.name)
                    .filter(|o| uid_is(&o.metadata, &r.uid))?;
                match controller_ref::controller_of(&rs.metadata) {
                    // getPodDeployment: a Deployment's ReplicaSet counts as the Deployment.
                    Some(d) if d.kind == "Deployment" => {
                        let dep = self
                            .deployments
                            .get_in(&ns, &d.name)
                            .filter(|o| uid_is(&o.metadata, &d.uid))?;
                        Some((
                            d.uid.clone(),
                            dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                        ))
                    }
                    _ => Some((
                        r.uid.clone(),
                        rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    )),
                }
            }
            "StatefulSet" => {
                let sts = self
                    .statefulsets
                    .get_in(&ns, &r.name)
                    .filter(|o| uid_is(&o.metadata, &r.uid))?;
                Some((
                    r.uid.clone(),
                    sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                ))
            }
            _ => None,
        }
    }
}

struct DisruptionController {
    client: kube::Client,
    pdbs: Arc<Informer<PodDisruptionBudget>>,
    pods: Arc<Informer<Pod>>,
    finders: Finders,
    recorder: Arc<Recorder>,
}

/// Register the handlers and return the workers' future.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("disruption");
    let pdbs = ctx.informers.get::<PodDisruptionBudget>();
    let pods = ctx.informers.get::<Pod>();
    {
        let q = queue.clone();
        pdbs.on_change(move |c| match c {
            Change::Added(p) | Change::Updated { new: p, .. } | Change::Deleted(p) => {
                q.add(key_of(p.as_ref()))
            }
        });
    }
    {
        let q = queue.clone();
        let weak: Weak<Informer<PodDisruptionBudget>> = Arc::downgrade(&pdbs);
        pods.on_change(move |c| {
            let Some(pdbs) = weak.upgrade() else { return };
            // Every budget selecting the pod (upstream picks one arbitrarily and warns).
            let enqueue = |p: &Pod| {
                for pdb in pdbs.list_ns(&p.namespace().unwrap_or_default()) {
                    if selects(&pdb, p.metadata.labels.as_ref()) {
                        q.add(key_of(pdb.as_ref()));
                    }
                }
            };
            match c {
                Change::Added(p) | Change::Deleted(p) => enqueue(p),
                Change::Updated { old, new } => {
                    enqueue(new);
                    if old.metadata.labels != new.metadata.labels {
                        enqueue(old);
                    }
                }
            }
        });
    }
    let finders = Finders {
        rcs: ctx.informers.get(),
        rss: ctx.informers.get(),
        deployments: ctx.informers.get(),
        statefulsets: ctx.informers.get(),
    };
    let r = Arc::new(DisruptionController {
        client: ctx.client.clone(),
        pdbs,
        pods,
        finders,
        recorder: ctx.recorder(COMPONENT),
    });
    Box::pin(crate::run_workers(
        ctx.informers.clone(),
        queue,
        WORKERS,
        r,
        cancel,
    ))
}

/// Go's `%v` of a `*metav1.LabelSelector` (gogo's String()), for the UnmanagedPods event.
fn selector_text(pdb: &PodDisruptionBudget) -> String {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return "nil".into();
    };
    let labels: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{}}},MatchExpressions:[]LabelSelectorRequirement{{}},}}",
        labels.join("")
    )
}

impl DisruptionController {
    fn event(&self, pdb: &PodDisruptionBudget, ty: EventType, reason: &'static str, message: String) {
        let r = pod_control::object_ref("policy/v1", "PodDisruptionBudget", &pdb.metadata);
        self.recorder.emit(r, ty, reason, message);
    }

    /// `trySync`: the new status written, and when to look again for recorded disruptions.
    async fn try_sync(&self, pdb: &PodDisruptionBudget) -> Result<Option<Duration>, Error> {
        let ns = pdb.namespace().unwrap_or_default();
        let pods: Vec<Arc<Pod>> = self
            .pods
            .list_ns(&ns)
            .into_iter()
            .filter(|p| selects(pdb, p.metadata.labels.as_ref()))
            .collect();
        if pods.is_empty() {
            self.event(pdb, EventType::Normal, "NoPods", "No matching pods found".into());
        }
        let counts = match expected_counts(pdb, &pods, |p, r| self.finders.scale(p, r)) {
            Ok(c) => c,
            Err(e) => {
                self.event(
                    pdb,
                    EventType::Warning,
                    "CalculateExpectedPodCountFailed",
                    format!("Failed to calculate the number of expected pods: {e}"),
                );
                return Err(Error::Other(e));
            }
        };
        if !counts.unmanaged.is_empty() {
            self.event(
                pdb,
                EventType::Warning,
                "UnmanagedPods",
                format!(
                    "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a \
                     result, the status of the PDB cannot be calculated correctly, which may result in undefined \
                     behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an \
                     integer value.",
                    selector_text(pdb)
                ),
            );
        }
        let now = crate::replicaset::now_seconds();
        let (disrupted, recheck) = disrupted_pods(pdb, &pods, now);
        let healthy = count_healthy(&pods, &disrupted, now);
        if let Some(st) = status_to_write(pdb, healthy, &counts, disrupted, now) {
            self.write_status(pdb, st).await?;
        }
        Ok(recheck.map(|at| now.duration_until(at).unsigned_abs() + Duration::from_secs(1)))
    }

    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        st: PodDisruptionBudgetStatus,
    ) -> Result<(), Error> {
        let api: Api<PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), &pdb.namespace().unwrap_or_default());
        let mut body = pdb.clone();
        body.status = Some(st);
        api.replace_status(&pdb.name_any(), &PostParams::default(), &body)
            .await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Reconciler for DisruptionController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let (_, _) = split_key(key);
        let Some(pdb) = self.pdbs.get(key) else {
            return Ok(None);
        };
        match self.try_sync(&pdb).await {
            Ok(after) => Ok(after),
            // A stale cache: retried without the fail-safe.
            Err(e) if e.is_conflict() => Err(e),
            Err(e) => {
                let st = fail_safe_status(&pdb, &e.to_string(), crate::replicaset::now_seconds());
                self.write_status(&pdb, st).await?;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pdb(spec: serde_json::Value, status: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(
            json!({"metadata": {"name": "b", "namespace": "ns", "generation": 1},
                                      "spec": spec, "status": status}),
        )
        .unwrap()
    }

    fn pod(name: &str, ready: bool, owner: Option<(&str, &str)>) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}});
        if let Some((kind, uid)) = owner {
            v["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": uid, "controller": true}]);
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn percentages_scale_rounding_up() {
        assert_eq!(scaled_value(&IntOrString::String("50%".into()), 3, true), Ok(2));
        assert_eq!(scaled_value(&IntOrString::String("50%".into()), 3, false), Ok(1));
        assert_eq!(scaled_value(&IntOrString::Int(4), 3, true), Ok(4));
        assert!(scaled_value(&IntOrString::String("x".into()), 3, true).is_err());
    }

    #[test]
    fn expected_and_desired_follow_upstream_for_each_kind_of_bound() {
        let pods = vec![
            pod("a", true, Some(("ReplicaSet", "rs1"))),
            pod("b", true, Some(("ReplicaSet", "rs1"))),
        ];
        let scale = |_: &Pod, r: &OwnerReference| (r.uid == "rs1").then(|| ("dep".to_string(), 4));
        let min_int = pdb(json!({"minAvailable": 1}), json!({}));
        assert_eq!(
            expected_counts(&min_int, &pods, scale),
            Ok(Counts {
                expected: 2,
                desired: 1,
                unmanaged: vec![]
            }),
            "an integer minAvailable counts the pods"
        );
        let min_pct = pdb(json!({"minAvailable": "50%"}), json!({}));
        assert_eq!(
            expected_counts(&min_pct, &pods, scale).unwrap(),
            Counts {
                expected: 4,
                desired: 2,
                unmanaged: vec![]
            }
        );
        let max = pdb(json!({"maxUnavailable": 1}), json!({}));
        assert_eq!(
            expected_counts(&max, &pods, scale).unwrap(),
            Counts {
                expected: 4,
                desired: 3,
                unmanaged: vec![]
            }
        );
        let too_many = pdb(json!({"maxUnavailable": 9}), json!({}));
        assert_eq!(expected_counts(&too_many, &pods, scale).unwrap().desired, 0);
        let bare = vec![pod("x", true, None)];
        assert_eq!(
            expected_counts(&max, &bare, scale).unwrap().unmanaged,
            vec!["x".to_string()]
        );
        let unknown = vec![pod("y", true, Some(("Job", "j")))];
        assert_eq!(
            expected_counts(&max, &unknown, scale),
            Err("found no controllers for pod \"y\"".to_string())
        );
    }

    #[test]
    fn recorded_disruptions_count_until_the_timeout() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let b = pdb(
            json!({"minAvailable": 1}),
            json!({"disruptedPods": {"a": "2026-01-01T00:09:00Z", "b": "2026-01-01T00:00:00Z"}}),
        );
        let pods = vec![pod("a", true, None), pod("b", true, None), pod("c", true, None)];
        let (map, recheck) = disrupted_pods(&b, &pods, now);
        assert_eq!(map.keys().collect::<Vec<_>>(), vec!["a"], "b is past the timeout");
        assert_eq!(recheck, Some("2026-01-01T00:11:00Z".parse().unwrap()));
        assert_eq!(count_healthy(&pods, &map, now), 2, "a is about to go");
    }

    #[test]
    fn status_allows_healthy_minus_desired_and_sets_the_condition() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let b = pdb(json!({"minAvailable": 2}), json!({}));
        let counts = Counts {
            expected: 3,
            desired: 2,
            unmanaged: vec![],
        };
        let st = status_to_write(&b, 3, &counts, BTreeMap::new(), now).unwrap();
        assert_eq!(
            (
                st.current_healthy,
                st.desired_healthy,
                st.expected_pods,
                st.disruptions_allowed,
                st.observed_generation
            ),
            (3, 2, 3, 1, Some(1))
        );
        let c = &st.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("DisruptionAllowed", "True", "SufficientPods")
        );
        let written = PodDisruptionBudget {
            status: Some(st),
            ..b.clone()
        };
        assert!(
            status_to_write(&written, 3, &counts, BTreeMap::new(), now).is_none(),
            "nothing changed"
        );
        let fewer = status_to_write(&written, 2, &counts, BTreeMap::new(), now).unwrap();
        assert_eq!(fewer.disruptions_allowed, 0);
        assert_eq!(fewer.conditions.as_ref().unwrap()[0].reason, "InsufficientPods");
        let none_expected = Counts {
            expected: 0,
            desired: 0,
            unmanaged: vec![],
        };
        assert_eq!(
            status_to_write(&b, 3, &none_expected, BTreeMap::new(), now)
                .unwrap()
                .disruptions_allowed,
            0
        );
    }

    #[test]
    fn fail_safe_allows_nothing_and_says_why() {
        let b = pdb(json!({"maxUnavailable": 1}), json!({"disruptionsAllowed": 2}));
        let st = fail_safe_status(&b, "found no controllers for pod \"y\"", Timestamp::now());
        assert_eq!(st.disruptions_allowed, 0);
        let c = &st.conditions.unwrap()[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "SyncFailed"));
        assert_eq!(c.message, "found no controllers for pod \"y\"");
    }

    #[test]
    fn a_budget_without_selector_selects_nothing_and_an_empty_one_everything() {
        let labels: BTreeMap<String, String> = [("app".into(), "web".into())].into();
        assert!(!selects(&pdb(json!({}), json!({})), Some(&labels)));
        assert!(selects(&pdb(json!({"selector": {}}), json!({})), Some(&labels)));
    }
}
