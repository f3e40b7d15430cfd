//! The server side of a port-forward SPDY session (kubelet `httpstream.go`), over any byte transport:
//! bytes arrive on one channel and leave on another, so the WebSocket tunnel and the plain upgrade share
//! it. One task owns the codec and the stream table; each complete stream pair runs as its own
//! [`super::forward`] task, which writes DATA frames (no compression state) straight to the output.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use spdy::{Codec, FLAG_FIN, Frame, Headers};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Ctx, POD_CHECK_PERIOD, Sink, Up, forward};

/// remotecommand `DefaultStreamCreationTimeout`: how long half a pair may wait for the other half.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The upstream header names (`k8s.io/api/core/v1`, lowercased on the wire).
const STREAM_TYPE: &str = "streamtype";
const PORT: &str = "port";
const REQUEST_ID: &str = "requestid";

/// Which stream of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Carries the connection's bytes.
    Data,
    /// Carries an error text from the server, then FIN.
    Error,
}

/// A SYN_STREAM's port-forward headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamRequest {
    pub(crate) kind: Kind,
    pub(crate) port: u16,
    pub(crate) request_id: String,
}

/// Checks a new stream's headers as the kubelet does; the error is the reason it is rejected.
pub(crate) fn stream_request(headers: &Headers) -> Result<StreamRequest, String> {
    let port = spdy::header(headers, PORT).ok_or_else(|| format!("{PORT:?} header is required"))?;
    let port = match port.parse::<u16>() {
        Ok(0) => return Err(format!("port {port:?} must be > 0")),
        Ok(p) => p,
        Err(_) => return Err(format!("unable to parse {port:?} as a port: invalid syntax")),
    };
    let kind = match spdy::header(headers, STREAM_TYPE) {
        Some("data") => Kind::Data,
        Some("error") => Kind::Error,
        other => return Err(format!("invalid stream type {:?}", other.unwrap_or(""))),
    };
    // kubelet: clients before requestID was added are told apart by stream ID; kubectl 1.32 always
    // sends one.
    let request_id = spdy::header(headers, REQUEST_ID)
        .ok_or_else(|| format!("{REQUEST_ID:?} header is required"))?
        .to_owned();
    Ok(StreamRequest {
        kind,
        port,
        request_id,
    })
}

/// Half or all of a stream pair.
#[derive(Debug, Default)]
pub(crate) struct Pair {
    pub(crate) data: Option<u32>,
    pub(crate) error: Option<u32>,
    pub(crate) port: u16,
    since: Option<Instant>,
}

/// Pairs streams by request ID (kubelet `httpStreamHandler.getStreamPair`/`add`).
#[derive(Debug, Default)]
pub(crate) struct Pairs {
    pending: HashMap<String, Pair>,
}

impl Pairs {
    /// Adds a stream; returns the complete pair `(data, error, port)` once both halves are there.
    pub(crate) fn add(
        &mut self,
        stream_id: u32,
        req: &StreamRequest,
        now: Instant,
    ) -> Result<Option<(u32, u32, u16)>, String> {
        let pair = self
            .pending
            .entry(req.request_id.clone())
            .or_insert_with(|| Pair {
                port: req.port,
                since: Some(now),
                ..Pair::default()
            });
        let slot = match req.kind {
            Kind::Data => &mut pair.data,
            Kind::Error => &mut pair.error,
        };
        if slot.is_some() {
            let which = if req.kind == Kind::Data { "data" } else { "error" };
            return Err(format!("{which} stream already assigned"));
        }
        *slot = Some(stream_id);
        if let (Some(data), Some(error)) = (pair.data, pair.error) {
            let port = pair.port;
            self.pending.remove(&req.request_id);
            return Ok(Some((data, error, port)));
        }
        Ok(None)
    }

