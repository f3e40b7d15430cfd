//! Fakes for the prober's boundaries: a [`FakeProber`] whose handlers answer what a test scripts, and
//! [`FakeEvents`] that keeps the events in memory. With [`crate::status_cache::PodStatusCache`] as the
//! status source and tokio's paused time, workers and the manager are tested without Docker or a server.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::{Outcome, ProbeError, ProbeEvents, ProbeType, Prober, Report, Target};
use crate::events::EventType;

/// (container name, probe type).
type Key = (String, ProbeType);

/// A prober that answers from a script: per container and probe type, the answer to give (Success by
/// default), and how long to take.
#[derive(Debug, Default)]
pub struct FakeProber {
    answers: Mutex<HashMap<Key, Result<Report, ProbeError>>>,
    delay: Mutex<Option<Duration>>,
    calls: Mutex<HashMap<Key, usize>>,
}

impl FakeProber {
    /// Every probe passes until scripted otherwise.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on, `container`'s `probe_type` probe answers `answer`.
    pub fn set(&self, container: &str, probe_type: ProbeType, answer: Result<Report, ProbeError>) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((container.to_owned(), probe_type), answer);
    }

    /// Shorthand for an outcome with no output.
    pub fn set_outcome(&self, container: &str, probe_type: ProbeType, outcome: Outcome) {
        self.set(container, probe_type, Ok(Report::new(outcome, "")));
    }

    /// Every probe takes `delay` (tokio time).
    pub fn set_delay(&self, delay: Option<Duration>) {
        *self.delay.lock().unwrap_or_else(|e| e.into_inner()) = delay;
    }

    /// How many attempts `container`'s `probe_type` probe has made.
    pub fn calls(&self, container: &str, probe_type: ProbeType) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(container.to_owned(), probe_type))
            .copied()
            .unwrap_or(0)
    }

    /// Attempts of every probe.
    pub fn total_calls(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum()
    }
}

#[async_trait]
impl Prober for FakeProber {
    async fn probe(&self, target: &Target<'_>) -> Result<Report, ProbeError> {
        let key = (target.container.name.clone(), target.probe_type);
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        let delay = *self.delay.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
            .unwrap_or_else(|| Ok(Report::new(Outcome::Success, "")))
    }
}

/// An event as [`FakeEvents`] keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// `spec.containers{c}`.
    pub field_path: String,
    /// Normal or Warning.
    pub ty: EventType,
    /// `Unhealthy`, `ProbeWarning`.
    pub reason: String,
    /// The text.
    pub message: String,
}

/// Events kept in memory.
#[derive(Debug, Default)]
pub struct FakeEvents {
    events: Mutex<Vec<RecordedEvent>>,
}

impl FakeEvents {
    /// No events yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events so far.
    pub fn events(&self) -> Vec<RecordedEvent> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ProbeEvents for FakeEvents {
    fn record(&self, _pod: &Pod, field_path: &str, ty: EventType, reason: &'static str, message: String) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RecordedEvent {
                field_path: field_path.to_owned(),
                ty,
                reason: reason.to_owned(),
                message,
            });
    }
}
