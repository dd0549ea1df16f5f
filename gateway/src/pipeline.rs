//! Uploading sealed segments and committing them in seal order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use bytes::Bytes;
use shale_metadata_contract::{
    CommitAppend, CommitRequest, CommitTicket, CommitUnit, MetadataError, PipelinePosition, UnitOutcome,
};
use shale_proto::{BlockInfo, SegmentBuilder};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, PutPayload};
use shale_storage::PutInPlace;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::unit::{PendingUnit, Shared};
use crate::GatewayError;
use shale_metadata_contract::MetadataApi;
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
        blocks.into_iter().map(|(stream, records, block)| builder.push_block(stream, records, block)).collect();
    let object = PutPayload::from_iter(builder.finish_parts());
    metrics.segment_bytes.fetch_add(object.content_length() as u64, Ordering::Relaxed);
    let path = segment_path(segment_id);
    let started = Instant::now();
    // Nothing reads a segment before the commit that follows this put names it.
    let put = store.put_opts(&Path::from(path.as_str()), object, PutInPlace::options()).await;
    metrics.upload_latency.observe(started.elapsed());
    put.map_err(|e| {
        tracing::warn!(object = %path, error = %e, "segment upload failed");
        GatewayError::Upload { object: path.clone(), reason: shale_storage::describe(&e).to_string() }
    })?;
    Ok(infos)
}

type Upload = Result<Vec<BlockInfo>, GatewayError>;

/// Stream key -> highest unit id that must fail because an earlier one did.
type Poisoned = Arc<Mutex<HashMap<Bytes, u64>>>;

/// A commit call sequenced at metadata, waiting to become durable.
struct InFlight {
    seq: u64,
    ticket: Result<CommitTicket, MetadataError>,
    waiting: Vec<(Vec<PendingUnit>, Instant)>,
    /// Segments the call covers (including those answered without a commit).
    segments: usize,
}

