//! Service account tokens: `serviceaccounts/token` (TokenRequest, upstream
//! `pkg/registry/core/serviceaccount/storage/token.go`) issues them, and the bearer-token authenticator
//! (upstream `pkg/serviceaccount/jwt.go` + `claims.go`) accepts them.
//!
//! ```text
//! POST .../serviceaccounts/NAME/token ──► create_token: look up SA, bound pod/secret/node ──► claims::plan
//!                                           ──► claims::build ──► jwt::Signer::sign ──► status.token
//! Authorization: Bearer <jwt> ──► authenticate: Signer::verify ──► claims::check_claims
//!                                   ──► look up SA (+ bound object) ──► claims::check_bound_objects ──► UserInfo
//! ```
//!
//! The decisions are pure ([`claims`]); this module only reads the registry. It sits between `http`
//! (which calls it) and `registry` (which it reads).

pub mod claims;
pub mod jwt;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::{Registry, resources};
use crate::user::{ALL_AUTHENTICATED, ALL_SERVICE_ACCOUNTS, UserInfo};
use claims::{Found, ObjectRef, Subject};
pub use jwt::Signer;

/// The TokenRequest kind and its group/version.
const TOKEN_REQUEST_KIND: &str = "TokenRequest";
const TOKEN_REQUEST_API_VERSION: &str = "authentication.k8s.io/v1";
/// `serviceaccount.*Key` extras the authenticator adds to a service account user.
const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The issuer of the cluster's service account tokens.
pub struct Tokens {
    signer: Signer,
    audiences: Vec<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("signer", &self.signer)
            .field("audiences", &self.audiences)
            .finish()
    }
}

fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn rfc3339(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A stored object's uid, and whether its deletion is more than a minute old (upstream
/// `invalidIfDeletedBefore = now - 60s`).
fn found(obj: &Value, now: i64) -> Found {
    let deleted = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| t.as_second() < now - claims::LEEWAY_SECONDS);
    Found {
        uid: str_at(obj, "/metadata/uid").to_string(),
        deleted,
    }
}

fn served(plural: &str) -> &'static resources::ResourceInfo {
    resources::find("", "v1", plural).expect("core resources are served")
}

/// The parts of a TokenRequest body we read, checked for type.
struct Request {
    name: String,
    namespace: String,
    audiences: Vec<String>,
    expiration_seconds: i64,
    bound: Option<Value>,
}

fn parse_request(body: &Value) -> Result<Request, ApiError> {
    let bad = |what: &str| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {what}"
        ))
    };
    if !body.is_object() {
        return Err(bad("the body is not a JSON object"));
    }
    if let Some(k) = body.get("kind").and_then(Value::as_str)
        && k != TOKEN_REQUEST_KIND
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({TOKEN_REQUEST_KIND})"
        )));
    }
    if let Some(v) = body.get("apiVersion").and_then(Value::as_str)
        && v != TOKEN_REQUEST_API_VERSION
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({TOKEN_REQUEST_API_VERSION})"
        )));
    }
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let audiences = match spec.get("audiences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("spec.audiences must be a list of strings"))?,
        Some(_) => return Err(bad("spec.audiences must be a list of strings")),
    };
    let expiration_seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => claims::DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| bad("spec.expirationSeconds must be an integer"))?,
    };
    let bound = match spec.get("boundObjectRef") {
        None | Some(Value::Null) => None,
        Some(v) if v.is_object() => Some(v.clone()),
        Some(_) => return Err(bad("spec.boundObjectRef must be an object")),
    };
    Ok(Request {
        name: str_at(body, "/metadata/name").to_string(),
        namespace: str_at(body, "/metadata/namespace").to_string(),
        audiences,
        expiration_seconds,
        bound,
    })
}

impl Tokens {
    /// The audiences the API server accepts.
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// An issuer signing with `signer`, for the API server's audiences.
    pub fn new(signer: Signer) -> Tokens {
        Tokens {
            signer,
            audiences: claims::api_audiences(),
        }
    }

