//! Assertions evaluated on every watch event of the kinds they name, not on a timer.
//!
//! Each [`Expectation`] gets a watch (`client::watch::events`: a LIST, then a WATCH from its
//! resourceVersion, a new LIST after a 410) of its kind, narrowed to its name (field selector) or its labels
//! (label selector), in its namespace (the test namespace for namespaced kinds without one, cluster-wide
//! for cluster-scoped kinds). Every event updates that watch's local copy, and once every watch has listed,
//! all expectations are evaluated together: the check passes the moment all hold at one instant (kuttl's
//! rule: asserts, assert commands and errors together). An optional [`ExtraCheck`] (kuttl's
//! `TestAssert.commands`) runs when the objects hold, at most once a second.
//!
//! On timeout the [`CheckFailure`] names, per failing expectation, the closest candidate (fewest differing
//! fields) and its field-level diff.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use client::watch::{Event, Target};
use futures_util::future::BoxFuture;
use futures_util::{StreamExt, stream};
use serde_json::Value;
use tokio::time::Instant;

use super::subset::FieldDiff;
use super::{Cluster, Error, Matcher, Selector, to_value};

/// One object that must exist and match (`absent: false`), or must not exist or not match
/// (`absent: true`: kuttl's errors files, chainsaw's `error`).
#[derive(Clone, Debug)]
pub struct Expectation {
    /// The expected object (apiVersion, kind, metadata.name or labels select the candidates).
    pub object: Value,
    /// Whether no candidate may match.
    pub absent: bool,
}

impl Expectation {
    /// An object that must eventually exist and match.
    pub fn present(object: Value) -> Expectation {
        Expectation {
            object,
            absent: false,
        }
    }
    /// An object that must eventually not match any object.
    pub fn absent(object: Value) -> Expectation {
        Expectation { object, absent: true }
    }
}

/// A check besides objects that must hold at the same instant (kuttl's `TestAssert.commands`); it gets the
/// time left.
pub trait ExtraCheck: Send {
    /// `Ok` when the check holds now.
    fn check(&mut self, remaining: Duration) -> BoxFuture<'_, Result<(), String>>;
}

/// Why one expectation did not hold at the last evaluation.
#[derive(Clone, Debug)]
pub struct ExpectationFailure {
    /// `Kind:ns/name` (`*` for a selection by labels).
    pub what: String,
    /// The reason in one line (`not found`, `no resources matched of kind: v1/Pod`, `matched error assertion`).
    pub message: String,
    /// `Kind:ns/name` of the closest candidate, for a present expectation with candidates.
    pub closest: Option<String>,
    /// The closest candidate's differing fields.
    pub diffs: Vec<FieldDiff>,
}

impl fmt::Display for ExpectationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.diffs.is_empty() {
            return write!(f, "resource {}: {}", self.what, self.message);
        }
        match &self.closest {
            Some(c) if *c != self.what => write!(f, "resource {} (closest: {c}):", self.what)?,
            _ => write!(f, "resource {}:", self.what)?,
        }
        for d in &self.diffs {
            write!(f, "\n    {d}")?;
        }
        Ok(())
    }
}

