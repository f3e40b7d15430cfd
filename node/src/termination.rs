//! Termination messages (upstream `makeMounts`' termination-log mount and `getTerminationMessage`): every
//! container gets an empty, world-writable file of its own on the node, bind-mounted at its
//! `terminationMessagePath` (default `/dev/termination-log`), so images without that file (a `FROM
//! scratch` one) can still write it. When the container has exited, the kubelet reads the last 4 KiB of
//! it into `state.terminated.message`; with `terminationMessagePolicy: FallbackToLogsOnError`, an empty file
//! and a non-zero exit, the message is taken from the log (the last 80 lines, at most 2 KiB). Each message
//! is cut further to 12 KiB shared among the pod's containers.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// upstream `MaxContainerTerminationMessageLength`.
pub const MAX_MESSAGE: usize = 4 * 1024;
/// upstream `MaxPodTerminationMessageLogLength`: all of a pod's messages together.
pub const MAX_POD_MESSAGES: usize = 12 * 1024;
/// upstream `MaxContainerTerminationMessageLogLines`.
pub const LOG_LINES: u64 = 80;
/// upstream `MaxContainerTerminationMessageLogLength`.
pub const MAX_LOG_MESSAGE: usize = 2 * 1024;
/// The policy that falls back to the log.
pub const FALLBACK_TO_LOGS: &str = "FallbackToLogsOnError";

/// `<pod dir>/containers/<container>/<restartCount>`: one file per container instance.
pub fn message_file(pod_dir: &Path, container: &str, restart_count: u32) -> PathBuf {
    pod_dir
        .join("containers")
        .join(container)
        .join(restart_count.to_string())
}

/// Creates the empty file (and its directories), writable by any user in the container.
pub fn prepare(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
}

/// The last [`MAX_MESSAGE`] bytes of the file (upstream `tail.ReadAtMost`); nothing when it is missing.
pub fn read_message(path: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(MAX_MESSAGE as u64);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::with_capacity(MAX_MESSAGE);
    let _ = f.take(MAX_MESSAGE as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Whether the log should stand in for the message (upstream: the policy says so, the file was empty, the
/// exit code was not 0, and the container did start).
pub fn falls_back_to_logs(policy: &str, message: &str, exit_code: i32, reason: Option<&str>) -> bool {
    policy == FALLBACK_TO_LOGS && message.is_empty() && exit_code != 0 && reason != Some("ContainerCannotRun")
}

/// From the last [`LOG_LINES`] lines of the log, the first [`MAX_LOG_MESSAGE`] bytes (upstream reads the
/// tail with a byte limit).
pub fn from_logs(tail: &[u8]) -> String {
    let cut = &tail[..tail.len().min(MAX_LOG_MESSAGE)];
    String::from_utf8_lossy(cut).into_owned()
}

/// How much of its message one of `containers` containers may show.
pub fn per_container_limit(containers: usize) -> usize {
    MAX_MESSAGE.min(MAX_POD_MESSAGES / containers.max(1))
}

/// `message` cut to at most `limit` bytes, on a character boundary.
pub fn truncate(message: &str, limit: usize) -> &str {
    if message.len() <= limit {
        return message;
    }
    let mut end = limit;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// The terminated state's message: Docker's error, then `: `, then the termination message.
pub fn join(runtime_error: &str, message: &str) -> String {
    match (runtime_error.is_empty(), message.is_empty()) {
        (_, true) => runtime_error.to_owned(),
        (true, false) => message.to_owned(),
        (false, false) => format!("{runtime_error}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_made_empty_and_world_writable_and_read_from_its_end() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = message_file(dir.path(), "app", 2);
        assert!(path.ends_with("containers/app/2"));
        prepare(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        assert_eq!(read_message(&path), "");
        let long = format!("{}{}", "a".repeat(100), "b".repeat(MAX_MESSAGE));
        std::fs::write(&path, &long).unwrap();
        assert_eq!(read_message(&path), "b".repeat(MAX_MESSAGE));
        assert_eq!(read_message(&dir.path().join("missing")), "");
    }

    #[test]
    fn the_log_stands_in_only_for_an_empty_message_of_a_failed_container() {
        let cases = [
            (FALLBACK_TO_LOGS, "", 1, None, true),
            (FALLBACK_TO_LOGS, "", 1, Some("Error"), true),
            (FALLBACK_TO_LOGS, "written", 1, None, false),
            (FALLBACK_TO_LOGS, "", 0, None, false),
            (FALLBACK_TO_LOGS, "", 127, Some("ContainerCannotRun"), false),
            ("File", "", 1, None, false),
        ];
        for (policy, msg, code, reason, want) in cases {
            assert_eq!(
                falls_back_to_logs(policy, msg, code, reason),
                want,
                "{policy} {msg:?} {code}"
            );
        }
        assert_eq!(from_logs(&vec![b'x'; 5000]).len(), MAX_LOG_MESSAGE);
    }

    #[test]
    fn messages_share_twelve_kib_and_join_the_runtime_error() {
        assert_eq!(per_container_limit(1), 4096);
        assert_eq!(per_container_limit(6), 2048);
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(join("", "bye"), "bye");
        assert_eq!(join("oops", "bye"), "oops: bye");
        assert_eq!(join("oops", ""), "oops");
    }
}
