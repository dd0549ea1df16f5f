//! Kafka transactions (see `shale_metadata_contract::transactions`).
//!
//! `x/<transactional id>` holds the id's [`TransactionState`]; `y/<id length u16><id><n
//! u64>` each append staged in its open transaction: the block's place in its uploaded
//! segment, its arrival and client timestamps, no offsets. A staged block counts as a
//! reference of its segment (`o/`), so orphan collection leaves the segment alone.
//!
//! - Staging happens in the commit call of the append's segment (`commit`), checked
//!   against the id's epoch and open transaction under the writer lock, and is durable
//!   before the produce is acknowledged.
//! - Commit applies every staged append in staging order, as appends would have been,
//!   and the group offsets committed in the transaction, in one write batch; abort
//!   removes the staged appends and releases their blocks. Either way the id's record
//!   changes in the same batch, so a crash leaves the transaction wholly open, wholly
//!   committed or wholly aborted, and a retried end of it answers the same.
//! - An open transaction older than its timeout is aborted by
//!   [`run_transaction_timeouts`], which bumps the epoch as Kafka does: the abandoned
//!   producer's later calls are fenced.

use std::sync::Arc;
use std::time::Duration;

use shale_metadata_contract::records::decode_v1;
use shale_metadata_contract::transactions::refusal;
use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::commit::apply_append;
use crate::consumers::check_commit_metadata;
use crate::overlay::{Overlay, Staged, StreamKey};
use crate::refs::Releases;
use crate::{
    keys, ConsumerPosition, GroupOffset, Metadata, MetadataError, Result, Stored, StreamRecord, TransactionCall,
    TransactionOffset, TransactionOp, TransactionOutcome, TransactionRefusal, TransactionState, WriterState,
};

/// How often open transactions are checked against their timeouts (Kafka checks every
/// 10 s too: `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
pub const TIMEOUT_CHECK_INTERVAL: Duration = Duration::from_secs(10);

impl Metadata {
    /// Answers a transactional producer's call with the records of the ids it is about.
    pub async fn transaction(&self, call: TransactionCall) -> Result<Vec<TransactionState>> {
        self.check_usable()?;
        let id = call.transactional_id.as_str();
        if !matches!(call.op, TransactionOp::List) && (id.is_empty() || id.len() > TransactionState::MAX_ID_BYTES) {
            let max = TransactionState::MAX_ID_BYTES;
            return Err(MetadataError::InvalidArgument(format!("a transactional id is 1 to {max} bytes")));
        }
        match call.op {
            TransactionOp::Describe => {
                Ok(self.get_durable::<TransactionState>(&keys::transaction(id)).await?.into_iter().collect())
            }
            TransactionOp::List => self.list_transactions().await,
            op => self.change_transaction(id, call.producer_id, call.epoch, op).await.map(|state| vec![state]),
        }
    }

    async fn list_transactions(&self) -> Result<Vec<TransactionState>> {
        let prefix = keys::TRANSACTION_PREFIX;
        let page =
            self.scan_page(prefix, prefix, usize::MAX, DurabilityLevel::Remote, TransactionState::from_stored).await?;
        Ok(page.items)
    }

