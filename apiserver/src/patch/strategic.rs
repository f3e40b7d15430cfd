//! Strategic merge patch (`application/strategic-merge-patch+json`), written over `serde_json::Value`.
//!
//! kubectl sends this patch type for client-side apply, `edit`, `patch` (default `--type strategic`),
//! `set image`, `rollout restart` and more; Python's client sends it for any dict body. The algorithm mirrors
//! upstream `k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`; the functions below name the upstream
//! function they follow:
//!
//! * [`apply`] is `StrategicMergeMapPatch` (`mergeMap` with `MergeParallelList` and `IgnoreUnmatchedNulls`),
//!   the server side of a PATCH. Every `$` directive is consumed; none reaches the stored object.
//! * [`diff`] is `CreateTwoWayMergePatch` (what `kubectl edit` sends).
//! * [`three_way`] is `CreateThreeWayMergePatch` with `overwrite = true` (what `kubectl apply` sends).
//!
//! Upstream reads list strategies from Go struct tags (`patchStrategy`, `patchMergeKey`); we keep the same
//! facts as data in one table ([`KINDS`]), keyed by `"<group>/<Kind>"`, and expose them through
//! [`list_strategy`] and [`retains_keys`] so server-side apply merges lists the same way. Fields the table
//! does not name (including every field of a kind it does not know) replace, which makes a strategic merge
//! patch of an unknown kind a JSON merge patch plus directive handling.
//!
//! Deliberate differences from upstream, each for a reason given where it is implemented:
//! * `$patch: merge` is accepted as the explicit default (upstream rejects it on maps and in lists);
//! * `$patch: delete` on a map removes the key (upstream leaves `{}`);
//! * `$deleteFromPrimitiveList` on an absent list is a no-op (upstream turns the deletion list into the list);
//! * a map where the object has a list (or any container/scalar mismatch) is an error (upstream replaces
//!   and lets the typed decode fail later), and so is a non-object element in a merge-keyed list;
//! * new values taken from the patch are merged into an empty value, so their nulls and directives are
//!   consumed too (upstream copies them raw and relies on the typed decode to drop them);
//! * fields missing from the patch metadata replace instead of failing the lookup.

use std::collections::HashMap;

use serde_json::{Map, Value};

type Object = Map<String, Value>;

/// upstream: `directiveMarker`.
const DIRECTIVE_MARKER: &str = "$patch";
/// upstream: `deleteFromPrimitiveListDirectivePrefix`.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
/// upstream: `setElementOrderDirectivePrefix`.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
/// upstream: `retainKeysDirective`.
const RETAIN_KEYS: &str = "$retainKeys";

/// Why a strategic merge patch could not be applied or computed.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch (or a document to diff) is not a JSON object at its root.
    #[error("{what} is not a json object")]
    NotAnObject {
        /// Which document.
        what: &'static str,
    },
    /// A `$patch` value other than `replace`, `delete` or `merge`.
    #[error("invalid $patch directive {value} at {path}: expected replace, delete or merge")]
    InvalidDirective {
        /// Dotted field path.
        path: String,
        /// The offending value, as JSON.
        value: String,
    },
    /// A `$setElementOrder`, `$deleteFromPrimitiveList` or `$retainKeys` directive of the wrong shape.
    #[error("invalid {directive} directive at {path}: {reason}")]
    InvalidDirectiveFormat {
        /// Dotted field path.
        path: String,
        /// The directive prefix.
        directive: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An element of a merge-keyed list has no (or a null) merge key.
    #[error("element of list {path} has no merge key {key}")]
    MissingMergeKey {
        /// Dotted field path.
        path: String,
        /// The merge key.
        key: String,
    },
    /// The patch is well formed but does not fit the object (a list where a map is, and the like).
    #[error("cannot apply patch at {path}: {reason}")]
    CannotApply {
        /// Dotted field path.
        path: String,
        /// What does not fit.
        reason: String,
    },
}

impl PatchError {
    /// Whether the server should answer 400 (undecodable patch, invalid directive) rather than 422.
    ///
    /// Mirrors `interpretStrategicMergePatchError` in `apiserver/pkg/endpoints/handlers/patch.go`, which
    /// maps the `ErrBadJSONDoc` and `ErrBadPatchFormatFor*` family to BadRequest.
    pub fn is_bad_request(&self) -> bool {
        matches!(
            self,
            PatchError::NotAnObject { .. }
                | PatchError::InvalidDirective { .. }
                | PatchError::InvalidDirectiveFormat { .. }
        )
    }
}

// ---------------------------------------------------------------------------------------------------------
// Patch metadata
// ---------------------------------------------------------------------------------------------------------

/// How a list field merges, from the `patchStrategy`/`patchMergeKey` tags of its Go type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// No strategy: the patch's list replaces the object's list (`tolerations`, `command`, ...).
    Replace,
    /// `patchStrategy:"merge"` on a list of objects. The first key is upstream's `patchMergeKey`, the only
    /// one strategic merge patch uses; any further keys complete the `listMapKeys` server-side apply
    /// identifies elements by (e.g. container ports are `containerPort` + `protocol`).
    MergeByKey(&'static [&'static str]),
    /// `patchStrategy:"merge"` on a list of primitives (`metadata.finalizers`, node `spec.podCIDRs`): a set
    /// union keeping order.
    Set,
}

/// The patch metadata of one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    /// A list field; `true` when the elements also follow `retainKeys` (`patchStrategy:"merge,retainKeys"`).
    List(ListStrategy, bool),
    /// A map field with `patchStrategy:"retainKeys"` (deployment `spec.strategy`).
    RetainKeysMap,
    /// A map field with `patchStrategy:"replace"` (PodDisruptionBudget `spec.selector`).
    ReplaceMap,
}

/// One row of the table: a dotted field path relative to where the fragment is embedded, or a fragment
/// embedded under a dotted prefix (a PodSpec under `spec.template.spec`, a Container under `containers`).
enum Entry {
    Field(&'static str, Meta),
    Embed(&'static str, &'static [Entry]),
}

use Entry::{Embed, Field};

const fn by(keys: &'static [&'static str]) -> Meta {
    Meta::List(ListStrategy::MergeByKey(keys), false)
}

const fn by_retain_keys(keys: &'static [&'static str]) -> Meta {
    Meta::List(ListStrategy::MergeByKey(keys), true)
}

const SET: Meta = Meta::List(ListStrategy::Set, false);

/// meta/v1 ObjectMeta.
const OBJECT_META: &[Entry] = &[Field("finalizers", SET), Field("ownerReferences", by(&["uid"]))];

/// core/v1 Container and EphemeralContainerCommon. Ports merge on `containerPort` alone in a strategic merge
/// patch (its listMapKeys add `protocol`), so a TCP and a UDP port with the same number collide, as upstream.
const CONTAINER: &[Entry] = &[
    Field("ports", by(&["containerPort", "protocol"])),
    Field("env", by(&["name"])),
    Field("volumeMounts", by(&["mountPath"])),
    Field("volumeDevices", by(&["devicePath"])),
];

/// core/v1 PodSpec.
const POD_SPEC: &[Entry] = &[
    Field("containers", by(&["name"])),
    Embed("containers", CONTAINER),
    Field("initContainers", by(&["name"])),
    Embed("initContainers", CONTAINER),
    Field("ephemeralContainers", by(&["name"])),
    Embed("ephemeralContainers", CONTAINER),
    Field("volumes", by_retain_keys(&["name"])),
    Field("imagePullSecrets", by(&["name"])),
    Field("hostAliases", by(&["ip"])),
    Field(
        "topologySpreadConstraints",
        by(&["topologyKey", "whenUnsatisfiable"]),
    ),
    Field("schedulingGates", by(&["name"])),
    Field("resourceClaims", by_retain_keys(&["name"])),
];

/// core/v1 ContainerStatus. The status lists themselves replace, so these only matter to server-side apply.
const CONTAINER_STATUS: &[Entry] = &[
    Field("volumeMounts", by(&["mountPath"])),
    Field("allocatedResourcesStatus", by(&["name"])),
];

/// core/v1 PodStatus.
const POD_STATUS: &[Entry] = &[
    Field("conditions", by(&["type"])),
    Field("podIPs", by(&["ip"])),
    Field("hostIPs", by(&["ip"])),
    Field("resourceClaimStatuses", by_retain_keys(&["name"])),
    Embed("containerStatuses", CONTAINER_STATUS),
    Embed("initContainerStatuses", CONTAINER_STATUS),
    Embed("ephemeralContainerStatuses", CONTAINER_STATUS),
];

/// core/v1 PodTemplateSpec.
const POD_TEMPLATE_SPEC: &[Entry] = &[Embed("metadata", OBJECT_META), Embed("spec", POD_SPEC)];

const METADATA: Entry = Embed("metadata", OBJECT_META);
const STATUS_CONDITIONS: Entry = Field("status.conditions", by(&["type"]));

/// Kinds without an entry get [`DEFAULT_KIND`]: only ObjectMeta has metadata.
const DEFAULT_KIND: &[Entry] = &[METADATA];

/// The patch metadata of every kind with merge lists, from the struct tags of `k8s.io/api` v1.32
/// (core/v1, apps/v1, batch/v1, policy/v1, autoscaling/v2, storage/v1) and meta/v1 ObjectMeta.
/// coordination/v1 Lease, events/v1 Event, ConfigMap, Secret, Endpoints (subsets replace) and the rest have
/// nothing beyond ObjectMeta.
static KINDS: &[(&str, &[Entry])] = &[
    (
        "/Pod",
        &[METADATA, Embed("spec", POD_SPEC), Embed("status", POD_STATUS)],
    ),
    ("/PodTemplate", &[METADATA, Embed("template", POD_TEMPLATE_SPEC)]),
    (
        "/ReplicationController",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "apps/Deployment",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            Field("spec.strategy", Meta::RetainKeysMap),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "apps/ReplicaSet",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "apps/StatefulSet",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "apps/DaemonSet",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "batch/Job",
        &[
            METADATA,
            Embed("spec.template", POD_TEMPLATE_SPEC),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "batch/CronJob",
        &[
            METADATA,
            Embed("spec.jobTemplate.metadata", OBJECT_META),
            Embed("spec.jobTemplate.spec.template", POD_TEMPLATE_SPEC),
        ],
    ),
    (
        "/Node",
        &[
            METADATA,
            Field("spec.podCIDRs", SET),
            Field("status.conditions", by(&["type"])),
            Field("status.addresses", by(&["type"])),
        ],
    ),
    ("/Namespace", &[METADATA, STATUS_CONDITIONS]),
    ("/PersistentVolumeClaim", &[METADATA, STATUS_CONDITIONS]),
    (
        "/Service",
        &[
            METADATA,
            Field("spec.ports", by(&["port", "protocol"])),
            STATUS_CONDITIONS,
        ],
    ),
    ("/ServiceAccount", &[METADATA, Field("secrets", by(&["name"]))]),
    (
        "/ComponentStatus",
        &[METADATA, Field("conditions", by(&["type"]))],
    ),
    (
        "policy/PodDisruptionBudget",
        &[
            METADATA,
            Field("spec.selector", Meta::ReplaceMap),
            STATUS_CONDITIONS,
        ],
    ),
    (
        "autoscaling/HorizontalPodAutoscaler",
        &[METADATA, STATUS_CONDITIONS],
    ),
    (
        "storage.k8s.io/CSINode",
        &[METADATA, Field("spec.drivers", by(&["name"]))],
    ),
];

/// Strips the dotted `pattern` off the front of `path`.
fn strip_pattern<'p, S: AsRef<str>>(pattern: &str, path: &'p [S]) -> Option<&'p [S]> {
    let mut rest = path;
    for segment in pattern.split('.') {
        let (first, tail) = rest.split_first()?;
        if first.as_ref() != segment {
            return None;
        }
        rest = tail;
    }
    Some(rest)
}

