//! Events expire: kube-apiserver stores every core/v1 Event (and so every events.k8s.io/v1 one) under an
//! etcd lease of `--event-ttl` (1 h), renewed by each write, so an event disappears an hour after it last
//! changed. Here one task keeps the expiry time of each event in memory, fed by a watch on events, and
//! deletes the expired ones on a periodic sweep (with the resourceVersion it saw as a precondition, so an
//! event rewritten in between stays). The expiry is not stored: after a restart an event's last write is
//! taken from its own timestamps (the newest of lastTimestamp, series.lastObservedTime, eventTime,
//! creationTimestamp), which is when its writer last touched it.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::resources;
use super::{DeleteOptions, Registry};
use crate::selector::{Fields, Scalar};
use crate::storage::{Stored, WatchFrom, WatchStart};
use crate::watch::{EventType, Next};

/// kube-apiserver's `--event-ttl` default.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// How often the sweep runs: a tenth of the TTL, between 100 ms and 30 s (etcd expires leases within about
/// a second; a 1 h TTL needs no finer sweep).
pub fn sweep_interval(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(30))
}

/// When an event found at start-up was last written, from its own timestamps.
pub fn last_written(event: &Value) -> Option<jiff::Timestamp> {
    [
        event.get("lastTimestamp"),
        event.pointer("/series/lastObservedTime"),
        event.get("eventTime"),
        event.pointer("/metadata/creationTimestamp"),
    ]
    .into_iter()
    .flatten()
    .filter_map(|t| t.as_str()?.parse::<jiff::Timestamp>().ok())
    .max()
}

/// How long an event found at start-up has left: TTL minus its age, never negative.
pub fn remaining(event: &Value, ttl: Duration, now: jiff::Timestamp) -> Duration {
    let Some(written) = last_written(event) else {
        return ttl;
    };
    let age = now.duration_since(written);
    let age = Duration::try_from(age).unwrap_or(Duration::ZERO);
    ttl.saturating_sub(age)
}

struct Entry {
    deadline: Instant,
    revision: u64,
    namespace: Option<String>,
    name: String,
}

fn entry(obj: &Stored, deadline: Instant) -> Option<Entry> {
    let value = obj.value();
    let meta = value.get("metadata")?;
    Some(Entry {
        deadline,
        revision: obj.revision,
        namespace: meta.get("namespace").and_then(Value::as_str).map(str::to_string),
        name: meta.get("name")?.as_str()?.to_string(),
    })
}

/// Start expiring events `ttl` after their last write, until `cancel`. The watch on events is registered
/// before this returns (so the server's watcher count is settled once it serves).
pub fn spawn(registry: Registry, ttl: Duration, cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    let info = resources::find("", "v1", "events");
    let first = info.and_then(|i| registry.watch(i, None, WatchFrom::Now).ok());
    tokio::spawn(async move {
        if let (Some(info), Some(first)) = (info, first) {
            run(registry, info, first, ttl, cancel).await;
        }
    })
}

async fn run(
    registry: Registry,
    info: &'static resources::ResourceInfo,
    first: WatchStart,
    ttl: Duration,
    cancel: CancellationToken,
) {
    let mut deadlines: HashMap<String, Entry> = HashMap::new();
    let mut tick = tokio::time::interval(sweep_interval(ttl));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = Some(first);
    'watch: loop {
        let start = match first.take() {
            Some(s) => s,
            None => match registry.watch(info, None, WatchFrom::Now) {
                Ok(s) => s,
                Err(_) => return,
            },
        };
        let now = (Instant::now(), jiff::Timestamp::now());
        let mut seen = std::collections::HashSet::new();
        for obj in &start.initial {
            let key = info.key(
                obj.at(&["metadata", "namespace"]).and_then(Scalar::as_str),
                obj.at(&["metadata", "name"])
                    .and_then(Scalar::as_str)
                    .unwrap_or(""),
            );
            seen.insert(key.clone());
            // After a resubscription, events already known keep the deadline of their last write.
            if deadlines.get(&key).is_some_and(|e| e.revision == obj.revision) {
                continue;
            }
            if let Some(e) = entry(obj, now.0 + remaining(&obj.value(), ttl, now.1)) {
                deadlines.insert(key, e);
            }
        }
        deadlines.retain(|k, _| seen.contains(k));
        let mut sub = start.subscription;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                next = sub.next() => match next {
                    Next::Event(ev) => match ev.kind {
                        EventType::Deleted => {
                            deadlines.remove(&ev.key);
                        }
                        _ => {
                            if let Some(e) = entry(&ev.object, Instant::now() + ttl) {
                                deadlines.insert(ev.key.clone(), e);
                            }
                        }
                    },
                    Next::Overflowed => continue 'watch,
                    Next::Closed => return,
                },
                _ = tick.tick() => {
                    let now = Instant::now();
                    let expired: Vec<(String, Option<String>, String, u64)> = deadlines
                        .iter()
                        .filter(|(_, e)| e.deadline <= now)
                        .map(|(k, e)| (k.clone(), e.namespace.clone(), e.name.clone(), e.revision))
                        .collect();
                    for (key, ns, name, revision) in expired {
                        let opts = DeleteOptions {
                            resource_version: Some(revision.to_string()),
                            ..Default::default()
                        };
                        // A conflict means it was written again: its MODIFIED brings the new deadline.
                        match registry.delete(info, ns.as_deref(), &name, &opts).await {
                            Ok(_) => {
                                deadlines.remove(&key);
                            }
                            Err(e) if e.code == 404 => {
                                deadlines.remove(&key);
                            }
                            Err(e) if e.code == 409 => {}
                            Err(e) => tracing::warn!(error = %e, event = %key, "expiring an event"),
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_sweep_is_a_tenth_of_the_ttl_within_bounds() {
        assert_eq!(sweep_interval(DEFAULT_EVENT_TTL), Duration::from_secs(30));
        assert_eq!(sweep_interval(Duration::from_secs(2)), Duration::from_millis(200));
        assert_eq!(
            sweep_interval(Duration::from_millis(10)),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn an_event_found_at_start_has_the_ttl_minus_the_age_of_its_newest_timestamp() {
        let now: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        let ev = json!({"metadata": {"creationTimestamp": "2026-01-01T11:00:00Z"},
                        "lastTimestamp": "2026-01-01T11:50:00Z"});
        assert_eq!(
            remaining(&ev, DEFAULT_EVENT_TTL, now),
            Duration::from_secs(50 * 60)
        );
        let series = json!({"metadata": {"creationTimestamp": "2026-01-01T10:00:00Z"},
                            "eventTime": "2026-01-01T10:00:00.000000Z",
                            "series": {"count": 3, "lastObservedTime": "2026-01-01T11:59:00.000000Z"}});
        assert_eq!(
            remaining(&series, DEFAULT_EVENT_TTL, now),
            Duration::from_secs(59 * 60)
        );
        let old = json!({"metadata": {"creationTimestamp": "2025-12-31T00:00:00Z"}});
        assert_eq!(remaining(&old, DEFAULT_EVENT_TTL, now), Duration::ZERO);
        assert_eq!(remaining(&json!({}), DEFAULT_EVENT_TTL, now), DEFAULT_EVENT_TTL);
    }
}
