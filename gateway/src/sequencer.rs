use async_trait::async_trait;
use shale_metadata::{CommitRequest, Metadata, MetadataError, UnitOutcome};

/// Where sealed segments are committed: the metadata service, in process or remote.
#[async_trait]
pub trait Sequencer: Send + Sync + 'static {
    /// Commits segments in order in one durable write; one outcome list per segment.
    async fn commit_many(&self, requests: Vec<CommitRequest>) -> Result<Vec<Vec<UnitOutcome>>, MetadataError>;
}

#[async_trait]
impl Sequencer for Metadata {
    async fn commit_many(&self, requests: Vec<CommitRequest>) -> Result<Vec<Vec<UnitOutcome>>, MetadataError> {
        Metadata::commit_many(self, requests).await
    }
}
