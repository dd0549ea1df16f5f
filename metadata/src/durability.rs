//! Group commit: the durability half of every metadata write.
//!
//! A write is applied under the writer lock (conditions checked against the latest,
//! not yet durable state; the batch handed to SlateDB's memory) and queued here; the
//! lock is then released so the next call can be applied while this one uploads. One
//! task takes everything queued, makes it durable with one WAL flush, then publishes the
//! tails it moved and answers each call, in the order they were applied. Calls queued
//! while a flush is in flight wait for the next one, so one metadata instance writes
//! about one WAL object per store round trip, however many gateways commit.
//!
//! A failed flush halts the instance: every call in that flush gets an `indefinite`
//! error and every call queued after it `unavailable` (not committed); nothing applied
//! after the last durable point is ever answered as done, and the SlateDB writer, closed
//! by the failure, never writes it later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use slatedb::Db;
use tokio::sync::{mpsc, oneshot};

use crate::fence_check::FenceCheck;
use crate::halt::Halt;
use crate::{MetadataError, Result, TailUpdate, TailWatch};

/// Counters of the group-commit pipeline, for `/metrics` and benchmarks.
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Calls applied in memory and queued for durability.
    pub applied: AtomicU64,
    /// Calls made durable (commits and catalog writes).
    pub calls: AtomicU64,
    /// WAL flushes that made them durable.
    pub flushes: AtomicU64,
    /// Segments refused as sealed longer ago than `max_commit_age` (a gateway clock
    /// behind, or a gateway stalled between upload and commit).
    pub refused_too_old: AtomicU64,
    /// Segments refused as stamped more than `max_commit_age` ahead (a gateway clock ahead).
    pub refused_from_future: AtomicU64,
    /// Segments whose stored outcome was looked up before applying them: calls sent
    /// again after a broken stream, and calls without a first-send mark.
    pub outcome_lookups: AtomicU64,
    /// Manifest reads made while committing, looking for a newer writer (`fence_check`).
    pub fence_checks: AtomicU64,
}

impl CommitStats {
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_metadata_applied_calls_total", "Metadata writes applied in memory", &self.applied),
            ("shale_metadata_durable_calls_total", "Metadata writes made durable", &self.calls),
            ("shale_metadata_wal_flushes_total", "WAL flushes that made metadata writes durable", &self.flushes),
            (
                "shale_metadata_segments_refused_too_old_total",
                "Segments refused: sealed past max_commit_age",
                &self.refused_too_old,
            ),
            (
                "shale_metadata_segments_refused_from_future_total",
                "Segments refused: stamped ahead of metadata's clock",
                &self.refused_from_future,
            ),
            (
                "shale_metadata_outcome_lookups_total",
                "Segments looked up for an earlier commit's outcome (resent calls)",
                &self.outcome_lookups,
            ),
            (
                "shale_metadata_fence_checks_total",
                "Manifest reads made while committing, looking for a newer writer",
                &self.fence_checks,
            ),
        ];
        shale_storage::render_counters(&counters, out);
    }
}

/// A call applied in memory, waiting for its WAL flush.
struct Queued {
    tails: Vec<TailUpdate>,
    done: oneshot::Sender<Result<()>>,
}

/// The queue of applied calls. Push under the writer lock, so queue order is apply order.
pub(crate) struct DurabilityQueue {
    queue: mpsc::UnboundedSender<Queued>,
    stats: Arc<CommitStats>,
}

/// Resolves when a queued call is durable (or failed to become durable).
pub(crate) struct Durable(oneshot::Receiver<Result<()>>);

impl Durable {
    pub async fn wait(self) -> Result<()> {
        self.0.await.unwrap_or_else(|_| Err(MetadataError::Indefinite("durability task ended".into())))
    }
}

impl DurabilityQueue {
    pub fn start(
        db: Db,
        fence_check: FenceCheck,
        tails: Arc<TailWatch>,
        halt: Arc<Halt>,
        stats: Arc<CommitStats>,
        min_flush_interval: std::time::Duration,
    ) -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        tokio::spawn(run(db, fence_check, queued, tails, halt, stats.clone(), min_flush_interval));
        Self { queue, stats }
    }

    /// Queues a call whose batch (if any) was just applied; a call that wrote nothing
    /// still waits for the writes applied before it, since it may have read them.
    pub fn push(&self, tails: Vec<TailUpdate>) -> Durable {
        let (done, wait) = oneshot::channel();
        self.stats.applied.fetch_add(1, Ordering::Relaxed);
        if let Err(mpsc::error::SendError(queued)) = self.queue.send(Queued { tails, done }) {
            let _ = queued.done.send(Err(MetadataError::Stopped));
        }
        Durable(wait)
    }
}

