//! The commit rules that guard against clocks and failures: no segment applied twice
//! whatever its id's clock says, and no unit committed after an earlier unit of the same
//! stream failed in the same call.

use std::sync::Arc;
use std::time::Duration;

use shale_storage::object_store::memory::InMemory;
use shale_storage::ManualClock;

use crate::{
    keys, AppendAck, BasinConfig, CommitAppend, CommitRequest, CommitUnit, Metadata, MetadataApi, MetadataConfig,
    MetadataError, StreamConfig,
};

const T0: u64 = 1_800_000_000_000;

async fn open() -> (Metadata, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let config = MetadataConfig {
        max_commit_age: Duration::from_secs(5),
        orphan_grace: Duration::from_secs(10),
        ..MetadataConfig::default()
    };
    let metadata = Metadata::open_with(Arc::new(InMemory::new()), "metadata", clock.clone(), &config).await.unwrap();
    metadata.create_basin("basin-one", BasinConfig::default()).await.unwrap();
    for stream in ["s", "t"] {
        metadata.create_stream("basin-one", stream, StreamConfig::default()).await.unwrap();
    }
    (metadata, clock)
}

fn append(stream: &str, match_seq_num: Option<u64>) -> CommitUnit {
    CommitUnit {
        appends: vec![CommitAppend {
            basin: "basin-one".into(),
            stream: stream.into(),
            offset: 0,
            len: 10,
            arrival: T0,
            client_timestamps: vec![None],
            commands: vec![],
            match_seq_num,
            fencing_token: None,
            metered_bytes: 10,
            producer: None,
            transaction: None,
        }],
    }
}

fn segment_at(ms: u64, units: Vec<CommitUnit>) -> CommitRequest {
    CommitRequest { segment_id: ulid::Ulid::from_parts(ms, 7).0, units }
}

async fn tail(metadata: &Metadata, stream: &str) -> u64 {
    metadata.stream("basin-one", stream).await.unwrap().record.next_seq
}

#[tokio::test]
async fn a_retry_after_the_outcome_expired_is_not_applied_again_whatever_the_clock() {
    let (metadata, clock) = open().await;
    // A gateway 4 s ahead: within max_commit_age, so the segment is committed.
    let segment = segment_at(T0 + 4_000, vec![append("s", None)]);
    assert!(metadata.commit(segment.clone()).await.unwrap()[0].is_ok());
    // Its stored outcome expires after 3 x max_commit_age (SlateDB's TTL runs on its own
    // clock, so the test removes it as the clock passes that point).
    clock.advance(Duration::from_secs(15));
    metadata.db.delete(keys::commit_outcome(segment.segment_id)).await.unwrap();
    let retried = metadata.commit(segment).await.unwrap();
    assert!(matches!(retried[0], Err(MetadataError::Indefinite(_))), "{:?}", retried[0]);
    assert_eq!(tail(&metadata, "s").await, 1, "applied once");
    metadata.close().await.unwrap();
}

