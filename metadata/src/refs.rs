//! Reference accounting of segment objects.
//!
//! `o/<segment>` holds [`SegmentRefs`]: how many of the segment's blocks an index entry
//! still names, their bytes, and the bytes its commit made visible. A commit writes it
//! once per segment; whatever removes index entries (trim, retention, deletes,
//! compaction) decrements it in the same write batch, applied under the writer lock with
//! no other removal since its reads, so the count is exact. When the last block goes,
//! `o/` is replaced by `z/<segment>` ([`Released`]): nothing can reference the object
//! again, and it is deleted after `delete_grace`, which gives reads that looked its
//! entries up just before time to finish.

use std::collections::HashMap;

use slatedb::config::ReadOptions;
use slatedb::WriteBatch;

use crate::{keys, IndexEntry, Metadata, MetadataError, Result, WriterState};

/// The live part of one committed segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SegmentRefs {
    /// Blocks an index entry names.
    pub blocks: u64,
    /// Bytes of those blocks.
    pub live_bytes: u64,
    /// Bytes of every block the commit made visible: what deleting the object frees.
    pub committed_bytes: u64,
    /// Written by compaction (sorted by stream): once fragmented, rewritten by
    /// `defragment`. A gateway's segment needs no such rewrite: compaction moves every
    /// entry out of it.
    pub compacted: bool,
}

impl SegmentRefs {
    pub fn committed<'a>(entries: impl Iterator<Item = &'a IndexEntry>) -> Self {
        Self::of_blocks(entries.map(|entry| entry.len))
    }

    /// A commit's references to blocks of `lens` bytes each (index entries' blocks, and
    /// blocks staged in open transactions).
    pub fn of_blocks(lens: impl Iterator<Item = u32>) -> Self {
        let (blocks, bytes) = lens.fold((0, 0), |(blocks, bytes), len| (blocks + 1, bytes + u64::from(len)));
        Self { blocks, live_bytes: bytes, committed_bytes: bytes, compacted: false }
    }

    /// Less than half of what the commit made visible is still named.
    pub fn fragmented(&self) -> bool {
        self.blocks > 0 && self.live_bytes.saturating_mul(2) < self.committed_bytes
    }

    /// 24 bytes, and a 25th (1) for a compacted object.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(25);
        out.extend_from_slice(&self.blocks.to_be_bytes());
        out.extend_from_slice(&self.live_bytes.to_be_bytes());
        out.extend_from_slice(&self.committed_bytes.to_be_bytes());
        if self.compacted {
            out.push(1);
        }
        out
    }

    /// Values written before byte accounting hold only the block count (8 bytes).
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self> {
        let word = |n: usize| value.get(n * 8..n * 8 + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        match (value.len(), word(0), word(1), word(2)) {
            (8, Some(blocks), _, _) => Ok(Self { blocks, live_bytes: 0, committed_bytes: 0, compacted: false }),
            (24 | 25, Some(blocks), Some(live_bytes), Some(committed_bytes)) => {
                Ok(Self { blocks, live_bytes, committed_bytes, compacted: value.get(24) == Some(&1) })
            }
            _ => Err(corrupt(key, "expected 8, 24 or 25 bytes of segment references")),
        }
    }
}

/// A segment no index entry names any more: when that happened and what deleting it frees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Released {
    pub at_ms: u64,
    pub bytes: u64,
}

impl Released {
    pub fn encode(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.at_ms.to_be_bytes());
        out[8..].copy_from_slice(&self.bytes.to_be_bytes());
        out
    }

    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self> {
        let at_ms = value.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        let bytes = value.get(8..16).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        match (value.len(), at_ms, bytes) {
            (16, Some(at_ms), Some(bytes)) => Ok(Self { at_ms, bytes }),
            _ => Err(corrupt(key, "expected 16 bytes of a released segment")),
        }
    }
}

/// Index entries being removed, summed per segment.
#[derive(Debug, Default)]
pub(crate) struct Releases {
    by_segment: HashMap<u128, (u64, u64)>,
    pub entries: u64,
}

impl Releases {
    pub fn add(&mut self, entry: &IndexEntry) {
        self.add_block(entry.segment_id, entry.len);
    }

    /// A block of `len` bytes of `segment_id` (an index entry's, or a staged append's).
    pub fn add_block(&mut self, segment_id: u128, len: u32) {
        let slot = self.by_segment.entry(segment_id).or_default();
        slot.0 += 1;
        slot.1 += u64::from(len);
        self.entries += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}

impl Metadata {
    /// Adds to `batch` the removal of `entry` of stream `stream_id` from both index
    /// families, and counts it in `releases`. Live reads stop finding it among the
    /// entries the tail updates carried (a lookup meanwhile still finds it indexed).
    pub(crate) fn remove_entry(
        &self,
        batch: &mut WriteBatch,
        releases: &mut Releases,
        stream_id: u64,
        entry: &IndexEntry,
    ) {
        self.tails.forget_entry(stream_id, entry.first_seq);
        batch.delete(keys::index(stream_id, entry.last_seq()));
        batch.delete(keys::by_time(stream_id, entry.last_timestamp, entry.last_seq()));
        releases.add(entry);
    }

