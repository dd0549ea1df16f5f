//! Idempotent producers: per stream, each producer's latest acks, so that a retried
//! append (after a lost ack, a killed gateway or a metadata failover) gets its original
//! ack back and applies nothing, and an append that skips a sequence is refused.
//!
//! A producer's first append on a stream may carry any sequence; each later one must
//! carry the previous plus one. The last [`ACK_WINDOW`] acks are kept: a client that
//! keeps at most that many appends in flight gets every original ack on retry; an older
//! duplicate is refused (it was applied, its ack is gone). State idle longer than
//! `producer_expiry` is forgotten (its key expires in SlateDB too): the producer then
//! starts afresh, and a retry arriving after that would be applied again.

use std::collections::VecDeque;

use shale_metadata_contract::records::{decode_v1, encode_stored};
use shale_metadata_contract::ProducerSummary;
use shale_proto::metadata_rpc as pb;
use slatedb::config::DurabilityLevel;

use crate::{keys, AppendAck, Metadata, MetadataError, Position, ProducerStamp, Result, Stored};

/// Acks kept per producer and stream: the most appends a producer may keep in flight
/// and still get every original ack back on retry.
pub const ACK_WINDOW: usize = 8;

/// One producer's recent acks on one stream, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProducerState {
    last_active_ms: u64,
    acks: VecDeque<(u64, Position, Position)>,
}

/// What to do with a producer's append.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The next sequence (or the producer's first): check its conditions and apply it.
    Apply,
    /// Applied before: answer with this ack, apply nothing.
    Duplicate(AppendAck),
}

impl ProducerState {
    /// This state unless it has been idle longer than `expiry_ms` at `now_ms`.
    pub fn live(self, now_ms: u64, expiry_ms: u64) -> Option<Self> {
        (now_ms.saturating_sub(self.last_active_ms) <= expiry_ms).then_some(self)
    }

    /// Whether an append with `stamp`'s sequence is new, a duplicate (with its original
    /// ack, whose tail is the stream's `tail` now) or out of order.
    pub fn admit(state: Option<&Self>, stamp: &ProducerStamp, tail: Position) -> Result<Admission> {
        let seq = stamp.seq;
        let Some(&(last, start, end)) = state.and_then(|s| s.acks.back()) else {
            return Ok(Admission::Apply);
        };
        let step = if stamp.counts_records { end.seq_num.saturating_sub(start.seq_num) } else { 1 };
        let expected = last.checked_add(step);
        if Some(seq) == expected {
            return Ok(Admission::Apply);
        }
        let kept = state.and_then(|s| s.acks.iter().find(|(applied, _, _)| *applied == seq));
        match kept {
            Some(&(_, start, end)) => Ok(Admission::Duplicate(AppendAck { start, end, tail })),
            None => Err(MetadataError::ProducerSeqMismatch { expected: expected.unwrap_or(u64::MAX), got: seq }),
        }
    }

    /// Records that the append with sequence `seq` was applied with `ack` at `now_ms`.
    pub fn applied(&mut self, seq: u64, ack: &AppendAck, now_ms: u64) {
        debug_assert!(self.acks.back().is_none_or(|&(last, _, _)| last < seq), "sequences only move forward");
        self.last_active_ms = now_ms;
        self.acks.push_back((seq, ack.start, ack.end));
        while self.acks.len() > ACK_WINDOW {
            self.acks.pop_front();
        }
    }
}

impl Metadata {
    /// The stream's producers whose durable state has not expired, by name.
    pub(crate) async fn list_producers(&self, basin: &str, stream: &str) -> Result<Vec<ProducerSummary>> {
        let stream_id = self.get_stream(basin, stream).await?.record.id;
        let prefix = keys::of_stream(b"p/", stream_id);
        let decode = |key: &[u8], bytes: &[u8]| {
            let name = String::from_utf8_lossy(key.get(prefix.len()..).unwrap_or_default()).into_owned();
            Ok((name, ProducerState::from_stored(key, bytes)?))
        };
        let page = self.scan_page(&prefix, &prefix, usize::MAX, DurabilityLevel::Remote, decode).await?;
        let (now_ms, expiry_ms) = (self.clock.now_ms(), self.config.producer_expiry_ms());
        Ok(page
            .items
            .into_iter()
            .filter_map(|(name, state)| state.live(now_ms, expiry_ms).and_then(|state| state.summary(name)))
            .collect())
    }
}

impl ProducerState {
    /// What a producer listing shows of this state: its latest append.
    fn summary(&self, producer: String) -> Option<ProducerSummary> {
        let &(last_seq, start, end) = self.acks.back()?;
        Some(ProducerSummary {
            producer,
            last_seq,
            last_count: end.seq_num.saturating_sub(start.seq_num),
            last_timestamp: end.timestamp,
            last_active_ms: self.last_active_ms,
        })
    }
}

