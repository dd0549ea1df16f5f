//! `--passes N`: the table tier through many small passes. Each pass appends
//! `--records-per-pass` records of 100 B to one of 4 streams, moves a manual clock on by
//! `--pass-seconds` and runs a tiering pass, with the default table maintenance. Twenty
//! times over the run it prints what must stay flat: the commit record's size, the files,
//! archives, manifests, snapshots and garbage it names, the objects under the table's
//! root, pass time (p50/p99 over the window) and its mean per step (the tierer's
//! [`shale_tables::PassStats`]), and the GETs and bytes of a history read of 1,000
//! records from a fresh reader. At the end, DuckDB (over the files the state and its
//! archives name) and pyiceberg (over the metadata) count the rows, the distinct
//! (stream, seq_num) pairs and compare both with the records appended.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use shale_gateway::{AppendInput, Gateway, GatewayConfig};
use shale_metadata::{BasinConfig, Metadata, MetadataApi, MetadataConfig, TablesConfig, DEFAULT_DB_PATH};
use shale_proto::Record;
use shale_reader::{History, HistoryRead, Reader, ReaderConfig};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};
use shale_storage::{open_store_with, DelayedStore, InstrumentedStore, ManualClock};
use shale_tables::{Step, StoreLocation, TableHistory, Tierer};
use tokio::time::Instant;

const BASIN: &str = "passes-bench";
const STREAMS: u64 = 4;

pub async fn run(passes: u64, records_per_pass: u64, pass_seconds: u64, delay: Duration) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = format!("file://{}", dir.path().display());
    let store: Arc<dyn ObjectStore> = Arc::new(DelayedStore::new(open_store_with(&url, false)?, delay));
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let metadata =
        Arc::new(Metadata::open_with(store.clone(), DEFAULT_DB_PATH, clock.clone(), &MetadataConfig::default()).await?);
    let gateway = Gateway::start(GatewayConfig::default(), store.clone(), metadata.clone(), clock.clone())?;
    let tables = TablesConfig { after_secs: 0, serve_reads: true, ..Default::default() };
    let config = BasinConfig { create_stream_on_append: true, tables: Some(tables), ..BasinConfig::default() };
    metadata.create_basin(BASIN, config).await?;
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), store.clone(), metadata.clone()));
    let tierer = Tierer::new(
        metadata.clone(),
        reader,
        store.clone(),
        StoreLocation(url.clone()),
        clock.clone(),
        Box::new(|_| true),
    );
    let stats = tierer.stats();
    let mut window_start = stats.totals();
    let probe = InstrumentedStore::new(store.clone());
    let probe_counters = probe.counters();
    let probe: Arc<dyn ObjectStore> = Arc::new(probe);
    let state_key = Path::from(format!("tables/{BASIN}/state.json"));
    let root = Path::from(format!("tables/{BASIN}"));

    println!(
        "{passes} passes of {records_per_pass} records, {pass_seconds} s apart (manual clock), store delay {delay:?}"
    );
    println!(
        "{:>8} {:>5} {:>10} {:>6} {:>8} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8} {:>12} {:>13}  step means ms (prepare gather write commit maintain)",
        "pass",
        "days",
        "state KiB",
        "files",
        "archives",
        "manifests",
        "snapshots",
        "garbage",
        "objects",
        "p50 ms",
        "p99 ms",
        "history GETs",
        "history KiB"
    );
    let every = (passes / 20).max(1);
    let mut window = Vec::new();
    for pass in 0..passes {
        let records = (0..records_per_pass)
            .map(|i| Record {
                body: Bytes::from(format!("{pass:012}-{i:04}-{}", "x".repeat(83))),
                ..Default::default()
            })
            .collect();
        let stream = format!("s{}", pass % STREAMS);
        gateway.append(AppendInput { basin: BASIN.into(), stream, records, ..Default::default() }).await?;
        clock.advance(Duration::from_secs(pass_seconds));
        let started = Instant::now();
        let tiered = tierer.run_pass().await?;
        window.push(started.elapsed());
        anyhow::ensure!(tiered == records_per_pass, "pass {pass} tiered {tiered} records");
        if (pass + 1) % every != 0 {
            continue;
        }
        let (state, _) = tierer.state(BASIN).await?;
        let state_bytes = store.head(&state_key).await?.size;
        let objects = store.list(Some(&root)).try_collect::<Vec<_>>().await?.len();
        let history = TableHistory::new(metadata.clone(), probe.clone());
        let (gets, bytes) =
            (probe_counters.gets(), probe_counters.get_bytes.load(std::sync::atomic::Ordering::Relaxed));
        let read = HistoryRead {
            basin: BASIN.into(),
            stream: "s0".into(),
            created_at_ms: metadata.stream(BASIN, "s0").await?.record.created_at_ms,
            from_seq: 0,
            before_seq: u64::MAX,
            count: 1000,
            bytes: u64::MAX,
            until: None,
        };
        let read = history.read(&read).await.map_err(|e| anyhow::anyhow!("history read: {e}"))?;
        let expected = (records_per_pass * ((pass / STREAMS) + 1)).min(1000);
        anyhow::ensure!(read.records.len() as u64 == expected, "history read {} of {expected}", read.records.len());
        let (gets, bytes) =
            (probe_counters.gets() - gets, probe_counters.get_bytes.load(std::sync::atomic::Ordering::Relaxed) - bytes);
        let all = shale_tables::all_files(store.as_ref(), &state).await?;
        let days = all.iter().map(|f| f.day).collect::<std::collections::BTreeSet<_>>().len();
        window.sort();
        let at = |q: f64| window[((window.len() as f64 * q) as usize).min(window.len() - 1)].as_secs_f64() * 1000.0;
        let steps = stats.totals();
        let spent = steps.since(&window_start);
        window_start = steps;
        let means: Vec<String> =
            Step::ALL.iter().map(|&step| format!("{:.2}", spent.mean(step).as_secs_f64() * 1000.0)).collect();
        println!(
            "{:>8} {days:>5} {:>10.1} {:>6} {:>8} {:>9} {:>9} {:>7} {objects:>8} {:>8.2} {:>8.2} {gets:>12} {:>13.1}  {}",
            pass + 1,
            state_bytes as f64 / 1024.0,
            state.files.len(),
            state.archives.len(),
            state.manifests.len(),
            state.snapshots.len(),
            state.garbage.len(),
            at(0.5),
            at(0.99),
            bytes as f64 / 1024.0,
            means.join(" ")
        );
        window.clear();
    }
    let total = passes * records_per_pass;
    let python = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let script = r#"
