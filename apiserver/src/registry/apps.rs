//! The apps/v1 strategies (upstream `pkg/registry/apps/{deployment,replicaset,statefulset,daemonset,
//! controllerrevision}`): the scheme defaults of `pkg/apis/apps/v1/defaults.go` and of the pod template,
//! validation from `pkg/apis/apps/validation`, which writes bump `metadata.generation`, and what the
//! status endpoint may change.
//!
//! The registry calls these on every write, after its generic metadata rules; each function is pure.

use serde_json::{Value, json};

use super::workload::{
    FIELD_IMMUTABLE, default_template, ensure_object, go_label_selector, immutable_selector, invalid_printed,
    non_negative, selector_is_empty, selector_matches, set_default, validate_label_selector,
    validate_selector_and_template, validate_template,
};
use crate::error::FieldError;

/// The apps/v1 resources with a strategy here.
pub fn handles(plural: &str) -> bool {
    matches!(
        plural,
        "deployments" | "replicasets" | "statefulsets" | "daemonsets" | "controllerrevisions"
    )
}

/// upstream `SetDefaults_Deployment` and friends, plus the template defaults. Idempotent: upstream
/// defaults every decoded object, so updates get them too.
pub fn default(plural: &str, obj: &mut Value) {
    if plural == "controllerrevisions" {
        return;
    }
    let spec = ensure_object(obj, &["spec"]);
    match plural {
        "deployments" => {
            set_default(spec, "replicas", json!(1));
            let strategy = ensure_object(spec, &["strategy"]);
            if strategy
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                strategy["type"] = json!("RollingUpdate");
            }
            if strategy["type"] == "RollingUpdate" {
                let ru = ensure_object(strategy, &["rollingUpdate"]);
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
        }
        "replicasets" => set_default(spec, "replicas", json!(1)),
        "statefulsets" => {
            if spec
                .get("podManagementPolicy")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                spec["podManagementPolicy"] = json!("OrderedReady");
            }
            let strategy = ensure_object(spec, &["updateStrategy"]);
            if strategy
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                strategy["type"] = json!("RollingUpdate");
                // Only when the type was empty: `type: RollingUpdate` alone keeps rollingUpdate nil, which
                // `kubectl rollout status` tells apart.
                ensure_object(strategy, &["rollingUpdate"]);
            }
            if strategy["type"] == "RollingUpdate"
                && let Some(ru) = strategy.get_mut("rollingUpdate").filter(|r| r.is_object())
            {
                set_default(ru, "partition", json!(0));
            }
            let retention = ensure_object(spec, &["persistentVolumeClaimRetentionPolicy"]);
            for k in ["whenDeleted", "whenScaled"] {
                if retention.get(k).and_then(Value::as_str).unwrap_or("").is_empty() {
                    retention[k] = json!("Retain");
                }
            }
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            // The claim templates are PersistentVolumeClaims: SetDefaults_PersistentVolumeClaim(Spec).
            for claim in spec
                .get_mut("volumeClaimTemplates")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                super::volume::default_claim(claim);
            }
        }
        "daemonsets" => {
            let strategy = ensure_object(spec, &["updateStrategy"]);
            if strategy
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                strategy["type"] = json!("RollingUpdate");
            }
            if strategy["type"] == "RollingUpdate" {
                let ru = ensure_object(strategy, &["rollingUpdate"]);
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
        }
        _ => {}
    }
    default_template(obj, "/spec/template");
}

/// Create: defaults, and no status (`PrepareForCreate` resets it; controllers write it later).
pub fn prepare_create(plural: &str, obj: &mut Value) {
    default(plural, obj);
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}

/// Update through the object or its status. A status write keeps the stored spec (the registry already
/// did) and, for Deployments, the stored labels (`deploymentStatusStrategy` resets `metadata.labels`);
/// annotations written there are kept: the deployment controller stores its revision annotation so.
pub fn prepare_update(plural: &str, new: &mut Value, old: &Value, status_update: bool) {
    if status_update && plural == "deployments" {
        super::keep(
            old.get("metadata").and_then(Value::as_object),
            super::meta_mut(new),
            &["labels"],
        );
    }
    default(plural, new);
}

/// Whether an update bumps `metadata.generation` (not called for status writes): any spec change, and
/// for Deployments an annotation change too, because annotations are copied to their ReplicaSets.
pub fn bumps_generation(plural: &str, new: &Value, old: &Value) -> bool {
    let changed = |p: &str| new.pointer(p) != old.pointer(p);
    changed("/spec") || (plural == "deployments" && changed("/metadata/annotations"))
}

