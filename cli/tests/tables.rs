//! The table tier through `kill -9`: a `shale serve` tiering every 100 ms is killed at
//! random moments between rounds of appends and started again; afterwards DuckDB reads
//! every record from the basin's Parquet files exactly once, and so does pyiceberg from
//! its Iceberg metadata; the status (HTTP and `shale tables`) shows every stream tiered,
//! and the DuckDB query it prints runs.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::cluster::wait_until;
use common::{python, shale, spawn, terminate};
use serde_json::{json, Value};
use shale_tests::tables::{read_table, tiered_records};

const BASIN: &str = "tiered-basin";
const STREAMS: usize = 10;
const ROUNDS: usize = 4;
const PER_ROUND: usize = 300;

fn hex_decode(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

fn serve(dir: &std::path::Path) -> (std::process::Child, String, String) {
    let args = ["serve", "--config", "shale.toml", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    spawn(dir, &args, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiering_through_kill_9_keeps_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shale.toml"), "[tables]\npass_interval = \"100ms\"\n").unwrap();
    let (mut server, mut http, mut grpc) = serve(dir.path());
    let client = reqwest::Client::new();
    let basin = json!({ "basin": BASIN, "config": { "create_stream_on_append": true, "tables": { "after_secs": 0 } } });
    assert_eq!(client.post(format!("{http}/v1/basins")).json(&basin).send().await.unwrap().status(), 201);

    for round in 0..ROUNDS {
        for stream in 0..STREAMS {
            let records: Vec<Value> = (0..PER_ROUND)
                .map(|i| json!({ "body": format!("s{stream}-r{}-{}", round * PER_ROUND + i, "x".repeat(200)) }))
                .collect();
            let url = format!("{http}/v1/streams/s{stream}/records");
            let appended = client.post(url).header("s2-basin", BASIN).json(&json!({ "records": records })).send();
            assert_eq!(appended.await.unwrap().status(), 200);
        }
        // Tiering passes run every 100 ms: the kill lands before, during or after one.
        tokio::time::sleep(Duration::from_millis(shale_storage::ids::random_in(0..400))).await;
        server.kill().unwrap();
        server.wait().unwrap();
        (server, http, grpc) = serve(dir.path());
    }
    let total = (ROUNDS * STREAMS * PER_ROUND) as u64;
    wait_until("every record tiered", Duration::from_secs(60), || async {
        tiered_records(&dir.path().join("shale-data"), BASIN) == total
    })
    .await;

    let state: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(format!("shale-data/tables/{BASIN}/state.json"))).unwrap(),
    )
    .unwrap();
    assert!(state["pass"].as_u64().unwrap() >= 2, "tiering went on across restarts: {state}");

    // DuckDB over the Parquet files and pyiceberg over the table metadata: every record
    // once, dense per stream, with its body.
    let location = format!("file://{}", dir.path().join("shale-data").canonicalize().unwrap().display());
    let view = read_table(&location, BASIN, None, &[], &[]);
    assert_eq!(view.duckdb, view.iceberg, "both engines read the same rows");
    let expected: Vec<(String, u64)> =
        (0..STREAMS).flat_map(|s| (0..(ROUNDS * PER_ROUND) as u64).map(move |seq| (format!("s{s}"), seq))).collect();
    let seen: Vec<(String, u64)> =
        view.duckdb.iter().map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_u64().unwrap())).collect();
    assert_eq!(seen.len(), expected.len(), "row count");
    let mut expected = expected;
    expected.sort();
    assert_eq!(seen, expected, "every (stream, seq_num) exactly once");
    for row in &view.duckdb {
        let body = hex_decode(row[4].as_str().unwrap());
        let prefix = format!("{}-r{}-", row[0].as_str().unwrap(), row[1]);
        assert!(body.starts_with(prefix.as_bytes()), "{row}");
    }
    // Passes go on while the engines read (a later pass may rewrite small files), so the
    // metadata read is the committed state's or a later one; fewer passes than the kept
    // snapshots ran, so none has expired.
    assert!(view.version >= state["pass"].as_u64().unwrap(), "published {} of {state}", view.version);
    assert_eq!(view.snapshots, view.version, "one snapshot per committed pass");

    // The status over HTTP and through `shale tables`, whose DuckDB line runs as printed.
    let status: Value =
        client.get(format!("{http}/v1/basins/{BASIN}/tables")).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["rows"], total, "{status}");
    let streams = status["streams"].as_array().unwrap();
    assert_eq!(streams.len(), STREAMS);
    assert!(streams.iter().all(|s| s["lag_records"] == 0 && s["tail"] == (ROUNDS * PER_ROUND) as u64), "{status}");
    let plain = json!({ "basin": "plain-basin" });
    assert_eq!(client.post(format!("{http}/v1/basins")).json(&plain).send().await.unwrap().status(), 201);
    let off = client.get(format!("{http}/v1/basins/plain-basin/tables")).send().await.unwrap();
    assert_eq!(off.status(), 400, "no table tier on that basin");

    let shown = shale().args(["tables", BASIN]).env("SHALE_SERVER", &grpc).output().unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains(&format!("{total} rows")), "{shown}");
    let sql = shown.lines().find_map(|l| l.strip_prefix("DuckDB:")).unwrap().trim().to_string();
    let script = "import sys, duckdb; print(sum(n for _, n in duckdb.sql(sys.argv[1]).fetchall()))";
    let counted =
        std::process::Command::new(python()).args(["-c", script, &sql]).current_dir(dir.path()).output().unwrap();
    assert_eq!(String::from_utf8(counted.stdout).unwrap().trim(), total.to_string(), "{sql}");
    assert!(terminate(server).success());
}
