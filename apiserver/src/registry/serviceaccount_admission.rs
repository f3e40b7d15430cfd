//! The ServiceAccount admission plugin on pod CREATE (upstream
//! `plugin/pkg/admission/serviceaccount/admission.go`): the pod runs as a ServiceAccount that exists, and
//! gets the projected `kube-api-access-*` volume (token, root CA, namespace) mounted in every container.
//!
//! [`admit`] is the pure mutation over a pod and its ServiceAccount; [`validate_mirror`] the mirror pod
//! rules; `Registry::admit_service_account` (below) looks the ServiceAccount up, waiting briefly for
//! `default`, which the controller manager creates right after its namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath, LocalObjectReference,
    ObjectFieldSelector, Pod, ProjectedVolumeSource, ServiceAccount, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use serde::Deserialize;
use serde_json::Value;

use super::{Registry, resources};
use crate::error::ApiError;

/// upstream `DefaultServiceAccountName`.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";
/// upstream `ServiceAccountVolumeName`: the token volume's name is this, a dash, and 5 random characters.
pub const SERVICE_ACCOUNT_VOLUME_NAME: &str = "kube-api-access";
/// upstream `DefaultAPITokenMountPath`.
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The root CA ConfigMap the controller manager publishes in every namespace (`rootcacertpublisher`).
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// upstream `numServiceAccountRetries`: live lookups of `default` before giving up...
const DEFAULT_LOOKUP_TRIES: u32 = 10;
/// ... 100-200 ms apart upstream (`wait.Jitter(100ms, 1.0)`); 150 ms here, ~1.4 s in all.
const DEFAULT_LOOKUP_INTERVAL: Duration = Duration::from_millis(150);
/// `kubernetes.io/config.mirror`.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Whether the pod is a static pod's mirror.
pub fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// upstream `shouldAutomount`: the pod's choice, else the ServiceAccount's, else yes.
pub fn should_automount(sa: &ServiceAccount, pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.automount_service_account_token)
        .or(sa.automount_service_account_token)
        .unwrap_or(true)
}

/// upstream `TokenVolumeSource`: token (3607 s, extended to a year by TokenRequest), the root CA and
/// the namespace.
pub fn token_volume(name: &str) -> Volume {
    Volume {
        name: name.to_string(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        path: "token".into(),
                        expiration_seconds: Some(
                            crate::serviceaccount::claims::WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
                        ),
                        audience: None,
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: ROOT_CA_CONFIG_MAP.into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            mode: None,
                        }]),
                        optional: None,
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".into(),
                            field_ref: Some(ObjectFieldSelector {
                                api_version: Some("v1".into()),
                                field_path: "metadata.namespace".into(),
                            }),
                            ..Default::default()
                        }]),
                    }),
                    ..Default::default()
                },
            ]),
        }),
        ..Default::default()
    }
}

/// upstream `Admit` after the lookup: automount (unless opted out) and the ServiceAccount's
/// imagePullSecrets when the pod has none. `suffix` is the 5 random characters of a new volume's name.
/// `spec.serviceAccountName` must already be set (see [`service_account_name`]).
pub fn admit(pod: &mut Pod, sa: &ServiceAccount, suffix: &str) {
    if should_automount(sa, pod) {
        mount_service_account_token(pod, suffix);
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty)
        && let Some(secrets) = sa.image_pull_secrets.as_ref().filter(|s| !s.is_empty())
    {
        spec.image_pull_secrets = Some(
            secrets
                .iter()
                .map(|s| LocalObjectReference { name: s.name.clone() })
                .collect(),
        );
    }
}

/// upstream `mountServiceAccountToken`: reuse a `kube-api-access-*` volume if the pod has one, mount it
/// read-only at the API token path in every init and app container without a mount there, and add the
/// volume if some container needed it. Ephemeral containers are left alone, as upstream.
fn mount_service_account_token(pod: &mut Pod, suffix: &str) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let prefix = format!("{SERVICE_ACCOUNT_VOLUME_NAME}-");
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(&prefix))
        .map(|v| v.name.clone());
    let has_volume = existing.is_some();
    let name = existing.unwrap_or_else(|| format!("{prefix}{suffix}"));
    let mount = VolumeMount {
        name: name.clone(),
        read_only: Some(true),
        mount_path: DEFAULT_API_TOKEN_MOUNT_PATH.into(),
        ..Default::default()
    };
    let mut needs_volume = false;
    for c in spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
    {
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts
            .iter()
            .any(|m| m.mount_path == DEFAULT_API_TOKEN_MOUNT_PATH)
        {
            mounts.push(mount.clone());
            needs_volume = true;
        }
    }
    if !has_volume && needs_volume {
        spec.volumes
            .get_or_insert_with(Vec::new)
            .push(token_volume(&name));
    }
}

