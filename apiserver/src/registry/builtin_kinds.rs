//! The strategies of the kinds served as plain data (networking, autoscaling, scheduling, node,
//! certificates, storage's CSI kinds, admissionregistration, apiregistration, flowcontrol, core's pod
//! templates): upstream's defaulting and the validation rules a user meets first, the autoscaling/v1 view
//! of autoscaling/v2 HorizontalPodAutoscalers, and the objects upstream creates at first start (the two
//! system PriorityClasses, an APIService per built-in group-version, the mandatory flow-control objects).
//! Pure functions of JSON, except [`bootstrap`].

use api::FieldError;
use serde_json::{Map, Value, json};

use super::resources::{self, Alias};
use super::{ApiError, Registry, WriteOptions};
use crate::user::UserInfo;

/// Whether this module holds the strategy of `group`/`plural`.
pub fn handles(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("networking.k8s.io", _)
            | ("autoscaling", "horizontalpodautoscalers")
            | ("scheduling.k8s.io", "priorityclasses")
            | ("node.k8s.io", "runtimeclasses")
            | ("certificates.k8s.io", "certificatesigningrequests")
            | ("apiregistration.k8s.io", "apiservices")
    )
}

// ---------------------------------------------------------------------------------------------------
// autoscaling/v1 <-> autoscaling/v2 (upstream pkg/apis/autoscaling/v1/conversion.go)
// ---------------------------------------------------------------------------------------------------

/// autoscaling/v1 HorizontalPodAutoscalers are the stored autoscaling/v2 objects, converted.
pub static HPA_V1: Alias = Alias {
    stored_as: ("autoscaling", "horizontalpodautoscalers"),
    from_storage: hpa_v2_to_v1,
    to_storage: hpa_v1_to_v2,
};

fn cpu_utilization(metrics: Option<&Value>, target: &str) -> Option<Value> {
    metrics?.as_array()?.iter().find_map(|m| {
        let r = m.get("resource")?;
        (m.get("type")?.as_str()? == "Resource" && r.get("name")?.as_str()? == "cpu")
            .then(|| r.get(target)?.get("averageUtilization").cloned())
            .flatten()
    })
}

/// autoscaling/v2 → autoscaling/v1: the CPU utilization metric becomes `targetCPUUtilizationPercentage`
/// (other metrics have no v1 form; upstream keeps them in an annotation, we leave them out).
pub fn hpa_v2_to_v1(v2: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("HorizontalPodAutoscaler"));
    out.insert("apiVersion".into(), json!("autoscaling/v1"));
    if let Some(m) = v2.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    let spec = v2.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut s = Map::new();
    for f in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(f) {
            s.insert(f.into(), v.clone());
        }
    }
    if let Some(u) = cpu_utilization(spec.get("metrics"), "target") {
        s.insert("targetCPUUtilizationPercentage".into(), u);
    }
    out.insert("spec".into(), Value::Object(s));
    if let Some(status) = v2.get("status") {
        let mut st = Map::new();
        for f in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(f) {
                st.insert(f.into(), v.clone());
            }
        }
        if let Some(u) = cpu_utilization(status.get("currentMetrics"), "current") {
            st.insert("currentCPUUtilizationPercentage".into(), u);
        }
        st.entry("currentReplicas").or_insert(json!(0));
        st.entry("desiredReplicas").or_insert(json!(0));
        out.insert("status".into(), Value::Object(st));
    }
    Value::Object(out)
}

/// autoscaling/v1 → autoscaling/v2: `targetCPUUtilizationPercentage` becomes a Resource metric.
pub fn hpa_v1_to_v2(v1: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("HorizontalPodAutoscaler"));
    out.insert("apiVersion".into(), json!("autoscaling/v2"));
    if let Some(m) = v1.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    let spec = v1.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut s = Map::new();
    for f in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(f) {
            s.insert(f.into(), v.clone());
        }
    }
    if let Some(u) = spec.get("targetCPUUtilizationPercentage") {
        s.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": u}}}]),
        );
    }
    out.insert("spec".into(), Value::Object(s));
    if let Some(status) = v1.get("status") {
        let mut st = Map::new();
        for f in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            if let Some(v) = status.get(f) {
                st.insert(f.into(), v.clone());
            }
        }
        if let Some(u) = status.get("currentCPUUtilizationPercentage") {
            st.insert(
                "currentMetrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": u}}}]),
            );
        }
        out.insert("status".into(), Value::Object(st));
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------------
// Defaulting and validation
// ---------------------------------------------------------------------------------------------------

