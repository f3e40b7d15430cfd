//! The etcd engine: objects live in etcd, which orders every write; each API server keeps the committed
//! view and feeds its watch hub from one etcd watch.
//!
//! ```text
//! write: decide on the current object (pending-aware) → etcd Txn: if mod_revision(key) = the object's
//!        revision (0: absent) then put/delete → the Txn's revision is the new resourceVersion
//!        → wait until this server's etcd watch has applied that revision → answer
//! etcd watch (one per API server, from the loaded revision): events → committed view + Hub::publish
//! catch-up (a read of the latest state): etcd's revision; if this server is behind it, put the marker key
//!        (inside the watched keys) and wait until the watch has applied the revision read
//! ```
//!
//! Keys: `<prefix>/cluster-id` holds the id of the cluster that owns the prefix; objects are under
//! `<prefix>/objects/<key>`, as JSON without `resourceVersion` (upstream's rule: the revision is etcd's
//! mod revision, stamped when read). `<prefix>/objects/` itself is the marker key: it holds no object, and
//! writing it makes an event every watch of the objects receives after every change before it. Several API
//! servers on one etcd serve the same objects; a write that lost a race with another server's write to the
//! same key is a 409 Conflict.
//!
//! Deliberate difference from upstream: kube-apiserver catches its watch cache up by asking etcd for a
//! progress notification. etcd before 3.4.31 and 3.5.13 (Debian's is 3.4.23) answers that request at once
//! with its current revision, ahead of the events a watch that started from an older revision has still to
//! receive (etcd#15220, #17557; upstream reads from etcd instead on those versions): taking that revision
//! for its own, an API server skipped the changes it had missed while etcd was unreachable, for good. The
//! marker's event comes in order on every etcd version, at the cost of one etcd write per read that finds
//! this server behind (concurrent reads share one).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use etcd::pb;
use serde_json::Value;

use super::{StoreError, Stored};
use crate::watch::{Event, EventType};

/// Where the objects are and who owns them.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// The members' URLs (`http://host:2379`).
    pub endpoints: Vec<String>,
    /// The key prefix of this cluster (kube-apiserver's `--etcd-prefix`).
    pub prefix: String,
    /// The id of this cluster (the data directory's); the prefix must be unowned or owned by it.
    pub cluster_id: String,
    /// TLS to `https://` members.
    pub tls: Option<etcd::Tls>,
}

/// The etcd side of a [`super::Storage`].
pub(super) struct Etcd {
    pub(super) client: etcd::Client,
    objects: Vec<u8>,
    /// Serialises this server's writes of one key (their decisions read the pending view); writes of
    /// different keys go to etcd concurrently.
    pub(super) writers: super::key_lock::KeyLocks,
    /// The watch runs and etcd answered its last call.
    pub(super) healthy: AtomicBool,
    /// One marker write at a time; the readers waiting meanwhile share it.
    marking: tokio::sync::Mutex<()>,
    /// The revision of the last marker this server wrote.
    marked: AtomicU64,
}

