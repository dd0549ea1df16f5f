//! `shale-tiering-bench`: the table tier at a chosen store latency. Writes `--mib` of
//! 1 KiB JSON records over `--streams` streams through a gateway into a basin with the
//! table tier on, then runs tiering passes until everything is in the table. Prints the
//! tiering throughput, Parquet bytes against the log's bytes, the PUTs and GETs per GiB
//! tiered, then reads every record back from the table as the reader's history tier
//! (MiB/s, GETs per GiB), and (when `.venv` has DuckDB) how fast DuckDB scans the table.
//! `--json` declares the bodies JSON, so tiering also decodes them into columns.
//!
//!   cargo run --release -p shale-bench --bin shale-tiering-bench -- --mib 512 --delay 30ms [--json]
//!   cargo run --release -p shale-bench --bin shale-tiering-bench -- --passes 100000
//!
//! `--passes` runs the table tier through many small passes instead (`table_passes`).
//!
//! Bodies are JSON objects with a counter, an amount and 900 bytes of pseudo-random
//! lowercase text, so they compress about as much as real payloads (not as much as
//! repeated bytes would).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use clap::Parser;
use futures::TryStreamExt;
use shale_gateway::{AppendInput, Gateway, GatewayConfig};
use shale_metadata::{BasinConfig, BodyFormat, Metadata, MetadataApi, MetadataConfig, TablesConfig, DEFAULT_DB_PATH};
use shale_proto::Record;
use shale_reader::{History, HistoryRead, Reader, ReaderConfig};
use shale_storage::object_store::path::Path;

mod callgrind;
mod proc_stat;
use proc_stat::own_cpu_seconds;
use shale_storage::object_store::ObjectStore;
use shale_storage::{open_store_with, DelayedStore, InstrumentedStore, SystemClock};
use shale_tables::{StoreLocation, TableHistory, Tierer};

#[derive(Debug, Parser)]
struct Args {
    /// Latency added to every store request.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// MiB of record bodies to write.
    #[arg(long, default_value = "256")]
    mib: u64,
    #[arg(long, default_value = "100")]
    streams: usize,
    /// Declare the bodies JSON: tiering decodes their fields into columns.
    #[arg(long)]
    json: bool,
    /// Instead: this many small passes, printing what must stay flat (`table_passes`).
    #[arg(long, default_value = "0")]
    passes: u64,
    /// With --passes: records appended (and tiered) per pass.
    #[arg(long, default_value = "10")]
    records_per_pass: u64,
    /// With --passes: seconds the manual clock moves on per pass.
    #[arg(long, default_value = "15")]
    pass_seconds: u64,
}

const BASIN: &str = "tiering-bench";
const RECORD_BYTES: usize = 1024;
const BATCH: usize = 500;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Record `n`'s body: about [`RECORD_BYTES`] of JSON.
fn body(n: u64) -> Bytes {
    let mut state = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let text: String = (0..900)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    let json = format!("{{\"order\":{n},\"amount\":{},\"note\":\"{text}\"}}", n % 1000);
    let mut bytes = json.into_bytes();
    bytes.resize(RECORD_BYTES, b' ');
    Bytes::from(bytes)
}

