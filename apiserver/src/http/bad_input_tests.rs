//! Property tests of what the HTTP layer decodes from a request, through the real handler over the in-memory
//! store: query parameters (limit, continue, resourceVersion, timeoutSeconds, watch, selectors, dry run,
//! deletion options...), `Accept` headers, and bodies (random bytes, JSON, YAML, protobuf, whole or mutated
//! from valid documents) under every content type, the four patch types included, on pods and ConfigMaps.
//! Whatever comes in, the answer is below 500, and a 4xx is a `metav1.Status` carrying that code.
//! (`tests/bad_input.rs` sends the same kind of requests to the binary over HTTPS.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use http_body_util::BodyExt;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ServerState;
use crate::registry::{Registry, WriteOptions, resources};
use crate::storage::{MemoryStore, Storage};
use crate::user::{UserInfo, on_behalf_of};
use crate::watch::HubConfig;

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web"},"annotations":{"a":"b"}},"spec":{"nodeName":"n1","terminationGracePeriodSeconds":30,"containers":[{"name":"c","image":"busybox","command":["sleep","3600"],"env":[{"name":"A","value":"1"}],"ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"limits":{"cpu":"100m","memory":"64Mi"}}}],"volumes":[{"name":"v","emptyDir":{}}],"tolerations":[{"key":"k","operator":"Exists"}]}}"#;
const CONFIG_MAP: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"app":"web"}},"data":{"a":"1","b":"two"},"binaryData":{"bin":"AAEC"}}"#;

/// Protobuf bodies kubectl sent, to mutate.
const PROTOBUF: &[&[u8]] = &[
    include_bytes!("../protobuf/testdata/create_configmap.pb"),
    include_bytes!("../protobuf/testdata/create_configmap_binary.pb"),
    include_bytes!("../protobuf/testdata/create_deployment.pb"),
    include_bytes!("../protobuf/testdata/create_secret_generic.pb"),
    include_bytes!("../protobuf/testdata/create_namespace.pb"),
];

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+json",
    "",
    "text/plain",
    "application/json; charset=utf-8",
];

const ACCEPTS: &[&str] = &[
    "",
    "application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
    "application/vnd.kubernetes.protobuf",
    "application/json;as=Table;g=meta.k8s.io",
    "text/html;q=0.9",
];

const QUERY_KEYS: &[&str] = &[
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "watch",
    "labelSelector",
    "fieldSelector",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
    "includeObject",
    "pretty",
];

/// Numbers at and past i64's edges (the edges thrice as likely), and near misses.
const INTEGERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "30",
    "9223372036854775807",
    "9223372036854775807",
    "9223372036854775807",
    "-9223372036854775808",
    "-9223372036854775808",
    "9223372036854775808",
    "99999999999",
    "1e3",
    " 5",
    "",
];

/// Go's booleans and near misses.
const BOOLEANS: &[&str] = &["true", "True", "t", "1", "false", "0", "", "yes", "2"];

/// The enumerated parameters' values and near misses.
const ENUMS: &[&str] = &[
    "All",
    "all",
    "Strict",
    "Warn",
    "Ignore",
    "Foreground",
    "Background",
    "Orphan",
    "nil",
    "NotOlderThan",
    "Exact",
    "None",
    "Metadata",
    "Object",
    "",
];

/// Continue tokens: well formed (`{"v":"meta.k8s.io/v1","rv":1,"start":"default/p"}`, and a start outside
/// the collection) and not.
const CONTINUES: &[&str] = &[
    "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJkZWZhdWx0L3AifQ",
    "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIvIn0",
    "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==",
    "e30",
    "!!",
];

/// A value for the query parameter `key`: mostly of its kind, sometimes any text.
fn query_value(key: &'static str) -> BoxedStrategy<String> {
    let typed = match key {
        "limit" | "resourceVersion" | "timeoutSeconds" | "gracePeriodSeconds" => {
            select(INTEGERS).prop_map(String::from).boxed()
        }
        "labelSelector" | "fieldSelector" => vec(select(PIECES), 0..8).prop_map(|p| p.concat()).boxed(),
        "continue" => select(CONTINUES).prop_map(String::from).boxed(),
        "dryRun" | "fieldValidation" | "propagationPolicy" | "resourceVersionMatch" | "includeObject" => {
            select(ENUMS).prop_map(String::from).boxed()
        }
        "fieldManager" => text(),
        _ => select(BOOLEANS).prop_map(String::from).boxed(),
    };
    prop_oneof![4 => typed, 1 => text()].boxed()
}

