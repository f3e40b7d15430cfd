//! Resource quota accounting (upstream `pkg/quota/v1` and its evaluators, `plugin/pkg/admission/
//! resourcequota`), shared by the API server's quota admission and the controller manager's quota
//! controller so both count the same: what an object uses ([`usage`]), which quotas and which of their
//! resources it falls under ([`covered`], [`matches_scopes`]), the pod constraints of compute quotas
//! ([`constraints`]), and the admission verdict ([`charge`]). Pure functions of JSON objects.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::pod::{ParsedQuantity, QuantityFormat, parse_quantity};

/// Resource name → amount.
pub type ResourceList = BTreeMap<String, ParsedQuantity>;

/// upstream `standardQuotaResources` (plus hugepages, allowed by `IsStandardQuotaResourceName`).
pub const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// The quota scopes upstream knows.
pub const SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// Whether `name` is a resource a quota may limit (`IsStandardQuotaResourceName`), for names without `/`.
pub fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
}

/// Whether a quota of `name` must be a whole number (`IsIntegerResourceName`).
pub fn is_integer_resource(name: &str) -> bool {
    matches!(
        name,
        "pods"
            | "services"
            | "replicationcontrollers"
            | "resourcequotas"
            | "secrets"
            | "configmaps"
            | "persistentvolumeclaims"
            | "services.nodeports"
            | "services.loadbalancers"
    ) || name.starts_with("count/")
}

/// A quantity of `n` whole units.
pub fn units(n: i64) -> ParsedQuantity {
    ParsedQuantity {
        nanos: i128::from(n) * 1_000_000_000,
        format: QuantityFormat::DecimalSi,
    }
}

/// A `ResourceList` from JSON (`{"pods": "2", "requests.cpu": "500m"}`); unparsable values are left out.
pub fn resource_list(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let s = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            parse_quantity(&s).ok().map(|p| (k.clone(), p))
        })
        .collect()
}

/// A `ResourceList` as JSON, each amount in upstream's canonical form.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), json!(q.canonical())))
            .collect(),
    )
}

/// `quota.Add`.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        let sum = match out.get(k) {
            Some(cur) => cur.plus(*v),
            None => *v,
        };
        out.insert(k.clone(), sum);
    }
    out
}

/// `quota.Equals` on values (formats aside).
pub fn equal(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| w.nanos == v.nanos))
}

/// `prettyPrint`: `a=1,b=2` in name order.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, v)| format!("{k}={}", v.canonical()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The `count/<resource>` name of a kind (`count/pods`, `count/deployments.apps`).
pub fn object_count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The `(group, plural)` a resource name counts objects of: `count/<plural>[.<group>]` and the legacy
/// names (`pods`, `services`, `configmaps`, ...); compute resources count pods.
pub fn counted_kind(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        return Some(match rest.split_once('.') {
            Some((plural, group)) => (group.to_string(), plural.to_string()),
            None => (String::new(), rest.to_string()),
        });
    }
    let core = |p: &str| Some((String::new(), p.to_string()));
    match name {
        "services" | "services.loadbalancers" | "services.nodeports" => core("services"),
        "persistentvolumeclaims" | "requests.storage" => core("persistentvolumeclaims"),
        "replicationcontrollers" | "resourcequotas" | "secrets" | "configmaps" => core(name),
        _ if name.contains(".storageclass.storage.k8s.io/") => core("persistentvolumeclaims"),
        _ if is_pod_resource(name) => core("pods"),
        _ => None,
    }
}

/// Resources the pod evaluator covers (`podResources` and the prefixed ones).
fn is_pod_resource(name: &str) -> bool {
    matches!(
        name,
        "pods"
            | "cpu"
            | "memory"
            | "ephemeral-storage"
            | "requests.cpu"
            | "requests.memory"
            | "requests.ephemeral-storage"
            | "limits.cpu"
            | "limits.memory"
            | "limits.ephemeral-storage"
    ) || name.starts_with("hugepages-")
        || name.starts_with("requests.")
}