fn unavailable(e: etcd::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// How many keys one range call of the start-up load reads.
const LOAD_PAGE: i64 = 1_000;

impl Etcd {
    /// Connect, claim (or check) the prefix for this cluster, and load every object at one revision.
    pub(super) async fn open(cfg: &EtcdConfig) -> Result<(Etcd, u64, Vec<(String, Bytes, u64)>), StoreError> {
        let client = etcd::Client::new(&cfg.endpoints, cfg.tls.as_ref())
            .map_err(|e| StoreError::Engine(e.to_string()))?;
        let prefix = cfg.prefix.trim_end_matches('/');
        let id_key = format!("{prefix}/cluster-id").into_bytes();
        let claim = client
            .txn(pb::TxnRequest {
                compare: vec![mod_revision_is(&id_key, 0)],
                success: vec![put(&id_key, cfg.cluster_id.as_bytes().to_vec())],
                failure: vec![pb::RequestOp {
                    request: Some(pb::Request::Range(pb::RangeRequest {
                        key: id_key.clone(),
                        ..Default::default()
                    })),
                }],
            })
            .await
            .map_err(|e| {
                // etcd with --client-cert-auth closes the connection after the handshake: say what may lack.
                let hint = match &cfg.tls {
                    Some(tls) if tls.identity.is_none() => {
                        " (if etcd asks for client certificates, give --etcd-certfile and --etcd-keyfile)"
                    }
                    _ => "",
                };
                StoreError::Engine(format!("cannot reach etcd: {e}{hint}"))
            })?;
        if !claim.succeeded {
            let owner = claim
                .responses
                .iter()
                .find_map(|r| match &r.response {
                    Some(pb::Response::Range(r)) => r.kvs.first().map(|kv| kv.value.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let owner = String::from_utf8_lossy(&owner);
            if owner != cfg.cluster_id {
                return Err(StoreError::Engine(format!(
                    "etcd at {} holds another cluster's objects under the prefix {prefix:?} (cluster id {owner}; \
                     this data directory's cluster is {}): use the data directory of the API server that made \
                     that cluster (its certificates and token), or another --etcd-prefix",
                    client.endpoints(),
                    cfg.cluster_id
                )));
            }
        }
        let etcd = Etcd {
            client,
            objects: format!("{prefix}/objects/").into_bytes(),
            writers: Default::default(),
            healthy: AtomicBool::new(true),
            marking: tokio::sync::Mutex::new(()),
            marked: AtomicU64::new(0),
        };
        let (revision, loaded) = etcd
            .load()
            .await
            .map_err(|e| StoreError::Engine(format!("loading from etcd: {e}")))?;
        Ok((etcd, revision, loaded))
    }

    /// Every object at one revision (read in pages), and that revision.
    async fn load(&self) -> Result<(u64, Vec<(String, Bytes, u64)>), etcd::Error> {
        let end = etcd::prefix_end(&self.objects);
        let mut loaded = Vec::new();
        let mut from = self.objects.clone();
        let mut revision = 0i64;
        loop {
            let page = self.client.range(&from, &end, revision, LOAD_PAGE).await?;
            if revision == 0 {
                revision = page.header.as_ref().map_or(0, |h| h.revision);
            }
            let last = page.kvs.last().map(|kv| kv.key.clone());
            for kv in page.kvs {
                if let Some(key) = self.storage_key(&kv.key) {
                    loaded.push((key, Bytes::from(kv.value), kv.mod_revision as u64));
                }
            }
            match last {
                Some(mut k) if page.more => {
                    k.push(0);
                    from = k;
                }
                _ => return Ok((revision as u64, loaded)),
            }
        }
    }

    /// The etcd key of a storage key.
    pub(super) fn key(&self, key: &str) -> Vec<u8> {
        let mut k = self.objects.clone();
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The storage key of an etcd key under the objects prefix (none for the marker key).
    pub(super) fn storage_key(&self, key: &[u8]) -> Option<String> {
        key.strip_prefix(self.objects.as_slice())
            .filter(|k| !k.is_empty())
            .and_then(|k| std::str::from_utf8(k).ok())
            .map(str::to_string)
    }

    /// Make sure a marker at or after `revision` is in etcd, so that this server's watch will bring it: the
    /// changes up to `revision` come before it. Writes one unless a marker written since does.
    pub(super) async fn mark_after(&self, revision: u64) -> Result<(), StoreError> {
        if self.marked.load(Ordering::Acquire) >= revision {
            return Ok(());
        }
        let _one = self.marking.lock().await;
        if self.marked.load(Ordering::Acquire) >= revision {
            return Ok(());
        }
        let resp = self
            .client
            .txn(pb::TxnRequest {
                compare: Vec::new(),
                success: vec![put(&self.objects, Vec::new())],
                failure: Vec::new(),
            })
            .await
            .map_err(unavailable)?;
        let marked = resp.header.map_or(0, |h| h.revision) as u64;
        self.marked.fetch_max(marked, Ordering::AcqRel);
        Ok(())
    }

    /// Write `value` (or delete, with `None`) if the key is still at `expected` (0: absent). Returns the
    /// write's revision, or `None` when another write came first.
    pub(super) async fn put_if(
        &self,
        key: &str,
        expected: u64,
        value: Option<Vec<u8>>,
    ) -> Result<Option<u64>, StoreError> {
        let k = self.key(key);
        let op = match value {
            Some(v) => put(&k, v),
            None => pb::RequestOp {
                request: Some(pb::Request::DeleteRange(pb::DeleteRangeRequest {
                    key: k.clone(),
                    range_end: Vec::new(),
                })),
            },
        };
        let resp = self
            .client
            .txn(pb::TxnRequest {
                compare: vec![mod_revision_is(&k, expected as i64)],
                success: vec![op],
                failure: Vec::new(),
            })
            .await
            .map_err(unavailable)?;
        let revision = resp.header.map_or(0, |h| h.revision) as u64;
        Ok(resp.succeeded.then_some(revision))
    }

    /// The watch of every object key, from `start` on.
    pub(super) async fn watch(&self, start: u64) -> Result<etcd::WatchStream, StoreError> {
        let end = etcd::prefix_end(&self.objects);
        self.client
            .watch(&self.objects, &end, start as i64)
            .await
            .map_err(unavailable)
    }

    /// etcd's current revision (a linearizable read).
    pub(super) async fn current_revision(&self) -> Result<u64, StoreError> {
        let resp = self
            .client
            .range(&self.objects, &[], 0, 1)
            .await
            .map_err(unavailable)?;
        Ok(resp.header.map_or(0, |h| h.revision) as u64)
    }

    pub(super) fn set_healthy(&self, healthy: bool) {
        if self.healthy.swap(healthy, Ordering::AcqRel) != healthy {
            if healthy {
                tracing::info!(endpoints = %self.client.endpoints(), "etcd is reachable again");
            } else {
                tracing::warn!(endpoints = %self.client.endpoints(), "etcd is unreachable: not ready");
            }
        }
    }
}

fn mod_revision_is(key: &[u8], revision: i64) -> pb::Compare {
    pb::Compare {
        result: pb::COMPARE_EQUAL,
        target: pb::TARGET_MOD,
        key: key.to_vec(),
        target_union: Some(pb::CompareTargetUnion::ModRevision(revision)),
    }
}

fn put(key: &[u8], value: Vec<u8>) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::Request::Put(pb::PutRequest {
            key: key.to_vec(),
            value,
        })),
    }
}

/// The object as etcd keeps it: without `metadata.resourceVersion`.
pub(super) fn etcd_bytes(value: &Value) -> Vec<u8> {
    match value.pointer("/metadata/resourceVersion") {
        Some(_) => {
            let mut v = value.clone();
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            crate::encode::to_vec(&v)
        }
        None => crate::encode::to_vec(value),
    }
}

/// An object read from etcd, stamped with its mod revision.
pub(super) fn decode(key: &str, bytes: &[u8], revision: u64) -> Result<Stored, StoreError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: key.to_string(),
        reason: e.to_string(),
    })?;
    Ok(Stored::new(revision, value))
}