/// The highest priority a user's PriorityClass may have (`scheduling.HighestUserDefinablePriority`).
pub const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// The two PriorityClasses upstream creates: (name, value, description).
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if \
         necessary.",
    ),
];

fn object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("an object")
}

fn spec_mut(obj: &mut Value) -> &mut Map<String, Value> {
    object(object(obj).entry("spec").or_insert_with(|| json!({})))
}

/// Upstream's defaults on create.
pub fn prepare_create(group: &str, plural: &str, obj: &mut Value) {
    match (group, plural) {
        ("autoscaling", _) => default_hpa(obj),
        ("scheduling.k8s.io", _) => {
            object(obj)
                .entry("preemptionPolicy")
                .or_insert(json!("PreemptLowerPriority"));
        }
        ("networking.k8s.io", "networkpolicies") => default_network_policy(obj),
        ("networking.k8s.io", "ipaddresses" | "ingressclasses") => {}
        ("certificates.k8s.io", _) => {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
            set_requester(obj, crate::user::requester().as_ref());
            // Usages default to digital signature and key encipherment.
            spec_mut(obj)
                .entry("usages")
                .or_insert(json!(["digital signature", "key encipherment"]));
        }
        _ => {}
    }
}

fn default_hpa(obj: &mut Value) {
    let spec = spec_mut(obj);
    spec.entry("minReplicas").or_insert(json!(1));
    let empty = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
}

