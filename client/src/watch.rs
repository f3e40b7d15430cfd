//! The list-and-watch loop every component's caches and event streams are fed by (client-go's reflector),
//! compiled once: objects arrive as JSON text and only decoding them is per kind.
//!
//! kube's `runtime::watcher` is generic over the object type: each kind's copy of it (its state machine,
//! and its watch events decoded through serde's buffered content, which compiles every watched type a
//! second time) was about a fifth of each component's compiled code. Here one loop, [`run`], serves two
//! kinds of sink: an [`Informer`](crate::informer::Informer)'s cache, and an [`Events`] stream shaped as
//! kube's watcher events, for the consumers that keep their own state (the node agent's pod workers, the
//! garbage collector's graph, the test runner's assertions).

use std::collections::HashSet;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::io::AsyncBufReadExt;
use futures_util::{Stream, StreamExt};
use kube::Resource;
use kube::api::{ListParams, WatchParams};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Which objects of a kind are listed and watched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// A label selector (`app=web`).
    pub labels: Option<String>,
    /// A field selector (`spec.nodeName=n1`).
    pub fields: Option<String>,
}

impl Selector {
    /// Every object.
    pub fn all() -> Selector {
        Selector::default()
    }

    /// The objects `selector` selects by field.
    pub fn fields(mut self, selector: &str) -> Selector {
        self.fields = Some(selector.to_string());
        self
    }

    /// The objects `selector` selects by label.
    pub fn labels(mut self, selector: &str) -> Selector {
        self.labels = Some(selector.to_string());
        self
    }
}

/// What one loop lists and watches.
#[derive(Clone, Debug)]
pub struct Target {
    /// The collection's path (`/api/v1/pods`, `/api/v1/namespaces/ns/configmaps`).
    pub path: String,
    /// Which of its objects.
    pub selector: Selector,
    /// Ask for `PartialObjectMetadata` (metadata only) instead of whole objects.
    pub metadata_only: bool,
}

impl Target {
    /// The objects of a built-in kind in every namespace.
    pub fn of<K: Resource<DynamicType = ()>>(selector: Selector) -> Target {
        Target::at(K::url_path(&(), None), selector)
    }

    /// The objects under `path` (e.g. an `Api`'s `resource_url()`).
    pub fn at(path: impl Into<String>, selector: Selector) -> Target {
        Target {
            path: path.into(),
            selector,
            metadata_only: false,
        }
    }

    /// The same target, as `PartialObjectMetadata`.
    pub fn metadata_only(mut self) -> Target {
        self.metadata_only = true;
        self
    }
}

/// Where the loop puts what it reads.
pub(crate) trait RawSink: Send + Sync {
    /// A list begins (the first, or after a 410 or a failed list).
    fn list_started(&self) {}
    /// Decode one object of a list (`listing`) or a watch and take it; returns its key and resourceVersion.
    fn apply_json(&self, json: &str, listing: bool) -> Result<(String, Option<String>), serde_json::Error>;
    /// Decode one deleted object and drop it; returns its resourceVersion.
    fn delete_json(&self, json: &str) -> Result<Option<String>, serde_json::Error>;
    /// The list is complete: `seen` holds the keys it had.
    fn list_done(&self, seen: HashSet<String>);
    /// The first list failed because the server does not serve the kind (404).
    fn not_served(&self) {}
    /// A list or a watch failed (logged already); the loop retries after a backoff.
    fn failed(&self, _error: kube::Error) {}
    /// Whether a first list has been completed.
    fn synced(&self) -> bool;
    /// The kind, for logs.
    fn kind(&self) -> String;
}

/// client-go's watch backoff, as kube's `DefaultBackoff`: 0.8 s doubling to 30 s, plus a random part of
/// up to as much again (jitter, so many clients refused together do not come back together).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    last: Option<Duration>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(800);
    const MAX: Duration = Duration::from_secs(30);

    /// The next delay; `jitter` is in [0, 1).
    pub(crate) fn next(&mut self, jitter: f64) -> Duration {
        let base = match self.last {
            None => Self::FIRST,
            Some(d) => (d * 2).min(Self::MAX),
        };
        self.last = Some(base);
        base + base.mul_f64(jitter.clamp(0.0, 1.0))
    }

    /// Progress was made: the next failure starts over.
    pub(crate) fn reset(&mut self) {
        self.last = None;
    }
}

