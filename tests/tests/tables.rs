//! The table tier on every backend: a basin with `tables` on has its records, once
//! `after_secs` old, written as Parquet under `tables/<basin>/` with Iceberg metadata,
//! and DuckDB reading every Parquet file there, and pyiceberg scanning the table, find
//! each record exactly once, also after a pass that failed between writing its files
//! and committing them; JSON bodies are also typed columns, a later field a new column
//! in a later schema.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use shale_gateway::{AppendInput, GatewayConfig};
use shale_metadata::{
    BasinConfig, BasinPatch, BodyFormat, MetadataApi, MetadataConfig, RetentionPolicy, StreamConfig, TablesConfig,
};
use shale_proto::{Header, Record};
use shale_reader::{History, HistoryRead, ReadLimits, ReadRequest, ReadStart, Reader, ReaderConfig};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};
use shale_storage::{Clock, InstrumentedStore, ManualClock};
use shale_tables::{StoreLocation, TableHistory, Tierer};
use shale_tests::tables::{read_table, table_row};
use shale_tests::{series, Backend, Node, TestStore};

const BASIN: &str = "table-basin";
const STREAMS: usize = 50;

/// A tierer of every basin on `store` (reading through it too), as the node's metadata
/// and `clock` see them.
fn tierer(node: &Node, store: &TestStore, through: Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Tierer {
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), through.clone(), node.metadata.clone()));
    let location = StoreLocation(store.url.clone());
    Tierer::new(node.metadata.clone(), reader, through, location, clock.clone(), Box::new(|_| true))
}

