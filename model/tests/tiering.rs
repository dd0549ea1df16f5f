//! The table tier's commit, explored exhaustively; removing any one guard yields a
//! counterexample, printed step by step.

use shale_model::check::{counterexample, every_property_holds};
use shale_model::tiering::{TieringGuards, TieringModel};
use stateright::Model;

const EXACTLY_ONCE: &str = "the table holds every tiered record exactly once";

#[test]
fn every_property_holds_with_every_guard_in_place() {
    every_property_holds(TieringModel::small(TieringGuards::ALL));
}

#[test]
fn an_unconditional_commit_tiers_records_twice() {
    counterexample(
        TieringModel::small(TieringGuards { conditional_commit: false, ..TieringGuards::ALL }),
        EXACTLY_ONCE,
    );
}

#[test]
fn files_named_by_pass_alone_are_overwritten_by_a_paused_tierer() {
    counterexample(
        TieringModel::small(TieringGuards { files_named_per_attempt: false, ..TieringGuards::ALL }),
        EXACTLY_ONCE,
    );
}

#[test]
fn collecting_files_of_uncommitted_passes_loses_what_a_commit_names() {
    counterexample(
        TieringModel::small(TieringGuards { collect_only_committed_passes: false, ..TieringGuards::ALL }),
        EXACTLY_ONCE,
    );
}

/// The shortest story, replayed step by step: two tierers read the same commit record;
/// the first commits pass 1 naming its file; the second, paused until then, writes its
/// own pass 1 over that same key: the committed file now holds a record the commit
/// record says is not tiered, and the next pass tiers it again.
#[test]
fn a_paused_tierer_overwrites_a_committed_file_named_by_pass_alone() {
    use shale_model::tiering::TieringAction::*;
    let story = [Append, Append, ReadState(0), ReadState(1), WriteFile(0, 1), Commit(0), WriteFile(1, 2)];
    for (guards, holds) in
        [(TieringGuards::ALL, true), (TieringGuards { files_named_per_attempt: false, ..TieringGuards::ALL }, false)]
    {
        let model = TieringModel::small(guards);
        let mut state = model.init_states().pop().unwrap();
        for action in story.clone() {
            state = model.next_state(&state, action).unwrap();
        }
        let properties = model.properties();
        let exactly_once = properties.iter().find(|p| p.name == EXACTLY_ONCE).unwrap();
        assert_eq!((exactly_once.condition)(&model, &state), holds, "{guards:?}: {state:?}");
    }
}
