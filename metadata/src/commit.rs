//! Committing a sealed segment: conditions, sequence numbers, timestamps, one durable
//! write batch.

use std::collections::HashMap;

use prost::Message;
use shale_proto::metadata_rpc::SegmentOutcome;
use shale_proto::{Command, TimestampingMode};
use slatedb::config::{PutOptions, Ttl};
use slatedb::WriteBatch;

use crate::agenda;
use crate::overlay::{stream_key, Overlay, ProducerKey, StreamKey};
use crate::producers::{Admission, ProducerState};
use crate::refs::SegmentRefs;
use crate::wire::{outcomes_from_wire, outcomes_to_wire};
use crate::{
    keys, AppendAck, BasinRecord, CommitAppend, CommitRequest, CommitTicket, CommitUnit, IndexEntry, Metadata,
    MetadataError, PipelinePosition, Position, Result, Stored, StreamRecord, TailUpdate, UnitOutcome, WriterState,
};

impl Metadata {
    /// Commits a segment. Each unit is checked against the state left by the units
    /// before it; failing units change nothing. Everything that succeeded is written in
    /// one SlateDB batch and is durable before this returns. An `Err` means the whole
    /// commit failed: the appends may or may not be durable ([`MetadataError::Indefinite`])
    /// or this instance was fenced.
    pub async fn commit(&self, request: CommitRequest) -> Result<Vec<UnitOutcome>> {
        let mut outcomes = self.run_sequence(vec![request], None).await?.await?;
        Ok(outcomes.pop().unwrap_or_default())
    }

    /// Applies a commit call under the writer lock and returns as soon as it holds its
    /// place in the commit order; the ticket resolves once the WAL write holding it is
    /// durable. Calls from every gateway share WAL writes (see `durability`).
    pub(crate) async fn run_sequence(
        &self,
        requests: Vec<CommitRequest>,
        position: Option<PipelinePosition>,
    ) -> Result<CommitTicket> {
        self.check_usable()?;
        let mut writer = self.writer.lock().await;
        self.check_usable()?;
        let mut overlay = Overlay::on(&writer);
        let mut all_outcomes = Vec::with_capacity(requests.len());
        let mut written = Vec::with_capacity(requests.len());
        let predecessors_here = position.is_none_or(|position| writer.poison.earlier_calls_processed_here(position));
        for request in &requests {
            let (entries_before, staged_before) = (overlay.entries.len(), overlay.staged.len());
            let (outcomes, applied) = if predecessors_here {
                self.segment_outcomes(request, position, &writer, &mut overlay).await?
            } else {
                let error = MetadataError::Unavailable(
                    "calls this gateway sent before this one went to another metadata instance and are unanswered; \
                     not committed"
                        .to_string(),
                );
                (request.units.iter().map(|_| Err(error.clone())).collect(), false)
            };
            if let Some(position) = position {
                writer.poison.record(position, request, &outcomes);
            }
            let entry_blocks = overlay.entries[entries_before..].iter().map(|(_, _, entry)| entry.len);
            let staged_blocks = overlay.staged[staged_before..].iter().map(|staged| staged.append.len);
            let refs = SegmentRefs::of_blocks(entry_blocks.chain(staged_blocks));
            if applied && refs.blocks > 0 {
                written.push((request.segment_id, refs, outcomes_to_wire(&outcomes).encode_to_vec()));
            }
            all_outcomes.push(outcomes);
        }
        if let Some(position) = position {
            writer.poison.forget_seen(position);
        }
        let tails = if overlay.entries.is_empty() && overlay.staged.is_empty() {
            Vec::new()
        } else {
            self.write_commit_batch(&mut writer, WriteBatch::new(), overlay, written).await?
        };
        let durable = self.durability.push(tails);
        drop(writer);
        Ok(CommitTicket::new(async move {
            durable.wait().await?;
            Ok(all_outcomes)
        }))
    }

