//! The reclaim agenda and uncompacted marks: passes read only the streams that changed
//! or fall due, and a database written before them is seeded once.

use std::sync::atomic::Ordering;

use shale_proto::Command;
use shale_storage::Clock;
use slatedb::config::DurabilityLevel;

use crate::reclaim_tests::{append, open, retained_for, whole_run_replacements, Fixture};
use crate::{keys, CatalogCall, CommitRequest, CommitUnit, MetadataApi, StreamConfig};

impl Fixture {
    async fn keys_of(&self, prefix: &[u8]) -> usize {
        let page = self.metadata.scan_page(prefix, &[], usize::MAX, DurabilityLevel::Memory, |_, _| Ok(()));
        page.await.unwrap().items.len()
    }
}

/// Of many written streams, a reclaim pass reads only the one whose retention fell due,
/// and once it is reclaimed and compacted no pass or plan reads any of them again.
#[tokio::test]
async fn passes_read_only_the_streams_that_fall_due_and_idle_streams_cost_nothing() {
    let idle: Vec<String> = (0..50).map(|i| format!("idle-{i:02}")).collect();
    let mut streams: Vec<(&str, StreamConfig)> = idle.iter().map(|s| (s.as_str(), StreamConfig::default())).collect();
    streams.push(("expiring", retained_for(60)));
    let f = open(&streams).await;
    let names: Vec<&str> = streams.iter().map(|(name, _)| *name).collect();
    f.commit(1, &names).await;
    assert_eq!(f.keys_of(keys::UNCOMPACTED_PREFIX).await, 51, "every written stream is marked uncompacted");
    assert_eq!(f.keys_of(keys::RECLAIM_AGENDA_PREFIX).await, 1, "only the stream with retention is on the agenda");

    let early = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(early.streams_visited, 0, "nothing is due yet: {early:?}");
    f.advance(61);
    let due = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((due.streams_visited, due.entries_removed), (1, 1), "{due:?}");
    assert_eq!(f.keys_of(keys::RECLAIM_AGENDA_PREFIX).await, 0, "an expired empty stream needs no further visit");
    assert_eq!(f.keys_of(keys::UNCOMPACTED_PREFIX).await, 50, "the emptied stream has nothing left to compact");

    let plan = f.plan().await;
    assert_eq!(plan.runs.len(), 50);
    let compacted = ulid::Ulid::from_parts(f.clock.now_ms(), 9).0;
    let call =
        CatalogCall::CommitCompaction { segment_id: compacted, replacements: whole_run_replacements(&plan, compacted) };
    assert_eq!(f.metadata.catalog(call).await.unwrap().into_compaction_accepted().unwrap(), 50);
    assert_eq!(f.keys_of(keys::UNCOMPACTED_PREFIX).await, 0, "compacted to their tails: unmarked");
    assert!(f.plan().await.runs.is_empty());
    let idle_pass = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(idle_pass.streams_visited, 0, "{idle_pass:?}");

    f.commit(10, &["idle-07"]).await;
    assert_eq!(f.keys_of(keys::UNCOMPACTED_PREFIX).await, 1, "a new append marks its stream again");
    f.metadata.close().await.unwrap();
}

/// Retention is rescheduled from the first remaining append (each expires on time, none
/// early) and a trim is due at once.
#[tokio::test]
async fn retention_is_rescheduled_from_the_first_remaining_append_and_trims_are_due_at_once() {
    let f = open(&[("r", retained_for(60)), ("t", StreamConfig::default())]).await;
    f.commit(1, &["r", "t"]).await;
    f.advance(40);
    f.commit(2, &["r", "t"]).await;
    f.advance(21);
    let first = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!(first.entries_removed, 1, "only the first append expired: {first:?}");
    assert_eq!(f.first_seq("r").await, Some(1));
    f.advance(30);
    let early = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((early.streams_visited, early.entries_removed), (0, 0), "the second expires at 100 s: {early:?}");
    f.advance(10);
    let second = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((second.streams_visited, second.entries_removed), (1, 1), "{second:?}");

    let now = f.clock.now_ms();
    let trim = append("t", 1, vec![Command::Trim(2)], now);
    let request =
        CommitRequest { segment_id: ulid::Ulid::from_parts(now, 3).0, units: vec![CommitUnit { appends: vec![trim] }] };
    assert!(f.metadata.commit(request).await.unwrap()[0].is_ok());
    let trimmed = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((trimmed.streams_visited, trimmed.entries_removed), (1, 2), "{trimmed:?}");
    assert_eq!(f.first_seq("t").await, Some(2));
    f.metadata.close().await.unwrap();
}

