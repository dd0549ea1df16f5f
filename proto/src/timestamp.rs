//! Final record timestamps.
//!
//! A segment stores each record's client timestamp (if any) and one arrival time per
//! block. The sequencer decides the final timestamps at commit and records in the index
//! entry the [`TimestampPolicy`] and the stream's previous last timestamp (the floor).
//! Readers replay the same [`TimestampResolver`] over the block, so the final timestamps
//! are never stored twice and the two sides cannot disagree.

use serde::{Deserialize, Serialize};

/// How a stream picks record timestamps (S2's `timestamping.mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimestampingMode {
    /// The client's timestamp if it gave one, else the arrival time.
    #[default]
    ClientPrefer,
    /// The client's timestamp; appends without one are rejected.
    ClientRequire,
    /// Always the arrival time.
    Arrival,
}

/// A stream's timestamping mode plus whether client timestamps may exceed arrival time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimestampPolicy {
    pub mode: TimestampingMode,
    pub uncapped: bool,
}

impl TimestampPolicy {
    /// One byte for the index entry: bits 0-1 the mode, bit 2 `uncapped`.
    pub fn to_byte(self) -> u8 {
        let mode = match self.mode {
            TimestampingMode::ClientPrefer => 0,
            TimestampingMode::ClientRequire => 1,
            TimestampingMode::Arrival => 2,
        };
        mode | (u8::from(self.uncapped) << 2)
    }

    pub fn from_byte(byte: u8) -> Option<Self> {
        let mode = match byte & 0b11 {
            0 => TimestampingMode::ClientPrefer,
            1 => TimestampingMode::ClientRequire,
            2 => TimestampingMode::Arrival,
            _ => return None,
        };
        if byte & !0b111 != 0 {
            return None;
        }
        Some(Self { mode, uncapped: byte & 0b100 != 0 })
    }

    /// Starts resolving the records of one block that arrived at `arrival`, for a stream
    /// whose last timestamp so far is `floor`.
    pub fn resolver(self, arrival: u64, floor: u64) -> TimestampResolver {
        TimestampResolver { policy: self, arrival, running: floor }
    }
}

/// Yields final timestamps, record by record: never below the previous one.
#[derive(Clone, Debug)]
pub struct TimestampResolver {
    policy: TimestampPolicy,
    arrival: u64,
    running: u64,
}

impl TimestampResolver {
    pub fn next(&mut self, client: Option<u64>) -> u64 {
        let base = match (self.policy.mode, client) {
            (TimestampingMode::Arrival, _) | (_, None) => self.arrival,
            (_, Some(ts)) if self.policy.uncapped => ts,
            (_, Some(ts)) => ts.min(self.arrival),
        };
        self.running = self.running.max(base);
        self.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: TimestampingMode, uncapped: bool) -> TimestampPolicy {
        TimestampPolicy { mode, uncapped }
    }

    #[test]
    fn client_prefer_caps_at_arrival_and_never_goes_back() {
        let mut r = policy(TimestampingMode::ClientPrefer, false).resolver(100, 50);
        assert_eq!(r.next(Some(70)), 70);
        assert_eq!(r.next(Some(60)), 70);
        assert_eq!(r.next(None), 100);
        assert_eq!(r.next(Some(500)), 100);
    }

    #[test]
    fn uncapped_keeps_future_timestamps() {
        let mut r = policy(TimestampingMode::ClientPrefer, true).resolver(100, 0);
        assert_eq!(r.next(Some(500)), 500);
        assert_eq!(r.next(Some(10)), 500);
    }

    #[test]
    fn arrival_ignores_client_and_respects_floor() {
        let mut r = policy(TimestampingMode::Arrival, false).resolver(100, 120);
        assert_eq!(r.next(Some(5)), 120);
    }

    #[test]
    fn policy_byte_round_trips() {
        for mode in [TimestampingMode::ClientPrefer, TimestampingMode::ClientRequire, TimestampingMode::Arrival] {
            for uncapped in [false, true] {
                let p = policy(mode, uncapped);
                assert_eq!(TimestampPolicy::from_byte(p.to_byte()), Some(p));
            }
        }
        assert_eq!(TimestampPolicy::from_byte(3), None);
        assert_eq!(TimestampPolicy::from_byte(8), None);
    }
}
