//! `shale-kafka-load`: many Kafka producers at a fixed total rate from one light process,
//! for the ack latency and object requests of a cluster under many clients. Each producer
//! is one connection speaking the produce API directly (the `kafka-protocol` crate's
//! messages: acks=all, not idempotent, up to `--max-in-flight` requests unanswered, as
//! Kafka's `max.in.flight.requests.per.connection`); every `--linger-ms` it sends the
//! records due by then as one request. A keyless producer's batch goes to one partition,
//! the next batch to the next (Kafka's sticky partitioner, KIP-480); `--spread` splits
//! every request over all partitions instead. Producer `p` writes topic `p % --topics` and
//! connects to bootstrap `p % n`. Record `k` of a producer is due at `start + k / rate`;
//! its ack latency runs from then to its answer, so time spent waiting for room in the
//! window counts, as in a client's queue. `--rate 0` is a closed loop instead: each
//! producer keeps its window full of one-batch requests, and latency runs from the send.
//!
//! 64 librdkafka producers (`shale-kafka-bench --producers`) took more than one of a
//! 2-core machine's cores, leaving the cluster under test too little to show its own
//! latency; 64 of these took at most a tenth of a core at 80 MiB/s.
//! Prints one JSON object in `shale-kafka-bench`'s shape (`produce.mib_per_sec`,
//! `produce.records`, `produce.ack_ms`, `record_bytes`) and its own CPU seconds.
//! Loopback only.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use bytes::{Bytes, BytesMut};
use clap::Parser;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

mod proc_stat;
use proc_stat::own_cpu_seconds;

const PRODUCE_VERSION: i16 = 9;
const CREATE_TOPICS_VERSION: i16 = 5;
/// Topic names already used (Kafka's TOPIC_ALREADY_EXISTS) are fine: a rerun appends.
const TOPIC_ALREADY_EXISTS: i16 = 36;

#[derive(Parser, Debug, Clone)]
struct Args {
    /// Kafka addresses (loopback); producer `p` connects to the `p % n`th.
    #[arg(long, default_value = "127.0.0.1:9092", value_delimiter = ',')]
    bootstrap: Vec<String>,
    #[arg(long, default_value = "64")]
    producers: usize,
    #[arg(long, default_value = "4")]
    topics: usize,
    #[arg(long, default_value = "16")]
    partitions: i32,
    /// Topic names start with this (a run's own prefix keeps runs apart).
    #[arg(long, default_value = "load")]
    topic_prefix: String,
    /// MiB/s offered by all producers together; 0: as fast as answers come, each
    /// producer keeping `--max-in-flight` requests of one `--batch-bytes` batch unanswered
    /// (a closed loop; latency then runs from a request's send).
    #[arg(long, default_value = "32")]
    rate: f64,
    #[arg(long, default_value = "1024")]
    record_bytes: usize,
    #[arg(long, default_value = "10")]
    seconds: u64,
    #[arg(long, default_value = "100")]
    linger_ms: u64,
    /// The most bytes in one partition's batch (librdkafka's `batch.size`).
    #[arg(long, default_value = "1000000")]
    batch_bytes: usize,
    #[arg(long, default_value = "5")]
    max_in_flight: usize,
    /// Split every request over all of its topic's partitions (no sticky partitioner).
    #[arg(long)]
    spread: bool,
    /// Create the topics and stop: a run measured afterwards counts no topic creation.
    #[arg(long)]
    create_only: bool,
}

/// A request's records: producer-local indexes `first..first + count`.
struct Sent {
    correlation_id: i32,
    first: u64,
    count: u64,
    sent_at: Instant,
}

/// What one producer measured.
#[derive(Default)]
struct Outcome {
    /// Ack latency of every record, microseconds.
    latencies_us: Vec<u32>,
    requests: u64,
    last_ack: Option<Instant>,
}

fn topic_name(args: &Args, topic: usize) -> TopicName {
    TopicName(StrBytes::from_string(format!("{}-{topic}", args.topic_prefix)))
}

fn frame<Req: Encodable>(api: ApiKey, version: i16, correlation_id: i32, request: &Req) -> anyhow::Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("shale-kafka-load")));
    let mut body = BytesMut::new();
    body.extend_from_slice(&[0; 4]);
    header.encode(&mut body, api.request_header_version(version))?;
    request.encode(&mut body, version)?;
    let len = i32::try_from(body.len() - 4).context("request too large")?;
    body[..4].copy_from_slice(&len.to_be_bytes());
    Ok(body.freeze())
}

async fn read_frame(socket: &mut BufReader<OwnedReadHalf>) -> anyhow::Result<Bytes> {
    let len = socket.read_i32().await.context("reading an answer's length")?;
    let mut buf = vec![0; usize::try_from(len).context("negative answer length")?];
    socket.read_exact(&mut buf).await.context("reading an answer")?;
    Ok(Bytes::from(buf))
}

