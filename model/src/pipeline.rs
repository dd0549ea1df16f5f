//! A gateway's commit pipeline over metadata's group commit, with the leader lease
//! (`docs/protocol.md`, "The commit pipeline").
//!
//! One gateway holds units (appends) for two streams, sealed in order. Their uploads
//! finish in any order; the committer sends them to metadata in seal order without
//! waiting for earlier calls to become durable (`gateway/src/pipeline.rs`,
//! `run_committer`). A metadata instance applies each call in memory at once, checking
//! its conditions against the latest applied state and assigning offsets, and queues it;
//! one flush makes everything queued durable and answers it, in order
//! (`metadata/src/durability.rs`). A unit may fail its condition (an S2
//! `match_seq_num`); a flush may fail; the leader may crash. A standby takes over once
//! the leader's lease lapses. The acker answers callers in seal order.

use std::collections::BTreeSet;

use stateright::{Model, Property};

/// A unit: its index in seal order.
pub type Unit = u8;

/// The guards this part of the protocol has, each of which a mutation test removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipelineGuards {
    /// A unit is answered as acked only when the flush holding it is durable
    /// (`CommitTicket`, `durability.rs`); off: acked when applied in memory.
    pub ack_when_durable: bool,
    /// A failed flush halts the instance (`metadata/src/halt.rs`); off: it carries on from
    /// the tails it applied in memory.
    pub halt_on_failed_flush: bool,
    /// Metadata fails a unit whose stream had an earlier unit of the same pipeline fail
    /// that the gateway had not yet seen (`writer.poison`, by `PipelinePosition`).
    pub poison_at_metadata: bool,
    /// A write by an instance whose epoch is not the database's fails and halts it.
    pub fencing: bool,
    /// The standby takes over when the leader's lease lapses (`metadata/src/leader.rs`);
    /// off: it waits for a handover that a crashed leader never makes.
    pub standby_takes_lapsed_lease: bool,
    /// An instance refuses a call when calls before it that the gateway has not seen
    /// answered were not processed here (they went to an instance that has since
    /// crashed, halted or been fenced, so whether they failed is unknown here)
    /// (`Poison::check`, `metadata/src/poison.rs`).
    pub refuse_after_calls_elsewhere: bool,
    /// The committer sends units in the order they were sealed, waiting for an upload
    /// that finished late (`run_committer` takes them from the sealed queue in order);
    /// off: it sends whichever upload finishes first.
    pub commit_in_seal_order: bool,
}

impl PipelineGuards {
    pub const ALL: PipelineGuards = PipelineGuards {
        ack_when_durable: true,
        halt_on_failed_flush: true,
        poison_at_metadata: true,
        fencing: true,
        standby_takes_lapsed_lease: true,
        refuse_after_calls_elsewhere: true,
        commit_in_seal_order: true,
    };
}

/// The configuration: the stream of each unit, in seal order.
#[derive(Clone, Debug)]
pub struct PipelineModel {
    pub guards: PipelineGuards,
    pub units: Vec<u8>,
    pub streams: u8,
}

impl PipelineModel {
    /// Four units: 0, 1 and 3 to stream 0, 2 to stream 1.
    pub fn small(guards: PipelineGuards) -> Self {
        PipelineModel { guards, units: vec![0, 0, 1, 0], streams: 2 }
    }
}