    /// The signer (tests verify with it).
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: the TokenRequest with its status.
    pub fn create_token(
        &self,
        registry: &Registry,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let req = parse_request(body)?;
        let gk = "TokenRequest";
        let group = "authentication.k8s.io";
        if !req.name.is_empty() && req.name != name {
            let e = crate::error::FieldError::invalid(
                "metadata.name",
                &json!(req.name),
                "must match the service account name if specified",
            );
            return Err(ApiError::invalid(gk, group, name, &[e]));
        }
        if !req.namespace.is_empty() && req.namespace != namespace {
            let e = crate::error::FieldError::invalid(
                "metadata.namespace",
                &json!(req.namespace),
                "must match the service account namespace if specified",
            );
            return Err(ApiError::invalid(gk, group, name, &[e]));
        }
        let sa = registry.get(served("serviceaccounts"), Some(namespace), name)?;
        let errors = claims::validate_expiration(req.expiration_seconds);
        if !errors.is_empty() {
            return Err(ApiError::invalid(gk, group, "", &errors));
        }
        let mut subject = Subject {
            namespace: namespace.to_string(),
            service_account: ObjectRef::new(name, str_at(&sa.value(), "/metadata/uid")),
            ..Default::default()
        };
        if let Some(bound) = &req.bound {
            let kind = str_at(bound, "/kind");
            let api_version = str_at(bound, "/apiVersion");
            let ref_name = str_at(bound, "/name");
            let ref_uid = str_at(bound, "/uid");
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
            let uid = match (group, kind) {
                ("", "Pod") => {
                    let pod = registry.get(served("pods"), Some(namespace), ref_name)?.value();
                    let pod_sa = str_at(&pod, "/spec/serviceAccountName");
                    if pod_sa != name {
                        return Err(ApiError::bad_request(format!(
                            "cannot bind token for serviceaccount {name:?} to pod running with different \
                             serviceaccount name."
                        )));
                    }
                    let uid = str_at(&pod, "/metadata/uid").to_string();
                    subject.pod = Some(ObjectRef::new(ref_name, uid.clone()));
                    // ServiceAccountTokenPodNodeInfo: the node's name, and its uid when the node exists.
                    let node_name = str_at(&pod, "/spec/nodeName");
                    if !node_name.is_empty() {
                        let node_uid = registry
                            .get(served("nodes"), None, node_name)
                            .map(|n| str_at(&n.value(), "/metadata/uid").to_string())
                            .unwrap_or_default();
                        subject.node = Some(ObjectRef::new(node_name, node_uid));
                    }
                    uid
                }
                ("", "Secret") => {
                    let secret = registry.get(served("secrets"), Some(namespace), ref_name)?;
                    let uid = str_at(&secret.value(), "/metadata/uid").to_string();
                    subject.secret = Some(ObjectRef::new(ref_name, uid.clone()));
                    uid
                }
                // ServiceAccountTokenNodeBinding (beta, on by default since 1.31).
                ("", "Node") => {
                    let node = registry.get(served("nodes"), None, ref_name)?;
                    let uid = str_at(&node.value(), "/metadata/uid").to_string();
                    subject.node = Some(ObjectRef::new(ref_name, uid.clone()));
                    uid
                }
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token to object of type {group}/{version}, Kind={kind}"
                    )));
                }
            };
            if !ref_uid.is_empty() && ref_uid != uid {
                return Err(ApiError::conflict(
                    kind,
                    group,
                    ref_name,
                    &format!(
                        "the UID in the bound object reference ({ref_uid}) does not match the UID in record. \
                         The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        let plan = claims::plan(
            &req.audiences,
            req.expiration_seconds,
            subject.pod.is_some(),
            &self.audiences,
        );
        let now = unix_now();
        let claims = claims::build(&subject, &plan, now, uuid::Uuid::new_v4().to_string());
        let token = self
            .signer
            .sign(&claims)
            .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))?;
        let mut spec = json!({"audiences": plan.audiences, "expirationSeconds": req.expiration_seconds});
        if let Some(b) = req.bound {
            spec["boundObjectRef"] = b;
        }
        Ok(json!({
            "kind": TOKEN_REQUEST_KIND,
            "apiVersion": TOKEN_REQUEST_API_VERSION,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
            "spec": spec,
            // The requested expiry, also for an extended token: the kubelet refreshes on this schedule.
            "status": {"token": token, "expirationTimestamp": rfc3339(now + req.expiration_seconds)},
        }))
    }

    /// The user a bearer token authenticates as, if it is a valid token of ours. Every failure is
    /// `None` (the client gets 401); the reason goes to the debug log.
    pub fn authenticate(&self, registry: &Registry, token: &str) -> Option<UserInfo> {
        // Our JWTs have two dots; the admin token has none: skip the work for it.
        if token.bytes().filter(|b| *b == b'.').count() != 2 {
            return None;
        }
        match self.check(registry, token) {
            Ok(user) => Some(user),
            Err(e) => {
                tracing::debug!(error = %e, "service account token rejected");
                None
            }
        }
    }

    fn check(&self, registry: &Registry, token: &str) -> Result<UserInfo, claims::Invalid> {
        let c = self.signer.verify(token)?;
        let now = unix_now();
        claims::check_claims(&c, now, &self.audiences)?;
        let k = &c.kubernetes;
        let ns = k.namespace.as_str();
        let lookup = |plural: &str, namespace: Option<&str>, r: Option<&ObjectRef>| {
            r.and_then(|r| registry.get(served(plural), namespace, &r.name).ok())
                .map(|o| found(&o.value(), now))
        };
        claims::check_bound_objects(
            &c,
            lookup("serviceaccounts", Some(ns), Some(&k.serviceaccount)),
            lookup("pods", Some(ns), k.pod.as_ref()),
            lookup("secrets", Some(ns), k.secret.as_ref()),
            lookup(
                "nodes",
                None,
                if k.pod.is_none() { k.node.as_ref() } else { None },
            ),
        )?;
        Ok(user_info(&c))
    }
}

