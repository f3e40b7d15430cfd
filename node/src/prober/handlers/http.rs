//! httpGet probes and HTTP lifecycle hooks (upstream `pkg/probe/http`): a `GET` to the pod IP (or
//! `httpGet.host`) at the resolved port and path, with the user's headers, `User-Agent: kube-probe/1.33`
//! (`kube-lifecycle/1.33` for hooks) and `Accept: */*` unless the user set them, no keep-alive, no proxy,
//! no compression, TLS without certificate verification. A status in 200-399 passes; a redirect to the
//! same host is followed (up to 10), one to another host is returned as it is, which is a `Warning` (a pass
//! with a `ProbeWarning` event). At most 10 KiB of the body is read.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Container, HTTPGetAction};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use url::Url;

use super::{KUBE_VERSION, MAX_OUTPUT, io_text, join_host_port, resolve_port};
use crate::prober::{Outcome, ProbeError, Report};

/// upstream: the default http.Client stops after 10 redirects.
const MAX_REDIRECTS: usize = 10;

/// A GET to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Where to connect and what to ask for.
    pub url: Url,
    /// Header lines in order, `Host` excluded.
    pub headers: Vec<(String, String)>,
    /// The `Host` header the user set (a virtual host); the connection still goes to the URL's host.
    pub host_header: Option<String>,
}

impl Request {
    /// Upstream `NewRequestForHTTPGetAction`: `purpose` is `probe` or `lifecycle` (the user agent's
    /// `kube-<purpose>/1.33`).
    pub fn for_action(
        action: &HTTPGetAction,
        container: &Container,
        pod_ip: Option<&str>,
        purpose: &str,
    ) -> Result<Request, ProbeError> {
        let scheme = action.scheme.as_deref().unwrap_or("").to_lowercase();
        let scheme = if scheme.is_empty() {
            "http".to_owned()
        } else {
            scheme
        };
        let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
            Some(h) => h,
            None => pod_ip.filter(|ip| !ip.is_empty()).ok_or(ProbeError::NoPodIp)?,
        };
        let port = resolve_port(&action.port, container)?;
        let url = build_url(&scheme, host, port, action.path.as_deref().unwrap_or(""))?;
        let pairs: Vec<(String, String)> = action
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        Ok(Request::new(url, pairs, purpose))
    }

    /// Headers as upstream's `newProbeRequest` settles them.
    pub fn new(url: Url, user_headers: Vec<(String, String)>, purpose: &str) -> Request {
        let has = |name: &str| user_headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        let host_header = user_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty());
        // An Accept set to "" removes the header (the first value decides, as Go's Header.Get).
        let accept_removed = user_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("accept"))
            .is_some_and(|(_, v)| v.is_empty());
        let mut headers: Vec<(String, String)> = user_headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
            .filter(|(k, _)| !(accept_removed && k.eq_ignore_ascii_case("accept")))
            .cloned()
            .collect();
        if !has("user-agent") {
            headers.push(("User-Agent".into(), format!("kube-{purpose}/{KUBE_VERSION}")));
        }
        if !has("accept") {
            headers.push(("Accept".into(), "*/*".into()));
        }
        Request {
            url,
            headers,
            host_header,
        }
    }
}

/// Upstream `formatURL`: the path (with its query) on `scheme://host:port`.
fn build_url(scheme: &str, host: &str, port: u16, path: &str) -> Result<Url, ProbeError> {
    let mut url = Url::parse(&format!("{scheme}://{}/", join_host_port(host, port)))
        .map_err(|e| ProbeError::Runtime(format!("parse {scheme}://{host}:{port}: {e}")))?;
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let path = path.split('#').next().unwrap_or("");
    if path.starts_with('/') {
        url.set_path(path);
    } else {
        url.set_path(&format!("/{path}"));
    }
    url.set_query(query);
    Ok(url)
}

/// A response: its status and the start of its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// At most [`MAX_OUTPUT`] bytes of the body.
    pub body: Vec<u8>,
}

/// One httpGet probe attempt: the whole exchange within `timeout`.
pub async fn probe(request: &Request, timeout: Duration) -> Report {
    match tokio::time::timeout(timeout, get(request)).await {
        Err(_) => Report::new(
            Outcome::Failure,
            format!(
                "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                request.url.as_str()
            ),
        ),
        Ok(Err(e)) => Report::new(Outcome::Failure, e),
        Ok(Ok(r)) => judge(&r),
    }
}

