//! LimitRanges: the strategy (`SetDefaults_LimitRangeItem`, `ValidateLimitRange`) and the LimitRanger
//! admission (`plugin/pkg/admission/limitranger`) on pod and claim creation: container requests and
//! limits defaulted from each `Container` item (with the `kubernetes.io/limit-ranger` annotation), then
//! min, max and maxLimitRequestRatio enforced per container, per pod and per claim; a violation is 403.
//! Pure functions of JSON, called by the registry.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use api::pod::{ParsedQuantity, parse_quantity};

use super::{Registry, ResourceInfo, meta_str, resources};
use crate::error::{ApiError, FieldError};

/// The resource this strategy is for.
pub fn handles(group: &str, plural: &str) -> bool {
    (group, plural) == ("", "limitranges")
}

/// The annotation the admission leaves on a pod it defaulted.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

fn list(v: Option<&Value>) -> BTreeMap<String, (String, ParsedQuantity)> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let s = q.as_str()?.to_string();
            parse_quantity(&s).ok().map(|p| (k.clone(), (p.canonical(), p)))
        })
        .collect()
}

/// `SetDefaults_LimitRangeItem` on every `Container` item: default limits from max, default requests
/// from the default limits, then from min. Idempotent.
pub fn default(obj: &mut Value) {
    for item in obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let take = |item: &Value, k: &str| {
            item.get(k)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let (max, min) = (take(item, "max"), take(item, "min"));
        let mut default = take(item, "default");
        let mut default_request = take(item, "defaultRequest");
        for (k, v) in &max {
            default.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &default {
            default_request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &min {
            default_request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        item["default"] = Value::Object(default);
        item["defaultRequest"] = Value::Object(default_request);
    }
}

/// `ValidateLimitRange` (the spec part).
pub fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut types = Vec::new();
    for (i, item) in obj
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("spec.limits[{i}]");
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        if ty.is_empty() {
            errs.push(FieldError::required(format!("{p}.type"), ""));
        } else if types.contains(&ty) {
            errs.push(FieldError::duplicate(format!("{p}.type"), &json!(ty)));
        }
        types.push(ty);
        let get = |k: &str| list(item.get(k));
        let (min, max, default, default_request, ratio) = (
            get("min"),
            get("max"),
            get("default"),
            get("defaultRequest"),
            get("maxLimitRequestRatio"),
        );
        let has = |k: &str| {
            item.get(k)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        };
        if ty == "Pod" {
            for k in ["default", "defaultRequest"] {
                if has(k) {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{k}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        if ty == "PersistentVolumeClaim" && !min.contains_key("storage") && !max.contains_key("storage") {
            errs.push(FieldError::required(
                format!("{p}.limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        let mut keys: Vec<&String> = min.keys().chain(max.keys()).collect();
        if ty != "Pod" {
            keys.extend(default.keys().chain(default_request.keys()));
        }
        keys.extend(ratio.keys());
        keys.sort();
        keys.dedup();
        for k in keys {
            let inv = |field: &str, shown: &str, msg: String| {
                FieldError::invalid(format!("{p}.{field}[{k}]"), &json!(shown), &msg)
            };
            let (mn, mx, d, dr, r) = (
                min.get(k),
                max.get(k),
                default.get(k),
                default_request.get(k),
                ratio.get(k),
            );
            if let (Some(mn), Some(mx)) = (mn, mx)
                && mn.1.nanos > mx.1.nanos
            {
                errs.push(inv(
                    "min",
                    &mn.0,
                    format!("min value {} is greater than max value {}", mn.0, mx.0),
                ));
            }
            if let (Some(dr), Some(mn)) = (dr, mn)
                && mn.1.nanos > dr.1.nanos
            {
                errs.push(inv(
                    "defaultRequest",
                    &dr.0,
                    format!(
                        "min value {} is greater than default request value {}",
                        mn.0, dr.0
                    ),
                ));
            }
            if let (Some(dr), Some(mx)) = (dr, mx)
                && dr.1.nanos > mx.1.nanos
            {
                errs.push(inv(
                    "defaultRequest",
                    &dr.0,
                    format!(
                        "default request value {} is greater than max value {}",
                        dr.0, mx.0
                    ),
                ));
            }
            if let (Some(dr), Some(d)) = (dr, d)
                && dr.1.nanos > d.1.nanos
            {
                errs.push(inv(
                    "defaultRequest",
                    &dr.0,
                    format!(
                        "default request value {} is greater than default limit value {}",
                        dr.0, d.0
                    ),
                ));
            }
            if let (Some(d), Some(mn)) = (d, mn)
                && mn.1.nanos > d.1.nanos
            {
                errs.push(inv(
                    "default",
                    &mn.0,
                    format!("min value {} is greater than default value {}", mn.0, d.0),
                ));
            }
            if let (Some(d), Some(mx)) = (d, mx)
                && d.1.nanos > mx.1.nanos
            {
                errs.push(inv(
                    "default",
                    &mx.0,
                    format!("default value {} is greater than max value {}", d.0, mx.0),
                ));
            }
            if let Some(r) = r
                && r.1.nanos < 1_000_000_000
            {
                errs.push(inv(
                    "maxLimitRequestRatio",
                    &r.0,
                    format!("ratio {} is less than 1", r.0),
                ));
            }
            if let (Some(r), Some(mn), Some(mx)) = (r, mn, mx)
                && mn.1.nanos > 0
            {
                let limit = mx.1.nanos as f64 / mn.1.nanos as f64;
                if r.1.nanos as f64 / 1e9 > limit {
                    errs.push(inv(
                        "maxLimitRequestRatio",
                        &r.0,
                        format!("ratio {} is greater than max/min = {limit:.6}", r.0),
                    ));
                }
            }
        }
    }
    errs
}

/// The container requirements a `Container` item defaults (`defaultContainerResourceRequirements`).
fn container_defaults(range: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let (mut requests, mut limits) = (Map::new(), Map::new());
    for item in range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if item.get("type").and_then(Value::as_str) == Some("Container") {
            for (k, v) in item
                .get("defaultRequest")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                requests.insert(k.clone(), v.clone());
            }
            for (k, v) in item
                .get("default")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                limits.insert(k.clone(), v.clone());
            }
        }
    }
    (requests, limits)
}

/// The mutating half of LimitRanger on a new pod (`mergeContainerResources` for each range): fills in
/// missing container requests and limits, and records what it set in the `kubernetes.io/limit-ranger`
/// annotation.
pub fn default_pod(pod: &mut Value, ranges: &[Value]) {
    let mut notes = Vec::new();
    for range in ranges {
        let (requests, limits) = container_defaults(range);
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        for (key, prefix) in [("containers", "container"), ("initContainers", "init container")] {
            let Some(containers) = pod
                .pointer_mut(&format!("/spec/{key}"))
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for c in containers {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                if !c.get("resources").is_some_and(Value::is_object) {
                    c["resources"] = json!({});
                }
                let res = &mut c["resources"];
                let mut fill = |which: &str, defaults: &Map<String, Value>| -> Vec<String> {
                    if !res.get(which).is_some_and(Value::is_object) {
                        res[which] = json!({});
                    }
                    let have = res[which].as_object_mut().expect("just made an object");
                    let mut set = Vec::new();
                    for (k, v) in defaults {
                        if !have.contains_key(k) {
                            have.insert(k.clone(), v.clone());
                            set.push(k.clone());
                        }
                    }
                    set
                };
                let limits_set = fill("limits", &limits);
                let requests_set = fill("requests", &requests);
                for which in ["limits", "requests"] {
                    if res[which].as_object().is_some_and(Map::is_empty) {
                        res.as_object_mut().expect("an object").remove(which);
                    }
                }
                if !requests_set.is_empty() {
                    notes.push(format!("{} request for {prefix} {name}", requests_set.join(", ")));
                }
                if !limits_set.is_empty() {
                    notes.push(format!("{} limit for {prefix} {name}", limits_set.join(", ")));
                }
            }
        }
    }
    if !notes.is_empty() {
        let meta = super::meta_mut(pod);
        if !meta.get("annotations").is_some_and(Value::is_object) {
            meta.insert("annotations".into(), json!({}));
        }
        meta["annotations"][ANNOTATION] = json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

type Amounts = BTreeMap<String, (String, ParsedQuantity)>;

fn min_constraint(
    ty: &str,
    k: &str,
    enforced: &(String, ParsedQuantity),
    req: &Amounts,
    lim: &Amounts,
) -> Option<String> {
    let Some(r) = req.get(k) else {
        return Some(format!(
            "minimum {k} usage per {ty} is {}.  No request is specified",
            enforced.0
        ));
    };
    if r.1.nanos < enforced.1.nanos {
        return Some(format!(
            "minimum {k} usage per {ty} is {}, but request is {}",
            enforced.0, r.0
        ));
    }
    match lim.get(k) {
        Some(l) if l.1.nanos < enforced.1.nanos => Some(format!(
            "minimum {k} usage per {ty} is {}, but limit is {}",
            enforced.0, l.0
        )),
        _ => None,
    }
}

fn max_constraint(
    ty: &str,
    k: &str,
    enforced: &(String, ParsedQuantity),
    req: &Amounts,
    lim: &Amounts,
) -> Option<String> {
    let Some(l) = lim.get(k) else {
        return Some(format!(
            "maximum {k} usage per {ty} is {}.  No limit is specified",
            enforced.0
        ));
    };
    if l.1.nanos > enforced.1.nanos {
        return Some(format!(
            "maximum {k} usage per {ty} is {}, but limit is {}",
            enforced.0, l.0
        ));
    }
    match req.get(k) {
        Some(r) if r.1.nanos > enforced.1.nanos => Some(format!(
            "maximum {k} usage per {ty} is {}, but request is {}",
            enforced.0, r.0
        )),
        _ => None,
    }
}

fn ratio_constraint(
    ty: &str,
    k: &str,
    enforced: &(String, ParsedQuantity),
    req: &Amounts,
    lim: &Amounts,
) -> Option<String> {
    let r = req.get(k).map_or(0, |r| r.1.nanos);
    if r == 0 {
        return Some(format!(
            "{k} max limit to request ratio per {ty} is {}, but no request is specified or request is 0",
            enforced.0
        ));
    }
    let l = lim.get(k).map_or(0, |l| l.1.nanos);
    if l == 0 {
        return Some(format!(
            "{k} max limit to request ratio per {ty} is {}, but no limit is specified or limit is 0",
            enforced.0
        ));
    }
    let observed = l as f64 / r as f64;
    (observed > enforced.1.nanos as f64 / 1e9).then(|| {
        format!(
            "{k} max limit to request ratio per {ty} is {}, but provided ratio is {observed:.6}",
            enforced.0
        )
    })
}

fn check(ty: &str, item: &Value, req: &Amounts, lim: &Amounts, errs: &mut Vec<String>) {
    for (k, v) in list(item.get("min")) {
        errs.extend(min_constraint(ty, &k, &v, req, lim));
    }
    for (k, v) in list(item.get("max")) {
        errs.extend(max_constraint(ty, &k, &v, req, lim));
    }
    for (k, v) in list(item.get("maxLimitRequestRatio")) {
        errs.extend(ratio_constraint(ty, &k, &v, req, lim));
    }
}

fn sum(pod: &Value, which: &str) -> Amounts {
    let mut total = api::quota::ResourceList::new();
    for c in pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        total = api::quota::add(
            &total,
            &api::quota::resource_list(c.pointer(&format!("/resources/{which}"))),
        );
    }
    // Init containers run one at a time: the pod needs at least the largest.
    for c in pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, v) in api::quota::resource_list(c.pointer(&format!("/resources/{which}"))) {
            if total.get(&k).is_none_or(|t| t.nanos < v.nanos) {
                total.insert(k, v);
            }
        }
    }
    total.into_iter().map(|(k, v)| (k, (v.canonical(), v))).collect()
}

/// The validating half of LimitRanger on a new pod (`PodValidateLimitFunc`): every violation, in
/// upstream's words.
pub fn validate_pod(pod: &Value, range: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    for item in range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "Container" => {
                for key in ["containers", "initContainers"] {
                    for c in pod
                        .pointer(&format!("/spec/{key}"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let req = list(c.pointer("/resources/requests"));
                        let lim = list(c.pointer("/resources/limits"));
                        check("Container", item, &req, &lim, &mut errs);
                    }
                }
            }
            "Pod" => check("Pod", item, &sum(pod, "requests"), &sum(pod, "limits"), &mut errs),
            _ => {}
        }
    }
    errs
}

/// `PersistentVolumeClaimValidateLimitFunc`: a claim's requested storage within min and max.
pub fn validate_claim(pvc: &Value, range: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let req = list(pvc.pointer("/spec/resources/requests"));
    for item in range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if item.get("type").and_then(Value::as_str) != Some("PersistentVolumeClaim") {
            continue;
        }
        for (k, v) in list(item.get("min")) {
            errs.extend(min_constraint(
                "PersistentVolumeClaim",
                &k,
                &v,
                &req,
                &Amounts::new(),
            ));
        }
        for (k, v) in list(item.get("max")) {
            if let Some(r) = req.get(&k)
                && r.1.nanos > v.1.nanos
            {
                errs.push(format!(
                    "maximum {k} usage per PersistentVolumeClaim is {}, but request is {}",
                    v.0, r.0
                ));
            }
        }
    }
    errs
}

/// `utilerrors.NewAggregate(errs).Error()`.
fn aggregate(errs: &[String]) -> String {
    if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    }
}

impl Registry {
    /// The LimitRanges of a namespace.
    fn limit_ranges(&self, ns: &str) -> Vec<Value> {
        let info = resources::find("", "v1", "limitranges").expect("limitranges are served");
        self.list(info, Some(ns), &Default::default(), None, None)
            .items
            .iter()
            .map(|o| o.value())
            .collect()
    }

    /// LimitRanger's defaults on a new pod.
    pub(super) fn limit_ranger_defaults(&self, pod: &mut Value) {
        let ns = meta_str(pod, "namespace").unwrap_or("default").to_string();
        let ranges = self.limit_ranges(&ns);
        if !ranges.is_empty() {
            default_pod(pod, &ranges);
        }
    }

    /// LimitRanger's checks on a new pod or claim: 403 with every violation.
    pub(super) fn limit_ranger_validate(&self, info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
        let checker: fn(&Value, &Value) -> Vec<String> = match (info.group, info.plural) {
            ("", "pods") => validate_pod,
            ("", "persistentvolumeclaims") => validate_claim,
            _ => return Ok(()),
        };
        let ns = meta_str(obj, "namespace").unwrap_or("default");
        let errs: Vec<String> = self
            .limit_ranges(ns)
            .iter()
            .flat_map(|r| checker(obj, r))
            .collect();
        if errs.is_empty() {
            return Ok(());
        }
        Err(ApiError::forbidden(
            info.plural,
            info.group,
            meta_str(obj, "name").unwrap_or(""),
            &aggregate(&errs),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(items: Value) -> Value {
        let mut r = json!({"spec": {"limits": items}});
        default(&mut r);
        r
    }

    #[test]
    fn container_items_default_limits_from_max_and_requests_from_limits_or_min() {
        let r = range(json!([{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]));
        let item = &r["spec"]["limits"][0];
        assert_eq!(item["default"], json!({"cpu": "2"}));
        assert_eq!(item["defaultRequest"], json!({"cpu": "2", "memory": "64Mi"}));
        let pod_item = range(json!([{"type": "Pod", "max": {"cpu": "2"}}]));
        assert!(pod_item["spec"]["limits"][0].get("default").is_none());
    }

    #[test]
    fn validation_orders_min_default_and_max() {
        let r = json!({"spec": {"limits": [
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "500m"}},
            {"type": "Container"},
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "PersistentVolumeClaim"}]}});
        let got: Vec<String> = validate(&r).into_iter().map(|e| e.message).collect();
        assert_eq!(
            got,
            vec![
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"500m\": ratio 500m is less than 1",
                "spec.limits[1].type: Duplicate value: \"Container\"",
                "spec.limits[2].default: Forbidden: may not be specified when `type` is 'Pod'",
                "spec.limits[3].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
            ]
        );
    }

    #[test]
    fn pods_get_defaults_and_the_annotation() {
        let r = range(
            json!([{"type": "Container", "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "100m"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a"}, {"name": "b", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}]}});
        default_pod(&mut pod, &[r]);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}),
            "the default limit is the default request too (SetDefaults_LimitRangeItem)"
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["limits"],
            json!({"cpu": "1", "memory": "128Mi"})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            json!(
                "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; \
                 memory request for container b; memory limit for container b"
            )
        );
    }

    #[test]
    fn pods_outside_the_range_are_refused_with_each_reason() {
        let r = range(
            json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"}, "maxLimitRequestRatio": {"cpu": "2"}}]),
        );
        let pod = json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "500m"}}}]}});
        assert_eq!(
            validate_pod(&pod, &r),
            vec![
                "maximum cpu usage per Container is 1, but limit is 2",
                "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",
            ]
        );
        let none = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            validate_pod(&none, &r),
            vec![
                "minimum cpu usage per Container is 100m.  No request is specified",
                "maximum cpu usage per Container is 1.  No limit is specified",
                "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0",
            ]
        );
        let pod_max = range(json!([{"type": "Pod", "max": {"memory": "1Gi"}}]));
        let two = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "768Mi"}}}, {"name": "b", "resources": {"limits": {"memory": "512Mi"}}}]}});
        assert_eq!(
            validate_pod(&two, &pod_max),
            vec!["maximum memory usage per Pod is 1Gi, but limit is 1280Mi"]
        );
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }

    #[test]
    fn claims_stay_within_the_storage_range() {
        let r = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
        );
        let pvc = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert!(validate_claim(&pvc("1Gi"), &r).is_empty());
        assert_eq!(
            validate_claim(&pvc("3Gi"), &r),
            vec!["maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 3Gi"]
        );
        assert_eq!(
            validate_claim(&pvc("500Mi"), &r),
            vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
        );
    }
}