fn default_network_policy(obj: &mut Value) {
    let spec = spec_mut(obj);
    if spec.get("policyTypes").is_none() {
        // Ingress always; Egress when egress rules are given (upstream's SetDefaults_NetworkPolicySpec).
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").is_some_and(|e| !e.is_null()) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

/// upstream csrStrategy: whatever the client sent, a CSR's `username`, `uid`, `groups` and `extra` are the
/// requester's (none for the server's own writes).
fn set_requester(obj: &mut Value, user: Option<&UserInfo>) {
    let spec = spec_mut(obj);
    for f in ["username", "uid", "groups", "extra"] {
        spec.remove(f);
    }
    let Some(user) = user else { return };
    spec.insert("username".into(), json!(user.username));
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

/// Upstream's update-time handling: a CSR's spec cannot change; the `approval` subresource of a CSR changes only its conditions.
pub fn prepare_update(group: &str, plural: &str, new: &mut Value, old: &Value, subresource: Option<&str>) {
    match (group, plural, subresource) {
        ("certificates.k8s.io", _, Some("approval")) => {
            let conditions = new.pointer("/status/conditions").cloned();
            let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
            match conditions {
                Some(c) => {
                    object(&mut status).insert("conditions".into(), c);
                }
                None => {
                    object(&mut status).remove("conditions");
                }
            }
            object(new).insert("status".into(), status);
        }
        ("certificates.k8s.io", _, Some("status")) => {
            // The status endpoint may not approve or deny (upstream's csrStatusStrategy keeps them).
            let approvals: Vec<Value> = old
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter(|c| is_approval(c)).cloned().collect())
                .unwrap_or_default();
            let mut rest: Vec<Value> = new
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter(|c| !is_approval(c)).cloned().collect())
                .unwrap_or_default();
            let mut all = approvals;
            all.append(&mut rest);
            let status = object(object(new).entry("status").or_insert_with(|| json!({})));
            if all.is_empty() {
                status.remove("conditions");
            } else {
                status.insert("conditions".into(), Value::Array(all));
            }
        }
        ("certificates.k8s.io", _, None) => {
            if let Some(spec) = old.get("spec") {
                object(new).insert("spec".into(), spec.clone());
            }
        }
        ("autoscaling", _, None) => default_hpa(new),
        _ => {}
    }
}

fn is_approval(c: &Value) -> bool {
    matches!(c.get("type").and_then(Value::as_str), Some("Approved" | "Denied"))
}

fn int(v: &Value, path: &str) -> Option<i64> {
    v.pointer(path).and_then(Value::as_i64)
}

fn string<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Upstream's validation of these kinds, as far as a user meets it; `old` on update.
pub fn validate(
    group: &str,
    plural: &str,
    obj: &Value,
    old: Option<&Value>,
    subresource: Option<&str>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (group, plural) {
        ("scheduling.k8s.io", _) => validate_priority_class(obj, old, &mut errs),
        ("node.k8s.io", _) => match string(obj, "/handler") {
            None => errs.push(FieldError::required("handler", "")),
            Some(h) if old.is_some_and(|o| string(o, "/handler") != Some(h)) => {
                errs.push(FieldError::invalid("handler", &json!(h), "field is immutable"))
            }
            Some(_) => {}
        },
        ("networking.k8s.io", "ingresses") if subresource.is_none() => {
            let spec = obj.get("spec").cloned().unwrap_or_default();
            let rules = spec.get("rules").and_then(Value::as_array).map_or(0, Vec::len);
            if spec.get("defaultBackend").is_none_or(Value::is_null) && rules == 0 {
                errs.push(FieldError::invalid(
                    "spec",
                    &Value::String(format!("{spec}")),
                    "either `defaultBackend` or `rules` must be specified",
                ));
            }
        }
        ("networking.k8s.io", "ingressclasses") => match string(obj, "/spec/controller") {
            None => errs.push(FieldError::required("spec.controller", "")),
            Some(c) if old.is_some_and(|o| string(o, "/spec/controller") != Some(c)) => errs.push(
                FieldError::invalid("spec.controller", &json!(c), "field is immutable"),
            ),
            Some(_) => {}
        },
        ("autoscaling", _) => validate_hpa(obj, &mut errs),
        ("certificates.k8s.io", _) if subresource.is_none() && old.is_none() => {
            if string(obj, "/spec/request").is_none() {
                errs.push(FieldError::required("spec.request", ""));
            }
            if string(obj, "/spec/signerName").is_none() {
                errs.push(FieldError::required("spec.signerName", ""));
            }
        }
        ("apiregistration.k8s.io", _) => validate_api_service(obj, &mut errs),
        _ => {}
    }
    errs
}

fn validate_priority_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let name = string(obj, "/metadata/name").unwrap_or("");
    let value = int(obj, "/value");
    let system = SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _, _)| *n == name);
    match old {
        None => {
            if name.starts_with("system-") && system.is_none() {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    &json!(name),
                    "priority class names with 'system-' prefix are reserved for system use only",
                ));
            }
            match (value, system) {
                (Some(v), Some((_, sv, _))) if v != *sv => errs.push(FieldError::forbidden(
                    "value",
                    &format!("value of system priority class {name} must be {sv}"),
                )),
                (Some(v), None) if v > HIGHEST_USER_PRIORITY => errs.push(FieldError::forbidden(
                    "value",
                    &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
                )),
                _ => {}
            }
        }
        Some(old) => {
            if value != int(old, "/value") {
                errs.push(FieldError::forbidden("value", "may not be changed in an update."));
            }
            if obj.get("preemptionPolicy") != old.get("preemptionPolicy") {
                errs.push(FieldError::invalid(
                    "preemptionPolicy",
                    obj.get("preemptionPolicy").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
    }
}

fn validate_hpa(obj: &Value, errs: &mut Vec<FieldError>) {
    if string(obj, "/spec/scaleTargetRef/kind").is_none() {
        errs.push(FieldError::required("spec.scaleTargetRef.kind", ""));
    }
    if string(obj, "/spec/scaleTargetRef/name").is_none() {
        errs.push(FieldError::required("spec.scaleTargetRef.name", ""));
    }
    let max = int(obj, "/spec/maxReplicas").unwrap_or(0);
    let min = int(obj, "/spec/minReplicas").unwrap_or(1);
    if min < 1 {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            &json!(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < min {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
}

fn validate_api_service(obj: &Value, errs: &mut Vec<FieldError>) {
    let name = string(obj, "/metadata/name").unwrap_or("");
    let version = string(obj, "/spec/version").unwrap_or("");
    let group = obj.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
    let expected = format!("{version}.{group}");
    if name != expected {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            &format!("must be `spec.version+\".\"+spec.group`: {:?}", expected),
        ));
    }
    if version.is_empty() {
        errs.push(FieldError::required("spec.version", ""));
    }
}

// ---------------------------------------------------------------------------------------------------
// First start
// ---------------------------------------------------------------------------------------------------

/// The APIService upstream's autoregister controller keeps for a built-in group-version (local: no
/// service), with its group priority as `apiServicePriorities` in `controlplane/apiserver/aggregator.go`.
pub fn local_api_service(group: &str, version: &str) -> Value {
    let (group_priority, version_priority) = match group {
        "" => (18000, 1),
        "apps" => (17800, 15),
        "events.k8s.io" => (17750, 15),
        "authentication.k8s.io" => (17700, 15),
        "authorization.k8s.io" => (17600, 15),
        "autoscaling" => (17500, if version == "v2" { 30 } else { 15 }),
        "batch" => (17400, 15),
        "certificates.k8s.io" => (17300, 15),
        "networking.k8s.io" => (17200, 15),
        "policy" => (17100, 15),
        "rbac.authorization.k8s.io" => (17000, 15),
        "storage.k8s.io" => (16800, 15),
        "apiextensions.k8s.io" => (16700, 15),
        "admissionregistration.k8s.io" => (16700, 15),
        "scheduling.k8s.io" => (16600, 15),
        "coordination.k8s.io" => (16500, 15),
        "node.k8s.io" => (16300, 15),
        "discovery.k8s.io" => (16200, 15),
        "flowcontrol.apiserver.k8s.io" => (16100, 21),
        _ => (15000, 15),
    };
    let mut spec = json!({
        "version": version,
        "groupPriorityMinimum": group_priority,
        "versionPriority": version_priority,
    });
    if !group.is_empty() {
        spec["group"] = json!(group);
    }
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": format!("{version}.{group}"),
            "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
        },
        "spec": spec,
    })
}

