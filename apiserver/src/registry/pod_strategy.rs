//! The pod strategy (upstream `pkg/registry/core/pod/strategy.go`): what the registry does to pods beyond
//! the generic rules: defaulting, the initial status, validation, the status/spec split, graceful deletion
//! and binding. Defaulting and validation themselves are in [`super::pod`].

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde_json::{Value, json};

use super::pod;
use crate::error::FieldError;

fn typed(obj: &Value) -> Result<Pod, String> {
    // Deserialised from the borrowed tree: no copy of the whole pod first.
    api::tree::pod(obj).map_err(|e| format!("Pod in version \"v1\" cannot be handled as a Pod: {e}"))
}

fn untyped(pod: &Pod) -> Value {
    api::tree::pod_to_tree(pod).expect("a Pod always serialises")
}

/// Create: defaulting, then the status a new pod starts with (`PrepareForCreate`).
pub fn prepare_create(obj: &mut Value) -> Result<(), String> {
    let mut p = typed(obj)?;
    pod::default_pod(&mut p);
    p.status = Some(pod::initial_status(&p));
    let metadata = obj.get("metadata").cloned();
    *obj = untyped(&p);
    if let Some(m) = metadata {
        obj["metadata"] = m;
    }
    Ok(())
}

/// Update: defaulting applies to every decoded pod, as upstream decodes with defaulting; the status
/// endpoint back-fills an empty qosClass; the ephemeralcontainers endpoint keeps everything but
/// `spec.ephemeralContainers` from the stored pod.
pub fn prepare_update(new: &mut Value, old: &Value, subresource: Option<&str>) -> Result<(), String> {
    if subresource == Some(EPHEMERAL_CONTAINERS) {
        drop_non_ephemeral_container_updates(new, old);
    }
    let mut p = typed(new)?;
    pod::default_pod(&mut p);
    if subresource == Some("status") {
        let qos = pod::qos_class(&p);
        let st = p.status.get_or_insert_with(Default::default);
        if st.qos_class.as_deref().unwrap_or("").is_empty() {
            st.qos_class = Some(qos.to_string());
        }
    }
    let metadata = new.get("metadata").cloned();
    *new = untyped(&p);
    if let Some(m) = metadata {
        new["metadata"] = m;
    }
    Ok(())
}

/// The subresource that adds ephemeral containers to a pod.
pub const EPHEMERAL_CONTAINERS: &str = "ephemeralcontainers";

/// upstream `dropNonEphemeralContainerUpdates`: the stored pod's spec with the request's
/// `spec.ephemeralContainers`, and the stored labels, annotations, finalizers and owner references
/// (`ResetObjectMetaForStatus`; the registry keeps status and the server-owned metadata on every update).
fn drop_non_ephemeral_container_updates(new: &mut Value, old: &Value) {
    let ephemeral = new.pointer("/spec/ephemeralContainers").cloned();
    let mut spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        match ephemeral {
            Some(e) if !e.is_null() => s.insert("ephemeralContainers".into(), e),
            _ => s.remove("ephemeralContainers"),
        };
    }
    new["spec"] = spec;
    super::keep(
        old.get("metadata").and_then(Value::as_object),
        super::meta_mut(new),
        &["labels", "annotations", "finalizers", "ownerReferences"],
    );
}

/// Validation of a created or updated pod (through the pod itself or one of its subresources).
pub fn validate(obj: &Value, old: Option<&Value>, subresource: Option<&str>) -> Vec<FieldError> {
    let Ok(p) = typed(obj) else {
        return vec![FieldError::invalid("spec", &Value::Null, "cannot be decoded")];
    };
    match old.map(typed) {
        None => pod::validate_pod_create(&p),
        Some(Ok(old)) if subresource == Some(EPHEMERAL_CONTAINERS) => {
            pod::validate_pod_ephemeral_containers_update(&p, &old)
        }
        Some(Ok(old)) => pod::validate_pod_update(&p, &old),
        Some(Err(e)) => vec![FieldError::invalid("metadata", &Value::Null, &e)],
    }
}

/// The grace period a pod deletion gets (`CheckGracefulDelete`): the request's, else the pod's
/// terminationGracePeriodSeconds; 0 for pods not bound to a node or already finished; negative becomes 1.
pub fn grace_period(obj: &Value, requested: Option<i64>) -> i64 {
    let node = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let phase = obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() || phase == "Succeeded" || phase == "Failed" {
        return 0;
    }
    let grace = requested
        .or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30);
    if grace < 0 { 1 } else { grace }
}

/// `pods/binding`: set `spec.nodeName` and the `PodScheduled` condition, unless already bound.
pub fn bind(obj: &Value, node: &str) -> Result<Value, String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(current) = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(format!("pod {name} is already assigned to node {current:?}"));
    }
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    let mut p = typed(obj)?;
    p.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
    let st = p.status.get_or_insert_with(Default::default);
    let conditions = st.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != "PodScheduled");
    conditions.push(PodCondition {
        type_: "PodScheduled".into(),
        status: "True".into(),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        )),
        ..Default::default()
    });
    let mut out = untyped(&p);
    out["metadata"] = obj.get("metadata").cloned().unwrap_or(json!({}));
    Ok(out)
}
