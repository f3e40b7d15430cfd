//! The policy kinds through the real `kube` client, with no controller manager (budget and quota
//! statuses are written by hand, as their controllers would): `pods/eviction` against a
//! PodDisruptionBudget, quota admission against a ResourceQuota's status, the ReplicationController
//! `scale` subresource.

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ReplicationController, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, PostParams};
use serde_json::{Value, json};

use common::TestServer;

async fn set_status<K>(api: &Api<K>, name: &str, status: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut v = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
    v["status"] = status;
    let obj: K = serde_json::from_value(v).unwrap();
    api.replace_status(name, &PostParams::default(), &obj)
        .await
        .unwrap();
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn eviction_spends_the_budget_and_records_the_pod() {
    let s = TestServer::start().await;
    // 429s are what this test expects: the client must not retry them.
    let client = s.client_without_retries();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        set_status(
            &pods,
            name,
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();

    // No status yet: the budget is still being processed.
    let e = api_error(pods.evict("a", &EvictParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        e.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );

    let status = |allowed: i64| {
        json!({"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1,
               "expectedPods": 2})
    };
    set_status(&pdbs, "web", status(0)).await;
    let e = api_error(pods.evict("a", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 429);

    set_status(&pdbs, "web", status(1)).await;
    // A dry run (`?dryRun=All`; kube-rs sends its deleteOptions under a key the server ignores, as a
    // real one would) changes nothing.
    let dry = EvictParams {
        post_options: PostParams {
            dry_run: true,
            ..Default::default()
        },
        ..Default::default()
    };
    pods.evict("a", &dry).await.unwrap();
    assert_eq!(
        pdbs.get("web").await.unwrap().status.unwrap().disruptions_allowed,
        1
    );
    assert!(pods.get_opt("a").await.unwrap().is_some());

    pods.evict("a", &EvictParams::default()).await.unwrap();
    let st = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(st.disruptions_allowed, 0);
    assert!(st.disrupted_pods.unwrap().contains_key("a"));
    let cond = &st.conditions.unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.reason.as_str()),
        ("DisruptionAllowed", "InsufficientPods")
    );
    assert!(
        pods.get_opt("a").await.unwrap().is_none(),
        "an unscheduled pod goes at once"
    );

    // The budget is spent: the other pod stays.
    let e = api_error(pods.evict("b", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 429);

    // Two budgets over one pod: upstream's 500 Status.
    let mut other = pdb.clone();
    other.metadata.name = Some("other".into());
    pdbs.create(&PostParams::default(), &other).await.unwrap();
    let e = api_error(pods.evict("b", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn quota_admission_charges_and_refuses_from_the_status() {
    let s = TestServer::start().await;
    let client = s.client();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let q: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"hard": {"configmaps": "1"}}}))
            .unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();
    let cm =
        |name: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": name}})).unwrap() };

    // Until the controller has counted, nothing it limits can be created.
    set_status(&quotas, "q", json!({"hard": {"configmaps": "1"}})).await;
    let e = api_error(cms.create(&PostParams::default(), &cm("a")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "configmaps \"a\" is forbidden: status unknown for quota: q, resources: configmaps"
    );

    set_status(
        &quotas,
        "q",
        json!({"hard": {"configmaps": "1"}, "used": {"configmaps": "0"}}),
    )
    .await;
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let used = quotas.get("q").await.unwrap().status.unwrap().used.unwrap();
    assert_eq!(used["configmaps"].0, "1", "the create is charged");
    let e = api_error(cms.create(&PostParams::default(), &cm("b")).await.unwrap_err());
    assert_eq!(
        e.message,
        "configmaps \"b\" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=1, limited: configmaps=1"
    );
}

#[tokio::test]
async fn replication_controllers_default_and_scale() {
    let s = TestServer::start().await;
    let rcs: Api<ReplicationController> = Api::namespaced(s.client(), "default");
    let rc: ReplicationController = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"template": {"metadata": {"labels": {"app": "web", "tier": "x"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    let created = rcs.create(&PostParams::default(), &rc).await.unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        serde_json::to_value(spec.selector).unwrap(),
        json!({"app": "web", "tier": "x"})
    );
    assert_eq!(created.metadata.generation, Some(1));
    let scale = rcs.get_scale("web").await.unwrap();
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web,tier=x"));
    let mut scale = rcs.get_scale("web").await.unwrap();
    scale.spec.as_mut().unwrap().replicas = Some(4);
    rcs.replace_scale("web", &PostParams::default(), &scale)
        .await
        .unwrap();
    let rc = rcs.get("web").await.unwrap();
    assert_eq!(
        (rc.spec.unwrap().replicas, rc.metadata.generation),
        (Some(4), Some(2))
    );
}
