//! OpenAPI v2 (`/openapi/v2`): one Swagger 2.0 document for every served group-version, as JSON or as
//! gnostic's `openapi.v2.Document` protobuf.
//!
//! kubectl asks for it in protobuf (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
//! and `proto.Unmarshal`s whatever comes back, so JSON alone does not do. It does so where OpenAPI v3 has no
//! answer: client-side validation of a `kind: List` file (the v3 verifier reports `v1 List` as not
//! supporting `fieldValidation`, so each item is validated against the v2 schemas) and of kinds the v3
//! verifier cannot map. kube-openapi's v2 parser is strict (every `$ref` under `#/definitions/` must
//! resolve, an array needs `items`, one type per schema), so the document is derived from the very
//! OpenAPI v3 documents we serve (same k8s-openapi schemas, GVK arrays and patch metadata): references
//! are rewritten to `#/definitions/...`, `allOf: [$ref]` wrappers become plain `$ref`s as upstream's v2
//! writes them, `nullable` goes, request bodies become `in: body` parameters. The protobuf form encodes
//! the parts of gnostic's schema such a document uses (`tools`: none; the field numbers are gnostic's
//! `openapiv2/OpenAPIv2.proto`); extension values and defaults travel as YAML (JSON text), as gnostic's
//! `Any.yaml`.
//!
//! Built from `resources::all()` on the first request and again whenever the served kinds change.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::discovery::KUBE_VERSION;
use super::openapi;
use crate::registry::resources;

/// The protobuf media type kubectl asks for (client-go `openAPIV2mimePb`).
pub const PROTOBUF_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The content type upstream answers it with (kube-openapi's handler: Go's `mime` package refuses the
/// `@` of the requested one, and client-go parses the response's content type).
pub const PROTOBUF_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The document in both encodings.
pub struct V2 {
    /// Swagger 2.0 JSON.
    pub json: Bytes,
    /// gnostic `openapi.v2.Document`.
    pub protobuf: Bytes,
}

/// Whether an `Accept` header asks for the protobuf form (either of upstream's two spellings).
pub fn wants_protobuf(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|alt| {
            let media = alt.split(';').next().unwrap_or("").trim();
            media.starts_with("application/com.github.proto-openapi.spec.v2") && media.ends_with("+protobuf")
        })
    })
}

/// The served kinds, as a key that changes when a kind comes or goes or a CRD's schema changes.
fn fingerprint() -> u64 {
    let mut s = crate::crd::generation().to_string();
    for r in resources::all() {
        s.push_str(r.group);
        s.push('/');
        s.push_str(r.version);
        s.push('/');
        s.push_str(r.plural);
        s.push(' ');
    }
    u64::from_str_radix(&openapi::content_hash(s.as_bytes()), 16).unwrap_or(0)
}

/// The current document (built on first use, rebuilt when the served kinds change).
pub fn current() -> Arc<V2> {
    static CACHE: Mutex<Option<(u64, Arc<V2>)>> = Mutex::new(None);
    let key = fingerprint();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, v)) = cache.as_ref()
        && *k == key
    {
        return v.clone();
    }
    let doc = document();
    let v2 = Arc::new(V2 {
        json: Bytes::from(serde_json::to_vec(&doc).expect("JSON serialises")),
        protobuf: Bytes::from(encode_document(&doc)),
    });
    *cache = Some((key, v2.clone()));
    v2
}

