//! A session's one WebSocket to the pod's node agent (`wss node/portForward/{ns}/{pod}`), which carries
//! every forwarded connection of the session (node/src/portforward/wire.rs defines the messages:
//! `[op][connection id u32 BE][payload]`). Opening it costs a TCP and TLS handshake, an upgrade and the
//! node's sandbox lookup; a session pays that once (opened as the session starts) instead of once per
//! connection. A writer task sends what the connections queue; a reader task hands each message to its
//! connection. When the WebSocket ends, every connection on it ends and the next connection opens a new
//! one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderValue, header};
use bytes::{BufMut, BytesMut};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use super::super::proxy::{self, Target};
use super::NODE_TIMEOUT;

// The node's message ops.
pub(crate) const OPEN: u8 = 1;
pub(crate) const DATA: u8 = 2;
pub(crate) const FIN: u8 = 3;
pub(crate) const CLOSE: u8 = 4;
pub(crate) const ERROR: u8 = 5;
const HEADER: usize = 5;

/// Messages queued for the node.
const OUT_QUEUE: usize = 64;
/// Messages from the node queued for one connection.
const CONN_QUEUE: usize = 64;

/// The message `op` for connection `id` with `payload`.
pub(crate) fn encode(op: u8, id: u32, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER + payload.len());
    b.put_u8(op);
    b.put_u32(id);
    b.put_slice(payload);
    b.freeze()
}

/// What the node said about one connection, as its reader hands it on: `None` for a message that is
/// not for a connection (too short, or an op the API server does not take).
pub(crate) fn event(message: &Bytes) -> Option<(u32, Event)> {
    if message.len() < HEADER {
        return None;
    }
    let id = u32::from_be_bytes([message[1], message[2], message[3], message[4]]);
    let payload = message.slice(HEADER..);
    let event = match message[0] {
        DATA => Event::Data(payload),
        CLOSE => Event::Closed,
        ERROR => Event::Error(String::from_utf8_lossy(&payload).into_owned()),
        _ => return None,
    };
    Some((id, event))
}

/// One connection's news from the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// Bytes from the pod.
    Data(Bytes),
    /// The pod closed its side: the connection is over.
    Closed,
    /// The connection could not be made, and why.
    Error(String),
}

type Conns = Arc<Mutex<HashMap<u32, mpsc::Sender<Event>>>>;

/// An open WebSocket to the node, shared by a session's connections.
pub(crate) struct Link {
    out: mpsc::Sender<Bytes>,
    conns: Conns,
    next_id: AtomicU32,
    /// Cancelled once the WebSocket ended.
    ended: CancellationToken,
}

impl Link {
    /// Opens the node's WebSocket for the session's pod; a refusal comes back as its text. The link
    /// closes when `cancel` fires or the last handle to it goes.
    pub(crate) async fn open(t: &Target, token: &str, cancel: CancellationToken) -> Result<Link, String> {
        let path = format!(
            "/portForward/{}/{}",
            proxy::segment(&t.namespace),
            proxy::segment(&t.pod)
        );
        let uri = format!("wss://{}{path}", t.authority);
        let mut request = uri.into_client_request().map_err(|e| e.to_string())?;
        let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        request.headers_mut().insert(header::AUTHORIZATION, value);
        let connecting = async {
            let tls = proxy::connect(t).await.map_err(|e| e.message)?;
            match tokio_tungstenite::client_async(request, tls).await {
                Ok((socket, _)) => Ok(socket),
                Err(tungstenite::Error::Http(resp)) => {
                    let body = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default());
                    Err(proxy::node_refused(resp.status().as_u16(), body.trim()).message)
                }
                Err(e) => Err(e.to_string()),
            }
        };
        let socket = tokio::time::timeout(NODE_TIMEOUT, connecting)
            .await
            .map_err(|_| "timed out waiting for the node".to_owned())??;
        let (mut tx, mut rx) = socket.split();
        let (out, mut out_rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
        let conns = Conns::default();
        let ended = CancellationToken::new();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    message = out_rx.recv() => message,
                    () = cancel.cancelled() => None,
                };
                let Some(b) = message else { break };
                if tx.send(tungstenite::Message::Binary(b)).await.is_err() {
                    return;
                }
            }
            let _ = tx.close().await;
        });
        let reader_conns = conns.clone();
        let reader_ended = ended.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = rx.next().await {
                let b = match message {
                    tungstenite::Message::Binary(b) => b,
                    tungstenite::Message::Close(_) => break,
                    _ => continue,
                };
                let Some((id, event)) = event(&b) else { continue };
                let last = !matches!(event, Event::Data(_));
                let conn = {
                    let mut conns = reader_conns.lock().unwrap_or_else(|e| e.into_inner());
                    if last {
                        conns.remove(&id)
                    } else {
                        conns.get(&id).cloned()
                    }
                };
                if let Some(conn) = conn
                    && conn.send(event).await.is_err()
                {
                    reader_conns.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                }
            }
            // Every connection on the link sees its events end; under the lock, so none joins after.
            let mut conns = reader_conns.lock().unwrap_or_else(|e| e.into_inner());
            reader_ended.cancel();
            conns.clear();
        });
        Ok(Link {
            out,
            conns,
            next_id: AtomicU32::new(1),
            ended,
        })
    }

    /// True once the WebSocket ended: a new connection needs a new link.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Asks the node for a connection to `port`; its id and its events (`None` once the link ended).
    pub(crate) async fn connect(&self, port: u16) -> (u32, mpsc::Receiver<Event>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(CONN_QUEUE);
        {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            // Once the link ended, `tx` is dropped here and the connection sees its events end.
            if !self.is_ended() {
                conns.insert(id, tx);
            }
        }
        self.send(OPEN, id, &port.to_be_bytes()).await;
        (id, rx)
    }

    /// Queues a message for the node; false once the link is gone.
    pub(crate) async fn send(&self, op: u8, id: u32, payload: &[u8]) -> bool {
        self.out.send(encode(op, id, payload)).await.is_ok()
    }

    /// Ends connection `id` on the node (the client went away) and forgets it.
    pub(crate) async fn close(&self, id: u32) {
        self.forget(id);
        self.send(CLOSE, id, &[]).await;
    }

    /// Forgets connection `id` (it ended).
    pub(crate) fn forget(&self, id: u32) {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }
}
