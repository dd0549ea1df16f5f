//! Reclaiming space with an injected clock: retention, trims, deletes and
//! `delete_on_empty` remove exactly the entries they make unreadable, a segment is
//! deleted only when nothing references it and only after `delete_grace`.

use std::sync::Arc;
use std::time::Duration;

use shale_proto::Command;
use shale_storage::object_store::memory::InMemory;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use shale_storage::ManualClock;

use crate::{
    BasinConfig, CommitAppend, CommitRequest, CommitUnit, DeleteOnEmpty, Metadata, MetadataApi, MetadataConfig,
    RetentionPolicy, StreamConfig,
};

const T0: u64 = 1_800_000_000_000;
const BASIN: &str = "basin-one";

pub(crate) struct Fixture {
    pub metadata: Metadata,
    pub clock: Arc<ManualClock>,
    pub store: Arc<dyn ObjectStore>,
}

pub(crate) async fn open(streams: &[(&str, StreamConfig)]) -> Fixture {
    let clock = Arc::new(ManualClock::new(T0));
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let config = MetadataConfig { delete_grace: Duration::from_secs(30), ..MetadataConfig::default() };
    let metadata = Metadata::open_with(store.clone(), "metadata", clock.clone(), &config).await.unwrap();
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for (stream, config) in streams {
        metadata.create_stream(BASIN, stream, config.clone()).await.unwrap();
    }
    Fixture { metadata, clock, store }
}

pub(crate) fn retained_for(secs: u64) -> StreamConfig {
    StreamConfig { retention_policy: Some(RetentionPolicy::Age(secs)), ..StreamConfig::default() }
}

pub(crate) fn append(stream: &str, records: usize, commands: Vec<Command>, arrival: u64) -> CommitAppend {
    CommitAppend {
        basin: BASIN.into(),
        stream: stream.into(),
        offset: 0,
        len: 100,
        arrival,
        client_timestamps: vec![None; records],
        commands,
        match_seq_num: None,
        fencing_token: None,
        metered_bytes: 10,
        producer: None,
        transaction: None,
    }
}

impl Fixture {
    /// Uploads a segment object and commits one single-record append per stream in it.
    pub async fn commit(&self, n: u128, streams: &[&str]) -> Path {
        let now = self.clock.now_ms();
        let segment_id = ulid::Ulid::from_parts(now, n).0;
        let path = Path::from(shale_proto::segment::object_path(segment_id));
        self.store.put(&path, PutPayload::from_static(b"segment")).await.unwrap();
        let units = streams.iter().map(|s| CommitUnit { appends: vec![append(s, 1, vec![], now)] }).collect();
        let outcomes = self.metadata.commit(CommitRequest { segment_id, units }).await.unwrap();
        assert!(outcomes.iter().all(|o| o.is_ok()), "{outcomes:?}");
        path
    }

    async fn exists(&self, path: &Path) -> bool {
        self.store.head(path).await.is_ok()
    }

    pub async fn first_seq(&self, stream: &str) -> Option<u64> {
        let id = self.metadata.stream(BASIN, stream).await.unwrap().record.id;
        self.metadata.entries_from(id, 0, 1).await.unwrap().first().map(|e| e.first_seq)
    }

    /// A plan call of a compactor taking entries sealed 60 s ago, up to 1 MiB.
    pub async fn plan(&self) -> crate::CompactionPlan {
        self.plan_waiting_for(0).await
    }

    /// The same, from a compactor that waits for `min_bytes` or 600 s (0: no wait).
    pub async fn plan_waiting_for(&self, min_bytes: u64) -> crate::CompactionPlan {
        let call = crate::CatalogCall::PlanCompaction {
            shard: 0,
            shards: 1,
            min_age_ms: 60_000,
            max_bytes: 1 << 20,
            remerge_below: 0,
            min_bytes,
            max_wait_ms: 600_000,
        };
        self.metadata.catalog(call).await.unwrap().into_compaction_plan().unwrap()
    }

    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }
}