/// Appends record `seq` to every stream, with a header on odd ones.
async fn append_round(node: &Node, seq: u64) {
    let appends = (0..STREAMS).map(|s| {
        let headers = match seq % 2 {
            1 => vec![Header { name: Bytes::from("k"), value: Bytes::from(format!("v{seq}")) }],
            _ => vec![],
        };
        let record =
            Record { headers: headers.into(), body: Bytes::from(format!("s{s}-r{seq}")), ..Default::default() };
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

/// A node on files whose clock `clock` moves only when told, with basin `basin` tiering
/// every record at once and serving reads below the trim point from its table.
async fn tiering_node(basin: &str) -> (TestStore, Arc<ManualClock>, Node) {
    let store = Backend::File.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let tables = TablesConfig { after_secs: 0, serve_reads: true, ..Default::default() };
    let config = BasinConfig { create_stream_on_append: true, tables: Some(tables), ..Default::default() };
    node.metadata.create_basin(basin, config).await.unwrap();
    (store, clock, node)
}

/// Pass `pass` of a many-pass test: two records appended to `stream` of `basin`, the
/// clock moved on by `step`, and a tiering pass that tiers exactly those two.
async fn append_and_tier(
    node: &Node,
    tierer: &Tierer,
    clock: &ManualClock,
    (basin, stream): (&str, &str),
    pass: u64,
    step: Duration,
) {
    let records = (0..2).map(|i| Record { body: Bytes::from(format!("{pass}-{i}")), ..Default::default() });
    let input =
        AppendInput { basin: basin.into(), stream: stream.into(), records: records.collect(), ..Default::default() };
    node.gateway.append(input).await.unwrap();
    clock.advance(step);
    assert_eq!(tierer.run_pass().await.unwrap(), 2, "pass {pass}");
}

/// A history read of `stream` of `basin` from `from_seq` to its end, unbounded.
async fn whole_read(node: &Node, basin: &str, stream: &str, from_seq: u64) -> HistoryRead {
    let created_at_ms = node.metadata.stream(basin, stream).await.unwrap().record.created_at_ms;
    HistoryRead {
        basin: basin.into(),
        stream: stream.into(),
        created_at_ms,
        from_seq,
        before_seq: u64::MAX,
        count: u64::MAX,
        bytes: u64::MAX,
        until: None,
    }
}

/// DuckDB and pyiceberg read exactly the records the log has in `streams` of `basin`.
async fn engines_read_the_log(store: &TestStore, node: &Node, basin: &str, streams: impl Iterator<Item = String>) {
    let view = read_table(&store.url, basin, None, &[], &[]);
    let mut expected = Vec::new();
    for stream in streams {
        let request = shale_tests::read_request(basin, &stream, ReadStart::SeqNum(0));
        let read = node.reader.read(&request).await.unwrap();
        expected.extend(read.records.iter().map(|record| table_row(&stream, record)));
    }
    assert_eq!(view.duckdb, expected, "DuckDB reads every record once");
    assert_eq!(view.iceberg, expected, "pyiceberg scans every record once");
}

/// Every record of the basin's streams as the log has it, as table rows.
async fn log_rows(node: &Node) -> Vec<serde_json::Value> {
    let mut rows = Vec::new();
    for s in 0..STREAMS {
        let stream = format!("s{s:02}");
        let request = shale_tests::read_request(BASIN, &stream, shale_reader::ReadStart::SeqNum(0));
        let read = node.reader.read(&request).await.unwrap();
        rows.extend(read.records.iter().map(|record| table_row(&stream, record)));
    }
    rows
}

/// Both engines see exactly the log's records (skipped on the in-memory store, which no
/// engine can open).
async fn check_engines(store: &TestStore, node: &Node, snapshots: u64) {
    if store.backend == Backend::Memory {
        return;
    }
    let moto = match store.backend {
        Backend::S3 => Some(shale_tests::Moto::shared().await.endpoint.clone()),
        _ => None,
    };
    let filters = ["seq_num >= 3", "stream = 's07'", "stream >= 's40' and seq_num < 2"];
    let view = read_table(&store.url, BASIN, moto.as_deref(), &[], &filters);
    let expected = log_rows(node).await;
    assert_eq!(view.duckdb.len(), expected.len(), "DuckDB's row count");
    assert_eq!(view.duckdb, expected, "DuckDB reads every record once, as the log has it");
    assert_eq!(view.iceberg, expected, "pyiceberg scans every record once, as the log has it");
    assert_eq!(view.snapshots, snapshots);
    for (filter, (iceberg, duckdb)) in filters.iter().zip(&view.filters) {
        assert_eq!(iceberg, duckdb, "pyiceberg pruning by the metadata keeps every row of `{filter}`");
        assert!(*duckdb > 0, "`{filter}` matches rows");
    }
}

async fn suite_tiering_writes_every_record_once(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let config_tables = || Some(TablesConfig { after_secs: 60, ..Default::default() });
    let config = BasinConfig { create_stream_on_append: true, tables: config_tables(), ..Default::default() };
    node.metadata.create_basin(BASIN, config).await.unwrap();
    let composed: Arc<dyn ObjectStore> = node.faults.clone();
    let tierer = tierer(&node, &store, composed.clone(), &clock);

    for seq in 0..3 {
        append_round(&node, seq).await;
    }
    assert_eq!(tierer.run_pass().await.unwrap(), 0, "nothing is 60 s old yet");

    // The first pass writes its file, then fails to commit: the next pass does it again,
    // under the same name, with what became old since. Another basin's pass goes on.
    const OTHER_BASIN: &str = "table-basin-other";
    let other = BasinConfig { tables: config_tables(), create_stream_on_append: true, ..Default::default() };
    node.metadata.create_basin(OTHER_BASIN, other).await.unwrap();
    let input = AppendInput {
        basin: OTHER_BASIN.into(),
        stream: "x".into(),
        records: vec![Record { body: Bytes::from("x"), ..Default::default() }],
        ..Default::default()
    };
    node.gateway.append(input).await.unwrap();
    clock.advance(Duration::from_secs(61));
    append_round(&node, 3).await;
    node.faults.fail_nth_put(&format!("tables/{BASIN}/state.json"), 1);
    assert!(tierer.run_pass().await.is_err(), "the commit failed");
    assert!(tierer.state(BASIN).await.unwrap().0.files.is_empty(), "nothing committed");
    assert_eq!(tierer.state(OTHER_BASIN).await.unwrap().0.rows, 1, "the other basin was tiered");
    let hint = Path::from(shale_tables::version_hint_path(BASIN));
    assert!(store.raw.head(&hint).await.is_err(), "no table metadata is published before a commit");
    clock.advance(Duration::from_secs(61));
    assert_eq!(tierer.run_pass().await.unwrap(), (4 * STREAMS) as u64);
    let (state, _) = tierer.state(BASIN).await.unwrap();
    assert_eq!((state.pass, state.rows, state.files.len()), (1, 4 * STREAMS as u64, 1));
    assert!(state.positions.values().all(|p| p.next_seq == 4), "{:?}", state.positions);
    check_engines(&store, &node, 1).await;

    append_round(&node, 4).await;
    assert_eq!(tierer.run_pass().await.unwrap(), 0, "the newest round is not 60 s old");
    clock.advance(Duration::from_secs(61));
    assert_eq!(tierer.run_pass().await.unwrap(), STREAMS as u64);
    assert_eq!(tierer.state(BASIN).await.unwrap().0.files.len(), 2);

    check_engines(&store, &node, 2).await;
    node.stop().await;
}

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
    assert_eq!(
        config(&server).await["tables"],
        serde_json::json!({ "after_secs": 30, "body_format": "binary", "serve_reads": false })
    );
    let patch = |body: serde_json::Value| client.patch(server.url(&format!("/v1/basins/{BASIN}"))).json(&body).send();
    assert!(patch(serde_json::json!({ "tables": null })).await.unwrap().status().is_success());
    assert!(config(&server).await.get("tables").is_none(), "off");
    let on = serde_json::json!({ "tables": { "after_secs": 0, "body_format": "json", "serve_reads": true } });
    assert!(patch(on).await.unwrap().status().is_success());
    assert_eq!(
        config(&server).await["tables"],
        serde_json::json!({ "after_secs": 0, "body_format": "json", "serve_reads": true })
    );
    let bad = patch(serde_json::json!({ "tables": { "after_secs": 0, "body_format": "xml" } })).await.unwrap();
    assert_eq!(bad.status(), 400, "unknown body formats are refused");
    let bad = patch(serde_json::json!({ "tables": { "after": 1 } })).await.unwrap();
    assert_eq!(bad.status(), 400, "unknown fields are refused");
    server.stop().await;
}

/// JSON bodies: top-level fields become typed columns both engines query; a field that
/// first appears in a later pass is a new column of a later schema; a value that does
/// not fit its column, or a body that is not JSON, is null there and kept in `body`.
async fn suite_json_bodies_are_columns(backend: Backend) {
    const JSON_BASIN: &str = "json-basin";
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let tables = TablesConfig { after_secs: 0, body_format: BodyFormat::Json, ..Default::default() };
    let config = BasinConfig { create_stream_on_append: true, tables: Some(tables), ..Default::default() };
    node.metadata.create_basin(JSON_BASIN, config).await.unwrap();
    let tierer = tierer(&node, &store, store.raw.clone(), &clock);
    let append = |stream: usize, bodies: Vec<String>| {
        let records = bodies.into_iter().map(|b| Record { body: Bytes::from(b), ..Default::default() }).collect();
        let input =
            AppendInput { basin: JSON_BASIN.into(), stream: format!("j{stream}"), records, ..Default::default() };
        node.gateway.append(input)
    };

    // Pass 1: amounts 0, 7, ..., 273 (25 of 40 above 100) and a user in each of 3
    // streams, and one body that is not JSON.
    for stream in 0..3 {
        let bodies = (0..40).map(|i| format!(r#"{{"amount": {}, "user": "u{i}"}}"#, i * 7)).collect();
        append(stream, bodies).await.unwrap();
    }
    append(0, vec!["not json".into()]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(tierer.run_pass().await.unwrap(), 121);
    // Pass 2: a new field, amounts that fit (500) and one that does not fit a long.
    for stream in 0..3 {
        append(stream, vec![r#"{"amount": 500, "currency": "EUR"}"#.into(); 5]).await.unwrap();
    }
    append(1, vec![r#"{"amount": 2.5}"#.into()]).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(tierer.run_pass().await.unwrap(), 16);

    let endpoint = match backend {
        Backend::S3 => Some(shale_tests::Moto::shared().await.endpoint.clone()),
        _ => None,
    };
    let queries = [
        "SELECT count(*) FROM {T} WHERE amount > 100",
        "SELECT count(currency), min(currency), count(DISTINCT \"user\") FROM {T}",
        "SELECT count(*) FROM {T} WHERE amount IS NULL",
        "SELECT count(*) FROM {T} WHERE decode(body) = '{\"amount\": 2.5}'",
    ];
    let view = read_table(&store.url, JSON_BASIN, endpoint.as_deref(), &queries, &["amount > 100"]);
    let expected = [
        serde_json::json!([[3 * 25 + 3 * 5]]),
        serde_json::json!([[15, "EUR", 40]]),
        serde_json::json!([[2]]),
        serde_json::json!([[1]]),
    ];
    assert_eq!(view.duckdb_sql, expected, "DuckDB over the files");
    assert_eq!(view.iceberg_sql, expected, "pyiceberg's scan");
    assert_eq!((view.duckdb.len(), view.iceberg.len()), (137, 137));
    assert_eq!(view.filters, [(90, 90)], "pyiceberg filters on a decoded column");
    let base = ["stream", "seq_num", "timestamp", "headers", "body"];
    let with = |extra: &[&str]| base.iter().chain(extra).map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(view.schemas, [with(&[]), with(&["amount", "user"]), with(&["amount", "user", "currency"])]);
    node.stop().await;
}

mod json_bodies {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn file() {
        super::suite_json_bodies_are_columns(shale_tests::Backend::File).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn s3() {
        super::suite_json_bodies_are_columns(shale_tests::Backend::S3).await
    }
}

/// Reads from the table tier: once retention removed a stream's old records from the
/// log, a reader with the table as its history serves them from Parquet, exactly as the
/// log had them, and goes on into the log at the trim point; with `serve_reads` off (or
/// a reader without history) a read below the trim point starts at it, as S2's does.
async fn suite_expired_history_is_read_from_the_table(backend: Backend) {
    const HISTORY_BASIN: &str = "history-basin";
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let tables = TablesConfig { after_secs: 0, serve_reads: true, ..Default::default() };
    node.metadata
        .create_basin(HISTORY_BASIN, BasinConfig { tables: Some(tables), ..Default::default() })
        .await
        .unwrap();
    let retained = StreamConfig { retention_policy: Some(RetentionPolicy::Age(600)), ..StreamConfig::default() };
    for stream in ["h", "other"] {
        node.metadata.create_stream(HISTORY_BASIN, stream, retained.clone()).await.unwrap();
    }
    let append = |stream: &str, from: u64, count: u64| {
        let records = (from..from + count)
            .map(|i| Record {
                headers: (i % 3 == 0)
                    .then(|| Header { name: Bytes::from("n"), value: Bytes::from(format!("{i}")) })
                    .into_iter()
                    .collect(),
                body: Bytes::from(format!("{stream}-{i}-{}", "x".repeat((i % 7) as usize * 30))),
                ..Default::default()
            })
            .collect();
        node.gateway.append(AppendInput {
            basin: HISTORY_BASIN.into(),
            stream: stream.into(),
            records,
            ..Default::default()
        })
    };
    // Three tiering passes of 100 records each: the stream's history spans three files.
    for pass in 0..3 {
        append("h", pass * 100, 100).await.unwrap();
        append("other", pass * 10, 10).await.unwrap();
        clock.advance(Duration::from_secs(1));
        let tierer = tierer(&node, &store, store.raw.clone(), &clock);
        assert_eq!(tierer.run_pass().await.unwrap(), 110);
    }
    let read_all = |reader: Reader, from: u64| async move {
        let mut records = Vec::new();
        let mut next = from;
        loop {
            let request = ReadRequest {
                limits: ReadLimits { count: Some(64), bytes: None, at_least_one: true },
                ..shale_tests::read_request(HISTORY_BASIN, "h", ReadStart::SeqNum(next))
            };
            let read = reader.read(&request).await.unwrap().records;
            let Some(last) = read.last() else { return records };
            next = last.seq_num + 1;
            records.extend(read);
        }
    };
    let plain = || Reader::new(&ReaderConfig::default(), store.raw.clone(), node.metadata.clone());
    let with_history = || {
        let history = TableHistory::new(node.metadata.clone(), store.raw.clone());
        plain().with_history(Arc::new(history))
    };
    let logged = read_all(plain(), 0).await;
    assert_eq!(logged.len(), 300);

    // The 300 records expire; 50 new ones stay in the log.
    clock.advance(Duration::from_secs(601));
    append("h", 300, 50).await.unwrap();
    node.metadata.reclaim(store.raw.as_ref()).await.unwrap();
    let trim_point = node.metadata.stream(HISTORY_BASIN, "h").await.unwrap().record.trim_point;
    assert_eq!(trim_point, 300, "retention moved the trim point past the old records");
    let newer = read_all(plain(), 0).await;
    assert_eq!(newer.first().map(|r| r.seq_num), Some(300), "without history, a read starts at the trim point");

    let everything = read_all(with_history(), 0).await;
    assert_eq!(everything.len(), 350);
    assert_eq!(everything[..300], logged[..], "history from the table, exactly as the log had it");
    assert_eq!(everything[300..], newer[..], "then the log from the trim point");
    let middle = read_all(with_history(), 150).await;
    assert_eq!(middle.first().map(|r| r.seq_num), Some(150), "a start inside a file reads from that row");
    assert_eq!(middle.len(), 200);

    let off = TablesConfig { after_secs: 0, serve_reads: false, ..Default::default() };
    let patch = BasinPatch { tables: Some(Some(off)), ..Default::default() };
    node.metadata.reconfigure_basin(HISTORY_BASIN, patch).await.unwrap();
    let unserved = read_all(with_history(), 0).await;
    assert_eq!(unserved.first().map(|r| r.seq_num), Some(300), "serve_reads off: the log's trim point");

    // A deleted stream's position leaves the state with the next commit; its rows stay
    // in the table (history outlives the log by design).
    node.metadata.delete_stream(HISTORY_BASIN, "other").await.unwrap();
    clock.advance(Duration::from_secs(1));
    let tierer = tierer(&node, &store, store.raw.clone(), &clock);
    assert_eq!(tierer.run_pass().await.unwrap(), 50, "the records appended after the expiry");
    let (state, _) = tierer.state(HISTORY_BASIN).await.unwrap();
    assert_eq!(state.positions.keys().collect::<Vec<_>>(), ["h"]);
    assert_eq!((state.positions["h"].next_seq, state.rows), (350, 380));
    node.stop().await;
}

/// Two tierers of one basin, the first paused at its data file's PUT (a compactor paused
/// past a takeover) while the second tiers and commits the same pass with more records:
/// the paused one's file lands under its own attempt's key, not over the committed one,
/// its commit is refused, and the next commit deletes it. DuckDB over every file and
/// pyiceberg over the metadata then read every record once. (With pass-only names the
/// paused file replaced the committed one: the table lost the newer round.)
async fn suite_a_paused_tierer_never_overwrites_a_committed_pass(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let tables = Some(TablesConfig { after_secs: 60, ..Default::default() });
    let config = BasinConfig { create_stream_on_append: true, tables, ..Default::default() };
    node.metadata.create_basin(BASIN, config).await.unwrap();
    for seq in 0..2 {
        append_round(&node, seq).await;
    }
    clock.advance(Duration::from_secs(61));
    let paused_store = Arc::new(shale_storage::FailingStore::new(node.faults.clone()));
    paused_store.hold_puts(&format!("tables/{BASIN}/data/"));
    let paused = tierer(&node, &store, paused_store.clone(), &clock);
    let paused_pass = tokio::spawn(async move { paused.run_pass().await });
    paused_store.held_puts_reach(1).await;

    append_round(&node, 2).await;
    clock.advance(Duration::from_secs(61));
    let live = tierer(&node, &store, node.faults.clone(), &clock);
    assert_eq!(live.run_pass().await.unwrap(), 3 * STREAMS as u64);
    paused_store.release_puts();
    assert!(paused_pass.await.unwrap().is_err(), "the paused tierer's commit is refused");
    let data_files = || async {
        let prefix = Path::from(format!("tables/{BASIN}/data"));
        let listed: Vec<_> = store.raw.list(Some(&prefix)).try_collect().await.unwrap();
        let mut paths: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
        paths.sort();
        paths
    };
    assert_eq!(data_files().await.len(), 2, "the committed file and the paused attempt's, side by side");

    append_round(&node, 3).await;
    clock.advance(Duration::from_secs(61));
    assert_eq!(live.run_pass().await.unwrap(), STREAMS as u64);
    let (state, _) = live.state(BASIN).await.unwrap();
    let mut named: Vec<String> = state.files.iter().map(|f| f.path.clone()).collect();
    named.sort();
    assert_eq!(data_files().await, named, "the next commit deleted the paused attempt's file");
    // The paused attempt's declaration stays for its grace (it might still write), its
    // keys deleted again at each commit; then it goes too.
    let declarations = || async {
        let prefix = Path::from(format!("tables/{BASIN}/attempts"));
        store.raw.list(Some(&prefix)).try_collect::<Vec<_>>().await.unwrap().len()
    };
    assert_eq!(declarations().await, 1, "the paused attempt's declaration, within its grace");
    check_engines(&store, &node, 2).await;
    clock.advance(Duration::from_millis(shale_tables::DECLARATION_GRACE_MS));
    append_round(&node, 4).await;
    clock.advance(Duration::from_secs(61));
    assert_eq!(live.run_pass().await.unwrap(), STREAMS as u64);
    assert_eq!(declarations().await, 0, "every declaration is gone after the grace");
    check_engines(&store, &node, 3).await;
    node.stop().await;
}

shale_tests::on_every_backend!(
    suite_a_paused_tierer_never_overwrites_a_committed_pass,
    suite_tiering_writes_every_record_once,
    suite_expired_history_is_read_from_the_table,
    suite_compacted_records_are_tiered_before_they_are_old
);

/// `shale serve` reads through the table tier: once retention took a stream's records
/// out of the log, a read from 0 finds nothing while the basin does not serve reads from
/// its table, and every record, from the table, once it does; `/metrics` has the passes'
/// time by step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reads_expired_records_from_the_table() {
    const SERVED: &str = "served-basin";
    let server = shale_tests::TestServer::start_with(|config| {
        config.tables.pass_interval = Duration::from_millis(100);
        config.metadata.gc_interval = Duration::from_millis(200);
    })
    .await;
    let client = &server.client;
    let basin = serde_json::json!({ "basin": SERVED, "config": { "tables": { "after_secs": 0 } } });
    assert_eq!(client.post(server.url("/v1/basins")).json(&basin).send().await.unwrap().status(), 201);
    let stream = serde_json::json!({ "stream": "h", "config": { "retention_policy": { "age": 1 } } });
    let created = client.post(server.url("/v1/streams")).header("s2-basin", SERVED).json(&stream).send().await;
    assert_eq!(created.unwrap().status(), 201);
    let records: Vec<serde_json::Value> = (0..10).map(|i| serde_json::json!({ "body": format!("r{i}") })).collect();
    let appended = client
        .post(server.url("/v1/streams/h/records"))
        .header("s2-basin", SERVED)
        .json(&serde_json::json!({ "records": records }))
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), 200);

    let status_rows = || async {
        let status = client.get(server.url(&format!("/v1/basins/{SERVED}/tables"))).send().await.unwrap();
        status.json::<serde_json::Value>().await.unwrap()["rows"].as_u64().unwrap()
    };
    let read_bodies = || async {
        let read = client.get(server.url("/v1/streams/h/records?seq_num=0")).header("s2-basin", SERVED).send();
        let read: serde_json::Value = read.await.unwrap().json().await.unwrap();
        read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while status_rows().await < 10 || !read_bodies().await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "tiered and then expired from the log within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let on = serde_json::json!({ "tables": { "after_secs": 0, "serve_reads": true } });
    let patched = client.patch(server.url(&format!("/v1/basins/{SERVED}"))).json(&on).send().await.unwrap();
    assert!(patched.status().is_success());
    let expected: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    assert_eq!(read_bodies().await, expected, "every expired record, read from the table");
    // A byte bound below the first record: the table still answers it (an empty answer
    // would send the read on to the trim point, past every record the table holds).
    let bounded = client.get(server.url("/v1/streams/h/records?seq_num=0&bytes=1")).header("s2-basin", SERVED).send();
    let bounded: serde_json::Value = bounded.await.unwrap().json().await.unwrap();
    let seqs: Vec<u64> =
        bounded["records"].as_array().unwrap().iter().map(|r| r["seq_num"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![0], "{bounded}");
    // The passes' time by step is on /metrics.
    let metrics = client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let value = |name: &str| -> f64 { series(&metrics, name).unwrap_or_else(|| panic!("{name}: {metrics}")) };
    assert!(value("shale_tiering_basin_passes_total") >= 1.0, "{metrics}");
    assert!(value("shale_tiering_step_seconds_total{step=\"gather\"}") > 0.0, "{metrics}");
    server.stop().await;
}

/// Records in compacted objects are tiered whatever their age: with `after_secs` an hour,
/// nothing is tiered until compaction rewrites the records, then a pass tiers exactly
/// what it rewrote and nothing appended since.
async fn suite_compacted_records_are_tiered_before_they_are_old(backend: Backend) {
    const COMPACTED_BASIN: &str = "compacted-basin";
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    let tables = TablesConfig { after_secs: 3600, ..Default::default() };
    let config = BasinConfig { create_stream_on_append: true, tables: Some(tables), ..Default::default() };
    node.metadata.create_basin(COMPACTED_BASIN, config).await.unwrap();
    let append = |stream: &str, from: u64| {
        let records = (from..from + 20).map(|i| Record { body: Bytes::from(format!("{i}")), ..Default::default() });
        let input = AppendInput {
            basin: COMPACTED_BASIN.into(),
            stream: stream.into(),
            records: records.collect(),
            ..Default::default()
        };
        node.gateway.append(input)
    };
    for round in 0..5 {
        for stream in ["a", "b"] {
            append(stream, round * 20).await.unwrap();
        }
    }
    let tierer = tierer(&node, &store, store.raw.clone(), &clock);
    clock.advance(Duration::from_secs(61));
    assert_eq!(tierer.run_pass().await.unwrap(), 0, "nothing is an hour old or compacted");

    let compactor_config = shale_compactor::CompactorConfig { min_object_bytes: 0, ..Default::default() };
    let compactor =
        shale_compactor::Compactor::new(compactor_config, node.metadata.clone(), store.raw.clone(), clock.clone());
    compactor.run_once().await.unwrap();
    for stream in ["a", "b"] {
        assert_eq!(node.metadata.compacted_through(COMPACTED_BASIN, stream).await.unwrap(), 100);
        append(stream, 100).await.unwrap();
    }
    assert_eq!(tierer.run_pass().await.unwrap(), 200, "the compacted records, not the newer ones");
    let (state, _) = tierer.state(COMPACTED_BASIN).await.unwrap();
    assert!(state.positions.values().all(|p| p.next_seq == 100), "{:?}", state.positions);
    node.stop().await;
}

/// A table stays bounded as passes accumulate: 300 small passes over 3 streams with small
/// target files. Small files are rewritten and manifests merged (replace snapshots),
/// snapshots expire after their retention, and what only expired snapshots named is
/// deleted; so the commit record, the files and manifests it names, the objects under
/// the table's root and the GETs of a history read of a whole stream stop growing, while
/// DuckDB and pyiceberg still read every record exactly once and a history read returns
/// each stream's records in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_state_stays_bounded_over_many_passes() {
    const BOUNDED: &str = "bounded-basin";
    const PASSES: u64 = 300;
    const STREAMS: u64 = 3;
    let (store, clock, node) = tiering_node(BOUNDED).await;
    let maintenance = shale_tables::Maintenance {
        snapshot_retention: Duration::from_secs(60),
        target_file_bytes: 32 * 1024,
        rewrite_fanout: 4,
        max_manifests: 4,
    };
    let tierer = tierer(&node, &store, store.raw.clone(), &clock).with_maintenance(maintenance);
    let history_store = InstrumentedStore::new(store.raw.clone());
    let history_gets = history_store.counters();
    let history_store: Arc<dyn ObjectStore> = Arc::new(history_store);
    let state_key = Path::from(format!("tables/{BOUNDED}/state.json"));
    let root = Path::from(format!("tables/{BOUNDED}"));

    // Per pass: state bytes, files, manifests, snapshots, objects under the root, and
    // the GETs of a history read of stream 0 (from a fresh reader: no cached footers).
    let mut figures: Vec<[u64; 6]> = Vec::new();
    for pass in 0..PASSES {
        let stream = format!("b{}", pass % STREAMS);
        append_and_tier(&node, &tierer, &clock, (BOUNDED, &stream), pass, Duration::from_secs(5)).await;
        if pass % 20 != 19 {
            continue;
        }
        let (state, _) = tierer.state(BOUNDED).await.unwrap();
        let state_bytes = store.raw.head(&state_key).await.unwrap().size;
        let objects = store.raw.list(Some(&root)).try_collect::<Vec<_>>().await.unwrap().len() as u64;
        let history = TableHistory::new(node.metadata.clone(), history_store.clone());
        let gets = history_gets.gets();
        let read = whole_read(&node, BOUNDED, "b0", 0).await;
        let records = history.read(&read).await.unwrap().records;
        let expected: Vec<u64> = (0..state.positions["b0"].next_seq).collect();
        assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), expected, "pass {pass}");
        let gets = history_gets.gets() - gets;
        let files = state.files.len() as u64;
        figures.push([state_bytes, files, state.manifests.len() as u64, state.snapshots.len() as u64, objects, gets]);
    }
    let (state, _) = tierer.state(BOUNDED).await.unwrap();
    assert_eq!(state.rows, PASSES * 2);
    assert!(state.snapshots.iter().any(|s| s.operation == shale_tables::iceberg::Operation::Replace));
    assert!(state.files.len() < (PASSES / 10) as usize, "small files were merged: {} left", state.files.len());
    // The second half's worst is no worse than the first half's after warm-up: nothing
    // grows with the pass count (the file count has a sawtooth, as size classes fill).
    let half = figures.len() / 2;
    let worst = |range: &[[u64; 6]], i: usize| range.iter().map(|f| f[i]).max().unwrap();
    for (i, name) in ["state bytes", "files", "manifests", "snapshots", "objects", "history GETs"].iter().enumerate() {
        let (early, late) = (worst(&figures[2..half], i), worst(&figures[half..], i));
        assert!(late <= early + early / 10, "{name} grew: {early} then {late} ({figures:?})");
    }
    // Files on the store are those the kept snapshots name: rewritten ones were deleted.
    let data = store
        .raw
        .list(Some(&Path::from(format!("tables/{BOUNDED}/data"))))
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .len();
    assert!(data < state.files.len() + 3 * 4 * 4, "{data} data files on the store for {}", state.files.len());

    engines_read_the_log(&store, &node, BOUNDED, (0..STREAMS).map(|s| format!("b{s}"))).await;
    node.stop().await;
}

/// 75 days of history, a pass every twelve hours: closed days' files move out of the
/// commit record into archives 8 files at a time, and 8 archives into one of the next
/// level, so the record keeps fewer than 16 files and 16 archives whatever the days held
/// (every archive object on the store is one it names or garbage it lists). A history
/// read of a whole stream still returns every record in order (through the archives);
/// one from near the tail, or of the first records, fetches at most a third of what it
/// does (only the archives that may hold them). The files listed (the record's and its
/// archives') hold every row once; a stale declaration naming an archived file does not
/// get it swept; DuckDB and pyiceberg still read every record exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_days_move_into_archives_and_stay_readable() {
    const ARCHIVED: &str = "archived-basin";
    const PASSES: u64 = 150;
    const STREAMS: u64 = 3;
    let (store, clock, node) = tiering_node(ARCHIVED).await;
    let tierer = tierer(&node, &store, store.raw.clone(), &clock);
    let probe = InstrumentedStore::new(store.raw.clone());
    let gets = probe.counters();
    let probe: Arc<dyn ObjectStore> = Arc::new(probe);

    for pass in 0..PASSES {
        let stream = format!("a{}", pass % STREAMS);
        append_and_tier(&node, &tierer, &clock, (ARCHIVED, &stream), pass, Duration::from_secs(12 * 3600)).await;
        let (state, _) = tierer.state(ARCHIVED).await.unwrap();
        let limit = 2 * shale_tables::archive::ARCHIVE_FILES;
        assert!(state.files.len() < limit, "pass {pass}: {} files", state.files.len());
        assert!(state.archives.len() < limit, "pass {pass}: {} archives", state.archives.len());
    }
    let (state, _) = tierer.state(ARCHIVED).await.unwrap();
    assert!(state.archives.iter().any(|a| a.level == 1), "archives merged: {:?}", state.archives);
    let metadata = Path::from(format!("tables/{ARCHIVED}/metadata"));
    for object in store.raw.list(Some(&metadata)).try_collect::<Vec<_>>().await.unwrap() {
        let key = object.location.to_string();
        if key.contains("/archive-") {
            assert!(state.names(&key), "{key} is neither named nor listed as garbage");
        }
    }
    let all = shale_tables::all_files(store.raw.as_ref(), &state).await.unwrap();
    let mut paths: Vec<&str> = all.iter().map(|f| f.path.as_str()).collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), all.len(), "no file listed twice");
    assert_eq!(all.iter().map(|f| f.records).sum::<u64>(), PASSES * 2, "the files listed hold every row once");

    let tail = state.positions["a0"].next_seq;
    let read = |from_seq: u64| whole_read(&node, ARCHIVED, "a0", from_seq);
    let history = TableHistory::new(node.metadata.clone(), probe.clone());
    let records = history.read(&read(0).await).await.unwrap().records;
    assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), (0..tail).collect::<Vec<_>>());
    let whole = gets.gets();
    let fresh = TableHistory::new(node.metadata.clone(), probe.clone());
    let before = gets.gets();
    let records = fresh.read(&read(tail - 2).await).await.unwrap().records;
    assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), [tail - 2, tail - 1]);
    let near_tail = gets.gets() - before;
    assert!(near_tail * 3 < whole, "a read near the tail fetched {near_tail} objects, the whole stream {whole}");
    let fresh = TableHistory::new(node.metadata.clone(), probe.clone());
    let before = gets.gets();
    let first = HistoryRead { count: 2, ..read(0).await };
    let records = fresh.read(&first).await.unwrap().records;
    assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), [0, 1]);
    let near_start = gets.gets() - before;
    assert!(
        near_start * 3 < whole,
        "a read of the first records fetched {near_start} objects, the whole stream {whole}"
    );

    // An attempt that committed and crashed before its own sweep leaves its declaration,
    // naming a file since archived: the next commit's sweep leaves the file alone.
    let archived = all.iter().find(|f| !state.files.iter().any(|g| g.path == f.path)).unwrap();
    let declaration = serde_json::json!({ "written_at_ms": clock.now_ms(), "keys": [archived.path] });
    let key = Path::from(format!("tables/{ARCHIVED}/attempts/000000000001-00000000000000aa.json"));
    store.raw.put(&key, serde_json::to_vec(&declaration).unwrap().into()).await.unwrap();
    let records = vec![Record { body: Bytes::from("last"), ..Default::default() }];
    let input = AppendInput { basin: ARCHIVED.into(), stream: "a0".into(), records, ..Default::default() };
    node.gateway.append(input).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(tierer.run_pass().await.unwrap(), 1);
    assert!(store.raw.head(&Path::from(archived.path.as_str())).await.is_ok(), "the sweep kept {}", archived.path);

    engines_read_the_log(&store, &node, ARCHIVED, (0..STREAMS).map(|s| format!("a{s}"))).await;

    // A read of the first records fetches only the archives that may hold them: with the
    // others gone from the store, it still reads.
    let (state, _) = tierer.state(ARCHIVED).await.unwrap();
    let unneeded: Vec<&shale_tables::Archive> = state.archives.iter().filter(|a| a.bounds.seq_num.0 >= 2).collect();
    assert!(!unneeded.is_empty(), "{:?}", state.archives);
    for archive in unneeded {
        store.raw.delete(&Path::from(archive.path.as_str())).await.unwrap();
    }
    let fresh = TableHistory::new(node.metadata.clone(), probe.clone());
    let records = fresh.read(&first).await.unwrap().records;
    assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), [0, 1]);
    node.stop().await;
}
