//! Garbage-collection policy on DELETE (upstream `staging/src/k8s.io/apiserver/pkg/registry/generic/
//! registry/store.go`: `shouldOrphanDependents`, `shouldDeleteDependents`,
//! `deletionFinalizersForGarbageCollection`; reference §9.2).
//!
//! A deletion that should orphan or foreground-delete the object's dependents leaves the object in place
//! with a deletionTimestamp and the `orphan` or `foregroundDeletion` finalizer; the garbage collector (a
//! controller) does the work and removes the finalizer, and the registry then completes the deletion.

use super::ResourceInfo;

/// upstream `metav1.FinalizerOrphanDependents`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// upstream `metav1.FinalizerDeleteDependents`.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// The response warning of a Job deletion that relied on the Orphan default (upstream
/// `pkg/registry/batch/job/storage/storage.go: deleteOptionWarnings`).
pub const JOB_ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set \
                                      propagationPolicy=Background to remove them or set \
                                      propagationPolicy=Orphan to suppress this warning";

/// `metav1.DeletionPropagation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Leave the dependents, without their owner reference.
    Orphan,
    /// Delete the object now; the collector deletes the dependents afterwards.
    Background,
    /// Delete the blocking dependents first, then the object.
    Foreground,
}

impl Propagation {
    /// The `propagationPolicy` value.
    pub fn parse(s: &str) -> Option<Propagation> {
        match s {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }
}

/// The GC-relevant part of the DeleteOptions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// `propagationPolicy`.
    pub propagation: Option<Propagation>,
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
}

/// The resource's `DefaultGarbageCollectionPolicy`: Orphan for batch/v1 Jobs and v1
/// ReplicationControllers (kept for compatibility), Background for everything else.
pub fn default_propagation(info: &ResourceInfo) -> Propagation {
    match (info.group, info.version, info.plural) {
        ("batch", "v1", "jobs") | ("", "v1", "replicationcontrollers") => Propagation::Orphan,
        _ => Propagation::Background,
    }
}

/// Whether the response carries [`JOB_ORPHAN_WARNING`]: a Job deletion without any policy.
pub fn warns(info: &ResourceInfo, policy: &Policy) -> bool {
    policy.propagation.is_none()
        && policy.orphan_dependents.is_none()
        && default_propagation(info) == Propagation::Orphan
        && info.plural == "jobs"
}

/// upstream `shouldOrphanDependents`: the options, then a GC finalizer already present, then the default.
fn should_orphan(info: &ResourceInfo, finalizers: &[String], policy: &Policy) -> bool {
    if let Some(o) = policy.orphan_dependents {
        return o;
    }
    if let Some(p) = policy.propagation {
        return p == Propagation::Orphan;
    }
    for f in finalizers {
        match f.as_str() {
            FINALIZER_ORPHAN => return true,
            FINALIZER_FOREGROUND => return false,
            _ => {}
        }
    }
    default_propagation(info) == Propagation::Orphan
}

/// upstream `shouldDeleteDependents`.
fn should_delete_in_foreground(finalizers: &[String], policy: &Policy) -> bool {
    if policy.orphan_dependents.is_some() {
        return false;
    }
    if let Some(p) = policy.propagation {
        return p == Propagation::Foreground;
    }
    finalizers.iter().any(|f| f == FINALIZER_FOREGROUND)
}

/// upstream `deletionFinalizersForGarbageCollection`: the object's finalizers with the GC ones replaced
/// as the policy says, or `None` when that leaves the set as it was.
pub fn deletion_finalizers(
    info: &ResourceInfo,
    finalizers: &[String],
    policy: &Policy,
) -> Option<Vec<String>> {
    let mut out: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if should_orphan(info, finalizers, policy) {
        out.push(FINALIZER_ORPHAN.into());
    }
    if should_delete_in_foreground(finalizers, policy) {
        out.push(FINALIZER_FOREGROUND.into());
    }
    let set = |v: &[String]| v.iter().cloned().collect::<std::collections::BTreeSet<String>>();
    (set(&out) != set(finalizers)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::resources;

    fn policy(propagation: Option<Propagation>, orphan_dependents: Option<bool>) -> Policy {
        Policy {
            propagation,
            orphan_dependents,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finalizers_follow_the_options_then_existing_finalizers_then_the_default() {
        let jobs = resources::find("batch", "v1", "jobs").unwrap();
        let deployments = resources::find("apps", "v1", "deployments").unwrap();
        use Propagation::*;
        type Case<'a> = (&'a ResourceInfo, &'a [&'a str], Policy, Option<&'a [&'a str]>);
        let cases: &[Case] = &[
            (deployments, &[], policy(None, None), None),
            (deployments, &[], policy(Some(Background), None), None),
            (deployments, &[], policy(Some(Orphan), None), Some(&["orphan"])),
            (
                deployments,
                &[],
                policy(Some(Foreground), None),
                Some(&["foregroundDeletion"]),
            ),
            (deployments, &[], policy(None, Some(true)), Some(&["orphan"])),
            (deployments, &["x"], policy(None, Some(false)), None),
            // Jobs orphan by default, unless told otherwise.
            (jobs, &[], policy(None, None), Some(&["orphan"])),
            (jobs, &[], policy(Some(Background), None), None),
            // A GC finalizer already there decides when the options say nothing.
            (deployments, &["foregroundDeletion"], policy(None, None), None),
            (jobs, &["foregroundDeletion"], policy(None, None), None),
            // A second DELETE with another policy switches it (keeping other finalizers).
            (
                deployments,
                &["a", "orphan"],
                policy(Some(Foreground), None),
                Some(&["a", "foregroundDeletion"]),
            ),
            (
                deployments,
                &["foregroundDeletion"],
                policy(Some(Orphan), None),
                Some(&["orphan"]),
            ),
            (
                deployments,
                &["orphan"],
                policy(Some(Background), None),
                Some(&[]),
            ),
        ];
        for (info, have, p, want) in cases {
            let got = deletion_finalizers(info, &strings(have), p);
            assert_eq!(got, want.map(strings), "{} {have:?} {p:?}", info.plural);
        }
    }

    #[test]
    fn only_job_deletions_without_a_policy_warn() {
        let jobs = resources::find("batch", "v1", "jobs").unwrap();
        let pods = resources::find("", "v1", "pods").unwrap();
        assert!(warns(jobs, &policy(None, None)));
        assert!(!warns(jobs, &policy(Some(Propagation::Orphan), None)));
        assert!(!warns(jobs, &policy(None, Some(false))));
        assert!(!warns(pods, &policy(None, None)));
    }
}
