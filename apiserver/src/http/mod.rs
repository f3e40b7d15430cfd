//! HTTP: routing, authentication, query parsing, content negotiation and `metav1.Status` errors.
//!
//! One fallback handler parses path segments (axum route templates cannot express the optional
//! `/namespaces/{ns}` and the `/api` vs `/apis/{g}` split) and dispatches to the registry; watches are
//! streamed by [`watch`].

mod authz;
#[cfg(test)]
mod bad_input_tests;
pub mod discovery;
pub mod openapi;
pub mod openapi_v2;
pub mod portforward;
pub mod proxy;
pub mod request;
pub mod reviews;
pub mod watch;

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::registry::{DeleteOptions, PatchType, Registry, ResourceInfo, Selection, WriteOptions};
use crate::selector::{FieldSelector, LabelSelector};
use crate::storage::Stored;
use crate::table::{self, IncludeObject, Printer};
use crate::user::UserInfo;
use request::{Format, ResourceRequest, Route};

/// Subresources that take and return the whole object and change a part of it (`status`; the pod's
/// `ephemeralcontainers`): the registry's strategy decides which part.
const OBJECT_SUBRESOURCES: &[&str] = &[
    "status",
    crate::registry::pod_strategy::EPHEMERAL_CONTAINERS,
    crate::registry::namespace::FINALIZE,
    "approval",
];

/// Upstream's limit on a request body (`MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What every handler shares.
pub struct ServerState {
    /// The registry.
    pub registry: Registry,
    /// The bearer token every request must carry.
    pub token: String,
    /// Cancelled at shutdown: ends watch streams.
    pub cancel: CancellationToken,
    /// `host:port` clients reach us at (for `/api`).
    pub server_address: String,
    /// The bearer token sent to node agents for `pods/log`, `exec` and `attach`; without one they are not
    /// proxied.
    pub node_token: Option<String>,
    /// Issues (TokenRequest) and accepts service account tokens.
    pub tokens: Arc<crate::serviceaccount::Tokens>,
}

impl ServerState {
    /// The user a bearer token authenticates: the admin token's, or a service account's.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        if constant_time_eq(token.as_bytes(), self.token.as_bytes()) {
            Some(UserInfo::admin())
        } else {
            self.tokens.authenticate(&self.registry, token)
        }
    }
}

/// The API server's router.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Bearer tokens: the admin token, or a service account token of ours; anything else is 401. Then
/// impersonation and RBAC authorization ([`authz`]): a denial is a 403. The user (after impersonation)
/// rides in the request's extensions.
async fn authenticate(State(st): State<Arc<ServerState>>, mut req: Request, next: Next) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim);
    let user = token.and_then(|t| st.authenticate(t));
    let Some(user) = user else {
        drain(req.into_body()).await;
        return error_response(&ApiError::unauthorized());
    };
    match authz::authorize(&st, &req, user) {
        // The registry sees who asks: other users' RBAC writes are checked for escalation on their
        // behalf, a CertificateSigningRequest records its requester.
        Ok(user) => {
            req.extensions_mut().insert(user.clone());
            crate::user::on_behalf_of(user, next.run(req)).await
        }
        Err(e) => {
            drain(req.into_body()).await;
            error_response(&e)
        }
    }
}

/// Read and drop a request body we answer without reading (an error, a discovery document), up to
/// `MAX_BODY_BYTES` and a few seconds. Over HTTP/2, answering before the client has sent its whole body
/// ends the stream with RST_STREAM, and curl then reports a framing error instead of our answer (about
/// half the time, depending on the race).
async fn drain(body: Body) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut read = 0usize;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                read += data.len();
                if read > MAX_BODY_BYTES {
                    break;
                }
            }
        }
    })
    .await;
}

/// A `metav1.Status` response for an error.
pub fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, Bytes::from(crate::encode::to_vec(&e.to_status())))
}

/// An API answer: JSON ending in a newline, as Go's `json.Encoder` (upstream's serializer) writes it.
fn json_response(code: StatusCode, body: Bytes) -> Response {
    let body = if body.last() == Some(&b'\n') {
        body
    } else {
        let mut v = Vec::with_capacity(body.len() + 1);
        v.extend_from_slice(&body);
        v.push(b'\n');
        Bytes::from(v)
    };
    json_raw(code, body)
}