use shale_storage::Clock;

#[tokio::test]
async fn retention_expires_appends_and_a_shared_segment_waits_for_its_last_stream() {
    let f = open(&[("short", retained_for(60)), ("kept", StreamConfig::default())]).await;
    let shared = f.commit(1, &["short", "kept"]).await;
    f.advance(30);
    let own = f.commit(2, &["short"]).await;
    f.advance(31);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.segments_released), (1, 0), "{report:?}");
    let record = f.metadata.stream(BASIN, "short").await.unwrap().record;
    assert_eq!(record.trim_point, 1, "reads start at the first retained record");
    assert_eq!(f.first_seq("short").await, Some(1));
    assert_eq!(f.first_seq("kept").await, Some(0), "a stream without retention keeps its records");

    f.advance(30);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.segments_released, report.segments_deleted), (1, 1, 0));
    assert!(f.exists(&own).await, "kept for delete_grace after its last reference went");
    f.advance(30);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.segments_deleted, report.bytes_deleted), (1, 100));
    assert!(!f.exists(&own).await);
    assert!(f.exists(&shared).await, "still referenced by `kept`");

    f.metadata.delete_stream(BASIN, "kept").await.unwrap();
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.streams_purged, report.entries_removed, report.segments_released), (1, 1, 1));
    f.advance(30);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert!(!f.exists(&shared).await, "released by the delete, then deleted");
    let stats = f.metadata.gc_stats();
    assert_eq!(stats.live_segments.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(stats.segments_deleted.load(std::sync::atomic::Ordering::Relaxed), 2);
    f.metadata.close().await.unwrap();
}

#[tokio::test]
async fn a_trim_command_frees_the_entries_below_it_and_nothing_else() {
    let f = open(&[("s", StreamConfig::default())]).await;
    let mut segments = Vec::new();
    for n in 0..3 {
        segments.push(f.commit(n, &["s"]).await);
    }
    // Seq 3 is a trim command record that trims below 2.
    let segment_id = ulid::Ulid::from_parts(f.clock.now_ms(), 9).0;
    let trim = append("s", 1, vec![Command::Trim(2)], f.clock.now_ms());
    let request = CommitRequest { segment_id, units: vec![CommitUnit { appends: vec![trim] }] };
    assert!(f.metadata.commit(request).await.unwrap()[0].is_ok());
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.segments_released), (2, 2));
    assert_eq!(f.first_seq("s").await, Some(2));
    f.advance(31);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert!(!f.exists(&segments[0]).await && !f.exists(&segments[1]).await);
    assert!(f.exists(&segments[2]).await);
    let again = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(again, crate::ReclaimReport::default(), "a second pass finds nothing to do");
    f.metadata.close().await.unwrap();
}

#[tokio::test]
async fn a_basin_delete_frees_every_stream_and_delete_on_empty_deletes_an_expired_stream() {
    let on_empty = StreamConfig {
        retention_policy: Some(RetentionPolicy::Age(10)),
        delete_on_empty: Some(DeleteOnEmpty { min_age_secs: 20 }),
        ..StreamConfig::default()
    };
    let f = open(&[("a", StreamConfig::default()), ("b", StreamConfig::default()), ("gone", on_empty)]).await;
    let both = f.commit(1, &["a", "b"]).await;
    let lone = f.commit(2, &["gone"]).await;
    f.advance(11);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.streams_deleted_on_empty), (1, 0), "expired, not yet min_age");
    f.advance(10);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(report.streams_deleted_on_empty, 1, "{report:?}");
    assert!(f.metadata.stream(BASIN, "gone").await.is_err());

    f.metadata.delete_basin(BASIN).await.unwrap();
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.segments_released), (2, 1), "{report:?}");
    f.advance(31);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert!(!f.exists(&both).await && !f.exists(&lone).await);
    let orphans = f.metadata.collect_orphans(f.store.as_ref()).await.unwrap();
    assert_eq!(orphans.deleted, 0);
    f.metadata.close().await.unwrap();
}