/// Empty `serviceAccountName` becomes `default`; the deprecated `serviceAccount` follows it (and
/// names it when only it is set, as the v1 conversion does). Returns the name.
pub fn service_account_name(pod: &mut Pod) -> String {
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.service_account_name.as_deref().unwrap_or("").is_empty() {
        let deprecated = spec.service_account.clone().filter(|s| !s.is_empty());
        spec.service_account_name = Some(deprecated.unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT_NAME.into()));
    }
    spec.service_account = spec.service_account_name.clone();
    spec.service_account_name.clone().unwrap_or_default()
}

/// upstream `Validate` for mirror pods: they may name no ServiceAccount, reference no Secret and project
/// no token, because the kubelet (which wrote them) cannot be trusted to have admitted them.
pub fn validate_mirror(pod: &Pod) -> Result<(), &'static str> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    if !spec.service_account_name.as_deref().unwrap_or("").is_empty() {
        return Err("a mirror pod may not reference service accounts");
    }
    if references_secrets(spec) {
        return Err("a mirror pod may not reference secrets");
    }
    let projects_token = spec.volumes.iter().flatten().any(|v| {
        v.projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
            .any(|s| s.service_account_token.is_some())
    });
    if projects_token {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

/// upstream `VisitPodSecretNames` found any: pull secrets, secret volumes and projections, env and
/// envFrom of every kind of container.
fn references_secrets(spec: &k8s_openapi::api::core::v1::PodSpec) -> bool {
    let pull = spec.image_pull_secrets.as_ref().is_some_and(|s| !s.is_empty());
    let volumes = spec.volumes.iter().flatten().any(|v| {
        v.secret.is_some()
            || v.projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
                .any(|s| s.secret.is_some())
    });
    let env_uses = |env: Option<&Vec<k8s_openapi::api::core::v1::EnvVar>>,
                    from: Option<&Vec<k8s_openapi::api::core::v1::EnvFromSource>>| {
        env.into_iter()
            .flatten()
            .any(|e| e.value_from.as_ref().is_some_and(|f| f.secret_key_ref.is_some()))
            || from.into_iter().flatten().any(|f| f.secret_ref.is_some())
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| env_uses(c.env.as_ref(), c.env_from.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| env_uses(c.env.as_ref(), c.env_from.as_ref()));
    pull || volumes || containers
}

fn random_suffix() -> String {
    use rand::Rng;
    // names.SimpleNameGenerator's alphabet: no vowels, no look-alike digits.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

impl Registry {
    /// The ServiceAccount admission on a pod being created in `namespace` (a no-op unless switched on).
    pub(super) async fn admit_service_account(
        &self,
        namespace: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let forbidden = |why: &str| ApiError::forbidden("pods", "", &name, why);
        let mut pod: Pod = api::tree::pod(obj).map_err(|e| {
            ApiError::bad_request(format!("Pod in version \"v1\" cannot be handled as a Pod: {e}"))
        })?;
        if is_mirror(obj) {
            return validate_mirror(&pod).map_err(forbidden);
        }
        let sa_name = service_account_name(&mut pod);
        let sa = self.service_account(namespace, &sa_name).await.ok_or_else(|| {
            forbidden(&format!(
                "error looking up service account {namespace}/{sa_name}: serviceaccount {sa_name:?} not found"
            ))
        })?;
        admit(&mut pod, &sa, &random_suffix());
        let metadata = obj.get("metadata").cloned();
        *obj = api::tree::pod_to_tree(&pod).expect("a Pod always serialises");
        if let Some(m) = metadata {
            obj["metadata"] = m;
        }
        Ok(())
    }

    /// The ServiceAccount, waiting up to ~1.4 s for `default` (upstream retries the live lookup of the
    /// default account only: the controller manager creates it right after the namespace).
    async fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccount> {
        let info = resources::find("", "v1", "serviceaccounts").expect("serviceaccounts are served");
        let tries = if name == DEFAULT_SERVICE_ACCOUNT_NAME {
            DEFAULT_LOOKUP_TRIES
        } else {
            1
        };
        for attempt in 0..tries {
            if attempt > 0 {
                tokio::time::sleep(DEFAULT_LOOKUP_INTERVAL).await;
            }
            if let Ok(o) = self.get(info, Some(namespace), name) {
                return ServiceAccount::deserialize(&o.value()).ok();
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn sa(v: Value) -> ServiceAccount {
        let mut base = json!({"metadata": {"name": "default", "namespace": "ns"}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    fn two_containers() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "i", "image": "busybox"}],
            "containers": [{"name": "a", "image": "busybox"},
                           {"name": "b", "image": "busybox",
                            "volumeMounts": [{"name": "own", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]}],
            "ephemeralContainers": [{"name": "e", "image": "busybox"}],
            "volumes": [{"name": "own", "emptyDir": {}}]}})
    }

    #[test]
    fn automount_adds_the_projected_volume_and_read_only_mounts_where_missing() {
        let mut p = pod(two_containers());
        admit(&mut p, &sa(json!({})), "x2b4z");
        let v = serde_json::to_value(&p).unwrap();
        let spec = &v["spec"];
        let want_mount = json!({"name": "kube-api-access-x2b4z", "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});
        assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([want_mount]));
        assert_eq!(spec["containers"][0]["volumeMounts"], json!([want_mount]));
        assert_eq!(
            spec["containers"][1]["volumeMounts"].as_array().unwrap().len(),
            1,
            "a container with its own mount there keeps it alone"
        );
        assert!(spec["ephemeralContainers"][0].get("volumeMounts").is_none());
        assert_eq!(
            spec["volumes"][1],
            json!({"name": "kube-api-access-x2b4z", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
        );
    }

    #[test]
    fn automount_opt_outs_follow_pod_then_service_account() {
        // (pod automount, SA automount) → mounted
        let cases = [
            (None, None, true),
            (None, Some(false), false),
            (None, Some(true), true),
            (Some(false), None, false),
            (Some(true), Some(false), true),
            (Some(false), Some(true), false),
        ];
        for (pod_auto, sa_auto, want) in cases {
            let mut p = pod(json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
            p.spec.as_mut().unwrap().automount_service_account_token = pod_auto;
            let mut s = sa(json!({}));
            s.automount_service_account_token = sa_auto;
            admit(&mut p, &s, "abcde");
            let mounted = p.spec.unwrap().volumes.is_some_and(|v| !v.is_empty());
            assert_eq!(mounted, want, "pod {pod_auto:?} sa {sa_auto:?}");
        }
    }

    #[test]
    fn an_existing_token_volume_is_reused_and_not_added_twice() {
        let mut p = pod(json!({"spec": {
            "containers": [{"name": "a", "image": "x"}],
            "volumes": [{"name": "kube-api-access-old12", "emptyDir": {}}]}}));
        admit(&mut p, &sa(json!({})), "new34");
        let spec = p.spec.unwrap();
        assert_eq!(spec.volumes.as_ref().unwrap().len(), 1);
        assert_eq!(
            spec.containers[0].volume_mounts.as_ref().unwrap()[0].name,
            "kube-api-access-old12"
        );
        // Every container already mounting the path: nothing to add.
        let mut p = pod(json!({"spec": {"containers": [{"name": "a", "image": "x",
            "volumeMounts": [{"name": "v", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]}],
            "volumes": [{"name": "v", "emptyDir": {}}]}}));
        admit(&mut p, &sa(json!({})), "new34");
        assert_eq!(p.spec.unwrap().volumes.unwrap().len(), 1);
    }

    #[test]
    fn image_pull_secrets_are_copied_only_when_the_pod_has_none() {
        let account = sa(json!({"imagePullSecrets": [{"name": "reg"}]}));
        let mut p = pod(json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
        admit(&mut p, &account, "abcde");
        assert_eq!(p.spec.unwrap().image_pull_secrets.unwrap()[0].name, "reg");
        let mut p = pod(json!({"spec": {"containers": [{"name": "a", "image": "x"}],
            "imagePullSecrets": [{"name": "mine"}]}}));
        admit(&mut p, &account, "abcde");
        let secrets = p.spec.unwrap().image_pull_secrets.unwrap();
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0].name, "mine");
    }

    #[test]
    fn service_account_name_defaults_and_the_deprecated_field_follows() {
        let cases = [
            (json!({}), "default"),
            (json!({"serviceAccountName": "sa"}), "sa"),
            (json!({"serviceAccount": "old"}), "old"),
            (
                json!({"serviceAccountName": "new", "serviceAccount": "old"}),
                "new",
            ),
        ];
        for (spec, want) in cases {
            let mut p = pod(json!({"spec": spec}));
            assert_eq!(service_account_name(&mut p), want);
            let s = p.spec.unwrap();
            assert_eq!(s.service_account_name.as_deref(), Some(want));
            assert_eq!(s.service_account.as_deref(), Some(want));
        }
    }

    #[test]
    fn mirror_pods_may_not_use_service_accounts_secrets_or_tokens() {
        let c = json!([{"name": "a", "image": "x"}]);
        let cases = [
            (json!({"containers": c}), None),
            (
                json!({"containers": c, "serviceAccountName": "sa"}),
                Some("a mirror pod may not reference service accounts"),
            ),
            (
                json!({"containers": c, "volumes": [{"name": "s", "secret": {"secretName": "x"}}]}),
                Some("a mirror pod may not reference secrets"),
            ),
            (
                json!({"containers": c, "volumes": [{"name": "t", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}}]}}]}),
                Some("a mirror pod may not use ServiceAccountToken volume projections"),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(validate_mirror(&pod(json!({"spec": spec}))).err(), want);
        }
    }

    #[test]
    fn generated_suffixes_use_the_name_generator_alphabet() {
        for _ in 0..20 {
            let s = random_suffix();
            assert_eq!(s.len(), 5);
            assert!(
                s.bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
                "{s}"
            );
        }
    }
}
