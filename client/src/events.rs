//! Event recording (core/v1 Events, as `kubectl describe` shows them), like client-go's event recorder:
//! a repeat of the same reason and message for the same object bumps `count` and `lastTimestamp` of the
//! event already written instead of creating another one, and client-go's spam filter
//! (`EventSourceObjectSpamFilter`: a burst of 25 events per object, then one every 5 minutes) keeps a probe
//! that fails every second from writing to the API server every second.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// How many distinct events a recorder remembers for aggregation.
const MAX_REMEMBERED: usize = 4096;
/// client-go `defaultSpamBurst`.
const SPAM_BURST: f64 = 25.0;
/// client-go `defaultSpamQPS`: one token every 5 minutes.
const SPAM_QPS: f64 = 1.0 / 300.0;

/// A token bucket per object (client-go's spam filter key is the source and the involved object).
#[derive(Debug, Default)]
struct SpamFilter {
    buckets: HashMap<String, (f64, std::time::Instant)>,
}

impl SpamFilter {
    /// Whether one more event about `key` may be written at `now`.
    fn allow(&mut self, key: String, now: std::time::Instant) -> bool {
        if self.buckets.len() >= MAX_REMEMBERED && !self.buckets.contains_key(&key) {
            self.buckets.clear();
        }
        let (tokens, last) = self.buckets.entry(key).or_insert((SPAM_BURST, now));
        let refill = now.duration_since(*last).as_secs_f64() * SPAM_QPS;
        *tokens = (*tokens + refill).min(SPAM_BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// (object uid, reason, message): what makes two events the same.
type EventKey = (String, String, String);
/// (event namespace, event name, count) of the event already written.
type Written = (String, String, i32);

/// Writes events for one component (`kubelet`, `default-scheduler`).
pub struct Recorder {
    client: kube::Client,
    component: String,
    host: Option<String>,
    seen: Mutex<HashMap<EventKey, Written>>,
    spam: Mutex<SpamFilter>,
}

impl Recorder {
    /// A recorder for `component`, optionally on `host` (the node name, for the kubelet).
    pub fn new(client: kube::Client, component: &str, host: Option<&str>) -> Recorder {
        Recorder {
            client,
            component: component.to_string(),
            host: host.map(str::to_string),
            seen: Mutex::new(HashMap::new()),
            spam: Mutex::new(SpamFilter::default()),
        }
    }

    /// Records an event without waiting for the API server (kills and probes must not wait on it).
    pub fn emit(
        self: &std::sync::Arc<Self>,
        object: ObjectReference,
        ty: EventType,
        reason: &'static str,
        message: String,
    ) {
        let me = self.clone();
        tokio::spawn(async move { me.record(&object, ty, reason, &message).await });
    }

    /// Record an event about `object`. Failures are logged, never returned: events are best effort.
    pub async fn record(&self, object: &ObjectReference, ty: EventType, reason: &str, message: &str) {
        let key = format!(
            "{}/{}/{}/{}/{}",
            object.api_version.as_deref().unwrap_or(""),
            object.kind.as_deref().unwrap_or(""),
            object.namespace.as_deref().unwrap_or(""),
            object.name.as_deref().unwrap_or(""),
            object.uid.as_deref().unwrap_or("")
        );
        let allowed = self
            .spam
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allow(key, std::time::Instant::now());
        if !allowed {
            tracing::debug!(reason, message, "event dropped by the spam filter");
            return;
        }
        if let Err(e) = self.try_record(object, ty, reason, message).await {
            tracing::debug!(error = %e, reason, "could not record an event");
        }
    }

    async fn try_record(
        &self,
        object: &ObjectReference,
        ty: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let now = jiff::Timestamp::now();
        let namespace = object.namespace.clone().unwrap_or_else(|| "default".to_string());
        let key = (
            object.uid.clone().unwrap_or_default(),
            reason.to_string(),
            message.to_string(),
        );
        let existing = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Some((ns, name, count)) = existing {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
            let patch = json!({"count": count + 1, "lastTimestamp": Time(now)});
            if api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                self.seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (ns, name, count + 1));
                return Ok(());
            }
        }
        let base = object.name.clone().unwrap_or_else(|| "object".to_string());
        let name = format!("{base}.{:x}", now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(ty.as_str().to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            event_time: Some(MicroTime(now)),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            action: Some(reason.to_string()),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // Aggregation is best effort: the memory of what was written is bounded (objects come and go, e.g.
        // mirror pods get a new UID each time they are recreated); forgetting only means a new event.
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(key, (namespace, name, 1));
        Ok(())
    }
}

/// The reference to a pod that events carry.
pub fn pod_ref(pod: &k8s_openapi::api::core::v1::Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The reference to a Node that events carry (upstream's `nodeRef`: the UID is the node's name).
pub fn node_ref(node_name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(node_name.to_string()),
        uid: Some(node_name.to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_spam_filter_allows_a_burst_of_25_then_one_every_five_minutes() {
        let mut f = SpamFilter::default();
        let t0 = Instant::now();
        let allowed = (0..30).filter(|_| f.allow("pod-a".into(), t0)).count();
        assert_eq!(allowed, 25);
        assert!(f.allow("pod-b".into(), t0), "buckets are per object");
        assert!(!f.allow("pod-a".into(), t0 + Duration::from_secs(299)));
        assert!(f.allow("pod-a".into(), t0 + Duration::from_secs(600)));
    }
}
