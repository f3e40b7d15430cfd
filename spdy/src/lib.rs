//! The subset of SPDY/3.1 that Kubernetes port-forward speaks (kubectl's client is moby/spdystream):
//! frame encoding and decoding, and the zlib-compressed header blocks. No I/O: a session feeds bytes in
//! with [`Codec::decode`] and writes what [`Codec::encode`] produces, over a TLS connection (the plain
//! `Upgrade: SPDY/3.1`) or inside WebSocket binary messages (kubectl 1.31+'s tunnel).
//!
//! ```text
//! bytes ──► Codec::decode ──► Frame (header blocks inflated, in arrival order) ──► the session
//! Frame ──► Codec::encode ──► bytes (header blocks deflated with a sync flush)
//! ```
//!
//! Each direction has one zlib stream for the whole session, primed with the SPDY/3 dictionary, so a
//! codec must see every header block in order (even those of streams the session rejects). A decoding
//! error leaves the codec unusable: the session that owns it ends, and only that one.

mod dictionary;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The SPDY version this crate speaks.
pub const VERSION: u16 = 3;

/// Flag on SYN_STREAM, SYN_REPLY, HEADERS and DATA: the sender's last frame on the stream.
pub const FLAG_FIN: u8 = 0x01;
/// Flag on SYN_STREAM: the receiver may not send on the stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;

/// RST_STREAM status codes (SPDY/3 §2.4.2).
pub mod rst {
    /// PROTOCOL_ERROR.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// INVALID_STREAM: a frame for a stream that is not active.
    pub const INVALID_STREAM: u32 = 2;
    /// REFUSED_STREAM.
    pub const REFUSED_STREAM: u32 = 3;
    /// CANCEL: the sender no longer wants the stream (spdystream's `Reset`).
    pub const CANCEL: u32 = 5;
    /// INTERNAL_ERROR.
    pub const INTERNAL_ERROR: u32 = 6;
    /// STREAM_IN_USE: a SYN_STREAM for a stream that is already open.
    pub const STREAM_IN_USE: u32 = 8;
}

/// GOAWAY status codes.
pub mod goaway {
    /// OK: a normal end.
    pub const OK: u32 = 0;
    /// PROTOCOL_ERROR: the peer sent something this side could not accept.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// INTERNAL_ERROR.
    pub const INTERNAL_ERROR: u32 = 2;
}

/// The largest payload a frame's 24-bit length can describe.
pub const MAX_PAYLOAD: usize = (1 << 24) - 1;

/// The most an inflated header block may hold; a larger one is refused (a zlib bomb, or not SPDY).
const MAX_HEADER_BLOCK: usize = 256 * 1024;

/// Header pairs, names lowercase as on the wire; several values of one name are joined with NUL.
pub type Headers = Vec<(String, String)>;

/// One SPDY frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a stream (type 1).
    SynStream {
        /// The new stream; odd when the client opens it.
        stream_id: u32,
        /// The stream this one belongs to (0 for none).
        associated_to: u32,
        /// 0 (highest) to 7.
        priority: u8,
        /// [`FLAG_FIN`], [`FLAG_UNIDIRECTIONAL`].
        flags: u8,
        /// The stream's headers.
        headers: Headers,
    },
    /// Accepts a stream (type 2).
    SynReply {
        /// The accepted stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// Reply headers.
        headers: Headers,
    },
    /// Ends a stream abnormally (type 3).
    RstStream {
        /// The stream.
        stream_id: u32,
        /// One of [`rst`].
        status: u32,
    },
    /// Session settings (type 4); port-forward peers ignore them.
    Settings {
        /// Frame flags.
        flags: u8,
        /// `(flags << 24 | id, value)` pairs.
        entries: Vec<(u32, u32)>,
    },
    /// A liveness check (type 6), echoed unchanged by the receiver.
    Ping {
        /// Odd from the client, even from the server.
        id: u32,
    },
    /// Ends the session (type 7).
    GoAway {
        /// The last stream the sender processed.
        last_good_stream_id: u32,
        /// One of [`goaway`].
        status: u32,
    },
    /// More headers for a stream (type 8).
    Headers {
        /// The stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The headers.
        headers: Headers,
    },
    /// Flow control (type 9); spdystream neither sends nor honours it.
    WindowUpdate {
        /// The stream.
        stream_id: u32,
        /// The window increase.
        delta: u32,
    },
    /// Stream data.
    Data {
        /// The stream.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The payload.
        data: Bytes,
    },
    /// A control frame of a type this subset does not know (NOOP, CREDENTIAL): skipped, as the spec asks.
    Unknown {
        /// Its type.
        frame_type: u16,
    },
}

