//! Failures that must fail what a gateway sent after them: per commit pipeline (see
//! [`crate::PipelinePosition`]), the streams whose units failed and the call that failed
//! them. Only the writer touches it, under the writer lock.

use std::collections::HashMap;

use crate::{CommitRequest, CommitUnit, MetadataError, PipelinePosition, UnitOutcome};

/// Pipelines remembered at most; beyond it the oldest-numbered are forgotten (a gateway
/// that restarted never sends on its old pipeline again).
const MAX_PIPELINES: usize = 4096;

#[derive(Default)]
pub(crate) struct Poison {
    /// Pipeline -> (basin, stream) -> the call whose unit failed.
    pipelines: HashMap<u128, HashMap<(String, String), u64>>,
}

impl Poison {
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
        if self.pipelines.len() > MAX_PIPELINES {
            let mut ids: Vec<u128> = self.pipelines.keys().copied().collect();
            ids.sort_unstable();
            for id in &ids[..ids.len() - MAX_PIPELINES] {
                self.pipelines.remove(id);
            }
        }
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
        PipelinePosition { pipeline: 7, seq, seen_through }
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
        assert!(poison.check(PipelinePosition { pipeline: 8, seq: 4, seen_through: 2 }, &unit("a")).is_none());
        // Sent after the gateway saw call 3: the gateway answered it itself.
        assert!(poison.check(at(5, 3), &unit("a")).is_none());
        poison.forget_seen(at(5, 3));
        assert!(poison.pipelines.is_empty());
    }
}
