//! Orphan collection's liveness, explored exhaustively; removing either guard yields a
//! counterexample, printed step by step.

use stateright::{Checker, HasDiscoveries, Model};

use shale_model::collection::{CollectionGuards, CollectionModel};

#[test]
fn every_property_holds_with_every_guard_in_place() {
    let checker = CollectionModel::small(CollectionGuards::ALL).checker().threads(2).spawn_bfs().join();
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
    assert!(checker.is_done());
}

fn counterexample(guards: CollectionGuards, property: &'static str) {
    let stop = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = CollectionModel::small(guards).checker().finish_when(stop).spawn_bfs().join();
    println!("states explored: {}", checker.state_count());
    let path =
        checker.discovery(property).unwrap_or_else(|| panic!("no counterexample to `{property}` with {guards:?}"));
    println!("`{property}` fails with {guards:?}:");
    for action in path.into_actions() {
        println!("  {action:?}");
    }
}

#[test]
fn a_collector_that_passes_once_leaves_an_orphan_for_good() {
    counterexample(
        CollectionGuards { passes_repeat: false, ..CollectionGuards::ALL },
        "a run ends with every orphan older than the grace collected",
    );
}

#[test]
fn without_max_commit_age_a_late_commit_names_a_collected_object() {
    counterexample(
        CollectionGuards { max_commit_age: false, ..CollectionGuards::ALL },
        "no object an entry names is deleted",
    );
}