/// Pieces of selectors, JSON keys and text.
const PIECES: &[&str] = &[
    "app",
    "web",
    "a.io/b",
    "x",
    "=",
    "==",
    "!=",
    "in",
    "notin",
    "(",
    ")",
    ",",
    "!",
    ">",
    "<",
    "1",
    "-2",
    " ",
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "status.phase",
    "\\",
    "\\,",
    "é",
    "日本",
    "\u{0}",
    "%",
    "%zz",
    "&",
    "+",
    "/",
    "$patch",
    "{",
    "}",
];

fn text() -> BoxedStrategy<String> {
    prop_oneof!["\\PC{0,12}", vec(select(PIECES), 0..8).prop_map(|p| p.concat()),].boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    const KEYS: &[&str] = &[
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "labels",
        "annotations",
        "finalizers",
        "resourceVersion",
        "uid",
        "deletionTimestamp",
        "managedFields",
        "generateName",
        "spec",
        "containers",
        "image",
        "nodeName",
        "terminationGracePeriodSeconds",
        "data",
        "binaryData",
        "status",
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$deleteFromPrimitiveList/finalizers",
        "op",
        "path",
        "value",
        "from",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(
                prop_oneof![4 => select(KEYS).prop_map(String::from), 1 => text()],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Walks `path` (each step an index into the children, modulo their count) and there removes a key, adds
/// one, empties a list or replaces the value.
fn mutate(mut doc: Value, path: &[usize], action: u8, key: String, replacement: Value) -> Value {
    mutate_at(&mut doc, path, action, key, replacement);
    doc
}

fn mutate_at(cur: &mut Value, path: &[usize], action: u8, key: String, replacement: Value) {
    if let Some((step, rest)) = path.split_first() {
        match cur {
            Value::Object(m) if !m.is_empty() => {
                let n = m.len();
                let child = m.values_mut().nth(step % n).expect("in range");
                return mutate_at(child, rest, action, key, replacement);
            }
            Value::Array(a) if !a.is_empty() => {
                let n = a.len();
                return mutate_at(&mut a[step % n], rest, action, key, replacement);
            }
            _ => {}
        }
    }
    match (action % 4, cur) {
        (0, Value::Object(m)) if !m.is_empty() => {
            let k = m.keys().next().cloned().expect("not empty");
            m.remove(&k);
        }
        (1, Value::Object(m)) => {
            m.insert(key, replacement);
        }
        (2, Value::Array(a)) => a.clear(),
        (_, cur) => *cur = replacement,
    }
}

/// A valid pod or ConfigMap, changed in one place.
fn mutated_document() -> BoxedStrategy<Value> {
    (
        select(vec![POD, CONFIG_MAP]),
        vec(any::<usize>(), 0..6),
        any::<u8>(),
        text(),
        json_value(),
    )
        .prop_map(|(doc, path, action, key, replacement)| {
            mutate(
                serde_json::from_str(doc).expect("valid"),
                &path,
                action,
                key,
                replacement,
            )
        })
        .boxed()
}

/// RFC 6902 operations, mostly well formed.
fn json_patch() -> BoxedStrategy<Value> {
    let op = (
        select(vec!["add", "remove", "replace", "move", "copy", "test", "bogus"]),
        select(vec![
            "/metadata/labels/x",
            "/metadata/name",
            "/metadata/resourceVersion",
            "/metadata/finalizers/0",
            "/spec/containers/0/image",
            "/spec/containers/-",
            "/spec/containers/99",
            "/spec/terminationGracePeriodSeconds",
            "/data/a",
            "",
            "/",
            "~1/~2",
            "x",
        ]),
        proptest::option::of(json_value()),
        proptest::option::of(select(vec!["/metadata/labels", "/data", "/nope"])),
    )
        .prop_map(|(op, path, value, from)| {
            let mut o = json!({"op": op, "path": path});
            if let Some(v) = value {
                o["value"] = v;
            }
            if let Some(f) = from {
                o["from"] = json!(f);
            }
            o
        });
    vec(op, 0..4).prop_map(Value::Array).boxed()
}

/// A kubectl protobuf body with one to three bytes changed, inserted or cut off.
fn mutated_protobuf() -> BoxedStrategy<Vec<u8>> {
    (
        select(PROTOBUF.to_vec()),
        vec((any::<Index>(), any::<u8>(), 0..3u8), 1..4),
    )
        .prop_map(|(pb, edits)| {
            let mut pb = pb.to_vec();
            for (at, byte, how) in edits {
                if pb.is_empty() {
                    break;
                }
                let i = at.index(pb.len());
                match how {
                    0 => pb[i] = byte,
                    1 => pb.insert(i, byte),
                    _ => pb.truncate(i),
                }
            }
            pb
        })
        .boxed()
}

fn body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), 0..200),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        3 => mutated_document().prop_map(|v| v.to_string().into_bytes()),
        1 => mutated_document().prop_map(|v| serde_norway::to_string(&v).unwrap_or_default().into_bytes()),
        1 => (mutated_document(), any::<Index>()).prop_map(|(v, at)| {
            let text = v.to_string().into_bytes();
            text[..at.index(text.len() + 1)].to_vec()
        }),
        1 => json_patch().prop_map(|v| v.to_string().into_bytes()),
        1 => mutated_protobuf(),
    ]
    .boxed()
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn query() -> BoxedStrategy<String> {
    let pair = select(QUERY_KEYS).prop_flat_map(|k| query_value(k).prop_map(move |v| (k, v)));
    (
        vec(pair, 0..6),
        proptest::option::of(select(vec!["%zz", "%", "a", "=x", "&&", "watch"])),
    )
        .prop_map(|(pairs, raw)| {
            let mut q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
            q.extend(raw.map(String::from));
            q.join("&")
        })
        .boxed()
}