/// Takes sealed segments in seal order, waits for each upload and sequences a commit
/// call at metadata, without waiting for the call to become durable: several calls are
/// in flight at once, applied in seal order. Segments behind the first whose uploads
/// have already finished join its call (group commit). The acker answers callers as
/// each call becomes durable, in order. After a failure, every unit of the failed
/// streams submitted before the failure was seen fails too (here for units not yet
/// sent; at metadata, through the pipeline position, for units already sent), so no
/// caller sees record N+1 acked after record N failed.
pub(crate) async fn run_committer(
    mut sealed: mpsc::UnboundedReceiver<Sealed>,
    sequencer: Arc<dyn MetadataApi>,
    done: mpsc::UnboundedSender<()>,
    shared: Arc<Shared>,
) {
    let poisoned: Poisoned = Arc::default();
    let seen_through = Arc::new(AtomicU64::new(0));
    let (in_flight, to_ack) = mpsc::channel(shared.config.max_inflight_segments);
    let acker = tokio::spawn(run_acker(to_ack, poisoned.clone(), seen_through.clone(), done, shared.clone()));
    let pipeline = shale_storage::ids::unique_id(shared.clock.as_ref()).0;
    let mut seq = 0;
    let mut carried: Option<Sealed> = None;
    loop {
        let mut first = match carried.take() {
            Some(segment) => segment,
            None => match sealed.recv().await {
                Some(segment) => segment,
                None => break,
            },
        };
        let upload = finish_upload(&mut first).await;
        let mut group = vec![(first, upload)];
        while group.len() < shared.config.max_commit_group {
            match sealed.try_recv() {
                Ok(mut next) if next.upload.is_finished() => {
                    let upload = finish_upload(&mut next).await;
                    group.push((next, upload));
                }
                Ok(next) => {
                    carried = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        // Read before filtering: a failure the acker records meanwhile is then still
        // unseen for metadata, which fails its stream's units.
        let seen = seen_through.load(Ordering::SeqCst);
        let segments = group.len();
        let (requests, waiting) = prepare(group, &poisoned, &shared);
        // Only calls sent to metadata are numbered: metadata refuses a call when one
        // numbered before it, unanswered, did not reach it (`Poison`), so a number it
        // never sees would look like a call gone to another instance. A call not sent
        // carries the number of the last one sent, which the acker answers before it.
        let ticket = if requests.is_empty() {
            Ok(CommitTicket::new(async { Ok(Vec::new()) }))
        } else {
            seq += 1;
            let position = PipelinePosition { pipeline, seq, seen_through: seen, first_send: true };
            sequencer.sequence(requests, Some(position)).await
        };
        if in_flight.send(InFlight { seq, ticket, waiting, segments }).await.is_err() {
            break;
        }
    }
    drop(in_flight);
    let _ = acker.await;
}

/// Answers the callers of each sequenced call once it is durable, in sequence order.
async fn run_acker(
    mut in_flight: mpsc::Receiver<InFlight>,
    poisoned: Poisoned,
    seen_through: Arc<AtomicU64>,
    done: mpsc::UnboundedSender<()>,
    shared: Arc<Shared>,
) {
    while let Some(call) = in_flight.recv().await {
        let outcome = match call.ticket {
            Ok(ticket) => ticket.await,
            Err(error) => Err(error),
        };
        answer(outcome, call.waiting, &poisoned, &shared);
        seen_through.store(call.seq, Ordering::SeqCst);
        for _ in 0..call.segments {
            let _ = done.send(());
        }
    }
}

async fn finish_upload(segment: &mut Sealed) -> Upload {
    match (&mut segment.upload).await {
        Ok(result) => result,
        Err(join) => Err(GatewayError::Upload { object: segment_path(segment.segment_id), reason: join.to_string() }),
    }
}

/// The commit requests of a group of uploaded segments, and the units waiting on each;
/// units of failed uploads and poisoned streams are answered here.
fn prepare(
    group: Vec<(Sealed, Upload)>,
    poisoned: &Poisoned,
    shared: &Shared,
) -> (Vec<CommitRequest>, Vec<(Vec<PendingUnit>, Instant)>) {
    let mut poisoned = lock(poisoned);
    // Units arrive in nearly submission order; nothing older than the oldest unit here
    // can still be pending, so its poison marks can go.
    if let Some(oldest) = group.iter().flat_map(|(segment, _)| segment.units.iter().map(|u| u.id)).min() {
        poisoned.retain(|_, watermark| *watermark >= oldest);
    }
    let mut requests = Vec::with_capacity(group.len());
    let mut waiting: Vec<(Vec<PendingUnit>, Instant)> = Vec::with_capacity(group.len());
    for (segment, upload) in group {
        let Sealed { segment_id, units, sealed_at, .. } = segment;
        let infos = match upload {
            Ok(infos) => infos,
            Err(error) => {
                fail_all(units, error, &mut poisoned, shared);
                continue;
            }
        };
        let (request, units) = commit_request(segment_id, units, infos, &poisoned);
        if !units.is_empty() {
            requests.push(request);
            waiting.push((units, sealed_at));
        }
    }
    (requests, waiting)
}

fn answer(
    outcome: Result<Vec<Vec<UnitOutcome>>, MetadataError>,
    waiting: Vec<(Vec<PendingUnit>, Instant)>,
    poisoned: &Poisoned,
    shared: &Shared,
) {
    let outcomes = match outcome {
        Ok(outcomes) => outcomes,
        Err(error) => {
            tracing::warn!(segments = waiting.len(), error = %error, "segment commit failed");
            let mut poisoned = lock(poisoned);
            for (units, _) in waiting {
                fail_all(units, GatewayError::Metadata(error.clone()), &mut poisoned, shared);
            }
            return;
        }
    };
    debug_assert_eq!(outcomes.len(), waiting.len(), "one outcome list per segment");
    for ((units, sealed_at), outcomes) in waiting.into_iter().zip(outcomes) {
        shared.metrics.commit_latency.observe(sealed_at.elapsed());
        debug_assert_eq!(outcomes.len(), units.len(), "one outcome per unit");
        for (unit, outcome) in units.into_iter().zip(outcomes) {
            match &outcome {
                Ok(acks) => {
                    let records: u64 = acks.iter().map(|a| a.end.seq_num - a.start.seq_num).sum();
                    let bytes: u64 = unit.appends.iter().map(|a| a.commit.metered_bytes).sum();
                    shared.metrics.records_acked.fetch_add(records, Ordering::Relaxed);
                    shared.metrics.metered_bytes_acked.fetch_add(bytes, Ordering::Relaxed);
                }
                Err(_) => {
                    let watermark = shared.last_submitted.load(Ordering::SeqCst);
                    let mut poisoned = lock(poisoned);
                    for append in &unit.appends {
                        poisoned.insert(append.stream_key(), watermark);
                    }
                }
            }
            let _ = unit.reply.send(outcome.map_err(GatewayError::Metadata));
        }
    }
}

fn lock(poisoned: &Poisoned) -> std::sync::MutexGuard<'_, HashMap<Bytes, u64>> {
    poisoned.lock().unwrap_or_else(|p| p.into_inner())
}

/// Pairs every append with its block; units that must fail after an earlier failure are
/// answered here and left out.
fn commit_request(
    segment_id: u128,
    units: Vec<PendingUnit>,
    infos: Vec<BlockInfo>,
    poisoned: &HashMap<Bytes, u64>,
) -> (CommitRequest, Vec<PendingUnit>) {
    let mut infos = infos.into_iter();
    let mut to_commit = Vec::with_capacity(units.len());
    let mut request = CommitRequest { segment_id, units: Vec::with_capacity(units.len()) };
    for unit in units {
        let blocks: Vec<BlockInfo> = infos.by_ref().take(unit.appends.len()).collect();
        debug_assert_eq!(blocks.len(), unit.appends.len(), "one block per append, in order");
        if let Some(stream) =
            unit.appends.iter().map(|a| a.stream_key()).find(|s| poisoned.get(s).is_some_and(|w| *w >= unit.id))
        {
            let stream = String::from_utf8_lossy(&stream).into_owned();
            let _ = unit.reply.send(Err(GatewayError::EarlierAppendFailed { stream }));
            continue;
        }
        let appends = unit
            .appends
            .iter()
            .zip(&blocks)
            .map(|(append, block)| CommitAppend { offset: block.offset, len: block.len, ..append.commit.clone() })
            .collect();
        request.units.push(CommitUnit { appends });
        to_commit.push(unit);
    }
    (request, to_commit)
}

fn fail_all(units: Vec<PendingUnit>, error: GatewayError, poisoned: &mut HashMap<Bytes, u64>, shared: &Shared) {
    let watermark = shared.last_submitted.load(Ordering::SeqCst);
    for unit in units {
        for append in &unit.appends {
            poisoned.insert(append.stream_key(), watermark);
        }
        let _ = unit.reply.send(Err(error.clone()));
    }
}
