//! `recreate.go`'s decisions: every old pod goes before any new one is created.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use super::util;

/// The pods of a Deployment by the UID of the ReplicaSet that controls them (`getPodMapForDeployment`;
/// inactive pods included).
pub type PodMap = HashMap<String, Vec<Arc<Pod>>>;

/// `oldPodsRunning`: an old ReplicaSet still reports pods, or the pod map holds a pod of an old ReplicaSet
/// that has not finished (Unknown and terminating pods count).
pub fn old_pods_running(new: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>], pods: &PodMap) -> bool {
    if util::sum_actual(old) > 0 {
        return true;
    }
    let new_uid = new.and_then(|rs| rs.metadata.uid.as_deref());
    pods.iter()
        .filter(|(uid, _)| Some(uid.as_str()) != new_uid)
        .flat_map(|(_, pods)| pods)
        .any(|p| !matches!(crate::podutil::phase(p), "Failed" | "Succeeded"))
}

/// The names of the old ReplicaSets to scale to 0 (`scaleDownOldReplicaSetsForRecreate`).
pub fn scale_down_old(old: &[Arc<ReplicaSet>]) -> Vec<String> {
    util::active(old)
        .iter()
        .map(|rs| rs.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::rs;
    use serde_json::json;

    fn pod(phase: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"phase": phase}})).unwrap(),
        )
    }

    #[test]
    fn old_pods_keep_the_new_replica_set_waiting_until_they_finish() {
        let old = Arc::new(rs("old", 0, json!({"status": {"replicas": 0}})));
        let new = Arc::new(rs("new", 0, json!({})));
        let mut map = PodMap::new();
        map.insert("old".into(), vec![pod("Running")]);
        map.insert("new".into(), vec![pod("Running")]);
        assert!(old_pods_running(Some(&new), std::slice::from_ref(&old), &map));
        map.insert("old".into(), vec![pod("Succeeded"), pod("Failed")]);
        assert!(!old_pods_running(Some(&new), std::slice::from_ref(&old), &map));
        map.insert("old".into(), vec![pod("Unknown")]);
        assert!(old_pods_running(Some(&new), std::slice::from_ref(&old), &map));
        map.clear();
        let reporting = Arc::new(rs("old", 0, json!({"status": {"replicas": 2}})));
        assert!(
            old_pods_running(None, &[reporting], &map),
            "status still counts pods"
        );
        let active = Arc::new(rs("a", 2, json!({})));
        assert_eq!(scale_down_old(&[old, active]), ["a"]);
    }
}
