//! What a request asks to do, in authorization terms (upstream `RequestInfoFactory.NewRequestInfo`):
//! a resource request (verb, group, version, resource, subresource, namespace, name) or a non-resource
//! request (lower-case method and path). Derived from the method, path and query alone, before routing,
//! so a request for a resource we do not serve is authorized like any other (upstream's order).

use crate::http::request::parse_bool;

/// Request attributes (upstream `authorizer.AttributesRecord` without the user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, `impersonate`,
    /// ...; for non-resource requests the lower-case HTTP method.
    pub verb: String,
    /// A request for objects under `/api` or `/apis`.
    pub resource_request: bool,
    /// The URL path (non-resource requests are matched on it).
    pub path: String,
    /// The namespace, empty at cluster scope.
    pub namespace: String,
    /// The API group, `""` for core.
    pub api_group: String,
    /// The version.
    pub api_version: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The object name, if the request names one.
    pub name: String,
}

/// upstream `namespaceSubresources`: `/namespaces/<ns>/<this>` is the namespace's own subresource.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// The attributes of a request (upstream `NewRequestInfo`).
pub fn request_attributes(method: &str, path: &str, query: Option<&str>) -> Attributes {
    let non_resource = Attributes {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let mut parts: &[String] = &parts;
    if parts.len() < 3 {
        return non_resource;
    }
    let (group, rest) = match parts[0].as_str() {
        "api" => (String::new(), &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1].clone(), &parts[2..]),
        _ => return non_resource,
    };
    let mut a = Attributes {
        resource_request: true,
        path: path.to_string(),
        api_group: group,
        api_version: rest[0].clone(),
        ..Default::default()
    };
    parts = &rest[1..];
    // /{specialVerb}/...: only `watch` is served (upstream also has `proxy`).
    if parts.first().is_some_and(|p| p == "watch" || p == "proxy") {
        if parts.len() < 2 {
            return non_resource;
        }
        a.verb = parts[0].clone();
        parts = &parts[1..];
    } else {
        a.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        a.namespace = parts[1].clone();
        if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2].as_str()) {
            parts = &parts[2..];
        }
    }
    if parts.len() >= 3 {
        a.subresource = parts[2].clone();
    }
    if parts.len() >= 2 {
        a.name = parts[1].clone();
    }
    a.resource = parts[0].clone();
    // A get without a name is a list or a watch; an exact metadata.name field selector names the object.
    if a.name.is_empty() && a.verb == "get" {
        let params: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .into_owned()
            .collect();
        let watch = params
            .iter()
            .find(|(k, _)| k == "watch")
            .and_then(|(_, v)| parse_bool(v))
            .unwrap_or(false);
        a.verb = if watch { "watch" } else { "list" }.into();
        if let Some((_, fs)) = params.iter().find(|(k, _)| k == "fieldSelector")
            && let Some(name) = exact_name(fs)
            && !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '%'])
        {
            a.name = name;
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
    a
}

/// The name a field selector requires exactly (`metadata.name=x` or `==`), if any.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == "metadata.name" && !k.ends_with('!')).then(|| v.trim().to_string())
    })
}

/// upstream `forbiddenMessage`: what the user may not do.
pub fn forbidden_message(username: &str, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("User {username:?} cannot {} path {:?}", a.verb, a.path);
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    if a.namespace.is_empty() {
        format!(
            "User {username:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            a.verb, a.api_group
        )
    } else {
        format!(
            "User {username:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            a.verb, a.api_group, a.namespace
        )
    }
}

