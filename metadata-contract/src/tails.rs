//! Tail notifications: who waits for which stream, and the feed of new tails.
//!
//! A waiting read subscribes to its own stream only, so a commit wakes the reads of the
//! streams it touched, not every waiting read. The same feed crosses the process
//! boundary as the `Watch` stream of `shale.metadata.v1`.
//!
//! The index entries each update carries are kept a while ([`TailWatch::entries_from`]):
//! a live read wakes to find the entries of the records it was woken for here, in
//! memory, instead of scanning the index for them (one scan per commit per follower
//! otherwise). They are durable and their objects immutable. An entry leaves when the
//! process that removes it from the index (compaction, trim, retention) does so, and,
//! where the index lives in another process, when a reader finds its object gone
//! ([`TailWatch::forget_entry`]); the next lookup then asks the index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};

use crate::{IndexEntry, Position};

/// A stream's new tail after a durable commit, and the index entries that moved it, so
/// a live read follows the stream without asking metadata again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailUpdate {
    pub basin: String,
    pub stream: String,
    pub stream_id: u64,
    pub tail: Position,
    pub entries: Vec<IndexEntry>,
}

/// Commits buffered for a slow feed subscriber before it is told it lagged.
const FEED_CAPACITY: usize = 1024;

/// Index entries kept for live reads (about 100 bytes each, a little over twice that
/// with the cache's own): a live read looks for entries published moments ago, so the
/// newest [`RECENT_ENTRIES`] of the last [`RECENT_FOR`] are enough, and a process's
/// memory does not grow with how many streams were written lately.
const RECENT_ENTRIES: u64 = 100_000;
const RECENT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Per-stream wake-ups for local waiters, the feed of every commit's tails, and the
/// index entries of the latest commits.
pub struct TailWatch {
    waiters: Mutex<Waiters>,
    feed: broadcast::Sender<Arc<Vec<TailUpdate>>>,
    /// `(stream id, first seq)` -> the entry a tail update carried.
    recent: moka::sync::Cache<(u64, u64), IndexEntry>,
}

#[derive(Default)]
struct Waiters {
    /// The last tail published for the stream; `None` after updates may have been missed.
    by_stream: HashMap<(String, String), watch::Sender<Option<Position>>>,
    /// Entries nobody waits on are swept when the map reaches this size, so sweeping
    /// costs O(1) per subscription, amortised.
    sweep_at: usize,
}

impl Default for TailWatch {
    fn default() -> Self {
        Self {
            waiters: Mutex::new(Waiters::default()),
            feed: broadcast::Sender::new(FEED_CAPACITY),
            recent: moka::sync::Cache::builder().max_capacity(RECENT_ENTRIES).time_to_live(RECENT_FOR).build(),
        }
    }
}

impl TailWatch {
    /// A receiver that changes when the stream's tail moves, to the new tail, or to
    /// `None` when updates may have been missed (look the tail up then). Subscribe before
    /// looking at the tail, then wait on it.
    pub fn subscribe(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        let mut waiters = self.lock();
        let key = (basin.to_string(), stream.to_string());
        if let Some(sender) = waiters.by_stream.get(&key) {
            return sender.subscribe();
        }
        if waiters.by_stream.len() >= waiters.sweep_at {
            waiters.by_stream.retain(|_, sender| sender.receiver_count() > 0);
            waiters.sweep_at = (2 * waiters.by_stream.len()).max(64);
        }
        let (sender, receiver) = watch::channel(None);
        waiters.by_stream.insert(key, sender);
        receiver
    }

    /// Wakes the waiters of every stream in `updates` and passes them to feed subscribers.
    pub fn publish(&self, updates: Vec<TailUpdate>) {
        self.notify(&updates);
        let _ = self.feed.send(Arc::new(updates));
    }

    /// Keeps the entries of `updates`, then wakes the waiters of their streams (updates
    /// that came from elsewhere): a woken read finds its entries.
    pub fn notify(&self, updates: &[TailUpdate]) {
        for update in updates {
            for entry in &update.entries {
                self.recent.insert((update.stream_id, entry.first_seq), *entry);
            }
        }
        let waiters = self.lock();
        for update in updates {
            if let Some(sender) = waiters.by_stream.get(&(update.basin.clone(), update.stream.clone())) {
                sender.send_replace(Some(update.tail));
            }
        }
    }

    /// Wakes every waiter: updates may have been missed (a reconnect, a lagging feed).
    pub fn wake_all(&self) {
        for sender in self.lock().by_stream.values() {
            sender.send_replace(None);
        }
    }

