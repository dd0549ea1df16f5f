//! The open segment and when to seal it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::time::Instant;

use shale_metadata_contract::AppendAck;
use shale_storage::object_store::ObjectStore;
use shale_storage::Clock;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::append::{encode, AppendInput, EncodedAppend};
use crate::pipeline::{run_committer, Sealed};
use crate::unit::{PendingUnit, Shared};
use crate::{GatewayConfig, GatewayError, GatewayMetrics};
use shale_metadata_contract::MetadataApi;

/// An atomic append checked and encoded, not yet submitted ([`Gateway::encode`]).
#[derive(Debug)]
pub struct EncodedUnit {
    appends: Vec<EncodedAppend>,
}

/// The acks of a submitted append, once it is committed.
pub struct PendingAppend(Pin<Box<dyn Future<Output = Result<Vec<AppendAck>, GatewayError>> + Send>>);

impl Future for PendingAppend {
    type Output = Result<Vec<AppendAck>, GatewayError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// The write path's front door. Cheap to share behind an `Arc`.
pub struct Gateway {
    shared: Arc<Shared>,
    inflight: Arc<Semaphore>,
    units: mpsc::UnboundedSender<PendingUnit>,
    shutdown: watch::Sender<bool>,
    tasks: tokio::sync::Mutex<Option<(JoinHandle<()>, JoinHandle<()>)>>,
}

impl Gateway {
    /// Starts the batcher and committer tasks on the current runtime.
    pub fn start(
        config: GatewayConfig,
        store: Arc<dyn ObjectStore>,
        sequencer: Arc<dyn MetadataApi>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GatewayError> {
        config.validate().map_err(GatewayError::InvalidArgument)?;
        let shared =
            Arc::new(Shared { config, clock, store, metrics: Arc::default(), last_submitted: AtomicU64::new(0) });
        let inflight = Arc::new(Semaphore::new(shared.config.max_inflight_bytes));
        let (units_tx, units_rx) = mpsc::unbounded_channel();
        let (sealed_tx, sealed_rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let batcher = Batcher {
            shared: shared.clone(),
            open: OpenSegment::default(),
            in_flight: 0,
            last_seal: None,
            last_segment_id: 0,
            sealed: sealed_tx,
        };
        let batcher = tokio::spawn(batcher.run(units_rx, done_rx, shutdown_rx));
        let committer = tokio::spawn(run_committer(sealed_rx, sequencer, done_tx, shared.clone()));
        Ok(Self {
            shared,
            inflight,
            units: units_tx,
            shutdown,
            tasks: tokio::sync::Mutex::new(Some((batcher, committer))),
        })
    }

    pub fn metrics(&self) -> Arc<GatewayMetrics> {
        self.shared.metrics.clone()
    }

    /// Appends records to one stream; resolves once they are durable and sequenced.
    pub async fn append(&self, input: AppendInput) -> Result<AppendAck, GatewayError> {
        let mut acks = self.append_atomic(vec![input]).await?;
        acks.pop().ok_or_else(|| GatewayError::InvalidArgument("no append".into()))
    }

    /// Appends to several streams at once: all succeed or all fail.
    pub async fn append_atomic(&self, inputs: Vec<AppendInput>) -> Result<Vec<AppendAck>, GatewayError> {
        self.submit(inputs)?.await
    }

    /// Validates and enqueues an append at once, returning a future for its acks. Units
    /// submitted one after another from one task are sequenced in that order, which is
    /// what lets a session pipeline batches without waiting for each ack.
    pub fn submit(&self, inputs: Vec<AppendInput>) -> Result<PendingAppend, GatewayError> {
        self.submit_encoded(self.encode(inputs)?).map_err(|(error, _)| error)
    }

    /// Checks an atomic append against S2's limits and encodes it, without submitting it.
    pub fn encode(&self, inputs: Vec<AppendInput>) -> Result<EncodedUnit, GatewayError> {
        if inputs.is_empty() {
            return Err(GatewayError::InvalidArgument("an atomic append needs at least one stream".into()));
        }
        let arrival = self.shared.clock.now_ms();
        let appends = inputs.into_iter().map(|input| encode(input, arrival)).collect::<Result<Vec<_>, _>>()?;
        Ok(EncodedUnit { appends })
    }

    /// [`Gateway::submit`] for an append already encoded. Past `max_inflight_bytes` the
    /// unit comes back with the error, to submit again once earlier appends are answered
    /// (a session waits for its oldest one).
    pub fn submit_encoded(&self, unit: EncodedUnit) -> Result<PendingAppend, (GatewayError, EncodedUnit)> {
        let bytes: usize = unit.appends.iter().map(|a| a.block.len()).sum();
        let limit = self.shared.config.max_inflight_bytes;
        let Some(permit) = u32::try_from(bytes).ok().and_then(|n| self.inflight.clone().try_acquire_many_owned(n).ok())
        else {
            let overloaded =
                GatewayError::Overloaded { inflight_bytes: limit - self.inflight.available_permits(), limit };
            return Err((overloaded, unit));
        };
        let appends = unit.appends;
        let (reply, answer) = oneshot::channel();
        let id = self.shared.last_submitted.fetch_add(1, Ordering::SeqCst) + 1;
        let unit = PendingUnit { id, appends, reply, bytes, _permit: permit };
        let submitted_at = Instant::now();
        if let Err(mpsc::error::SendError(unit)) = self.units.send(unit) {
            return Err((GatewayError::ShuttingDown, EncodedUnit { appends: unit.appends }));
        }
        let metrics = self.shared.metrics.clone();
        Ok(PendingAppend(Box::pin(async move {
            // Refused at submission is `ShuttingDown` (nothing applied); an answer lost
            // after the unit entered the pipeline says nothing of its commit.
            let result = answer.await.map_err(|_| GatewayError::Unanswered)?;
            metrics.append_latency.observe(submitted_at.elapsed());
            match &result {
                Ok(_) => metrics.appends_acked.fetch_add(1, Ordering::Relaxed),
                Err(_) => metrics.appends_failed.fetch_add(1, Ordering::Relaxed),
            };
            result
        })))
    }

    /// Stops taking appends, seals and commits what is pending, and waits for the last
    /// commit. Appends after this fail with `ShuttingDown`.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        if let Some((batcher, committer)) = self.tasks.lock().await.take() {
            let _ = batcher.await;
            let _ = committer.await;
        }
    }
}

#[derive(Default)]
struct OpenSegment {
    units: Vec<PendingUnit>,
    bytes: usize,
    opened_at: Option<tokio::time::Instant>,
}

struct Batcher {
    shared: Arc<Shared>,
    open: OpenSegment,
    /// Sealed segments not yet committed.
    in_flight: usize,
    last_seal: Option<tokio::time::Instant>,
    /// The last segment id given out: ids increase in seal order (see `next_segment_id`).
    last_segment_id: u128,
    sealed: mpsc::UnboundedSender<Sealed>,
}

impl Batcher {
    async fn run(
        mut self,
        mut units: mpsc::UnboundedReceiver<PendingUnit>,
        mut done: mpsc::UnboundedReceiver<()>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut receiving = true;
        loop {
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                Some(()) = done.recv() => {
                    self.in_flight -= 1;
                }
                _ = shutdown.changed(), if receiving => {
                    // Refuse new appends; those already queued still get through.
                    units.close();
                }
                unit = units.recv(), if receiving => match unit {
                    Some(unit) => {
                        self.add(unit);
                        while self.open.bytes < self.shared.config.max_segment_bytes {
                            match units.try_recv() {
                                Ok(unit) => self.add(unit),
                                Err(_) => break,
                            }
                        }
                    }
                    None => receiving = false,
                },
                _ = sleep_until(deadline), if deadline.is_some() => {}
            }
            let now = Instant::now();
            if self.due(now) || (!receiving && !self.pipeline_full()) {
                self.seal();
            }
            if !receiving && self.open.units.is_empty() && self.in_flight == 0 {
                break;
            }
        }
    }

