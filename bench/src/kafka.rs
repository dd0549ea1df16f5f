//! `shale-kafka-bench`: Kafka's produce and catch-up fetch against a `shale serve
//! --kafka`, through librdkafka (the `rdkafka` crate), the client most Kafka tools use.
//! Produces `--record-bytes` records over `--partitions` partitions for `--seconds` with
//! acks=all and idempotence on, as fast as the producer's queue allows (or at
//! `--rate` MiB/s), then reads everything back from offset 0. Prints one JSON object:
//! produce MiB/s and ack p50/p99/p999, catch-up MiB/s, object PUTs and GETs per GiB
//! (from the server's `/metrics`) and the server's CPU seconds per GiB (`--server-pid`).
//! With `--transaction-records N` the producer is transactional and commits every N
//! records: commit latency p50/p99 too. With `--follow-min-bytes N` a consumer follows
//! the producer live with `fetch.min.bytes` N: the fetch requests it sent, per GiB, from
//! librdkafka's statistics. Loopback only.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext, Message, Offset, TopicPartitionList};
use serde_json::json;

mod proc_stat;
use proc_stat::{cpu_seconds_of, own_cpu_seconds};

#[derive(Parser, Debug, Clone)]
struct Args {
    /// Kafka bootstrap address (loopback).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// The servers' HTTP bases, for `/metrics` (comma-separated: every agent and
    /// metadata of a cluster, whose object requests are summed).
    #[arg(long, default_value = "http://127.0.0.1:8080", value_delimiter = ',')]
    metrics_url: Vec<String>,
    /// The servers' pids, for their CPU time (comma-separated, summed).
    #[arg(long, value_delimiter = ',')]
    server_pid: Vec<u32>,
    /// Whether to read everything back after producing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    catch_up: bool,
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
    /// The producer's largest batch per partition (librdkafka's `batch.size`, and its
    /// `message.max.bytes` just above it); librdkafka's defaults when not given.
    #[arg(long)]
    batch_bytes: Option<usize>,
    /// Idempotent producer (librdkafka then keeps one produce request in flight per
    /// broker); `false` lets it keep up to 5.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    idempotence: bool,
    /// Records per transaction: a transactional producer that commits every this many
    /// records (0: not transactional).
    #[arg(long, default_value = "0")]
    transaction_records: u64,
    /// Producers, each its own librdkafka client on a thread of its own, sharing `--rate`
    /// evenly (each keeps its own `--in-flight`): many producers' load on the servers
    /// without a process each.
    #[arg(long, default_value = "1")]
    producers: usize,
    /// The producer's `linger.ms`: how long a partition's batch waits for more records.
    #[arg(long, default_value = "5")]
    linger_ms: u64,
    /// The catch-up consumer's `max.partition.fetch.bytes`: the most one partition adds to
    /// an answer (the answer itself is bounded by `fetch.max.bytes`, 50 MiB). librdkafka's
    /// default, 1 MiB, catches up faster here than 8 MiB on 1 partition and on 16 (where
    /// 8 MiB answers pass glibc's 32 MiB mapping threshold and the client faults in every
    /// answer's pages).
    #[arg(long, default_value = "1048576")]
    partition_fetch_bytes: u64,
    /// A consumer follows the producer live with this `fetch.min.bytes` (none if not
    /// given); the server's CPU while producing then includes it.
    #[arg(long)]
    follow_min_bytes: Option<u64>,
    /// The follower's `fetch.wait.max.ms`: how long the server may hold a fetch that has
    /// fewer than `--follow-min-bytes`.
    #[arg(long, default_value = "500")]
    follow_wait_ms: u64,
}

/// What a produce run measured.
struct Produced {
    latencies: Vec<Duration>,
    /// How long each `commit_transaction` took (flushing the transaction's records and
    /// committing it), when transactional.
    commits: Vec<Duration>,
    bytes: u64,
    seconds: f64,
    /// Each producer's librdkafka latencies from its last statistics interval.
    client: Vec<ClientLatency>,
}

/// `(puts, gets)` on the servers' `/metrics`, summed.
async fn object_requests(http: &reqwest::Client, bases: &[String]) -> (f64, f64) {
    let (mut puts, mut gets) = (0.0, 0.0);
    for base in bases {
        let Ok(response) = http.get(format!("{base}/metrics")).send().await else { continue };
        let text = response.text().await.unwrap_or_default();
        let value = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        };
        puts += value("shale_object_puts_total");
        gets += value("shale_object_gets_total");
    }
    (puts, gets)
}

