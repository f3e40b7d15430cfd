//! A small etcd v3 client: the KV range and transaction calls, the watch stream and the status call,
//! over the tonic gRPC stack the workspace already has.
//!
//! Why not a client crate: `etcd-client` runs `prost-build` in its build script, which needs the `protoc`
//! compiler installed (kubeling's default build needs nothing beyond Rust and gcc), and `etcdv3client`
//! pins tonic 0.12 (a second gRPC stack in the build). The messages used are in [`pb`], declared with
//! `prost` derives from etcd's proto files.

pub mod pb;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::uri::PathAndQuery;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

/// How long one call may take before it fails (etcd answers in milliseconds when healthy).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An endpoint URL that does not parse.
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    BadEndpoint {
        /// The endpoint.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// No endpoint answered in time.
    #[error("etcd at {endpoints} did not answer within {timeout:?}")]
    Timeout {
        /// The endpoints tried.
        endpoints: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The call failed.
    #[error("etcd at {endpoint}: {}", status.message())]
    Status {
        /// The endpoint that answered.
        endpoint: String,
        /// The gRPC status.
        status: tonic::Status,
    },
}

impl Error {
    /// The server could not be reached (as opposed to a refusal of the request).
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Timeout { .. } => true,
            Error::Status { status, .. } => matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
            ),
            Error::BadEndpoint { .. } => false,
        }
    }
}

/// A client of one etcd cluster, given by the URLs of its members (`http://host:2379`). Calls go to one
/// member and move to the next when it cannot be reached. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    members: Arc<Vec<(String, Channel)>>,
    current: Arc<AtomicUsize>,
}

const RANGE: &str = "/etcdserverpb.KV/Range";
const TXN: &str = "/etcdserverpb.KV/Txn";
const COMPACT: &str = "/etcdserverpb.KV/Compact";
const WATCH: &str = "/etcdserverpb.Watch/Watch";
const STATUS: &str = "/etcdserverpb.Maintenance/Status";

