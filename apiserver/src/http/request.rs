//! Pure request parsing: which route a path names, lenient query values, content negotiation.

use percent_encoding::percent_decode_str;

use crate::registry::{ResourceInfo, resources};

/// What a request path names.
#[derive(Debug, PartialEq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/api`
    Api,
    /// `/apis`
    Apis,
    /// `/apis/<group>`
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`
    GroupVersion(String, String),
    /// `/healthz`, `/livez`, `/readyz` (and their `/<check>` children)
    Health(String),
    /// `/openapi/v2`
    OpenApiV2,
    /// `/openapi/v3`
    OpenApiIndex,
    /// `/openapi/v3/<path>`
    OpenApiDoc(String),
    /// A resource request.
    Resource(ResourceRequest),
    /// An authorization or authentication review (POST only, never stored).
    Review(&'static super::reviews::Review),
    /// A namespaced review (LocalSubjectAccessReview) and its namespace.
    LocalReview(&'static super::reviews::Review, String),
    /// Nothing we serve.
    NotFound,
}

/// A request for objects of one resource.
#[derive(Debug, PartialEq)]
pub struct ResourceRequest {
    /// The resource.
    pub info: &'static ResourceInfo,
    /// The namespace from the path.
    pub namespace: Option<String>,
    /// The object name, for item requests.
    pub name: Option<String>,
    /// The subresource (`status`, `binding`, ...).
    pub subresource: Option<String>,
    /// Came through the deprecated `/watch/` prefix.
    pub watch_prefix: bool,
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Parse a request path.
pub fn route(path: &str) -> Route {
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        [h @ ("healthz" | "livez" | "readyz"), rest @ ..] if rest.len() <= 1 => Route::Health(h.to_string()),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Route::OpenApiDoc(rest.join("/")),
        ["api", "v1", rest @ ..] => resource_route("", "v1", rest),
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v]
            if super::reviews::find(g, v, "").is_none()
                && super::reviews::groups().iter().any(|(rg, rv)| rg == g && rv == v) =>
        {
            Route::GroupVersion(g.to_string(), v.to_string())
        }
        ["apis", g, v, plural] if super::reviews::find(g, v, plural).is_some_and(|r| !r.namespaced) => {
            Route::Review(super::reviews::find(g, v, plural).expect("checked"))
        }
        ["apis", g, v, "namespaces", ns, plural]
            if super::reviews::find(g, v, plural).is_some_and(|r| r.namespaced) =>
        {
            Route::LocalReview(
                super::reviews::find(g, v, plural).expect("checked"),
                ns.to_string(),
            )
        }
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        _ => Route::NotFound,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let served = resources::all()
        .into_iter()
        .any(|r| r.group == group && r.version == version);
    if !served {
        return Route::NotFound;
    }
    let (watch_prefix, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let find = |plural: &str| resources::find(group, version, plural);
    let req = |info: &'static ResourceInfo, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourceRequest {
            info,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
            watch_prefix,
        })
    };
    let namespaces = resources::find("", "v1", "namespaces");
    match rest {
        [] if !watch_prefix => Route::GroupVersion(group.to_string(), version.to_string()),
        // /api/v1/namespaces/<ns> is the Namespace itself; /namespaces/<ns>/status|finalize its subresources.
        ["namespaces", ns] if group.is_empty() => req(namespaces.expect("served"), None, Some(ns), None),
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            req(namespaces.expect("served"), None, Some(ns), Some(sub))
        }
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => match find(plural) {
            Some(info) if info.namespaced => req(info, Some(ns), tail.first().copied(), tail.get(1).copied()),
            _ => Route::NotFound,
        },
        [plural, tail @ ..] if tail.len() <= 2 => match find(plural) {
            // A namespaced resource at cluster scope: only the all-namespaces collection exists.
            Some(info) if info.namespaced && tail.is_empty() => req(info, None, None, None),
            Some(info) if !info.namespaced => req(info, None, tail.first().copied(), tail.get(1).copied()),
            _ => Route::NotFound,
        },
        _ => Route::NotFound,
    }
}

/// The verb of a request on a resource's main path (upstream's `RequestInfoFactory`): `list` and
/// `watch` on collections, `get` and `watch` on items, `create` on POST, and so on.
pub fn verb(method: &http::Method, item: bool, watching: bool) -> &'static str {
    use http::Method;
    match (method, item, watching) {
        (&Method::GET | &Method::HEAD, _, true) => "watch",
        (&Method::GET | &Method::HEAD, false, false) => "list",
        (&Method::GET | &Method::HEAD, true, false) => "get",
        (&Method::POST, _, _) => "create",
        (&Method::PUT, _, _) => "update",
        (&Method::PATCH, _, _) => "patch",
        (&Method::DELETE, false, _) => "deletecollection",
        (&Method::DELETE, true, _) => "delete",
        _ => "",
    }
}

/// Go's `strconv.ParseBool`, which upstream uses for query booleans (Python sends `True`).
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The response format a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON objects.
    Json,
    /// `meta.k8s.io/v1` Table.
    Table,
    /// Metadata only: `PartialObjectMetadata` (`list: false`) or `PartialObjectMetadataList` of
    /// `meta.k8s.io/<version>` (`v1` or `v1beta1`).
    Metadata {
        /// The client asked for the list kind.
        list: bool,
        /// `v1` or `v1beta1`.
        version: &'static str,
    },
}

impl Format {
    /// Whether this is the metadata-only view; `Err` (a 406 message, upstream's) when it names the list
    /// kind for a single object or the other way round.
    pub fn check_metadata(self, is_list: bool) -> Result<Option<&'static str>, String> {
        match self {
            Format::Metadata { list, version } if list == is_list => Ok(Some(version)),
            Format::Metadata { list: true, .. } => {
                Err("you requested PartialObjectMetadataList, but the requested object is not a list".into())
            }
            Format::Metadata { list: false, .. } => {
                Err("you requested PartialObjectMetadata, but the requested object is a list".into())
            }
            _ => Ok(None),
        }
    }
}

/// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<version>","metadata":...}` of an object.
pub fn partial_object_metadata(obj: &serde_json::Value, version: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
    })
}