import sys, json, duckdb
from pyiceberg.table import StaticTable
base, basin = sys.argv[1], sys.argv[2]
state = f"{base}/tables/{basin}/state.json"
duckdb.sql(f"SET VARIABLE lists = ['{state}'] || (SELECT coalesce(list('{base}/' || a.path), []) FROM (SELECT unnest(archives) AS a FROM read_json('{state}', maximum_object_size = 1000000000)))")
duckdb.sql(f"SET VARIABLE files = (SELECT list('{base}/' || f.path) FROM (SELECT unnest(files) AS f FROM read_json(getvariable('lists'), union_by_name = true, maximum_object_size = 1000000000)))")
d = duckdb.sql("select count(*), count(distinct (stream, seq_num)) from read_parquet(getvariable('files'))").fetchone()
version = open(f"{base}/tables/{basin}/metadata/version-hint.text").read().strip()
rows = StaticTable.from_metadata(f"file://{base}/tables/{basin}/metadata/v{version}.metadata.json").scan().to_arrow()
pairs = len(set(zip(rows["stream"].to_pylist(), rows["seq_num"].to_pylist())))
print(json.dumps({"duckdb": list(d), "iceberg": [rows.num_rows, pairs]}))
"#;
    match std::process::Command::new(&python).args(["-c", script]).arg(dir.path()).arg(BASIN).output() {
        Ok(output) if output.status.success() => {
            let seen: serde_json::Value = serde_json::from_slice(&output.stdout)?;
            println!(
                "appended {total} records; rows and distinct (stream, seq_num): DuckDB {}, pyiceberg {}",
                seen["duckdb"], seen["iceberg"]
            );
            for engine in ["duckdb", "iceberg"] {
                anyhow::ensure!(seen[engine] == serde_json::json!([total, total]), "{engine} saw {}", seen[engine]);
            }
        }
        Ok(output) => anyhow::bail!("engines: {}", String::from_utf8_lossy(&output.stderr)),
        Err(e) => println!("engines: not run ({e}: no .venv/bin/python with duckdb and pyiceberg)"),
    }
    gateway.shutdown().await;
    metadata.close().await?;
    Ok(())
}
