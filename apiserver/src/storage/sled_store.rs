//! The sled [`Store`]: one tree, objects under `o/<key>`, the revision under `m/revision`, both written in
//! one atomic batch; `flush` is sled's fsync.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{Change, Loaded, Store, StoreError};

const REVISION_KEY: &[u8] = b"m/revision";
const OBJECT_PREFIX: &[u8] = b"o/";

/// sled on disk in the data directory.
pub struct SledStore {
    db: sled::Db,
    tree: sled::Tree,
    path: PathBuf,
}

fn engine(e: sled::Error) -> StoreError {
    StoreError::Engine(e.to_string())
}

impl SledStore {
    /// Open (or create) the database at `path`.
    pub fn open(path: &Path) -> Result<SledStore, StoreError> {
        // sled holds an exclusive file lock until its last reference (some held by its own background
        // threads) is gone: a restart right after a shutdown can find it still held for a moment.
        Self::open_waiting(path, std::time::Duration::from_secs(5))
    }

    fn open_waiting(path: &Path, wait: std::time::Duration) -> Result<SledStore, StoreError> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            match Self::try_open(path) {
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

    fn try_open(path: &Path) -> Result<SledStore, StoreError> {
        let db = sled::Config::new()
            .path(path)
            // Reads are served from memory; sled's page cache only matters at start-up.
            .cache_capacity(8 * 1024 * 1024)
            // We flush explicitly before acknowledging; no background timer needed.
            .flush_every_ms(None)
            .open()
            .map_err(|e| StoreError::Engine(format!("opening {}: {e}", path.display())))?;
        let tree = db.open_tree("objects").map_err(engine)?;
        Ok(SledStore {
            db,
            tree,
            path: path.to_path_buf(),
        })
    }
}

impl Store for SledStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let revision = match self.tree.get(REVISION_KEY).map_err(engine)? {
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
        for item in self.tree.scan_prefix(OBJECT_PREFIX) {
            let (k, v) = item.map_err(engine)?;
            let key = String::from_utf8_lossy(&k[OBJECT_PREFIX.len()..]).into_owned();
            objects.push((key, Bytes::copy_from_slice(&v)));
        }
        Ok(Loaded { revision, objects })
    }

    fn write(&self, revision: u64, changes: &[Change]) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        batch.insert(REVISION_KEY, &revision.to_be_bytes());
        for c in changes {
            let mut key = OBJECT_PREFIX.to_vec();
            key.extend_from_slice(c.key.as_bytes());
            match &c.value {
                Some(v) => batch.insert(key, v.as_ref()),
                None => batch.remove(key),
            }
        }
        self.tree.apply_batch(batch).map_err(engine)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(|_| ()).map_err(engine)
    }

    fn size_on_disk(&self) -> Option<u64> {
        dir_size(&self.path).ok()
    }
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
}
