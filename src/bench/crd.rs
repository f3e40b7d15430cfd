//! CustomResourceDefinitions against the running API server of [`super::api`]: how soon after a CRD's
//! create a custom object can be created (issue 11: within 200 ms), and the create rate of a custom object
//! whose schema has 20 fields and 2 CEL rules against ConfigMaps in the same run (issue 11: at least 80%).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{ms, percentile};

fn crd() -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..18 {
        props.insert(format!("field{i:02}"), json!({"type": "string", "maxLength": 64}));
    }
    props.insert("min".into(), json!({"type": "integer", "default": 0}));
    props.insert("max".into(), json!({"type": "integer", "default": 10}));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "benchwidgets.bench.example.com"},
        "spec": {
            "group": "bench.example.com",
            "scope": "Namespaced",
            "names": {"plural": "benchwidgets", "kind": "BenchWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "properties": props,
                    "x-kubernetes-validations": [
                        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                        {"rule": "self.field00.size() > 0", "message": "field00 must not be empty"},
                    ],
                }},
            }}}],
        }
    })
}

fn widget(name: &str) -> Vec<u8> {
    let mut spec = serde_json::Map::new();
    for i in 0..18 {
        spec.insert(format!("field{i:02}"), json!(format!("value {i}")));
    }
    spec.insert("min".into(), json!(1));
    spec.insert("max".into(), json!(5));
    serde_json::to_vec(
        &json!({"apiVersion": "bench.example.com/v1", "kind": "BenchWidget",
                               "metadata": {"name": name}, "spec": spec}),
    )
    .expect("JSON serialises")
}

fn config_map(name: &str) -> Vec<u8> {
    let data: serde_json::Map<String, Value> = (0..20)
        .map(|i| (format!("key{i:02}"), json!(format!("value {i}"))))
        .collect();
    serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
    )
    .expect("JSON serialises")
}

async fn post(c: &kube::Client, path: &str, body: Vec<u8>) -> Result<String, kube::Error> {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(body)
        .expect("a request");
    c.request_text(req).await
}

/// Creates `count` objects one at a time with a thin client; returns the rate and the sorted latencies.
async fn rate(
    c: &kube::Client,
    path: &str,
    count: usize,
    body: impl Fn(usize) -> Vec<u8>,
) -> anyhow::Result<(f64, Vec<Duration>)> {
    let mut lat = Vec::with_capacity(count);
    let t0 = Instant::now();
    for i in 0..count {
        let b = body(i);
        let t = Instant::now();
        post(c, path, b).await?;
        lat.push(t.elapsed());
    }
    lat.sort();
    Ok((count as f64 / t0.elapsed().as_secs_f64(), lat))
}

/// The CRD figures; `ns` exists.
pub(super) async fn run(c: &kube::Client, ns: &str, count: usize) -> anyhow::Result<()> {
    let items = format!("/apis/bench.example.com/v1/namespaces/{ns}/benchwidgets");
    let t0 = Instant::now();
    post(
        c,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        serde_json::to_vec(&crd())?,
    )
    .await?;
    let acked = t0.elapsed();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match post(c, &items, widget("first")).await {
            Ok(_) => break,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(1)).await,
            Err(e) => return Err(e.into()),
        }
    }
    println!(
        "CRD usable: first custom object created {} after the CRD's create was sent (CRD acknowledged after {}; target < 200 ms)",
        ms(t0.elapsed()),
        ms(acked)
    );

    let (cms, cm_lat) = rate(c, &format!("/api/v1/namespaces/{ns}/configmaps"), count, |i| {
        config_map(&format!("cm{i:05}"))
    })
    .await?;
    let (crs, cr_lat) = rate(c, &items, count, |i| widget(&format!("w{i:05}"))).await?;
    println!(
        "sequential creates, thin client: ConfigMaps {cms:.0}/s (p50 {}), custom objects with 20 fields and 2 CEL rules {crs:.0}/s (p50 {}) = {:.0}% (target >= 80%)",
        ms(percentile(&cm_lat, 0.5)),
        ms(percentile(&cr_lat, 0.5)),
        100.0 * crs / cms
    );
    Ok(())
}
