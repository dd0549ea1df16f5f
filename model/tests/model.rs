//! The protocol model, explored exhaustively: every property holds with every guard in
//! place, and removing any one guard yields a counterexample, printed step by step.

use stateright::{Checker, Model};

use shale_model::check::counterexample;
use shale_model::{Guards, ShaleModel};

/// Explores `model` depth first (memory: the fingerprints seen and one path), wholly.
fn explore(model: ShaleModel) -> impl Checker<ShaleModel> {
    model.checker().threads(2).spawn_dfs().join()
}

#[test]
fn every_property_holds_with_every_guard_in_place() {
    let checker = explore(ShaleModel::small(Guards::ALL));
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
    assert!(checker.is_done());
}

#[test]
fn without_fencing_a_fenced_instance_assigns_offsets_twice() {
    counterexample(
        ShaleModel::small(Guards { fencing: false, ..Guards::ALL }),
        "offsets are dense and unique from the trim point",
    );
}

#[test]
fn without_the_swap_check_a_compaction_brings_back_trimmed_records() {
    counterexample(
        ShaleModel::small(Guards { swap_check: false, ..Guards::ALL }),
        "offsets are dense and unique from the trim point",
    );
}

#[test]
fn without_the_delete_grace_a_read_finds_its_object_gone() {
    counterexample(
        ShaleModel::small(Guards { delete_grace: 0, ..Guards::ALL }),
        "a read finds its object within its bound",
    );
}

#[test]
fn without_the_halt_a_failed_write_leaves_a_hole_in_the_offsets() {
    counterexample(
        ShaleModel::small(Guards { halt_on_failed_write: false, ..Guards::ALL }),
        "offsets are dense and unique from the trim point",
    );
}

#[test]
fn without_max_commit_age_orphan_collection_deletes_a_committed_object() {
    counterexample(
        ShaleModel::small(Guards { max_commit_age: false, ..Guards::ALL }),
        "no object an entry names is deleted",
    );
}

#[test]
#[ignore = "several times the small configuration's states: cargo test -p shale-model --release -- --ignored"]
fn every_property_holds_in_the_larger_configuration() {
    let checker = explore(ShaleModel::larger(Guards::ALL));
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
}
