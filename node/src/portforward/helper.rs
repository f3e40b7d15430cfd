//! The general way into a pod's network namespace: a tiny static helper (`pause/forward.c`, built by
//! build.rs like pause) copied into the pod's sandbox and exec'd there, connecting to `localhost:PORT` and
//! relaying its stdin and stdout. It works wherever Docker does (Docker Desktop, rootless Docker, where the
//! node agent cannot reach pod IPs) and reaches apps that listen on loopback only, as upstream's
//! runtimes do; it costs a `docker exec` per connection, so the node agent dials the pod IP first.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::io::AsyncWrite;

use crate::runtime::{ContainerRuntime, ExecConfig, ExecControl, OutputFrame, StdStream};

/// The static helper compiled by build.rs from `pause/forward.c`.
pub const FORWARD_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/forward"));

/// Where the helper goes in the sandbox's filesystem.
const HELPER_PATH: &str = "/.kubeling-forward";

/// The helper's line on stderr after a successful connect.
const CONNECTED: &str = "connected";

/// The most stderr read while waiting for the helper's status line.
const MAX_STATUS: usize = 4096;

/// Sandboxes that already hold the helper (a sandbox ID is never reused).
fn copied() -> &'static Mutex<HashSet<String>> {
    static COPIED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    COPIED.get_or_init(Mutex::default)
}

/// A connection made by the helper: its stdout is the pod's bytes, its stdin goes to the pod.
pub struct HelperConn {
    /// The helper's output frames (stdout carries the connection's bytes).
    pub output: BoxStream<'static, crate::runtime::Result<OutputFrame>>,
    /// The helper's stdin; shutting it down half-closes the connection.
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Bytes from the pod that arrived before the status line: Docker copies stdout and stderr in
    /// separate goroutines, so a server that speaks first can beat the helper's "connected".
    pub early: Vec<Bytes>,
    /// Keeps the exec alive.
    pub _control: Box<dyn ExecControl>,
}

/// What the helper's stderr says before any data: `Ok` once it printed the connected line, the error
/// text if it printed another line or ended, `None` while the line is incomplete.
pub fn status(stderr: &str, ended: bool) -> Option<Result<(), String>> {
    match stderr.split_once('\n') {
        Some((line, _)) if line.trim() == CONNECTED => Some(Ok(())),
        Some((line, _)) => Some(Err(line.trim().to_owned())),
        None if ended || stderr.len() >= MAX_STATUS => Some(Err(if stderr.trim().is_empty() {
            "the port-forward helper ended without connecting".to_owned()
        } else {
            stderr.trim().to_owned()
        })),
        None => None,
    }
}

/// Copies the helper into `sandbox` (once), runs it for `port` and waits for its status line.
pub async fn connect(runtime: &dyn ContainerRuntime, sandbox: &str, port: u16) -> Result<HelperConn, String> {
    let known = copied()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(sandbox);
    if !known {
        runtime
            .copy_file(sandbox, HELPER_PATH, 0o755, FORWARD_BINARY)
            .await
            .map_err(|e| format!("copying the port-forward helper into sandbox {sandbox}: {e}"))?;
        copied()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sandbox.to_owned());
    }
    let config = ExecConfig {
        cmd: vec![HELPER_PATH.to_owned(), port.to_string()],
        tty: false,
        stdin: true,
    };
    let session = runtime.exec(sandbox, &config).await.map_err(|e| e.to_string())?;
    let mut output = session.output;
    let stdin = session
        .stdin
        .ok_or_else(|| "the helper's exec has no stdin".to_owned())?;
    let mut stderr = String::new();
    let mut early = Vec::new();
    loop {
        let frame = output.next().await;
        let ended = !matches!(frame, Some(Ok(_)));
        if let Some(Ok(frame)) = frame {
            match frame.stream {
                StdStream::Stderr => stderr.push_str(&String::from_utf8_lossy(&frame.data)),
                StdStream::Stdout => early.push(frame.data),
            }
        }
        match status(&stderr, ended) {
            Some(Ok(())) => break,
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    Ok(HelperConn {
        output,
        stdin,
        early,
        _control: session.control,
    })
}

/// The stdout bytes of a frame, `None` for stderr (which only carries the status line).
pub fn stdout_bytes(frame: OutputFrame) -> Option<Bytes> {
    (frame.stream == StdStream::Stdout).then_some(frame.data)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn the_status_line_decides_the_connection() {
        assert_eq!(status("", false), None);
        assert_eq!(status("conn", false), None);
        assert_eq!(status("connected\n", false), Some(Ok(())));
        assert_eq!(
            status("failed to connect: refused\n", false),
            Some(Err("failed to connect: refused".to_owned()))
        );
        assert_eq!(status("partial", true), Some(Err("partial".to_owned())));
        assert!(matches!(status("", true), Some(Err(e)) if e.contains("without connecting")));
    }

    /// The helper program itself, run on this host against a local listener: status line, bytes both
    /// ways, half-close, and the refusal text.
    #[test]
    fn the_helper_relays_stdio_to_a_local_port() {
        let dir = std::env::temp_dir().join(format!("kubeling-forward-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let helper = dir.join("forward");
        std::fs::write(&helper, FORWARD_BINARY).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap(); // until the helper's half-close
            s.write_all(b"echo:").unwrap();
            s.write_all(&got).unwrap();
        });
        let mut child = Command::new(&helper)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"hello").unwrap(); // dropped: EOF
        let out = child.wait_with_output().unwrap();
        server.join().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stderr), "connected\n");
        assert_eq!(out.stdout, b"echo:hello");

        // Nothing listens on the port any more.
        let out = Command::new(&helper)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!(
                "failed to connect to localhost:{port} inside the pod's network namespace"
            )) && stderr.contains("connection refused"),
            "{stderr}"
        );
    }
}
