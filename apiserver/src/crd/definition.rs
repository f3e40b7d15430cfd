//! The CustomResourceDefinition kind itself: upstream's defaulting (`SetDefaults`), validation
//! (`ValidateCustomResourceDefinition`: names, group, scope, versions, structural schemas, printer
//! columns, subresources, selectable fields, CEL rules) and the status the API server's own controllers
//! write (naming: `acceptedNames`, `NamesAccepted`; establishing: `Established`; finalizing:
//! `Terminating`). All pure; the registry calls them on CRD writes and [`super::controller`] for status.

use serde_json::{Value, json};

use crate::error::FieldError;
use api::validation::dns1035_label_errors;

/// The finalizer that holds a deleted CRD until its objects are gone (upstream's finalizing controller).
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The annotation a CRD in a `*.k8s.io` or `*.kubernetes.io` group needs.
const APPROVAL: &str = "api-approved.kubernetes.io";

/// Upstream `SetDefaults_CustomResourceDefinition(Spec)`: singular and list kind from the kind,
/// conversion strategy `None`.
pub fn set_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    match spec.get_mut("conversion").and_then(Value::as_object_mut) {
        // A merge that lost the strategy (an apply that does not send `conversion`) keeps upstream's default.
        Some(c)
            if c.get("strategy")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            c.insert("strategy".into(), json!("None"));
        }
        Some(_) => {}
        None => {
            spec.insert("conversion".into(), json!({"strategy": "None"}));
        }
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn string_list(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn label(errs: &mut Vec<FieldError>, field: String, value: &str, prefix: &str) {
    let e = dns1035_label_errors(value);
    if !value.is_empty() && !e.is_empty() {
        errs.push(FieldError::invalid(
            field,
            &Value::String(value.into()),
            &format!("{prefix}{}", e.join(",")),
        ));
    }
}

/// Every problem of a CRD (after [`set_defaults`]), as upstream's 422 causes.
pub fn validate(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = s(crd, "/metadata/name");
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            &Value::String(name.into()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let e = api::validation::dns1123_subdomain_errors(group);
        if !e.is_empty() {
            errs.push(FieldError::invalid("spec.group", &json!(group), &e.join(",")));
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                "spec.group",
                &json!(group),
                "should be a domain with at least one dot",
            ));
        }
        let protected = ["k8s.io", "kubernetes.io"]
            .iter()
            .any(|p| group == *p || group.ends_with(&format!(".{p}")));
        if protected
            && crd
                .pointer(&format!("/metadata/annotations/{APPROVAL}"))
                .is_none()
        {
            errs.push(FieldError::required(
                format!("metadata.annotations[{APPROVAL}]"),
                &format!(
                    "protected groups must have approval annotation {APPROVAL:?}, see \
                     https://github.com/kubernetes/enhancements/pull/1111"
                ),
            ));
        }
    }
    match s(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => errs.push(FieldError::required("spec.scope", "")),
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            &json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    names(crd, &mut errs);
    versions(crd, &mut errs);
    errs
}

fn names(crd: &Value, errs: &mut Vec<FieldError>) {
    for f in ["plural", "singular", "kind", "listKind"] {
        if s(crd, &format!("/spec/names/{f}")).is_empty() {
            errs.push(FieldError::required(format!("spec.names.{f}"), ""));
        }
    }
    label(errs, "spec.names.plural".into(), s(crd, "/spec/names/plural"), "");
    label(
        errs,
        "spec.names.singular".into(),
        s(crd, "/spec/names/singular"),
        "",
    );
    let kind = s(crd, "/spec/names/kind");
    let list_kind = s(crd, "/spec/names/listKind");
    for (field, value) in [("kind", kind), ("listKind", list_kind)] {
        let e = dns1035_label_errors(&value.to_lowercase());
        if !value.is_empty() && !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("spec.names.{field}"),
                &json!(value),
                &format!("may have mixed case, but should otherwise match: {}", e.join(",")),
            ));
        }
    }
    if !kind.is_empty() && kind == list_kind {
        errs.push(FieldError::invalid(
            "spec.names.listKind",
            &json!(list_kind),
            "kind and listKind may not be the same",
        ));
    }
    for (i, short) in string_list(crd, "/spec/names/shortNames").iter().enumerate() {
        label(errs, format!("spec.names.shortNames[{i}]"), short, "");
    }
    for (i, c) in string_list(crd, "/spec/names/categories").iter().enumerate() {
        label(errs, format!("spec.names.categories[{i}]"), c, "");
    }
}

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "date",
    "date-time",
    "password",
];

