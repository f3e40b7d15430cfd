//! The HTTP side of authorization: impersonation headers, the RBAC check of every request (members of
//! `system:masters`, the admin token's user, skip it without reading the policy), and the access and
//! token reviews, answered from the same rules ([`crate::rbac`], [`super::reviews`]).

use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::Response;

use super::{ServerState, decode_object, error_response, json_value, read_body, reviews};
use crate::error::ApiError;
use crate::rbac::{self, impersonation};
use crate::user::UserInfo;

/// The user a request runs as (the authenticated one, or whom it impersonates), if it may do what it
/// asks; otherwise the 403 (or the 400 of malformed impersonation headers).
pub(super) fn authorize(st: &ServerState, req: &Request, user: UserInfo) -> Result<UserInfo, ApiError> {
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("impersonate-"))
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let user = match impersonation::parse(&headers)? {
        None => user,
        Some(wanted) => {
            if !rbac::is_master(&user) {
                for a in impersonation::checks(&wanted) {
                    let d = rbac::authorize(&st.registry, &user, &a);
                    if !d.allowed {
                        return Err(rbac::forbidden(&user.username, &a, &d.reason));
                    }
                }
            }
            impersonation::user(&wanted)
        }
    };
    if rbac::is_master(&user) {
        return Ok(user);
    }
    let a = rbac::request_attributes(req.method().as_str(), req.uri().path(), req.uri().query());
    let d = rbac::authorize(&st.registry, &user, &a);
    if d.allowed {
        Ok(user)
    } else {
        tracing::debug!(user = %user.username, path = %req.uri().path(), reason = %d.reason, "forbidden");
        Err(rbac::forbidden(&user.username, &a, &d.reason))
    }
}

/// POST of a review: answered, never stored.
pub(super) async fn review(
    st: &ServerState,
    parts: Parts,
    body: Body,
    r: &'static reviews::Review,
    namespace: Option<&str>,
) -> Response {
    if parts.method != Method::POST {
        return error_response(&ApiError::method_not_allowed());
    }
    let user = parts
        .extensions
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(UserInfo::admin);
    let bytes = match read_body(body).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let authenticate = |token: &str| st.authenticate(token);
    let ctx = reviews::Context {
        user: &user,
        namespace,
        policy: &st.registry,
        authenticate: &authenticate,
        audiences: st.tokens.audiences(),
    };
    let result = decode_object(&parts.headers, &bytes).and_then(|v| reviews::answer(r, v, &ctx));
    match result {
        Ok(v) => json_value(StatusCode::CREATED, &v),
        Err(e) => error_response(&e),
    }
}
