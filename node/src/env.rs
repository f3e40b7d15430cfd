//! A container's environment, resolved the way the kubelet does it before creating the container
//! (`pkg/kubelet/kubelet_pods.go`, `makeEnvironmentVariables`), and its `command`/`args` with `$(VAR)`
//! references expanded (`kubecontainer.ExpandContainerCommandAndArgs`, over the forked
//! `third_party/forked/golang/expansion`). It sits between the pod worker and the runtime: the worker
//! fetches the ConfigMaps and Secrets the pod names ([`references`]), calls [`make_environment`], and puts
//! the result into a [`crate::runtime::ContainerConfig`]. An `Err` here is what upstream reports as
//! `CreateContainerConfigError` with the event `Failed "Error: <message>"`, so the messages are upstream's.
//!
//! Everything here is pure: the API objects come through [`ObjectLookup`], the pod and host IPs and the
//! node's allocatable resources through [`RuntimeInfo`]. The downward API values ([`extract_field_path`],
//! [`container_resource_value`]) are shared with the `downwardAPI` volumes in [`crate::volumes`].
//!
//! The Service variables (`<SVC>_SERVICE_HOST`, `KUBERNETES_SERVICE_HOST`, ...) come in through
//! [`RuntimeInfo::service_env`] (made by [`crate::envvars`]): offered to `$(VAR)` expansion and appended after
//! the container's own variables, which win.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ObjectFieldSelector, PersistentVolume, PersistentVolumeClaim, Pod,
    ResourceFieldSelector, Secret,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Where ConfigMaps and Secrets come from (upstream: the kubelet's `configMapManager`/`secretManager`).
/// `None` means not found, which is an error unless the reference is `optional`.
pub trait ObjectLookup {
    /// The ConfigMap `namespace/name`.
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap>;
    /// The Secret `namespace/name`.
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret>;
    /// The PersistentVolumeClaim `namespace/name` (for `persistentVolumeClaim` volumes).
    fn persistent_volume_claim(&self, _namespace: &str, _name: &str) -> Option<&PersistentVolumeClaim> {
        None
    }
    /// The PersistentVolume `name` a claim is bound to.
    fn persistent_volume(&self, _name: &str) -> Option<&PersistentVolume> {
        None
    }
    /// The token of the pod's `serviceAccountToken` projection with this audience (empty: the API
    /// server's) and expirationSeconds, or why it could not be had; `None` when nobody asked for it.
    fn service_account_token(&self, audience: &str, expiration_seconds: i64) -> Option<Result<&str, &str>> {
        let _ = (audience, expiration_seconds);
        None
    }
}

/// A plain in-memory [`ObjectLookup`]: the worker fills it with the objects [`references`] names.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    secrets: BTreeMap<(String, String), Secret>,
    claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    volumes: BTreeMap<String, PersistentVolume>,
    /// Tokens of the pod's projections by (audience, expirationSeconds) (the token manager's).
    tokens: BTreeMap<(String, i64), Result<String, String>>,
}

impl Objects {
    /// An empty set: every reference is missing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a ConfigMap, keyed by its namespace and name.
    pub fn insert_config_map(&mut self, config_map: ConfigMap) {
        let key = object_key(&config_map.metadata);
        self.config_maps.insert(key, config_map);
    }

    /// Adds (or replaces) a Secret, keyed by its namespace and name.
    pub fn insert_secret(&mut self, secret: Secret) {
        let key = object_key(&secret.metadata);
        self.secrets.insert(key, secret);
    }

    /// Adds (or replaces) a PersistentVolumeClaim, keyed by its namespace and name.
    pub fn insert_claim(&mut self, claim: PersistentVolumeClaim) {
        let key = object_key(&claim.metadata);
        self.claims.insert(key, claim);
    }

    /// Adds (or replaces) a PersistentVolume, keyed by its name.
    pub fn insert_volume(&mut self, volume: PersistentVolume) {
        self.volumes
            .insert(volume.metadata.name.clone().unwrap_or_default(), volume);
    }

    /// Adds the token (or the error) of a `serviceAccountToken` projection.
    pub fn insert_token(&mut self, audience: &str, expiration_seconds: i64, token: Result<String, String>) {
        self.tokens
            .insert((audience.to_owned(), expiration_seconds), token);
    }

    /// Builder form of [`Objects::insert_config_map`].
    pub fn with_config_map(mut self, config_map: ConfigMap) -> Self {
        self.insert_config_map(config_map);
        self
    }

    /// Builder form of [`Objects::insert_secret`].
    pub fn with_secret(mut self, secret: Secret) -> Self {
        self.insert_secret(secret);
        self
    }
}

fn object_key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl ObjectLookup for Objects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        self.secrets.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn persistent_volume(&self, name: &str) -> Option<&PersistentVolume> {
        self.volumes.get(name)
    }

    fn service_account_token(&self, audience: &str, expiration_seconds: i64) -> Option<Result<&str, &str>> {
        self.tokens
            .get(&(audience.to_owned(), expiration_seconds))
            .map(|r| r.as_deref().map_err(String::as_str))
    }
}

