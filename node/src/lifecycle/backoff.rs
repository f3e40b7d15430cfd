//! CrashLoopBackOff and ImagePullBackOff: a pure port of client-go's `flowcontrol.Backoff` as the kubelet
//! configures it. Each key holds the current delay and the time of the last [`BackoffState::next`]; the
//! delay starts at 10 s and doubles per consecutive failure up to 300 s. Time is always an argument, so
//! the pod worker owns one [`BackoffState`] per kind, and [`super::plan::plan`] reads the crash-loop one
//! to decide which restarts must wait and when to look again.
//!
//! The reset rule (upstream's "stable run"): an entry expires when the event being judged (a container's
//! `finishedAt`) comes more than 600 s after the entry's last update (the moment the previous instance
//! was allowed to start). In other words a container that ran for more than 10 minutes before crashing
//! restarts at once and starts again from 10 s.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::hash::hash_container;

/// kubelet: containerBackOffPeriod = 10s (first CrashLoopBackOff delay)
pub const CONTAINER_BACK_OFF_PERIOD: Duration = Duration::from_secs(10);
/// kubelet: MaxContainerBackOff = 300s (cap for both crash-loop and image pull backoff)
pub const MAX_CONTAINER_BACK_OFF: Duration = Duration::from_secs(300);
/// kubelet: backOffPeriod = 10s (first ImagePullBackOff delay; `flowcontrol.NewBackOff(backOffPeriod,
/// MaxContainerBackOff)` in `kubelet.go`)
pub const BACK_OFF_PERIOD: Duration = Duration::from_secs(10);
/// kubelet: `klet.backOff.HasExpiredFunc` returns `eventTime.Sub(lastUpdate) > 600*time.Second` (crash loop).
/// The image backoff keeps flowcontrol's default, `eventTime.Sub(lastUpdate) > 2*maxDuration`, also 600 s.
pub const STABLE_RUN_RESET: Duration = Duration::from_secs(600);

/// One backoff table (upstream `flowcontrol.Backoff`): key → (current delay, last update).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackoffState {
    initial: Duration,
    max: Duration,
    expire_after: Duration,
    entries: BTreeMap<String, Entry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

impl Default for BackoffState {
    fn default() -> Self {
        Self::crash_loop()
    }
}

impl BackoffState {
    /// The kubelet's container restart backoff (`klet.backOff`): 10 s doubling to 300 s, reset after a
    /// run of more than 600 s.
    pub fn crash_loop() -> Self {
        Self::new(
            CONTAINER_BACK_OFF_PERIOD,
            MAX_CONTAINER_BACK_OFF,
            STABLE_RUN_RESET,
        )
    }

    /// The image manager's pull backoff (`imageBackOff`): 10 s doubling to 300 s, reset 2 × 300 s after the
    /// last failed pull.
    pub fn image_pull() -> Self {
        Self::new(
            BACK_OFF_PERIOD,
            MAX_CONTAINER_BACK_OFF,
            MAX_CONTAINER_BACK_OFF * 2,
        )
    }

    /// A table with other constants (tests, or a `KubeletCrashLoopBackOffMax`-style override).
    pub fn new(initial: Duration, max: Duration, expire_after: Duration) -> Self {
        BackoffState {
            initial,
            max,
            expire_after,
            entries: BTreeMap::new(),
        }
    }