    async fn change_transaction(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        op: TransactionOp,
    ) -> Result<TransactionState> {
        let mut writer = self.writer.lock().await;
        self.check_usable()?;
        let now_ms = self.clock.now_ms();
        let stored = self.get_latest::<TransactionState>(&keys::transaction(id)).await?;
        let mut state = match (stored, &op) {
            (Some(state), _) => state,
            (None, TransactionOp::Init { timeout_ms, new_producer_id }) => {
                let state = TransactionState {
                    transactional_id: id.into(),
                    producer_id: *new_producer_id,
                    epoch: 0,
                    timeout_ms: *timeout_ms,
                    updated_ms: now_ms,
                    ..TransactionState::default()
                };
                let mut batch = WriteBatch::new();
                batch.put(keys::transaction(id), state.to_stored());
                self.write_durably(writer, batch).await?;
                return Ok(state);
            }
            (None, _) => {
                self.settle(writer).await?;
                return Err(refusal(TransactionRefusal::UnknownProducer, format!("no transactional id `{id}`")));
            }
        };
        let checked = match &op {
            // A producer re-initialising names the producer it was; one starting afresh
            // (-1) takes over whatever epoch is current.
            TransactionOp::Init { .. } if producer_id < 0 => Ok(()),
            _ => state.check_producer(producer_id, epoch),
        };
        if let Err(error) = checked {
            self.settle(writer).await?;
            return Err(error);
        }
        let mut batch = WriteBatch::new();
        match op {
            TransactionOp::Init { timeout_ms, new_producer_id } => {
                if state.is_open() {
                    self.abort_staged(&mut writer, &mut batch, &mut state).await?;
                }
                bump_epoch(&mut state, new_producer_id);
                state.timeout_ms = timeout_ms;
            }
            TransactionOp::AddStreams { basin, streams } => {
                open(&mut state, now_ms);
                for stream in streams {
                    let added = (basin.clone(), stream);
                    if !state.streams.contains(&added) {
                        state.streams.push(added);
                    }
                }
            }
            TransactionOp::AddGroup { group } => {
                open(&mut state, now_ms);
                if !state.groups.contains(&group) {
                    state.groups.push(group);
                }
            }
            TransactionOp::CommitOffsets { basin, group, offsets } => {
                let checked = state
                    .check_open()
                    .and_then(|()| offsets.iter().try_for_each(|o| check_commit_metadata(&o.commit_metadata)));
                if let Err(error) = checked {
                    self.settle(writer).await?;
                    return Err(error);
                }
                if !state.groups.contains(&group) {
                    state.groups.push(group.clone());
                }
                for GroupOffset { stream, seq_num, commit_metadata } in offsets {
                    state.offsets.retain(|o| !(o.basin == basin && o.stream == stream && o.group == group));
                    state.offsets.push(TransactionOffset {
                        basin: basin.clone(),
                        stream,
                        group: group.clone(),
                        seq_num,
                        commit_metadata,
                    });
                }
            }
            TransactionOp::End { commit } => {
                let expected = if commit { TransactionOutcome::Committed } else { TransactionOutcome::Aborted };
                if !state.is_open() {
                    // Answered from the latest state: only once that state is durable
                    // (the end being retried may still be on its way to the store).
                    self.settle(writer).await?;
                    if state.last_outcome == expected {
                        return Ok(state);
                    }
                    return Err(refusal(
                        TransactionRefusal::InvalidState,
                        format!("`{id}` has no open transaction to {}", if commit { "commit" } else { "abort" }),
                    ));
                }
                if commit {
                    return self.commit_staged(writer, batch, state, now_ms).await;
                }
                self.abort_staged(&mut writer, &mut batch, &mut state).await?;
            }
            TransactionOp::Describe | TransactionOp::List => {}
        }
        state.updated_ms = now_ms;
        batch.put(keys::transaction(id), state.to_stored());
        self.write_durably(writer, batch).await?;
        Ok(state)
    }

    /// The appends staged in `state`'s open transaction, in staging order (the latest
    /// state: the writer's). The scan starts at the transaction's first staged key, past
    /// the deleted keys of the id's earlier transactions.
    async fn staged_of(&self, state: &TransactionState) -> Result<Vec<Staged>> {
        let prefix = keys::staged_prefix(&state.transactional_id);
        let after = match state.staged_from.checked_sub(1) {
            Some(last_before) => keys::staged(&state.transactional_id, last_before),
            None => prefix.clone(),
        };
        let page = self
            .scan_page(&prefix, &after, usize::MAX, DurabilityLevel::Memory, |key, value| {
                Ok(Staged { key: key.to_vec(), append: decode_v1(key, value)? })
            })
            .await?;
        Ok(page.items)
    }

    /// Commits `state`'s open transaction: every staged append gets its offsets as an
    /// append would, the group offsets are applied, all in `batch` with the id's record.
    async fn commit_staged(
        &self,
        mut writer: tokio::sync::MutexGuard<'_, WriterState>,
        mut batch: WriteBatch,
        mut state: TransactionState,
        now_ms: u64,
    ) -> Result<TransactionState> {
        let staged = self.staged_of(&state).await?;
        let mut overlay = Overlay::on(&writer);
        let mut releases = Releases::default();
        for piece in &staged {
            batch.delete(&piece.key);
            let append = piece.as_append();
            let key = (append.basin.clone(), append.stream.clone());
            // A stream deleted while the transaction was open loses its staged appends.
            let Some(mut record) = self.stream_in(&writer, &overlay, &key).await? else {
                releases.add_block(piece.segment_id(), append.len);
                continue;
            };
            let (_, entry) = apply_append(piece.segment_id(), &append, &mut record, now_ms)?;
            overlay.entries.push((key.clone(), record.id, entry));
            overlay.streams.insert(key, record);
        }
        for offset in std::mem::take(&mut state.offsets) {
            let key = (offset.basin.clone(), offset.stream.clone());
            let Some(record) = self.stream_in(&writer, &overlay, &key).await? else { continue };
            let position = ConsumerPosition {
                basin: offset.basin,
                stream: offset.stream,
                name: offset.group,
                seq_num: offset.seq_num.min(record.next_seq),
                updated_ms: now_ms,
                commit_metadata: offset.commit_metadata,
            };
            batch.put(keys::consumer(record.id, &position.name), position.to_stored());
        }
        self.release_staged(&mut writer, &mut batch, &releases).await?;
        close(&mut state, TransactionOutcome::Committed, now_ms);
        batch.put(keys::transaction(&state.transactional_id), state.to_stored());
        tracing::info!(transactional_id = %state.transactional_id, appends = staged.len(), "transaction committed");
        let tails = self.write_commit_batch(&mut writer, batch, overlay, Vec::new()).await?;
        let durable = self.durability.push(tails);
        drop(writer);
        durable.wait().await?;
        Ok(state)
    }