/// The ConfigMaps and Secrets (in the pod's namespace) a pod refers to, from its containers' `env` and
/// `envFrom`, its volumes and its `imagePullSecrets` (upstream `VisitPodConfigmapNames`,
/// `VisitPodSecretNames`): what the worker has to fetch, and which object changes concern the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// ConfigMap names.
    pub config_maps: BTreeSet<String>,
    /// Secret names.
    pub secrets: BTreeSet<String>,
    /// PersistentVolumeClaim names (their volumes are fetched with them).
    pub claims: BTreeSet<String>,
}

/// See [`References`].
pub fn references(pod: &Pod) -> References {
    let mut refs = References::default();
    let Some(spec) = &pod.spec else {
        return refs;
    };
    for secret in spec.image_pull_secrets.iter().flatten() {
        refs.secrets.insert(secret.name.clone());
    }
    let envs = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| (c.env.as_ref(), c.env_from.as_ref()))
        .chain(
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| (c.env.as_ref(), c.env_from.as_ref())),
        );
    for (env, env_from) in envs {
        for from in env_from.into_iter().flatten() {
            if let Some(cm) = &from.config_map_ref {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(secret) = &from.secret_ref {
                refs.secrets.insert(secret.name.clone());
            }
        }
        for var in env.into_iter().flatten() {
            let Some(source) = &var.value_from else { continue };
            if let Some(cm) = &source.config_map_key_ref {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(secret) = &source.secret_key_ref {
                refs.secrets.insert(secret.name.clone());
            }
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(cm) = &volume.config_map {
            refs.config_maps.insert(cm.name.clone());
        }
        if let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.secrets.insert(name);
        }
        if let Some(pvc) = &volume.persistent_volume_claim {
            refs.claims.insert(pvc.claim_name.clone());
        }
        for source in volume.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(secret) = &source.secret {
                refs.secrets.insert(secret.name.clone());
            }
        }
    }
    refs
}

/// What the node knows about the pod beyond its spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeInfo {
    /// The pod's IPs, the primary first (upstream sorts them by the node's IP family first); `status.podIP`
    /// is the first, empty when there is none.
    pub pod_ips: Vec<String>,
    /// The node's IPs, the primary first (`status.hostIP`, `status.hostIPs`).
    pub host_ips: Vec<String>,
    /// `node.status.allocatable`: the limit a `resourceFieldRef` reports for a container without one.
    pub node_allocatable: BTreeMap<String, Quantity>,
    /// The Service variables the pod sees ([`crate::envvars::service_env`]).
    pub service_env: Vec<(String, String)>,
}

/// Why a container's environment could not be resolved. The messages are upstream's: the worker shows
/// them as `CreateContainerConfigError` and in the `Failed` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A non-optional ConfigMap does not exist (the API's NotFound text as the kubelet's manager says it).
    #[error("configmap \"{name}\" not found")]
    ConfigMapNotFound {
        /// The ConfigMap's name.
        name: String,
    },
    /// A non-optional Secret does not exist.
    #[error("secret \"{name}\" not found")]
    SecretNotFound {
        /// The Secret's name.
        name: String,
    },
    /// A non-optional `configMapKeyRef` names a key the ConfigMap lacks.
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyNotFound {
        /// The key.
        key: String,
        /// The pod's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
    },
    /// A non-optional `secretKeyRef` names a key the Secret lacks.
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyNotFound {
        /// The key.
        key: String,
        /// The pod's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// `fieldRef.apiVersion` other than `v1` (`ConvertDownwardAPIFieldLabel`).
    #[error("unsupported pod version: {version}")]
    UnsupportedPodVersion {
        /// The version given.
        version: String,
    },
    /// A subscript on a field other than labels or annotations (`ConvertDownwardAPIFieldLabel`).
    #[error("field label does not support subscript: {label}")]
    FieldLabelSubscript {
        /// The field path.
        label: String,
    },
    /// A field path the downward API does not know (`ConvertDownwardAPIFieldLabel`).
    #[error("field label not supported: {label}")]
    FieldLabelNotSupported {
        /// The field path.
        label: String,
    },
    /// A subscript on a field other than labels or annotations (`ExtractFieldPathAsString`).
    #[error("fieldPath \"{path}\" does not support subscript")]
    SubscriptNotSupported {
        /// The field path.
        path: String,
    },
    /// A label or annotation subscript that is not a qualified name.
    #[error("invalid key subscript in {path}: {reason}")]
    InvalidSubscript {
        /// The field path.
        path: String,
        /// What is wrong with the key.
        reason: String,
    },
    /// A field path that passes conversion but has no value here (`spec.restartPolicy`, `status.phase`,
    /// or any `status.*` path in a downwardAPI volume).
    #[error("unsupported fieldPath: {path}")]
    UnsupportedFieldPath {
        /// The field path.
        path: String,
    },
    /// `resourceFieldRef.containerName` names no container of the pod.
    #[error("container {name} not found")]
    ContainerNotFound {
        /// The container name.
        name: String,
    },
    /// `resourceFieldRef.resource` is not one of `limits.*`/`requests.*` of cpu, memory, ephemeral-storage
    /// or hugepages.
    #[error("unsupported container resource : {resource}")]
    UnsupportedResource {
        /// The resource given.
        resource: String,
    },
    /// A quantity that does not parse (the API server validates them, so only static pods get here).
    #[error("invalid quantity {value:?} in {field}")]
    InvalidQuantity {
        /// Which field.
        field: String,
        /// The text.
        value: String,
    },
}

