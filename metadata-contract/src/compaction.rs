//! What compaction asks metadata for and hands back: the runs of index entries a
//! compactor rewrites ([`CompactionPlan`]), the streams key compaction may be due in
//! ([`KeyCompactionTarget`], [`KeyCursor`]) and the entries that replace old ones
//! ([`Replacement`]).

use crate::IndexEntry;

/// A stream's consecutive index entries for a compactor to rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionRun {
    pub basin: String,
    pub stream: String,
    pub stream_id: u64,
    pub entries: Vec<IndexEntry>,
}

/// The runs of one compaction, in stream key order, and how much is waiting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionPlan {
    pub runs: Vec<CompactionRun>,
    /// Eligible bytes in the shard, whether or not `runs` hold them all.
    pub pending_bytes: u64,
    /// When the oldest eligible entry's segment was sealed (ms; 0: nothing eligible).
    pub oldest_sealed_ms: u64,
    /// Bytes of every uncompacted entry in the shard, eligible or not yet (at most: a plan
    /// answered from the last walk adds every byte committed since).
    pub uncompacted_bytes: u64,
}

/// How far key compaction went in a stream: its records below `through` were compacted
/// by key, and `tombstones_due_ms` (0: none) is when the first tombstone it kept may go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCursor {
    pub through: u64,
    pub tombstones_due_ms: u64,
}

/// A stream with key compaction on whose compaction may be due: records past its cursor
/// or tombstones due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyCompactionTarget {
    pub basin: String,
    pub stream: String,
    pub record: crate::StreamRecord,
    pub cursor: KeyCursor,
}

/// Old entries of one stream and the one entry that replaces them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    pub stream_id: u64,
    /// The stream's basin and name, which metadata keeps beside the compacted object so
    /// that a later rewrite of the object (`PlanDefragment`) names its streams.
    pub basin: String,
    pub stream: String,
    pub old: Vec<IndexEntry>,
    pub new: IndexEntry,
}