/// Why bytes could not be decoded or a frame encoded. Any of these ends the session.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A control frame of another SPDY version.
    #[error("unsupported SPDY version {0}")]
    UnsupportedVersion(u16),
    /// A frame whose fields do not fit its type.
    #[error("malformed {frame} frame: {reason}")]
    Malformed {
        /// The frame type's name.
        frame: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A header block that does not inflate or deflate.
    #[error("header block compression: {0}")]
    Compression(String),
    /// A header block that inflates but does not parse.
    #[error("invalid header block: {0}")]
    InvalidHeaders(&'static str),
    /// A frame too big for the 24-bit length.
    #[error("frame payload of {0} bytes exceeds the SPDY limit")]
    TooLarge(usize),
}

/// One session's frame codec: a deflate stream for what it encodes and an inflate stream for what it
/// decodes, both primed with the SPDY/3 dictionary.
pub struct Codec {
    deflate: Compress,
    inflate: Decompress,
}

impl Default for Codec {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec").finish_non_exhaustive()
    }
}

const CONTROL_BIT: u32 = 0x8000_0000;
const STREAM_ID_MASK: u32 = 0x7fff_ffff;
const HEADER_LEN: usize = 8;

fn malformed(frame: &'static str, reason: &'static str) -> Error {
    Error::Malformed { frame, reason }
}

fn type_name(t: u16) -> &'static str {
    match t {
        1 => "SYN_STREAM",
        2 => "SYN_REPLY",
        3 => "RST_STREAM",
        4 => "SETTINGS",
        6 => "PING",
        7 => "GOAWAY",
        8 => "HEADERS",
        9 => "WINDOW_UPDATE",
        _ => "control",
    }
}

fn nonzero_stream(frame: &'static str, id: u32) -> Result<u32, Error> {
    let id = id & STREAM_ID_MASK;
    if id == 0 {
        Err(malformed(frame, "stream id 0"))
    } else {
        Ok(id)
    }
}

impl Codec {
    /// A codec for a new session.
    pub fn new() -> Self {
        let mut deflate = Compress::new(Compression::default(), true);
        // Setting the dictionary before the first byte makes the zlib header announce it (FDICT).
        deflate
            .set_dictionary(dictionary::SPDY3_DICTIONARY)
            .expect("a fresh deflate stream accepts a dictionary");
        Codec {
            deflate,
            inflate: Decompress::new(true),
        }
    }

