//! Indexed Jobs (`indexed_job_utils.go`): completion indexes on pods, the interval form of
//! `status.completedIndexes` (`0-2,4`), which indexes to create next, and which duplicate-index pods to delete.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec,
};

use crate::podutil;

/// `batch.kubernetes.io/job-completion-index`: annotation and (PodIndexLabel, on since 1.28) label.
pub const COMPLETION_INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
/// The env var every container of an Indexed Job's pod gets.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// upstream `names.MaxGeneratedNameLength` (63 less the 5-character suffix).
const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// One run of consecutive indexes, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// The first index.
    pub first: i32,
    /// The last index.
    pub last: i32,
}

/// Sorted, disjoint, non-adjacent runs of indexes (upstream `orderedIntervals`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals(pub Vec<Interval>);

impl Intervals {
    /// Parse `0-2,4` (upstream `parseIndexesFromString`): bad pieces and indexes ≥ `completions` are dropped.
    pub fn parse(s: &str, completions: i32) -> Intervals {
        let mut out: Vec<Interval> = Vec::new();
        for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (first, last) = match piece.split_once('-') {
                Some((a, b)) => match (a.parse::<i32>(), b.parse::<i32>()) {
                    (Ok(a), Ok(b)) => (a, b),
                    _ => continue,
                },
                None => match piece.parse::<i32>() {
                    Ok(a) => (a, a),
                    Err(_) => continue,
                },
            };
            if first < 0 || first >= completions || last < first {
                continue;
            }
            let last = last.min(completions - 1);
            match out.last_mut() {
                Some(prev) if first <= prev.last + 1 => prev.last = prev.last.max(last),
                _ => out.push(Interval { first, last }),
            }
        }
        Intervals(out)
    }

    /// How many indexes.
    pub fn total(&self) -> i32 {
        self.0.iter().map(|i| i.last - i.first + 1).sum()
    }

    /// Whether `ix` is in one of the runs.
    pub fn has(&self, ix: i32) -> bool {
        self.0.iter().any(|i| i.first <= ix && ix <= i.last)
    }

    /// These runs plus `new` (upstream `withOrderedIndexes`).
    pub fn with_indexes(&self, new: impl IntoIterator<Item = i32>) -> Intervals {
        let mut all: BTreeSet<i32> = self.0.iter().flat_map(|i| i.first..=i.last).collect();
        all.extend(new);
        let mut out: Vec<Interval> = Vec::new();
        for ix in all {
            match out.last_mut() {
                Some(prev) if ix == prev.last + 1 => prev.last = ix,
                _ => out.push(Interval { first: ix, last: ix }),
            }
        }
        Intervals(out)
    }
}

/// Upstream's form: a run of two is written `3,4`, longer runs `0-2`.
impl std::fmt::Display for Intervals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, i) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", i.first)?;
            if i.last > i.first {
                let sep = if i.last == i.first + 1 { "," } else { "-" };
                write!(f, "{sep}{}", i.last)?;
            }
        }
        Ok(())
    }
}

/// The pod's completion index from its annotation, `None` when absent or invalid.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX_KEY)?
        .parse::<i32>()
        .ok()
        .filter(|i| *i >= 0)
}

/// A valid index below `completions`.
pub fn valid_index(pod: &Pod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|i| *i < completions)
}

/// `calculateSucceededIndexes`: the indexes recorded in status, and those plus every succeeded pod still
/// carrying the tracking finalizer (not counted yet).
pub fn succeeded_indexes(completed: &str, pods: &[&Pod], completions: i32) -> (Intervals, Intervals) {
    let prev = Intervals::parse(completed, completions);
    let new: BTreeSet<i32> = pods
        .iter()
        .filter(|p| podutil::phase(p) == "Succeeded" && super::has_tracking_finalizer(p))
        .filter_map(|p| valid_index(p, completions))
        .collect();
    let all = prev.with_indexes(new);
    (prev, all)
}

