//! The sled [`Store`]: one tree, objects under `o/<key>`, the revision under `m/revision`; `flush` is
//! sled's fsync. A one-key write (every write but a recovery's) is two inserts, the revision first: sled's
//! atomic batch takes its global lock exclusively, and its flush holds that lock shared for the whole
//! fsync, so a batch would wait for every flush under way (writers spun in `sched_yield` meanwhile), where
//! an insert goes on beside it. sled's log is recovered as a prefix, so an object change found after a
//! crash has its revision with it; a revision without its object is a gap, never a reuse (and the load
//! takes the highest object revision too). sled keeps the first I/O error (a full disk) and fails every
//! later call with it, so `recover` reopens the database: sled's own recovery reads back what reached the
//! disk.

use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard};

use bytes::Bytes;

use super::{Change, Loaded, Store, StoreError};

const REVISION_KEY: &[u8] = b"m/revision";
const OBJECT_PREFIX: &[u8] = b"o/";
/// How long an open waits for sled's file lock to be let go by an instance closing in this process.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// sled on disk in the data directory.
pub struct SledStore {
    /// The open database; none only while [`Store::recover`] reopens it.
    open: RwLock<Option<Open>>,
    path: PathBuf,
}

struct Open {
    db: sled::Db,
    tree: sled::Tree,
}

/// A sled error as a [`StoreError`]: a full file system (ENOSPC, EDQUOT) as [`StoreError::NoSpace`].
fn engine(path: &Path, e: sled::Error) -> StoreError {
    match &e {
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) =>
        {
            StoreError::NoSpace {
                path: path.display().to_string(),
            }
        }
        _ => StoreError::Engine(e.to_string()),
    }
}

impl SledStore {
    /// Open (or create) the database at `path`.
    pub fn open(path: &Path) -> Result<SledStore, StoreError> {
        // sled holds an exclusive file lock until its last reference (some held by its own background
        // threads) is gone: a restart right after a shutdown can find it still held for a moment.
        Self::open_waiting(path, LOCK_WAIT)
    }

    fn open_waiting(path: &Path, wait: std::time::Duration) -> Result<SledStore, StoreError> {
        Ok(SledStore {
            open: RwLock::new(Some(Self::open_db_waiting(path, wait)?)),
            path: path.to_path_buf(),
        })
    }

    fn open_db_waiting(path: &Path, wait: std::time::Duration) -> Result<Open, StoreError> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            match Self::open_db(path) {
                Err(StoreError::Engine(msg))
                    if msg.contains("could not acquire lock") && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                // Another process holds the database: say so plainly (it is never touched).
                Err(StoreError::Engine(msg)) if msg.contains("could not acquire lock") => {
                    return Err(StoreError::Engine(format!(
                        "the database {} is in use by another process (another kubeling with the same data \
                         directory?); stop it or choose another --data-dir",
                        path.display()
                    )));
                }
                other => return other,
            }
        }
    }

    fn open_db(path: &Path) -> Result<Open, StoreError> {
        remove_unfinished_snapshots(path);
        let db = sled::Config::new()
            .path(path)
            // Reads are served from memory; sled's page cache only matters at start-up.
            .cache_capacity(8 * 1024 * 1024)
            // We flush explicitly before acknowledging; no background timer needed.
            .flush_every_ms(None)
            .open()
            .map_err(|e| StoreError::Engine(format!("opening {}: {e}", path.display())))?;
        let tree = db.open_tree("objects").map_err(|e| engine(path, e))?;
        Ok(Open { db, tree })
    }

    fn db(&self) -> Result<DbGuard<'_>, StoreError> {
        let guard = self.open.read().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            return Err(StoreError::Engine(format!(
                "the database {} is closed: reopening it failed",
                self.path.display()
            )));
        }
        Ok(DbGuard(guard))
    }

    fn engine(&self, e: sled::Error) -> StoreError {
        engine(&self.path, e)
    }
}

