//! The claims of a bound service account token and the rules over them, pure (upstream
//! `pkg/serviceaccount/claims.go` and the TokenRequest checks of
//! `pkg/registry/core/serviceaccount/storage/token.go`, `pkg/apis/authentication/validation`).
//!
//! [`TokenRequestPlan`] decides what a TokenRequest gets (audiences, lifetime, `warnafter`); [`build`]
//! makes the claims; [`check_claims`] and [`check_bound_objects`] are the authenticator's checks of a
//! verified token against the clock, the audiences and the objects it names.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// `--service-account-issuer` as kubeadm and most clusters set it; also the only API audience
/// (`--api-audiences` defaults to the issuer).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// upstream `serviceaccount.WarnOnlyBoundTokenExpirationSeconds`: what the ServiceAccount admission puts
/// in the projected token source, and the value that gets the extended lifetime.
pub const WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS: i64 = 60 * 60 + 7;
/// upstream `serviceaccount.ExpirationExtensionSeconds`: one year, the lifetime a pod-bound token of
/// [`WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS`] really gets (`--service-account-extend-token-expiration`,
/// on by default).
pub const EXPIRATION_EXTENSION_SECONDS: i64 = 24 * 365 * 60 * 60;
/// TokenRequestSpec's default `expirationSeconds` (`SetDefaults_TokenRequestSpec`): one hour.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 60 * 60;
/// `ValidateTokenRequest`: at least 10 minutes...
pub const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
/// ... and at most 2^32 seconds.
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// go-jose `jwt.DefaultLeeway`: the clock skew `Claims.Validate` tolerates on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECONDS: i64 = 60;

/// The API server's audiences (`--api-audiences`): a token must name one of them to authenticate.
pub fn api_audiences() -> Vec<String> {
    vec![ISSUER.to_string()]
}

/// `name` and `uid` of an object a token names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// metadata.name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// metadata.uid (empty for a node that could not be found).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference.
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> ObjectRef {
        ObjectRef {
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// The `kubernetes.io` private claims.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The node the bound pod runs on (ServiceAccountTokenPodNodeInfo, on by default since 1.30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// When an extended token would have expired: use after it is logged as stale (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// A token's claims, as upstream's `jwt.Claims` + `privateClaims`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
    /// Audiences; one audience is written as a plain string, as go-jose does.
    #[serde(with = "audience")]
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// A unique ID (ServiceAccountTokenJTI); the authenticated user's `credential-id` extra.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The private claims.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

mod audience {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(aud: &[String], s: S) -> Result<S::Ok, S::Error> {
        match aud {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(a) => vec![a],
            OneOrMany::Many(a) => a,
        })
    }
}

/// `system:serviceaccount:<ns>:<name>` (upstream `serviceaccount.MakeUsername`).
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The `(namespace, name)` of a service account username, if it is one.
pub fn split_username(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// `ValidateTokenRequest` on `spec.expirationSeconds`.
pub fn validate_expiration(expiration_seconds: i64) -> Vec<FieldError> {
    let field = "spec.expirationSeconds";
    let value = serde_json::json!(expiration_seconds);
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        vec![FieldError::invalid(
            field,
            &value,
            "may not specify a duration less than 10 minutes",
        )]
    } else if expiration_seconds > MAX_EXPIRATION_SECONDS {
        vec![FieldError::invalid(
            field,
            &value,
            "may not specify a duration larger than 2^32 seconds",
        )]
    } else {
        Vec::new()
    }
}

/// What a TokenRequest is issued with, after defaulting and the expiration extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequestPlan {
    /// The token's audiences: the request's, or the API server's when it names none.
    pub audiences: Vec<String>,
    /// The token's real lifetime (`exp - iat`).
    pub lifetime_seconds: i64,
    /// `warnafter - iat` when the lifetime was extended.
    pub warn_after_seconds: Option<i64>,
}