/// One request: method, path (`NAME` standing for the case's object), query, content type, accept, body.
#[derive(Debug, Clone)]
struct Req {
    method: &'static str,
    path: &'static str,
    query: String,
    content_type: &'static str,
    accept: &'static str,
    body: Vec<u8>,
}

const READ_PATHS: &[&str] = &[
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/pods",
    "/api/v1/configmaps",
    "/api/v1/namespaces/default/pods/NAME",
    "/api/v1/namespaces/default/configmaps/NAME",
];

const WRITE_PATHS: &[&str] = &[
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/pods/NAME",
    "/api/v1/namespaces/default/pods/NAME/status",
    "/api/v1/namespaces/default/configmaps/NAME",
];

/// GET (list, get, watch) and DELETE with random query strings and `Accept` headers.
fn read_or_delete() -> BoxedStrategy<Req> {
    (
        select(vec!["GET", "GET", "DELETE"]),
        select(READ_PATHS),
        query(),
        // Half the reads are watches.
        any::<bool>(),
        select(ACCEPTS),
        prop_oneof![
            3 => Just(Vec::new()),
            1 => json_value().prop_map(|v| json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "gracePeriodSeconds": v.clone(), "propagationPolicy": v, "preconditions": {"uid": "x"}})
                .to_string().into_bytes()),
            1 => body(),
        ],
    )
        .prop_map(|(method, path, query, watch, accept, body)| Req {
            method,
            path,
            query: match (watch, query.is_empty()) {
                (false, _) => query,
                (true, true) => "watch=true".into(),
                (true, false) => format!("watch=true&{query}"),
            },
            content_type: "application/json",
            accept,
            body: if method == "DELETE" { body } else { Vec::new() },
        })
        .boxed()
}

/// POST, PUT and PATCH with random bodies under every content type (mostly patch types for PATCH).
fn write() -> BoxedStrategy<Req> {
    (
        select(vec!["POST", "PUT", "PATCH", "PATCH"]),
        select(WRITE_PATHS),
        prop_oneof![3 => Just(String::new()), 1 => query()],
        select(CONTENT_TYPES),
        select(&CONTENT_TYPES[3..8]),
        body(),
    )
        .prop_map(|(method, path, query, any_type, patch_type, body)| Req {
            method,
            path,
            query,
            content_type: if method == "PATCH" { patch_type } else { any_type },
            accept: "",
            body,
        })
        .boxed()
}

