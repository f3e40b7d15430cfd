//! Who a request runs as (upstream `user.Info`), as the authentication middleware finds it (after
//! impersonation) and hands it on in the request's extensions; [`crate::rbac`] authorizes it.

use std::collections::BTreeMap;

/// The admin token's user (the kubeconfig's).
pub const ADMIN_USERNAME: &str = "kubeling-admin";
/// Its groups.
pub const ADMIN_GROUPS: &[&str] = &["system:masters", "system:authenticated"];
/// Every authenticated user's group (`user.AllAuthenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Every service account's group (`serviceaccount.AllServiceAccountsGroup`).
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

tokio::task_local! {
    static REQUESTER: UserInfo;
}

/// Run `f` (a request's handling) as `user`: the registry reads it with [`requester`] (RBAC escalation
/// checks, a CertificateSigningRequest's `spec.username`).
pub async fn on_behalf_of<F: std::future::Future>(user: UserInfo, f: F) -> F::Output {
    REQUESTER.scope(user, f).await
}

/// The user the current request runs as; `None` outside a request (the server's own writes).
pub fn requester() -> Option<UserInfo> {
    REQUESTER.try_with(UserInfo::clone).ok()
}

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// `kubeling-admin` or `system:serviceaccount:<ns>:<name>`.
    pub username: String,
    /// The service account's uid; empty for the admin.
    pub uid: String,
    /// Groups, `system:authenticated` last as upstream's union authenticator adds it.
    pub groups: Vec<String>,
    /// `authentication.kubernetes.io/pod-name` and the like.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The admin token's user.
    pub fn admin() -> UserInfo {
        UserInfo {
            username: ADMIN_USERNAME.to_string(),
            uid: String::new(),
            groups: ADMIN_GROUPS.iter().map(|g| g.to_string()).collect(),
            extra: BTreeMap::new(),
        }
    }

    /// `userInfo` of a SelfSubjectReview (or TokenReview) status: empty fields left out, as Go's
    /// `omitempty` does.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = serde_json::json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = serde_json::json!(self.extra);
        }
        v
    }
}