/// sled writes a snapshot to `snap.<lsn>.generating` and renames it once complete, but its next open takes
/// any `snap.*` file as the newest snapshot, a `.generating` one left by a failed write (a full disk) or a
/// crash too, and then refuses to start ("Read corrupted data"). Such a file is never a finished snapshot,
/// and the log it would index is intact: it is removed before opening, unless another process holds the
/// database (sled's own lock, a `flock` on `db`).
fn remove_unfinished_snapshots(path: &Path) {
    let Ok(lock) = std::fs::File::open(path.join("db")) else {
        return;
    };
    if lock.try_lock().is_err() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::warn!(file = %entry.path().display(), "removed an unfinished sled snapshot")
                }
                Err(e) => {
                    tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove an unfinished sled snapshot")
                }
            }
        }
    }
}

/// The open database, held for one call.
struct DbGuard<'a>(RwLockReadGuard<'a, Option<Open>>);

impl std::ops::Deref for DbGuard<'_> {
    type Target = Open;

    fn deref(&self) -> &Open {
        self.0.as_ref().expect("checked when the guard was made")
    }
}

impl Store for SledStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let open = self.db()?;
        let revision = match open.tree.get(REVISION_KEY).map_err(|e| self.engine(e))? {
            Some(v) => {
                let raw: [u8; 8] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
                    key: "m/revision".into(),
                    reason: format!("{} bytes, expected 8", v.len()),
                })?;
                u64::from_be_bytes(raw)
            }
            None => 0,
        };
        let mut objects = Vec::new();
        for item in open.tree.scan_prefix(OBJECT_PREFIX) {
            let (k, v) = item.map_err(|e| self.engine(e))?;
            let key = String::from_utf8_lossy(&k[OBJECT_PREFIX.len()..]).into_owned();
            objects.push((key, Bytes::copy_from_slice(&v)));
        }
        Ok(Loaded { revision, objects })
    }

    fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError> {
        let open = self.db()?;
        if let [c] = changes {
            open.tree
                .insert(REVISION_KEY, &revision.to_be_bytes())
                .map_err(|e| self.engine(e))?;
            let key = object_key(&c.key);
            return match &c.value {
                Some(v) => open.tree.insert(key, v.as_ref()).map(drop),
                None => open.tree.remove(key).map(drop),
            }
            .map_err(|e| self.engine(e));
        }
        let mut batch = sled::Batch::default();
        batch.insert(REVISION_KEY, &revision.to_be_bytes());
        for c in changes {
            let key = object_key(&c.key);
            match &c.value {
                Some(v) => batch.insert(key, v.as_ref()),
                None => batch.remove(key),
            }
        }
        open.tree.apply_batch(batch).map_err(|e| self.engine(e))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db()?.db.flush().map(|_| ()).map_err(|e| self.engine(e))
    }

    fn recover(&self) -> Result<(), StoreError> {
        let mut open = self.open.write().unwrap_or_else(|e| e.into_inner());
        // Closed first: sled holds its file lock until the last handle is gone.
        *open = None;
        *open = Some(Self::open_db_waiting(&self.path, LOCK_WAIT)?);
        Ok(())
    }

    fn size_on_disk(&self) -> Option<u64> {
        dir_size(&self.path).ok()
    }
}

fn object_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(OBJECT_PREFIX.len() + key.len());
    k.extend_from_slice(OBJECT_PREFIX);
    k.extend_from_slice(key.as_bytes());
    k
}

