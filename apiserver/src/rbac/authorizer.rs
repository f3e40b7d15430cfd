//! The RBAC authorizer (upstream `plugin/pkg/auth/authorizer/rbac/rbac.go` and
//! `pkg/registry/rbac/validation/rule.go`): walk the ClusterRoleBindings, then the RoleBindings of the
//! request's namespace, that name the user (by name, group, or service account), and allow on the first
//! rule of their roles that covers the request. A binding to a missing role grants nothing and says so in
//! the reason. Members of `system:masters` are allowed before RBAC (upstream's privileged-group
//! authorizer), without reading a binding. Pure over a [`Policy`].

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};

use super::rules::rule_allows;
use super::{Attributes, Policy};
use crate::user::UserInfo;

/// The group whose members may do everything (upstream `user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// The authorizer's answer: allowed or not, and why (upstream's reason strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed (upstream `DecisionAllow`); otherwise no opinion, which the API server denies.
    pub allowed: bool,
    /// `RBAC: allowed by ...`, or the errors met on the way (`RBAC: role... not found`), or empty.
    pub reason: String,
}

/// Where a rule came from, for the reason (upstream's binding describers).
struct Source<'a> {
    binding: String,
    cluster: bool,
    role_ref: &'a RoleRef,
    subject: &'a Subject,
    binding_namespace: &'a str,
}

impl std::fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.subject;
        let subject = match s.kind.as_str() {
            "ServiceAccount" => {
                let ns = s
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(self.binding_namespace);
                format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
            }
            _ => format!("{} {:?}", s.kind, s.name),
        };
        write!(
            f,
            "{} {:?} of {} {:?} to {subject}",
            if self.cluster {
                "ClusterRoleBinding"
            } else {
                "RoleBinding"
            },
            self.binding,
            self.role_ref.kind,
            self.role_ref.name
        )
    }
}

/// upstream `serviceaccount.MatchesUsername`.
fn is_service_account(namespace: &str, name: &str, username: &str) -> bool {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(ns, n)| ns == namespace && n == name)
}

/// upstream `appliesToUser`: `namespace` is the binding's (empty for ClusterRoleBindings).
fn applies_to(user: &UserInfo, s: &Subject, namespace: &str) -> bool {
    match s.kind.as_str() {
        "User" => user.username == s.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty() && is_service_account(ns, &s.name, &user.username)
        }
        _ => false,
    }
}

/// upstream `GetRoleReferenceRules`: the rules a binding's role holds, or the lister's not-found error.
pub(crate) fn role_rules(
    policy: &dyn Policy,
    r: &RoleRef,
    namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    match r.kind.as_str() {
        "Role" => policy
            .role(namespace, &r.name)
            .map(|role| role.rules.unwrap_or_default())
            .ok_or_else(|| format!("role.rbac.authorization.k8s.io {:?} not found", r.name)),
        "ClusterRole" => policy
            .cluster_role(&r.name)
            .map(|role| role.rules.unwrap_or_default())
            .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {:?} not found", r.name)),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

/// Called with each rule and its source, or with an error; returns false to stop.
type Visitor<'v> = dyn FnMut(Option<&Source<'_>>, Option<&PolicyRule>, Option<String>) -> bool + 'v;

/// upstream `VisitRulesFor`: every rule that applies to `user` in `namespace` (cluster-wide ones first),
/// with its source; errors (missing roles) are visited too. The visitor returns false to stop.
fn visit_rules(policy: &dyn Policy, user: &UserInfo, namespace: &str, visit: &mut Visitor<'_>) {
    for b in policy.cluster_role_bindings() {
        let subjects = b.subjects.as_deref().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, "")) else {
            continue;
        };
        let rules = match role_rules(policy, &b.role_ref, "") {
            Ok(r) => r,
            Err(e) => {
                if !visit(None, None, Some(e)) {
                    return;
                }
                continue;
            }
        };
        let source = Source {
            binding: b.metadata.name.clone().unwrap_or_default(),
            cluster: true,
            role_ref: &b.role_ref,
            subject,
            binding_namespace: "",
        };
        for r in &rules {
            if !visit(Some(&source), Some(r), None) {
                return;
            }
        }
    }
    if namespace.is_empty() {
        return;
    }
    for b in policy.role_bindings(namespace) {
        let subjects = b.subjects.as_deref().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, namespace)) else {
            continue;
        };
        let rules = match role_rules(policy, &b.role_ref, namespace) {
            Ok(r) => r,
            Err(e) => {
                if !visit(None, None, Some(e)) {
                    return;
                }
                continue;
            }
        };
        let source = Source {
            binding: format!("{}/{namespace}", b.metadata.name.clone().unwrap_or_default()),
            cluster: false,
            role_ref: &b.role_ref,
            subject,
            binding_namespace: namespace,
        };
        for r in &rules {
            if !visit(Some(&source), Some(r), None) {
                return;
            }
        }
    }
}

