//! exec probes (upstream `pkg/probe/exec`): the command runs in the container through the runtime's
//! `ExecSync`; exit 0 passes, any other exit fails with the combined output (10 KiB at most) as the message,
//! and a command still running at `timeoutSeconds` fails with upstream's timeout text (the process is left
//! running, as Docker does).

use std::time::Duration;

use super::MAX_OUTPUT;
use crate::prober::{Outcome, ProbeError, Report};
use crate::runtime::{ContainerRuntime, ExecOutput, RuntimeError};

/// One exec probe attempt.
pub async fn probe(
    runtime: &dyn ContainerRuntime,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> Result<Report, ProbeError> {
    match runtime.exec_sync(container_id, cmd, Some(timeout)).await {
        Ok(out) => Ok(judge(&out)),
        Err(RuntimeError::ExecTimeout { .. }) => Ok(Report::new(
            Outcome::Failure,
            format!("command {:?} timed out", cmd.join(" ")),
        )),
        Err(e) => Err(ProbeError::Runtime(e.to_string())),
    }
}

/// Exit 0 passes; the output is stdout then stderr, capped.
pub fn judge(out: &ExecOutput) -> Report {
    let outcome = if out.exit_code == 0 {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    Report::new(outcome, combined_output(out))
}

/// stdout then stderr, at most [`MAX_OUTPUT`] bytes, as text.
pub fn combined_output(out: &ExecOutput) -> String {
    let mut data: Vec<u8> = out.stdout.iter().chain(out.stderr.iter()).copied().collect();
    data.truncate(MAX_OUTPUT);
    String::from_utf8_lossy(&data).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_decide_and_output_is_capped() {
        let ok = ExecOutput {
            stdout: b"fine\n".to_vec(),
            stderr: Vec::new(),
            exit_code: 0,
        };
        assert_eq!(judge(&ok), Report::new(Outcome::Success, "fine\n"));
        let bad = ExecOutput {
            stdout: vec![b'x'; MAX_OUTPUT],
            stderr: b"more".to_vec(),
            exit_code: 1,
        };
        let r = judge(&bad);
        assert_eq!(r.outcome, Outcome::Failure);
        assert_eq!(r.output.len(), MAX_OUTPUT);
    }
}
