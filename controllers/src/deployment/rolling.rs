//! `rolling.go` as pure decisions: how far the new ReplicaSet may grow (`reconcileNewReplicaSet`) and which
//! old ReplicaSets shrink by how much (`reconcileOldReplicaSets`: `cleanupUnhealthyReplicas`, then
//! `scaleDownOldReplicaSetsForRollingUpdate`), within maxSurge and maxUnavailable.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::util::{self, replicas};
use crate::replicaset::{spec_replicas, status};

/// `reconcileNewReplicaSet`: the new ReplicaSet's next size, when it changes (down to spec.replicas if it
/// is larger, else up by `NewRSNewReplicas`).
pub fn reconcile_new(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new: &ReplicaSet,
) -> Result<Option<i32>, String> {
    let current = spec_replicas(new);
    let want = replicas(d);
    if current == want {
        return Ok(None);
    }
    if current > want {
        return Ok(Some(want));
    }
    let n = util::new_rs_new_replicas(d, all, new)?;
    Ok((n != current).then_some(n))
}

fn available(rs: &ReplicaSet) -> i32 {
    status(rs).available_replicas.unwrap_or(0)
}

/// `reconcileOldReplicaSets`: the scale-downs of old ReplicaSets, in the order they are made (a ReplicaSet
/// can appear twice: once to drop unhealthy replicas, once for availability). `all` holds every
/// ReplicaSet (old ones and the new one); `old_active` the old ones with replicas.
///
/// * `maxScaledDown = Σ spec − minAvailable − (new.spec − new.available)`; nothing when ≤ 0.
/// * Unhealthy replicas (`spec − available`) of old ReplicaSets, oldest first, up to maxScaledDown.
/// * Then, while `Σ available > minAvailable`, old ReplicaSets oldest first by up to the excess.
///
/// An impossible request (an old ReplicaSet with more available than wanted) scales nothing, as upstream,
/// which swallows that error.
pub fn reconcile_old(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    old_active: &[Arc<ReplicaSet>],
    new: &ReplicaSet,
) -> Vec<(String, i32)> {
    if util::sum_spec(old_active) == 0 {
        return Vec::new();
    }
    let all_pods = util::sum_spec(all);
    let min_available = replicas(d) - util::max_unavailable(d);
    let new_unavailable = spec_replicas(new) - available(new);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut olds: Vec<(Arc<ReplicaSet>, i32)> = old_active
        .iter()
        .map(|rs| (rs.clone(), spec_replicas(rs)))
        .collect();
    olds.sort_by(|a, b| util::by_creation(&a.0, &b.0));
    let mut steps = Vec::new();

    // cleanupUnhealthyReplicas
    let mut cleaned = 0;
    for (rs, size) in olds.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        if *size == 0 || *size == available(rs) {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(*size - available(rs));
        if down < 0 {
            return Vec::new();
        }
        *size -= down;
        cleaned += down;
        steps.push((rs.metadata.name.clone().unwrap_or_default(), *size));
    }

    // scaleDownOldReplicaSetsForRollingUpdate, over the cleaned-up old ones and the new one
    let available_pods: i32 = olds.iter().map(|(rs, _)| available(rs)).sum::<i32>() + available(new);
    if available_pods <= min_available {
        return steps;
    }
    let total = available_pods - min_available;
    let mut scaled = 0;
    for (rs, size) in olds.iter_mut() {
        if scaled >= total {
            break;
        }
        if *size == 0 {
            continue;
        }
        let down = (*size).min(total - scaled);
        *size -= down;
        scaled += down;
        steps.push((rs.metadata.name.clone().unwrap_or_default(), *size));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deployment, rs};
    use serde_json::json;

    #[test]
    fn the_new_replica_set_grows_within_the_surge_and_shrinks_to_spec() {
        let d = deployment(json!({})); // 3 replicas, surge 1
        let old = Arc::new(rs("old", 3, json!({})));
        let new = Arc::new(rs("new", 0, json!({})));
        let all = vec![old.clone(), new.clone()];
        assert_eq!(reconcile_new(&d, &all, &new), Ok(Some(1)));
        let new1 = Arc::new(rs("new", 1, json!({})));
        assert_eq!(
            reconcile_new(&d, &[old.clone(), new1.clone()], &new1),
            Ok(None),
            "3 + 1 is the most"
        );
        let big = Arc::new(rs("new", 5, json!({})));
        assert_eq!(reconcile_new(&d, std::slice::from_ref(&big), &big), Ok(Some(3)));
    }

    #[test]
    fn old_replica_sets_shrink_only_as_far_as_availability_allows() {
        let d = deployment(json!({})); // 3 replicas, surge 1, unavailable 0
        let old = Arc::new(rs(
            "old",
            3,
            json!({"status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        // The new pod is not available yet: 4 − 3 − 1 = 0, nothing moves.
        let new = Arc::new(rs("new", 1, json!({"status": {"replicas": 1}})));
        let all = vec![old.clone(), new.clone()];
        assert!(reconcile_old(&d, &all, std::slice::from_ref(&old), &new).is_empty());
        // Once it is available, one old replica goes.
        let new = Arc::new(rs(
            "new",
            1,
            json!({"status": {"replicas": 1, "availableReplicas": 1}}),
        ));
        let all = vec![old.clone(), new.clone()];
        assert_eq!(
            reconcile_old(&d, &all, std::slice::from_ref(&old), &new),
            vec![("old".to_string(), 2)]
        );
    }

    #[test]
    fn unhealthy_old_replicas_are_removed_first() {
        // 10 replicas, surge 3, unavailable 2; old has 2 unavailable of 10, new 3 wanted, 3 available.
        let d = deployment(
            json!({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}}}),
        );
        let old = Arc::new(rs(
            "old",
            10,
            json!({"status": {"replicas": 10, "availableReplicas": 8}}),
        ));
        let new = Arc::new(rs(
            "new",
            3,
            json!({"status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        let all = vec![old.clone(), new.clone()];
        // maxScaledDown = 13 − 8 − 0 = 5: 2 unhealthy first (10 → 8); available 11 > 8: 3 more (8 → 5).
        assert_eq!(
            reconcile_old(&d, &all, std::slice::from_ref(&old), &new),
            vec![("old".to_string(), 8), ("old".to_string(), 5)]
        );
    }

    #[test]
    fn more_available_than_wanted_scales_nothing() {
        let d = deployment(json!({}));
        let old = Arc::new(rs(
            "old",
            1,
            json!({"status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        let new = Arc::new(rs(
            "new",
            3,
            json!({"status": {"replicas": 3, "availableReplicas": 3}}),
        ));
        let all = vec![old.clone(), new.clone()];
        assert!(reconcile_old(&d, &all, std::slice::from_ref(&old), &new).is_empty());
    }
}
