//! Kafka transactions through metadata: staged appends stay invisible until the commit
//! makes all of them visible at once with the group offsets; an abort or a timeout
//! leaves nothing and releases the blocks; older epochs are fenced; a retried end
//! answers the same; an open transaction survives a failover.

use std::sync::Arc;
use std::time::Duration;

use shale_storage::object_store::memory::InMemory;
use shale_storage::object_store::ObjectStore;
use shale_storage::ManualClock;

use crate::{
    keys, BasinConfig, CommitAppend, CommitRequest, CommitUnit, GroupOffset, Metadata, MetadataApi, MetadataConfig,
    MetadataError, ProducerStamp, StreamConfig, TransactionCall, TransactionOp, TransactionOutcome, TransactionRefusal,
    TransactionStamp, TransactionState, UnitOutcome,
};

const T0: u64 = 1_800_000_000_000;
const BASIN: &str = "basin-one";
const TX: &str = "tx-one";

async fn open_on(store: Arc<dyn ObjectStore>, clock: Arc<ManualClock>) -> Metadata {
    let config = MetadataConfig { max_commit_age: Duration::from_secs(5), ..MetadataConfig::default() };
    Metadata::open_with(store, "metadata", clock, &config).await.unwrap()
}

async fn open() -> (Metadata, Arc<ManualClock>, Arc<dyn ObjectStore>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let metadata = open_on(store.clone(), clock.clone()).await;
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for stream in ["out/0", "out/1", "in/0"] {
        metadata.create_stream(BASIN, stream, StreamConfig::default()).await.unwrap();
    }
    (metadata, clock, store)
}

async fn call(metadata: &Metadata, producer: (i64, i16), op: TransactionOp) -> Result<TransactionState, MetadataError> {
    let call = TransactionCall { transactional_id: TX.into(), producer_id: producer.0, epoch: producer.1, op };
    Ok(metadata.transaction(call).await?.remove(0))
}

/// InitProducerId for a fresh producer: its id and epoch.
async fn init(metadata: &Metadata) -> (i64, i16) {
    let state =
        call(metadata, (-1, -1), TransactionOp::Init { timeout_ms: 60_000, new_producer_id: 500 }).await.unwrap();
    (state.producer_id, state.epoch)
}

async fn add(metadata: &Metadata, producer: (i64, i16), streams: &[&str]) {
    let streams = streams.iter().map(|s| s.to_string()).collect();
    call(metadata, producer, TransactionOp::AddStreams { basin: BASIN.into(), streams }).await.unwrap();
}

/// A transactional append of `records` records with Kafka sequence `seq`.
fn staged(stream: &str, producer: (i64, i16), seq: u64, records: usize) -> CommitUnit {
    CommitUnit {
        appends: vec![CommitAppend {
            basin: BASIN.into(),
            stream: stream.into(),
            offset: seq * 100,
            len: 100,
            arrival: T0,
            client_timestamps: vec![None; records],
            commands: vec![],
            match_seq_num: None,
            fencing_token: None,
            metered_bytes: 100,
            producer: Some(ProducerStamp {
                id: format!("kafka-{}-{}", producer.0, producer.1),
                seq,
                counts_records: true,
            }),
            transaction: Some(TransactionStamp {
                transactional_id: TX.into(),
                producer_id: producer.0,
                epoch: producer.1,
            }),
        }],
    }
}

async fn commit(metadata: &Metadata, clock: &ManualClock, segment: u128, units: Vec<CommitUnit>) -> Vec<UnitOutcome> {
    let segment_id = ulid::Ulid::from_parts(shale_storage::Clock::now_ms(clock), segment).0;
    metadata.commit(CommitRequest { segment_id, units }).await.unwrap()
}

async fn tail(metadata: &Metadata, stream: &str) -> u64 {
    metadata.stream(BASIN, stream).await.unwrap().record.next_seq
}