/// JSON bytes as they are (OpenAPI documents: upstream serves them without a newline).
fn json_raw(code: StatusCode, body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = code;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn json_value(code: StatusCode, v: &Value) -> Response {
    let mut bytes = crate::encode::to_vec(v);
    bytes.push(b'\n');
    json_response(code, Bytes::from(bytes))
}

/// Add one `Warning: 299 - "..."` header per warning the write collected (client-go prints them).
fn with_warnings(mut resp: Response, opts: &WriteOptions) -> Response {
    for w in opts.warnings.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        resp = with_warning(resp, w);
    }
    resp
}

/// Add one `Warning: 299 - "..."` header.
fn with_warning(mut resp: Response, warning: &str) -> Response {
    let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
    if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
        resp.headers_mut().append(header::WARNING, v);
    }
    resp
}

/// v1.33 deprecates core/v1 Endpoints: upstream warns on every request to them (KEP-4974).
const ENDPOINTS_DEPRECATED: &str =
    "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice";

/// The warning every request to a deprecated resource carries.
fn deprecation_warning(info: &ResourceInfo) -> Option<&'static str> {
    (info.group.is_empty() && info.plural == "endpoints").then_some(ENDPOINTS_DEPRECATED)
}

fn text(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Query parameters, repeated keys kept.
pub struct Query(Vec<(String, String)>);

impl Query {
    fn parse(q: Option<&str>) -> Query {
        Query(
            form_urlencoded::parse(q.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A boolean parameter (Go's ParseBool set); absent is false.
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some(v) => request::parse_bool(v)
                .ok_or_else(|| ApiError::bad_request(format!("invalid boolean value for {key}: {v:?}"))),
        }
    }

    /// An integer parameter.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid value for {key}: {v:?}: not an integer"))
            }),
        }
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        let values: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.as_str())
            .collect();
        dry_run_values(&values)
    }

    fn write_options(&self, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
        let field_validation = crate::registry::FieldValidation::parse(self.get("fieldValidation"))
            .map_err(ApiError::bad_request)?;
        Ok(WriteOptions {
            dry_run: self.dry_run()?,
            field_manager: self
                .get("fieldManager")
                .map(str::to_string)
                .or_else(|| default_manager(headers)),
            field_validation,
            warnings: Default::default(),
        })
    }
}

fn dry_run_values(values: &[&str]) -> Result<bool, ApiError> {
    let mut dry = false;
    for v in values {
        match *v {
            "All" => dry = true,
            "" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dry run value: {other:?}: supported values: \"All\""
                )));
            }
        }
    }
    Ok(dry)
}

