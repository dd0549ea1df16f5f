//! A linearizability checker for one stream's history of appends, reads and check-tails
//! recorded from many clients.
//!
//! A stream is a log whose positions are explicit: every successful append is told where
//! it landed, every read returns records with their sequence numbers and the tail it saw.
//! So no search over orders is needed (as in Porcupine's general algorithm): the only
//! candidate order of appends is their order in the log, and each read or check-tail sits
//! right after the append that ends at the tail it saw. The history is linearizable iff
//! that order is consistent with what every operation returned and with real time, which
//! `check` verifies rule by rule:
//! 1. every record a read returned is where its append put it: acked appends at their
//!    acked positions, appends with an unknown outcome (timeouts, failover) contiguous and
//!    at most once; nothing appears that no append sent; no record twice;
//! 2. the log is dense: no read skips a position below the tail it saw;
//! 3. real time: an append acked before another was invoked lies before it in the log
//!    (one whose outcome is unknown may take effect any time after it began);
//!    a read or check-tail sees every append acked before it was invoked, and none
//!    invoked after it returned; two of them in real-time order see non-decreasing tails;
//! 4. an append that failed definitely (a condition) appears nowhere; one with
//!    `match_seq_num` that succeeded starts there.
//!
//! Events are numbered by one counter shared by all clients (`Clock`), which gives the
//! real-time order without trusting wall clocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Hands out event numbers: `a.completed < b.invoked` means `a` finished before `b` began.
#[derive(Debug, Default)]
pub struct Clock(AtomicU64);

impl Clock {
    pub fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// How an append ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Acked at `start` (its records occupy `start..start + len`).
    Acked { start: u64 },
    /// Refused before doing anything (a condition failed): must appear nowhere.
    Refused,
    /// Unknown: it may or may not have been applied (at most once).
    Unknown,
}

/// One operation of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Records with bodies unique in the whole history.
    Append {
        bodies: Vec<String>,
        match_seq_num: Option<u64>,
        outcome: AppendOutcome,
    },
    /// Records read from `from` (sequence number and body), and the tail it saw.
    Read {
        from: u64,
        records: Vec<(u64, String)>,
        tail: u64,
    },
    CheckTail {
        tail: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub client: usize,
    pub invoked: u64,
    pub completed: u64,
    pub op: Op,
}

/// Why a history is not linearizable.
pub type Violation = String;

/// Checks `history`; `Ok` with the log it implies (bodies by position), or the first
/// rule broken.
pub fn check(history: &[Event]) -> Result<Vec<String>, Violation> {
    let appends = placed_appends(history)?;
    let log = build_log(history, &appends)?;
    check_real_time(history, &appends)?;
    Ok(log)
}

