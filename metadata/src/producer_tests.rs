//! Idempotent producers through commits: a retried sequence gets its original ack and
//! applies nothing, in the same call, in a later call and after a failover; a gap is
//! refused; idle state expires by metadata's clock; a deleted stream's state goes.

use std::sync::Arc;
use std::time::Duration;

use shale_storage::object_store::memory::InMemory;
use shale_storage::object_store::ObjectStore;
use shale_storage::ManualClock;

use crate::{
    keys, AppendAck, BasinConfig, CommitAppend, CommitRequest, CommitUnit, Metadata, MetadataApi, MetadataConfig,
    MetadataError, ProducerStamp, StreamConfig, UnitOutcome,
};

const T0: u64 = 1_800_000_000_000;
const BASIN: &str = "basin-one";

fn config() -> MetadataConfig {
    MetadataConfig {
        max_commit_age: Duration::from_secs(5),
        orphan_grace: Duration::from_secs(10),
        producer_expiry: Duration::from_secs(60),
        ..MetadataConfig::default()
    }
}

async fn open_on(store: Arc<dyn ObjectStore>, clock: Arc<ManualClock>) -> Metadata {
    Metadata::open_with(store, "metadata", clock, &config()).await.unwrap()
}

async fn open() -> (Metadata, Arc<ManualClock>, Arc<dyn ObjectStore>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let metadata = open_on(store.clone(), clock.clone()).await;
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for stream in ["s", "t"] {
        metadata.create_stream(BASIN, stream, StreamConfig::default()).await.unwrap();
    }
    (metadata, clock, store)
}

/// One append of `records` records by `producer` with sequence `seq`.
fn append(stream: &str, producer: &str, seq: u64, records: usize) -> CommitUnit {
    CommitUnit {
        appends: vec![CommitAppend {
            basin: BASIN.into(),
            stream: stream.into(),
            offset: 0,
            len: 10,
            arrival: T0,
            client_timestamps: vec![None; records],
            commands: vec![],
            match_seq_num: None,
            fencing_token: None,
            metered_bytes: 10,
            producer: Some(ProducerStamp { id: producer.into(), seq, counts_records: false }),
            transaction: None,
        }],
    }
}

/// Commits `units` as one segment sealed at the clock's time; one outcome per unit.
async fn commit(metadata: &Metadata, clock: &ManualClock, units: Vec<CommitUnit>) -> Vec<UnitOutcome> {
    static SEGMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let random = SEGMENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let segment_id = ulid::Ulid::from_parts(shale_storage::Clock::now_ms(clock), u128::from(random)).0;
    metadata.commit(CommitRequest { segment_id, units }).await.unwrap()
}

fn acked(outcome: &UnitOutcome) -> AppendAck {
    outcome.as_ref().unwrap()[0]
}

async fn tail(metadata: &Metadata, stream: &str) -> u64 {
    metadata.stream(BASIN, stream).await.unwrap().record.next_seq
}

#[tokio::test]
async fn a_retried_sequence_gets_its_first_ack_and_applies_nothing() {
    let (metadata, clock, _) = open().await;
    let first = acked(&commit(&metadata, &clock, vec![append("s", "p", 7, 3)]).await[0]);
    assert_eq!((first.start.seq_num, first.end.seq_num), (0, 3));
    // Another writer moves the tail; the retry still gets its own range back.
    commit(&metadata, &clock, vec![append("s", "other", 0, 2)]).await;
    let retried = acked(&commit(&metadata, &clock, vec![append("s", "p", 7, 3)]).await[0]);
    assert_eq!((retried.start, retried.end), (first.start, first.end));
    assert_eq!(retried.tail.seq_num, 5, "the ack's tail is the stream's tail now");
    assert_eq!(tail(&metadata, "s").await, 5, "nothing applied twice");

    // In one call: the next sequence, then its retry, then a gap.
    let outcomes =
        commit(&metadata, &clock, vec![append("s", "p", 8, 1), append("s", "p", 8, 1), append("s", "p", 10, 1)]).await;
    assert_eq!(acked(&outcomes[0]).start, acked(&outcomes[1]).start);
    match &outcomes[2] {
        Err(MetadataError::ProducerSeqMismatch { expected: 9, got: 10 }) => {}
        other => panic!("a gap is refused with the expected sequence: {other:?}"),
    }
    assert_eq!(tail(&metadata, "s").await, 6);

    // The same producer id on another stream is another producer.
    assert!(commit(&metadata, &clock, vec![append("t", "p", 0, 1)]).await[0].is_ok());
}

#[tokio::test]
async fn producer_state_survives_a_failover() {
    let (metadata, clock, store) = open().await;
    let first = acked(&commit(&metadata, &clock, vec![append("s", "p", 0, 2)]).await[0]);
    drop(metadata);
    let next = open_on(store, clock.clone()).await;
    let retried = acked(&commit(&next, &clock, vec![append("s", "p", 0, 2)]).await[0]);
    assert_eq!((retried.start, retried.end), (first.start, first.end));
    let gap = commit(&next, &clock, vec![append("s", "p", 2, 1)]).await;
    assert!(matches!(gap[0], Err(MetadataError::ProducerSeqMismatch { expected: 1, got: 2 })), "{:?}", gap[0]);
    assert_eq!(tail(&next, "s").await, 2);
}

#[tokio::test]
async fn idle_producers_are_forgotten_after_the_expiry() {
    let (metadata, clock, _) = open().await;
    commit(&metadata, &clock, vec![append("s", "p", 4, 1)]).await;
    clock.advance(Duration::from_secs(60));
    let gap = commit(&metadata, &clock, vec![append("s", "p", 9, 1)]).await;
    assert!(matches!(gap[0], Err(MetadataError::ProducerSeqMismatch { expected: 5, .. })), "still known at the expiry");
    clock.advance(Duration::from_secs(1));
    assert!(commit(&metadata, &clock, vec![append("s", "p", 9, 1)]).await[0].is_ok(), "forgotten: starts afresh");
}

#[tokio::test]
async fn deleting_a_stream_removes_its_producer_state() {
    let (metadata, clock, store) = open().await;
    commit(&metadata, &clock, vec![append("s", "p", 0, 1)]).await;
    let stream_id = metadata.stream(BASIN, "s").await.unwrap().record.id;
    assert!(metadata.db.get(keys::producer(stream_id, "p")).await.unwrap().is_some());
    metadata.delete_stream(BASIN, "s").await.unwrap();
    metadata.reclaim(store.as_ref()).await.unwrap();
    assert!(metadata.db.get(keys::producer(stream_id, "p")).await.unwrap().is_none());
}