    /// One segment's unit outcomes, applied to `overlay`; `false` when nothing was
    /// applied because the segment was committed before or is too old to commit.
    async fn segment_outcomes(
        &self,
        request: &CommitRequest,
        position: Option<PipelinePosition>,
        writer: &WriterState,
        overlay: &mut Overlay,
    ) -> Result<(Vec<UnitOutcome>, bool)> {
        // A call's first send carries fresh segment ids, never committed: only a call
        // that may be a resend (or comes without a pipeline position) is looked up.
        if !position.is_some_and(|position| position.first_send) {
            self.commit_stats.outcome_lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(outcomes) = self.stored_outcome(request.segment_id).await? {
                tracing::info!(segment = %ulid::Ulid(request.segment_id), "segment already committed; returning its outcome");
                return Ok((outcomes, false));
            }
        }
        // No stored outcome: never committed, or committed so long ago that its outcome
        // expired. The outcome lives 3 x max_commit_age and segments stamped more than
        // max_commit_age ahead are refused, so an expired one is always judged too old
        // here (even across a metadata clock skew below max_commit_age), and only then
        // is the committed marker read: the common path costs no extra read.
        if let Some(error) = self.refuse_by_age(request.segment_id) {
            let error = if self.segment_committed(request.segment_id).await? {
                tracing::warn!(segment = %ulid::Ulid(request.segment_id), "retried segment committed earlier; its outcome expired");
                MetadataError::Indefinite("segment committed earlier and its outcome expired".into())
            } else {
                error
            };
            return Ok((request.units.iter().map(|_| Err(error.clone())).collect(), false));
        }
        let mut outcomes = Vec::with_capacity(request.units.len());
        // Streams with a failed unit in this call: their later units fail too, so no
        // caller sees record N+1 committed after record N failed.
        for unit in &request.units {
            let earlier_failure = position.and_then(|position| writer.poison.check(position, unit)).or_else(|| {
                let append = unit.appends.iter().find(|a| overlay.failed_streams.contains(&stream_key(a)))?;
                Some(MetadataError::EarlierAppendFailed { basin: append.basin.clone(), stream: append.stream.clone() })
            });
            if let Some(error) = earlier_failure {
                overlay.failed_streams.extend(unit.appends.iter().map(stream_key));
                outcomes.push(Err(error));
                continue;
            }
            let mut tentative = overlay.tentative();
            let outcome = self.apply_unit(request.segment_id, unit, writer, overlay, &mut tentative).await;
            if outcome.is_ok() {
                overlay.streams.extend(tentative.streams);
                overlay.entries.extend(tentative.entries);
                overlay.producers.extend(tentative.producers);
                overlay.trimmed.extend(tentative.trimmed);
                overlay.transactions.extend(tentative.transactions);
                overlay.staged.extend(tentative.staged);
                overlay.next_stream_id = tentative.next_stream_id;
            } else {
                overlay.failed_streams.extend(unit.appends.iter().map(stream_key));
            }
            overlay.basins.extend(tentative.basins);
            outcomes.push(outcome);
        }
        Ok((outcomes, true))
    }

