//! The table tier's commit (`docs/protocol.md`, "Tiering"): a pass reads the table's
//! commit record (`state.json`), reads the log from the positions it names, PUTs a data
//! file, then replaces the commit record by a conditional PUT on the version it read
//! (`tables/src/tiering.rs`). Two tierers run at once (a compactor paused past a
//! takeover while another tiers the same basin), either may crash between any two
//! steps, and collection deletes files the commit record does not name.

use std::collections::BTreeMap;

use stateright::{Model, Property};

/// A data file's key: the pass it was written for, and the attempt that wrote it (0
/// when names are the pass alone).
pub type FileName = (u8, u8);

/// The guards of the tiering commit, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TieringGuards {
    /// The commit record is replaced only by a PUT conditional on the version read.
    pub conditional_commit: bool,
    /// A pass names its files by its pass number and its own attempt id, so another
    /// attempt of the same pass (a retry, or a paused tierer) never overwrites them.
    pub files_named_per_attempt: bool,
    /// Collection deletes an unnamed file only if its pass is committed (by another
    /// attempt): a file of a pass not yet committed may be about to be named.
    pub collect_only_committed_passes: bool,
}

impl TieringGuards {
    pub const ALL: TieringGuards =
        TieringGuards { conditional_commit: true, files_named_per_attempt: true, collect_only_committed_passes: true };
}

#[derive(Clone, Debug)]
pub struct TieringModel {
    pub guards: TieringGuards,
    /// Records appended to the stream over the run.
    pub records: u8,
    /// Passes committed at most.
    pub passes: u8,
}

impl TieringModel {
    pub fn small(guards: TieringGuards) -> Self {
        TieringModel { guards, records: 3, passes: 2 }
    }
}

/// `state.json`: its version, pass number, where tiering goes on from, the files named.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Commit {
    pub version: u8,
    pub pass: u8,
    pub next_seq: u8,
    pub files: Vec<FileName>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tierer {
    Idle,
    /// Read the commit record at this version.
    Read(Commit),
    /// PUT `file` holding records `[read.next_seq, to)`.
    Wrote {
        read: Commit,
        file: FileName,
        to: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TieringState {
    /// Records in the log: `0..tail`.
    pub tail: u8,
    pub commit: Commit,
    /// Data files on the store: the records `[from, to)` each holds.
    pub files: BTreeMap<FileName, (u8, u8)>,
    pub tierers: Vec<Tierer>,
    /// Crashes so far (bounded to one per run).
    pub crashed: bool,
    /// A file was collected (for the `sometimes` property).
    pub collected: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TieringAction {
    Append,
    /// Tierer `t` reads `state.json` (`read_state`).
    ReadState(u8),
    /// Tierer `t` reads the log up to `to` and PUTs the pass's file (`write_parquet`).
    WriteFile(u8, u8),
    /// Tierer `t` commits (`commit_state`, `PutMode::Update`).
    Commit(u8),
    /// Tierer `t` crashes: it starts over.
    Crash(u8),
    /// Collection deletes a file `state.json` does not name (`maintenance`).
    Collect(FileName),
}

impl Model for TieringModel {
    type State = TieringState;
    type Action = TieringAction;

    fn init_states(&self) -> Vec<TieringState> {
        vec![TieringState {
            tail: 0,
            commit: Commit { version: 0, pass: 0, next_seq: 0, files: Vec::new() },
            files: BTreeMap::new(),
            tierers: vec![Tierer::Idle; 2],
            crashed: false,
            collected: false,
        }]
    }

    fn actions(&self, state: &TieringState, actions: &mut Vec<TieringAction>) {
        if state.tail < self.records {
            actions.push(TieringAction::Append);
        }
        for (t, tierer) in state.tierers.iter().enumerate() {
            let t = t as u8;
            match tierer {
                Tierer::Idle if state.commit.pass < self.passes => actions.push(TieringAction::ReadState(t)),
                Tierer::Idle => {}
                Tierer::Read(read) => {
                    (read.next_seq + 1..=state.tail).for_each(|to| actions.push(TieringAction::WriteFile(t, to)));
                }
                Tierer::Wrote { .. } => actions.push(TieringAction::Commit(t)),
            }
            if !state.crashed && *tierer != Tierer::Idle {
                actions.push(TieringAction::Crash(t));
            }
        }
        for &name in state.files.keys() {
            let named = state.commit.files.contains(&name);
            let committed_pass = name.0 <= state.commit.pass;
            if !named && (committed_pass || !self.guards.collect_only_committed_passes) {
                actions.push(TieringAction::Collect(name));
            }
        }
    }

    fn next_state(&self, last: &TieringState, action: TieringAction) -> Option<TieringState> {
        let mut state = last.clone();
        match action {
            TieringAction::Append => state.tail += 1,
            TieringAction::ReadState(t) => state.tierers[usize::from(t)] = Tierer::Read(state.commit.clone()),
            TieringAction::WriteFile(t, to) => {
                let Tierer::Read(read) = &state.tierers[usize::from(t)] else { return None };
                let attempt = if self.guards.files_named_per_attempt { t + 1 } else { 0 };
                let file = (read.pass + 1, attempt);
                state.files.insert(file, (read.next_seq, to));
                state.tierers[usize::from(t)] = Tierer::Wrote { read: read.clone(), file, to };
            }
            TieringAction::Commit(t) => {
                let Tierer::Wrote { read, file, to } = state.tierers[usize::from(t)].clone() else { return None };
                state.tierers[usize::from(t)] = Tierer::Idle;
                if self.guards.conditional_commit && read.version != state.commit.version {
                    return Some(state);
                }
                let mut files = read.files.clone();
                files.push(file);
                state.commit = Commit { version: state.commit.version + 1, pass: read.pass + 1, next_seq: to, files };
            }
            TieringAction::Crash(t) => {
                state.crashed = true;
                state.tierers[usize::from(t)] = Tierer::Idle;
            }
            TieringAction::Collect(name) => {
                state.files.remove(&name);
                state.collected = true;
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("the table holds every tiered record exactly once", |_, s: &TieringState| {
                let mut held: Vec<u8> = Vec::new();
                for name in &s.commit.files {
                    let Some(&(from, to)) = s.files.get(name) else { return false };
                    held.extend(from..to);
                }
                held.sort_unstable();
                held == (0..s.commit.next_seq).collect::<Vec<u8>>()
            }),
            Property::sometimes("two passes commit", |_, s: &TieringState| s.commit.pass == 2),
            Property::sometimes("an unnamed file is collected", |_, s: &TieringState| s.collected),
        ]
    }
}
