//! The manager and its workers with the fake prober, the status cache and paused tokio time.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::fake::{FakeEvents, FakeProber};
use super::*;
use crate::lifecycle::plan::ProbeResult;
use crate::status_cache::PodStatusCache;

const T0: i64 = 1_700_000_000;

struct Setup {
    manager: Arc<Manager>,
    prober: Arc<FakeProber>,
    events: Arc<FakeEvents>,
    status: Arc<PodStatusCache>,
    _cancel: CancellationToken,
}

/// A manager that started long enough ago that new workers probe at once (no start-up jitter).
async fn setup() -> Setup {
    let prober = Arc::new(FakeProber::new());
    let events = Arc::new(FakeEvents::new());
    let status = Arc::new(PodStatusCache::new());
    let cancel = CancellationToken::new();
    let manager = Manager::new(
        ManagerConfig {
            status: status.clone(),
            prober: prober.clone(),
            events: events.clone(),
            clock: tokio_clock(Timestamp::from_second(T0).unwrap()),
        },
        cancel.clone(),
    );
    tokio::time::advance(Duration::from_secs(600)).await;
    Setup {
        manager,
        prober,
        events,
        status,
        _cancel: cancel,
    }
}

/// A pod `p` with one container `c` carrying `probes` (a JSON object of probe fields).
fn pod(probes: serde_json::Value, restart_policy: &str) -> Pod {
    let mut c = json!({"name": "c", "image": "i"});
    for (k, v) in probes.as_object().unwrap() {
        c[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [c], "restartPolicy": restart_policy}
    }))
    .unwrap()
}

fn exec_probe(period: i32, failure: i32) -> serde_json::Value {
    json!({"exec": {"command": ["true"]}, "periodSeconds": period, "failureThreshold": failure})
}

/// The status the pod worker would cache: container `c` as instance `id`, running since T0 (seconds after
/// the clock's start `started_secs` ago) with `started`.
fn running_status(id: &str, started: bool) -> PodStatus {
    serde_json::from_value(json!({
        "phase": "Running",
        "podIP": "10.0.0.9",
        "containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": format!("docker://{id}"), "started": started,
            "state": {"running": {"startedAt": Timestamp::from_second(T0).unwrap().to_string()}}
        }]
    }))
    .unwrap()
}

fn terminated_status(id: &str, phase: &str) -> PodStatus {
    serde_json::from_value(json!({
        "phase": phase,
        "containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "containerID": format!("docker://{id}"),
            "state": {"terminated": {"exitCode": 1}}
        }]
    }))
    .unwrap()
}

/// Lets spawned workers run up to the current (paused) time.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