/// Why a list or a watch ended.
#[derive(Debug)]
enum WatchEnd {
    /// The resourceVersion is too old (410): list again.
    Gone,
    /// Anything else: try again after a backoff, from the same resourceVersion.
    Failed(kube::Error),
}

impl From<kube::Error> for WatchEnd {
    fn from(e: kube::Error) -> WatchEnd {
        match e {
            kube::Error::Api(s) if s.code == 410 => WatchEnd::Gone,
            e => WatchEnd::Failed(e),
        }
    }
}

impl From<serde_json::Error> for WatchEnd {
    fn from(e: serde_json::Error) -> WatchEnd {
        WatchEnd::Failed(kube::Error::SerdeError(e))
    }
}

/// List, then watch from the list's resourceVersion, as client-go's reflector: a watch that ends (its
/// timeout, a dropped connection, nothing read for 295 s) is resumed from the last resourceVersion seen (an
/// object's or a bookmark's, also after a failure), a 410 lists again, and a failure, a 410 or a watch that
/// ended at once with nothing in it waits the [`Backoff`] first, so a server that keeps refusing is never
/// asked in a loop.
pub(crate) async fn run(sink: &dyn RawSink, client: kube::Client, target: Target, cancel: CancellationToken) {
    let mut backoff = Backoff::default();
    // None: list (first, or after a 410).
    let mut version: Option<String> = None;
    loop {
        let outcome = if let Some(v) = version.as_mut() {
            tokio::select! {
                _ = cancel.cancelled() => return,
                o = watch(sink, &client, &target, v) => o,
            }
        } else {
            let listed = tokio::select! {
                _ = cancel.cancelled() => return,
                o = list(sink, &client, &target) => o,
            };
            listed.map(|v| {
                version = Some(v);
                Progress::Some
            })
        };
        match outcome {
            Ok(Progress::Some) => {
                backoff.reset();
                continue;
            }
            Ok(Progress::None) => {}
            Err(WatchEnd::Gone) => version = None,
            Err(WatchEnd::Failed(e)) => {
                let listing = version.is_none();
                // A kind this server does not serve counts as listed (empty) for a cache, so one missing
                // kind does not hold every controller's workers back; the list is retried all the same.
                if listing
                    && !sink.synced()
                    && let kube::Error::Api(s) = &e
                    && s.code == 404
                {
                    tracing::warn!(kind = %sink.kind(), "the API server does not serve this kind");
                    sink.not_served();
                }
                if !sink.synced() {
                    // Every controller's workers wait for every first list: say why this one is late.
                    tracing::warn!(kind = %sink.kind(), error = %e, "listing failed; retrying")
                } else {
                    tracing::debug!(kind = %sink.kind(), error = %e, "watch failed; retrying")
                }
                sink.failed(e);
            }
        }
        let delay = backoff.next(rand::random::<f64>());
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Whether a list or a watch got anywhere: a watch that ended at once with nothing in it did not, and the
/// next one waits for the backoff (client-go's "very short watch").
enum Progress {
    Some,
    None,
}

/// One page of a list: its items left as JSON text until the kind decodes them.
#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Vec<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// One watch event, its object left as JSON text.
#[derive(serde::Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

/// What a bookmark's or an error's object says.
#[derive(serde::Deserialize, Default)]
struct Small {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// Lists every object (pages of 500) into the sink; returns the list's resourceVersion.
async fn list(sink: &dyn RawSink, client: &kube::Client, target: &Target) -> Result<String, WatchEnd> {
    let mut seen = HashSet::new();
    let mut continue_token: Option<String> = None;
    sink.list_started();
    loop {
        let params = ListParams {
            label_selector: target.selector.labels.clone(),
            field_selector: target.selector.fields.clone(),
            limit: Some(500),
            continue_token: continue_token.take(),
            ..ListParams::default()
        };
        let request = kube::core::Request::new(&target.path);
        let request = if target.metadata_only {
            request.list_metadata(&params)
        } else {
            request.list(&params)
        }
        .map_err(|e| WatchEnd::Failed(kube::Error::BuildRequest(e)))?;
        let text = client.request_text(request).await?;
        let page: RawList<'_> = serde_json::from_str(&text)?;
        for item in page.items {
            match sink.apply_json(item.get(), true) {
                Ok((key, _)) => {
                    seen.insert(key);
                }
                // One object this kind cannot hold must not stop the rest (kube's watcher skipped it too).
                Err(e) => skip(sink, item.get(), &e),
            }
        }
        match page.metadata.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => continue_token = Some(c),
            None => {
                sink.list_done(seen);
                return Ok(page.metadata.resource_version.unwrap_or_default());
            }
        }
    }
}

/// An object that does not decode as its kind: logged and left out. A list or a watch goes on without it.
fn skip(sink: &dyn RawSink, json: &str, e: &serde_json::Error) {
    let meta = serde_json::from_str::<Small>(json).unwrap_or_default().metadata;
    tracing::warn!(kind = %sink.kind(), name = ?meta.name, namespace = ?meta.namespace, error = %e,
        "an object that does not decode as its kind is left out");
}

/// How long a watch may stay silent before it is taken as dead and resumed: the server's timeout (290 s)
/// plus 5 s, as kube's watcher. The API server also sends an empty line every 3 s while idle.
const WATCH_SILENCE: Duration = Duration::from_secs(295);

/// Watches from `version` until the server ends the watch (its timeout, or a dropped connection), keeping
/// `version` at the last resourceVersion seen, so a failure resumes from there too.
async fn watch(
    sink: &dyn RawSink,
    client: &kube::Client,
    target: &Target,
    version: &mut String,
) -> Result<Progress, WatchEnd> {
    let params = WatchParams {
        label_selector: target.selector.labels.clone(),
        field_selector: target.selector.fields.clone(),
        timeout: Some(290),
        bookmarks: true,
        send_initial_events: false,
    };
    let request = kube::core::Request::new(&target.path);
    let mut request = if target.metadata_only {
        request.watch_metadata(&params, version)
    } else {
        request.watch(&params, version)
    }
    .map_err(|e| WatchEnd::Failed(kube::Error::BuildRequest(e)))?;
    request.headers_mut().insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    let started = tokio::time::Instant::now();
    let body = client.request_stream(request).await?;
    let mut lines = body.lines();
    let mut progress = Progress::None;
    loop {
        let line = match tokio::time::timeout(WATCH_SILENCE, lines.next()).await {
            // Silent too long: taken as a dead connection, resumed.
            Err(_) | Ok(None) => break,
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(e))) => return Err(WatchEnd::Failed(kube::Error::ReadEvents(e))),
        };
        if line.trim().is_empty() {
            continue;
        }
        // A line that is not an event (a torn last line when the connection drops) is skipped, as kube
        // does; the watch is resumed from the last version seen.
        let event: RawEvent<'_> = match serde_json::from_str(&line) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(kind = %sink.kind(), error = %e, "a watch line that is not an event");
                continue;
            }
        };
        let json = event.object.get();
        let seen = match event.kind.as_ref() {
            "ADDED" | "MODIFIED" | "DELETED" => {
                let decoded = if event.kind == "DELETED" {
                    sink.delete_json(json)
                } else {
                    sink.apply_json(json, false).map(|(_, v)| v)
                };
                match decoded {
                    Ok(v) => v,
                    Err(e) => {
                        skip(sink, json, &e);
                        serde_json::from_str::<Small>(json)
                            .ok()
                            .and_then(|o| o.metadata.resource_version)
                    }
                }
            }
            "BOOKMARK" => serde_json::from_str::<Small>(json)
                .ok()
                .and_then(|o| o.metadata.resource_version),
            "ERROR" => {
                let status: Small = serde_json::from_str(json).unwrap_or_default();
                return Err(if status.code == 410 {
                    WatchEnd::Gone
                } else {
                    WatchEnd::Failed(kube::Error::Service(
                        format!("watch error {}: {}", status.code, status.message).into(),
                    ))
                });
            }
            _ => None,
        };
        progress = Progress::Some;
        if let Some(v) = seen.filter(|v| !v.is_empty()) {
            *version = v;
        }
    }
    // A watch that ran its course without events (the server's timeout) got somewhere all the same.
    if started.elapsed() >= Duration::from_secs(1) {
        progress = Progress::Some;
    }
    Ok(progress)
}