/// A compaction commit swaps a stream's entries only if they are still indexed exactly as
/// planned: a stream trimmed and reclaimed in between keeps its state, the other stream's
/// entries are swapped, the old segments are released and a repeated commit changes nothing.
#[tokio::test]
async fn a_compaction_swap_skips_streams_that_changed_since_the_plan() {
    use crate::CatalogCall;
    let f = open(&[("moved", StreamConfig::default()), ("trimmed", StreamConfig::default())]).await;
    let first = f.commit(1, &["moved", "trimmed"]).await;
    let second = f.commit(2, &["moved", "trimmed"]).await;
    f.advance(61);
    let plan = f.plan().await;
    assert_eq!(plan.runs.len(), 2);
    assert_eq!(plan.pending_bytes, 400);

    // `trimmed` loses its first record between the plan and the commit.
    let segment_id = ulid::Ulid::from_parts(f.clock.now_ms(), 3).0;
    let trim = append("trimmed", 1, vec![Command::Trim(1)], f.clock.now_ms());
    let request = CommitRequest { segment_id, units: vec![CommitUnit { appends: vec![trim] }] };
    assert!(f.metadata.commit(request).await.unwrap()[0].is_ok());
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();

    let compacted = ulid::Ulid::from_parts(f.clock.now_ms(), 4).0;
    let replacements = whole_run_replacements(&plan, compacted);
    let call = CatalogCall::CommitCompaction { segment_id: compacted, replacements };
    let accepted = f.metadata.catalog(call.clone()).await.unwrap().into_compaction_accepted().unwrap();
    assert_eq!(accepted, 1, "only the unchanged stream is swapped");
    let moved_id = f.metadata.stream(BASIN, "moved").await.unwrap().record.id;
    let entries = f.metadata.entries_from(moved_id, 0, 10).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].segment_id, entries[0].record_count), (compacted, 2));
    assert_eq!(f.first_seq("trimmed").await, Some(1), "the trimmed stream keeps its own entries");
    let again = f.metadata.catalog(call).await.unwrap().into_compaction_accepted().unwrap();
    assert_eq!(again, 1, "a repeated commit answers what the first applied and changes nothing");
    assert_eq!(f.metadata.entries_from(moved_id, 0, 10).await.unwrap(), entries);

    // The first segment lost both its blocks (one trimmed, one swapped); the second still
    // holds `trimmed`'s record 1.
    f.advance(31);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert!(!f.exists(&first).await);
    assert!(f.exists(&second).await);
    f.metadata.close().await.unwrap();
}

/// Each run's entries replaced by one entry in object `compacted`.
pub(crate) fn whole_run_replacements(plan: &crate::CompactionPlan, compacted: u128) -> Vec<crate::Replacement> {
    plan.runs
        .iter()
        .map(|run| {
            let (first, last) = (run.entries[0], run.entries[run.entries.len() - 1]);
            let new = crate::IndexEntry {
                segment_id: compacted,
                offset: 0,
                len: 150,
                record_count: u32::try_from(last.end_seq() - first.first_seq).unwrap(),
                last_timestamp: last.last_timestamp,
                ..first
            };
            crate::Replacement {
                stream_id: run.stream_id,
                basin: run.basin.clone(),
                stream: run.stream.clone(),
                old: run.entries.clone(),
                new,
            }
        })
        .collect()
}

