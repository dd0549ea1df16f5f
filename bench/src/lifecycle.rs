//! `shale-lifecycle-bench`: the data lifecycle at a chosen store latency. Writes
//! `--mib` of 1 KiB records over `--streams` streams (the first half with a one-hour
//! retention age) through a gateway, then compacts, then lets the retention of half the
//! data expire (an injected clock jumps ahead) and reclaims it. Prints the store's objects
//! and bytes at each step, compaction throughput and its GETs and PUTs per GiB, the GETs
//! per MiB of a cold catch-up read of one stream before and after compaction, and how long
//! reclaiming took.
//!
//!   cargo run --release -p shale-bench --bin shale-lifecycle-bench -- --mib 1024 --delay 30ms

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use clap::Parser;
use futures::TryStreamExt;
use shale_compactor::{Compactor, CompactorConfig};
use shale_gateway::{AppendInput, Gateway, GatewayConfig};
use shale_metadata::{
    BasinConfig, Metadata, MetadataApi, MetadataConfig, RetentionPolicy, StreamConfig, DEFAULT_DB_PATH,
};
use shale_proto::Record;
use shale_reader::{ReadLimits, ReadRequest, ReadStart, Reader, ReaderConfig};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::ObjectStore;
mod callgrind;
mod proc_stat;
use proc_stat::own_cpu_seconds;
use shale_storage::{open_store_with, Clock, DelayedStore, InstrumentedStore, ManualClock, StoreCounters, SystemClock};

#[derive(Debug, Parser)]
struct Args {
    /// Latency added to every store request.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// Store URL; default: a fresh directory under the system's temp dir.
    #[arg(long)]
    store: Option<String>,
    /// MiB of record bodies to write.
    #[arg(long, default_value = "1024")]
    mib: u64,
    #[arg(long, default_value = "1000")]
    streams: usize,
    /// Records per append (1 KiB each).
    #[arg(long, default_value = "16")]
    batch: usize,
    /// Concurrent appenders.
    #[arg(long, default_value = "64")]
    appenders: usize,
}

const BASIN: &str = "lifecycle-bench";
const RECORD_BYTES: usize = 1024;
const RETENTION_SECS: u64 = 3600;

fn stream_name(i: usize) -> String {
    format!("s{i:04}")
}

