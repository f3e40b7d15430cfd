//! Namespaces: the strategy (`pkg/registry/core/namespace`). A DELETE marks a namespace (deletionTimestamp,
//! phase Terminating); the namespace controller of the controller manager empties it and then removes the
//! `kubernetes` finalizer from `spec.finalizers` through the `finalize` subresource. The namespace is
//! removed once `spec.finalizers` and `metadata.finalizers` are both empty. Without a controller manager a
//! deleted namespace stays Terminating, as with kube-apiserver alone.

use serde_json::{Value, json};

/// upstream `v1.FinalizerKubernetes`: the namespace controller's token in `spec.finalizers`.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The `finalize` subresource: the only way to change `spec.finalizers`.
pub const FINALIZE: &str = "finalize";

/// Create: phase Active and the `kubernetes` finalizer in spec, as upstream.
pub fn prepare_create(obj: &mut Value) {
    obj["spec"] = json!({"finalizers": [FINALIZER_KUBERNETES]});
    obj["status"] = json!({"phase": "Active"});
}

/// Update: the main resource keeps spec.finalizers and status, `status` keeps spec, `finalize` keeps
/// status (upstream `namespaceStrategy`, `namespaceStatusStrategy`, `namespaceFinalizeStrategy`).
pub fn prepare_update(new: &mut Value, old: &Value, subresource: Option<&str>) {
    let keep_from_old = |new: &mut Value, field: &str| match old.get(field) {
        Some(s) => new[field] = s.clone(),
        None => {
            new.as_object_mut().map(|o| o.remove(field));
        }
    };
    match subresource {
        Some(FINALIZE) => keep_from_old(new, "status"),
        Some(_) => keep_from_old(new, "spec"),
        None => {
            keep_from_old(new, "spec");
            keep_from_old(new, "status");
        }
    }
}

/// True when nothing in `spec.finalizers` holds the namespace (upstream `ShouldDeleteNamespaceDuringUpdate`
/// adds this to the generic rule: a deleted namespace goes once both finalizer lists are empty).
pub fn finalized(obj: &Value) -> bool {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_changes_only_its_part() {
        let old = json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}});
        let sent =
            json!({"metadata": {"name": "n"}, "spec": {"finalizers": []}, "status": {"phase": "Active"}});
        let mut main = sent.clone();
        prepare_update(&mut main, &old, None);
        assert_eq!(main["spec"], old["spec"]);
        assert_eq!(main["status"], old["status"]);
        let mut status = sent.clone();
        prepare_update(&mut status, &old, Some("status"));
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["phase"], "Active");
        let mut finalize = sent.clone();
        prepare_update(&mut finalize, &old, Some(FINALIZE));
        assert_eq!(finalize["spec"]["finalizers"], json!([]));
        assert_eq!(finalize["status"], old["status"]);
        assert!(finalized(&finalize));
        assert!(!finalized(&old));
        assert!(finalized(&json!({"spec": {}})));
    }
}