async fn handle(State(st): State<Arc<ServerState>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let route = request::route(parts.uri.path());
    let reads_body = matches!(route, Route::Resource(_))
        || (matches!(route, Route::Review(_) | Route::LocalReview(..)) && parts.method == Method::POST);
    let body = if reads_body {
        body
    } else {
        drain(body).await;
        Body::empty()
    };
    let get_only = |resp: Response| {
        if parts.method == Method::GET {
            resp
        } else {
            error_response(&ApiError::method_not_allowed())
        }
    };
    match route {
        Route::Version => get_only(json_value(StatusCode::OK, &discovery::version())),
        Route::Api | Route::Apis => {
            let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
            let core = route == Route::Api;
            let mut resp = match discovery::negotiate(accept) {
                discovery::DiscoveryFormat::Aggregated(v) => {
                    let mut resp = json_value(StatusCode::OK, &discovery::aggregated(core, v));
                    if let Ok(ct) = HeaderValue::from_str(&discovery::aggregated_content_type(v)) {
                        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    resp
                }
                discovery::DiscoveryFormat::Legacy if core => {
                    json_value(StatusCode::OK, &discovery::api_versions(&st.server_address))
                }
                discovery::DiscoveryFormat::Legacy => json_value(StatusCode::OK, &discovery::api_groups()),
            };
            resp.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("Accept"));
            get_only(resp)
        }
        Route::Group(g) => match discovery::api_group(&g) {
            Some(doc) => get_only(json_value(StatusCode::OK, &doc)),
            None => error_response(&ApiError::no_route()),
        },
        Route::Review(r) => authz::review(&st, parts, body, r, None).await,
        Route::LocalReview(r, ns) => authz::review(&st, parts, body, r, Some(&ns)).await,
        Route::GroupVersion(g, v) => {
            match discovery::resource_list(&g, &v).or_else(|| reviews::resource_list(&g, &v)) {
                Some(doc) => get_only(json_value(StatusCode::OK, &doc)),
                None => error_response(&ApiError::no_route()),
            }
        }
        Route::Health(which) => {
            if st.cancel.is_cancelled() {
                return text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "[-]shutdown failed: reason withheld\n",
                );
            }
            let verbose = query.get("verbose").is_some();
            let storage = st.registry.storage();
            if which == "readyz" && !storage.ready() {
                let failed = format!(
                    "[-]{} failed: reason withheld\nreadyz check failed\n",
                    storage.check_name()
                );
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    if verbose {
                        format!("[+]ping ok\n{failed}")
                    } else {
                        failed
                    },
                );
            }
            match (which.as_str(), verbose) {
                ("readyz", true) => get_only(text(
                    StatusCode::OK,
                    "[+]ping ok\n[+]storage ok\nreadyz check passed\n",
                )),
                ("livez", true) => get_only(text(StatusCode::OK, "[+]ping ok\nlivez check passed\n")),
                _ => get_only(text(StatusCode::OK, "ok")),
            }
        }
        Route::OpenApiV2 => {
            let doc = openapi_v2::current();
            let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
            if openapi_v2::wants_protobuf(accept) {
                let mut resp = Response::new(Body::from(doc.protobuf.clone()));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(openapi_v2::PROTOBUF_CONTENT_TYPE),
                );
                get_only(resp)
            } else {
                get_only(json_raw(StatusCode::OK, doc.json.clone()))
            }
        }
        Route::OpenApiIndex => get_only(json_response(StatusCode::OK, openapi::index())),
        Route::OpenApiDoc(path) => match openapi::doc(&path) {
            Some(doc) => get_only(json_response(StatusCode::OK, doc)),
            None => error_response(&ApiError::no_route()),
        },
        Route::NotFound => error_response(&ApiError::no_route()),
        // Log and exec streams go to the node agent; exec needs the request parts for its upgrade.
        Route::Resource(r) if proxy::handles(&parts.method, &r) => proxy::serve(&st, parts, r, query).await,
        Route::Resource(r) if portforward::handles(&parts.method, &r) => {
            portforward::serve(&st, parts, r, query).await
        }
        Route::Resource(r) => {
            let deprecated = deprecation_warning(r.info);
            let resp = match read_body(body).await {
                Err(e) => error_response(&e),
                Ok(body) => match resource(&st, parts.method, &parts.headers, query, body, r).await {
                    Ok(resp) => resp,
                    Err(e) => {
                        if e.code >= 500 {
                            tracing::error!(error = %e, path = %parts.uri.path(), "request failed");
                        }
                        error_response(&e)
                    }
                },
            };
            match deprecated {
                Some(w) => with_warning(resp, w),
                None => resp,
            }
        }
    }
}

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut buf = Vec::new();
    let mut too_large = false;
    let mut drained = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(ApiError::bad_request("error reading the request body"));
        };
        let Ok(data) = frame.into_data() else { continue };
        if too_large {
            // Keep reading (and dropping) so the client gets our 413 rather than a reset connection.
            drained += data.len();
            if drained > 16 * MAX_BODY_BYTES {
                break;
            }
            continue;
        }
        if buf.len() + data.len() > MAX_BODY_BYTES {
            too_large = true;
            buf = Vec::new();
            continue;
        }
        buf.extend_from_slice(&data);
    }
    if too_large {
        return Err(ApiError::too_large(format!(
            "Request entity too large: limit is {MAX_BODY_BYTES}"
        )));
    }
    Ok(Bytes::from(buf))
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Decode an object body: JSON (or YAML, a nicety) as the content type says.
fn decode_object(headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    match content_type(headers).as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))),
        // kubectl's typed clients (create namespace/configmap/secret/deployment..., auth can-i) send protobuf.
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode the protobuf body: {e}"))),
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_norway::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; yaml parse error: {e}"))),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, \
             application/yaml, application/vnd.kubernetes.protobuf (got {other})"
        ))),
    }
}

fn selection(info: &ResourceInfo, query: &Query, name: Option<&str>) -> Result<Selection, ApiError> {
    let labels = match query.get("labelSelector") {
        Some(s) if !s.is_empty() => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
        _ => None,
    };
    let mut field_text = query.get("fieldSelector").unwrap_or("").to_string();
    if let Some(name) = name {
        // A watch on an item path is a watch of the collection narrowed to that name (upstream).
        if !field_text.is_empty() {
            let fs = FieldSelector::parse(&field_text).map_err(ApiError::bad_request)?;
            if fs.exact_name().is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(
                    "fieldSelector metadata.name doesn't match requested name",
                ));
            }
            field_text.push(',');
        }
        field_text.push_str("metadata.name=");
        field_text.push_str(&name.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\="));
    }
    let fields = if field_text.is_empty() {
        None
    } else {
        let fs = FieldSelector::parse(&field_text).map_err(ApiError::bad_request)?;
        fs.check_supported(info.group, info.plural)
            .map_err(ApiError::bad_request)?;
        Some(fs)
    };
    Ok(Selection { labels, fields })
}

