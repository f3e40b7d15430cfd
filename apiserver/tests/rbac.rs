//! RBAC with the `kube` client against an in-process server: the bootstrap policy, a service account's
//! token denied then allowed by a RoleBinding, a binding to a missing role, the immutable roleRef,
//! impersonation, and the access reviews answered from the same rules.

mod common;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

use common::TestServer;

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => panic!("not an API error: {other}"),
    }
}

async fn robot_token(srv: &TestServer) -> String {
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap(),
    )
    .await
    .unwrap();
    sas.create_token_request("robot", &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

async fn bind(srv: &TestServer, name: &str, role_kind: &str, role: &str) {
    let rbs: Api<RoleBinding> = Api::default_namespaced(srv.client());
    rbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]}))
        .unwrap(),
    )
    .await
    .unwrap();
}

async fn create_role(srv: &TestServer) {
    let roles: Api<Role> = Api::default_namespaced(srv.client());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "cm-reader"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn bootstrap_policy_exists_at_first_start() {
    let srv = TestServer::start().await;
    let crs: Api<ClusterRole> = Api::all(srv.client());
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
    ] {
        let r = crs.get(name).await.unwrap();
        assert_eq!(
            r.metadata.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }
    assert!(crs.get("admin").await.unwrap().aggregation_rule.is_some());
    let crbs: Api<ClusterRoleBinding> = Api::all(srv.client());
    let b = crbs.get("cluster-admin").await.unwrap();
    assert_eq!(b.subjects.unwrap()[0].name, "system:masters");
}

#[tokio::test]
async fn service_account_is_forbidden_until_a_role_binding_grants() {
    let srv = TestServer::start().await;
    let token = robot_token(&srv).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(srv.client_with_token(&token));
    let (code, message) = api_error(cms.list(&Default::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "configmaps is forbidden: User \"system:serviceaccount:default:robot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // A binding to a role that does not exist grants nothing, and the reason says why.
    bind(&srv, "early", "Role", "cm-reader-missing").await;
    let (code, message) = api_error(cms.list(&Default::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.ends_with(": RBAC: role.rbac.authorization.k8s.io \"cm-reader-missing\" not found"),
        "{message}"
    );
    create_role(&srv).await;
    bind(&srv, "read-cms", "Role", "cm-reader").await;
    cms.list(&Default::default()).await.unwrap();
    // Only what the role grants: no create, and nothing in another namespace.
    let err = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).0, 403);
    let kube_system: Api<ConfigMap> = Api::namespaced(srv.client_with_token(&token), "kube-system");
    assert_eq!(
        api_error(kube_system.list(&Default::default()).await.unwrap_err()).0,
        403
    );
    // Discovery and version are open to every authenticated user (system:discovery).
    srv.client_with_token(&token).apiserver_version().await.unwrap();
}

#[tokio::test]
async fn role_ref_of_a_binding_cannot_change() {
    let srv = TestServer::start().await;
    create_role(&srv).await;
    let _ = robot_token(&srv).await;
    bind(&srv, "b", "Role", "cm-reader").await;
    let rbs: Api<RoleBinding> = Api::default_namespaced(srv.client());
    let mut b = rbs.get("b").await.unwrap();
    b.role_ref.name = "other".into();
    let (code, message) = api_error(rbs.replace("b", &PostParams::default(), &b).await.unwrap_err());
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"
    );
}

fn can_list_configmaps() -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some("default".into()),
                verb: Some("list".into()),
                resource: Some("configmaps".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn access_reviews_and_impersonation_answer_from_the_same_rules() {
    let srv = TestServer::start().await;
    let token = robot_token(&srv).await;
    // The admin impersonating the service account: can-i says no, then yes after the binding.
    let mut cfg = kube::Config::new(format!("https://127.0.0.1:{}", srv.port).parse().unwrap());
    cfg.root_cert = Some(vec![common::rustls_pki_der(
        &srv.server.as_ref().unwrap().tls.ca_pem,
    )]);
    cfg.auth_info.token = Some(srv.token().into());
    cfg.auth_info.impersonate = Some("system:serviceaccount:default:robot".into());
    let as_robot = kube::Client::try_from(cfg).unwrap();
    let ssar: Api<SelfSubjectAccessReview> = Api::all(as_robot.clone());
    let r = ssar
        .create(&PostParams::default(), &can_list_configmaps())
        .await
        .unwrap();
    assert!(!r.status.unwrap().allowed);
    let cms: Api<ConfigMap> = Api::default_namespaced(as_robot);
    assert_eq!(api_error(cms.list(&Default::default()).await.unwrap_err()).0, 403);
    create_role(&srv).await;
    bind(&srv, "read-cms", "Role", "cm-reader").await;
    let r = ssar
        .create(&PostParams::default(), &can_list_configmaps())
        .await
        .unwrap();
    let status = r.status.unwrap();
    assert!(status.allowed);
    assert_eq!(
        status.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"read-cms/default\" of Role \"cm-reader\" to ServiceAccount \"robot/default\""
        )
    );
    cms.list(&Default::default()).await.unwrap();

    // The service account itself may not impersonate anyone.
    let mut cfg = kube::Config::new(format!("https://127.0.0.1:{}", srv.port).parse().unwrap());
    cfg.root_cert = Some(vec![common::rustls_pki_der(
        &srv.server.as_ref().unwrap().tls.ca_pem,
    )]);
    cfg.auth_info.token = Some(token.clone().into());
    cfg.auth_info.impersonate = Some("jane".into());
    let sneaky: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(cfg).unwrap());
    let (code, message) = api_error(sneaky.list(&Default::default()).await.unwrap_err());
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "users \"jane\" is forbidden: User \"system:serviceaccount:default:robot\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );

    // SubjectAccessReview (by the admin) about the service account.
    let sar: Api<SubjectAccessReview> = Api::all(srv.client());
    let r = sar
        .create(
            &PostParams::default(),
            &SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some("system:serviceaccount:default:robot".into()),
                    resource_attributes: can_list_configmaps().spec.resource_attributes,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(r.status.unwrap().allowed);

    // TokenReview: who the token is.
    let tr: Api<TokenReview> = Api::all(srv.client());
    let r = tr
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token),
                    audiences: None,
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let status = r.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(
        status.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:default:robot")
    );
}

