//! The leader lease of a standalone metadata process.
//!
//! SlateDB fencing decides who may *write*: opening the database fences the previous
//! writer, whose next write fails. It says nothing to a fenced instance that only reads,
//! so without more it could keep answering lookups from a state that no longer grows.
//! The lease closes that gap:
//! 1. After opening the database, an instance *claims*: it PUTs the leader record
//!    (`cluster/leader.json`: instance id and advertised address), waits one lease plus
//!    one renew interval, then makes one durable write (which fails if a newer instance
//!    has opened the database) before it answers anything.
//! 2. While it answers, it re-reads the record every `renew_interval`; a read that names
//!    it extends its lease to `read start + lease`. Every call checks the lease first.
//! 3. A read that names another instance revokes the lease at once and triggers a
//!    durable write: if SlateDB says fenced, the instance stops for good; if the write
//!    succeeds, the record was left by an instance that was itself fenced, and this one
//!    claims again (step 1).
//!
//! An old leader's last renewal started before the new record was written, so its lease
//! ends less than one lease after that write; the new leader starts answering later
//! than that.

use std::sync::{Arc, Mutex};

use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::time::Instant;

use crate::leader_record::read_record;
use crate::{ClusterTiming, LeaderRecord, Metadata, MetadataError, LEADER_RECORD};

/// Whether this instance may answer calls right now.
#[derive(Debug)]
pub struct LeaderLease {
    instance: String,
    valid_until: Mutex<Option<Instant>>,
}

impl LeaderLease {
    pub fn is_held(&self) -> bool {
        let valid_until = *self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        valid_until.is_some_and(|until| Instant::now() < until)
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Ok while `metadata` may answer under this lease: not halted, lease held.
    pub fn check(&self, metadata: &Metadata) -> Result<(), MetadataError> {
        metadata.check_usable()?;
        if self.is_held() {
            Ok(())
        } else {
            Err(MetadataError::NotLeader)
        }
    }

    fn set(&self, until: Option<Instant>) {
        *self.valid_until.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = until;
    }
}

/// Claims leadership for `metadata` and keeps the lease in a background task, which
/// ends when the instance is fenced.
pub fn hold_leadership(
    metadata: Arc<Metadata>,
    store: Arc<dyn ObjectStore>,
    address: String,
    config: ClusterTiming,
) -> Arc<LeaderLease> {
    let lease = Arc::new(LeaderLease { instance: metadata.instance.clone(), valid_until: Mutex::new(None) });
    tokio::spawn(keep_lease(metadata, store, address, config, lease.clone()));
    lease
}

async fn keep_lease(
    metadata: Arc<Metadata>,
    store: Arc<dyn ObjectStore>,
    address: String,
    config: ClusterTiming,
    lease: Arc<LeaderLease>,
) {
    let path = Path::from(LEADER_RECORD);
    'claim: loop {
        let record = LeaderRecord {
            instance: lease.instance.clone(),
            address: address.clone(),
            claimed_at_ms: metadata.clock.now_ms(),
        };
        let body = PutPayload::from(serde_json::to_vec(&record).unwrap_or_default());
        if let Err(e) = store.put(&path, body).await {
            tracing::warn!(error = %e, "cannot write the leader record; retrying");
            tokio::time::sleep(config.renew_interval).await;
            continue 'claim;
        }
        tracing::info!(instance = %lease.instance, %address, wait = ?(config.lease + config.renew_interval),
            "leader record written; waiting for any earlier lease to lapse");
        tokio::time::sleep(config.lease + config.renew_interval).await;
        // The record only says who claimed last; SlateDB says who may write. An instance
        // fenced while it stalled could otherwise claim, win the record and serve reads
        // from before the new writer existed: one durable write settles it first.
        match metadata.confirm_writer().await {
            Ok(()) => {}
            Err(MetadataError::Fenced) => {
                tracing::warn!(instance = %lease.instance, "fenced by a newer instance; not taking the lease");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot confirm writer status; claiming again");
                tokio::time::sleep(config.renew_interval).await;
                continue 'claim;
            }
        }
        loop {
            if metadata.is_halted() {
                // Fenced, or a durable write failed: give the lease up at once so a
                // standby takes over after one lease, not never.
                lease.set(None);
                tracing::warn!(instance = %lease.instance, "metadata halted; leader lease given up");
                return;
            }
            let started = Instant::now();
            match read_record(store.as_ref(), &path).await {
                Ok(Some(current)) if current.instance == lease.instance => {
                    let was_held = lease.is_held();
                    lease.set(Some(started + config.lease));
                    if !was_held {
                        tracing::info!(instance = %lease.instance, "leader lease held; serving");
                    }
                }
                Ok(other) => {
                    lease.set(None);
                    let claimed_by = other.map(|r| r.instance).unwrap_or_default();
                    tracing::warn!(%claimed_by, "leader record names another instance; checking whether we are fenced");
                    match metadata.confirm_writer().await {
                        Ok(()) => {
                            tracing::warn!(
                                "still the writer: the record was left by a fenced instance; claiming again"
                            );
                            continue 'claim;
                        }
                        Err(MetadataError::Fenced) => return,
                        Err(e) => tracing::warn!(error = %e, "cannot confirm writer status"),
                    }
                }
                // The lease lapses by itself if reads keep failing.
                Err(e) => tracing::warn!(error = %e, "cannot read the leader record"),
            }
            tokio::time::sleep(config.renew_interval).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use shale_storage::object_store::memory::InMemory;
    use shale_storage::SystemClock;

    use super::*;

    /// An instance that was fenced while it stalled claims the record after the new
    /// writer opened the database: it must never take the lease.
    #[tokio::test]
    async fn an_instance_fenced_before_it_claims_never_takes_the_lease() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let stale = Arc::new(Metadata::open(store.clone(), "metadata", Arc::new(SystemClock)).await.unwrap());
        let newer = Metadata::open(store.clone(), "metadata", Arc::new(SystemClock)).await.unwrap();
        let config = ClusterTiming {
            lease: Duration::from_millis(200),
            renew_interval: Duration::from_millis(50),
            ..Default::default()
        };
        let lease = hold_leadership(stale.clone(), store, "127.0.0.1:1".into(), config);
        let mut halted = stale.watch_halted();
        tokio::time::timeout(Duration::from_secs(10), halted.wait_for(Option::is_some)).await.unwrap().unwrap();
        assert!(stale.is_fenced());
        assert!(!lease.is_held(), "a fenced instance never serves");
        newer.close().await.unwrap();
    }
}
