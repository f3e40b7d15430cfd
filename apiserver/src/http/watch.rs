//! Watch streams: one compact JSON event per line over a chunked 200 response (reference §4).
//!
//! Each watch gets a task that owns its hub [`Subscription`](crate::watch::Subscription) and feeds the
//! response body through a small channel. A client that stops reading fills that channel, then its hub
//! channel, and is cut off with an in-stream 410; a client that disconnects ends the task at once, which drops
//! the subscription and so unregisters it.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::request::{Format, parse_bool};
use super::{Query, ServerState, selection};
use crate::error::ApiError;
use crate::registry::{ResourceInfo, Selection};
use crate::storage::{Stored, WatchFrom, WatchStart};
use crate::table::IncludeObject;
use crate::watch::{Event, EventType, Next};

/// How often an idle watch that allows bookmarks gets one (upstream's cacher: about once a minute).
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

/// How often an idle watch stream gets an empty line. hyper notices a client that hung up only when it
/// writes, so without this a watcher whose connection closed would stay registered until the next event.
/// Deliberate difference from upstream (Go's server sees the hang-up itself); every client skips blank
/// lines: kube-rs ignores them as EOF parse errors, client-go's JSON framer skips whitespace, and the
/// Python client's `iter_resp_lines` drops empty lines.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);

struct Encoder {
    info: &'static ResourceInfo,
    format: Format,
    include: IncludeObject,
    columns_sent: bool,
}