/// apimachinery's aggregate error text: one message alone, several de-duplicated in brackets.
pub fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen[0].to_string(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// Authorize `attrs` for `user`.
pub fn authorize(policy: &dyn Policy, user: &UserInfo, attrs: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut allowed = None;
    let mut errors = Vec::new();
    visit_rules(policy, user, &attrs.namespace, &mut |source, rule, err| {
        if let (Some(source), Some(rule)) = (source, rule)
            && rule_allows(attrs, rule)
        {
            allowed = Some(format!("RBAC: allowed by {source}"));
            return false;
        }
        if let Some(e) = err {
            errors.push(e);
        }
        true
    });
    match allowed {
        Some(reason) => Decision {
            allowed: true,
            reason,
        },
        None => Decision {
            allowed: false,
            reason: if errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: {}", aggregate(&errors))
            },
        },
    }
}

/// upstream `RulesFor`: every rule `user` holds in `namespace` (cluster-wide ones included), and the
/// errors met (the review is then incomplete). As upstream, `system:masters` adds no rules of its own
/// here (its authorizer resolves no rules): the admin's come from the `cluster-admin` binding.
pub fn rules_for(policy: &dyn Policy, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules(policy, user, namespace, &mut |_, rule, err| {
        if let Some(r) = rule {
            rules.push(r.clone());
        }
        if let Some(e) = err {
            errors.push(e);
        }
        true
    });
    (rules, errors)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MemoryPolicy, attrs, binding, sa_user};
    use super::*;

    #[test]
    fn service_account_is_allowed_by_its_role_binding_and_nothing_else() {
        let mut p = MemoryPolicy::default();
        let user = sa_user("default", "default");
        let list_pods = attrs("list", "", "default", "pods", "");
        assert_eq!(
            authorize(&p, &user, &list_pods),
            Decision {
                allowed: false,
                reason: String::new()
            }
        );
        p.add_role("default", "pod-reader", &[(&["get", "list"], &[""], &["pods"])]);
        p.role_bindings.push(binding(
            Some("default"),
            "read-pods",
            ("Role", "pod-reader"),
            &[("ServiceAccount", "default", None)],
        ));
        let d = authorize(&p, &user, &list_pods);
        assert!(d.allowed);
        assert_eq!(
            d.reason,
            "RBAC: allowed by RoleBinding \"read-pods/default\" of Role \"pod-reader\" to ServiceAccount \"default/default\""
        );
        // Not in another namespace, not another verb, not another service account.
        assert!(!authorize(&p, &user, &attrs("list", "", "other", "pods", "")).allowed);
        assert!(!authorize(&p, &user, &attrs("delete", "", "default", "pods", "x")).allowed);
        assert!(!authorize(&p, &sa_user("default", "robot"), &list_pods).allowed);
        // Nor at the cluster scope.
        assert!(!authorize(&p, &user, &attrs("list", "", "", "pods", "")).allowed);
    }

    #[test]
    fn binding_to_a_missing_role_grants_nothing_and_says_why() {
        let mut p = MemoryPolicy::default();
        p.role_bindings.push(binding(
            Some("default"),
            "b",
            ("Role", "missing"),
            &[("Group", "system:serviceaccounts", None)],
        ));
        p.cluster_role_bindings.push(binding(
            None,
            "c",
            ("ClusterRole", "gone"),
            &[("User", "system:serviceaccount:default:default", None)],
        ));
        let d = authorize(
            &p,
            &sa_user("default", "default"),
            &attrs("get", "", "default", "pods", "x"),
        );
        assert!(!d.allowed);
        assert_eq!(
            d.reason,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]"
        );
    }

    #[test]
    fn cluster_role_bindings_grant_everywhere_and_reason_names_them() {
        let mut p = MemoryPolicy::default();
        p.add_cluster_role("view", &[(&["get", "list", "watch"], &[""], &["pods"])]);
        p.cluster_role_bindings.push(binding(
            None,
            "viewers",
            ("ClusterRole", "view"),
            &[("Group", "devs", None)],
        ));
        let mut user = UserInfo::admin();
        user.username = "jane".into();
        user.groups = vec!["devs".into(), "system:authenticated".into()];
        let d = authorize(&p, &user, &attrs("watch", "", "kube-system", "pods", ""));
        assert_eq!(
            d.reason,
            "RBAC: allowed by ClusterRoleBinding \"viewers\" of ClusterRole \"view\" to Group \"devs\""
        );
        // A RoleBinding to a ClusterRole grants it in its namespace only.
        let mut p = MemoryPolicy::default();
        p.add_cluster_role("view", &[(&["get"], &[""], &["pods"])]);
        p.role_bindings.push(binding(
            Some("dev"),
            "v",
            ("ClusterRole", "view"),
            &[("ServiceAccount", "ci", Some("tools"))],
        ));
        let ci = sa_user("tools", "ci");
        let d = authorize(&p, &ci, &attrs("get", "", "dev", "pods", "p"));
        assert_eq!(
            d.reason,
            "RBAC: allowed by RoleBinding \"v/dev\" of ClusterRole \"view\" to ServiceAccount \"ci/tools\""
        );
        assert!(!authorize(&p, &ci, &attrs("get", "", "tools", "pods", "p")).allowed);
    }

    #[test]
    fn system_masters_need_no_binding() {
        let p = MemoryPolicy::default();
        let d = authorize(&p, &UserInfo::admin(), &attrs("delete", "", "x", "secrets", "s"));
        assert!(d.allowed);
        let (rules, errors) = rules_for(&p, &UserInfo::admin(), "default");
        assert!(rules.is_empty() && errors.is_empty());
    }

    #[test]
    fn rules_for_lists_cluster_then_namespace_rules() {
        let mut p = MemoryPolicy::default();
        p.add_cluster_role(
            "basic",
            &[(
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews"],
            )],
        );
        p.cluster_role_bindings.push(binding(
            None,
            "basic",
            ("ClusterRole", "basic"),
            &[("Group", "system:authenticated", None)],
        ));
        p.add_role("default", "r", &[(&["get"], &[""], &["pods"])]);
        p.role_bindings.push(binding(
            Some("default"),
            "rb",
            ("Role", "r"),
            &[("ServiceAccount", "default", None)],
        ));
        p.role_bindings.push(binding(
            Some("default"),
            "broken",
            ("Role", "nope"),
            &[("ServiceAccount", "default", None)],
        ));
        let (rules, errors) = rules_for(&p, &sa_user("default", "default"), "default");
        let resources: Vec<String> = rules
            .iter()
            .map(|r| r.resources.clone().unwrap_or_default().join(","))
            .collect();
        assert_eq!(resources, ["selfsubjectaccessreviews", "pods"]);
        assert_eq!(errors, ["role.rbac.authorization.k8s.io \"nope\" not found"]);
    }
}
