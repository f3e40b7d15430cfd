//! The manifest URL (upstream's `http.go`): a GET every period, with a 10 s timeout, of a Pod or a PodList in
//! YAML or JSON. Plain `http://` only: the client has no TLS.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{HTTP_SOURCE, MAX_MANIFEST_BYTES, SourceUpdate, dedupe, parse_manifest, prepare};

/// Upstream's client timeout for the manifest URL.
const TIMEOUT: Duration = Duration::from_secs(10);

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Runs the http source on `url` until `cancel` fires or the receiver of `tx` is gone; the first GET is
/// immediate. A non-200 answer or a failed GET keeps the last set (reported as [`SourceUpdate::Invalid`] once
/// per distinct error); an empty body sends an empty snapshot; a body byte-identical to the last one does
/// nothing; a body that does not parse is reported once and keeps the last set.
pub async fn run(
    url: String,
    headers: Vec<(String, String)>,
    node_name: String,
    check_every: Duration,
    tx: mpsc::Sender<SourceUpdate>,
    cancel: CancellationToken,
) {
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let mut state = State::default();
    loop {
        let fetched = tokio::select! {
            _ = cancel.cancelled() => return,
            r = tokio::time::timeout(TIMEOUT, fetch(&client, &url, &headers)) => {
                r.unwrap_or_else(|_| Err(format!("no answer within {}s", TIMEOUT.as_secs())))
            }
        };
        for update in state.apply(fetched, &url, &node_name) {
            if tx.send(update).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(check_every) => {}
        }
    }
}

/// The body of a 200 answer.
async fn fetch(client: &HttpClient, url: &str, headers: &[(String, String)]) -> Result<Bytes, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("invalid manifest url: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("manifest url must start with http:// (https is not supported)".to_string());
    }
    let mut request = hyper::Request::get(uri);
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Empty::new())
        .map_err(|e| format!("invalid request: {e}"))?;
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("get failed: {e}"))?;
    let status = response.status();
    if status != hyper::StatusCode::OK {
        return Err(format!("get answered {status}"));
    }
    let body = Limited::new(response.into_body(), MAX_MANIFEST_BYTES)
        .collect()
        .await;
    Ok(body.map_err(|e| format!("reading body failed: {e}"))?.to_bytes())
}

/// The last non-empty body seen, the last snapshot sent and the last failed GET reported.
#[derive(Default)]
struct State {
    body: Option<Bytes>,
    sent: Option<Vec<Pod>>,
    error: Option<String>,
}

impl State {
    fn apply(&mut self, fetched: Result<Bytes, String>, url: &str, node_name: &str) -> Vec<SourceUpdate> {
        let mut updates = Vec::new();
        let body = match fetched {
            Err(e) => {
                self.report(e, url, &mut updates);
                return updates;
            }
            Ok(body) => body,
        };
        // A failed GET is reported again when it recurs after a good one.
        self.error = None;
        let pods = if body.is_empty() {
            self.body = None;
            Vec::new()
        } else if self.body.as_ref() == Some(&body) {
            return updates;
        } else {
            self.body = Some(body.clone());
            let prepared = parse_manifest(&body).and_then(|pods| {
                pods.into_iter()
                    .map(|pod| prepare(pod, node_name, HTTP_SOURCE, url))
                    .collect::<Result<Vec<_>, _>>()
            });
            match prepared {
                // One invalid pod rejects the whole body, as upstream's tryDecodePodList; reported once: the
                // same body again is skipped above.
                Err(e) => {
                    let error = format!("body does not hold a valid Pod or PodList: {e}");
                    tracing::warn!(%url, %error, "static pod manifest url skipped");
                    updates.push(SourceUpdate::Invalid {
                        source: HTTP_SOURCE,
                        origin: url.into(),
                        error,
                    });
                    return updates;
                }
                Ok(pods) => {
                    let (kept, dropped) = dedupe(pods, |p| p);
                    for (_, error) in dropped {
                        tracing::warn!(%url, %error, "static pod skipped");
                        updates.push(SourceUpdate::Invalid {
                            source: HTTP_SOURCE,
                            origin: url.into(),
                            error,
                        });
                    }
                    kept
                }
            }
        };
        if self.sent.as_ref() != Some(&pods) {
            self.sent = Some(pods.clone());
            updates.push(SourceUpdate::Snapshot {
                source: HTTP_SOURCE,
                pods,
            });
        }
        updates
    }

