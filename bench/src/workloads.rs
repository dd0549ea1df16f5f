//! The workloads. Each returns its figures as JSON.

use std::time::Duration;

use tokio::time::Instant;

use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::client::{Client, BASIN};
use crate::latency::percentiles;
use crate::Args;

fn records(n: usize, size: usize) -> Value {
    let body = "x".repeat(size);
    json!({ "records": (0..n).map(|_| json!({ "body": body })).collect::<Vec<_>>() })
}

/// One client, one stream, one append at a time.
pub async fn serial(client: &Client, args: &Args) -> anyhow::Result<Value> {
    let size = args.record_bytes.unwrap_or(128);
    client.ensure_stream("serial").await?;
    let body = records(1, size);
    let mut latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < deadline {
        let started = Instant::now();
        client.append("serial", &body).await?;
        latencies.push(started.elapsed());
    }
    let n = latencies.len();
    Ok(json!({
        "record_bytes": size, "appends": n, "appends_per_sec": n as f64 / args.seconds as f64,
        "mib_written": (n * size) as f64 / 1048576.0, "ack_latency": percentiles(&mut latencies),
    }))
}

/// Creates the throughput workload's streams (before the cost counters are read).
pub async fn prepare_throughput(client: &Client, args: &Args) -> anyhow::Result<()> {
    futures::stream::iter(0..args.streams)
        .map(|s| async move { client.ensure_stream(&format!("t{s}")).await })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()
        .context("creating streams")?;
    Ok(())
}

/// N producers over M streams, closed loop, or paced to `--rate` appends/s in total.
pub async fn throughput(client: &Client, args: &Args) -> anyhow::Result<Value> {
    let size = args.record_bytes.unwrap_or(1024);
    let body = records(args.batch, size);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let per_producer_interval = args.rate.map(|rate| Duration::from_secs_f64(args.producers as f64 / rate));
    // Unique per run, so a producer never meets the state an earlier run left.
    let run = shale_storage::Clock::now_ms(&shale_storage::SystemClock);
    let mut tasks = Vec::new();
    for p in 0..args.producers {
        let (client, mut body, streams, idempotent) = (client.clone(), body.clone(), args.streams, args.idempotent);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut next_send = Instant::now();
            let mut i = p;
            let mut sequences = std::collections::HashMap::new();
            if idempotent {
                body["producer_id"] = json!(format!("bench-{run}-{p}"));
            }
            while Instant::now() < deadline {
                if let Some(interval) = per_producer_interval {
                    tokio::time::sleep_until(next_send).await;
                    next_send += interval;
                }
                let stream = i % streams;
                if idempotent {
                    let seq = sequences.entry(stream).or_insert(0u64);
                    body["producer_seq"] = json!(*seq);
                    *seq += 1;
                }
                let t = Instant::now();
                client.append(&format!("t{stream}"), &body).await?;
                latencies.push(t.elapsed());
                i += 7919;
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
    let mib = (records * size) as f64 / 1048576.0;
    Ok(json!({
        "producers": args.producers, "streams": args.streams, "batch": args.batch, "record_bytes": size,
        "idempotent": args.idempotent,
        "target_appends_per_sec": args.rate, "appends": latencies.len(), "appends_per_sec": latencies.len() as f64 / elapsed,
        "records_per_sec": records as f64 / elapsed, "mib_per_sec": mib / elapsed, "mib_written": mib,
        "ack_latency": percentiles(&mut latencies),
    }))
}

fn micros_since(origin: Instant) -> u64 {
    origin.elapsed().as_micros() as u64
}

/// A live SSE reader on one stream; a writer appends a timestamped record every 5 ms.
/// Reports append-to-delivery latency next to the ack latency.
pub async fn e2e(client: &Client, args: &Args) -> anyhow::Result<Value> {
    client.ensure_stream("e2e").await?;
    let tail = client
        .http
        .get(format!("{}/v1/streams/e2e/records/tail", client.read_base))
        .header("s2-basin", BASIN)
        .send()
        .await?;
    let start = tail.json::<Value>().await?["tail"]["seq_num"].as_u64().unwrap_or(0);
    let origin = Instant::now();
    let response = client
        .http
        .get(format!("{}/v1/streams/e2e/records?seq_num={start}", client.read_base))
        .header("s2-basin", BASIN)
        .header("accept", "text/event-stream")
        .send()
        .await?;
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let delivered = delivered.clone();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let event: String = buffer.drain(..end + 2).collect();
                    let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) else { continue };
                    let Ok(batch) = serde_json::from_str::<Value>(data.trim()) else { continue };
                    let now = micros_since(origin);
                    let mut delivered = delivered.lock().expect("not poisoned");
                    for record in batch["records"].as_array().into_iter().flatten() {
                        if let Some(sent) = record["body"].as_str().and_then(|b| b.parse::<u64>().ok()) {
                            delivered.push(Duration::from_micros(now.saturating_sub(sent)));
                        }
                    }
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut acks = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(5));
    while Instant::now() < deadline {
        ticker.tick().await;
        let sent = micros_since(origin);
        let t = Instant::now();
        client.append("e2e", &json!({ "records": [{ "body": sent.to_string() }] })).await?;
        acks.push(t.elapsed());
    }
    let drain_deadline = Instant::now() + Duration::from_secs(5);
    while delivered.lock().expect("not poisoned").len() < acks.len() && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    reader.abort();
    let mut delivered = std::mem::take(&mut *delivered.lock().expect("not poisoned"));
    Ok(json!({
        "appends": acks.len(), "delivered": delivered.len(),
        "ack_latency": percentiles(&mut acks), "append_to_delivery_latency": percentiles(&mut delivered),
    }))
}

