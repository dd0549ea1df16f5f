//! `shale.metadata.v1` over gRPC: [`MetadataService`] serves a [`crate::Metadata`];
//! [`RemoteMetadata`] calls it and implements [`crate::MetadataApi`], so gateways and
//! readers use a remote metadata exactly as they use one in process.

mod client;
mod commit_pipe;
pub(crate) mod convert;
mod server;

pub use client::{RemoteConfig, RemoteMetadata};
pub use server::MetadataService;

/// Commit requests carry one entry per append; allow large groups.
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;
