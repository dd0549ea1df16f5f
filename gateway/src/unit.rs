//! What the batcher and the committer share: a submitted unit waiting for its segment,
//! and the state the gateway handle, batcher and committer hold together.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use shale_metadata_contract::AppendAck;
use shale_storage::object_store::ObjectStore;
use shale_storage::Clock;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::append::EncodedAppend;
use crate::{GatewayConfig, GatewayError, GatewayMetrics};

pub(crate) type Reply = oneshot::Sender<Result<Vec<AppendAck>, GatewayError>>;

/// Appends that must commit together, waiting for a segment.
pub(crate) struct PendingUnit {
    /// Submission order: ids grow with each `submit`.
    pub id: u64,
    pub appends: Vec<EncodedAppend>,
    pub reply: Reply,
    pub bytes: usize,
    pub _permit: OwnedSemaphorePermit,
}

/// State the gateway handle, batcher and committer share.
pub(crate) struct Shared {
    pub config: GatewayConfig,
    pub clock: Arc<dyn Clock>,
    pub store: Arc<dyn ObjectStore>,
    pub metrics: Arc<GatewayMetrics>,
    /// Highest unit id handed out by `submit`: a failure poisons its streams up to here.
    pub last_submitted: AtomicU64,
}
