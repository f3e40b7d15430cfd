//! The WebSocket channel protocol for port-forward (kubelet `cri/streaming/portforward/websocket.go`),
//! which kube-rs `Api::portforward` and the Python client speak: one connection per requested port,
//! channel `2i` carries the `i`th port's bytes both ways and `2i+1` its error text; the first message on
//! every channel is the port number, little-endian. The WebSocket closes once every port's connection
//! has ended.

use std::sync::Arc;

use axum::extract::ws::{self, WebSocket};
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use super::{Ctx, POD_CHECK_PERIOD, Sink, Up, forward};

/// The first message of channel `channel`: `[channel, port lo, port hi]`.
pub(crate) fn port_frame(channel: u8, port: u16) -> Bytes {
    let [lo, hi] = port.to_le_bytes();
    Bytes::from(vec![channel, lo, hi])
}

/// The message carrying `data` on `channel`. Empty payloads are never sent (Python fails on them).
pub(crate) fn channel_frame(channel: u8, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 1);
    b.put_u8(channel);
    b.put_slice(data);
    b.freeze()
}

/// The port index a client message is for: data channels only (the error channels are the server's).
pub(crate) fn data_port(channel: u8, ports: usize) -> Option<usize> {
    let index = usize::from(channel / 2);
    (channel.is_multiple_of(2) && index < ports).then_some(index)
}

struct ChannelSink {
    out: mpsc::Sender<ws::Message>,
    index: u8,
    done: mpsc::UnboundedSender<usize>,
}

impl Sink for ChannelSink {
    async fn data(&self, b: Bytes) -> bool {
        let frame = channel_frame(2 * self.index, &b);
        self.out.send(ws::Message::Binary(frame)).await.is_ok()
    }

    async fn error(&self, text: String) {
        let frame = channel_frame(2 * self.index + 1, text.as_bytes());
        let _ = self.out.send(ws::Message::Binary(frame)).await;
    }

    async fn finish(&self, _failed: bool) {
        let _ = self.done.send(usize::from(self.index));
    }
}

/// Runs one channel-protocol session for `ports`.
pub(crate) async fn session(ctx: Arc<Ctx>, socket: WebSocket, ports: Vec<u16>) {
    let (mut tx, mut rx) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<ws::Message>(64);
    let writer = async move {
        while let Some(m) = out_rx.recv().await {
            if tx.send(m).await.is_err() {
                return;
            }
        }
        let _ = tx
            .send(ws::Message::Close(Some(ws::CloseFrame {
                code: 1000,
                reason: "".into(),
            })))
            .await;
    };
    let run = async move {
        for (i, port) in ports.iter().enumerate() {
            // At most 128 ports: every channel number fits a byte.
            let data = (2 * i) as u8;
            for channel in [data, data + 1] {
                if out_tx
                    .send(ws::Message::Binary(port_frame(channel, *port)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut running: Vec<Option<mpsc::Sender<Up>>> = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let (up_tx, up_rx) = mpsc::channel(16);
            running.push(Some(up_tx));
            let sink = ChannelSink {
                out: out_tx.clone(),
                index: i as u8,
                done: done_tx.clone(),
            };
            tokio::spawn(forward(ctx.clone(), *port, sink, up_rx));
        }
        let mut tick = tokio::time::interval(POD_CHECK_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut left = ports.len();
        while left > 0 {
            tokio::select! {
                message = rx.next() => match message {
                    Some(Ok(ws::Message::Binary(b))) if b.len() > 1 => {
                        if let Some(i) = data_port(b[0], running.len())
                            && let Some(up) = &running[i]
                            && up.send(Up::Data(b.slice(1..))).await.is_err()
                        {
                            running[i] = None;
                        }
                    }
                    Some(Ok(ws::Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
                Some(i) = done_rx.recv() => {
                    running[i] = None;
                    left -= 1;
                }
                _ = tick.tick() => {
                    if ctx.pod_gone() {
                        break;
                    }
                }
                () = ctx.cancel.cancelled() => break,
            }
        }
        ctx.cancel.cancel();
    };
    tokio::join!(run, writer);
}