/// One change, as kube's `watcher::Event`: a list is `Init`, one `InitApply` per object, `InitDone`; then
/// the watch's `Apply` and `Delete`. A relist (after a 410 or a failed list) begins with `Init` again, and
/// the consumer replaces what it holds with what the relist had.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    /// A list begins.
    Init,
    /// An object of the list.
    InitApply(K),
    /// The list is complete.
    InitDone,
    /// An object added or changed.
    Apply(K),
    /// An object deleted (its last state).
    Delete(K),
}

/// The events of one [`Target`], from a task that lists and watches until this stream is dropped. A
/// failure is an `Err` item (the loop retries by itself); an object that does not decode as `K` is
/// logged and left out.
pub struct Events<K> {
    rx: mpsc::UnboundedReceiver<Result<Event<K>, kube::Error>>,
    _stop: DropGuard,
}

/// Lists and watches `target` as `K`s (see [`Events`]).
pub fn events<K>(client: kube::Client, target: Target) -> Events<K>
where
    K: Resource + DeserializeOwned + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let sink = Channel::<K> {
        kind: target.path.rsplit('/').next().unwrap_or_default().to_string(),
        tx,
        stop: stop.clone(),
        synced: std::sync::atomic::AtomicBool::new(false),
    };
    let cancel = stop.clone();
    tokio::spawn(async move { run(&sink, client, target, cancel).await });
    Events {
        rx,
        _stop: stop.drop_guard(),
    }
}