/// upstream `responsewriters.Forbidden`: a 403 Status naming the resource (`pods is forbidden: ...`, or
/// `forbidden: ...` for a path), with the authorizer's reason appended.
pub fn forbidden(username: &str, a: &Attributes, reason: &str) -> crate::error::ApiError {
    let mut why = forbidden_message(username, a);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let message = if a.resource.is_empty() {
        format!("forbidden: {why}")
    } else {
        let qualified = if a.api_group.is_empty() {
            a.resource.clone()
        } else {
            format!("{}.{}", a.resource, a.api_group)
        };
        if a.name.is_empty() {
            format!("{qualified} is forbidden: {why}")
        } else {
            format!("{qualified} {:?} is forbidden: {why}", a.name)
        }
    };
    let mut details = serde_json::Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), a.name.clone().into());
    }
    if !a.api_group.is_empty() {
        details.insert("group".into(), a.api_group.clone().into());
    }
    if !a.resource.is_empty() {
        details.insert("kind".into(), a.resource.clone().into());
    }
    crate::error::ApiError {
        code: 403,
        reason: "Forbidden",
        message,
        details: Some(serde_json::Value::Object(details)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> (String, String, String, String, String, String) {
        let a = request_attributes(method, path, query);
        assert!(a.resource_request, "{path}");
        (
            a.verb,
            a.api_group,
            a.namespace,
            a.resource,
            a.subresource,
            a.name,
        )
    }

    fn t(
        v: &str,
        g: &str,
        ns: &str,
        r: &str,
        sub: &str,
        name: &str,
    ) -> (String, String, String, String, String, String) {
        (v.into(), g.into(), ns.into(), r.into(), sub.into(), name.into())
    }

    #[test]
    fn verbs_and_resources_derive_as_upstream() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                None,
                t("list", "", "default", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                Some("watch=true"),
                t("watch", "", "default", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                Some("watch=1&fieldSelector=metadata.name%3Dweb"),
                t("watch", "", "default", "pods", "", "web"),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/default/pods/web",
                None,
                t("watch", "", "default", "pods", "", "web"),
            ),
            ("GET", "/api/v1/pods", None, t("list", "", "", "pods", "", "")),
            (
                "GET",
                "/api/v1/namespaces/default/pods/web",
                None,
                t("get", "", "default", "pods", "", "web"),
            ),
            (
                "GET",
                "/api/v1/namespaces/default/pods/web/log",
                None,
                t("get", "", "default", "pods", "log", "web"),
            ),
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                None,
                t("create", "", "default", "pods", "", ""),
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/x/deployments/d/scale",
                None,
                t("update", "apps", "x", "deployments", "scale", "d"),
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/x/deployments/d",
                None,
                t("patch", "apps", "x", "deployments", "", "d"),
            ),
            (
                "DELETE",
                "/apis/apps/v1/namespaces/x/deployments/d",
                None,
                t("delete", "apps", "x", "deployments", "", "d"),
            ),
            (
                "DELETE",
                "/apis/apps/v1/namespaces/x/deployments",
                None,
                t("deletecollection", "apps", "x", "deployments", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces",
                None,
                t("list", "", "", "namespaces", "", ""),
            ),
            // A namespace is in its own namespace (upstream: a RoleBinding there may grant it).
            (
                "GET",
                "/api/v1/namespaces/dev",
                None,
                t("get", "", "dev", "namespaces", "", "dev"),
            ),
            (
                "PUT",
                "/api/v1/namespaces/dev/finalize",
                None,
                t("update", "", "dev", "namespaces", "finalize", "dev"),
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
                None,
                t(
                    "get",
                    "rbac.authorization.k8s.io",
                    "",
                    "clusterroles",
                    "",
                    "admin",
                ),
            ),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                None,
                t(
                    "create",
                    "authorization.k8s.io",
                    "",
                    "selfsubjectaccessreviews",
                    "",
                    "",
                ),
            ),
            (
                "POST",
                "/api/v1/namespaces/default/serviceaccounts/default/token",
                None,
                t("create", "", "default", "serviceaccounts", "token", "default"),
            ),
            (
                "GET",
                "/api/v1/nodes/n1/status",
                None,
                t("get", "", "", "nodes", "status", "n1"),
            ),
            ("GET", "/api/v1/foos", None, t("list", "", "", "foos", "", "")),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(attrs(method, path, query), want, "{method} {path}");
        }
    }

    #[test]
    fn short_paths_are_non_resource_requests() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/healthz",
            "/openapi/v3",
            "/api/v1/watch",
        ] {
            let a = request_attributes("GET", p, None);
            assert!(!a.resource_request, "{p}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", p));
        }
        assert_eq!(request_attributes("POST", "/version", None).verb, "post");
    }

    #[test]
    fn forbidden_messages_are_upstreams() {
        let user = "system:serviceaccount:default:default";
        let e = forbidden(
            user,
            &request_attributes("GET", "/api/v1/namespaces/default/pods", None),
            "",
        );
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(e.details, Some(serde_json::json!({"kind": "pods"})));
        let e = forbidden(
            user,
            &request_attributes("GET", "/apis/apps/v1/deployments", None),
            "",
        );
        assert_eq!(
            e.message,
            "deployments.apps is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        );
        let e = forbidden(
            user,
            &request_attributes("GET", "/api/v1/namespaces/a/secrets/s", None),
            "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
        );
        assert_eq!(
            e.message,
            "secrets \"s\" is forbidden: User \"system:serviceaccount:default:default\" cannot get resource \"secrets\" in API group \"\" in the namespace \"a\": RBAC: role.rbac.authorization.k8s.io \"r\" not found"
        );
        let e = forbidden(user, &request_attributes("GET", "/metrics", None), "");
        assert_eq!(
            e.message,
            "forbidden: User \"system:serviceaccount:default:default\" cannot get path \"/metrics\""
        );
        assert_eq!(e.details, Some(serde_json::json!({})));
    }
}
