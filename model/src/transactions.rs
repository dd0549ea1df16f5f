//! Kafka transactions over one transactional id (`docs/protocol.md`, "Transactions"):
//! two producer instances share the id (the second replaces the first, which keeps
//! running as a zombie), each stages records to two partitions inside a transaction and
//! ends it with a commit or an abort; metadata times an open transaction out. Every call
//! is one SlateDB batch at metadata (`metadata/src/transactional.rs`, `staging.rs`):
//! `InitProducerId`, a staged append, `EndTxn`, the timeout.

use stateright::{Model, Property};

/// A record: the producer that staged it and its number there.
pub type TxnRec = (u8, u8);

/// The guards, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxnGuards {
    /// A staged append or an `EndTxn` with an epoch below the id's is refused
    /// (`PRODUCER_FENCED`).
    pub epoch_check: bool,
    /// `InitProducerId` aborts the id's open transaction (dropping what it staged).
    pub init_aborts_open: bool,
    /// A timeout aborts the open transaction and bumps the epoch, so its producer's next
    /// call is refused instead of starting a transaction that lacks the aborted records.
    pub timeout_bumps_epoch: bool,
}

impl TxnGuards {
    pub const ALL: TxnGuards = TxnGuards { epoch_check: true, init_aborts_open: true, timeout_bumps_epoch: true };
}

#[derive(Clone, Debug)]
pub struct TxnModel {
    pub guards: TxnGuards,
    /// Records each producer stages at most.
    pub records: u8,
}

impl TxnModel {
    pub fn small(guards: TxnGuards) -> Self {
        TxnModel { guards, records: 2 }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Producer {
    /// The epoch `InitProducerId` gave it; `None` before.
    pub epoch: Option<u8>,
    /// What it staged in its current transaction, as it sees it.
    pub mine: Vec<TxnRec>,
    pub staged_count: u8,
    /// Refused as fenced: it stops.
    pub fenced: bool,
    pub ended: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TxnState {
    /// The transactional id's epoch, and the records staged in its open transaction
    /// (each with its partition).
    pub epoch: u8,
    pub staged: Vec<(u8, TxnRec)>,
    /// The partitions' committed records, in offset order.
    pub logs: Vec<Vec<TxnRec>>,
    pub producers: Vec<Producer>,
    /// A commit made visible records other than exactly what its producer staged in the
    /// transaction it ended.
    pub torn: bool,
    /// A producer whose epoch was no longer the id's made records visible.
    pub zombie_visible: bool,
    pub timed_out: bool,
    /// Commits applied (for the `sometimes` property).
    pub commits: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnAction {
    /// Producer `p` calls `InitProducerId` for the id.
    Init(u8),
    /// Producer `p` stages its next record to partition `partition` (`AddPartitionsToTxn`
    /// and the transactional produce, one batch each at metadata).
    Stage(u8, u8),
    /// Producer `p` ends its transaction (`EndTxn`).
    End(u8, bool),
    /// Metadata's timeout pass aborts the open transaction.
    Timeout,
}

impl TxnModel {
    /// Whether producer `p`'s call at its epoch is refused as fenced.
    fn refused(&self, state: &TxnState, p: usize) -> bool {
        self.guards.epoch_check && state.producers[p].epoch != Some(state.epoch)
    }
}

impl Model for TxnModel {
    type State = TxnState;
    type Action = TxnAction;

    fn init_states(&self) -> Vec<TxnState> {
        let producer = Producer { epoch: None, mine: Vec::new(), staged_count: 0, fenced: false, ended: false };
        vec![TxnState {
            epoch: 0,
            staged: Vec::new(),
            logs: vec![Vec::new(); 2],
            producers: vec![producer; 2],
            torn: false,
            zombie_visible: false,
            timed_out: false,
            commits: 0,
        }]
    }

    fn actions(&self, state: &TxnState, actions: &mut Vec<TxnAction>) {
        for (p, producer) in state.producers.iter().enumerate() {
            let p = p as u8;
            if producer.fenced || producer.ended {
                continue;
            }
            match producer.epoch {
                None => actions.push(TxnAction::Init(p)),
                Some(_) => {
                    if producer.staged_count < self.records {
                        actions.extend((0..2).map(|partition| TxnAction::Stage(p, partition)));
                    }
                    if !producer.mine.is_empty() {
                        actions.extend([TxnAction::End(p, true), TxnAction::End(p, false)]);
                    }
                }
            }
        }
        if !state.timed_out && !state.staged.is_empty() {
            actions.push(TxnAction::Timeout);
        }
    }

    fn next_state(&self, last: &TxnState, action: TxnAction) -> Option<TxnState> {
        let mut state = last.clone();
        match action {
            TxnAction::Init(p) => {
                state.epoch += 1;
                if self.guards.init_aborts_open {
                    state.staged.clear();
                }
                state.producers[usize::from(p)].epoch = Some(state.epoch);
            }
            TxnAction::Stage(p, partition) => {
                let p = usize::from(p);
                if self.refused(&state, p) {
                    state.producers[p].fenced = true;
                    return Some(state);
                }
                let producer = &mut state.producers[p];
                let record = (p as u8, producer.staged_count);
                producer.staged_count += 1;
                producer.mine.push(record);
                state.staged.push((partition, record));
            }
            TxnAction::End(p, commit) => {
                let p = usize::from(p);
                if self.refused(&state, p) {
                    state.producers[p].fenced = true;
                    return Some(state);
                }
                let staged = std::mem::take(&mut state.staged);
                let zombie = state.producers[p].epoch != Some(state.epoch);
                let producer = &mut state.producers[p];
                let mine = std::mem::take(&mut producer.mine);
                producer.ended = true;
                if commit {
                    let mut applied: Vec<TxnRec> = staged.iter().map(|(_, r)| *r).collect();
                    let mut wanted = mine;
                    applied.sort_unstable();
                    wanted.sort_unstable();
                    state.torn |= applied != wanted;
                    state.zombie_visible |= zombie && !applied.is_empty();
                    for (partition, record) in staged {
                        state.logs[usize::from(partition)].push(record);
                    }
                    state.commits += 1;
                }
            }
            TxnAction::Timeout => {
                state.timed_out = true;
                state.staged.clear();
                if self.guards.timeout_bumps_epoch {
                    state.epoch += 1;
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "a commit makes visible exactly what its producer staged in that transaction",
                |_, s: &TxnState| !s.torn,
            ),
            Property::always("a fenced producer's commit makes nothing visible", |_, s: &TxnState| !s.zombie_visible),
            Property::sometimes("a transaction across both partitions commits", |_, s: &TxnState| {
                s.logs.iter().all(|log| !log.is_empty())
            }),
            Property::sometimes("a zombie is fenced", |_, s: &TxnState| s.producers[0].fenced),
        ]
    }
}