/// A database from before the agenda (no `w/`, `u/` or seeded marker) is seeded by its first
/// reclaim pass: its expired records are reclaimed and its streams planned as before.
#[tokio::test]
async fn a_database_without_the_agenda_is_seeded_by_its_first_pass() {
    let f = open(&[("r", retained_for(60)), ("plain", StreamConfig::default())]).await;
    f.commit(1, &["r", "plain"]).await;
    let mut batch = slatedb::WriteBatch::new();
    for prefix in [keys::RECLAIM_AGENDA_PREFIX, keys::UNCOMPACTED_PREFIX] {
        let page = f.metadata.scan_page(prefix, &[], usize::MAX, DurabilityLevel::Memory, |k, _| Ok(k.to_vec()));
        for key in page.await.unwrap().items {
            batch.delete(&key);
        }
    }
    batch.delete(keys::AGENDA_SEEDED);
    let writer = f.metadata.writer.lock().await;
    f.metadata.write_durably(writer, batch).await.unwrap();
    // As a database written before the agenda is opened: nothing known of either family.
    f.metadata.writer.lock().await.scheduled = crate::agenda::Scheduled::new(1000);
    f.metadata.fresh.store(false, std::sync::atomic::Ordering::Relaxed);
    f.advance(61);
    assert!(f.plan().await.runs.is_empty(), "unseeded: the planner sees no marks");
    let pass = f.metadata.reclaim(f.store.as_ref()).await.unwrap();
    assert_eq!((pass.streams_visited, pass.entries_removed), (1, 1), "{pass:?}");
    assert_eq!(f.plan().await.runs.len(), 1, "`plain` is planned again; `r` is empty");
    assert!(f.metadata.db.get(keys::AGENDA_SEEDED).await.unwrap().is_some());
    f.metadata.close().await.unwrap();
}

impl Fixture {
    fn plan_walks(&self) -> (u64, u64) {
        let stats = &self.metadata.gc_stats;
        (stats.plan_walks.load(Ordering::Relaxed), stats.plans_from_last_walk.load(Ordering::Relaxed))
    }
}

/// While too little is uncompacted for the compactor to stop waiting, plans are answered
/// from the last walk; the walk comes back once commits could have added enough, and
/// once the oldest entry seen could have waited its `max_wait`.
#[tokio::test]
async fn a_waiting_compactor_is_answered_without_a_walk_until_enough_could_have_changed() {
    let names: Vec<String> = (0..20).map(|i| format!("s-{i:02}")).collect();
    let streams: Vec<(&str, StreamConfig)> = names.iter().map(|s| (s.as_str(), StreamConfig::default())).collect();
    let f = open(&streams).await;
    let name = |range: std::ops::Range<usize>| names[range].iter().map(String::as_str).collect::<Vec<_>>();
    f.commit(1, &name(0..10)).await; // 10 appends of 100 bytes
    f.advance(61);
    let first = f.plan_waiting_for(1_500).await;
    assert_eq!((first.pending_bytes, first.uncompacted_bytes, first.runs.len()), (1_000, 1_000, 10));
    assert_eq!(f.plan_walks(), (1, 0));

    f.commit(2, &name(10..14)).await; // 1,400 bytes could now be eligible: under 1,500
    f.advance(61);
    let again = f.plan_waiting_for(1_500).await;
    let answered = (again.pending_bytes, again.uncompacted_bytes, again.runs.len());
    assert_eq!(answered, (1_000, 1_400, 0), "the last walk's answer and what was committed since, without runs");
    assert_eq!(f.plan_walks(), (1, 1));
    assert_eq!(f.plan_waiting_for(1_000_000).await.pending_bytes, 1_400, "other settings walk");
    assert_eq!(f.plan_walks(), (2, 1));

    f.commit(3, &name(14..15)).await; // 1,500 could be eligible: walk
    f.advance(61);
    let walked = f.plan_waiting_for(1_500).await;
    assert_eq!((walked.pending_bytes, walked.runs.len()), (1_500, 15));
    assert_eq!(f.plan_walks(), (3, 1));
    assert_eq!(f.plan_waiting_for(1_500).await.runs.len(), 15, "enough was seen: every plan walks");
    assert_eq!(f.plan_walks(), (4, 1));

    // Time alone: the oldest entry seen waited 60 s + 600 s, so the compactor stops waiting.
    assert_eq!(f.plan_waiting_for(1_000_000).await.runs.len(), 15);
    f.advance(300);
    assert!(f.plan_waiting_for(1_000_000).await.runs.is_empty());
    assert_eq!(f.plan_walks(), (5, 2));
    f.advance(180);
    assert_eq!(f.plan_waiting_for(1_000_000).await.runs.len(), 15, "the first appends were sealed 663 s ago");
    assert_eq!(f.plan_walks(), (6, 2));
    f.metadata.close().await.unwrap();
}