    /// Up to `limit` consecutive entries of a stream from the one starting at `seq`, as
    /// tail updates carried them: none when that one is not kept.
    pub fn entries_from(&self, stream_id: u64, mut seq: u64, limit: usize) -> Vec<IndexEntry> {
        let mut entries = Vec::new();
        while entries.len() < limit {
            let Some(entry) = self.recent.get(&(stream_id, seq)) else { break };
            let next = entry.end_seq();
            entries.push(entry);
            if next <= seq {
                break; // an entry that does not move the sequence on ends the chain
            }
            seq = next;
        }
        entries
    }

    /// Drops the kept entry starting at `first_seq`: a reader found its object gone.
    pub fn forget_entry(&self, stream_id: u64, first_seq: u64) {
        self.recent.invalidate(&(stream_id, first_seq));
    }

    /// Every commit's tail updates from now on.
    pub fn feed(&self) -> broadcast::Receiver<Arc<Vec<TailUpdate>>> {
        self.feed.subscribe()
    }

    /// Streams someone waits on now.
    #[cfg(test)]
    fn waited_streams(&self) -> usize {
        self.lock().by_stream.values().filter(|sender| sender.receiver_count() > 0).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(stream: &str, next_seq: u64) -> TailUpdate {
        TailUpdate {
            basin: "b".into(),
            stream: stream.into(),
            stream_id: 1,
            tail: Position { seq_num: next_seq, timestamp: 9 },
            entries: Vec::new(),
        }
    }

    #[test]
    fn a_commit_wakes_only_the_waiters_of_its_streams() {
        let tails = TailWatch::default();
        let mut a = tails.subscribe("b", "a");
        let other = tails.subscribe("b", "other");
        let mut feed = tails.feed();
        tails.publish(vec![update("a", 3)]);
        assert!(a.has_changed().unwrap());
        assert_eq!(*a.borrow_and_update(), Some(Position { seq_num: 3, timestamp: 9 }));
        assert!(!other.has_changed().unwrap());
        assert_eq!(feed.try_recv().unwrap().as_slice(), &[update("a", 3)]);
        tails.wake_all();
        assert!(other.has_changed().unwrap());
        assert_eq!(*a.borrow_and_update(), None, "a missed update leaves the tail unknown");
    }

    fn entry(first_seq: u64, record_count: u32) -> IndexEntry {
        IndexEntry {
            segment_id: 7,
            offset: 0,
            len: 10,
            first_seq,
            record_count,
            first_timestamp: 1,
            last_timestamp: 1,
            timestamp_floor: 0,
            timestamp_policy: shale_proto::TimestampPolicy::default(),
            arrival_cap: None,
            metered_end: None,
        }
    }

    #[test]
    fn a_woken_read_finds_the_entries_that_moved_its_tail() {
        let tails = TailWatch::default();
        let waiting = tails.subscribe("b", "a");
        let moved = TailUpdate { entries: vec![entry(0, 2), entry(2, 3)], ..update("a", 5) };
        tails.publish(vec![moved, TailUpdate { entries: vec![entry(5, 1)], ..update("a", 6) }]);
        assert!(waiting.has_changed().unwrap());
        assert_eq!(tails.entries_from(1, 0, 10), vec![entry(0, 2), entry(2, 3), entry(5, 1)], "chained across updates");
        assert_eq!(tails.entries_from(1, 2, 1), vec![entry(2, 3)], "from the one starting there, to the limit");
        assert!(tails.entries_from(1, 1, 10).is_empty(), "no kept entry starts inside another");
        assert!(tails.entries_from(2, 0, 10).is_empty(), "another stream id");
        tails.forget_entry(1, 2);
        assert_eq!(tails.entries_from(1, 0, 10), vec![entry(0, 2)], "the chain stops where an entry was dropped");
        // An entry that does not move the sequence on is returned once, not up to the limit.
        tails.notify(&[TailUpdate { entries: vec![entry(9, 0)], ..update("a", 9) }]);
        assert_eq!(tails.entries_from(1, 9, 1000), vec![entry(9, 0)]);
    }

    #[test]
    fn streams_nobody_waits_on_are_forgotten() {
        let tails = TailWatch::default();
        for i in 0..1000 {
            drop(tails.subscribe("b", &format!("gone-{i}")));
        }
        let _kept = tails.subscribe("b", "kept");
        assert_eq!(tails.waited_streams(), 1);
        assert!(tails.lock().by_stream.len() <= 128, "dead entries are swept: {}", tails.lock().by_stream.len());
    }
}