mod table_passes;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.passes > 0 {
        return table_passes::run(args.passes, args.records_per_pass, args.pass_seconds, args.delay).await;
    }
    let dir = tempfile::tempdir()?;
    let raw = open_store_with(&format!("file://{}", dir.path().display()), false)?;
    let instrumented = InstrumentedStore::new(Arc::new(DelayedStore::new(raw, args.delay)));
    let counters = instrumented.counters();
    let store: Arc<dyn ObjectStore> = Arc::new(instrumented);
    let clock = Arc::new(SystemClock);
    let metadata =
        Arc::new(Metadata::open_with(store.clone(), DEFAULT_DB_PATH, clock.clone(), &MetadataConfig::default()).await?);
    let gateway = Arc::new(Gateway::start(GatewayConfig::default(), store.clone(), metadata.clone(), clock.clone())?);
    let config = BasinConfig {
        create_stream_on_append: true,
        tables: Some(TablesConfig {
            after_secs: 0,
            body_format: if args.json { BodyFormat::Json } else { BodyFormat::Binary },
            serve_reads: true,
        }),
        ..BasinConfig::default()
    };
    metadata.create_basin(BASIN, config).await?;

    // Write: one appender per stream, batches of BATCH records.
    let per_stream = (args.mib * 1024 * 1024 / RECORD_BYTES as u64) / args.streams as u64;
    let appenders: Vec<_> = (0..args.streams)
        .map(|s| {
            let gateway = gateway.clone();
            tokio::spawn(async move {
                let mut n = 0;
                while n < per_stream {
                    let count = (per_stream - n).min(BATCH as u64);
                    let records = (n..n + count)
                        .map(|i| Record { body: body(i * 1000 + s as u64), ..Default::default() })
                        .collect();
                    let input =
                        AppendInput { basin: BASIN.into(), stream: format!("s{s:03}"), records, ..Default::default() };
                    gateway.append(input).await?;
                    n += count;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for appender in appenders {
        appender.await??;
    }
    let records = per_stream * args.streams as u64;
    let log_bytes: u64 = {
        let listed: Vec<_> = store.list(Some(&Path::from("segments"))).try_collect().await?;
        listed.iter().map(|m| m.size).sum()
    };
    let metered = records * (8 + RECORD_BYTES as u64);

    // Tier.
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), store.clone(), metadata.clone()));
    let location = StoreLocation::of_url(&format!("file://{}", dir.path().display()));
    let tierer = Tierer::new(metadata.clone(), reader, store.clone(), location, clock, Box::new(|_| true));
    let (puts, gets) = (counters.puts(), counters.gets());
    let (started, cpu_before) = (Instant::now(), own_cpu_seconds());
    callgrind::zero();
    let (mut tiered, mut passes) = (0, 0);
    while tiered < records {
        let rows = tierer.run_pass().await?;
        anyhow::ensure!(rows > 0, "a pass tiered nothing with {} records left", records - tiered);
        tiered += rows;
        passes += 1;
    }
    callgrind::dump(c"tiering");
    let (elapsed, cpu) = (started.elapsed(), own_cpu_seconds() - cpu_before);
    let (puts, gets) = (counters.puts() - puts, counters.gets() - gets);
    let table: Vec<_> = store.list(Some(&Path::from(format!("tables/{BASIN}/data")))).try_collect().await?;
    let parquet_bytes: u64 = table.iter().map(|m| m.size).sum();
    let gib = metered as f64 / (1024.0 * 1024.0 * 1024.0);

    println!("store delay {:?}, {} streams, {records} records of {RECORD_BYTES} B", args.delay, args.streams);
    println!(
        "tiering: {:.1} MiB/s ({:.1} MiB in {:.1} s, {passes} passes, {} files)",
        mib(metered) / elapsed.as_secs_f64(),
        mib(metered),
        elapsed.as_secs_f64(),
        table.len()
    );
    println!(
        "bytes: log segments {:.1} MiB, Parquet {:.1} MiB ({:.2} of the log)",
        mib(log_bytes),
        mib(parquet_bytes),
        parquet_bytes as f64 / log_bytes.max(1) as f64
    );
    println!("requests per GiB tiered: {:.0} PUTs, {:.0} GETs", puts as f64 / gib, gets as f64 / gib);
    println!("CPU per GiB tiered: {:.2} s (this process: the passes, and metadata beside them)", cpu / gib);

    // Read everything back from the table, as a reader does below a stream's trim point:
    // 1,000 records (at most 1 MiB) per read, every stream at once.
    let history = Arc::new(TableHistory::new(metadata.clone(), store.clone()));
    let gets = counters.gets();
    let started = Instant::now();
    let mut reads = Vec::new();
    for s in 0..args.streams {
        let (history, metadata) = (history.clone(), metadata.clone());
        reads.push(async move {
            let stream = format!("s{s:03}");
            let created_at_ms = metadata.stream(BASIN, &stream).await?.record.created_at_ms;
            let (mut next, mut read) = (0, 0u64);
            loop {
                let request = HistoryRead {
                    basin: BASIN.into(),
                    stream: stream.clone(),
                    created_at_ms,
                    from_seq: next,
                    before_seq: u64::MAX,
                    count: 1000,
                    bytes: 1024 * 1024,
                    until: None,
                };
                let records = history.read(&request).await?.records;
                let Some(last) = records.last() else { return anyhow::Ok(read) };
                next = last.seq_num + 1;
                read += records.len() as u64;
            }
        });
    }
    let mut history_records = 0;
    for chunk in futures::future::join_all(reads.into_iter().map(Box::pin).collect::<Vec<_>>()).await {
        history_records += chunk?;
    }
    let elapsed = started.elapsed();
    anyhow::ensure!(history_records == records, "read {history_records} of {records} records from the table");
    println!(
        "history reads from the table: {:.1} MiB/s ({:.1} s), {:.0} GETs per GiB read",
        mib(metered) / elapsed.as_secs_f64(),
        elapsed.as_secs_f64(),
        (counters.gets() - gets) as f64 / gib
    );

    let python = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let files = dir.path().join(format!("tables/{BASIN}/data/*/*.parquet"));
    let script = r#"
import sys, time, duckdb
duckdb.sql("select 1")
started = time.perf_counter()
amount = "amount" if sys.argv[2] == "json" else "cast(json_extract(decode(body), '$.amount') as int)"
rows, bytes, big = duckdb.sql(f"select count(*), sum(octet_length(body)), count(*) filter (where {amount} > 500) from read_parquet('{sys.argv[1]}', union_by_name = true)").fetchone()
print(rows, bytes, big, time.perf_counter() - started)
"#;
    let format = if args.json { "json" } else { "binary" };
    match std::process::Command::new(&python).args(["-c", script]).arg(&files).arg(format).output() {
        Ok(output) if output.status.success() => {
            let text = String::from_utf8_lossy(&output.stdout);
            let fields: Vec<&str> = text.split_whitespace().collect();
            let seconds: f64 = fields.get(3).and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
            println!(
                "DuckDB: count, body bytes and a JSON filter over {} rows in {seconds:.2} s ({:.0} MiB/s of Parquet, {:.0} MiB/s of bodies)",
                fields.first().unwrap_or(&"?"),
                mib(parquet_bytes) / seconds,
                mib(metered) / seconds
            );
        }
        _ => println!("DuckDB: not run (no .venv/bin/python with duckdb)"),
    }
    gateway.shutdown().await;
    metadata.close().await?;
    Ok(())
}
