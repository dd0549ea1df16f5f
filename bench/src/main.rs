//! `shale-bench`: drives an S2-compatible HTTP endpoint and prints figures.
//!
//! Without `--url` it starts `shale serve` in process on a temporary local-filesystem
//! store (or `--store URL`) on a loopback port. Workloads: `serial` (one client, one
//! stream, 128-byte records, one append at a time) and `throughput` (N producers over M
//! streams, 1 KiB records in batches). Figures: ack latency percentiles, records/s, MiB/s,
//! and, from the server's `/metrics`, object PUTs per GiB.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::{json, Value};

#[derive(Debug, Parser)]
struct Args {
    /// Workload: serial or throughput.
    #[arg(long, default_value = "serial")]
    workload: String,
    /// Target server (loopback only); default: an in-process `shale serve`.
    #[arg(long)]
    url: Option<String>,
    /// Store for the in-process server (default: a temporary directory).
    #[arg(long)]
    store: Option<String>,
    /// How long to run.
    #[arg(long, default_value = "10")]
    seconds: u64,
    /// Producers (throughput).
    #[arg(long, default_value = "16")]
    producers: usize,
    /// Streams (throughput).
    #[arg(long, default_value = "1000")]
    streams: usize,
    /// Records per append (throughput).
    #[arg(long, default_value = "100")]
    batch: usize,
    /// Record body size in bytes (serial default 128, throughput default 1024).
    #[arg(long)]
    record_bytes: Option<usize>,
    /// Write the figures as JSON here too.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

const BASIN: &str = "bench-basin";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _dir = tempfile::tempdir()?;
    let (base, server) = match &args.url {
        Some(url) => {
            if !(url.contains("127.0.0.1") || url.contains("localhost") || url.contains("[::1]")) {
                bail!("benchmarks only send traffic to loopback addresses");
            }
            (url.trim_end_matches('/').to_string(), None)
        }
        None => {
            let config = shale::ServeConfig {
                data_dir: _dir.path().join("data"),
                store: args.store.clone(),
                http: "127.0.0.1:0".parse()?,
                grpc: "127.0.0.1:0".parse()?,
                ..shale::ServeConfig::default()
            };
            let running = shale::serve(config).await?;
            (format!("http://{}", running.http_addr), Some(running))
        }
    };
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    let _ = client.put(format!("{base}/v1/basins/{BASIN}")).json(&json!({})).send().await?;
    let before = metrics(&client, &base).await;
    let figures = match args.workload.as_str() {
        "serial" => serial(&client, &base, &args).await?,
        "throughput" => throughput(&client, &base, &args).await?,
        other => bail!("unknown workload {other}"),
    };
    let after = metrics(&client, &base).await;
    let mut figures = figures;
    if let (Some(before), Some(after)) = (before, after) {
        let puts = after.0 - before.0;
        let written = figures["mib"].as_f64().unwrap_or(0.0) / 1024.0;
        figures["object_puts"] = json!(puts);
        if written > 0.0 {
            figures["object_puts_per_gib"] = json!((puts / written).round());
        }
        figures["segments"] = json!(after.1 - before.1);
    }
    println!("{}", serde_json::to_string_pretty(&figures)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)?;
    }
    if let Some(server) = server {
        server.shutdown().await?;
    }
    Ok(())
}

/// (object PUTs, segments written) from `/metrics`, if the server is Shale.
async fn metrics(client: &reqwest::Client, base: &str) -> Option<(f64, f64)> {
    let text = client.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    let value = |name: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.parse().ok());
    Some((value("shale_object_puts_total")?, value("shale_segments_written_total")?))
}

async fn ensure_stream(client: &reqwest::Client, base: &str, stream: &str) -> anyhow::Result<()> {
    client.put(format!("{base}/v1/streams/{stream}")).header("s2-basin", BASIN).json(&json!({})).send().await?;
    Ok(())
}

async fn append(client: &reqwest::Client, base: &str, stream: &str, body: &Value) -> anyhow::Result<()> {
    let response = client
        .post(format!("{base}/v1/streams/{stream}/records"))
        .header("s2-basin", BASIN)
        .json(body)
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("append failed: {} {}", response.status(), response.text().await?);
    }
    Ok(())
}

fn percentiles(latencies: &mut [Duration]) -> Value {
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1).min(latencies.len().saturating_sub(1));
        latencies.get(i).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0)
    };
    json!({ "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "p999_ms": at(0.999) })
}

async fn serial(client: &reqwest::Client, base: &str, args: &Args) -> anyhow::Result<Value> {
    let size = args.record_bytes.unwrap_or(128);
    ensure_stream(client, base, "serial").await?;
    let body = json!({ "records": [{ "body": "x".repeat(size) }] });
    let mut latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < deadline {
        let started = Instant::now();
        append(client, base, "serial", &body).await?;
        latencies.push(started.elapsed());
    }
    let n = latencies.len();
    Ok(json!({
        "workload": "serial", "record_bytes": size, "appends": n,
        "appends_per_sec": n as f64 / args.seconds as f64,
        "mib": (n * size) as f64 / (1024.0 * 1024.0),
        "latency": percentiles(&mut latencies),
    }))
}

async fn throughput(client: &reqwest::Client, base: &str, args: &Args) -> anyhow::Result<Value> {
    let size = args.record_bytes.unwrap_or(1024);
    for s in 0..args.streams {
        ensure_stream(client, base, &format!("t{s}")).await.context("creating streams")?;
    }
    let records: Vec<Value> = (0..args.batch).map(|_| json!({ "body": "x".repeat(size) })).collect();
    let body = json!({ "records": records });
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        let (client, base, body, streams) = (client.clone(), base.to_string(), body.clone(), args.streams);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = p;
            while Instant::now() < deadline {
                let stream = format!("t{}", i % streams);
                let t = Instant::now();
                append(&client, &base, &stream, &body).await?;
                latencies.push(t.elapsed());
                i += args_stride();
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let records = latencies.len() * args.batch;
    let mib = (records * size) as f64 / (1024.0 * 1024.0);
    Ok(json!({
        "workload": "throughput", "producers": args.producers, "streams": args.streams,
        "batch": args.batch, "record_bytes": size, "appends": latencies.len(),
        "records_per_sec": records as f64 / elapsed, "mib_per_sec": mib / elapsed, "mib": mib,
        "latency": percentiles(&mut latencies),
    }))
}

/// Producers step through streams with a prime stride so they spread over all of them.
fn args_stride() -> usize {
    7919
}