fn dir_size(path: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_revision_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = SledStore::open(dir.path()).unwrap();
            s.write(
                1,
                &[Change {
                    key: "core/pods/ns/a".into(),
                    value: Some(Bytes::from_static(b"{}")),
                }],
            )
            .unwrap();
            s.write(
                2,
                &[Change {
                    key: "core/pods/ns/b".into(),
                    value: Some(Bytes::from_static(b"[]")),
                }],
            )
            .unwrap();
            s.write(
                3,
                &[Change {
                    key: "core/pods/ns/a".into(),
                    value: None,
                }],
            )
            .unwrap();
            s.flush().unwrap();
        }
        let s = SledStore::open(dir.path()).unwrap();
        let loaded = s.load().unwrap();
        assert_eq!(loaded.revision, 3);
        assert_eq!(
            loaded.objects,
            vec![("core/pods/ns/b".to_string(), Bytes::from_static(b"[]"))]
        );
    }

    #[test]
    fn a_second_opener_of_a_held_database_is_refused_plainly_and_the_first_keeps_working() {
        let dir = tempfile::tempdir().unwrap();
        let first = SledStore::open(dir.path()).unwrap();
        let err = SledStore::open_waiting(dir.path(), std::time::Duration::from_millis(100))
            .err()
            .expect("the database is held");
        let msg = err.to_string();
        assert!(msg.contains("is in use by another process"), "{msg}");
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
        first
            .write(
                1,
                &[Change {
                    key: "core/pods/ns/a".into(),
                    value: Some(Bytes::from_static(b"{}")),
                }],
            )
            .unwrap();
        first.flush().unwrap();
        assert_eq!(first.load().unwrap().revision, 1);
    }

    #[test]
    fn a_full_disk_is_no_space_naming_the_directory() {
        let full = sled::Error::Io(std::io::Error::from(std::io::ErrorKind::StorageFull));
        let e = engine(Path::new("/data/db"), full);
        assert_eq!(e.to_string(), "no space left on the device holding /data/db");
        let other = sled::Error::Io(std::io::Error::other("bad sector"));
        assert!(matches!(engine(Path::new("/d"), other), StoreError::Engine(_)));
    }

    #[test]
    fn recover_reopens_the_database_with_what_was_flushed_and_takes_writes() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path()).unwrap();
        let change = |key: &str| Change {
            key: key.into(),
            value: Some(Bytes::from_static(b"{}")),
        };
        s.write(1, &[change("k/a")]).unwrap();
        s.flush().unwrap();
        s.recover().unwrap();
        assert_eq!(s.load().unwrap().revision, 1);
        s.write(2, &[change("k/b")]).unwrap();
        s.flush().unwrap();
        let keys: Vec<String> = s.load().unwrap().objects.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["k/a", "k/b"]);
    }

    #[test]
    fn one_key_writes_and_batches_both_survive_reopening_with_their_revision() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = SledStore::open(dir.path()).unwrap();
            let put = |k: &str, v: Option<&[u8]>| Change {
                key: k.into(),
                value: v.map(Bytes::copy_from_slice),
            };
            s.write(1, &[put("a", Some(b"1"))]).unwrap();
            s.write(2, &[put("b", Some(b"2")), put("c", Some(b"3"))]).unwrap();
            s.write(3, &[put("a", None)]).unwrap();
            s.flush().unwrap();
        }
        let s = SledStore::open(dir.path()).unwrap();
        let loaded = s.load().unwrap();
        assert_eq!(loaded.revision, 3);
        let keys: Vec<&str> = loaded.objects.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "c"]);
    }

    #[test]
    fn an_unfinished_snapshot_left_by_a_failed_write_does_not_stop_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = SledStore::open(dir.path()).unwrap();
            s.write(
                1,
                &[Change {
                    key: "k/a".into(),
                    value: Some(Bytes::from_static(b"{}")),
                }],
            )
            .unwrap();
            s.flush().unwrap();
        }
        // What a snapshot write cut short by ENOSPC leaves: sorted after every finished snapshot.
        std::fs::write(dir.path().join("snap.FFFFFFFFFFFFFFFF.generating"), b"").unwrap();
        let s = SledStore::open(dir.path()).unwrap();
        assert_eq!(s.load().unwrap().objects.len(), 1);
        assert!(!dir.path().join("snap.FFFFFFFFFFFFFFFF.generating").exists());
    }
}
