use async_trait::async_trait;
use shale_metadata::{CommitRequest, Metadata, MetadataError, UnitOutcome};

/// Where sealed segments are committed: the metadata service, in process or remote.
#[async_trait]
pub trait Sequencer: Send + Sync + 'static {
    async fn commit(&self, request: CommitRequest) -> Result<Vec<UnitOutcome>, MetadataError>;
}

#[async_trait]
impl Sequencer for Metadata {
    async fn commit(&self, request: CommitRequest) -> Result<Vec<UnitOutcome>, MetadataError> {
        Metadata::commit(self, request).await
    }
}
