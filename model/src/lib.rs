//! A model of Shale's write, fencing, compaction and collection protocol, explored
//! exhaustively with `stateright` (`docs/protocol.md`).
//!
//! Processes: gateways (PUT a segment, then commit it through a metadata instance, then
//! ack), two metadata instances (the second may take over: opening the database fences
//! the first, whose next write fails and halts it), a compactor (plan, PUT the merged
//! object, swap), reclaim (a trim, reference counts, releasing objects and deleting them
//! after `delete_grace`), orphan collection (lists an unreferenced old object, then
//! deletes it), and a reader (looks an entry up, then fetches its object). Time moves in
//! ticks. What one SlateDB write batch does is one action; everything else interleaves,
//! and a gateway may stop for good between any two of its steps.
//!
//! [`Guards`] switch the protocol's guards on and off: the mutation tests turn each off
//! and expect a counterexample.
//!
//! Five smaller models open up what this one keeps atomic, each with its own guards and
//! mutation tests: [`pipeline`] (a gateway's commit pipeline over group commit and the
//! leader lease), [`tiering`] (the table tier's commit), [`transactions`] (Kafka
//! transactions), [`reader`] (the entry cache and the retry when an object is gone) and
//! [`collection`] (orphan collection's liveness).

pub mod check;
pub mod collection;
pub mod pipeline;
pub mod reader;
pub mod tiering;
pub mod transactions;

use std::collections::{BTreeMap, BTreeSet};

use stateright::{Model, Property};

/// A record: which gateway wrote it (each writes one).
pub type Rec = u8;
/// An object's id in the store.
pub type Obj = u8;

/// The guards the code has, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guards {
    /// A write by an instance whose epoch is not the database's fails and halts it
    /// (`slatedb` fencing; `metadata/src/halt.rs`).
    pub fencing: bool,
    /// A compaction swap applies only if the planned entries are still indexed byte for
    /// byte (`metadata/src/compaction.rs`, `still_indexed`).
    pub swap_check: bool,
    /// A released object is deleted only `delete_grace` ticks after its release
    /// (`metadata/src/reclaim.rs`, `delete_released`); 0 turns the grace off.
    pub delete_grace: u8,
    /// An instance whose durable write failed after it assigned offsets in memory stops
    /// (`metadata/src/halt.rs`): it never assigns an offset after the hole that write left.
    pub halt_on_failed_write: bool,
    /// A commit of an object older than `max_commit_age` is refused
    /// (`metadata/src/commit.rs`, `refuse_by_age`), so orphan collection, which waits
    /// longer, never deletes an object a commit may still name.
    pub max_commit_age: bool,
}

impl Guards {
    /// Every guard, with the grace longer than the longest read (`read_ticks`).
    pub const ALL: Guards =
        Guards { fencing: true, swap_check: true, delete_grace: 2, halt_on_failed_write: true, max_commit_age: true };
}

/// The configuration explored.
#[derive(Clone, Debug)]
pub struct ShaleModel {
    pub guards: Guards,
    /// Gateways, each appending one record; gateway `g` writes to stream `g % streams`.
    pub gateways: u8,
    pub streams: u8,
    /// Ticks explored.
    pub max_time: u8,
    /// Ticks a read takes at most between its lookup and its fetch.
    pub read_ticks: u8,
    /// Ticks after which an unreferenced object counts as an orphan.
    pub orphan_grace: u8,
    /// Ticks after its PUT within which an object may be committed (below `orphan_grace`).
    pub max_commit_age: u8,
}

impl ShaleModel {
    /// The configuration CI explores: 3 gateways over 2 streams (two writers to stream 0),
    /// 2 metadata instances, a compactor, a reader, 3 ticks.
    pub fn small(guards: Guards) -> Self {
        ShaleModel { guards, gateways: 3, streams: 2, max_time: 3, read_ticks: 1, orphan_grace: 2, max_commit_age: 1 }
    }

    /// A larger one (`cargo test -p shale-model --release -- --ignored`): the same
    /// processes over 4 ticks, with longer graces.
    pub fn larger(guards: Guards) -> Self {
        ShaleModel { guards, gateways: 3, streams: 2, max_time: 4, read_ticks: 1, orphan_grace: 3, max_commit_age: 2 }
    }
}

