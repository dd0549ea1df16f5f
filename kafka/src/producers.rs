//! InitProducerId for idempotent producers: a producer id unique across processes and
//! restarts (the clock's milliseconds above 16 bits that start from the broker id and
//! a random number and count up),
//! epoch 0, or the next epoch for a producer that asks to bump its own (KIP-360).
//! Sequences are checked by metadata's producer state, per partition, in the commit.
//! A transactional id's producer id and epoch come from metadata (`transactions`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use shale_storage::Clock;

use crate::Kafka;

pub struct ProducerIds {
    clock: Arc<dyn Clock>,
    counter: AtomicU64,
}

impl ProducerIds {
    /// Ids of broker `node_id`: brokers of one cluster start their counters apart (by a
    /// hash of the id) so two issuing in the same millisecond rarely meet.
    pub fn new(clock: Arc<dyn Clock>, node_id: i32) -> Self {
        let start = shale_storage::ids::random_in(0..1 << 8) ^ (u64::from(node_id.unsigned_abs()) << 8);
        Self { clock, counter: AtomicU64::new(start) }
    }

    /// A fresh producer id: positive, and unique within a broker as long as fewer than
    /// 65,536 are issued per millisecond.
    pub fn next(&self) -> i64 {
        let low = self.counter.fetch_add(1, Ordering::Relaxed) & 0xffff;
        let id = (self.clock.now_ms() << 16) | low;
        (id & (i64::MAX as u64)) as i64
    }
}

pub fn init(kafka: &Kafka, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if request.producer_id.0 >= 0 {
        let Some(epoch) = request.producer_epoch.checked_add(1).filter(|&e| e >= 0) else {
            return response.with_producer_id(ProducerId(kafka.producer_ids.next())).with_producer_epoch(0);
        };
        return response.with_producer_id(request.producer_id).with_producer_epoch(epoch);
    }
    response.with_producer_id(ProducerId(kafka.producer_ids.next())).with_producer_epoch(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed;
    impl Clock for Fixed {
        fn now_ms(&self) -> u64 {
            1_800_000_000_000
        }
    }

    #[test]
    fn ids_are_positive_and_distinct() {
        let ids = ProducerIds::new(Arc::new(Fixed), 3);
        let issued: std::collections::HashSet<i64> = (0..1000).map(|_| ids.next()).collect();
        assert_eq!(issued.len(), 1000);
        assert!(issued.iter().all(|&id| id > 0));
    }
}
