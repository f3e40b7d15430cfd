//! The namespace controller (`pkg/controller/namespace/`, its `NamespacedResourcesDeleter`): empties a
//! namespace that is being deleted and then releases it.
//!
//! The API server only marks a deleted namespace (deletionTimestamp, phase Terminating) and keeps it while
//! `spec.finalizers` holds `kubernetes`. For each such namespace this controller discovers every namespaced
//! resource that can be deleted, deletes each collection (Background propagation), lists what remains,
//! writes upstream's five deletion conditions to `namespaces/NAME/status`, and requeues while content
//! remains (half the longest remaining pod grace period, or 15 s for objects held by finalizers). Once
//! nothing remains it removes `kubernetes` through `namespaces/NAME/finalize`, and the API server removes
//! the namespace.
//!
//! What is done is decided by pure functions ([`content_outcome`], [`failing_conditions`],
//! [`update_conditions`], [`pod_estimate`]); [`Controller::sync`] reads, calls them, and writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::discovery::{self, ServedResource};
use crate::informer::{Change, key_of};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// upstream `v1.FinalizerKubernetes`.
pub const FINALIZER: &str = "kubernetes";
/// kube-controller-manager `--concurrent-namespace-syncs`.
pub const WORKERS: usize = 10;
/// kube-controller-manager `--namespace-sync-period`: every terminating namespace is looked at again.
pub const RESYNC: Duration = Duration::from_secs(5 * 60);
/// upstream `finalizerEstimateSeconds`: assumed time for finalizers on remaining objects to finish.
pub const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

/// The condition types this controller maintains, in upstream's order.
pub const CONDITION_TYPES: [&str; 5] = [
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// The "it worked" reason and message of each condition type (upstream `okReasons`, `okMessages`).
fn ok_condition(type_: &str) -> (&'static str, &'static str) {
    match type_ {
        "NamespaceDeletionDiscoveryFailure" => {
            ("ResourcesDiscovered", "All resources successfully discovered")
        }
        "NamespaceDeletionGroupVersionParsingFailure" => {
            ("ParsedGroupVersions", "All legacy kube types successfully parsed")
        }
        "NamespaceDeletionContentFailure" => (
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        "NamespaceContentRemaining" => ("ContentRemoved", "All content successfully removed"),
        _ => (
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
        ),
    }
}

/// What one resource's pass found (upstream `gvrDeletionMetadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceOutcome {
    /// Seconds to wait before looking again.
    pub estimate: i64,
    /// Objects still listed.
    pub remaining: usize,
    /// Remaining objects by finalizer.
    pub finalizers: BTreeMap<String, usize>,
    /// An unexpected leftover.
    pub error: Option<String>,
}

/// upstream `deleteAllContentForGroupVersionResource`'s verdict on what a list after the delete returned:
/// `estimate` is the graceful-termination estimate made before deleting, `items` each remaining object's
/// finalizers.
pub fn content_outcome(
    r: &ServedResource,
    namespace: &str,
    estimate: i64,
    items: &[Vec<String>],
) -> ResourceOutcome {
    let mut finalizers = BTreeMap::new();
    for f in items.iter().flatten() {
        *finalizers.entry(f.clone()).or_insert(0) += 1;
    }
    let remaining = items.len();
    if estimate != 0 {
        return ResourceOutcome {
            estimate,
            remaining,
            finalizers,
            error: None,
        };
    }
    if !finalizers.is_empty() {
        return ResourceOutcome {
            estimate: FINALIZER_ESTIMATE_SECONDS,
            remaining,
            finalizers,
            error: None,
        };
    }
    ResourceOutcome {
        estimate: 0,
        remaining,
        finalizers,
        error: (remaining > 0).then(|| {
            format!(
                "unexpected items still remain in namespace: {namespace} for gvr: {}",
                r.gvr_string()
            )
        }),
    }
}

/// upstream `estimateGracefulTerminationForPods` and the cut for time already passed: the longest grace
/// period of the non-terminal pods (`(phase, terminationGracePeriodSeconds)`), less the seconds since the
/// namespace was deleted, at least 0.
pub fn pod_estimate(pods: &[(&str, Option<i64>)], deleted_at: Timestamp, now: Timestamp) -> i64 {
    let estimate = pods
        .iter()
        .filter(|(phase, _)| !matches!(*phase, "Succeeded" | "Failed"))
        .filter_map(|(_, grace)| *grace)
        .max()
        .unwrap_or(0);
    let elapsed = now.duration_since(deleted_at).as_secs();
    (estimate - elapsed).max(0)
}

/// Everything one attempt at emptying a namespace learned.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// Discovery failed for some groups.
    pub discovery_failure: Option<String>,
    /// Errors deleting or listing content.
    pub delete_errors: Vec<String>,
    /// Remaining objects by `resource.group`.
    pub remaining: BTreeMap<String, usize>,
    /// Remaining objects by finalizer.
    pub finalizers: BTreeMap<String, usize>,
}