/// The Swagger 2.0 document.
pub fn document() -> Value {
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for (g, v) in openapi::group_versions() {
        let v3 = openapi::document(g, v);
        if let Some(schemas) = v3["components"]["schemas"].as_object() {
            for (name, s) in schemas {
                // A kind's schema also appears, without its GVK, in other groups' documents (a PVC in
                // apps/v1 for volumeClaimTemplates): keep every GVK any document gives it.
                let mut s = schema(s);
                if let Some(old) = definitions.get(name) {
                    let gvks = |v: &Value| v[GVK].as_array().cloned().unwrap_or_default();
                    let mut all = gvks(old);
                    all.extend(gvks(&s).into_iter().filter(|g| !gvks(old).contains(g)));
                    if !all.is_empty() {
                        s[GVK] = Value::Array(all);
                    }
                }
                definitions.insert(name.clone(), s);
            }
        }
        if let Some(p) = v3["paths"].as_object() {
            for (path, item) in p {
                paths.insert(path.clone(), path_item(item));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    })
}

const GVK: &str = "x-kubernetes-group-version-kind";

fn v2_ref(r: &str) -> String {
    match r.strip_prefix("#/components/schemas/") {
        Some(name) => format!("#/definitions/{name}"),
        None => r.to_string(),
    }
}

/// An OpenAPI 3.0 schema as a Swagger 2.0 one.
fn schema(s: &Value) -> Value {
    let Value::Object(m) = s else { return s.clone() };
    // `{allOf: [{$ref}], description, default}` → `{$ref, description, default}` (upstream's v2 form).
    if let Some(Value::Array(all)) = m.get("allOf")
        && all.len() == 1
        && all[0].get("$ref").is_some()
        && m.get("type").is_none()
        && m.get("properties").is_none()
    {
        let mut out = Map::new();
        out.insert(
            "$ref".into(),
            json!(v2_ref(all[0]["$ref"].as_str().unwrap_or(""))),
        );
        for (k, v) in m {
            if k != "allOf" && k != "nullable" {
                out.insert(k.clone(), v.clone());
            }
        }
        return Value::Object(out);
    }
    let mut out = Map::new();
    for (k, v) in m {
        let v = match (k.as_str(), v) {
            ("nullable", _) => continue,
            ("$ref", Value::String(r)) => json!(v2_ref(r)),
            // One type per schema in v2 (kube-openapi refuses more).
            ("type", Value::Array(types)) => match types.iter().find(|t| *t != "null") {
                Some(t) => t.clone(),
                None => continue,
            },
            ("properties", Value::Object(props)) => {
                Value::Object(props.iter().map(|(n, p)| (n.clone(), schema(p))).collect())
            }
            ("items" | "additionalProperties" | "not", Value::Object(_)) => schema(v),
            ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(a)) => {
                Value::Array(a.iter().map(schema).collect())
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    if let Some(Value::Array(params)) = item.get("parameters") {
        out.insert(
            "parameters".into(),
            Value::Array(params.iter().map(parameter).collect()),
        );
    }
    for m in METHODS {
        if let Some(op) = item.get(m) {
            out.insert(m.into(), operation(op));
        }
    }
    Value::Object(out)
}

fn parameter(p: &Value) -> Value {
    let mut out = Map::new();
    for k in ["name", "in", "description", "required"] {
        if let Some(v) = p.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    if let Some(Value::Object(s)) = p.get("schema") {
        for (k, v) in s {
            if matches!(k.as_str(), "type" | "format" | "uniqueItems") {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if p.get("in") == Some(&json!("query")) {
        out.insert("uniqueItems".into(), json!(true));
    }
    Value::Object(out)
}

fn operation(op: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in op.as_object().into_iter().flatten() {
        match k.as_str() {
            "parameters" => {
                let mut params: Vec<Value> = v.as_array().into_iter().flatten().map(parameter).collect();
                if let Some(body) = op.get("requestBody") {
                    let content = body["content"].as_object();
                    let s = content
                        .and_then(|c| c.values().next())
                        .map(|c| schema(&c["schema"]))
                        .unwrap_or_else(|| json!({}));
                    params.insert(
                        0,
                        json!({"name": "body", "in": "body", "required": true, "schema": s}),
                    );
                    let consumes: Vec<&String> = content.into_iter().flat_map(|c| c.keys()).collect();
                    out.insert("consumes".into(), json!(consumes));
                }
                out.insert("parameters".into(), Value::Array(params));
            }
            "requestBody" => {}
            "responses" => {
                let mut responses = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut resp = json!({"description": r.get("description").cloned().unwrap_or(json!(""))});
                    if let Some(s) = r["content"].as_object().and_then(|c| c.values().next()) {
                        resp["schema"] = schema(&s["schema"]);
                    }
                    responses.insert(code.clone(), resp);
                }
                out.insert("responses".into(), Value::Object(responses));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert(
        "produces".into(),
        json!([
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf"
        ]),
    );
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// A protobuf message being written (proto3: zero scalars are left out, as Go's encoder does).
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: Option<&Value>) {
        if let Some(s) = s.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.bytes(field, s.as_bytes());
        }
    }

    fn strings(&mut self, field: u32, a: Option<&Value>) {
        for s in a.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(field, s.as_bytes());
            }
        }
    }

    fn message(&mut self, field: u32, m: Pb) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u32, b: Option<&Value>) {
        if b.and_then(Value::as_bool) == Some(true) {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, i: Option<&Value>) {
        if let Some(i) = i.and_then(Value::as_i64).filter(|i| *i != 0) {
            self.key(field, 0);
            self.varint(i as u64);
        }
    }

    fn double(&mut self, field: u32, d: Option<&Value>) {
        if let Some(d) = d.and_then(Value::as_f64).filter(|d| *d != 0.0) {
            self.key(field, 1);
            self.0.extend_from_slice(&d.to_le_bytes());
        }
    }

    /// gnostic `Any`: the value as YAML text (JSON is YAML).
    fn any(&mut self, field: u32, v: &Value) {
        let mut a = Pb::default();
        a.bytes(2, serde_json::to_string(v).expect("JSON serialises").as_bytes());
        self.message(field, a);
    }

    /// `repeated NamedAny vendor_extension`: the `x-` keys.
    fn extensions(&mut self, field: u32, m: &Value) {
        for (k, v) in m.as_object().into_iter().flatten() {
            if k.starts_with("x-") {
                let mut named = Pb::default();
                named.bytes(1, k.as_bytes());
                named.any(2, v);
                self.message(field, named);
            }
        }
    }
}

/// gnostic `openapi.v2.Document`.
pub fn encode_document(d: &Value) -> Vec<u8> {
    let mut pb = Pb::default();
    pb.string(1, d.get("swagger"));
    let mut info = Pb::default();
    info.string(1, d["info"].get("title"));
    info.string(2, d["info"].get("version"));
    pb.message(2, info);
    let mut paths = Pb::default();
    for (name, item) in d["paths"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.bytes(1, name.as_bytes());
        named.message(2, encode_path_item(item));
        paths.message(2, named);
    }
    pb.message(8, paths);
    let mut defs = Pb::default();
    for (name, s) in d["definitions"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.bytes(1, name.as_bytes());
        named.message(2, encode_schema(s));
        defs.message(1, named);
    }
    pb.message(9, defs);
    for req in d["security"].as_array().into_iter().flatten() {
        let mut sr = Pb::default();
        for (name, scopes) in req.as_object().into_iter().flatten() {
            let mut named = Pb::default();
            named.bytes(1, name.as_bytes());
            let mut arr = Pb::default();
            arr.strings(1, Some(scopes));
            named.message(2, arr);
            sr.message(1, named);
        }
        pb.message(12, sr);
    }
    let mut sec_defs = Pb::default();
    for (name, def) in d["securityDefinitions"].as_object().into_iter().flatten() {
        let mut key = Pb::default();
        key.string(1, def.get("type"));
        key.string(2, def.get("name"));
        key.string(3, def.get("in"));
        key.string(4, def.get("description"));
        let mut item = Pb::default();
        item.message(2, key);
        let mut named = Pb::default();
        named.bytes(1, name.as_bytes());
        named.message(2, item);
        sec_defs.message(1, named);
    }
    pb.message(13, sec_defs);
    pb.0
}

fn encode_path_item(item: &Value) -> Pb {
    let mut pb = Pb::default();
    for (field, m) in [(2, "get"), (3, "put"), (4, "post"), (5, "delete"), (8, "patch")] {
        if let Some(op) = item.get(m) {
            pb.message(field, encode_operation(op));
        }
    }
    for p in item["parameters"].as_array().into_iter().flatten() {
        pb.message(9, encode_parameter(p));
    }
    pb.extensions(10, item);
    pb
}

fn encode_operation(op: &Value) -> Pb {
    let mut pb = Pb::default();
    pb.strings(1, op.get("tags"));
    pb.string(3, op.get("description"));
    pb.string(5, op.get("operationId"));
    pb.strings(6, op.get("produces"));
    pb.strings(7, op.get("consumes"));
    for p in op["parameters"].as_array().into_iter().flatten() {
        pb.message(8, encode_parameter(p));
    }
    let mut responses = Pb::default();
    for (code, r) in op["responses"].as_object().into_iter().flatten() {
        let mut resp = Pb::default();
        resp.string(1, r.get("description"));
        if let Some(s) = r.get("schema") {
            let mut item = Pb::default();
            item.message(1, encode_schema(s));
            resp.message(2, item);
        }
        let mut value = Pb::default();
        value.message(1, resp);
        let mut named = Pb::default();
        named.bytes(1, code.as_bytes());
        named.message(2, value);
        responses.message(1, named);
    }
    pb.message(9, responses);
    pb.strings(10, op.get("schemes"));
    pb.extensions(13, op);
    pb
}

/// gnostic `ParametersItem` → `Parameter` → body or (query | path) non-body parameter.
fn encode_parameter(p: &Value) -> Pb {
    let mut param = Pb::default();
    if p["in"] == "body" {
        let mut body = Pb::default();
        body.string(1, p.get("description"));
        body.string(2, p.get("name"));
        body.string(3, p.get("in"));
        body.boolean(4, p.get("required"));
        if let Some(s) = p.get("schema") {
            body.message(5, encode_schema(s));
        }
        param.message(1, body);
    } else {
        // Query and path sub-schemas share their first seven fields; unique_items differs.
        let (which, unique) = if p["in"] == "path" { (4, 19) } else { (3, 20) };
        let mut sub = Pb::default();
        sub.boolean(1, p.get("required"));
        sub.string(2, p.get("in"));
        sub.string(3, p.get("description"));
        sub.string(4, p.get("name"));
        if which == 3 {
            sub.string(6, p.get("type"));
            sub.string(7, p.get("format"));
        } else {
            sub.string(5, p.get("type"));
            sub.string(6, p.get("format"));
        }
        sub.boolean(unique, p.get("uniqueItems"));
        let mut non_body = Pb::default();
        non_body.message(which, sub);
        param.message(2, non_body);
    }
    let mut item = Pb::default();
    item.message(1, param);
    item
}

/// gnostic `Schema`.
fn encode_schema(s: &Value) -> Pb {
    let mut pb = Pb::default();
    pb.string(1, s.get("$ref"));
    pb.string(2, s.get("format"));
    pb.string(3, s.get("title"));
    pb.string(4, s.get("description"));
    if let Some(d) = s.get("default") {
        pb.any(5, d);
    }
    pb.double(6, s.get("multipleOf"));
    pb.double(7, s.get("maximum"));
    pb.boolean(8, s.get("exclusiveMaximum"));
    pb.double(9, s.get("minimum"));
    pb.boolean(10, s.get("exclusiveMinimum"));
    pb.int64(11, s.get("maxLength"));
    pb.int64(12, s.get("minLength"));
    pb.string(13, s.get("pattern"));
    pb.int64(14, s.get("maxItems"));
    pb.int64(15, s.get("minItems"));
    pb.boolean(16, s.get("uniqueItems"));
    pb.int64(17, s.get("maxProperties"));
    pb.int64(18, s.get("minProperties"));
    pb.strings(19, s.get("required"));
    for e in s["enum"].as_array().into_iter().flatten() {
        pb.any(20, e);
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut ap = Pb::default();
            ap.key(2, 0);
            ap.varint(u64::from(*b));
            pb.message(21, ap);
        }
        Some(ap @ Value::Object(_)) => {
            let mut item = Pb::default();
            item.message(1, encode_schema(ap));
            pb.message(21, item);
        }
        _ => {}
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let mut ty = Pb::default();
        ty.bytes(1, t.as_bytes());
        pb.message(22, ty);
    }
    match s.get("items") {
        Some(i @ Value::Object(_)) => {
            let mut items = Pb::default();
            items.message(1, encode_schema(i));
            pb.message(23, items);
        }
        Some(Value::Array(a)) => {
            let mut items = Pb::default();
            for i in a {
                items.message(1, encode_schema(i));
            }
            pb.message(23, items);
        }
        _ => {}
    }
    for a in s["allOf"].as_array().into_iter().flatten() {
        pb.message(24, encode_schema(a));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut p = Pb::default();
        for (name, ps) in props {
            let mut named = Pb::default();
            named.bytes(1, name.as_bytes());
            named.message(2, encode_schema(ps));
            p.message(1, named);
        }
        pb.message(25, p);
    }
    pb.boolean(27, s.get("readOnly"));
    if let Some(e) = s.get("example") {
        pb.any(30, e);
    }
    pb.extensions(31, s);
    pb
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::openapi::collect_refs;

    #[test]
    fn every_reference_is_a_resolvable_definition() {
        let d = document();
        let mut refs = Vec::new();
        collect_refs(&d, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r
                .strip_prefix("#/definitions/")
                .unwrap_or_else(|| panic!("not a definition: {r}"));
            assert!(d["definitions"].get(name).is_some(), "{name} unresolved");
        }
    }

    /// kube-openapi's parser refuses: several types, an array without items, a `$ref` with a type or
    /// properties beside it.
    fn check_parsable(path: &str, s: &Value) {
        if s.get("$ref").is_some() {
            assert!(s.get("type").is_none() && s.get("properties").is_none(), "{path}");
            return;
        }
        assert!(s.get("nullable").is_none(), "{path}");
        if let Some(t) = s.get("type") {
            let t = t.as_str().unwrap_or_else(|| panic!("{path}: type {t}"));
            assert!(
                ["object", "array", "string", "integer", "number", "boolean"].contains(&t),
                "{path}: {t}"
            );
            if t == "array" {
                assert!(s["items"].is_object(), "{path}: array without items");
            }
        }
        for (name, p) in s["properties"].as_object().into_iter().flatten() {
            check_parsable(&format!("{path}.{name}"), p);
        }
        if s["items"].is_object() {
            check_parsable(&format!("{path}[]"), &s["items"]);
        }
        if s["additionalProperties"].is_object() {
            check_parsable(&format!("{path}{{}}"), &s["additionalProperties"]);
        }
    }

    #[test]
    fn definitions_are_what_kube_openapi_parses() {
        let d = document();
        for (name, s) in d["definitions"].as_object().unwrap() {
            check_parsable(name, s);
        }
    }

    #[test]
    fn every_served_kind_has_a_definition_with_its_gvk_and_a_patch_path() {
        let d = document();
        for r in resources::all() {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            let found = d["definitions"].as_object().unwrap().values().any(|s| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|a| a.contains(&gvk))
            });
            assert!(found, "{} has no definition", r.kind);
            let patches = d["paths"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|p| p.get("patch"))
                .any(|op| op["x-kubernetes-group-version-kind"] == gvk);
            // Create-only and read-only kinds (bindings, componentstatuses) have no PATCH, as upstream.
            assert_eq!(
                patches,
                r.verbs().contains(&"patch"),
                "{} PATCH operation",
                r.kind
            );
        }
        let pod = &d["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pod["parameters"][0]["in"], "body");
        assert!(
            pod["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
    }

    #[test]
    fn protobuf_is_chosen_only_when_asked_for() {
        assert!(wants_protobuf(Some(PROTOBUF_MEDIA_TYPE)));
        assert!(wants_protobuf(Some(
            "application/json;q=0.9, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        )));
        assert!(!wants_protobuf(Some("application/json")));
        assert!(!wants_protobuf(None));
    }

    /// A minimal reader of the encoding: the top-level fields of a message, in order.
    fn fields(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for shift in (0..).step_by(7) {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            v
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let value = match key & 7 {
                0 => varint(&mut b).to_le_bytes().to_vec(),
                1 => {
                    let (v, rest) = b.split_at(8);
                    b = rest;
                    v.to_vec()
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    let (v, rest) = b.split_at(n);
                    b = rest;
                    v.to_vec()
                }
                w => panic!("wire type {w}"),
            };
            out.push(((key >> 3) as u32, value));
        }
        out
    }

    #[test]
    fn protobuf_document_holds_the_definitions_with_their_gvk_extension() {
        let d = document();
        let pb = encode_document(&d);
        let top = fields(&pb);
        assert_eq!(top[0], (1, b"2.0".to_vec()));
        let defs = &top.iter().find(|(f, _)| *f == 9).expect("definitions").1;
        let named = fields(defs);
        assert_eq!(named.len(), d["definitions"].as_object().unwrap().len());
        let pod = named
            .iter()
            .map(|(_, n)| fields(n))
            .find(|n| n[0].1 == b"io.k8s.api.core.v1.Pod")
            .expect("Pod");
        let schema = fields(&pod[1].1);
        let ext = schema
            .iter()
            .filter(|(f, _)| *f == 31)
            .map(|(_, e)| fields(e))
            .find(|e| e[0].1 == b"x-kubernetes-group-version-kind");
        let any = fields(&ext.expect("gvk extension")[1].1);
        let yaml: Value = serde_json::from_slice(&any[0].1).unwrap();
        assert_eq!(yaml, json!([{"group": "", "kind": "Pod", "version": "v1"}]));
        let props = fields(&schema.iter().find(|(f, _)| *f == 25).expect("properties").1);
        assert!(props.iter().any(|(_, p)| fields(p)[0].1 == b"spec"));
    }
}
