//! The core/v1 ReplicationController strategy (upstream `pkg/registry/core/replicationcontroller`):
//! `SetDefaults_ReplicationController` (selector and labels from the template's labels, one replica),
//! the pod template defaults, and `ValidateReplicationController{,Update,StatusUpdate}` from
//! `pkg/apis/core/validation`. Pure functions of the stored JSON, called by the registry on every write.

use serde_json::{Map, Value, json};

use super::workload::{
    default_template, ensure_object, go_string_map, invalid_printed, non_negative, set_default,
    validate_template,
};
use crate::error::FieldError;

/// The resource this strategy is for.
pub fn handles(group: &str, plural: &str) -> bool {
    (group, plural) == ("", "replicationcontrollers")
}

/// `SetDefaults_ReplicationController`: an empty selector becomes the template's labels, and so do
/// empty object labels; `replicas` is 1 when unset. Then the template's pod defaults. Idempotent.
pub fn default(obj: &mut Value) {
    let template_labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned();
    let spec = ensure_object(obj, &["spec"]);
    if let Some(labels) = &template_labels
        && spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        spec["selector"] = json!(labels);
    }
    set_default(spec, "replicas", json!(1));
    if let Some(labels) = template_labels {
        let meta = ensure_object(obj, &["metadata"]);
        if meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        {
            meta["labels"] = json!(labels);
        }
    }
    default_template(obj, "/spec/template");
}

/// Create: defaults, and no status (`rcStrategy.PrepareForCreate`).
pub fn prepare_create(obj: &mut Value) {
    default(obj);
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}

/// Validation of a create or update (`old` is the stored object), or of a status update.
pub fn validate(obj: &Value, status_update: bool) -> Vec<FieldError> {
    if status_update {
        return validate_status(obj);
    }
    let mut errs = Vec::new();
    non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds", &mut errs);
    let selector = obj.pointer("/spec/selector").and_then(Value::as_object);
    // ValidateNonEmptySelector
    if selector.is_none_or(Map::is_empty) {
        errs.push(FieldError::required("spec.selector", ""));
    }
    non_negative(obj, "/spec/replicas", "spec.replicas", &mut errs);
    // ValidatePodTemplateSpecForRC
    match obj.pointer("/spec/template").filter(|t| !t.is_null()) {
        None => errs.push(FieldError::required("spec.template", "")),
        Some(template) => {
            let labels = template.pointer("/metadata/labels");
            if let Some(sel) = selector.filter(|s| !s.is_empty()) {
                let matches = sel
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)).and_then(Value::as_str) == v.as_str());
                if !matches {
                    errs.push(invalid_printed(
                        "spec.template.metadata.labels",
                        &go_string_map(labels),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
            errs.extend(validate_template(obj, "/spec/template", "spec.template"));
            let policy = template
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("");
            if policy != "Always" {
                errs.push(FieldError::not_supported(
                    "spec.template.spec.restartPolicy",
                    &json!(policy),
                    &["Always"],
                ));
            }
            if template
                .pointer("/spec/activeDeadlineSeconds")
                .is_some_and(|v| !v.is_null())
            {
                errs.push(FieldError::forbidden(
                    "spec.template.spec.activeDeadlineSeconds",
                    "activeDeadlineSeconds in ReplicationController is not Supported",
                ));
            }
        }
    }
    errs
}

/// `ValidateReplicationControllerStatus`.
fn validate_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for c in [
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    ] {
        non_negative(obj, &format!("/status/{c}"), &format!("status.{c}"), &mut errs);
    }
    let get = |k: &str| {
        obj.pointer(&format!("/status/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let replicas = get("replicas");
    for c in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
        if get(c) > replicas {
            errs.push(FieldError::invalid(
                format!("status.{c}"),
                &json!(get(c)),
                "cannot be greater than status.replicas",
            ));
        }
    }
    if get("availableReplicas") > get("readyReplicas") {
        errs.push(FieldError::invalid(
            "status.availableReplicas",
            &json!(get("availableReplicas")),
            "cannot be greater than readyReplicas",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"}, "spec": spec})
    }

    fn template(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    }

    #[test]
    fn defaults_take_selector_and_labels_from_the_template() {
        let mut obj = rc(json!({"template": template(json!({"app": "web"}))}));
        prepare_create(&mut obj);
        assert_eq!(obj["spec"]["selector"], json!({"app": "web"}));
        assert_eq!(obj["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(obj["spec"]["replicas"], json!(1));
        assert_eq!(obj["spec"]["template"]["spec"]["restartPolicy"], json!("Always"));
        assert!(validate(&obj, false).is_empty(), "{:?}", validate(&obj, false));

        let mut own = rc(json!({"replicas": 0, "selector": {"app": "web"},
                                "template": template(json!({"app": "web", "tier": "x"}))}));
        own["metadata"]["labels"] = json!({"mine": "yes"});
        default(&mut own);
        assert_eq!(
            own["spec"]["selector"],
            json!({"app": "web"}),
            "a given selector stays"
        );
        assert_eq!(
            own["metadata"]["labels"],
            json!({"mine": "yes"}),
            "given labels stay"
        );
        assert_eq!(own["spec"]["replicas"], json!(0), "an explicit zero stays");
    }

    #[test]
    fn validation_reports_upstream_paths_and_messages() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                rc(json!({"replicas": 1})),
                vec!["spec.selector: Required value", "spec.template: Required value"],
            ),
            (
                {
                    let mut o = rc(
                        json!({"replicas": -1, "selector": {"app": "db"}, "template": template(json!({"app": "web"}))}),
                    );
                    default(&mut o);
                    o
                },
                vec![
                    "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                    "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                {
                    let mut o = rc(json!({"template": template(json!({"app": "web"}))}));
                    default(&mut o);
                    o["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
                    o["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
                    o
                },
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
                    "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicationController is not Supported",
                ],
            ),
        ];
        for (obj, want) in cases {
            let got: Vec<String> = validate(&obj, false).iter().map(|e| e.message.clone()).collect();
            for w in &want {
                assert!(got.iter().any(|g| g == w), "missing {w:?} in {got:?}");
            }
        }
    }

    #[test]
    fn status_counts_may_not_exceed_replicas() {
        let obj = json!({"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": 2}});
        let got: Vec<String> = validate(&obj, true).iter().map(|e| e.message.clone()).collect();
        assert!(got.contains(
            &"status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas".to_string()
        ));
        assert!(validate(&json!({"status": {"replicas": 2, "readyReplicas": 1}}), true).is_empty());
    }
}