/// One index entry: its stream, first offset, records and the object holding them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    pub stream: u8,
    pub first: u8,
    pub recs: Vec<Rec>,
    pub obj: Obj,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Gateway {
    Idle,
    Uploaded(Obj),
    Acked,
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instance {
    pub epoch: u8,
    /// The tails it knows (its stream cache): what it assigns offsets from.
    pub tails: Vec<u8>,
    pub halted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compactor {
    Idle,
    Planned(Vec<Entry>),
    Uploaded(Vec<Entry>, Obj),
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reader {
    Idle,
    LookedUp { entry: Entry, at: u8 },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: u8,
    /// Object id -> (PUT time, records).
    pub store: BTreeMap<Obj, (u8, Vec<Rec>)>,
    pub next_obj: Obj,
    /// The database: the writer's epoch, the index, references and released objects.
    pub epoch: u8,
    pub index: BTreeSet<Entry>,
    pub tails: Vec<u8>,
    pub trim: Vec<u8>,
    pub refs: BTreeMap<Obj, u8>,
    pub released: BTreeMap<Obj, u8>,
    pub instances: Vec<Instance>,
    pub took_over: bool,
    pub gateways: Vec<Gateway>,
    /// Acked records with their stream and offset.
    pub acked: BTreeSet<(u8, u8, Rec)>,
    pub compactor: Compactor,
    pub trimmed: bool,
    /// Objects orphan collection listed as unreferenced and old, to delete.
    pub orphans_listed: BTreeSet<Obj>,
    pub reader: Reader,
    /// A fetch found its object gone within the read's bound.
    pub read_missed: bool,
    /// A swap was applied (for the `sometimes` property).
    pub swapped: bool,
    /// A commit's durable write failed (once per run).
    pub write_failed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    /// Gateway `g` PUTs its segment (`gateway/src/pipeline.rs`, upload).
    Put(u8),
    /// Gateway `g` commits through instance `i` (`Metadata::commit`); acked when durable.
    Commit(u8, u8),
    /// Gateway `g`'s commit through instance `i` assigns its offset, then its durable
    /// write fails (a store error on the WAL): nothing is acked.
    FailWrite(u8, u8),
    /// Gateway `g` stops for good (kill -9).
    StopGateway(u8),
    /// Instance 1 opens the database (`Metadata::open`, fencing the other).
    TakeOver,
    /// Compactor plans stream `s` (`plan_compaction`).
    Plan(u8),
    CompactPut,
    /// `commit_compaction` through the current writer.
    Swap,
    /// Stream 0 is trimmed through its first entry (a trim command and its reclaim).
    Trim,
    /// `delete_released`: a released object past its grace.
    DeleteReleased(Obj),
    /// Orphan collection lists an object with no references, older than `orphan_grace`.
    ListOrphan(Obj),
    /// And deletes it.
    DeleteOrphan(Obj),
    /// The reader looks up an entry (`Reader::entries`) and fetches it later.
    Lookup(Entry),
    Fetch,
}

impl ShaleModel {
    fn writer(&self, state: &State) -> Option<usize> {
        state.instances.iter().position(|i| !i.halted && i.epoch == state.epoch)
    }

    /// Removes `entries` from the index and their references, releasing objects left
    /// with none (the batch of a trim's reclaim or a swap).
    fn remove_entries(state: &mut State, entries: &[Entry]) {
        for entry in entries {
            state.index.remove(entry);
            if let Some(count) = state.refs.get_mut(&entry.obj) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    state.refs.remove(&entry.obj);
                    state.released.insert(entry.obj, state.now);
                }
            }
        }
    }
}

impl Model for ShaleModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let streams = usize::from(self.streams);
        vec![State {
            now: 0,
            store: BTreeMap::new(),
            next_obj: 0,
            epoch: 1,
            index: BTreeSet::new(),
            tails: vec![0; streams],
            trim: vec![0; streams],
            refs: BTreeMap::new(),
            released: BTreeMap::new(),
            instances: vec![
                Instance { epoch: 1, tails: vec![0; streams], halted: false },
                Instance { epoch: 0, tails: vec![0; streams], halted: true },
            ],
            took_over: false,
            gateways: vec![Gateway::Idle; usize::from(self.gateways)],
            acked: BTreeSet::new(),
            compactor: Compactor::Idle,
            trimmed: false,
            orphans_listed: BTreeSet::new(),
            reader: Reader::Idle,
            read_missed: false,
            swapped: false,
            write_failed: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.max_time {
            actions.push(Action::Tick);
        }
        for (g, gateway) in state.gateways.iter().enumerate() {
            let g = g as u8;
            match gateway {
                Gateway::Idle => actions.push(Action::Put(g)),
                Gateway::Uploaded(_) => {
                    for (i, instance) in state.instances.iter().enumerate() {
                        if !instance.halted {
                            actions.push(Action::Commit(g, i as u8));
                            if !state.write_failed && instance.epoch == state.epoch {
                                actions.push(Action::FailWrite(g, i as u8));
                            }
                        }
                    }
                    actions.push(Action::StopGateway(g));
                }
                Gateway::Acked | Gateway::Stopped => {}
            }
        }
        if !state.took_over {
            actions.push(Action::TakeOver);
        }
        match &state.compactor {
            Compactor::Idle => (0..self.streams).for_each(|s| actions.push(Action::Plan(s))),
            Compactor::Planned(_) => actions.push(Action::CompactPut),
            Compactor::Uploaded(..) => actions.push(Action::Swap),
            Compactor::Done => {}
        }
        if !state.trimmed && state.index.iter().any(|e| e.stream == 0) {
            actions.push(Action::Trim);
        }
        for (&obj, &at) in &state.released {
            if state.now.saturating_sub(at) >= self.guards.delete_grace && state.store.contains_key(&obj) {
                actions.push(Action::DeleteReleased(obj));
            }
        }
        for (&obj, &(put_at, _)) in &state.store {
            let referenced = state.refs.contains_key(&obj) || state.released.contains_key(&obj);
            if !referenced
                && state.now.saturating_sub(put_at) > self.orphan_grace
                && !state.orphans_listed.contains(&obj)
            {
                actions.push(Action::ListOrphan(obj));
            }
        }
        for &obj in &state.orphans_listed {
            actions.push(Action::DeleteOrphan(obj));
        }
        match &state.reader {
            // Reads of stream 0, the one trims and collection change under them.
            Reader::Idle => {
                state.index.iter().filter(|e| e.stream == 0).for_each(|e| actions.push(Action::Lookup(e.clone())))
            }
            Reader::LookedUp { .. } => actions.push(Action::Fetch),
            Reader::Done => {}
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => state.now += 1,
            Action::Put(g) => {
                let obj = state.next_obj;
                state.next_obj += 1;
                state.store.insert(obj, (state.now, vec![g]));
                state.gateways[usize::from(g)] = Gateway::Uploaded(obj);
            }
            Action::StopGateway(g) => state.gateways[usize::from(g)] = Gateway::Stopped,
            Action::FailWrite(g, i) => {
                let (i, stream) = (usize::from(i), usize::from(g % self.streams));
                state.write_failed = true;
                if self.guards.halt_on_failed_write {
                    state.instances[i].halted = true;
                } else {
                    // Carries on with the offset it assigned in memory: a hole.
                    state.instances[i].tails[stream] += 1;
                }
            }
            Action::Commit(g, i) => {
                let Gateway::Uploaded(obj) = state.gateways[usize::from(g)] else { return None };
                let i = usize::from(i);
                if self.guards.fencing && state.instances[i].epoch != state.epoch {
                    // The write fails as fenced: the instance halts; the gateway retries.
                    state.instances[i].halted = true;
                    return Some(state);
                }
                let put_at = state.store.get(&obj).map_or(0, |(at, _)| *at);
                if self.guards.max_commit_age && state.now.saturating_sub(put_at) > self.max_commit_age {
                    // Refused as too old: the gateway gives up on this segment.
                    state.gateways[usize::from(g)] = Gateway::Stopped;
                    return Some(state);
                }
                let stream = g % self.streams;
                let first = state.instances[i].tails[usize::from(stream)];
                state.instances[i].tails[usize::from(stream)] = first + 1;
                let tail = &mut state.tails[usize::from(stream)];
                *tail = (*tail).max(first + 1);
                state.index.insert(Entry { stream, first, recs: vec![g], obj });
                *state.refs.entry(obj).or_default() += 1;
                state.acked.insert((stream, first, g));
                state.gateways[usize::from(g)] = Gateway::Acked;
            }
            Action::TakeOver => {
                state.took_over = true;
                state.epoch += 1;
                state.instances[1] = Instance { epoch: state.epoch, tails: state.tails.clone(), halted: false };
            }
            Action::Plan(s) => {
                let planned: Vec<Entry> = state.index.iter().filter(|e| e.stream == s).cloned().collect();
                if planned.is_empty() {
                    return None;
                }
                state.compactor = Compactor::Planned(planned);
            }
            Action::CompactPut => {
                let Compactor::Planned(planned) = &state.compactor else { return None };
                let planned = planned.clone();
                let obj = state.next_obj;
                state.next_obj += 1;
                let recs: Vec<Rec> = planned.iter().flat_map(|e| e.recs.clone()).collect();
                state.store.insert(obj, (state.now, recs));
                state.compactor = Compactor::Uploaded(planned, obj);
            }
            Action::Swap => {
                let Compactor::Uploaded(planned, obj) = &state.compactor else { return None };
                let (planned, obj) = (planned.clone(), *obj);
                state.compactor = Compactor::Done;
                self.writer(&state)?;
                if self.guards.swap_check && !planned.iter().all(|e| state.index.contains(e)) {
                    return Some(state);
                }
                let put_at = state.store.get(&obj).map_or(0, |(at, _)| *at);
                if self.guards.max_commit_age && state.now.saturating_sub(put_at) > self.max_commit_age {
                    return Some(state);
                }
                Self::remove_entries(&mut state, &planned);
                let first = planned.iter().map(|e| e.first).min().unwrap_or(0);
                let recs = planned.iter().flat_map(|e| e.recs.clone()).collect();
                state.index.insert(Entry { stream: planned[0].stream, first, recs, obj });
                *state.refs.entry(obj).or_default() += 1;
                state.swapped = true;
            }
            Action::Trim => {
                state.trimmed = true;
                let first = state.index.iter().find(|e| e.stream == 0).cloned()?;
                state.trim[0] = first.first + first.recs.len() as u8;
                let below: Vec<Entry> =
                    state.index.iter().filter(|e| e.stream == 0 && e.first < state.trim[0]).cloned().collect();
                Self::remove_entries(&mut state, &below);
                state.acked.retain(|&(stream, offset, _)| stream != 0 || offset >= state.trim[0]);
            }
            Action::DeleteReleased(obj) => {
                state.store.remove(&obj);
                state.released.remove(&obj);
            }
            Action::ListOrphan(obj) => {
                state.orphans_listed.insert(obj);
            }
            Action::DeleteOrphan(obj) => {
                state.orphans_listed.remove(&obj);
                state.store.remove(&obj);
            }
            Action::Lookup(entry) => state.reader = Reader::LookedUp { entry, at: state.now },
            Action::Fetch => {
                let Reader::LookedUp { entry, at } = &state.reader else { return None };
                let in_bound = state.now.saturating_sub(*at) <= self.read_ticks;
                if in_bound && !state.store.contains_key(&entry.obj) {
                    state.read_missed = true;
                }
                state.reader = Reader::Done;
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("an acked record is never lost and keeps its offset", |_, s: &State| {
                s.acked.iter().all(|&(stream, offset, rec)| {
                    s.index.iter().any(|e| {
                        let at = e.recs.iter().position(|&r| r == rec);
                        e.stream == stream
                            && at.is_some_and(|at| e.first + at as u8 == offset)
                            && s.store.get(&e.obj).is_some_and(|(_, recs)| recs.contains(&rec))
                    })
                })
            }),
            Property::always("offsets are dense and unique from the trim point", |_, s: &State| {
                (0..s.tails.len()).all(|stream| {
                    let mut next = s.trim[stream];
                    for e in s.index.iter().filter(|e| usize::from(e.stream) == stream) {
                        if e.first != next {
                            return false;
                        }
                        next += e.recs.len() as u8;
                    }
                    true
                })
            }),
            Property::always("no object an entry names is deleted", |_, s: &State| {
                s.index.iter().all(|e| s.store.contains_key(&e.obj))
            }),
            Property::always("reference counts are exact", |_, s: &State| {
                let mut counted: BTreeMap<Obj, u8> = BTreeMap::new();
                for e in &s.index {
                    *counted.entry(e.obj).or_default() += 1;
                }
                counted == s.refs
            }),
            Property::always("a read finds its object within its bound", |_, s: &State| !s.read_missed),
            Property::sometimes("a compaction swap applies", |_, s: &State| s.swapped),
            Property::sometimes("an orphan is collected", |_, s: &State| {
                s.gateways.contains(&Gateway::Stopped) && s.store.len() < usize::from(s.next_obj)
            }),
            Property::sometimes("a released object is deleted", |_, s: &State| {
                s.trimmed && s.released.is_empty() && s.store.len() < usize::from(s.next_obj)
            }),
        ]
    }
}