/// Upstream `DoHTTPProbe`'s verdict on a response.
pub fn judge(r: &Response) -> Report {
    let body = String::from_utf8_lossy(&r.body).into_owned();
    match r.status {
        200..=299 => Report::new(Outcome::Success, body),
        300..=399 => Report::new(
            Outcome::Warning,
            format!("Probe terminated redirects, Response body: {body}"),
        ),
        code => Report::new(
            Outcome::Failure,
            format!("HTTP probe failed with statuscode: {code}"),
        ),
    }
}

/// Sends the GET, following redirects to the same host; the error is Go's client error text.
pub async fn get(request: &Request) -> Result<Response, String> {
    let original_host = request.url.host_str().unwrap_or("").to_owned();
    let mut url = request.url.clone();
    let mut hops = 0;
    loop {
        let (response, location) = get_once(&url, request)
            .await
            .map_err(|e| format!("Get {:?}: {e}", url.as_str()))?;
        let redirect = matches!(response.status, 301 | 302 | 303 | 307 | 308);
        let Some(next) = location.filter(|_| redirect).and_then(|l| url.join(&l).ok()) else {
            return Ok(response);
        };
        // upstream's RedirectChecker with followNonLocalRedirects=false: another host ends the chain with
        // the redirect itself.
        if next.host_str().unwrap_or("") != original_host {
            return Ok(response);
        }
        hops += 1;
        if hops >= MAX_REDIRECTS {
            return Err(format!("Get {:?}: stopped after 10 redirects", next.as_str()));
        }
        url = next;
    }
}

/// One request on a fresh connection; the response and its `Location`.
async fn get_once(url: &Url, request: &Request) -> Result<(Response, Option<String>), String> {
    let host = url
        .host_str()
        .unwrap_or("")
        .trim_matches(|c| c == '[' || c == ']');
    let port = url.port_or_known_default().unwrap_or(80);
    let addr = join_host_port(host, port);
    let tcp = TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("dial tcp {addr}: connect: {}", io_text(&e)))?;
    let _ = tcp.set_nodelay(true);
    let authority = match url.port() {
        Some(p) => join_host_port(host, p),
        None => host.to_owned(),
    };
    let mut path = url.path().to_owned();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut builder = hyper::Request::get(path)
        .header(
            hyper::header::HOST,
            request.host_header.as_deref().unwrap_or(&authority),
        )
        .header(hyper::header::CONNECTION, "close");
    for (k, v) in &request.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let req = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("net/http: invalid header: {e}"))?;
    let response = if url.scheme() == "https" {
        let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("tls: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(client_config())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {}", io_text(&e)))?;
        send(TokioIo::new(tls), req).await?
    } else {
        send(TokioIo::new(tcp), req).await?
    };
    Ok(response)
}

async fn send<T>(io: T, req: hyper::Request<Empty<Bytes>>) -> Result<(Response, Option<String>), String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    // Aborted when this future ends or is dropped (the probe's timeout), so no connection outlives it.
    let driver = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let result = async {
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        // Longer bodies are cut without an error, as upstream's ReadAtMost.
        while buf.len() < MAX_OUTPUT {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        let room = MAX_OUTPUT - buf.len();
                        buf.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => return Err(e.to_string()),
                None => break,
            }
        }
        Ok((Response { status, body: buf }, location))
    }
    .await;
    drop(driver);
    result
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn client_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| Arc::new(api::tls::accept_any_certificate()))
        .clone()
}