    /// Takes one whole frame off the front of `buf`, or `None` until more bytes arrive.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, Error> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let length = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
        if buf.len() < HEADER_LEN + length {
            buf.reserve(HEADER_LEN + length - buf.len());
            return Ok(None);
        }
        let first = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let flags = buf[4];
        buf.advance(HEADER_LEN);
        let mut payload = buf.split_to(length).freeze();
        if first & CONTROL_BIT == 0 {
            let stream_id = nonzero_stream("DATA", first)?;
            return Ok(Some(Frame::Data {
                stream_id,
                flags,
                data: payload,
            }));
        }
        let version = ((first >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(Error::UnsupportedVersion(version));
        }
        let frame_type = (first & 0xffff) as u16;
        let name = type_name(frame_type);
        let exact = |n: usize| {
            if length == n {
                Ok(())
            } else {
                Err(malformed(name, "wrong payload length"))
            }
        };
        let at_least = |n: usize| {
            if length >= n {
                Ok(())
            } else {
                Err(malformed(name, "payload too short"))
            }
        };
        let frame = match frame_type {
            1 => {
                at_least(10)?;
                let stream_id = nonzero_stream(name, payload.get_u32())?;
                let associated_to = payload.get_u32() & STREAM_ID_MASK;
                let priority = payload.get_u8() >> 5;
                payload.advance(1);
                let headers = self.inflate_headers(&payload)?;
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    flags,
                    headers,
                }
            }
            2 | 8 => {
                at_least(4)?;
                let stream_id = nonzero_stream(name, payload.get_u32())?;
                let headers = self.inflate_headers(&payload)?;
                if frame_type == 2 {
                    Frame::SynReply {
                        stream_id,
                        flags,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        flags,
                        headers,
                    }
                }
            }
            3 => {
                exact(8)?;
                let stream_id = nonzero_stream(name, payload.get_u32())?;
                Frame::RstStream {
                    stream_id,
                    status: payload.get_u32(),
                }
            }
            4 => {
                at_least(4)?;
                let count = payload.get_u32() as usize;
                if payload.len() != count.saturating_mul(8) {
                    return Err(malformed(name, "entry count does not match the length"));
                }
                let entries = (0..count)
                    .map(|_| (payload.get_u32(), payload.get_u32()))
                    .collect();
                Frame::Settings { flags, entries }
            }
            6 => {
                exact(4)?;
                Frame::Ping {
                    id: payload.get_u32(),
                }
            }
            7 => {
                exact(8)?;
                Frame::GoAway {
                    last_good_stream_id: payload.get_u32() & STREAM_ID_MASK,
                    status: payload.get_u32(),
                }
            }
            9 => {
                exact(8)?;
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                Frame::WindowUpdate {
                    stream_id,
                    delta: payload.get_u32() & STREAM_ID_MASK,
                }
            }
            other => Frame::Unknown { frame_type: other },
        };
        Ok(Some(frame))
    }

    /// Appends `frame`'s bytes to `out`.
    pub fn encode(&mut self, frame: &Frame, out: &mut BytesMut) -> Result<(), Error> {
        let control = |out: &mut BytesMut, frame_type: u16, flags: u8, payload: &[u8]| {
            if payload.len() > MAX_PAYLOAD {
                return Err(Error::TooLarge(payload.len()));
            }
            out.put_u32(CONTROL_BIT | (u32::from(VERSION) << 16) | u32::from(frame_type));
            out.put_u32((u32::from(flags) << 24) | payload.len() as u32);
            out.put_slice(payload);
            Ok(())
        };
        match frame {
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                flags,
                headers,
            } => {
                let mut p = BytesMut::new();
                p.put_u32(stream_id & STREAM_ID_MASK);
                p.put_u32(associated_to & STREAM_ID_MASK);
                p.put_u8(priority << 5);
                p.put_u8(0);
                p.extend_from_slice(&self.deflate_headers(headers)?);
                control(out, 1, *flags, &p)
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
            | Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                let frame_type = if matches!(frame, Frame::SynReply { .. }) {
                    2
                } else {
                    8
                };
                let mut p = BytesMut::new();
                p.put_u32(stream_id & STREAM_ID_MASK);
                p.extend_from_slice(&self.deflate_headers(headers)?);
                control(out, frame_type, *flags, &p)
            }
            Frame::RstStream { stream_id, status } => {
                encode_rst_stream(*stream_id, *status, out);
                Ok(())
            }
            Frame::Settings { flags, entries } => {
                let mut p = BytesMut::new();
                p.put_u32(entries.len() as u32);
                for (id, value) in entries {
                    p.put_u32(*id);
                    p.put_u32(*value);
                }
                control(out, 4, *flags, &p)
            }
            Frame::Ping { id } => control(out, 6, 0, &id.to_be_bytes()),
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                let mut p = [0u8; 8];
                p[..4].copy_from_slice(&(last_good_stream_id & STREAM_ID_MASK).to_be_bytes());
                p[4..].copy_from_slice(&status.to_be_bytes());
                control(out, 7, 0, &p)
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut p = [0u8; 8];
                p[..4].copy_from_slice(&(stream_id & STREAM_ID_MASK).to_be_bytes());
                p[4..].copy_from_slice(&(delta & STREAM_ID_MASK).to_be_bytes());
                control(out, 9, 0, &p)
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                encode_data(*stream_id, *flags, data, out)?;
                Ok(())
            }
            Frame::Unknown { .. } => Err(malformed("control", "cannot encode an unknown frame")),
        }
    }

    fn inflate_headers(&mut self, block: &[u8]) -> Result<Headers, Error> {
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        let mut input = block;
        loop {
            if out.capacity() - out.len() < 1024 {
                out.reserve(out.capacity().max(1024));
            }
            let before_in = self.inflate.total_in();
            let before_out = out.len();
            let result = self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            let consumed = (self.inflate.total_in() - before_in) as usize;
            input = &input[consumed..];
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary::SPDY3_DICTIONARY)
                        .map_err(|e| Error::Compression(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(Error::Compression(e.to_string())),
            }
            if out.len() > MAX_HEADER_BLOCK {
                return Err(Error::InvalidHeaders("header block too large"));
            }
            // Done when all input is consumed and the inflater has nothing more to give.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
            if consumed == 0 && out.len() == before_out {
                return Err(Error::Compression("inflate made no progress".to_owned()));
            }
        }
        parse_header_block(&out)
    }

    fn deflate_headers(&mut self, headers: &Headers) -> Result<Vec<u8>, Error> {
        let raw = header_block(headers);
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = raw.as_slice();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let before_in = self.deflate.total_in();
            self.deflate
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| Error::Compression(e.to_string()))?;
            input = &input[(self.deflate.total_in() - before_in) as usize..];
            // A sync flush is complete when the output buffer was not filled.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Appends a DATA frame (no compression state needed, so any task may write one).