fn negotiate(headers: &HeaderMap) -> Result<Format, ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    request::negotiate(accept).map_err(ApiError::not_acceptable)
}

/// With several API servers on one etcd, a read sees every write acknowledged anywhere before it: a read
/// of the latest state (no `resourceVersion`) first catches up with etcd's current revision, and a read or
/// watch from `resourceVersion=N` waits until this server has applied N (upstream's watch cache does the
/// same). With sled there is one API server and nothing to wait for.
async fn consistent_read(st: &ServerState, query: &Query, watching: bool) -> Result<(), ApiError> {
    let storage = st.registry.storage();
    match query.get("resourceVersion").filter(|s| !s.is_empty()) {
        None if !watching => storage.catch_up().await?,
        None => {}
        Some(rv) => {
            if let Ok(n) = rv.parse::<u64>() {
                storage.wait_for_revision(n).await?;
            }
        }
    }
    Ok(())
}

async fn resource(
    st: &ServerState,
    method: Method,
    headers: &HeaderMap,
    query: Query,
    body: Bytes,
    r: ResourceRequest,
) -> Result<Response, ApiError> {
    let info = r.info;
    let ns = r.namespace.as_deref();
    let watching = r.watch_prefix || query.flag("watch")?;
    if method == Method::GET {
        consistent_read(st, &query, watching).await?;
    }
    if info.only_verbs.is_some() && r.subresource.is_none() {
        let verb = request::verb(&method, r.name.is_some(), watching);
        if !info.serves(verb) {
            return Err(ApiError::method_not_allowed());
        }
        match (info.group, info.plural) {
            ("", "componentstatuses") => {
                return component_statuses(st, r.name.as_deref(), negotiate(headers)?, &query);
            }
            ("", "bindings") => {
                // POST /namespaces/NS/bindings: the Binding names the pod (upstream's BindingREST).
                let obj = decode_object(headers, &body)?;
                let pod = obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                st.registry.bind(ns.unwrap_or("default"), &pod, obj).await?;
                return Ok(json_value(
                    StatusCode::CREATED,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                ));
            }
            _ => {}
        }
    }
    match (r.name.as_deref(), r.subresource.as_deref()) {
        (None, None) => match method {
            Method::GET if watching => watch::serve(st, info, ns, None, &query, negotiate(headers)?),
            Method::GET => list(st, info, ns, &query, negotiate(headers)?),
            Method::POST => {
                let opts = query.write_options(headers)?;
                let obj = decode_object(headers, &body)?;
                let created = st.registry.create(info, ns, obj, &opts).await?;
                Ok(with_warnings(
                    json_response(StatusCode::CREATED, created.bytes.clone()),
                    &opts,
                ))
            }
            Method::DELETE => {
                let opts = delete_options(&query, headers, &body)?;
                let sel = selection(info, &query, None)?;
                let (items, rev) = st.registry.delete_collection(info, ns, &sel, &opts).await?;
                let resp = json_response(StatusCode::OK, list_bytes(info, &items, rev, None, None));
                Ok(with_gc_warning(resp, info, &opts))
            }
            _ => Err(ApiError::method_not_allowed()),
        },
        (Some(name), None) => match method {
            Method::GET if watching => watch::serve(st, info, ns, Some(name), &query, negotiate(headers)?),
            Method::GET => {
                let format = negotiate(headers)?;
                let obj = st.registry.get(info, ns, name)?;
                single(info, &obj, format, &query)
            }
            Method::PUT => {
                let opts = query.write_options(headers)?;
                let obj = decode_object(headers, &body)?;
                let updated = st.registry.update(info, ns, name, None, obj, &opts).await?;
                Ok(with_warnings(
                    json_response(StatusCode::OK, updated.bytes.clone()),
                    &opts,
                ))
            }
            Method::PATCH => patch(st, info, ns, name, None, headers, &query, body).await,
            Method::DELETE => {
                let opts = delete_options(&query, headers, &body)?;
                let w = st.registry.delete(info, ns, name, &opts).await?;
                let warn = |resp: Response| with_gc_warning(resp, info, &opts);
                let returns_object = info.group.is_empty()
                    && matches!(
                        info.plural,
                        "pods" | "services" | "serviceaccounts" | "namespaces"
                    );
                let deleted_now = w.event == Some(crate::watch::EventType::Deleted);
                if deleted_now && !returns_object {
                    let uid = w
                        .object
                        .value()
                        .pointer("/metadata/uid")
                        .cloned()
                        .unwrap_or(Value::Null);
                    let mut details = json!({"name": name, "kind": info.plural, "uid": uid});
                    if !info.group.is_empty() {
                        details["group"] = json!(info.group);
                    }
                    return Ok(warn(json_value(
                        StatusCode::OK,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
                    )));
                }
                Ok(warn(json_response(StatusCode::OK, w.object.bytes.clone())))
            }
            _ => Err(ApiError::method_not_allowed()),
        },
        (Some(name), Some(sub)) => {
            if !info.subresources.iter().any(|s| s.name == sub) {
                return Err(ApiError::no_route());
            }
            match (sub, method) {
                (sub, method) if OBJECT_SUBRESOURCES.contains(&sub) => match method {
                    Method::GET => {
                        let obj = st.registry.get(info, ns, name)?;
                        Ok(json_response(StatusCode::OK, obj.bytes.clone()))
                    }
                    Method::PUT => {
                        let opts = query.write_options(headers)?;
                        let obj = decode_object(headers, &body)?;
                        let updated = st.registry.update(info, ns, name, Some(sub), obj, &opts).await?;
                        Ok(with_warnings(
                            json_response(StatusCode::OK, updated.bytes.clone()),
                            &opts,
                        ))
                    }
                    Method::PATCH => patch(st, info, ns, name, Some(sub), headers, &query, body).await,
                    _ => Err(ApiError::method_not_allowed()),
                },
                ("scale", Method::GET) => Ok(json_value(StatusCode::OK, &st.registry.scale(info, ns, name)?)),
                ("scale", Method::PUT) => {
                    let opts = query.write_options(headers)?;
                    let new = decode_object(headers, &body)?;
                    let scale = st
                        .registry
                        .update_scale(info, ns, name, |_| Ok(new.clone()), &opts)
                        .await?;
                    Ok(json_value(StatusCode::OK, &scale))
                }
                ("scale", Method::PATCH)
                    if matches!(
                        content_type(headers).as_str(),
                        "application/apply-patch+yaml" | "application/apply-patch+json"
                    ) =>
                {
                    // Server-side apply of a Scale is an apply of the parent's `spec.replicas`, recorded
                    // under the `scale` subresource (upstream's scale managed-fields mapping).
                    let mut opts = query.write_options(headers)?;
                    opts.field_manager = query.get("fieldManager").map(str::to_string);
                    let force = query.flag("force")?;
                    let applied: Value = serde_norway::from_slice(&body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
                    let mut parent = json!({"apiVersion": info.api_version(), "kind": info.kind,
                                            "metadata": {"name": name}});
                    if let Some(ns) = ns {
                        parent["metadata"]["namespace"] = json!(ns);
                    }
                    if let Some(r) = applied.pointer("/spec/replicas") {
                        parent["spec"] = json!({"replicas": r});
                    }
                    let (obj, _) = st
                        .registry
                        .apply(info, ns, name, Some("scale"), parent, force, &opts)
                        .await?;
                    Ok(with_warnings(
                        json_value(StatusCode::OK, &crate::registry::scale_of(&obj.value())),
                        &opts,
                    ))
                }
                ("scale", Method::PATCH) => {
                    let opts = query.write_options(headers)?;
                    let patch: Value = serde_json::from_slice(&body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                    let ct = content_type(headers);
                    let scale = st
                        .registry
                        .update_scale(
                            info,
                            ns,
                            name,
                            |mut current| {
                                match ct.as_str() {
                                    "application/json-patch+json" => {
                                        let ops = <json_patch::Patch as serde::Deserialize>::deserialize(&patch).map_err(|e| {
                                            ApiError::bad_request(format!("error decoding patch: {e}"))
                                        })?;
                                        json_patch::patch(&mut current, &ops)
                                            .map_err(|e| ApiError::unprocessable(e.to_string()))?;
                                    }
                                    "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                                        json_patch::merge(&mut current, &patch)
                                    }
                                    _ => {
                                        return Err(ApiError::unsupported_media_type(
                                            "the body of the request was in an unknown format - accepted media \
                                             types include: application/json-patch+json, \
                                             application/merge-patch+json, application/strategic-merge-patch+json",
                                        ));
                                    }
                                }
                                Ok(current)
                            },
                            &opts,
                        )
                        .await?;
                    Ok(json_value(StatusCode::OK, &scale))
                }
                ("token", Method::POST) => {
                    let obj = decode_object(headers, &body)?;
                    let out = st
                        .tokens
                        .create_token(&st.registry, ns.unwrap_or("default"), name, &obj)?;
                    Ok(json_value(StatusCode::CREATED, &out))
                }
                ("eviction", Method::POST) => {
                    let eviction = decode_object(headers, &body)?;
                    let options = eviction.get("deleteOptions").filter(|o| !o.is_null());
                    let options = options.map(|o| o.to_string()).unwrap_or_default();
                    // The embedded options are JSON by now, whatever the body was.
                    let opts = delete_options(&query, &HeaderMap::new(), options.as_bytes())?;
                    let outcome = st
                        .registry
                        .evict(ns.unwrap_or("default"), name, &eviction, opts)
                        .await?;
                    let (code, status) = match outcome {
                        crate::registry::eviction::Evicted::Deleted => {
                            (StatusCode::CREATED, json!({"status": "Success", "code": 201}))
                        }
                        crate::registry::eviction::Evicted::MultipleBudgets => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            json!({"status": "Failure", "message": crate::registry::eviction::MULTIPLE_BUDGETS, "code": 500}),
                        ),
                    };
                    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}});
                    body.as_object_mut()
                        .expect("an object")
                        .extend(status.as_object().cloned().unwrap_or_default());
                    Ok(json_value(code, &body))
                }
                ("binding", Method::POST) => {
                    let obj = decode_object(headers, &body)?;
                    st.registry.bind(ns.unwrap_or("default"), name, obj).await?;
                    Ok(json_value(
                        StatusCode::CREATED,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                    ))
                }
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        (None, Some(_)) => Err(ApiError::no_route()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn patch(
    st: &ServerState,
    info: &'static ResourceInfo,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    headers: &HeaderMap,
    query: &Query,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut opts = query.write_options(headers)?;
    let kind = match content_type(headers).as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/merge-patch+json" => PatchType::Merge,
        "application/strategic-merge-patch+json" => PatchType::Strategic,
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            let force = query.flag("force")?;
            // kubectl and kube-rs send JSON; YAML is what the content type names. JSON is YAML too.
            let applied: Value = serde_norway::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            // An apply may come without fieldManager: that is a 422, so don't default it.
            opts.field_manager = query.get("fieldManager").map(str::to_string);
            let (obj, created) = st
                .registry
                .apply(info, ns, name, sub, applied, force, &opts)
                .await?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            return Ok(with_warnings(json_response(code, obj.bytes.clone()), &opts));
        }
        _ => {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, \
                 application/strategic-merge-patch+json",
            ));
        }
    };
    if query.get("force").is_some() {
        return Err(ApiError::unprocessable(
            "force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    let patched = st
        .registry
        .patch(info, ns, name, sub, (kind, &body), &opts)
        .await?;
    Ok(with_warnings(
        json_response(StatusCode::OK, patched.bytes.clone()),
        &opts,
    ))
}

/// A Job deleted without a propagation policy keeps its pods (the Orphan default); upstream says so.
fn with_gc_warning(resp: Response, info: &ResourceInfo, opts: &DeleteOptions) -> Response {
    if crate::registry::gc::warns(info, &opts.policy) {
        with_warning(resp, crate::registry::gc::JOB_ORPHAN_WARNING)
    } else {
        resp
    }
}

/// Upstream names the manager of a write without `fieldManager` after the client's user agent
/// (`kubectl/v1.32.4 (linux/amd64) ...` → `kubectl`).
fn default_manager(headers: &HeaderMap) -> Option<String> {
    let ua = headers.get(header::USER_AGENT)?.to_str().ok()?;
    let product = ua.split(['/', ' ']).next()?.trim();
    (!product.is_empty()).then(|| product.chars().take(128).collect())
}

fn delete_options(query: &Query, headers: &HeaderMap, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        grace_period_seconds: query.int("gracePeriodSeconds")?,
        dry_run: query.dry_run()?,
        ..Default::default()
    };
    let mut policy = query.get("propagationPolicy").map(str::to_string);
    let mut orphan_dependents = match query.get("orphanDependents") {
        None | Some("") => None,
        Some(v) => Some(request::parse_bool(v).ok_or_else(|| {
            ApiError::bad_request(format!("invalid boolean value for orphanDependents: {v:?}"))
        })?),
    };
    if !body.iter().all(u8::is_ascii_whitespace) {
        // Typed clients (kubectl drain's pod deletes) send DeleteOptions as protobuf.
        let v: Value = match content_type(headers).as_str() {
            "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(body),
            _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
        }
        .map_err(|e| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}")))?;
        if let Some(g) = v.get("gracePeriodSeconds").filter(|g| !g.is_null()) {
            opts.grace_period_seconds = Some(
                g.as_i64()
                    .ok_or_else(|| ApiError::bad_request("gracePeriodSeconds must be an integer"))?,
            );
        }
        if let Some(p) = v.get("preconditions") {
            opts.uid = p.get("uid").and_then(Value::as_str).map(str::to_string);
            opts.resource_version = p
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            let values: Vec<&str> = d.iter().filter_map(Value::as_str).collect();
            opts.dry_run |= dry_run_values(&values)?;
        }
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            policy = Some(p.to_string());
        }
        if let Some(o) = v.get("orphanDependents").filter(|o| !o.is_null()) {
            orphan_dependents = Some(
                o.as_bool()
                    .ok_or_else(|| ApiError::bad_request("orphanDependents must be a boolean"))?,
            );
        }
    }
    if let Some(p) = &policy {
        let Some(parsed) = crate::registry::gc::Propagation::parse(p) else {
            return Err(ApiError::unprocessable(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: {p:?}: \
                 supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            )));
        };
        if orphan_dependents.is_some() {
            // upstream ValidateDeleteOptions
            return Err(ApiError::unprocessable(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: {p:?}: \
                 orphanDependents and deletionPropagation cannot be both set"
            )));
        }
        opts.policy.propagation = Some(parsed);
    }
    opts.policy.orphan_dependents = orphan_dependents;
    Ok(opts)
}

