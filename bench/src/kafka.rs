//! `shale-kafka-bench`: Kafka's produce and catch-up fetch against a `shale serve
//! --kafka`, through librdkafka (the `rdkafka` crate), the client most Kafka tools use.
//! Produces `--record-bytes` records over `--partitions` partitions for `--seconds` with
//! acks=all and idempotence on, as fast as the producer's queue allows (or at
//! `--rate` MiB/s), then reads everything back from offset 0. Prints one JSON object:
//! produce MiB/s and ack p50/p99/p999, catch-up MiB/s, object PUTs and GETs per GiB
//! (from the server's `/metrics`) and the server's CPU seconds per GiB (`--server-pid`).
//! Loopback only.

use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::stream::{FuturesUnordered, StreamExt};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::json;

#[derive(Parser, Debug, Clone)]
struct Args {
    /// Kafka bootstrap address (loopback).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// The server's HTTP base, for `/metrics`.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    metrics_url: String,
    /// The server's pid, for its CPU time.
    #[arg(long)]
    server_pid: Option<u32>,
    #[arg(long, default_value = "1")]
    partitions: i32,
    #[arg(long, default_value = "1024")]
    record_bytes: usize,
    #[arg(long, default_value = "10")]
    seconds: u64,
    /// Target MiB/s; default as fast as the producer goes.
    #[arg(long)]
    rate: Option<f64>,
    /// Most records awaiting their ack at once.
    #[arg(long, default_value = "20000")]
    in_flight: usize,
}

/// `(puts, gets)` on the server's `/metrics`.
async fn object_requests(http: &reqwest::Client, base: &str) -> (f64, f64) {
    let Ok(response) = http.get(format!("{base}/metrics")).send().await else { return (0.0, 0.0) };
    let text = response.text().await.unwrap_or_default();
    let value = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    (value("shale_object_puts_total"), value("shale_object_gets_total"))
}

fn cpu_seconds(pid: Option<u32>) -> f64 {
    let Some(pid) = pid else { return 0.0 };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1).min(sorted.len().saturating_sub(1));
    sorted.get(i).map_or(0.0, |d| (d.as_secs_f64() * 1e5).round() / 100.0)
}

fn config(args: &Args) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &args.bootstrap);
    config
}

async fn create_topic(args: &Args, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = config(args).create()?;
    let new = NewTopic::new(topic, args.partitions, TopicReplication::Fixed(1));
    for result in admin.create_topics([&new], &AdminOptions::new()).await? {
        result.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
    }
    Ok(())
}

/// Produces for `args.seconds`; the ack latencies and the bytes acked.
async fn produce(args: &Args, topic: &str) -> anyhow::Result<(Vec<Duration>, u64, f64)> {
    let producer: FutureProducer = config(args)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .create()?;
    let payload = vec![b'x'; args.record_bytes];
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let mut pending = FuturesUnordered::new();
    let mut latencies = Vec::new();
    let mut sent = 0u64;
    let mut failed = 0u64;
    while Instant::now() < deadline {
        if let Some(rate) = args.rate {
            let due = started + Duration::from_secs_f64(sent as f64 * args.record_bytes as f64 / (rate * 1048576.0));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep(wait.min(Duration::from_millis(5))).await;
                continue;
            }
        }
        while pending.len() >= args.in_flight {
            if let Some(outcome) = pending.next().await {
                tally(outcome, &mut latencies, &mut failed);
            }
        }
        let key = (sent % 1024).to_string();
        let partition = (sent % args.partitions as u64) as i32;
        let record = FutureRecord::to(topic).payload(&payload).key(&key).partition(partition);
        match producer.send_result(record) {
            Ok(delivery) => {
                let at = Instant::now();
                pending.push(async move { (delivery.await, at.elapsed()) });
                sent += 1;
            }
            Err((e, _)) => anyhow::bail!("queueing a record: {e}"),
        }
        // Let deliveries complete without waiting for any.
        while let Some(Some(outcome)) = futures::FutureExt::now_or_never(pending.next()) {
            tally(outcome, &mut latencies, &mut failed);
        }
    }
    while let Some(outcome) = pending.next().await {
        tally(outcome, &mut latencies, &mut failed);
    }
    producer.flush(Duration::from_secs(30))?;
    let elapsed = started.elapsed().as_secs_f64();
    anyhow::ensure!(failed == 0, "{failed} records were not acked");
    Ok((latencies, sent * args.record_bytes as u64, elapsed))
}

