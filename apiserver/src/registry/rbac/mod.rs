//! The strategies of rbac.authorization.k8s.io/v1 (upstream `pkg/registry/rbac/*/strategy.go` and
//! `pkg/apis/rbac/validation`): defaulting of `roleRef.apiGroup` and subjects' `apiGroup`, validation
//! of rules, role references and subjects, the immutable `roleRef`; and the bootstrap policy created at
//! first start ([`policy`]). Pure functions of JSON, except [`bootstrap`].

pub mod policy;

use api::FieldError;
use api::validation::{self as v, NameRule};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use serde_json::{Value, json};

use super::resources;
use super::{ApiError, Registry, WriteOptions};

/// The API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// Whether this module holds the strategy of `group`/`plural`.
pub fn handles(group: &str, _plural: &str) -> bool {
    group == GROUP
}

/// Defaulting on create and update (upstream `SetDefaults_RoleBinding`, `SetDefaults_Subject`).
pub fn prepare(plural: &str, obj: &mut Value) {
    if !matches!(plural, "rolebindings" | "clusterrolebindings") {
        return;
    }
    if let Some(r) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && r.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty()
    {
        r.insert("apiGroup".into(), json!(GROUP));
    }
    if let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            if s.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty() {
                match s.get("kind").and_then(Value::as_str) {
                    Some("User" | "Group") => {
                        s.insert("apiGroup".into(), json!(GROUP));
                    }
                    // "" is the default, and upstream omits an empty apiGroup when it writes JSON.
                    Some("ServiceAccount") => {
                        s.remove("apiGroup");
                    }
                    _ => {}
                }
            }
        }
    }
}

fn parse<T: serde::de::DeserializeOwned + Default>(v: Option<&Value>) -> T {
    v.and_then(|v| T::deserialize(v).ok()).unwrap_or_default()
}

/// Validation of create (`old` is None) and update.
pub fn validate(plural: &str, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match plural {
        "roles" | "clusterroles" => {
            let rules: Vec<PolicyRule> = parse(obj.get("rules"));
            for (i, r) in rules.iter().enumerate() {
                errs.extend(validate_rule(r, plural == "roles", &format!("rules[{i}]")));
            }
        }
        "rolebindings" | "clusterrolebindings" => {
            let namespaced = plural == "rolebindings";
            let role_ref: RoleRef = parse(obj.get("roleRef"));
            errs.extend(validate_role_ref(&role_ref, namespaced));
            let subjects: Vec<Subject> = parse(obj.get("subjects"));
            for (i, s) in subjects.iter().enumerate() {
                errs.extend(validate_subject(s, namespaced, &format!("subjects[{i}]")));
            }
            if let Some(old) = old {
                let old_ref: RoleRef = parse(old.get("roleRef"));
                if old_ref != role_ref {
                    errs.push(v::invalid_printed(
                        "roleRef",
                        &format!(
                            "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
                            role_ref.api_group, role_ref.kind, role_ref.name
                        ),
                        "cannot change roleRef",
                    ));
                }
            }
        }
        _ => {}
    }
    errs
}