fn condition(type_: &str, status: &str, reason: &str, message: String, now: Timestamp) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(Time(now)),
    }
}

/// The conditions that report trouble (upstream `ProcessDiscoverResourcesErr`, `ProcessContentTotals`,
/// `makeDeleteContentCondition`); every type missing here is reported as fine.
pub fn failing_conditions(a: &Attempt, now: Timestamp) -> Vec<NamespaceCondition> {
    let mut out = Vec::new();
    if let Some(m) = &a.discovery_failure {
        out.push(condition(
            "NamespaceDeletionDiscoveryFailure",
            "True",
            "DiscoveryFailed",
            m.clone(),
            now,
        ));
    }
    let remaining: Vec<String> = a
        .remaining
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(gr, n)| format!("{gr} has {n} resource instances"))
        .collect();
    if !a.remaining.is_empty() {
        out.push(condition(
            "NamespaceContentRemaining",
            "True",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", remaining.join(", ")),
            now,
        ));
    }
    let finalizers: Vec<String> = a
        .finalizers
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    if !a.finalizers.is_empty() {
        out.push(condition(
            "NamespaceFinalizersRemaining",
            "True",
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                finalizers.join(", ")
            ),
            now,
        ));
    }
    if !a.delete_errors.is_empty() {
        let mut msgs = a.delete_errors.clone();
        msgs.sort();
        out.push(condition(
            "NamespaceDeletionContentFailure",
            "True",
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                msgs.len(),
                msgs.join(", ")
            ),
            now,
        ));
    }
    out
}

/// upstream `updateConditions`: every maintained type takes its failing condition or its "ok" variant; an
/// existing condition is changed in place (a new transition time only when its status flips). True if
/// anything changed.
pub fn update_conditions(
    conditions: &mut Vec<NamespaceCondition>,
    failing: &[NamespaceCondition],
    now: Timestamp,
) -> bool {
    let mut changed = false;
    for type_ in CONDITION_TYPES {
        let want = failing
            .iter()
            .find(|c| c.type_ == type_)
            .cloned()
            .unwrap_or_else(|| {
                let (reason, message) = ok_condition(type_);
                condition(type_, "False", reason, message.into(), now)
            });
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conditions.push(want);
                changed = true;
            }
            Some(old)
                if old.status != want.status || old.reason != want.reason || old.message != want.message =>
            {
                if old.status != want.status {
                    old.last_transition_time = Some(Time(now));
                }
                old.status = want.status;
                old.reason = want.reason;
                old.message = want.message;
                changed = true;
            }
            Some(_) => {}
        }
    }
    changed
}

/// When to look again after `estimate` seconds of content remain (upstream: `estimate/2 + 1` seconds).
pub fn requeue_after(estimate: i64) -> Duration {
    Duration::from_secs((estimate / 2 + 1).max(1) as u64)
}

/// `spec.finalizers` without ours, sorted (upstream `finalizeNamespace`'s set).
pub fn finalizers_after_finalize(ns: &Namespace) -> Vec<String> {
    let mut out: Vec<String> = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn spec_finalizers(ns: &Namespace) -> &[String] {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_deref())
        .unwrap_or(&[])
}