/// Pick the first acceptable alternative of an `Accept` header (parameters in any order).
pub fn negotiate(accept: Option<&str>) -> Result<Format, String> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    let mut saw_protobuf_only = true;
    for alt in accept.split(',') {
        let mut parts = alt.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let (mut as_, mut g, mut v) = (None, None, None);
        for p in parts {
            if let Some((k, val)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = Some(val.trim().to_string()),
                    "g" => g = Some(val.trim().to_string()),
                    "v" => v = Some(val.trim().to_string()),
                    _ => {}
                }
            }
        }
        let json_like = matches!(media.as_str(), "application/json" | "application/*" | "*/*" | "*");
        if !json_like {
            continue;
        }
        saw_protobuf_only = false;
        match as_.as_deref() {
            None => return Ok(Format::Json),
            Some("Table")
                if g.as_deref() == Some("meta.k8s.io") && matches!(v.as_deref(), Some("v1" | "v1beta1")) =>
            {
                return Ok(Format::Table);
            }
            Some(kind @ ("PartialObjectMetadata" | "PartialObjectMetadataList"))
                if g.as_deref() == Some("meta.k8s.io") =>
            {
                let version = match v.as_deref() {
                    Some("v1") => "v1",
                    Some("v1beta1") => "v1beta1",
                    _ => continue,
                };
                return Ok(Format::Metadata {
                    list: kind == "PartialObjectMetadataList",
                    version,
                });
            }
            _ => {}
        }
    }
    if saw_protobuf_only {
        Err("only the following media types are accepted: application/json, application/yaml".into())
    } else {
        Err("only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, \
             application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io, \
             application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourceRequest {
        match route(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: expected a resource route, got {other:?}"),
        }
    }

    #[test]
    fn namespace_item_path_is_the_namespace_not_a_collection() {
        let r = res("/api/v1/namespaces/foo");
        assert_eq!(
            (r.info.plural, r.name.as_deref(), r.namespace.as_deref()),
            ("namespaces", Some("foo"), None)
        );
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/foo/pods");
        assert_eq!(
            (r.info.plural, r.namespace.as_deref(), r.name.as_deref()),
            ("pods", Some("foo"), None)
        );
    }

    #[test]
    fn item_and_subresource_paths_parse() {
        let r = res("/api/v1/namespaces/default/pods/nginx/status");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("nginx"), Some("status"))
        );
        let r = res("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1");
        assert_eq!((r.info.kind, r.name.as_deref()), ("Lease", Some("n1")));
        let r = res("/api/v1/nodes/n1/status");
        assert_eq!((r.info.kind, r.subresource.as_deref()), ("Node", Some("status")));
    }

    #[test]
    fn all_namespaces_list_is_only_a_collection() {
        let r = res("/api/v1/pods");
        assert_eq!((r.namespace, r.name), (None, None));
        assert_eq!(route("/api/v1/pods/nginx"), Route::NotFound);
    }

    #[test]
    fn unknown_paths_are_not_found() {
        assert_eq!(route("/api/v1/foos"), Route::NotFound);
        assert_eq!(route("/apis/nope.io/v1/things"), Route::NotFound);
        assert_eq!(route("/api/v2/pods"), Route::NotFound);
        assert_eq!(route("/nothing"), Route::NotFound);
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(route("/api"), Route::Api);
        assert_eq!(route("/api/v1"), Route::GroupVersion("".into(), "v1".into()));
        assert_eq!(
            route("/apis/apps/v1"),
            Route::GroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(route("/apis/apps"), Route::Group("apps".into()));
        assert_eq!(route("/openapi/v2"), Route::OpenApiV2);
    }

    #[test]
    fn reviews_route_cluster_wide_and_local_ones_in_a_namespace() {
        assert!(matches!(
            route("/apis/authorization.k8s.io/v1/subjectaccessreviews"),
            Route::Review(r) if r.kind == "SubjectAccessReview"
        ));
        assert!(matches!(
            route("/apis/authorization.k8s.io/v1/namespaces/dev/localsubjectaccessreviews"),
            Route::LocalReview(r, ns) if r.kind == "LocalSubjectAccessReview" && ns == "dev"
        ));
        assert_eq!(
            route("/apis/authorization.k8s.io/v1/localsubjectaccessreviews"),
            Route::NotFound
        );
    }

    #[test]
    fn deprecated_watch_prefix_is_understood() {
        let r = res("/api/v1/watch/namespaces/default/pods");
        assert!(r.watch_prefix);
        assert_eq!(r.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn booleans_are_parsed_like_go() {
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn table_is_chosen_whatever_the_parameter_order() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(kubectl)), Ok(Format::Table));
        assert_eq!(
            negotiate(Some("application/json;as=Table;g=meta.k8s.io;v=v1")),
            Ok(Format::Table)
        );
        assert_eq!(negotiate(Some("application/json")), Ok(Format::Json));
        assert_eq!(negotiate(None), Ok(Format::Json));
        assert!(negotiate(Some("application/vnd.kubernetes.protobuf")).is_err());
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf, */*")),
            Ok(Format::Json)
        );
    }

    #[test]
    fn metadata_views_are_negotiated_and_unknown_ones_refused() {
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Ok(Format::Metadata {
                list: true,
                version: "v1"
            })
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io"
            )),
            Ok(Format::Metadata {
                list: false,
                version: "v1beta1"
            })
        );
        assert!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9"
            ))
            .is_err()
        );
        assert!(negotiate(Some("application/json;as=Thing;g=example.com;v=v1")).is_err());
        let meta = Format::Metadata {
            list: true,
            version: "v1",
        };
        assert_eq!(meta.check_metadata(true), Ok(Some("v1")));
        assert!(meta.check_metadata(false).is_err());
        assert_eq!(Format::Json.check_metadata(false), Ok(None));
    }
}
