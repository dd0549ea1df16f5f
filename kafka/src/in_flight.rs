//! The requests one connection has read but not yet answered. Produce requests overlap:
//! each is submitted to the gateway as soon as it is read (so a connection's batches are
//! sequenced in arrival order) and answered once committed, while the next ones are
//! read and submitted. Every other request runs alone, after everything before it is
//! answered and before anything after it starts, as a Kafka broker runs them all.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Produce requests one connection may have submitted and not yet answered. Java's
/// producer keeps up to 5 in flight; librdkafka without idempotence keeps as many as it
/// makes, often one small request per partition whose `linger.ms` ran out, so a count
/// of a few would let one connection commit only a few small requests per commit round
/// trip (16 partitions at 30 ms per store request wrote 5 MiB/s with 8). At 20 MiB/s over
/// 16 partitions (about 1,800 partition batches a second) room for 256 let the window
/// fill: acks took 209 ms at p50 where the commits took 131; with 1024, 145 ms.
pub const MAX_IN_FLIGHT: u32 = 1024;

/// Bytes of produce requests one connection may hold unanswered: one request of the
/// largest size ([`crate::KafkaConfig`]'s default `max_request_bytes`) or many small
/// ones, so a connection's memory stays bounded whatever the count.
pub const MAX_IN_FLIGHT_BYTES: u32 = 64 << 20;

/// Slots for a connection's unanswered requests: a produce holds one and its bytes,
/// anything else every slot.
pub struct InFlight {
    slots: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
}

/// A request's place among the unanswered ones (a produce's slot and bytes, or every
/// slot), given back when it is answered.
pub struct Slot {
    _slots: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
}

impl InFlight {
    pub fn new() -> Self {
        Self {
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            bytes: Arc::new(Semaphore::new(MAX_IN_FLIGHT_BYTES as usize)),
        }
    }

    /// A slot for a produce request of `len` bytes: waits while `MAX_IN_FLIGHT` are
    /// unanswered, while the ones unanswered hold too many bytes for it, or while a
    /// request that runs alone is.
    pub async fn produce_slot(&self, len: usize) -> Slot {
        let slots = self.acquire(1).await;
        let weight = u32::try_from(len).unwrap_or(u32::MAX).clamp(1, MAX_IN_FLIGHT_BYTES);
        let bytes = self.bytes.clone().acquire_many_owned(weight).await.expect("the semaphore is never closed");
        Slot { _slots: slots, _bytes: Some(bytes) }
    }

    /// Every slot, for a request that runs alone: waits until everything before it is
    /// answered.
    pub async fn exclusive(&self) -> Slot {
        Slot { _slots: self.acquire(MAX_IN_FLIGHT).await, _bytes: None }
    }

    /// Waits until every request read before the one holding a produce slot is
    /// answered (the gateway was full: its own requests free room as they commit).
    pub async fn wait_for_earlier(&self) {
        drop(self.acquire(MAX_IN_FLIGHT - 1).await);
    }

    async fn acquire(&self, slots: u32) -> OwnedSemaphorePermit {
        self.slots.clone().acquire_many_owned(slots).await.expect("the semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn many_small_produces_fit_and_bytes_bound_the_big_ones() {
        let in_flight = InFlight::new();
        let mut small = Vec::new();
        for _ in 0..MAX_IN_FLIGHT - 1 {
            small.push(in_flight.produce_slot(1024).await);
        }
        let big = in_flight.produce_slot(MAX_IN_FLIGHT_BYTES as usize).now_or_never();
        assert!(big.is_none(), "a request of the largest size waits for the bytes held");
        drop(small);
        let big = in_flight.produce_slot(usize::MAX).await;
        assert!(in_flight.produce_slot(1).now_or_never().is_none(), "nothing beside a full byte bound");
        drop(big);
        assert!(in_flight.exclusive().now_or_never().is_some(), "all answered: one that runs alone goes");
    }
}