    /// Whether the open segment should seal now: when full; otherwise not before
    /// `min_seal_interval` after the last seal, and then at once if nothing is in flight,
    /// or once it has waited `linger`.
    fn due(&self, now: tokio::time::Instant) -> bool {
        let config = &self.shared.config;
        let Some(opened_at) = self.open.opened_at else { return false };
        if self.pipeline_full() {
            return false;
        }
        if self.open.bytes >= config.max_segment_bytes {
            return true;
        }
        if self.last_seal.is_some_and(|last| now < last + config.min_seal_interval) {
            return false;
        }
        self.in_flight == 0 || now >= opened_at + config.linger
    }

    /// When [`Self::due`] may next become true without another event. None while the
    /// pipeline is full: only a finished commit (an event) lets a segment seal then, and a
    /// deadline already past would wake the loop again at once, over and over.
    fn next_deadline(&self) -> Option<tokio::time::Instant> {
        let opened_at = self.open.opened_at?;
        if self.pipeline_full() {
            return None;
        }
        let config = &self.shared.config;
        let ready = if self.in_flight == 0 { opened_at } else { opened_at + config.linger };
        let allowed = self.last_seal.map(|last| last + config.min_seal_interval);
        Some(allowed.map_or(ready, |allowed| ready.max(allowed)))
    }

    /// Whether `max_inflight_segments` sealed segments await their commits: no segment
    /// seals until one is done.
    fn pipeline_full(&self) -> bool {
        self.in_flight >= self.shared.config.max_inflight_segments
    }

    fn add(&mut self, unit: PendingUnit) {
        self.open.bytes += unit.bytes;
        self.open.opened_at.get_or_insert_with(Instant::now);
        self.open.units.push(unit);
    }