/// Keys of an `envFrom` source that are not valid variable names, skipped as upstream does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidEnvFromKeys {
    /// `configMap` or `secret`.
    pub kind: &'static str,
    /// The pod's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The skipped keys, prefix included, sorted.
    pub keys: Vec<String>,
}

impl InvalidEnvFromKeys {
    /// kubelet: the Warning event's reason.
    pub const EVENT_REASON: &'static str = "InvalidEnvironmentVariableNames";

    /// The Warning event's message, as upstream writes it.
    pub fn event_message(&self) -> String {
        format!(
            "Keys [{}] from the EnvFrom {} {}/{} were skipped since they are considered invalid environment \
             variable names.",
            self.keys.join(", "),
            self.kind,
            self.namespace,
            self.name
        )
    }
}

/// A container's resolved environment and expanded command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerEnv {
    /// The variables. Upstream's order is Go map order (unspecified); here it is the order in which each
    /// name was first defined (`envFrom` sources, then `env`), with later definitions replacing the value in
    /// place, so the same spec always yields the same list.
    pub env: Vec<(String, String)>,
    /// `command` with `$(VAR)` expanded from [`ContainerEnv::env`].
    pub command: Vec<String>,
    /// `args` with `$(VAR)` expanded from [`ContainerEnv::env`].
    pub args: Vec<String>,
    /// `envFrom` keys that were skipped: the worker records one Warning event for each entry.
    pub invalid_env_from: Vec<InvalidEnvFromKeys>,
}

/// Variables in definition order with replace-in-place (see [`ContainerEnv::env`]).
#[derive(Default)]
struct EnvMap {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl EnvMap {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.vars[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.vars.len());
                self.vars.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&i| self.vars[i].1.as_str())
    }
}

/// kubelet `makeEnvironmentVariables` followed by `ExpandContainerCommandAndArgs`: `envFrom` first, then
/// `env` (which overrides), each `value` expanded against what is defined so far, each `valueFrom`
/// resolved, and finally `command`/`args` expanded against the whole environment.
pub fn make_environment(
    pod: &Pod,
    container: &Container,
    objects: &dyn ObjectLookup,
    info: &RuntimeInfo,
) -> Result<ContainerEnv, EnvError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env = EnvMap::default();
    let mut invalid_env_from = Vec::new();

    // Env overrides envFrom, so envFrom goes first.
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        let (kind, name, entries): (_, _, Vec<(String, String)>) = if let Some(cm_ref) = &from.config_map_ref
        {
            let Some(cm) = objects.config_map(namespace, &cm_ref.name) else {
                if cm_ref.optional == Some(true) {
                    continue;
                }
                return Err(EnvError::ConfigMapNotFound {
                    name: cm_ref.name.clone(),
                });
            };
            // Only `data`: upstream ignores `binaryData` in envFrom.
            let entries = cm
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            ("configMap", &cm_ref.name, entries)
        } else if let Some(secret_ref) = &from.secret_ref {
            let Some(secret) = objects.secret(namespace, &secret_ref.name) else {
                if secret_ref.optional == Some(true) {
                    continue;
                }
                return Err(EnvError::SecretNotFound {
                    name: secret_ref.name.clone(),
                });
            };
            ("secret", &secret_ref.name, secret_entries(secret))
        } else {
            continue;
        };
        let mut invalid = Vec::new();
        for (key, value) in entries {
            let key = format!("{prefix}{key}");
            if is_env_var_name(&key) {
                env.set(key, value);
            } else {
                invalid.push(key);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            invalid_env_from.push(InvalidEnvFromKeys {
                kind,
                namespace: namespace.to_owned(),
                name: name.clone(),
                keys: invalid,
            });
        }
    }

    for var in container.env.iter().flatten() {
        let value = var.value.as_deref().unwrap_or("");
        let resolved = if !value.is_empty() {
            // Expanded against envFrom, the variables declared before this one and the Service variables.
            expand(value, |name| {
                env.get(name).or_else(|| {
                    info.service_env
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.as_str())
                })
            })
        } else if let Some(source) = &var.value_from {
            if let Some(field) = &source.field_ref {
                field_ref_value(pod, field, info)?
            } else if let Some(resource) = &source.resource_field_ref {
                let container_name = resource.container_name.as_deref().filter(|n| !n.is_empty());
                match container_name {
                    // The container itself: its own limits, defaulted from the node.
                    None => container_resource_value(resource, container, &info.node_allocatable)?,
                    Some(name) => {
                        let other = find_container(pod, name)?;
                        container_resource_value(resource, other, &info.node_allocatable)?
                    }
                }
            } else if let Some(key_ref) = &source.config_map_key_ref {
                let optional = key_ref.optional == Some(true);
                let Some(cm) = objects.config_map(namespace, &key_ref.name) else {
                    if optional {
                        continue;
                    }
                    return Err(EnvError::ConfigMapNotFound {
                        name: key_ref.name.clone(),
                    });
                };
                match cm.data.as_ref().and_then(|d| d.get(&key_ref.key)) {
                    Some(v) => v.clone(),
                    None if optional => continue,
                    None => {
                        return Err(EnvError::ConfigMapKeyNotFound {
                            key: key_ref.key.clone(),
                            namespace: namespace.to_owned(),
                            name: key_ref.name.clone(),
                        });
                    }
                }
            } else if let Some(key_ref) = &source.secret_key_ref {
                let optional = key_ref.optional == Some(true);
                let Some(secret) = objects.secret(namespace, &key_ref.name) else {
                    if optional {
                        continue;
                    }
                    return Err(EnvError::SecretNotFound {
                        name: key_ref.name.clone(),
                    });
                };
                match secret_value(secret, &key_ref.key) {
                    Some(v) => v,
                    None if optional => continue,
                    None => {
                        return Err(EnvError::SecretKeyNotFound {
                            key: key_ref.key.clone(),
                            namespace: namespace.to_owned(),
                            name: key_ref.name.clone(),
                        });
                    }
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.set(var.name.clone(), resolved);
    }
    // The Service variables the container does not define itself come last (upstream: "Append service env
    // vars", skipping those already present).
    for (name, value) in &info.service_env {
        if env.get(name).is_none() {
            env.set(name.clone(), value.clone());
        }
    }

    let (command, args) = expand_command_and_args(container, &env.vars);
    Ok(ContainerEnv {
        env: env.vars,
        command,
        args,
        invalid_env_from,
    })
}

/// A Secret's entries as strings (Go's `string([]byte)`: invalid UTF-8 is kept as replacement characters
/// here). `stringData` is merged over `data` in case an object was stored without the API server's
/// conversion (it never is by a real one).
fn secret_entries(secret: &Secret) -> Vec<(String, String)> {
    let mut entries: BTreeMap<String, String> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        entries.insert(k.clone(), v.clone());
    }
    entries.into_iter().collect()
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(key).cloned())
        .or_else(|| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        })
}

