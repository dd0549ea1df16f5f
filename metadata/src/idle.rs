//! Flushing an idle database's memtable: SlateDB writes its memtable to a level-0 SST
//! only once `l0_sst_size_bytes` have accumulated, and until then every WAL object
//! written since the last one must be kept (a restart replays them). A quiet database
//! would keep them, and the uncompacted copies they hold, forever. After a reclaim pass
//! in which nothing was written since the previous one, what the memtable holds is
//! flushed once, so SlateDB's collector and compactor can do the rest.

use std::sync::atomic::{AtomicU64, Ordering};

use slatedb::config::{FlushOptions, FlushType};

use crate::{Metadata, Result};

/// Write counts seen by the idle check.
#[derive(Debug, Default)]
pub(crate) struct IdleFlush {
    /// Batches applied since open.
    pub applied: AtomicU64,
    /// `applied` at the previous check.
    seen: AtomicU64,
    /// `applied` at the last flush.
    flushed: AtomicU64,
}

impl IdleFlush {
    /// Whether nothing was applied since the previous check and something since the last
    /// flush; remembers this check.
    fn due(&self) -> bool {
        let applied = self.applied.load(Ordering::Relaxed);
        let quiet = self.seen.swap(applied, Ordering::Relaxed) == applied;
        quiet && self.flushed.load(Ordering::Relaxed) != applied
    }
}

impl Metadata {
    /// Flushes the memtable when the database was idle since the previous call (see the
    /// module docs); returns whether it did.
    pub(crate) async fn flush_if_idle(&self) -> Result<bool> {
        if !self.config.flush_when_idle || !self.idle.due() {
            return Ok(false);
        }
        let applied = self.idle.applied.load(Ordering::Relaxed);
        let options = FlushOptions { flush_type: FlushType::MemTable };
        self.db.flush_with_options(options).await.map_err(|e| self.storage_error(e))?;
        self.idle.flushed.store(applied, Ordering::Relaxed);
        tracing::debug!(applied, "idle metadata memtable flushed");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_after_a_quiet_interval_that_followed_writes() {
        let idle = IdleFlush::default();
        assert!(!idle.due(), "nothing ever written");
        idle.applied.fetch_add(3, Ordering::Relaxed);
        assert!(!idle.due(), "written since the previous check");
        assert!(idle.due(), "quiet since, with writes not flushed");
        idle.flushed.store(3, Ordering::Relaxed);
        assert!(!idle.due(), "flushed already");
        idle.applied.fetch_add(1, Ordering::Relaxed);
        assert!(!idle.due());
        assert!(idle.due());
    }
}