impl Encoder {
    fn event(&mut self, kind: &str, obj: &Stored) -> Bytes {
        let mut out = Vec::with_capacity(obj.bytes.len() + 40);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        match self.format {
            Format::Json => out.extend_from_slice(&obj.bytes),
            // Each event's object is a PartialObjectMetadata, whichever of the two kinds was asked for.
            Format::Metadata { version, .. } => out.extend_from_slice(&crate::encode::to_vec(
                &super::request::partial_object_metadata(&obj.value(), version),
            )),
            Format::Table => {
                let t = super::to_table(
                    self.info,
                    &[&obj.value()],
                    &obj.revision.to_string(),
                    None,
                    jiff::Timestamp::now(),
                    self.include,
                    !self.columns_sent,
                );
                self.columns_sent = true;
                out.extend_from_slice(&crate::encode::to_vec(&t));
            }
        }
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark(&self, revision: u64, initial_events_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        // kind/apiVersion are required: kube-rs and client-go reject a bookmark without them.
        let obj = match self.format {
            Format::Metadata { version, .. } => json!({"kind": "PartialObjectMetadata",
                "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta}),
            _ => json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta}),
        };
        line("BOOKMARK", &obj)
    }
}

/// One event line: `{"type":...,"object":...}` in upstream's order.
fn line(kind: &str, obj: &Value) -> Bytes {
    let mut out = format!("{{\"type\":\"{kind}\",\"object\":").into_bytes();
    out.extend_from_slice(&crate::encode::to_vec(obj));
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn error_event(e: &ApiError) -> Bytes {
    line("ERROR", &e.to_status())
}

struct Watcher {
    enc: Encoder,
    sel: Selection,
    tx: mpsc::Sender<Bytes>,
}

impl Watcher {
    /// Send one line; false when the client has gone.
    async fn send(&self, b: Bytes) -> bool {
        self.tx.send(b).await.is_ok()
    }

    /// Upstream's `convertToWatchEvent`: an object entering the selection is ADDED, leaving it is DELETED.
    async fn event(&mut self, ev: &Event) -> bool {
        let info = self.enc.info;
        let now = self.sel.matches(info, &*ev.object);
        let before = ev.previous.as_ref().is_some_and(|p| self.sel.matches(info, &**p));
        let out = match ev.kind {
            EventType::Added if now => Some(self.enc.event("ADDED", &ev.object)),
            EventType::Deleted if now || before => Some(self.enc.event("DELETED", &ev.object)),
            EventType::Modified => match (before, now) {
                (true, true) => Some(self.enc.event("MODIFIED", &ev.object)),
                (false, true) => Some(self.enc.event("ADDED", &ev.object)),
                (true, false) => {
                    let prev = ev.previous.as_ref().expect("matched, so present");
                    let last = Stored::new(ev.revision, prev.value());
                    Some(self.enc.event("DELETED", &last))
                }
                (false, false) => None,
            },
            _ => None,
        };
        match out {
            Some(b) => self.send(b).await,
            None => true,
        }
    }
}

/// Serve a watch of a collection (or of one named object).
pub fn serve(
    st: &ServerState,
    info: &'static ResourceInfo,
    ns: Option<&str>,
    name: Option<&str>,
    query: &Query,
    format: Format,
) -> Result<Response, ApiError> {
    let sel = selection(info, query, name)?;
    let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
    let allow_bookmarks = query.flag("allowWatchBookmarks")?;
    let send_initial = match query.get("sendInitialEvents").filter(|s| !s.is_empty()) {
        None => None,
        Some(v) => Some(
            parse_bool(v)
                .ok_or_else(|| ApiError::bad_request(format!("invalid sendInitialEvents: {v:?}")))?,
        ),
    };
    let rv_match = query.get("resourceVersionMatch").filter(|s| !s.is_empty());
    match (send_initial, rv_match) {
        (None, Some(_)) => {
            return Err(ApiError::unprocessable(
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is \
                 forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        (Some(_), m) if m != Some("NotOlderThan") => {
            return Err(ApiError::unprocessable(
                "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \
                 sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        _ => {}
    }
    let rv = query.get("resourceVersion").filter(|s| !s.is_empty());
    let rv_num = match rv {
        None => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")))?,
        ),
    };
    let timeout = match query.int("timeoutSeconds")? {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        // Upstream: a random duration in [minRequestTimeout, 2*minRequestTimeout), minRequestTimeout = 1800s.
        _ => Duration::from_secs(rand::rng().random_range(1800..3600)),
    };
    let (from, initial, end_bookmark) = match (send_initial, rv_num) {
        (Some(true), _) => (WatchFrom::Now, true, allow_bookmarks),
        (Some(false), Some(n)) if n > 0 => (WatchFrom::After(n), false, false),
        (Some(false), _) => (WatchFrom::Now, false, false),
        (None, None | Some(0)) => (WatchFrom::Now, true, false),
        (None, Some(n)) => (WatchFrom::After(n), false, false),
    };
    let enc = Encoder {
        info,
        format,
        include,
        columns_sent: false,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    match st.registry.watch(info, ns, from) {
        Err(too_old) => {
            let e = ApiError::expired(format!(
                "too old resource version: {} ({})",
                too_old.requested, too_old.oldest
            ));
            // Upstream sends this inside a 200 stream: kube-rs relists only on an in-stream 410.
            let _ = tx.try_send(error_event(&e));
        }
        Ok(start) => {
            let watcher = Watcher { enc, sel, tx };
            let opts = Opts {
                initial,
                end_bookmark,
                allow_bookmarks,
                timeout,
            };
            tokio::spawn(run(watcher, start, opts, st.cancel.clone()));
        }
    }
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

struct Opts {
    initial: bool,
    end_bookmark: bool,
    allow_bookmarks: bool,
    timeout: Duration,
}

async fn run(mut w: Watcher, start: WatchStart, opts: Opts, cancel: CancellationToken) {
    let WatchStart {
        initial,
        replay,
        revision,
        mut subscription,
    } = start;
    if opts.initial {
        for obj in &initial {
            let obj = &crate::registry::view(w.enc.info, obj);
            if w.sel.matches(w.enc.info, &**obj) {
                let line = w.enc.event("ADDED", obj);
                if !w.send(line).await {
                    return;
                }
            }
        }
    }
    if opts.end_bookmark && !w.send(w.enc.bookmark(revision, true)).await {
        return;
    }
    for ev in &replay {
        if !w.event(ev).await {
            return;
        }
    }
    let mut last = revision;
    // None: beyond what the clock can hold (`timeoutSeconds` near i64::MAX), so no timeout at all.
    let deadline = tokio::time::Instant::now().checked_add(opts.timeout);
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL);
    let mut heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + HEARTBEAT_INTERVAL,
        HEARTBEAT_INTERVAL,
    );
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = w.tx.closed() => return,
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                if opts.allow_bookmarks {
                    let rev = subscription.caught_up_revision().unwrap_or(last);
                    w.send(w.enc.bookmark(rev, false)).await;
                }
                return;
            }
            _ = heartbeat.tick() => {
                if !w.send(Bytes::from_static(b"\n")).await {
                    return;
                }
            }
            _ = ticker.tick(), if opts.allow_bookmarks => {
                if let Some(rev) = subscription.caught_up_revision()
                    && !w.send(w.enc.bookmark(rev, false)).await
                {
                    return;
                }
            }
            next = subscription.next() => match next {
                Next::Event(ev) => {
                    heartbeat.reset();
                    last = ev.revision;
                    if !w.event(&ev).await {
                        return;
                    }
                }
                Next::Overflowed => {
                    let e = ApiError::expired(format!(
                        "too old resource version: {last} (the watcher fell too far behind and was stopped)"
                    ));
                    w.send(error_event(&e)).await;
                    return;
                }
                Next::Closed => return,
            },
        }
    }
}

/// For tests and benches: how many watch tasks hold subscriptions.
pub fn watchers(st: &ServerState) -> usize {
    st.registry.storage().hub().watchers()
}