/// How long after a failure the watch is opened again.
pub(super) const RETRY: Duration = Duration::from_millis(500);

/// One etcd watch response, as what the storage applies.
#[derive(Debug, PartialEq)]
pub(super) enum Update {
    /// Changes in revision order: the key, the new JSON (none: deleted), the revision.
    Changes(Vec<(Vec<u8>, Option<Vec<u8>>, u64)>),
    /// Every change up to this revision has been sent: etcd's periodic progress notification, which it sends
    /// through the watch's own queue, after the events, and only once the watch has caught up (never
    /// requested: a requested one may overtake events, see the module doc).
    Progress(u64),
    /// The watch started after etcd compacted this revision away: changes were missed.
    Compacted(u64),
    /// The watch ended (etcd cancelled it); open another.
    Ended(String),
    /// Nothing to apply (the creation acknowledgement).
    Nothing,
}

/// What a watch response means for the storage (pure).
pub(super) fn classify(resp: pb::WatchResponse) -> Update {
    if resp.compact_revision > 0 {
        return Update::Compacted(resp.compact_revision as u64);
    }
    if resp.canceled {
        return Update::Ended(resp.cancel_reason);
    }
    if resp.events.is_empty() {
        return match (resp.created, resp.header) {
            (false, Some(h)) => Update::Progress(h.revision as u64),
            _ => Update::Nothing,
        };
    }
    Update::Changes(
        resp.events
            .into_iter()
            .filter_map(|ev| {
                let kv = ev.kv?;
                let value = (ev.r#type != pb::EVENT_DELETE).then_some(kv.value);
                Some((kv.key, value, kv.mod_revision as u64))
            })
            .collect(),
    )
}

/// How long a consistent read or an acknowledged write waits for this server's watch to catch up.
pub(super) const CATCH_UP: Duration = Duration::from_secs(3);

/// How often the history before the revision seen one period ago is compacted (kube-apiserver's
/// `--etcd-compaction-interval` default).
const COMPACTION_INTERVAL: Duration = Duration::from_secs(300);

/// The committed view of the loaded objects (an object that does not parse is reported and left out).
pub(super) fn objects(loaded: Vec<(String, Bytes, u64)>) -> BTreeMap<String, Arc<Stored>> {
    let mut objects = BTreeMap::new();
    for (key, bytes, revision) in loaded {
        match decode(&key, &bytes, revision) {
            Ok(s) => {
                objects.insert(key, Arc::new(s));
            }
            Err(e) => tracing::error!(error = %e, "skipping an object in etcd that does not parse"),
        }
    }
    objects
}

/// Every [`COMPACTION_INTERVAL`], compact etcd's history up to the revision it had one interval before
/// (as kube-apiserver does: watches lagging by less than that can still resume). Several API servers may
/// all compact; compacting an already compacted revision is refused harmlessly.
pub(super) async fn compact_loop(etcd: Arc<Etcd>, stop: tokio_util::sync::CancellationToken) {
    let mut previous = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(COMPACTION_INTERVAL) => {}
        }
        if let Some(rev) = previous
            && let Err(e) = etcd.client.compact(rev as i64).await
        {
            tracing::debug!(error = %e, revision = rev, "etcd compaction");
        }
        previous = etcd.current_revision().await.ok();
    }
}