/// Writes `--catchup-mib` into one stream, then reads it all back twice: cold (every block
/// a range GET) and warm (from the reader's cache).
pub async fn catchup(client: &Client, args: &Args) -> anyhow::Result<Value> {
    let stream = "catchup";
    client.ensure_stream(stream).await?;
    let size = args.record_bytes.unwrap_or(1024);
    let body = records(1000, size);
    let appends = (args.catchup_mib * 1048576 / (1000 * size as u64)).max(1);
    futures::stream::iter(0..appends)
        .map(|_| client.append(stream, &body))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let total = appends * 1000;
    let mut passes = Vec::new();
    for pass in ["cold", "warm"] {
        let before = client.read_metrics().await.unwrap_or_default();
        let started = Instant::now();
        let (mut seq, mut bytes) = (0, 0);
        while seq < total {
            let (n, b, next) = client.read_protobuf(stream, seq).await?;
            anyhow::ensure!(n > 0, "read stopped at {seq} of {total}");
            bytes += b;
            seq = next;
        }
        let secs = started.elapsed().as_secs_f64();
        let m = client.read_metrics().await.unwrap_or_default().since(before);
        let lookups = m.block_hits + m.block_misses;
        passes.push(json!({
            "pass": pass, "mib": bytes as f64 / 1048576.0, "mib_per_sec": bytes as f64 / 1048576.0 / secs,
            "cache_hit_ratio": if lookups > 0.0 { m.block_hits / lookups } else { 0.0 },
            "object_gets": m.gets,
        }));
    }
    Ok(json!({ "records": total, "record_bytes": size, "passes": passes }))
}

/// Creates `--cardinality` streams and appends one record to each; with `--idle-seconds`,
/// then waits `--settle-seconds` (compaction of the load) and measures an idle period:
/// CPU, store requests, RSS and metadata bytes per stream. With `--retention-share`, that
/// share of the streams is then given a retention age of a minute (older than every
/// record once settled), and the run waits for their records to be reclaimed and
/// reports what the reclaim passes read.
pub async fn cardinality(client: &Client, args: &Args, data_dir: Option<&std::path::Path>) -> anyhow::Result<Value> {
    let n = args.cardinality;
    let rss_before = crate::client::rss_mib();
    let metadata_before = data_dir.map(|d| dir_bytes(&d.join("metadata"))).unwrap_or(0);
    let started = Instant::now();
    let body = records(1, 64);
    futures::stream::iter(0..n)
        .map(|i| {
            let body = &body;
            async move {
                let stream = card_stream(i);
                client.ensure_stream(&stream).await?;
                client.append(&stream, body).await.map(|_| ())
            }
        })
        .buffer_unordered(64)
        .fold(Ok(()), |acc: anyhow::Result<()>, result| async move { acc.and(result) })
        .await?;
    let secs = started.elapsed().as_secs_f64();
    let metadata_after = data_dir.map(|d| dir_bytes(&d.join("metadata"))).unwrap_or(0);
    let mut figures = json!({
        "streams": n, "seconds": secs, "streams_per_sec": n as f64 / secs,
        "rss_mib_before": rss_before, "rss_mib_after": crate::client::rss_mib(),
        "metadata_bytes_per_stream": data_dir.map(|_| (metadata_after.saturating_sub(metadata_before)) as f64 / n as f64),
        "segment_bytes_per_stream": data_dir.map(|d| dir_bytes(&d.join("segments")) as f64 / n as f64),
    });
    if args.idle_seconds > 0 {
        figures["settled_seconds"] = json!(settle(client, args.settle_seconds).await);
        tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
        figures["idle"] = idle_period(client, args, n, data_dir).await;
    }
    if let Some(every) = retained_every(args.retention_share) {
        figures["retention"] = retention_phase(client, n, every).await?;
    }
    Ok(figures)
}

/// Waits until everything is compacted and the segments compaction replaced are deleted
/// (`shale_compaction_uncompacted_bytes` and `shale_store_released_segments` 0 at two
/// checks 30 s apart), at most `max_seconds`; returns how long that took.
async fn settle(client: &Client, max_seconds: u64) -> f64 {
    let started = Instant::now();
    let mut quiet_checks = 0;
    while started.elapsed() < Duration::from_secs(max_seconds) && quiet_checks < 2 {
        tokio::time::sleep(Duration::from_secs(30).min(Duration::from_secs(max_seconds))).await;
        let pending = client.metric("shale_compaction_uncompacted_bytes").await;
        let released = client.metric("shale_store_released_segments").await;
        quiet_checks = match pending + released {
            0.0 => quiet_checks + 1,
            _ => 0,
        };
    }
    started.elapsed().as_secs_f64()
}

