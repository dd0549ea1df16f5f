//! The requests one connection has read but not yet answered. Produce requests overlap:
//! each is submitted to the gateway as soon as it is read (so a connection's batches are
//! sequenced in arrival order) and answered once committed, while the next ones are
//! read and submitted. Every other request runs alone, after everything before it is
//! answered and before anything after it starts, as a Kafka broker runs them all.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Produce requests one connection may have submitted and not yet answered: Kafka's
/// producers keep up to 5 in flight (`max.in.flight.requests.per.connection`).
pub const MAX_IN_FLIGHT: u32 = 8;

/// Slots for a connection's unanswered requests: a produce holds one, anything else all.
pub struct InFlight {
    slots: Arc<Semaphore>,
}

impl InFlight {
    pub fn new() -> Self {
        Self { slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)) }
    }

    /// A slot for a produce request: waits while `MAX_IN_FLIGHT` are unanswered or a
    /// request that runs alone is.
    pub async fn produce_slot(&self) -> OwnedSemaphorePermit {
        self.acquire(1).await
    }

    /// Every slot, for a request that runs alone: waits until everything before it is
    /// answered.
    pub async fn exclusive(&self) -> OwnedSemaphorePermit {
        self.acquire(MAX_IN_FLIGHT).await
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