    /// Applies what the commit changed (stream records, index entries, each written
    /// segment's block count and stored outcome, staged appends and their transactions'
    /// records, the stream id counter) in one batch with what `batch` holds already, and
    /// returns the tails it moved.
    pub(crate) async fn write_commit_batch(
        &self,
        writer: &mut WriterState,
        mut batch: WriteBatch,
        overlay: Overlay,
        written: Vec<(u128, SegmentRefs, Vec<u8>)>,
    ) -> Result<Vec<TailUpdate>> {
        let now_ms = self.clock.now_ms();
        for staged in &overlay.staged {
            batch.put(&staged.key, staged.value());
        }
        for (id, state) in &overlay.transactions {
            batch.put(keys::transaction(id), state.to_stored());
        }
        for (stream_key, record) in &overlay.streams {
            let key = keys::stream(&stream_key.0, &stream_key.1);
            batch.put(&key, record.to_stored());
            agenda::note_commit(writer, &mut batch, &key, record, overlay.trimmed.contains(stream_key), now_ms);
        }
        let indexed: u64 = overlay.entries.iter().map(|(_, _, entry)| u64::from(entry.len)).sum();
        self.indexed_bytes.fetch_add(indexed, std::sync::atomic::Ordering::Relaxed);
        for (_, stream_id, entry) in &overlay.entries {
            let value = entry.encode();
            batch.put(keys::index(*stream_id, entry.last_seq()), &value);
            batch.put(keys::by_time(*stream_id, entry.last_timestamp, entry.last_seq()), &value);
        }
        let outcome_ttl = PutOptions { ttl: Ttl::ExpireAfterMillis(self.config.outcome_ttl_ms()) };
        if !written.is_empty() {
            self.segments_changed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        for (segment_id, refs, stored) in written {
            batch.put(keys::segment(segment_id), refs.encode());
            batch.put_with_options(keys::commit_outcome(segment_id), stored, &outcome_ttl);
        }
        let producer_ttl = PutOptions { ttl: Ttl::ExpireAfterMillis(self.config.producer_expiry_ms()) };
        for ((stream_id, producer), state) in &overlay.producers {
            batch.put_with_options(keys::producer(*stream_id, producer), state.to_stored(), &producer_ttl);
        }
        if overlay.next_stream_id != writer.next_stream_id {
            batch.put(keys::NEXT_STREAM_ID, overlay.next_stream_id.to_be_bytes());
        }
        // Before the write: a failed write halts the instance, so ids are never reused.
        writer.next_stream_id = overlay.next_stream_id;
        let tails = tail_updates(&overlay);
        self.apply(batch).await?;
        for (key, record) in overlay.streams {
            writer.streams.insert(key, record);
        }
        for (key, state) in overlay.producers {
            writer.producers.insert(key, state);
        }
        Ok(tails)
    }

    /// The outcome of an earlier commit of this segment, durable or still in flight (the
    /// caller then waits for the same flush): a retried commit (after a timeout or a
    /// failover) gets the original acks and writes nothing twice.
    async fn stored_outcome(&self, segment_id: u128) -> Result<Option<Vec<UnitOutcome>>> {
        let key = keys::commit_outcome(segment_id);
        let Some(bytes) = self.db.get(&key).await.map_err(|e| self.storage_error(e))? else {
            return Ok(None);
        };
        let corrupt = |reason: String| MetadataError::Corrupt { key: format!("c/{}", ulid::Ulid(segment_id)), reason };
        let wire = SegmentOutcome::decode(bytes.as_ref()).map_err(|e| corrupt(e.to_string()))?;
        outcomes_from_wire(wire).map(Some).map_err(|e| corrupt(e.to_string()))
    }

    /// Why a segment may not be committed by its age, if so: sealed longer ago than
    /// `max_commit_age` (orphan collection may already be deleting it), or stamped more
    /// than `max_commit_age` ahead of this clock (the gateway's clock is wrong).
    pub(crate) fn refuse_by_age(&self, segment_id: u128) -> Option<MetadataError> {
        let now = self.clock.now_ms();
        let sealed = ulid::Ulid(segment_id).timestamp_ms();
        let bound = self.config.max_commit_age.as_millis() as u64;
        if now.saturating_sub(sealed) > bound {
            let age_ms = now - sealed;
            self.commit_stats.refused_too_old.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(segment = %ulid::Ulid(segment_id), age_ms, "segment refused: sealed past max_commit_age (gateway clock behind, or a stalled gateway)");
            return Some(MetadataError::Unavailable(format!(
                "segment sealed {age_ms} ms ago, past max_commit_age; not committed, its appends may be retried"
            )));
        }
        if sealed.saturating_sub(now) > bound {
            let ahead_ms = sealed - now;
            self.commit_stats.refused_from_future.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(segment = %ulid::Ulid(segment_id), ahead_ms, "segment refused: stamped ahead of metadata's clock (gateway clock ahead)");
            return Some(MetadataError::Unavailable(format!(
                "segment stamped {ahead_ms} ms ahead of metadata's clock, past max_commit_age; not committed"
            )));
        }
        None
    }

    /// Whether a commit made some of the segment's blocks visible (applied, durable or
    /// about to be: only the writer asks), including a segment whose blocks have all been
    /// released since and that awaits deletion.
    pub(crate) async fn segment_committed(&self, segment_id: u128) -> Result<bool> {
        for key in [keys::segment(segment_id), keys::released(segment_id)] {
            if self.db.get(&key).await.map_err(|e| self.storage_error(e))?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn apply_unit(
        &self,
        segment_id: u128,
        unit: &CommitUnit,
        writer: &WriterState,
        committed: &mut Overlay,
        tentative: &mut Overlay,
    ) -> Result<Vec<AppendAck>> {
        let mut acks = Vec::with_capacity(unit.appends.len());
        // In an atomic append across streams, a refusal names the stream it is about
        // (failures of metadata itself stay as they are).
        let member = |append: &CommitAppend, error: MetadataError| match (&error, unit.appends.len()) {
            (
                MetadataError::SeqNumMismatch { .. }
                | MetadataError::FencingTokenMismatch { .. }
                | MetadataError::ProducerSeqMismatch { .. }
                | MetadataError::StreamNotFound { .. }
                | MetadataError::BasinNotFound(_)
                | MetadataError::InvalidArgument(_),
                2..,
            ) => MetadataError::AtomicMember { stream: append.stream.clone(), error: Box::new(error) },
            _ => error,
        };
        for append in &unit.appends {
            let key = (append.basin.clone(), append.stream.clone());
            let mut record = match tentative.streams.get(&key).or_else(|| committed.streams.get(&key)) {
                Some(record) => record.clone(),
                None => {
                    self.load_or_create(append, writer, committed, tentative).await.map_err(|e| member(append, e))?
                }
            };
            let now_ms = self.clock.now_ms();
            let producer = match &append.producer {
                Some(stamp) => {
                    let producer_key = (record.id, stamp.id.clone());
                    let state =
                        match tentative.producers.get(&producer_key).or_else(|| committed.producers.get(&producer_key))
                        {
                            Some(state) => Some(state.clone()),
                            None => self.producer_state(writer, &producer_key).await?,
                        };
                    match ProducerState::admit(state.as_ref(), stamp, record.tail()).map_err(|e| member(append, e))? {
                        Admission::Duplicate(ack) => {
                            acks.push(ack);
                            continue;
                        }
                        Admission::Apply => Some((producer_key, stamp.seq, state.unwrap_or_default())),
                    }
                }
                None => None,
            };
            if let Some(stamp) = &append.transaction {
                self.stage_append(segment_id, append, stamp, committed, tentative)
                    .await
                    .map_err(|e| member(append, e))?;
                // A staged append has no offsets until its transaction commits: its ack
                // counts its records from 0.
                let staged_end = Position { seq_num: append.client_timestamps.len() as u64, timestamp: 0 };
                let ack = AppendAck { start: Position::default(), end: staged_end, tail: record.tail() };
                if let Some((producer_key, seq, mut state)) = producer {
                    state.applied(seq, &ack, now_ms);
                    tentative.producers.insert(producer_key, state);
                }
                // A stream this unit created (its basin creates streams on append) is
                // kept, with nothing in it until the commit.
                if record.id >= committed.next_stream_id {
                    tentative.streams.insert(key, record);
                }
                acks.push(ack);
                continue;
            }
            let trim_before = record.trim_point;
            let (ack, entry) = apply_append(segment_id, append, &mut record, now_ms).map_err(|e| member(append, e))?;
            if record.trim_point > trim_before {
                tentative.trimmed.insert(key.clone());
            }
            if let Some((producer_key, seq, mut state)) = producer {
                state.applied(seq, &ack, now_ms);
                tentative.producers.insert(producer_key, state);
            }
            tentative.entries.push((key.clone(), record.id, entry));
            tentative.streams.insert(key, record);
            acks.push(ack);
        }
        Ok(acks)
    }

    /// A producer's live state on a stream (applied, maybe not yet durable), from the
    /// sequencer's working set or the database; `None` when new or expired.
    async fn producer_state(&self, writer: &WriterState, key: &ProducerKey) -> Result<Option<ProducerState>> {
        let (now_ms, expiry_ms) = (self.clock.now_ms(), self.config.producer_expiry_ms());
        if let Some(state) = writer.producers.get(key) {
            return Ok(state.live(now_ms, expiry_ms));
        }
        let stored = self.get_latest::<ProducerState>(&keys::producer(key.0, &key.1)).await?;
        Ok(stored.and_then(|state| state.live(now_ms, expiry_ms)))
    }

    /// The stream's durable record, or a new one when the basin creates streams on append.
    async fn load_or_create(
        &self,
        append: &CommitAppend,
        writer: &WriterState,
        committed: &Overlay,
        tentative: &mut Overlay,
    ) -> Result<StreamRecord> {
        if let Some(record) = self.latest_stream(writer, &append.basin, &append.stream).await? {
            return Ok(record);
        }
        let not_found = || MetadataError::StreamNotFound { basin: append.basin.clone(), stream: append.stream.clone() };
        let basin = match tentative.basins.get(&append.basin).or_else(|| committed.basins.get(&append.basin)) {
            Some(basin) => basin.clone(),
            None => {
                let basin = self.get_latest::<BasinRecord>(&keys::basin(&append.basin)).await?;
                tentative.basins.insert(append.basin.clone(), basin.clone());
                basin
            }
        };
        let basin = basin.ok_or_else(|| MetadataError::BasinNotFound(append.basin.clone()))?;
        if !basin.config.create_stream_on_append {
            return Err(not_found());
        }
        let id = tentative.next_stream_id;
        tentative.next_stream_id += 1;
        Ok(self.new_stream_record(id, Default::default(), &basin.config))
    }
}

/// The new tail of every stream the commit moved, with the index entries that moved it.
fn tail_updates(overlay: &Overlay) -> Vec<TailUpdate> {
    let mut by_stream: HashMap<&StreamKey, Vec<IndexEntry>> = HashMap::new();
    for (key, _, entry) in &overlay.entries {
        by_stream.entry(key).or_default().push(*entry);
    }
    overlay
        .streams
        .iter()
        .map(|(key, record)| TailUpdate {
            basin: key.0.clone(),
            stream: key.1.clone(),
            stream_id: record.id,
            tail: record.tail(),
            entries: by_stream.remove(key).unwrap_or_default(),
        })
        .collect()
}

/// Checks one append's conditions against `record` and, if they hold, advances it; the
/// append's arrival time is clamped to metadata's clock, `now_ms`.
pub(crate) fn apply_append(
    segment_id: u128,
    append: &CommitAppend,
    record: &mut StreamRecord,
    now_ms: u64,
) -> Result<(AppendAck, IndexEntry)> {
    let count = u32::try_from(append.client_timestamps.len())
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| MetadataError::InvalidArgument("an append needs 1 to 1000 records".into()))?;
    if let Some(expected) = append.match_seq_num {
        if expected != record.next_seq {
            return Err(MetadataError::SeqNumMismatch { expected, actual: record.next_seq });
        }
    }
    if let Some(token) = &append.fencing_token {
        if *token != record.fencing_token {
            return Err(MetadataError::FencingTokenMismatch { actual: record.fencing_token.clone() });
        }
    }
    let policy = record.config.timestamp_policy();
    if policy.mode == TimestampingMode::ClientRequire && append.client_timestamps.iter().any(Option::is_none) {
        return Err(MetadataError::InvalidArgument(
            "stream requires client timestamps (timestamping mode client-require)".into(),
        ));
    }
    let floor = record.last_timestamp;
    let arrival_cap = (append.arrival > now_ms).then_some(now_ms);
    let mut resolver = policy.resolver(append.arrival.min(now_ms), floor);
    let mut first_timestamp = None;
    let mut last_timestamp = floor;
    for client in &append.client_timestamps {
        last_timestamp = resolver.next(*client);
        first_timestamp.get_or_insert(last_timestamp);
    }
    let first_timestamp = first_timestamp.unwrap_or(last_timestamp);
    let entry = IndexEntry {
        segment_id,
        offset: append.offset,
        len: append.len,
        first_seq: record.next_seq,
        record_count: count,
        first_timestamp,
        last_timestamp,
        timestamp_floor: floor,
        timestamp_policy: policy,
        arrival_cap,
        metered_end: Some(record.metered_bytes + append.metered_bytes),
    };
    let start = Position { seq_num: record.next_seq, timestamp: first_timestamp };
    record.next_seq += u64::from(count);
    record.last_timestamp = last_timestamp;
    record.record_count += u64::from(count);
    record.metered_bytes += append.metered_bytes;
    for command in &append.commands {
        match command {
            Command::Fence(token) => record.fencing_token = token.clone(),
            Command::Trim(seq) => record.trim_point = record.trim_point.max((*seq).min(record.next_seq)),
        }
    }
    let end = Position { seq_num: record.next_seq, timestamp: last_timestamp };
    Ok((AppendAck { start, end, tail: end }, entry))
}