fn card_stream(i: u64) -> String {
    format!("card-{i:08}")
}

/// Every how many streams one gets a retention age, for `share` of them.
fn retained_every(share: f64) -> Option<u64> {
    (share > 0.0).then(|| (1.0 / share.min(1.0)).round().max(1.0) as u64)
}

/// CPU, store requests, RSS and metadata bytes over `--idle-seconds` with no client call.
async fn idle_period(client: &Client, args: &Args, streams: u64, data_dir: Option<&std::path::Path>) -> Value {
    let (before, cpu_before, rss_before) =
        (client.metrics().await, crate::proc_stat::own_cpu_seconds(), crate::client::rss_mib());
    let visited_before = client.metric("shale_reclaim_streams_visited_total").await;
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let minutes = args.idle_seconds as f64 / 60.0;
    let requests = match (before, client.metrics().await) {
        (Some(before), Some(after)) => Some(after.since(before)),
        _ => None,
    };
    let metadata_bytes = data_dir.map(|d| dir_bytes(&d.join("metadata")));
    let sst_bytes = data_dir.map(|d| dir_bytes(&d.join("metadata").join("compacted")));
    let wal_bytes = data_dir.map(|d| dir_bytes(&d.join("metadata").join("wal")));
    json!({
        "seconds": args.idle_seconds,
        "cpu_percent_of_a_core": (crate::proc_stat::own_cpu_seconds() - cpu_before) / args.idle_seconds as f64 * 100.0,
        "store_requests_per_minute": requests.map(|r| r.requests / minutes),
        "store_puts_per_minute": requests.map(|r| r.puts / minutes),
        "store_gets_per_minute": requests.map(|r| r.gets / minutes),
        "store_lists_per_minute": requests.map(|r| r.lists / minutes),
        "store_deletes_per_minute": requests.map(|r| r.deletes / minutes),
        "reclaim_streams_visited": client.metric("shale_reclaim_streams_visited_total").await - visited_before,
        "rss_mib_before": rss_before, "rss_mib_after": crate::client::rss_mib(),
        "metadata_bytes": metadata_bytes,
        "metadata_bytes_per_stream": metadata_bytes.map(|b| b as f64 / streams as f64),
        "metadata_sst_bytes_per_stream": sst_bytes.map(|b| b as f64 / streams as f64),
        "metadata_wal_bytes_per_stream": wal_bytes.map(|b| b as f64 / streams as f64),
        "segment_bytes_per_stream": data_dir.map(|d| dir_bytes(&d.join("segments")) as f64 / streams as f64),
    })
}

/// Gives every `every`-th stream a retention age of 60 s, then waits (five minutes at
/// most) until their records are reclaimed; reports how long that took from the last
/// reconfiguration and what the reclaim passes read meanwhile.
async fn retention_phase(client: &Client, streams: u64, every: u64) -> anyhow::Result<Value> {
    let metric = |name: &'static str| client.metric(name);
    let (removed_before, visited_before) = (
        metric("shale_reclaim_index_entries_removed_total").await,
        metric("shale_reclaim_streams_visited_total").await,
    );
    let (runs_before, pass_ms_before) =
        (metric("shale_reclaim_runs_total").await, metric("shale_reclaim_pass_milliseconds_total").await);
    let retained: Vec<u64> = (0..streams).step_by(every as usize).collect();
    futures::stream::iter(&retained)
        .map(|&i| async move {
            client.reconfigure_stream(&card_stream(i), json!({ "retention_policy": { "age": 60 } })).await
        })
        .buffer_unordered(64)
        .fold(Ok(()), |acc: anyhow::Result<()>, result| async move { acc.and(result) })
        .await?;
    let configured = Instant::now();
    let mut removed = 0.0;
    while configured.elapsed() < Duration::from_secs(300) {
        removed = metric("shale_reclaim_index_entries_removed_total").await - removed_before;
        if removed >= retained.len() as f64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let took = configured.elapsed().as_secs_f64();
    let passes = metric("shale_reclaim_runs_total").await - runs_before;
    let pass_ms = metric("shale_reclaim_pass_milliseconds_total").await - pass_ms_before;
    Ok(json!({
        "retained_streams": retained.len(),
        "entries_removed": removed,
        "reclaimed_seconds_after_reconfigure": (removed >= retained.len() as f64).then_some(took),
        "reclaim_passes": passes,
        "streams_visited": metric("shale_reclaim_streams_visited_total").await - visited_before,
        "pass_ms_mean": if passes > 0.0 { Some(pass_ms / passes) } else { None },
    }))
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
