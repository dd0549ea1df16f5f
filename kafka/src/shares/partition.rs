//! One share-partition's records in flight (KIP-932): which of a partition's records a
//! share group has handed out, to whom and until when, and how often. Pure state; the
//! fetch and acknowledge handlers hold it under a lock.
//!
//! Offsets below `start` (Kafka's share-partition start offset) are done with; offsets
//! from `end` on were never handed out. Between them each record handed out and not yet
//! done has a [`Slot`]; an offset between them without one is done (accepted, rejected,
//! delivered too often) or was never a record a consumer sees (a command record).

use std::collections::BTreeMap;

/// How many times a record is handed out before it is given up on (archived), as
/// Kafka's `group.share.delivery.count.limit` by default.
pub const DELIVERY_LIMIT: u16 = 5;

/// What a consumer says of a record it was handed (the protocol's acknowledge types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// 0: an offset with no record to acknowledge (a gap): nothing to do.
    Gap,
    /// 1: processed: done with.
    Accept,
    /// 2: not processed: hand it out again (to anyone).
    Release,
    /// 3: unprocessable: done with, never handed out again.
    Reject,
}

impl Ack {
    pub fn of(code: i8) -> Option<Ack> {
        match code {
            0 => Some(Ack::Gap),
            1 => Some(Ack::Accept),
            2 => Some(Ack::Release),
            3 => Some(Ack::Reject),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Holder {
    Nobody,
    Member { id: String, until_ms: u64 },
}

#[derive(Clone, Debug)]
struct Slot {
    holder: Holder,
    deliveries: u16,
}

/// Why acknowledgements were refused: none of them was applied.
#[derive(Debug, PartialEq, Eq)]
pub enum AckRefusal {
    /// An offset the member does not hold (never handed to it, its lock ran out, or done
    /// with already).
    NotHeld(u64),
    /// Acknowledge types that are not one per offset nor one for all, or unknown.
    Malformed,
}

/// A range of offsets handed out together, each delivered `deliveries` times so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquired {
    pub first: u64,
    pub last: u64,
    pub deliveries: u16,
}

#[derive(Clone, Debug)]
pub struct SharePartition {
    start: u64,
    end: u64,
    slots: BTreeMap<u64, Slot>,
}

impl SharePartition {
    /// A share-partition whose records before `start` are done with.
    pub fn starting_at(start: u64) -> Self {
        SharePartition { start, end: start, slots: BTreeMap::new() }
    }

    /// The share-partition start offset: every record before it is done with.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Whether no record is handed out or waiting to be again: the state is then its
    /// start offset alone (which equals the end).
    pub fn nothing_in_flight(&self) -> bool {
        self.slots.is_empty()
    }

    /// The first offset never handed out.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Where a read for records to hand out begins: the first record handed out before
    /// and free again, else the first never handed out.
    pub fn next_to_read(&self) -> u64 {
        self.slots.iter().find(|(_, slot)| slot.holder == Holder::Nobody).map_or(self.end, |(&offset, _)| offset)
    }

    /// Frees the records whose locks ran out by `now_ms` (giving up on those delivered
    /// [`DELIVERY_LIMIT`] times). Whether the start moved.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let expired: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, slot)| matches!(slot.holder, Holder::Member { until_ms, .. } if until_ms <= now_ms))
            .map(|(&offset, _)| offset)
            .collect();
        for offset in expired {
            self.free(offset);
        }
        self.advance()
    }

    /// Hands `member` what it may take of `offsets` (the records a read found, in
    /// order), at most `max`, locked until `until_ms`: records free again and records
    /// never handed out (those past `end`). Returns the ranges taken.
    pub fn acquire(&mut self, member: &str, offsets: &[u64], max: usize, until_ms: u64) -> Vec<Acquired> {
        let mut taken: Vec<Acquired> = Vec::new();
        let mut count = 0;
        for &offset in offsets {
            if count >= max {
                break;
            }
            if offset < self.start {
                continue;
            }
            let holder = Holder::Member { id: member.to_string(), until_ms };
            let deliveries = if offset >= self.end {
                self.end = offset + 1;
                self.slots.insert(offset, Slot { holder, deliveries: 1 });
                1
            } else {
                match self.slots.get_mut(&offset) {
                    Some(slot) if slot.holder == Holder::Nobody => {
                        slot.holder = holder;
                        slot.deliveries += 1;
                        slot.deliveries
                    }
                    _ => continue,
                }
            };
            count += 1;
            match taken.last_mut() {
                Some(last) if last.last + 1 == offset && last.deliveries == deliveries => last.last = offset,
                _ => taken.push(Acquired { first: offset, last: offset, deliveries }),
            }
        }
        taken
    }

    /// Applies `member`'s acknowledgement of `first..=last`: `types` holds one type for
    /// all or one per offset. All or nothing. Whether the start moved.
    pub fn acknowledge(&mut self, member: &str, first: u64, last: u64, types: &[i8]) -> Result<bool, AckRefusal> {
        let count = last.checked_sub(first).map(|n| n + 1).ok_or(AckRefusal::Malformed)?;
        if !(types.len() == 1 || types.len() as u64 == count) {
            return Err(AckRefusal::Malformed);
        }
        let type_of = |offset: u64| Ack::of(if types.len() == 1 { types[0] } else { types[(offset - first) as usize] });
        let mut changes = Vec::new();
        for offset in first..=last {
            let ack = type_of(offset).ok_or(AckRefusal::Malformed)?;
            if ack == Ack::Gap {
                continue;
            }
            match self.slots.get(&offset) {
                Some(Slot { holder: Holder::Member { id, .. }, .. }) if id == member => changes.push((offset, ack)),
                _ => return Err(AckRefusal::NotHeld(offset)),
            }
        }
        for (offset, ack) in changes {
            match ack {
                Ack::Release => self.free(offset),
                _ => {
                    self.slots.remove(&offset);
                }
            }
        }
        Ok(self.advance())
    }

    /// Gives up on every record before `offset`, which the stream no longer has (trimmed
    /// by retention or DeleteRecords). Whether the start moved.
    pub fn skip_to(&mut self, offset: u64) -> bool {
        self.slots.retain(|&o, _| o >= offset);
        self.end = self.end.max(offset);
        self.advance()
    }

    /// Frees every record `member` holds (its session closed). Whether the start moved.
    pub fn release_member(&mut self, member: &str) -> bool {
        let held: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, slot)| matches!(&slot.holder, Holder::Member { id, .. } if id == member))
            .map(|(&offset, _)| offset)
            .collect();
        for offset in held {
            // Given back unseen by the application: this delivery does not count.
            if let Some(slot) = self.slots.get_mut(&offset) {
                slot.holder = Holder::Nobody;
                slot.deliveries = slot.deliveries.saturating_sub(1);
            }
        }
        self.advance()
    }

    /// Frees `offset`'s record, or gives up on it if it was delivered often enough.
    fn free(&mut self, offset: u64) {
        if let Some(slot) = self.slots.get_mut(&offset) {
            if slot.deliveries >= DELIVERY_LIMIT {
                self.slots.remove(&offset);
            } else {
                slot.holder = Holder::Nobody;
            }
        }
    }

    /// Moves the start to the first record not done with. Whether it moved.
    fn advance(&mut self) -> bool {
        let start = self.slots.keys().next().copied().unwrap_or(self.end);
        let moved = start != self.start;
        self.start = start;
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: u64, last: u64, deliveries: u16) -> Acquired {
        Acquired { first, last, deliveries }
    }

    #[test]
    fn records_go_to_one_member_until_done_with() {
        let mut p = SharePartition::starting_at(10);
        assert_eq!(p.acquire("a", &[10, 11, 12], 2, 100), vec![range(10, 11, 1)]);
        // b finds 10 and 11 held: only 12 is free.
        assert_eq!(p.acquire("b", &[10, 11, 12, 14], 10, 100), vec![range(12, 12, 1), range(14, 14, 1)]);
        assert_eq!(p.next_to_read(), 15);
        assert_eq!(p.acknowledge("b", 10, 10, &[1]), Err(AckRefusal::NotHeld(10)));
        assert_eq!(p.acknowledge("a", 10, 11, &[1]), Ok(true));
        assert_eq!(p.start(), 12);
        // 13 is a gap: acknowledged as one, and the start passes it.
        assert_eq!(p.acknowledge("b", 12, 14, &[1, 0, 1]), Ok(true));
        assert_eq!(p.start(), 15);
    }

    #[test]
    fn released_and_expired_records_are_handed_out_again_up_to_the_limit() {
        let mut p = SharePartition::starting_at(0);
        p.acquire("a", &[0, 1], 10, 100);
        assert_eq!(p.acknowledge("a", 0, 1, &[2, 1]), Ok(false));
        assert_eq!(p.next_to_read(), 0);
        assert_eq!(p.acquire("b", &[0, 1, 2], 10, 200), vec![range(0, 0, 2), range(2, 2, 1)]);
        // b's lock on 0 runs out: free again, then handed out until the limit.
        assert!(!p.expire(150));
        assert!(!p.expire(200));
        for delivery in 3..=DELIVERY_LIMIT {
            assert_eq!(p.acquire("c", &[0], 1, 300 + u64::from(delivery)), vec![range(0, 0, delivery)]);
            p.expire(1_000);
        }
        // Delivered DELIVERY_LIMIT times and expired: given up on; 2 (b's, expired
        // with it) is free and next.
        assert_eq!((p.start(), p.next_to_read()), (2, 2));
        assert!(p.acquire("c", &[0], 1, 2_000).is_empty());
    }

    #[test]
    fn refused_acknowledgements_change_nothing() {
        let mut p = SharePartition::starting_at(0);
        p.acquire("a", &[0, 1, 2], 10, 100);
        assert_eq!(p.acknowledge("a", 0, 3, &[1]), Err(AckRefusal::NotHeld(3)));
        assert_eq!(p.acknowledge("a", 0, 2, &[1, 1]), Err(AckRefusal::Malformed));
        assert_eq!(p.acknowledge("a", 0, 2, &[7]), Err(AckRefusal::Malformed));
        assert_eq!(p.acknowledge("a", 2, 1, &[1]), Err(AckRefusal::Malformed));
        assert_eq!(p.start(), 0);
        assert_eq!(p.acknowledge("a", 0, 2, &[3]), Ok(true));
        assert_eq!(p.start(), 3);
    }

    #[test]
    fn records_trimmed_away_are_given_up_on() {
        let mut p = SharePartition::starting_at(0);
        p.acquire("a", &[0, 1, 2], 10, 100);
        p.expire(100);
        assert_eq!(p.next_to_read(), 0);
        // The stream now starts at 2: 0 and 1 are gone, 2 is still free to hand out.
        assert!(p.skip_to(2));
        assert_eq!((p.start(), p.next_to_read()), (2, 2));
        assert!(p.skip_to(5));
        assert_eq!((p.start(), p.next_to_read(), p.end()), (5, 5, 5));
    }

    #[test]
    fn a_closed_session_gives_its_records_back_undelivered() {
        let mut p = SharePartition::starting_at(0);
        p.acquire("a", &[0, 1], 10, 100);
        p.acquire("b", &[2], 10, 100);
        assert!(!p.release_member("a"));
        assert_eq!(p.acquire("b", &[0, 1, 2], 10, 100), vec![range(0, 1, 1)]);
    }
}
