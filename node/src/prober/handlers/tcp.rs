//! tcpSocket probes (upstream `pkg/probe/tcp`): a connection opened within `timeoutSeconds` passes and is
//! closed at once; a refused or timed-out dial fails with Go's dial error text.

use std::time::Duration;

use tokio::net::TcpStream;

use super::{io_text, join_host_port};
use crate::prober::{Outcome, Report};

/// One tcpSocket probe attempt.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> Report {
    let addr = join_host_port(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
        Ok(Ok(stream)) => {
            drop(stream);
            Report::new(Outcome::Success, "")
        }
        Ok(Err(e)) => Report::new(
            Outcome::Failure,
            format!("dial tcp {addr}: connect: {}", io_text(&e)),
        ),
        Err(_) => Report::new(Outcome::Failure, format!("dial tcp {addr}: i/o timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listening_port_passes_and_a_closed_one_fails_with_the_dial_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ok = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(ok.outcome, Outcome::Success);
        drop(listener);
        let bad = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(bad.outcome, Outcome::Failure);
        assert_eq!(
            bad.output,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
    }
}