/// The API server's handler over the in-memory store, and a fresh pod (bound to a node, so deletes are
/// graceful) and ConfigMap for each case.
struct Server {
    rt: tokio::runtime::Runtime,
    state: Arc<ServerState>,
    next: AtomicUsize,
    _pki: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let pki = tempfile::tempdir().expect("a temp dir");
        let storage =
            Storage::open(Arc::new(MemoryStore::default()), HubConfig::default()).expect("memory storage");
        let registry = Registry::new(storage);
        rt.block_on(registry.bootstrap()).expect("bootstrap");
        let signer = crate::serviceaccount::Signer::load_or_create(pki.path()).expect("a signer");
        let state = Arc::new(ServerState {
            registry,
            token: "token".into(),
            cancel: CancellationToken::new(),
            server_address: "127.0.0.1:6443".into(),
            node_token: None,
            tokens: Arc::new(crate::serviceaccount::Tokens::new(signer)),
        });
        Server {
            rt,
            state,
            next: AtomicUsize::new(0),
            _pki: pki,
        }
    }

    /// Sends `req` as the admin; returns the status and, for an error, the body. A watch's stream is read
    /// for a moment: one that ends with neither an ERROR event nor its timeout died (its task panicked).
    async fn send(
        &self,
        method: &str,
        uri: &str,
        content_type: &str,
        accept: &str,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>) {
        let mut b = Request::builder().method(method).uri(uri);
        if !content_type.is_empty() {
            b = b.header(http::header::CONTENT_TYPE, content_type);
        }
        if !accept.is_empty() {
            b = b.header(http::header::ACCEPT, accept);
        }
        let req = b.body(Body::from(body)).expect("a request");
        let resp = on_behalf_of(UserInfo::admin(), super::handle(State(self.state.clone()), req)).await;
        let status = resp.status().as_u16();
        if status >= 400 {
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes().to_vec())
                .unwrap_or_default();
            return (status, body);
        }
        let query = uri.split_once('?').map(|(_, q)| q);
        let watching = method == "GET" && super::Query::parse(query).flag("watch").unwrap_or(false);
        if watching {
            let mut body = resp.into_body();
            let mut last = Vec::new();
            loop {
                match tokio::time::timeout(std::time::Duration::from_millis(10), body.frame()).await {
                    // Still watching.
                    Err(_) => break,
                    Ok(Some(Ok(frame))) => {
                        if let Some(data) = frame.data_ref() {
                            last = data.to_vec();
                        }
                    }
                    Ok(Some(Err(e))) => panic!("the watch stream failed: {e}"),
                    Ok(None) => {
                        let text = String::from_utf8_lossy(&last[..last.len().min(300)]);
                        assert!(
                            text.contains(r#"{"type":"ERROR""#),
                            "the watch ended at once without an ERROR event; last: {text}"
                        );
                        break;
                    }
                }
            }
        }
        (status, Vec::new())
    }

    /// Makes this case's objects, sends `req` at them and checks the answer.
    fn check(&self, req: &Req) -> Result<(), TestCaseError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.rt.block_on(async {
            let opts = WriteOptions::default();
            for (plural, doc, name) in [
                ("pods", POD, format!("p{n}")),
                ("configmaps", CONFIG_MAP, format!("c{n}")),
            ] {
                let info = resources::all()
                    .into_iter()
                    .find(|r| r.group.is_empty() && r.plural == plural)
                    .expect("served");
                let mut v: Value = serde_json::from_str(doc).expect("valid");
                v["metadata"]["name"] = json!(name);
                self.state
                    .registry
                    .create(info, Some("default"), v, &opts)
                    .await
                    .expect("the case's objects");
            }
            let name = if req.path.contains("/pods/") {
                format!("p{n}")
            } else {
                format!("c{n}")
            };
            let path = req.path.replace("NAME", &name);
            let uri = if req.query.is_empty() {
                path
            } else {
                format!("{path}?{}", req.query)
            };
            let (status, body) = self
                .send(req.method, &uri, req.content_type, req.accept, req.body.clone())
                .await;
            prop_assert!(status < 500, "{status} {}", String::from_utf8_lossy(&body));
            if status >= 400 {
                let s: Value = serde_json::from_slice(&body).map_err(|e| {
                    TestCaseError::fail(format!("{status} with a body that is not JSON ({e}): {body:?}"))
                })?;
                prop_assert_eq!(&s["kind"], "Status", "{}", s);
                prop_assert_eq!(&s["code"], status, "{}", s);
            }
            Ok(())
        })
    }
}

fn run(cases: u32, strategy: BoxedStrategy<Req>) {
    let server = Server::start();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, |req| server.check(&req)) {
        panic!("{e}");
    }
}

