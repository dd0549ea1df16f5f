//! `shale-cpu-bench`: what one client path costs the server, in CPU seconds per GiB.
//! Moves `--mib` of `--record-bytes` records through one path of a running server as
//! fast as the path goes, and prints one JSON object: the bytes moved, the rate and the
//! server's CPU seconds (from `/proc/<pid>/stat`, `--server-pid`) per GiB. Paths:
//! - `s2s-append`: an S2S append session (S2's Rust SDK), batches of `--batch-records`,
//!   up to `--in-flight` batches awaiting their acks, each record with an 8-byte header
//!   as `s2 bench` writes them (so the read paths read records with one);
//! - `s2s-produce`: S2's SDK producer (what `s2 bench` writes with: records submitted one
//!   at a time, batched by the SDK with its linger, `--linger-ms`, 5 by default as in the
//!   SDK), each record with an 8-byte header and a timestamp, paced at `--rate` MiB/s;
//!   its output adds the ack latency of every record, from when it was due;
//! - `json-append`: unary JSON appends of `--batch-records` records, `--in-flight` at once;
//! - `s2s-read`: an S2S read session (S2's Rust SDK) from sequence number 0, waiting at the
//!   tail (so one started beside a write path follows it live, as `s2 bench`'s reader does);
//! - `sse-read`: an SSE read session from sequence number 0;
//! - `grpc-read`: a `shale.v1` `ReadSession` from sequence number 0.
//!
//! The read paths read `--mib` from `--stream`, written before by a write path.
//! `bench/cpu.sh` runs every path (Kafka's through `shale-kafka-bench`), natively for CPU
//! seconds and under callgrind for instruction counts. Loopback only.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use futures::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use s2_sdk::append_session::AppendSessionConfig;
use s2_sdk::batching::BatchingConfig;
use s2_sdk::producer::{IndexedAppendAck, ProducerConfig};
use s2_sdk::types::{
    AppendInput, AppendRecord, AppendRecordBatch, Header, ReadFrom, ReadInput, ReadLimits, ReadSessionConfig,
    ReadStart, ReadStop, S2Config, S2Endpoints,
};
use s2_sdk::S2;
use serde_json::json;
use shale_proto::grpc::records_client::RecordsClient;
use shale_proto::grpc::{read_request, read_session_response, ReadRequest};
use tokio::time::Instant;

mod latency;
mod proc_stat;
use proc_stat::cpu_seconds_of;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Path {
    S2sAppend,
    S2sProduce,
    JsonAppend,
    S2sRead,
    SseRead,
    GrpcRead,
}

#[derive(Parser, Debug)]
struct Args {
    /// The server's HTTP base (loopback).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The server's gRPC base (for `grpc-read`).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    grpc: String,
    /// The server's pids, whose CPU time is summed.
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    #[arg(long, value_enum)]
    path: Path,
    /// MiB of record bodies to move.
    #[arg(long, default_value = "256")]
    mib: u64,
    #[arg(long, default_value = "cpu-basin")]
    basin: String,
    /// Stream written (write paths) or read (read paths).
    #[arg(long, default_value = "cpu")]
    stream: String,
    #[arg(long, default_value = "1024")]
    record_bytes: usize,
    /// Records per append.
    #[arg(long, default_value = "256")]
    batch_records: usize,
    /// Appends awaiting their acks at once.
    #[arg(long, default_value = "8")]
    in_flight: usize,
    /// MiB/s `s2s-produce` paces itself to.
    #[arg(long, default_value = "50")]
    rate: f64,
    /// How long `s2s-produce`'s SDK holds a batch open for more records.
    #[arg(long, default_value = "5")]
    linger_ms: u64,
}

