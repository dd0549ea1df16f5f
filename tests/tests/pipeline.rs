//! The pipelined sequencer under stress, on the local S3 server: many committers share
//! each WAL write; a WAL write that fails acks nothing applied after the last durable
//! point and hands over to a standby with exactly the acked set; several gateways with
//! several commits in flight keep per-producer order and exactly-once.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shale_gateway::{AppendInput, Gateway, GatewayConfig};
use shale_metadata::{
    hold_leadership, BasinConfig, ClusterTiming, HaltReason, Metadata, MetadataApi, MetadataConfig, StreamConfig,
    DEFAULT_DB_PATH,
};
use shale_proto::Record;
use shale_reader::{ReadStart, Reader, ReaderConfig};
use shale_storage::object_store::ObjectStore;
use shale_storage::{DelayedStore, SystemClock};
use shale_tests::{Backend, Node};

const BASIN: &str = "pipeline-basin";
const WAL: &str = "metadata/wal";

fn input(stream: &str, body: String) -> AppendInput {
    AppendInput {
        basin: BASIN.into(),
        stream: stream.into(),
        records: vec![Record { body: Bytes::from(body), ..Default::default() }],
        ..Default::default()
    }
}

/// Waits for a synchronous condition (see [`shale_tests::wait_until`]).
async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    shale_tests::wait_until(what, Duration::from_secs(30), || std::future::ready(condition())).await;
}

/// Every record body of a stream, in sequence order.
async fn read_bodies(reader: &Reader, stream: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let request = shale_tests::read_request(BASIN, stream, ReadStart::SeqNum(bodies.len() as u64));
        let output = reader.read(&request).await.unwrap();
        if output.records.is_empty() {
            return bodies;
        }
        bodies.extend(output.records.iter().map(|r| String::from_utf8(r.body.to_vec()).unwrap()));
    }
}

async fn setup(metadata: &dyn MetadataApi, streams: usize) -> Vec<String> {
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    let names: Vec<String> = (0..streams).map(|i| format!("s{i}")).collect();
    for name in &names {
        metadata.create_stream(BASIN, name, StreamConfig::default()).await.unwrap();
    }
    names
}

/// 48 appends wait on a held WAL write that then fails for good: none is acked, the
/// instance halts and gives up its lease, and a standby opened on the same store holds
/// exactly the records acked before, each once, and none of the failed ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_wal_write_acks_nothing_after_the_last_durable_point() {
    let store = Backend::S3.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    let streams = setup(node.metadata.as_ref(), 6).await;
    let lease_config = ClusterTiming {
        lease: Duration::from_secs(2),
        renew_interval: Duration::from_millis(100),
        ..Default::default()
    };
    let lease = hold_leadership(node.metadata.clone(), store.raw.clone(), "127.0.0.1:1".into(), lease_config);
    wait_until("the lease", || lease.is_held()).await;
    let gateway = Arc::new(node.gateway);

    // Acked before the fault: the last durable point.
    let mut acked: HashMap<String, (String, u64)> = HashMap::new();
    let before: Vec<_> = (0..24)
        .map(|i| {
            let (stream, body) = (streams[i % streams.len()].clone(), format!("before-{i}"));
            let gateway = gateway.clone();
            tokio::spawn(async move { (stream.clone(), body.clone(), gateway.append(input(&stream, body)).await) })
        })
        .collect();
    for task in before {
        let (stream, body, ack) = task.await.unwrap();
        acked.insert(body, (stream, ack.unwrap().start.seq_num));
    }

    // Applied in memory while the WAL write is held, then the store stays down.
    let stats = node.metadata.commit_stats();
    let applied_before = stats.applied.load(Ordering::SeqCst);
    node.faults.hold_puts(WAL);
    let spawn_wave = |wave: std::ops::Range<usize>| -> Vec<_> {
        wave.map(|i| {
            let (stream, body) = (streams[i % streams.len()].clone(), format!("after-{i}"));
            let gateway = gateway.clone();
            tokio::spawn(async move { (body.clone(), gateway.append(input(&stream, body)).await) })
        })
        .collect()
    };
    // Two waves, each waited for, so at least two calls are applied however the
    // batcher groups the appends: the first holds the WAL write, the second is applied
    // behind it.
    let mut after = spawn_wave(0..24);
    wait_until("a commit applied and its WAL write held", || stats.applied.load(Ordering::SeqCst) > applied_before)
        .await;
    after.extend(spawn_wave(24..48));
    wait_until("commits applied behind the held WAL write", || {
        stats.applied.load(Ordering::SeqCst) >= applied_before + 2
    })
    .await;
    node.faults.break_puts(WAL);
    node.faults.release_puts();
    for task in after {
        let (body, outcome) = task.await.unwrap();
        assert!(outcome.is_err(), "{body} was acked after the last durable point");
    }
    let mut halted = node.metadata.watch_halted();
    tokio::time::timeout(Duration::from_secs(30), halted.wait_for(|r| *r == Some(HaltReason::WriteFailed)))
        .await
        .unwrap()
        .unwrap();
    assert!(node.metadata.stream(BASIN, &streams[0]).await.is_err(), "a halted instance answers nothing");
    wait_until("the lease given up", || !lease.is_held()).await;
    gateway.shutdown().await;

    // The standby sees exactly the acked set.
    let standby = Arc::new(Metadata::open(store.raw.clone(), DEFAULT_DB_PATH, Arc::new(SystemClock)).await.unwrap());
    let reader = Reader::new(&ReaderConfig::default(), store.raw.clone(), standby.clone());
    let mut seen = 0;
    for stream in &streams {
        let bodies = read_bodies(&reader, stream).await;
        assert!(bodies.iter().all(|b| b.starts_with("before-")), "{stream} holds an unacked record: {bodies:?}");
        for (seq, body) in bodies.iter().enumerate() {
            assert_eq!(acked.get(body), Some(&(stream.clone(), seq as u64)), "{body} at {stream}/{seq}");
        }
        seen += bodies.len();
    }
    assert_eq!(seen, acked.len(), "every acked record, once");
    standby.close().await.unwrap();
}