/// Where each append that took effect landed: `(event index, start)`.
fn placed_appends(history: &[Event]) -> Result<HashMap<usize, u64>, Violation> {
    let mut body_owner: HashMap<&str, (usize, usize)> = HashMap::new();
    for (index, event) in history.iter().enumerate() {
        if let Op::Append { bodies, .. } = &event.op {
            for (offset, body) in bodies.iter().enumerate() {
                if body_owner.insert(body, (index, offset)).is_some() {
                    return Err(format!("body `{body}` sent twice: the history generator must make bodies unique"));
                }
            }
        }
    }
    let mut placed = HashMap::new();
    for (index, event) in history.iter().enumerate() {
        if let Op::Append { outcome: AppendOutcome::Acked { start }, match_seq_num, .. } = &event.op {
            if match_seq_num.is_some_and(|m| m != *start) {
                return Err(format!("append {index} with match_seq_num {match_seq_num:?} was acked at {start}"));
            }
            placed.insert(index, *start);
        }
    }
    // Reads place the rest, and must agree with the acks.
    for (reader, event) in history.iter().enumerate() {
        let Op::Read { records, .. } = &event.op else { continue };
        for (seq, body) in records {
            let Some(&(append, offset)) = body_owner.get(body.as_str()) else {
                return Err(format!("read {reader} returned `{body}` at {seq}, which no append sent"));
            };
            let Op::Append { outcome, .. } = &history[append].op else { unreachable!("owners are appends") };
            if *outcome == AppendOutcome::Refused {
                return Err(format!("read {reader} returned `{body}` of append {append}, which was refused"));
            }
            let start =
                seq.checked_sub(offset as u64).ok_or_else(|| format!("`{body}` at {seq} cannot be offset {offset}"))?;
            match placed.insert(append, start) {
                Some(earlier) if earlier != start => {
                    return Err(format!(
                        "append {append} seen at {start} by read {reader} but at {earlier} elsewhere (duplicated or moved)"
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(placed)
}

/// The log the placed appends make: no two overlap, reads match it, no gaps under any
/// tail a read saw.
fn build_log(history: &[Event], placed: &HashMap<usize, u64>) -> Result<Vec<String>, Violation> {
    let mut log: Vec<Option<String>> = Vec::new();
    let mut order: Vec<_> = placed.iter().map(|(&index, &start)| (start, index)).collect();
    order.sort();
    for (start, index) in order {
        let Op::Append { bodies, .. } = &history[index].op else { unreachable!("placed are appends") };
        let end = start as usize + bodies.len();
        if log.len() < end {
            log.resize(end, None);
        }
        for (offset, body) in bodies.iter().enumerate() {
            let slot = &mut log[start as usize + offset];
            if let Some(other) = slot {
                return Err(format!("position {} holds both `{other}` and `{body}`", start as usize + offset));
            }
            *slot = Some(body.clone());
        }
    }
    for (index, event) in history.iter().enumerate() {
        let Op::Read { from, records, tail } = &event.op else { continue };
        for (expected, (seq, _)) in (*from..).zip(records) {
            if *seq != expected {
                return Err(format!("read {index} from {from} skipped from {expected} to {seq}"));
            }
        }
        if records.last().is_some_and(|(seq, _)| seq >= tail) {
            return Err(format!("read {index} returned records at or past its tail {tail}"));
        }
        for position in *from..*tail {
            if log.get(position as usize).is_none_or(Option::is_none) && records.iter().any(|(s, _)| *s > position) {
                return Err(format!("read {index}: position {position} below its tail has no append"));
            }
        }
    }
    let max_tail = history
        .iter()
        .filter_map(|e| match &e.op {
            Op::Read { tail, .. } | Op::CheckTail { tail } => Some(*tail as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    if let Some(gap) = (0..max_tail.min(log.len())).find(|&p| log[p].is_none()) {
        // Allowed only if an unknown-outcome append could fill it; such appends that
        // took effect were seen by some read, so an unfilled gap below a seen tail is
        // a record nobody can account for.
        return Err(format!("position {gap} lies below a tail a client saw, but no record was ever there"));
    }
    Ok(log.into_iter().map_while(|slot| slot).collect())
}

/// Real time: appends in log order respect the order clients saw them complete in;
/// every read and check-tail sees what finished before it began and nothing that began
/// after it finished; views never go back.
fn check_real_time(history: &[Event], placed: &HashMap<usize, u64>) -> Result<(), Violation> {
    let span = |index: usize| -> (u64, u64) {
        let Op::Append { bodies, .. } = &history[index].op else { unreachable!("placed are appends") };
        let start = placed[&index];
        (start, start + bodies.len() as u64)
    };
    // An append whose outcome the client never learned may take effect at any time
    // after it began, even after the client gave up on it: it completes at infinity.
    let completed = |index: usize| match &history[index].op {
        Op::Append { outcome: AppendOutcome::Unknown, .. } => u64::MAX,
        _ => history[index].completed,
    };
    for &a in placed.keys() {
        for &b in placed.keys() {
            if completed(a) < history[b].invoked && span(a).1 > span(b).0 {
                return Err(format!("append {a} completed before append {b} began, but lies after it in the log"));
            }
        }
    }
    let views: Vec<(usize, u64)> = history
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.op {
            Op::Read { tail, .. } | Op::CheckTail { tail } => Some((i, *tail)),
            _ => None,
        })
        .collect();
    for &(v, tail) in &views {
        for &a in placed.keys() {
            let (start, end) = span(a);
            let acked = matches!(&history[a].op, Op::Append { outcome: AppendOutcome::Acked { .. }, .. });
            if acked && history[a].completed < history[v].invoked && tail < end {
                return Err(format!(
                    "operation {v} saw tail {tail}, but append {a} ending at {end} was acked before it began"
                ));
            }
            if history[v].completed < history[a].invoked && tail > start {
                return Err(format!(
                    "operation {v} saw tail {tail}, past append {a} at {start} that began after it returned"
                ));
            }
        }
        for &(w, later_tail) in &views {
            if history[v].completed < history[w].invoked && later_tail < tail {
                return Err(format!("operation {w} saw tail {later_tail} after operation {v} had seen {tail}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(client: usize, span: (u64, u64), bodies: &[&str], outcome: AppendOutcome) -> Event {
        let bodies = bodies.iter().map(|b| b.to_string()).collect();
        Event { client, invoked: span.0, completed: span.1, op: Op::Append { bodies, match_seq_num: None, outcome } }
    }

    fn read(span: (u64, u64), from: u64, records: &[(u64, &str)], tail: u64) -> Event {
        let records = records.iter().map(|(s, b)| (*s, b.to_string())).collect();
        Event { client: 9, invoked: span.0, completed: span.1, op: Op::Read { from, records, tail } }
    }

    fn tail(span: (u64, u64), tail: u64) -> Event {
        Event { client: 8, invoked: span.0, completed: span.1, op: Op::CheckTail { tail } }
    }

    #[test]
    fn concurrent_appends_in_either_order_and_an_unknown_one_seen_later_are_fine() {
        let history = vec![
            append(0, (0, 3), &["a"], AppendOutcome::Acked { start: 1 }),
            append(1, (1, 2), &["b"], AppendOutcome::Acked { start: 0 }),
            append(2, (4, 6), &["c", "d"], AppendOutcome::Unknown),
            read((7, 8), 0, &[(0, "b"), (1, "a"), (2, "c"), (3, "d")], 4),
            tail((9, 10), 4),
        ];
        assert_eq!(check(&history).unwrap(), vec!["b", "a", "c", "d"]);
    }

    #[test]
    fn an_append_whose_outcome_was_unknown_may_land_after_later_ones() {
        let history = vec![
            append(0, (0, 1), &["late"], AppendOutcome::Unknown),
            append(1, (2, 3), &["b"], AppendOutcome::Acked { start: 0 }),
            read((4, 5), 0, &[(0, "b"), (1, "late")], 2),
        ];
        assert_eq!(check(&history).unwrap(), vec!["b", "late"]);
    }

    #[test]
    fn stale_reads_lost_acks_duplicates_and_reordering_are_caught() {
        let acked_a = append(0, (0, 1), &["a"], AppendOutcome::Acked { start: 0 });
        let stale = vec![acked_a.clone(), read((2, 3), 0, &[], 0)];
        assert!(check(&stale).unwrap_err().contains("acked before it began"));
        let stale_tail = vec![acked_a.clone(), tail((2, 3), 0)];
        assert!(check(&stale_tail).is_err());
        let duplicated =
            vec![append(1, (0, 1), &["x"], AppendOutcome::Unknown), read((2, 3), 0, &[(0, "x"), (1, "x")], 2)];
        assert!(check(&duplicated).is_err());
        let reordered = vec![acked_a.clone(), append(1, (2, 3), &["b"], AppendOutcome::Acked { start: 0 })];
        assert!(check(&reordered).is_err());
        let refused_seen = vec![append(1, (0, 1), &["r"], AppendOutcome::Refused), read((2, 3), 0, &[(0, "r")], 1)];
        assert!(check(&refused_seen).unwrap_err().contains("refused"));
        let from_the_future = vec![tail((0, 1), 1), append(0, (2, 3), &["late"], AppendOutcome::Acked { start: 0 })];
        assert!(check(&from_the_future).unwrap_err().contains("began after it returned"));
        let going_back = vec![acked_a, tail((2, 3), 1), tail((4, 5), 0)];
        assert!(check(&going_back).is_err());
        let gap = vec![append(0, (0, 1), &["g"], AppendOutcome::Acked { start: 1 }), tail((2, 3), 2)];
        assert!(check(&gap).unwrap_err().contains("no record was ever there"));
    }
}