/// upstream TokenREST.Create: audiences default to the API server's; a pod-bound request for exactly
/// [`WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS`] whose audiences are all the API server's is issued for
/// [`EXPIRATION_EXTENSION_SECONDS`] with `warnafter` at the requested expiry (the status still reports
/// the requested expiry, so the kubelet refreshes on that schedule).
pub fn plan(
    requested_audiences: &[String],
    expiration_seconds: i64,
    bound_to_pod: bool,
    api_audiences: &[String],
) -> TokenRequestPlan {
    let audiences = if requested_audiences.is_empty() {
        api_audiences.to_vec()
    } else {
        requested_audiences.to_vec()
    };
    let kube_audiences = audiences.iter().all(|a| api_audiences.contains(a));
    if bound_to_pod && expiration_seconds == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS && kube_audiences {
        TokenRequestPlan {
            audiences,
            lifetime_seconds: EXPIRATION_EXTENSION_SECONDS,
            warn_after_seconds: Some(expiration_seconds),
        }
    } else {
        TokenRequestPlan {
            audiences,
            lifetime_seconds: expiration_seconds,
            warn_after_seconds: None,
        }
    }
}

/// The objects a token is built from.
#[derive(Debug, Clone, Default)]
pub struct Subject {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub service_account: ObjectRef,
    /// The bound pod.
    pub pod: Option<ObjectRef>,
    /// The bound secret.
    pub secret: Option<ObjectRef>,
    /// The bound pod's node (name, and uid when the node exists).
    pub node: Option<ObjectRef>,
}

/// upstream `serviceaccount.Claims`: `now` is Unix seconds, `jti` a fresh UUID.
pub fn build(subject: &Subject, plan: &TokenRequestPlan, now: i64, jti: String) -> Claims {
    Claims {
        iss: ISSUER.to_string(),
        sub: username(&subject.namespace, &subject.service_account.name),
        aud: plan.audiences.clone(),
        exp: now + plan.lifetime_seconds,
        iat: now,
        nbf: now,
        jti,
        kubernetes: KubernetesClaims {
            namespace: subject.namespace.clone(),
            serviceaccount: subject.service_account.clone(),
            pod: subject.pod.clone(),
            secret: subject.secret.clone(),
            node: subject.node.clone(),
            warnafter: plan.warn_after_seconds.map(|w| now + w),
        },
    }
}

/// Why a verified token does not authenticate. Clients only ever see 401 `Unauthorized`; the text is
/// upstream's, for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Not three base64url parts, bad JSON, or a header we do not sign with.
    #[error("token is malformed: {0}")]
    Malformed(&'static str),
    /// The signature does not verify with our key.
    #[error("token signature is invalid")]
    Signature,
    /// Another issuer's token.
    #[error("token issuer {0:?} is not ours")]
    Issuer(String),
    /// No audience of ours.
    #[error("token audiences {0:?} is invalid for the target audiences")]
    Audience(Vec<String>),
    /// Past `exp`.
    #[error("service account token has expired")]
    Expired,
    /// Before `nbf` or `iat`.
    #[error("service account token is not valid yet")]
    NotYetValid,
    /// `sub` does not match the private claims.
    #[error("token subject does not match its service account claims")]
    Subject,
    /// The service account is gone (or being deleted).
    #[error("service account {0} has been deleted")]
    ServiceAccountDeleted(String),
    /// A service account of the same name but another uid.
    #[error("service account UID ({actual}) does not match claim ({claimed})")]
    ServiceAccountUid {
        /// The stored object's uid.
        actual: String,
        /// The token's.
        claimed: String,
    },
    /// The bound pod is gone (or being deleted).
    #[error("pod {0} has been deleted")]
    PodDeleted(String),
    /// A pod of the same name but another uid.
    #[error("pod UID ({actual}) does not match claim ({claimed})")]
    PodUid {
        /// The stored object's uid.
        actual: String,
        /// The token's.
        claimed: String,
    },
    /// The bound secret is gone.
    #[error("secret {0} has been deleted")]
    SecretDeleted(String),
    /// A secret of the same name but another uid.
    #[error("secret UID ({actual}) does not match claim ({claimed})")]
    SecretUid {
        /// The stored object's uid.
        actual: String,
        /// The token's.
        claimed: String,
    },
    /// The node a token is bound to is gone.
    #[error("node {0} has been deleted")]
    NodeDeleted(String),
    /// A node of the same name but another uid.
    #[error("node UID ({actual}) does not match claim ({claimed})")]
    NodeUid {
        /// The stored object's uid.
        actual: String,
        /// The token's.
        claimed: String,
    },
}

