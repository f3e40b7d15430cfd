//! Service account tokens end to end with the `kube` client: TokenRequest, authenticating with the token
//! (whoami), the token's end when its objects go, and the ServiceAccount admission on pod creation.

mod common;

use base64::Engine;
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use common::TestServer;

fn service_account(name: &str) -> ServiceAccount {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "busybox:1.36"}]);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn token_request(
    expiration: Option<i64>,
    audiences: &[&str],
    bound: Option<BoundObjectReference>,
) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            expiration_seconds: expiration,
            bound_object_ref: bound,
        },
        ..Default::default()
    }
}

fn claims(token: &str) -> Value {
    let body = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .unwrap(),
    )
    .unwrap()
}

async fn whoami(client: kube::Client) -> Result<Value, kube::Error> {
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    let r = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(serde_json::to_value(r.status.unwrap().user_info.unwrap()).unwrap())
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn token_request_issues_a_token_that_authenticates_as_the_service_account() {
    let srv = TestServer::start().await;
    let admin = srv.client();
    let sas: Api<ServiceAccount> = Api::default_namespaced(admin.clone());
    let sa = sas
        .create(&PostParams::default(), &service_account("robot"))
        .await
        .unwrap();

    let tr = sas
        .create_token_request("robot", &PostParams::default(), &token_request(None, &[], None))
        .await
        .unwrap();
    let status = tr.status.unwrap();
    let c = claims(&status.token);
    assert_eq!(c["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(c["sub"], "system:serviceaccount:default:robot");
    assert_eq!(c["aud"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 3600);
    assert_eq!(
        c["kubernetes.io"]["serviceaccount"]["uid"],
        json!(sa.metadata.uid)
    );
    assert!(c["jti"].as_str().is_some_and(|j| !j.is_empty()));
    let expiry = status.expiration_timestamp.0.as_second();
    assert_eq!(expiry, c["exp"].as_i64().unwrap());

    let me = whoami(srv.client_with_token(&status.token)).await.unwrap();
    assert_eq!(me["username"], "system:serviceaccount:default:robot");
    assert_eq!(
        me["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert_eq!(me["uid"], json!(sa.metadata.uid));
    // Without a role the SA may not read configmaps (RBAC; see tests/rbac.rs for the grants).
    let cms: Api<ConfigMap> = Api::default_namespaced(srv.client_with_token(&status.token));
    let err = cms.list(&Default::default()).await.unwrap_err();
    assert_eq!(api_error(err).0, 403);
    // The admin token still works and is still the admin.
    assert_eq!(whoami(admin.clone()).await.unwrap()["username"], "kubeling-admin");

    // A deleted and recreated ServiceAccount (new uid) no longer accepts the old token.
    sas.delete("robot", &DeleteParams::default()).await.unwrap();
    let err = whoami(srv.client_with_token(&status.token)).await.unwrap_err();
    assert_eq!(api_error(err).0, 401);
    sas.create(&PostParams::default(), &service_account("robot"))
        .await
        .unwrap();
    let err = whoami(srv.client_with_token(&status.token)).await.unwrap_err();
    assert_eq!(api_error(err).0, 401);
}

#[tokio::test]
async fn token_request_errors_are_statuses_with_upstream_codes() {
    let srv = TestServer::start().await;
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    sas.create(&PostParams::default(), &service_account("robot"))
        .await
        .unwrap();
    let pp = PostParams::default();

    let e = sas
        .create_token_request("nobody", &pp, &token_request(None, &[], None))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(e),
        (
            404,
            "NotFound".into(),
            "serviceaccounts \"nobody\" not found".into()
        )
    );

    let e = sas
        .create_token_request("robot", &pp, &token_request(Some(599), &[], None))
        .await
        .unwrap_err();
    let (code, reason, message) = api_error(e);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        message.contains("may not specify a duration less than 10 minutes"),
        "{message}"
    );

    let bound = |name: &str, uid: Option<&str>| BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        uid: uid.map(str::to_string),
    };
    let e = sas
        .create_token_request(
            "robot",
            &pp,
            &token_request(None, &[], Some(bound("missing", None))),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_error(e),
        (404, "NotFound".into(), "pods \"missing\" not found".into())
    );

    let pods: Api<Pod> = Api::default_namespaced(srv.client());
    pods.create(&pp, &pod("p", json!({"serviceAccountName": "robot"})))
        .await
        .unwrap();
    let e = sas
        .create_token_request(
            "robot",
            &pp,
            &token_request(None, &[], Some(bound("p", Some("wrong")))),
        )
        .await
        .unwrap_err();
    let (code, reason, message) = api_error(e);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.contains("the UID in the bound object reference (wrong) does not match"),
        "{message}"
    );

    pods.create(&pp, &pod("other", json!({}))).await.unwrap();
    let e = sas
        .create_token_request(
            "robot",
            &pp,
            &token_request(None, &[], Some(bound("other", None))),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 400);

    // Garbage bearer tokens, JWT-shaped or not, are 401.
    for bad in ["nope", "a.b.c", "eyJhbGciOiJFUzI1NiJ9.e30.AAAA"] {
        let e = whoami(srv.client_with_token(bad)).await.unwrap_err();
        assert_eq!(api_error(e).0, 401, "{bad}");
    }
}

#[tokio::test]
async fn pod_bound_token_carries_the_pod_is_extended_for_3607_and_ends_with_the_pod() {
    let srv = TestServer::start().await;
    let pp = PostParams::default();
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    sas.create(&pp, &service_account("robot")).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(srv.client());
    let p = pods
        .create(&pp, &pod("web", json!({"serviceAccountName": "robot"})))
        .await
        .unwrap();
    let bound = BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("web".into()),
        uid: p.metadata.uid.clone(),
    };
    let tr = sas
        .create_token_request("robot", &pp, &token_request(Some(3607), &[], Some(bound)))
        .await
        .unwrap();
    let status = tr.status.unwrap();
    let c = claims(&status.token);
    let iat = c["iat"].as_i64().unwrap();
    assert_eq!(
        c["exp"].as_i64().unwrap() - iat,
        365 * 24 * 3600,
        "extended to a year"
    );
    assert_eq!(c["kubernetes.io"]["warnafter"].as_i64().unwrap() - iat, 3607);
    assert_eq!(c["kubernetes.io"]["pod"]["uid"], json!(p.metadata.uid));
    assert_eq!(
        status.expiration_timestamp.0.as_second() - iat,
        3607,
        "the status keeps the requested expiry"
    );

    let me = whoami(srv.client_with_token(&status.token)).await.unwrap();
    assert_eq!(
        me["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["web"])
    );

    // An unbound pod deletes at once; its token stops working.
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let e = whoami(srv.client_with_token(&status.token)).await.unwrap_err();
    assert_eq!(api_error(e).0, 401);

    // Another audience is issued but does not authenticate here.
    let tr = sas
        .create_token_request("robot", &pp, &token_request(None, &["vault"], None))
        .await
        .unwrap();
    let token = tr.status.unwrap().token;
    assert_eq!(claims(&token)["aud"], "vault");
    let e = whoami(srv.client_with_token(&token)).await.unwrap_err();
    assert_eq!(api_error(e).0, 401);
}

#[tokio::test]
async fn tokens_survive_a_restart() {
    let mut srv = TestServer::start().await;
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    sas.create(&PostParams::default(), &service_account("robot"))
        .await
        .unwrap();
    let token = sas
        .create_token_request("robot", &PostParams::default(), &token_request(None, &[], None))
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    srv.restart().await;
    let me = whoami(srv.client_with_token(&token)).await.unwrap();
    assert_eq!(me["username"], "system:serviceaccount:default:robot");
}

#[tokio::test]
async fn admission_adds_the_token_volume_and_honours_opt_outs() {
    let srv = TestServer::start_with_admission().await;
    let pp = PostParams::default();
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    let pods: Api<Pod> = Api::default_namespaced(srv.client());

    // No `default` ServiceAccount (no controller manager here): Forbidden after the short wait.
    let e = pods.create(&pp, &pod("early", json!({}))).await.unwrap_err();
    assert_eq!(
        api_error(e),
        (
            403,
            "Forbidden".into(),
            "pods \"early\" is forbidden: error looking up service account default/default: serviceaccount \
             \"default\" not found"
                .into()
        )
    );
    let e = pods
        .create(&pp, &pod("named", json!({"serviceAccountName": "ghost"})))
        .await
        .unwrap_err();
    assert_eq!(api_error(e).0, 403);

    let mut default_sa = service_account("default");
    default_sa.image_pull_secrets = Some(vec![k8s_openapi::api::core::v1::LocalObjectReference {
        name: "registry".into(),
    }]);
    sas.create(&pp, &default_sa).await.unwrap();
    let p = pods
        .create(
            &pp,
            &pod(
                "web",
                json!({"initContainers": [{"name": "init", "image": "busybox:1.36"}],
                       "containers": [{"name": "a", "image": "busybox:1.36"}, {"name": "b", "image": "busybox:1.36"}]}),
            ),
        )
        .await
        .unwrap();
    let spec = serde_json::to_value(p.spec.unwrap()).unwrap();
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry"}]));
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(
        name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5,
        "{name}"
    );
    assert_eq!(volume["projected"]["defaultMode"], 420);
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3607
    );
    assert_eq!(
        volume["projected"]["sources"][1]["configMap"]["name"],
        "kube-root-ca.crt"
    );
    assert_eq!(
        volume["projected"]["sources"][2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    for c in ["/initContainers/0", "/containers/0", "/containers/1"] {
        let mounts = spec.pointer(&format!("{c}/volumeMounts")).unwrap();
        assert_eq!(
            mounts,
            &json!([{"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]),
            "{c}"
        );
    }

    // Opt-out on the pod, then on the ServiceAccount.
    let p = pods
        .create(&pp, &pod("quiet", json!({"automountServiceAccountToken": false})))
        .await
        .unwrap();
    assert!(p.spec.unwrap().volumes.is_none_or(|v| v.is_empty()));
    let mut shy = service_account("shy");
    shy.automount_service_account_token = Some(false);
    sas.create(&pp, &shy).await.unwrap();
    let p = pods
        .create(&pp, &pod("shy-pod", json!({"serviceAccountName": "shy"})))
        .await
        .unwrap();
    assert!(p.spec.unwrap().volumes.is_none_or(|v| v.is_empty()));
    let p = pods
        .create(
            &pp,
            &pod(
                "shy-but-asks",
                json!({"serviceAccountName": "shy", "automountServiceAccountToken": true}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().volumes.unwrap().len(), 1);

    // A mirror pod skips the mutation (and may not name a service account).
    let mut mirror = pod("static-node1", json!({}));
    mirror.metadata.annotations =
        Some([("kubernetes.io/config.mirror".to_string(), "hash".to_string())].into());
    let p = pods.create(&pp, &mirror).await.unwrap();
    let spec = p.spec.unwrap();
    assert!(spec.volumes.is_none_or(|v| v.is_empty()));
    let mut mirror_sa = pod("static2-node1", json!({"serviceAccountName": "default"}));
    mirror_sa.metadata.annotations = mirror.metadata.annotations.clone();
    let e = pods.create(&pp, &mirror_sa).await.unwrap_err();
    let (code, _, message) = api_error(e);
    assert_eq!(code, 403);
    assert!(
        message.contains("a mirror pod may not reference service accounts"),
        "{message}"
    );
}

/// `kubectl create token` (protobuf TokenRequest) and `kubectl auth whoami` with the token, when kubectl
/// is installed (the end-to-end kubectl suite lives in the workspace's `tests/`).
#[tokio::test]
async fn kubectl_create_token_then_whoami_with_it() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("kubectl not found; skipped");
        return;
    }
    let srv = TestServer::start().await;
    let sas: Api<ServiceAccount> = Api::default_namespaced(srv.client());
    sas.create(&PostParams::default(), &service_account("robot"))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(srv.client());
    pods.create(
        &PostParams::default(),
        &pod("p", json!({"serviceAccountName": "robot"})),
    )
    .await
    .unwrap();
    let server = srv.server.as_ref().unwrap();
    let kubeconfig = srv.dir.path().join("kubeconfig");
    let ca = base64::engine::general_purpose::STANDARD.encode(&server.tls.ca_pem);
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:{}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: k\n  \
             context: {{cluster: k, user: u, namespace: default}}\ncurrent-context: k\n",
            srv.port, server.tls.token
        ),
    )
    .unwrap();
    let kubectl = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let kubeconfig = kubeconfig.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(&args)
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let out = kubectl(&[
        "create",
        "token",
        "robot",
        "--duration",
        "10m",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "p",
    ])
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let c = claims(&token);
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 600);
    assert_eq!(c["kubernetes.io"]["pod"]["name"], "p");
    let out = kubectl(&["auth", "whoami", "--token", &token, "-o", "json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let review: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        review["status"]["userInfo"]["username"],
        "system:serviceaccount:default:robot"
    );
    let out = kubectl(&["create", "token", "robot", "--duration", "5m"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("may not specify a duration less than 10 minutes"),
        "{stderr}"
    );
    let out = kubectl(&["api-resources", "--api-group=", "-o", "name"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("serviceaccounts"));
}