/// `componentstatuses`, computed on read (list or one by name).
fn component_statuses(
    st: &ServerState,
    name: Option<&str>,
    format: Format,
    query: &Query,
) -> Result<Response, ApiError> {
    use crate::registry::builtin_kinds;
    let lease_info = crate::registry::resources::find("coordination.k8s.io", "v1", "leases").expect("served");
    let (lease_ns, lease_name) = builtin_kinds::CONTROLLER_MANAGER_LEASE;
    let lease = st.registry.get(lease_info, Some(lease_ns), lease_name).ok();
    let info = crate::registry::resources::find("", "v1", "componentstatuses").expect("served");
    let revision = st.registry.storage().revision();
    let items: Vec<Arc<Stored>> =
        builtin_kinds::component_statuses(lease.map(|l| l.value()).as_ref(), jiff::Timestamp::now())
            .into_iter()
            .filter(|c| name.is_none_or(|n| c["metadata"]["name"] == n))
            .map(|c| Arc::new(Stored::new(revision, c)))
            .collect();
    let resp = match name {
        Some(n) => match items.first() {
            Some(obj) => single(info, obj, format, query)?,
            None => return Err(ApiError::not_found(info.plural, info.group, n)),
        },
        None => match format {
            Format::Json => json_response(StatusCode::OK, list_bytes(info, &items, revision, None, None)),
            Format::Metadata { .. } => metadata_list(&format, &items, revision, None, None)?,
            Format::Table => {
                let include =
                    IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
                let values: Vec<Value> = items.iter().map(|i| i.value()).collect();
                let objs: Vec<&Value> = values.iter().collect();
                let t = to_table(
                    info,
                    &objs,
                    &revision.to_string(),
                    None,
                    jiff::Timestamp::now(),
                    include,
                    true,
                );
                json_value(StatusCode::OK, &t)
            }
        },
    };
    Ok(with_warning(resp, builtin_kinds::COMPONENT_STATUS_DEPRECATED))
}