/// Three gateways with several commits in flight each, at store latency, 6 producers
/// per gateway pipelining appends to shared streams: every ack is where the stream has
/// it, each record once, and each producer's records in its submission order; the
/// commits shared WAL writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_gateways_keep_order_and_exactly_once() {
    let store = Backend::S3.store().await;
    let slow: Arc<dyn ObjectStore> = Arc::new(DelayedStore::new(store.raw.clone(), Duration::from_millis(10)));
    let metadata = Arc::new(
        Metadata::open_with(slow.clone(), DEFAULT_DB_PATH, Arc::new(SystemClock), &MetadataConfig::default())
            .await
            .unwrap(),
    );
    let streams = setup(metadata.as_ref(), 4).await;
    let config = GatewayConfig { linger: Duration::from_millis(2), ..GatewayConfig::default() };
    let gateways: Vec<Arc<Gateway>> = (0..3)
        .map(|_| {
            Arc::new(Gateway::start(config.clone(), slow.clone(), metadata.clone(), Arc::new(SystemClock)).unwrap())
        })
        .collect();
    let stats = metadata.commit_stats();
    let (calls_before, flushes_before) = (stats.calls.load(Ordering::SeqCst), stats.flushes.load(Ordering::SeqCst));
    let mut producers = Vec::new();
    for (g, gateway) in gateways.iter().enumerate() {
        for p in 0..6 {
            let gateway = gateway.clone();
            let streams = streams.clone();
            producers.push(tokio::spawn(async move {
                // Submitted without waiting: up to 8 appends of this producer in flight.
                let mut pending = std::collections::VecDeque::new();
                let mut acks = Vec::new();
                for n in 0..40 {
                    let stream = streams[(p + n) % streams.len()].clone();
                    let body = format!("g{g}-p{p}-{n:03}");
                    pending.push_back((
                        stream.clone(),
                        body.clone(),
                        gateway.submit(vec![input(&stream, body)]).unwrap(),
                    ));
                    if pending.len() == 8 {
                        let (stream, body, ack) = pending.pop_front().unwrap();
                        acks.push((stream, body, ack.await.unwrap()[0].start.seq_num));
                    }
                }
                for (stream, body, ack) in pending {
                    acks.push((stream, body, ack.await.unwrap()[0].start.seq_num));
                }
                acks
            }));
        }
    }
    let mut acked = HashMap::new();
    for producer in producers {
        for (stream, body, seq) in producer.await.unwrap() {
            assert!(acked.insert(body, (stream, seq)).is_none());
        }
    }
    let commits = stats.calls.load(Ordering::SeqCst) - calls_before;
    let flushes = stats.flushes.load(Ordering::SeqCst) - flushes_before;
    assert!(flushes < commits, "commits shared WAL writes: {commits} calls in {flushes} flushes");

    let reader = Reader::new(&ReaderConfig::default(), slow.clone(), metadata.clone());
    let mut total = 0;
    for stream in &streams {
        let bodies = read_bodies(&reader, stream).await;
        let mut last_of_producer: HashMap<&str, &str> = HashMap::new();
        for (seq, body) in bodies.iter().enumerate() {
            assert_eq!(acked.get(body), Some(&(stream.clone(), seq as u64)), "{body} at {stream}/{seq}");
            let (producer, n) = body.rsplit_once('-').unwrap();
            if let Some(previous) = last_of_producer.insert(producer, n) {
                assert!(previous < n, "{producer}: {n} after {previous} in {stream}");
            }
        }
        total += bodies.len();
    }
    assert_eq!(total, acked.len(), "every acked record, once");
    for gateway in gateways {
        gateway.shutdown().await;
    }
    metadata.close().await.unwrap();
}
