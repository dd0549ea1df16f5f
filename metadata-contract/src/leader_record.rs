//! The leader record: which metadata instance claimed the lease last and where it
//! listens. The lease itself is the server's (`shale-metadata`); clients read the record
//! to find the leader.

use serde::{Deserialize, Serialize};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};

/// Where the leader record lives in the object store.
pub const LEADER_RECORD: &str = "cluster/leader.json";

/// The stored leader record: who claimed last and where it listens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRecord {
    pub instance: String,
    pub address: String,
    pub claimed_at_ms: u64,
}

/// The current leader record, if any.
pub async fn read_record(store: &dyn ObjectStore, path: &Path) -> Result<Option<LeaderRecord>, String> {
    match store.get(path).await {
        Ok(result) => {
            let bytes = result.bytes().await.map_err(|e| e.to_string())?;
            serde_json::from_slice(&bytes).map(Some).map_err(|e| format!("bad leader record: {e}"))
        }
        Err(shale_storage::object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}
