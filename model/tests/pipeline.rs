//! The commit pipeline over group commit and the leader lease, explored exhaustively;
//! removing any one guard yields a counterexample, printed step by step.

use shale_model::check::{counterexample, every_property_holds};
use shale_model::pipeline::{PipelineGuards, PipelineModel};

#[test]
fn every_property_holds_with_every_guard_in_place() {
    every_property_holds(PipelineModel::small(PipelineGuards::ALL));
}

#[test]
fn acked_when_applied_an_ack_is_lost_with_a_failed_flush() {
    counterexample(
        PipelineModel::small(PipelineGuards { ack_when_durable: false, ..PipelineGuards::ALL }),
        "an acked unit is durable at its offset",
    );
}

#[test]
fn without_the_halt_a_failed_flush_leaves_a_hole() {
    counterexample(
        PipelineModel::small(PipelineGuards { halt_on_failed_flush: false, ..PipelineGuards::ALL }),
        "durable offsets are dense and unique",
    );
}

#[test]
fn without_poison_at_metadata_a_unit_is_acked_after_an_earlier_failed() {
    counterexample(
        PipelineModel::small(PipelineGuards { poison_at_metadata: false, ..PipelineGuards::ALL }),
        "no unit is acked after an earlier unit of its stream failed",
    );
}

#[test]
fn without_fencing_a_paused_leader_writes_offsets_the_new_one_assigned() {
    counterexample(
        PipelineModel::small(PipelineGuards { fencing: false, ..PipelineGuards::ALL }),
        "durable offsets are dense and unique",
    );
}

#[test]
fn a_standby_that_ignores_a_lapsed_lease_never_serves() {
    counterexample(
        PipelineModel::small(PipelineGuards { standby_takes_lapsed_lease: false, ..PipelineGuards::ALL }),
        "a run ends with every caller answered and a serving leader",
    );
}

#[test]
fn without_refusing_after_calls_elsewhere_a_failover_acks_past_a_failed_unit() {
    counterexample(
        PipelineModel::small(PipelineGuards { refuse_after_calls_elsewhere: false, ..PipelineGuards::ALL }),
        "no unit is acked after an earlier unit of its stream failed",
    );
}

#[test]
fn committed_in_upload_order_calls_are_refused_and_every_property_still_holds() {
    // Metadata refuses a call whose predecessors it did not process, so a committer that
    // sends out of seal order fails appends (the refusal) rather than misorders them.
    every_property_holds(PipelineModel::small(PipelineGuards { commit_in_seal_order: false, ..PipelineGuards::ALL }));
}

#[test]
fn committed_in_upload_order_without_the_refusal_a_later_unit_takes_an_earlier_offset() {
    counterexample(
        PipelineModel::small(PipelineGuards {
            commit_in_seal_order: false,
            refuse_after_calls_elsewhere: false,
            ..PipelineGuards::ALL
        }),
        "a stream's units hold offsets in seal order",
    );
}