async fn create_topics(args: &Args) -> anyhow::Result<()> {
    let socket = TcpStream::connect(&args.bootstrap[0]).await.context("connecting")?;
    let (read, mut write) = socket.into_split();
    let mut read = BufReader::new(read);
    let topics = (0..args.topics)
        .map(|t| {
            CreatableTopic::default()
                .with_name(topic_name(args, t))
                .with_num_partitions(args.partitions)
                .with_replication_factor(-1)
        })
        .collect();
    let request = CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(30_000);
    write.write_all(&frame(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, 1, &request)?).await?;
    let mut answer = read_frame(&mut read).await?;
    ResponseHeader::decode(&mut answer, ApiKey::CreateTopics.response_header_version(CREATE_TOPICS_VERSION))?;
    let response = CreateTopicsResponse::decode(&mut answer, CREATE_TOPICS_VERSION)?;
    for topic in response.topics {
        ensure!(
            topic.error_code == 0 || topic.error_code == TOPIC_ALREADY_EXISTS,
            "creating {}: error {}",
            topic.name.0,
            topic.error_code
        );
    }
    Ok(())
}

/// One partition's batch of `count` records.
fn record_batch(payload: &Bytes, count: u64, timestamp_ms: i64) -> anyhow::Result<Bytes> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Offset minus sequence constant: the encoder keeps them in one batch.
            sequence: i as i32,
            timestamp: timestamp_ms,
            key: None,
            value: Some(payload.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        records.iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )?;
    Ok(out.freeze())
}

/// Reads the answers in the order their requests went out; every record's latency.
async fn read_answers(
    mut read: BufReader<OwnedReadHalf>,
    mut sent: mpsc::UnboundedReceiver<Sent>,
    window: Arc<Semaphore>,
    start: Instant,
    records_per_second: f64,
) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    while let Some(request) = sent.recv().await {
        let mut answer = read_frame(&mut read).await?;
        let acked = Instant::now();
        let header = ResponseHeader::decode(&mut answer, ApiKey::Produce.response_header_version(PRODUCE_VERSION))?;
        ensure!(header.correlation_id == request.correlation_id, "answers out of order");
        let response = ProduceResponse::decode(&mut answer, PRODUCE_VERSION)?;
        for partition in response.responses.iter().flat_map(|t| &t.partition_responses) {
            if partition.error_code != 0 {
                bail!("partition {} refused a batch: error {}", partition.index, partition.error_code);
            }
        }
        window.add_permits(1);
        for k in request.first..request.first + request.count {
            let due = if records_per_second > 0.0 {
                start + Duration::from_secs_f64(k as f64 / records_per_second)
            } else {
                request.sent_at
            };
            outcome.latencies_us.push(u32::try_from(acked.duration_since(due).as_micros()).unwrap_or(u32::MAX));
        }
        outcome.requests += 1;
        outcome.last_ack = Some(acked);
    }
    Ok(outcome)
}

/// Sends producer `index`'s requests until `seconds` are up; its outcome once every
/// request was answered.
async fn produce(args: Arc<Args>, index: usize, start: Instant) -> anyhow::Result<Outcome> {
    let socket = TcpStream::connect(&args.bootstrap[index % args.bootstrap.len()]).await.context("connecting")?;
    socket.set_nodelay(true)?;
    let (read, write) = socket.into_split();
    let records_per_second = args.rate * 1048576.0 / args.record_bytes as f64 / args.producers as f64;
    let window = Arc::new(Semaphore::new(args.max_in_flight));
    let (sent_tx, sent_rx) = mpsc::unbounded_channel();
    let answers = tokio::spawn(read_answers(BufReader::new(read), sent_rx, window.clone(), start, records_per_second));
    let sending = send_requests(&args, index, start, records_per_second, write, &window, sent_tx);
    let sent = sending.await;
    // The reader's error explains a send that failed because the reader stopped.
    let outcome = tokio::time::timeout(Duration::from_secs(60), answers)
        .await
        .context("requests unanswered 60 s after the run")??
        .with_context(|| format!("producer {index}"))?;
    sent?;
    Ok(outcome)
}

/// The partitions a request's `count` records go to, as `(partition, records)`: one batch
/// of at most `per_batch` to `partition` and on (sticky), or over every partition.
fn split(args: &Args, count: u64, per_batch: u64, partition: &mut i32) -> Vec<(i32, u64)> {
    let mut batches = Vec::new();
    if args.spread {
        let parts = args.partitions as u64;
        for p in 0..parts.min(count) {
            batches.push((p as i32, count / parts + u64::from(p < count % parts)));
        }
        return batches;
    }
    let mut left = count;
    while left > 0 {
        let n = left.min(per_batch);
        batches.push((*partition, n));
        *partition = (*partition + 1) % args.partitions;
        left -= n;
    }
    batches
}