impl super::Inner {
    /// Follow etcd from the loaded revision: apply each change to the committed view and publish it, in
    /// revision order; reopen the watch from the last applied revision when it breaks.
    pub(super) async fn etcd_watch_loop(self: Arc<Self>, etcd: Arc<Etcd>) {
        loop {
            let from = self.committed_revision() + 1;
            let opened = tokio::select! {
                _ = self.stop.cancelled() => return,
                r = etcd.watch(from) => r,
            };
            match opened {
                Ok(mut stream) => {
                    etcd.set_healthy(true);
                    loop {
                        let next = tokio::select! {
                            _ = self.stop.cancelled() => return,
                            r = stream.next() => r,
                        };
                        let resp = match next {
                            Some(Ok(resp)) => resp,
                            Some(Err(status)) => {
                                tracing::debug!(%status, "the etcd watch failed");
                                break;
                            }
                            None => break,
                        };
                        match classify(resp) {
                            Update::Changes(changes) => self.apply_etcd(&etcd, changes),
                            Update::Progress(revision) => self.advance(revision),
                            Update::Nothing => {}
                            Update::Ended(reason) => {
                                tracing::warn!(reason, "etcd ended the watch; reopening it");
                                break;
                            }
                            Update::Compacted(revision) => {
                                tracing::error!(
                                    revision,
                                    "etcd compacted changes this API server had not seen: reloading every object; \
                                     watches end and resume with 410 Gone"
                                );
                                if let Err(e) = self.reload(&etcd).await {
                                    tracing::error!(error = %e, "reloading from etcd");
                                }
                                break;
                            }
                        }
                    }
                    // A healthy etcd answers at once; a failed call marks it unhealthy until the next watch.
                    if etcd.current_revision().await.is_err() {
                        etcd.set_healthy(false);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "opening the etcd watch");
                    etcd.set_healthy(false);
                }
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(RETRY) => {}
            }
        }
    }

    fn committed_revision(&self) -> u64 {
        self.committed.read().unwrap_or_else(|e| e.into_inner()).revision
    }

    /// Apply one watch response's changes (their revisions rise) and publish them.
    fn apply_etcd(&self, etcd: &Etcd, changes: Vec<(Vec<u8>, Option<Vec<u8>>, u64)>) {
        // Lock order as the writer's: the pending overlay, then the committed view.
        let mut w = super::lock(&self.writer);
        let mut c = self.committed.write().unwrap_or_else(|e| e.into_inner());
        let mut batch = Vec::with_capacity(changes.len());
        for (etcd_key, value, revision) in changes {
            if revision <= c.revision {
                continue;
            }
            // Seen, whether or not it makes an event (the marker, a value that does not parse).
            c.revision = revision;
            let Some(key) = etcd.storage_key(&etcd_key) else {
                continue;
            };
            let previous = c.objects.get(&key).cloned();
            let event = match value {
                Some(bytes) => {
                    // This server's own write is applied as written, without parsing it again.
                    let stored = match w.overlay.get(&key) {
                        Some((r, Some(s))) if *r == revision => s.clone(),
                        _ => match decode(&key, &bytes, revision) {
                            Ok(s) => Arc::new(s),
                            Err(e) => {
                                tracing::error!(error = %e, "skipping a change in etcd that does not parse");
                                continue;
                            }
                        },
                    };
                    c.objects.insert(key.clone(), stored.clone());
                    let kind = if previous.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    Event {
                        revision,
                        key,
                        kind,
                        object: stored,
                        previous,
                    }
                }
                None => {
                    let Some(old) = c.objects.remove(&key) else {
                        continue;
                    };
                    Event {
                        revision,
                        key,
                        kind: EventType::Deleted,
                        object: Arc::new(Stored::new(revision, old.value())),
                        previous: Some(old),
                    }
                }
            };
            batch.push(Arc::new(event));
        }
        self.hub.publish(&batch);
        let applied = c.revision;
        self.hub.advance(applied);
        w.overlay.retain(|_, (r, _)| *r > applied);
        w.revision = w.revision.max(applied);
        drop(c);
        drop(w);
        self.durable.send_replace(applied);
    }