/// A check that did not hold within its timeout, or could not be evaluated.
#[derive(Clone, Debug, Default)]
pub struct CheckFailure {
    /// The expectations that did not hold at the last evaluation.
    pub failures: Vec<ExpectationFailure>,
    /// The extra check's last error.
    pub extra: Option<String>,
    /// An error that stopped evaluation (discovery, a watch that never listed).
    pub error: Option<String>,
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            if !std::mem::take(&mut first) {
                writeln!(f)?;
            }
            Ok::<(), fmt::Error>(())
        };
        if let Some(e) = &self.error {
            sep(f)?;
            write!(f, "{e}")?;
        }
        for x in &self.failures {
            sep(f)?;
            write!(f, "{x}")?;
        }
        if let Some(e) = &self.extra {
            sep(f)?;
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The local copy of one watch.
#[derive(Default)]
struct Store {
    listed: bool,
    objects: BTreeMap<String, Value>,
    relist: Option<BTreeMap<String, Value>>,
    last_error: Option<String>,
}

fn key(v: &Value) -> String {
    let ns = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    format!("{ns}/{name}")
}

impl Store {
    fn apply(&mut self, ev: Event<kube::api::DynamicObject>) {
        match ev {
            Event::Init => self.relist = Some(BTreeMap::new()),
            Event::InitApply(o) => {
                let v = to_value(o);
                self.relist.get_or_insert_with(BTreeMap::new).insert(key(&v), v);
            }
            Event::InitDone => {
                self.objects = self.relist.take().unwrap_or_default();
                self.listed = true;
                self.last_error = None;
            }
            Event::Apply(o) => {
                let v = to_value(o);
                self.objects.insert(key(&v), v);
            }
            Event::Delete(o) => {
                self.objects.remove(&key(&to_value(o)));
            }
        }
    }
}

/// The pure evaluation of one expectation against its candidates.
pub fn evaluate(
    exp: &Expectation,
    sel: &Selector,
    ns: Option<&str>,
    candidates: &[&Value],
    matcher: &dyn Matcher,
) -> Result<(), ExpectationFailure> {
    let what = sel.describe(ns);
    let candidates: Vec<&Value> = candidates
        .iter()
        .copied()
        .filter(|c| {
            sel.name
                .as_deref()
                .is_none_or(|n| c.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
        })
        .collect();
    let fail = |message: String, closest, diffs| {
        Err(ExpectationFailure {
            what: what.clone(),
            message,
            closest,
            diffs,
        })
    };
    if exp.absent {
        let matching: Vec<&Value> = candidates
            .into_iter()
            .filter(|c| matcher.diff(c, &exp.object).is_ok())
            .collect();
        return match matching.as_slice() {
            [] => Ok(()),
            [one] => fail(
                format!("resource {} matched error assertion", super::describe_object(one)),
                None,
                vec![],
            ),
            [one, rest @ ..] => fail(
                format!(
                    "resource {} (and {} other resources) matched error assertion",
                    super::describe_object(one),
                    rest.len()
                ),
                None,
                vec![],
            ),
        };
    }
    if candidates.is_empty() {
        return match &sel.name {
            Some(_) => fail("not found".into(), None, vec![]),
            None => fail(
                format!("no resources matched of kind: {}/{}", sel.api_version, sel.kind),
                None,
                vec![],
            ),
        };
    }
    let mut best: Option<(&Value, Vec<FieldDiff>)> = None;
    for c in candidates {
        match matcher.diff(c, &exp.object) {
            Ok(()) => return Ok(()),
            Err(d) => {
                if best.as_ref().is_none_or(|(_, b)| d.len() < b.len()) {
                    best = Some((c, d));
                }
            }
        }
    }
    let (c, diffs) = best.expect("at least one candidate");
    let message = match diffs.first() {
        Some(d) => format!("{}: {}", if d.path.is_empty() { "." } else { &d.path }, d.message),
        None => "does not match".into(),
    };
    fail(message, Some(super::describe_object(c)), diffs)
}

/// How often a failing [`ExtraCheck`] is retried (kuttl's poll interval: 1 s).
const EXTRA_INTERVAL: Duration = Duration::from_secs(1);
/// How often an unknown kind is looked up again.
const DISCOVERY_RETRY: Duration = Duration::from_millis(500);

impl Cluster {
    /// Waits until every expectation holds at one instant (and `extra`, if given), evaluating on every
    /// watch event, up to `timeout`. Namespaced kinds without a namespace are looked for in `ns`.
    pub async fn eventually(
        &self,
        expectations: &[Expectation],
        ns: &str,
        timeout: Duration,
        matcher: &dyn Matcher,
        mut extra: Option<&mut dyn ExtraCheck>,
    ) -> Result<(), CheckFailure> {
        let deadline = Instant::now() + timeout;
        // Resolve every kind; a kind that is not served yet (a CRD being established) is retried.
        let mut targets = Vec::new();
        for exp in expectations {
            let sel = Selector::of_object(&exp.object).map_err(|e| CheckFailure {
                error: Some(e.to_string()),
                ..Default::default()
            })?;
            let r = loop {
                match self.resolve(&sel.api_version, &sel.kind).await {
                    Ok(r) => break r,
                    Err(e @ Error::UnknownKind { .. }) if Instant::now() + DISCOVERY_RETRY < deadline => {
                        tracing::debug!(error = %e, "kind not served yet");
                        tokio::time::sleep(DISCOVERY_RETRY).await;
                    }
                    Err(e) => {
                        return Err(CheckFailure {
                            error: Some(e.to_string()),
                            ..Default::default()
                        });
                    }
                }
            };
            let tns = self.namespace_for(&r, &sel, ns);
            targets.push((sel, r, tns));
        }
        let streams = targets.iter().enumerate().map(|(i, (sel, r, tns))| {
            // The list reads the latest state (no resourceVersion), as kube's `ListSemantic::MostRecent`.
            let mut narrow = client::watch::Selector::all();
            if let Some(n) = &sel.name {
                narrow = narrow.fields(&format!("metadata.name={n}"));
            } else if !sel.labels.is_empty() {
                narrow = narrow.labels(&sel.label_selector());
            }
            let target = Target::at(self.api(r, tns.as_deref()).resource_url(), narrow);
            client::watch::events::<kube::api::DynamicObject>(self.client.clone(), target)
                .map(move |e| (i, e))
                .boxed()
        });
        let mut events = stream::select_all(streams);
        let mut stores: Vec<Store> = targets.iter().map(|_| Store::default()).collect();
        let mut last = CheckFailure::default();
        let mut next_extra = Instant::now();
        let mut dirty = true;
        loop {
            if dirty && stores.iter().all(|s| s.listed) {
                dirty = false;
                let mut failures = Vec::new();
                for (i, exp) in expectations.iter().enumerate() {
                    let (sel, _, tns) = &targets[i];
                    let cands: Vec<&Value> = stores[i].objects.values().collect();
                    if let Err(f) = evaluate(exp, sel, tns.as_deref(), &cands, matcher) {
                        failures.push(f);
                    }
                }
                last.failures = failures;
                last.error = None;
                if last.failures.is_empty() {
                    match extra.as_deref_mut() {
                        None => return Ok(()),
                        Some(x) if Instant::now() >= next_extra => {
                            let remaining = deadline.saturating_duration_since(Instant::now());
                            match x.check(remaining).await {
                                Ok(()) => return Ok(()),
                                Err(e) => {
                                    last.extra = Some(e);
                                    next_extra = Instant::now() + EXTRA_INTERVAL;
                                }
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            let retry_extra = extra.is_some() && last.failures.is_empty();
            tokio::select! {
                ev = events.next(), if !targets.is_empty() => match ev {
                    Some((i, Ok(ev))) => { stores[i].apply(ev); dirty = true; }
                    Some((i, Err(e))) => { stores[i].last_error = Some(e.to_string()); }
                    None => {}
                },
                _ = tokio::time::sleep_until(next_extra), if retry_extra => { dirty = true; }
                _ = tokio::time::sleep_until(deadline) => {
                    if let Some((i, s)) = stores.iter().enumerate().find(|(_, s)| !s.listed) {
                        let (sel, _, tns) = &targets[i];
                        last.error = Some(format!(
                            "{} could not be listed: {}",
                            sel.describe(tns.as_deref()),
                            s.last_error.as_deref().unwrap_or("no answer")
                        ));
                    }
                    return Err(last);
                }
            }
        }
    }

    /// Waits until `expected` exists and matches (kuttl assert files, chainsaw `assert`).
    pub async fn assert_eventually(
        &self,
        expected: &Value,
        ns: &str,
        timeout: Duration,
        matcher: &dyn Matcher,
    ) -> Result<(), CheckFailure> {
        self.eventually(
            &[Expectation::present(expected.clone())],
            ns,
            timeout,
            matcher,
            None,
        )
        .await
    }

    /// Waits until no object matches `expected` (kuttl errors files, chainsaw `error`): passes at the
    /// first evaluation where nothing matches.
    pub async fn absent_eventually(
        &self,
        expected: &Value,
        ns: &str,
        timeout: Duration,
        matcher: &dyn Matcher,
    ) -> Result<(), CheckFailure> {
        self.eventually(
            &[Expectation::absent(expected.clone())],
            ns,
            timeout,
            matcher,
            None,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::subset::kuttl_subset;
    use serde_json::json;

    fn pod(name: &str, phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "status": {"phase": phase}})
    }

    #[test]
    fn evaluation_table() {
        let running = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"}});
        let named = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "status": {"phase": "Running"}});
        let (a_run, a_pend, b_run) = (pod("a", "Running"), pod("a", "Pending"), pod("b", "Running"));
        let m = &kuttl_subset;
        let check = |exp: &Expectation, c: &[&Value]| {
            let sel = Selector::of_object(&exp.object).unwrap();
            evaluate(exp, &sel, Some("ns"), c, m).map_err(|f| f.to_string())
        };
        assert!(
            check(&Expectation::present(running.clone()), &[&a_pend, &b_run]).is_ok(),
            "any candidate"
        );
        let e = check(&Expectation::present(running.clone()), &[]).unwrap_err();
        assert!(e.contains("no resources matched of kind: v1/Pod"), "{e}");
        let e = check(&Expectation::present(named.clone()), &[&b_run]).unwrap_err();
        assert!(
            e.contains("Pod:ns/a: not found"),
            "a name only matches that name: {e}"
        );
        let e = check(&Expectation::present(named.clone()), &[&a_pend]).unwrap_err();
        assert!(e.contains(".status.phase") && e.contains("\"Pending\""), "{e}");
        assert!(
            check(&Expectation::absent(named.clone()), &[&a_pend]).is_ok(),
            "absent when not matching"
        );
        assert!(check(&Expectation::absent(named.clone()), &[]).is_ok());
        let e = check(&Expectation::absent(running.clone()), &[&a_run, &b_run]).unwrap_err();
        assert!(
            e.contains("(and 1 other resources) matched error assertion"),
            "{e}"
        );
    }

    #[test]
    fn the_closest_candidate_has_the_fewest_differences() {
        let exp = Expectation::present(json!({"apiVersion": "v1", "kind": "Pod",
            "spec": {"a": 1, "b": 2}}));
        let far = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "far", "namespace": "ns"}, "spec": {"a": 0, "b": 0}});
        let near = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "near", "namespace": "ns"}, "spec": {"a": 1, "b": 0}});
        let sel = Selector::of_object(&exp.object).unwrap();
        let f = evaluate(&exp, &sel, Some("ns"), &[&far, &near], &kuttl_subset).unwrap_err();
        assert_eq!(f.closest.as_deref(), Some("Pod:ns/near"));
        assert_eq!(f.diffs.len(), 1);
        assert_eq!(f.diffs[0].path, ".spec.b");
    }
}