fn refused(result: Result<TransactionState, MetadataError>) -> TransactionRefusal {
    match result {
        Err(MetadataError::Transaction { refusal, .. }) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_commit_makes_every_staged_append_and_offset_visible_at_once() {
    let (metadata, clock, _store) = open().await;
    let producer = init(&metadata).await;
    add(&metadata, producer, &["out/0", "out/1"]).await;
    let first =
        commit(&metadata, &clock, 1, vec![staged("out/0", producer, 0, 3), staged("out/1", producer, 0, 2)]).await;
    assert!(first.iter().all(Result::is_ok), "{first:?}");
    let second = commit(&metadata, &clock, 2, vec![staged("out/0", producer, 3, 1)]).await;
    assert!(second[0].is_ok(), "{second:?}");
    call(&metadata, producer, TransactionOp::AddGroup { group: "g".into() }).await.unwrap();
    let offsets = vec![GroupOffset { stream: "in/0".into(), seq_num: 0, commit_metadata: String::new() }];
    call(&metadata, producer, TransactionOp::CommitOffsets { basin: BASIN.into(), group: "g".into(), offsets })
        .await
        .unwrap();

    assert_eq!((tail(&metadata, "out/0").await, tail(&metadata, "out/1").await), (0, 0), "nothing visible yet");
    let out0 = metadata.stream(BASIN, "out/0").await.unwrap().record.id;
    assert!(metadata.entries_from(out0, 0, 10).await.unwrap().is_empty());

    let ended = call(&metadata, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!((ended.last_outcome, ended.is_open()), (TransactionOutcome::Committed, false));
    assert_eq!((tail(&metadata, "out/0").await, tail(&metadata, "out/1").await), (4, 2));
    let entries = metadata.entries_from(out0, 0, 10).await.unwrap();
    let placed: Vec<(u64, u32, u64)> = entries.iter().map(|e| (e.first_seq, e.record_count, e.offset)).collect();
    assert_eq!(placed, vec![(0, 3, 0), (3, 1, 300)], "staging order, each block where it was staged");
    assert_eq!(metadata.consumer(BASIN, "in/0", "g").await.unwrap().map(|p| p.seq_num), Some(0));
    // Nothing staged is left behind.
    assert!(metadata.db.get(&keys::staged(TX, 0)).await.unwrap().is_none());

    // A retried commit answers the same; an abort of what was committed is refused.
    let again = call(&metadata, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!(again.last_outcome, TransactionOutcome::Committed);
    assert_eq!(tail(&metadata, "out/0").await, 4, "applied once");
    let abort = call(&metadata, producer, TransactionOp::End { commit: false }).await;
    assert_eq!(refused(abort), TransactionRefusal::InvalidState);

    // The commit kept the stream id counter: streams created after it get new ids.
    let mut ids = std::collections::HashSet::new();
    for stream in ["out/0", "out/1", "in/0"] {
        ids.insert(metadata.stream(BASIN, stream).await.unwrap().record.id);
    }
    for stream in ["late-0", "late-1", "late-2", "late-3"] {
        let id = metadata.create_stream(BASIN, stream, StreamConfig::default()).await.unwrap().record.id;
        assert!(ids.insert(id), "{stream} got the id {id} of an older stream");
    }
}

#[tokio::test]
async fn an_abort_leaves_nothing_and_releases_the_staged_blocks() {
    let (metadata, clock, _store) = open().await;
    let producer = init(&metadata).await;
    add(&metadata, producer, &["out/0"]).await;
    let segment_id = ulid::Ulid::from_parts(shale_storage::Clock::now_ms(clock.as_ref()), 7).0;
    let outcome = metadata.commit(CommitRequest { segment_id, units: vec![staged("out/0", producer, 0, 5)] }).await;
    assert!(outcome.unwrap()[0].is_ok());
    assert!(metadata.db.get(&keys::segment(segment_id)).await.unwrap().is_some(), "the staged block holds its segment");

    let ended = call(&metadata, producer, TransactionOp::End { commit: false }).await.unwrap();
    assert_eq!(ended.last_outcome, TransactionOutcome::Aborted);
    assert_eq!(tail(&metadata, "out/0").await, 0);
    assert!(metadata.db.get(&keys::segment(segment_id)).await.unwrap().is_none());
    assert!(metadata.db.get(&keys::released(segment_id)).await.unwrap().is_some(), "released for deletion");

    // The next transaction of the same producer carries on with its sequences.
    add(&metadata, producer, &["out/0"]).await;
    assert!(commit(&metadata, &clock, 8, vec![staged("out/0", producer, 5, 2)]).await[0].is_ok());
    call(&metadata, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!(tail(&metadata, "out/0").await, 2, "only the committed transaction's records, from offset 0");
}

#[tokio::test]
async fn a_newer_epoch_fences_the_old_producer_and_aborts_its_transaction() {
    let (metadata, clock, _store) = open().await;
    let zombie = init(&metadata).await;
    add(&metadata, zombie, &["out/0"]).await;
    assert!(commit(&metadata, &clock, 1, vec![staged("out/0", zombie, 0, 1)]).await[0].is_ok());

    let current = init(&metadata).await;
    assert_eq!(current, (zombie.0, zombie.1 + 1), "same producer id, next epoch");
    let late = commit(&metadata, &clock, 2, vec![staged("out/0", zombie, 1, 1)]).await;
    assert!(matches!(late[0], Err(MetadataError::Transaction { refusal: TransactionRefusal::ProducerFenced, .. })));
    assert_eq!(
        refused(call(&metadata, zombie, TransactionOp::End { commit: true }).await),
        TransactionRefusal::ProducerFenced
    );
    assert_eq!(tail(&metadata, "out/0").await, 0, "the zombie's open transaction was aborted by the new epoch");

    // Staging outside an open transaction is refused.
    let unopened = commit(&metadata, &clock, 3, vec![staged("out/0", current, 0, 1)]).await;
    assert!(matches!(unopened[0], Err(MetadataError::Transaction { refusal: TransactionRefusal::InvalidState, .. })));
}

#[tokio::test]
async fn a_retried_staged_append_is_staged_once() {
    let (metadata, clock, _store) = open().await;
    let producer = init(&metadata).await;
    add(&metadata, producer, &["out/0"]).await;
    assert!(commit(&metadata, &clock, 1, vec![staged("out/0", producer, 0, 2)]).await[0].is_ok());
    // The client resends the batch (a lost ack): a new segment, the same sequence.
    assert!(commit(&metadata, &clock, 2, vec![staged("out/0", producer, 0, 2)]).await[0].is_ok());
    call(&metadata, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!(tail(&metadata, "out/0").await, 2);
}

#[tokio::test]
async fn an_abandoned_transaction_times_out_and_its_producer_is_fenced() {
    let (metadata, clock, _store) = open().await;
    let state = call(&metadata, (-1, -1), TransactionOp::Init { timeout_ms: 5_000, new_producer_id: 9 }).await.unwrap();
    let producer = (state.producer_id, state.epoch);
    add(&metadata, producer, &["out/0"]).await;
    assert!(commit(&metadata, &clock, 1, vec![staged("out/0", producer, 0, 1)]).await[0].is_ok());
    assert_eq!(metadata.abort_timed_out_transactions().await.unwrap(), 0, "not yet");
    clock.advance(Duration::from_secs(6));
    assert_eq!(metadata.abort_timed_out_transactions().await.unwrap(), 1);
    assert_eq!(tail(&metadata, "out/0").await, 0);
    assert_eq!(
        refused(call(&metadata, producer, TransactionOp::End { commit: true }).await),
        TransactionRefusal::ProducerFenced
    );
    let listed = metadata
        .transaction(TransactionCall {
            transactional_id: String::new(),
            producer_id: -1,
            epoch: -1,
            op: TransactionOp::List,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].last_outcome, listed[0].epoch), (TransactionOutcome::Aborted, producer.1 + 1));
}

#[tokio::test]
async fn an_open_transaction_survives_a_failover_and_commits_there() {
    let (metadata, clock, store) = open().await;
    let producer = init(&metadata).await;
    add(&metadata, producer, &["out/0", "out/1"]).await;
    let staged_both = vec![staged("out/0", producer, 0, 1), staged("out/1", producer, 0, 1)];
    assert!(commit(&metadata, &clock, 1, staged_both).await.iter().all(Result::is_ok));
    drop(metadata);

    let successor = open_on(store, clock.clone()).await;
    assert_eq!(tail(&successor, "out/0").await, 0);
    call(&successor, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!((tail(&successor, "out/0").await, tail(&successor, "out/1").await), (1, 1));
}

#[tokio::test]
async fn a_stream_created_by_a_staged_append_is_kept_and_filled_at_commit() {
    let (metadata, clock, _store) = open().await;
    let config = BasinConfig { create_stream_on_append: true, ..BasinConfig::default() };
    metadata.create_basin("auto-basin", config).await.unwrap();
    let producer = init(&metadata).await;
    let add = TransactionOp::AddStreams { basin: "auto-basin".into(), streams: vec!["fresh".into()] };
    call(&metadata, producer, add).await.unwrap();
    let mut unit = staged("fresh", producer, 0, 2);
    unit.appends[0].basin = "auto-basin".into();
    assert!(commit(&metadata, &clock, 1, vec![unit]).await[0].is_ok());
    assert_eq!(metadata.stream("auto-basin", "fresh").await.unwrap().record.next_seq, 0, "created, empty");
    call(&metadata, producer, TransactionOp::End { commit: true }).await.unwrap();
    assert_eq!(metadata.stream("auto-basin", "fresh").await.unwrap().record.next_seq, 2);
}