/// `MatchingResources`: which of a quota's resource names an object of `(group, plural)` counts toward.
pub fn covered<'a>(group: &str, plural: &str, names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let count = object_count_name(group, plural);
    names
        .into_iter()
        .filter(|n| {
            **n == count
                || (group.is_empty()
                    && match plural {
                        "pods" => is_pod_resource(n) && !n.starts_with("requests.storage"),
                        "services" => matches!(
                            n.as_str(),
                            "services" | "services.loadbalancers" | "services.nodeports"
                        ),
                        "persistentvolumeclaims" => {
                            matches!(n.as_str(), "persistentvolumeclaims" | "requests.storage")
                                || n.contains(".storageclass.storage.k8s.io/")
                        }
                        "replicationcontrollers" | "resourcequotas" | "secrets" | "configmaps" => {
                            *n == plural
                        }
                        _ => false,
                    })
        })
        .cloned()
        .collect()
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}

/// `QuotaV1Pod`: whether a pod's compute resources count (not terminal, not stuck past its grace).
pub fn pod_counts(pod: &Value, now: jiff::Timestamp) -> bool {
    if matches!(phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    let deletion = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (deletion, grace) {
        (Some(at), Some(g)) => now <= at + jiff::SignedDuration::from_secs(g),
        _ => true,
    }
}

fn container_list(c: &Value, which: &str) -> ResourceList {
    resource_list(c.pointer(&format!("/resources/{which}")))
}

/// upstream `resourcehelper.PodRequests`/`PodLimits`: the regular containers (and restartable init
/// containers) summed, at least each plain init container, plus the pod overhead.
fn pod_resources(pod: &Value, which: &str) -> ResourceList {
    let list = |k: &str| {
        pod.pointer(&format!("/spec/{k}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut sum = ResourceList::new();
    for c in list("containers") {
        sum = add(&sum, &container_list(&c, which));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in list("initContainers") {
        let r = container_list(&c, which);
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            sum = add(&sum, &r);
            sidecars = add(&sidecars, &r);
        } else {
            // An init container runs beside the sidecars started before it.
            let with = add(&r, &sidecars);
            for (k, v) in with {
                if init_max.get(&k).is_none_or(|m| m.nanos < v.nanos) {
                    init_max.insert(k, v);
                }
            }
        }
    }
    for (k, v) in init_max {
        if sum.get(&k).is_none_or(|m| m.nanos < v.nanos) {
            sum.insert(k, v);
        }
    }
    add(&sum, &resource_list(pod.pointer("/spec/overhead")))
}

/// upstream `podComputeUsageHelper`.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods".into(), units(1));
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.into(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (r, q) in requests {
        let extended = r.contains('/') && !r.starts_with("kubernetes.io/") && !r.starts_with("requests.");
        if r.starts_with("hugepages-") {
            out.insert(r.clone(), *q);
            out.insert(format!("requests.{r}"), *q);
        } else if extended {
            out.insert(format!("requests.{r}"), *q);
        }
    }
    out
}

/// What one object uses (`Evaluator.Usage`): its object count, and for pods (while they count), services
/// and claims what they hold.
pub fn usage(group: &str, plural: &str, obj: &Value, now: jiff::Timestamp) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(object_count_name(group, plural), units(1));
    if !group.is_empty() {
        return out;
    }
    match plural {
        "pods" if pod_counts(obj, now) => {
            let requests = pod_resources(obj, "requests");
            let limits = pod_resources(obj, "limits");
            out = add(&out, &compute_usage(&requests, &limits));
        }
        "services" => {
            out.insert("services".into(), units(1));
            let ty = obj
                .pointer("/spec/type")
                .and_then(Value::as_str)
                .unwrap_or("ClusterIP");
            let ports = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map_or(0, Vec::len) as i64;
            match ty {
                "NodePort" => {
                    out.insert("services.nodeports".into(), units(ports));
                }
                "LoadBalancer" => {
                    out.insert("services.loadbalancers".into(), units(1));
                    out.insert("services.nodeports".into(), units(ports));
                }
                _ => {}
            }
        }
        "persistentvolumeclaims" => {
            out.insert("persistentvolumeclaims".into(), units(1));
            let storage = obj
                .pointer("/spec/resources/requests/storage")
                .and_then(Value::as_str)
                .and_then(|s| parse_quantity(s).ok());
            if let Some(s) = storage {
                out.insert("requests.storage".into(), s);
            }
            if let Some(class) = obj.pointer("/spec/storageClassName").and_then(Value::as_str) {
                let prefix = format!("{class}.storageclass.storage.k8s.io");
                out.insert(format!("{prefix}/persistentvolumeclaims"), units(1));
                if let Some(s) = storage {
                    out.insert(format!("{prefix}/requests.storage"), s);
                }
            }
        }
        "replicationcontrollers" | "resourcequotas" | "secrets" | "configmaps" => {
            out.insert(plural.into(), units(1));
        }
        _ => {}
    }
    out
}

/// The scopes of a quota: `spec.scopes` and the scope selector's scope names with their requirement.
fn scope_requirements(quota: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| (s.to_string(), "Exists".to_string(), Vec::new()))
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        out.push((
            e.get("scopeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            e.get("operator")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            values,
        ));
    }
    out
}

/// Whether an object falls under a quota's scopes: a quota without scopes takes everything; a scoped
/// one only pods that match every scope (`podMatchesScopeFunc`).
pub fn matches_scopes(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    let scopes = scope_requirements(quota);
    if scopes.is_empty() {
        return true;
    }
    if (group, plural) != ("", "pods") {
        return false;
    }
    scopes.iter().all(|(scope, op, values)| {
        let terminating = obj
            .pointer("/spec/activeDeadlineSeconds")
            .is_some_and(|v| v.as_i64().is_some_and(|n| n >= 0));
        let best_effort = crate::pod::qos_class(&crate::tree::pod(obj).unwrap_or_default()) == "BestEffort";
        match scope.as_str() {
            "Terminating" => terminating,
            "NotTerminating" => !terminating,
            "BestEffort" => best_effort,
            "NotBestEffort" => !best_effort,
            "PriorityClass" => {
                let class = obj
                    .pointer("/spec/priorityClassName")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty());
                match op.as_str() {
                    "In" => class.is_some_and(|c| values.iter().any(|v| v == c)),
                    "NotIn" => class.is_none_or(|c| !values.iter().any(|v| v == c)),
                    "Exists" => class.is_some(),
                    "DoesNotExist" => class.is_none(),
                    _ => false,
                }
            }
            "CrossNamespacePodAffinity" => {
                let terms = |kind: &str| {
                    [
                        "requiredDuringSchedulingIgnoredDuringExecution",
                        "preferredDuringSchedulingIgnoredDuringExecution",
                    ]
                    .iter()
                    .flat_map(|w| {
                        obj.pointer(&format!("/spec/affinity/{kind}/{w}"))
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                    })
                    .map(|t| t.get("podAffinityTerm").cloned().unwrap_or(t))
                    .any(|t| {
                        t.get("namespaceSelector").is_some_and(|s| !s.is_null())
                            || t.get("namespaces")
                                .and_then(Value::as_array)
                                .is_some_and(|a| !a.is_empty())
                    })
                };
                terms("podAffinity") || terms("podAntiAffinity")
            }
            _ => false,
        }
    })
}

/// Resources whose amount a container must state when a quota limits them (`validationSet`).
const VALIDATED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// The pod evaluator's `Constraints`: every container must state each compute resource the quota
/// limits ("must specify limits.cpu for: a,b; requests.cpu for: a").
pub fn constraints(limited: &[String], pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = limited
        .iter()
        .map(String::as_str)
        .filter(|r| VALIDATED.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for key in ["containers", "initContainers"] {
        for c in pod
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let have = compute_usage(&container_list(c, "requests"), &container_list(c, "limits"));
            for r in &required {
                if !have.contains_key(*r) {
                    missing
                        .entry(r)
                        .or_default()
                        .insert(c.get("name").and_then(Value::as_str).unwrap_or("").to_string());
                }
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| format!("{r} for: {}", names.iter().cloned().collect::<Vec<_>>().join(",")))
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// Why admission refuses a create under one quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `failed quota: NAME: <constraint>`.
    Constraint(String),
    /// `status unknown for quota: NAME, resources: a,b`.
    Unknown(String),
    /// `exceeded quota: NAME, requested: ..., used: ..., limited: ...`.
    Exceeded(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Constraint(m) | Refusal::Unknown(m) | Refusal::Exceeded(m) => f.write_str(m),
        }
    }
}

/// Upstream's quota admission for one quota and one new object (`checkRequest`): `Ok(None)` when the
/// quota does not concern it, `Ok(Some(used))` with the quota's new `status.used`, or the refusal.
pub fn charge(
    quota: &Value,
    group: &str,
    plural: &str,
    obj: &Value,
    now: jiff::Timestamp,
) -> Result<Option<ResourceList>, Refusal> {
    let name = quota
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let hard = resource_list(quota.pointer("/status/hard"));
    let used = resource_list(quota.pointer("/status/used"));
    let limited = covered(group, plural, hard.keys());
    if (group, plural) == ("", "pods") {
        constraints(&limited, obj).map_err(|e| Refusal::Constraint(format!("failed quota: {name}: {e}")))?;
    }
    if limited.is_empty() {
        return Ok(None);
    }
    let unknown: Vec<&String> = limited.iter().filter(|r| !used.contains_key(*r)).collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        return Err(Refusal::Unknown(format!(
            "status unknown for quota: {name}, resources: {}",
            names.join(",")
        )));
    }
    if !matches_scopes(quota, group, plural, obj) {
        return Ok(None);
    }
    let requested: ResourceList = usage(group, plural, obj, now)
        .into_iter()
        .filter(|(k, v)| v.nanos != 0 && hard.contains_key(k))
        .collect();
    if requested.is_empty() {
        return Ok(None);
    }
    let new_used = add(&used, &requested);
    let exceeded: Vec<&String> = requested
        .keys()
        .filter(|k| new_used[*k].nanos > hard[*k].nanos)
        .collect();
    if !exceeded.is_empty() {
        let mask = |l: &ResourceList| -> ResourceList {
            l.iter()
                .filter(|(k, _)| exceeded.contains(k))
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        return Err(Refusal::Exceeded(format!(
            "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
            pretty(&mask(&requested)),
            pretty(&mask(&used)),
            pretty(&mask(&hard))
        )));
    }
    Ok(Some(new_used))
}

/// The quota controller's `status.used`: the usage of every object that falls under the quota, for
/// each of its hard resources (zero where nothing counts).
pub fn total_usage<'a>(
    quota: &Value,
    objects: impl IntoIterator<Item = (&'a str, &'a str, &'a Value)>,
    now: jiff::Timestamp,
) -> ResourceList {
    let hard = resource_list(quota.pointer("/spec/hard"));
    let mut used: ResourceList = hard
        .keys()
        .map(|k| {
            (
                k.clone(),
                ParsedQuantity {
                    nanos: 0,
                    format: QuantityFormat::DecimalSi,
                },
            )
        })
        .collect();
    for (group, plural, obj) in objects {
        if !matches_scopes(quota, group, plural, obj) {
            continue;
        }
        let u: ResourceList = usage(group, plural, obj, now)
            .into_iter()
            .filter(|(k, _)| hard.contains_key(k))
            .collect();
        used = add(&used, &u);
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn pod(requests: Value, limits: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"requests": requests, "limits": limits}}]}, "status": {"phase": "Pending"}})
    }

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q"}, "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}})
    }

    fn show(l: &ResourceList) -> Value {
        to_json(l)
    }

    #[test]
    fn a_pod_uses_its_count_and_compute_resources_while_it_runs() {
        let p = pod(json!({"cpu": "250m", "memory": "64Mi"}), json!({"cpu": "1"}));
        assert_eq!(
            show(&usage("", "pods", &p, now())),
            json!({"count/pods": "1", "pods": "1", "cpu": "250m", "requests.cpu": "250m", "memory": "64Mi",
                   "requests.memory": "64Mi", "limits.cpu": "1"})
        );
        let mut done = p.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(show(&usage("", "pods", &done, now())), json!({"count/pods": "1"}));
        let mut stuck = p.clone();
        stuck["metadata"]["deletionTimestamp"] = json!("2025-12-31T23:59:00Z");
        stuck["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert_eq!(
            show(&usage("", "pods", &stuck, now())),
            json!({"count/pods": "1"}),
            "past its grace"
        );
    }

    #[test]
    fn init_containers_count_at_their_maximum() {
        let p = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                                               {"name": "b", "resources": {"requests": {"cpu": "100m"}}}],
                                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "500m"}}}]}});
        assert_eq!(show(&usage("", "pods", &p, now()))["requests.cpu"], json!("500m"));
    }

    #[test]
    fn other_kinds_use_their_counts() {
        let svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 1}, {"port": 2}]}});
        assert_eq!(
            show(&usage("", "services", &svc, now())),
            json!({"count/services": "1", "services": "1", "services.nodeports": "2"})
        );
        assert_eq!(
            show(&usage("apps", "deployments", &json!({}), now())),
            json!({"count/deployments.apps": "1"})
        );
        let pvc =
            json!({"spec": {"storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            show(&usage("", "persistentvolumeclaims", &pvc, now())),
            json!({"count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "1Gi",
                   "standard.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
                   "standard.storageclass.storage.k8s.io/requests.storage": "1Gi"})
        );
        assert_eq!(
            counted_kind("count/deployments.apps"),
            Some(("apps".into(), "deployments".into()))
        );
        assert_eq!(counted_kind("requests.cpu"), Some(("".into(), "pods".into())));
        assert_eq!(counted_kind("configmaps"), Some(("".into(), "configmaps".into())));
    }

    #[test]
    fn admission_refuses_what_exceeds_with_upstreams_message() {
        let q = quota(json!({"pods": "2"}), json!({"pods": "2"}));
        let p = pod(json!({}), json!({}));
        assert_eq!(
            charge(&q, "", "pods", &p, now()),
            Err(Refusal::Exceeded(
                "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2".into()
            ))
        );
        let q = quota(
            json!({"pods": "2", "configmaps": "1"}),
            json!({"pods": "1", "configmaps": "0"}),
        );
        assert_eq!(
            show(&charge(&q, "", "pods", &p, now()).unwrap().unwrap()),
            json!({"pods": "2", "configmaps": "0"})
        );
        assert_eq!(
            charge(&q, "apps", "deployments", &json!({}), now()),
            Ok(None),
            "not limited"
        );
        let unknown = json!({"metadata": {"name": "q"}, "status": {"hard": {"pods": "2"}}});
        assert_eq!(
            charge(&unknown, "", "pods", &p, now()),
            Err(Refusal::Unknown(
                "status unknown for quota: q, resources: pods".into()
            ))
        );
    }

    #[test]
    fn compute_quotas_require_every_container_to_state_its_resources() {
        let q = quota(
            json!({"requests.cpu": "1", "limits.memory": "1Gi"}),
            json!({"requests.cpu": "0", "limits.memory": "0"}),
        );
        let p = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]}});
        assert_eq!(
            charge(&q, "", "pods", &p, now()),
            Err(Refusal::Constraint(
                "failed quota: q: must specify limits.memory for: a,b; requests.cpu for: b".into()
            ))
        );
        let big = pod(json!({"cpu": "1500m"}), json!({"memory": "512Mi"}));
        assert_eq!(
            charge(&q, "", "pods", &big, now()),
            Err(Refusal::Exceeded(
                "exceeded quota: q, requested: requests.cpu=1500m, used: requests.cpu=0, limited: requests.cpu=1".into()
            ))
        );
    }

    #[test]
    fn scoped_quotas_take_only_matching_pods() {
        let mut q = quota(json!({"pods": "1"}), json!({"pods": "0"}));
        q["spec"]["scopes"] = json!(["BestEffort"]);
        assert!(matches_scopes(&q, "", "pods", &pod(json!({}), json!({}))));
        assert!(!matches_scopes(
            &q,
            "",
            "pods",
            &pod(json!({"cpu": "1"}), json!({}))
        ));
        assert!(!matches_scopes(&q, "", "configmaps", &json!({})));
        q["spec"]["scopes"] = json!([]);
        q["spec"]["scopeSelector"] = json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]});
        let mut high = pod(json!({}), json!({}));
        high["spec"]["priorityClassName"] = json!("high");
        assert!(matches_scopes(&q, "", "pods", &high));
        assert!(!matches_scopes(&q, "", "pods", &pod(json!({}), json!({}))));
    }

    #[test]
    fn the_controller_sums_usage_over_every_hard_resource() {
        let q = json!({"spec": {"hard": {"pods": "5", "requests.memory": "1Gi", "count/configmaps": "3"}}});
        let a = pod(json!({"memory": "256Mi"}), json!({}));
        let b = pod(json!({"memory": "512Mi"}), json!({}));
        let cm = json!({});
        let used = total_usage(
            &q,
            [("", "pods", &a), ("", "pods", &b), ("", "configmaps", &cm)],
            now(),
        );
        assert_eq!(
            show(&used),
            json!({"pods": "2", "requests.memory": "768Mi", "count/configmaps": "1"})
        );
        let none = total_usage(&q, [], now());
        assert_eq!(
            show(&none),
            json!({"pods": "0", "requests.memory": "0", "count/configmaps": "0"})
        );
    }
}
