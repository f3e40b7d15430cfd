//! The kubelet's service account token manager (upstream `pkg/kubelet/token/token_manager.go`): the
//! tokens of pods' projected `serviceAccountToken` sources, requested through TokenRequest
//! (`serviceaccounts/<name>/token`, bound to the pod), cached, and renewed once they are older than 80%
//! of their lifetime or than 24 hours.
//!
//! The pod worker asks [`TokenManager::get`] before it writes a pod's projected volumes (the volume
//! code itself is synchronous and reads the tokens from [`crate::env::Objects`]), and
//! [`TokenManager::needs_refresh`] on each sync to know when to rewrite them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};

/// upstream `maxTTL`: a token older than this is renewed whatever its lifetime.
const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);
/// upstream `maxJitter`: renewals are spread over this much.
const MAX_JITTER_SECONDS: f64 = 10.0;
/// The API default of `ServiceAccountTokenProjection.expirationSeconds` (one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// Asks the API server for a token.
#[async_trait]
pub trait TokenRequester: Send + Sync {
    /// `POST /api/v1/namespaces/{namespace}/serviceaccounts/{name}/token`.
    async fn request(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, String>;
}

/// The real requester, over the node agent's client.
pub struct KubeRequester(pub kube::Client);

#[async_trait]
impl TokenRequester for KubeRequester {
    async fn request(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, String> {
        let api: kube::Api<ServiceAccount> = kube::Api::namespaced(self.0.clone(), namespace);
        api.create_token_request(name, &Default::default(), request)
            .await
            .map_err(|e| match e {
                kube::Error::Api(s) => s.message.clone(),
                other => other.to_string(),
            })
    }
}

/// One projected token of a pod: what the request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's service account.
    pub service_account: String,
    /// The projection's audience (empty: the API server's).
    pub audience: String,
    /// The projection's expirationSeconds.
    pub expiration_seconds: i64,
    /// The pod's name and uid (the bound object).
    pub pod_name: String,
    /// The pod's uid.
    pub pod_uid: String,
}

impl TokenKey {
    /// The request upstream's projected volume plugin makes for this projection.
    pub fn request(&self) -> TokenRequest {
        TokenRequest {
            spec: TokenRequestSpec {
                audiences: if self.audience.is_empty() {
                    Vec::new()
                } else {
                    vec![self.audience.clone()]
                },
                expiration_seconds: Some(self.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(self.pod_name.clone()),
                    uid: Some(self.pod_uid.clone()),
                }),
            },
            ..Default::default()
        }
    }
}

/// The token projections of a pod, one key each.
pub fn pod_token_keys(pod: &Pod) -> Vec<TokenKey> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    let mut keys: Vec<TokenKey> = Vec::new();
    for source in spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .filter_map(|s| s.service_account_token.as_ref())
    {
        let key = TokenKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            service_account: spec.service_account_name.clone().unwrap_or_default(),
            audience: source.audience.clone().unwrap_or_default(),
            expiration_seconds: source.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS),
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// A token the API server issued, with what its refresh needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The token.
    pub token: String,
    /// `status.expirationTimestamp`.
    pub expires: Timestamp,
    /// The requested lifetime (`spec.expirationSeconds`).
    pub expiration_seconds: i64,
}

/// upstream `requiresRefresh`: the token is older than 24 h, or within 20% of its lifetime of expiring
/// (both less `jitter`, up to 10 s, so renewals of many pods spread).
pub fn requires_refresh(issued: &Issued, now: Timestamp, jitter: SignedDuration) -> bool {
    let lifetime = SignedDuration::from_secs(issued.expiration_seconds);
    let iat = issued.expires - lifetime;
    if now > iat + MAX_TTL - jitter {
        return true;
    }
    let before_expiry = SignedDuration::from_secs(issued.expiration_seconds * 20 / 100);
    now > issued.expires - before_expiry - jitter
}

fn jitter() -> SignedDuration {
    SignedDuration::from_secs_f64(rand::random::<f64>() * MAX_JITTER_SECONDS)
}

/// The cache of issued tokens.
pub struct TokenManager {
    requester: Arc<dyn TokenRequester>,
    cache: Mutex<HashMap<TokenKey, Issued>>,
}