impl<K> Stream for Events<K> {
    type Item = Result<Event<K>, kube::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// The sink behind [`Events`]: each change is sent on; a closed stream stops the loop.
struct Channel<K> {
    kind: String,
    tx: mpsc::UnboundedSender<Result<Event<K>, kube::Error>>,
    stop: CancellationToken,
    synced: std::sync::atomic::AtomicBool,
}

impl<K> Channel<K> {
    fn send(&self, item: Result<Event<K>, kube::Error>) {
        if self.tx.send(item).is_err() {
            self.stop.cancel();
        }
    }
}

/// `namespace/name` of an object as JSON text's metadata says.
fn key_and_version<K: Resource>(obj: &K) -> (String, Option<String>) {
    let meta = obj.meta();
    (
        crate::informer::key(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or("")),
        meta.resource_version.clone(),
    )
}

impl<K> RawSink for Channel<K>
where
    K: Resource + DeserializeOwned + Send + 'static,
{
    fn list_started(&self) {
        self.send(Ok(Event::Init));
    }

    fn apply_json(&self, json: &str, listing: bool) -> Result<(String, Option<String>), serde_json::Error> {
        let obj: K = serde_json::from_str(json)?;
        let seen = key_and_version(&obj);
        self.send(Ok(if listing {
            Event::InitApply(obj)
        } else {
            Event::Apply(obj)
        }));
        Ok(seen)
    }

    fn delete_json(&self, json: &str) -> Result<Option<String>, serde_json::Error> {
        let obj: K = serde_json::from_str(json)?;
        let (_, version) = key_and_version(&obj);
        self.send(Ok(Event::Delete(obj)));
        Ok(version)
    }

    fn list_done(&self, _seen: HashSet<String>) {
        self.synced.store(true, std::sync::atomic::Ordering::Relaxed);
        self.send(Ok(Event::InitDone));
    }

    fn failed(&self, error: kube::Error) {
        self.send(Err(error));
    }

    fn synced(&self) -> bool {
        self.synced.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn kind(&self) -> String {
        self.kind.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{
        cm, error_event, event, fake_logging_closes, fake_with_status, list, param, undecodable_cm, wait_for,
    };
    use k8s_openapi::api::core::v1::ConfigMap;

    /// "what name resourceVersion" for each event.
    fn describe(e: &Result<Event<ConfigMap>, kube::Error>) -> String {
        let obj = |what: &str, o: &ConfigMap| {
            format!(
                "{what} {} {}",
                o.metadata.name.as_deref().unwrap_or(""),
                o.metadata.resource_version.as_deref().unwrap_or("")
            )
        };
        match e {
            Ok(Event::Init) => "init".into(),
            Ok(Event::InitApply(o)) => obj("listed", o),
            Ok(Event::InitDone) => "listed all".into(),
            Ok(Event::Apply(o)) => obj("applied", o),
            Ok(Event::Delete(o)) => obj("deleted", o),
            Err(e) => format!("error {e}"),
        }
    }

    /// The first `n` events of `stream`, described; 10 s at most.
    async fn take(stream: &mut Events<ConfigMap>, n: usize) -> Vec<String> {
        let mut seen = Vec::new();
        while seen.len() < n {
            let next = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .unwrap_or_else(|_| panic!("so far: {seen:?}"))
                .expect("the stream goes on");
            seen.push(describe(&next));
        }
        seen
    }

    #[tokio::test]
    async fn events_list_then_watch_relist_after_410_and_report_failures() {
        let script = vec![
            (200, list(&[cm("a", "9"), cm("b", "10")], "10")),
            // A change, an object that is no ConfigMap (left out), a delete, then a failure.
            (
                200,
                event("MODIFIED", cm("a", "11"))
                    + &event("ADDED", undecodable_cm())
                    + &event("DELETED", cm("b", "13"))
                    + &error_event(500, "boom"),
            ),
            // Resumed from 13: too old, so listed again; the relist is a whole new list.
            (
                410,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": 410, "reason": "Expired", "message": "too old"})
                .to_string(),
            ),
            (200, list(&[cm("c", "20")], "20")),
        ];
        let (client, seen) = fake_with_status(script);
        let mut stream = events::<ConfigMap>(
            client,
            Target::at(
                "/api/v1/namespaces/ns/configmaps",
                Selector::all().labels("app=web"),
            ),
        );
        assert_eq!(
            take(&mut stream, 10).await,
            [
                "init",
                "listed a 9",
                "listed b 10",
                "listed all",
                "applied a 11",
                "deleted b 13",
                "error ServiceError: watch error 500: boom",
                "init",
                "listed c 20",
                "listed all",
            ]
        );
        wait_for(&seen, 5).await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[0].split('?').next(),
            Some("/api/v1/namespaces/ns/configmaps")
        );
        assert_eq!(param(&seen[0], "labelSelector").as_deref(), Some("app=web"));
        assert_eq!(
            param(&seen[2], "resourceVersion").as_deref(),
            Some("13"),
            "{seen:?}"
        );
        assert_eq!(
            param(&seen[3], "watch"),
            None,
            "listed again after the 410: {seen:?}"
        );
        assert_eq!(
            param(&seen[4], "resourceVersion").as_deref(),
            Some("20"),
            "{seen:?}"
        );
    }

    #[tokio::test]
    async fn a_dropped_event_stream_stops_its_requests() {
        let (client, seen, closed) = fake_logging_closes(vec![(200, list(&[], "5"))]);
        let mut stream = events::<ConfigMap>(client, Target::of::<ConfigMap>(Selector::all()));
        assert_eq!(take(&mut stream, 2).await, ["init", "listed all"]);
        // The watch after the list is open (and silent): dropping the stream closes it.
        wait_for(&seen, 2).await;
        assert!(closed.lock().unwrap().is_empty());
        drop(stream);
        wait_for(&closed, 1).await;
        let (seen, closed) = (seen.lock().unwrap().clone(), closed.lock().unwrap().clone());
        assert_eq!(param(&closed[0], "watch").as_deref(), Some("true"));
        assert_eq!(
            seen,
            [seen[0].clone(), closed[0].clone()],
            "no request after the drop"
        );
    }

    #[test]
    fn backoff_doubles_from_800_ms_to_30_s_with_up_to_as_much_again_and_starts_over_after_progress() {
        let mut b = Backoff::default();
        let no_jitter: Vec<u64> = (0..8).map(|_| b.next(0.0).as_millis() as u64).collect();
        assert_eq!(no_jitter, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        b.reset();
        assert_eq!(b.next(0.5), Duration::from_millis(1200));
        assert_eq!(b.next(0.999), Duration::from_micros(3_198_400));
        // Out-of-range jitter is clamped.
        assert_eq!(b.next(7.0), Duration::from_millis(6400));
    }

    #[test]
    fn selectors_and_targets() {
        let s = Selector::all().fields("spec.nodeName=n1").labels("app=web");
        assert_eq!(s.fields.as_deref(), Some("spec.nodeName=n1"));
        assert_eq!(s.labels.as_deref(), Some("app=web"));
        let t = Target::of::<k8s_openapi::api::core::v1::Pod>(Selector::all());
        assert_eq!(t.path, "/api/v1/pods");
        assert!(!t.metadata_only);
        assert!(
            Target::at("/apis/apps/v1/deployments", Selector::all())
                .metadata_only()
                .metadata_only
        );
    }
}
