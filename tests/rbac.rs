//! RBAC end to end with the real kubectl on one shared cluster (`kubeling up`, so the controller
//! manager aggregates ClusterRoles): `kubectl auth can-i --as=<service account>` says no, then yes after a
//! RoleBinding; a service account's token (`kubectl create token`) gets upstream's 403, then 200; a
//! binding to a missing role grants nothing; `admin` holds the aggregated rules; `can-i --list`; the
//! binding printer columns; the immutable roleRef.

mod common;

use std::time::Duration;

use common::Cluster;
use serde_json::Value;

/// `kubectl auth can-i` (exit 0 and `yes`, or exit 1 and `no`).
fn can_i(c: &Cluster, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = c.kubectl(&all);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn namespace_with_default_sa(c: &Cluster, ns: &str) {
    c.ok(&["create", "namespace", ns]);
    c.wait_json(
        &["serviceaccount", "default", "-n", ns],
        Duration::from_secs(20),
        |_| true,
    );
}

fn grant_pod_reading(c: &Cluster, ns: &str) {
    c.ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
        "-n",
        ns,
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "read-pods",
        "--role=pod-reader",
        &format!("--serviceaccount={ns}:default"),
        "-n",
        ns,
    ]);
}

fn can_i_says_no_then_yes_after_a_role_binding(c: &Cluster) {
    let ns = "rbac-can-i";
    namespace_with_default_sa(c, ns);
    let sa = format!("--as=system:serviceaccount:{ns}:default");
    assert_eq!(can_i(c, &["list", "pods", &sa, "-n", ns]), "no");
    // The admin may do anything.
    assert_eq!(can_i(c, &["delete", "nodes"]), "yes");
    grant_pod_reading(c, ns);
    assert_eq!(can_i(c, &["list", "pods", &sa, "-n", ns]), "yes");
    assert_eq!(can_i(c, &["delete", "pods", &sa, "-n", ns]), "no");
    assert_eq!(can_i(c, &["list", "pods", &sa, "-n", "default"]), "no");
    // Impersonated requests are authorized as the service account.
    let err = c.fails(&["get", "secrets", &sa, "-n", ns]);
    assert!(
        err.contains(&format!(
            "secrets is forbidden: User \"system:serviceaccount:{ns}:default\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{err}"
    );
    c.ok(&["get", "pods", &sa, "-n", ns]);

    // can-i --list: the granted rules and the bootstrap ones every user holds.
    let list = c.ok(&["auth", "can-i", "--list", &sa, "-n", ns]);
    let row = |resource: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
    };
    assert!(
        row("pods").is_some_and(|l| l.ends_with("[get list watch]")),
        "{list}"
    );
    assert!(
        row("selfsubjectaccessreviews.authorization.k8s.io").is_some_and(|l| l.ends_with("[create]")),
        "{list}"
    );
    assert!(list.contains("[/api/*]"), "{list}");
    // The admin's rules come from the cluster-admin binding, each once (as upstream's listing).
    let admin = c.ok(&["auth", "can-i", "--list"]);
    let wildcard_rows = admin
        .lines()
        .filter(|l| l.split_whitespace().collect::<Vec<_>>() == ["[*]", "[]", "[*]"]);
    assert_eq!(wildcard_rows.count(), 1, "{admin}");
    assert!(
        admin
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["*.*", "[]", "[]", "[*]"]),
        "{admin}"
    );
}

