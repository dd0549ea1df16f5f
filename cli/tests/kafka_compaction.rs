//! A compacted topic (`cleanup.policy=compact`) through confluent-kafka against
//! `shale serve --kafka`, with the basin's table tier on: 100,000 records over 1,000 keys
//! with tombstones (`tests/kafka/compacted.py`); after key compaction a fresh consumer
//! reads exactly each live key's last value at its acknowledged offset and nothing of the
//! deleted keys once `delete.retention.ms` passed, `min.compaction.lag.ms` keeps a young
//! topic whole, the segment bytes on the store fall to about the live set, and the table
//! still holds every record ever written.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{kafka_script, run_python, spawn_started, start_field, terminate};

/// The Kafka basin `shale serve` creates by default.
const BASIN: &str = "kafka-topics";

/// Bytes of every segment object under `data` (the store of `shale serve`).
fn segment_bytes(data: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(data.join("segments")) else { return 0 };
    entries.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_each_keys_last_value_at_its_offset_and_the_table_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[metadata]\ngc_interval = \"200ms\"\ndelete_grace = \"500ms\"\n\
                  [compactor]\ninterval = \"300ms\"\nmin_age = \"0s\"\nmin_object_bytes = 0\nmax_wait = \"0s\"\n\
                  [tables]\npass_interval = \"100ms\"\n";
    std::fs::write(dir.path().join("shale.toml"), config).unwrap();
    let args =
        ["serve", "--config", "shale.toml", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--kafka", "127.0.0.1:0"];
    let (server, start, _logs) = spawn_started(dir.path(), &args, &[]);
    let http = format!("http://{}", start_field(&start, "http=").unwrap());
    let kafka = start_field(&start, "kafka=").unwrap();
    let client = reqwest::Client::new();
    let tiered = serde_json::json!({ "tables": { "after_secs": 0 } });
    let patched = client.patch(format!("{http}/v1/basins/{BASIN}")).json(&tiered).send().await.unwrap();
    assert_eq!(patched.status(), 200, "{}", patched.text().await.unwrap());

    let state = dir.path().join("acked.json");
    let state = state.to_str().unwrap();
    let out = run_python(&[&kafka_script("compacted.py"), &kafka, "produce", state]);
    assert!(out.contains("produced 100003"), "{out}");
    let data = dir.path().join("shale-data");

    let out = run_python(&[&kafka_script("compacted.py"), &kafka, "verify", state]);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let live_bytes = summary["live_bytes"].as_u64().unwrap();
    // S2's API reads the same stream with its gaps: every live record of partition 0 at
    // its offset, in order, and nothing else.
    let acked: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    let mut last_of_key = std::collections::HashMap::new();
    for record in acked["changelog"].as_array().unwrap() {
        last_of_key.insert(record[0].as_str().unwrap().to_string(), record.clone());
    }
    let mut expected: Vec<u64> =
        last_of_key.values().filter(|r| r[1] == 0 && !r[3].is_null()).map(|r| r[2].as_u64().unwrap()).collect();
    expected.sort_unstable();
    let read = client
        .get(format!("{http}/v1/streams/changelog%2F0/records?seq_num=0&count=1000"))
        .header("s2-basin", BASIN)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let read: serde_json::Value = read.json().await.unwrap();
    let seq_nums: Vec<u64> =
        read["records"].as_array().unwrap().iter().map(|r| r["seq_num"].as_u64().unwrap()).collect();
    assert_eq!(seq_nums, expected, "an S2 read of a compacted stream");
    assert_eq!(read["tail"]["seq_num"].as_u64(), expected.last().map(|last| last + 1), "the tail is unchanged");

    let dropped = common::cluster::metric(&client, &http, "shale_key_compaction_records_dropped_total").await;
    // Every superseded record and every tombstone went; of 100,003 records, the 903 live
    // ones stay, plus what the `lagged` topic keeps whole.
    assert!(dropped.is_some_and(|d| d >= 100_003 - 903), "dropped {dropped:?}");

    // Released objects go once their grace passes: the store falls to about the live set
    // (each record carries its key header and framing: at most twice its key and value).
    let mut at_rest = segment_bytes(&data);
    common::cluster::wait_until("segment bytes to fall to about the live set", Duration::from_secs(60), || {
        at_rest = segment_bytes(&data);
        let at_rest = at_rest;
        async move { at_rest <= 2 * live_bytes + 256 * 1024 }
    })
    .await;
    // What the gateway wrote (compaction may already have replaced some of it on disk).
    let written = common::cluster::metric(&client, &http, "shale_segment_bytes_total").await.unwrap();
    assert!(written >= 100_000 * 100, "{written} bytes written");
    eprintln!("segment bytes: {written} written, {at_rest} at rest, live set {live_bytes}");

    // The table keeps every record the log ever held, compacted or not.
    let location = format!("file://{}", data.canonicalize().unwrap().display());
    let query = "select count(*), count(distinct stream || ':' || seq_num) from {T}";
    let view = shale_tests::tables::read_table(&location, BASIN, None, &[query], &[]);
    assert_eq!(view.duckdb_sql, vec![serde_json::json!([[102_003, 102_003]])], "DuckDB over the table");
    assert_eq!(view.duckdb_sql, view.iceberg_sql, "pyiceberg reads the same rows");
    assert!(terminate(server).success());
}
