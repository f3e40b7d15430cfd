//! [`SimProber`]: the prober of simulated nodes. Their pods' IPs lead nowhere, so no probe is run: every
//! probe (exec, httpGet, tcpSocket, grpc alike) answers what the pod's `sim.kubeling.dev/readiness`,
//! `.../liveness`, `.../startup` and `.../ready-after` annotations say (see [`crate::runtime::sim`]); with
//! none, it passes. Thresholds, periods and events stay the real workers'.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;

use super::{Outcome, ProbeError, ProbeType, Prober, Report, Target};
use crate::runtime::SimRuntime;
use crate::runtime::sim::{self, ProbeAnswer};

/// Answers probes from the pod's annotations.
pub struct SimProber {
    runtime: SimRuntime,
}

impl SimProber {
    /// A prober for the pods of `runtime` (which knows when containers started, for `ready-after`).
    pub fn new(runtime: SimRuntime) -> SimProber {
        SimProber { runtime }
    }
}

/// The annotation that answers probes of this type.
pub fn annotation_of(probe_type: ProbeType) -> &'static str {
    match probe_type {
        ProbeType::Readiness => sim::READINESS,
        ProbeType::Liveness => sim::LIVENESS,
        ProbeType::Startup => sim::STARTUP,
    }
}

/// The report for a probe of `probe_type` on `container`, the container having run for `running_for`.
pub fn simulated_report(
    annotations: &BTreeMap<String, String>,
    probe_type: ProbeType,
    container: &str,
    running_for: Option<Duration>,
) -> Report {
    let key = annotation_of(probe_type);
    match sim::probe_answer(annotations, key, container, running_for) {
        Ok(ProbeAnswer::Pass) => Report::new(Outcome::Success, ""),
        Ok(ProbeAnswer::Fail) => Report::new(Outcome::Failure, format!("simulated failure ({key})")),
        Err(message) => Report::new(Outcome::Failure, message),
    }
}

#[async_trait]
impl Prober for SimProber {
    async fn probe(&self, t: &Target<'_>) -> Result<Report, ProbeError> {
        let empty = BTreeMap::new();
        let annotations = t.pod.metadata.annotations.as_ref().unwrap_or(&empty);
        let running_for = self
            .runtime
            .started_at(t.container_id)
            .map(|s| Timestamp::now().duration_since(s).unsigned_abs());
        Ok(simulated_report(
            annotations,
            t.probe_type,
            &t.container.name,
            running_for,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_follow_the_annotations() {
        let ann: BTreeMap<String, String> = [
            (sim::LIVENESS.to_owned(), "app=fail".to_owned()),
            (sim::READY_AFTER.to_owned(), "10s".to_owned()),
            (sim::STARTUP.to_owned(), "x".to_owned()),
        ]
        .into();
        let secs = |s| Some(Duration::from_secs(s));
        let cases = [
            (
                ProbeType::Liveness,
                "app",
                secs(1),
                Outcome::Failure,
                "simulated failure (sim.kubeling.dev/liveness)",
            ),
            (ProbeType::Liveness, "side", secs(1), Outcome::Success, ""),
            (
                ProbeType::Readiness,
                "app",
                secs(1),
                Outcome::Failure,
                "simulated failure (sim.kubeling.dev/readiness)",
            ),
            (ProbeType::Readiness, "app", secs(10), Outcome::Success, ""),
            (
                ProbeType::Startup,
                "app",
                secs(1),
                Outcome::Failure,
                "annotation sim.kubeling.dev/startup=\"x\": expected pass or fail",
            ),
        ];
        for (ty, c, running, outcome, output) in cases {
            assert_eq!(
                simulated_report(&ann, ty, c, running),
                Report::new(outcome, output),
                "{ty} {c}"
            );
        }
        assert_eq!(
            simulated_report(&BTreeMap::new(), ProbeType::Readiness, "app", None),
            Report::new(Outcome::Success, "")
        );
    }
}
