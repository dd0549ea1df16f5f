//! A reader's entry cache and its retry when an object is gone, explored exhaustively;
//! removing either guard yields a counterexample, printed step by step.

use shale_model::check::{counterexample, every_property_holds};
use shale_model::reader::{ReaderGuards, ReaderModel};

const NO_FAIL: &str = "no read fails for an object compaction replaced";

#[test]
fn every_property_holds_with_every_guard_in_place() {
    every_property_holds(ReaderModel::small(ReaderGuards::ALL));
}

#[test]
fn without_the_retry_a_cached_entry_fails_the_read() {
    counterexample(ReaderModel::small(ReaderGuards { retry_on_gone: false, ..ReaderGuards::ALL }), NO_FAIL);
}

#[test]
fn retrying_without_forgetting_the_cache_finds_the_same_gone_object() {
    counterexample(ReaderModel::small(ReaderGuards { forget_on_gone: false, ..ReaderGuards::ALL }), NO_FAIL);
}
