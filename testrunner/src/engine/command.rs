//! Commands and scripts: `$VAR` expansion and processes with an environment, a working directory, a
//! timeout and captured output.
//!
//! Expansion follows Go's `os.Expand` (`$NAME`, `${NAME}`, `$$` → `$`); kuttl turns an unknown name into
//! an empty string ([`Unknown::Empty`]), chainsaw leaves it as written ([`Unknown::Keep`]). A process runs
//! in its own process group, so a timeout kills the script's children too.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// What an unknown `$NAME` becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// An empty string (kuttl, Go `os.Expand` with a map lookup).
    Empty,
    /// The text as written (chainsaw's `pkg/utils/env`).
    Keep,
}

/// Expands `$NAME`, `${NAME}` and `$$` in `s` with `lookup`.
pub fn expand(s: &str, lookup: impl Fn(&str) -> Option<String>, unknown: Unknown) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if b[i] != b'$' || i + 1 >= b.len() {
            // Copy one UTF-8 character.
            let ch = s[i..].chars().next().expect("a character");
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let next = b[i + 1];
        if next == b'$' {
            out.push('$');
            i += 2;
        } else if next == b'{' {
            match s[i + 2..].find('}') {
                Some(end) => {
                    let name = &s[i + 2..i + 2 + end];
                    let written = &s[i..i + 3 + end];
                    match (lookup(name), unknown) {
                        (Some(v), _) => out.push_str(&v),
                        (None, Unknown::Empty) => {}
                        (None, Unknown::Keep) => out.push_str(written),
                    }
                    i += 3 + end;
                }
                None => {
                    out.push('$');
                    i += 1;
                }
            }
        } else if is_name(next) {
            let end = b[i + 1..]
                .iter()
                .position(|c| !is_name(*c))
                .map_or(b.len(), |p| i + 1 + p);
            let name = &s[i + 1..end];
            match (lookup(name), unknown) {
                (Some(v), _) => out.push_str(&v),
                (None, Unknown::Empty) => {}
                (None, Unknown::Keep) => out.push_str(&s[i..end]),
            }
            i = end;
        } else {
            out.push('$');
            i += 1;
        }
    }
    out
}

/// What to run.
#[derive(Clone, Debug)]
pub enum Program {
    /// A program and its arguments, exec'd directly (no shell).
    Argv(Vec<String>),
    /// A script run as `<shell> <args...> <content>` (default `sh -c <content>`).
    Script {
        /// The shell (`sh`).
        shell: String,
        /// Arguments before the content (`-c`).
        args: Vec<String>,
        /// The script.
        content: String,
    },
}

impl Program {
    /// `sh -c <content>`.
    pub fn sh(content: &str) -> Program {
        Program::Script {
            shell: "sh".into(),
            args: vec!["-c".into()],
            content: content.into(),
        }
    }

    /// The command line for messages.
    pub fn display(&self) -> String {
        match self {
            Program::Argv(a) => a.join(" "),
            Program::Script { content, .. } => content.clone(),
        }
    }
}

/// A process to run.
#[derive(Clone, Debug)]
pub struct Process {
    /// What to run.
    pub program: Program,
    /// Variables added to (or replacing those of) the runner's environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The bound (`None`: none).
    pub timeout: Option<Duration>,
}

/// What a finished process left.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Output {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// A process that could not run or did not finish in time.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// It could not be started (a missing binary, a bad working directory).
    #[error("command \"{cmd}\" could not start: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran past its timeout and was killed (kuttl's wording).
    #[error("command \"{cmd}\" exceeded {secs} sec timeout, context deadline exceeded")]
    TimedOut {
        /// The command line.
        cmd: String,
        /// The bound in seconds.
        secs: u64,
    },
    /// The command line could not be split into words.
    #[error("command \"{0}\" could not be parsed (unbalanced quotes)")]
    Parse(String),
}

fn command(p: &Process) -> Result<tokio::process::Command, CommandError> {
    let (prog, args): (&str, Vec<&str>) = match &p.program {
        Program::Argv(a) => match a.split_first() {
            Some((first, rest)) => (first, rest.iter().map(String::as_str).collect()),
            None => return Err(CommandError::Parse(String::new())),
        },
        Program::Script { shell, args, content } => (
            shell,
            args.iter()
                .map(String::as_str)
                .chain([content.as_str()])
                .collect(),
        ),
    };
    let mut c = tokio::process::Command::new(prog);
    c.args(args)
        .current_dir(&p.cwd)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    for (k, v) in &p.env {
        c.env(k, v);
    }
    Ok(c)
}

