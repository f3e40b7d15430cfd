//! The messages of a port-forward session between the API server and the node agent: every WebSocket
//! binary message is `[op u8][connection id u32 BE][payload]`. The API server numbers connections (never
//! reusing a number in a session); the ops:
//!
//! | op        | from       | payload       | meaning                                                   |
//! |-----------|------------|---------------|-----------------------------------------------------------|
//! | 1 OPEN    | API server | port, u16 BE  | connect to this port of the pod                           |
//! | 2 DATA    | both       | bytes         | bytes of the connection                                   |
//! | 3 FIN     | API server | —             | the client will send no more (the pod socket's write side is shut down) |
//! | 4 CLOSE   | both       | —             | the connection is over (client reset, or the pod closed its side) |
//! | 5 ERROR   | node       | text          | the connection could not be made; it is over              |
//!
//! DATA may follow OPEN at once: the node queues it until the dial is done.

use bytes::{BufMut, Bytes, BytesMut};

/// Connect to a port.
pub const OPEN: u8 = 1;
/// Bytes of a connection.
pub const DATA: u8 = 2;
/// The client half-closed.
pub const FIN: u8 = 3;
/// The connection is over.
pub const CLOSE: u8 = 4;
/// The dial failed, with its text.
pub const ERROR: u8 = 5;

/// The header's length: op and connection id.
pub const HEADER: usize = 5;

/// The message `op` for connection `id` with `payload`.
pub fn encode(op: u8, id: u32, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER + payload.len());
    b.put_u8(op);
    b.put_u32(id);
    b.put_slice(payload);
    b.freeze()
}

/// A message's op, connection id and payload; `None` for one shorter than the header.
pub fn decode(message: &Bytes) -> Option<(u8, u32, Bytes)> {
    if message.len() < HEADER {
        return None;
    }
    let id = u32::from_be_bytes([message[1], message[2], message[3], message[4]]);
    Some((message[0], id, message.slice(HEADER..)))
}

/// OPEN's payload as a port; `None` unless it is two bytes naming a port above 0.
pub fn open_port(payload: &[u8]) -> Option<u16> {
    let port = u16::from_be_bytes(payload.try_into().ok()?);
    (port > 0).then_some(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_short_ones_are_refused() {
        let m = encode(DATA, 0x0102_0304, b"hi");
        assert_eq!(&m[..], &[DATA, 1, 2, 3, 4, b'h', b'i']);
        assert_eq!(decode(&m), Some((DATA, 0x0102_0304, Bytes::from_static(b"hi"))));
        assert_eq!(decode(&encode(FIN, 7, &[])), Some((FIN, 7, Bytes::new())));
        assert_eq!(decode(&Bytes::from_static(&[OPEN, 0, 0, 1])), None);
    }

    #[test]
    fn open_names_a_port_above_zero() {
        assert_eq!(open_port(&8080u16.to_be_bytes()), Some(8080));
        assert_eq!(open_port(&[0, 0]), None);
        assert_eq!(open_port(&[1]), None);
        assert_eq!(open_port(&[0, 80, 0]), None);
    }
}