/// kubecontainer `ExpandContainerCommandAndArgs`: `$(VAR)` in `command` and `args` from the resolved
/// environment; unknown names stay as written.
pub fn expand_command_and_args(
    container: &Container,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let vars: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| vars.get(name).copied();
    let expand_all = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter().flatten().map(|s| expand(s, lookup)).collect()
    };
    (expand_all(&container.command), expand_all(&container.args))
}

/// The forked `expansion.Expand` with `MappingFuncFor`: `$(NAME)` becomes the value `lookup` gives, or stays
/// `$(NAME)` when it gives none; `$$` is a literal `$` (so `$$(A)` is the text `$(A)`); a `$` before
/// anything else, an unterminated `$(`, and a trailing `$` are kept as written.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let Some(next) = after.chars().next() else {
            // A trailing `$` is copied as is.
            out.push('$');
            rest = after;
            break;
        };
        match next {
            '$' => {
                out.push('$');
                rest = &after[1..];
            }
            '(' => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    // Incomplete reference: `$(` is copied and scanning goes on after it.
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            other => {
                // Go copies the operator and the next byte (mangling a multi-byte character); kubeling
                // keeps the whole character.
                out.push('$');
                out.push(other);
                rest = &after[other.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// kubelet `podFieldSelectorRuntimeValue`: a `fieldRef` of an env var, including the `spec.*` and
/// `status.*` paths only env vars support.
pub fn field_ref_value(
    pod: &Pod,
    field: &ObjectFieldSelector,
    info: &RuntimeInfo,
) -> Result<String, EnvError> {
    let path = convert_downward_api_field_label(field.api_version.as_deref(), &field.field_path)?;
    let spec = pod.spec.as_ref();
    Ok(match path.as_str() {
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" => info.host_ips.first().cloned().unwrap_or_default(),
        "status.hostIPs" => info.host_ips.join(","),
        "status.podIP" => info.pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => info.pod_ips.join(","),
        _ => return extract_field_path(pod, &path),
    })
}

/// `podshelper.ConvertDownwardAPIFieldLabel`: checks the version and the path, and maps the legacy
/// `spec.host` to `spec.nodeName`.
fn convert_downward_api_field_label(version: Option<&str>, label: &str) -> Result<String, EnvError> {
    // The API server defaults an empty apiVersion to v1.
    let version = version.filter(|v| !v.is_empty()).unwrap_or("v1");
    if version != "v1" {
        return Err(EnvError::UnsupportedPodVersion {
            version: version.to_owned(),
        });
    }
    if let Some((path, _)) = split_subscripted_path(label) {
        return match path {
            "metadata.annotations" | "metadata.labels" => Ok(label.to_owned()),
            _ => Err(EnvError::FieldLabelSubscript {
                label: label.to_owned(),
            }),
        };
    }
    match label {
        "metadata.annotations"
        | "metadata.labels"
        | "metadata.name"
        | "metadata.namespace"
        | "metadata.uid"
        | "spec.nodeName"
        | "spec.restartPolicy"
        | "spec.serviceAccountName"
        | "spec.schedulerName"
        | "status.phase"
        | "status.hostIP"
        | "status.hostIPs"
        | "status.podIP"
        | "status.podIPs" => Ok(label.to_owned()),
        "spec.host" => Ok("spec.nodeName".to_owned()),
        _ => Err(EnvError::FieldLabelNotSupported {
            label: label.to_owned(),
        }),
    }
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['k']` → (`metadata.labels`, `k`).
fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (field, key) = inner.split_once("['")?;
    (!field.is_empty()).then_some((field, key))
}

/// `fieldpath.ExtractFieldPathAsString`: the `metadata.*` paths, which are all a downwardAPI volume may use.
/// Whole label and annotation maps are formatted by [`format_map`].
pub fn extract_field_path(pod: &Pod, path: &str) -> Result<String, EnvError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((field, key)) = split_subscripted_path(path) {
        let (map, checked) = match field {
            // Upstream lower-cases annotation keys for the check only.
            "metadata.annotations" => (annotations, key.to_lowercase()),
            "metadata.labels" => (labels, key.to_owned()),
            _ => {
                return Err(EnvError::SubscriptNotSupported {
                    path: path.to_owned(),
                });
            }
        };
        if let Err(reason) = check_qualified_name(&checked) {
            return Err(EnvError::InvalidSubscript {
                path: path.to_owned(),
                reason,
            });
        }
        return Ok(map.get(key).cloned().unwrap_or_default());
    }
    Ok(match path {
        "metadata.annotations" => format_map(annotations),
        "metadata.labels" => format_map(labels),
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        _ => {
            return Err(EnvError::UnsupportedFieldPath {
                path: path.to_owned(),
            });
        }
    })
}

/// `fieldpath.FormatMap`: one `key="value"` line per entry (Go `%q` quoting), sorted by key, no trailing
/// newline.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote` for the characters labels and annotations hold.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `validation.IsQualifiedName`: `[prefix/]name`, the name at most 63 characters of alphanumerics, `-`,
/// `_`, `.`, starting and ending alphanumeric; the prefix a DNS subdomain.
fn check_qualified_name(value: &str) -> Result<(), String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if name.contains('/') {
        return Err(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must \
                    start and end with an alphanumeric character, with an optional DNS subdomain prefix and \
                    '/'"
            .to_owned(),
        );
    }
    if name.is_empty() {
        return Err("name part must be non-empty".to_owned());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".to_owned());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                    end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex \
                    used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .to_owned(),
        );
    }
    if let Some(prefix) = prefix {
        let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                label.starts_with(lower)
                    && label.ends_with(lower)
                    && label.chars().all(|c| lower(c) || c == '-')
            });
        if !ok {
            return Err(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                        characters, '-' or '.', and must start and end with an alphanumeric character"
                    .to_owned(),
            );
        }
    }
    Ok(())
}

