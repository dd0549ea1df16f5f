//! `/metrics` as Prometheus reads it: parsed by prometheus-client's text parser on an
//! all-in-one server and a metadata process, with the process, build and per-route
//! series, and every series the Grafana dashboard in `docs/` queries.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::{python, shale, spawn, start, terminate};
use serde_json::{json, Value};

/// One parsed sample: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
}

/// A parsed family: its name, type and samples.
type Family = (String, String, Vec<Sample>);

/// `/metrics` of the server at `base`, parsed by prometheus-client (which refuses text
/// that is not valid exposition format).
fn scrape(base: &str) -> Vec<Family> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let text = runtime.block_on(async { reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.txt");
    std::fs::write(&file, &text).unwrap();
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = text_string_to_metric_families(open(sys.argv[1]).read())
print(json.dumps([[f.name, f.type, [[s.name, s.labels] for s in f.samples]] for f in families]))
"#;
    let parsed = Command::new(python()).arg("-c").arg(script).arg(&file).output().unwrap();
    assert!(
        parsed.status.success(),
        "prometheus-client refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    type Parsed = (String, String, Vec<(String, BTreeMap<String, String>)>);
    let families: Vec<Parsed> = serde_json::from_slice(&parsed.stdout).unwrap();
    families
        .into_iter()
        .map(|(name, kind, samples)| {
            (name, kind, samples.into_iter().map(|(name, labels)| Sample { name, labels }).collect())
        })
        .collect()
}

/// The metric names a PromQL expression reads: its `shale_*` and `process_*` words.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("shale_") || word.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn metrics_parse_with_process_build_and_route_series_and_cover_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let (server, http, grpc) = start(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let body = json!({ "basin": "metrics-basin", "config": { "create_stream_on_append": true } });
        assert_eq!(client.post(format!("{http}/v1/basins")).json(&body).send().await.unwrap().status(), 201);
        let missing = client.get(format!("{http}/v1/streams/nope/records/tail")).header("s2-basin", "metrics-basin");
        assert_eq!(missing.send().await.unwrap().status(), 404);
    });
    let mut append = shale()
        .args(["append", "metrics-basin/s"])
        .env("SHALE_SERVER", &grpc)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut append.stdin.take().unwrap(), b"one\ntwo\n").unwrap();
    assert!(append.wait().unwrap().success());
    runtime.block_on(async {
        // A tracked consumer, so its lag series exist.
        let url = format!("{http}/v1/streams/s/consumers/job");
        let commit = reqwest::Client::new().put(url).header("s2-basin", "metrics-basin").json(&json!({ "seq_num": 0 }));
        assert!(commit.send().await.unwrap().status().is_success());
    });
    let meta_dir = tempfile::tempdir().unwrap();
    let metadata_args = ["metadata", "--data-dir", "m", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (metadata, metadata_http, _) = spawn(meta_dir.path(), &metadata_args, &[]);

    let all_in_one = scrape(&http);
    let families: BTreeMap<&str, &str> =
        all_in_one.iter().map(|(name, kind, _)| (name.as_str(), kind.as_str())).collect();
    let samples: Vec<&Sample> = all_in_one.iter().flat_map(|(_, _, samples)| samples).collect();
    for (family, kind) in [
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("shale_build_info", "gauge"),
        ("shale_api_requests", "counter"),
        ("shale_api_request_duration_seconds", "histogram"),
    ] {
        assert_eq!(families.get(family), Some(&kind), "{family} in {families:?}");
    }
    let labeled = |name: &str, wanted: &[(&str, &str)]| {
        samples
            .iter()
            .any(|s| s.name == name && wanted.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
    };
    let role = ("role", "all-in-one");
    assert!(labeled("shale_build_info", &[role, ("version", env!("CARGO_PKG_VERSION"))]));
    for wanted in [
        &[role, ("route", "/v1/basins"), ("method", "POST"), ("status", "201")][..],
        &[role, ("route", "/v1/streams/{stream}/records/tail"), ("method", "GET"), ("status", "404")],
        &[role, ("route", "/shale.v1.Records/AppendSession"), ("status", "OK")],
    ] {
        assert!(labeled("shale_api_requests_total", wanted), "{wanted:?}");
    }
    assert!(labeled("shale_api_request_duration_seconds_bucket", &[role, ("route", "/v1/basins"), ("le", "+Inf")]));

    let metadata_samples = scrape(&metadata_http);
    assert!(metadata_samples.iter().any(|(name, _, samples)| name == "shale_build_info"
        && samples.iter().any(|s| s.labels.get("role").map(String::as_str) == Some("metadata"))));

    let names: BTreeSet<String> = all_in_one
        .iter()
        .chain(&metadata_samples)
        .flat_map(|(_, _, samples)| samples.iter().map(|s| s.name.clone()))
        .collect();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap()))
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    for name in exprs.iter().flat_map(|expr| metric_names(expr)) {
        assert!(names.contains(&name), "the dashboard queries {name}, which no /metrics exports");
    }
    assert!(terminate(metadata).success());
    assert!(terminate(server).success());
}