fn lookup<S: AsRef<str>>(entries: &[Entry], path: &[S]) -> Option<Meta> {
    entries.iter().find_map(|entry| match entry {
        Field(pattern, meta) => strip_pattern(pattern, path)
            .filter(|rest| rest.is_empty())
            .map(|_| *meta),
        Embed(prefix, inner) => strip_pattern(prefix, path).and_then(|rest| lookup(inner, rest)),
    })
}

/// The patch metadata of a field (upstream: `LookupPatchMetadata` on the Go type).
fn field_meta<S: AsRef<str>>(kind_key: &str, path: &[S]) -> Option<Meta> {
    let entries = KINDS
        .iter()
        .find(|(kind, _)| *kind == kind_key)
        .map_or(DEFAULT_KIND, |(_, entries)| entries);
    lookup(entries, path)
}

/// The list strategy of a field path (list elements add no segment), shared with server-side apply:
/// `("/Pod", ["spec","containers"])` is `MergeByKey(&["name"])`. Anything not in the table replaces.
pub fn list_strategy(kind_key: &str, path: &[&str]) -> ListStrategy {
    match field_meta(kind_key, path) {
        Some(Meta::List(strategy, _)) => strategy,
        _ => ListStrategy::Replace,
    }
}

/// Whether a field follows `retainKeys`: for a map field (deployment `spec.strategy`) the map itself, for a
/// list field (`spec.volumes`) each element. A `$retainKeys` directive in such a map clears every other key.
pub fn retains_keys(kind_key: &str, path: &[&str]) -> bool {
    matches!(
        field_meta(kind_key, path),
        Some(Meta::RetainKeysMap | Meta::List(_, true))
    )
}

// ---------------------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------------------

/// Applies a strategic merge patch to `original` (upstream: `StrategicMergeMapPatch`). The list strategies
/// come from the patch metadata of the object's type; `kind_key` is `"<group>/<Kind>"`, `""` group for core.
pub fn apply(original: &Value, patch: &Value, kind_key: &str) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::NotAnObject {
            what: "strategic merge patch",
        });
    };
    let original = root_object(original, "object to patch")?;
    let engine = Engine {
        kind_key,
        mode: Mode::Apply,
    };
    let merged = engine
        .merge_map(original, patch.clone(), &mut Vec::new())?
        .ok_or_else(|| PatchError::CannotApply {
            path: String::new(),
            reason: "$patch: delete cannot delete the object".into(),
        })?;
    let mut result = Value::Object(merged);
    // The merge consumes every directive it understands; this also removes unknown `$` keys and any the
    // stored object carried, so none is ever stored.
    strip_directives(&mut result);
    Ok(result)
}

/// The two-way patch kubectl computes (upstream: `CreateTwoWayMergePatch`): applying it to `from` gives `to`.
pub fn diff(from: &Value, to: &Value, kind_key: &str) -> Result<Value, PatchError> {
    let from = root_object(from, "original document")?;
    let to = root_object(to, "modified document")?;
    let engine = Engine {
        kind_key,
        mode: Mode::Combine,
    };
    let opts = DiffOptions {
        set_element_order: true,
        ..DiffOptions::default()
    };
    Ok(Value::Object(engine.diff_maps(
        &from,
        &to,
        &mut Vec::new(),
        opts,
    )?))
}

/// The three-way patch of client-side apply (upstream: `CreateThreeWayMergePatch` with `overwrite = true`):
/// `original` is the last-applied configuration, `modified` the new manifest (with its refreshed
/// annotation), `current` the live object. Changes come from `current → modified`, deletions only from
/// `original → modified`, so fields other writers added survive.
pub fn three_way(
    original: &Value,
    modified: &Value,
    current: &Value,
    kind_key: &str,
) -> Result<Value, PatchError> {
    let original = root_object(original, "original document")?;
    let modified = root_object(modified, "modified document")?;
    let current = root_object(current, "current document")?;
    let engine = Engine {
        kind_key,
        mode: Mode::Combine,
    };
    let delta_opts = DiffOptions {
        ignore_deletions: true,
        set_element_order: true,
        ..DiffOptions::default()
    };
    let delta = engine.diff_maps(&current, &modified, &mut Vec::new(), delta_opts)?;
    let deletion_opts = DiffOptions {
        ignore_changes_and_additions: true,
        set_element_order: true,
        ..DiffOptions::default()
    };
    let deletions = engine.diff_maps(&original, &modified, &mut Vec::new(), deletion_opts)?;
    // Upstream merges the additive delta into the deletions with `MergeParallelList: false`, which keeps
    // the directives of both instead of executing them.
    let patch = engine
        .merge_map(deletions, delta, &mut Vec::new())?
        .unwrap_or_default();
    Ok(Value::Object(patch))
}

fn root_object(value: &Value, what: &'static str) -> Result<Object, PatchError> {
    match value {
        Value::Object(map) => Ok(map.clone()),
        Value::Null => Ok(Object::new()),
        _ => Err(PatchError::NotAnObject { what }),
    }
}

/// Removes every `$`-prefixed key at any depth.
fn strip_directives(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.starts_with('$'));
            map.values_mut().for_each(strip_directives);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------------------
// Merging (upstream: mergeMap and friends)
// ---------------------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Server side: execute directives (`MergeParallelList: true`, `IgnoreUnmatchedNulls: true`).
    Apply,
    /// Client side, merging two patches in `CreateThreeWayMergePatch`: keep directives and nulls.
    Combine,
}

struct Engine<'k> {
    kind_key: &'k str,
    mode: Mode,
}

fn display_path(path: &[String]) -> String {
    if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.join(".")
    }
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// Splits `$setElementOrder/containers` into `containers` (upstream: `extractKey`).
fn extract_key<'a>(key: &'a str, prefix: &'static str, path: &[String]) -> Result<&'a str, PatchError> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field),
        _ => Err(PatchError::InvalidDirectiveFormat {
            path: display_path(path),
            directive: prefix,
            reason: format!("key {key} must be {prefix}/<field>"),
        }),
    }
}