/// The mandatory flow-control objects (upstream's `flowcontrol/bootstrap` mandatory configuration).
fn mandatory_flow_control() -> Vec<(&'static str, Value)> {
    let annotations = json!({"apf.kubernetes.io/autoupdate-spec": "true"});
    vec![
        (
            "prioritylevelconfigurations",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                   "metadata": {"name": "exempt", "annotations": annotations},
                   "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}),
        ),
        (
            "prioritylevelconfigurations",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                   "metadata": {"name": "catch-all", "annotations": annotations},
                   "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                            "limitResponse": {"type": "Reject"}}}}),
        ),
        (
            "flowschemas",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                   "metadata": {"name": "exempt", "annotations": annotations},
                   "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1,
                            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
                                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                          "clusterScope": true, "namespaces": ["*"]}],
                                       "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
        ),
        (
            "flowschemas",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                   "metadata": {"name": "catch-all", "annotations": annotations},
                   "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000,
                            "distinguisherMethod": {"type": "ByUser"},
                            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
                                                    {"kind": "Group", "group": {"name": "system:authenticated"}}],
                                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                          "clusterScope": true, "namespaces": ["*"]}],
                                       "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
        ),
    ]
}

/// What upstream creates at first start, created when missing: the system PriorityClasses, an
/// APIService per served group-version, the mandatory flow-control objects.
pub async fn bootstrap(registry: &Registry) -> Result<(), ApiError> {
    let mut wanted: Vec<(&'static resources::ResourceInfo, Value)> = Vec::new();
    let find = |group, plural| {
        resources::all()
            .into_iter()
            .find(|r| r.group == group && r.plural == plural && r.alias.is_none())
            .expect("a built-in kind")
    };
    let pc = find("scheduling.k8s.io", "priorityclasses");
    for (name, value, description) in SYSTEM_PRIORITY_CLASSES {
        wanted.push((
            pc,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": name}, "value": value, "description": description}),
        ));
    }
    let api_services = find("apiregistration.k8s.io", "apiservices");
    let mut gvs = vec![("", "v1")];
    gvs.extend(resources::group_versions());
    let now = super::now_rfc3339();
    for (g, v) in gvs {
        let mut svc = local_api_service(g, v);
        svc["status"] = local_api_service_status(&now);
        wanted.push((api_services, svc));
    }
    for (plural, obj) in mandatory_flow_control() {
        wanted.push((find("flowcontrol.apiserver.k8s.io", plural), obj));
    }
    for (info, obj) in wanted {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        if registry.storage().get(&info.key(None, &name)).is_some() {
            continue;
        }
        match registry.create(info, None, obj, &WriteOptions::default()).await {
            Ok(_) => {}
            Err(e) if e.reason == "AlreadyExists" => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The status of a local APIService: Available, as upstream's available-condition controller reports
/// for services answered by the API server itself.
pub fn local_api_service_status(now: &str) -> Value {
    json!({"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now,
                           "reason": "Local", "message": "Local APIServices are always available"}]})
}

/// The controller manager's leader lease, which also tells whether its scheduler runs.
pub const CONTROLLER_MANAGER_LEASE: (&str, &str) = ("kube-system", "kubeling-controller-manager");

/// `componentstatuses`, computed on read as upstream does: the scheduler and the controller manager are
/// healthy while their (one) leader lease is held and renewed; the store (upstream's `etcd-0`) answers
/// whenever the API server does.
pub fn component_statuses(lease: Option<&Value>, now: jiff::Timestamp) -> Vec<Value> {
    let renewed = lease.and_then(|l| {
        let renew: jiff::Timestamp = l.pointer("/spec/renewTime")?.as_str()?.parse().ok()?;
        let duration = l.pointer("/spec/leaseDurationSeconds")?.as_i64()?;
        Some(now.as_second() - renew.as_second() <= duration)
    });
    let controllers = match renewed {
        Some(true) => Ok("ok"),
        Some(false) => Err("the controller manager's leader lease has expired"),
        None => Err("no controller manager holds the leader lease kube-system/kubeling-controller-manager"),
    };
    let status = |name: &str, r: Result<&str, &str>| {
        let condition = match r {
            Ok(message) => json!({"type": "Healthy", "status": "True", "message": message}),
            Err(e) => json!({"type": "Healthy", "status": "False", "error": e}),
        };
        json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name},
               "conditions": [condition]})
    };
    vec![
        status("scheduler", controllers),
        status("controller-manager", controllers),
        status("etcd-0", Ok("ok")),
    ]
}