/// The producers' librdkafka latency p50s (their mean), or null without statistics.
fn librdkafka_latency(client: &[ClientLatency]) -> serde_json::Value {
    if client.is_empty() {
        return serde_json::Value::Null;
    }
    let mean = |f: fn(&ClientLatency) -> f64| client.iter().map(f).sum::<f64>() / client.len() as f64;
    json!({ "queue": mean(|c| c.queue_ms), "outbuf": mean(|c| c.outbuf_ms), "rtt": mean(|c| c.rtt_ms) })
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
/// What the producer's delivery reports gather: each acked record's latency, failures,
/// and how many records await their report (`acked` is signalled at each report).
struct Acks {
    started: Instant,
    state: Mutex<AckState>,
    acked: Condvar,
}

#[derive(Default)]
struct AckState {
    latencies: Vec<Duration>,
    failed: u64,
    in_flight: usize,
    /// librdkafka's own latency windows from its last statistics, in ms (p50s).
    client: Option<ClientLatency>,
}

/// Where librdkafka says a record's time went, from its statistics of the broker it
/// sent the most requests to: waiting in its producer queue (`int_latency`), in its
/// transmit queue (`outbuf_latency`), and the request's round trip (`rtt`); p50s in ms.
#[derive(Clone, Copy, Default)]
struct ClientLatency {
    queue_ms: f64,
    outbuf_ms: f64,
    rtt_ms: f64,
}

impl Acks {
    fn state(&self) -> std::sync::MutexGuard<'_, AckState> {
        self.state.lock().expect("no panic while holding the ack state")
    }
}

impl ClientContext for Acks {
    fn stats(&self, statistics: rdkafka::Statistics) {
        let busiest = statistics.brokers.values().max_by_key(|b| b.rtt.as_ref().map_or(0, |rtt| rtt.cnt));
        let p50_ms =
            |window: &Option<rdkafka::statistics::Window>| window.as_ref().map_or(0.0, |w| w.p50 as f64 / 1000.0);
        if let Some(broker) = busiest.filter(|b| b.rtt.as_ref().is_some_and(|rtt| rtt.cnt > 0)) {
            self.state().client = Some(ClientLatency {
                queue_ms: p50_ms(&broker.int_latency),
                outbuf_ms: p50_ms(&broker.outbuf_latency),
                rtt_ms: p50_ms(&broker.rtt),
            });
        }
    }
}

impl ProducerContext for Acks {
    /// When the record was queued, in microseconds since `started`.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, queued_at_us: usize) {
        let latency = self.started.elapsed().saturating_sub(Duration::from_micros(queued_at_us as u64));
        let mut state = self.state();
        state.in_flight -= 1;
        match result {
            Ok(_) => state.latencies.push(latency),
            Err(_) => state.failed += 1,
        }
        self.acked.notify_one();
    }
}

/// Runs `--producers` producers at once, each at its share of `--rate`; their acks'
/// latencies and transaction commits together, their bytes summed, the longest run's
/// seconds. Blocking.
fn produce_all(args: &Args, topic: &str) -> anyhow::Result<Produced> {
    let producers = args.producers.max(1);
    let share = &Args { rate: args.rate.map(|rate| rate / producers as f64), ..args.clone() };
    let runs: Vec<anyhow::Result<Produced>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..producers).map(|index| scope.spawn(move || produce(share, topic, index))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a producer panicked")))).collect()
    });
    let mut all = Produced { latencies: Vec::new(), commits: Vec::new(), bytes: 0, seconds: 0.0, client: Vec::new() };
    for run in runs {
        let run = run?;
        all.latencies.extend(run.latencies);
        all.commits.extend(run.commits);
        all.bytes += run.bytes;
        all.seconds = all.seconds.max(run.seconds);
        all.client.extend(run.client);
    }
    Ok(all)
}