pub fn encode_data(stream_id: u32, flags: u8, data: &[u8], out: &mut BytesMut) -> Result<(), Error> {
    if data.len() > MAX_PAYLOAD {
        return Err(Error::TooLarge(data.len()));
    }
    if stream_id & STREAM_ID_MASK == 0 {
        return Err(malformed("DATA", "stream id 0"));
    }
    out.reserve(HEADER_LEN + data.len());
    out.put_u32(stream_id & STREAM_ID_MASK);
    out.put_u32((u32::from(flags) << 24) | data.len() as u32);
    out.put_slice(data);
    Ok(())
}

/// Appends a RST_STREAM frame (no compression state needed either).
pub fn encode_rst_stream(stream_id: u32, status: u32, out: &mut BytesMut) {
    out.put_u32(CONTROL_BIT | (u32::from(VERSION) << 16) | 3);
    out.put_u32(8);
    out.put_u32(stream_id & STREAM_ID_MASK);
    out.put_u32(status);
}

/// The uncompressed header block: a count, then length-prefixed names and values (SPDY/3 §2.6.10).
fn header_block(headers: &Headers) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    for (name, value) in headers {
        b.extend_from_slice(&(name.len() as u32).to_be_bytes());
        b.extend_from_slice(name.to_ascii_lowercase().as_bytes());
        b.extend_from_slice(&(value.len() as u32).to_be_bytes());
        b.extend_from_slice(value.as_bytes());
    }
    b
}

/// Parses an inflated header block as spdystream does: names non-empty, lowercase and unique.
fn parse_header_block(mut b: &[u8]) -> Result<Headers, Error> {
    fn take<'a>(b: &mut &'a [u8]) -> Result<&'a [u8], Error> {
        if b.len() < 4 {
            return Err(Error::InvalidHeaders("truncated length"));
        }
        let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if b.len() - 4 < n {
            return Err(Error::InvalidHeaders("truncated name or value"));
        }
        let (s, rest) = b[4..].split_at(n);
        *b = rest;
        Ok(s)
    }
    if b.len() < 4 {
        return Err(Error::InvalidHeaders("truncated count"));
    }
    let count = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    b = &b[4..];
    // Each pair takes at least 8 bytes: a count beyond that is a lie, not an allocation request.
    if count > b.len() / 8 {
        return Err(Error::InvalidHeaders("more pairs than bytes"));
    }
    let mut headers: Headers = Vec::with_capacity(count);
    for _ in 0..count {
        let name = take(&mut b)?;
        let value = take(&mut b)?;
        if name.is_empty() {
            return Err(Error::InvalidHeaders("empty header name"));
        }
        if name.iter().any(u8::is_ascii_uppercase) {
            return Err(Error::InvalidHeaders("uppercase header name"));
        }
        let name = String::from_utf8(name.to_vec()).map_err(|_| Error::InvalidHeaders("name not utf-8"))?;
        if headers.iter().any(|(n, _)| *n == name) {
            return Err(Error::InvalidHeaders("duplicate header name"));
        }
        let value = String::from_utf8_lossy(value).into_owned();
        headers.push((name, value));
    }
    if !b.is_empty() {
        return Err(Error::InvalidHeaders("trailing bytes"));
    }
    Ok(headers)
}

/// The value of header `name` (lowercase).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests;
