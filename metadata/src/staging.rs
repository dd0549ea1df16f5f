//! Staging a Kafka transactional append in the commit of its segment: its block's place
//! is kept under `y/<id length><transactional id><n>` (see `transactional`), with no
//! offsets, until its transaction commits or aborts.

use shale_metadata_contract::transactions::refusal;
use shale_proto::metadata_rpc as pb;

use crate::overlay::{Overlay, Staged};
use crate::{keys, CommitAppend, Metadata, Result, TransactionRefusal, TransactionStamp, TransactionState};

impl Metadata {
    /// Stages `append` in its open transaction (in the commit of its segment): checks the
    /// producer and adds the staged key and the id's record to `tentative`.
    pub(crate) async fn stage_append(
        &self,
        segment_id: u128,
        append: &CommitAppend,
        stamp: &TransactionStamp,
        committed: &Overlay,
        tentative: &mut Overlay,
    ) -> Result<()> {
        let id = &stamp.transactional_id;
        let known = tentative.transactions.get(id).or_else(|| committed.transactions.get(id)).cloned();
        let mut state = match known {
            Some(state) => state,
            None => self
                .get_latest::<TransactionState>(&keys::transaction(id))
                .await?
                .ok_or_else(|| refusal(TransactionRefusal::UnknownProducer, format!("no transactional id `{id}`")))?,
        };
        state.check_producer(stamp.producer_id, stamp.epoch)?;
        state.check_open()?;
        let added = (append.basin.clone(), append.stream.clone());
        if !state.streams.contains(&added) {
            state.streams.push(added);
        }
        let staged = pb::StagedAppend {
            basin: append.basin.clone(),
            stream: append.stream.clone(),
            segment_id: segment_id.to_be_bytes().to_vec(),
            offset: append.offset,
            len: append.len,
            arrival: append.arrival,
            client_timestamps: append.client_timestamps.iter().map(|t| t.unwrap_or(0)).collect(),
            timestamp_given: append.client_timestamps.iter().map(Option::is_some).collect(),
            metered_bytes: append.metered_bytes,
        };
        tentative.staged.push(Staged { key: keys::staged(id, state.staged), append: staged });
        state.staged += 1;
        state.updated_ms = self.clock.now_ms();
        tentative.transactions.insert(id.clone(), state);
        Ok(())
    }
}
