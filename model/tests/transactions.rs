//! Kafka transactions over one transactional id, explored exhaustively; removing any one
//! guard yields a counterexample, printed step by step.

use shale_model::check::{counterexample, every_property_holds};
use shale_model::transactions::{TxnGuards, TxnModel};

const EXACT: &str = "a commit makes visible exactly what its producer staged in that transaction";
const FENCED: &str = "a fenced producer's commit makes nothing visible";

#[test]
fn every_property_holds_with_every_guard_in_place() {
    every_property_holds(TxnModel::small(TxnGuards::ALL));
}

#[test]
fn without_the_epoch_check_a_zombie_commits() {
    counterexample(TxnModel::small(TxnGuards { epoch_check: false, ..TxnGuards::ALL }), FENCED);
}

#[test]
fn without_the_abort_at_init_a_new_producer_commits_the_old_ones_records() {
    counterexample(TxnModel::small(TxnGuards { init_aborts_open: false, ..TxnGuards::ALL }), EXACT);
}

#[test]
fn without_the_epoch_bump_a_timed_out_transaction_commits_in_part() {
    counterexample(TxnModel::small(TxnGuards { timeout_bumps_epoch: false, ..TxnGuards::ALL }), EXACT);
}