impl Engine<'_> {
    fn meta(&self, path: &[String]) -> Option<Meta> {
        field_meta(self.kind_key, path)
    }

    fn list_strategy(&self, path: &[String]) -> ListStrategy {
        match self.meta(path) {
            Some(Meta::List(strategy, _)) => strategy,
            _ => ListStrategy::Replace,
        }
    }

    fn err(&self, path: &[String], reason: impl Into<String>) -> PatchError {
        PatchError::CannotApply {
            path: display_path(path),
            reason: reason.into(),
        }
    }

    /// upstream: `mergeMap`. `None` means the map deleted itself with `$patch: delete`.
    fn merge_map(
        &self,
        mut original: Object,
        mut patch: Object,
        path: &mut Vec<String>,
    ) -> Result<Option<Object>, PatchError> {
        // upstream: handleDirectiveInMergeMap.
        if let Some(directive) = patch.remove(DIRECTIVE_MARKER) {
            match directive.as_str() {
                Some("replace") => {
                    return match self.mode {
                        // Merging into nothing consumes the directives and nulls of the replacement too.
                        Mode::Apply => self.merge_map(Object::new(), patch, path),
                        Mode::Combine => Ok(Some(patch)),
                    };
                }
                // Deliberate difference: the key goes away; upstream leaves `{}`, which the typed decode
                // then turns into an empty struct.
                Some("delete") => return Ok(None),
                // Deliberate difference: upstream rejects `merge` on a map although it is what happens anyway.
                Some("merge") => {}
                _ => {
                    return Err(PatchError::InvalidDirective {
                        path: display_path(path),
                        value: directive.to_string(),
                    });
                }
            }
        }
        self.apply_retain_keys(&mut original, &mut patch, path)?;
        self.merge_ordered_lists(&mut original, &mut patch, path)?;

        let mut primitive_deletions = Vec::new();
        for (key, patch_value) in patch {
            if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                match self.mode {
                    Mode::Combine => {
                        original.insert(key, patch_value);
                    }
                    Mode::Apply => {
                        let field = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST, path)?.to_owned();
                        primitive_deletions.push((field, patch_value));
                    }
                }
                continue;
            }
            if key.starts_with('$') {
                // Unknown directives: upstream stores them as fields and the typed decode drops them.
                if self.mode == Mode::Combine {
                    original.insert(key, patch_value);
                }
                continue;
            }
            if patch_value.is_null() {
                original.remove(&key);
                if self.mode == Mode::Combine {
                    // `IgnoreUnmatchedNulls: false`: the null is the deletion the patch must carry.
                    original.insert(key, Value::Null);
                }
                continue;
            }
            path.push(key);
            let key = path.last().expect("just pushed");
            let merged = match original.get_mut(key) {
                Some(slot) if !slot.is_null() => {
                    let current = std::mem::take(slot);
                    self.merge_value(current, patch_value, path)?
                }
                _ => self.fresh(patch_value, path)?,
            };
            let key = path.pop().expect("pushed above");
            match merged {
                Some(value) => {
                    original.insert(key, value);
                }
                None => {
                    original.remove(&key);
                }
            }
        }
        // Deletions run after additions so a value both added and deleted ends up deleted (upstream's
        // order follows Go's random map iteration).
        for (field, to_delete) in primitive_deletions {
            path.push(field);
            let result = self.delete_from_primitive_list(&mut original, to_delete, path);
            path.pop();
            result?;
        }
        Ok(Some(original))
    }

    /// A value the original does not have: in Apply mode, merged into nothing so that directives and nulls
    /// inside it are consumed; in Combine mode, copied as is.
    fn fresh(&self, value: Value, path: &mut Vec<String>) -> Result<Option<Value>, PatchError> {
        if self.mode == Mode::Combine {
            return Ok(Some(value));
        }
        match value {
            Value::Object(patch) => Ok(self.merge_map(Object::new(), patch, path)?.map(Value::Object)),
            Value::Array(patch) => Ok(Some(Value::Array(self.merge_list(Vec::new(), patch, path)?))),
            scalar => Ok(Some(scalar)),
        }
    }

    /// The type switch at the end of `mergeMap`: maps recurse (`mergeMapHandler`), lists merge by strategy
    /// (`mergeSliceHandler`), scalars replace.
    fn merge_value(
        &self,
        current: Value,
        patch: Value,
        path: &mut Vec<String>,
    ) -> Result<Option<Value>, PatchError> {
        match (current, patch) {
            (Value::Object(current), Value::Object(patch)) => {
                if self.meta(path) == Some(Meta::ReplaceMap) {
                    return self.fresh(Value::Object(patch), path);
                }
                Ok(self.merge_map(current, patch, path)?.map(Value::Object))
            }
            (Value::Array(current), Value::Array(patch)) => {
                Ok(Some(Value::Array(self.merge_list(current, patch, path)?)))
            }
            (current, patch) if is_container(&current) || is_container(&patch) => match self.mode {
                // upstream replaces on any type change; a map where the object has a list can only fail
                // the typed decode later, so say so here.
                Mode::Apply => Err(self.err(
                    path,
                    format!(
                        "the patch has a {} where the object has a {}",
                        value_kind(&patch),
                        value_kind(&current)
                    ),
                )),
                Mode::Combine => Ok(Some(patch)),
            },
            (_, patch) => Ok(Some(patch)),
        }
    }

    /// upstream: `mergeSliceHandler`.
    fn merge_list(
        &self,
        current: Vec<Value>,
        patch: Vec<Value>,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        match self.list_strategy(path) {
            ListStrategy::Replace => Ok(match self.mode {
                Mode::Apply => patch
                    .into_iter()
                    .map(|mut item| {
                        strip_directives(&mut item);
                        item
                    })
                    .collect(),
                Mode::Combine => patch,
            }),
            ListStrategy::MergeByKey(keys) => self.merge_slice(current, patch, Some(keys[0]), path),
            ListStrategy::Set => self.merge_slice(current, patch, None, path),
        }
    }

    /// Checks what `sliceElementType` and the merge paths assume: no lists of lists, objects in a
    /// merge-keyed list, primitives in a set.
    fn check_elements(
        &self,
        lists: &[&[Value]],
        key: Option<&str>,
        path: &[String],
    ) -> Result<(), PatchError> {
        for item in lists.iter().flat_map(|list| list.iter()) {
            match (item, key) {
                (Value::Array(_), _) => return Err(self.err(path, "lists of lists are not supported")),
                (Value::Object(_), Some(_)) => {}
                (_, Some(key)) => {
                    return Err(self.err(
                        path,
                        format!(
                            "elements of a list merged by {key} must be maps, found a {}",
                            value_kind(item)
                        ),
                    ));
                }
                (Value::Object(_), None) => {
                    return Err(self.err(path, "maps cannot be merged into a list of primitive values"));
                }
                (_, None) => {}
            }
        }
        Ok(())
    }

    /// upstream: `mergeSlice` (without the parallel deletion list, which [`Self::delete_from_primitive_list`]
    /// handles).
    fn merge_slice(
        &self,
        current: Vec<Value>,
        patch: Vec<Value>,
        key: Option<&str>,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        if current.is_empty() && patch.is_empty() {
            return Ok(current);
        }
        self.check_elements(&[&current, &patch], key, path)?;
        let Some(key) = key else {
            let merged = deduplicate_scalars(current.iter().chain(&patch).cloned().collect());
            let (patch_items, server_only) = partition_primitives(merged, &patch);
            return self.normalize_element_order(patch_items, server_only, &patch, &current, None, path);
        };
        let (current, patch) = self.merge_special_elements(current, patch, key, path)?;
        let merged = self.merge_plain_elements(current.clone(), &patch, key, path)?;
        let (patch_items, server_only) = self.partition_maps(merged, &patch, key, path)?;
        self.normalize_element_order(patch_items, server_only, &patch, &current, Some(key), path)
    }

    /// upstream: `mergeSliceWithSpecialElements`. Executes `$patch: delete` elements, and `$patch: replace`
    /// (the other elements become the whole list); returns the list to merge into and the plain elements.
    fn merge_special_elements(
        &self,
        mut current: Vec<Value>,
        patch: Vec<Value>,
        key: &str,
        path: &mut Vec<String>,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let mut plain = Vec::new();
        let mut replace = false;
        for item in patch {
            let Value::Object(mut element) = item else {
                unreachable!("check_elements admits only maps")
            };
            let Some(directive) = element.get(DIRECTIVE_MARKER) else {
                plain.push(Value::Object(element));
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    let value =
                        merge_key_value(&element, key).ok_or_else(|| PatchError::MissingMergeKey {
                            path: display_path(path),
                            key: key.into(),
                        })?;
                    current.retain(|existing| existing.get(key) != Some(value));
                }
                // upstream keeps scanning to drop the other directive elements, and so do we.
                Some("replace") => replace = true,
                // Deliberate difference: upstream answers "merging lists cannot yet be specified in the
                // patch"; merging is what the list does anyway, so the element merges like any other.
                Some("merge") => {
                    element.remove(DIRECTIVE_MARKER);
                    if !element.is_empty() {
                        plain.push(Value::Object(element));
                    }
                }
                _ => {
                    return Err(PatchError::InvalidDirective {
                        path: display_path(path),
                        value: directive.to_string(),
                    });
                }
            }
        }
        if replace {
            let replacement = match self.mode {
                Mode::Apply => plain
                    .into_iter()
                    .map(|item| match item {
                        Value::Object(element) => Ok(Value::Object(
                            self.merge_map(Object::new(), element, path)?.unwrap_or_default(),
                        )),
                        other => Ok(other),
                    })
                    .collect::<Result<_, PatchError>>()?,
                Mode::Combine => plain,
            };
            return Ok((replacement, Vec::new()));
        }
        Ok((current, plain))
    }

    /// upstream: `mergeSliceWithoutSpecialElements`. Merges each patch element into the element with the
    /// same merge key, or appends it.
    fn merge_plain_elements(
        &self,
        mut current: Vec<Value>,
        patch: &[Value],
        key: &str,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        for item in patch {
            let Value::Object(element) = item else {
                unreachable!("check_elements admits only maps")
            };
            let value = merge_key_value(element, key).ok_or_else(|| PatchError::MissingMergeKey {
                path: display_path(path),
                key: key.into(),
            })?;
            match current
                .iter()
                .position(|existing| existing.get(key) == Some(value))
            {
                Some(index) => {
                    let Value::Object(existing) = std::mem::take(&mut current[index]) else {
                        unreachable!("check_elements admits only maps")
                    };
                    let merged = self
                        .merge_map(existing, element.clone(), path)?
                        .unwrap_or_default();
                    current[index] = Value::Object(merged);
                }
                None => {
                    if let Some(fresh) = self.fresh(item.clone(), path)? {
                        current.push(fresh);
                    }
                }
            }
        }
        Ok(current)
    }

    /// upstream: `partitionMapsByPresentInList`.
    fn partition_maps(
        &self,
        merged: Vec<Value>,
        by: &[Value],
        key: &str,
        path: &[String],
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        if by.iter().any(|item| !item.is_object()) {
            return Err(self.err(path, format!("elements of a list merged by {key} must be maps")));
        }
        let mut in_patch = Vec::new();
        let mut server_only = Vec::new();
        for item in merged {
            let value = item.get(key).ok_or_else(|| PatchError::MissingMergeKey {
                path: display_path(path),
                key: key.into(),
            })?;
            if by.iter().any(|candidate| candidate.get(key) == Some(value)) {
                in_patch.push(item);
            } else {
                server_only.push(item);
            }
        }
        Ok((in_patch, server_only))
    }

    /// upstream: `normalizeElementOrder`. Patch items follow the patch's order, server-only items the
    /// server's, and the two interleave by the server's order (`mergeSortedSlice`).
    fn normalize_element_order(
        &self,
        patch_items: Vec<Value>,
        server_only: Vec<Value>,
        patch_order: &[Value],
        server_order: &[Value],
        key: Option<&str>,
        path: &[String],
    ) -> Result<Vec<Value>, PatchError> {
        let patch_items = self.normalize_slice_order(patch_items, patch_order, key, path)?;
        let server_only = self.normalize_slice_order(server_only, server_order, key, path)?;
        Ok(merge_sorted_slice(server_only, patch_items, server_order, key))
    }

    /// upstream: `normalizeSliceOrder`: a stable sort by position in `order`; `$patch: delete` elements go
    /// last.
    fn normalize_slice_order(
        &self,
        to_sort: Vec<Value>,
        order: &[Value],
        key: Option<&str>,
        path: &[String],
    ) -> Result<Vec<Value>, PatchError> {
        let (mut to_sort, to_delete) = match key {
            Some(key) => {
                // upstream: validateMergeKeyInLists.
                for item in to_sort.iter().chain(order) {
                    if item.as_object().is_none_or(|element| !element.contains_key(key)) {
                        return Err(PatchError::MissingMergeKey {
                            path: display_path(path),
                            key: key.into(),
                        });
                    }
                }
                to_sort
                    .into_iter()
                    .partition::<Vec<_>, _>(|item| !is_delete_element(item))
            }
            None => (to_sort, Vec::new()),
        };
        let positions = Positions::new(order, key);
        stable_sort_by_position(&mut to_sort, &positions, key);
        to_sort.extend(to_delete);
        Ok(to_sort)
    }

    /// upstream: `applyRetainKeysDirective`.
    fn apply_retain_keys(
        &self,
        original: &mut Object,
        patch: &mut Object,
        path: &[String],
    ) -> Result<(), PatchError> {
        let Some(retain) = patch.remove(RETAIN_KEYS) else {
            return Ok(());
        };
        let bad = |reason: String| PatchError::InvalidDirectiveFormat {
            path: display_path(path),
            directive: RETAIN_KEYS,
            reason,
        };
        if self.mode == Mode::Combine {
            match original.get(RETAIN_KEYS) {
                Some(existing) if *existing != retain => {
                    return Err(bad(format!(
                        "{existing} and {retain} differ between the two patches"
                    )));
                }
                Some(_) => {}
                None => {
                    original.insert(RETAIN_KEYS.to_owned(), retain);
                }
            }
            return Ok(());
        }
        let Value::Array(retain) = retain else {
            return Err(bad("must be a list of field names".into()));
        };
        let retained = |key: &str| retain.iter().any(|item| item.as_str() == Some(key));
        for (key, value) in patch.iter() {
            if value.is_null()
                || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                || key.starts_with(SET_ELEMENT_ORDER)
            {
                continue;
            }
            if !retained(key) {
                return Err(bad(format!("the patch sets {key}, which is not in the list")));
            }
        }
        original.retain(|key, _| retained(key));
        Ok(())
    }

    /// upstream: `mergePatchIntoOriginal`: merges each list that has a `$setElementOrder` and puts it in
    /// that order. Precedence: `$setElementOrder` > order in the patch list > order in the live list.
    fn merge_ordered_lists(
        &self,
        original: &mut Object,
        patch: &mut Object,
        path: &mut Vec<String>,
    ) -> Result<(), PatchError> {
        let directive_keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for directive_key in directive_keys {
            let order_value = patch.remove(&directive_key).expect("key listed above");
            let bad = |reason: &str| PatchError::InvalidDirectiveFormat {
                path: display_path(path),
                directive: SET_ELEMENT_ORDER,
                reason: reason.into(),
            };
            if self.mode == Mode::Combine {
                match original.get(&directive_key) {
                    Some(existing) if *existing != order_value => {
                        return Err(bad("the two patches disagree on the order"));
                    }
                    Some(_) => {}
                    None => {
                        original.insert(directive_key.clone(), order_value.clone());
                    }
                }
            }
            let Value::Array(order) = order_value else {
                return Err(bad("must be a list"));
            };
            let field = extract_key(&directive_key, SET_ELEMENT_ORDER, path)?.to_owned();
            let current_list = match original.get(&field) {
                None | Some(Value::Null) => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(other) => {
                    return Err(self.err(path, format!("{field} is a {}, not a list", value_kind(other))));
                }
            };
            let patch_list = match patch.get(&field) {
                // A null list is a deletion; the main loop of merge_map executes it.
                None | Some(Value::Null) => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(other) => {
                    return Err(self.err(
                        path,
                        format!("the patch has a {} for list {field}", value_kind(other)),
                    ));
                }
            };
            path.push(field);
            let result = self.merge_one_ordered_list(current_list, patch_list, &order, path);
            let field = path.pop().expect("pushed above");
            let Some(ordered) = result? else { continue };
            patch.remove(&field);
            original.insert(field, Value::Array(ordered));
        }
        Ok(())
    }

    fn merge_one_ordered_list(
        &self,
        current: Option<Vec<Value>>,
        patch: Option<Vec<Value>>,
        order: &[Value],
        path: &mut Vec<String>,
    ) -> Result<Option<Vec<Value>>, PatchError> {
        let key = match self.list_strategy(path) {
            ListStrategy::MergeByKey(keys) => Some(keys[0]),
            _ => None,
        };
        if let Some(patch) = &patch {
            self.validate_patch_with_order(patch, order, key, path)?;
        }
        let server_order = current.clone().unwrap_or_default();
        let merged = match (current, patch) {
            (None, None) => return Ok(None),
            (Some(current), None) => current,
            (None, Some(patch)) => match self.mode {
                Mode::Apply => self.merge_list(Vec::new(), patch, path)?,
                Mode::Combine => patch,
            },
            (Some(current), Some(patch)) => self.merge_list(current, patch, path)?,
        };
        // Nothing to order (upstream fails here on `sliceElementType` of two empty lists).
        if merged.is_empty() {
            return Ok(Some(merged));
        }
        let (patch_items, server_only) = match key {
            Some(key) => self.partition_maps(merged, order, key, path)?,
            None => partition_primitives(merged, order),
        };
        Ok(Some(self.normalize_element_order(
            patch_items,
            server_only,
            order,
            &server_order,
            key,
            path,
        )?))
    }

    /// upstream: `validatePatchWithSetOrderList`: the patch list's elements (deletions aside) must appear in
    /// the `$setElementOrder` list, in the same relative order.
    fn validate_patch_with_order(
        &self,
        patch: &[Value],
        order: &[Value],
        key: Option<&str>,
        path: &[String],
    ) -> Result<(), PatchError> {
        if patch.is_empty() || order.is_empty() {
            return Ok(());
        }
        let not_deleted: Vec<&Value> = match key {
            Some(key) => {
                if patch.iter().chain(order).any(|item| !item.is_object()) {
                    return Err(self.err(path, format!("elements of a list merged by {key} must be maps")));
                }
                patch.iter().filter(|item| !is_delete_element(item)).collect()
            }
            None => patch.iter().collect(),
        };
        let (mut in_patch, mut in_order) = (0, 0);
        while in_patch < not_deleted.len() && in_order < order.len() {
            let item = not_deleted[in_patch];
            if item.get(DIRECTIVE_MARKER).is_some() {
                in_patch += 1;
                continue;
            }
            if self.merge_key_equal(item, &order[in_order], key, path)? {
                in_patch += 1;
            }
            in_order += 1;
        }
        if in_patch < not_deleted.len() {
            return Err(PatchError::InvalidDirectiveFormat {
                path: display_path(path),
                directive: SET_ELEMENT_ORDER,
                reason: "the patch list does not follow the $setElementOrder list".into(),
            });
        }
        Ok(())
    }

    /// upstream: `mergeKeyValueEqual`.
    fn merge_key_equal(
        &self,
        left: &Value,
        right: &Value,
        key: Option<&str>,
        path: &[String],
    ) -> Result<bool, PatchError> {
        let Some(key) = key else { return Ok(left == right) };
        let missing = || PatchError::MissingMergeKey {
            path: display_path(path),
            key: key.into(),
        };
        let left = left.as_object().ok_or_else(|| self.err(path, "expected a map"))?;
        let right = right
            .as_object()
            .ok_or_else(|| self.err(path, "expected a map"))?;
        Ok(left.get(key).ok_or_else(missing)? == right.get(key).ok_or_else(missing)?)
    }

    /// `$deleteFromPrimitiveList/<field>` (upstream: `deleteFromSlice`).
    fn delete_from_primitive_list(
        &self,
        original: &mut Object,
        to_delete: Value,
        path: &[String],
    ) -> Result<(), PatchError> {
        let field = path.last().expect("caller pushed the field");
        let bad = |reason: &str| PatchError::InvalidDirectiveFormat {
            path: display_path(path),
            directive: DELETE_FROM_PRIMITIVE_LIST,
            reason: reason.into(),
        };
        let Value::Array(to_delete) = to_delete else {
            return Err(bad("must be a list"));
        };
        if to_delete.iter().any(is_container) {
            return Err(bad("must list primitive values"));
        }
        match original.get_mut(field) {
            Some(Value::Array(list)) => list.retain(|item| !to_delete.contains(item)),
            // Deliberate difference: upstream sets the list to the deletion list when the object has none.
            None | Some(Value::Null) => {}
            Some(other) => {
                return Err(self.err(path, format!("expected a list, found a {}", value_kind(other))));
            }
        }
        Ok(())
    }
}

