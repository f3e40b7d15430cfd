//! Authorization: upstream's RBAC authorizer over the stored Roles, ClusterRoles and their bindings.
//!
//! ```text
//! http::authenticate ── user (admin token, service account JWT) ── impersonation (headers, checked)
//!    │ attributes::request_attributes(method, path, query)   (pure: verb, group, resource, ns, name)
//!    ▼
//! authorizer::authorize(policy, user, attributes)             (pure over a Policy)
//!    │ system:masters → allow at once; else ClusterRoleBindings, then RoleBindings of the namespace
//!    ▼
//! allow, or 403 with upstream's `... is forbidden: User "u" cannot <verb> resource ...` message
//! ```
//!
//! The same rules answer the access reviews (`http/reviews.rs`). The policy is read from the registry
//! on each check (a handful of objects on a laptop cluster); the admin's requests never read it.

pub mod attributes;
pub mod authorizer;
pub mod escalation;
pub mod impersonation;
pub mod rules;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

pub use attributes::{Attributes, forbidden, request_attributes};
pub use authorizer::{Decision, SYSTEM_MASTERS, authorize, rules_for};

use crate::registry::{Registry, Selection, resources};
use crate::user::UserInfo;

const GROUP: &str = "rbac.authorization.k8s.io";

/// Where the authorizer reads roles and bindings (the registry; a map in tests).
pub trait Policy {
    /// Every ClusterRoleBinding.
    fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding>;
    /// The RoleBindings of a namespace.
    fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding>;
    /// A Role.
    fn role(&self, namespace: &str, name: &str) -> Option<Role>;
    /// A ClusterRole.
    fn cluster_role(&self, name: &str) -> Option<ClusterRole>;
}

fn list<T: serde::de::DeserializeOwned>(registry: &Registry, plural: &str, ns: Option<&str>) -> Vec<T> {
    let Some(info) = resources::find(GROUP, "v1", plural) else {
        return Vec::new();
    };
    registry
        .list(info, ns, &Selection::default(), None, None)
        .items
        .iter()
        .filter_map(|o| serde_json::from_slice(&o.bytes).ok())
        .collect()
}

fn get<T: serde::de::DeserializeOwned>(
    registry: &Registry,
    plural: &str,
    ns: Option<&str>,
    name: &str,
) -> Option<T> {
    let info = resources::find(GROUP, "v1", plural)?;
    let o = registry.get(info, ns, name).ok()?;
    serde_json::from_slice(&o.bytes).ok()
}

impl Policy for Registry {
    fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding> {
        list(self, "clusterrolebindings", None)
    }

    fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding> {
        list(self, "rolebindings", Some(namespace))
    }

    fn role(&self, namespace: &str, name: &str) -> Option<Role> {
        get(self, "roles", Some(namespace), name)
    }

    fn cluster_role(&self, name: &str) -> Option<ClusterRole> {
        get(self, "clusterroles", None, name)
    }
}

/// Whether a user is in `system:masters` (allowed everything without reading the policy).
pub fn is_master(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == SYSTEM_MASTERS)
}

/// upstream `serviceaccount.MakeGroupNames` plus `system:authenticated`: a service account user.
pub fn service_account_user(namespace: &str, name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        uid: String::new(),
        groups: vec![
            crate::user::ALL_SERVICE_ACCOUNTS.to_string(),
            format!("{}:{namespace}", crate::user::ALL_SERVICE_ACCOUNTS),
            crate::user::ALL_AUTHENTICATED.to_string(),
        ],
        extra: Default::default(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    /// A policy held in memory; role bindings carry their namespace in metadata.
    #[derive(Default)]
    pub(crate) struct MemoryPolicy {
        pub cluster_role_bindings: Vec<ClusterRoleBinding>,
        pub role_bindings: Vec<RoleBinding>,
        pub roles: Vec<Role>,
        pub cluster_roles: Vec<ClusterRole>,
    }

    type RuleSpec<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str]);

    fn rules(specs: &[RuleSpec<'_>]) -> Vec<PolicyRule> {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        specs
            .iter()
            .map(|(verbs, groups, resources)| PolicyRule {
                verbs: v(verbs),
                api_groups: Some(v(groups)),
                resources: Some(v(resources)),
                ..Default::default()
            })
            .collect()
    }

    impl MemoryPolicy {
        pub(crate) fn add_role(&mut self, ns: &str, name: &str, specs: &[RuleSpec<'_>]) {
            self.roles.push(Role {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some(ns.into()),
                    ..Default::default()
                },
                rules: Some(rules(specs)),
            });
        }

        pub(crate) fn add_cluster_role(&mut self, name: &str, specs: &[RuleSpec<'_>]) {
            self.cluster_roles.push(ClusterRole {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                rules: Some(rules(specs)),
                ..Default::default()
            });
        }
    }

    /// A binding; `T` is RoleBinding or ClusterRoleBinding (same JSON shape).
    pub(crate) fn binding<T: serde::de::DeserializeOwned>(
        ns: Option<&str>,
        name: &str,
        (kind, role): (&str, &str),
        subjects: &[(&str, &str, Option<&str>)],
    ) -> T {
        let subjects: Vec<Subject> = subjects
            .iter()
            .map(|(kind, name, ns)| Subject {
                kind: kind.to_string(),
                name: name.to_string(),
                namespace: ns.map(str::to_string),
                api_group: None,
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "roleRef": RoleRef {api_group: GROUP.into(), kind: kind.into(), name: role.into()},
            "subjects": subjects,
        }))
        .unwrap()
    }

    pub(crate) fn attrs(verb: &str, group: &str, ns: &str, resource: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            namespace: ns.into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    pub(crate) fn sa_user(ns: &str, name: &str) -> UserInfo {
        service_account_user(ns, name)
    }

    impl Policy for MemoryPolicy {
        fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding> {
            self.cluster_role_bindings.clone()
        }

        fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding> {
            self.role_bindings
                .iter()
                .filter(|b| b.metadata.namespace.as_deref() == Some(namespace))
                .cloned()
                .collect()
        }

        fn role(&self, namespace: &str, name: &str) -> Option<Role> {
            self.roles
                .iter()
                .find(|r| {
                    r.metadata.namespace.as_deref() == Some(namespace)
                        && r.metadata.name.as_deref() == Some(name)
                })
                .cloned()
        }

        fn cluster_role(&self, name: &str) -> Option<ClusterRole> {
            self.cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
                .cloned()
        }
    }
}
