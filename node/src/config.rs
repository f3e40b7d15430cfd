//! Merging the static pod sources (upstream's `pkg/kubelet/config/config.go`, `podStorage.merge`).
//!
//! Every source sends full snapshots; [`PodConfig::merge`] keeps each source's pods by UID and turns a new
//! snapshot into the operations the pod workers act on: a UID not seen before is an [`PodOp::Add`] (stamped
//! with `kubernetes.io/config.seen`), a UID gone is a [`PodOp::Remove`], and a UID whose spec, labels,
//! annotations or deletion fields changed is a [`PodOp::Update`]. A change of status alone does nothing
//! (upstream's RECONCILE: a static pod's status never comes from its source).
//!
//! The API server source is not merged here: the kubelet's informer plays that part, and the kubelet counts
//! it among the sources that must have reported before anything is removed at start-up
//! ([`PodConfig::seen_all`] covers the static ones).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::mirror::{CONFIG_MIRROR_ANNOTATION, CONFIG_SEEN_ANNOTATION};
use crate::sources::{CONFIG_SOURCE_ANNOTATION, full_name};

/// What the pod workers are told about a static pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PodOp {
    /// A pod not seen before: start it.
    Add(Box<Pod>),
    /// A pod whose desired state changed.
    Update(Box<Pod>),
    /// The pod with this UID is gone from its source: stop it.
    Remove(String),
    /// A pod not taken because another source already has a pod of that name and namespace (upstream's
    /// `FailedValidation ... duplicate pod name`, across sources): the message says which.
    Rejected(String),
}

/// Every static source's pods, by UID.
#[derive(Debug, Default)]
pub struct PodConfig {
    pods: BTreeMap<&'static str, HashMap<String, Pod>>,
    expected: BTreeSet<&'static str>,
    seen: BTreeSet<&'static str>,
}

impl PodConfig {
    /// A config waiting for `sources` (`file`, `http`) to report.
    pub fn new(sources: &[&'static str]) -> PodConfig {
        PodConfig {
            expected: sources.iter().copied().collect(),
            ..Default::default()
        }
    }

    /// Whether every expected source has sent at least one snapshot (upstream's `SeenAllSources`, without
    /// the API server).
    pub fn seen_all(&self) -> bool {
        self.expected.is_subset(&self.seen)
    }

    /// Every static pod, in no particular order.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values().flat_map(|m| m.values())
    }

    /// Takes `source`'s new snapshot and returns what changed. `now` stamps `config.seen` on new pods.
    pub fn merge(&mut self, source: &'static str, snapshot: Vec<Pod>, now: Timestamp) -> Vec<PodOp> {
        self.seen.insert(source);
        let old = self.pods.remove(source).unwrap_or_default();
        let mut new: HashMap<String, Pod> = HashMap::with_capacity(snapshot.len());
        let mut ops = Vec::new();
        for mut pod in snapshot {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let name = full_name(&pod);
            let taken = self
                .pods
                .iter()
                .find(|(_, pods)| pods.values().any(|p| full_name(p) == name))
                .map(|(other, _)| *other);
            if let Some(other) = taken {
                ops.push(PodOp::Rejected(format!(
                    "error validating pod {name}({uid}) from {source} due to duplicate pod name {:?} \
                     (already from {other}), ignoring",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                )));
                continue;
            }
            let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
            annotations.insert(CONFIG_SOURCE_ANNOTATION.to_string(), source.to_string());
            match old.get(&uid) {
                None => {
                    annotations.insert(CONFIG_SEEN_ANNOTATION.to_string(), seen_stamp(now));
                    ops.push(PodOp::Add(Box::new(pod.clone())));
                }
                Some(previous) => {
                    // Keep the first sighting, as upstream keeps the local annotations of the stored pod.
                    if let Some(seen) = annotation(previous, CONFIG_SEEN_ANNOTATION) {
                        annotations.insert(CONFIG_SEEN_ANNOTATION.to_string(), seen.to_string());
                    }
                    if !semantically_equal(previous, &pod) {
                        ops.push(PodOp::Update(Box::new(pod.clone())));
                    }
                }
            }
            new.insert(uid, pod);
        }
        let mut removed: Vec<String> = old.into_keys().filter(|uid| !new.contains_key(uid)).collect();
        removed.sort();
        ops.extend(removed.into_iter().map(PodOp::Remove));
        self.pods.insert(source, new);
        ops
    }
}

