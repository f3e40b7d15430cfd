//! events.k8s.io/v1 events are core/v1 events in storage, as upstream: one set of objects, two views.
//! An event a kubelet writes through core/v1 is listed by kube-rs's `Recorder` readers through
//! events.k8s.io/v1 and the other way round (`kubectl describe` reads core/v1).
//!
//! The conversions follow upstream `pkg/apis/events/v1` (core ↔ events field names). Deliberate difference:
//! a core event without `eventTime` gets its first (or last) timestamp as `eventTime` in the events.k8s.io
//! view, where upstream shows `null`, which clients that require the field cannot decode.

use serde_json::{Map, Value, json};

use super::resources::Alias;

/// The events.k8s.io/v1 view of core/v1 events.
pub static EVENTS_V1: Alias = Alias {
    stored_as: ("", "events"),
    from_storage: core_to_v1,
    to_storage: v1_to_core,
};

fn copy(from: &Value, to: &mut Map<String, Value>, pairs: &[(&str, &str)]) {
    for (src, dst) in pairs {
        if let Some(v) = from.get(*src).filter(|v| !v.is_null()) {
            to.insert((*dst).to_string(), v.clone());
        }
    }
}

/// `2025-01-01T12:00:00Z` as a MicroTime (`2025-01-01T12:00:00.000000Z`).
fn micro(t: &Value) -> Option<Value> {
    let s = t.as_str()?;
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(json!(ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()))
}

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn core_to_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    copy(
        core,
        &mut out,
        &[
            ("metadata", "metadata"),
            ("eventTime", "eventTime"),
            ("series", "series"),
            ("reportingComponent", "reportingController"),
            ("reportingInstance", "reportingInstance"),
            ("action", "action"),
            ("reason", "reason"),
            ("involvedObject", "regarding"),
            ("related", "related"),
            ("message", "note"),
            ("type", "type"),
            ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"),
            ("lastTimestamp", "deprecatedLastTimestamp"),
            ("count", "deprecatedCount"),
        ],
    );
    if !out.contains_key("eventTime")
        && let Some(t) = ["firstTimestamp", "lastTimestamp"]
            .iter()
            .find_map(|f| core.get(*f).and_then(micro))
            .or_else(|| core.pointer("/metadata/creationTimestamp").and_then(micro))
    {
        out.insert("eventTime".into(), t);
    }
    if let Some(series) = out.get_mut("series").and_then(Value::as_object_mut) {
        series.remove("state");
    }
    Value::Object(out)
}

/// events.k8s.io/v1 Event → core/v1 Event.
pub fn v1_to_core(ev: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    copy(
        ev,
        &mut out,
        &[
            ("metadata", "metadata"),
            ("eventTime", "eventTime"),
            ("series", "series"),
            ("reportingController", "reportingComponent"),
            ("reportingInstance", "reportingInstance"),
            ("action", "action"),
            ("reason", "reason"),
            ("regarding", "involvedObject"),
            ("related", "related"),
            ("note", "message"),
            ("type", "type"),
            ("deprecatedSource", "source"),
            ("deprecatedFirstTimestamp", "firstTimestamp"),
            ("deprecatedLastTimestamp", "lastTimestamp"),
            ("deprecatedCount", "count"),
        ],
    );
    if !out.contains_key("involvedObject") {
        // Required in core/v1; an events.k8s.io event may omit `regarding`.
        out.insert("involvedObject".into(), json!({}));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_event_reads_as_events_v1_and_back() {
        let core = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "message": "Started container",
            "type": "Normal", "source": {"component": "kubelet"}, "firstTimestamp": "2025-01-01T12:00:00Z",
            "count": 2, "reportingComponent": "kubelet"});
        let v1 = core_to_v1(&core);
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "Started container");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["eventTime"], "2025-01-01T12:00:00.000000Z");
        assert_eq!(v1["reportingController"], "kubelet");
        let back = v1_to_core(&v1);
        for f in [
            "involvedObject",
            "reason",
            "message",
            "type",
            "source",
            "firstTimestamp",
            "count",
        ] {
            assert_eq!(back[f], core[f], "{f}");
        }
    }
}