#[test]
fn random_queries_and_accept_headers_get_statuses_never_a_500() {
    run(800, read_or_delete());
}

#[test]
fn random_bodies_of_every_content_type_get_statuses_never_a_500() {
    run(1500, write());
}

/// Regression: the watch's deadline was now + timeoutSeconds, which panics past what the clock holds, so
/// `timeoutSeconds=9223372036854775807` ended the stream at once (its task panicked) instead of watching.
#[test]
fn a_watch_with_a_timeout_beyond_the_clock_still_delivers_events() {
    let server = Server::start();
    server.rt.block_on(async {
        let rv = server.state.registry.storage().revision();
        let uri = format!(
            "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds={}&resourceVersion={rv}",
            i64::MAX
        );
        let req = Request::builder()
            .uri(uri)
            .body(Body::empty())
            .expect("a request");
        let resp = on_behalf_of(UserInfo::admin(), super::handle(State(server.state.clone()), req)).await;
        assert_eq!(resp.status(), 200);
        let info = resources::all()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == "configmaps")
            .expect("served");
        let mut cm: Value = serde_json::from_str(CONFIG_MAP).expect("valid");
        cm["metadata"]["name"] = json!("after");
        server
            .state
            .registry
            .create(info, Some("default"), cm, &WriteOptions::default())
            .await
            .expect("created");
        let mut body = resp.into_body();
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), body.frame())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .expect("a frame");
        let line = String::from_utf8_lossy(frame.data_ref().expect("data")).to_string();
        assert!(line.starts_with(r#"{"type":"ADDED""#), "{line}");
    });
}

/// The same decoders one function at a time, with inputs the handler would refuse earlier.
mod functions {
    use axum::http::{HeaderMap, HeaderValue, header};

    use super::*;
    use crate::http::{Query, decode_continue, decode_object, delete_options, discovery, request, selection};

    const SEGMENTS: &[&str] = &[
        "api",
        "apis",
        "v1",
        "apps",
        "namespaces",
        "default",
        "pods",
        "p",
        "status",
        "log",
        "exec",
        "watch",
        "configmaps",
        "deployments",
        "scale",
        "finalize",
        "openapi",
        "v2",
        "v3",
        "version",
        "healthz",
        "livez",
        "",
        "..",
        "%2F",
        "%zz",
        "é",
    ];

    fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            vec(select(SEGMENTS), 0..8).prop_map(|s| format!("/{}", s.join("/"))),
        ]
    }

    fn pods() -> &'static crate::registry::ResourceInfo {
        resources::all()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == "pods")
            .expect("served")
    }

    proptest! {
        #[test]
        fn paths_route_without_panicking(p in path()) {
            let _ = request::route(&p);
        }

        #[test]
        fn accept_headers_negotiate_without_panicking(accept in prop_oneof![any::<String>(), select(ACCEPTS).prop_map(String::from)]) {
            let _ = request::negotiate(Some(&accept));
            let _ = discovery::negotiate(Some(&accept));
        }

        #[test]
        fn query_strings_decode_or_fail_without_panicking(q in prop_oneof![any::<String>(), query()]) {
            let query = Query::parse(Some(&q));
            for key in QUERY_KEYS {
                let _ = query.flag(key);
                let _ = query.int(key);
            }
            let _ = query.write_options(&HeaderMap::new());
            let _ = delete_options(&query, &HeaderMap::new(), b"");
            let _ = selection(pods(), &query, None);
            let _ = selection(pods(), &query, Some("p,=\\x"));
            if let Some(token) = query.get("continue") {
                let _ = decode_continue(token, "/registry/pods/default/");
            }
        }

        #[test]
        fn continue_tokens_decode_or_fail_without_panicking(token in prop_oneof![any::<String>(), select(CONTINUES).prop_map(String::from)]) {
            let _ = decode_continue(&token, "default/");
        }

        #[test]
        fn bodies_decode_or_fail_as_a_4xx_without_panicking(content_type in select(CONTENT_TYPES), bytes in body()) {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            if let Err(e) = decode_object(&headers, &bytes) {
                prop_assert!((400..500).contains(&e.code), "{}", e);
            }
            if let Err(e) = delete_options(&Query::parse(None), &headers, &bytes) {
                prop_assert!((400..500).contains(&e.code), "{}", e);
            }
        }
    }
}