    /// A ULID stamped by the gateway's clock (metadata judges a segment's age by it),
    /// greater than the previous one even within one millisecond, so one gateway's
    /// segments sort in seal order (compaction takes the oldest segments first).
    fn next_segment_id(&mut self) -> u128 {
        let fresh = shale_storage::ids::segment_id(self.shared.clock.as_ref());
        self.last_segment_id = fresh.max(self.last_segment_id.saturating_add(1));
        self.last_segment_id
    }

    /// Seals the open segment (if any) and hands it to the upload and commit pipeline.
    fn seal(&mut self) {
        if self.open.units.is_empty() || self.pipeline_full() {
            return;
        }
        let open = std::mem::take(&mut self.open);
        self.last_seal = Some(Instant::now());
        let segment_id = self.next_segment_id();
        let metrics = &self.shared.metrics;
        metrics.segments_sealed.fetch_add(1, Ordering::Relaxed);
        let blocks: Vec<_> = open
            .units
            .iter()
            .flat_map(|u| u.appends.iter().map(|a| (a.stream_key(), a.record_count(), a.block.clone())))
            .collect();
        let store = self.shared.store.clone();
        let upload = tokio::spawn(crate::pipeline::upload(store, segment_id, blocks, self.shared.metrics.clone()));
        self.in_flight += 1;
        let sealed = Sealed { segment_id, units: open.units, upload, sealed_at: Instant::now() };
        if let Err(mpsc::error::SendError(sealed)) = self.sealed.send(sealed) {
            // The committer only stops after the batcher, so this cannot happen; fail the
            // callers rather than leave them hanging if it ever does.
            for unit in sealed.units {
                let _ = unit.reply.send(Err(GatewayError::ShuttingDown));
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_storage::object_store::memory::InMemory;
    use shale_storage::ManualClock;

    /// A batcher and the receiving end of its sealed segments (nothing commits them).
    fn batcher(config: GatewayConfig) -> (Batcher, mpsc::UnboundedReceiver<Sealed>) {
        let shared = Arc::new(Shared {
            config,
            clock: Arc::new(ManualClock::new(0)),
            store: Arc::new(InMemory::new()),
            metrics: Arc::default(),
            last_submitted: AtomicU64::new(0),
        });
        let (sealed, sealed_rx) = mpsc::unbounded_channel();
        let batcher =
            Batcher { shared, open: OpenSegment::default(), in_flight: 0, last_seal: None, last_segment_id: 0, sealed };
        (batcher, sealed_rx)
    }

    fn unit(bytes: usize) -> PendingUnit {
        let permit = Arc::new(Semaphore::new(bytes)).try_acquire_many_owned(bytes as u32).expect("permits");
        PendingUnit { id: 1, appends: Vec::new(), reply: oneshot::channel().0, bytes, _permit: permit }
    }

    #[test]
    fn a_full_pipeline_leaves_the_loop_waiting_for_a_commit() {
        let config = GatewayConfig { max_inflight_segments: 2, ..GatewayConfig::default() };
        let linger = config.linger;
        let (mut batcher, _sealed) = batcher(config);
        batcher.add(unit(1024));
        let long_ago = Instant::now().checked_sub(linger * 4).expect("the clock is past four lingers");
        batcher.open.opened_at = Some(long_ago);
        batcher.in_flight = 2;
        assert!(!batcher.due(Instant::now()), "no seal while the pipeline is full");
        assert_eq!(batcher.next_deadline(), None, "no deadline to wake for: a past one would spin the loop");
        batcher.in_flight = 1;
        let now = Instant::now();
        assert!(batcher.due(now), "a slot free and the linger past: seal");
        assert!(batcher.next_deadline().is_some_and(|deadline| deadline <= now));
    }

    /// CPU time this thread has used, from `/proc` (clock ticks of 10 ms).
    #[cfg(target_os = "linux")]
    fn thread_cpu() -> std::time::Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("the thread's stat");
        let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
        let ticks = |i: usize| fields[i].parse::<u64>().expect("a tick count");
        // After the name: state is field 0, utime field 11, stime field 12.
        std::time::Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    /// The batcher's own thread (a current-thread runtime), waiting for a slot with a
    /// segment open past its linger, uses next to no CPU; it used all it could get.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn waiting_for_a_slot_takes_no_cpu() {
        let config = GatewayConfig { max_inflight_segments: 1, ..GatewayConfig::default() };
        let linger = config.linger;
        let (batcher, mut sealed) = batcher(config);
        let (units, units_rx) = mpsc::unbounded_channel();
        let (_done, done_rx) = mpsc::unbounded_channel();
        let (_shutdown, shutdown_rx) = watch::channel(false);
        let task = tokio::spawn(batcher.run(units_rx, done_rx, shutdown_rx));
        assert!(units.send(unit(1024)).is_ok());
        assert!(sealed.recv().await.is_some(), "the first append seals at once and fills the pipeline");
        assert!(units.send(unit(1024)).is_ok());
        tokio::time::sleep(linger * 2).await;
        let before = thread_cpu();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let used = thread_cpu() - before;
        task.abort();
        assert!(used < std::time::Duration::from_millis(100), "the waiting batcher used {used:?} of 500 ms");
    }
}