/// Validation of a create (`old` none), update, or status update.
pub fn validate(plural: &str, obj: &Value, old: Option<&Value>, status_update: bool) -> Vec<FieldError> {
    if status_update {
        return validate_status(plural, obj, old);
    }
    let mut errs = match plural {
        "deployments" => validate_deployment(obj),
        "replicasets" => validate_replica_set(obj),
        "statefulsets" => validate_stateful_set(obj),
        "daemonsets" => validate_daemon_set(obj),
        "controllerrevisions" => validate_controller_revision(obj),
        _ => Vec::new(),
    };
    if let Some(old) = old {
        match plural {
            "deployments" | "replicasets" | "daemonsets" => errs.extend(immutable_selector(obj, old)),
            "statefulsets" => errs.extend(stateful_set_forbidden_update(obj, old)),
            "controllerrevisions" if obj.get("data") != old.get("data") => errs.push(invalid_printed(
                "data",
                &compact(obj.get("data")),
                FIELD_IMMUTABLE,
            )),
            _ => {}
        }
    }
    errs
}

/// A JSON value printed where upstream prints a Go struct with `%#v` (deliberately not reproduced).
fn compact(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".to_string(), Value::to_string)
}

fn restart_policy_always(obj: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let policy = obj
        .pointer("/spec/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(policy),
            &["Always"],
        ));
    }
    if obj
        .pointer("/spec/template/spec/activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// Go's `%#v` of an `intstr.IntOrString` value (what the rolling-update errors print).
fn go_int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        Some(Value::Number(n)) => {
            format!(
                "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
                n.as_i64().unwrap_or(0)
            )
        }
        _ => "intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}".to_string(),
    }
}

/// upstream `getIntOrPercentValue` (a valid percent's number, else the integer; 0 otherwise).
fn int_or_percent(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::String(s)) => s.strip_suffix('%').and_then(|n| n.parse().ok()).unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// upstream `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
pub(crate) fn positive_int_or_percent(
    v: Option<&Value>,
    path: &str,
    max_100: bool,
    errs: &mut Vec<FieldError>,
) {
    match v {
        Some(Value::String(s)) => {
            let valid = s
                .strip_suffix('%')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !valid {
                errs.push(invalid_printed(
                    path,
                    &go_int_or_string(v),
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or \
                     '93%', regex used for validation is '[0-9]+%')",
                ));
            } else if max_100 && int_or_percent(v) > 100 {
                errs.push(invalid_printed(
                    path,
                    &go_int_or_string(v),
                    "must not be greater than 100%",
                ));
            }
        }
        Some(Value::Number(n)) if n.as_i64().unwrap_or(0) < 0 => {
            errs.push(FieldError::invalid(path, &json!(n), super::workload::NEGATIVE));
        }
        _ => {}
    }
}

fn common_counts(obj: &Value, errs: &mut Vec<FieldError>) {
    non_negative(obj, "/spec/replicas", "spec.replicas", errs);
    non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds", errs);
    non_negative(
        obj,
        "/spec/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        errs,
    );
}