async fn run(
    db: Db,
    mut fence_check: FenceCheck,
    mut queued: mpsc::UnboundedReceiver<Queued>,
    tails: Arc<TailWatch>,
    halt: Arc<Halt>,
    stats: Arc<CommitStats>,
    min_flush_interval: std::time::Duration,
) {
    let mut round = Vec::new();
    let mut last_flush: Option<tokio::time::Instant> = None;
    while queued.recv_many(&mut round, usize::MAX).await > 0 {
        // At most one flush per `min_flush_interval`: calls arriving meanwhile join it.
        if let Some(last) = last_flush {
            tokio::time::sleep_until(last + min_flush_interval).await;
        }
        last_flush = (!min_flush_interval.is_zero()).then(tokio::time::Instant::now);
        // Let calls that are already runnable (callers answered by the last round, now
        // applying their next call) join this round: a flush splits what it uploads
        // into one WAL object per round, uploaded one after another.
        tokio::task::yield_now().await;
        while let Ok(call) = queued.try_recv() {
            round.push(call);
        }
        if fence_check.newer_writer_seen() && !halt.is_halted() {
            stop_writing(&db, &halt).await;
        }
        let outcome = match halt.check() {
            Ok(()) => db.flush().await.map_err(|e| failed_flush(&halt, e)),
            Err(_) => Err(halted(&halt)),
        };
        match outcome {
            Ok(()) => {
                fence_check.flushed();
                stats.flushes.fetch_add(1, Ordering::Relaxed);
                stats.calls.fetch_add(round.len() as u64, Ordering::Relaxed);
                let mut moved = Vec::new();
                let mut answers = Vec::with_capacity(round.len());
                for call in round.drain(..) {
                    moved.extend(call.tails);
                    answers.push(call.done);
                }
                if !moved.is_empty() {
                    tails.publish(moved);
                }
                for done in answers {
                    let _ = done.send(Ok(()));
                }
            }
            Err(error) => {
                for call in round.drain(..) {
                    let _ = call.done.send(Err(error.clone()));
                }
            }
        }
    }
}

/// A newer writer opened the database: no more flushes. SlateDB's writer learns it from
/// the manifest and closes as fenced (no flush in flight meanwhile: this task flushes),
/// so nothing applied here is ever written.
async fn stop_writing(db: &Db, halt: &Halt) {
    match db.refresh_manifest().await {
        Err(error) if crate::is_fenced(&error) => {}
        other => tracing::warn!(?other, "SlateDB did not report the newer writer; stopping anyway"),
    }
    halt.fence();
}

/// The answer to calls applied after the instance halted, never durable. Fenced with no
/// failed write before: `fenced`, as every other call of a fenced instance, to be sent to
/// the newer one (no call here was left `indefinite`: each flush was durable or fenced).
/// After a failed write: `unavailable` and not to be resent elsewhere (`stopped` and
/// `fenced` would be), because a call before it may have failed as `indefinite`:
/// resending this one could commit it after that one, out of order.
fn halted(halt: &Halt) -> MetadataError {
    if halt.is_fenced() && !halt.is_stopped() {
        return MetadataError::Fenced;
    }
    MetadataError::Unavailable("metadata halted after a failed write; not committed".into())
}

/// A flush that failed: fenced, or the instance halts (its memory holds writes that
/// may never be durable).
fn failed_flush(halt: &Halt, error: slatedb::Error) -> MetadataError {
    if crate::is_fenced(&error) {
        halt.fence();
        return MetadataError::Fenced;
    }
    halt.stop(&error.to_string());
    MetadataError::Indefinite(format!("durable write failed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_after_a_fence_are_fenced_and_after_a_failed_write_unavailable() {
        let fenced = Halt::default();
        fenced.fence();
        let answer = halted(&fenced);
        assert!(matches!(answer, MetadataError::Fenced), "{answer:?}");

        let failed_then_fenced = Halt::default();
        failed_then_fenced.stop("the WAL write failed");
        failed_then_fenced.fence();
        let answer = halted(&failed_then_fenced);
        assert!(matches!(answer, MetadataError::Unavailable(_)), "an earlier call may be indefinite: {answer:?}");

        let failed = Halt::default();
        failed.stop("the WAL write failed");
        assert!(matches!(halted(&failed), MetadataError::Unavailable(_)));
    }
}