fn versions(crd: &Value, errs: &mut Vec<FieldError>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &Value::String(format!("{} storage versions", storage)),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions
        .iter()
        .any(|v| v.get("served").and_then(Value::as_bool) == Some(true))
    {
        errs.push(FieldError::invalid(
            "spec.versions",
            &Value::String("no served versions".into()),
            "must have at least one version marked as served",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let p = format!("spec.versions[{i}]");
        let name = s(v, "/name");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            label(errs, format!("{p}.name"), name, "");
            if seen.contains(&name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), &json!(name)));
            }
            seen.push(name);
        }
        let schema_path = format!("{p}.schema.openAPIV3Schema");
        match v.pointer("/schema/openAPIV3Schema") {
            None => errs.push(FieldError::required(schema_path, "schemas are required")),
            Some(schema) => {
                errs.extend(super::schema::check_structural(schema, &schema_path));
                errs.extend(super::cel::compile_errors(schema, &schema_path));
            }
        }
        for (c, col) in v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let cp = format!("{p}.additionalPrinterColumns[{c}]");
            if s(col, "/name").is_empty() {
                errs.push(FieldError::required(format!("{cp}.name"), ""));
            }
            let ty = s(col, "/type");
            if !COLUMN_TYPES.contains(&ty) {
                errs.push(FieldError::not_supported(
                    format!("{cp}.type"),
                    &json!(ty),
                    COLUMN_TYPES,
                ));
            }
            let format = s(col, "/format");
            if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
                errs.push(FieldError::not_supported(
                    format!("{cp}.format"),
                    &json!(format),
                    COLUMN_FORMATS,
                ));
            }
            if s(col, "/jsonPath").is_empty() {
                errs.push(FieldError::required(format!("{cp}.jsonPath"), ""));
            }
        }
        if let Some(scale) = v.pointer("/subresources/scale") {
            let sp = format!("{p}.subresources.scale");
            let spec_path = s(scale, "/specReplicasPath");
            if spec_path.is_empty() {
                errs.push(FieldError::required(format!("{sp}.specReplicasPath"), ""));
            } else if !spec_path.starts_with(".spec.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.specReplicasPath"),
                    &json!(spec_path),
                    "should be a json path under .spec",
                ));
            }
            let status_path = s(scale, "/statusReplicasPath");
            if status_path.is_empty() {
                errs.push(FieldError::required(format!("{sp}.statusReplicasPath"), ""));
            } else if !status_path.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.statusReplicasPath"),
                    &json!(status_path),
                    "should be a json path under .status",
                ));
            }
            let selector = s(scale, "/labelSelectorPath");
            if !selector.is_empty() && !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.labelSelectorPath"),
                    &json!(selector),
                    "should be a json path under either .spec or .status",
                ));
            }
        }
        for (f, field) in v
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let path = s(field, "/jsonPath");
            if path.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.selectableFields[{f}].jsonPath"),
                    "",
                ));
            } else if !path.starts_with('.') {
                errs.push(FieldError::invalid(
                    format!("{p}.selectableFields[{f}].jsonPath"),
                    &json!(path),
                    "must be a simple json path starting with .",
                ));
            }
        }
    }
}

/// The names of a CRD that clash with another served CRD of the same group (upstream's naming
/// controller; refused with 422 here, see README), or with a built-in resource of that group.
pub fn conflicts(crd: &Value, others: &[&Value], builtin: &[(&str, &str, &str)]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let group = s(crd, "/spec/group");
    let name = s(crd, "/metadata/name");
    let plural = s(crd, "/spec/names/plural");
    let kind = s(crd, "/spec/names/kind");
    let shorts = string_list(crd, "/spec/names/shortNames");
    let singular = s(crd, "/spec/names/singular");
    let in_use =
        |f: &str, v: &str| FieldError::invalid(f.to_string(), &json!(v), &format!("{v:?} is already in use"));
    for o in others {
        if s(o, "/metadata/name") == name || s(o, "/spec/group") != group {
            continue;
        }
        let their_plural = s(o, "/spec/names/plural");
        let their_singular = s(o, "/spec/names/singular");
        let their_shorts = string_list(o, "/spec/names/shortNames");
        if plural == their_plural || plural == their_singular {
            errs.push(in_use("spec.names.plural", plural));
        }
        if singular == their_plural || singular == their_singular {
            errs.push(in_use("spec.names.singular", singular));
        }
        if kind == s(o, "/spec/names/kind") || kind == s(o, "/spec/names/listKind") {
            errs.push(in_use("spec.names.kind", kind));
        }
        for (i, short) in shorts.iter().enumerate() {
            if their_shorts.contains(short) {
                errs.push(in_use(&format!("spec.names.shortNames[{i}]"), short));
            }
        }
    }
    for (g, p, k) in builtin {
        if *g == group && (*p == plural || *k == kind) {
            let (f, v) = if *p == plural {
                ("spec.names.plural", plural)
            } else {
                ("spec.names.kind", kind)
            };
            errs.push(in_use(f, v));
        }
    }
    errs
}

/// The version stored: the one marked `storage`.
pub fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
}