/// Produces for `--seconds` with up to `--in-flight` records awaiting their acks, through
/// a `ThreadedProducer` (its own thread serves delivery reports; no future per record, so
/// the client's cost per record stays librdkafka's); `index` tells producers of one run
/// apart. Blocking.
fn produce(args: &Args, topic: &str, index: usize) -> anyhow::Result<Produced> {
    let mut config = config(args);
    config
        .set("acks", "all")
        .set("enable.idempotence", args.idempotence.to_string())
        .set("linger.ms", args.linger_ms.to_string())
        .set("statistics.interval.ms", "1000")
        .set("queue.buffering.max.messages", "1000000");
    if let Some(batch) = args.batch_bytes {
        config.set("batch.size", batch.to_string()).set("message.max.bytes", (batch + (64 << 10)).to_string());
    }
    let transactional = args.transaction_records > 0;
    if transactional {
        config.set("transactional.id", format!("kafka-bench-{}-{index}", std::process::id()));
    }
    let started = Instant::now();
    let acks = Acks { started, state: Mutex::default(), acked: Condvar::new() };
    let producer: ThreadedProducer<Acks> = config.create_with_context(acks)?;
    let mut commits = Vec::new();
    let commit_and_begin = |producer: &ThreadedProducer<Acks>, commits: &mut Vec<Duration>, again: bool| {
        let began = Instant::now();
        // Wait for the transaction's acks here: rdkafka's own flush before the commit
        // polls in 100 ms steps while the producer's thread serves the reports, which
        // would add up to 100 ms to every commit.
        let acks = producer.context();
        let state = acks.state();
        let (state, waited) = acks
            .acked
            .wait_timeout_while(state, Duration::from_secs(60), |s| s.in_flight > 0)
            .expect("no panic while holding the ack state");
        anyhow::ensure!(!waited.timed_out(), "a transaction's records were not acked in 60 s");
        drop(state);
        producer.commit_transaction(Duration::from_secs(60))?;
        commits.push(began.elapsed());
        if again {
            producer.begin_transaction()?;
        }
        anyhow::Ok(())
    };
    if transactional {
        producer.init_transactions(Duration::from_secs(30))?;
        producer.begin_transaction()?;
    }
    let payload = vec![b'x'; args.record_bytes];
    let deadline = started + Duration::from_secs(args.seconds);
    let mut sent = 0u64;
    while Instant::now() < deadline {
        if let Some(rate) = args.rate {
            let due = started + Duration::from_secs_f64(sent as f64 * args.record_bytes as f64 / (rate * 1048576.0));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait.min(Duration::from_millis(5)));
                continue;
            }
        }
        let acks = producer.context();
        let state = acks.state();
        let (mut state, waited) = acks
            .acked
            .wait_timeout_while(state, Duration::from_secs(60), |s| s.in_flight >= args.in_flight)
            .expect("no panic while holding the ack state");
        anyhow::ensure!(!waited.timed_out(), "no ack in 60 s with {} records in flight", state.in_flight);
        state.in_flight += 1;
        drop(state);
        let key = (sent % 1024).to_string();
        let partition = (sent % args.partitions as u64) as i32;
        let queued_at_us = usize::try_from(started.elapsed().as_micros()).unwrap_or(usize::MAX);
        let record = BaseRecord::with_opaque_to(topic, queued_at_us).payload(&payload).key(&key).partition(partition);
        if let Err((e, _)) = producer.send(record) {
            anyhow::bail!("queueing a record: {e}");
        }
        sent += 1;
        if transactional && sent.is_multiple_of(args.transaction_records) {
            commit_and_begin(&producer, &mut commits, true)?;
        }
    }
    if transactional {
        commit_and_begin(&producer, &mut commits, false)?;
    }
    producer.flush(Duration::from_secs(60))?;
    let elapsed = started.elapsed().as_secs_f64();
    let mut state = producer.context().state();
    anyhow::ensure!(state.failed == 0, "{} records were not acked", state.failed);
    let latencies = std::mem::take(&mut state.latencies);
    anyhow::ensure!(latencies.len() as u64 == sent, "{} of {sent} records acked", latencies.len());
    let client = state.client.into_iter().collect();
    Ok(Produced { latencies, commits, bytes: sent * args.record_bytes as u64, seconds: elapsed, client })
}

