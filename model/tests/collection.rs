//! Orphan collection's liveness, explored exhaustively; removing either guard yields a
//! counterexample, printed step by step.

use shale_model::check::{counterexample, every_property_holds};
use shale_model::collection::{CollectionGuards, CollectionModel};

#[test]
fn every_property_holds_with_every_guard_in_place() {
    every_property_holds(CollectionModel::small(CollectionGuards::ALL));
}

#[test]
fn a_collector_that_passes_once_leaves_an_orphan_for_good() {
    counterexample(
        CollectionModel::small(CollectionGuards { passes_repeat: false, ..CollectionGuards::ALL }),
        "a run ends with every orphan older than the grace collected",
    );
}

#[test]
fn without_max_commit_age_a_late_commit_names_a_collected_object() {
    counterexample(
        CollectionModel::small(CollectionGuards { max_commit_age: false, ..CollectionGuards::ALL }),
        "no object an entry names is deleted",
    );
}