/// `validation.IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// `findContainerInPod`: app containers, then init containers.
fn find_container<'a>(pod: &'a Pod, name: &str) -> Result<&'a Container, EnvError> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
        .find(|c| c.name == name)
        .ok_or_else(|| EnvError::ContainerNotFound {
            name: name.to_owned(),
        })
}

/// `resource.ExtractResourceValueByContainerNameAndNodeAllocatable` for a downwardAPI volume item: the named
/// container of the pod, with missing limits taken from the node.
pub fn pod_container_resource_value(
    pod: &Pod,
    selector: &ResourceFieldSelector,
    allocatable: &BTreeMap<String, Quantity>,
) -> Result<String, EnvError> {
    let name = selector.container_name.as_deref().unwrap_or("");
    container_resource_value(selector, find_container(pod, name)?, allocatable)
}

/// `resource.ExtractContainerResourceValue` after the kubelet's `defaultPodLimitsForDownwardAPI`: a
/// missing (or zero) cpu, memory or ephemeral-storage limit is the node's allocatable amount. cpu is
/// reported as `ceil(millicores / divisor millicores)`, the others as `ceil(bytes / divisor)`; the divisor
/// defaults to 1.
pub fn container_resource_value(
    selector: &ResourceFieldSelector,
    container: &Container,
    allocatable: &BTreeMap<String, Quantity>,
) -> Result<String, EnvError> {
    let resource = selector.resource.as_str();
    let (section, name) = resource
        .split_once('.')
        .ok_or_else(|| EnvError::UnsupportedResource {
            resource: resource.to_owned(),
        })?;
    let known = matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !known || !matches!(section, "limits" | "requests") {
        return Err(EnvError::UnsupportedResource {
            resource: resource.to_owned(),
        });
    }
    let resources = container.resources.as_ref();
    let list = match section {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        _ => resources.and_then(|r| r.requests.as_ref()),
    };
    let parse = |field: &str, q: &Quantity| {
        quantity_nanos(&q.0).ok_or_else(|| EnvError::InvalidQuantity {
            field: field.to_owned(),
            value: q.0.clone(),
        })
    };
    let mut value = match list.and_then(|l| l.get(name)) {
        Some(q) => parse(resource, q)?,
        None => 0,
    };
    // kubelet MergeContainerResourceLimits: hugepages are never defaulted (they are never overcommitted).
    if section == "limits"
        && value == 0
        && matches!(name, "cpu" | "memory" | "ephemeral-storage")
        && let Some(q) = allocatable.get(name)
    {
        value = parse(&format!("allocatable {name}"), q)?;
    }
    let divisor = match &selector.divisor {
        Some(q) => parse("divisor", q)?,
        None => 0,
    };
    let divisor = if divisor == 0 { NANOS_PER_UNIT } else { divisor };
    let result = if name == "cpu" {
        // convertResourceCPUToString: ceil(cpu.MilliValue() / divisor.MilliValue()).
        ceil_div(ceil_div(value, 1_000_000), ceil_div(divisor, 1_000_000).max(1))
    } else {
        // convertResourceMemoryToString (and ephemeral storage, hugepages): ceil(Value() / divisor.Value()).
        ceil_div(
            ceil_div(value, NANOS_PER_UNIT),
            ceil_div(divisor, NANOS_PER_UNIT).max(1),
        )
    };
    Ok(result.to_string())
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// Division rounding towards positive infinity.
fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && ((a > 0) == (b > 0)) {
        q + 1
    } else {
        q
    }
}

