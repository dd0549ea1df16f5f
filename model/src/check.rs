//! The two checks every model's tests make: explore it wholly and expect every property
//! to hold, or search it for the first counterexample to one property and print it.

use std::fmt::Debug;
use std::hash::Hash;

use stateright::{Checker, HasDiscoveries, Model};

/// Whether no action is enabled in `state`: a run ends there (where bounded liveness
/// properties are checked).
pub fn run_ends<M: Model>(model: &M, state: &M::State) -> bool {
    let mut actions = Vec::new();
    model.actions(state, &mut actions);
    actions.is_empty()
}

/// Explores `model` wholly, breadth first, prints the state count and fails on any
/// property that does not hold; returns the number of distinct states.
pub fn every_property_holds<M>(model: M) -> usize
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    let checker = model.checker().threads(2).spawn_bfs().join();
    println!("states explored: {} (unique: {})", checker.state_count(), checker.unique_state_count());
    checker.assert_properties();
    assert!(checker.is_done(), "the exploration stopped early");
    checker.unique_state_count()
}

/// Searches `model` breadth first for a counterexample to `property`, fails when there
/// is none, and prints the one found action by action.
pub fn counterexample<M>(model: M, property: &'static str)
where
    M: Model + Debug + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq + Send + Sync,
{
    let described = format!("{model:?}");
    let stop = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = model.checker().finish_when(stop).spawn_bfs().join();
    println!("states explored: {}", checker.state_count());
    let path =
        checker.discovery(property).unwrap_or_else(|| panic!("no counterexample to `{property}` in {described}"));
    println!("`{property}` fails in {described}:");
    for action in path.into_actions() {
        println!("  {action:?}");
    }
}