/// Start the controller: namespaces being deleted are queued; every [`RESYNC`] all of them again.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::with_backoff("namespace", Duration::from_millis(5), Duration::from_secs(60));
    let informer = ctx.informers.get::<Namespace>();
    let q = queue.clone();
    informer.on_change(move |c| {
        let ns = c.object();
        if !matches!(c, Change::Deleted(_)) && ns.metadata.deletion_timestamp.is_some() {
            q.add(key_of(ns.as_ref()));
        }
    });
    let resync = {
        let (queue, informer, cancel) = (queue.clone(), informer.clone(), cancel.clone());
        async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(RESYNC) => {}
                }
                for ns in informer.list() {
                    if ns.metadata.deletion_timestamp.is_some() {
                        queue.add(key_of(ns.as_ref()));
                    }
                }
            }
        }
    };
    let reconciler = Arc::new(Controller {
        client: ctx.client.clone(),
    });
    let workers = run_workers(ctx.informers.clone(), queue, WORKERS, reconciler, cancel);
    Box::pin(async move {
        futures_util::future::join(workers, resync).await;
    })
}

/// The namespace controller's sync.
pub struct Controller {
    client: kube::Client,
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

#[async_trait::async_trait]
impl Reconciler for Controller {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        // Several writers edit a terminating namespace: work from the live object, not the cache.
        let Some(mut ns) = api.get_opt(key).await? else {
            return Ok(None);
        };
        let Some(deleted_at) = ns.metadata.deletion_timestamp.clone() else {
            return Ok(None);
        };
        if ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating") {
            ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
            ns = match api.replace_status(key, &PostParams::default(), &ns).await {
                Ok(n) => n,
                Err(e) if is_status(&e, 404) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
        }
        if spec_finalizers(&ns).is_empty() {
            return Ok(None);
        }
        let (estimate, errors) = self.delete_all_content(&mut ns, deleted_at.0).await;
        if !errors.is_empty() {
            return Err(Error::Other(errors.join("; ")));
        }
        if estimate > 0 {
            tracing::debug!(namespace = key, estimate, "content remains");
            return Ok(Some(requeue_after(estimate)));
        }
        self.finalize(&api, ns).await
    }
}

impl Controller {
    /// upstream `deleteAllContent`: returns the estimate and the errors.
    async fn delete_all_content(&self, ns: &mut Namespace, deleted_at: Timestamp) -> (i64, Vec<String>) {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let mut attempt = Attempt::default();
        let mut errors = Vec::new();
        let served = match discovery::discover(&self.client).await {
            Ok(s) => s,
            Err(e) => {
                errors.push(e.to_string());
                attempt.discovery_failure = Some(e.to_string());
                Default::default()
            }
        };
        if let Some(m) = served.failure_message() {
            errors.push(m.clone());
            attempt.discovery_failure = Some(m);
        }
        let mut estimate = 0;
        for r in served
            .preferred()
            .filter(|r| r.namespaced && r.supports(&["delete"]))
        {
            let outcome = match self.delete_resource(r, &name, deleted_at).await {
                Ok(o) => o,
                Err(e) => {
                    let msg = e.to_string();
                    errors.push(msg.clone());
                    attempt.delete_errors.push(msg);
                    continue;
                }
            };
            estimate = estimate.max(outcome.estimate);
            if let Some(e) = &outcome.error {
                errors.push(e.clone());
                attempt.delete_errors.push(e.clone());
            }
            if outcome.remaining > 0 {
                attempt.remaining.insert(r.group_resource(), outcome.remaining);
                for (f, n) in outcome.finalizers {
                    *attempt.finalizers.entry(f).or_insert(0) += n;
                }
            }
        }
        // Always written: a condition that said "it didn't work" must be told it now does.
        let now = Timestamp::now();
        let failing = failing_conditions(&attempt, now);
        let status = ns.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        if update_conditions(conditions, &failing, now) {
            let api: Api<Namespace> = Api::all(self.client.clone());
            match api.replace_status(&name, &PostParams::default(), ns).await {
                Ok(n) => *ns = n,
                Err(e) => tracing::debug!(namespace = %name, error = %e, "updating the deletion conditions"),
            }
        }
        (estimate, errors)
    }

