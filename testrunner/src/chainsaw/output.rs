//! chainsaw's console output (reference 2.9): one line per operation event,
//! `| 09:55:50 | <test> | <step> | ASSERT | RUN | v1/Pod @ <ns>/*`, command output blocks, and the final
//! `Tests Summary...` with `Done.` or `Done with failures.`.

use std::io::Write as _;
use std::sync::Mutex;

/// Serialises output lines of tests running in parallel.
#[derive(Default)]
pub struct Log {
    pub quiet: bool,
    lock: Mutex<()>,
}

impl Log {
    pub fn new(quiet: bool) -> Log {
        Log {
            quiet,
            lock: Mutex::new(()),
        }
    }

    fn write(&self, text: &str) {
        let _g = self.lock.lock().expect("log lock");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// An operation line.
    pub fn op(&self, test: &str, step: &str, op: &str, status: &str, detail: &str) {
        if self.quiet && status != "ERROR" {
            return;
        }
        self.write(&line(&now(), test, step, op, status, detail));
    }

    /// A multi-line block (command output) under a `LOG` line.
    pub fn block(&self, test: &str, step: &str, op: &str, title: &str, text: &str) {
        if self.quiet {
            return;
        }
        let mut s = line(&now(), test, step, op, "LOG", title);
        s.push_str("\n    === ");
        s.push_str(title);
        for l in text.trim_end().lines() {
            s.push_str("\n    ");
            s.push_str(l);
        }
        self.write(&s);
    }

    /// A free line.
    pub fn text(&self, text: &str) {
        self.write(text);
    }
}

fn now() -> String {
    jiff::Zoned::now().strftime("%H:%M:%S").to_string()
}

/// `    | 09:55:50 | test | step-1   | APPLY     | RUN   | detail`.
pub fn line(time: &str, test: &str, step: &str, op: &str, status: &str, detail: &str) -> String {
    let op = op.to_uppercase();
    format!("    | {time} | {test} | {step:<8} | {op:<9} | {status:<5} | {detail}")
        .trim_end()
        .to_string()
}

/// chainsaw's closing lines.
pub fn summary(passed: usize, failed: usize, skipped: usize, errored: bool) -> String {
    let done = if errored {
        "Done with error."
    } else if failed > 0 {
        "Done with failures."
    } else {
        "Done."
    };
    format!(
        "Tests Summary...\n- Passed  tests {passed}\n- Failed  tests {failed}\n- Skipped tests {skipped}\n{done}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_summary_look_like_chainsaws() {
        assert_eq!(
            line("09:55:50", "basic", "step-1", "assert", "RUN", "v1/Pod @ ns/*"),
            "    | 09:55:50 | basic | step-1   | ASSERT    | RUN   | v1/Pod @ ns/*"
        );
        assert_eq!(
            summary(2, 0, 1, false),
            "Tests Summary...\n- Passed  tests 2\n- Failed  tests 0\n- Skipped tests 1\nDone."
        );
        assert!(summary(1, 1, 0, false).ends_with("Done with failures."));
        assert!(summary(0, 0, 0, true).ends_with("Done with error."));
    }
}