fn merge_key_value<'a>(element: &'a Object, key: &str) -> Option<&'a Value> {
    element.get(key).filter(|value| !value.is_null())
}

fn is_delete_element(item: &Value) -> bool {
    item.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some("delete")
}

/// upstream: `partitionPrimitivesByPresentInList`.
fn partition_primitives(merged: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    merged.into_iter().partition(|item| by.contains(item))
}

/// upstream: `deduplicateScalars`, including its order (it moves the last element into a duplicate's
/// place), which shows in the `$deleteFromPrimitiveList` lists kubectl sends.
fn deduplicate_scalars(mut items: Vec<Value>) -> Vec<Value> {
    let mut i = 0;
    while i + 1 < items.len() {
        let mut j = i + 1;
        while j < items.len() {
            if items[i] == items[j] {
                let last = items.pop().expect("j < len");
                if j < items.len() {
                    items[j] = last;
                }
                continue;
            }
            j += 1;
        }
        i += 1;
    }
    items
}

/// First positions of elements in a list, by merge key value (or by value for primitives), to answer
/// upstream's `index` in O(1). Go compares `typedItem[mergeKey]`, so a missing key equals a null one.
struct Positions(HashMap<String, usize>);

fn identity(item: &Value, key: Option<&str>) -> String {
    match key {
        Some(key) => item.get(key).map_or_else(|| "null".to_owned(), Value::to_string),
        None => item.to_string(),
    }
}

impl Positions {
    fn new(list: &[Value], key: Option<&str>) -> Positions {
        let mut positions = HashMap::with_capacity(list.len());
        for (index, item) in list.iter().enumerate() {
            positions.entry(identity(item, key)).or_insert(index);
        }
        Positions(positions)
    }

    fn get(&self, item: &Value, key: Option<&str>) -> Option<usize> {
        self.0.get(&identity(item, key)).copied()
    }
}

/// `sort.SliceStable` with upstream's comparator from `normalizeSliceOrder`: by position when both are
/// found, otherwise "less". With every element found that is a plain stable sort; otherwise we run the
/// insertion sort Go runs for short slices, so the odd comparator gives Go's answer.
fn stable_sort_by_position(items: &mut Vec<Value>, positions: &Positions, key: Option<&str>) {
    let mut keyed: Vec<(Option<usize>, Value)> = items
        .drain(..)
        .map(|item| (positions.get(&item, key), item))
        .collect();
    if keyed.iter().all(|(position, _)| position.is_some()) {
        keyed.sort_by_key(|(position, _)| *position);
    } else {
        let less = |a: Option<usize>, b: Option<usize>| match (a, b) {
            (Some(a), Some(b)) => a < b,
            _ => true,
        };
        for i in 1..keyed.len() {
            let mut j = i;
            while j > 0 && less(keyed[j].0, keyed[j - 1].0) {
                keyed.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    items.extend(keyed.into_iter().map(|(_, item)| item));
}

/// upstream: `mergeSortedSlice`: interleaves `left` (server-only) into `right` (patch items) by position
/// in `server_order`; an element missing from it ends the comparison in favour of `right`.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let positions = Positions::new(server_order, key);
    let position = |item: &Value| positions.get(item, key);
    let mut merged = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((position(l), position(r)), (Some(l), Some(r)) if l < r),
        };
        let next = if take_left { left.next() } else { right.next() };
        merged.extend(next);
    }
    merged
}

// ---------------------------------------------------------------------------------------------------------
// Diffing (upstream: diffMaps and friends)
// ---------------------------------------------------------------------------------------------------------

/// upstream: `DiffOptions`.
#[derive(Clone, Copy, Default)]
struct DiffOptions {
    /// Generate the `$setElementOrder` parallel lists.
    set_element_order: bool,
    /// Leave changes and additions out (the deletions half of a three-way patch).
    ignore_changes_and_additions: bool,
    /// Leave deletions out (the delta half of a three-way patch).
    ignore_deletions: bool,
    /// Emit `$retainKeys` in this map (its field has the `retainKeys` strategy).
    build_retain_keys: bool,
}

/// Go's `fmt.Sprintf("%v", v)` for the JSON values a merge key or a primitive list holds; upstream sorts
/// and compares by it, which decides the order of deletions in the patches kubectl sends.
fn go_format(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_owned(),
        other => other.to_string(),
    }
}

/// What `diffLists` returns for one list field.
#[derive(Default)]
struct ListDiff {
    /// The patch list: additions and changes, then `$patch: delete` elements for merge-keyed lists.
    additions: Vec<Value>,
    /// The `$deleteFromPrimitiveList` list (primitive lists only).
    deletions: Vec<Value>,
    /// The `$setElementOrder` list.
    order: Vec<Value>,
}

/// upstream: `sortScalars`.
fn sort_scalars(mut items: Vec<Value>) -> Vec<Value> {
    items.sort_by_cached_key(go_format);
    items
}

/// upstream: `hasAdditionalNewField`.
fn has_additional_new_field(original: &Object, modified: &Object) -> bool {
    original
        .iter()
        .any(|(key, value)| !value.is_null() && !modified.contains_key(key))
}