    /// upstream `deleteAllContentForGroupVersionResource`.
    async fn delete_resource(
        &self,
        r: &ServedResource,
        namespace: &str,
        deleted_at: Timestamp,
    ) -> Result<ResourceOutcome, kube::Error> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &r.ar);
        let estimate = if r.ar.group.is_empty() && r.ar.plural == "pods" {
            let pods = api.list(&ListParams::default()).await?;
            let seen: Vec<(String, Option<i64>)> = pods
                .items
                .iter()
                .map(|p| {
                    (
                        p.data
                            .pointer("/status/phase")
                            .and_then(|v| v.as_str())
                            .unwrap_or("")
                            .to_string(),
                        p.data
                            .pointer("/spec/terminationGracePeriodSeconds")
                            .and_then(|v| v.as_i64()),
                    )
                })
                .collect();
            let borrowed: Vec<(&str, Option<i64>)> = seen.iter().map(|(p, g)| (p.as_str(), *g)).collect();
            pod_estimate(&borrowed, deleted_at, Timestamp::now())
        } else {
            0
        };
        let background = DeleteParams::background();
        let mut each = !r.supports(&["deletecollection"]);
        if !each {
            match api.delete_collection(&background, &ListParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 405) || is_status(&e, 404) => each = true,
                Err(e) => return Err(e),
            }
        }
        if each && r.supports(&["list"]) {
            for item in api.list(&ListParams::default()).await?.items {
                let n = item.metadata.name.clone().unwrap_or_default();
                match api.delete(&n, &background).await {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if !r.supports(&["list"]) {
            return Ok(ResourceOutcome {
                estimate,
                ..Default::default()
            });
        }
        let left = api.list(&ListParams::default()).await?;
        let items: Vec<Vec<String>> = left
            .items
            .iter()
            .map(|o| o.metadata.finalizers.clone().unwrap_or_default())
            .collect();
        Ok(content_outcome(r, namespace, estimate, &items))
    }

    /// Remove our finalizer through `finalize`, retrying conflicts from the live object.
    async fn finalize(&self, api: &Api<Namespace>, mut ns: Namespace) -> Result<Option<Duration>, Error> {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let uid = ns.metadata.uid.clone();
        loop {
            ns.spec.get_or_insert_with(Default::default).finalizers = Some(finalizers_after_finalize(&ns));
            match api
                .replace_subresource("finalize", &name, &PostParams::default(), &ns)
                .await
            {
                Ok(_) => return Ok(None),
                Err(e) if is_status(&e, 404) => return Ok(None),
                Err(e) if is_status(&e, 409) => {
                    let Some(latest) = api.get_opt(&name).await? else {
                        return Ok(None);
                    };
                    if latest.metadata.uid != uid {
                        return Err(Error::Other("namespace uid has changed across retries".into()));
                    }
                    ns = latest;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;
    use kube::core::discovery::ApiResource;

    fn pods() -> ServedResource {
        ServedResource {
            ar: ApiResource {
                group: "".into(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "Pod".into(),
                plural: "pods".into(),
            },
            namespaced: true,
            verbs: vec!["delete".into(), "list".into(), "deletecollection".into()],
            preferred: true,
        }
    }

    #[test]
    fn remaining_content_is_waited_for_or_reported_as_upstream() {
        let r = pods();
        // Pods in their grace period: wait the estimate, no error.
        let o = content_outcome(&r, "ns", 20, &[vec![], vec![]]);
        assert_eq!((o.estimate, o.remaining, o.error.clone()), (20, 2, None));
        // Finalizers hold them: the default 15 s, counted by finalizer.
        let o = content_outcome(&r, "ns", 0, &[vec!["example.com/x".into()], vec![]]);
        assert_eq!(o.estimate, 15);
        assert_eq!(o.finalizers.get("example.com/x"), Some(&1));
        assert!(o.error.is_none());
        // Nothing explains them: an error.
        let o = content_outcome(&r, "ns", 0, &[vec![]]);
        assert_eq!(
            o.error.as_deref(),
            Some("unexpected items still remain in namespace: ns for gvr: /v1, Resource=pods")
        );
        // Nothing left.
        assert_eq!(content_outcome(&r, "ns", 0, &[]), ResourceOutcome::default());
    }

    #[test]
    fn pod_estimate_is_the_longest_grace_of_live_pods_less_time_passed() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let later = t0 + SignedDuration::from_secs(12);
        type Case<'a> = (&'a [(&'a str, Option<i64>)], Timestamp, i64);
        let cases: &[Case] = &[
            (&[], t0, 0),
            (&[("Running", Some(30)), ("Pending", Some(10))], t0, 30),
            (&[("Running", Some(30))], later, 18),
            (&[("Succeeded", Some(30)), ("Running", None)], t0, 0),
            (&[("Running", Some(5))], later, 0),
        ];
        for (pods, now, want) in cases {
            assert_eq!(pod_estimate(pods, t0, *now), *want, "{pods:?}");
        }
        assert_eq!(requeue_after(30), Duration::from_secs(16));
        assert_eq!(requeue_after(0), Duration::from_secs(1));
    }

    #[test]
    fn conditions_carry_upstreams_reasons_and_messages() {
        let now = Timestamp::now();
        let mut a = Attempt::default();
        a.remaining.insert("pods.".into(), 2);
        a.remaining.insert("configmaps.".into(), 1);
        a.finalizers.insert("example.com/hold".into(), 1);
        let failing = failing_conditions(&a, now);
        let find = |t: &str| failing.iter().find(|c| c.type_ == t).cloned().unwrap();
        let c = find("NamespaceContentRemaining");
        assert_eq!(c.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances"
            )
        );
        let c = find("NamespaceFinalizersRemaining");
        assert_eq!(c.reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
            )
        );
        a.delete_errors = vec!["b".into(), "a".into()];
        a.discovery_failure = Some("Discovery failed for some groups, 1 failing: x".into());
        let failing = failing_conditions(&a, now);
        let c = failing
            .iter()
            .find(|c| c.type_ == "NamespaceDeletionContentFailure")
            .unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some("Failed to delete all resource types, 2 remaining: a, b")
        );
        assert_eq!(c.reason.as_deref(), Some("ContentDeletionFailed"));
        assert!(
            failing
                .iter()
                .any(|c| c.type_ == "NamespaceDeletionDiscoveryFailure"
                    && c.reason.as_deref() == Some("DiscoveryFailed"))
        );
    }

    #[test]
    fn updating_conditions_fills_ok_variants_and_flips_in_place() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1 = t0 + SignedDuration::from_secs(5);
        let mut conds = Vec::new();
        let mut a = Attempt::default();
        a.remaining.insert("pods.".into(), 2);
        assert!(update_conditions(&mut conds, &failing_conditions(&a, t0), t0));
        assert_eq!(
            conds.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            CONDITION_TYPES.to_vec()
        );
        let remaining = &conds[3];
        assert_eq!(remaining.status, "True");
        assert_eq!(conds[0].reason.as_deref(), Some("ResourcesDiscovered"));
        assert_eq!(
            conds[4].message.as_deref(),
            Some("All content-preserving finalizers finished")
        );
        // The same again: nothing changes.
        assert!(!update_conditions(&mut conds, &failing_conditions(&a, t1), t1));
        // Content gone: flips to the ok variant with a new transition time; the others keep theirs.
        assert!(update_conditions(&mut conds, &[], t1));
        assert_eq!(conds[3].status, "False");
        assert_eq!(conds[3].reason.as_deref(), Some("ContentRemoved"));
        assert_eq!(
            conds[3].message.as_deref(),
            Some("All content successfully removed")
        );
        assert_eq!(conds[3].last_transition_time, Some(Time(t1)));
        assert_eq!(conds[0].last_transition_time, Some(Time(t0)));
    }

    #[test]
    fn finalize_removes_only_our_token() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes", "example.com/x"]}
        }))
        .unwrap();
        assert_eq!(finalizers_after_finalize(&ns), vec!["example.com/x".to_string()]);
    }
}