/// Segment objects and their bytes on the store.
async fn objects(store: &dyn ObjectStore) -> anyhow::Result<(u64, u64)> {
    let listed: Vec<_> = store.list(Some(&Path::from("segments"))).try_collect().await?;
    Ok((listed.len() as u64, listed.iter().map(|m| m.size).sum()))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// GETs a cold reader makes per MiB to read `stream` from its first retained record.
async fn catch_up_gets_per_mib(
    store: Arc<dyn ObjectStore>,
    metadata: Arc<dyn MetadataApi>,
    stream: &str,
) -> anyhow::Result<f64> {
    let instrumented = InstrumentedStore::new(store);
    let counters = instrumented.counters();
    let reader = Reader::new(&ReaderConfig::default(), Arc::new(instrumented), metadata);
    let (mut next, mut bytes) = (0u64, 0u64);
    loop {
        let request = ReadRequest {
            basin: BASIN.into(),
            stream: stream.into(),
            start: ReadStart::SeqNum(next),
            limits: ReadLimits::default(),
            until: None,
            clamp: true,
            wait: Duration::ZERO,
        };
        let output = reader.read(&request).await?;
        let Some(last) = output.records.last() else { break };
        next = last.seq_num + 1;
        bytes += output.records.iter().map(|r| r.body.len() as u64).sum::<u64>();
    }
    Ok(counters.gets() as f64 / mib(bytes).max(f64::MIN_POSITIVE))
}

/// Reclaim passes, `delete_grace` apart on the injected clock, until the released
/// segments are deleted; returns the wall time.
async fn reclaim(metadata: &Metadata, store: &dyn ObjectStore, clock: &ManualClock) -> anyhow::Result<Duration> {
    let started = Instant::now();
    metadata.reclaim(store).await?;
    clock.advance(Duration::from_secs(31));
    metadata.reclaim(store).await?;
    Ok(started.elapsed())
}

fn requests(counters: &StoreCounters) -> (u64, u64) {
    (counters.puts(), counters.gets())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let url = args.store.clone().unwrap_or_else(|| format!("file://{}", dir.path().display()));
    let raw = open_store_with(&url, false)?;
    let instrumented = InstrumentedStore::new(Arc::new(DelayedStore::new(raw.clone(), args.delay)));
    let counters = instrumented.counters();
    let store: Arc<dyn ObjectStore> = Arc::new(instrumented);
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let config = MetadataConfig { delete_grace: Duration::from_secs(30), ..MetadataConfig::default() };
    let metadata = Arc::new(Metadata::open_with(store.clone(), DEFAULT_DB_PATH, clock.clone(), &config).await?);
    let gateway = Arc::new(Gateway::start(GatewayConfig::default(), store.clone(), metadata.clone(), clock.clone())?);
    metadata.create_basin(BASIN, BasinConfig::default()).await?;
    for i in 0..args.streams {
        let retention =
            if i < args.streams / 2 { RetentionPolicy::Age(RETENTION_SECS) } else { RetentionPolicy::Infinite };
        let config = StreamConfig { retention_policy: Some(retention), ..StreamConfig::default() };
        metadata.create_stream(BASIN, &stream_name(i), config).await?;
    }

    // Write.
    let target = args.mib * 1024 * 1024;
    let written = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let appenders: Vec<_> = (0..args.appenders)
        .map(|a| {
            let (gateway, written, streams, batch) = (gateway.clone(), written.clone(), args.streams, args.batch);
            tokio::spawn(async move {
                let body = Bytes::from(vec![b'x'; RECORD_BYTES]);
                let mut n = a;
                while written.fetch_add((batch * RECORD_BYTES) as u64, Ordering::Relaxed) < target {
                    let records = (0..batch).map(|_| Record { body: body.clone(), ..Default::default() }).collect();
                    let input = AppendInput {
                        basin: BASIN.into(),
                        stream: stream_name(n % streams),
                        records,
                        ..Default::default()
                    };
                    gateway.append(input).await?;
                    n = n.wrapping_mul(31).wrapping_add(7);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for appender in appenders {
        appender.await??;
    }
    let write_secs = started.elapsed().as_secs_f64();
    let (segments, segment_bytes) = objects(store.as_ref()).await?;
    println!("store delay {:?}; {} streams, half with a {RETENTION_SECS} s retention age", args.delay, args.streams);
    println!(
        "written: {:.0} MiB in {write_secs:.1} s ({:.0} MiB/s); {segments} segments, {:.0} MiB, average {:.2} MiB",
        mib(target),
        mib(target) / write_secs,
        mib(segment_bytes),
        mib(segment_bytes) / segments.max(1) as f64
    );
    let probe = stream_name(args.streams * 3 / 4);
    let before = catch_up_gets_per_mib(raw.clone(), metadata.clone(), &probe).await?;

    // Compact.
    clock.advance(Duration::from_secs(61));
    let compactor = Compactor::new(CompactorConfig::default(), metadata.clone(), store.clone(), clock.clone());
    let (puts_before, gets_before) = requests(&counters);
    let (started, cpu_before) = (Instant::now(), own_cpu_seconds());
    callgrind::zero();
    let (mut compacted_objects, mut compacted_bytes) = (0, 0);
    let mut waited = false;
    loop {
        let report = compactor.run_once().await?;
        if report.objects_written == 0 {
            // Less than `min_object_bytes` is left: it is compacted once its oldest
            // segment is `max_wait` old.
            if report.pending_bytes == 0 || waited {
                break;
            }
            clock.advance(CompactorConfig::default().max_wait);
            waited = true;
        }
        compacted_objects += report.objects_written;
        compacted_bytes += report.bytes_written;
    }
    callgrind::dump(c"compaction");
    let (compact_secs, compact_cpu) = (started.elapsed().as_secs_f64(), own_cpu_seconds() - cpu_before);
    let (puts_after, gets_after) = requests(&counters);
    let read = compactor.stats().bytes_read.load(Ordering::Relaxed);
    let coalesced = compactor.stats().get_requests.load(Ordering::Relaxed);
    let gib_read = read as f64 / (1u64 << 30) as f64;
    println!(
        "compaction: {:.0} MiB read, {compacted_objects} objects ({:.0} MiB) written in {compact_secs:.1} s: {:.0} MiB/s; \
         per GiB compacted: {:.0} segment GETs once adjacent ranges coalesce (as on S3; {:.0} range reads here, \
         metadata included), {:.0} PUTs (objects and metadata); {:.2} CPU seconds per GiB compacted",
        mib(read),
        mib(compacted_bytes),
        mib(read) / compact_secs,
        coalesced as f64 / gib_read,
        (gets_after - gets_before) as f64 / gib_read,
        (puts_after - puts_before) as f64 / gib_read,
        compact_cpu / gib_read,
    );
    let took = reclaim(&metadata, store.as_ref(), &clock).await?;
    let (objects_at_rest, bytes_at_rest) = objects(store.as_ref()).await?;
    let after = catch_up_gets_per_mib(raw.clone(), metadata.clone(), &probe).await?;
    println!(
        "after compaction and collection ({:.1} s): {objects_at_rest} objects, {:.0} MiB, average {:.1} MiB; \
         catch-up of one stream: {before:.1} GETs per MiB before compaction, {after:.1} after",
        took.as_secs_f64(),
        mib(bytes_at_rest),
        mib(bytes_at_rest) / objects_at_rest.max(1) as f64
    );

    // Retention expires half.
    clock.advance(Duration::from_secs(RETENTION_SECS));
    let took = reclaim(&metadata, store.as_ref(), &clock).await?;
    let (objects_left, bytes_left) = objects(store.as_ref()).await?;
    let stats = metadata.gc_stats();
    println!(
        "retention expired half: reclaimed in {:.1} s of passes; {objects_left} objects, {:.0} MiB left \
         ({:.0} MiB before); {:.0} MiB still held in objects shared with live streams",
        took.as_secs_f64(),
        mib(bytes_left),
        mib(bytes_at_rest),
        mib(stats.dead_bytes_in_live_segments.load(Ordering::Relaxed))
    );
    gateway.shutdown().await;
    metadata.close().await?;
    Ok(())
}
