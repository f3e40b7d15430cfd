//! The ReplicationController controller (`pkg/controller/replication`, component
//! `replication-controller`): upstream runs the ReplicaSet controller over ReplicationControllers
//! converted to ReplicaSets (`conversion.go`), and so does this module. [`crate::replicaset`] is generic
//! over [`ReplicaSetKind`]; what is here is the conversion, both ways, as pure functions.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tokio_util::sync::CancellationToken;

use crate::Context;
use crate::replicaset::{ReplicaSetKind, start_for};

/// The event source.
pub const COMPONENT: &str = "replication-controller";

/// Register the handlers and return the workers' future (`--concurrent-rc-syncs` 5, as ReplicaSets).
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    start_for::<ReplicationController>(ctx, cancel)
}

impl ReplicaSetKind for ReplicationController {
    const API_VERSION: &'static str = "v1";
    const KIND: &'static str = "ReplicationController";
    const COMPONENT: &'static str = COMPONENT;
    const QUEUE: &'static str = "replicationmanager";

    fn as_replica_set(&self) -> Cow<'_, ReplicaSet> {
        Cow::Owned(to_replica_set(self))
    }

    fn with_status(mut self, status: ReplicaSetStatus) -> Self {
        self.status = Some(to_rc_status(status));
        self
    }
}

/// upstream `conversion.go` `convertRCtoRS`: the selector map becomes `matchLabels` (an empty map stays
/// an empty selector, which selects nothing), everything else is copied.
pub fn to_replica_set(rc: &ReplicationController) -> ReplicaSet {
    let spec = rc.spec.clone().unwrap_or_default();
    let status = rc.status.clone().map(|s| ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.map(|cs| {
            cs.into_iter()
                .map(|c| ReplicaSetCondition {
                    type_: c.type_,
                    status: c.status,
                    last_transition_time: c.last_transition_time,
                    reason: c.reason,
                    message: c.message,
                })
                .collect()
        }),
        terminating_replicas: None,
    });
    ReplicaSet {
        metadata: rc.metadata.clone(),
        spec: Some(ReplicaSetSpec {
            replicas: spec.replicas,
            min_ready_seconds: spec.min_ready_seconds,
            selector: LabelSelector {
                match_labels: spec.selector.filter(|s| !s.is_empty()),
                match_expressions: None,
            },
            template: spec.template,
        }),
        status,
    }
}

/// A ReplicaSet status as the ReplicationController's (`convertRSStatusToRC`).
pub fn to_rc_status(s: ReplicaSetStatus) -> ReplicationControllerStatus {
    ReplicationControllerStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.map(|cs| {
            cs.into_iter()
                .map(|c| ReplicationControllerCondition {
                    type_: c.type_,
                    status: c.status,
                    last_transition_time: c.last_transition_time,
                    reason: c.reason,
                    message: c.message,
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicaset::{calculate_status, selects, spec_replicas};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn rc(selector: serde_json::Value) -> ReplicationController {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "generation": 3},
            "spec": {
                "replicas": 2,
                "selector": selector,
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}
            },
            "status": {"replicas": 1, "readyReplicas": 1, "observedGeneration": 2,
                       "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_replication_controller_is_the_replica_set_its_selector_map_describes() {
        let rs = to_replica_set(&rc(json!({"app": "web"})));
        assert_eq!(spec_replicas(&rs), 2);
        let labels: BTreeMap<String, String> = [("app".into(), "web".into())].into();
        let other: BTreeMap<String, String> = [("app".into(), "db".into())].into();
        assert!(selects(&rs, Some(&labels)));
        assert!(!selects(&rs, Some(&other)));
        let st = rs.status.as_ref().unwrap();
        assert_eq!(
            (st.replicas, st.ready_replicas, st.observed_generation),
            (1, Some(1), Some(2))
        );
        assert_eq!(
            st.conditions.as_ref().unwrap()[0].reason.as_deref(),
            Some("FailedCreate")
        );
        assert_eq!(rs.metadata.name.as_deref(), Some("web"));
    }

    #[test]
    fn an_empty_selector_map_selects_nothing() {
        let rs = to_replica_set(&rc(json!({})));
        let labels: BTreeMap<String, String> = [("app".into(), "web".into())].into();
        assert!(!selects(&rs, Some(&labels)));
    }

    #[test]
    fn the_computed_status_goes_back_onto_the_replication_controller() {
        let mut c = rc(json!({"app": "web"}));
        let rs = to_replica_set(&c);
        let st = calculate_status(&rs, &[], None, jiff::Timestamp::now());
        c = c.with_status(st);
        let s = c.status.unwrap();
        assert_eq!(s.replicas, 0);
        assert_eq!(s.ready_replicas, None);
        assert!(
            s.conditions.is_none(),
            "the failure condition is removed after a clean manage"
        );
    }
}