/// upstream `ValidateDeploymentSpec`.
fn validate_deployment(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    common_counts(obj, &mut errs);
    errs.extend(validate_selector_and_template(obj, "deployment"));
    errs.extend(validate_template(obj, "/spec/template", "spec.template"));
    restart_policy_always(obj, "ReplicaSet", &mut errs);
    let strategy = obj.pointer("/spec/strategy").cloned().unwrap_or(json!({}));
    let ty = strategy.get("type").and_then(Value::as_str).unwrap_or("");
    let ru = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match ty {
        "Recreate" if ru.is_some() => errs.push(FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )),
        "Recreate" => {}
        "RollingUpdate" => match ru {
            None => errs.push(FieldError::required(
                "spec.strategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let p = "spec.strategy.rollingUpdate";
                let (unavailable, surge) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
                positive_int_or_percent(unavailable, &format!("{p}.maxUnavailable"), false, &mut errs);
                positive_int_or_percent(surge, &format!("{p}.maxSurge"), false, &mut errs);
                if int_or_percent(unavailable) == 0 && int_or_percent(surge) == 0 {
                    errs.push(invalid_printed(
                        &format!("{p}.maxUnavailable"),
                        &go_int_or_string(unavailable),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                if int_or_percent(unavailable) > 100 && matches!(unavailable, Some(Value::String(_))) {
                    errs.push(invalid_printed(
                        &format!("{p}.maxUnavailable"),
                        &go_int_or_string(unavailable),
                        "must not be greater than 100%",
                    ));
                }
            }
        },
        other => errs.push(FieldError::not_supported(
            "spec.strategy",
            &json!(other),
            &["Recreate", "RollingUpdate"],
        )),
    }
    if let Some(pd) = obj
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
    {
        non_negative(
            obj,
            "/spec/progressDeadlineSeconds",
            "spec.progressDeadlineSeconds",
            &mut errs,
        );
        let min_ready = obj
            .pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pd <= min_ready {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                &json!(pd),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

/// upstream `ValidateReplicaSetSpec` (its empty-selector message says "deployment", as upstream's does).
fn validate_replica_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    common_counts(obj, &mut errs);
    errs.extend(validate_selector_and_template(obj, "deployment"));
    errs.extend(validate_template(obj, "/spec/template", "spec.template"));
    restart_policy_always(obj, "ReplicaSet", &mut errs);
    errs
}

/// upstream `ValidateStatefulSetSpec`. Like upstream it checks the template's labels and annotations but
/// not its pod spec.
fn validate_stateful_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    match spec
        .get("podManagementPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            &json!(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let ru = spec
        .pointer("/updateStrategy/rollingUpdate")
        .filter(|r| !r.is_null());
    match spec
        .pointer("/updateStrategy/type")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" if ru.is_some() => errs.push(invalid_printed(
            "spec.updateStrategy.rollingUpdate",
            &compact(ru),
            "only allowed for updateStrategy 'RollingUpdate'",
        )),
        "OnDelete" => {}
        "RollingUpdate" => {
            if let Some(ru) = ru {
                non_negative(
                    ru,
                    "/partition",
                    "spec.updateStrategy.rollingUpdate.partition",
                    &mut errs,
                );
                if let Some(mu) = ru.get("maxUnavailable").filter(|v| !v.is_null()) {
                    let p = "spec.updateStrategy.rollingUpdate.maxUnavailable";
                    positive_int_or_percent(Some(mu), p, true, &mut errs);
                    if int_or_percent(Some(mu)) == 0 {
                        errs.push(invalid_printed(p, &go_int_or_string(Some(mu)), "cannot be 0"));
                    }
                }
            }
        }
        _ => errs.push(invalid_printed(
            "spec.updateStrategy",
            &compact(spec.get("updateStrategy")),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    for k in ["whenDeleted", "whenScaled"] {
        if let Some(v) = spec.pointer(&format!("/persistentVolumeClaimRetentionPolicy/{k}")) {
            let v = v.as_str().unwrap_or("");
            if !matches!(v, "Retain" | "Delete") {
                errs.push(FieldError::not_supported(
                    format!("spec.persistentVolumeClaimRetentionPolicy.{k}"),
                    &json!(v),
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    non_negative(obj, "/spec/replicas", "spec.replicas", &mut errs);
    non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds", &mut errs);
    non_negative(obj, "/spec/ordinals/start", "spec.ordinals.start", &mut errs);
    let selector = obj.pointer("/spec/selector").filter(|s| !s.is_null());
    match selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => {
            errs.extend(validate_label_selector(Some(sel), "spec.selector"));
            if selector_is_empty(sel) {
                errs.push(invalid_printed(
                    "spec.selector",
                    &go_label_selector(Some(sel)),
                    "empty selector is invalid for statefulset",
                ));
            }
        }
    }
    let labels = obj.pointer("/spec/template/metadata/labels");
    match selector_matches(selector, labels.and_then(Value::as_object)) {
        None => errs.push(invalid_printed("spec.selector", &go_label_selector(selector), "")),
        Some(false) if selector.is_some_and(|s| !selector_is_empty(s)) => errs.push(invalid_printed(
            "spec.template.metadata.labels",
            &super::workload::go_string_map(labels),
            "`selector` does not match template `labels`",
        )),
        _ => {}
    }
    restart_policy_always(obj, "StatefulSet", &mut errs);
    errs
}

/// upstream `ValidateStatefulSetUpdate`: only replicas, ordinals, template, updateStrategy, the claim
/// retention policy and minReadySeconds may change.
fn stateful_set_forbidden_update(new: &Value, old: &Value) -> Option<FieldError> {
    let strip = |v: &Value| {
        let mut spec = v.get("spec").cloned().unwrap_or(json!({}));
        if let Some(s) = spec.as_object_mut() {
            for k in [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ] {
                s.remove(k);
            }
        }
        spec
    };
    (strip(new) != strip(old)).then(|| {
        FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
             'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        )
    })
}

/// upstream `ValidateDaemonSetSpec`. A missing selector selects nothing, so it shows as the template
/// mismatch (upstream has no Required check here).
fn validate_daemon_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector = obj.pointer("/spec/selector").filter(|s| !s.is_null());
    errs.extend(validate_label_selector(selector, "spec.selector"));
    let labels = obj.pointer("/spec/template/metadata/labels");
    if selector_matches(selector, labels.and_then(Value::as_object)) == Some(false) {
        errs.push(invalid_printed(
            "spec.template.metadata.labels",
            &super::workload::go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
    if let Some(sel) = selector
        && selector_is_empty(sel)
    {
        errs.push(invalid_printed(
            "spec.selector",
            &go_label_selector(Some(sel)),
            "empty selector is invalid for daemonset",
        ));
    }
    errs.extend(validate_template(obj, "/spec/template", "spec.template"));
    restart_policy_always(obj, "DaemonSet", &mut errs);
    non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds", &mut errs);
    non_negative(
        obj,
        "/spec/templateGeneration",
        "spec.templateGeneration",
        &mut errs,
    );
    let strategy = obj.pointer("/spec/updateStrategy").cloned().unwrap_or(json!({}));
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => match strategy.get("rollingUpdate").filter(|r| !r.is_null()) {
            None => errs.push(FieldError::required("spec.updateStrategy.rollingUpdate", "")),
            Some(ru) => {
                let p = "spec.updateStrategy.rollingUpdate";
                let (unavailable, surge) = (ru.get("maxUnavailable"), ru.get("maxSurge"));
                positive_int_or_percent(unavailable, &format!("{p}.maxUnavailable"), true, &mut errs);
                positive_int_or_percent(surge, &format!("{p}.maxSurge"), true, &mut errs);
                match (int_or_percent(unavailable) != 0, int_or_percent(surge) != 0) {
                    (true, true) => errs.push(invalid_printed(
                        &format!("{p}.maxSurge"),
                        &go_int_or_string(surge),
                        "may not be set when maxUnavailable is non-zero",
                    )),
                    (false, false) => errs.push(FieldError::required(
                        format!("{p}.maxUnavailable"),
                        "cannot be 0 when maxSurge is 0",
                    )),
                    _ => {}
                }
            }
        },
        other => errs.push(FieldError::not_supported(
            "spec.updateStrategy",
            &json!(other),
            &["RollingUpdate", "OnDelete"],
        )),
    }
    non_negative(
        obj,
        "/spec/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    errs
}

/// upstream `ValidateControllerRevision`.
fn validate_controller_revision(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if obj.get("data").is_none_or(Value::is_null) {
        errs.push(FieldError::required("data", "data is mandatory"));
    }
    non_negative(obj, "/revision", "revision", &mut errs);
    errs
}

/// The status checks (`ValidateDeploymentStatus` and friends): counts non-negative and not above
/// `status.replicas`, `collisionCount` never decremented. Cheap on purpose: controllers write it often.
fn validate_status(plural: &str, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let counts: &[&str] = match plural {
        "deployments" => &[
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "collisionCount",
        ],
        "replicasets" => &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ],
        "statefulsets" => &[
            "replicas",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
            "observedGeneration",
            "collisionCount",
        ],
        "daemonsets" => &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
            "collisionCount",
        ],
        _ => &[],
    };
    for c in counts {
        non_negative(obj, &format!("/status/{c}"), &format!("status.{c}"), &mut errs);
    }
    if plural != "daemonsets" {
        let get = |k: &str| {
            obj.pointer(&format!("/status/{k}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let replicas = get("replicas");
        for c in [
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "currentReplicas",
        ] {
            if counts.contains(&c) && get(c) > replicas {
                errs.push(FieldError::invalid(
                    format!("status.{c}"),
                    &json!(get(c)),
                    "cannot be greater than status.replicas",
                ));
            }
        }
    }
    if let Some(old) = old {
        let cc = |v: &Value| v.pointer("/status/collisionCount").and_then(Value::as_i64);
        if let (Some(before), now) = (cc(old), cc(obj))
            && now.unwrap_or(0) < before
        {
            errs.push(FieldError::invalid(
                "status.collisionCount",
                &json!(now.unwrap_or(0)),
                "cannot be decremented",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"metadata": {"name": "web", "annotations": {"a": "1"}},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
    }

    #[test]
    fn deployment_defaults_follow_set_defaults_deployment() {
        let mut d = deployment();
        prepare_create("deployments", &mut d);
        let s = &d["spec"];
        assert_eq!(s["replicas"], 1);
        assert_eq!(
            s["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(s["revisionHistoryLimit"], 10);
        assert_eq!(s["progressDeadlineSeconds"], 600);
        assert_eq!(
            s["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert!(validate("deployments", &d, None, false).is_empty());
        // Recreate gets no rollingUpdate.
        let mut r = deployment();
        r["spec"]["strategy"] = json!({"type": "Recreate"});
        default("deployments", &mut r);
        assert!(r["spec"]["strategy"].get("rollingUpdate").is_none());
    }

    #[test]
    fn stateful_set_partition_is_defaulted_only_when_the_type_was_empty() {
        for (strategy, want) in [
            (
                json!(null),
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            ),
            (json!({"type": "RollingUpdate"}), json!({"type": "RollingUpdate"})),
            (
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}),
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2, "partition": 0}}),
            ),
            (json!({"type": "OnDelete"}), json!({"type": "OnDelete"})),
        ] {
            let mut sts = deployment();
            if !strategy.is_null() {
                sts["spec"]["updateStrategy"] = strategy.clone();
            }
            default("statefulsets", &mut sts);
            assert_eq!(sts["spec"]["updateStrategy"], want, "{strategy}");
            assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
            assert_eq!(
                sts["spec"]["persistentVolumeClaimRetentionPolicy"],
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
            );
        }
    }

    #[test]
    fn daemon_set_defaults_roll_one_at_a_time_without_surge() {
        let mut ds = deployment();
        default("daemonsets", &mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert!(ds["spec"].get("replicas").is_none());
        assert!(validate("daemonsets", &ds, None, false).is_empty());
    }

    #[test]
    fn invalid_workloads_get_upstream_messages() {
        type Change = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Change, &str)> = vec![
            (
                "deployments",
                Box::new(|d| d["spec"]["replicas"] = json!(-1)),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "deployments",
                Box::new(|d| {
                    d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}})
                }),
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, \
                 StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
            ),
            (
                "deployments",
                Box::new(|d| d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never")),
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ),
            (
                "deployments",
                Box::new(|d| d["spec"]["template"]["spec"]["containers"][0]["name"] = json!("")),
                "spec.template.spec.containers[0].name: Required value",
            ),
            (
                "replicasets",
                Box::new(|d| d["spec"]["selector"] = json!({})),
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
                 MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
            ),
            (
                "statefulsets",
                Box::new(|d| d["spec"]["selector"] = json!({"matchLabels": {"app": "other"}})),
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does \
                 not match template `labels`",
            ),
        ];
        for (plural, change, want) in cases {
            let mut d = deployment();
            change(&mut d);
            default(plural, &mut d);
            let errs = validate(plural, &d, None, false);
            assert!(
                errs.iter().any(|e| e.message == want),
                "{plural}: {want}\n got {errs:#?}"
            );
        }
    }

    #[test]
    fn updates_keep_selectors_and_stateful_set_fields() {
        let mut old = deployment();
        default("deployments", &mut old);
        let mut new = old.clone();
        new["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
        new["spec"]["template"]["metadata"]["labels"]["v"] = json!("2");
        let errs = validate("deployments", &new, Some(&old), false);
        assert_eq!(
            errs.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
            [
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \
              \"v\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
            ]
        );

        let mut sts = deployment();
        default("statefulsets", &mut sts);
        let mut scaled = sts.clone();
        scaled["spec"]["replicas"] = json!(5);
        scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(validate("statefulsets", &scaled, Some(&sts), false).is_empty());
        let mut renamed = sts.clone();
        renamed["spec"]["serviceName"] = json!("other");
        assert_eq!(
            validate("statefulsets", &renamed, Some(&sts), false)[0].message,
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', \
             'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are \
             forbidden"
        );
    }

    #[test]
    fn deployment_generation_follows_spec_and_annotations() {
        let old = deployment();
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"]["b"] = json!("2");
        assert!(bumps_generation("deployments", &annotated, &old));
        assert!(!bumps_generation("replicasets", &annotated, &old));
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"x": "y"});
        assert!(!bumps_generation("deployments", &labelled, &old));
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(bumps_generation("statefulsets", &scaled, &old));
    }

    #[test]
    fn deployment_status_writes_keep_labels_but_take_annotations() {
        let old = deployment();
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"sneaky": "1"});
        new["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
        prepare_update("deployments", &mut new, &old, true);
        assert!(new["metadata"].get("labels").is_none());
        assert_eq!(
            new["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
    }

    #[test]
    fn status_counts_are_checked_cheaply() {
        let mut d = deployment();
        d["status"] = json!({"replicas": 1, "readyReplicas": 2});
        let errs = validate("deployments", &d, Some(&deployment()), true);
        assert_eq!(
            errs[0].message,
            "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas"
        );
        d["status"] = json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1});
        assert!(validate("deployments", &d, Some(&deployment()), true).is_empty());
    }
}
