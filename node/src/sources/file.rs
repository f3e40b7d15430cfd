//! The manifest directory (upstream's `file.go`): every regular file whose name does not start with `.`, not
//! recursively and whatever its extension, holds exactly one Pod. The directory is re-listed every period
//! and, through `notify` on the directory, within a moment of any change in it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{FILE_SOURCE, MAX_MANIFEST_BYTES, SourceUpdate, StaticPod, dedupe, prepare};

/// How long to wait after a change before re-listing, so a burst of events (an editor's save) is one scan.
const SETTLE: Duration = Duration::from_millis(100);

/// Runs the file source on `dir` (a directory, or a single manifest file) until `cancel` fires or the
/// receiver of `tx` is gone. Sends a snapshot at start (empty when `dir` does not exist) and after every
/// change of the set of pods, and an [`SourceUpdate::Invalid`] once for each distinct error of a file. A
/// path that exists but cannot be read keeps the pods as they are (logged once).
pub async fn run(
    dir: PathBuf,
    node_name: String,
    check_every: Duration,
    tx: mpsc::Sender<SourceUpdate>,
    cancel: CancellationToken,
) {
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let (events_tx, mut events) = mpsc::channel::<()>(1);
    let mut watcher: Option<RecommendedWatcher> = None;
    let mut state = State::default();
    let mut unreadable: Option<String> = None;
    loop {
        let listing = {
            let (dir, node) = (dir.clone(), node_name.clone());
            tokio::task::spawn_blocking(move || scan(&dir, &node))
                .await
                .unwrap_or_else(|e| Listing::Unreadable(e.to_string()))
        };
        let files = match listing {
            // Upstream: a path that does not exist holds no pods; it is watched again once it is back.
            Listing::Missing => {
                watcher = None;
                Some(Vec::new())
            }
            // Any other failure keeps the pods as they are: a passing EMFILE must not kill them.
            Listing::Unreadable(error) => {
                if unreadable.as_ref() != Some(&error) {
                    tracing::warn!(path = %dir.display(), %error, "static pod path cannot be read, keeping its pods");
                    unreadable = Some(error);
                }
                None
            }
            Listing::Files { files, watch_dir } => {
                unreadable = None;
                if watcher.is_none() {
                    watcher = watch(&watch_dir, events_tx.clone());
                }
                Some(files)
            }
        };
        for update in files.map(|f| state.apply(f)).unwrap_or_default() {
            if tx.send(update).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(check_every) => {}
            Some(()) = events.recv() => {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(SETTLE) => {}
                }
                while events.try_recv().is_ok() {}
            }
        }
    }
}

/// Watches `dir` (not recursively); every event asks for a re-list. The `notify` callback runs on the
/// watcher's own thread and hands over to tokio with `try_send` on a one-slot channel, which coalesces
/// bursts.
fn watch(dir: &Path, events: mpsc::Sender<()>) -> Option<RecommendedWatcher> {
    let handler = move |_: notify::Result<notify::Event>| {
        let _ = events.try_send(());
    };
    let result = notify::recommended_watcher(handler)
        .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|()| w));
    match result {
        Ok(w) => Some(w),
        Err(e) => {
            let dir = dir.display();
            tracing::warn!(%dir, error = %e, "cannot watch static pod directory, relisting periodically");
            None
        }
    }
}

/// What a scan of the static pod path found.
enum Listing {
    /// The path does not exist.
    Missing,
    /// The path cannot be read.
    Unreadable(String),
    /// Each file (the path itself, when it is a file) and its pod or error, sorted by name; and the
    /// directory to watch.
    Files {
        files: Vec<(String, Result<Pod, String>)>,
        watch_dir: PathBuf,
    },
}

/// Reads the static pod path: a directory's files, or the path itself when it is a file (as upstream).
fn scan(path: &Path, node_name: &str) -> Listing {
    let read = |file: &Path| {
        let origin = file.to_string_lossy().into_owned();
        let pod = read_limited(file)
            .and_then(|bytes| super::parse_single_pod(&bytes))
            .and_then(|pod| prepare(pod, node_name, FILE_SOURCE, &origin));
        (origin, pod)
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Listing::Missing,
        Err(e) => return Listing::Unreadable(e.to_string()),
        // A single manifest: its directory is watched, so a save by rename is seen too.
        Ok(m) if m.is_file() => {
            return Listing::Files {
                files: vec![read(path)],
                watch_dir: path.parent().unwrap_or(path).to_path_buf(),
            };
        }
        Ok(_) => {}
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Listing::Missing,
        Err(e) => return Listing::Unreadable(e.to_string()),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    paths.sort();
    let mut files = Vec::new();
    for file in paths {
        // Follows symlinks, as upstream's os.Stat.
        match std::fs::metadata(&file) {
            Ok(m) if m.is_file() => files.push(read(&file)),
            Ok(_) => tracing::debug!(path = %file.display(), "not a regular file, skipped"),
            // Gone since the listing.
            Err(_) => {}
        }
    }
    Listing::Files {
        files,
        watch_dir: path.to_path_buf(),
    }
}

fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_MANIFEST_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    Ok(bytes)
}