/// A compaction swap is read without the writer lock and applied only if no removal was
/// applied meanwhile: a trim's reclaim and a compaction commit both move the count it
/// checks, so a swap read before them is read again rather than applied stale.
#[tokio::test]
async fn removals_invalidate_a_compaction_swap_read_before_them() {
    use crate::CatalogCall;
    let f = open(&[("moved", StreamConfig::default()), ("trimmed", StreamConfig::default())]).await;
    f.commit(1, &["moved", "trimmed"]).await;
    f.commit(2, &["moved", "trimmed"]).await;
    f.advance(61);
    let plan = f.plan().await;
    let compacted = ulid::Ulid::from_parts(f.clock.now_ms(), 4).0;
    let replacements = whole_run_replacements(&plan, compacted);

    let seen = f.metadata.writer.lock().await.removals;
    let stale = f.metadata.prepare_swap(compacted, &replacements).await.unwrap();
    assert_eq!(stale.accepted, 2, "read before the trim, both streams' swaps apply");
    let segment_id = ulid::Ulid::from_parts(f.clock.now_ms(), 3).0;
    let trim = append("trimmed", 1, vec![Command::Trim(1)], f.clock.now_ms());
    let request = CommitRequest { segment_id, units: vec![CommitUnit { appends: vec![trim] }] };
    assert!(f.metadata.commit(request).await.unwrap()[0].is_ok());
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    let after_reclaim = f.metadata.writer.lock().await.removals;
    assert_ne!(after_reclaim, seen, "the reclaim that removed the trimmed entry invalidates the swap read before it");

    let call = CatalogCall::CommitCompaction { segment_id: compacted, replacements };
    let accepted = f.metadata.catalog(call).await.unwrap().into_compaction_accepted().unwrap();
    assert_eq!(accepted, 1, "read again, only the unchanged stream is swapped");
    assert_eq!(f.first_seq("trimmed").await, Some(1));
    assert_ne!(f.metadata.writer.lock().await.removals, after_reclaim, "a compaction commit counts as a removal too");
    f.metadata.close().await.unwrap();
}

/// Retention counts from the append, as S2 does: records whose client set timestamps
/// far in the past (a backfill; `s2 bench` sends elapsed microseconds) are not expired by
/// the next pass, only once the append itself is older than the age.
#[tokio::test]
async fn retention_ages_records_from_their_append_not_their_client_timestamps() {
    let client_prefer = StreamConfig {
        timestamping: Some(crate::TimestampingConfig {
            mode: Some(shale_proto::TimestampingMode::ClientPrefer),
            uncapped: Some(false),
        }),
        ..retained_for(60)
    };
    let f = open(&[("backfill", client_prefer)]).await;
    let now = f.clock.now_ms();
    let segment_id = ulid::Ulid::from_parts(now, 1).0;
    let mut backfill = append("backfill", 3, vec![], now);
    backfill.client_timestamps = vec![Some(1_000), Some(2_000), Some(3_000)];
    let outcomes = f.metadata.commit(CommitRequest { segment_id, units: vec![CommitUnit { appends: vec![backfill] }] });
    assert!(outcomes.await.unwrap().iter().all(|o| o.is_ok()));
    let id = f.metadata.stream(BASIN, "backfill").await.unwrap().record.id;
    let entry = f.metadata.entries_from(id, 0, 1).await.unwrap()[0];
    assert_eq!(entry.last_timestamp, 3_000, "the client's timestamps were kept");

    f.advance(30);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(report.entries_removed, 0, "appended 30 s ago: retained for 60 s");
    assert_eq!(f.first_seq("backfill").await, Some(0));
    f.advance(31);
    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(report.entries_removed, 1, "appended 61 s ago: expired");
    assert_eq!(f.metadata.stream(BASIN, "backfill").await.unwrap().record.trim_point, 3);
    f.metadata.close().await.unwrap();
}

/// A removal is read without the writer lock (the read below takes the lock itself, which
/// would never return if the lock were held around it), and a read that another removal
/// overtook is read again before it is applied.
#[tokio::test]
async fn a_removal_is_read_without_the_writer_lock_and_again_after_a_race() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let f = open(&[]).await;
    let reads = AtomicU64::new(0);
    let read = || async {
        let read = reads.fetch_add(1, Ordering::SeqCst);
        if read == 0 {
            f.metadata.writer.lock().await.removals += 1;
        }
        Ok(read)
    };
    let prepared = tokio::time::timeout(Duration::from_secs(10), f.metadata.prepare_removal(read)).await;
    let (writer, read) = prepared.expect("the read does not wait for the writer lock").unwrap();
    assert_eq!(read, 1, "the first read was overtaken by a removal and read again");
    drop(writer);
    f.metadata.close().await.unwrap();
}

