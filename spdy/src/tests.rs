use super::*;

fn h(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn decode_all(codec: &mut Codec, bytes: &[u8]) -> Result<Vec<Frame>, Error> {
    let mut buf = BytesMut::from(bytes);
    let mut frames = Vec::new();
    while let Some(f) = codec.decode(&mut buf)? {
        frames.push(f);
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    Ok(frames)
}

#[test]
fn the_dictionary_is_the_spdy3_one() {
    let d = dictionary::SPDY3_DICTIONARY;
    assert_eq!(d.len(), 1423);
    // Adler-32 as zlib computes it; SPDY draft 3 gives 0xe3c6a7c2.
    let (mut a, mut b) = (1u32, 0u32);
    for &x in d {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!((b << 16) | a, 0xe3c6_a7c2);
}

#[test]
fn control_frames_have_the_wire_bytes_of_the_spec() {
    let cases: Vec<(Frame, Vec<u8>)> = vec![
        (
            Frame::Ping { id: 1 },
            vec![0x80, 0x03, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1],
        ),
        (
            Frame::RstStream {
                stream_id: 3,
                status: rst::CANCEL,
            },
            vec![0x80, 0x03, 0x00, 0x03, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 5],
        ),
        (
            Frame::GoAway {
                last_good_stream_id: 7,
                status: goaway::OK,
            },
            vec![0x80, 0x03, 0x00, 0x07, 0, 0, 0, 8, 0, 0, 0, 7, 0, 0, 0, 0],
        ),
        (
            Frame::Data {
                stream_id: 5,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hi"),
            },
            vec![0, 0, 0, 5, 0x01, 0, 0, 2, b'h', b'i'],
        ),
        (
            Frame::Settings {
                flags: 0,
                entries: vec![(0x0100_0007, 1000)],
            },
            vec![
                0x80, 0x03, 0x00, 0x04, 0, 0, 0, 12, 0, 0, 0, 1, 0x01, 0, 0, 7, 0, 0, 0x03, 0xe8,
            ],
        ),
        (
            Frame::WindowUpdate {
                stream_id: 1,
                delta: 65536,
            },
            vec![0x80, 0x03, 0x00, 0x09, 0, 0, 0, 8, 0, 0, 0, 1, 0, 1, 0, 0],
        ),
    ];
    for (frame, bytes) in cases {
        let mut out = BytesMut::new();
        Codec::new().encode(&frame, &mut out).unwrap();
        assert_eq!(&out[..], &bytes[..], "encoding {frame:?}");
        assert_eq!(decode_all(&mut Codec::new(), &bytes).unwrap(), vec![frame]);
    }
}

#[test]
fn header_frames_round_trip_through_one_zlib_stream_per_direction() {
    // The client's codec encodes, the server's decodes: several blocks share the zlib state.
    let mut client = Codec::new();
    let mut server = Codec::new();
    let frames: Vec<Frame> = (0..5)
        .flat_map(|i| {
            let request = i.to_string();
            ["error", "data"]
                .into_iter()
                .enumerate()
                .map(move |(k, kind)| Frame::SynStream {
                    stream_id: 4 * i + 2 * k as u32 + 1,
                    associated_to: 0,
                    priority: 0,
                    flags: 0,
                    headers: h(&[("streamtype", kind), ("port", "8080"), ("requestid", &request)]),
                })
        })
        .chain([
            Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: Headers::new(),
            },
            Frame::Headers {
                stream_id: 1,
                flags: FLAG_FIN,
                headers: h(&[("a", "b\0c")]),
            },
        ])
        .collect();
    let mut wire = BytesMut::new();
    for f in &frames {
        client.encode(f, &mut wire).unwrap();
    }
    assert_eq!(decode_all(&mut server, &wire).unwrap(), frames);
}

#[test]
fn frames_split_into_tiny_pieces_decode_once_whole() {
    // kubectl's WebSocket tunnel writes each field as its own message: bytes arrive 2 to 4 at a time.
    let mut client = Codec::new();
    let mut wire = BytesMut::new();
    let syn = Frame::SynStream {
        stream_id: 1,
        associated_to: 0,
        priority: 0,
        flags: 0,
        headers: h(&[("streamtype", "data"), ("port", "80"), ("requestid", "0")]),
    };
    client.encode(&syn, &mut wire).unwrap();
    client.encode(&Frame::Ping { id: 1 }, &mut wire).unwrap();
    let mut server = Codec::new();
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for piece in wire.chunks(3) {
        buf.extend_from_slice(piece);
        while let Some(f) = server.decode(&mut buf).unwrap() {
            got.push(f);
        }
    }
    assert_eq!(got, vec![syn, Frame::Ping { id: 1 }]);
}

#[test]
fn malformed_frames_are_errors() {
    let cases: Vec<(&str, Vec<u8>, Error)> = vec![
        (
            "spdy/2",
            vec![0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1],
            Error::UnsupportedVersion(2),
        ),
        (
            "short ping",
            vec![0x80, 0x03, 0x00, 0x06, 0, 0, 0, 2, 0, 1],
            malformed("PING", "wrong payload length"),
        ),
        (
            "rst on stream 0",
            vec![0x80, 0x03, 0x00, 0x03, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 5],
            malformed("RST_STREAM", "stream id 0"),
        ),
        (
            "data on stream 0",
            vec![0, 0, 0, 0, 0, 0, 0, 1, b'x'],
            malformed("DATA", "stream id 0"),
        ),
        (
            "short syn_stream",
            vec![0x80, 0x03, 0x00, 0x01, 0, 0, 0, 4, 0, 0, 0, 1],
            malformed("SYN_STREAM", "payload too short"),
        ),
        (
            "settings count lies",
            vec![0x80, 0x03, 0x00, 0x04, 0, 0, 0, 4, 0, 0, 0, 9],
            malformed("SETTINGS", "entry count does not match the length"),
        ),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(decode_all(&mut Codec::new(), &bytes).unwrap_err(), want, "{name}");
    }
    // A header block that is not zlib at all.
    let mut bad = vec![0x80, 0x03, 0x00, 0x01, 0, 0, 0, 14, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    bad.extend_from_slice(b"junk");
    assert!(matches!(
        decode_all(&mut Codec::new(), &bad).unwrap_err(),
        Error::Compression(_)
    ));
}

#[test]
fn unknown_control_frames_are_skipped() {
    let noop = [0x80, 0x03, 0x00, 0x05, 0, 0, 0, 0];
    assert_eq!(
        decode_all(&mut Codec::new(), &noop).unwrap(),
        vec![Frame::Unknown { frame_type: 5 }]
    );
}

#[test]
fn header_blocks_are_checked_as_spdystream_checks_them() {
    let block = |pairs: &[(&[u8], &[u8])]| {
        let mut b = (pairs.len() as u32).to_be_bytes().to_vec();
        for (n, v) in pairs {
            b.extend_from_slice(&(n.len() as u32).to_be_bytes());
            b.extend_from_slice(n);
            b.extend_from_slice(&(v.len() as u32).to_be_bytes());
            b.extend_from_slice(v);
        }
        b
    };
    let cases: Vec<(&str, Vec<u8>, Result<Headers, Error>)> = vec![
        ("empty", block(&[]), Ok(vec![])),
        ("one", block(&[(b"port", b"80")]), Ok(h(&[("port", "80")]))),
        (
            "uppercase",
            block(&[(b"Port", b"80")]),
            Err(Error::InvalidHeaders("uppercase header name")),
        ),
        (
            "duplicate",
            block(&[(b"port", b"80"), (b"port", b"81")]),
            Err(Error::InvalidHeaders("duplicate header name")),
        ),
        (
            "empty name",
            block(&[(b"", b"x")]),
            Err(Error::InvalidHeaders("empty header name")),
        ),
        (
            "count lies",
            vec![0xff, 0xff, 0xff, 0xff],
            Err(Error::InvalidHeaders("more pairs than bytes")),
        ),
        (
            "truncated",
            vec![0, 0, 0, 1, 0, 0, 0, 9, b'a', 0, 0, 0, 0],
            Err(Error::InvalidHeaders("truncated name or value")),
        ),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(parse_header_block(&bytes), want, "{name}");
    }
}

#[test]
fn data_frames_larger_than_24_bits_are_refused() {
    let big = vec![0u8; MAX_PAYLOAD + 1];
    assert_eq!(
        encode_data(1, 0, &big, &mut BytesMut::new()).unwrap_err(),
        Error::TooLarge(MAX_PAYLOAD + 1)
    );
}