/// A Table of objects: the kind's printer, or a custom resource's printer columns.
pub(crate) fn to_table(
    info: &ResourceInfo,
    objs: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now: jiff::Timestamp,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    match crate::crd::custom(info) {
        Some(c) => crate::crd::printer::table(
            &c.columns,
            objs,
            resource_version,
            continue_token,
            now,
            include,
            with_columns,
        ),
        None => table::table(
            Printer::for_resource(info.group, info.plural),
            objs,
            resource_version,
            continue_token,
            now,
            include,
            with_columns,
        ),
    }
}

fn single(info: &ResourceInfo, obj: &Stored, format: Format, query: &Query) -> Result<Response, ApiError> {
    match format {
        Format::Json => Ok(json_response(StatusCode::OK, obj.bytes.clone())),
        Format::Metadata { .. } => {
            let version = format.check_metadata(false).map_err(ApiError::not_acceptable)?;
            let partial = request::partial_object_metadata(&obj.value(), version.unwrap_or("v1"));
            Ok(json_value(StatusCode::OK, &partial))
        }
        Format::Table => {
            let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
            let t = to_table(
                info,
                &[&obj.value()],
                &obj.revision.to_string(),
                None,
                jiff::Timestamp::now(),
                include,
                true,
            );
            Ok(json_value(StatusCode::OK, &t))
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    start: String,
}

fn encode_continue(rv: u64, start: &str) -> String {
    let t = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.to_string(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).expect("JSON serialises"))
}

fn decode_continue(token: &str, prefix: &str) -> Result<String, ApiError> {
    let bad =
        || ApiError::bad_request("continue key is not valid: the provided continue parameter is malformed");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if t.v != "meta.k8s.io/v1" || !t.start.starts_with(prefix) {
        return Err(bad());
    }
    Ok(t.start)
}

fn list(
    st: &ServerState,
    info: &ResourceInfo,
    ns: Option<&str>,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    if query.flag("sendInitialEvents")? {
        return Err(ApiError::unprocessable(
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    if let Some(rv) = query.get("resourceVersion").filter(|s| !s.is_empty()) {
        rv.parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?;
    }
    let sel = selection(info, query, None)?;
    let limit = query.int("limit")?.filter(|l| *l > 0).map(|l| l as usize);
    let prefix = info.prefix(ns);
    let start = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(decode_continue(c, &prefix)?),
        None => None,
    };
    let result = st.registry.list(info, ns, &sel, limit, start.as_deref());
    let cont = result
        .next_key
        .as_deref()
        .map(|k| encode_continue(result.revision, k));
    let remaining = if sel.labels.is_none() && sel.fields.is_none() && cont.is_some() {
        Some(result.remaining)
    } else {
        None
    };
    match format {
        Format::Json => Ok(json_response(
            StatusCode::OK,
            list_bytes(info, &result.items, result.revision, cont.as_deref(), remaining),
        )),
        Format::Metadata { .. } => metadata_list(
            &format,
            &result.items,
            result.revision,
            cont.as_deref(),
            remaining,
        ),
        Format::Table => {
            let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
            let values: Vec<Value> = result.items.iter().map(|o| o.value()).collect();
            let objs: Vec<&Value> = values.iter().collect();
            let t = to_table(
                info,
                &objs,
                &result.revision.to_string(),
                cont.as_deref(),
                jiff::Timestamp::now(),
                include,
                true,
            );
            Ok(json_value(StatusCode::OK, &t))
        }
    }
}

/// A `PartialObjectMetadataList` of `items` (the metadata-only list answer).
fn metadata_list(
    format: &Format,
    items: &[Arc<Stored>],
    revision: u64,
    cont: Option<&str>,
    remaining: Option<usize>,
) -> Result<Response, ApiError> {
    let version = format
        .check_metadata(true)
        .map_err(ApiError::not_acceptable)?
        .unwrap_or("v1");
    let items: Vec<Bytes> = items
        .iter()
        .map(|o| {
            Bytes::from(crate::encode::to_vec(&request::partial_object_metadata(
                &o.value(),
                version,
            )))
        })
        .collect();
    let list = ListHead {
        kind: "PartialObjectMetadataList",
        api_version: &format!("meta.k8s.io/{version}"),
        revision,
        cont,
        remaining,
    };
    Ok(json_response(StatusCode::OK, list.body(&items)))
}

/// A `<Kind>List`, assembled from the stored bytes without re-serialising the items.
fn list_bytes(
    info: &ResourceInfo,
    items: &[Arc<Stored>],
    revision: u64,
    cont: Option<&str>,
    remaining: Option<usize>,
) -> Bytes {
    let items: Vec<Bytes> = items.iter().map(|i| i.bytes.clone()).collect();
    let head = ListHead {
        kind: &info.list_kind(),
        api_version: &info.api_version(),
        revision,
        cont,
        remaining,
    };
    head.body(&items)
}

/// What a list body says besides its items.
struct ListHead<'a> {
    kind: &'a str,
    api_version: &'a str,
    revision: u64,
    cont: Option<&'a str>,
    remaining: Option<usize>,
}

impl ListHead<'_> {
    /// `{"kind":..,"apiVersion":..,"metadata":..,"items":[..]}` and a newline, items as they are.
    fn body(&self, items: &[Bytes]) -> Bytes {
        let mut meta = json!({"resourceVersion": self.revision.to_string()});
        if let Some(c) = self.cont {
            meta["continue"] = json!(c);
        }
        if let Some(r) = self.remaining {
            meta["remainingItemCount"] = json!(r);
        }
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
            Value::String(self.kind.to_string()),
            Value::String(self.api_version.to_string()),
            meta
        );
        let size = head.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + 3;
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(head.as_bytes());
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item);
        }
        out.extend_from_slice(b"]}\n");
        Bytes::from(out)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(&self)
    }
}
