//! Seeing a newer instance while writing.
//!
//! Opening the database fences the previous writer by placing an empty WAL object at
//! the next free WAL id, trying the id after it each time the previous writer got there
//! first, with a manifest read per try. A previous writer that keeps committing uploads a
//! WAL object per store round trip and so wins that race for as long as it keeps going;
//! until it reads the manifest (SlateDB's poll, every `db_poll_interval`) it does not know
//! it was fenced, and the newer instance does not finish opening.
//!
//! So while commits come, the durability task reads the latest manifest in the
//! background (a LIST and a GET). When it names a newer writer epoch, the next round is
//! not flushed: its calls are answered `fenced` (never written), SlateDB's writer is
//! closed as fenced, and the newer instance's tries, no longer overtaken, reach a free id.
//! The read runs beside the flush in flight, which ends as it would have (durable, or
//! fenced by the newer instance's WAL object), so every answer stays true; closing SlateDB
//! under a flush in flight could fail a WAL object that was in fact written.
//!
//! A read is due after [`FLUSHES_PER_CHECK`] WAL flushes and [`MIN_CHECK_INTERVAL`] since
//! the last one, so when it stops a writer is at most that many flushes (or a second's
//! worth, if more) ahead of the newer instance, which walks past them at one try each: a
//! few seconds at S3's latency. A writer committing back to back reads about once a
//! second, two requests beside dozens of WAL PUTs; a slower one at most once per 32 WAL
//! PUTs. An idle instance writes no WAL objects, wins no race and reads nothing here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use slatedb::admin::Admin;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::CommitStats;

/// WAL flushes between two manifest reads, at least.
pub(crate) const FLUSHES_PER_CHECK: u64 = 32;

/// Time between two manifest reads, at least.
pub(crate) const MIN_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Kept by the durability task; told of each durable flush.
pub(crate) struct FenceCheck {
    admin: Arc<Admin>,
    /// This instance's writer epoch.
    epoch: u64,
    newer_seen: Arc<AtomicBool>,
    stats: Arc<CommitStats>,
    flushes_since: u64,
    last: Instant,
    running: Option<JoinHandle<()>>,
}

impl FenceCheck {
    pub fn new(admin: Admin, epoch: u64, stats: Arc<CommitStats>) -> Self {
        Self {
            admin: Arc::new(admin),
            epoch,
            newer_seen: Arc::new(AtomicBool::new(false)),
            stats,
            flushes_since: 0,
            last: Instant::now(),
            running: None,
        }
    }

    /// Whether a manifest read found a newer writer epoch.
    pub fn newer_writer_seen(&self) -> bool {
        self.newer_seen.load(Ordering::SeqCst)
    }

    /// Counts a durable flush; starts a manifest read in the background when one is due
    /// and none is under way.
    pub fn flushed(&mut self) {
        self.flushes_since += 1;
        let now = Instant::now();
        if self.flushes_since < FLUSHES_PER_CHECK || now < self.last + MIN_CHECK_INTERVAL {
            return;
        }
        if self.running.as_ref().is_some_and(|check| !check.is_finished()) {
            return;
        }
        self.flushes_since = 0;
        self.last = now;
        let (admin, epoch, newer_seen) = (self.admin.clone(), self.epoch, self.newer_seen.clone());
        let stats = self.stats.clone();
        self.running = Some(tokio::spawn(async move {
            match admin.read_manifest(None).await {
                Ok(Some(latest)) if latest.writer_epoch() > epoch => {
                    tracing::warn!(epoch, newer = latest.writer_epoch(), "a newer metadata writer opened the database");
                    newer_seen.store(true, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "reading the metadata manifest for a newer writer failed"),
            }
            stats.fence_checks.fetch_add(1, Ordering::SeqCst);
        }));
    }
}
