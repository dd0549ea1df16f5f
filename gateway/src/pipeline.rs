//! Uploading sealed segments and committing them in seal order.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use shale_metadata::{CommitAppend, CommitRequest, CommitUnit};
use shale_proto::{BlockInfo, SegmentBuilder};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::batcher::{PendingUnit, Shared};
use crate::{GatewayError, Sequencer};
use shale_proto::segment::object_path as segment_path;

/// A sealed segment: its callers, in order, and its upload in progress.
pub(crate) struct Sealed {
    pub segment_id: u128,
    pub units: Vec<PendingUnit>,
    pub upload: JoinHandle<Result<Vec<BlockInfo>, GatewayError>>,
    pub sealed_at: Instant,
}

/// Builds the segment object from its blocks and PUTs it.
pub(crate) async fn upload(
    store: Arc<dyn ObjectStore>,
    segment_id: u128,
    blocks: Vec<(Bytes, u32, Bytes)>,
    metrics: Arc<crate::GatewayMetrics>,
) -> Result<Vec<BlockInfo>, GatewayError> {
    let mut builder = SegmentBuilder::new();
    let infos: Vec<BlockInfo> =
        blocks.into_iter().map(|(stream, records, block)| builder.push_block(stream, records, &block)).collect();
    let object = builder.finish();
    metrics.segment_bytes.fetch_add(object.len() as u64, Ordering::Relaxed);
    let path = segment_path(segment_id);
    store.put(&Path::from(path.as_str()), PutPayload::from(object)).await.map_err(|e| {
        tracing::warn!(object = %path, error = %e, "segment upload failed");
        GatewayError::Upload { object: path.clone(), reason: e.to_string() }
    })?;
    Ok(infos)
}

/// Takes sealed segments in seal order, waits for each upload, commits it and answers
/// its callers. After a failure, every unit of the failed streams that the batcher had
/// already received is failed too, so no caller sees record N+1 acked after record N
/// failed.
pub(crate) async fn run_committer(
    mut sealed: mpsc::UnboundedReceiver<Sealed>,
    sequencer: Arc<dyn Sequencer>,
    done: mpsc::UnboundedSender<()>,
    shared: Arc<Shared>,
) {
    // Stream key -> highest unit id that must fail because an earlier one did.
    let mut poisoned: HashMap<Bytes, u64> = HashMap::new();
    while let Some(segment) = sealed.recv().await {
        if let Some(first) = segment.units.first() {
            poisoned.retain(|_, watermark| *watermark >= first.id);
        }
        commit_segment(segment, sequencer.as_ref(), &mut poisoned, &shared).await;
        let _ = done.send(());
    }
}

async fn commit_segment(
    segment: Sealed,
    sequencer: &dyn Sequencer,
    poisoned: &mut HashMap<Bytes, u64>,
    shared: &Shared,
) {
    let Sealed { segment_id, units, upload, sealed_at } = segment;
    let infos = match upload.await {
        Ok(Ok(infos)) => infos,
        Ok(Err(error)) => return fail_all(units, error, poisoned, shared),
        Err(join) => {
            let error = GatewayError::Upload { object: segment_path(segment_id), reason: join.to_string() };
            return fail_all(units, error, poisoned, shared);
        }
    };

    // Pair every append with its block; drop units that must fail after an earlier failure.
    let mut infos = infos.into_iter();
    let mut to_commit = Vec::with_capacity(units.len());
    let mut request = CommitRequest { segment_id, units: Vec::with_capacity(units.len()) };
    for unit in units {
        let blocks: Vec<BlockInfo> = infos.by_ref().take(unit.appends.len()).collect();
        debug_assert_eq!(blocks.len(), unit.appends.len(), "one block per append, in order");
        if let Some(stream) = unit.appends.iter().map(|a| a.stream_key()).find(|s| poisoned.get(s).is_some_and(|w| *w >= unit.id)) {
            let stream = String::from_utf8_lossy(&stream).into_owned();
            let _ = unit.reply.send(Err(GatewayError::EarlierAppendFailed { stream }));
            continue;
        }
        let appends = unit
            .appends
            .iter()
            .zip(&blocks)
            .map(|(append, block)| CommitAppend {
                basin: append.basin.clone(),
                stream: append.stream.clone(),
                offset: block.offset,
                len: block.len,
                arrival: append.arrival,
                client_timestamps: append.client_timestamps.clone(),
                commands: append.commands.clone(),
                match_seq_num: append.match_seq_num,
                fencing_token: append.fencing_token.clone(),
                metered_bytes: append.metered_bytes,
            })
            .collect();
        request.units.push(CommitUnit { appends });
        to_commit.push(unit);
    }
    if to_commit.is_empty() {
        return;
    }
    match sequencer.commit(request).await {
        Ok(outcomes) => {
            shared.metrics.commit_latency.observe(sealed_at.elapsed());
            debug_assert_eq!(outcomes.len(), to_commit.len(), "one outcome per unit");
            for (unit, outcome) in to_commit.into_iter().zip(outcomes) {
                if let Ok(acks) = &outcome {
                    let records: u64 = acks.iter().map(|a| a.end.seq_num - a.start.seq_num).sum();
                    let bytes: u64 = unit.appends.iter().map(|a| a.metered_bytes).sum();
                    shared.metrics.records_acked.fetch_add(records, Ordering::Relaxed);
                    shared.metrics.metered_bytes_acked.fetch_add(bytes, Ordering::Relaxed);
                }
                let _ = unit.reply.send(outcome.map_err(GatewayError::Metadata));
            }
        }
        Err(error) => {
            tracing::warn!(segment = %segment_path(segment_id), error = %error, "segment commit failed");
            fail_all(to_commit, GatewayError::Metadata(error), poisoned, shared);
        }
    }
}

fn fail_all(units: Vec<PendingUnit>, error: GatewayError, poisoned: &mut HashMap<Bytes, u64>, shared: &Shared) {
    let watermark = shared.last_received.load(Ordering::SeqCst);
    for unit in units {
        for append in &unit.appends {
            poisoned.insert(append.stream_key(), watermark);
        }
        let _ = unit.reply.send(Err(error.clone()));
    }
}
