//! A checker for histories of Kafka transactions: each transaction writes one unique
//! value to each of its partitions and ends committed, aborted or unknown (its EndTxn
//! unanswered or refused); readers read whole partitions from offset 0. Against the final
//! contents of every partition:
//!
//! - **no lost committed write**: every value of a committed transaction is there once;
//! - **no aborted read**: no value of an aborted transaction is there or was ever read;
//! - **atomic**: an unknown transaction is wholly there or wholly absent, and one that
//!   is absent was never read;
//! - **reads agree**: every record a read returned is at the offset it holds at the end;
//! - **not torn**: once any read returned a value of a transaction, every read of
//!   another of its partitions started afterwards reaches that partition's value (its
//!   high watermark is past it).

use std::collections::{HashMap, HashSet};

/// How a transaction ended, as its producer saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    Committed,
    Aborted,
    /// EndTxn was not answered, or refused: either way, all or nothing.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Txn {
    /// `(partition, value)`: one value per partition it wrote.
    pub writes: Vec<(i32, String)>,
    pub outcome: TxnOutcome,
}

/// One read of a partition from offset 0.
#[derive(Clone, Debug)]
pub struct PartitionRead {
    pub partition: i32,
    /// Logical times (one clock for all clients) when it was sent and answered.
    pub invoked: u64,
    pub completed: u64,
    pub high_watermark: i64,
    /// `(offset, value)`.
    pub records: Vec<(i64, String)>,
}

/// What a passing history held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TxnSummary {
    pub committed: usize,
    pub aborted: usize,
    pub unknown_visible: usize,
    pub unknown_absent: usize,
}