    /// Every change up to `revision` has been applied (a progress notification).
    fn advance(&self, revision: u64) {
        let mut c = self.committed.write().unwrap_or_else(|e| e.into_inner());
        if revision <= c.revision {
            return;
        }
        c.revision = revision;
        self.hub.advance(revision);
        drop(c);
        self.durable.send_replace(revision);
    }

    /// Replace the committed view with etcd's current objects (after missing compacted changes).
    async fn reload(&self, etcd: &Etcd) -> Result<(), StoreError> {
        let (revision, loaded) = etcd.load().await.map_err(unavailable)?;
        let objects = objects(loaded);
        let mut w = super::lock(&self.writer);
        let mut c = self.committed.write().unwrap_or_else(|e| e.into_inner());
        c.objects = objects;
        c.revision = revision;
        w.overlay.clear();
        w.revision = w.revision.max(revision);
        self.hub.reset(revision);
        drop(c);
        drop(w);
        self.durable.send_replace(revision);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, rev: i64) -> pb::KeyValue {
        pb::KeyValue {
            key: key.into(),
            value: value.into(),
            mod_revision: rev,
            ..Default::default()
        }
    }

    #[test]
    fn watch_responses_become_changes_progress_or_a_restart() {
        let header = |rev| {
            Some(pb::ResponseHeader {
                revision: rev,
                ..Default::default()
            })
        };
        let created = pb::WatchResponse {
            created: true,
            header: header(5),
            ..Default::default()
        };
        assert_eq!(classify(created), Update::Nothing);
        let progress = pb::WatchResponse {
            header: header(9),
            ..Default::default()
        };
        assert_eq!(classify(progress), Update::Progress(9));
        let compacted = pb::WatchResponse {
            compact_revision: 7,
            canceled: true,
            ..Default::default()
        };
        assert_eq!(classify(compacted), Update::Compacted(7));
        let cancelled = pb::WatchResponse {
            canceled: true,
            cancel_reason: "gone".into(),
            ..Default::default()
        };
        assert_eq!(classify(cancelled), Update::Ended("gone".into()));
        let changes = pb::WatchResponse {
            header: header(12),
            events: vec![
                pb::WatchEvent {
                    r#type: 0,
                    kv: Some(kv("/k/a", "{}", 11)),
                    prev_kv: None,
                },
                pb::WatchEvent {
                    r#type: pb::EVENT_DELETE,
                    kv: Some(kv("/k/b", "", 12)),
                    prev_kv: None,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            classify(changes),
            Update::Changes(vec![
                (b"/k/a".to_vec(), Some(b"{}".to_vec()), 11),
                (b"/k/b".to_vec(), None, 12)
            ])
        );
    }

    #[tokio::test]
    async fn the_marker_key_holds_no_object() {
        let etcd = Etcd {
            client: etcd::Client::new(&["http://127.0.0.1:2379".into()], None).unwrap(),
            objects: b"/kubeling/objects/".to_vec(),
            writers: Default::default(),
            healthy: AtomicBool::new(true),
            marking: tokio::sync::Mutex::new(()),
            marked: AtomicU64::new(0),
        };
        assert_eq!(etcd.storage_key(b"/kubeling/objects/"), None);
        assert_eq!(
            etcd.storage_key(b"/kubeling/objects/core/configmaps/ns/a")
                .as_deref(),
            Some("core/configmaps/ns/a")
        );
        assert_eq!(etcd.storage_key(b"/kubeling/cluster-id"), None);
    }

    #[test]
    fn etcd_keeps_objects_without_their_resource_version() {
        let v = serde_json::json!({"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"x": "1"}});
        let bytes = etcd_bytes(&v);
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(back.pointer("/metadata/resourceVersion").is_none());
        let stored = decode("k", &bytes, 9).unwrap();
        assert_eq!(stored.revision, 9);
        assert_eq!(stored.value()["metadata"]["resourceVersion"], "9");
        assert_eq!(stored.value()["data"]["x"], "1");
    }
}
