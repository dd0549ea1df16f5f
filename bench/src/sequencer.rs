//! `shale-sequencer-bench`: commits per second through one metadata instance at a
//! chosen object-store latency, with 1 to N concurrent committers.
//!
//! Each committer commits a one-append segment to one of `--streams` streams in a
//! closed loop (the commit a gateway makes for a lone append). `--via grpc` puts the
//! metadata behind its gRPC service on loopback, committers spread over `--gateways`
//! clients (each one commit pipeline, as a gateway has); `--via inprocess` calls it
//! directly. Prints, per concurrency: commits/s, commit p50/p99, WAL flushes/s and
//! store PUTs/s at metadata.
//!
//!   cargo run --release -p shale-bench --bin shale-sequencer-bench -- --delay 30ms

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use clap::Parser;
use shale_metadata::{
    BasinConfig, CommitAppend, CommitRequest, CommitUnit, Metadata, MetadataApi, MetadataService, RemoteConfig,
    RemoteMetadata, DEFAULT_DB_PATH,
};
use shale_storage::{open_store, DelayedStore, InstrumentedStore, SystemClock};

#[derive(Debug, Parser)]
struct Args {
    /// Latency added to every store request.
    #[arg(long, default_value = "30ms", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// Store URL. The default, `memory://`, answers at once apart from `--delay`, so what
    /// is measured is the sequencer and SlateDB; `s3://...` puts a real server behind it.
    /// (`file://` costs two PUTs per WAL object: the local filesystem store has no
    /// attributes, and SlateDB retries its conditional PUT without them.)
    #[arg(long, default_value = "memory://")]
    store: String,
    /// Concurrent committers to run, one after another.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    committers: Vec<usize>,
    /// Seconds per concurrency level.
    #[arg(long, default_value = "5")]
    seconds: u64,
    /// Streams the commits spread over.
    #[arg(long, default_value = "1000")]
    streams: usize,
    /// inprocess | grpc
    #[arg(long, default_value = "grpc")]
    via: String,
    /// Metadata clients (commit pipelines) the committers share, with `--via grpc`.
    #[arg(long, default_value = "4")]
    gateways: usize,
    /// Also time this many sequential stream lookups (what a read open costs).
    #[arg(long, default_value = "0")]
    lookups: usize,
}

const BASIN: &str = "bench-basin";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let raw = open_store(&args.store)?;
    let instrumented = Arc::new(InstrumentedStore::new(Arc::new(DelayedStore::new(raw, args.delay))));
    let counters = instrumented.counters();
    let metadata = Arc::new(Metadata::open(instrumented.clone(), DEFAULT_DB_PATH, Arc::new(SystemClock)).await?);
    let config = BasinConfig { create_stream_on_append: true, ..BasinConfig::default() };
    metadata.create_basin(BASIN, config).await?;
    let clients: Vec<Arc<dyn MetadataApi>> = match args.via.as_str() {
        "inprocess" => vec![metadata.clone()],
        "grpc" => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let address = listener.local_addr()?.to_string();
            let service = MetadataService::new(metadata.clone(), None).into_server(None);
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            tokio::spawn(tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming));
            (0..args.gateways.max(1))
                .map(|_| {
                    RemoteMetadata::new(vec![address.clone()], None, RemoteConfig::default())
                        .map(|c| Arc::new(c) as Arc<dyn MetadataApi>)
                })
                .collect::<Result<_, _>>()?
        }
        other => anyhow::bail!("unknown --via {other} (inprocess | grpc)"),
    };
    // Every stream exists before measuring: creation is not what this measures.
    run_level(&clients, args.streams.min(256), args.streams, Duration::from_secs(2)).await;
    println!(
        "store delay {:?} per request, {} streams, via {} ({} commit pipelines)",
        args.delay,
        args.streams,
        args.via,
        clients.len()
    );
    println!(
        "{:>10} {:>12} {:>10} {:>10} {:>14} {:>12}",
        "committers", "commits/s", "p50 ms", "p99 ms", "WAL flushes/s", "PUTs/s"
    );
    let stats = metadata.commit_stats();
    for &committers in &args.committers {
        let (flushes, puts) = (stats.flushes.load(Ordering::Relaxed), counters.puts());
        let started = Instant::now();
        let mut latencies = run_level(&clients, committers, args.streams, Duration::from_secs(args.seconds)).await;
        let elapsed = started.elapsed().as_secs_f64();
        latencies.sort_unstable();
        let pct = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        println!(
            "{:>10} {:>12.0} {:>10.1} {:>10.1} {:>14.1} {:>12.1}",
            committers,
            latencies.len() as f64 / elapsed,
            pct(0.5),
            pct(0.99),
            (stats.flushes.load(Ordering::Relaxed) - flushes) as f64 / elapsed,
            (counters.puts() - puts) as f64 / elapsed,
        );
    }
    if args.lookups > 0 {
        let started = Instant::now();
        for i in 0..args.lookups {
            clients[0].stream(BASIN, &format!("s{:05}", i % args.streams)).await?;
        }
        let micros = started.elapsed().as_secs_f64() * 1e6 / args.lookups as f64;
        println!("stream lookup via {}: {micros:.0} us each ({} sequential)", args.via, args.lookups);
    }
    metadata.close().await?;
    Ok(())
}

/// Runs `committers` closed-loop committers for `duration`; returns every commit's latency.
async fn run_level(
    clients: &[Arc<dyn MetadataApi>],
    committers: usize,
    streams: usize,
    duration: Duration,
) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..committers)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let outcome = client.commit_many(vec![one_append(n % streams)]).await;
                    match outcome {
                        Ok(outcomes) if outcomes.iter().flatten().all(Result::is_ok) => {
                            latencies.push(started.elapsed())
                        }
                        Ok(outcomes) => eprintln!("commit refused: {outcomes:?}"),
                        Err(e) => eprintln!("commit failed: {e}"),
                    }
                    n += committers;
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    all
}

fn one_append(stream: usize) -> CommitRequest {
    CommitRequest {
        segment_id: shale_storage::ids::segment_id(&shale_storage::SystemClock),
        units: vec![CommitUnit {
            appends: vec![CommitAppend {
                basin: BASIN.into(),
                stream: format!("s{stream:05}"),
                offset: 0,
                len: 100,
                arrival: 0,
                client_timestamps: vec![None],
                commands: Vec::new(),
                match_seq_num: None,
                fencing_token: None,
                metered_bytes: 100,
                producer: None,
                transaction: None,
            }],
        }],
    }
}
