//! What key compaction must leave for the table tier.

use futures::future::BoxFuture;
use shale_metadata_contract::KeyCompactionTarget;

use crate::CompactorError;

/// Where the table tier holds a stream's history through: `Some(seq)` when its basin
/// tiers (records below `seq` are in the table), `None` when it does not. Key compaction
/// drops nothing the table has not got.
pub type TieredThrough =
    Box<dyn Fn(KeyCompactionTarget) -> BoxFuture<'static, Result<Option<u64>, CompactorError>> + Send + Sync>;