/// A record body of `len` lowercase letters from a small generator (text, so the JSON
/// path sends it raw; not one repeated byte).
fn body(len: usize, seed: u64) -> Bytes {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            b'a' + ((state >> 33) % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

fn total_records(args: &Args) -> u64 {
    (args.mib * 1024 * 1024).div_ceil(args.record_bytes as u64)
}

fn sdk(args: &Args) -> anyhow::Result<S2> {
    let endpoints = S2Endpoints::for_endpoint(&args.url).context("endpoint")?;
    Ok(S2::new(S2Config::new("none").with_endpoints(endpoints))?)
}

async fn prepare(args: &Args, http: &reqwest::Client) -> anyhow::Result<()> {
    // Both answer 409 when they exist already: fine.
    http.post(format!("{}/v1/basins", args.url)).json(&json!({ "basin": args.basin })).send().await?;
    http.post(format!("{}/v1/streams", args.url))
        .header("s2-basin", &args.basin)
        .json(&json!({ "stream": args.stream }))
        .send()
        .await?;
    Ok(())
}

async fn s2s_append(args: &Args) -> anyhow::Result<u64> {
    let s2 = sdk(args)?;
    let stream = s2.basin(args.basin.parse()?).stream(args.stream.parse()?);
    let session = stream.append_session(AppendSessionConfig::new());
    let bodies: Vec<Bytes> = (0..args.batch_records as u64).map(|i| body(args.record_bytes, i)).collect();
    let batches = total_records(args).div_ceil(args.batch_records as u64);
    let mut tickets = FuturesOrdered::new();
    for batch in 0..batches {
        let records = (0..).zip(&bodies).map(|(i, b)| {
            let hash = (batch * args.batch_records as u64 + i).to_be_bytes().to_vec();
            AppendRecord::new(b.clone())?.with_headers([Header::new("hash", hash)])
        });
        let records = records.collect::<Result<Vec<_>, _>>()?;
        tickets.push_back(session.submit(AppendInput::new(AppendRecordBatch::try_from_iter(records)?)).await?);
        if tickets.len() >= args.in_flight {
            tickets.next().await.context("a ticket")??;
        }
    }
    while let Some(ack) = tickets.next().await {
        ack?;
    }
    session.close().await?;
    Ok(batches * args.batch_records as u64 * args.record_bytes as u64)
}

/// The bytes written and every record's ack latency, from when it was due.
async fn s2s_produce(args: &Args) -> anyhow::Result<(u64, Vec<Duration>)> {
    let s2 = sdk(args)?;
    let stream = s2.basin(args.basin.parse()?).stream(args.stream.parse()?);
    let batching = BatchingConfig::default().with_linger(Duration::from_millis(args.linger_ms));
    let producer = stream.producer(ProducerConfig::default().with_batching(batching));
    let bodies: Vec<Bytes> = (0..256).map(|i| body(args.record_bytes, i)).collect();
    let total = total_records(args);
    let per_record = Duration::from_secs_f64(args.record_bytes as f64 / (args.rate * 1024.0 * 1024.0));
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(total as usize);
    let mut tickets = FuturesUnordered::new();
    for i in 0..total {
        let due = started + per_record.mul_f64(i as f64);
        while Instant::now() < due {
            tokio::select! {
                Some((ack, due)) = tickets.next(), if !tickets.is_empty() => {
                    let _: IndexedAppendAck = ack?;
                    latencies.push(Instant::elapsed(&due));
                }
                _ = tokio::time::sleep_until(due) => {}
            }
        }
        let record = AppendRecord::new(bodies[(i % 256) as usize].clone())?
            .with_headers([Header::new("hash", i.to_be_bytes().to_vec())])?
            .with_timestamp(started.elapsed().as_micros() as u64);
        let ticket = producer.submit(record).await?;
        tickets.push(async move { (ticket.await, due) });
    }
    while let Some((ack, due)) = tickets.next().await {
        ack?;
        latencies.push(due.elapsed());
    }
    producer.close().await?;
    Ok((total * args.record_bytes as u64, latencies))
}

async fn json_append(args: &Args, http: &reqwest::Client) -> anyhow::Result<u64> {
    let records: Vec<serde_json::Value> = (0..args.batch_records as u64)
        .map(|i| json!({ "body": String::from_utf8_lossy(&body(args.record_bytes, i)) }))
        .collect();
    let payload = Bytes::from(serde_json::to_vec(&json!({ "records": records }))?);
    let url = format!("{}/v1/streams/{}/records", args.url, args.stream);
    let batches = total_records(args).div_ceil(args.batch_records as u64);
    let append = |payload: Bytes| {
        let request =
            http.post(&url).header("s2-basin", &args.basin).header("content-type", "application/json").body(payload);
        async move {
            let response = request.send().await?;
            if !response.status().is_success() {
                bail!("append answered {}: {}", response.status(), response.text().await.unwrap_or_default());
            }
            Ok(())
        }
    };
    let mut pending = FuturesOrdered::new();
    for _ in 0..batches {
        pending.push_back(append(payload.clone()));
        if pending.len() >= args.in_flight {
            pending.next().await.context("an append")??;
        }
    }
    while let Some(done) = pending.next().await {
        done?;
    }
    Ok(batches * args.batch_records as u64 * args.record_bytes as u64)
}

async fn s2s_read(args: &Args) -> anyhow::Result<u64> {
    let s2 = sdk(args)?;
    let stream = s2.basin(args.basin.parse()?).stream(args.stream.parse()?);
    let wanted = total_records(args);
    let input = ReadInput::new()
        .with_start(ReadStart::new().with_from(ReadFrom::SeqNum(0)))
        // A bounded session stops at the tail unless told to wait: a read started beside a
        // write path follows it live.
        .with_stop(ReadStop::new().with_limits(ReadLimits::new().with_count(wanted as usize)).with_wait(60));
    let mut session = stream.read_session(input, ReadSessionConfig::default()).await?;
    let (mut records, mut bytes) = (0u64, 0u64);
    while records < wanted {
        let Some(batch) = session.next().await else { bail!("the read session ended after {records} records") };
        for record in batch?.records {
            records += 1;
            bytes += record.body.len() as u64;
        }
    }
    Ok(bytes)
}

async fn sse_read(args: &Args, http: &reqwest::Client) -> anyhow::Result<u64> {
    let wanted = total_records(args);
    let response = http
        .get(format!("{}/v1/streams/{}/records?seq_num=0&count={wanted}", args.url, args.stream))
        .header("s2-basin", &args.basin)
        .header("accept", "text/event-stream")
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("SSE read answered {}", response.status());
    }
    let mut body = response.bytes_stream();
    let mut bytes = 0u64;
    while let Some(chunk) = body.next().await {
        bytes += chunk?.len() as u64;
    }
    if bytes < args.mib * 1024 * 1024 {
        bail!("the SSE read ended after {bytes} bytes");
    }
    Ok(args.mib * 1024 * 1024)
}

async fn grpc_read(args: &Args) -> anyhow::Result<u64> {
    let mut client = RecordsClient::connect(args.grpc.clone()).await?.max_decoding_message_size(64 << 20);
    let wanted = total_records(args);
    let request = ReadRequest {
        basin: args.basin.clone(),
        stream: args.stream.clone(),
        start: Some(read_request::Start::SeqNum(0)),
        count: Some(wanted),
        ..Default::default()
    };
    let mut responses = client.read_session(request).await?.into_inner();
    let (mut records, mut bytes) = (0u64, 0u64);
    while records < wanted {
        let Some(response) = responses.message().await? else { bail!("the read session ended after {records}") };
        let Some(read_session_response::Event::Batch(batch)) = response.event else { continue };
        for record in batch.records {
            records += 1;
            bytes += record.body.len() as u64;
        }
    }
    Ok(bytes)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(600)).build()?;
    if matches!(args.path, Path::S2sAppend | Path::S2sProduce | Path::JsonAppend) {
        prepare(&args, &http).await?;
    }
    let cpu_before = cpu_seconds_of(&args.server_pid);
    let started = Instant::now();
    let (bytes, mut acks) = match args.path {
        Path::S2sAppend => (s2s_append(&args).await?, Vec::new()),
        Path::S2sProduce => s2s_produce(&args).await?,
        Path::JsonAppend => (json_append(&args, &http).await?, Vec::new()),
        Path::S2sRead => (s2s_read(&args).await?, Vec::new()),
        Path::SseRead => (sse_read(&args, &http).await?, Vec::new()),
        Path::GrpcRead => (grpc_read(&args).await?, Vec::new()),
    };
    let seconds = started.elapsed().as_secs_f64();
    let server_cpu = cpu_seconds_of(&args.server_pid) - cpu_before;
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let mut out = json!({
        "path": format!("{:?}", args.path),
        "mib": round(bytes as f64 / (1 << 20) as f64),
        "seconds": round(seconds),
        "mib_per_s": round(bytes as f64 / (1 << 20) as f64 / seconds),
        "server_cpu_seconds": round(server_cpu),
        "server_cpu_seconds_per_gib": round(server_cpu / gib),
    });
    if !acks.is_empty() {
        out["ack_latency"] = latency::percentiles(&mut acks);
    }
    println!("{out}");
    Ok(())
}