/// The JWT authenticator's and `claims.go` Validate's time, issuer, audience and subject checks.
pub fn check_claims(claims: &Claims, now: i64, api_audiences: &[String]) -> Result<(), Invalid> {
    if claims.iss != ISSUER {
        return Err(Invalid::Issuer(claims.iss.clone()));
    }
    if !claims.aud.iter().any(|a| api_audiences.contains(a)) {
        return Err(Invalid::Audience(claims.aud.clone()));
    }
    if now > claims.exp + LEEWAY_SECONDS {
        return Err(Invalid::Expired);
    }
    if now + LEEWAY_SECONDS < claims.nbf || now + LEEWAY_SECONDS < claims.iat {
        return Err(Invalid::NotYetValid);
    }
    let k = &claims.kubernetes;
    if k.namespace.is_empty()
        || k.serviceaccount.name.is_empty()
        || claims.sub != username(&k.namespace, &k.serviceaccount.name)
    {
        return Err(Invalid::Subject);
    }
    Ok(())
}

/// What the store has of one object a token names: its uid and whether it counts as deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// metadata.uid.
    pub uid: String,
    /// `deletionTimestamp` is more than [`LEEWAY_SECONDS`] in the past (upstream's
    /// `invalidIfDeletedBefore`): a terminating pod's token keeps working through its grace period.
    pub deleted: bool,
}