    /// Adds to `batch` the removal of `state`'s staged appends and the release of their
    /// blocks, and closes its transaction as aborted.
    async fn abort_staged(
        &self,
        writer: &mut WriterState,
        batch: &mut WriteBatch,
        state: &mut TransactionState,
    ) -> Result<()> {
        let staged = self.staged_of(state).await?;
        let mut releases = Releases::default();
        for piece in &staged {
            batch.delete(&piece.key);
            releases.add_block(piece.segment_id(), piece.append.len);
        }
        self.release_staged(writer, batch, &releases).await?;
        tracing::info!(transactional_id = %state.transactional_id, appends = staged.len(), "transaction aborted");
        close(state, TransactionOutcome::Aborted, self.clock.now_ms());
        Ok(())
    }

    /// A stream's record as `overlay` left it, else its latest.
    async fn stream_in(
        &self,
        writer: &WriterState,
        overlay: &Overlay,
        key: &StreamKey,
    ) -> Result<Option<StreamRecord>> {
        match overlay.streams.get(key) {
            Some(record) => Ok(Some(record.clone())),
            None => self.latest_stream(writer, &key.0, &key.1).await,
        }
    }

    /// Adds to `batch` the release of staged blocks that will never be visible, counted
    /// as a removal (see [`Metadata::prepare_removal`]).
    async fn release_staged(
        &self,
        writer: &mut WriterState,
        batch: &mut WriteBatch,
        releases: &Releases,
    ) -> Result<()> {
        if !releases.is_empty() {
            self.decrement_refs(batch, releases).await?;
            writer.removals += 1;
        }
        Ok(())
    }

    /// Aborts every open transaction past its timeout and bumps its epoch; returns how
    /// many. A transaction that ended or started again since it was listed is left alone.
    pub async fn abort_timed_out_transactions(&self) -> Result<u64> {
        self.check_usable()?;
        let now_ms = self.clock.now_ms();
        let mut aborted = 0;
        for listed in self.list_transactions().await? {
            if listed.deadline_ms().is_none_or(|deadline| deadline > now_ms) {
                continue;
            }
            let mut writer = self.writer.lock().await;
            self.check_usable()?;
            let key = keys::transaction(&listed.transactional_id);
            let Some(mut state) = self.get_latest::<TransactionState>(&key).await? else { continue };
            if state.started_ms != listed.started_ms || state.epoch != listed.epoch {
                continue;
            }
            let mut batch = WriteBatch::new();
            self.abort_staged(&mut writer, &mut batch, &mut state).await?;
            // Past the last epoch the id is left without a producer: its next
            // InitProducerId gives it a new one.
            bump_epoch(&mut state, -1);
            batch.put(&key, state.to_stored());
            tracing::warn!(transactional_id = %state.transactional_id, timeout_ms = state.timeout_ms, "transaction timed out: aborted, epoch bumped");
            self.write_durably(writer, batch).await?;
            aborted += 1;
        }
        Ok(aborted)
    }
}

/// Opens `state`'s transaction if none is open.
fn open(state: &mut TransactionState, now_ms: u64) {
    if !state.is_open() {
        state.started_ms = now_ms.max(1);
        state.staged_from = state.staged;
    }
}

fn close(state: &mut TransactionState, outcome: TransactionOutcome, now_ms: u64) {
    state.started_ms = 0;
    state.streams.clear();
    state.groups.clear();
    state.offsets.clear();
    state.last_outcome = outcome;
    state.updated_ms = now_ms;
}

/// The next epoch; past the last one, a new producer id at epoch 0 (Kafka's rule).
fn bump_epoch(state: &mut TransactionState, new_producer_id: i64) {
    match state.epoch.checked_add(1).filter(|&e| e < i16::MAX) {
        Some(epoch) => state.epoch = epoch,
        None => (state.producer_id, state.epoch) = (new_producer_id, 0),
    }
}

/// Aborts transactions past their timeout every [`TIMEOUT_CHECK_INTERVAL`] until the
/// instance stops.
pub async fn run_transaction_timeouts(metadata: Arc<Metadata>) {
    let mut ticker = tokio::time::interval(TIMEOUT_CHECK_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match metadata.abort_timed_out_transactions().await {
            Ok(0) => {}
            Ok(aborted) => tracing::info!(aborted, "timed-out transactions aborted"),
            Err(MetadataError::Fenced | MetadataError::Stopped) => return,
            Err(e) => tracing::warn!(error = %e, "transaction timeout pass failed"),
        }
    }
}