    /// Removes and returns the pairs that waited longer than the stream creation timeout.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<(String, Pair)> {
        let old: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                p.since
                    .is_some_and(|s| now.duration_since(s) >= STREAM_CREATION_TIMEOUT)
            })
            .map(|(id, _)| id.clone())
            .collect();
        old.into_iter()
            .filter_map(|id| self.pending.remove(&id).map(|p| (id, p)))
            .collect()
    }
}

/// A stream pair's output: DATA frames on its two streams.
struct SpdySink {
    out: mpsc::Sender<Bytes>,
    data: u32,
    error: u32,
    done: mpsc::UnboundedSender<u32>,
}

fn data_frame(stream_id: u32, flags: u8, data: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    // A stream id from the client is never 0 and chunks stay below the 24-bit limit.
    spdy::encode_data(stream_id, flags, data, &mut out).expect("a valid DATA frame");
    out.freeze()
}

impl Sink for SpdySink {
    async fn data(&self, b: Bytes) -> bool {
        self.out.send(data_frame(self.data, 0, &b)).await.is_ok()
    }

    async fn error(&self, text: String) {
        let _ = self.out.send(data_frame(self.error, 0, text.as_bytes())).await;
    }

    async fn finish(&self, failed: bool) {
        if failed {
            // kubelet (kubernetes#128318): after an error, both streams are reset; the error stream
            // gets its FIN first so the text is read before the stream ends.
            let _ = self.out.send(data_frame(self.error, FLAG_FIN, &[])).await;
            let mut out = BytesMut::new();
            spdy::encode_rst_stream(self.data, spdy::rst::CANCEL, &mut out);
            let _ = self.out.send(out.freeze()).await;
        } else {
            let _ = self.out.send(data_frame(self.data, FLAG_FIN, &[])).await;
            let _ = self.out.send(data_frame(self.error, FLAG_FIN, &[])).await;
        }
        let _ = self.done.send(self.data);
    }
}

/// The session's own state.
struct Session {
    ctx: Arc<Ctx>,
    codec: Codec,
    out: mpsc::Sender<Bytes>,
    pairs: Pairs,
    /// Every stream the client opened and the session has not forgotten.
    streams: HashMap<u32, Kind>,
    /// The running connections, by data stream.
    running: HashMap<u32, mpsc::Sender<Up>>,
    done_tx: mpsc::UnboundedSender<u32>,
    last_stream: u32,
}

impl Session {
    async fn send(&mut self, frame: &Frame) -> bool {
        let mut buf = BytesMut::new();
        if let Err(e) = self.codec.encode(frame, &mut buf) {
            tracing::warn!(error = %e, "port-forward: encoding a SPDY frame failed");
            return false;
        }
        self.out.send(buf.freeze()).await.is_ok()
    }

    async fn reset(&mut self, stream_id: u32, status: u32) {
        self.send(&Frame::RstStream { stream_id, status }).await;
    }

