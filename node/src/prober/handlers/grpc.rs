//! grpc probes (upstream `pkg/probe/grpc`): `grpc.health.v1.Health/Check` for `service` on the pod IP over
//! cleartext HTTP/2, with `User-Agent: kube-probe/1.33`, all within `timeoutSeconds`. `SERVING` passes; every
//! other status, a missing health service, a timeout or a dial error fails with upstream's message.

use std::time::Duration;

use tonic::Code;
use tonic::transport::Endpoint;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::{KUBE_VERSION, join_host_port};
use crate::lifecycle::backoff::go_duration;
use crate::prober::{Outcome, Report};

/// One grpc probe attempt.
pub async fn probe(host: &str, port: i32, service: &str, timeout: Duration) -> Report {
    let addr = join_host_port(host, u16::try_from(port).unwrap_or(0));
    let failure = |msg: String| Report::new(Outcome::Failure, msg);
    let within = go_duration(timeout);
    let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(format!("kube-probe/{KUBE_VERSION}")))
    {
        Ok(e) => e.connect_timeout(timeout).timeout(timeout),
        Err(e) => return failure(format!("error: failed to connect service at {addr:?}: {e}")),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let channel = match tokio::time::timeout_at(deadline, endpoint.connect()).await {
        Ok(Ok(channel)) => channel,
        Ok(Err(e)) => {
            return failure(format!(
                "error: failed to connect service at {addr:?}: {}",
                source_chain(&e)
            ));
        }
        Err(_) => {
            return failure(format!(
                "timeout: failed to connect service {addr:?} within {within}: context deadline exceeded"
            ));
        }
    };
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    let response = tokio::time::timeout_at(deadline, HealthClient::new(channel).check(request)).await;
    let status = match response {
        Err(_) => return failure(format!("timeout: health rpc did not complete within {within}")),
        Ok(Err(s)) if s.code() == Code::Unimplemented => {
            return failure(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                s.message()
            ));
        }
        Ok(Err(s)) if s.code() == Code::DeadlineExceeded || s.code() == Code::Cancelled => {
            return failure(format!("timeout: health rpc did not complete within {within}"));
        }
        Ok(Err(s)) => {
            return failure(format!(
                "error: health rpc probe failed: rpc error: code = {:?} desc = {}",
                s.code(),
                s.message()
            ));
        }
        Ok(Ok(r)) => r.into_inner().status,
    };
    if status == ServingStatus::Serving as i32 {
        Report::new(Outcome::Success, "service healthy")
    } else {
        let name = ServingStatus::try_from(status)
            .map(|s| s.as_str_name())
            .unwrap_or("UNKNOWN");
        failure(format!("service unhealthy (responded with {name:?})"))
    }
}

/// An error with its causes, `a: b: c`, as Go's wrapped errors print.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nothing_listening_fails_with_the_dial_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let r = probe("127.0.0.1", i32::from(port), "", Duration::from_secs(1)).await;
        assert_eq!(r.outcome, Outcome::Failure);
        assert!(
            r.output.starts_with(&format!(
                "error: failed to connect service at \"127.0.0.1:{port}\""
            )),
            "{}",
            r.output
        );
    }
}