async fn sleep(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
    settle().await;
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Update>) -> Vec<ProbeResult> {
    std::iter::from_fn(|| rx.try_recv().ok())
        .map(|u| u.result)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn readiness_starts_failed_and_passes_after_the_first_probe_with_no_update_while_unchanged() {
    let s = setup().await;
    let mut updates = s.manager.results(ProbeType::Readiness).updates().unwrap();
    s.status.set("u1", running_status("c1", true));
    let p = pod(json!({"readinessProbe": exec_probe(1, 3)}), "Always");
    s.manager.add_pod(&p, None);
    settle().await;
    // The first round ran at once: initial Failure for the new instance, then the probe's Success.
    assert_eq!(drain(&mut updates), [ProbeResult::Failure, ProbeResult::Success]);
    let results = s.manager.results(ProbeType::Readiness);
    assert_eq!(results.get("c1"), Some(ProbeResult::Success));
    sleep(10).await;
    assert!(s.prober.calls("c", ProbeType::Readiness) >= 10);
    assert!(drain(&mut updates).is_empty(), "passing probes publish nothing");
    assert!(s.events.events().is_empty());
}

#[tokio::test(start_paused = true)]
async fn add_pod_is_idempotent() {
    let s = setup().await;
    let p = pod(
        json!({"readinessProbe": exec_probe(1, 3), "livenessProbe": exec_probe(1, 3)}),
        "Always",
    );
    s.manager.add_pod(&p, None);
    s.manager.add_pod(&p, None);
    assert_eq!(s.manager.worker_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn liveness_fails_after_the_threshold_then_holds_until_a_new_container() {
    let s = setup().await;
    let mut updates = s.manager.results(ProbeType::Liveness).updates().unwrap();
    s.status.set("u1", running_status("c1", true));
    s.prober.set(
        "c",
        ProbeType::Liveness,
        Ok(Report::new(Outcome::Failure, "exit 1")),
    );
    s.manager
        .add_pod(&pod(json!({"livenessProbe": exec_probe(2, 3)}), "Always"), None);
    settle().await;
    assert_eq!(
        drain(&mut updates),
        [ProbeResult::Success],
        "alive until proven dead"
    );
    sleep(2).await;
    assert!(
        drain(&mut updates).is_empty(),
        "two failures are below the threshold of 3"
    );
    sleep(2).await;
    assert_eq!(drain(&mut updates), [ProbeResult::Failure]);
    assert_eq!(s.prober.calls("c", ProbeType::Liveness), 3);
    let unhealthy: Vec<_> = s
        .events
        .events()
        .into_iter()
        .map(|e| (e.reason, e.message))
        .collect();
    assert_eq!(unhealthy.len(), 3, "an event per failed attempt");
    assert_eq!(
        unhealthy[0],
        ("Unhealthy".to_owned(), "Liveness probe failed: exit 1".to_owned())
    );
    // On hold: no more probes of this instance.
    sleep(10).await;
    assert_eq!(s.prober.calls("c", ProbeType::Liveness), 3);
    // The restarted container is probed again, starting from Success.
    s.status.set("u1", running_status("c2", true));
    s.prober.set_outcome("c", ProbeType::Liveness, Outcome::Success);
    sleep(2).await;
    assert_eq!(drain(&mut updates), [ProbeResult::Success]);
    assert_eq!(
        s.manager.results(ProbeType::Liveness).get("c1"),
        None,
        "the old result is gone"
    );
    assert_eq!(s.prober.calls("c", ProbeType::Liveness), 4);
}

#[tokio::test(start_paused = true)]
async fn liveness_and_readiness_wait_for_the_startup_probe() {
    let s = setup().await;
    s.status.set("u1", running_status("c1", false));
    let p = pod(
        json!({"startupProbe": exec_probe(1, 30), "readinessProbe": exec_probe(1, 3),
               "livenessProbe": exec_probe(1, 3)}),
        "Always",
    );
    s.manager.add_pod(&p, None);
    sleep(5).await;
    assert!(s.prober.calls("c", ProbeType::Startup) >= 1);
    assert_eq!(s.prober.calls("c", ProbeType::Liveness), 0);
    assert_eq!(s.prober.calls("c", ProbeType::Readiness), 0);
    assert_eq!(
        s.manager.results(ProbeType::Startup).get("c1"),
        Some(ProbeResult::Success)
    );
    // The pod worker saw the startup success and reported started: the others begin, startup stops.
    let startup_calls = s.prober.calls("c", ProbeType::Startup);
    s.status.set("u1", running_status("c1", true));
    sleep(3).await;
    assert!(s.prober.calls("c", ProbeType::Liveness) >= 2);
    assert!(s.prober.calls("c", ProbeType::Readiness) >= 2);
    assert_eq!(s.prober.calls("c", ProbeType::Startup), startup_calls);
}

#[tokio::test(start_paused = true)]
async fn initial_delay_counts_from_the_container_start() {
    let s = setup().await;
    // The clock is at T0 + 600 s; a container started just now.
    let mut status = running_status("c1", true);
    status.container_statuses.as_mut().unwrap()[0]
        .state
        .as_mut()
        .unwrap()
        .running
        .as_mut()
        .unwrap()
        .started_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(T0 + 600).unwrap(),
    ));
    s.status.set("u1", status);
    let mut probe = exec_probe(1, 3);
    probe["initialDelaySeconds"] = json!(5);
    s.manager
        .add_pod(&pod(json!({"livenessProbe": probe}), "Always"), None);
    sleep(4).await;
    assert_eq!(s.prober.calls("c", ProbeType::Liveness), 0);
    sleep(2).await;
    assert!(s.prober.calls("c", ProbeType::Liveness) >= 1);
}

#[tokio::test(start_paused = true)]
async fn probe_errors_are_thrown_away_with_an_errored_event() {
    let s = setup().await;
    let mut updates = s.manager.results(ProbeType::Readiness).updates().unwrap();
    s.status.set("u1", running_status("c1", true));
    s.prober.set(
        "c",
        ProbeType::Readiness,
        Err(ProbeError::Port(
            "strconv.Atoi: parsing \"web\": invalid syntax".into(),
        )),
    );
    s.manager
        .add_pod(&pod(json!({"readinessProbe": exec_probe(1, 1)}), "Always"), None);
    sleep(3).await;
    assert_eq!(
        drain(&mut updates),
        [ProbeResult::Failure],
        "only the initial value"
    );
    assert!(
        s.prober.calls("c", ProbeType::Readiness) >= 9,
        "three attempts a round"
    );
    let e = &s.events.events()[0];
    assert_eq!(e.reason, "Unhealthy");
    assert_eq!(
        e.message,
        "Readiness probe errored and resulted in unknown state: strconv.Atoi: parsing \"web\": invalid syntax"
    );
    assert_eq!(e.field_path, "spec.containers{c}");
}

#[tokio::test(start_paused = true)]
async fn a_warning_counts_as_success_with_a_probe_warning_event() {
    let s = setup().await;
    s.status.set("u1", running_status("c1", true));
    s.prober.set(
        "c",
        ProbeType::Readiness,
        Ok(Report::new(
            Outcome::Warning,
            "Probe terminated redirects, Response body: ",
        )),
    );
    s.manager
        .add_pod(&pod(json!({"readinessProbe": exec_probe(1, 1)}), "Always"), None);
    settle().await;
    assert_eq!(
        s.manager.results(ProbeType::Readiness).get("c1"),
        Some(ProbeResult::Success)
    );
    let e = &s.events.events()[0];
    assert_eq!(
        (e.reason.as_str(), e.ty),
        ("ProbeWarning", crate::events::EventType::Warning)
    );
    assert_eq!(
        e.message,
        "Readiness probe warning: Probe terminated redirects, Response body: "
    );
}

#[tokio::test(start_paused = true)]
async fn workers_end_when_the_container_never_runs_again_or_the_pod_is_terminal() {
    let s = setup().await;
    s.status.set("u1", terminated_status("c1", "Running"));
    s.manager
        .add_pod(&pod(json!({"readinessProbe": exec_probe(1, 1)}), "Never"), None);
    sleep(1).await;
    assert_eq!(s.manager.worker_count(), 0, "terminated under Never");
    assert_eq!(
        s.manager.results(ProbeType::Readiness).len(),
        0,
        "its result went with it"
    );
    // The syncs after that do not bring it back (its initial result would wake the pod worker, which
    // would sync again: a busy loop).
    let mut updates = s.manager.results(ProbeType::Readiness).updates().unwrap();
    drain(&mut updates);
    for _ in 0..3 {
        s.manager
            .add_pod(&pod(json!({"readinessProbe": exec_probe(1, 1)}), "Never"), None);
        sleep(1).await;
    }
    assert_eq!(s.manager.worker_count(), 0);
    assert!(drain(&mut updates).is_empty(), "no update: nothing to sync for");
    // Under Always the worker waits for the restart (after a removal: one UID keeps its policy).
    s.manager.remove_pod("u1");
    s.manager
        .add_pod(&pod(json!({"readinessProbe": exec_probe(1, 1)}), "Always"), None);
    sleep(2).await;
    assert_eq!(s.manager.worker_count(), 1);
    s.status.set("u1", terminated_status("c1", "Failed"));
    sleep(2).await;
    assert_eq!(s.manager.worker_count(), 0, "a terminal pod ends its workers");
}

#[tokio::test(start_paused = true)]
async fn termination_stops_liveness_and_startup_but_not_readiness_and_remove_stops_all() {
    let s = setup().await;
    s.status.set("u1", running_status("c1", true));
    let p = pod(
        json!({"startupProbe": exec_probe(1, 3), "readinessProbe": exec_probe(1, 3),
               "livenessProbe": exec_probe(1, 3)}),
        "Always",
    );
    s.manager.add_pod(&p, None);
    s.manager.stop_liveness_and_startup(&p);
    settle().await;
    let key = |probe_type| ProbeKey {
        pod_uid: "u1".into(),
        container: "c".into(),
        probe_type,
    };
    assert!(s.manager.has_worker(&key(ProbeType::Readiness)));
    assert!(!s.manager.has_worker(&key(ProbeType::Liveness)));
    assert_eq!(s.manager.worker_count(), 1);
    s.manager.remove_pod("u1");
    settle().await;
    assert_eq!(s.manager.worker_count(), 0);
    // Housekeeping: workers of pods no longer wanted stop.
    s.manager.add_pod(&p, None);
    s.manager.cleanup_pods(&HashSet::from(["u1".to_owned()]));
    settle().await;
    assert_eq!(s.manager.worker_count(), 3);
    s.manager.cleanup_pods(&HashSet::new());
    settle().await;
    assert_eq!(s.manager.worker_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_manual_trigger_runs_the_readiness_probe_before_its_period() {
    let s = setup().await;
    s.manager
        .add_pod(&pod(json!({"readinessProbe": exec_probe(60, 1)}), "Always"), None);
    settle().await;
    assert_eq!(s.prober.calls("c", ProbeType::Readiness), 0, "no container yet");
    s.status.set("u1", running_status("c1", true));
    s.manager.trigger_readiness("u1", "c");
    settle().await;
    assert_eq!(s.prober.calls("c", ProbeType::Readiness), 1);
    assert_eq!(
        s.manager.results(ProbeType::Readiness).get("c1"),
        Some(ProbeResult::Success)
    );
}

#[tokio::test(start_paused = true)]
async fn right_after_start_adopted_containers_wait_a_random_part_of_their_period_and_new_ones_do_not() {
    let prober = Arc::new(FakeProber::new());
    let status = Arc::new(PodStatusCache::new());
    status.set("u1", running_status("c1", true));
    let manager = Manager::new(
        ManagerConfig {
            status: status.clone(),
            prober: prober.clone(),
            events: Arc::new(FakeEvents::new()),
            clock: tokio_clock(Timestamp::from_second(T0).unwrap()),
        },
        CancellationToken::new(),
    );
    // Adopted (the reported status shows it running): jittered.
    let reported = running_status("c1", true);
    let p = pod(
        json!({"livenessProbe": exec_probe(10, 3), "readinessProbe": exec_probe(10, 3)}),
        "Always",
    );
    manager.add_pod(&p, Some(&reported));
    settle().await;
    assert_eq!(prober.calls("c", ProbeType::Liveness), 0, "jittered");
    // A manual trigger ends the wait.
    manager.trigger_readiness("u1", "c");
    settle().await;
    assert_eq!(prober.calls("c", ProbeType::Readiness), 1);
    sleep(10).await;
    assert_eq!(prober.calls("c", ProbeType::Liveness), 1, "within one period");
    // A pod made just after start is probed at once.
    let mut fresh = pod(json!({"livenessProbe": exec_probe(10, 3)}), "Always");
    fresh.metadata.uid = Some("u2".into());
    fresh.spec.as_mut().unwrap().containers[0].name = "d".into();
    status.set(
        "u2",
        serde_json::from_value(json!({"phase": "Running", "containerStatuses": [{
            "name": "d", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "containerID": "docker://d1", "started": true,
            "state": {"running": {"startedAt": Timestamp::from_second(T0).unwrap().to_string()}}
        }]}))
        .unwrap(),
    );
    manager.add_pod(&fresh, None);
    settle().await;
    assert_eq!(prober.calls("d", ProbeType::Liveness), 1, "not jittered");
}

#[tokio::test(start_paused = true)]
async fn a_reported_ready_and_started_container_keeps_its_results_across_a_kubelet_restart() {
    let s = setup().await;
    let mut updates = s.manager.results(ProbeType::Readiness).updates().unwrap();
    let mut reported = running_status("c1", true);
    reported.container_statuses.as_mut().unwrap()[0].ready = true;
    s.status.set("u1", reported.clone());
    s.prober.set_delay(Some(Duration::from_secs(1)));
    let p = pod(
        json!({"startupProbe": exec_probe(1, 3), "readinessProbe": exec_probe(1, 3)}),
        "Always",
    );
    s.manager.add_pod(&p, Some(&reported));
    // Before any probe ran, the results are those reported.
    assert_eq!(
        s.manager.results(ProbeType::Readiness).get("c1"),
        Some(ProbeResult::Success)
    );
    assert_eq!(
        s.manager.results(ProbeType::Startup).get("c1"),
        Some(ProbeResult::Success)
    );
    sleep(5).await;
    assert_eq!(
        drain(&mut updates),
        [ProbeResult::Success],
        "never Failure in between"
    );
    assert_eq!(s.prober.calls("c", ProbeType::Startup), 0, "started already");
}
