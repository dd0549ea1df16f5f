//! The share-partitions a broker leads, by group and stream, and when each is forgotten.
//!
//! A share-partition with nothing in flight holds only its start offset, which is stored
//! on its stream each time it moves (see the parent module). So one that no request has
//! used for the idle bound and that nothing holds is dropped: the next fetch finds the
//! stored start offset again, as after a restart. Without this, every group that ever
//! fetched a partition, and every partition of a deleted topic, stayed in memory.
//! Idle share-partitions are looked for at most once per quarter of the bound, at a
//! request for any share-partition.

use std::collections::HashMap;
use std::sync::Arc;

use super::partition::SharePartition;

/// A share-partition: `None` until its first fetch finds its start offset.
pub type PartitionSlot = Arc<tokio::sync::Mutex<Option<SharePartition>>>;

struct Entry {
    slot: PartitionSlot,
    /// When a request last asked for it, in the clock's milliseconds.
    used_ms: u64,
}

/// Share-partitions by group and stream.
pub struct PartitionTable {
    entries: HashMap<(String, String), Entry>,
    /// How long one must go unused before it may be forgotten.
    idle_ms: u64,
    idle_sweep: super::IdleSweep,
}

impl PartitionTable {
    pub fn new(idle_ms: u64) -> Self {
        PartitionTable { entries: HashMap::new(), idle_ms, idle_sweep: super::IdleSweep::default() }
    }

    /// How many share-partitions are held in memory (idle ones not yet forgotten included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Group `group`'s share-partition on `stream`, asked for at `now_ms`.
    pub fn get(&mut self, group: &str, stream: &str, now_ms: u64) -> PartitionSlot {
        self.forget_idle(now_ms);
        let entry = self
            .entries
            .entry((group.to_string(), stream.to_string()))
            .or_insert_with(|| Entry { slot: PartitionSlot::default(), used_ms: now_ms });
        entry.used_ms = now_ms;
        entry.slot.clone()
    }

    /// Group `group`'s share-partition on `stream` if one is held here (none is made).
    pub fn held(&self, group: &str, stream: &str) -> Option<PartitionSlot> {
        self.entries.get(&(group.to_string(), stream.to_string())).map(|entry| entry.slot.clone())
    }

    fn forget_idle(&mut self, now_ms: u64) {
        let idle_ms = self.idle_ms;
        if !self.idle_sweep.due(now_ms, idle_ms) {
            return;
        }
        self.entries.retain(|_, entry| !forgettable(entry, now_ms, idle_ms));
    }
}

/// Unused for `idle_ms`, held by no request (the table's lock is held, so none can take
/// it meanwhile) and with nothing in flight.
fn forgettable(entry: &Entry, now_ms: u64, idle_ms: u64) -> bool {
    if now_ms.saturating_sub(entry.used_ms) < idle_ms || Arc::strong_count(&entry.slot) > 1 {
        return false;
    }
    match entry.slot.try_lock() {
        Ok(state) => state.as_ref().is_none_or(SharePartition::nothing_in_flight),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: u64 = 1_000;

    #[tokio::test]
    async fn an_idle_share_partition_with_nothing_in_flight_is_forgotten() {
        let mut table = PartitionTable::new(IDLE);
        *table.get("g", "done", 0).lock().await = Some(SharePartition::starting_at(7));
        let busy = table.get("g", "busy", 0);
        busy.lock().await.insert(SharePartition::starting_at(0)).acquire("m", &[0, 1], 10, 60_000);
        drop(busy);
        let held = table.get("g", "held", 0);

        table.get("x", "probe", IDLE - 1);
        assert_eq!(table.len(), 4, "nothing is idle for the bound yet");
        table.get("x", "probe", 2 * IDLE);
        assert_eq!(table.len(), 3, "only the done one goes; records in flight and a request's hold keep theirs");
        assert!(table.get("g", "busy", 2 * IDLE).lock().await.as_ref().is_some_and(|s| !s.nothing_in_flight()));
        assert!(Arc::ptr_eq(&table.get("g", "held", 2 * IDLE), &held), "the same share-partition");
        assert!(table.get("g", "done", 2 * IDLE).lock().await.is_none(), "found again from the stored start");
    }

    #[test]
    fn held_finds_only_what_was_asked_for_and_makes_nothing() {
        let mut table = PartitionTable::new(IDLE);
        assert!(table.held("g", "s").is_none());
        assert_eq!(table.len(), 0, "looking makes no share-partition");
        let slot = table.get("g", "s", 0);
        assert!(table.held("g", "s").is_some_and(|held| Arc::ptr_eq(&held, &slot)));
        assert!(table.held("other", "s").is_none());
    }

    #[tokio::test]
    async fn idle_ones_are_looked_for_at_most_once_per_quarter_of_the_bound() {
        let mut table = PartitionTable::new(IDLE);
        table.get("g", "a", 0);
        table.get("g", "b", IDLE - 1);
        table.get("g", "b", IDLE + IDLE / 4 - 2);
        assert_eq!(table.len(), 2, "idle, but within a quarter of the bound of the last look");
        table.get("g", "b", IDLE + IDLE / 4 - 1);
        assert_eq!(table.len(), 1);
    }
}
