//! Authorization and authentication reviews, so scripts that probe permissions work: `kubectl auth can-i`
//! (SelfSubjectAccessReview, SelfSubjectRulesReview) and `kubectl auth whoami` (SelfSubjectReview).
//!
//! Every authenticated user (the kubeconfig's admin token holder, or a service account token's) may do
//! everything for now (no RBAC yet); the reviews say so, and whoami names the user the request
//! authenticated as. They are answered, never stored, as upstream.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::user::UserInfo;

/// The user the admin token authenticates.
pub const USERNAME: &str = crate::user::ADMIN_USERNAME;
/// Its groups.
pub const GROUPS: &[&str] = crate::user::ADMIN_GROUPS;

/// A review resource: its group, version, plural and kind.
#[derive(Debug, PartialEq, Eq)]
pub struct Review {
    /// API group.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
}

/// The served reviews.
pub const REVIEWS: &[Review] = &[
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
    },
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
    },
    Review {
        group: "authentication.k8s.io",
        version: "v1",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
    },
];

/// The review at `group/version/plural`, if served.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Review> {
    REVIEWS
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The groups the reviews add to discovery.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in REVIEWS {
        if !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// Answer a review: the request object with its status filled in.
pub fn answer(review: &Review, body: Value, user: &UserInfo) -> Result<Value, ApiError> {
    let api_version = format!("{}/{}", review.group, review.version);
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "{} must be a JSON object",
            review.kind
        )));
    }
    if let Some(k) = body.get("kind").and_then(Value::as_str)
        && k != review.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            review.kind
        )));
    }
    let mut out = body;
    out["apiVersion"] = json!(api_version);
    out["kind"] = json!(review.kind);
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    out["metadata"]["creationTimestamp"] = json!(crate::registry::now_rfc3339());
    match review.plural {
        "selfsubjectaccessreviews" => {
            let spec = out.get("spec");
            let has_attrs = spec.is_some_and(|s| {
                s.get("resourceAttributes").is_some() || s.get("nonResourceAttributes").is_some()
            });
            if !has_attrs {
                return Err(ApiError::unprocessable(
                    "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid \
                     value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ));
            }
            out["status"] =
                json!({"allowed": true, "reason": "kubeling allows every request of its kubeconfig's user"});
        }
        "selfsubjectrulesreviews" => {
            out["status"] = json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            });
        }
        _ => {
            out["status"] = json!({"userInfo": user.to_json()});
        }
    }
    Ok(out)
}

/// The discovery resource list of a review group-version.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = REVIEWS
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(|r| {
            json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": false,
                   "kind": r.kind, "verbs": ["create"]})
        })
        .collect();
    if resources.is_empty() {
        return None;
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"),
                "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_review_is_allowed_and_keeps_the_request() {
        let req = json!({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                         "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
        let out = answer(&REVIEWS[0], req, &UserInfo::admin()).unwrap();
        assert_eq!(out["status"]["allowed"], true);
        assert_eq!(out["spec"]["resourceAttributes"]["verb"], "get");
    }

    #[test]
    fn access_review_without_attributes_is_invalid() {
        let e = answer(&REVIEWS[0], json!({"spec": {}}), &UserInfo::admin()).unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn self_subject_review_names_the_user_and_groups() {
        let out = answer(&REVIEWS[2], json!({}), &UserInfo::admin()).unwrap();
        assert_eq!(out["status"]["userInfo"]["username"], USERNAME);
        assert_eq!(out["status"]["userInfo"]["groups"][0], "system:masters");
    }
}
