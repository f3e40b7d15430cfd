//! The printers of the kinds the policy controllers keep (printers.go 1.32: printReplicationController,
//! printPodDisruptionBudget, printResourceQuota). LimitRanges use upstream's NAME / CREATED AT printer,
//! which is our generic one. Same conventions as `table.rs`: pure functions of the stored JSON.

use jiff::Timestamp;
use serde_json::Value;

use super::{
    AGE, CONTAINERS, Column, IMAGES, NAME, age, col, desired_replicas, format_labels, get, int,
    layout_containers, name, wide,
};

pub(super) const REPLICATION_CONTROLLER_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Desired",
        "integer",
        "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero \
         and unspecified. Defaults to 1. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
    ),
    col(
        "Current",
        "integer",
        "Replicas is the most recently observed number of replicas. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
    ),
    col(
        "Ready",
        "integer",
        "The number of ready replicas for this replication controller.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it \
         is defaulted to the labels present on the Pod template. Label keys and values that must match in \
         order to be controlled by this replication controller, if empty defaulted to labels on Pod \
         template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

pub(super) fn replication_controller_cells(rc: &Value, now: Timestamp) -> Vec<Value> {
    let (containers, images) = layout_containers(rc, &["spec", "template", "spec"]);
    vec![
        name(rc),
        desired_replicas(rc).into(),
        int(rc, &["status", "replicas"]).into(),
        int(rc, &["status", "readyReplicas"]).into(),
        age(rc, now),
        containers,
        images,
        format_labels(get(rc, &["spec", "selector"])).into(),
    ]
}

pub(super) const POD_DISRUPTION_BUDGET_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Min Available",
        "string",
        "The minimum number of pods that must be available simultaneously.  This can be either an integer \
         or a string specifying a percentage, e.g. \"28%\".",
    ),
    col(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer \
         or a string specifying a percentage, e.g. \"28%\".",
    ),
    col(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

/// `IntOrString.String()`, or `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

pub(super) fn pod_disruption_budget_cells(pdb: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(pdb),
        int_or_string(get(pdb, &["spec", "minAvailable"])).into(),
        int_or_string(get(pdb, &["spec", "maxUnavailable"])).into(),
        int(pdb, &["status", "disruptionsAllowed"]).into(),
        age(pdb, now),
    ]
}

pub(super) const RESOURCE_QUOTA_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention \
         on the node.",
    ),
];

/// A quantity as `Quantity.String()` prints it (`0` when absent).
fn quantity(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str) {
        None => "0".into(),
        Some(s) => api::pod::parse_quantity(s).map_or_else(|_| s.to_string(), |q| q.canonical()),
    }
}

/// `used/hard` of every hard limit, sorted by name; `limits.*` go to the LIMIT column.
pub(super) fn resource_quota_cells(quota: &Value, now: Timestamp) -> Vec<Value> {
    let hard = get(quota, &["status", "hard"]).and_then(Value::as_object);
    let used = get(quota, &["status", "used"]);
    let mut names: Vec<&String> = hard.into_iter().flat_map(|h| h.keys()).collect();
    names.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for n in names {
        let cell = format!(
            "{n}: {}/{}",
            quantity(used.and_then(|u| u.get(n))),
            quantity(hard.and_then(|h| h.get(n)))
        );
        let pieces: Vec<&str> = n.split('.').collect();
        if pieces.len() > 1 && pieces[0] == "limits" {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    vec![
        name(quota),
        age(quota, now),
        request.join(", ").into(),
        limit.join(", ").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    #[test]
    fn replication_controller_rows() {
        let rc = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "selector": {"b": "2", "a": "1"},
                     "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}, {"name": "d", "image": "busybox"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            replication_controller_cells(&rc, now()),
            vec![
                json!("web"),
                json!(3),
                json!(2),
                json!(1),
                json!("10m"),
                json!("c,d"),
                json!("nginx,busybox"),
                json!("a=1,b=2")
            ]
        );
    }

    #[test]
    fn pod_disruption_budget_rows_show_na_for_the_unset_bound() {
        let pdb = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 2}});
        assert_eq!(
            pod_disruption_budget_cells(&pdb, now()),
            vec![json!("p"), json!("50%"), json!("N/A"), json!(2), json!("10m")]
        );
        let pdb = json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": 1}});
        assert_eq!(
            pod_disruption_budget_cells(&pdb, now())[1..4],
            [json!("N/A"), json!("1"), json!(0)]
        );
    }

    #[test]
    fn resource_quota_rows_split_requests_and_limits() {
        let q = json!({"metadata": {"name": "q", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"hard": {"pods": "2", "limits.memory": "1Gi", "requests.cpu": "1", "limits.cpu": "2"},
                       "used": {"pods": "1", "limits.memory": "512Mi", "requests.cpu": "500m"}}});
        assert_eq!(
            resource_quota_cells(&q, now()),
            vec![
                json!("q"),
                json!("10m"),
                json!("pods: 1/2, requests.cpu: 500m/1"),
                json!("limits.cpu: 0/2, limits.memory: 512Mi/1Gi")
            ]
        );
    }
}