/// upstream `ServiceAccountInfo.UserInfo`, plus the `system:authenticated` group the union authenticator
/// adds.
pub fn user_info(c: &claims::Claims) -> UserInfo {
    let k = &c.kubernetes;
    let mut extra = BTreeMap::new();
    if let Some(p) = &k.pod {
        extra.insert(EXTRA_POD_NAME.to_string(), vec![p.name.clone()]);
        extra.insert(EXTRA_POD_UID.to_string(), vec![p.uid.clone()]);
    }
    if let Some(n) = &k.node {
        extra.insert(EXTRA_NODE_NAME.to_string(), vec![n.name.clone()]);
        if !n.uid.is_empty() {
            extra.insert(EXTRA_NODE_UID.to_string(), vec![n.uid.clone()]);
        }
    }
    if !c.jti.is_empty() {
        extra.insert(EXTRA_CREDENTIAL_ID.to_string(), vec![format!("JTI={}", c.jti)]);
    }
    UserInfo {
        username: claims::username(&k.namespace, &k.serviceaccount.name),
        uid: k.serviceaccount.uid.clone(),
        groups: vec![
            ALL_SERVICE_ACCOUNTS.to_string(),
            format!("{ALL_SERVICE_ACCOUNTS}:{}", k.namespace),
            ALL_AUTHENTICATED.to_string(),
        ],
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_parsing_defaults_expiration_and_checks_types() {
        let r = parse_request(&json!({"spec": {}})).unwrap();
        assert_eq!(r.expiration_seconds, 3600);
        assert!(r.audiences.is_empty() && r.bound.is_none());
        let r = parse_request(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": ["a"], "expirationSeconds": 600, "boundObjectRef": {"kind": "Pod", "name": "p"}}}))
        .unwrap();
        assert_eq!((r.audiences, r.expiration_seconds), (vec!["a".to_string()], 600));
        for bad in [
            json!([]),
            json!({"kind": "Pod"}),
            json!({"spec": {"audiences": "a"}}),
            json!({"spec": {"expirationSeconds": "10m"}}),
        ] {
            assert_eq!(parse_request(&bad).err().map(|e| e.code), Some(400), "{bad}");
        }
    }

    #[test]
    fn service_account_users_have_upstream_groups_and_extras() {
        let subject = Subject {
            namespace: "ns".into(),
            service_account: ObjectRef::new("sa", "sa-uid"),
            pod: Some(ObjectRef::new("p", "pod-uid")),
            secret: None,
            node: Some(ObjectRef::new("n", "")),
        };
        let plan = claims::plan(&[], 3607, true, &claims::api_audiences());
        let u = user_info(&claims::build(&subject, &plan, 0, "abc".into()));
        assert_eq!(u.username, "system:serviceaccount:ns:sa");
        assert_eq!(u.uid, "sa-uid");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(u.extra[EXTRA_POD_NAME], ["p"]);
        assert_eq!(u.extra[EXTRA_POD_UID], ["pod-uid"]);
        assert_eq!(u.extra[EXTRA_NODE_NAME], ["n"]);
        assert!(
            !u.extra.contains_key(EXTRA_NODE_UID),
            "a node that was not found has no uid"
        );
        assert_eq!(u.extra[EXTRA_CREDENTIAL_ID], ["JTI=abc"]);
    }
}
