//! The Rust `kube` crate against the in-process API server: typed CRUD, watcher and reflector semantics,
//! restart recovery, and Status errors.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use common::TestServer;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})).unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}))
    .unwrap()
}

const WAIT: Duration = Duration::from_secs(20);

/// Wait (with a deadline) until the reflector store satisfies `cond`.
async fn until<K: kube::Resource + Clone + 'static>(
    store: &reflector::Store<K>,
    cond: impl Fn(&reflector::Store<K>) -> bool,
) where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond(store) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached before the deadline"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn watcher_reaches_init_done_and_sees_every_later_change() {
    let srv = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .unwrap();

    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen_init_done = false;
    let mut initial = Vec::new();
    while !seen_init_done {
        match tokio::time::timeout(WAIT, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => seen_init_done = true,
            _ => {}
        }
    }
    assert!(initial.contains(&"before".to_string()), "{initial:?}");

    api.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    api.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("after", &DeleteParams::default()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        match tokio::time::timeout(WAIT, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Apply(o) => got.push(format!("apply {}", o.data.unwrap()["k"])),
            watcher::Event::Delete(o) => got.push(format!("delete {}", o.metadata.name.unwrap())),
            _ => {}
        }
    }
    assert_eq!(got, vec!["apply v", "apply 2", "delete after"]);
}

#[tokio::test]
async fn reflector_recovers_after_a_restart_of_the_server() {
    let mut srv = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &cm("one", json!({})))
        .await
        .unwrap();
    let (store, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().timeout(2)),
    )
    .default_backoff()
    .applied_objects();
    let task = tokio::spawn(async move {
        futures_util::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    tokio::time::timeout(WAIT, store.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    until(&store, |s| s.state().len() == 1).await;

    srv.restart().await;
    // The same client: it must reconnect and resume (or relist) without help. A pooled connection to the old
    // process may fail once, as it would for any client across a restart; retry that create until a deadline.
    let deadline = tokio::time::Instant::now() + WAIT;
    while let Err(e) = api.create(&PostParams::default(), &cm("two", json!({}))).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "create after restart kept failing: {e}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until(&store, |s| s.state().len() == 2).await;
    task.abort();
}

#[tokio::test]
async fn objects_survive_a_restart_and_resource_versions_keep_rising() {
    let mut srv = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let a = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv_a: u64 = a.metadata.resource_version.unwrap().parse().unwrap();
    srv.restart().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    assert!(api.get("a").await.is_ok());
    let b = api
        .create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    let rv_b: u64 = b.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv_b > rv_a, "{rv_b} <= {rv_a}");
}

#[tokio::test]
async fn streaming_list_watcher_gets_the_initial_events_end_bookmark() {
    let srv = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    let (store, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().streaming_lists()),
    );
    let task = tokio::spawn(async move {
        futures_util::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    tokio::time::timeout(WAIT, store.wait_until_ready())
        .await
        .expect("never ready")
        .unwrap();
    assert_eq!(store.state().len(), 1);
    task.abort();
}

#[tokio::test]
async fn label_selector_watch_reports_objects_entering_and_leaving_as_added_and_deleted() {
    let srv = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("m", json!({"app": "a"})))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let wp = WatchParams::default().labels("app=b");
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    let relabel = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"app": v}}}));
    api.patch("m", &PatchParams::default(), &relabel("b"))
        .await
        .unwrap();
    api.patch("m", &PatchParams::default(), &relabel("a"))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            _ => {}
        }
    }
    assert_eq!(kinds, vec!["ADDED", "DELETED"]);
}

#[tokio::test]
async fn watch_from_a_revision_older_than_the_history_gets_an_in_stream_410() {
    let srv = TestServer::start_with(apiserver::watch::HubConfig {
        history: 3,
        watcher_buffer: 64,
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    for i in 0..6 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), json!({})))
            .await
            .unwrap();
    }
    let mut stream = api.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match tokio::time::timeout(WAIT, stream.next()).await.unwrap().unwrap() {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
        }
        Ok(WatchEvent::Error(s)) => assert_eq!(s.code, 410),
        other => panic!("expected a 410 event, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_carry_kind_and_api_version_and_timeout_ends_the_stream() {
    let srv = TestServer::start().await;
    let api: Api<Pod> = Api::namespaced(srv.client(), "default");
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(1);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    let mut bookmarks = 0;
    while let Some(ev) = tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
        if let WatchEvent::Bookmark(b) = ev.unwrap() {
            assert_eq!(b.types.kind, "Pod");
            assert_eq!(b.types.api_version, "v1");
            bookmarks += 1;
        }
    }
    assert_eq!(
        bookmarks, 1,
        "one bookmark just before the timeout closes the stream"
    );
}

#[tokio::test]
async fn typed_errors_come_back_as_status_with_reason() {
    let srv = TestServer::start().await;
    let api: Api<Pod> = Api::namespaced(srv.client(), "default");
    match api.get("missing").await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("{other:?}"),
    }
    api.create(&PostParams::default(), &pod("p")).await.unwrap();
    match api.create(&PostParams::default(), &pod("p")).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("{other:?}"),
    }
    let mut stale = api.get("p").await.unwrap();
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    stale.metadata.labels = Some([("c".to_string(), "d".to_string())].into());
    match api.replace("p", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_closed_watch_connection_unregisters_its_watcher() {
    let srv = TestServer::start().await;
    let api: Api<Pod> = Api::namespaced(srv.client(), "default");
    let hub = srv.server.as_ref().unwrap().storage().hub().clone();
    let before = hub.watchers();
    let stream = api.watch(&WatchParams::default(), "0").await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while hub.watchers() == before {
        assert!(tokio::time::Instant::now() < deadline, "watcher never registered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(stream);
    while hub.watchers() != before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watcher never unregistered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