/// What a unit's call came to at metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Applied at this offset (durable once its flush is).
    Applied(u8),
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instance {
    pub epoch: u8,
    pub halted: bool,
    pub crashed: bool,
    /// Tails after everything applied in memory.
    pub tails: Vec<u8>,
    /// Applied, waiting for the next flush, in order.
    pub queued: Vec<(Unit, Outcome)>,
    /// Streams with a failed unit of the pipeline the gateway had not seen.
    pub poisoned: BTreeSet<u8>,
    /// The units of the pipeline this instance processed last, one after another:
    /// `(first, last)`.
    pub run: Option<(Unit, Unit)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineState {
    pub uploaded: Vec<bool>,
    /// The next unit in seal order to send.
    pub next_send: Unit,
    /// Units sent ahead of `next_send` (only without `commit_in_seal_order`).
    pub sent_early: BTreeSet<Unit>,
    /// Each unit's answer from metadata, once there is one.
    pub answers: Vec<Option<Outcome>>,
    /// The acker has answered callers of units below this.
    pub answered: Unit,
    /// Streams whose failure the acker has seen: their unsent units fail at the gateway.
    pub seen_failed: BTreeSet<u8>,
    /// What the callers were told: acked at an offset, or failed.
    pub told: Vec<Option<Outcome>>,
    /// The database: its writer epoch, durable entries `(stream, offset, unit)`, tails.
    pub epoch: u8,
    pub durable: BTreeSet<(u8, u8, Unit)>,
    pub tails: Vec<u8>,
    pub instances: Vec<Instance>,
    pub lease_lapsed: bool,
    pub took_over: bool,
    /// Faults, each at most once per run.
    pub condition_failed: bool,
    pub flush_failed: bool,
    /// A flush made more than one call durable at once (for the `sometimes` property).
    pub grouped: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PipelineAction {
    /// A unit's upload finishes (`upload` in `gateway/src/pipeline.rs`).
    Upload(Unit),
    /// The committer sends the next unit to instance `i`, its condition holding or not
    /// (`sequencer.sequence`, `Metadata::run_sequence`).
    Send { instance: u8, condition_holds: bool },
    /// Without `commit_in_seal_order`: the committer sends a later unit whose upload
    /// finished before the next one's (its condition holds).
    SendEarly { unit: Unit, instance: u8 },
    /// A unit the gateway fails without sending: its stream failed earlier, or no
    /// metadata instance is left to answer (the call's deadline passes).
    FailAtGateway,
    /// Instance `i` makes what it queued durable (`durability.rs`, one WAL flush).
    Flush(u8),
    /// Instance `i`'s flush fails (a store error).
    FailFlush(u8),
    /// The leader's process dies: its queued calls are answered with errors.
    Crash,
    /// The leader's lease lapses (it stopped renewing: halted, dead or paused).
    LapseLease,
    /// The standby opens the database, fencing the old writer.
    TakeOver,
    /// The acker answers the next unit's caller.
    Answer,
}

impl PipelineModel {
    fn stream(&self, unit: Unit) -> u8 {
        self.units[usize::from(unit)]
    }

    /// Moves `next_send` past the unit it names and any sent early.
    fn advance(state: &mut PipelineState) {
        state.next_send += 1;
        while state.sent_early.remove(&state.next_send) {
            state.next_send += 1;
        }
    }

    /// Instance `instance` receives `unit`'s call: it applies it (offsets from its latest
    /// applied tails) or fails it, and queues it for the next flush.
    fn send(&self, state: &mut PipelineState, unit: Unit, instance: u8, condition_holds: bool) {
        let i = usize::from(instance);
        let stream = self.stream(unit);
        if !condition_holds {
            state.condition_failed = true;
        }
        let poisoned = self.guards.poison_at_metadata && state.instances[i].poisoned.contains(&stream);
        // The gateway has seen the answers of every call before `answered`; the ones from
        // there to this went somewhere, and unless all here, whether they failed is
        // unknown here.
        let run_start = match state.instances[i].run {
            Some((first, last)) if last + 1 == unit => first,
            _ => unit,
        };
        state.instances[i].run = Some((run_start, unit));
        let refused = self.guards.refuse_after_calls_elsewhere && state.answered < run_start;
        let outcome = if condition_holds && !poisoned && !refused {
            let tail = &mut state.instances[i].tails[usize::from(stream)];
            *tail += 1;
            Outcome::Applied(*tail - 1)
        } else {
            state.instances[i].poisoned.insert(stream);
            Outcome::Failed
        };
        if !self.guards.ack_when_durable {
            state.answers[usize::from(unit)] = Some(outcome);
        }
        state.instances[i].queued.push((unit, outcome));
    }

    /// Answers every queued call of instance `i` not answered yet as failed (an error
    /// reaches the gateway): nothing queued became durable.
    fn fail_queued(state: &mut PipelineState, i: usize) {
        for (unit, _) in std::mem::take(&mut state.instances[i].queued) {
            state.answers[usize::from(unit)].get_or_insert(Outcome::Failed);
        }
    }
}

impl Model for PipelineModel {
    type State = PipelineState;
    type Action = PipelineAction;

    fn init_states(&self) -> Vec<PipelineState> {
        let (units, streams) = (self.units.len(), usize::from(self.streams));
        let instance = |epoch: u8| Instance {
            epoch,
            halted: epoch == 0,
            crashed: false,
            tails: vec![0; streams],
            queued: Vec::new(),
            poisoned: BTreeSet::new(),
            run: None,
        };
        vec![PipelineState {
            uploaded: vec![false; units],
            next_send: 0,
            sent_early: BTreeSet::new(),
            answers: vec![None; units],
            answered: 0,
            seen_failed: BTreeSet::new(),
            told: vec![None; units],
            epoch: 1,
            durable: BTreeSet::new(),
            tails: vec![0; streams],
            instances: vec![instance(1), instance(0)],
            lease_lapsed: false,
            took_over: false,
            condition_failed: false,
            flush_failed: false,
            grouped: false,
        }]
    }

    fn actions(&self, state: &PipelineState, actions: &mut Vec<PipelineAction>) {
        for (unit, uploaded) in state.uploaded.iter().enumerate() {
            if !uploaded {
                actions.push(PipelineAction::Upload(unit as Unit));
            }
        }
        let next = usize::from(state.next_send);
        if next < self.units.len() {
            let live = state.instances.iter().any(|i| !i.halted && !i.crashed);
            let no_leader_left = !live && state.took_over;
            if state.seen_failed.contains(&self.stream(state.next_send)) || no_leader_left {
                actions.push(PipelineAction::FailAtGateway);
            } else if state.uploaded[next] {
                for (i, instance) in state.instances.iter().enumerate() {
                    if !instance.halted && !instance.crashed {
                        actions.push(PipelineAction::Send { instance: i as u8, condition_holds: true });
                        if !state.condition_failed {
                            actions.push(PipelineAction::Send { instance: i as u8, condition_holds: false });
                        }
                    }
                }
            }
        }
        if !self.guards.commit_in_seal_order {
            for unit in (next + 1..self.units.len()).map(|u| u as Unit) {
                let ready = state.uploaded[usize::from(unit)] && !state.sent_early.contains(&unit);
                if !ready || state.seen_failed.contains(&self.stream(unit)) {
                    continue;
                }
                for (i, instance) in state.instances.iter().enumerate() {
                    if !instance.halted && !instance.crashed {
                        actions.push(PipelineAction::SendEarly { unit, instance: i as u8 });
                    }
                }
            }
        }
        for (i, instance) in state.instances.iter().enumerate() {
            if !instance.halted && !instance.crashed && !instance.queued.is_empty() {
                actions.push(PipelineAction::Flush(i as u8));
                if !state.flush_failed {
                    actions.push(PipelineAction::FailFlush(i as u8));
                }
            }
        }
        if !state.instances[0].crashed && !state.took_over {
            actions.push(PipelineAction::Crash);
        }
        // The lease lapses when the leader stops renewing it: halted, dead, or paused
        // (a live leader that still believes it leads: a zombie, which fencing stops).
        if !state.lease_lapsed {
            actions.push(PipelineAction::LapseLease);
        }
        if !state.took_over && state.lease_lapsed && self.guards.standby_takes_lapsed_lease {
            actions.push(PipelineAction::TakeOver);
        }
        if usize::from(state.answered) < self.units.len() && state.answers[usize::from(state.answered)].is_some() {
            actions.push(PipelineAction::Answer);
        }
    }

    fn next_state(&self, last: &PipelineState, action: PipelineAction) -> Option<PipelineState> {
        let mut state = last.clone();
        match action {
            PipelineAction::Upload(unit) => state.uploaded[usize::from(unit)] = true,
            PipelineAction::FailAtGateway => {
                state.answers[usize::from(state.next_send)] = Some(Outcome::Failed);
                Self::advance(&mut state);
            }
            PipelineAction::Send { instance, condition_holds } => {
                let unit = state.next_send;
                Self::advance(&mut state);
                self.send(&mut state, unit, instance, condition_holds);
            }
            PipelineAction::SendEarly { unit, instance } => {
                state.sent_early.insert(unit);
                self.send(&mut state, unit, instance, true);
            }
            PipelineAction::Flush(instance) => {
                let i = usize::from(instance);
                if self.guards.fencing && state.instances[i].epoch != state.epoch {
                    state.instances[i].halted = true;
                    Self::fail_queued(&mut state, i);
                    return Some(state);
                }
                let queued = std::mem::take(&mut state.instances[i].queued);
                state.grouped |= queued.len() > 1;
                for (unit, outcome) in queued {
                    if let Outcome::Applied(offset) = outcome {
                        let stream = self.stream(unit);
                        state.durable.insert((stream, offset, unit));
                        let tail = &mut state.tails[usize::from(stream)];
                        *tail = (*tail).max(offset + 1);
                    }
                    state.answers[usize::from(unit)].get_or_insert(outcome);
                }
            }
            PipelineAction::FailFlush(instance) => {
                let i = usize::from(instance);
                state.flush_failed = true;
                if self.guards.halt_on_failed_flush {
                    state.instances[i].halted = true;
                }
                // Either way, nothing queued became durable and its callers get errors.
                Self::fail_queued(&mut state, i);
            }
            PipelineAction::Crash => {
                state.instances[0].crashed = true;
                Self::fail_queued(&mut state, 0);
            }
            PipelineAction::LapseLease => state.lease_lapsed = true,
            PipelineAction::TakeOver => {
                state.took_over = true;
                state.epoch += 1;
                let tails = state.tails.clone();
                let standby = &mut state.instances[1];
                standby.epoch = state.epoch;
                standby.halted = false;
                standby.tails = tails;
            }
            PipelineAction::Answer => {
                let unit = usize::from(state.answered);
                let outcome = state.answers[unit]?;
                state.told[unit] = Some(outcome);
                if outcome == Outcome::Failed {
                    state.seen_failed.insert(self.units[unit]);
                }
                state.answered += 1;
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("an acked unit is durable at its offset", |m: &PipelineModel, s: &PipelineState| {
                s.told.iter().enumerate().all(|(unit, told)| match told {
                    Some(Outcome::Applied(offset)) => s.durable.contains(&(m.units[unit], *offset, unit as Unit)),
                    _ => true,
                })
            }),
            Property::always("durable offsets are dense and unique", |m: &PipelineModel, s: &PipelineState| {
                (0..m.streams).all(|stream| {
                    let offsets: Vec<u8> = s.durable.iter().filter(|e| e.0 == stream).map(|e| e.1).collect();
                    offsets.iter().enumerate().all(|(i, &o)| usize::from(o) == i)
                })
            }),
            Property::always(
                "no unit is acked after an earlier unit of its stream failed",
                |m: &PipelineModel, s: &PipelineState| {
                    s.told.iter().enumerate().all(|(later, told)| {
                        !matches!(told, Some(Outcome::Applied(_)))
                            || !s.told[..later]
                                .iter()
                                .enumerate()
                                .any(|(earlier, t)| *t == Some(Outcome::Failed) && m.units[earlier] == m.units[later])
                    })
                },
            ),
            Property::always("a stream's units hold offsets in seal order", |m: &PipelineModel, s: &PipelineState| {
                let offset = |unit: usize| match s.told[unit] {
                    Some(Outcome::Applied(offset)) => Some(offset),
                    _ => None,
                };
                (0..m.units.len()).all(|later| {
                    (0..later).all(|earlier| match (offset(earlier), offset(later)) {
                        (Some(a), Some(b)) if m.units[earlier] == m.units[later] => a < b,
                        _ => true,
                    })
                })
            }),
            Property::always(
                "a run ends with every caller answered and a serving leader",
                |m: &PipelineModel, s: &PipelineState| {
                    if !crate::check::run_ends(m, s) {
                        return true;
                    }
                    let leader_gone = s.instances[0].crashed || s.instances[0].halted;
                    s.told.iter().all(Option::is_some) && (!leader_gone || s.took_over)
                },
            ),
            Property::sometimes("a flush makes several calls durable at once", |_, s: &PipelineState| s.grouped),
            Property::sometimes("a unit is acked through the standby", |_, s: &PipelineState| {
                s.took_over && s.told.iter().any(|t| matches!(t, Some(Outcome::Applied(_))))
            }),
        ]
    }
}