impl Client {
    /// A client of `endpoints`; nothing is dialled until the first call.
    pub fn new(endpoints: &[String]) -> Result<Client, Error> {
        let mut members = Vec::new();
        for e in endpoints {
            let bad = |reason: String| Error::BadEndpoint {
                endpoint: e.clone(),
                reason,
            };
            if !e.starts_with("http://") {
                return Err(bad("only http:// endpoints are supported".into()));
            }
            let endpoint = Endpoint::from_shared(e.clone())
                .map_err(|err| bad(err.to_string()))?
                .connect_timeout(Duration::from_secs(2))
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true);
            members.push((e.clone(), endpoint.connect_lazy()));
        }
        if members.is_empty() {
            return Err(Error::BadEndpoint {
                endpoint: String::new(),
                reason: "no endpoint given".into(),
            });
        }
        Ok(Client {
            members: Arc::new(members),
            current: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The endpoints, comma-separated.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|(e, _)| e.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    async fn unary<Req, Resp>(&self, path: &'static str, request: Req) -> Result<Resp, Error>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let n = self.members.len();
        let start = self.current.load(Ordering::Relaxed);
        let mut last = None;
        for i in 0..n {
            let idx = (start + i) % n;
            let (endpoint, channel) = &self.members[idx];
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            let call = async {
                grpc.ready()
                    .await
                    .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                grpc.unary(
                    tonic::Request::new(request.clone()),
                    PathAndQuery::from_static(path),
                    tonic_prost::ProstCodec::<Req, Resp>::default(),
                )
                .await
            };
            let err = match tokio::time::timeout(CALL_TIMEOUT, call).await {
                Ok(Ok(resp)) => {
                    self.current.store(idx, Ordering::Relaxed);
                    return Ok(resp.into_inner());
                }
                Ok(Err(status)) => Error::Status {
                    endpoint: endpoint.clone(),
                    status,
                },
                Err(_) => Error::Timeout {
                    endpoints: endpoint.clone(),
                    timeout: CALL_TIMEOUT,
                },
            };
            if !err.is_unavailable() {
                return Err(err);
            }
            last = Some(err);
        }
        Err(last.unwrap_or(Error::Timeout {
            endpoints: self.endpoints(),
            timeout: CALL_TIMEOUT,
        }))
    }

    /// Keys in `[key, range_end)` (`range_end` empty: `key` alone) at `revision` (0: the newest), at most
    /// `limit` (0: all).
    pub async fn range(
        &self,
        key: &[u8],
        range_end: &[u8],
        revision: i64,
        limit: i64,
    ) -> Result<pb::RangeResponse, Error> {
        self.unary(
            RANGE,
            pb::RangeRequest {
                key: key.to_vec(),
                range_end: range_end.to_vec(),
                limit,
                revision,
                ..Default::default()
            },
        )
        .await
    }

    /// A transaction.
    pub async fn txn(&self, txn: pb::TxnRequest) -> Result<pb::TxnResponse, Error> {
        self.unary(TXN, txn).await
    }

    /// Drop the history before `revision` (watches from before it fail with its compact revision).
    pub async fn compact(&self, revision: i64) -> Result<pb::CompactionResponse, Error> {
        self.unary(
            COMPACT,
            pb::CompactionRequest {
                revision,
                physical: false,
            },
        )
        .await
    }

    /// The answering member's status (its version, the cluster's revision).
    pub async fn status(&self) -> Result<pb::StatusResponse, Error> {
        self.unary(STATUS, pb::StatusRequest {}).await
    }

    /// Watch `[key, range_end)` from `start_revision`, with progress notifications while idle. The stream
    /// ends (or fails) when the member goes away; the caller starts a new one from its last revision.
    pub async fn watch(
        &self,
        key: &[u8],
        range_end: &[u8],
        start_revision: i64,
    ) -> Result<WatchStream, Error> {
        let idx = self.current.load(Ordering::Relaxed) % self.members.len();
        let (endpoint, channel) = &self.members[idx];
        let failed = |status: tonic::Status| {
            self.current
                .store((idx + 1) % self.members.len(), Ordering::Relaxed);
            Error::Status {
                endpoint: endpoint.clone(),
                status,
            }
        };
        let (tx, rx) = mpsc::channel::<pb::WatchRequest>(4);
        tx.send(pb::WatchRequest {
            request_union: Some(pb::WatchRequestUnion::Create(pb::WatchCreateRequest {
                key: key.to_vec(),
                range_end: range_end.to_vec(),
                start_revision,
                progress_notify: true,
                prev_kv: false,
            })),
        })
        .await
        .map_err(|_| failed(tonic::Status::internal("watch request channel closed")))?;
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        let open = async {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            grpc.streaming(
                tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
                PathAndQuery::from_static(WATCH),
                tonic_prost::ProstCodec::<pb::WatchRequest, pb::WatchResponse>::default(),
            )
            .await
        };
        let response = tokio::time::timeout(CALL_TIMEOUT, open)
            .await
            .map_err(|_| failed(tonic::Status::deadline_exceeded("opening the watch")))?
            .map_err(failed)?;
        Ok(WatchStream {
            _requests: tx,
            responses: response.into_inner(),
        })
    }
}

/// A watch: the responses, and the request side kept open (it ends the watch when dropped).
///
/// No progress requests: etcd before 3.4.31 and 3.5.13 answers one ahead of events still to come
/// (etcd#15220, #17557), so a caller that needs to know the watch has reached a revision writes a key in
/// the watched range and waits for its event instead.
pub struct WatchStream {
    _requests: mpsc::Sender<pb::WatchRequest>,
    responses: tonic::Streaming<pb::WatchResponse>,
}

impl WatchStream {
    /// The next response; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Result<pb::WatchResponse, tonic::Status>> {
        self.responses.message().await.transpose()
    }
}

/// The end of the range of every key starting with `prefix` (etcd's "prefix end": the prefix with its last
/// byte below 0xff incremented, the bytes after it dropped).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff: to the end of the key space.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_end_bounds_every_key_with_the_prefix() {
        assert_eq!(prefix_end(b"/kubeling/a/"), b"/kubeling/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }

    #[tokio::test]
    async fn endpoints_must_be_plain_http_urls() {
        assert!(Client::new(&["http://127.0.0.1:2379".into()]).is_ok());
        assert!(Client::new(&["https://127.0.0.1:2379".into()]).is_err());
        assert!(Client::new(&["127.0.0.1:2379".into()]).is_err());
        assert!(Client::new(&[]).is_err());
    }

    #[test]
    fn messages_encode_as_etcd_expects() {
        use prost::Message;
        // RangeRequest{key: "a", limit: 1} is field 1 (bytes) then field 3 (varint).
        let bytes = pb::RangeRequest {
            key: b"a".to_vec(),
            limit: 1,
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(bytes, vec![0x0a, 0x01, b'a', 0x18, 0x01]);
        // A Compare on the mod revision: result EQUAL (0, omitted), target MOD (2), key, mod_revision 7.
        let bytes = pb::Compare {
            result: pb::COMPARE_EQUAL,
            target: pb::TARGET_MOD,
            key: b"k".to_vec(),
            target_union: Some(pb::CompareTargetUnion::ModRevision(7)),
        }
        .encode_to_vec();
        assert_eq!(bytes, vec![0x10, 0x02, 0x1a, 0x01, b'k', 0x30, 0x07]);
    }
}
