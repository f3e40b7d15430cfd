//! Static pod sources: a manifest directory ([`file`]) and a manifest URL ([`http`]), as upstream's
//! `pkg/kubelet/config` (`file.go`, `http.go`, `common.go`).
//!
//! Each source sends a full [`SourceUpdate::Snapshot`] of its pods whenever the set changes, and a
//! [`SourceUpdate::Invalid`] for a manifest it could not use. Every pod goes through [`prepare`], upstream's
//! order: the API server's scheme defaulting (`api::pod::default_pod_scheme`, shared with the API server),
//! the static defaults of upstream's `applyDefaults` ([`apply_static_defaults`]), then `ValidatePodCreate`
//! (`api::pod::validate_pod_create`). A source holds no two pods with the same name and namespace
//! (`dedupe`).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde::Deserialize;
use sha2::{Digest, Sha256};

pub mod file;
pub mod http;

/// Upstream's `kubernetes.io/config.source` annotation: `file`, `http` or `api`.
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Upstream's `kubernetes.io/config.hash` annotation: the static pod's UID.
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Source name of the manifest directory.
pub const FILE_SOURCE: &str = "file";
/// Source name of the manifest URL.
pub const HTTP_SOURCE: &str = "http";
/// Largest manifest (file or HTTP body) read, as upstream's `maxConfigLength`.
pub const MAX_MANIFEST_BYTES: usize = 10 * 1024 * 1024;

/// A static pod with the manifest it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticPod {
    /// The pod, defaults applied.
    pub pod: Pod,
    /// The absolute file path, or the URL.
    pub origin: String,
}

/// What a source reports.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceUpdate {
    /// Every pod the source has now (upstream's `SET`), defaults applied, no duplicate names.
    Snapshot {
        /// `file` or `http`.
        source: &'static str,
        /// The pods.
        pods: Vec<Pod>,
    },
    /// A manifest that was skipped: it does not parse, or it duplicates another pod's name
    /// (the error then says `due to duplicate pod name`, upstream's `FailedValidation`), or (http) the fetch
    /// failed. Sent once per distinct error.
    Invalid {
        /// `file` or `http`.
        source: &'static str,
        /// The absolute file path, or the URL.
        origin: String,
        /// What is wrong.
        error: String,
    },
}

/// Upstream's `applyDefaults` (`pkg/kubelet/config/common.go`) for a pod from `source` (`file` or `http`)
/// read from `origin` (absolute file path or URL).
///
/// The UID (when the manifest has none) is the first 32 hex characters of a SHA-256 over the pod's JSON as
/// decoded, `host:<node>` and `file:<path>` (or `url:<url>`): any edit, another node or another path gives
/// another UID. Upstream hashes a Go dump with MD5 and leaves the node out for http; the UIDs differ from a
/// real kubelet's but behave the same.
pub fn apply_static_defaults(pod: &mut Pod, node_name: &str, source: &str, origin: &str) {
    let is_file = source == FILE_SOURCE;
    let meta = &mut pod.metadata;
    if meta.uid.as_deref().unwrap_or_default().is_empty() {
        let mut hasher = Sha256::new();
        hasher.update(serde_json::to_vec(&*pod).unwrap_or_default());
        hasher.update(format!("host:{node_name}"));
        let kind = if is_file { "file" } else { "url" };
        hasher.update(format!("{kind}:{origin}"));
        let hex: String = hasher.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        pod.metadata.uid = Some(hex);
    }
    let meta = &mut pod.metadata;
    let uid = meta.uid.clone().unwrap_or_default();
    meta.name = Some(format!(
        "{}-{}",
        meta.name.as_deref().unwrap_or_default(),
        node_name.to_lowercase()
    ));
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".to_string());
    }
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), uid);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.to_string(), source.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    if is_file {
        // helper.AddOrUpdateTolerationInPod: an equal toleration is replaced, not added twice.
        let toleration = Toleration {
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            ..Default::default()
        };
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        let same = |t: &Toleration| {
            t.key.as_deref().unwrap_or_default().is_empty()
                && t.operator == toleration.operator
                && t.effect == toleration.effect
                && t.value.as_deref().unwrap_or_default().is_empty()
        };
        match tolerations.iter_mut().find(|t| same(t)) {
            Some(t) => *t = toleration,
            None => tolerations.push(toleration),
        }
    }
    pod.status.get_or_insert_with(Default::default).phase = Some("Pending".to_string());
}