/// Reclaim's pages are read while an append could hold the writer lock: a deleted
/// stream's and an expired stream's pages come out while the test holds it, and an
/// expiry page read under one retention does not apply after the stream changed it.
#[tokio::test]
async fn reclaim_pages_are_read_while_the_writer_lock_is_held() {
    let f = open(&[("deleted", StreamConfig::default()), ("expiring", retained_for(10))]).await;
    f.commit(1, &["deleted", "expiring"]).await;
    f.commit(2, &["deleted", "expiring"]).await;
    let deleted_id = f.metadata.stream(BASIN, "deleted").await.unwrap().record.id;
    f.metadata.delete_stream(BASIN, "deleted").await.unwrap();
    f.advance(11);

    let held = f.metadata.writer.lock().await;
    let within = Duration::from_secs(10);
    let purge = tokio::time::timeout(within, f.metadata.purge_page(deleted_id)).await;
    let purge = purge.expect("read without the lock").unwrap();
    assert_eq!((purge.entries, purge.released, purge.done), (2, 0, true), "the other stream still holds both segments");
    let expiry = tokio::time::timeout(within, f.metadata.expiry_page(BASIN, "expiring")).await;
    let expiry = expiry.expect("read without the lock").unwrap().expect("both appends are past the retention age");
    let read = (expiry.entries, expiry.released, expiry.trim_to, expiry.more);
    assert_eq!(read, (2, 0, 2, false), "the deleted stream's entries still hold both segments");
    drop(held);

    let mut record = f.metadata.stream(BASIN, "expiring").await.unwrap().record;
    assert!(expiry.applies_to(&record));
    record.config.retention_policy = Some(RetentionPolicy::Infinite);
    assert!(!expiry.applies_to(&record), "read under another retention: read again");

    let report = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((report.entries_removed, report.streams_purged, report.segments_released), (4, 1, 2), "{report:?}");
    assert_eq!(f.first_seq("expiring").await, None);
    f.metadata.close().await.unwrap();
}

