//! The printers of RBAC bindings (printers.go: printRoleBinding, printClusterRoleBinding). Roles and
//! ClusterRoles print with the generic Name / Created At columns, as upstream's role printers do.

use jiff::Timestamp;
use serde_json::Value;

use super::{AGE, Column, NAME, age, col, list, name, string, wide};

pub(super) const ROLE_BINDING_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If \
         the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
    ),
    AGE,
    wide("Users", "Users in the roleBinding"),
    wide("Groups", "Groups in the roleBinding"),
    wide("ServiceAccounts", "ServiceAccounts in the roleBinding"),
];

pub(super) const CLUSTER_ROLE_BINDING_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Role",
        "string",
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, \
         the Authorizer must return an error. This field is immutable.",
    ),
    AGE,
    wide("Users", "Users in the clusterRoleBinding"),
    wide("Groups", "Groups in the clusterRoleBinding"),
    wide("ServiceAccounts", "ServiceAccounts in the clusterRoleBinding"),
];

/// printRoleBinding / printClusterRoleBinding: NAME, ROLE (`Kind/name`), AGE, and the subjects by kind
/// (`rbac.SubjectsStrings`: service accounts as `namespace/name`).
pub(super) fn binding_cells(b: &Value, now: Timestamp) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        string(b, &["roleRef", "kind"]),
        string(b, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in list(b, &["subjects"]) {
        let n = string(s, &["name"]).to_string();
        match string(s, &["kind"]) {
            "User" => users.push(n),
            "Group" => groups.push(n),
            "ServiceAccount" => sas.push(format!("{}/{n}", string(s, &["namespace"]))),
            _ => {}
        }
    }
    vec![
        name(b),
        role.into(),
        age(b, now),
        users.join(", ").into(),
        groups.join(", ").into(),
        sas.join(", ").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::{Printer, cells, columns};
    use serde_json::json;

    #[test]
    fn bindings_print_role_and_subjects_by_kind() {
        let b = json!({"metadata": {"name": "read-pods", "creationTimestamp": "2025-01-01T11:00:00Z"},
            "roleRef": {"kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "default", "namespace": "dev"},
                         {"kind": "Group", "name": "ops"}, {"kind": "User", "name": "joe"}]});
        let now = "2025-01-01T12:00:00Z".parse().unwrap();
        assert_eq!(
            cells(Printer::RoleBinding, &b, now),
            vec![
                json!("read-pods"),
                json!("Role/pod-reader"),
                json!("60m"),
                json!("jane, joe"),
                json!("ops"),
                json!("dev/default")
            ]
        );
        let cols = columns(Printer::ClusterRoleBinding);
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(cols[3]["priority"], 1);
        assert_eq!(
            cols[5]["description"],
            "ServiceAccounts in the clusterRoleBinding"
        );
        assert_eq!(
            columns(Printer::RoleBinding)[4]["description"],
            "Groups in the roleBinding"
        );
    }
}
