//! Kafka transactions over one transactional id, explored exhaustively; removing any one
//! guard yields a counterexample, printed step by step.

use stateright::{Checker, HasDiscoveries, Model};

use shale_model::transactions::{TxnGuards, TxnModel};

const EXACT: &str = "a commit makes visible exactly what its producer staged in that transaction";
const FENCED: &str = "a fenced producer's commit makes nothing visible";

#[test]
fn every_property_holds_with_every_guard_in_place() {
    let checker = TxnModel::small(TxnGuards::ALL).checker().threads(2).spawn_bfs().join();
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
    assert!(checker.is_done());
}

fn counterexample(guards: TxnGuards, property: &'static str) {
    let stop = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = TxnModel::small(guards).checker().finish_when(stop).spawn_bfs().join();
    println!("states explored: {}", checker.state_count());
    let path =
        checker.discovery(property).unwrap_or_else(|| panic!("no counterexample to `{property}` with {guards:?}"));
    println!("`{property}` fails with {guards:?}:");
    for action in path.into_actions() {
        println!("  {action:?}");
    }
}

#[test]
fn without_the_epoch_check_a_zombie_commits() {
    counterexample(TxnGuards { epoch_check: false, ..TxnGuards::ALL }, FENCED);
}

#[test]
fn without_the_abort_at_init_a_new_producer_commits_the_old_ones_records() {
    counterexample(TxnGuards { init_aborts_open: false, ..TxnGuards::ALL }, EXACT);
}

#[test]
fn without_the_epoch_bump_a_timed_out_transaction_commits_in_part() {
    counterexample(TxnGuards { timeout_bumps_epoch: false, ..TxnGuards::ALL }, EXACT);
}
