//! Whether one PolicyRule covers a request (upstream `rbac.RuleAllows` and `rbacv1helpers.*Matches`):
//! `*` wildcards for verbs, groups and resources, `resource/subresource` and `*/subresource` forms,
//! `resourceNames`, non-resource URLs with a trailing `*`.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::Attributes;

fn strings(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

/// upstream `VerbMatches`.
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// upstream `APIGroupMatches`.
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    strings(&rule.api_groups).iter().any(|g| g == "*" || g == group)
}

/// upstream `ResourceMatches`: `combined` is `resource` or `resource/subresource`.
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    strings(&rule.resources).iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

/// upstream `ResourceNameMatches`: no names means every name.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = strings(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

/// upstream `NonResourceURLMatches`.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    strings(&rule.non_resource_urls)
        .iter()
        .any(|u| u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*'))))
}

/// upstream `RuleAllows`.
pub fn rule_allows(a: &Attributes, rule: &PolicyRule) -> bool {
    if a.resource_request {
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        verb_matches(rule, &a.verb)
            && api_group_matches(rule, &a.api_group)
            && resource_matches(rule, &combined, &a.subresource)
            && resource_name_matches(rule, &a.name)
    } else {
        verb_matches(rule, &a.verb) && non_resource_url_matches(rule, &a.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        PolicyRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            resource_names: (!names.is_empty()).then(|| v(names)),
            non_resource_urls: None,
        }
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            non_resource_urls: Some(urls.iter().map(|x| x.to_string()).collect()),
            ..Default::default()
        }
    }

    fn res(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "default".into(),
            ..Default::default()
        }
    }

    fn path(verb: &str, p: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: p.into(),
            ..Default::default()
        }
    }

    #[test]
    fn rules_match_as_upstream() {
        let pods_read = rule(&["get", "list", "watch"], &[""], &["pods"], &[]);
        let cases: Vec<(&str, PolicyRule, Attributes, bool)> = vec![
            ("exact", pods_read.clone(), res("list", "", "pods", "", ""), true),
            (
                "other verb",
                pods_read.clone(),
                res("delete", "", "pods", "", ""),
                false,
            ),
            (
                "other group",
                pods_read.clone(),
                res("list", "apps", "pods", "", ""),
                false,
            ),
            (
                "a subresource is not the resource",
                pods_read.clone(),
                res("get", "", "pods", "log", "p"),
                false,
            ),
            (
                "resource/subresource",
                rule(&["get"], &[""], &["pods/log"], &[]),
                res("get", "", "pods", "log", "p"),
                true,
            ),
            (
                "*/status",
                rule(&["update"], &["*"], &["*/status"], &[]),
                res("update", "apps", "deployments", "status", "d"),
                true,
            ),
            (
                "*/status is not */scale",
                rule(&["update"], &["*"], &["*/status"], &[]),
                res("update", "apps", "deployments", "scale", "d"),
                false,
            ),
            (
                "*/status is not the main resource",
                rule(&["update"], &["*"], &["*/status"], &[]),
                res("update", "apps", "deployments", "", "d"),
                false,
            ),
            (
                "wildcards",
                rule(&["*"], &["*"], &["*"], &[]),
                res("deletecollection", "batch", "jobs", "", ""),
                true,
            ),
            (
                "resourceNames match",
                rule(&["get"], &[""], &["configmaps"], &["a"]),
                res("get", "", "configmaps", "", "a"),
                true,
            ),
            (
                "resourceNames other",
                rule(&["get"], &[""], &["configmaps"], &["a"]),
                res("get", "", "configmaps", "", "b"),
                false,
            ),
            (
                "resourceNames and list without a name",
                rule(&["list"], &[""], &["configmaps"], &["a"]),
                res("list", "", "configmaps", "", ""),
                false,
            ),
            (
                "url exact",
                urls(&["get"], &["/healthz"]),
                path("get", "/healthz"),
                true,
            ),
            (
                "url prefix",
                urls(&["get"], &["/apis/*"]),
                path("get", "/apis/apps/v1"),
                true,
            ),
            (
                "url prefix needs the slash",
                urls(&["get"], &["/apis/*"]),
                path("get", "/apis"),
                false,
            ),
            ("url star", urls(&["*"], &["*"]), path("post", "/anything"), true),
            (
                "url verb",
                urls(&["get"], &["/healthz"]),
                path("post", "/healthz"),
                false,
            ),
            (
                "url rule on a resource request",
                urls(&["*"], &["*"]),
                res("get", "", "pods", "", ""),
                false,
            ),
            ("resource rule on a url", pods_read, path("get", "/api"), false),
        ];
        for (what, r, a, want) in cases {
            assert_eq!(rule_allows(&a, &r), want, "{what}");
        }
    }
}