#[tokio::test]
async fn segments_stamped_far_ahead_or_behind_are_refused_and_counted() {
    let (metadata, clock) = open().await;
    let ahead = metadata.commit(segment_at(T0 + 6_000, vec![append("s", None)])).await.unwrap();
    assert!(matches!(ahead[0], Err(MetadataError::Unavailable(_))), "{:?}", ahead[0]);
    clock.advance(Duration::from_secs(60));
    let behind = metadata.commit(segment_at(T0, vec![append("s", None)])).await.unwrap();
    assert!(matches!(behind[0], Err(MetadataError::Unavailable(_))), "{:?}", behind[0]);
    assert_eq!(tail(&metadata, "s").await, 0);
    let stats = metadata.commit_stats();
    assert_eq!(stats.refused_from_future.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(stats.refused_too_old.load(std::sync::atomic::Ordering::Relaxed), 1);
    metadata.close().await.unwrap();
}

#[tokio::test]
async fn a_failed_unit_fails_the_later_units_of_its_stream_in_the_same_call() {
    let (metadata, _clock) = open().await;
    let first = segment_at(T0, vec![append("s", Some(5)), append("s", None), append("t", None)]);
    let second = segment_at(T0 + 1, vec![append("s", None), append("t", None)]);
    let outcomes = metadata.commit_many(vec![first, second]).await.unwrap();
    assert!(matches!(outcomes[0][0], Err(MetadataError::SeqNumMismatch { .. })), "{:?}", outcomes[0][0]);
    assert!(matches!(outcomes[0][1], Err(MetadataError::EarlierAppendFailed { .. })), "{:?}", outcomes[0][1]);
    assert!(outcomes[0][2].is_ok(), "other streams proceed");
    assert!(matches!(outcomes[1][0], Err(MetadataError::EarlierAppendFailed { .. })), "{:?}", outcomes[1][0]);
    assert!(outcomes[1][1].is_ok());
    assert_eq!((tail(&metadata, "s").await, tail(&metadata, "t").await), (0, 2));
    // A later call starts afresh.
    assert!(metadata.commit(segment_at(T0 + 2, vec![append("s", None)])).await.unwrap()[0].is_ok());
    metadata.close().await.unwrap();
}

#[tokio::test]
async fn arrival_times_ahead_of_metadata_are_clamped_and_do_not_raise_the_floor() {
    let (metadata, clock) = open().await;
    // A gateway 4 s ahead (within max_commit_age, so committed) stamps its arrival time.
    let mut ahead = append("s", None);
    ahead.appends[0].arrival = T0 + 4_000;
    let acks = metadata.commit(segment_at(T0 + 4_000, vec![ahead])).await.unwrap();
    let ack = acks[0].as_ref().unwrap()[0];
    assert_eq!(ack.start.timestamp, T0, "clamped to metadata's clock");
    let entries = metadata.entries_from(metadata.stream("basin-one", "s").await.unwrap().record.id, 0, 10).await;
    let entry = entries.unwrap()[0];
    assert_eq!(entry.arrival_cap, Some(T0));
    let mut resolver = entry.resolver(T0 + 4_000);
    assert_eq!(resolver.next(None), T0, "readers replay the same clamp");
    // A gateway with the right clock, a moment later, is not held at the future floor.
    clock.advance(Duration::from_millis(10));
    let mut on_time = append("s", None);
    on_time.appends[0].arrival = T0 + 10;
    let acks = metadata.commit(segment_at(T0 + 10, vec![on_time])).await.unwrap();
    assert_eq!(acks[0].as_ref().unwrap()[0].start.timestamp, T0 + 10);
    metadata.close().await.unwrap();
}

/// With `min_flush_interval`, commits arriving while a flush waits share it: eight
/// commits sent at once after a first one become durable in one more WAL flush, and
/// none is answered before the interval since the previous flush has passed.
#[tokio::test]
async fn commits_within_the_minimum_flush_interval_share_one_flush() {
    let clock = Arc::new(ManualClock::new(T0));
    let config = MetadataConfig { min_flush_interval: Duration::from_millis(300), ..MetadataConfig::default() };
    let metadata = Metadata::open_with(Arc::new(InMemory::new()), "metadata", clock, &config).await.unwrap();
    metadata.create_basin("basin-one", BasinConfig::default()).await.unwrap();
    metadata.create_stream("basin-one", "s", StreamConfig::default()).await.unwrap();
    let flushes = || metadata.commit_stats().flushes.load(std::sync::atomic::Ordering::Relaxed);
    let first = tokio::time::Instant::now();
    metadata.commit(segment_at(T0, vec![append("s", None)])).await.unwrap();
    let before = flushes();
    let commits = (1..=8).map(|i| metadata.commit(segment_at(T0 + i, vec![append("s", None)])));
    for outcome in futures::future::join_all(commits).await {
        assert!(outcome.unwrap()[0].is_ok());
    }
    assert!(first.elapsed() >= Duration::from_millis(300), "answered before the interval: {:?}", first.elapsed());
    assert_eq!(flushes() - before, 1, "eight commits in one flush");
    assert_eq!(tail(&metadata, "s").await, 9);
}

/// The defect the protocol model found (`model/src/pipeline.rs`): a gateway's call 1
/// reaches the old leader and fails there (or is lost with it); after a takeover, call 2
/// for the same stream, sent before the gateway saw call 1's answer, reached the new
/// leader, which knew nothing of call 1 and committed it: record N+1 acked after record
/// N failed. The new instance (this one: it never saw call 1) now refuses it, and a call
/// sent once the gateway has seen both answers goes through.
#[tokio::test]
async fn a_call_whose_unanswered_predecessor_went_to_another_instance_is_refused() {
    use crate::PipelinePosition;
    let (metadata, _clock) = open().await;
    let at = |seq, seen_through| Some(PipelinePosition { pipeline: 42, seq, seen_through, first_send: true });
    let ticket = metadata.sequence(vec![segment_at(T0, vec![append("s", None)])], at(2, 0)).await.unwrap();
    let outcomes = ticket.await.unwrap();
    assert!(matches!(outcomes[0][0], Err(MetadataError::Unavailable(_))), "{:?}", outcomes[0][0]);
    assert_eq!(tail(&metadata, "s").await, 0, "nothing committed");
    let ticket = metadata.sequence(vec![segment_at(T0 + 1, vec![append("s", None)])], at(3, 2)).await.unwrap();
    let outcomes = ticket.await.unwrap();
    assert!(outcomes[0][0].is_ok(), "{:?}", outcomes[0][0]);
    assert_eq!(tail(&metadata, "s").await, 1);
    metadata.close().await.unwrap();
}

/// A pipelined call's first send is applied without looking its segment's outcome up
/// (its id is fresh); the same call sent again (after a broken stream) is looked up and
/// answered with the first outcome, nothing applied twice; so is a call without a
/// position (a client that does not mark first sends).
#[tokio::test]
async fn only_a_call_that_may_be_a_resend_looks_its_outcome_up() {
    use crate::PipelinePosition;
    use std::sync::atomic::Ordering;
    let (metadata, _clock) = open().await;
    let lookups = || metadata.commit_stats.outcome_lookups.load(Ordering::Relaxed);
    let first = PipelinePosition { pipeline: 42, seq: 1, seen_through: 0, first_send: true };
    let segment = segment_at(T0, vec![append("s", None)]);
    let acks = |outcomes: Vec<Vec<crate::UnitOutcome>>| -> Vec<AppendAck> {
        outcomes.into_iter().flatten().flat_map(|outcome| outcome.unwrap()).collect()
    };
    let applied = acks(metadata.sequence(vec![segment.clone()], Some(first)).await.unwrap().await.unwrap());
    assert_eq!(lookups(), 0, "a first send is not looked up");
    let resent = PipelinePosition { first_send: false, ..first };
    let again = acks(metadata.sequence(vec![segment.clone()], Some(resent)).await.unwrap().await.unwrap());
    assert_eq!(lookups(), 1, "a resend is looked up");
    assert_eq!(again, applied, "a resend gets the first send's acks");
    let unmarked = acks(vec![metadata.commit(segment).await.unwrap()]);
    assert_eq!(unmarked, applied, "so does a call without a position");
    assert_eq!(lookups(), 2);
    assert_eq!(tail(&metadata, "s").await, 1, "applied once");
    metadata.close().await.unwrap();
}

#[tokio::test]
async fn a_lookup_after_a_commit_is_answered_from_the_entries_its_tail_update_carried() {
    let (metadata, _clock) = open().await;
    let id = metadata.stream("basin-one", "s").await.unwrap().record.id;
    metadata.commit(segment_at(T0, vec![append("s", None)])).await.unwrap();
    metadata.commit(segment_at(T0 + 1, vec![append("s", None)])).await.unwrap();
    let indexed = metadata.entries_from(id, 0, 10).await.unwrap();
    assert_eq!(indexed.iter().map(|e| e.first_seq).collect::<Vec<_>>(), vec![0, 1]);
    // Out from under the index, not through a removal: only the published copy remains.
    for entry in &indexed {
        metadata.db.delete(keys::index(id, entry.last_seq())).await.unwrap();
    }
    metadata.db.flush().await.unwrap();
    assert_eq!(metadata.entries_from(id, 0, 10).await.unwrap(), indexed, "both, from memory, in order");
    assert_eq!(metadata.entries_from(id, 0, 1).await.unwrap(), indexed[..1], "up to the limit");
    assert_eq!(metadata.entries_from(id, 1, 10).await.unwrap(), indexed[1..], "from the one starting at seq");
    // A reader that found an entry's object gone drops it; the lookup then asks the index.
    metadata.forget_entry(id, 0);
    let scanned = metadata.entries_from(id, 0, 10).await.unwrap();
    assert!(scanned.is_empty(), "scanned: nothing indexed any more: {scanned:?}");
    metadata.close().await.unwrap();
}

#[tokio::test]
async fn a_database_written_under_zstd_reads_back_under_the_default_codec() {
    let store: Arc<InMemory> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(T0));
    let zstd = MetadataConfig { compression: crate::MetadataCompression::Zstd, ..MetadataConfig::default() };
    let metadata = Metadata::open_with(store.clone(), "metadata", clock.clone(), &zstd).await.unwrap();
    metadata.create_basin("basin-one", BasinConfig::default()).await.unwrap();
    metadata.create_stream("basin-one", "s", StreamConfig::default()).await.unwrap();
    metadata.commit(segment_at(T0, vec![append("s", None)])).await.unwrap();
    let id = metadata.stream("basin-one", "s").await.unwrap().record.id;
    // Into a level-0 SST compressed with zstd, not only the WAL.
    metadata
        .db
        .flush_with_options(slatedb::config::FlushOptions { flush_type: slatedb::config::FlushType::MemTable })
        .await
        .unwrap();
    metadata.close().await.unwrap();

    assert_eq!(MetadataConfig::default().compression, crate::MetadataCompression::Lz4);
    let reopened = Metadata::open_with(store, "metadata", clock, &MetadataConfig::default()).await.unwrap();
    assert_eq!(reopened.stream("basin-one", "s").await.unwrap().record.next_seq, 1);
    assert_eq!(reopened.entries_from(id, 0, 10).await.unwrap().len(), 1, "the entry, from the zstd SST");
    reopened.commit(segment_at(T0 + 1, vec![append("s", None)])).await.unwrap();
    assert_eq!(reopened.entries_from(id, 0, 10).await.unwrap().len(), 2);
    reopened.close().await.unwrap();
}