impl TokenManager {
    /// A manager requesting through `requester`.
    pub fn new(requester: Arc<dyn TokenRequester>) -> TokenManager {
        TokenManager {
            requester,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, key: &TokenKey) -> Option<Issued> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Whether the token of `key` is missing or due for renewal.
    pub fn needs_refresh(&self, key: &TokenKey) -> bool {
        self.cached(key)
            .is_none_or(|t| requires_refresh(&t, Timestamp::now(), jitter()))
    }

    /// upstream `GetServiceAccountToken`: the cached token unless it is due; a failed renewal falls back
    /// to the cached token while it has not expired. The error text is the projected volume plugin's.
    pub async fn get(&self, key: &TokenKey) -> Result<String, String> {
        let now = Timestamp::now();
        let cached = self.cached(key);
        if let Some(t) = &cached
            && !requires_refresh(t, now, jitter())
        {
            return Ok(t.token.clone());
        }
        let result = self
            .requester
            .request(&key.namespace, &key.service_account, &key.request())
            .await
            .and_then(|tr| {
                let status = tr.status.ok_or("the token request has no status")?;
                Ok(Issued {
                    token: status.token,
                    expires: status.expiration_timestamp.0,
                    expiration_seconds: tr.spec.expiration_seconds.unwrap_or(key.expiration_seconds),
                })
            });
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // upstream's cleanup runs every minute; here each request drops what has expired.
        cache.retain(|_, t| t.expires > now);
        match result {
            Ok(issued) => {
                let token = issued.token.clone();
                cache.insert(key.clone(), issued);
                Ok(token)
            }
            Err(e) => match cached.filter(|t| t.expires > now) {
                Some(t) => {
                    tracing::warn!(error = %e, pod = %key.pod_name, "could not renew a service account token; keeping the current one");
                    Ok(t.token)
                }
                None => Err(format!("failed to fetch token: {e}")),
            },
        }
    }

    /// Forget the tokens of a pod that is gone (upstream `DeleteServiceAccountToken`).
    pub fn forget_pod(&self, pod_uid: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| k.pod_uid != pod_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenRequestStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn issued(expires_in: i64, lifetime: i64) -> Issued {
        Issued {
            token: "t".into(),
            expires: Timestamp::now() + SignedDuration::from_secs(expires_in),
            expiration_seconds: lifetime,
        }
    }

    #[test]
    fn refresh_at_eighty_percent_of_the_lifetime_or_after_a_day() {
        let now = Timestamp::now();
        let none = SignedDuration::ZERO;
        // (expires in, lifetime, jitter) → refresh
        let cases = [
            (3600, 3600, none, false),
            (721, 3600, none, false),
            (719, 3600, none, true),
            (725, 3600, SignedDuration::from_secs(10), true),
            (-1, 3600, none, true),
            // A one-year (extended) lifetime: still renewed a day after issue.
            (365 * 86400 - 86399, 365 * 86400, none, false),
            (365 * 86400 - 86401, 365 * 86400, none, true),
        ];
        for (expires_in, lifetime, jitter, want) in cases {
            let t = Issued {
                token: "t".into(),
                expires: now + SignedDuration::from_secs(expires_in),
                expiration_seconds: lifetime,
            };
            assert_eq!(
                requires_refresh(&t, now, jitter),
                want,
                "{expires_in} {lifetime} {jitter:?}"
            );
        }
    }

    struct Fake {
        calls: AtomicU32,
        fail: std::sync::atomic::AtomicBool,
        expires_in: i64,
    }

    #[async_trait]
    impl TokenRequester for Fake {
        async fn request(&self, _ns: &str, _name: &str, req: &TokenRequest) -> Result<TokenRequest, String> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err("serviceaccounts \"default\" not found".into());
            }
            let mut out = req.clone();
            out.status = Some(TokenRequestStatus {
                token: format!("token-{n}"),
                expiration_timestamp: Time(Timestamp::now() + SignedDuration::from_secs(self.expires_in)),
            });
            Ok(out)
        }
    }

    fn key() -> TokenKey {
        TokenKey {
            namespace: "ns".into(),
            service_account: "default".into(),
            audience: String::new(),
            expiration_seconds: 3607,
            pod_name: "p".into(),
            pod_uid: "uid".into(),
        }
    }

    #[tokio::test]
    async fn tokens_are_cached_renewed_when_due_and_kept_when_renewal_fails() {
        let fake = Arc::new(Fake {
            calls: AtomicU32::new(0),
            fail: false.into(),
            expires_in: 3607,
        });
        let m = TokenManager::new(fake.clone());
        assert!(m.needs_refresh(&key()));
        assert_eq!(m.get(&key()).await.unwrap(), "token-0");
        assert_eq!(m.get(&key()).await.unwrap(), "token-0", "cached");
        assert!(!m.needs_refresh(&key()));
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);

        // Due (within 20% of expiry): renewed; a failed renewal keeps the unexpired token.
        m.cache.lock().unwrap().insert(key(), issued(60, 3607));
        assert!(m.needs_refresh(&key()));
        assert_eq!(m.get(&key()).await.unwrap(), "token-1");
        m.cache.lock().unwrap().insert(key(), issued(60, 3607));
        fake.fail.store(true, Ordering::SeqCst);
        assert_eq!(m.get(&key()).await.unwrap(), "t");
        m.forget_pod("uid");
        let e = m.get(&key()).await.unwrap_err();
        assert_eq!(e, "failed to fetch token: serviceaccounts \"default\" not found");
    }

    #[test]
    fn a_pods_projections_become_pod_bound_requests() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"serviceAccountName": "robot", "containers": [],
                "volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"serviceAccountToken": {"path": "vault", "audience": "vault"}}]}}]}}))
        .unwrap();
        let keys = pod_token_keys(&pod);
        assert_eq!(keys.len(), 2);
        assert_eq!(
            (keys[0].expiration_seconds, keys[0].audience.as_str()),
            (3607, "")
        );
        assert_eq!(
            (keys[1].expiration_seconds, keys[1].audience.as_str()),
            (3600, "vault")
        );
        let req = keys[1].request();
        assert_eq!(req.spec.audiences, ["vault"]);
        let bound = req.spec.bound_object_ref.unwrap();
        assert_eq!(
            (bound.kind.as_deref(), bound.name.as_deref(), bound.uid.as_deref()),
            (Some("Pod"), Some("p"), Some("u"))
        );
        assert_eq!(keys[0].service_account, "robot");
    }
}