/// `claims.go` Validate: the service account, and the bound pod, secret or node, exist with the claimed
/// uids. The node of a pod-bound token is informational and not checked, as upstream.
pub fn check_bound_objects(
    claims: &Claims,
    service_account: Option<Found>,
    pod: Option<Found>,
    secret: Option<Found>,
    node: Option<Found>,
) -> Result<(), Invalid> {
    let k = &claims.kubernetes;
    let key = |name: &str| format!("{}/{}", k.namespace, name);
    let check = |claimed: &ObjectRef,
                 found: Option<Found>,
                 gone: fn(String) -> Invalid,
                 mismatch: fn(String, String) -> Invalid,
                 name: String| match found {
        None => Err(gone(name)),
        Some(f) if f.deleted => Err(gone(name)),
        Some(f) if f.uid != claimed.uid => Err(mismatch(f.uid, claimed.uid.clone())),
        Some(_) => Ok(()),
    };
    check(
        &k.serviceaccount,
        service_account,
        Invalid::ServiceAccountDeleted,
        |actual, claimed| Invalid::ServiceAccountUid { actual, claimed },
        key(&k.serviceaccount.name),
    )?;
    if let Some(claimed) = &k.pod {
        check(
            claimed,
            pod,
            Invalid::PodDeleted,
            |actual, claimed| Invalid::PodUid { actual, claimed },
            key(&claimed.name),
        )?;
    }
    if let Some(claimed) = &k.secret {
        check(
            claimed,
            secret,
            Invalid::SecretDeleted,
            |actual, claimed| Invalid::SecretUid { actual, claimed },
            key(&claimed.name),
        )?;
    }
    if let (None, Some(claimed)) = (&k.pod, &k.node) {
        check(
            claimed,
            node,
            Invalid::NodeDeleted,
            |actual, claimed| Invalid::NodeUid { actual, claimed },
            claimed.name.clone(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(pod: bool) -> Subject {
        Subject {
            namespace: "ns".into(),
            service_account: ObjectRef::new("sa", "sa-uid"),
            pod: pod.then(|| ObjectRef::new("p", "pod-uid")),
            secret: None,
            node: pod.then(|| ObjectRef::new("node1", "node-uid")),
        }
    }

    #[test]
    fn expiration_must_be_between_ten_minutes_and_two_to_the_32_seconds() {
        let cases: &[(i64, Option<&str>)] = &[
            (599, Some("may not specify a duration less than 10 minutes")),
            (600, None),
            (3600, None),
            (1 << 32, None),
            (
                (1 << 32) + 1,
                Some("may not specify a duration larger than 2^32 seconds"),
            ),
        ];
        for (seconds, want) in cases {
            let errs = validate_expiration(*seconds);
            match want {
                None => assert!(errs.is_empty(), "{seconds}: {errs:?}"),
                Some(w) => {
                    assert_eq!(errs.len(), 1, "{seconds}");
                    assert!(errs[0].message.contains(w), "{seconds}: {}", errs[0].message);
                    assert_eq!(errs[0].field, "spec.expirationSeconds");
                }
            }
        }
    }

    #[test]
    fn plan_defaults_audiences_and_extends_only_pod_bound_3607_for_api_audiences() {
        let api = api_audiences();
        let custom = vec!["vault".to_string()];
        // (audiences, seconds, bound to pod) → (audiences, lifetime, warn after)
        type Case<'a> = (&'a [String], i64, bool, Vec<String>, i64, Option<i64>);
        let cases: Vec<Case> = vec![
            (&[], 3600, false, api.clone(), 3600, None),
            (
                &[],
                3607,
                true,
                api.clone(),
                EXPIRATION_EXTENSION_SECONDS,
                Some(3607),
            ),
            (&[], 3607, false, api.clone(), 3607, None),
            (&custom, 3607, true, custom.clone(), 3607, None),
            (&[], 3608, true, api.clone(), 3608, None),
            (&custom, 600, false, custom.clone(), 600, None),
        ];
        for (auds, secs, pod, want_auds, want_life, want_warn) in cases {
            let p = plan(auds, secs, pod, &api);
            assert_eq!(p.audiences, want_auds, "{auds:?} {secs} {pod}");
            assert_eq!(p.lifetime_seconds, want_life, "{auds:?} {secs} {pod}");
            assert_eq!(p.warn_after_seconds, want_warn, "{auds:?} {secs} {pod}");
        }
    }

    #[test]
    fn claims_carry_subject_times_and_private_claims_in_upstream_json_shape() {
        let p = plan(&[], 3607, true, &api_audiences());
        let c = build(&subject(true), &p, 1000, "jti-1".into());
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["iss"], ISSUER);
        assert_eq!(v["sub"], "system:serviceaccount:ns:sa");
        assert_eq!(v["aud"], ISSUER, "one audience is a string, as go-jose writes it");
        assert_eq!(v["iat"], 1000);
        assert_eq!(v["nbf"], 1000);
        assert_eq!(v["exp"], 1000 + EXPIRATION_EXTENSION_SECONDS);
        assert_eq!(v["jti"], "jti-1");
        let k = &v["kubernetes.io"];
        assert_eq!(k["namespace"], "ns");
        assert_eq!(
            k["serviceaccount"],
            serde_json::json!({"name": "sa", "uid": "sa-uid"})
        );
        assert_eq!(k["pod"], serde_json::json!({"name": "p", "uid": "pod-uid"}));
        assert_eq!(k["node"], serde_json::json!({"name": "node1", "uid": "node-uid"}));
        assert_eq!(k["warnafter"], 1000 + 3607);
        assert!(k.get("secret").is_none());

        let unbound = build(
            &subject(false),
            &plan(&[], 600, false, &api_audiences()),
            5,
            "j".into(),
        );
        let v = serde_json::to_value(&unbound).unwrap();
        assert!(v["kubernetes.io"].get("pod").is_none());
        assert!(v["kubernetes.io"].get("warnafter").is_none());
        let two = build(
            &subject(false),
            &plan(&["a".into(), "b".into()], 600, false, &[]),
            5,
            "j".into(),
        );
        assert_eq!(
            serde_json::to_value(&two).unwrap()["aud"],
            serde_json::json!(["a", "b"])
        );
        let back: Claims = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn claims_checks_cover_issuer_audience_time_and_subject() {
        let api = api_audiences();
        let good = build(&subject(false), &plan(&[], 600, false, &api), 1000, "j".into());
        let cases: Vec<(&str, Claims, i64, Result<(), Invalid>)> = vec![
            ("valid", good.clone(), 1000, Ok(())),
            ("within the leeway after exp", good.clone(), 1600 + 60, Ok(())),
            ("expired", good.clone(), 1600 + 61, Err(Invalid::Expired)),
            ("before nbf, within leeway", good.clone(), 1000 - 60, Ok(())),
            ("before nbf", good.clone(), 1000 - 61, Err(Invalid::NotYetValid)),
            (
                "another issuer",
                Claims {
                    iss: "kubernetes/serviceaccount".into(),
                    ..good.clone()
                },
                1000,
                Err(Invalid::Issuer("kubernetes/serviceaccount".into())),
            ),
            (
                "another audience",
                Claims {
                    aud: vec!["vault".into()],
                    ..good.clone()
                },
                1000,
                Err(Invalid::Audience(vec!["vault".into()])),
            ),
            (
                "one of ours among others",
                Claims {
                    aud: vec!["vault".into(), ISSUER.into()],
                    ..good.clone()
                },
                1000,
                Ok(()),
            ),
            (
                "subject of another account",
                Claims {
                    sub: "system:serviceaccount:ns:other".into(),
                    ..good.clone()
                },
                1000,
                Err(Invalid::Subject),
            ),
        ];
        for (what, claims, now, want) in cases {
            assert_eq!(check_claims(&claims, now, &api), want, "{what}");
        }
    }

    #[test]
    fn bound_objects_must_exist_with_the_claimed_uids() {
        let api = api_audiences();
        let bound = build(&subject(true), &plan(&[], 3607, true, &api), 0, "j".into());
        let found = |uid: &str| {
            Some(Found {
                uid: uid.into(),
                deleted: false,
            })
        };
        let deleting = |uid: &str| {
            Some(Found {
                uid: uid.into(),
                deleted: true,
            })
        };
        type Case = (&'static str, Option<Found>, Option<Found>, Result<(), Invalid>);
        let cases: Vec<Case> = vec![
            ("all there", found("sa-uid"), found("pod-uid"), Ok(())),
            (
                "pod deleted over a minute ago",
                found("sa-uid"),
                deleting("pod-uid"),
                Err(Invalid::PodDeleted("ns/p".into())),
            ),
            (
                "service account gone",
                None,
                found("pod-uid"),
                Err(Invalid::ServiceAccountDeleted("ns/sa".into())),
            ),
            (
                "service account being deleted",
                deleting("sa-uid"),
                found("pod-uid"),
                Err(Invalid::ServiceAccountDeleted("ns/sa".into())),
            ),
            (
                "service account recreated",
                found("new"),
                found("pod-uid"),
                Err(Invalid::ServiceAccountUid {
                    actual: "new".into(),
                    claimed: "sa-uid".into(),
                }),
            ),
            (
                "pod gone",
                found("sa-uid"),
                None,
                Err(Invalid::PodDeleted("ns/p".into())),
            ),
            (
                "pod recreated",
                found("sa-uid"),
                found("other"),
                Err(Invalid::PodUid {
                    actual: "other".into(),
                    claimed: "pod-uid".into(),
                }),
            ),
        ];
        for (what, sa, pod, want) in cases {
            assert_eq!(check_bound_objects(&bound, sa, pod, None, None), want, "{what}");
        }
        let unbound = build(&subject(false), &plan(&[], 600, false, &api), 0, "j".into());
        assert_eq!(
            check_bound_objects(&unbound, found("sa-uid"), None, None, None),
            Ok(())
        );
        // A node-bound token (no pod) needs its node; a pod-bound one's node is not checked.
        let mut node_bound = unbound.clone();
        node_bound.kubernetes.node = Some(ObjectRef::new("node1", "node-uid"));
        assert_eq!(
            check_bound_objects(&node_bound, found("sa-uid"), None, None, None),
            Err(Invalid::NodeDeleted("node1".into()))
        );
        assert_eq!(
            check_bound_objects(&node_bound, found("sa-uid"), None, None, found("node-uid")),
            Ok(())
        );
        assert_eq!(
            check_bound_objects(&bound, found("sa-uid"), found("pod-uid"), None, None),
            Ok(())
        );
    }

    #[test]
    fn usernames_split_back_into_namespace_and_name() {
        assert_eq!(username("ns", "sa"), "system:serviceaccount:ns:sa");
        assert_eq!(split_username("system:serviceaccount:ns:sa"), Some(("ns", "sa")));
        assert_eq!(split_username("system:serviceaccount:ns"), None);
        assert_eq!(split_username("kubeling-admin"), None);
    }
}
