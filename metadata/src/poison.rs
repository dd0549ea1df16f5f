//! Failures that must fail what a gateway sent after them: per commit pipeline (see
//! [`crate::PipelinePosition`]), the streams whose units failed and the call that failed
//! them; and which of a pipeline's calls this instance processed, so a call whose
//! unanswered predecessors went to another instance (before a takeover) is refused
//! rather than committed past a failure this instance never saw. Only the writer
//! touches it, under the writer lock.

use std::collections::HashMap;

use crate::{CommitRequest, CommitUnit, MetadataError, PipelinePosition, UnitOutcome};

/// Pipelines remembered at most; beyond it the oldest-numbered are forgotten (a gateway
/// that restarted never sends on its old pipeline again).
const MAX_PIPELINES: usize = 4096;

#[derive(Default)]
pub(crate) struct Poison {
    /// Pipeline -> (basin, stream) -> the call whose unit failed.
    pipelines: HashMap<u128, HashMap<(String, String), u64>>,
    /// Pipeline -> the calls this instance processed last, one after another: (first, last).
    runs: HashMap<u128, (u64, u64)>,
}

impl Poison {
    /// Notes that this instance processes call `position.seq` of its pipeline, and
    /// answers whether every call the gateway sent before it without having seen its
    /// answer was processed here too. When not, some went to another instance (the
    /// leader before a takeover), and whether they failed is unknown here: committing
    /// this call could ack record N+1 of a stream after record N failed.
    pub fn earlier_calls_processed_here(&mut self, position: PipelinePosition) -> bool {
        let run = self.runs.entry(position.pipeline).or_insert((position.seq, position.seq));
        if run.1.checked_add(1) == Some(position.seq) {
            run.1 = position.seq;
        } else if !(run.0..=run.1).contains(&position.seq) {
            // Not the next call, nor a retry of one in the run: a new run starts here.
            *run = (position.seq, position.seq);
        }
        let first_here = run.0;
        forget_oldest_pipelines(&mut self.runs);
        position.seen_through.saturating_add(1) >= first_here
    }

    /// The error for a unit that must fail because an earlier call of the same pipeline
    /// failed one of its streams and the gateway had not seen that when it sent this.
    pub fn check(&self, position: PipelinePosition, unit: &CommitUnit) -> Option<MetadataError> {
        let poisoned = self.pipelines.get(&position.pipeline)?;
        unit.appends.iter().find_map(|append| {
            let failed_in = *poisoned.get(&(append.basin.clone(), append.stream.clone()))?;
            (failed_in > position.seen_through).then(|| MetadataError::EarlierAppendFailed {
                basin: append.basin.clone(),
                stream: append.stream.clone(),
            })
        })
    }

    /// Remembers the streams of every failed unit of `request`.
    pub fn record(&mut self, position: PipelinePosition, request: &CommitRequest, outcomes: &[UnitOutcome]) {
        for (unit, outcome) in request.units.iter().zip(outcomes) {
            if outcome.is_ok() {
                continue;
            }
            let poisoned = self.pipelines.entry(position.pipeline).or_default();
            for append in &unit.appends {
                poisoned.insert((append.basin.clone(), append.stream.clone()), position.seq);
            }
        }
    }

    /// Forgets failures the gateway has seen: it fails later units of those streams itself.
    pub fn forget_seen(&mut self, position: PipelinePosition) {
        if let Some(poisoned) = self.pipelines.get_mut(&position.pipeline) {
            poisoned.retain(|_, failed_in| *failed_in > position.seen_through);
            if poisoned.is_empty() {
                self.pipelines.remove(&position.pipeline);
            }
        }
        forget_oldest_pipelines(&mut self.pipelines);
    }
}

/// Keeps `by_pipeline` to [`MAX_PIPELINES`], forgetting the oldest-numbered beyond it.
fn forget_oldest_pipelines<V>(by_pipeline: &mut HashMap<u128, V>) {
    if by_pipeline.len() <= MAX_PIPELINES {
        return;
    }
    let mut ids: Vec<u128> = by_pipeline.keys().copied().collect();
    ids.sort_unstable();
    for id in &ids[..ids.len() - MAX_PIPELINES] {
        by_pipeline.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommitAppend;

    fn unit(stream: &str) -> CommitUnit {
        CommitUnit {
            appends: vec![CommitAppend {
                basin: "b".into(),
                stream: stream.into(),
                offset: 0,
                len: 1,
                arrival: 0,
                client_timestamps: vec![None],
                commands: Vec::new(),
                match_seq_num: None,
                fencing_token: None,
                metered_bytes: 1,
                producer: None,
                transaction: None,
            }],
        }
    }

    fn at(seq: u64, seen_through: u64) -> PipelinePosition {
        PipelinePosition { pipeline: 7, seq, seen_through, first_send: true }
    }

    #[test]
    fn a_failure_poisons_its_stream_until_the_gateway_has_seen_it() {
        let mut poison = Poison::default();
        let request = CommitRequest { segment_id: 1, units: vec![unit("a"), unit("b")] };
        let outcomes = vec![Err(MetadataError::SeqNumMismatch { expected: 1, actual: 0 }), Ok(Vec::new())];
        poison.record(at(3, 2), &request, &outcomes);
        // Sent before the gateway saw call 3: stream a fails, stream b does not.
        assert!(matches!(poison.check(at(4, 2), &unit("a")), Some(MetadataError::EarlierAppendFailed { .. })));
        assert!(poison.check(at(4, 2), &unit("b")).is_none());
        // Another pipeline is not affected.
        assert!(poison
            .check(PipelinePosition { pipeline: 8, seq: 4, seen_through: 2, first_send: true }, &unit("a"))
            .is_none());
        // Sent after the gateway saw call 3: the gateway answered it itself.
        assert!(poison.check(at(5, 3), &unit("a")).is_none());
        poison.forget_seen(at(5, 3));
        assert!(poison.pipelines.is_empty());
    }

    #[test]
    fn a_call_is_accepted_only_when_its_unanswered_predecessors_came_here() {
        let mut poison = Poison::default();
        // The first call here, nothing unanswered before it: accepted.
        assert!(poison.earlier_calls_processed_here(at(1, 0)));
        // Calls 1 and 2 unanswered, both here: accepted.
        assert!(poison.earlier_calls_processed_here(at(2, 0)));
        // Call 3 went elsewhere; call 4 comes here with 1-3 unanswered: refused.
        assert!(!poison.earlier_calls_processed_here(at(4, 0)));
        // Call 5, the gateway has seen through call 3: only 4 is unanswered, and it came here.
        assert!(poison.earlier_calls_processed_here(at(5, 3)));
        // A new instance (a takeover) whose first call has unanswered predecessors.
        let mut standby = Poison::default();
        assert!(!standby.earlier_calls_processed_here(at(6, 4)));
        assert!(standby.earlier_calls_processed_here(at(7, 6)));
        // A retry of call 7 is still within the run.
        assert!(standby.earlier_calls_processed_here(at(7, 6)));
    }
}