    /// What `prepare` builds from the latest state, with the writer lock held and no
    /// removal applied since it read: apply it, counting it (`WriterState::removals`),
    /// before releasing the lock. A removal reads many keys (its index entries, the
    /// references it decrements); appends, which need the lock, only add entries and
    /// references, so `prepare` reads without the lock and its reads still hold unless
    /// another removal moved the count meanwhile, in which case it reads again. After
    /// `OPTIMISTIC_TRIES` such races it reads under the lock.
    pub(crate) async fn prepare_removal<T, F>(
        &self,
        prepare: impl Fn() -> F,
    ) -> Result<(tokio::sync::MutexGuard<'_, WriterState>, T)>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        const OPTIMISTIC_TRIES: usize = 3;
        for _ in 0..OPTIMISTIC_TRIES {
            let removals = self.writer.lock().await.removals;
            let prepared = prepare().await?;
            let writer = self.writer.lock().await;
            if writer.removals == removals {
                return Ok((writer, prepared));
            }
            tracing::debug!("a removal was applied while another was read: reading again");
        }
        let writer = self.writer.lock().await;
        let prepared = prepare().await?;
        Ok((writer, prepared))
    }

    /// The segment's references (`o/`), read with `options`; `None` once released or
    /// never committed.
    pub(crate) async fn segment_refs(&self, segment_id: u128, options: &ReadOptions) -> Result<Option<SegmentRefs>> {
        let key = keys::segment(segment_id);
        let value = self.db.get_with_options(&key, options).await.map_err(|e| self.storage_error(e))?;
        value.map(|value| SegmentRefs::decode(&key, &value)).transpose()
    }

    /// Adds to `batch` the decremented references of every segment in `releases`, from
    /// their latest values (see [`Metadata::prepare_removal`]). Returns how many segments
    /// lost their last reference.
    pub(crate) async fn decrement_refs(&self, batch: &mut WriteBatch, releases: &Releases) -> Result<u64> {
        self.segments_changed.store(true, std::sync::atomic::Ordering::Relaxed);
        let now_ms = self.clock.now_ms();
        let mut released = 0;
        for (&segment_id, &(blocks, bytes)) in &releases.by_segment {
            let key = keys::segment(segment_id);
            let Some(refs) = self.segment_refs(segment_id, &ReadOptions::default()).await? else {
                tracing::warn!(segment = %ulid::Ulid(segment_id), "index entries name a segment without references");
                continue;
            };
            debug_assert!(refs.blocks >= blocks, "a segment releases no more blocks than it holds");
            let left = SegmentRefs {
                blocks: refs.blocks.saturating_sub(blocks),
                live_bytes: refs.live_bytes.saturating_sub(bytes),
                ..refs
            };
            if left.compacted && left.fragmented() {
                batch.put(keys::fragmented(segment_id), []);
            }
            if left.blocks == 0 {
                batch.delete(&key);
                batch.delete(keys::fragmented(segment_id));
                batch.put(keys::released(segment_id), Released { at_ms: now_ms, bytes: refs.committed_bytes }.encode());
                released += 1;
            } else {
                batch.put(&key, left.encode());
            }
        }
        Ok(released)
    }
}

fn corrupt(key: &[u8], reason: &str) -> MetadataError {
    MetadataError::Corrupt { key: String::from_utf8_lossy(key).into_owned(), reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_trip_and_old_values_decode() {
        let refs = SegmentRefs { blocks: 3, live_bytes: 300, committed_bytes: 900, compacted: false };
        assert_eq!(SegmentRefs::decode(b"o/x", &refs.encode()).unwrap(), refs);
        let compacted = SegmentRefs { compacted: true, ..refs };
        assert_eq!(SegmentRefs::decode(b"o/x", &compacted.encode()).unwrap(), compacted);
        assert!(refs.fragmented() && !SegmentRefs { live_bytes: 450, ..refs }.fragmented());
        let old = SegmentRefs::decode(b"o/x", &7u64.to_be_bytes()).unwrap();
        assert_eq!(old, SegmentRefs { blocks: 7, live_bytes: 0, committed_bytes: 0, compacted: false });
        assert!(SegmentRefs::decode(b"o/x", &[1, 2, 3]).is_err());
        let released = Released { at_ms: 5, bytes: 6 };
        assert_eq!(Released::decode(b"z/x", &released.encode()).unwrap(), released);
        assert!(Released::decode(b"z/x", &[0; 8]).is_err());
    }
}
