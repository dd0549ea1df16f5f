//! The server side of `shale.metadata.v1`: [`MetadataService`] serves a
//! [`crate::Metadata`] to gateways and readers (whose client, `RemoteMetadata`, lives in
//! the contract crate).

mod server;

pub use server::MetadataService;
