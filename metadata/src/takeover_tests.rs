//! A newer instance taking over from one that keeps committing.

use std::sync::Arc;
use std::time::Duration;

use shale_storage::object_store::memory::InMemory;
use shale_storage::object_store::ObjectStore;
use shale_storage::{DelayedStore, ManualClock};

use crate::{BasinConfig, CommitRequest, CommitUnit, Metadata, MetadataApi, MetadataConfig, StreamConfig};

const T0: u64 = 1_800_000_000_000;

/// The `n`th segment: one single-record append to `s`.
fn commit(n: u64) -> CommitRequest {
    let append = crate::reclaim_tests::append("s", 1, Vec::new(), T0);
    CommitRequest {
        segment_id: ulid::Ulid::from_parts(T0, n.into()).0,
        units: vec![CommitUnit { appends: vec![append] }],
    }
}

/// Both instances see the store at 10 ms a request, so the busy writer uploads a WAL
/// object every 10 ms while each of the newer one's tries at the next WAL id takes three
/// requests. SlateDB's own manifest poll (`db_poll_interval`, 120 s) would leave the
/// newer instance opening for two minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_instance_opens_promptly_while_the_old_one_keeps_committing() {
    let store: Arc<dyn ObjectStore> = Arc::new(DelayedStore::new(Arc::new(InMemory::new()), Duration::from_millis(10)));
    let clock = Arc::new(ManualClock::new(T0));
    let config = MetadataConfig::default();
    let old = Arc::new(Metadata::open_with(store.clone(), "metadata", clock.clone(), &config).await.unwrap());
    old.create_basin("basin-one", BasinConfig::default()).await.unwrap();
    old.create_stream("basin-one", "s", StreamConfig::default()).await.unwrap();
    // Commits one after another until one fails; counts the acknowledged ones.
    let (committed, mut acked) = tokio::sync::watch::channel(0u64);
    let writer = tokio::spawn({
        let old = old.clone();
        async move {
            for n in 1.. {
                match old.commit(commit(n)).await {
                    Ok(outcomes) if outcomes.iter().all(Result::is_ok) => committed.send_modify(|count| *count += 1),
                    _ => return,
                }
            }
        }
    });
    acked.wait_for(|count| *count >= 20).await.unwrap();

    let started = tokio::time::Instant::now();
    let newer = tokio::time::timeout(
        Duration::from_secs(40),
        Metadata::open_with(store.clone(), "metadata", clock.clone(), &config),
    )
    .await
    .expect("the newer instance opens long before SlateDB's own manifest poll")
    .unwrap();
    let opened_after = started.elapsed();
    println!("the newer instance opened after {opened_after:?}");
    assert!(old.is_fenced(), "the old instance stopped writing before the newer one opened");
    writer.await.unwrap();
    // Exactly the commits the old instance acknowledged are in the newer one: its last
    // flush ended as it would have, and what it applied after that was never written.
    let acked = *acked.borrow();
    let tail = newer.stream("basin-one", "s").await.unwrap().record.next_seq;
    assert_eq!(tail, acked, "opened after {opened_after:?}");
    newer.close().await.unwrap();
}

/// The manifest reads of a writer that keeps committing find its own epoch: it is never
/// stopped by them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sole_writer_keeps_committing_past_its_own_manifest_reads() {
    let metadata = crate::reclaim_tests::open(&[("s", StreamConfig::default())]).await.metadata;
    let checks = || metadata.commit_stats().fence_checks.load(std::sync::atomic::Ordering::SeqCst);
    let mut committed = 0;
    tokio::time::timeout(Duration::from_secs(30), async {
        // Until two reads have finished, then once more: the round after a read.
        while checks() < 2 {
            committed += 1;
            let outcomes = metadata.commit(commit(committed)).await.unwrap();
            assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        }
    })
    .await
    .expect("a writer committing back to back reads the manifest about once a second");
    committed += 1;
    let outcomes = metadata.commit(commit(committed)).await.unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(!metadata.is_halted());
    assert_eq!(metadata.stream("basin-one", "s").await.unwrap().record.next_seq, committed);
    metadata.close().await.unwrap();
}