type Delivery = Result<
    Result<rdkafka::producer::future_producer::Delivery, (rdkafka::error::KafkaError, rdkafka::message::OwnedMessage)>,
    futures::channel::oneshot::Canceled,
>;

fn tally(outcome: (Delivery, Duration), latencies: &mut Vec<Duration>, failed: &mut u64) {
    match outcome.0 {
        Ok(Ok(_)) => latencies.push(outcome.1),
        _ => *failed += 1,
    }
}

/// Reads every partition from offset 0 to its end; the bytes read and the seconds taken.
fn catch_up(args: &Args, topic: &str, records: u64) -> anyhow::Result<(u64, f64)> {
    let consumer: BaseConsumer = config(args)
        .set("group.id", "kafka-bench-catchup")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "8388608")
        // librdkafka stops fetching while 64 MiB are queued in the client and then backs
        // off for a second (`fetch.queue.backoff.ms`): a catch-up of 1 KiB records would
        // measure that pause, not the server. Fetch again as soon as the queue drains.
        .set("queued.max.messages.kbytes", "262144")
        .set("fetch.queue.backoff.ms", "10")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..args.partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let started = Instant::now();
    let (mut read, mut bytes) = (0u64, 0u64);
    let deadline = started + Duration::from_secs(600);
    while read < records {
        anyhow::ensure!(Instant::now() < deadline, "catch-up read {read} of {records} records in 600 s");
        if let Some(message) = consumer.poll(Duration::from_millis(500)) {
            let message = message.context("fetching")?;
            bytes += message.payload().map_or(0, |p| p.len() as u64);
            read += 1;
        }
    }
    Ok((bytes, started.elapsed().as_secs_f64()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::new();
    let topic = format!("bench-{}p-{}", args.partitions, std::process::id());
    create_topic(&args, &topic).await?;
    let (puts0, _) = object_requests(&http, &args.metrics_url).await;
    let cpu0 = cpu_seconds(args.server_pid);
    let (mut latencies, bytes, elapsed) = produce(&args, &topic).await?;
    let (puts1, gets1) = object_requests(&http, &args.metrics_url).await;
    let cpu1 = cpu_seconds(args.server_pid);
    latencies.sort();
    let records = latencies.len() as u64;
    let args_for_read = args.clone();
    let topic_for_read = topic.clone();
    let (read_bytes, read_secs) =
        tokio::task::spawn_blocking(move || catch_up(&args_for_read, &topic_for_read, records)).await??;
    let (_, gets2) = object_requests(&http, &args.metrics_url).await;
    let cpu2 = cpu_seconds(args.server_pid);
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let read_gib = read_bytes as f64 / (1u64 << 30) as f64;
    let out = json!({
        "workload": "kafka", "partitions": args.partitions, "record_bytes": args.record_bytes,
        "target_mib_per_sec": args.rate,
        "produce": {
            "records": records, "mib_per_sec": bytes as f64 / 1048576.0 / elapsed,
            "ack_ms": { "p50": percentile(&latencies, 0.5), "p99": percentile(&latencies, 0.99), "p999": percentile(&latencies, 0.999) },
            "puts_per_gib": (puts1 - puts0) / gib, "server_cpu_s_per_gib": (cpu1 - cpu0) / gib,
        },
        "catch_up": {
            "mib_per_sec": read_bytes as f64 / 1048576.0 / read_secs,
            "gets_per_gib": (gets2 - gets1) / read_gib, "server_cpu_s_per_gib": (cpu2 - cpu1) / read_gib,
        },
    });
    println!("{out}");
    Ok(())
}