/// upstream `validatePolicyRule`.
pub fn validate_rule(rule: &PolicyRule, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let len = |v: &Option<Vec<String>>| v.as_ref().map_or(0, Vec::len);
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
        let printed = v::go_string_slice(urls);
        if namespaced {
            errs.push(v::invalid_printed(
                format!("{path}.nonResourceURLs"),
                &printed,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(&rule.api_groups) > 0 || len(&rule.resources) > 0 || len(&rule.resource_names) > 0 {
            errs.push(v::invalid_printed(
                format!("{path}.nonResourceURLs"),
                &printed,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if len(&rule.api_groups) == 0 {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(&rule.resources) == 0 {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if len(&rule.resource_names) > 0 && len(&rule.resources) > 1 {
        errs.push(FieldError::required(
            format!("{path}.resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
    errs
}

fn validate_role_ref(r: &RoleRef, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if r.api_group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            &json!(r.api_group),
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&r.kind.as_str()) {
        errs.push(FieldError::not_supported("roleRef.kind", &json!(r.kind), kinds));
    }
    if r.name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in v::name_errors(NameRule::PathSegment, &r.name, false) {
            errs.push(FieldError::invalid("roleRef.name", &json!(r.name), &msg));
        }
    }
    errs
}

/// upstream `validateRoleBindingSubject`.
fn validate_subject(s: &Subject, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_group = s.api_group.as_deref().unwrap_or("");
    if s.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    match s.kind.as_str() {
        "ServiceAccount" => {
            if !s.name.is_empty() {
                for msg in v::dns1123_subdomain_errors(&s.name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), &json!(s.name), &msg));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(api_group),
                    &[""],
                ));
            }
            if !namespaced && s.namespace.as_deref().unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if s.name.is_empty() {
                let what = if kind == "User" { "user" } else { "group" };
                errs.push(FieldError::invalid(
                    format!("{path}.name"),
                    &json!(""),
                    &format!("{what} name cannot be empty"),
                ));
            }
            if api_group != GROUP {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(api_group),
                    &[GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            &json!(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

/// Create the bootstrap ClusterRoles and ClusterRoleBindings that are missing (upstream's
/// `rbac/bootstrap-roles` post-start hook; it also reconciles objects marked `autoupdate`, we only
/// create what is missing, so a user's edit stays).
pub async fn bootstrap(registry: &Registry) -> Result<(), ApiError> {
    for (plural, obj) in policy::objects() {
        let info = resources::find(GROUP, "v1", plural).expect("rbac is served");
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.message.clone()).collect()
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []},
                                    {"verbs": ["get"]},
                                    {"apiGroups": [""], "resources": ["pods", "secrets"], "resourceNames": ["a"], "verbs": ["get"]}]});
        assert_eq!(
            messages(&validate("roles", &role, None)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].resources: Required value: resource rules must supply at least one resource",
                "rules[2].resourceNames: Required value: resource names cannot apply to multiple resources",
            ]
        );
    }

    #[test]
    fn non_resource_urls_only_in_cluster_roles_and_alone() {
        let r = json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        assert!(validate("clusterroles", &r, None).is_empty());
        assert_eq!(
            messages(&validate("roles", &r, None)),
            [
                "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"
            ]
        );
        let both = json!({"rules": [{"nonResourceURLs": ["/x"], "resources": ["pods"], "verbs": ["get"]}]});
        assert_eq!(
            messages(&validate("clusterroles", &both, None)),
            [
                "rules[0].nonResourceURLs: Invalid value: []string{\"/x\"}: rules cannot apply to both regular resources and non-resource URLs"
            ]
        );
    }

    #[test]
    fn bindings_check_role_ref_and_subjects() {
        let mut b = json!({"roleRef": {"kind": "Role", "name": "r"},
                           "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "Bad_Name"},
                                        {"kind": "Robot", "name": "x"}]});
        prepare("clusterrolebindings", &mut b);
        assert_eq!(b["roleRef"]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        let m = messages(&validate("clusterrolebindings", &b, None));
        assert_eq!(
            m[0],
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""
        );
        assert!(
            m[1].starts_with("subjects[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
            "{m:?}"
        );
        assert_eq!(m[2], "subjects[1].namespace: Required value");
        assert_eq!(
            m[3],
            "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""
        );
        assert!(
            validate(
                "rolebindings",
                &json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "default"}]}),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn subjects_and_role_ref_get_upstreams_api_group_defaults() {
        let mut b = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [
            {"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
            {"kind": "ServiceAccount", "name": "sb", "namespace": "ns", "apiGroup": ""}]});
        prepare("rolebindings", &mut b);
        assert_eq!(b["roleRef"]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        assert_eq!(b["subjects"][1]["apiGroup"], GROUP);
        // An empty apiGroup is omitted, as upstream writes it: a re-apply then finds nothing changed.
        assert!(b["subjects"][2].get("apiGroup").is_none());
        assert!(b["subjects"][3].get("apiGroup").is_none());
    }

    #[test]
    fn role_ref_is_immutable() {
        let old = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "a"}});
        let new = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "b"}});
        assert_eq!(
            messages(&validate("rolebindings", &new, Some(&old))),
            [
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"b\"}: cannot change roleRef"
            ]
        );
        assert!(validate("rolebindings", &old, Some(&old)).is_empty());
    }
}