    /// Handles one frame; false ends the session.
    async fn on_frame(&mut self, frame: Frame) -> bool {
        match frame {
            Frame::SynStream {
                stream_id, headers, ..
            } => self.on_syn_stream(stream_id, &headers).await,
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if let Some(up) = self.running.get(&stream_id) {
                    let up = up.clone();
                    if !data.is_empty() && up.send(Up::Data(data)).await.is_err() {
                        self.running.remove(&stream_id);
                    } else if flags & FLAG_FIN != 0 {
                        let _ = up.send(Up::Fin).await;
                    }
                }
                true
            }
            Frame::RstStream { stream_id, .. } => {
                // Dropping the sender tells the connection to close.
                self.running.remove(&stream_id);
                self.streams.remove(&stream_id);
                true
            }
            Frame::Ping { id } => self.send(&Frame::Ping { id }).await,
            Frame::GoAway { .. } => false,
            _ => true,
        }
    }

    async fn on_syn_stream(&mut self, stream_id: u32, headers: &Headers) -> bool {
        self.last_stream = self.last_stream.max(stream_id);
        if self.streams.contains_key(&stream_id) {
            self.reset(stream_id, spdy::rst::STREAM_IN_USE).await;
            return true;
        }
        let req = match stream_request(headers) {
            Ok(req) => req,
            Err(why) => {
                tracing::debug!(stream_id, why, "port-forward: stream rejected");
                self.reset(stream_id, spdy::rst::REFUSED_STREAM).await;
                return true;
            }
        };
        let pair = match self.pairs.add(stream_id, &req, Instant::now()) {
            Ok(pair) => pair,
            Err(why) => {
                tracing::debug!(stream_id, why, "port-forward: stream rejected");
                self.reset(stream_id, spdy::rst::PROTOCOL_ERROR).await;
                return true;
            }
        };
        self.streams.insert(stream_id, req.kind);
        if !self
            .send(&Frame::SynReply {
                stream_id,
                flags: 0,
                headers: Headers::new(),
            })
            .await
        {
            return false;
        }
        if let Some((data, error, port)) = pair {
            let (up_tx, up_rx) = mpsc::channel(16);
            self.running.insert(data, up_tx);
            let sink = SpdySink {
                out: self.out.clone(),
                data,
                error,
                done: self.done_tx.clone(),
            };
            tokio::spawn(forward(self.ctx.clone(), port, sink, up_rx));
        }
        true
    }

    /// Half pairs that waited too long get the kubelet's message on their error stream, if they have one.
    async fn expire_pairs(&mut self) {
        for (request_id, pair) in self.pairs.expire(Instant::now()) {
            if let Some(error) = pair.error {
                let text = format!("(request={request_id}) timed out waiting for streams");
                let _ = self.out.send(data_frame(error, FLAG_FIN, text.as_bytes())).await;
                self.streams.remove(&error);
            }
            if let Some(data) = pair.data {
                self.reset(data, spdy::rst::CANCEL).await;
                self.streams.remove(&data);
            }
        }
    }
}

/// Runs a session until the client ends it, the pod goes away, the bytes stop parsing, or the API
/// server shuts down. Dropping `out` at the end lets the transport's writer finish and close.
pub(crate) async fn run(ctx: Arc<Ctx>, mut incoming: mpsc::Receiver<Bytes>, out: mpsc::Sender<Bytes>) {
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut s = Session {
        ctx: ctx.clone(),
        codec: Codec::new(),
        out,
        pairs: Pairs::default(),
        streams: HashMap::new(),
        running: HashMap::new(),
        done_tx,
        last_stream: 0,
    };
    let mut buf = BytesMut::new();
    let mut tick = tokio::time::interval(POD_CHECK_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let status = 'session: loop {
        tokio::select! {
            chunk = incoming.recv() => {
                let Some(chunk) = chunk else { break spdy::goaway::OK };
                buf.extend_from_slice(&chunk);
                loop {
                    match s.codec.decode(&mut buf) {
                        Ok(Some(frame)) => {
                            if !s.on_frame(frame).await {
                                break 'session spdy::goaway::OK;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::info!(error = %e, "port-forward: malformed SPDY, ending the session");
                            break 'session spdy::goaway::PROTOCOL_ERROR;
                        }
                    }
                }
            }
            Some(data) = done_rx.recv() => {
                s.running.remove(&data);
            }
            _ = tick.tick() => {
                if ctx.pod_gone() {
                    tracing::debug!(pod = %ctx.target.pod, "port-forward: the pod went away, ending the session");
                    break spdy::goaway::OK;
                }
                s.expire_pairs().await;
            }
            () = ctx.cancel.cancelled() => break spdy::goaway::OK,
        }
    };
    let last_good_stream_id = s.last_stream;
    s.send(&Frame::GoAway {
        last_good_stream_id,
        status,
    })
    .await;
    // Ends every running connection, so the transport's writer sees the last sender go.
    ctx.cancel.cancel();
    s.running.clear();
}