fn condition(ty: &str, status: &str, reason: &str, message: &str, old: &Value, now: &str) -> Value {
    let same = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
    let since = match same {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {
            c.get("lastTransitionTime").cloned().unwrap_or_else(|| json!(now))
        }
        _ => json!(now),
    };
    json!({"type": ty, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
}

/// The status the API server's controllers keep on a CRD: accepted names, `NamesAccepted` and
/// `Established` (both True once its names are accepted), `Terminating` while its objects are deleted,
/// and the stored versions (every version ever stored, never shrunk by us).
pub fn status(crd: &Value, terminating: bool, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let mut conditions = vec![
        condition(
            "NamesAccepted",
            "True",
            "NoConflicts",
            "no conflicts found",
            crd,
            now,
        ),
        condition(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            crd,
            now,
        ),
    ];
    if terminating {
        conditions.push(condition(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            crd,
            now,
        ));
    }
    let mut stored = string_list(crd, "/status/storedVersions");
    if let Some(v) = storage_version(crd)
        && !stored.iter().any(|s| s == v)
    {
        stored.push(v.to_string());
    }
    json!({"conditions": conditions, "acceptedNames": names, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}],
            }
        })
    }

    fn errors(c: Value) -> Vec<String> {
        let mut c = c;
        set_defaults(&mut c);
        validate(&c).into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn defaults_fill_singular_list_kind_and_conversion() {
        let mut c = crd();
        set_defaults(&mut c);
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
        c["spec"]["conversion"] = json!({"strategy": ""});
        set_defaults(&mut c);
        assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
        assert!(errors(crd()).is_empty(), "{:?}", errors(crd()));
    }

    #[test]
    fn invalid_crds_are_refused_with_upstream_messages() {
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut c = crd();
            f(&mut c);
            errors(c)
        };
        assert_eq!(
            edit(&|c| c["metadata"]["name"] = json!("gadgets.example.com")),
            vec![
                r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#
            ]
        );
        assert_eq!(
            edit(&|c| {
                c["spec"]["group"] = json!("example");
                c["metadata"]["name"] = json!("widgets.example");
            }),
            vec![r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]
        );
        assert_eq!(
            edit(&|c| c["spec"]["scope"] = json!("Global")),
            vec![r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#]
        );
        assert_eq!(
            edit(&|c| c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
                json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
            vec![
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            edit(&|c| c["spec"]["versions"][0]["storage"] = json!(false)),
            vec![
                r#"spec.versions: Invalid value: "0 storage versions": must have exactly one version marked as storage version"#
            ]
        );
        assert_eq!(
            edit(&|c| c["spec"]["names"]["listKind"] = json!("Widget")),
            vec![r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#]
        );
        assert_eq!(
            edit(&|c| {
                c["spec"]["group"] = json!("x.k8s.io");
                c["metadata"]["name"] = json!("widgets.x.k8s.io");
            }),
            vec![
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        assert_eq!(
            edit(&|c| c["spec"]["versions"][0]["additionalPrinterColumns"] =
                json!([{"name": "X", "type": "text", "jsonPath": ".spec.x"}])),
            vec![
                r#"spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: "text": supported values: "boolean", "date", "integer", "number", "string""#
            ]
        );
    }

    #[test]
    fn names_taken_by_another_crd_or_a_builtin_conflict() {
        let mut mine = crd();
        set_defaults(&mut mine);
        let mut other = crd();
        other["metadata"]["name"] = json!("gizmos.example.com");
        other["spec"]["names"] = json!({"plural": "gizmos", "singular": "gizmo", "kind": "Widget",
                                        "listKind": "WidgetList", "shortNames": ["wd"]});
        let got: Vec<String> = conflicts(&mine, &[&other], &[])
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(
            got,
            vec![
                r#"spec.names.kind: Invalid value: "Widget": "Widget" is already in use"#,
                r#"spec.names.shortNames[0]: Invalid value: "wd": "wd" is already in use"#,
            ]
        );
        assert!(conflicts(&mine, &[&mine.clone()], &[]).is_empty());
        assert_eq!(
            conflicts(&mine, &[], &[("example.com", "widgets", "Other")]).len(),
            1
        );
    }

    #[test]
    fn status_accepts_names_establishes_and_keeps_transition_times() {
        let mut c = crd();
        set_defaults(&mut c);
        let st = status(&c, false, "2024-01-01T00:00:00Z");
        assert_eq!(st["conditions"][0]["type"], "NamesAccepted");
        assert_eq!(st["conditions"][1]["type"], "Established");
        assert_eq!(st["conditions"][1]["status"], "True");
        assert_eq!(st["acceptedNames"]["kind"], "Widget");
        assert_eq!(st["storedVersions"], json!(["v1"]));
        c["status"] = st;
        let later = status(&c, true, "2024-01-02T00:00:00Z");
        assert_eq!(
            later["conditions"][1]["lastTransitionTime"],
            "2024-01-01T00:00:00Z"
        );
        assert_eq!(later["conditions"][2]["type"], "Terminating");
        assert_eq!(
            later["conditions"][2]["lastTransitionTime"],
            "2024-01-02T00:00:00Z"
        );
    }
}