    /// The current delay of `key`, if it has an entry (upstream `Get`, which returns 0 for none).
    pub fn get(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.backoff)
    }

    /// Moves `key` to its next delay (upstream `Next`): a new or expired entry starts at the initial
    /// delay, otherwise the delay doubles up to the maximum. `event_time` is what expiry is judged on
    /// (the finished time of the instance that crashed); `now` becomes the entry's last update.
    pub fn next(&mut self, key: &str, event_time: Timestamp, now: Timestamp) {
        let backoff = match self.entries.get(key) {
            Some(e) if !self.expired(e, event_time) => (e.backoff * 2).min(self.max),
            _ => self.initial,
        };
        self.entries.insert(
            key.to_owned(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// True while less than the current delay has passed since `event_time` (upstream
    /// `IsInBackOffSince`, used with the crashed container's `finishedAt`).
    pub fn is_in_backoff_since(&self, key: &str, event_time: Timestamp, now: Timestamp) -> bool {
        self.backoff_until(key, event_time)
            .is_some_and(|until| now < until)
    }

    /// When the backoff that started at `event_time` ends: `event_time + delay`, or `None` when the key
    /// has no live entry (no backoff at all).
    pub fn backoff_until(&self, key: &str, event_time: Timestamp) -> Option<Timestamp> {
        let e = self.entries.get(key)?;
        if self.expired(e, event_time) {
            return None;
        }
        Some(event_time + e.backoff)
    }

    /// True while less than the current delay has passed since the last [`BackoffState::next`] (upstream
    /// `IsInBackOffSinceUpdate`, used by the image manager with `now`).
    pub fn is_in_backoff_since_update(&self, key: &str, now: Timestamp) -> bool {
        self.backoff_until_update(key, now)
            .is_some_and(|until| now < until)
    }

    /// When the image-style backoff of `key` ends: last update + delay, if the entry is live at `now`.
    pub fn backoff_until_update(&self, key: &str, now: Timestamp) -> Option<Timestamp> {
        let e = self.entries.get(key)?;
        if self.expired(e, now) {
            return None;
        }
        Some(e.last_update + e.backoff)
    }

    /// Forgets `key` (upstream `Reset`).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops entries not updated for 2 × max (upstream `GC`, run from housekeeping).
    pub fn gc(&mut self, now: Timestamp) {
        let horizon = self.max * 2;
        self.entries
            .retain(|_, e| now.duration_since(e.last_update) <= signed(horizon));
    }

    /// Records every start that [`super::plan::plan`] let through (the `backoff.Next` call in upstream
    /// `doBackOff`). Call once per plan, before or while executing its starts.
    pub fn record_starts(&mut self, actions: &super::plan::PodActions, now: Timestamp) {
        for advance in &actions.backoff_advance {
            self.next(&advance.key, advance.event_time, now);
        }
    }

    fn expired(&self, e: &Entry, event_time: Timestamp) -> bool {
        event_time.duration_since(e.last_update) > signed(self.expire_after)
    }
}

fn signed(d: Duration) -> jiff::SignedDuration {
    jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX)
}

/// The crash-loop key of a container (upstream `getStableKey`):
/// `<podName>_<namespace>_<podUID>_<containerName>_<hashHex>`. The hash makes a new image start afresh.
pub fn crash_loop_key(pod: &Pod, container: &Container) -> String {
    format!(
        "{}_{}_{}_{}_{}",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or(""),
        container.name,
        hash_container(container)
    )
}

/// The image pull key (upstream image manager): `<podUID>_<image>`.
pub fn image_pull_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

/// A whole-second duration as Go's `time.Duration.String` prints it: `10s`, `1m20s`, `5m0s`, `1h0m0s`.
/// Sub-second parts are dropped (backoff delays are whole seconds).
pub fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec}s"),
        (h, min, sec) => format!("{h}h{min}m{sec}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn crash_loop_backs_off_10s_doubling_to_300s() {
        // A container that crashes one second after every start. Each restart is allowed at the first
        // moment the backoff since the crash has passed; record the gaps.
        let mut b = BackoffState::crash_loop();
        let key = "k";
        let mut now = t(0);
        let mut finished = now + Duration::from_secs(1);
        let mut gaps = Vec::new();
        for _ in 0..8 {
            now = finished;
            // Wait until the restart is allowed.
            while b.is_in_backoff_since(key, finished, now) {
                now += Duration::from_secs(1);
            }
            gaps.push(now.duration_since(finished).as_secs());
            b.next(key, finished, now);
            finished = now + Duration::from_secs(1);
        }
        // The first restart is immediate (no entry yet: upstream issue #133472).
        assert_eq!(gaps, [0, 10, 20, 40, 80, 160, 300, 300]);
    }

    #[test]
    fn backoff_resets_after_a_run_longer_than_ten_minutes() {
        let cases = [
            ("crash 600s after start keeps doubling", 600, true),
            ("crash 601s after start resets", 601, false),
        ];
        for (what, ran, in_backoff) in cases {
            let mut b = BackoffState::crash_loop();
            b.next("k", t(0), t(0));
            b.next("k", t(5), t(20)); // 20 s delay now, last update at t(20)
            let finished = t(20 + ran);
            assert_eq!(
                b.is_in_backoff_since("k", finished, finished),
                in_backoff,
                "{what}"
            );
            b.next("k", finished, finished);
            let want = if in_backoff { 40 } else { 10 };
            assert_eq!(b.get("k"), Some(Duration::from_secs(want)), "{what}");
        }
    }

    #[test]
    fn image_pull_backoff_counts_from_the_last_failed_pull() {
        let mut b = BackoffState::image_pull();
        let key = image_pull_key("uid-1", "nope:latest");
        assert!(!b.is_in_backoff_since_update(&key, t(0)), "no failure yet");
        b.next(&key, t(0), t(0));
        let cases = [(9, true), (10, false)];
        for (at, want) in cases {
            assert_eq!(b.is_in_backoff_since_update(&key, t(at)), want, "at {at}s");
        }
        b.next(&key, t(10), t(10));
        assert_eq!(b.backoff_until_update(&key, t(11)), Some(t(30)));
    }

    #[test]
    fn gc_drops_entries_idle_for_twice_the_max() {
        let mut b = BackoffState::crash_loop();
        b.next("old", t(0), t(0));
        b.next("new", t(500), t(500));
        b.gc(t(601));
        assert_eq!(b.get("old"), None);
        assert!(b.get("new").is_some());
    }

    #[test]
    fn go_duration_prints_like_go() {
        let cases = [(10, "10s"), (80, "1m20s"), (300, "5m0s"), (3600, "1h0m0s")];
        for (secs, want) in cases {
            assert_eq!(go_duration(Duration::from_secs(secs)), want);
        }
    }

    #[test]
    fn crash_loop_key_is_upstreams_stable_key() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.uid = Some("u".into());
        let c = Container {
            name: "c".into(),
            image: Some("busybox".into()),
            ..Default::default()
        };
        assert_eq!(
            crash_loop_key(&pod, &c),
            format!("p_ns_u_c_{}", hash_container(&c))
        );
    }
}
