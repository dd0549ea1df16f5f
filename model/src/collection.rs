//! Orphan collection as a liveness property (`docs/protocol.md`, "Orphan collection"):
//! gateways PUT segments and some stop before committing them; collection passes run
//! every tick (`gc_interval`), each listing the store and deleting objects no entry
//! names that are older than `orphan_grace`, while a commit of an object older than
//! `max_commit_age` is refused (`metadata/src/gc.rs`, `refuse_by_age`). Checked at
//! every run's end: every orphan old enough is gone, and nothing an entry names is.

use std::collections::{BTreeMap, BTreeSet};

use stateright::{Model, Property};

/// The guards, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CollectionGuards {
    /// Collection passes keep running (every `gc_interval`); off: one pass at start-up.
    pub passes_repeat: bool,
    /// A commit of an object older than `max_commit_age` is refused.
    pub max_commit_age: bool,
}

impl CollectionGuards {
    pub const ALL: CollectionGuards = CollectionGuards { passes_repeat: true, max_commit_age: true };
}

#[derive(Clone, Debug)]
pub struct CollectionModel {
    pub guards: CollectionGuards,
    pub gateways: u8,
    pub max_time: u8,
    pub orphan_grace: u8,
    pub max_commit_age: u8,
}

impl CollectionModel {
    pub fn small(guards: CollectionGuards) -> Self {
        CollectionModel { guards, gateways: 2, max_time: 5, orphan_grace: 2, max_commit_age: 1 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    Idle,
    /// PUT at this tick, not committed yet.
    Put(u8),
    Committed,
    /// The gateway stopped (killed, or its commit refused): what it PUT is an orphan.
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CollectionState {
    pub now: u8,
    /// Object (the gateway's index) -> PUT tick.
    pub store: BTreeMap<u8, u8>,
    pub named: BTreeSet<u8>,
    pub segments: Vec<Segment>,
    /// Ticks at which a collection pass ran.
    pub passes: u8,
    pub last_pass: Option<u8>,
    /// A pass deleted an orphan (for the `sometimes` property).
    pub collected: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CollectionAction {
    Tick,
    Put(u8),
    Commit(u8),
    Stop(u8),
    /// A collection pass: lists the store, deletes what no entry names and is older
    /// than the grace (one pass per tick).
    Collect,
}

impl Model for CollectionModel {
    type State = CollectionState;
    type Action = CollectionAction;

    fn init_states(&self) -> Vec<CollectionState> {
        vec![CollectionState {
            now: 0,
            store: BTreeMap::new(),
            named: BTreeSet::new(),
            segments: vec![Segment::Idle; usize::from(self.gateways)],
            passes: 0,
            last_pass: None,
            collected: false,
        }]
    }

    fn actions(&self, state: &CollectionState, actions: &mut Vec<CollectionAction>) {
        if state.now < self.max_time {
            actions.push(CollectionAction::Tick);
        }
        for (g, segment) in state.segments.iter().enumerate() {
            let g = g as u8;
            match segment {
                Segment::Idle => actions.push(CollectionAction::Put(g)),
                Segment::Put(_) => actions.extend([CollectionAction::Commit(g), CollectionAction::Stop(g)]),
                Segment::Committed | Segment::Stopped => {}
            }
        }
        let may_pass = if self.guards.passes_repeat { state.last_pass != Some(state.now) } else { state.passes == 0 };
        if may_pass {
            actions.push(CollectionAction::Collect);
        }
    }

    fn next_state(&self, last: &CollectionState, action: CollectionAction) -> Option<CollectionState> {
        let mut state = last.clone();
        match action {
            CollectionAction::Tick => state.now += 1,
            CollectionAction::Put(g) => {
                state.store.insert(g, state.now);
                state.segments[usize::from(g)] = Segment::Put(state.now);
            }
            CollectionAction::Commit(g) => {
                let Segment::Put(at) = state.segments[usize::from(g)] else { return None };
                if self.guards.max_commit_age && state.now.saturating_sub(at) > self.max_commit_age {
                    state.segments[usize::from(g)] = Segment::Stopped;
                    return Some(state);
                }
                state.named.insert(g);
                state.segments[usize::from(g)] = Segment::Committed;
            }
            CollectionAction::Stop(g) => state.segments[usize::from(g)] = Segment::Stopped,
            CollectionAction::Collect => {
                let now = state.now;
                let named = state.named.clone();
                let before = state.store.len();
                state
                    .store
                    .retain(|obj, put_at| named.contains(obj) || now.saturating_sub(*put_at) <= self.orphan_grace);
                state.collected |= state.store.len() < before;
                state.passes += 1;
                state.last_pass = Some(now);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("no object an entry names is deleted", |_, s: &CollectionState| {
                s.named.iter().all(|obj| s.store.contains_key(obj))
            }),
            Property::always(
                "a run ends with every orphan older than the grace collected",
                |m: &CollectionModel, s: &CollectionState| {
                    !crate::check::run_ends(m, s)
                        || s.store.iter().all(|(obj, put_at)| {
                            s.named.contains(obj) || s.now.saturating_sub(*put_at) <= m.orphan_grace
                        })
                },
            ),
            Property::sometimes("an orphan is collected", |_, s: &CollectionState| s.collected),
        ]
    }
}
