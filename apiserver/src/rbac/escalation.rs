//! RBAC's privilege-escalation prevention (upstream `pkg/registry/rbac/*/policybased` and
//! `pkg/registry/rbac/validation/policy_comparator.go`): a user may write a Role or ClusterRole only with
//! rules they hold themselves (or the `escalate` verb on it), and a binding only to a role whose rules
//! they hold (or the `bind` verb on it); an `aggregationRule` needs cluster-admin. `system:masters` and the
//! API server's own writes skip the check. The requester rides in a task-local set by the HTTP layer
//! (upstream reads it from the request context), so the registry needs no user parameter.

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;

use super::{Attributes, Policy, authorize, is_master, rules_for};
use crate::error::ApiError;
use crate::registry::ResourceInfo;
use crate::user::UserInfo;

const GROUP: &str = "rbac.authorization.k8s.io";

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn strings(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

/// upstream `BreakdownRule`: one rule per group × resource × verb (× name), and per URL × verb.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut out = Vec::new();
    for g in strings(&rule.api_groups) {
        for r in strings(&rule.resources) {
            for v in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(g),
                    resources: one(r),
                    verbs: vec![v.clone()],
                    ..Default::default()
                };
                let names = strings(&rule.resource_names);
                if names.is_empty() {
                    out.push(base);
                } else {
                    for n in names {
                        out.push(PolicyRule {
                            resource_names: one(n),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for u in strings(&rule.non_resource_urls) {
        for v in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(u),
                verbs: vec![v.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn resource_covers_all(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn url_covers(owner: &str, path: &str) -> bool {
    owner == path || (owner.ends_with('*') && path.starts_with(owner.trim_end_matches('*')))
}

/// upstream `ruleCovers`.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups =
        has(strings(&owner.api_groups), "*") || has_all(strings(&owner.api_groups), strings(&sub.api_groups));
    let resources = resource_covers_all(strings(&owner.resources), strings(&sub.resources));
    let urls = strings(&sub.non_resource_urls)
        .iter()
        .all(|p| strings(&owner.non_resource_urls).iter().any(|o| url_covers(o, p)));
    let owner_names = strings(&owner.resource_names);
    let names = if strings(&sub.resource_names).is_empty() {
        owner_names.is_empty()
    } else {
        owner_names.is_empty() || has_all(owner_names, strings(&sub.resource_names))
    };
    verbs && groups && resources && names && urls
}

/// upstream `Covers`: whether `owner` rules cover `wanted`, and the uncovered atomic rules.
pub fn covers(owner: &[PolicyRule], wanted: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let missing: Vec<PolicyRule> = wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (missing.is_empty(), missing)
}

/// upstream `CompactRules`: rules on one group and one resource (and at most one name) merge their verbs.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let is_simple = strings(&r.non_resource_urls).is_empty()
            && strings(&r.api_groups).len() == 1
            && strings(&r.resources).len() == 1
            && strings(&r.resource_names).len() <= 1;
        if !is_simple {
            out.push(r);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == r.api_groups && s.resources == r.resources && s.resource_names == r.resource_names
        }) {
            Some(s) => s.verbs.extend(r.verbs),
            None => simple.push(r),
        }
    }
    out.extend(simple);
    out
}

fn go_quoted(items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", q.join(" "))
}

/// upstream `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
pub fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", strings(&r.api_groups)),
        ("Resources", strings(&r.resources)),
        ("NonResourceURLs", strings(&r.non_resource_urls)),
        ("ResourceNames", strings(&r.resource_names)),
        ("Verbs", &r.verbs[..]),
    ] {
        if !v.is_empty() {
            parts.push(format!("{label}:{}", go_quoted(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// upstream `ConfirmNoEscalation`: the user holds every rule in `rules` within `namespace`.
pub fn confirm_no_escalation(
    policy: &dyn Policy,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owned, errors) = rules_for(policy, user, namespace);
    let (ok, missing) = covers(&owned, rules);
    if ok {
        return Ok(());
    }
    let mut descriptions: Vec<String> = compact(missing).iter().map(compact_string).collect();
    descriptions.sort();
    descriptions.dedup();
    let mut msg = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        go_quoted(&user.groups),
        descriptions.join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(msg)
}

fn allowed(policy: &dyn Policy, user: &UserInfo, verb: &str, resource: &str, ns: &str, name: &str) -> bool {
    let a = Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: GROUP.into(),
        api_version: "*".into(),
        resource: resource.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    };
    authorize(policy, user, &a).allowed
}

/// upstream `IsOnlyMutatingGCFields`: only owner references or finalizers changed.
fn only_gc_fields(new: &Value, old: &Value) -> bool {
    let mut copied = new.clone();
    if let (Some(m), Some(om)) = (
        copied.get_mut("metadata").and_then(Value::as_object_mut),
        old.get("metadata").and_then(Value::as_object),
    ) {
        for f in [
            "ownerReferences",
            "finalizers",
            "selfLink",
            "managedFields",
            "resourceVersion",
        ] {
            match om.get(f) {
                Some(v) => m.insert(f.into(), v.clone()),
                None => m.remove(f),
            };
        }
    }
    &copied == old
}

fn parse<T: serde::de::DeserializeOwned + Default>(v: Option<&Value>) -> T {
    v.and_then(|v| T::deserialize(v).ok()).unwrap_or_default()
}

/// The check on a write of `new` (replacing `old` on updates), for the task's requester.
pub fn check(
    policy: &dyn Policy,
    info: &ResourceInfo,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if info.group != GROUP {
        return Ok(());
    }
    let Some(user) = crate::user::requester() else {
        return Ok(());
    };
    if is_master(&user) || old.is_some_and(|o| only_gc_fields(new, o)) {
        return Ok(());
    }
    let meta = |f: &str| {
        new.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (name, ns) = (meta("name"), if info.namespaced { meta("namespace") } else { "" });
    let forbidden = |why: String| ApiError::forbidden(info.plural, info.group, name, &why);
    match info.plural {
        "roles" | "clusterroles" => {
            let request_name = if old.is_some() { name } else { "" };
            if allowed(policy, &user, "escalate", info.plural, ns, request_name) {
                return Ok(());
            }
            let rules: Vec<PolicyRule> = parse(new.get("rules"));
            confirm_no_escalation(policy, &user, ns, &rules).map_err(forbidden)?;
            if new.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                let all = || Some(vec!["*".to_string()]);
                let full = [
                    PolicyRule {
                        verbs: vec!["*".into()],
                        api_groups: all(),
                        resources: all(),
                        ..Default::default()
                    },
                    PolicyRule {
                        verbs: vec!["*".into()],
                        non_resource_urls: all(),
                        ..Default::default()
                    },
                ];
                confirm_no_escalation(policy, &user, ns, &full).map_err(|_| {
                    forbidden("must have cluster-admin privileges to use the aggregationRule".into())
                })?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref: RoleRef = parse(new.get("roleRef"));
            let resource = match role_ref.kind.as_str() {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                _ => "",
            };
            if !resource.is_empty() && allowed(policy, &user, "bind", resource, ns, &role_ref.name) {
                return Ok(());
            }
            let rules = super::authorizer::role_rules(policy, &role_ref, ns).map_err(forbidden)?;
            confirm_no_escalation(policy, &user, ns, &rules).map_err(forbidden)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MemoryPolicy, binding, sa_user};
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn covers_breaks_rules_down_as_upstream() {
        let owner = [
            rule(json!({"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get", "list"]})),
            rule(
                json!({"apiGroups": ["*"], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["*"]}),
            ),
            rule(json!({"nonResourceURLs": ["/api/*"], "verbs": ["get"]})),
        ];
        let cases = [
            (
                json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}),
                true,
            ),
            (
                json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}),
                false,
            ),
            (
                json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get"]}),
                false,
            ),
            (
                json!({"apiGroups": [""], "resources": ["services/status"], "verbs": ["get"]}),
                true,
            ),
            (
                json!({"apiGroups": ["x"], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["update"]}),
                true,
            ),
            (
                json!({"apiGroups": ["x"], "resources": ["configmaps"], "verbs": ["update"]}),
                false,
            ),
            (json!({"nonResourceURLs": ["/api/v1"], "verbs": ["get"]}), true),
            (json!({"nonResourceURLs": ["/apis"], "verbs": ["get"]}), false),
        ];
        for (wanted, want) in cases {
            assert_eq!(covers(&owner, &[rule(wanted.clone())]).0, want, "{wanted}");
        }
        let (_, missing) = covers(
            &owner,
            &[rule(
                json!({"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "delete"]}),
            )],
        );
        let text: Vec<String> = compact(missing).iter().map(compact_string).collect();
        assert_eq!(
            text,
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}",
            ]
        );
    }

    #[test]
    fn granting_more_than_one_holds_is_refused_with_upstreams_message() {
        let mut p = MemoryPolicy::default();
        p.add_role("default", "pod-reader", &[(&["get"], &[""], &["pods"])]);
        p.role_bindings.push(binding(
            Some("default"),
            "rb",
            ("Role", "pod-reader"),
            &[("ServiceAccount", "default", None)],
        ));
        let user = sa_user("default", "default");
        let wanted = [rule(
            json!({"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]}),
        )];
        assert_eq!(
            confirm_no_escalation(&p, &user, "default", &wanted).unwrap_err(),
            "user \"system:serviceaccount:default:default\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
        );
        assert!(confirm_no_escalation(&p, &user, "default", &wanted[..0]).is_ok());
        assert!(
            confirm_no_escalation(
                &p,
                &user,
                "default",
                &[rule(
                    json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})
                )]
            )
            .is_ok()
        );
    }

    #[test]
    fn gc_only_changes_are_not_checked() {
        let old = json!({"metadata": {"name": "r", "finalizers": []}, "rules": []});
        let new = json!({"metadata": {"name": "r", "finalizers": ["x"], "ownerReferences": [{"name": "o"}]}, "rules": []});
        assert!(only_gc_fields(&new, &old));
        let changed = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]});
        assert!(!only_gc_fields(&changed, &old));
    }
}