/// The warning upstream adds to every `componentstatuses` request.
pub const COMPONENT_STATUS_DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_statuses_follow_the_controller_manager_lease() {
        let now: jiff::Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let lease = json!({"spec": {"renewTime": "2026-01-01T00:00:20.000000Z", "leaseDurationSeconds": 15}});
        let healthy = |l: Option<&Value>| {
            component_statuses(l, now)
                .iter()
                .map(|c| c["conditions"][0]["status"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(healthy(Some(&lease)), ["True", "True", "True"]);
        let stale = json!({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z", "leaseDurationSeconds": 15}});
        assert_eq!(healthy(Some(&stale)), ["False", "False", "True"]);
        assert_eq!(healthy(None), ["False", "False", "True"]);
        assert_eq!(component_statuses(None, now)[2]["metadata"]["name"], "etcd-0");
    }

    #[test]
    fn hpa_cpu_target_round_trips_between_v1_and_v2() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                        "metadata": {"name": "web"},
                        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                                 "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}});
        let v2 = hpa_v1_to_v2(&v1);
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            60
        );
        assert_eq!(hpa_v2_to_v1(&v2), v1);
    }

    #[test]
    fn hpa_defaults_min_replicas_and_a_cpu_metric() {
        let mut hpa = json!({"spec": {"maxReplicas": 3}});
        prepare_create("autoscaling", "horizontalpodautoscalers", &mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
    }

    #[test]
    fn hpa_with_max_below_min_is_invalid() {
        let hpa = json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"},
                                  "minReplicas": 3, "maxReplicas": 2}});
        let errs = validate("autoscaling", "horizontalpodautoscalers", &hpa, None, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.maxReplicas");
    }

    #[test]
    fn priority_class_rules() {
        let pc = |name: &str, value: i64| json!({"metadata": {"name": name}, "value": value});
        let v = |obj: &Value, old: Option<&Value>| {
            validate("scheduling.k8s.io", "priorityclasses", obj, old, None)
                .into_iter()
                .map(|e| e.field)
                .collect::<Vec<_>>()
        };
        assert!(v(&pc("high", 1000), None).is_empty());
        assert_eq!(v(&pc("system-mine", 10), None), vec!["metadata.name"]);
        assert_eq!(v(&pc("huge", 2_000_000_000), None), vec!["value"]);
        assert!(v(&pc("system-node-critical", 2_000_001_000), None).is_empty());
        assert_eq!(v(&pc("high", 2), Some(&pc("high", 1))), vec!["value"]);
    }

    #[test]
    fn network_policy_types_default_from_its_rules() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{}]}});
        prepare_create("networking.k8s.io", "networkpolicies", &mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        let mut np = json!({"spec": {"podSelector": {}}});
        prepare_create("networking.k8s.io", "networkpolicies", &mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    }

    #[test]
    fn a_csr_records_its_requester_whatever_the_client_sent_and_its_spec_cannot_change() {
        let sa = crate::rbac::service_account_user("dev", "builder");
        for (user, want) in [
            (
                Some(&sa),
                json!({"request": "x", "username": "system:serviceaccount:dev:builder",
                       "groups": ["system:serviceaccounts", "system:serviceaccounts:dev", "system:authenticated"],
                       "usages": ["digital signature", "key encipherment"]}),
            ),
            (
                None,
                json!({"request": "x", "usages": ["digital signature", "key encipherment"]}),
            ),
        ] {
            let mut obj = json!({"spec": {"request": "x", "username": "someone-else", "uid": "1",
                                          "groups": ["system:masters"], "extra": {"a": ["b"]}}});
            set_requester(&mut obj, user);
            object(&mut obj)
                .get_mut("spec")
                .and_then(Value::as_object_mut)
                .expect("spec")
                .entry("usages")
                .or_insert(json!(["digital signature", "key encipherment"]));
            assert_eq!(obj["spec"], want, "{user:?}");
        }
        let old = json!({"spec": {"request": "x", "username": "a"}});
        let mut new = json!({"spec": {"request": "y", "username": "b"}});
        prepare_update(
            "certificates.k8s.io",
            "certificatesigningrequests",
            &mut new,
            &old,
            None,
        );
        assert_eq!(new["spec"], old["spec"]);
    }

    #[test]
    fn csr_approval_changes_only_conditions_and_status_cannot_approve() {
        let old = json!({"spec": {"request": "x"}, "status": {"certificate": "Y2VydA=="}});
        let mut new = json!({"spec": {"request": "changed"},
                             "status": {"certificate": "other", "conditions": [{"type": "Approved", "status": "True"}]}});
        prepare_update(
            "certificates.k8s.io",
            "certificatesigningrequests",
            &mut new,
            &old,
            Some("approval"),
        );
        assert_eq!(new["status"]["certificate"], "Y2VydA==");
        assert_eq!(new["status"]["conditions"][0]["type"], "Approved");
        let mut via_status = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        prepare_update(
            "certificates.k8s.io",
            "certificatesigningrequests",
            &mut via_status,
            &old,
            Some("status"),
        );
        assert!(via_status["status"].get("conditions").is_none());
    }

    #[test]
    fn api_service_names_are_version_dot_group() {
        let svc = local_api_service("apps", "v1");
        assert!(validate("apiregistration.k8s.io", "apiservices", &svc, None, None).is_empty());
        assert_eq!(svc["metadata"]["name"], "v1.apps");
        assert_eq!(local_api_service("", "v1")["metadata"]["name"], "v1.");
        let mut bad = svc.clone();
        bad["metadata"]["name"] = json!("apps");
        assert_eq!(
            validate("apiregistration.k8s.io", "apiservices", &bad, None, None).len(),
            1
        );
    }
}