/// Kills a process group (the process and its children).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs a process to its end (or its timeout) and returns its exit code and output.
pub async fn run(p: &Process) -> Result<Output, CommandError> {
    let cmd = p.program.display();
    let mut c = command(p)?;
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|source| CommandError::Spawn {
        cmd: cmd.clone(),
        source,
    })?;
    let pid = child.id();
    let mut so = child.stdout.take().expect("piped stdout");
    let mut se = child.stderr.take().expect("piped stderr");
    let work = async {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (_, _, status) = tokio::join!(so.read_to_end(&mut a), se.read_to_end(&mut b), child.wait());
        (a, b, status)
    };
    let (a, b, status) = match p.timeout {
        Some(t) => match tokio::time::timeout(t, work).await {
            Ok(r) => r,
            Err(_) => {
                kill_group(pid);
                return Err(CommandError::TimedOut {
                    cmd,
                    secs: t.as_secs(),
                });
            }
        },
        None => work.await,
    };
    let status = status.map_err(|source| CommandError::Spawn { cmd, source })?;
    Ok(Output {
        code: status.code(),
        stdout: String::from_utf8_lossy(&a).into_owned(),
        stderr: String::from_utf8_lossy(&b).into_owned(),
    })
}

/// A process left running in the background; dropping it kills it and its children.
pub struct Background {
    child: tokio::process::Child,
    /// The command line.
    pub cmd: String,
}

impl Drop for Background {
    fn drop(&mut self) {
        kill_group(self.child.id());
    }
}

/// Starts a process in the background (output discarded); it is killed when the handle is dropped.
pub fn spawn_background(p: &Process) -> Result<Background, CommandError> {
    let cmd = p.program.display();
    let mut c = command(p)?;
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let child = c.spawn().map_err(|source| CommandError::Spawn {
        cmd: cmd.clone(),
        source,
    })?;
    Ok(Background { child, cmd })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "NAMESPACE" => Some("kuttl-a-b".into()),
            "X" => Some("1".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion_table() {
        let cases = [
            (
                "kubectl get pods -n $NAMESPACE",
                "kubectl get pods -n kuttl-a-b",
                "kubectl get pods -n kuttl-a-b",
            ),
            ("${NAMESPACE}x", "kuttl-a-bx", "kuttl-a-bx"),
            ("a $UNKNOWN b", "a  b", "a $UNKNOWN b"),
            ("a ${UNKNOWN} b", "a  b", "a ${UNKNOWN} b"),
            ("cost $$5", "cost $5", "cost $5"),
            ("end $", "end $", "end $"),
            ("$X$X-é", "11-é", "11-é"),
            ("a $ b", "a $ b", "a $ b"),
        ];
        for (input, kuttl, chainsaw) in cases {
            assert_eq!(expand(input, env, Unknown::Empty), kuttl, "{input}");
            assert_eq!(expand(input, env, Unknown::Keep), chainsaw, "{input}");
        }
    }

    #[tokio::test]
    async fn a_process_gets_its_env_and_output() {
        let p = Process {
            program: Program::sh("echo ns=$NAMESPACE; echo err >&2; exit 3"),
            env: vec![("NAMESPACE".into(), "n1".into())],
            cwd: std::env::temp_dir(),
            timeout: Some(Duration::from_secs(10)),
        };
        let out = run(&p).await.unwrap();
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (Some(3), "ns=n1\n", "err\n")
        );
    }

    #[tokio::test]
    async fn a_process_past_its_timeout_is_killed_with_its_children() {
        let p = Process {
            program: Program::sh("sleep 30 & sleep 30"),
            env: vec![],
            cwd: std::env::temp_dir(),
            timeout: Some(Duration::from_millis(300)),
        };
        let started = std::time::Instant::now();
        let e = run(&p).await.unwrap_err();
        assert!(matches!(e, CommandError::TimedOut { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_missing_binary_fails_to_start() {
        let p = Process {
            program: Program::Argv(vec!["/nonexistent/binary".into()]),
            env: vec![],
            cwd: std::env::temp_dir(),
            timeout: None,
        };
        assert!(matches!(run(&p).await, Err(CommandError::Spawn { .. })));
    }
}