/// What was last sent: the snapshot, and the error reported for each file.
#[derive(Default)]
struct State {
    sent: Option<Vec<Pod>>,
    errors: BTreeMap<String, String>,
}

impl State {
    /// The updates a new listing calls for.
    fn apply(&mut self, listing: Vec<(String, Result<Pod, String>)>) -> Vec<SourceUpdate> {
        let mut updates = Vec::new();
        let mut errors = BTreeMap::new();
        let mut good = Vec::new();
        for (origin, parsed) in listing {
            match parsed {
                Ok(pod) => good.push(StaticPod { pod, origin }),
                Err(e) => {
                    errors.insert(origin, e);
                }
            }
        }
        let (kept, dropped) = dedupe(good, |s| &s.pod);
        for (s, msg) in dropped {
            errors.insert(s.origin, msg);
        }
        for (origin, error) in &errors {
            if self.errors.get(origin) != Some(error) {
                tracing::warn!(path = %origin, %error, "static pod manifest skipped");
                let (origin, error) = (origin.clone(), error.clone());
                updates.push(SourceUpdate::Invalid {
                    source: FILE_SOURCE,
                    origin,
                    error,
                });
            }
        }
        self.errors = errors;
        let pods: Vec<Pod> = kept.into_iter().map(|s| s.pod).collect();
        if self.sent.as_ref() != Some(&pods) {
            self.sent = Some(pods.clone());
            updates.push(SourceUpdate::Snapshot {
                source: FILE_SOURCE,
                pods,
            });
        }
        updates
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::manifest;
    use super::*;

    /// Receives until `want` accepts a snapshot; fails after `within`. Returns the Invalid updates seen.
    async fn until_snapshot(
        rx: &mut mpsc::Receiver<SourceUpdate>,
        within: Duration,
        want: impl Fn(&[Pod]) -> bool,
    ) -> (Vec<Pod>, Vec<(String, String)>) {
        let mut invalid = Vec::new();
        let found = tokio::time::timeout(within, async {
            loop {
                match rx.recv().await.expect("source ended") {
                    SourceUpdate::Snapshot { source, pods } => {
                        assert_eq!(source, "file");
                        if want(&pods) {
                            return pods;
                        }
                    }
                    SourceUpdate::Invalid {
                        source,
                        origin,
                        error,
                    } => {
                        assert_eq!(source, "file");
                        invalid.push((origin, error));
                    }
                }
            }
        })
        .await;
        (found.expect("expected snapshot not sent in time"), invalid)
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
    }

    fn image(pods: &[Pod], name: &str) -> String {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap();
        pod.spec.as_ref().unwrap().containers[0].image.clone().unwrap()
    }

    fn start(dir: &Path, every: Duration) -> (mpsc::Receiver<SourceUpdate>, CancellationToken) {
        let (tx, rx) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        tokio::spawn(run(dir.to_path_buf(), "node1".into(), every, tx, cancel.clone()));
        (rx, cancel)
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn good_files_load_beside_a_broken_one_and_dot_files_and_subdirs_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), manifest("a", "nginx")).unwrap();
        std::fs::write(dir.path().join("b.yaml.bak"), manifest("b", "nginx")).unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "kind: Pod\nmetadata: [").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), manifest("hidden", "nginx")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/c.yaml"), manifest("c", "nginx")).unwrap();
        let (mut rx, cancel) = start(dir.path(), HOUR);

        let (pods, invalid) = until_snapshot(&mut rx, SECOND, |_| true).await;
        assert_eq!(names(&pods), ["a-node1", "b-node1"]);
        assert_eq!(invalid.len(), 1, "{invalid:?}");
        assert_eq!(invalid[0].0, dir.path().join("broken.yaml").to_string_lossy());
        // The broken file is reported once, not on every re-list.
        assert!(rx.try_recv().is_err());
        cancel.cancel();
    }

    #[tokio::test]
    async fn rename_over_in_place_write_fix_and_remove_are_seen_within_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.yaml");
        let b = dir.path().join("b.yaml");
        std::fs::write(&a, manifest("a", "nginx:1")).unwrap();
        std::fs::write(&b, manifest("b", "busybox:1")).unwrap();
        let (mut rx, cancel) = start(dir.path(), HOUR);
        let (first, _) = until_snapshot(&mut rx, SECOND, |_| true).await;
        assert_eq!(names(&first), ["a-node1", "b-node1"]);

        // An editor's save: write a temp file and rename it over.
        let tmp = dir.path().join(".a.yaml.swp");
        std::fs::write(&tmp, manifest("a", "nginx:2")).unwrap();
        std::fs::rename(&tmp, &a).unwrap();
        let (renamed, _) = until_snapshot(&mut rx, SECOND, |p| {
            p.len() == 2 && image(p, "a-node1") == "nginx:2"
        })
        .await;
        assert_ne!(
            renamed[0].metadata.uid, first[0].metadata.uid,
            "an edit gives a new UID"
        );
        assert_eq!(renamed[1], first[1]);

        // In-place write.
        std::fs::write(&b, manifest("b", "busybox:2")).unwrap();
        until_snapshot(&mut rx, SECOND, |p| {
            p.len() == 2 && image(p, "b-node1") == "busybox:2"
        })
        .await;

        // Broken, then fixed.
        std::fs::write(&b, "not: [yaml").unwrap();
        let (pods, invalid) = until_snapshot(&mut rx, SECOND, |p| p.len() == 1).await;
        assert_eq!(names(&pods), ["a-node1"]);
        assert!(
            invalid.iter().any(|(o, _)| *o == b.to_string_lossy()),
            "{invalid:?}"
        );
        std::fs::write(&b, manifest("b", "busybox:3")).unwrap();
        until_snapshot(&mut rx, SECOND, |p| {
            p.len() == 2 && image(p, "b-node1") == "busybox:3"
        })
        .await;

        // Removal.
        std::fs::remove_file(&a).unwrap();
        let (pods, _) = until_snapshot(&mut rx, SECOND, |p| p.len() == 1).await;
        assert_eq!(names(&pods), ["b-node1"]);
        cancel.cancel();
    }

    #[tokio::test]
    async fn second_file_with_the_same_pod_name_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("1.yaml"), manifest("web", "nginx:1")).unwrap();
        std::fs::write(dir.path().join("2.yaml"), manifest("web", "nginx:2")).unwrap();
        let (mut rx, cancel) = start(dir.path(), HOUR);
        let (pods, invalid) = until_snapshot(&mut rx, SECOND, |_| true).await;
        assert_eq!(names(&pods), ["web-node1"]);
        assert_eq!(image(&pods, "web-node1"), "nginx:1");
        assert_eq!(invalid.len(), 1);
        assert_eq!(invalid[0].0, dir.path().join("2.yaml").to_string_lossy());
        assert!(
            invalid[0].1.contains("due to duplicate pod name"),
            "{}",
            invalid[0].1
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn missing_directory_gives_an_empty_snapshot_then_its_pods_once_created() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("manifests");
        let (mut rx, cancel) = start(&dir, Duration::from_millis(100));
        let (pods, _) = until_snapshot(&mut rx, SECOND, |_| true).await;
        assert!(pods.is_empty());

        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), manifest("a", "nginx")).unwrap();
        let (pods, _) = until_snapshot(&mut rx, SECOND, |p| !p.is_empty()).await;
        let origin = dir.join("a.yaml");
        let pod = &pods[0];
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()["kubernetes.io/config.hash"],
            uid
        );
        // The UID is tied to the absolute path.
        let expected = super::super::parse_single_pod(manifest("a", "nginx").as_bytes()).unwrap();
        let expected = prepare(expected, "node1", FILE_SOURCE, &origin.to_string_lossy()).unwrap();
        assert_eq!(*pod, expected);
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_single_file_path_is_one_manifest_and_its_rename_over_save_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("only.yaml");
        std::fs::write(&path, manifest("only", "nginx:1")).unwrap();
        std::fs::write(dir.path().join("other.yaml"), manifest("other", "nginx:1")).unwrap();
        let (mut rx, cancel) = start(&path, HOUR);
        let (first, _) = until_snapshot(&mut rx, SECOND, |_| true).await;
        assert_eq!(names(&first), ["only-node1"], "only the file itself is read");
        let tmp = dir.path().join(".only.yaml.swp");
        std::fs::write(&tmp, manifest("only", "nginx:2")).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        until_snapshot(&mut rx, SECOND, |p| image(p, "only-node1") == "nginx:2").await;
        cancel.cancel();
    }

    #[test]
    fn state_sends_snapshot_only_on_change_and_each_error_once() {
        let mut state = State::default();
        let pod = |img| {
            let p = super::super::parse_single_pod(manifest("a", img).as_bytes()).unwrap();
            prepare(p, "n", FILE_SOURCE, "/m/a").unwrap()
        };
        let listing = |img, err: &str| {
            vec![
                ("/m/a".to_string(), Ok(pod(img))),
                ("/m/b".into(), Err(err.into())),
            ]
        };
        assert_eq!(state.apply(listing("x", "e1")).len(), 2);
        assert!(state.apply(listing("x", "e1")).is_empty());
        assert!(matches!(
            &state.apply(listing("x", "e2"))[..],
            [SourceUpdate::Invalid { .. }]
        ));
        assert!(matches!(
            &state.apply(listing("y", "e2"))[..],
            [SourceUpdate::Snapshot { .. }]
        ));
        assert_eq!(
            state.apply(Vec::new()),
            [SourceUpdate::Snapshot {
                source: "file",
                pods: Vec::new()
            }]
        );
        assert!(state.apply(Vec::new()).is_empty());
    }
}
