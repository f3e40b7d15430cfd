//! The strategy of custom objects and of CRDs (upstream `apiextensions-apiserver/pkg/registry`): what
//! the generic registry asks of a custom resource: pruning and defaulting on decode, schema and CEL
//! validation, the storage version, generation, the `scale` subresource, and the 415 for strategic merge
//! patches; for CRDs, validation against the other CRDs.

use serde_json::{Value, json};

use super::{FieldValidation, ResourceInfo, WriteOptions};
use crate::crd::{self, Custom};
use crate::error::{ApiError, FieldError};
use crate::storage::Storage;

/// `(group, plural)` of the CRD kind.
pub const CRDS: (&str, &str) = ("apiextensions.k8s.io", "customresourcedefinitions");

/// Prune undeclared fields (each one a warning, or a 400 under `fieldValidation=Strict`), then default.
pub fn prune_and_default(
    info: &ResourceInfo,
    c: &Custom,
    value: &mut Value,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let pruned = crd::prune::prune(&c.schema, value);
    if !pruned.is_empty() && opts.field_validation != FieldValidation::Ignore {
        let each: Vec<String> = pruned.iter().map(|f| format!("unknown field {f:?}")).collect();
        if opts.field_validation == FieldValidation::Strict {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
                info.kind,
                info.version,
                info.kind,
                each.join(", ")
            )));
        }
        opts.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(each);
    }
    crd::default::apply(&c.schema, value);
    Ok(())
}

/// Schema and CEL violations of a custom object.
pub fn validate(c: &Custom, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = crd::validate::validate(&c.schema, obj);
    if errs.is_empty() {
        // Upstream runs CEL rules only on values that passed the schema (types are what rules assume).
        errs.extend(crd::cel::validate(&c.schema, &c.rules, obj, old));
    }
    errs
}

/// A CRD's own problems, and names it would take from another CRD or a built-in resource.
pub fn validate_crd(storage: &Storage, obj: &Value) -> Vec<FieldError> {
    let mut errs = crd::definition::validate(obj);
    if errs.is_empty() {
        let info = crd::controller::crd_info();
        let others = storage.list(&info.prefix(None), None, None, |_| true).items;
        let others: Vec<Value> = others.iter().map(|o| o.value()).collect();
        let others: Vec<&Value> = others.iter().collect();
        let builtin: Vec<(&str, &str, &str)> = super::resources::builtin()
            .map(|r| (r.group, r.plural, r.kind))
            .collect();
        errs.extend(crd::definition::conflicts(obj, &others, &builtin));
    }
    errs
}

/// Upstream's answer to a create while the CRD is being deleted.
pub fn terminating_error() -> ApiError {
    ApiError {
        code: 405,
        reason: "MethodNotAllowed",
        message: "create not allowed while custom resource definition is terminating".into(),
        details: None,
    }
}

/// Custom resources take no strategic merge patches (they have no patch metadata), as upstream.
pub fn strategic_refused() -> ApiError {
    ApiError::unsupported_media_type(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
}

/// Objects are stored as the CRD's storage version.
pub fn to_storage_version(info: &ResourceInfo, c: &Custom, obj: &mut Value) {
    if c.storage_version != info.version {
        obj["apiVersion"] = json!(format!("{}/{}", info.group, c.storage_version));
    }
}

/// Whether a stored object is of another version than `info` serves (then only apiVersion differs).
pub fn other_version(info: &ResourceInfo, obj: &(impl crate::selector::Fields + ?Sized)) -> bool {
    let Some(v) = obj.at(&["apiVersion"]).and_then(crate::selector::Scalar::as_str) else {
        return false;
    };
    !info.group.is_empty()
        && v.strip_prefix(info.group)
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(|version| version != info.version)
}

/// Upstream bumps a custom object's generation on any change but metadata (and status, with a status
/// subresource).
pub fn bumps_generation(info: &ResourceInfo, new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("apiVersion");
            if info.has_status {
                o.remove("status");
            }
        }
        v
    };
    strip(new) != strip(old)
}

/// The autoscaling/v1 Scale of a custom object, through the CRD's paths.
pub fn scale_of(c: &Custom, obj: &Value) -> Value {
    let Some(paths) = &c.scale else {
        return json!({});
    };
    let mut metadata = json!({});
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = obj.pointer(&format!("/metadata/{f}")) {
            metadata[f] = v.clone();
        }
    }
    let replicas = crd::json_path(obj, &paths.spec_replicas)
        .cloned()
        .unwrap_or(json!(0));
    let mut status = json!({
        "replicas": crd::json_path(obj, &paths.status_replicas).cloned().unwrap_or(json!(0)),
    });
    if let Some(sel) = paths
        .label_selector
        .as_deref()
        .and_then(|p| crd::json_path(obj, p))
        .and_then(Value::as_str)
    {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas},
        "status": status,
    })
}

/// Write replicas through the CRD's `specReplicasPath`.
pub fn set_replicas(c: &Custom, obj: &mut Value, n: i64) {
    if let Some(paths) = &c.scale {
        crd::set_json_path(obj, &paths.spec_replicas, json!(n));
    }
}