#[tokio::test]
async fn service_account_may_not_grant_what_it_does_not_hold() {
    let srv = TestServer::start().await;
    let token = robot_token(&srv).await;
    // The robot may manage roles and bindings, and read configmaps.
    let roles: Api<Role> = Api::default_namespaced(srv.client());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rbac-manager"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
                           "verbs": ["create", "get", "update"]},
                          {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    bind(&srv, "manage", "Role", "rbac-manager").await;
    let as_robot: Api<Role> = Api::default_namespaced(srv.client_with_token(&token));
    let role = |name: &str, resource: &str| -> Role {
        serde_json::from_value(json!({"metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get"]}]}))
        .unwrap()
    };
    // What it holds it may grant.
    as_robot
        .create(&PostParams::default(), &role("cm-getter", "configmaps"))
        .await
        .unwrap();
    // What it does not hold it may not.
    let (code, message) = api_error(
        as_robot
            .create(&PostParams::default(), &role("secret-getter", "secrets"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "roles.rbac.authorization.k8s.io \"secret-getter\" is forbidden: user \"system:serviceaccount:default:robot\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
    );
    // Nor bind a role whose rules it does not hold (cluster-admin: `edit` is empty here, with no
    // aggregation controller), until it may `bind` that role.
    let rbs: Api<RoleBinding> = Api::default_namespaced(srv.client_with_token(&token));
    let to_view: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "viewers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "jane"}]}))
    .unwrap();
    let (code, message) = api_error(rbs.create(&PostParams::default(), &to_view).await.unwrap_err());
    assert_eq!(code, 403);
    assert!(
        message.starts_with("rolebindings.rbac.authorization.k8s.io \"viewers\" is forbidden: user \"system:serviceaccount:default:robot\""),
        "{message}"
    );
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "admin-binder"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                           "resourceNames": ["cluster-admin"], "verbs": ["bind"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    bind(&srv, "binder", "Role", "admin-binder").await;
    rbs.create(&PostParams::default(), &to_view).await.unwrap();
}