/// A decoded manifest pod made ready to run, in upstream's order: the API server's scheme defaulting, the
/// static defaults ([`apply_static_defaults`]), then the API server's create validation. The error lists
/// every invalid field, as the API server's 422 message does.
pub fn prepare(mut pod: Pod, node_name: &str, source: &str, origin: &str) -> Result<Pod, String> {
    // As the API server on create: a manifest copied from `kubectl get -o yaml` may carry these.
    pod.metadata.deletion_timestamp = None;
    pod.metadata.deletion_grace_period_seconds = None;
    api::pod::default_pod_scheme(&mut pod);
    apply_static_defaults(&mut pod, node_name, source, origin);
    let errors = api::pod::validate_pod_create(&pod);
    if errors.is_empty() {
        return Ok(pod);
    }
    let messages: Vec<String> = errors.into_iter().map(|e| e.message).collect();
    Err(format!("invalid pod: {}", messages.join(", ")))
}

/// Parses a manifest in YAML or JSON: a Pod, a PodList, or several YAML documents of either. Every pod needs
/// `metadata.name`.
pub fn parse_manifest(bytes: &[u8]) -> Result<Vec<Pod>, String> {
    Ok(parse_documents(bytes)?
        .into_iter()
        .flat_map(|doc| doc.pods)
        .collect())
}

/// Parses a manifest file: exactly one Pod (not a PodList, not several documents).
pub(crate) fn parse_single_pod(bytes: &[u8]) -> Result<Pod, String> {
    let mut docs = parse_documents(bytes)?;
    match docs.len() {
        0 => Err("no pod in manifest".to_string()),
        1 if !docs[0].list => Ok(docs.remove(0).pods.remove(0)),
        1 => Err("manifest holds a PodList, a file must hold exactly one Pod".to_string()),
        n => Err(format!(
            "manifest holds {n} documents, a file must hold exactly one Pod"
        )),
    }
}

struct Document {
    list: bool,
    pods: Vec<Pod>,
}

fn parse_documents(bytes: &[u8]) -> Result<Vec<Document>, String> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(format!("manifest is larger than {MAX_MANIFEST_BYTES} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("manifest is not UTF-8: {e}"))?;
    let mut docs = Vec::new();
    for (i, de) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(de).map_err(|e| format!("document {}: {e}", i + 1))?;
        if value.is_null() {
            continue;
        }
        docs.push(parse_document(value).map_err(|e| format!("document {}: {e}", i + 1))?);
    }
    Ok(docs)
}

fn parse_document(value: serde_json::Value) -> Result<Document, String> {
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    if api_version != "v1" {
        return Err(format!("apiVersion must be \"v1\", not {api_version:?}"));
    }
    match kind.as_str() {
        "Pod" => {
            let pod: Pod = serde_json::from_value(value).map_err(|e| format!("invalid pod: {e}"))?;
            check_name(&pod)?;
            Ok(Document {
                list: false,
                pods: vec![pod],
            })
        }
        "PodList" | "List" => {
            let items = match value.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(_) => return Err("items must be a list".to_string()),
            };
            let mut pods = Vec::with_capacity(items.len());
            for (i, mut item) in items.into_iter().enumerate() {
                // List items may leave out apiVersion and kind.
                if let Some(obj) = item.as_object_mut() {
                    obj.entry("apiVersion").or_insert_with(|| "v1".into());
                    obj.entry("kind").or_insert_with(|| "Pod".into());
                }
                let pod: Pod =
                    serde_json::from_value(item).map_err(|e| format!("items[{i}]: invalid pod: {e}"))?;
                check_name(&pod).map_err(|e| format!("items[{i}]: {e}"))?;
                pods.push(pod);
            }
            Ok(Document { list: true, pods })
        }
        "" => Err("kind is missing".to_string()),
        other => Err(format!("kind must be Pod or PodList, not {other:?}")),
    }
}

fn check_name(pod: &Pod) -> Result<(), String> {
    match pod.metadata.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(()),
        _ => Err("metadata.name is required".to_string()),
    }
}