impl Stored for ProducerState {
    fn to_stored(&self) -> Vec<u8> {
        let acks = self
            .acks
            .iter()
            .map(|&(seq, start, end)| pb::ProducerAck {
                seq,
                start_seq: start.seq_num,
                start_timestamp: start.timestamp,
                end_seq: end.seq_num,
                end_timestamp: end.timestamp,
            })
            .collect();
        encode_stored(pb::ProducerState { last_active_ms: self.last_active_ms, acks })
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        let stored: pb::ProducerState = decode_v1(key, bytes)?;
        let acks = stored
            .acks
            .into_iter()
            .map(|a| {
                let start = Position { seq_num: a.start_seq, timestamp: a.start_timestamp };
                (a.seq, start, Position { seq_num: a.end_seq, timestamp: a.end_timestamp })
            })
            .collect();
        Ok(Self { last_active_ms: stored.last_active_ms, acks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(seq: u64) -> AppendAck {
        let p = |s| Position { seq_num: s, timestamp: s * 10 };
        AppendAck { start: p(seq * 2), end: p(seq * 2 + 2), tail: p(seq * 2 + 2) }
    }

    fn tail() -> Position {
        Position { seq_num: 1000, timestamp: 1 }
    }

    fn by_one(seq: u64) -> ProducerStamp {
        ProducerStamp { id: "p".into(), seq, counts_records: false }
    }

    #[test]
    fn a_record_counting_producer_moves_by_each_appends_record_count() {
        let counting = |seq| ProducerStamp { id: "k".into(), seq, counts_records: true };
        let mut state = ProducerState::default();
        // ack(3) covers two records: the next Kafka-style sequence is 3 + 2.
        state.applied(3, &ack(3), 5);
        assert_eq!(ProducerState::admit(Some(&state), &counting(5), tail()).unwrap(), Admission::Apply);
        let skipped = ProducerState::admit(Some(&state), &counting(4), tail()).unwrap_err();
        assert!(matches!(skipped, MetadataError::ProducerSeqMismatch { expected: 5, got: 4 }), "{skipped}");
        let retry = ProducerState::admit(Some(&state), &counting(3), tail()).unwrap();
        assert_eq!(retry, Admission::Duplicate(AppendAck { tail: tail(), ..ack(3) }));
    }

    #[test]
    fn a_new_producer_starts_anywhere_then_moves_by_one() {
        assert_eq!(ProducerState::admit(None, &by_one(17), tail()).unwrap(), Admission::Apply);
        let mut state = ProducerState::default();
        state.applied(17, &ack(17), 5);
        assert_eq!(ProducerState::admit(Some(&state), &by_one(18), tail()).unwrap(), Admission::Apply);
        let gap = ProducerState::admit(Some(&state), &by_one(20), tail()).unwrap_err();
        assert!(matches!(gap, MetadataError::ProducerSeqMismatch { expected: 18, got: 20 }), "{gap}");
    }

    #[test]
    fn duplicates_in_the_window_get_their_ack_older_ones_are_refused() {
        let mut state = ProducerState::default();
        for seq in 0..20 {
            state.applied(seq, &ack(seq), seq);
        }
        let oldest_kept = 20 - ACK_WINDOW as u64;
        for seq in oldest_kept..20 {
            let expected = AppendAck { tail: tail(), ..ack(seq) };
            assert_eq!(
                ProducerState::admit(Some(&state), &by_one(seq), tail()).unwrap(),
                Admission::Duplicate(expected)
            );
        }
        let old = ProducerState::admit(Some(&state), &by_one(oldest_kept - 1), tail()).unwrap_err();
        assert!(matches!(old, MetadataError::ProducerSeqMismatch { expected: 20, .. }), "{old}");
    }

    /// What one active producer costs per stream it writes: a full window of acks at
    /// realistic positions (the figure docs/benchmarks.md quotes).
    #[test]
    fn a_producer_costs_at_most_about_300_bytes_per_stream() {
        let mut state = ProducerState::default();
        for seq in 0..20u64 {
            let p = |s: u64| Position { seq_num: 4_000_000_000 + s * 100, timestamp: 1_800_000_000_000 + s };
            state.applied(
                1_000 + seq,
                &AppendAck { start: p(seq), end: p(seq + 1), tail: p(seq + 1) },
                1_800_000_000_000,
            );
        }
        let key = crate::keys::producer(123_456, "cli-01JDZ3Q8ZV2C6M0T7W4X5Y6Z7A");
        let bytes = key.len() + state.to_stored().len();
        println!("producer state: {bytes} bytes (key {}, value {})", key.len(), state.to_stored().len());
        assert!((200..=320).contains(&bytes), "{bytes}");
    }

    #[test]
    fn idle_state_expires_and_round_trips() {
        let mut state = ProducerState::default();
        state.applied(3, &ack(3), 1_000);
        assert!(state.clone().live(1_500, 500).is_some());
        assert!(state.clone().live(1_501, 500).is_none());
        let back = ProducerState::from_stored(b"p/x", &state.to_stored()).unwrap();
        assert_eq!(back, state);
        assert!(ProducerState::from_stored(b"p/x", b"{}").is_err());
    }
}
