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
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

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
    /// TLS material that does not parse.
    #[error("etcd TLS: {what}: {reason}")]
    BadTls {
        /// The file (or part) at fault.
        what: String,
        /// Why.
        reason: String,
    },
    /// The call failed.
    #[error("etcd at {endpoint}: {}", describe(status))]
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
            Error::BadEndpoint { .. } | Error::BadTls { .. } => false,
        }
    }
}

/// A status's message, with the transport's cause when there is one (a refused connection, a certificate
/// the CA did not sign): tonic's own message for those is only "transport error".
fn describe(status: &tonic::Status) -> String {
    use std::error::Error as _;
    let mut text = status.message().to_string();
    let mut cause = status.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text = format!("{text}: {c_text}");
        }
        cause = c.source();
    }
    text
}

/// TLS to etcd's client URLs (`https://`), as kube-apiserver's `--etcd-cafile`, `--etcd-certfile` and
/// `--etcd-keyfile`: the CA that signed the members' serving certificates, and the client certificate and
/// key etcd asks for when it runs with `--client-cert-auth`. PEM.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    /// The CA certificate(s) the members' certificates must chain to.
    pub ca_pem: Vec<u8>,
    /// The client certificate (chain) and its key.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl Tls {
    /// Check that the PEM holds what it should (a CA certificate; a client certificate and a key), so a bad
    /// file is an error at start, not a handshake failure later. `what` names each part as the user gave it.
    pub fn check(&self, what: &TlsNames) -> Result<(), Error> {
        let bad = |name: &str, reason: String| Error::BadTls {
            what: name.to_string(),
            reason,
        };
        let certs = |pem: &[u8], name: &str| match CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(c) if !c.is_empty() => Ok(()),
            Ok(_) => Err(bad(name, "no PEM certificate in it".into())),
            Err(e) => Err(bad(name, e.to_string())),
        };
        certs(&self.ca_pem, &what.ca)?;
        if let Some((cert, key)) = &self.identity {
            certs(cert, &what.cert)?;
            PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| bad(&what.key, format!("no PEM private key in it ({e})")))?;
        }
        Ok(())
    }
}

/// How the parts of a [`Tls`] are named in errors (their files).
#[derive(Clone, Debug, Default)]
pub struct TlsNames {
    /// The CA.
    pub ca: String,
    /// The client certificate.
    pub cert: String,
    /// The client key.
    pub key: String,
}

/// A client of one etcd cluster, given by the URLs of its members (`http://host:2379`, or `https://` with a
/// [`Tls`]). Calls go to one member and move to the next when it cannot be reached. Cheap to clone.
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
    /// A client of `endpoints` (all `http://`, or all `https://` with `tls`); nothing is dialled until the
    /// first call.
    pub fn new(endpoints: &[String], tls: Option<&Tls>) -> Result<Client, Error> {
        let mut members = Vec::new();
        for e in endpoints {
            let bad = |reason: String| Error::BadEndpoint {
                endpoint: e.clone(),
                reason,
            };
            let endpoint = Endpoint::from_shared(e.clone()).map_err(|err| bad(err.to_string()))?;
            let endpoint = match (e.split_once("://").map(|(scheme, _)| scheme), tls) {
                (Some("http"), None) => endpoint,
                (Some("http"), Some(_)) => {
                    return Err(bad(
                        "TLS files are given but this endpoint is http://: use https:// (or drop the files)"
                            .into(),
                    ));
                }
                (Some("https"), Some(tls)) => {
                    let mut config =
                        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
                    if let Some((cert, key)) = &tls.identity {
                        config = config.identity(Identity::from_pem(cert, key));
                    }
                    endpoint.tls_config(config).map_err(|err| bad(err.to_string()))?
                }
                (Some("https"), None) => {
                    return Err(bad(
                        "an https:// endpoint needs the CA that signed etcd's certificate".into(),
                    ));
                }
                _ => return Err(bad("use http://host:port or https://host:port".into())),
            };
            let endpoint = endpoint
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
    async fn endpoints_are_http_urls_or_https_urls_with_a_ca() {
        let tls = Tls {
            ca_pem: b"-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n".to_vec(),
            identity: None,
        };
        let ok = |urls: &[&str], tls: Option<&Tls>| {
            Client::new(&urls.iter().map(|u| u.to_string()).collect::<Vec<_>>(), tls).map(|_| ())
        };
        assert!(ok(&["http://127.0.0.1:2379", "http://127.0.0.2:2379"], None).is_ok());
        assert!(ok(&["https://127.0.0.1:2379"], Some(&tls)).is_ok());
        let err = |urls: &[&str], tls: Option<&Tls>| ok(urls, tls).unwrap_err().to_string();
        assert!(err(&["https://127.0.0.1:2379"], None).contains("needs the CA"));
        assert!(err(&["http://127.0.0.1:2379"], Some(&tls)).contains("use https://"));
        assert!(err(&["https://a:2379", "http://b:2379"], Some(&tls)).contains("\"http://b:2379\""));
        assert!(err(&["127.0.0.1:2379"], None).contains("127.0.0.1:2379"));
        assert!(err(&["unix:///run/etcd"], None).contains("use http://host:port"));
        assert!(ok(&[], None).is_err());
    }

    #[test]
    fn tls_material_is_checked_before_it_is_used() {
        let names = TlsNames {
            ca: "ca.pem".into(),
            cert: "client.pem".into(),
            key: "client-key.pem".into(),
        };
        let cert = b"-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n".to_vec();
        let key = b"-----BEGIN PRIVATE KEY-----\nMA==\n-----END PRIVATE KEY-----\n".to_vec();
        let tls = |ca: &[u8], identity: Option<(&[u8], &[u8])>| Tls {
            ca_pem: ca.to_vec(),
            identity: identity.map(|(c, k)| (c.to_vec(), k.to_vec())),
        };
        assert!(tls(&cert, None).check(&names).is_ok());
        assert!(tls(&cert, Some((&cert, &key))).check(&names).is_ok());
        let err = |t: Tls| t.check(&names).unwrap_err().to_string();
        assert_eq!(err(tls(b"", None)), "etcd TLS: ca.pem: no PEM certificate in it");
        assert!(err(tls(&key, None)).starts_with("etcd TLS: ca.pem:"));
        assert!(err(tls(&cert, Some((&key, &key)))).starts_with("etcd TLS: client.pem:"));
        assert!(
            err(tls(&cert, Some((&cert, &cert)))).starts_with("etcd TLS: client-key.pem: no PEM private key")
        );
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
