//! A reader's entry cache and its retry when an object is gone, explored exhaustively;
//! removing either guard yields a counterexample, printed step by step.

use stateright::{Checker, HasDiscoveries, Model};

use shale_model::reader::{ReaderGuards, ReaderModel};

const NO_FAIL: &str = "no read fails for an object compaction replaced";

#[test]
fn every_property_holds_with_every_guard_in_place() {
    let checker = ReaderModel::small(ReaderGuards::ALL).checker().threads(2).spawn_bfs().join();
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
    assert!(checker.is_done());
}

fn counterexample(guards: ReaderGuards) {
    let stop = HasDiscoveries::AnyOf([NO_FAIL].into_iter().collect());
    let checker = ReaderModel::small(guards).checker().finish_when(stop).spawn_bfs().join();
    println!("states explored: {}", checker.state_count());
    let path = checker.discovery(NO_FAIL).unwrap_or_else(|| panic!("no counterexample with {guards:?}"));
    println!("`{NO_FAIL}` fails with {guards:?}:");
    for action in path.into_actions() {
        println!("  {action:?}");
    }
}

#[test]
fn without_the_retry_a_cached_entry_fails_the_read() {
    counterexample(ReaderGuards { retry_on_gone: false, ..ReaderGuards::ALL });
}

#[test]
fn retrying_without_forgetting_the_cache_finds_the_same_gone_object() {
    counterexample(ReaderGuards { forget_on_gone: false, ..ReaderGuards::ALL });
}