/// `firstPendingIndexes`: the `count` lowest indexes below `completions` that neither succeeded nor have an
/// active pod.
pub fn first_pending_indexes(
    succeeded: &Intervals,
    active: &[&Pod],
    count: usize,
    completions: i32,
) -> Vec<i32> {
    let taken: BTreeSet<i32> = active
        .iter()
        .filter_map(|p| valid_index(p, completions))
        .collect();
    (0..completions)
        .filter(|ix| !succeeded.has(*ix) && !taken.contains(ix))
        .take(count)
        .collect()
}

/// `appendDuplicatedIndexPodsForRemoval`: active pods without a valid index, out of range, or duplicating
/// another active pod's index (the one kept is the last by deletion order). Returns (to remove, kept).
pub fn duplicate_index_pods<'a>(active: &[&'a Pod], completions: i32) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let mut rm = Vec::new();
    let mut left = Vec::new();
    let mut by_index: BTreeMap<i32, Vec<&'a Pod>> = BTreeMap::new();
    for p in active {
        match valid_index(p, completions) {
            Some(ix) => by_index.entry(ix).or_default().push(p),
            None => rm.push(*p),
        }
    }
    for (_, mut group) in by_index {
        super::decide::sort_for_deletion(&mut group);
        let keep = group.pop().expect("a group has a pod");
        rm.extend(group);
        left.push(keep);
    }
    (rm, left)
}

/// `podGenerateNameWithIndex`: `<job>-<i>-`, the job name cut so the prefix stays a valid generated name.
pub fn generate_name_with_index(job: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let prefix = format!("{job}{suffix}");
    if prefix.len() > MAX_GENERATED_NAME_LENGTH {
        // Job names are DNS subdomains (ASCII), so byte slicing is safe.
        let keep = MAX_GENERATED_NAME_LENGTH
            .saturating_sub(suffix.len())
            .min(job.len());
        format!("{}{suffix}", &job[..keep])
    } else {
        prefix
    }
}

/// `addCompletionIndexEnvVariables`: `JOB_COMPLETION_INDEX` from a fieldRef to the index label, on every
/// container and init container that lacks it.
pub fn add_completion_index_env(template: &mut PodTemplateSpec) {
    fn add(c: &mut Container) {
        let env = c.env.get_or_insert_with(Vec::new);
        if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
            return;
        }
        env.push(EnvVar {
            name: COMPLETION_INDEX_ENV.to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.labels['{COMPLETION_INDEX_KEY}']"),
                }),
                ..Default::default()
            }),
        });
    }
    if let Some(spec) = template.spec.as_mut() {
        spec.containers.iter_mut().for_each(add);
        spec.init_containers.iter_mut().flatten().for_each(add);
    }
}

