//! A fake API server for the watch loop's tests: scripted answers, recorded requests.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Full, StreamBody};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Lines logged by the fake server (requests seen, or closed).
pub(crate) type Log = Arc<Mutex<Vec<String>>>;

pub(crate) fn cm(name: &str, rv: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
}

pub(crate) fn list(items: &[serde_json::Value], rv: &str) -> String {
    serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv}, "items": items})
    .to_string()
}

pub(crate) fn event(kind: &str, object: serde_json::Value) -> String {
    format!("{}\n", serde_json::json!({"type": kind, "object": object}))
}

/// An ERROR watch event carrying a Status of `code`.
pub(crate) fn error_event(code: u16, message: &str) -> String {
    event(
        "ERROR",
        serde_json::json!({"kind": "Status", "code": code, "message": message}),
    )
}

/// A ConfigMap named "bad" at resourceVersion 12 whose `data` is a number: it does not decode.
pub(crate) fn undecodable_cm() -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "12"}, "data": 5})
}

/// A fake API server answering each request with the next scripted body (the last one stays open), and
/// recording each request's path and query.
pub(crate) fn fake(script: Vec<String>) -> (kube::Client, Log) {
    fake_with_status(script.into_iter().map(|b| (200, b)).collect())
}

/// [`fake`] with a status code for each answer.
pub(crate) fn fake_with_status(script: Vec<(u16, String)>) -> (kube::Client, Log) {
    let (client, seen, _closed) = fake_logging_closes(script);
    (client, seen)
}

/// An answer that never sends anything, and logs its request when the client drops it.
struct Silent {
    uri: String,
    closed: Arc<Mutex<Vec<String>>>,
}

impl futures_util::Stream for Silent {
    type Item = Result<http_body::Frame<Bytes>, Infallible>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Pending
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.closed.lock().unwrap().push(self.uri.clone());
    }
}

/// [`fake_with_status`], also logging each request whose never-ending answer (past the script) the client
/// dropped.
pub(crate) fn fake_logging_closes(script: Vec<(u16, String)>) -> (kube::Client, Log, Log) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let closed = Arc::new(Mutex::new(Vec::new()));
    let script = Arc::new(Mutex::new(std::collections::VecDeque::from(script)));
    let (log, closes) = (seen.clone(), closed.clone());
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let uri = req.uri().to_string();
        log.lock().unwrap().push(uri.clone());
        let next = script.lock().unwrap().pop_front();
        let closed = closes.clone();
        async move {
            let status = next.as_ref().map_or(200, |(s, _)| *s);
            let body: Body = match next {
                Some((_, text)) => http_body_util::BodyExt::boxed(Full::new(Bytes::from(text))),
                // Out of script: a watch that never sends anything.
                None => http_body_util::BodyExt::boxed(StreamBody::new(Silent { uri, closed })),
            };
            let mut response = http::Response::new(body);
            *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), seen, closed)
}

/// The value of one query parameter of a recorded request.
pub(crate) fn param(uri: &str, name: &str) -> Option<String> {
    let query = uri.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Waits (10 s at most) until `lines` (changes recorded, or requests seen) holds `n`.
pub(crate) async fn wait_for(lines: &Log, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while lines.lock().unwrap().len() < n {
        assert!(tokio::time::Instant::now() < deadline, "so far: {lines:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