/// A compacted object that a trim leaves less than half named is offered for rewriting
/// (only the entries still named, of the streams still holding them); once they have
/// moved, the object is released, deleted after its grace, and forgotten by the plan.
#[tokio::test]
async fn a_fragmented_compacted_object_is_planned_for_rewriting_and_then_released() {
    use crate::CatalogCall;
    let f = open(&[("kept", StreamConfig::default()), ("trimmed", StreamConfig::default())]).await;
    f.commit(1, &["kept", "trimmed"]).await;
    f.commit(2, &["trimmed"]).await;
    f.advance(61);
    let plan = f.plan().await;
    let compacted = ulid::Ulid::from_parts(f.clock.now_ms(), 4).0;
    let mut replacements = whole_run_replacements(&plan, compacted);
    for replacement in &mut replacements {
        replacement.new.len = if replacement.stream == "trimmed" { 400 } else { 100 };
    }
    let call = CatalogCall::CommitCompaction { segment_id: compacted, replacements };
    assert_eq!(f.metadata.catalog(call).await.unwrap().into_compaction_accepted().unwrap(), 2);
    let defragment = || async {
        let call = CatalogCall::PlanDefragment { shard: 0, shards: 1, max_bytes: 1 << 20 };
        f.metadata.catalog(call).await.unwrap().into_compaction_plan().unwrap()
    };
    assert!(defragment().await.runs.is_empty(), "a whole object is not fragmented");

    // Trimming `trimmed` leaves 100 of the object's 500 bytes named.
    let segment_id = ulid::Ulid::from_parts(f.clock.now_ms(), 5).0;
    let trim = append("trimmed", 1, vec![Command::Trim(2)], f.clock.now_ms());
    let request = CommitRequest { segment_id, units: vec![CommitUnit { appends: vec![trim] }] };
    assert!(f.metadata.commit(request).await.unwrap()[0].is_ok());
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    let plan = defragment().await;
    let kept_id = f.metadata.stream(BASIN, "kept").await.unwrap().record.id;
    let [run] = plan.runs.as_slice() else { panic!("one run: {plan:?}") };
    assert_eq!((run.stream.as_str(), run.stream_id, run.entries.len()), ("kept", kept_id, 1));
    assert_eq!((run.entries[0].segment_id, plan.pending_bytes), (compacted, 100));

    let rewritten = ulid::Ulid::from_parts(f.clock.now_ms(), 6).0;
    let call =
        CatalogCall::CommitCompaction { segment_id: rewritten, replacements: whole_run_replacements(&plan, rewritten) };
    assert_eq!(f.metadata.catalog(call).await.unwrap().into_compaction_accepted().unwrap(), 1);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    f.advance(31);
    f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert!(f.metadata.db.get(&crate::keys::segment(compacted)).await.unwrap().is_none(), "released");
    let leftovers = f.metadata.db.get(&crate::keys::compacted_stream(compacted, kept_id)).await.unwrap();
    assert!(leftovers.is_none(), "the deleted object's streams are forgotten");
    assert!(defragment().await.runs.is_empty());
    assert_eq!(f.metadata.entries_from(kept_id, 0, 10).await.unwrap()[0].segment_id, rewritten);
    f.metadata.close().await.unwrap();
}

/// Only streams with key compaction on are planned for it, while they have records past
/// their key cursor or a tombstone due; turning it off forgets the stream.
#[tokio::test]
async fn key_compaction_plans_the_streams_with_it_on_and_new_records_or_tombstones_due() {
    use crate::{CatalogCall, KeyCompactionConfig, KeyCursor, StreamPatch};
    let on = KeyCompactionConfig { enabled: Some(true), delete_retention_ms: Some(1_000), min_lag_ms: None };
    let compacted = StreamConfig { key_compaction: Some(on), ..StreamConfig::default() };
    let f = open(&[("changelog", compacted), ("plain", StreamConfig::default())]).await;
    let plan = || async {
        let call = CatalogCall::PlanKeyCompaction { shard: 0, shards: 1 };
        f.metadata.catalog(call).await.unwrap().into_key_compaction_targets().unwrap()
    };
    assert!(plan().await.is_empty(), "nothing written yet");
    f.commit(1, &["changelog", "plain"]).await;
    let targets = plan().await;
    let [target] = targets.as_slice() else { panic!("one target: {targets:?}") };
    assert_eq!((target.stream.as_str(), target.record.next_seq, target.cursor), ("changelog", 1, KeyCursor::default()));

    let id = target.record.id;
    let cursor = KeyCursor { through: 1, tombstones_due_ms: f.clock.now_ms() + 5_000 };
    f.metadata.catalog(CatalogCall::KeyCompacted { stream_id: id, cursor }).await.unwrap().into_done().unwrap();
    assert!(plan().await.is_empty(), "compacted through its tail, no tombstone due");
    f.advance(5);
    assert_eq!(plan().await.len(), 1, "a tombstone fell due");

    let off = StreamPatch {
        key_compaction: Some(KeyCompactionConfig { enabled: Some(false), ..KeyCompactionConfig::default() }),
        ..StreamPatch::default()
    };
    f.metadata.reconfigure_stream(BASIN, "changelog", off).await.unwrap();
    assert!(plan().await.is_empty(), "turned off");
    assert!(f.metadata.db.get(&crate::keys::key_compaction(id)).await.unwrap().is_none(), "its mark is gone");
    f.metadata.close().await.unwrap();
}
