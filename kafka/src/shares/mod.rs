//! Share groups (KIP-932, "queues for Kafka"), as librdkafka's share consumer uses them:
//! members of a share group read the same partitions, and each record goes to one member
//! at a time, locked to it until it acknowledges it or the lock runs out.
//!
//! - `group`: a share group's members and their assignments (every partition of their
//!   topics), held by the group's coordinator; `heartbeat` answers ShareGroupHeartbeat,
//!   `describe` ShareGroupDescribe and DescribeShareGroupOffsets, `offsets`
//!   AlterShareGroupOffsets and DeleteShareGroupOffsets;
//! - `partition`: one share-partition's records in flight, held by the broker that
//!   leads the partition; `fetch` answers ShareFetch and ShareAcknowledge over share
//!   sessions (`sessions`); `table` holds the share-partitions and forgets idle ones.
//!
//! What is done with survives: a share-partition's start offset (every record before it
//! accepted, rejected or given up on) is kept as the tracked consumer named after the
//! group on the partition's stream, written when the group first fetches the partition
//! and before an acknowledgement that moves it is answered. Locks and delivery counts live in memory: a restarted or moved leader hands
//! out again, from the start offset, what was in flight (at least once, as a lock that
//! runs out would).

mod describe;
mod fetch;
mod group;
mod heartbeat;
mod offsets;
mod partition;
mod sessions;
mod table;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use shale_storage::Clock;

use crate::KafkaConfig;

pub use describe::{describe, describe_offsets};
pub use fetch::{acknowledge, fetch};
pub use heartbeat::heartbeat;
pub use offsets::{alter_offsets, delete_offsets};

/// What this broker holds of share groups: the groups it coordinates, the
/// share-partitions it leads, and its members' share sessions.
pub struct Shares {
    clock: Arc<dyn Clock>,
    groups: Mutex<HashMap<String, group::ShareGroup>>,
    partitions: Mutex<table::PartitionTable>,
    sessions: Mutex<sessions::Sessions>,
    /// Topic names by id, as share requests name topics.
    names: Mutex<HashMap<uuid::Uuid, String>>,
    /// Where the next fetch starts among its session's partitions.
    rotation: AtomicUsize,
}

impl Shares {
    /// Share-partitions unused for the consumer session timeout with nothing in flight
    /// are forgotten; at most `max_share_sessions` share sessions are open at once.
    pub fn new(clock: Arc<dyn Clock>, config: &KafkaConfig) -> Self {
        Shares {
            clock,
            groups: Mutex::default(),
            partitions: Mutex::new(table::PartitionTable::new(config.consumer_session_ms())),
            sessions: Mutex::new(sessions::Sessions::new(config.max_share_sessions)),
            names: Mutex::default(),
            rotation: AtomicUsize::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn groups(&self) -> MutexGuard<'_, HashMap<String, group::ShareGroup>> {
        self.groups.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn sessions(&self) -> MutexGuard<'_, sessions::Sessions> {
        self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn next_rotation(&self) -> usize {
        self.rotation.fetch_add(1, Ordering::Relaxed)
    }

    fn names(&self) -> MutexGuard<'_, HashMap<uuid::Uuid, String>> {
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn partitions(&self) -> MutexGuard<'_, table::PartitionTable> {
        self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The share groups, share sessions and share-partitions held in memory.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.groups().len(), self.sessions().len(), self.partitions().len())
    }

    /// The share groups held, each with its state name (members past `session_ms`
    /// dropped first), as ListGroups lists them.
    pub(crate) fn listed(&self, session_ms: u64) -> Vec<(String, &'static str)> {
        let now = self.now();
        let mut groups = self.groups();
        groups
            .iter_mut()
            .map(|(id, group)| {
                group.expire(now, session_ms);
                (id.clone(), describe::state_name(group))
            })
            .collect()
    }

    /// Drops share group `group` when it has no members left within `session_ms`
    /// (DeleteGroups): `Ok(true)` when there was one, `Err(())` when it has members.
    pub(crate) fn delete_group(&self, group: &str, session_ms: u64) -> Result<bool, ()> {
        let now = self.now();
        let mut groups = self.groups();
        let Some(held) = groups.get_mut(group) else { return Ok(false) };
        held.expire(now, session_ms);
        if !held.is_empty() {
            return Err(());
        }
        groups.remove(group);
        Ok(true)
    }

    /// Whether share group `group`, if held here, has members within `session_ms`
    /// (`None` when it is not held).
    pub(crate) fn has_members(&self, group: &str, session_ms: u64) -> Option<bool> {
        let now = self.now();
        let mut groups = self.groups();
        let held = groups.get_mut(group)?;
        held.expire(now, session_ms);
        Some(!held.is_empty())
    }

    /// Whether share group `group` is held here (with members or without): no classic or
    /// consumer-protocol group, nor a commit outside a group, may then use its name, whose
    /// stored positions are its start offsets.
    pub(crate) fn holds(&self, group: &str) -> bool {
        self.groups().contains_key(group)
    }

    /// Forgets share group `group` (another broker coordinates it now): whether it was held.
    pub(crate) fn forget_group(&self, group: &str) -> bool {
        self.groups().remove(group).is_some()
    }

    /// Group `group`'s share-partition on `stream` if one is held here.
    fn held_partition(&self, group: &str, stream: &str) -> Option<table::PartitionSlot> {
        self.partitions().held(group, stream)
    }

    /// Group `group`'s share-partition on `stream`.
    fn partition(&self, group: &str, stream: &str) -> table::PartitionSlot {
        let now = self.now();
        self.partitions().get(group, stream, now)
    }
}

/// When idle sessions or share-partitions were last looked for: at most once per quarter
/// of the idle bound, so the walk over them does not run at every request.
#[derive(Default)]
struct IdleSweep {
    last_ms: u64,
}

impl IdleSweep {
    /// Whether a look at `now_ms` for what has been idle `idle_ms` is due; if so, it is
    /// taken as made.
    fn due(&mut self, now_ms: u64, idle_ms: u64) -> bool {
        if now_ms < self.last_ms.saturating_add(idle_ms / 4) {
            return false;
        }
        self.last_ms = now_ms;
        true
    }
}