/// Drops every item whose pod's name and namespace an earlier one already has (upstream's
/// `filterInvalidPods`). Returns the items kept and, for each dropped, upstream's `FailedValidation`
/// message (`... due to duplicate pod name ...`).
pub(crate) fn dedupe<T>(items: Vec<T>, pod: impl Fn(&T) -> &Pod) -> (Vec<T>, Vec<(T, String)>) {
    let mut names = HashSet::new();
    let (mut kept, mut dropped) = (Vec::new(), Vec::new());
    for item in items {
        let p = pod(&item);
        let name = full_name(p);
        if names.insert(name) {
            kept.push(item);
        } else {
            let meta = &p.metadata;
            let source = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION));
            let msg = format!(
                "error validating pod {}({}) from {} due to duplicate pod name {:?}, ignoring",
                full_name(p),
                meta.uid.as_deref().unwrap_or_default(),
                source.map(String::as_str).unwrap_or("unknown"),
                meta.name.as_deref().unwrap_or_default(),
            );
            dropped.push((item, msg));
        }
    }
    (kept, dropped)
}

/// `<name>_<namespace>`, upstream's pod full name.
pub(crate) fn full_name(pod: &Pod) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}",
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn manifest(name: &str, image: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n\
             spec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
    }

    fn defaulted(yaml: &str, node: &str, source: &str, origin: &str) -> Pod {
        let mut pod = parse_single_pod(yaml.as_bytes()).unwrap();
        apply_static_defaults(&mut pod, node, source, origin);
        pod
    }

    #[test]
    fn defaults_name_namespace_node_phase_annotations() {
        let pod = defaulted(&manifest("web", "nginx"), "Node-A", FILE_SOURCE, "/m/web.yaml");
        let meta = &pod.metadata;
        assert_eq!(meta.name.as_deref(), Some("web-node-a"));
        assert_eq!(meta.namespace.as_deref(), Some("default"));
        let uid = meta.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        assert!(uid.chars().all(|c| c.is_ascii_hexdigit()));
        let ann = meta.annotations.as_ref().unwrap();
        assert_eq!(ann.get(CONFIG_HASH_ANNOTATION), Some(&uid));
        assert_eq!(
            ann.get(CONFIG_SOURCE_ANNOTATION).map(String::as_str),
            Some("file")
        );
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some("Node-A"));
        assert_eq!(pod.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn defaults_keep_namespace_and_uid_from_manifest() {
        let yaml =
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: kube-system\n  uid: fixed\n";
        let pod = defaulted(yaml, "n", HTTP_SOURCE, "http://x/");
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(pod.metadata.uid.as_deref(), Some("fixed"));
    }

    #[test]
    fn uid_is_stable_and_changes_with_content_node_and_origin() {
        let uid =
            |yaml: &str, node: &str, origin: &str| defaulted(yaml, node, FILE_SOURCE, origin).metadata.uid;
        let m = manifest("web", "nginx");
        let base = uid(&m, "n1", "/m/web.yaml");
        assert_eq!(base, uid(&m, "n1", "/m/web.yaml"));
        assert_ne!(base, uid(&manifest("web", "nginx:2"), "n1", "/m/web.yaml"));
        assert_ne!(base, uid(&m, "n2", "/m/web.yaml"));
        assert_ne!(base, uid(&m, "n1", "/m/other.yaml"));
        assert_ne!(base, defaulted(&m, "n1", HTTP_SOURCE, "/m/web.yaml").metadata.uid);
    }

    #[test]
    fn noexecute_toleration_only_for_file_pods_and_not_twice() {
        let tolerations = |source| {
            defaulted(&manifest("a", "i"), "n", source, "o")
                .spec
                .unwrap()
                .tolerations
        };
        let file = tolerations(FILE_SOURCE).unwrap();
        assert_eq!(file.len(), 1);
        assert_eq!(file[0].operator.as_deref(), Some("Exists"));
        assert_eq!(file[0].effect.as_deref(), Some("NoExecute"));
        assert_eq!(file[0].key, None);
        assert!(tolerations(HTTP_SOURCE).unwrap_or_default().is_empty());

        let mut pod = defaulted(&manifest("a", "i"), "n", FILE_SOURCE, "o");
        apply_static_defaults(&mut pod, "n", FILE_SOURCE, "o");
        assert_eq!(pod.spec.unwrap().tolerations.unwrap().len(), 1);
    }

    #[test]
    fn parses_json_pod_and_yaml_pod_list() {
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[]}}"#;
        assert_eq!(
            parse_manifest(json.as_bytes()).unwrap()[0]
                .metadata
                .name
                .as_deref(),
            Some("j")
        );
        let list = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";
        let pods = parse_manifest(list.as_bytes()).unwrap();
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        let docs = format!("{}---\n{}", manifest("a", "i"), manifest("b", "i"));
        assert_eq!(parse_manifest(docs.as_bytes()).unwrap().len(), 2);
    }

    #[test]
    fn parse_errors_bad_yaml_missing_name_wrong_kind_too_large() {
        assert!(parse_manifest(b"apiVersion: v1\nkind: Pod\nmetadata: [unclosed").is_err());
        let err = parse_manifest(b"apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: b}\n").unwrap_err();
        assert!(err.contains("metadata.name is required"), "{err}");
        let err = parse_manifest(b"apiVersion: v1\nkind: PodList\nitems:\n- metadata: {}\n").unwrap_err();
        assert!(err.contains("metadata.name is required"), "{err}");
        let err =
            parse_manifest(b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n").unwrap_err();
        assert!(err.contains("apiVersion"), "{err}");
        let err = parse_manifest(b"apiVersion: v1\nkind: Service\nmetadata: {name: d}\n").unwrap_err();
        assert!(err.contains("kind must be Pod"), "{err}");
        let big = vec![b' '; MAX_MANIFEST_BYTES + 1];
        assert!(parse_manifest(&big).unwrap_err().contains("larger than"));
    }

    #[test]
    fn a_file_holds_exactly_one_pod() {
        let two = format!("{}---\n{}", manifest("a", "i"), manifest("b", "i"));
        assert!(
            parse_single_pod(two.as_bytes())
                .unwrap_err()
                .contains("2 documents")
        );
        let list = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n";
        assert!(parse_single_pod(list.as_bytes()).unwrap_err().contains("PodList"));
        assert!(parse_single_pod(b"").unwrap_err().contains("no pod"));
        assert!(parse_single_pod(b"# only a comment\n").is_err());
        assert!(parse_single_pod(manifest("a", "i").as_bytes()).is_ok());
    }

    #[test]
    fn dedupe_rejects_second_pod_with_same_name_and_namespace() {
        let a1 = defaulted(&manifest("a", "one"), "n", FILE_SOURCE, "/m/1");
        let a2 = defaulted(&manifest("a", "two"), "n", FILE_SOURCE, "/m/2");
        let b = defaulted(&manifest("b", "one"), "n", FILE_SOURCE, "/m/3");
        let mut other_ns = defaulted(&manifest("a", "one"), "n", FILE_SOURCE, "/m/4");
        other_ns.metadata.namespace = Some("other".to_string());
        let (kept, dropped) = dedupe(vec![a1.clone(), a2.clone(), b.clone(), other_ns.clone()], |p| p);
        assert_eq!(kept, vec![a1, b, other_ns]);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].0, a2);
        assert!(
            dropped[0].1.contains("due to duplicate pod name \"a-n\""),
            "{}",
            dropped[0].1
        );
        assert!(dropped[0].1.contains("from file"), "{}", dropped[0].1);
    }

    #[test]
    fn prepare_applies_the_api_servers_defaults_and_validation() {
        let pod = parse_single_pod(manifest("web", "nginx").as_bytes()).unwrap();
        let pod = prepare(pod, "n1", FILE_SOURCE, "/m/web.yaml").unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("Always"));
        // Admission defaults are the API server's business, not the kubelet's.
        assert_eq!(spec.service_account_name, None);

        let bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n";
        let err = prepare(
            parse_single_pod(bad.as_bytes()).unwrap(),
            "n1",
            FILE_SOURCE,
            "/m/x",
        )
        .unwrap_err();
        assert!(err.contains("spec.containers: Required value"), "{err}");
    }

    // --- properties: no manifest makes parsing or preparing panic (the fault suite) -----------------------

    mod properties {
        use proptest::collection::{btree_map, vec};
        use proptest::prelude::*;
        use proptest::sample::select;
        use serde_json::{Value, json};

        use super::*;

        const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"kube-system","labels":{"app":"web"},"uid":"u"},"spec":{"hostNetwork":true,"terminationGracePeriodSeconds":30,"activeDeadlineSeconds":5,"containers":[{"name":"c","image":"nginx","command":["sleep","1"],"env":[{"name":"A","value":"1"}],"ports":[{"containerPort":80,"hostPort":8080}],"livenessProbe":{"httpGet":{"port":80,"path":"/"},"periodSeconds":1},"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"volumeMounts":[{"name":"v","mountPath":"/v"}]}],"initContainers":[{"name":"i","image":"busybox"}],"volumes":[{"name":"v","hostPath":{"path":"/tmp"}}],"tolerations":[{"operator":"Exists","effect":"NoExecute"}]}}"#;

        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| json!(n)),
                any::<f64>().prop_map(|f| json!(f)),
                "\\PC{0,10}".prop_map(Value::String),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    vec(inner.clone(), 0..3).prop_map(Value::Array),
                    btree_map(
                        select(vec![
                            "apiVersion",
                            "kind",
                            "metadata",
                            "name",
                            "namespace",
                            "uid",
                            "spec",
                            "containers",
                            "image",
                            "items",
                            "ports",
                            "containerPort",
                            "hostPort",
                            "tolerations",
                            "x",
                        ]),
                        inner,
                        0..4,
                    )
                    .prop_map(|m| json!(m)),
                ]
            })
        }

        /// The valid pod changed in one place: each step of `path` picks a child (modulo the count),
        /// and there the value is replaced, or a key removed.
        fn mutated() -> impl Strategy<Value = Value> {
            (vec(any::<usize>(), 0..6), any::<bool>(), json_value()).prop_map(
                |(path, remove, replacement)| {
                    let mut doc: Value = serde_json::from_str(POD).expect("valid");
                    let mut cur = &mut doc;
                    for step in path {
                        let n = match &*cur {
                            Value::Object(m) => m.len(),
                            Value::Array(a) => a.len(),
                            _ => 0,
                        };
                        if n == 0 {
                            break;
                        }
                        cur = match cur {
                            Value::Object(m) => m.values_mut().nth(step % n).expect("in range"),
                            Value::Array(a) => &mut a[step % n],
                            _ => unreachable!("counted above"),
                        };
                    }
                    match cur {
                        Value::Object(m) if remove && !m.is_empty() => {
                            let k = m.keys().next().cloned().expect("not empty");
                            m.remove(&k);
                        }
                        cur => *cur = replacement,
                    }
                    doc
                },
            )
        }

        /// One manifest: random bytes, YAML or JSON of a mutated pod, a PodList of them, or several documents.
        fn manifest() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                vec(any::<u8>(), 0..200),
                "\\PC{0,200}".prop_map(String::into_bytes),
                mutated().prop_map(|v| v.to_string().into_bytes()),
                mutated().prop_map(|v| serde_norway::to_string(&v).unwrap_or_default().into_bytes()),
                vec(mutated(), 0..3).prop_map(|items| {
                    json!({"apiVersion": "v1", "kind": "PodList", "items": items})
                        .to_string()
                        .into_bytes()
                }),
                vec(mutated(), 0..3).prop_map(|docs| {
                    docs.iter()
                        .map(|d| serde_norway::to_string(d).unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join("---\n")
                        .into_bytes()
                }),
            ]
        }

        proptest! {
            #[test]
            fn manifests_parse_and_prepare_or_fail_without_panicking(
                bytes in manifest(),
                node in prop_oneof![Just("node-1".to_string()), "\\PC{0,12}"],
            ) {
                let _ = parse_single_pod(&bytes);
                if let Ok(pods) = parse_manifest(&bytes) {
                    for pod in pods {
                        let _ = prepare(pod.clone(), &node, FILE_SOURCE, "/m/web.yaml");
                        let _ = prepare(pod, &node, HTTP_SOURCE, "http://x/m");
                    }
                }
            }
        }
    }
}