/// Checks `txns` and `reads` against `last`, every partition's final `(offset, value)`s.
pub fn check_transactions(
    txns: &[Txn],
    reads: &[PartitionRead],
    last: &HashMap<i32, Vec<(i64, String)>>,
) -> Result<TxnSummary, String> {
    let mut at: HashMap<&str, (i32, i64)> = HashMap::new();
    for (partition, records) in last {
        for (offset, value) in records {
            if at.insert(value, (*partition, *offset)).is_some() {
                return Err(format!("{value} is stored twice"));
            }
        }
    }
    let mut summary = TxnSummary::default();
    let mut never_visible: HashSet<&str> = HashSet::new();
    let mut visible: Vec<&Txn> = Vec::new();
    for txn in txns {
        let present = txn.writes.iter().filter(|(_, v)| at.contains_key(v.as_str())).count();
        for (partition, value) in &txn.writes {
            if let Some((stored_in, _)) = at.get(value.as_str()) {
                if stored_in != partition {
                    return Err(format!("{value} was written to partition {partition} and is in {stored_in}"));
                }
            }
        }
        let whole = present == txn.writes.len();
        match (txn.outcome, present) {
            (TxnOutcome::Committed, _) if !whole => {
                return Err(format!(
                    "committed transaction {:?} lost {} writes",
                    txn.writes,
                    txn.writes.len() - present
                ));
            }
            (TxnOutcome::Committed, _) => summary.committed += 1,
            (TxnOutcome::Aborted, 0) => summary.aborted += 1,
            (TxnOutcome::Aborted, _) => return Err(format!("aborted transaction {:?} is visible", txn.writes)),
            (TxnOutcome::Unknown, 0) => summary.unknown_absent += 1,
            (TxnOutcome::Unknown, _) if whole => summary.unknown_visible += 1,
            (TxnOutcome::Unknown, _) => {
                return Err(format!("transaction {:?} is torn: {present} of {} writes", txn.writes, txn.writes.len()));
            }
        }
        if present == 0 {
            never_visible.extend(txn.writes.iter().map(|(_, v)| v.as_str()));
        } else {
            visible.push(txn);
        }
    }
    let mut first_seen: HashMap<&str, u64> = HashMap::new();
    for read in reads {
        for (offset, value) in &read.records {
            if never_visible.contains(value.as_str()) {
                return Err(format!("a read of partition {} returned {value}, which never committed", read.partition));
            }
            match at.get(value.as_str()) {
                Some(&(partition, stored)) if partition == read.partition && stored == *offset => {}
                Some(stored) => {
                    return Err(format!("a read returned {value} at {}/{offset}; it is at {stored:?}", read.partition))
                }
                None => return Err(format!("a read returned {value}, which is nowhere at the end")),
            }
            let seen = first_seen.entry(value.as_str()).or_insert(read.completed);
            *seen = (*seen).min(read.completed);
        }
    }
    for txn in visible {
        let Some(seen) = txn.writes.iter().filter_map(|(_, v)| first_seen.get(v.as_str())).min() else { continue };
        for (partition, value) in &txn.writes {
            let (_, offset) = at[value.as_str()];
            let behind =
                reads.iter().find(|r| r.partition == *partition && r.invoked > *seen && r.high_watermark <= offset);
            if let Some(read) = behind {
                return Err(format!(
                    "torn read: a read of partition {partition} started after part of {:?} was read ended at {} without {value} (offset {offset})",
                    txn.writes, read.high_watermark
                ));
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(id: &str, outcome: TxnOutcome) -> Txn {
        Txn { writes: vec![(0, format!("{id}-0")), (1, format!("{id}-1"))], outcome }
    }

    fn read(partition: i32, invoked: u64, records: &[(i64, &str)], high_watermark: i64) -> PartitionRead {
        let records = records.iter().map(|(o, v)| (*o, v.to_string())).collect();
        PartitionRead { partition, invoked, completed: invoked + 1, high_watermark, records }
    }

    fn last() -> HashMap<i32, Vec<(i64, String)>> {
        HashMap::from([(0, vec![(0, "a-0".to_string())]), (1, vec![(0, "a-1".to_string())])])
    }

    #[test]
    fn a_clean_history_passes() {
        let txns = [txn("a", TxnOutcome::Committed), txn("b", TxnOutcome::Aborted), txn("c", TxnOutcome::Unknown)];
        let reads = [read(0, 1, &[], 0), read(0, 5, &[(0, "a-0")], 1), read(1, 8, &[(0, "a-1")], 1)];
        let summary = check_transactions(&txns, &reads, &last()).unwrap();
        assert_eq!(summary, TxnSummary { committed: 1, aborted: 1, unknown_visible: 0, unknown_absent: 1 });
    }

    #[test]
    fn each_violation_is_caught() {
        let committed = [txn("a", TxnOutcome::Committed)];
        let mut lost = last();
        lost.get_mut(&1).unwrap().clear();
        assert!(check_transactions(&committed, &[], &lost).unwrap_err().contains("lost"));
        let aborted = [txn("a", TxnOutcome::Aborted)];
        assert!(check_transactions(&aborted, &[], &last()).unwrap_err().contains("aborted"));
        let unknown = [txn("a", TxnOutcome::Unknown)];
        assert!(check_transactions(&unknown, &[], &lost).unwrap_err().contains("torn"));
        let ghost = [txn("a", TxnOutcome::Committed), txn("b", TxnOutcome::Aborted)];
        let aborted_read = [read(0, 1, &[(1, "b-0")], 2)];
        assert!(check_transactions(&ghost, &aborted_read, &last()).unwrap_err().contains("never committed"));
        let moved = [read(0, 1, &[(3, "a-0")], 4)];
        assert!(check_transactions(&committed, &moved, &last()).unwrap_err().contains("it is at"));
        // Partition 0's value was read (completed at 2); a read of partition 1 started at 3
        // ended before partition 1's value.
        let torn = [read(0, 1, &[(0, "a-0")], 1), read(1, 3, &[], 0)];
        assert!(check_transactions(&committed, &torn, &last()).unwrap_err().contains("torn read"));
    }
}
