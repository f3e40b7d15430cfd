use serde_json::json;
use tokio::time::Instant;

use super::channel::{channel_frame, data_port, port_frame};
use super::spdy_session::{Kind, Pairs, StreamRequest, stream_request};
use super::*;

fn headers(pairs: &[(&str, &str)]) -> spdy::Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn stream_headers_are_checked_as_the_kubelet_checks_them() {
    let ok = |kind, port: u16, id: &str| {
        Ok(StreamRequest {
            kind,
            port,
            request_id: id.to_owned(),
        })
    };
    type Case<'a> = (&'a [(&'a str, &'a str)], Result<StreamRequest, String>);
    let cases: Vec<Case> = vec![
        (
            &[("streamtype", "data"), ("port", "8080"), ("requestid", "0")],
            ok(Kind::Data, 8080, "0"),
        ),
        (
            &[("streamtype", "error"), ("port", "1"), ("requestid", "7")],
            ok(Kind::Error, 1, "7"),
        ),
        (
            &[("streamtype", "data"), ("requestid", "0")],
            Err("\"port\" header is required".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "0"), ("requestid", "0")],
            Err("port \"0\" must be > 0".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "http"), ("requestid", "0")],
            Err("unable to parse \"http\" as a port: invalid syntax".to_owned()),
        ),
        (
            &[("streamtype", "stdin"), ("port", "80"), ("requestid", "0")],
            Err("invalid stream type \"stdin\"".to_owned()),
        ),
        (
            &[("streamtype", "data"), ("port", "80")],
            Err("\"requestid\" header is required".to_owned()),
        ),
    ];
    for (h, want) in cases {
        assert_eq!(stream_request(&headers(h)), want, "{h:?}");
    }
}

#[test]
fn streams_pair_by_request_id_in_either_order() {
    let now = Instant::now();
    let req = |kind, id: &str| StreamRequest {
        kind,
        port: 80,
        request_id: id.to_owned(),
    };
    let mut pairs = Pairs::default();
    assert_eq!(pairs.add(1, &req(Kind::Error, "0"), now), Ok(None));
    assert_eq!(pairs.add(5, &req(Kind::Data, "1"), now), Ok(None));
    assert_eq!(pairs.add(3, &req(Kind::Data, "0"), now), Ok(Some((3, 1, 80))));
    assert_eq!(pairs.add(7, &req(Kind::Error, "1"), now), Ok(Some((5, 7, 80))));
    assert_eq!(pairs.add(9, &req(Kind::Data, "2"), now), Ok(None));
    assert_eq!(
        pairs.add(11, &req(Kind::Data, "2"), now),
        Err("data stream already assigned".to_owned())
    );
    assert!(pairs.expire(now + Duration::from_secs(29)).is_empty());
    let expired = pairs.expire(now + Duration::from_secs(30));
    assert_eq!(expired.len(), 1);
    assert_eq!((expired[0].0.as_str(), expired[0].1.data), ("2", Some(9)));
}

#[test]
fn ports_parse_as_the_api_parses_them() {
    assert_eq!(parse_ports(&["80,443", "8080"]).unwrap(), vec![80, 443, 8080]);
    let cases: [(&[&str], &str); 4] = [
        (&[], "query parameter \"port\" is required"),
        (&["0"], "port \"0\" must be > 0"),
        (&["http"], "unable to parse \"http\" as a port: invalid syntax"),
        (&["70000"], "unable to parse \"70000\" as a port: invalid syntax"),
    ];
    for (values, message) in cases {
        let err = parse_ports(values).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, message), "{values:?}");
    }
    let many: Vec<String> = (1..=129).map(|p: u16| p.to_string()).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(parse_ports(&many).unwrap_err().code, 400);
}

#[test]
fn the_plain_spdy_upgrade_needs_the_port_forward_protocol() {
    let mut h = HeaderMap::new();
    assert_eq!(negotiate_stream_protocol(&h).unwrap_err().code, 400);
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("v4.channel.k8s.io"),
    );
    assert_eq!(negotiate_stream_protocol(&h).unwrap_err().code, 403);
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("portforward.k8s.io"),
    );
    assert!(negotiate_stream_protocol(&h).is_ok());
    let mut h = HeaderMap::new();
    h.append(
        "x-stream-protocol-version",
        HeaderValue::from_static("v2.portforward.k8s.io, portforward.k8s.io"),
    );
    assert!(negotiate_stream_protocol(&h).is_ok());
}

#[test]
fn only_running_pods_are_forwarded_to() {
    for (phase, ok) in [
        (Some("Running"), true),
        (Some("Pending"), false),
        (Some("Succeeded"), false),
        (None, false),
    ] {
        let pod = json!({"status": {"phase": phase}});
        assert_eq!(check_running(&pod).is_ok(), ok, "{phase:?}");
    }
    let err = check_running(&json!({"status": {"phase": "Pending"}})).unwrap_err();
    assert_eq!(
        err.message,
        "unable to forward port because pod is not running. Current status=Pending"
    );
}

#[test]
fn a_session_ends_when_its_pod_is_deleted_replaced_or_finished() {
    let pod = |uid: &str, phase: &str| json!({"metadata": {"uid": uid}, "status": {"phase": phase}});
    assert!(!pod_gone(Some(&pod("u1", "Running")), "u1"));
    assert!(pod_gone(None, "u1"));
    assert!(pod_gone(Some(&pod("u2", "Running")), "u1"));
    assert!(pod_gone(Some(&pod("u1", "Succeeded")), "u1"));
    assert!(pod_gone(Some(&pod("u1", "Failed")), "u1"));
}

#[test]
fn channel_frames_carry_the_port_little_endian_first() {
    assert_eq!(&port_frame(0, 8080)[..], &[0, 0x90, 0x1f]);
    assert_eq!(&port_frame(3, 443)[..], &[3, 0xbb, 0x01]);
    assert_eq!(&channel_frame(2, b"hi")[..], &[2, b'h', b'i']);
    // Client messages are for data channels of requested ports only.
    assert_eq!(data_port(0, 2), Some(0));
    assert_eq!(data_port(2, 2), Some(1));
    assert_eq!(data_port(1, 2), None);
    assert_eq!(data_port(4, 2), None);
}