/// How long a request may take when the caller gives no deadline of its own (HTTP lifecycle hooks have
/// none upstream; kubeling bounds them so a hung server cannot hold a pod worker forever).
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HTTPHeader;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn action(path: &str, headers: &[(&str, &str)]) -> HTTPGetAction {
        HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(8080),
            http_headers: Some(
                headers
                    .iter()
                    .map(|(n, v)| HTTPHeader {
                        name: (*n).into(),
                        value: (*v).into(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn requests_get_upstreams_url_and_default_headers() {
        let c = Container::default();
        let r = Request::for_action(&action("/healthz?x=1", &[]), &c, Some("10.0.0.5"), "probe").unwrap();
        assert_eq!(r.url.as_str(), "http://10.0.0.5:8080/healthz?x=1");
        assert_eq!(
            r.headers,
            [
                ("User-Agent".to_owned(), "kube-probe/1.33".to_owned()),
                ("Accept".to_owned(), "*/*".to_owned())
            ]
        );
        let r = Request::for_action(&action("ready", &[]), &c, Some("10.0.0.5"), "lifecycle").unwrap();
        assert_eq!(r.url.as_str(), "http://10.0.0.5:8080/ready");
        assert_eq!(r.headers[0].1, "kube-lifecycle/1.33");
        // User headers win; an empty Accept removes it; Host becomes the virtual host.
        let r = Request::for_action(
            &action(
                "/",
                &[
                    ("user-agent", "me"),
                    ("Accept", ""),
                    ("Host", "web.local"),
                    ("X", "1"),
                    ("X", "2"),
                ],
            ),
            &c,
            Some("10.0.0.5"),
            "probe",
        )
        .unwrap();
        assert_eq!(r.host_header.as_deref(), Some("web.local"));
        assert_eq!(
            r.headers,
            [
                ("user-agent".to_owned(), "me".to_owned()),
                ("X".to_owned(), "1".to_owned()),
                ("X".to_owned(), "2".to_owned())
            ]
        );
        assert_eq!(
            Request::for_action(&action("/", &[]), &c, None, "probe"),
            Err(ProbeError::NoPodIp)
        );
    }

    #[test]
    fn statuses_judge_as_upstream() {
        let r = |status: u16| {
            judge(&Response {
                status,
                body: b"hi".to_vec(),
            })
        };
        assert_eq!(r(200), Report::new(Outcome::Success, "hi"));
        assert_eq!(r(399).outcome, Outcome::Warning);
        assert_eq!(
            r(503),
            Report::new(Outcome::Failure, "HTTP probe failed with statuscode: 503")
        );
    }

    /// A one-shot server that answers each connection with the next canned response and records requests.
    async fn serve(responses: Vec<&'static str>) -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for resp in responses {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                s.write_all(resp.replace("PORT", &port.to_string()).as_bytes())
                    .await
                    .unwrap();
                s.shutdown().await.ok();
            }
            seen
        });
        (port, task)
    }

    fn request_to(port: u16, path: &str) -> Request {
        let url = build_url("http", "127.0.0.1", port, path).unwrap();
        Request::new(url, Vec::new(), "probe")
    }

    #[tokio::test]
    async fn same_host_redirects_are_followed_and_the_request_carries_the_headers() {
        let (port, server) = serve(vec![
            "HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ])
        .await;
        let r = probe(&request_to(port, "/start"), Duration::from_secs(5)).await;
        assert_eq!(r, Report::new(Outcome::Success, "ok"));
        let seen = server.await.unwrap();
        assert!(seen[0].starts_with("GET /start HTTP/1.1\r\n"), "{}", seen[0]);
        assert!(
            seen[0].to_lowercase().contains("user-agent: kube-probe/1.33"),
            "{}",
            seen[0]
        );
        assert!(seen[1].starts_with("GET /ok HTTP/1.1\r\n"), "{}", seen[1]);
    }

    #[tokio::test]
    async fn a_redirect_to_another_host_is_a_warning() {
        let (port, server) = serve(vec![
            "HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/\r\nContent-Length: 3\r\n\r\nbye",
        ])
        .await;
        let r = probe(&request_to(port, "/"), Duration::from_secs(5)).await;
        assert_eq!(
            r,
            Report::new(Outcome::Warning, "Probe terminated redirects, Response body: bye")
        );
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_slow_answer_fails_with_the_timeout_and_a_closed_port_with_the_dial_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let r = probe(&request_to(port, "/slow"), Duration::from_millis(200)).await;
        assert_eq!(r.outcome, Outcome::Failure);
        assert_eq!(
            r.output,
            format!(
                "Get \"http://127.0.0.1:{port}/slow\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )
        );
        drop(listener);
        let r = probe(&request_to(port, "/"), Duration::from_secs(1)).await;
        assert_eq!(
            r.output,
            format!(
                "Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }

    #[tokio::test]
    async fn https_probes_accept_a_self_signed_certificate() {
        let config = crate::agent::self_signed_tls(vec!["web.local".into()]).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = tls.read(&mut buf).await.unwrap();
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecure")
                .await
                .unwrap();
            tls.shutdown().await.ok();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let url = build_url("https", "127.0.0.1", port, "/healthz").unwrap();
        let r = probe(&Request::new(url, Vec::new(), "probe"), Duration::from_secs(5)).await;
        assert_eq!(r, Report::new(Outcome::Success, "secure"));
        assert!(server.await.unwrap().starts_with("GET /healthz HTTP/1.1\r\n"));
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_the_cap() {
        let body = "x".repeat(3 * MAX_OUTPUT);
        let resp: &'static str = Box::leak(
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_boxed_str(),
        );
        let (port, server) = serve(vec![resp]).await;
        let r = get(&request_to(port, "/")).await.unwrap();
        assert_eq!(r.body.len(), MAX_OUTPUT);
        server.await.unwrap();
    }
}