/// Upstream's `config.seen` format, `2006-01-02T15:04:05.000000000Z07:00`: nanoseconds, always nine digits.
pub fn seen_stamp(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Upstream's `checkAndUpdatePod` comparison: spec, labels, deletion timestamp and grace, and annotations
/// other than the kubelet's own local ones.
fn semantically_equal(a: &Pod, b: &Pod) -> bool {
    let local = [
        CONFIG_SOURCE_ANNOTATION,
        CONFIG_MIRROR_ANNOTATION,
        CONFIG_SEEN_ANNOTATION,
    ];
    let annotations = |p: &Pod| {
        p.metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| !local.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    a.spec == b.spec
        && a.metadata.labels == b.metadata.labels
        && a.metadata.deletion_timestamp == b.metadata.deletion_timestamp
        && a.metadata.deletion_grace_period_seconds == b.metadata.deletion_grace_period_seconds
        && annotations(a) == annotations(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, image: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-29T10:00:00.5Z".parse().unwrap()
    }

    fn has(c: &PodConfig, uid: &str) -> bool {
        c.pods().any(|p| p.metadata.uid.as_deref() == Some(uid))
    }

    fn uids(ops: &[PodOp]) -> Vec<String> {
        ops.iter()
            .map(|op| match op {
                PodOp::Add(p) => format!("add {}", p.metadata.uid.as_deref().unwrap()),
                PodOp::Update(p) => format!("update {}", p.metadata.uid.as_deref().unwrap()),
                PodOp::Remove(uid) => format!("remove {uid}"),
                PodOp::Rejected(msg) => format!("rejected {msg}"),
            })
            .collect()
    }

    #[test]
    fn new_uids_are_added_with_source_and_seen_annotations() {
        let mut c = PodConfig::new(&["file"]);
        let ops = c.merge("file", vec![pod("a", "i"), pod("b", "i")], now());
        assert_eq!(uids(&ops), ["add a", "add b"]);
        let PodOp::Add(p) = &ops[0] else { panic!() };
        assert_eq!(annotation(p, CONFIG_SOURCE_ANNOTATION), Some("file"));
        assert_eq!(
            annotation(p, CONFIG_SEEN_ANNOTATION),
            Some("2026-11-29T10:00:00.500000000Z")
        );
    }

    #[test]
    fn unchanged_snapshot_does_nothing_and_keeps_the_first_seen() {
        let mut c = PodConfig::new(&["file"]);
        c.merge("file", vec![pod("a", "i")], now());
        let later = "2026-11-29T11:00:00Z".parse().unwrap();
        assert!(c.merge("file", vec![pod("a", "i")], later).is_empty());
        let stored = c.pods().next().unwrap();
        assert_eq!(
            annotation(stored, CONFIG_SEEN_ANNOTATION),
            Some("2026-11-29T10:00:00.500000000Z")
        );
    }

    #[test]
    fn gone_uids_are_removed_and_changed_specs_updated() {
        let mut c = PodConfig::new(&["file"]);
        c.merge("file", vec![pod("a", "i"), pod("b", "i")], now());
        let ops = c.merge("file", vec![pod("b", "j"), pod("c", "i")], now());
        assert_eq!(uids(&ops), ["update b", "add c", "remove a"]);
        assert!(has(&c, "b") && has(&c, "c") && !has(&c, "a"));
    }

    #[test]
    fn status_or_local_annotations_alone_are_not_an_update() {
        let mut c = PodConfig::new(&["http"]);
        c.merge("http", vec![pod("a", "i")], now());
        let mut changed = pod("a", "i");
        changed.status = Some(Default::default());
        changed.metadata.annotations = Some(
            [(CONFIG_MIRROR_ANNOTATION.to_string(), "x".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(c.merge("http", vec![changed], now()).is_empty());
        let mut labelled = pod("a", "i");
        labelled.metadata.labels = Some([("k".to_string(), "v".to_string())].into_iter().collect());
        assert_eq!(uids(&c.merge("http", vec![labelled], now())), ["update a"]);
    }

    #[test]
    fn sources_are_separate_and_all_must_report() {
        let mut c = PodConfig::new(&["file", "http"]);
        assert!(!c.seen_all());
        c.merge("file", vec![pod("a", "i")], now());
        assert!(!c.seen_all());
        // An empty first snapshot counts as having reported.
        assert!(c.merge("http", vec![], now()).is_empty());
        assert!(c.seen_all());
        // One source's snapshot never removes another's pods.
        assert!(c.merge("http", vec![pod("h", "i")], now()).len() == 1);
        assert!(has(&c, "a"));
        assert_eq!(uids(&c.merge("file", vec![], now())), ["remove a"]);
        assert!(has(&c, "h"));
    }

    #[test]
    fn a_name_another_source_has_is_rejected() {
        let mut c = PodConfig::new(&["file", "http"]);
        c.merge("file", vec![pod("a", "i")], now());
        let mut same_name = pod("h", "i");
        same_name.metadata.name = Some("p-a".into());
        let ops = c.merge("http", vec![same_name, pod("b", "i")], now());
        assert_eq!(ops.len(), 2, "{ops:?}");
        let PodOp::Rejected(msg) = &ops[0] else {
            panic!("{ops:?}")
        };
        assert!(
            msg.contains("duplicate pod name \"p-a\"") && msg.contains("from file"),
            "{msg}"
        );
        assert_eq!(uids(&ops[1..]), ["add b"]);
        assert!(!has(&c, "h"));
    }

    #[test]
    fn no_sources_means_seen_all() {
        assert!(PodConfig::new(&[]).seen_all());
    }
}