impl Engine<'_> {
    /// upstream: `diffMaps`.
    fn diff_maps(
        &self,
        original: &Object,
        modified: &Object,
        path: &mut Vec<String>,
        opts: DiffOptions,
    ) -> Result<Object, PatchError> {
        let mut patch = Object::new();
        let mut retain_keys = Vec::new();
        for (key, modified_value) in modified {
            if opts.build_retain_keys && !modified_value.is_null() {
                retain_keys.push(Value::String(key.clone()));
            }
            let Some(original_value) = original.get(key) else {
                if !opts.ignore_changes_and_additions {
                    patch.insert(key.clone(), modified_value.clone());
                }
                continue;
            };
            // upstream: handleDirectiveMarker.
            if key == DIRECTIVE_MARKER {
                if !original_value.is_string() || !modified_value.is_string() {
                    return Err(PatchError::InvalidDirective {
                        path: display_path(path),
                        value: modified_value.to_string(),
                    });
                }
                if original_value != modified_value {
                    patch.insert(key.clone(), modified_value.clone());
                }
                continue;
            }
            if value_kind(original_value) != value_kind(modified_value) {
                if !opts.ignore_changes_and_additions {
                    patch.insert(key.clone(), modified_value.clone());
                }
                continue;
            }
            path.push(key.clone());
            let result = match (original_value, modified_value) {
                (Value::Object(original_map), Value::Object(modified_map)) => {
                    self.diff_map_field(original_map, modified_map, &mut patch, path, opts)
                }
                (Value::Array(original_list), Value::Array(modified_list)) => {
                    self.diff_list_field(original_list, modified_list, &mut patch, path, opts)
                }
                _ => {
                    // upstream: replacePatchFieldIfNotEqual.
                    if !opts.ignore_changes_and_additions && original_value != modified_value {
                        patch.insert(key.clone(), modified_value.clone());
                    }
                    Ok(())
                }
            };
            path.pop();
            result?;
        }
        // upstream: updatePatchIfMissing.
        if !opts.ignore_deletions {
            for key in original.keys() {
                if !modified.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
        }
        if !retain_keys.is_empty() && (!patch.is_empty() || has_additional_new_field(original, modified)) {
            patch.insert(RETAIN_KEYS.to_owned(), Value::Array(sort_scalars(retain_keys)));
        }
        Ok(patch)
    }

    /// upstream: `handleMapDiff`. `path` ends with the field's key.
    fn diff_map_field(
        &self,
        original: &Object,
        modified: &Object,
        patch: &mut Object,
        path: &mut Vec<String>,
        opts: DiffOptions,
    ) -> Result<(), PatchError> {
        let key = path.last().expect("caller pushed the key").clone();
        let meta = self.meta(path);
        if meta == Some(Meta::ReplaceMap) {
            // upstream sends the whole map even when it did not change.
            if !opts.ignore_changes_and_additions {
                patch.insert(key, Value::Object(modified.clone()));
            }
            return Ok(());
        }
        let opts = DiffOptions {
            build_retain_keys: meta == Some(Meta::RetainKeysMap),
            ..opts
        };
        let field_patch = self.diff_maps(original, modified, path, opts)?;
        if !field_patch.is_empty() {
            patch.insert(key, Value::Object(field_patch));
        }
        Ok(())
    }

    /// upstream: `handleSliceDiff`. `path` ends with the field's key.
    fn diff_list_field(
        &self,
        original: &[Value],
        modified: &[Value],
        patch: &mut Object,
        path: &mut Vec<String>,
        opts: DiffOptions,
    ) -> Result<(), PatchError> {
        let key = path.last().expect("caller pushed the key").clone();
        let (merge_key, retain_keys) = match self.meta(path) {
            Some(Meta::List(ListStrategy::MergeByKey(keys), retain)) => (Some(keys[0]), retain),
            Some(Meta::List(ListStrategy::Set, retain)) => (None, retain),
            _ => {
                if !opts.ignore_changes_and_additions && original != modified {
                    patch.insert(key, Value::Array(modified.to_vec()));
                }
                return Ok(());
            }
        };
        let opts = DiffOptions {
            build_retain_keys: retain_keys,
            ..opts
        };
        let ListDiff {
            additions,
            deletions,
            order,
        } = self.diff_lists(original, modified, merge_key, path, opts)?;
        if !additions.is_empty() {
            patch.insert(key.clone(), Value::Array(additions));
        }
        if !deletions.is_empty() {
            patch.insert(
                format!("{DELETE_FROM_PRIMITIVE_LIST}/{key}"),
                Value::Array(deletions),
            );
        }
        if !order.is_empty() {
            patch.insert(format!("{SET_ELEMENT_ORDER}/{key}"), Value::Array(order));
        }
        Ok(())
    }

    /// upstream: `diffLists`.
    fn diff_lists(
        &self,
        original: &[Value],
        modified: &[Value],
        key: Option<&str>,
        path: &mut Vec<String>,
        opts: DiffOptions,
    ) -> Result<ListDiff, PatchError> {
        if original.is_empty() {
            if modified.is_empty() || opts.ignore_changes_and_additions {
                return Ok(ListDiff::default());
            }
            return Ok(ListDiff {
                additions: modified.to_vec(),
                ..ListDiff::default()
            });
        }
        self.check_elements(&[original, modified], key, path)?;
        let Some(key) = key else {
            let (additions, deletions) = diff_lists_of_scalars(original, modified, opts);
            let additions = self.normalize_slice_order(additions, modified, None, path)?;
            let order = if opts.set_element_order
                && ((!opts.ignore_deletions && !deletions.is_empty())
                    || (!opts.ignore_changes_and_additions && original != modified))
            {
                modified.to_vec()
            } else {
                Vec::new()
            };
            return Ok(ListDiff {
                additions,
                deletions,
                order,
            });
        };
        let (changes, deletions) = self.diff_lists_of_maps(original, modified, key, path, opts)?;
        let mut patch_list = self.normalize_slice_order(changes, modified, Some(key), path)?;
        let order_same = self.is_order_same(original, modified, key, path)?;
        patch_list.extend(deletions);
        let order = if opts.set_element_order
            && ((!opts.ignore_changes_and_additions && (!patch_list.is_empty() || !order_same))
                || (!opts.ignore_deletions && !patch_list.is_empty()))
        {
            modified
                .iter()
                .map(|item| {
                    let mut element = Object::new();
                    element.insert(key.to_owned(), item.get(key).cloned().unwrap_or(Value::Null));
                    Value::Object(element)
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(ListDiff {
            additions: patch_list,
            deletions: Vec::new(),
            order,
        })
    }

    /// upstream: `isOrderSame`.
    fn is_order_same(
        &self,
        original: &[Value],
        modified: &[Value],
        key: &str,
        path: &[String],
    ) -> Result<bool, PatchError> {
        if original.len() != modified.len() {
            return Ok(false);
        }
        for (left, right) in original.iter().zip(modified) {
            if !self.merge_key_equal(left, right, Some(key), path)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// upstream: `diffListsOfMaps`: walks both lists sorted by the merge key's `%v` string, recursing into
    /// matches, adding new elements and emitting `{key: v, "$patch": "delete"}` for removed ones.
    fn diff_lists_of_maps(
        &self,
        original: &[Value],
        modified: &[Value],
        key: &str,
        path: &mut Vec<String>,
        opts: DiffOptions,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let sorted = |list: &'_ [Value]| -> Result<Vec<(String, Value, Object)>, PatchError> {
            let mut entries = Vec::with_capacity(list.len());
            for item in list {
                let element = item.as_object().expect("check_elements admits only maps");
                let value = element.get(key).ok_or_else(|| PatchError::MissingMergeKey {
                    path: display_path(path),
                    key: key.into(),
                })?;
                entries.push((go_format(value), value.clone(), element.clone()));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(entries)
        };
        let original = sorted(original)?;
        let modified = sorted(modified)?;
        let mut patch = Vec::new();
        let mut deletions = Vec::new();
        let (mut o, mut m) = (0, 0);
        while o < original.len() || m < modified.len() {
            let both = o < original.len() && m < modified.len();
            if both && original[o].0 == modified[m].0 {
                let mut element_patch = self.diff_maps(&original[o].2, &modified[m].2, path, opts)?;
                if !element_patch.is_empty() {
                    element_patch.insert(key.to_owned(), modified[m].1.clone());
                    patch.push(Value::Object(element_patch));
                }
                o += 1;
                m += 1;
            } else if o >= original.len() || (both && original[o].0 > modified[m].0) {
                if !opts.ignore_changes_and_additions {
                    patch.push(Value::Object(modified[m].2.clone()));
                }
                m += 1;
            } else {
                if !opts.ignore_deletions {
                    // upstream: CreateDeleteDirective.
                    let mut directive = Object::new();
                    directive.insert(key.to_owned(), original[o].1.clone());
                    directive.insert(DIRECTIVE_MARKER.to_owned(), Value::String("delete".into()));
                    deletions.push(Value::Object(directive));
                }
                o += 1;
            }
        }
        Ok((patch, deletions))
    }
}

/// upstream: `diffListsOfScalars`: additions and (deduplicated) deletions of a primitive merge list.
fn diff_lists_of_scalars(
    original: &[Value],
    modified: &[Value],
    opts: DiffOptions,
) -> (Vec<Value>, Vec<Value>) {
    let original = sort_scalars(original.to_vec());
    let modified = sort_scalars(modified.to_vec());
    let mut additions = Vec::new();
    let mut deletions = Vec::new();
    let (mut o, mut m) = (0, 0);
    while o < original.len() || m < modified.len() {
        let both = o < original.len() && m < modified.len();
        let (left, right) = (
            original.get(o).map(go_format).unwrap_or_default(),
            modified.get(m).map(go_format).unwrap_or_default(),
        );
        if both && left == right {
            o += 1;
            m += 1;
        } else if o >= original.len() || (both && left > right) {
            if !opts.ignore_changes_and_additions {
                additions.push(modified[m].clone());
            }
            m += 1;
        } else {
            if !opts.ignore_deletions {
                deletions.push(original[o].clone());
            }
            o += 1;
        }
    }
    (additions, deduplicate_scalars(deletions))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    fn pod(patch: Value, original: Value) -> Value {
        apply(&original, &patch, "/Pod").expect("patch applies")
    }

    fn has_directive(value: &Value) -> bool {
        match value {
            Value::Object(map) => map
                .iter()
                .any(|(key, value)| key.starts_with('$') || has_directive(value)),
            Value::Array(items) => items.iter().any(has_directive),
            _ => false,
        }
    }

    // --- (a) directives and list strategies ---------------------------------------------------------------

    #[test]
    fn maps_merge_recursively_and_null_deletes_keys() {
        let original = json!({"metadata": {"labels": {"app": "web", "tier": "front"}, "name": "x"}});
        let patch = json!({"metadata": {"labels": {"tier": null, "team": "blue"}, "missing": null}});
        assert_eq!(
            pod(patch, original),
            json!({"metadata": {"labels": {"app": "web", "team": "blue"}, "name": "x"}})
        );
    }

    #[test]
    fn scalars_and_type_changes_between_scalars_replace() {
        let original = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}});
        let result = apply(&original, &patch, "/Service").unwrap();
        assert_eq!(
            result,
            json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}})
        );
    }

    #[test]
    fn patch_replace_on_a_map_replaces_it_and_consumes_nested_directives() {
        let original = json!({"spec": {"securityContext": {"runAsUser": 1, "fsGroup": 2}}});
        let patch = json!({"spec": {"securityContext": {"$patch": "replace", "runAsGroup": 3, "x": null}}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"securityContext": {"runAsGroup": 3}}})
        );
    }

    #[test]
    fn patch_delete_on_a_map_removes_the_key() {
        let original = json!({"spec": {"securityContext": {"runAsUser": 1}, "dnsPolicy": "ClusterFirst"}});
        let patch = json!({"spec": {"securityContext": {"$patch": "delete"}}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"dnsPolicy": "ClusterFirst"}})
        );
    }

    #[test]
    fn patch_merge_on_a_map_is_the_default_merge() {
        let original = json!({"metadata": {"labels": {"a": "1"}}});
        let patch = json!({"metadata": {"labels": {"$patch": "merge", "b": "2"}}});
        assert_eq!(
            pod(patch, original),
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}})
        );
    }

    #[test]
    fn unknown_patch_directive_is_a_bad_request() {
        for patch in [
            json!({"metadata": {"$patch": "bogus"}}),
            json!({"metadata": {"$patch": 1}}),
            json!({"spec": {"containers": [{"name": "c", "$patch": "remove"}]}}),
        ] {
            let err = apply(&json!({"spec": {"containers": [{"name": "c"}]}}), &patch, "/Pod").unwrap_err();
            assert!(err.is_bad_request(), "{err}");
            assert!(err.to_string().starts_with("invalid $patch directive"), "{err}");
        }
    }

    #[test]
    fn list_without_strategy_is_replaced() {
        let original = json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}], "containers": [
            {"name": "c", "command": ["sleep", "1"]}]}});
        let patch = json!({"spec": {"tolerations": [{"key": "b", "operator": "Exists"}], "containers": [
            {"name": "c", "command": ["true"]}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"tolerations": [{"key": "b", "operator": "Exists"}], "containers": [
                {"name": "c", "command": ["true"]}]}})
        );
    }

    #[test]
    fn merge_keyed_list_merges_matches_and_places_new_items_like_upstream() {
        // mergeSortedSlice puts a new patch item before the next server-only item it cannot compare with.
        let original = json!({"spec": {"containers": [
            {"name": "a", "image": "1"}, {"name": "b", "image": "1"}, {"name": "c", "image": "1"}]}});
        let patch =
            json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "d", "image": "2"}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"},
                {"name": "d", "image": "2"}, {"name": "c", "image": "1"}]}})
        );
    }

    #[test]
    fn patch_delete_element_removes_every_element_with_that_key() {
        let original = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]}]}});
        let patch =
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "$patch": "delete"}]}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}})
        );
    }

    #[test]
    fn patch_replace_element_replaces_the_whole_list() {
        let original = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patch =
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "i", "x": null}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "z", "image": "i"}]}})
        );
    }

    #[test]
    fn patch_merge_element_merges_like_a_plain_element() {
        let original = json!({"spec": {"containers": [{"name": "a", "image": "1"}]}});
        let patch = json!({"spec": {"containers": [{"$patch": "merge"}, {"name": "a", "$patch": "merge", "image": "2"}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "a", "image": "2"}]}})
        );
    }

    #[test]
    fn primitive_merge_list_is_a_set_union_keeping_order() {
        let original = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {"finalizers": ["c", "a"]}});
        // Patch items keep the patch's order and interleave with server-only items by server order.
        assert_eq!(
            pod(patch, original),
            json!({"metadata": {"finalizers": ["c", "a", "b"]}})
        );
    }

    #[test]
    fn delete_from_primitive_list_removes_values() {
        let original = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}});
        assert_eq!(
            pod(patch, original),
            json!({"metadata": {"finalizers": ["a", "c"]}})
        );
    }

    #[test]
    fn delete_from_primitive_list_of_an_absent_list_does_nothing() {
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}});
        assert_eq!(pod(patch, json!({"metadata": {}})), json!({"metadata": {}}));
    }

    #[test]
    fn set_element_order_orders_a_merge_keyed_list() {
        let original = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        let patch =
            json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}})
        );
    }

    #[test]
    fn set_element_order_interleaves_server_only_items_by_server_order() {
        let original = json!({"spec": {"containers": [{"name": "a"}, {"name": "server"}, {"name": "b"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "new"}, {"name": "a"}],
            "containers": [{"name": "new", "image": "i"}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "server"}, {"name": "b"}, {"name": "new", "image": "i"},
                {"name": "a"}]}})
        );
    }

    #[test]
    fn set_element_order_orders_a_primitive_list() {
        let original = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch =
            json!({"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["c"]}});
        assert_eq!(
            pod(patch, original),
            json!({"metadata": {"finalizers": ["c", "b", "a"]}})
        );
    }

    #[test]
    fn set_element_order_that_contradicts_the_patch_list_is_a_bad_request() {
        let original = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "1"}, {"name": "a", "image": "1"}]}});
        let err = apply(&original, &patch, "/Pod").unwrap_err();
        assert!(err.is_bad_request(), "{err}");
    }

    #[test]
    fn retain_keys_clears_unlisted_keys_of_a_volume() {
        let original =
            json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "k", "emptyDir": {}}]}});
        let patch = json!({"spec": {"volumes": [
            {"name": "data", "$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"volumes": [{"name": "data", "configMap": {"name": "cm"}}, {"name": "k", "emptyDir": {}}]}})
        );
    }

    #[test]
    fn retain_keys_must_list_every_field_the_patch_sets() {
        let original = json!({"spec": {"strategy": {"type": "RollingUpdate"}}});
        let patch =
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}}});
        let err = apply(&original, &patch, "apps/Deployment").unwrap_err();
        assert!(
            err.is_bad_request() && err.to_string().contains("$retainKeys"),
            "{err}"
        );
        let not_a_list = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
        assert!(
            apply(&original, &not_a_list, "apps/Deployment")
                .unwrap_err()
                .is_bad_request()
        );
    }

    #[test]
    fn container_ports_merge_on_container_port_alone() {
        // upstream quirk: patchMergeKey is containerPort, so UDP 53 merges into TCP 53.
        let original = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 53, "protocol": "TCP"}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}});
        assert_eq!(
            pod(patch, original),
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}})
        );
    }

    #[test]
    fn merge_keys_of_other_kinds_come_from_the_table() {
        // Without $setElementOrder a new element lands before the server-only elements (mergeSortedSlice
        // cannot place it by server order), as on a real cluster.
        let cases = [
            (
                "/Service",
                json!({"spec": {"ports": [{"port": 80, "name": "a"}]}}),
                json!({"spec": {"ports": [{"port": 443, "name": "b"}]}}),
                json!({"spec": {"ports": [{"port": 443, "name": "b"}, {"port": 80, "name": "a"}]}}),
            ),
            (
                "/Node",
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "1"}]}}),
                json!({"status": {"addresses": [{"type": "Hostname", "address": "h"}]}}),
                json!({"status": {"addresses": [{"type": "Hostname", "address": "h"}, {"type": "InternalIP", "address": "1"}]}}),
            ),
            (
                "/Pod",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
            (
                "apps/Deployment",
                json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}]}}),
            ),
            (
                "/ServiceAccount",
                json!({"secrets": [{"name": "a"}]}),
                json!({"secrets": [{"name": "b"}]}),
                json!({"secrets": [{"name": "b"}, {"name": "a"}]}),
            ),
            (
                "/Namespace",
                json!({"status": {"conditions": [{"type": "A"}]}}),
                json!({"status": {"conditions": [{"type": "B"}]}}),
                json!({"status": {"conditions": [{"type": "B"}, {"type": "A"}]}}),
            ),
            (
                "/Endpoints",
                json!({"subsets": [{"addresses": [{"ip": "1"}]}]}),
                json!({"subsets": [{"addresses": [{"ip": "2"}]}]}),
                json!({"subsets": [{"addresses": [{"ip": "2"}]}]}),
            ),
        ];
        for (kind, original, patch, expected) in cases {
            assert_eq!(apply(&original, &patch, kind).unwrap(), expected, "{kind}");
        }
    }

    #[test]
    fn embedded_pod_specs_merge_containers_by_name() {
        let template =
            |image: &str| json!({"template": {"spec": {"containers": [{"name": "c", "image": image}]}}});
        let patch_template = json!({"template": {"spec": {"containers": [{"name": "d", "image": "x"}]}}});
        for kind in [
            "apps/Deployment",
            "apps/ReplicaSet",
            "apps/StatefulSet",
            "apps/DaemonSet",
            "batch/Job",
        ] {
            let result = apply(
                &json!({"spec": template("i")}),
                &json!({"spec": patch_template}),
                kind,
            )
            .unwrap();
            assert_eq!(
                result["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .unwrap()
                    .len(),
                2,
                "{kind}"
            );
        }
        let cron = json!({"spec": {"jobTemplate": {"spec": template("i")}}});
        let result = apply(
            &cron,
            &json!({"spec": {"jobTemplate": {"spec": patch_template}}}),
            "batch/CronJob",
        )
        .unwrap();
        assert_eq!(
            result["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        // A kind without metadata replaces lists, like a JSON merge patch.
        let result = apply(
            &json!({"spec": template("i")}),
            &json!({"spec": patch_template}),
            "example.com/Thing",
        )
        .unwrap();
        assert_eq!(
            result["spec"]["template"]["spec"]["containers"],
            json!([{"name": "d", "image": "x"}])
        );
    }

    #[test]
    fn replace_strategy_map_is_replaced_whole() {
        let original = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}});
        let patch = json!({"spec": {"selector": {"matchExpressions": []}}});
        let result = apply(&original, &patch, "policy/PodDisruptionBudget").unwrap();
        assert_eq!(result, json!({"spec": {"selector": {"matchExpressions": []}}}));
    }

    #[test]
    fn directives_inside_new_values_are_consumed() {
        let patch = json!({"spec": {
            "securityContext": {"$patch": "delete"},
            "affinity": {"nodeAffinity": {"x": null, "$patch": "merge"}},
            "containers": [{"name": "c", "env": [{"name": "A", "$patch": "delete"}, {"name": "B"}],
                "$setElementOrder/env": [{"name": "B"}]}],
            "tolerations": [{"key": "k", "$patch": "delete"}],
            "$unknown": 1}});
        let result = pod(patch, json!({"spec": {}}));
        assert_eq!(
            result,
            json!({"spec": {"affinity": {"nodeAffinity": {}}, "containers": [{"name": "c", "env": [{"name": "B"}]}],
                "tolerations": [{"key": "k"}]}})
        );
        assert!(!has_directive(&result));
    }

    #[test]
    fn list_strategy_table_answers_for_every_listed_field() {
        use ListStrategy::*;
        let cases: &[(&str, &[&str], ListStrategy)] = &[
            ("/Pod", &["spec", "containers"], MergeByKey(&["name"])),
            ("/Pod", &["spec", "initContainers", "env"], MergeByKey(&["name"])),
            (
                "/Pod",
                &["spec", "ephemeralContainers", "volumeMounts"],
                MergeByKey(&["mountPath"]),
            ),
            (
                "/Pod",
                &["spec", "containers", "ports"],
                MergeByKey(&["containerPort", "protocol"]),
            ),
            (
                "/Pod",
                &["spec", "containers", "volumeDevices"],
                MergeByKey(&["devicePath"]),
            ),
            ("/Pod", &["spec", "volumes"], MergeByKey(&["name"])),
            ("/Pod", &["spec", "imagePullSecrets"], MergeByKey(&["name"])),
            ("/Pod", &["spec", "hostAliases"], MergeByKey(&["ip"])),
            (
                "/Pod",
                &["spec", "topologySpreadConstraints"],
                MergeByKey(&["topologyKey", "whenUnsatisfiable"]),
            ),
            ("/Pod", &["spec", "schedulingGates"], MergeByKey(&["name"])),
            ("/Pod", &["spec", "resourceClaims"], MergeByKey(&["name"])),
            ("/Pod", &["spec", "tolerations"], Replace),
            ("/Pod", &["spec", "containers", "command"], Replace),
            ("/Pod", &["status", "containerStatuses"], Replace),
            ("/Pod", &["status", "podIPs"], MergeByKey(&["ip"])),
            ("/Pod", &["status", "hostIPs"], MergeByKey(&["ip"])),
            ("/Pod", &["status", "conditions"], MergeByKey(&["type"])),
            ("/Pod", &["metadata", "finalizers"], Set),
            (
                "/ConfigMap",
                &["metadata", "ownerReferences"],
                MergeByKey(&["uid"]),
            ),
            ("/Node", &["spec", "podCIDRs"], Set),
            ("/Node", &["spec", "taints"], Replace),
            ("/Service", &["spec", "ports"], MergeByKey(&["port", "protocol"])),
            ("/Endpoints", &["subsets"], Replace),
            (
                "apps/Deployment",
                &["spec", "template", "spec", "containers", "env"],
                MergeByKey(&["name"]),
            ),
            (
                "apps/Deployment",
                &["spec", "template", "metadata", "finalizers"],
                Set,
            ),
            (
                "apps/StatefulSet",
                &["status", "conditions"],
                MergeByKey(&["type"]),
            ),
            ("apps/StatefulSet", &["spec", "volumeClaimTemplates"], Replace),
            ("batch/Job", &["status", "conditions"], MergeByKey(&["type"])),
            (
                "batch/CronJob",
                &["spec", "jobTemplate", "spec", "template", "spec", "volumes"],
                MergeByKey(&["name"]),
            ),
            ("coordination.k8s.io/Lease", &["spec", "holderIdentity"], Replace),
        ];
        for (kind, path, expected) in cases {
            assert_eq!(list_strategy(kind, path), *expected, "{kind} {path:?}");
        }
        assert!(retains_keys("/Pod", &["spec", "volumes"]));
        assert!(retains_keys("apps/Deployment", &["spec", "strategy"]));
        assert!(!retains_keys("apps/DaemonSet", &["spec", "updateStrategy"]));
        assert!(!retains_keys("/Pod", &["spec", "containers"]));
    }

    #[test]
    fn diff_emits_nulls_set_element_order_and_delete_directives() {
        let from = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
        let to = json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["y", "z"]},
            "spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]}});
        let patch = diff(&from, &to, "/Pod").unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"b": null}, "finalizers": ["z"],
                    "$deleteFromPrimitiveList/finalizers": ["x"], "$setElementOrder/finalizers": ["y", "z"]},
                "spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "c"}],
                    "containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"},
                        {"name": "a", "$patch": "delete"}]}})
        );
        assert_eq!(apply(&from, &patch, "/Pod").unwrap(), to);
        assert_eq!(diff(&to, &to, "/Pod").unwrap(), json!({}));
    }

    #[test]
    fn diff_builds_retain_keys_for_retain_keys_fields() {
        let from = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let to = json!({"spec": {"strategy": {"type": "Recreate"}}});
        assert_eq!(
            diff(&from, &to, "apps/Deployment").unwrap(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}})
        );
    }

    #[test]
    fn three_way_deletes_only_what_was_last_applied() {
        let last_applied = json!({"metadata": {"labels": {"mine": "1", "gone": "1"}}});
        let modified = json!({"metadata": {"labels": {"mine": "2"}}});
        let current = json!({"metadata": {"labels": {"mine": "1", "gone": "1", "theirs": "1"}}});
        let patch = three_way(&last_applied, &modified, &current, "/Pod").unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"mine": "2", "gone": null}}})
        );
        assert_eq!(
            apply(&current, &patch, "/Pod").unwrap(),
            json!({"metadata": {"labels": {"mine": "2", "theirs": "1"}}})
        );
        assert_eq!(
            three_way(&modified, &modified, &modified, "/Pod").unwrap(),
            json!({})
        );
    }

    // --- (b) real kubectl 1.32 requests -------------------------------------------------------------------
    //
    // Captured with `kubectl -v=9` against kubeling while it still answered strategic merge patches with
    // 415, so the request bodies below are exactly what kubectl sent. The expected results are written out
    // by hand from upstream's semantics.

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("fixture is json")
    }

    /// kubectl's inputs to CreateThreeWayMergePatch for `kubectl apply`: the last-applied annotation of the
    /// live object, and the new manifest carrying its new annotation (which the captured patch contains).
    fn apply_inputs(live: &Value, patch: &Value) -> (Value, Value) {
        let original = parse(live["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap());
        let new_last_applied = patch["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
        let mut modified = parse(new_last_applied);
        modified["metadata"]["annotations"] = json!({ LAST_APPLIED: new_last_applied });
        (original, modified)
    }

    #[test]
    fn kubectl_apply_of_changed_image_env_labels_and_containers() {
        let live = parse(fixtures::POD_LIVE);
        let patch = parse(fixtures::APPLY_POD_PATCH);
        let (original, modified) = apply_inputs(&live, &patch);
        assert_eq!(three_way(&original, &modified, &live, "/Pod").unwrap(), patch);

        let mut expected = live.clone();
        expected["metadata"]["annotations"][LAST_APPLIED] =
            patch["metadata"]["annotations"][LAST_APPLIED].clone();
        expected["metadata"]["labels"] = json!({"app": "web", "team": "blue"});
        expected["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        expected["spec"]["containers"][0]["env"] =
            json!([{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]);
        expected["spec"]["containers"][1] = json!({"image": "redis", "name": "extra"});
        assert_eq!(apply(&live, &patch, "/Pod").unwrap(), expected);
    }

    #[test]
    fn kubectl_patch_with_delete_directive_removes_the_env_var() {
        let live = parse(fixtures::POD_LIVE);
        let mut expected = live.clone();
        expected["spec"]["containers"][0]["env"] = json!([{"name": "B", "value": "2"}]);
        assert_eq!(
            apply(&live, &parse(fixtures::PATCH_DELETE_ENV), "/Pod").unwrap(),
            expected
        );
    }

    #[test]
    fn kubectl_edit_sends_the_two_way_patch() {
        // The editor swapped the containers, changed c's image, replaced env B with D, dropped label tier,
        // added label x and a finalizer.
        let live = parse(fixtures::POD_LIVE);
        let edited = parse(fixtures::EDIT_EDITED);
        let patch = parse(fixtures::EDIT_PATCH);
        assert_eq!(diff(&live, &edited, "/Pod").unwrap(), patch);
        assert_eq!(apply(&live, &patch, "/Pod").unwrap(), edited);
    }

    #[test]
    fn kubectl_apply_switching_a_volume_source_and_finalizers() {
        let live = parse(fixtures::VOLUME_POD_LIVE);
        let patch = parse(fixtures::APPLY_VOLUME_PATCH);
        let (original, modified) = apply_inputs(&live, &patch);
        assert_eq!(three_way(&original, &modified, &live, "/Pod").unwrap(), patch);

        let mut expected = live.clone();
        expected["metadata"]["annotations"][LAST_APPLIED] =
            patch["metadata"]["annotations"][LAST_APPLIED].clone();
        expected["metadata"]["finalizers"] = json!(["b.io/two", "c.io/three"]);
        expected["spec"]["containers"][0]["volumeMounts"] =
            json!([{"mountPath": "/data", "name": "data"}, {"mountPath": "/keep", "name": "keep"}]);
        expected["spec"]["volumes"][0] = json!({"configMap": {"name": "cm"}, "name": "data"});
        assert_eq!(apply(&live, &patch, "/Pod").unwrap(), expected);
    }

    #[test]
    fn kubectl_apply_of_deployment_strategy_and_ports() {
        let live = parse(fixtures::DEPLOYMENT_LIVE);
        let patch = parse(fixtures::APPLY_DEPLOYMENT_PATCH);
        let (original, modified) = apply_inputs(&live, &patch);
        assert_eq!(
            three_way(&original, &modified, &live, "apps/Deployment").unwrap(),
            patch
        );

        let mut expected = live.clone();
        expected["metadata"]["annotations"][LAST_APPLIED] =
            patch["metadata"]["annotations"][LAST_APPLIED].clone();
        expected["spec"]["replicas"] = json!(3);
        expected["spec"]["strategy"] = json!({"type": "Recreate"});
        expected["spec"]["template"]["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]);
        assert_eq!(apply(&live, &patch, "apps/Deployment").unwrap(), expected);
    }

    // --- (d) malformed patches ----------------------------------------------------------------------------

    #[test]
    fn malformed_patches_are_errors_not_panics() {
        let live = parse(fixtures::POD_LIVE);
        let cases = [
            (json!({"spec": []}), false),
            (json!({"spec": {"containers": {"name": "c"}}}), false),
            (json!({"spec": {"containers": "c"}}), false),
            (json!({"spec": {"containers": ["c"]}}), false),
            (json!({"spec": {"containers": [["c"]]}}), false),
            (json!({"spec": {"containers": [{"image": "no-name"}]}}), false),
            (json!({"spec": {"containers": [{"$patch": "delete"}]}}), false),
            (json!({"metadata": {"finalizers": [{"a": 1}]}}), false),
            (
                json!({"spec": {"$setElementOrder/containers": {"name": "c"}}}),
                true,
            ),
            (json!({"spec": {"$setElementOrder/containers": ["c"]}}), false),
            (json!({"spec": {"$setElementOrdercontainers": []}}), true),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
                true,
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [{"a": 1}]}}),
                true,
            ),
            (json!({"spec": {"$patch": "bogus"}}), true),
            (json!(["not", "an", "object"]), true),
            (json!("string"), true),
        ];
        for (patch, bad_request) in cases {
            let err = apply(&live, &patch, "/Pod").expect_err(&patch.to_string());
            assert_eq!(err.is_bad_request(), bad_request, "{patch}: {err}");
            assert_eq!(
                err.to_string(),
                err.to_string()
                    .to_lowercase()
                    .replace("$setelementorder", "$setElementOrder")
                    .replace("$deletefromprimitivelist", "$deleteFromPrimitiveList")
                    .replace("$retainkeys", "$retainKeys"),
                "messages are lower case"
            );
        }
        assert!(matches!(
            apply(&live, &json!({"$patch": "delete"}), "/Pod"),
            Err(PatchError::CannotApply { .. })
        ));
    }

    // --- (c) properties -----------------------------------------------------------------------------------

    mod properties {
        use proptest::collection::{btree_map, vec};
        use proptest::option;
        use proptest::prelude::*;
        use proptest::sample::{select, subsequence};

        use super::*;

        /// A list of distinct keys from `keys`, in any order, each turned into an element.
        fn keyed(
            keys: &'static [&'static str],
            element: fn(&'static str) -> BoxedStrategy<Value>,
        ) -> BoxedStrategy<Value> {
            subsequence(keys.to_vec(), 0..=keys.len())
                .prop_shuffle()
                .prop_flat_map(move |chosen| chosen.into_iter().map(element).collect::<Vec<_>>())
                .prop_map(Value::Array)
                .boxed()
        }

        fn env(name: &'static str) -> BoxedStrategy<Value> {
            select(vec!["1", "2"])
                .prop_map(move |value| json!({"name": name, "value": value}))
                .boxed()
        }

        fn port(number: &'static str) -> BoxedStrategy<Value> {
            let number: u16 = number.parse().unwrap();
            option::of(select(vec!["TCP", "UDP"]))
                .prop_map(move |protocol| match protocol {
                    Some(protocol) => json!({"containerPort": number, "protocol": protocol}),
                    None => json!({"containerPort": number}),
                })
                .boxed()
        }

        fn mount(path: &'static str) -> BoxedStrategy<Value> {
            select(vec!["v1", "v2"])
                .prop_map(move |name| json!({"mountPath": path, "name": name}))
                .boxed()
        }

        fn container(name: &'static str) -> BoxedStrategy<Value> {
            (
                select(vec!["nginx", "redis"]),
                option::of(keyed(&["A", "B", "C"], env)),
                option::of(keyed(&["80", "443", "8080"], port)),
                option::of(keyed(&["/a", "/b", "/c"], mount)),
                option::of(vec(select(vec!["sh", "-c", "true"]), 0..3)),
            )
                .prop_map(move |(image, env, ports, mounts, command)| {
                    let mut container = json!({"name": name, "image": image});
                    for (field, value) in [("env", env), ("ports", ports), ("volumeMounts", mounts)] {
                        if let Some(value) = value {
                            container[field] = value;
                        }
                    }
                    if let Some(command) = command {
                        container["command"] = json!(command);
                    }
                    container
                })
                .boxed()
        }

        fn volume(name: &'static str) -> BoxedStrategy<Value> {
            prop_oneof![
                Just(json!({"name": name, "emptyDir": {}})),
                select(vec!["cm1", "cm2"])
                    .prop_map(move |cm| json!({"name": name, "configMap": {"name": cm}})),
                select(vec!["/x", "/y"])
                    .prop_map(move |path| json!({"name": name, "hostPath": {"path": path}})),
            ]
            .boxed()
        }

        fn string_map() -> impl Strategy<Value = Value> {
            btree_map(select(vec!["app", "tier", "team"]), select(vec!["a", "b"]), 0..3)
                .prop_map(|map| json!(map))
        }

        fn pod() -> impl Strategy<Value = Value> {
            (
                option::of(string_map()),
                option::of(string_map()),
                option::of(subsequence(vec!["a.io/1", "b.io/2", "c.io/3"], 0..=3).prop_shuffle()),
                keyed(&["c1", "c2", "c3"], container),
                option::of(keyed(&["v1", "v2", "v3"], volume)),
                option::of(vec(
                    select(vec!["k1", "k2"]).prop_map(|key| json!({"key": key, "operator": "Exists"})),
                    0..3,
                )),
            )
                .prop_map(
                    |(labels, annotations, finalizers, containers, volumes, tolerations)| {
                        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "spec": {"containers": containers}});
                        if let Some(labels) = labels {
                            pod["metadata"]["labels"] = labels;
                        }
                        if let Some(annotations) = annotations {
                            pod["metadata"]["annotations"] = annotations;
                        }
                        if let Some(finalizers) = finalizers {
                            pod["metadata"]["finalizers"] = json!(finalizers);
                        }
                        if let Some(volumes) = volumes {
                            pod["spec"]["volumes"] = volumes;
                        }
                        if let Some(tolerations) = tolerations {
                            pod["spec"]["tolerations"] = json!(tolerations);
                        }
                        pod
                    },
                )
        }

        /// Whether `result` has every field of `expected`, with lists compared by their strategy.
        fn contains(result: &Value, expected: &Value, path: &mut Vec<String>) -> bool {
            match (result, expected) {
                (Value::Object(result), Value::Object(expected)) => expected.iter().all(|(key, value)| {
                    path.push(key.clone());
                    let found = result.get(key).is_some_and(|found| contains(found, value, path));
                    path.pop();
                    found
                }),
                (Value::Array(result), Value::Array(expected)) => {
                    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
                    match list_strategy("/Pod", &segments) {
                        ListStrategy::MergeByKey(keys) => expected.iter().all(|item| {
                            result.iter().any(|found| {
                                found.get(keys[0]) == item.get(keys[0]) && contains(found, item, path)
                            })
                        }),
                        ListStrategy::Set => expected.iter().all(|item| result.contains(item)),
                        ListStrategy::Replace => result == expected,
                    }
                }
                _ => result == expected,
            }
        }

        /// JSON with SMP's vocabulary of keys and directive values, to throw at the engine.
        fn arbitrary_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                (0..100i64).prop_map(|n| json!(n)),
                select(vec!["delete", "replace", "merge", "bogus", "c", "A", "name"]).prop_map(|s| json!(s)),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    vec(inner.clone(), 0..4).prop_map(Value::Array),
                    btree_map(
                        select(vec![
                            "spec",
                            "metadata",
                            "containers",
                            "name",
                            "env",
                            "image",
                            "volumes",
                            "finalizers",
                            "labels",
                            "emptyDir",
                            "tolerations",
                            "$patch",
                            "$retainKeys",
                            "$setElementOrder/containers",
                            "$setElementOrder/finalizers",
                            "$setElementOrder/env",
                            "$deleteFromPrimitiveList/finalizers",
                            "$deleteFromPrimitiveList/env",
                        ]),
                        inner,
                        0..5,
                    )
                    .prop_map(|map| json!(map)),
                ]
            })
        }

        proptest! {
            #[test]
            fn applying_the_two_way_diff_gives_the_target(a in pod(), b in pod()) {
                let patch = diff(&a, &b, "/Pod").unwrap();
                let result = apply(&a, &patch, "/Pod").unwrap();
                prop_assert!(!has_directive(&result));
                prop_assert_eq!(result, b);
            }

            #[test]
            fn applying_the_three_way_patch_keeps_every_field_of_the_manifest(
                original in pod(), modified in pod(), current in pod()
            ) {
                let patch = three_way(&original, &modified, &current, "/Pod").unwrap();
                let result = apply(&current, &patch, "/Pod").unwrap();
                prop_assert!(!has_directive(&result));
                prop_assert!(contains(&result, &modified, &mut Vec::new()), "patch {patch}\nresult {result}");
            }

            #[test]
            fn three_way_patch_without_drift_gives_the_manifest(original in pod(), modified in pod()) {
                let patch = three_way(&original, &modified, &original, "/Pod").unwrap();
                prop_assert_eq!(apply(&original, &patch, "/Pod").unwrap(), modified);
            }

            #[test]
            fn arbitrary_originals_and_patches_of_any_kind_never_panic(
                original in arbitrary_json(),
                patch in arbitrary_json(),
                kind in select(vec!["/Pod", "apps/Deployment", "/ConfigMap", "x/Unknown"]),
            ) {
                let _ = apply(&original, &patch, kind);
                let _ = diff(&original, &patch, kind);
                let _ = three_way(&original, &patch, &original, kind);
            }

            #[test]
            fn arbitrary_patches_never_panic_or_leave_directives(original in pod(), patch in arbitrary_json()) {
                let patch = json!({"metadata": patch.clone(), "spec": patch});
                if let Ok(result) = apply(&original, &patch, "/Pod") {
                    prop_assert!(!has_directive(&result), "{result}");
                }
                let _ = diff(&original, &patch, "/Pod");
                let _ = three_way(&patch, &original, &patch, "/Pod");
            }
        }
    }

    mod fixtures {
        pub(super) const POD_LIVE: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\",\"tier\":\"front\"},\"name\":\"x\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}],\"image\":\"nginx:1.26\",\"name\":\"c\",\"ports\":[{\"containerPort\":80}]},{\"command\":[\"sleep\",\"3600\"],\"image\":\"busybox\",\"name\":\"side\"}]}}\n"},"creationTimestamp":"2026-11-29T16:08:39Z","labels":{"app":"web","tier":"front"},"name":"x","namespace":"default","resourceVersion":"6","uid":"8e0d5d5d-d3b1-4c6b-8e18-7d478fa901f6"},"spec":{"containers":[{"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"image":"nginx:1.26","imagePullPolicy":"IfNotPresent","name":"c","ports":[{"containerPort":80,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"},{"command":["sleep","3600"],"image":"busybox","imagePullPolicy":"Always","name":"side","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","serviceAccountName":"default","terminationGracePeriodSeconds":30,"tolerations":[{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300},{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}]},"status":{"phase":"Pending","qosClass":"BestEffort"}}"#;
        pub(super) const APPLY_POD_PATCH: &str = r#"{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\",\"team\":\"blue\"},\"name\":\"x\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"C\",\"value\":\"3\"}],\"image\":\"nginx:1.27\",\"name\":\"c\",\"ports\":[{\"containerPort\":80}]},{\"image\":\"redis\",\"name\":\"extra\"}]}}\n"},"labels":{"team":"blue","tier":null}},"spec":{"$setElementOrder/containers":[{"name":"c"},{"name":"extra"}],"containers":[{"$setElementOrder/env":[{"name":"A"},{"name":"C"}],"env":[{"name":"C","value":"3"},{"$patch":"delete","name":"B"}],"image":"nginx:1.27","name":"c"},{"image":"redis","name":"extra"},{"$patch":"delete","name":"side"}]}}"#;
        pub(super) const PATCH_DELETE_ENV: &str =
            r#"{"spec":{"containers":[{"name":"c","env":[{"name":"A","$patch":"delete"}]}]}}"#;
        pub(super) const EDIT_EDITED: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\",\"tier\":\"front\"},\"name\":\"x\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}],\"image\":\"nginx:1.26\",\"name\":\"c\",\"ports\":[{\"containerPort\":80}]},{\"command\":[\"sleep\",\"3600\"],\"image\":\"busybox\",\"name\":\"side\"}]}}\n"},"creationTimestamp":"2026-11-29T16:08:39Z","labels":{"app":"web","x":"y"},"name":"x","namespace":"default","resourceVersion":"6","uid":"8e0d5d5d-d3b1-4c6b-8e18-7d478fa901f6","finalizers":["example.com/f"]},"spec":{"containers":[{"command":["sleep","3600"],"image":"busybox","imagePullPolicy":"Always","name":"side","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"},{"env":[{"name":"A","value":"1"},{"name":"D","value":"4"}],"image":"nginx:1.28","imagePullPolicy":"IfNotPresent","name":"c","ports":[{"containerPort":80,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","serviceAccountName":"default","terminationGracePeriodSeconds":30,"tolerations":[{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300},{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}]},"status":{"phase":"Pending","qosClass":"BestEffort"}}"#;
        pub(super) const EDIT_PATCH: &str = r#"{"metadata":{"finalizers":["example.com/f"],"labels":{"tier":null,"x":"y"}},"spec":{"$setElementOrder/containers":[{"name":"side"},{"name":"c"}],"containers":[{"$setElementOrder/env":[{"name":"A"},{"name":"D"}],"env":[{"name":"D","value":"4"},{"$patch":"delete","name":"B"}],"image":"nginx:1.28","name":"c"}]}}"#;
        pub(super) const VOLUME_POD_LIVE: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"finalizers\":[\"a.io/one\",\"b.io/two\"],\"name\":\"vol\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"image\":\"nginx\",\"name\":\"c\",\"volumeMounts\":[{\"mountPath\":\"/data\",\"name\":\"data\"}]}],\"volumes\":[{\"emptyDir\":{},\"name\":\"data\"},{\"emptyDir\":{},\"name\":\"keep\"}]}}\n"},"creationTimestamp":"2026-11-29T16:09:01Z","finalizers":["a.io/one","b.io/two"],"name":"vol","namespace":"default","resourceVersion":"8","uid":"52923938-ba4d-4bbc-aa40-36835268d0b0"},"spec":{"containers":[{"image":"nginx","imagePullPolicy":"Always","name":"c","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","volumeMounts":[{"mountPath":"/data","name":"data"}]}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","serviceAccountName":"default","terminationGracePeriodSeconds":30,"tolerations":[{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300},{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}],"volumes":[{"emptyDir":{},"name":"data"},{"emptyDir":{},"name":"keep"}]},"status":{"phase":"Pending","qosClass":"BestEffort"}}"#;
        pub(super) const APPLY_VOLUME_PATCH: &str = r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a.io/one"],"$setElementOrder/finalizers":["b.io/two","c.io/three"],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"finalizers\":[\"b.io/two\",\"c.io/three\"],\"name\":\"vol\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"image\":\"nginx\",\"name\":\"c\",\"volumeMounts\":[{\"mountPath\":\"/data\",\"name\":\"data\"},{\"mountPath\":\"/keep\",\"name\":\"keep\"}]}],\"volumes\":[{\"configMap\":{\"name\":\"cm\"},\"name\":\"data\"},{\"emptyDir\":{},\"name\":\"keep\"}]}}\n"},"finalizers":["c.io/three"]},"spec":{"$setElementOrder/containers":[{"name":"c"}],"$setElementOrder/volumes":[{"name":"data"},{"name":"keep"}],"containers":[{"$setElementOrder/volumeMounts":[{"mountPath":"/data"},{"mountPath":"/keep"}],"name":"c","volumeMounts":[{"mountPath":"/keep","name":"keep"}]}],"volumes":[{"$retainKeys":["configMap","name"],"configMap":{"name":"cm"},"emptyDir":null,"name":"data"}]}}"#;
        pub(super) const DEPLOYMENT_LIVE: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"name\":\"d\",\"namespace\":\"default\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"strategy\":{\"rollingUpdate\":{\"maxSurge\":1},\"type\":\"RollingUpdate\"},\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"image\":\"nginx\",\"name\":\"c\",\"ports\":[{\"containerPort\":80},{\"containerPort\":53,\"protocol\":\"UDP\"}]}]}}}}\n"},"creationTimestamp":"2026-11-29T16:08:59Z","generation":1,"name":"d","namespace":"default","resourceVersion":"7","uid":"a9d259b8-f36f-4cbc-8514-bcdd34ee1ed4"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"d"}},"strategy":{"rollingUpdate":{"maxSurge":1},"type":"RollingUpdate"},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"image":"nginx","name":"c","ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}]}]}}}}"#;
        pub(super) const APPLY_DEPLOYMENT_PATCH: &str = r#"{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"name\":\"d\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"strategy\":{\"type\":\"Recreate\"},\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"image\":\"nginx\",\"name\":\"c\",\"ports\":[{\"containerPort\":8080},{\"containerPort\":53,\"protocol\":\"UDP\"}]}]}}}}\n"}},"spec":{"replicas":3,"strategy":{"$retainKeys":["type"],"rollingUpdate":null,"type":"Recreate"},"template":{"spec":{"$setElementOrder/containers":[{"name":"c"}],"containers":[{"$setElementOrder/ports":[{"containerPort":8080},{"containerPort":53}],"name":"c","ports":[{"containerPort":8080},{"$patch":"delete","containerPort":80}]}]}}}}"#;
    }
}