fn service_account_token_gets_403_then_200_after_a_binding(c: &Cluster) {
    let ns = "rbac-token";
    namespace_with_default_sa(c, ns);
    let token = c.ok(&["create", "token", "default", "-n", ns]);
    let token = token.trim();
    let err = c.fails(&["--token", token, "get", "pods", "-n", ns]);
    assert!(
        err.contains(&format!(
            "Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:{ns}:default\" cannot list resource \"pods\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{err}"
    );
    // The raw answer is upstream's Status.
    let (code, status) = c.curl(
        "GET",
        &format!("/api/v1/namespaces/{ns}/pods"),
        Some(token),
        "application/json",
        None,
    );
    assert_eq!(code, 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["details"], serde_json::json!({"kind": "pods"}));
    // Cluster-scoped requests name the cluster scope.
    let err = c.fails(&["--token", token, "get", "nodes"]);
    assert!(
        err.contains("cannot list resource \"nodes\" in API group \"\" at the cluster scope"),
        "{err}"
    );
    // Discovery, version and whoami are open to every authenticated user (bootstrap roles).
    c.ok(&["--token", token, "version"]);
    c.ok(&["--token", token, "auth", "whoami"]);

    grant_pod_reading(c, ns);
    let out = c.ok(&["--token", token, "get", "pods", "-n", ns]);
    assert!(out.is_empty(), "{out}");
}

fn binding_to_a_missing_role_grants_nothing(c: &Cluster) {
    let ns = "rbac-missing";
    namespace_with_default_sa(c, ns);
    c.ok(&[
        "create",
        "rolebinding",
        "to-nowhere",
        "--role=ghost",
        &format!("--serviceaccount={ns}:default"),
        "-n",
        ns,
    ]);
    let sa = format!("--as=system:serviceaccount:{ns}:default");
    // kubectl prints the reason after a no.
    assert_eq!(
        can_i(c, &["list", "pods", &sa, "-n", ns]),
        "no - RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
    );
    let token = c.ok(&["create", "token", "default", "-n", ns]);
    let err = c.fails(&["--token", token.trim(), "get", "pods", "-n", ns]);
    assert!(
        err.contains(": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"),
        "{err}"
    );
}

fn has_rule(role: &Value, resource: &str, verb: &str) -> bool {
    role["rules"].as_array().is_some_and(|rules| {
        rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == resource))
                && r["verbs"]
                    .as_array()
                    .is_some_and(|vs| vs.iter().any(|x| x == verb))
        })
    })
}

fn admin_edit_and_view_hold_aggregated_rules(c: &Cluster) {
    // admin = system:aggregate-to-admin + edit (= system:aggregate-to-edit + view (= system:aggregate-to-view)).
    c.wait_json(&["clusterrole", "admin"], Duration::from_secs(30), |r| {
        has_rule(r, "rolebindings", "create")
            && has_rule(r, "deployments", "update")
            && has_rule(r, "configmaps", "watch")
    });
    let yaml = c.ok(&["get", "clusterroles", "admin", "-o", "yaml"]);
    assert!(yaml.contains("aggregationRule:"), "{yaml}");
    assert!(yaml.contains("- localsubjectaccessreviews"), "{yaml}");
    // A new role labelled for view reaches view, then edit and admin.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: widget-viewer\n  labels:\n    \
         rbac.authorization.k8s.io/aggregate-to-view: \"true\"\nrules:\n- apiGroups: [example.com]\n  resources: [widgets]\n  \
         verbs: [get, list, watch]\n",
    );
    for role in ["view", "edit", "admin"] {
        c.wait_json(&["clusterrole", role], Duration::from_secs(30), |r| {
            has_rule(r, "widgets", "list")
        });
    }
    // And leaves them when it goes.
    c.ok(&["delete", "clusterrole", "widget-viewer"]);
    c.wait_json(&["clusterrole", "admin"], Duration::from_secs(30), |r| {
        !has_rule(r, "widgets", "list")
    });
}

