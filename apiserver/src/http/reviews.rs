//! Authorization and authentication reviews, answered and never stored, as upstream:
//! SelfSubjectAccessReview (`kubectl auth can-i`), SelfSubjectRulesReview (`kubectl auth can-i --list`),
//! SubjectAccessReview and LocalSubjectAccessReview (a user's rights, asked by someone allowed to),
//! TokenReview (who a token is) and SelfSubjectReview (`kubectl auth whoami`). Access reviews are
//! answered by the same RBAC authorizer that guards requests ([`crate::rbac`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use k8s_openapi::api::{authentication::v1 as authentication, authorization::v1 as authorization};

use crate::error::{ApiError, FieldError};
use crate::rbac::{self, Attributes, Policy};
use crate::registry::ResourceInfo;
use crate::registry::resources::kind;
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
    /// Served under `/namespaces/<ns>/` (LocalSubjectAccessReview).
    pub namespaced: bool,
}

const fn review(group: &'static str, plural: &'static str, kind: &'static str, namespaced: bool) -> Review {
    Review {
        group,
        version: "v1",
        plural,
        kind,
        namespaced,
    }
}

/// The review kinds as entries of the kind table's shape, create only: what the OpenAPI documents
/// describe (so `kubectl create -f` of a review validates), never routed or stored.
pub static KINDS: &[ResourceInfo] = &[
    kind::<authorization::SelfSubjectAccessReview>("selfsubjectaccessreview").verbs_only(CREATE),
    kind::<authorization::SelfSubjectRulesReview>("selfsubjectrulesreview").verbs_only(CREATE),
    kind::<authorization::SubjectAccessReview>("subjectaccessreview").verbs_only(CREATE),
    kind::<authorization::LocalSubjectAccessReview>("localsubjectaccessreview").verbs_only(CREATE),
    kind::<authentication::TokenReview>("tokenreview").verbs_only(CREATE),
    kind::<authentication::SelfSubjectReview>("selfsubjectreview").verbs_only(CREATE),
];
const CREATE: &[&str] = &["create"];

