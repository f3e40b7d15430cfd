//! Impersonation (upstream `endpoints/filters/impersonation.go`): `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>` headers make a request run as
//! another user, if the requester may `impersonate` each of them (users, groups, serviceaccounts,
//! uids and userextras). A service account named as the user gets its groups, unless groups are given;
//! every impersonated user gets `system:authenticated`. Pure: headers in, checks and a user out.

use std::collections::BTreeMap;

use super::Attributes;
use crate::error::ApiError;
use crate::user::{ALL_AUTHENTICATED, UserInfo};

/// `Impersonate-User`.
pub const USER_HEADER: &str = "impersonate-user";
/// `Impersonate-Group` (repeated).
pub const GROUP_HEADER: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const UID_HEADER: &str = "impersonate-uid";
/// `Impersonate-Extra-<key>` (repeated).
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";

/// What the headers ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The user to act as.
    pub user: String,
    /// Groups to act with.
    pub groups: Vec<String>,
    /// The uid, if given.
    pub uid: Option<String>,
    /// Extra values by (lower-case, unescaped) key.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Read the impersonation headers (names lower case); `None` when there are none. Groups, extras or a
/// uid without a user are refused (upstream answers 500 for that; a client error is a 400 here).
pub fn parse(headers: &[(String, String)]) -> Result<Option<Request>, ApiError> {
    let mut r = Request::default();
    let mut any_other = false;
    for (name, value) in headers {
        if name == USER_HEADER {
            if r.user.is_empty() {
                r.user = value.clone();
            }
        } else if name == GROUP_HEADER {
            r.groups.push(value.clone());
            any_other = true;
        } else if name == UID_HEADER {
            if !value.is_empty() && r.uid.is_none() {
                r.uid = Some(value.clone());
                any_other = true;
            }
        } else if let Some(key) = name.strip_prefix(EXTRA_PREFIX) {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            r.extra.entry(key).or_default().push(value.clone());
            any_other = true;
        }
    }
    if r.user.is_empty() {
        if any_other {
            return Err(ApiError::bad_request(
                "requested impersonation of groups, extra or uid without impersonating a user",
            ));
        }
        return Ok(None);
    }
    Ok(Some(r))
}

/// upstream `serviceaccount.SplitUsername`.
pub fn split_service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

fn impersonate(group: &str, resource: &str, namespace: &str, name: &str, sub: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        subresource: sub.into(),
        ..Default::default()
    }
}

/// The checks the requester must pass, in upstream's order.
pub fn checks(r: &Request) -> Vec<Attributes> {
    let mut out = Vec::new();
    match split_service_account(&r.user) {
        Some((ns, name)) => out.push(impersonate("", "serviceaccounts", ns, name, "")),
        None => out.push(impersonate("", "users", "", &r.user, "")),
    }
    for g in &r.groups {
        out.push(impersonate("", "groups", "", g, ""));
    }
    for (k, values) in &r.extra {
        for v in values {
            out.push(impersonate("authentication.k8s.io", "userextras", "", v, k));
        }
    }
    if let Some(uid) = &r.uid {
        out.push(impersonate("authentication.k8s.io", "uids", "", uid, ""));
    }
    out
}

/// The user the request then runs as.
pub fn user(r: &Request) -> UserInfo {
    let mut groups = r.groups.clone();
    if groups.is_empty()
        && let Some((ns, name)) = split_service_account(&r.user)
    {
        groups = super::service_account_user(ns, name).groups;
        groups.retain(|g| g != ALL_AUTHENTICATED);
    }
    if r.user != "system:anonymous"
        && !groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED)
    {
        groups.push(ALL_AUTHENTICATED.into());
    }
    UserInfo {
        username: r.user.clone(),
        uid: r.uid.clone().unwrap_or_default(),
        groups,
        extra: r.extra.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_headers_no_impersonation() {
        assert_eq!(parse(&h(&[("accept", "*/*")])).unwrap(), None);
        assert_eq!(parse(&h(&[(GROUP_HEADER, "g")])).unwrap_err().code, 400);
    }

    #[test]
    fn a_service_account_gets_its_groups_and_is_checked_in_its_namespace() {
        let r = parse(&h(&[(USER_HEADER, "system:serviceaccount:default:default")]))
            .unwrap()
            .unwrap();
        let u = user(&r);
        assert_eq!(u.username, "system:serviceaccount:default:default");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        let c = checks(&r);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (
                c[0].verb.as_str(),
                c[0].resource.as_str(),
                c[0].namespace.as_str(),
                c[0].name.as_str()
            ),
            ("impersonate", "serviceaccounts", "default", "default")
        );
    }

    #[test]
    fn users_groups_extras_and_uids_are_each_checked() {
        let r = parse(&h(&[
            (USER_HEADER, "jane"),
            (GROUP_HEADER, "devs"),
            (GROUP_HEADER, "ops"),
            ("impersonate-extra-scopes%2fv1", "view"),
            (UID_HEADER, "1234"),
        ]))
        .unwrap()
        .unwrap();
        let u = user(&r);
        assert_eq!(u.groups, ["devs", "ops", "system:authenticated"]);
        assert_eq!(u.uid, "1234");
        assert_eq!(u.extra["scopes/v1"], ["view"]);
        let c: Vec<(String, String, String)> = checks(&r)
            .into_iter()
            .map(|a| (a.resource, a.subresource, a.name))
            .collect();
        assert_eq!(
            c,
            [
                ("users".into(), "".into(), "jane".into()),
                ("groups".into(), "".into(), "devs".into()),
                ("groups".into(), "".into(), "ops".into()),
                ("userextras".into(), "scopes/v1".into(), "view".into()),
                ("uids".into(), "".into(), "1234".into()),
            ]
        );
        // A named system:authenticated group is not added twice.
        let r = parse(&h(&[
            (USER_HEADER, "jane"),
            (GROUP_HEADER, "system:authenticated"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(user(&r).groups, ["system:authenticated"]);
    }
}
