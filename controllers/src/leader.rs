//! Leader election with a `coordination.k8s.io/v1` Lease (client-go's `leaderelection` with a
//! `LeaseLock`): only the holder of `kube-system/kubeling-controller-manager` runs controllers, so two
//! controller managers against one API server never both act. Writes carry the lease's resourceVersion,
//! so two candidates racing for an expired lease cannot both win (the loser gets a 409).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

/// The lease and the timings (kube-controller-manager: 15 s lease, 10 s renew deadline, 2 s retry).
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// The lease's namespace.
    pub namespace: String,
    /// The lease's name.
    pub name: String,
    /// Who we are (`holderIdentity`).
    pub identity: String,
    /// How long a lease is good for without renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up leading.
    pub renew_deadline: Duration,
    /// Between attempts.
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// The controller manager's lease with upstream's timings.
    pub fn controller_manager(identity: &str) -> LeaderConfig {
        LeaderConfig {
            namespace: "kube-system".into(),
            name: "kubeling-controller-manager".into(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What to do about the lease as observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// No lease yet: create it, held by us.
    Create,
    /// Ours: renew it.
    Renew,
    /// Someone else's and expired (or released): take it over.
    TakeOver,
    /// Someone else's and live: wait.
    Wait,
}

/// The decision for `lease` at `now` (pure).
pub fn decide(lease: Option<&Lease>, identity: &str, now: Timestamp) -> Step {
    let Some(lease) = lease else { return Step::Create };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == identity {
        return Step::Renew;
    }
    if holder.is_empty() {
        return Step::TakeOver;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
    match spec.renew_time.or(spec.acquire_time) {
        Some(t) if t.0 + duration > now => Step::Wait,
        _ => Step::TakeOver,
    }
}

fn held_spec(previous: Option<&LeaseSpec>, cfg: &LeaderConfig, now: Timestamp, renewing: bool) -> LeaseSpec {
    let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration.as_secs() as i32),
        acquire_time: if renewing {
            previous
                .and_then(|s| s.acquire_time.clone())
                .or(Some(MicroTime(now)))
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing || previous.is_none() {
            transitions
        } else {
            transitions + 1
        }),
        ..Default::default()
    }
}

/// One attempt to acquire or renew; true when we hold the lease afterwards.
pub async fn try_acquire_or_renew(client: &kube::Client, cfg: &LeaderConfig) -> bool {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let current = match api.get_opt(&cfg.name).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(error = %e, "reading the leader lease");
            return false;
        }
    };
    let now = Timestamp::now();
    let step = decide(current.as_ref(), &cfg.identity, now);
    let result = match (step, current) {
        (Step::Wait, _) => return false,
        (Step::Create, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(held_spec(None, cfg, now, false)),
            };
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        (step, Some(mut lease)) => {
            lease.spec = Some(held_spec(lease.spec.as_ref(), cfg, now, step == Step::Renew));
            // The resourceVersion read above is kept: a concurrent writer makes this a 409.
            api.replace(&cfg.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
        (_, None) => return false,
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(error = %e, "writing the leader lease");
            false
        }
    }
}

/// Wait until we lead (true) or `cancel` (false).
pub async fn acquire(client: &kube::Client, cfg: &LeaderConfig, cancel: &CancellationToken) -> bool {
    loop {
        if try_acquire_or_renew(client, cfg).await {
            tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity, "became leader");
            return true;
        }
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep(cfg.retry_period) => {}
        }
    }
}

/// Renew every retry period until a renewal has failed for the renew deadline (returns: leadership is
/// lost) or `cancel` (returns too).
pub async fn hold(client: &kube::Client, cfg: &LeaderConfig, cancel: &CancellationToken) {
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(cfg.retry_period) => {}
        }
        // A call that hangs (an API server that stalls) must not keep us leading past the lease.
        let renewed = tokio::time::timeout(cfg.renew_deadline, try_acquire_or_renew(client, cfg))
            .await
            .unwrap_or(false);
        if renewed {
            last_renewed = tokio::time::Instant::now();
        } else if last_renewed.elapsed() >= cfg.renew_deadline {
            tracing::warn!(identity = %cfg.identity, "leader lease lost");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: Timestamp, secs: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(secs),
                renew_time: Some(MicroTime(renewed)),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn the_lease_is_taken_only_when_free_or_expired() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let fresh = now - SignedDuration::from_secs(5);
        let stale = now - SignedDuration::from_secs(16);
        assert_eq!(decide(None, "me", now), Step::Create);
        assert_eq!(decide(Some(&lease("me", stale, 15)), "me", now), Step::Renew);
        assert_eq!(decide(Some(&lease("other", fresh, 15)), "me", now), Step::Wait);
        assert_eq!(
            decide(Some(&lease("other", stale, 15)), "me", now),
            Step::TakeOver
        );
        assert_eq!(decide(Some(&lease("", fresh, 15)), "me", now), Step::TakeOver);
    }

    #[test]
    fn a_takeover_counts_a_transition_and_a_renewal_keeps_the_acquire_time() {
        let cfg = LeaderConfig::controller_manager("me");
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let first = held_spec(None, &cfg, t0, false);
        assert_eq!(first.lease_transitions, Some(0));
        let t1 = t0 + SignedDuration::from_secs(2);
        let renewed = held_spec(Some(&first), &cfg, t1, true);
        assert_eq!(renewed.acquire_time, first.acquire_time);
        assert_eq!(renewed.renew_time, Some(MicroTime(t1)));
        let other = LeaseSpec {
            holder_identity: Some("x".into()),
            lease_transitions: Some(3),
            ..Default::default()
        };
        assert_eq!(
            held_spec(Some(&other), &cfg, t1, false).lease_transitions,
            Some(4)
        );
    }
}