    fn report(&mut self, error: String, url: &str, updates: &mut Vec<SourceUpdate>) {
        if self.error.as_ref() != Some(&error) {
            tracing::warn!(%url, %error, "static pod manifest url skipped");
            self.error = Some(error.clone());
            updates.push(SourceUpdate::Invalid {
                source: HTTP_SOURCE,
                origin: url.to_string(),
                error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const POD_LIST: &str = "apiVersion: v1\nkind: PodList\nitems:\n\
        - metadata: {name: a}\n  spec: {containers: [{name: c, image: nginx}]}\n\
        - metadata: {name: b}\n  spec: {containers: [{name: c, image: nginx}]}\n";

    /// An HTTP/1.1 responder on 127.0.0.1:0 that answers each request with the next scripted
    /// (status, body), repeating the last one, and records each request head.
    async fn serve(script: Vec<(u16, &'static str)>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/manifests", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            let mut next = 0;
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let (status, body) = script[next.min(script.len() - 1)];
                next += 1;
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
                let _ = conn.shutdown().await;
            }
        });
        (url, heads)
    }

    async fn next(rx: &mut mpsc::Receiver<SourceUpdate>) -> SourceUpdate {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("no update in time")
            .unwrap()
    }

    #[tokio::test]
    async fn pod_list_then_500_keeps_pods_then_empty_body_removes_them() {
        let (url, heads) = serve(vec![(200, POD_LIST), (200, POD_LIST), (500, "boom"), (200, "")]).await;
        let (tx, mut rx) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        let headers = vec![("X-Token".to_string(), "secret".to_string())];
        tokio::spawn(run(
            url.clone(),
            headers,
            "node1".into(),
            Duration::from_millis(20),
            tx,
            cancel.clone(),
        ));

        let SourceUpdate::Snapshot { source: "http", pods } = next(&mut rx).await else {
            panic!("snapshot")
        };
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["a-node1", "b-node1"]);
        for pod in &pods {
            let ann = pod.metadata.annotations.as_ref().unwrap();
            assert_eq!(ann["kubernetes.io/config.source"], "http");
            assert_eq!(
                ann["kubernetes.io/config.hash"],
                *pod.metadata.uid.as_ref().unwrap()
            );
            assert!(
                pod.spec.as_ref().unwrap().tolerations.is_none(),
                "no NoExecute toleration for http pods"
            );
        }
        // The identical second body sends nothing; the 500 is reported and keeps the pods (no snapshot).
        let SourceUpdate::Invalid { error, origin, .. } = next(&mut rx).await else {
            panic!("invalid")
        };
        assert!(error.contains("500"), "{error}");
        assert_eq!(origin, url);
        assert_eq!(
            next(&mut rx).await,
            SourceUpdate::Snapshot {
                source: "http",
                pods: Vec::new()
            }
        );
        assert!(heads.lock().unwrap().len() >= 4);
        let first = heads.lock().unwrap()[0].to_lowercase();
        assert!(first.starts_with("get /manifests http/1.1"), "{first}");
        assert!(first.contains("x-token: secret"), "{first}");
        // The repeated empty body sends nothing more.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(rx.try_recv().is_err());
        cancel.cancel();
    }

    #[test]
    fn state_handles_single_pod_bad_body_and_duplicates() {
        let mut state = State::default();
        let url = "http://h/m";
        let pod = Bytes::from_static(
            b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\
                \"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
        );
        let updates = state.apply(Ok(pod.clone()), url, "n");
        assert!(matches!(&updates[..], [SourceUpdate::Snapshot { pods, .. }] if pods.len() == 1));
        assert!(state.apply(Ok(pod), url, "n").is_empty());

        let bad = Bytes::from_static(b"kind: [");
        assert!(matches!(
            &state.apply(Ok(bad.clone()), url, "n")[..],
            [SourceUpdate::Invalid { .. }]
        ));
        assert!(
            state.apply(Ok(bad), url, "n").is_empty(),
            "same bad body reported once"
        );

        let dup = Bytes::from_static(
            b"apiVersion: v1\nkind: PodList\nitems:\n\
              - {metadata: {name: a}, spec: {containers: [{name: c, image: i}]}}\n\
              - {metadata: {name: a}, spec: {containers: [{name: c, image: j}]}}\n",
        );
        let updates = state.apply(Ok(dup), url, "n");
        let [
            SourceUpdate::Invalid { error, .. },
            SourceUpdate::Snapshot { pods, .. },
        ] = &updates[..]
        else {
            panic!("{updates:?}")
        };
        assert!(error.contains("due to duplicate pod name"), "{error}");
        assert_eq!(pods.len(), 1);

        // One pod that fails the API server's validation rejects the whole body; the last set stays.
        let invalid = Bytes::from_static(
            b"apiVersion: v1\nkind: PodList\nitems:\n\
              - {metadata: {name: ok}, spec: {containers: [{name: c, image: i}]}}\n\
              - {metadata: {name: nocontainers}, spec: {containers: []}}\n",
        );
        let updates = state.apply(Ok(invalid), url, "n");
        let [SourceUpdate::Invalid { error, .. }] = &updates[..] else {
            panic!("{updates:?}")
        };
        assert!(error.contains("spec.containers: Required value"), "{error}");
    }

    #[tokio::test]
    async fn https_url_is_refused() {
        let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
        let err = fetch(&client, "https://example.invalid/", &[]).await.unwrap_err();
        assert!(err.contains("https is not supported"), "{err}");
    }
}
