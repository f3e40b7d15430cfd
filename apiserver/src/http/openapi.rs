//! OpenAPI v3 (`/openapi/v3`): an index and one document per served group-version.
//!
//! Each document declares, for every kind, the PATCH operation with the `fieldValidation` parameter and
//! the kind's `x-kubernetes-group-version-kind`: that is what kubectl's validator looks for before it
//! delegates validation to the server (reference §1.6). Without it `kubectl create -f`/`apply -f` refuse
//! to run unless `--validate=false`. Component schemas (for `kubectl explain`) come with step 2.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::discovery::KUBE_VERSION;
use crate::registry::{ResourceInfo, resources};

fn doc_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn item_path(r: &ResourceInfo) -> String {
    let base = if r.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    if r.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{base}/{}/{{name}}", r.plural)
    }
}

fn document(group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    for r in resources::RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
        ]);
        paths.insert(
            item_path(r),
            json!({"patch": {
                "operationId": format!("patch{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
            }}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    })
}

struct Docs {
    /// doc path -> (hash, serialised document)
    docs: BTreeMap<String, (String, Vec<u8>)>,
    index: Vec<u8>,
}

fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
        gvs.extend(resources::groups());
        let mut docs = BTreeMap::new();
        let mut index = serde_json::Map::new();
        for (g, v) in gvs {
            let bytes = serde_json::to_vec(&document(g, v)).expect("JSON serialises");
            let hash = fnv_hex(&bytes);
            let path = doc_path(g, v);
            index.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
            );
            docs.insert(path, (hash, bytes));
        }
        let index = serde_json::to_vec(&json!({"paths": index})).expect("JSON serialises");
        Docs { docs, index }
    })
}

/// A content hash for `?hash=` (upper-case hex, as upstream prints its hashes).
fn fnv_hex(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

/// The `/openapi/v3` index.
pub fn index() -> &'static [u8] {
    &docs().index
}

/// One document, by its path below `/openapi/v3/`.
pub fn doc(path: &str) -> Option<&'static [u8]> {
    docs().docs.get(path).map(|(_, b)| b.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_patch_operation_declaring_field_validation() {
        for r in resources::RESOURCES {
            let d: Value = serde_json::from_slice(doc(&doc_path(r.group, r.version)).unwrap()).unwrap();
            let op = &d["paths"][item_path(r)]["patch"];
            assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], r.kind);
            assert!(
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation")
            );
        }
    }

    #[test]
    fn index_links_each_document_with_its_hash() {
        let idx: Value = serde_json::from_slice(index()).unwrap();
        let url = idx["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
    }
}
