//! A checker for a consumer group's committed offset on one partition, as a register
//! written by one client with increasing offsets and read by many: Kafka's OffsetCommit
//! and OffsetFetch through coordinators that come and go. The anomalies Jepsen found in
//! other Kafka-compatible systems are its rules:
//! 1. a fetch answers an offset some commit wrote (acked, or with an unknown outcome),
//!    invoked before the fetch returned; never one nobody committed (a spurious 0);
//! 2. a fetch sees at least every commit acknowledged before it was invoked (no lost
//!    commit, no offset moved backwards after a coordinator change);
//! 3. fetches in real-time order answer non-decreasing offsets;
//! 4. a commit refused outright (NOT_COORDINATOR and the like) is never seen.
//!
//! Times are event numbers from [`crate::history::Clock`].

use crate::history::Violation;

/// How a commit ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    Acked,
    /// Refused before doing anything: must never be seen.
    Refused,
    /// No answer, or an error after which it may or may not have been applied.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetOp {
    Commit {
        offset: u64,
        outcome: CommitOutcome,
    },
    /// The committed offset a fetch answered (`None`: no commit).
    Fetch {
        offset: Option<u64>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEvent {
    pub invoked: u64,
    pub completed: u64,
    pub op: OffsetOp,
}

/// Checks one register's history: `Ok` or the first rule broken.
pub fn check_committed(history: &[OffsetEvent]) -> Result<(), Violation> {
    let commits: Vec<(&OffsetEvent, u64, CommitOutcome)> = history
        .iter()
        .filter_map(|e| match e.op {
            OffsetOp::Commit { offset, outcome } => Some((e, offset, outcome)),
            OffsetOp::Fetch { .. } => None,
        })
        .collect();
    let fetches: Vec<(&OffsetEvent, Option<u64>)> = history
        .iter()
        .filter_map(|e| match e.op {
            OffsetOp::Fetch { offset } => Some((e, offset)),
            OffsetOp::Commit { .. } => None,
        })
        .collect();
    for &(fetch, seen) in &fetches {
        let floor = commits
            .iter()
            .filter(|(c, _, outcome)| *outcome == CommitOutcome::Acked && c.completed < fetch.invoked)
            .map(|&(_, offset, _)| offset)
            .max();
        if let Some(seen) = seen {
            let written = commits.iter().any(|&(c, offset, outcome)| {
                offset == seen && outcome != CommitOutcome::Refused && c.invoked < fetch.completed
            });
            if !written {
                return Err(format!(
                    "a fetch ({}..{}) saw offset {seen}, which no commit wrote",
                    fetch.invoked, fetch.completed
                ));
            }
        }
        if floor.is_some_and(|floor| seen < Some(floor)) {
            return Err(format!(
                "a fetch ({}..{}) saw {seen:?} after commit {floor:?} was acknowledged",
                fetch.invoked, fetch.completed
            ));
        }
    }
    for &(a, seen_a) in &fetches {
        for &(b, seen_b) in &fetches {
            if a.completed < b.invoked && seen_b < seen_a {
                return Err(format!(
                    "fetch {}..{} saw {seen_b:?} after fetch {}..{} saw {seen_a:?}",
                    b.invoked, b.completed, a.invoked, a.completed
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(invoked: u64, completed: u64, offset: u64, outcome: CommitOutcome) -> OffsetEvent {
        OffsetEvent { invoked, completed, op: OffsetOp::Commit { offset, outcome } }
    }

    fn fetch(invoked: u64, completed: u64, offset: Option<u64>) -> OffsetEvent {
        OffsetEvent { invoked, completed, op: OffsetOp::Fetch { offset } }
    }

    #[test]
    fn a_register_written_in_order_passes_with_unknown_commits_seen_or_not() {
        let history = [
            fetch(0, 1, None),
            commit(2, 3, 5, CommitOutcome::Acked),
            commit(4, 9, 6, CommitOutcome::Unknown),
            fetch(5, 6, Some(5)),
            fetch(7, 8, Some(6)),
            fetch(10, 11, Some(6)),
            commit(12, 13, 7, CommitOutcome::Refused),
            fetch(14, 15, Some(6)),
        ];
        assert_eq!(check_committed(&history), Ok(()));
    }

    #[test]
    fn each_anomaly_is_caught() {
        let acked = commit(0, 1, 5, CommitOutcome::Acked);
        // A spurious offset 0 after a coordinator change.
        assert!(check_committed(&[acked, fetch(2, 3, Some(0))]).unwrap_err().contains("no commit wrote"));
        // A lost commit.
        assert!(check_committed(&[acked, fetch(2, 3, None)]).unwrap_err().contains("acknowledged"));
        // Moving backwards between two fetches.
        let later = commit(4, 5, 6, CommitOutcome::Unknown);
        let backwards = [acked, later, fetch(6, 7, Some(6)), fetch(8, 9, Some(5))];
        assert!(check_committed(&backwards).unwrap_err().contains("after fetch"));
        // A refused commit seen.
        let refused = commit(0, 1, 9, CommitOutcome::Refused);
        assert!(check_committed(&[refused, fetch(2, 3, Some(9))]).is_err());
        // A commit seen before it was sent.
        let future = commit(5, 6, 9, CommitOutcome::Acked);
        assert!(check_committed(&[fetch(0, 1, Some(9)), future]).is_err());
    }
}