/// Reads every partition from offset 0 to its end; the bytes read and the seconds taken.
fn catch_up(args: &Args, topic: &str, records: u64) -> anyhow::Result<(u64, f64)> {
    let consumer: BaseConsumer = config(args)
        .set("group.id", "kafka-bench-catchup")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", args.partition_fetch_bytes.to_string())
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

/// The follower's fetch requests, from librdkafka's statistics (summed over brokers),
/// and how many statistics reports came.
#[derive(Default)]
struct Fetches {
    sent: AtomicI64,
    reports: AtomicU64,
}

impl ClientContext for Fetches {
    fn stats(&self, statistics: rdkafka::Statistics) {
        let sent = statistics.brokers.values().filter_map(|b| b.req.get("Fetch")).sum();
        self.sent.store(sent, Ordering::Relaxed);
        self.reports.fetch_add(1, Ordering::Relaxed);
    }
}

impl ConsumerContext for Fetches {}

/// Follows every partition from offset 0 with `--follow-min-bytes` until it has read
/// `produced` records (`u64::MAX` while the producers run); the fetch requests it sent,
/// read from a statistics report that came after its last record.
fn follow(args: &Args, topic: &str, min_bytes: u64, produced: &AtomicU64) -> anyhow::Result<i64> {
    let consumer: BaseConsumer<Fetches> = config(args)
        .set("group.id", "kafka-bench-follow")
        .set("enable.auto.commit", "false")
        .set("fetch.min.bytes", min_bytes.to_string())
        .set("fetch.wait.max.ms", args.follow_wait_ms.to_string())
        .set("statistics.interval.ms", "500")
        .create_with_context(Fetches::default())?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..args.partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + Duration::from_secs(args.seconds + 600);
    let mut read = 0u64;
    while read < produced.load(Ordering::Relaxed) {
        anyhow::ensure!(Instant::now() < deadline, "the follower read {read} records by its deadline");
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message.context("following")?;
            read += 1;
        }
    }
    let reports = consumer.context().reports.load(Ordering::Relaxed);
    while consumer.context().reports.load(Ordering::Relaxed) < reports + 2 {
        anyhow::ensure!(Instant::now() < deadline, "no statistics from the follower");
        consumer.poll(Duration::from_millis(100));
    }
    Ok(consumer.context().sent.load(Ordering::Relaxed))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::new();
    let topic = format!("bench-{}p-{}", args.partitions, std::process::id());
    create_topic(&args, &topic).await?;
    let (puts0, _) = object_requests(&http, &args.metrics_url).await;
    let cpu0 = cpu_seconds_of(&args.server_pid);
    let client_cpu0 = own_cpu_seconds();
    let args_for_write = args.clone();
    let topic_for_write = topic.clone();
    let produced = std::sync::Arc::new(AtomicU64::new(u64::MAX));
    let follower = args.follow_min_bytes.map(|min_bytes| {
        let (args, topic, produced) = (args.clone(), topic.clone(), produced.clone());
        tokio::task::spawn_blocking(move || follow(&args, &topic, min_bytes, &produced))
    });
    let run = tokio::task::spawn_blocking(move || produce_all(&args_for_write, &topic_for_write)).await?;
    // The follower stops at the records acked, or at once if the producers failed.
    produced.store(run.as_ref().map_or(0, |run| run.latencies.len() as u64), Ordering::Relaxed);
    let Produced { mut latencies, mut commits, bytes, seconds: elapsed, client } = run?;
    let fetches = match follower {
        Some(follower) => Some(follower.await??),
        None => None,
    };
    commits.sort();
    let (puts1, gets1) = object_requests(&http, &args.metrics_url).await;
    let cpu1 = cpu_seconds_of(&args.server_pid);
    let client_cpu1 = own_cpu_seconds();
    latencies.sort();
    let records = latencies.len() as u64;
    let args_for_read = args.clone();
    let topic_for_read = topic.clone();
    let (read_bytes, read_secs) = if args.catch_up {
        tokio::task::spawn_blocking(move || catch_up(&args_for_read, &topic_for_read, records)).await??
    } else {
        (0, 1.0)
    };
    let (_, gets2) = object_requests(&http, &args.metrics_url).await;
    let cpu2 = cpu_seconds_of(&args.server_pid);
    let client_cpu2 = own_cpu_seconds();
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let read_gib = read_bytes as f64 / (1u64 << 30) as f64;
    let out = json!({
        "workload": "kafka", "partitions": args.partitions, "producers": args.producers, "linger_ms": args.linger_ms, "record_bytes": args.record_bytes,
        "idempotence": args.idempotence, "in_flight": args.in_flight, "batch_bytes": args.batch_bytes,
        "target_mib_per_sec": args.rate,
        "produce": {
            "records": records, "mib_per_sec": bytes as f64 / 1048576.0 / elapsed,
            "ack_ms": { "p50": percentile(&latencies, 0.5), "p99": percentile(&latencies, 0.99), "p999": percentile(&latencies, 0.999) },
            "puts_per_gib": (puts1 - puts0) / gib, "server_cpu_s_per_gib": (cpu1 - cpu0) / gib,
            "client_cpu_s_per_gib": (client_cpu1 - client_cpu0) / gib,
            "librdkafka_p50_ms": librdkafka_latency(&client),
        },
        "follower": fetches.map(|fetches| json!({
            "fetch_min_bytes": args.follow_min_bytes, "fetch_wait_max_ms": args.follow_wait_ms,
            "fetches": fetches, "fetches_per_gib": fetches as f64 / gib,
        })),
        "transactions": (args.transaction_records > 0).then(|| json!({
            "records_each": args.transaction_records, "committed": commits.len(),
            "commit_ms": { "p50": percentile(&commits, 0.5), "p99": percentile(&commits, 0.99) },
        })),
        "catch_up": {
            "mib_per_sec": read_bytes as f64 / 1048576.0 / read_secs,
            "gets_per_gib": (gets2 - gets1) / read_gib, "server_cpu_s_per_gib": (cpu2 - cpu1) / read_gib,
            "client_cpu_s_per_gib": (client_cpu2 - client_cpu1) / read_gib,
        },
    });
    println!("{out}");
    Ok(())
}