/// The served reviews.
pub const REVIEWS: &[Review] = &[
    review(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    review(
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    review(
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    review("authentication.k8s.io", "tokenreviews", "TokenReview", false),
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

/// What answering a review may consult.
pub struct Context<'a> {
    /// The requester (after impersonation).
    pub user: &'a UserInfo,
    /// The namespace of the URL (LocalSubjectAccessReview).
    pub namespace: Option<&'a str>,
    /// Roles and bindings.
    pub policy: &'a dyn Policy,
    /// Authenticates a bearer token (TokenReview).
    pub authenticate: &'a dyn Fn(&str) -> Option<UserInfo>,
    /// The API server's audiences (TokenReview).
    pub audiences: &'a [String],
}

fn invalid(review: &Review, errors: &[FieldError]) -> ApiError {
    ApiError::invalid(review.kind, review.group, "", errors)
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The attributes a review's spec asks about (upstream `ResourceAttributesFrom` /
/// `NonResourceAttributesFrom`); exactly one of the two must be given.
fn spec_attributes(review: &Review, spec: &Value) -> Result<Attributes, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (res, non) {
        (Some(r), None) => Ok(Attributes {
            verb: str_of(r, "verb").into(),
            resource_request: true,
            namespace: str_of(r, "namespace").into(),
            api_group: str_of(r, "group").into(),
            api_version: str_of(r, "version").into(),
            resource: str_of(r, "resource").into(),
            subresource: str_of(r, "subresource").into(),
            name: str_of(r, "name").into(),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: str_of(n, "verb").into(),
            path: str_of(n, "path").into(),
            ..Default::default()
        }),
        (Some(_), Some(_)) => Err(invalid(
            review,
            &[FieldError::invalid(
                "spec.nonResourceAttributes",
                &json!("null"),
                "cannot be specified in combination with resourceAttributes",
            )],
        )),
        (None, None) => Err(invalid(
            review,
            &[FieldError::invalid(
                "spec.resourceAttributes",
                &json!("null"),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        )),
    }
}

/// `status` of an access review: upstream writes `allowed`, and `reason` when there is one.
fn access_status(policy: &dyn Policy, user: &UserInfo, attrs: &Attributes) -> Value {
    let d = rbac::authorize(policy, user, attrs);
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    status
}

/// upstream `ResourceRuleInfo`/`NonResourceRuleInfo` of a SelfSubjectRulesReview.
fn rules_status(policy: &dyn Policy, user: &UserInfo, namespace: &str) -> Value {
    let (rules, errors) = rbac::rules_for(policy, user, namespace);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rules {
        let add = |k: &str, v: &Option<Vec<String>>, out: &mut serde_json::Map<String, Value>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                out.insert(k.into(), json!(v));
            }
        };
        if r.resources.as_ref().is_some_and(|v| !v.is_empty()) {
            let mut o = serde_json::Map::new();
            o.insert("verbs".into(), json!(r.verbs));
            add("apiGroups", &r.api_groups, &mut o);
            add("resources", &r.resources, &mut o);
            add("resourceNames", &r.resource_names, &mut o);
            resource_rules.push(Value::Object(o));
        }
        if r.non_resource_urls.as_ref().is_some_and(|v| !v.is_empty()) {
            let mut o = serde_json::Map::new();
            o.insert("verbs".into(), json!(r.verbs));
            add("nonResourceURLs", &r.non_resource_urls, &mut o);
            non_resource_rules.push(Value::Object(o));
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                            "incomplete": false});
    if !errors.is_empty() {
        status["evaluationError"] = json!(rbac::authorizer::aggregate(&errors));
    }
    status
}

/// The user a SubjectAccessReview names (`spec.user`, `groups`, `uid`, `extra`); one of user or
/// groups is required.
fn spec_user(review: &Review, spec: &Value) -> Result<UserInfo, ApiError> {
    let groups = strings(spec.get("groups"));
    let username = str_of(spec, "user").to_string();
    if username.is_empty() && groups.is_empty() {
        return Err(invalid(
            review,
            &[FieldError::invalid(
                "spec.user",
                &json!(""),
                "at least one of user or group must be specified",
            )],
        ));
    }
    let mut extra = BTreeMap::new();
    if let Some(e) = spec.get("extra").and_then(Value::as_object) {
        for (k, v) in e {
            extra.insert(k.clone(), strings(Some(v)));
        }
    }
    Ok(UserInfo {
        username,
        uid: str_of(spec, "uid").to_string(),
        groups,
        extra,
    })
}

/// Answer a review: the request object with its status filled in.
pub fn answer(review: &Review, body: Value, ctx: &Context<'_>) -> Result<Value, ApiError> {
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
    let spec = out.get("spec").cloned().unwrap_or_else(|| json!({}));
    match review.plural {
        "selfsubjectaccessreviews" => {
            let attrs = spec_attributes(review, &spec)?;
            out["status"] = access_status(ctx.policy, ctx.user, &attrs);
        }
        "subjectaccessreviews" => {
            let attrs = spec_attributes(review, &spec)?;
            let subject = spec_user(review, &spec)?;
            out["status"] = access_status(ctx.policy, &subject, &attrs);
        }
        "localsubjectaccessreviews" => {
            let ns = ctx.namespace.unwrap_or_default();
            let meta_ns = out["metadata"]
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !meta_ns.is_empty() && meta_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            out["metadata"]["namespace"] = json!(ns);
            let attrs = spec_attributes(review, &spec)?;
            if !attrs.resource_request {
                return Err(invalid(
                    review,
                    &[FieldError::invalid(
                        "spec.nonResourceAttributes",
                        &spec["nonResourceAttributes"],
                        "disallowed on this kind of request",
                    )],
                ));
            }
            if attrs.namespace != ns {
                return Err(invalid(
                    review,
                    &[FieldError::invalid(
                        "spec.resourceAttributes.namespace",
                        &json!(attrs.namespace),
                        "must match metadata.namespace",
                    )],
                ));
            }
            let subject = spec_user(review, &spec)?;
            out["status"] = access_status(ctx.policy, &subject, &attrs);
        }
        "selfsubjectrulesreviews" => {
            out["status"] = rules_status(ctx.policy, ctx.user, str_of(&spec, "namespace"));
        }
        "tokenreviews" => {
            let token = str_of(&spec, "token");
            if token.is_empty() {
                return Err(ApiError::bad_request(
                    "token is required for TokenReview in authentication",
                ));
            }
            let wanted = strings(spec.get("audiences"));
            let audiences: Vec<String> = if wanted.is_empty() {
                ctx.audiences.to_vec()
            } else {
                wanted.into_iter().filter(|a| ctx.audiences.contains(a)).collect()
            };
            out["status"] = match (ctx.authenticate)(token).filter(|_| !audiences.is_empty()) {
                Some(u) => json!({"authenticated": true, "user": u.to_json(), "audiences": audiences}),
                None => json!({"user": {}, "error": "invalid bearer token"}),
            };
        }
        _ => {
            out["status"] = json!({"userInfo": ctx.user.to_json()});
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
            json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced,
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
    use crate::rbac::tests::{MemoryPolicy, binding, sa_user};

    fn no_token(_: &str) -> Option<UserInfo> {
        None
    }

    fn ask(plural: &str, user: &UserInfo, policy: &MemoryPolicy, body: Value) -> Result<Value, ApiError> {
        let r = REVIEWS.iter().find(|r| r.plural == plural).unwrap();
        let audiences = vec!["https://kubernetes.default.svc".to_string()];
        let sa = sa_user("default", "default");
        let auth = move |t: &str| (t == "good").then(|| sa.clone());
        let ctx = Context {
            user,
            namespace: Some("default"),
            policy,
            authenticate: if plural == "tokenreviews" {
                &auth
            } else {
                &no_token
            },
            audiences: &audiences,
        };
        answer(r, body, &ctx)
    }

    fn pod_reader_policy() -> MemoryPolicy {
        let mut p = MemoryPolicy::default();
        p.add_role("default", "pod-reader", &[(&["get", "list"], &[""], &["pods"])]);
        p.role_bindings.push(binding(
            Some("default"),
            "rb",
            ("Role", "pod-reader"),
            &[("ServiceAccount", "default", None)],
        ));
        p
    }

    #[test]
    fn self_access_review_answers_from_rbac_and_keeps_the_request() {
        let req = json!({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                         "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}});
        let p = pod_reader_policy();
        let out = ask(
            "selfsubjectaccessreviews",
            &sa_user("default", "default"),
            &p,
            req.clone(),
        )
        .unwrap();
        assert_eq!(out["status"]["allowed"], true);
        assert_eq!(
            out["status"]["reason"],
            "RBAC: allowed by RoleBinding \"rb/default\" of Role \"pod-reader\" to ServiceAccount \"default/default\""
        );
        assert_eq!(out["spec"]["resourceAttributes"]["verb"], "list");
        let out = ask("selfsubjectaccessreviews", &sa_user("default", "other"), &p, req).unwrap();
        assert_eq!(out["status"], json!({"allowed": false}));
        let admin = ask(
            "selfsubjectaccessreviews",
            &UserInfo::admin(),
            &p,
            json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}}),
        )
        .unwrap();
        assert_eq!(admin["status"]["allowed"], true);
    }

    #[test]
    fn access_review_without_attributes_is_invalid() {
        let e = ask(
            "selfsubjectaccessreviews",
            &UserInfo::admin(),
            &MemoryPolicy::default(),
            json!({"spec": {}}),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn subject_access_reviews_need_a_subject_and_local_ones_their_namespace() {
        let p = pod_reader_policy();
        let admin = UserInfo::admin();
        let attrs = json!({"verb": "get", "resource": "pods", "namespace": "default"});
        let e = ask(
            "subjectaccessreviews",
            &admin,
            &p,
            json!({"spec": {"resourceAttributes": attrs}}),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
        );
        let out = ask(
            "subjectaccessreviews",
            &admin,
            &p,
            json!({"spec": {"resourceAttributes": attrs, "user": "system:serviceaccount:default:default"}}),
        )
        .unwrap();
        assert_eq!(out["status"]["allowed"], true);
        let out = ask(
            "localsubjectaccessreviews",
            &admin,
            &p,
            json!({"spec": {"resourceAttributes": attrs, "user": "system:serviceaccount:default:default"}}),
        )
        .unwrap();
        assert_eq!(
            (
                out["status"]["allowed"].clone(),
                out["metadata"]["namespace"].clone()
            ),
            (json!(true), json!("default"))
        );
        let e = ask("localsubjectaccessreviews", &admin, &p,
            json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "x"}, "user": "u"}})).unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn rules_review_lists_resource_and_non_resource_rules() {
        let mut p = pod_reader_policy();
        p.role_bindings.push(binding(
            Some("default"),
            "x",
            ("Role", "missing"),
            &[("ServiceAccount", "default", None)],
        ));
        let out = ask(
            "selfsubjectrulesreviews",
            &sa_user("default", "default"),
            &p,
            json!({"spec": {"namespace": "default"}}),
        )
        .unwrap();
        assert_eq!(
            out["status"]["resourceRules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert_eq!(out["status"]["nonResourceRules"], json!([]));
        assert_eq!(
            out["status"]["evaluationError"],
            "role.rbac.authorization.k8s.io \"missing\" not found"
        );
    }

    #[test]
    fn token_review_names_the_token_user_or_says_it_is_invalid() {
        let p = MemoryPolicy::default();
        let out = ask(
            "tokenreviews",
            &UserInfo::admin(),
            &p,
            json!({"spec": {"token": "good"}}),
        )
        .unwrap();
        assert_eq!(out["status"]["authenticated"], true);
        assert_eq!(
            out["status"]["user"]["username"],
            "system:serviceaccount:default:default"
        );
        let out = ask(
            "tokenreviews",
            &UserInfo::admin(),
            &p,
            json!({"spec": {"token": "bad"}}),
        )
        .unwrap();
        assert_eq!(
            out["status"],
            json!({"user": {}, "error": "invalid bearer token"})
        );
        assert_eq!(
            ask("tokenreviews", &UserInfo::admin(), &p, json!({"spec": {}}))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn self_subject_review_names_the_user_and_groups() {
        let out = ask(
            "selfsubjectreviews",
            &UserInfo::admin(),
            &MemoryPolicy::default(),
            json!({}),
        )
        .unwrap();
        assert_eq!(out["status"]["userInfo"]["username"], USERNAME);
        assert_eq!(out["status"]["userInfo"]["groups"][0], "system:masters");
    }
}
