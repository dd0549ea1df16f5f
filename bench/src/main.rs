//! `shale-bench`: drives an S2-compatible HTTP endpoint on loopback and prints figures.
//!
//! Without `--url` it starts `shale serve` in process on a temporary local-filesystem
//! store (or `--store URL`). Against separate roles, `--url` is a gateway, `--read-url` a
//! reader and `--metrics-url` the metadata process (see `bench/cluster.sh`). Workloads
//! (`--workload`):
//! - `serial`: one client, one stream, 128-byte records, one append at a time;
//! - `throughput`: N producers over M streams, 1 KiB records in batches, closed loop or
//!   paced with `--rate` (appends/s) for low-load cost figures;
//! - `e2e`: append-to-delivery latency through a live SSE read;
//! - `catchup`: write a range, then read it back cold and warm;
//! - `cardinality`: create and append to many streams.
//!
//! Every run adds, from the server's `/metrics` when it is Shale, object PUTs and GETs (per
//! GiB and per second) and, for the in-process server, RSS and CPU seconds per GiB.

mod client;
mod latency;
mod proc_stat;
mod workloads;

use std::time::Duration;

use tokio::time::Instant;

use anyhow::bail;
use clap::Parser;
use serde_json::{json, Value};

use client::Client;

#[derive(Debug, Parser)]
pub struct Args {
    /// serial | throughput | e2e | catchup | cardinality
    #[arg(long, default_value = "serial")]
    pub workload: String,
    /// Target server (loopback only); default: an in-process `shale serve`. With separate
    /// roles: a gateway.
    #[arg(long)]
    pub url: Option<String>,
    /// Where reads go when they are not `--url` (a `shale reader`).
    #[arg(long)]
    pub read_url: Option<String>,
    /// More `/metrics` endpoints whose object requests count (e.g. `shale metadata`'s).
    #[arg(long)]
    pub metrics_url: Vec<String>,
    /// Store for the in-process server (default: a temporary directory).
    #[arg(long)]
    pub store: Option<String>,
    /// How long to run (serial, throughput, e2e).
    #[arg(long, default_value = "10")]
    pub seconds: u64,
    /// Producers (throughput).
    #[arg(long, default_value = "16")]
    pub producers: usize,
    /// Streams (throughput).
    #[arg(long, default_value = "1000")]
    pub streams: usize,
    /// Records per append (throughput).
    #[arg(long, default_value = "100")]
    pub batch: usize,
    /// Total appends per second across producers (throughput); default closed loop.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Record body size in bytes (serial default 128, others 1024).
    #[arg(long)]
    pub record_bytes: Option<usize>,
    /// MiB to write and read back (catchup).
    #[arg(long, default_value = "256")]
    pub catchup_mib: u64,
    /// Streams to create (cardinality).
    #[arg(long, default_value = "1000000")]
    pub cardinality: u64,
    /// Cardinality: most seconds to wait after the load, until everything is compacted and
    /// the replaced segments deleted, before the idle period.
    #[arg(long, default_value = "0")]
    pub settle_seconds: u64,
    /// Cardinality: seconds to wait after settling before the idle period, so the metadata
    /// database's own compaction and collection of the load's rewrites are behind it.
    #[arg(long, default_value = "0")]
    pub rest_seconds: u64,
    /// Cardinality: length of the measured idle period (0: none).
    #[arg(long, default_value = "0")]
    pub idle_seconds: u64,
    /// Cardinality: share of the streams given a retention age of a minute after the idle
    /// period (e.g. 0.01); the run then waits for their records to be reclaimed.
    #[arg(long, default_value = "0")]
    pub retention_share: f64,
    /// Gateway setting for the in-process server (1 disables group commit).
    #[arg(long)]
    pub max_commit_group: Option<usize>,
    /// Gateway `min_seal_interval` for the in-process server, e.g. 25ms.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub min_seal_interval: Option<Duration>,
    /// Compactor `max_wait` for the in-process server, e.g. 30s: how long a load smaller
    /// than `min_object_bytes` waits before it is compacted (default 10 minutes).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub compaction_max_wait: Option<Duration>,
    /// Metadata `db_gc_interval` and `db_gc_min_age` for the in-process server, e.g. 30s, so
    /// a cardinality run's obsolete metadata objects are collected within its idle period.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub db_gc: Option<Duration>,
    /// Latency added to every object-store request of the in-process server, e.g. 30ms.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub store_delay: Option<Duration>,
    /// Metadata `db_poll_interval` for the in-process server (SlateDB's polls; 120 s default).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub db_poll: Option<Duration>,
    /// Throughput: the streams exist already (created by an earlier run), so the run
    /// makes no catalog calls and metadata's counters measure commits only.
    #[arg(long)]
    pub streams_exist: bool,
    /// In-process server on the local filesystem without fsync (`store_fsync = false`).
    #[arg(long)]
    pub no_fsync: bool,
    /// Throughput: every append as an idempotent producer (`producer_id` per producer
    /// and run, `producer_seq` per stream), to measure what idempotence costs.
    #[arg(long)]
    pub idempotent: bool,
    /// Write the figures as JSON here too.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Access token sent with every request (`Authorization: Bearer`), for a server with
    /// access control on; it needs the workload's operations and `account-metrics`.
    #[arg(long, env = "SHALE_BENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

fn is_loopback(url: &str) -> bool {
    ["http://127.", "http://localhost", "http://[::1]"].iter().any(|p| url.starts_with(p))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("data");
    let (base, server) = match &args.url {
        Some(url) if is_loopback(url) => (url.trim_end_matches('/').to_string(), None),
        Some(_) => bail!("benchmarks only send traffic to loopback addresses"),
        None => {
            let mut config = shale::ServeConfig {
                data_dir: data_dir.clone(),
                store: args.store.clone(),
                http: "127.0.0.1:0".parse()?,
                grpc: "127.0.0.1:0".parse()?,
                ..shale::ServeConfig::default()
            };
            if let Some(interval) = args.min_seal_interval {
                config.gateway.min_seal_interval = interval;
            }
            config.store_fsync = !args.no_fsync;
            if let Some(delay) = args.store_delay {
                config.store_delay = delay;
            }
            if let Some(poll) = args.db_poll {
                config.metadata.db_poll_interval = poll;
            }
            if let Some(gc) = args.db_gc {
                config.metadata.db_gc_interval = gc;
                config.metadata.db_gc_min_age = gc;
            }
            if let Some(wait) = args.compaction_max_wait {
                config.compactor.max_wait = wait;
            }
            if let Some(group) = args.max_commit_group {
                config.gateway.max_commit_group = group;
            }
            let running = shale::serve(config).await?;
            (format!("http://{}", running.http_addr), Some(running))
        }
    };
    for url in args.read_url.iter().chain(&args.metrics_url) {
        if !is_loopback(url) {
            bail!("benchmarks only send traffic to loopback addresses");
        }
    }
    let read_base = args.read_url.as_deref().map(|u| u.trim_end_matches('/').to_string()).unwrap_or(base.clone());
    let extra_metrics = args.metrics_url.iter().map(|u| u.trim_end_matches('/').to_string()).collect();
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = &args.token {
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
    }
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).default_headers(headers).build()?;
    let client = Client { http, base, read_base, extra_metrics };
    client.ensure_basin().await?;
    if args.workload == "throughput" && !args.streams_exist {
        workloads::prepare_throughput(&client, &args).await?;
    }
    let before = client.metrics().await;
    let (cpu_before, started) = (proc_stat::own_cpu_seconds(), Instant::now());
    let mut figures = match args.workload.as_str() {
        "serial" => workloads::serial(&client, &args).await?,
        "throughput" => workloads::throughput(&client, &args).await?,
        "e2e" => workloads::e2e(&client, &args).await?,
        "catchup" => workloads::catchup(&client, &args).await?,
        "cardinality" => {
            let local = args.store.is_none() && args.url.is_none();
            workloads::cardinality(&client, &args, local.then_some(data_dir.as_path())).await?
        }
        other => bail!("unknown workload {other}"),
    };
    let elapsed = started.elapsed();
    figures["workload"] = json!(args.workload);
    figures["target"] = json!(args
        .url
        .clone()
        .unwrap_or_else(|| format!("in-process shale, store {}", args.store.as_deref().unwrap_or("file (temp dir)"))));
    if let (Some(before), Some(after)) = (before, client.metrics().await) {
        add_cost(&mut figures, after.since(before), elapsed);
    }
    if server.is_some() {
        let gib = figures["mib_written"].as_f64().unwrap_or(0.0) / 1024.0;
        let cpu = proc_stat::own_cpu_seconds() - cpu_before;
        figures["process"] = json!({
            "note": "client and server share this process",
            "rss_mib": client::rss_mib(), "cpu_seconds": cpu,
            "cpu_seconds_per_gib": if gib > 0.0 { Some(cpu / gib) } else { None },
        });
    }
    print_table(&figures, "");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)?;
    }
    if let Some(server) = server {
        server.shutdown().await?;
    }
    Ok(())
}

fn add_cost(figures: &mut Value, m: client::Metrics, elapsed: Duration) {
    let gib = figures["mib_written"].as_f64().unwrap_or(0.0) / 1024.0;
    figures["object_requests"] = json!({
        "puts": m.puts, "gets": m.gets, "segments": m.segments,
        "puts_per_sec": m.puts / elapsed.as_secs_f64(),
        "puts_per_gib_written": if gib > 0.0 { Some((m.puts / gib).round()) } else { None },
        "segments_per_gib_written": if gib > 0.0 { Some((m.segments / gib).round()) } else { None },
    });
}

/// A human table: one `key  value` line per leaf.
fn print_table(value: &Value, prefix: &str) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let name = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                print_table(value, &name);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                print_table(item, &format!("{prefix}[{i}]"));
            }
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() != 0.0 => println!("{prefix:<48} {f:.2}"),
            _ => println!("{prefix:<48} {n}"),
        },
        other => println!("{prefix:<48} {other}"),
    }
}