fn produce_request(topic: &TopicName, batches: &[(i32, u64)], payload: &Bytes) -> anyhow::Result<ProduceRequest> {
    let timestamp_ms = i64::try_from(std::time::SystemTime::UNIX_EPOCH.elapsed()?.as_millis())?;
    let data = batches
        .iter()
        .map(|&(p, n)| {
            Ok(PartitionProduceData::default().with_index(p).with_records(Some(record_batch(
                payload,
                n,
                timestamp_ms,
            )?)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let topic = TopicProduceData::default().with_name(topic.clone()).with_partition_data(data);
    Ok(ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![topic]))
}

async fn send_requests(
    args: &Args,
    index: usize,
    start: Instant,
    records_per_second: f64,
    mut write: OwnedWriteHalf,
    window: &Semaphore,
    sent: mpsc::UnboundedSender<Sent>,
) -> anyhow::Result<()> {
    let payload = Bytes::from(vec![b'x'; args.record_bytes]);
    let per_batch = (args.batch_bytes / args.record_bytes).max(1) as u64;
    let topic = topic_name(args, index % args.topics);
    let paced = records_per_second > 0.0;
    let linger = Duration::from_millis(args.linger_ms);
    let end = start + Duration::from_secs(args.seconds);
    // Producers' ticks are staggered over one linger, as independent clients' would be.
    let mut tick = tokio::time::interval_at(start + linger.mul_f64(index as f64 / args.producers as f64), linger);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut partition = (index as i32) % args.partitions;
    let mut next = 0u64;
    let mut correlation_id = 0;
    loop {
        // Paced: the records due by this tick. Unpaced: one batch whenever there is room.
        let (now, due) = if paced {
            let now = tick.tick().await;
            (now, (now.min(end).duration_since(start).as_secs_f64() * records_per_second) as u64)
        } else {
            (Instant::now(), next + per_batch)
        };
        if due > next && (paced || now < end) {
            window.acquire().await.context("window closed")?.forget();
            let count = due - next;
            let request = produce_request(&topic, &split(args, count, per_batch, &mut partition), &payload)?;
            correlation_id += 1;
            let sent_at = Instant::now();
            write.write_all(&frame(ApiKey::Produce, PRODUCE_VERSION, correlation_id, &request)?).await?;
            sent.send(Sent { correlation_id, first: next, count, sent_at }).context("the answer reader stopped")?;
            next = due;
        }
        if now >= end {
            return Ok(());
        }
    }
}

fn percentile_ms(sorted: &[u32], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1).min(sorted.len().saturating_sub(1));
    sorted.get(i).map_or(0.0, |&us| (f64::from(us) / 10.0).round() / 100.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    ensure!(args.producers > 0 && args.topics > 0 && args.partitions > 0, "producers, topics, partitions > 0");
    create_topics(&args).await?;
    if args.create_only {
        return Ok(());
    }
    let cpu_before = own_cpu_seconds();
    let start = Instant::now() + Duration::from_millis(100);
    let producers: Vec<_> = (0..args.producers).map(|p| tokio::spawn(produce(args.clone(), p, start))).collect();
    let mut latencies = Vec::new();
    let mut requests = 0;
    let mut last_ack = start;
    for producer in producers {
        let outcome = producer.await??;
        latencies.extend(outcome.latencies_us);
        requests += outcome.requests;
        last_ack = last_ack.max(outcome.last_ack.unwrap_or(start));
    }
    latencies.sort_unstable();
    let records = latencies.len() as u64;
    let seconds = last_ack.duration_since(start).as_secs_f64().max(f64::EPSILON);
    let mib = records as f64 * args.record_bytes as f64 / 1048576.0;
    println!(
        "{}",
        json!({
            "producers": args.producers,
            "record_bytes": args.record_bytes,
            "linger_ms": args.linger_ms,
            "sticky": !args.spread,
            "offered_mib_per_sec": args.rate,
            "produce": {
                "records": records,
                "requests": requests,
                "mib_per_sec": (mib / seconds * 100.0).round() / 100.0,
                "ack_ms": {
                    "p50": percentile_ms(&latencies, 0.5),
                    "p99": percentile_ms(&latencies, 0.99),
                    "p999": percentile_ms(&latencies, 0.999),
                    "max": percentile_ms(&latencies, 1.0),
                },
            },
            "generator_cpu_s": ((own_cpu_seconds() - cpu_before) * 100.0).round() / 100.0,
        })
    );
    Ok(())
}