/// The template of index `index`'s pod: annotation and label, hostname `<job>-<i>`.
pub fn template_for_index(template: &PodTemplateSpec, job: &str, index: i32) -> PodTemplateSpec {
    let mut t = template.clone();
    let meta = t.metadata.get_or_insert_with(Default::default);
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(COMPLETION_INDEX_KEY.to_string(), index.to_string());
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(COMPLETION_INDEX_KEY.to_string(), index.to_string());
    if let Some(spec) = t.spec.as_mut() {
        spec.hostname = Some(format!("{job}-{index}"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, index: Option<&str>, phase: &str) -> Pod {
        let mut v = json!({"metadata": {"name": name, "uid": name, "finalizers": [super::super::TRACKING_FINALIZER]},
                           "status": {"phase": phase}});
        if let Some(i) = index {
            v["metadata"]["annotations"] = json!({COMPLETION_INDEX_KEY: i});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn intervals_are_written_in_upstreams_form() {
        let cases: &[(&[i32], &str)] = &[
            (&[], ""),
            (&[0], "0"),
            (&[0, 1], "0,1"),
            (&[0, 1, 2], "0-2"),
            (&[0, 1, 2, 4], "0-2,4"),
            (&[1, 3, 4, 6, 7, 8, 10], "1,3,4,6-8,10"),
        ];
        for (ixs, want) in cases {
            let got = Intervals::default().with_indexes(ixs.iter().copied());
            assert_eq!(got.to_string(), *want, "{ixs:?}");
            assert_eq!(Intervals::parse(want, 100), got, "round trip of {want:?}");
            assert_eq!(got.total(), ixs.len() as i32);
        }
    }

    #[test]
    fn parsing_drops_bad_and_out_of_range_indexes() {
        assert_eq!(Intervals::parse("0-2,x,5-9", 7).to_string(), "0-2,5,6");
        assert_eq!(Intervals::parse("3,-1,8", 5).to_string(), "3");
        assert_eq!(
            Intervals::parse("0,1,2", 3).to_string(),
            "0-2",
            "adjacent runs merge"
        );
        assert!(Intervals::parse("0-2", 3).has(2));
        assert!(!Intervals::parse("0-2", 3).has(3));
    }

    #[test]
    fn succeeded_indexes_add_uncounted_succeeded_pods() {
        let a = pod("a", Some("1"), "Succeeded");
        let b = pod("b", Some("3"), "Succeeded");
        let c = pod("c", Some("9"), "Succeeded"); // out of range
        let d = pod("d", Some("2"), "Running");
        let (prev, all) = succeeded_indexes("0", &[&a, &b, &c, &d], 5);
        assert_eq!(prev.to_string(), "0");
        assert_eq!(all.to_string(), "0,1,3");
    }

    #[test]
    fn pending_indexes_are_the_lowest_free_ones() {
        let succeeded = Intervals::parse("0,2", 6);
        let a = pod("a", Some("1"), "Running");
        assert_eq!(first_pending_indexes(&succeeded, &[&a], 2, 6), vec![3, 4]);
        assert_eq!(first_pending_indexes(&succeeded, &[&a], 10, 6), vec![3, 4, 5]);
        assert_eq!(
            first_pending_indexes(&Intervals::default(), &[], 3, 3),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn duplicate_and_invalid_index_pods_are_removed() {
        let a = pod("a", Some("0"), "Running");
        let b = pod("b", Some("0"), "Pending");
        let c = pod("c", None, "Running");
        let d = pod("d", Some("7"), "Running");
        let e = pod("e", Some("1"), "Running");
        let (rm, left) = duplicate_index_pods(&[&a, &b, &c, &d, &e], 3);
        let names = |v: &[&Pod]| {
            let mut n: Vec<String> = v.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
            n.sort();
            n
        };
        assert_eq!(
            names(&rm),
            ["b", "c", "d"],
            "the pending duplicate goes, the running one stays"
        );
        assert_eq!(names(&left), ["a", "e"]);
    }

    #[test]
    fn generated_names_carry_the_index() {
        assert_eq!(generate_name_with_index("idx", 2), "idx-2-");
        let long = "x".repeat(60);
        let g = generate_name_with_index(&long, 12);
        assert_eq!(g.len(), MAX_GENERATED_NAME_LENGTH);
        assert!(g.ends_with("-12-"));
    }

    #[test]
    fn index_templates_get_label_annotation_hostname_and_env() {
        let mut t: PodTemplateSpec = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "c", "image": "i"}], "initContainers": [{"name": "i", "image": "i"}]}
        }))
        .unwrap();
        add_completion_index_env(&mut t);
        add_completion_index_env(&mut t);
        let t = template_for_index(&t, "idx", 2);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["metadata"]["labels"][COMPLETION_INDEX_KEY], "2");
        assert_eq!(v["metadata"]["annotations"][COMPLETION_INDEX_KEY], "2");
        assert_eq!(v["spec"]["hostname"], "idx-2");
        for list in ["containers", "initContainers"] {
            let env = v["spec"][list][0]["env"].as_array().unwrap();
            assert_eq!(env.len(), 1, "added once");
            assert_eq!(env[0]["name"], COMPLETION_INDEX_ENV);
            assert_eq!(
                env[0]["valueFrom"]["fieldRef"]["fieldPath"],
                "metadata.labels['batch.kubernetes.io/job-completion-index']"
            );
        }
    }
}
