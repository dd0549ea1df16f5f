//! A reader's entry cache and its retry when an object is gone (`docs/protocol.md`,
//! "Readers"): a stream of two records in two objects, a compaction that swaps them for
//! one merged object and releases the two, their deletion after `delete_grace`, and a
//! reader that caches the entries it looked up for `ttl` ticks, fetches one entry at a
//! time, and on a gone object forgets what it cached and looks the stream up again
//! (`reader/src/read.rs`, `read_with`; `reader/src/cache.rs`, `forget`).

use stateright::{Model, Property};

/// An index entry: the offset it holds from, how many records, and its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CachedEntry {
    pub first: u8,
    pub count: u8,
    pub obj: u8,
}

/// The guards, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReaderGuards {
    /// A read that finds an object gone looks the stream up again.
    pub retry_on_gone: bool,
    /// And first forgets the cached entries from there (else it finds them again).
    pub forget_on_gone: bool,
}

impl ReaderGuards {
    pub const ALL: ReaderGuards = ReaderGuards { retry_on_gone: true, forget_on_gone: true };
}

#[derive(Clone, Debug)]
pub struct ReaderModel {
    pub guards: ReaderGuards,
    /// Ticks a cached entry is used for (`INDEX_TTL`).
    pub ttl: u8,
    /// Ticks after its release an object is deleted (`delete_grace`).
    pub delete_grace: u8,
    pub max_time: u8,
}

impl ReaderModel {
    /// A cache that outlives the grace (as `INDEX_TTL`, 30 s, equals the default
    /// `delete_grace`, 30 s): a cached entry can name a deleted object.
    pub fn small(guards: ReaderGuards) -> Self {
        ReaderModel { guards, ttl: 3, delete_grace: 1, max_time: 4 }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReadStep {
    Idle,
    /// Reading from `next`, with what it returned so far and the lookups it retried.
    Reading {
        next: u8,
        got: Vec<u8>,
        retries: u8,
    },
    Done(Vec<u8>),
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReaderState {
    pub now: u8,
    pub index: Vec<CachedEntry>,
    /// Objects in the store.
    pub objects: Vec<u8>,
    /// Released objects with their release time.
    pub released: Vec<(u8, u8)>,
    pub swapped: bool,
    /// The reader's cache: the entries it looked up, and when.
    pub cache: Option<(Vec<CachedEntry>, u8)>,
    pub read: ReadStep,
    pub reads_done: u8,
    /// A read found its object gone and looked the stream up again.
    pub retried: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReaderAction {
    Tick,
    /// Compaction swaps the two entries for one in a merged object and releases theirs.
    Swap,
    /// `delete_released`: an object past its grace.
    Delete(u8),
    /// A read from offset 0 starts.
    StartRead,
    /// The read takes the entry holding its next offset (from its cache while fresh, else
    /// from metadata, caching them) and fetches that entry's object.
    Fetch,
}

const TAIL: u8 = 2;
/// Retries after a gone object (`MAX_GONE_RETRIES`).
const MAX_RETRIES: u8 = 2;

impl Model for ReaderModel {
    type State = ReaderState;
    type Action = ReaderAction;

    fn init_states(&self) -> Vec<ReaderState> {
        vec![ReaderState {
            now: 0,
            index: vec![CachedEntry { first: 0, count: 1, obj: 0 }, CachedEntry { first: 1, count: 1, obj: 1 }],
            objects: vec![0, 1],
            released: Vec::new(),
            swapped: false,
            cache: None,
            read: ReadStep::Idle,
            reads_done: 0,
            retried: false,
        }]
    }

    fn actions(&self, state: &ReaderState, actions: &mut Vec<ReaderAction>) {
        if state.now < self.max_time {
            actions.push(ReaderAction::Tick);
        }
        if !state.swapped {
            actions.push(ReaderAction::Swap);
        }
        for &(obj, at) in &state.released {
            if state.now.saturating_sub(at) >= self.delete_grace && state.objects.contains(&obj) {
                actions.push(ReaderAction::Delete(obj));
            }
        }
        match state.read {
            ReadStep::Idle => actions.push(ReaderAction::StartRead),
            ReadStep::Reading { .. } => actions.push(ReaderAction::Fetch),
            // A second read after the first, so the second can run on a stale cache.
            ReadStep::Done(_) if state.reads_done < 2 => actions.push(ReaderAction::StartRead),
            ReadStep::Done(_) | ReadStep::Failed => {}
        }
    }

    fn next_state(&self, last: &ReaderState, action: ReaderAction) -> Option<ReaderState> {
        let mut state = last.clone();
        match action {
            ReaderAction::Tick => state.now += 1,
            ReaderAction::Swap => {
                state.swapped = true;
                state.objects.push(2);
                state.index = vec![CachedEntry { first: 0, count: 2, obj: 2 }];
                state.released = vec![(0, state.now), (1, state.now)];
            }
            ReaderAction::Delete(obj) => {
                state.objects.retain(|&o| o != obj);
                state.released.retain(|&(o, _)| o != obj);
            }
            ReaderAction::StartRead => state.read = ReadStep::Reading { next: 0, got: Vec::new(), retries: 0 },
            ReaderAction::Fetch => {
                let ReadStep::Reading { next, mut got, retries } = state.read.clone() else { return None };
                let fresh = state.cache.as_ref().filter(|(_, at)| state.now.saturating_sub(*at) < self.ttl);
                let entries = match fresh {
                    Some((entries, _)) => entries.clone(),
                    None => {
                        state.cache = Some((state.index.clone(), state.now));
                        state.index.clone()
                    }
                };
                let entry = *entries.iter().find(|e| e.first <= next && next < e.first + e.count)?;
                if !state.objects.contains(&entry.obj) {
                    if self.guards.forget_on_gone {
                        state.cache = None;
                    }
                    state.read = match self.guards.retry_on_gone && retries < MAX_RETRIES {
                        true => {
                            state.retried = true;
                            ReadStep::Reading { next, got, retries: retries + 1 }
                        }
                        false => ReadStep::Failed,
                    };
                    return Some(state);
                }
                got.extend(next..entry.first + entry.count);
                let next = entry.first + entry.count;
                state.read = match next >= TAIL {
                    true => {
                        state.reads_done += 1;
                        ReadStep::Done(got)
                    }
                    false => ReadStep::Reading { next, got, retries },
                };
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "a read returns every record below the tail once, in order",
                |_, s: &ReaderState| match &s.read {
                    ReadStep::Done(got) => *got == (0..TAIL).collect::<Vec<u8>>(),
                    _ => true,
                },
            ),
            Property::always("no read fails for an object compaction replaced", |_, s: &ReaderState| {
                s.read != ReadStep::Failed
            }),
            Property::sometimes("a read finds a cached object gone and reads on", |_, s: &ReaderState| {
                s.retried && matches!(&s.read, ReadStep::Done(_))
            }),
        ]
    }
}
