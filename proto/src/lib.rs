//! Shale's wire and storage formats, shared by every role.
//!
//! - [`record`]: records as clients send them and as readers return them, metered
//!   sizes and S2 command records (`fence`, `trim`).
//! - [`segment`]: the segment object format (header, blocks, footer, trailer), specified
//!   byte by byte in `docs/segment-format.md`.
//! - [`timestamp`]: how a record's final timestamp is derived from the client's, the
//!   arrival time and the stream's timestamping mode; used by the sequencer at commit and
//!   by readers at decode, so both always agree.
//! - [`names`]: basin and stream name rules.
//! - [`error_code`]: the one code set every crate's errors map to, and its HTTP status
//!   and gRPC code.
//! - [`varint`]: LEB128 helpers for the formats above.
//! - [`codec`]: the gRPC codec of the services below (prost's, encoding each message into
//!   room reserved for all of it).
//! - [`grpc`]: the public gRPC API `shale.v1`, generated at build time from
//!   `protos/` (see `proto/README.md`).
//! - [`metadata_rpc`]: the internal API `shale.metadata.v1` between roles.
//! - [`s2`]: S2's record messages, for S2 wire compatibility on the HTTP API.

pub mod codec;
pub mod error_code;
pub mod names;
pub mod record;
pub mod segment;
pub mod timestamp;
pub mod varint;

pub use error_code::ErrorCode;
pub use record::{Command, Header, Headers, Record, SequencedRecord};
pub use segment::{BlockInfo, SegmentBuilder, SegmentError, SegmentFooter};
pub use timestamp::{TimestampPolicy, TimestampResolver, TimestampingMode};

/// The public gRPC API, `shale.v1`, generated from `protos/shale/v1/shale.proto`.
#[allow(clippy::all, missing_docs)]
pub mod grpc {
    tonic::include_proto!("shale.v1");

    /// Descriptor set for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("shale_v1_descriptor");
}

/// The internal API between roles, `shale.metadata.v1`, generated from
/// `protos/shale/metadata/v1/metadata.proto`: gateways commit through it, readers look
/// up index entries and watch commits through it.
#[allow(clippy::all, missing_docs)]
pub mod metadata_rpc {
    tonic::include_proto!("shale.metadata.v1");
}

/// S2's record messages (`s2.v1`), written from S2's public specification, for
/// `application/protobuf` bodies and `s2s/proto` sessions.
#[allow(clippy::all, missing_docs)]
pub mod s2 {
    tonic::include_proto!("s2.v1");
}