fn bindings_print_role_and_subjects(c: &Cluster) {
    let out = c.ok(&["get", "rolebindings", "-n", "rbac-can-i"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "ROLE", "AGE"]);
    assert!(
        lines.next().unwrap().starts_with("read-pods   Role/pod-reader"),
        "{out}"
    );
    let wide = c.ok(&["get", "rolebindings", "-n", "rbac-can-i", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    assert!(wide.contains("rbac-can-i/default"), "{wide}");
    let crbs = c.ok(&["get", "clusterrolebindings", "cluster-admin", "-o", "wide"]);
    assert!(
        crbs.contains("ClusterRole/cluster-admin") && crbs.contains("system:masters"),
        "{crbs}"
    );
    let roles = c.ok(&["get", "clusterroles", "view"]);
    let header: Vec<&str> = roles.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"]);
}

fn role_ref_is_immutable_and_rules_are_validated(c: &Cluster) {
    let err = c.fails(&[
        "patch",
        "rolebinding",
        "read-pods",
        "-n",
        "rbac-can-i",
        "--type=merge",
        "-p",
        "{\"roleRef\":{\"name\":\"other\"}}",
    ]);
    assert!(err.contains("roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"), "{err}");
    let out = c.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bad\n  namespace: default\nrules:\n- \
         nonResourceURLs: [/healthz]\n  verbs: [get]\n",
        ),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"),
        "{err}"
    );
}

fn bad_rbac_input_is_a_status_never_a_500(c: &Cluster) {
    let token = c.token();
    let t = Some(token.as_str());
    let expect = |method: &str, path: &str, body: &str, want: u16, reason: &str| {
        let (code, status) = c.curl(method, path, t, "application/json", Some(body.as_bytes()));
        assert_eq!(code, want, "{path} {body}: {status}");
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["reason"], reason, "{status}");
    };
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    expect(
        "POST",
        &format!("{rbac}/clusterrolebindings"),
        r#"{"metadata":{"name":"x"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}}"#,
        422,
        "Invalid",
    );
    expect(
        "POST",
        &format!("{rbac}/namespaces/default/roles"),
        r#"{"metadata":{"name":"x"},"rules":"all"}"#,
        400,
        "BadRequest",
    );
    expect(
        "POST",
        &format!("{rbac}/namespaces/default/rolebindings"),
        r#"{"metadata":{"name":"x"},"roleRef":{"kind":"Role","name":"r"},"subjects":[{"kind":"Robot","name":"x"}]}"#,
        422,
        "Invalid",
    );
    expect(
        "POST",
        &format!("{rbac}/clusterroles"),
        r#"{"metadata":{"name":"x"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}"#,
        422,
        "Invalid",
    );
    let authz = "/apis/authorization.k8s.io/v1";
    expect(
        "POST",
        &format!("{authz}/selfsubjectaccessreviews"),
        r#"{"spec":{}}"#,
        422,
        "Invalid",
    );
    expect(
        "POST",
        &format!("{authz}/subjectaccessreviews"),
        r#"{"spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}"#,
        422,
        "Invalid",
    );
    expect(
        "POST",
        &format!("{authz}/namespaces/default/localsubjectaccessreviews"),
        r#"{"spec":{"user":"u","resourceAttributes":{"verb":"get","resource":"pods","namespace":"other"}}}"#,
        422,
        "Invalid",
    );
    expect(
        "POST",
        &format!("{authz}/selfsubjectaccessreviews"),
        "[1,2]",
        400,
        "BadRequest",
    );
    expect(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        r#"{"spec":{}}"#,
        400,
        "BadRequest",
    );
    expect(
        "GET",
        &format!("{authz}/subjectaccessreviews"),
        "",
        405,
        "MethodNotAllowed",
    );
}

#[test]
fn rbac_with_kubectl_on_one_cluster() {
    let c = Cluster::up();
    can_i_says_no_then_yes_after_a_role_binding(&c);
    service_account_token_gets_403_then_200_after_a_binding(&c);
    binding_to_a_missing_role_grants_nothing(&c);
    admin_edit_and_view_hold_aggregated_rules(&c);
    bindings_print_role_and_subjects(&c);
    role_ref_is_immutable_and_rules_are_validated(&c);
    bad_rbac_input_is_a_status_never_a_500(&c);
}