/// `resource.ParseQuantity` to nano-units, rounding up below a nano as upstream does (`1` → 10^9, `100m` →
/// 10^8, `1Ki` → 1024·10^9, `1e3` → 10^12). Saturates instead of growing without bound. `None` when the
/// text is not a quantity.
pub(crate) fn quantity_nanos(text: &str) -> Option<i128> {
    let text = text.trim();
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_len);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let (pow2, exp10): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        other => (0, other.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    let digits = format!("{int}{frac}");
    let mut mantissa: i128 = 0;
    for d in digits.bytes() {
        mantissa = mantissa.saturating_mul(10).saturating_add(i128::from(d - b'0'));
    }
    // value = mantissa · 10^(exp10 - frac digits) · 2^pow2, in units of 10^-9.
    let scale = exp10 - i32::try_from(frac.len()).ok()? + 9;
    let mut nanos = mantissa.saturating_mul(1i128 << pow2);
    if scale >= 0 {
        nanos = nanos.saturating_mul(10i128.checked_pow(scale.unsigned_abs()).unwrap_or(i128::MAX));
    } else {
        let div = 10i128.checked_pow(scale.unsigned_abs());
        nanos = match div {
            Some(div) => ceil_div(nanos, div),
            None => i128::from(nanos > 0),
        };
    }
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource, PodSpec,
        ResourceRequirements, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod_with(container: Container) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                labels: Some(BTreeMap::from([
                    ("app".to_owned(), "web".to_owned()),
                    ("tier".to_owned(), "front \"end\"".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([(
                    "example.com/owner".to_owned(),
                    "me".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![container],
                node_name: Some("node-1".into()),
                service_account_name: Some("default".into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    fn value(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn from(name: &str, source: EnvVarSource) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(source),
        }
    }

    fn field(path: &str) -> EnvVarSource {
        EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: path.into(),
            }),
            ..EnvVarSource::default()
        }
    }

    fn cm_key(name: &str, key: &str, optional: Option<bool>) -> EnvVarSource {
        EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: name.into(),
                key: key.into(),
                optional,
            }),
            ..EnvVarSource::default()
        }
    }

    fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    fn container(env: Vec<EnvVar>) -> Container {
        Container {
            name: "app".into(),
            env: Some(env),
            ..Container::default()
        }
    }

    fn resolve(c: Container, objects: &Objects) -> Result<ContainerEnv, EnvError> {
        let pod = pod_with(c.clone());
        let info = RuntimeInfo {
            pod_ips: vec!["10.88.0.5".into(), "fd00::5".into()],
            host_ips: vec!["192.168.1.10".into()],
            node_allocatable: BTreeMap::from([
                ("cpu".to_owned(), Quantity("4".into())),
                ("memory".to_owned(), Quantity("8Gi".into())),
            ]),
            service_env: Vec::new(),
        };
        make_environment(&pod, &c, objects, &info)
    }

    #[test]
    fn service_variables_expand_and_come_after_the_containers_own() {
        // upstream TestMakeEnvironmentVariables: service variables are expansion sources, the container's
        // own definition of one wins, and the rest are appended.
        let mut c = container(vec![
            value("URL", "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)"),
            value("WEB_SERVICE_PORT", "9999"),
        ]);
        c.command = Some(vec!["echo".into(), "$(KUBERNETES_SERVICE_HOST)".into()]);
        let pod = pod_with(c.clone());
        let info = RuntimeInfo {
            service_env: vec![
                ("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into()),
                ("WEB_SERVICE_HOST".into(), "10.96.1.2".into()),
                ("WEB_SERVICE_PORT".into(), "80".into()),
            ],
            ..RuntimeInfo::default()
        };
        let env = make_environment(&pod, &c, &Objects::new(), &info).unwrap();
        let names: Vec<&str> = env.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "URL",
                "WEB_SERVICE_PORT",
                "KUBERNETES_SERVICE_HOST",
                "WEB_SERVICE_HOST"
            ]
        );
        assert_eq!(get(&env, "URL"), Some("http://10.96.1.2:80"));
        assert_eq!(get(&env, "WEB_SERVICE_PORT"), Some("9999"));
        assert_eq!(env.command, ["echo", "10.96.0.1"]);
    }

    fn get<'a>(env: &'a ContainerEnv, name: &str) -> Option<&'a str> {
        env.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn expansion_replaces_defined_escapes_double_dollar_and_keeps_undefined() {
        let vars = HashMap::from([("A", "x"), ("B", "y")]);
        let lookup = |name: &str| vars.get(name).copied();
        let cases = [
            ("$(A)", "x"),
            ("pre-$(A)-$(B)-post", "pre-x-y-post"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$x"),
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("cost: 5$", "cost: 5$"),
            ("$()", "$()"),
            ("$é", "$é"),
            ("$(A)$(A)", "xx"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, lookup), want, "{input}");
        }
    }

    #[test]
    fn env_values_expand_against_earlier_variables_only() {
        let c = container(vec![
            value("A", "a"),
            value("B", "$(A)-$(C)"),
            value("C", "c"),
            value("D", "$$(A)"),
        ]);
        let env = resolve(c, &Objects::new()).unwrap();
        assert_eq!(get(&env, "B"), Some("a-$(C)"));
        assert_eq!(get(&env, "D"), Some("$(A)"));
        let names: Vec<_> = env.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["A", "B", "C", "D"]);
    }

    #[test]
    fn command_and_args_expand_from_the_whole_environment() {
        let mut c = container(vec![
            value("GREETING", "hi"),
            from("NODE", field("spec.nodeName")),
        ]);
        c.command = Some(vec!["echo".into(), "$(GREETING)".into()]);
        c.args = Some(vec!["$(NODE)".into(), "$$(NODE)".into(), "$(NOPE)".into()]);
        let env = resolve(c, &Objects::new()).unwrap();
        assert_eq!(env.command, ["echo", "hi"]);
        assert_eq!(env.args, ["node-1", "$(NODE)", "$(NOPE)"]);
    }

    #[test]
    fn config_map_key_ref_resolves_when_found() {
        let objects = Objects::new().with_config_map(config_map("cfg", &[("level", "debug")]));
        let env = resolve(
            container(vec![from("LEVEL", cm_key("cfg", "level", None))]),
            &objects,
        )
        .unwrap();
        assert_eq!(get(&env, "LEVEL"), Some("debug"));
    }

    #[test]
    fn missing_config_map_or_key_fails_with_upstream_text() {
        let err = resolve(
            container(vec![from("LEVEL", cm_key("cfg", "level", None))]),
            &Objects::new(),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "configmap \"cfg\" not found");

        let objects = Objects::new().with_config_map(config_map("cfg", &[("other", "x")]));
        let err = resolve(
            container(vec![from("LEVEL", cm_key("cfg", "level", None))]),
            &objects,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "couldn't find key level in ConfigMap ns/cfg");
    }

    #[test]
    fn optional_config_map_key_ref_is_skipped_when_missing() {
        let c = container(vec![
            from("A", cm_key("absent", "k", Some(true))),
            from("B", cm_key("cfg", "absent-key", Some(true))),
        ]);
        let objects = Objects::new().with_config_map(config_map("cfg", &[]));
        let env = resolve(c, &objects).unwrap();
        assert!(env.env.is_empty(), "{:?}", env.env);
    }

    #[test]
    fn secret_key_ref_decodes_data_and_reports_missing_keys() {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "creds", "namespace": "ns"},
            "data": {"password": "czNjcjN0"}
        }))
        .unwrap();
        let objects = Objects::new().with_secret(secret);
        let source = |key: &str| EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: "creds".into(),
                key: key.into(),
                optional: None,
            }),
            ..EnvVarSource::default()
        };
        let env = resolve(container(vec![from("PW", source("password"))]), &objects).unwrap();
        assert_eq!(get(&env, "PW"), Some("s3cr3t"));
        let err = resolve(container(vec![from("X", source("user"))]), &objects).unwrap_err();
        assert_eq!(err.to_string(), "couldn't find key user in Secret ns/creds");
    }

    #[test]
    fn field_refs_give_labels_ips_and_metadata() {
        let c = container(vec![
            from("APP", field("metadata.labels['app']")),
            from("NONE", field("metadata.labels['missing']")),
            from("LABELS", field("metadata.labels")),
            from("OWNER", field("metadata.annotations['example.com/owner']")),
            from("POD_IP", field("status.podIP")),
            from("POD_IPS", field("status.podIPs")),
            from("HOST_IP", field("status.hostIP")),
            from("NAME", field("metadata.name")),
            from("NS", field("metadata.namespace")),
            from("UID", field("metadata.uid")),
            from("SA", field("spec.serviceAccountName")),
            from("HOST", field("spec.host")),
        ]);
        let env = resolve(c, &Objects::new()).unwrap();
        for (name, want) in [
            ("APP", "web"),
            ("NONE", ""),
            ("LABELS", "app=\"web\"\ntier=\"front \\\"end\\\"\""),
            ("OWNER", "me"),
            ("POD_IP", "10.88.0.5"),
            ("POD_IPS", "10.88.0.5,fd00::5"),
            ("HOST_IP", "192.168.1.10"),
            ("NAME", "web"),
            ("NS", "ns"),
            ("UID", "uid-1"),
            ("SA", "default"),
            ("HOST", "node-1"),
        ] {
            assert_eq!(get(&env, name), Some(want), "{name}");
        }
    }

    #[test]
    fn unsupported_field_paths_fail_like_upstream() {
        for (path, want) in [
            ("spec.containers", "field label not supported: spec.containers"),
            (
                "metadata.name['x']",
                "field label does not support subscript: metadata.name['x']",
            ),
            ("status.phase", "unsupported fieldPath: status.phase"),
        ] {
            let err = resolve(container(vec![from("X", field(path))]), &Objects::new()).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn env_from_applies_the_prefix_skips_invalid_keys_and_env_overrides() {
        let objects = Objects::new().with_config_map(config_map(
            "cfg",
            &[("HOST", "db"), ("1bad", "x"), ("PORT", "5432")],
        ));
        let mut c = container(vec![
            value("DB_PORT", "6543"),
            value("URL", "$(DB_HOST):$(DB_PORT)"),
        ]);
        c.env_from = Some(vec![EnvFromSource {
            prefix: Some("DB_".into()),
            config_map_ref: Some(ConfigMapEnvSource {
                name: "cfg".into(),
                optional: None,
            }),
            secret_ref: None,
        }]);
        let env = resolve(c, &objects).unwrap();
        assert_eq!(get(&env, "DB_HOST"), Some("db"));
        assert_eq!(get(&env, "DB_PORT"), Some("6543"));
        assert_eq!(get(&env, "URL"), Some("db:6543"));
        // "DB_1bad" is a valid name once prefixed: upstream checks the prefixed key.
        assert_eq!(get(&env, "DB_1bad"), Some("x"));
        assert!(env.invalid_env_from.is_empty());
    }

    #[test]
    fn env_from_invalid_keys_are_reported_with_upstream_event_text() {
        let objects =
            Objects::new().with_config_map(config_map("cfg", &[("1bad", "x"), ("ok", "y"), ("a b", "z")]));
        let mut c = container(vec![]);
        c.env_from = Some(vec![EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource {
                name: "cfg".into(),
                optional: None,
            }),
            ..EnvFromSource::default()
        }]);
        let env = resolve(c, &objects).unwrap();
        assert_eq!(env.env, [("ok".to_owned(), "y".to_owned())]);
        assert_eq!(
            env.invalid_env_from[0].event_message(),
            "Keys [1bad, a b] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid \
             environment variable names."
        );
    }

    #[test]
    fn resource_field_ref_applies_the_divisor_and_defaults_limits_to_allocatable() {
        let resource = |resource: &str, divisor: Option<&str>| EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: None,
                divisor: divisor.map(|d| Quantity(d.into())),
                resource: resource.into(),
            }),
            ..EnvVarSource::default()
        };
        let mut c = container(vec![
            from("MEM_MI", resource("limits.memory", Some("1Mi"))),
            from("MEM", resource("limits.memory", None)),
            from("CPU_REQ_M", resource("requests.cpu", Some("1m"))),
            from("CPU_REQ", resource("requests.cpu", None)),
            from("CPU_LIMIT", resource("limits.cpu", None)),
        ]);
        c.resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("memory".to_owned(), Quantity("64Mi".into()))])),
            requests: Some(BTreeMap::from([("cpu".to_owned(), Quantity("250m".into()))])),
            ..ResourceRequirements::default()
        });
        let env = resolve(c, &Objects::new()).unwrap();
        assert_eq!(get(&env, "MEM_MI"), Some("64"));
        assert_eq!(get(&env, "MEM"), Some("67108864"));
        assert_eq!(get(&env, "CPU_REQ_M"), Some("250"));
        // ceil(250m / 1) = 1
        assert_eq!(get(&env, "CPU_REQ"), Some("1"));
        // No cpu limit: the node's allocatable 4 cpus.
        assert_eq!(get(&env, "CPU_LIMIT"), Some("4"));

        let err = resolve(
            container(vec![from("X", resource("limits.gpu", None))]),
            &Objects::new(),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "unsupported container resource : limits.gpu");
    }

    #[test]
    fn quantities_parse_to_nanos() {
        for (text, want) in [
            ("1", 1_000_000_000),
            ("250m", 250_000_000),
            ("1Ki", 1024 * 1_000_000_000),
            ("1.5", 1_500_000_000),
            ("1e3", 1_000_000_000_000),
            ("1n", 1),
            ("64Mi", 64 * (1 << 20) * 1_000_000_000),
        ] {
            assert_eq!(quantity_nanos(text), Some(want), "{text}");
        }
        assert_eq!(quantity_nanos("abc"), None);
        assert_eq!(quantity_nanos("1Qi"), None);
    }

    #[test]
    fn references_collect_env_and_volume_sources() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c",
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "k"}}}],
                    "envFrom": [{"secretRef": {"name": "s1"}}]}],
                "volumes": [
                    {"name": "v1", "configMap": {"name": "cm2"}},
                    {"name": "v2", "secret": {"secretName": "s2"}},
                    {"name": "v3", "projected": {"sources": [{"configMap": {"name": "cm3"}}]}}
                ]
            }
        }))
        .unwrap();
        let refs = references(&pod);
        assert_eq!(
            refs.config_maps,
            BTreeSet::from(["cm1".into(), "cm2".into(), "cm3".into()])
        );
        assert_eq!(refs.secrets, BTreeSet::from(["s1".into(), "s2".into()]));
        pod.spec = None;
        assert_eq!(references(&pod), References::default());
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\x01é\"");
    }
}
