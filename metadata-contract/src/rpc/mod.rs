//! The client side of `shale.metadata.v1`: [`RemoteMetadata`] implements
//! [`crate::MetadataApi`] over gRPC, so gateways and readers use a remote metadata
//! exactly as they use one in process. The server lives in `shale-metadata`.

mod client;
mod commit_pipe;
mod connection;

pub use client::RemoteMetadata;
pub use connection::{BearerToken, ClusterToken, RemoteConfig};

/// Commit requests carry one entry per append; allow large groups.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;
