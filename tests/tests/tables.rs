//! The table tier on every backend: a basin with `tables` on has its records, once
//! `after_secs` old, written as Parquet under `tables/<basin>/`, and DuckDB reading every
//! Parquet file there finds each record exactly once, also after a pass that failed
//! between writing its file and committing it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use shale_gateway::{AppendInput, GatewayConfig};
use shale_metadata::{BasinConfig, MetadataApi, MetadataConfig, TablesConfig};
use shale_proto::{Header, Record};
use shale_reader::{Reader, ReaderConfig};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};
use shale_storage::ManualClock;
use shale_tables::Tierer;
use shale_tests::{Backend, Node};

const BASIN: &str = "table-basin";
const STREAMS: usize = 50;

/// Appends record `seq` to every stream, with a header on odd ones.
async fn append_round(node: &Node, seq: u64) {
    let appends = (0..STREAMS).map(|s| {
        let headers = match seq % 2 {
            1 => vec![Header { name: Bytes::from("k"), value: Bytes::from(format!("v{seq}")) }],
            _ => vec![],
        };
        let record = Record { headers, body: Bytes::from(format!("s{s}-r{seq}")), ..Default::default() };
        let input = AppendInput {
            basin: BASIN.into(),
            stream: format!("s{s:02}"),
            records: vec![record],
            ..Default::default()
        };
        node.gateway.append(input)
    });
    for ack in futures::future::join_all(appends).await {
        ack.unwrap();
    }
}

/// DuckDB over every Parquet file of the basin's table (copied from the store): rows,
/// distinct (stream, seq_num), streams dense from 0 to `per_stream`, bodies and headers.
async fn duckdb_check(store: &Arc<dyn ObjectStore>, per_stream: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let prefix = Path::from(format!("tables/{BASIN}"));
    let files: Vec<Path> = store.list(Some(&prefix)).map_ok(|m| m.location).try_collect().await.unwrap();
    for (i, file) in files.iter().filter(|f| f.as_ref().ends_with(".parquet")).enumerate() {
        let bytes = store.get(file).await.unwrap().bytes().await.unwrap();
        std::fs::write(dir.path().join(format!("{i}.parquet")), bytes).unwrap();
    }
    let script = r#"
import sys, duckdb
T = f"read_parquet('{sys.argv[1]}/*.parquet')"
n = int(sys.argv[2])
rows, distinct = duckdb.sql(f"select count(*), count(distinct (stream, seq_num)) from {T}").fetchone()
dense = duckdb.sql(f"select count(*) = 0 from (select stream, count(*) c, min(seq_num) lo, max(seq_num) hi from {T} group by stream) where c != {n} or lo != 0 or hi != {n} - 1").fetchone()[0]
bodies = duckdb.sql(f"select count(*) from {T} where decode(body) = 's' || cast(cast(substr(stream, 2) as int) as varchar) || '-r' || cast(seq_num as varchar)").fetchone()[0]
headers = duckdb.sql(f"select count(*) from {T} where (seq_num % 2 = 1) = (len(headers) = 1)").fetchone()[0]
print(rows, distinct, dense, bodies, headers)
"#;
    let python = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let output = std::process::Command::new(python)
        .args(["-c", script])
        .arg(dir.path())
        .arg(per_stream.to_string())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

async fn suite_tiering_writes_every_record_once(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let config = BasinConfig {
        create_stream_on_append: true,
        tables: Some(TablesConfig { after_secs: 60 }),
        ..Default::default()
    };
    node.metadata.create_basin(BASIN, config).await.unwrap();
    let composed: Arc<dyn ObjectStore> = node.faults.clone();
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), composed.clone(), node.metadata.clone()));
    let tierer = Tierer::new(node.metadata.clone(), reader, composed.clone(), clock.clone(), Box::new(|_| true));

    for seq in 0..3 {
        append_round(&node, seq).await;
    }
    assert_eq!(tierer.run_pass().await.unwrap(), 0, "nothing is 60 s old yet");

    // The first pass writes its file, then fails to commit: the next pass does it again,
    // under the same name, with what became old since.
    clock.advance(Duration::from_secs(61));
    append_round(&node, 3).await;
    node.faults.fail_nth_put(&format!("tables/{BASIN}/state.json"), 1);
    assert!(tierer.run_pass().await.is_err(), "the commit failed");
    assert!(tierer.state(BASIN).await.unwrap().0.files.is_empty(), "nothing committed");
    clock.advance(Duration::from_secs(61));
    assert_eq!(tierer.run_pass().await.unwrap(), (4 * STREAMS) as u64);
    let (state, _) = tierer.state(BASIN).await.unwrap();
    assert_eq!((state.pass, state.rows, state.files.len()), (1, 4 * STREAMS as u64, 1));
    assert!(state.positions.values().all(|p| p.next_seq == 4), "{:?}", state.positions);

    append_round(&node, 4).await;
    assert_eq!(tierer.run_pass().await.unwrap(), 0, "the newest round is not 60 s old");
    clock.advance(Duration::from_secs(61));
    assert_eq!(tierer.run_pass().await.unwrap(), STREAMS as u64);
    assert_eq!(tierer.state(BASIN).await.unwrap().0.files.len(), 2);

    let total = 5 * STREAMS;
    assert_eq!(duckdb_check(&composed, 5).await, format!("{total} {total} True {total} {total}"));
    node.stop().await;
}

shale_tests::on_every_backend!(suite_tiering_writes_every_record_once);

/// The table tier is a basin setting: set at creation, shown in the config, turned off
/// with `null` and on again with a reconfiguration.
#[tokio::test]
async fn tables_are_configured_per_basin_over_http() {
    let server = shale_tests::TestServer::start().await;
    let client = &server.client;
    let created = client
        .post(server.url("/v1/basins"))
        .json(&serde_json::json!({ "basin": BASIN, "config": { "tables": { "after_secs": 30 } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let config = |server: &shale_tests::TestServer| {
        let url = server.url(&format!("/v1/basins/{BASIN}"));
        async move { client.get(url).send().await.unwrap().json::<serde_json::Value>().await.unwrap() }
    };
    assert_eq!(config(&server).await["tables"], serde_json::json!({ "after_secs": 30 }));
    let patch = |body: serde_json::Value| client.patch(server.url(&format!("/v1/basins/{BASIN}"))).json(&body).send();
    assert!(patch(serde_json::json!({ "tables": null })).await.unwrap().status().is_success());
    assert!(config(&server).await.get("tables").is_none(), "off");
    assert!(patch(serde_json::json!({ "tables": { "after_secs": 0 } })).await.unwrap().status().is_success());
    assert_eq!(config(&server).await["tables"], serde_json::json!({ "after_secs": 0 }));
    let bad = patch(serde_json::json!({ "tables": { "after": 1 } })).await.unwrap();
    assert_eq!(bad.status(), 400, "unknown fields are refused");
    server.stop().await;
}
