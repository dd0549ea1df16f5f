//! The transport-neutral client service: every operation of the client API with typed
//! requests and answers, and every S2 rule (names, limits, create-on-read, the past-tail
//! check, create-or-get, which role serves what) in one place. Transports (`shale-api`'s
//! S2 REST API and `shale.v1`, `shale-kafka`) only translate their wire formats to these
//! calls; this crate knows none of them.
//!
//! It reaches the roles through `shale-gateway`, `shale-reader` and the metadata contract
//! (`shale-metadata-contract`), never through the metadata implementation: it links no
//! SlateDB.
//!
//! - `catalog`: basins and streams;
//! - `records`: append, append sessions, reads, read sessions, check tail;
//! - `follow`: a read session that follows the tail (history, live records, heartbeats);
//! - `append_pipeline`: pipelined appends of one session, acked in order;
//! - `tokens`: access tokens (issue, list, revoke);
//! - `consumers`: tracked consumer positions and their lag (a Shale extension);
//!   `consumer_metrics`: their lag on `/metrics`, top-N;
//! - `tables`: a basin's table tier status (a Shale extension);
//! - `auth`: the access model (tokens, scopes, [`Access`] and its checks);
//! - `error`: [`ServiceError`], with the [`shale_proto::ErrorCode`] each transport maps.
//!
//! Every call first checks the caller's [`Access`]: one check per call, whatever the
//! transport.

mod append_pipeline;
pub mod auth;
mod catalog;
mod consumer_metrics;
mod consumers;
mod error;
mod follow;
mod records;
mod tables;
mod tokens;

use std::sync::Arc;

use shale_gateway::Gateway;
use shale_metadata_contract::MetadataApi;
use shale_reader::Reader;
use shale_storage::Clock;

use crate::auth::{Access, Authenticator, Operation, Target};

pub use error::ServiceError;

pub use append_pipeline::MAX_PENDING as MAX_PENDING_APPENDS;
pub use catalog::{ListQuery, Provisioned};
pub use consumers::ConsumerView;
pub use follow::{FollowEvent, Follower};
pub use records::{producer_stamp, ReadSessionRequest};
pub use tables::TableStore;

/// Which calls this process serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `shale serve`: everything.
    AllInOne,
    /// `shale gateway`: appends and basin/stream management.
    Gateway,
    /// `shale reader`: reads, check-tail and live reads.
    Reader,
    /// `shale agent`: a gateway and a reader against remote metadata, serving Kafka's
    /// protocol as one of a cluster of agents (and the client API, as `serve` does).
    Agent,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::AllInOne => "all-in-one",
            Role::Gateway => "gateway",
            Role::Reader => "reader",
            Role::Agent => "agent",
        }
    }
}

/// Whether the process is stopping: [`Self::begin`] ends every live read with
/// [`ServiceError::ShuttingDown`] (S2's error event on SSE and S2S, `UNAVAILABLE` on
/// gRPC), so a graceful stop does not wait on sessions that never end by themselves.
#[derive(Clone, Debug)]
pub struct Draining(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Draining {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Draining {
    pub fn begin(&self) {
        self.0.send_replace(true);
    }

    pub fn watch(&self) -> tokio::sync::watch::Receiver<bool> {
        self.0.subscribe()
    }
}

/// The client API of one process, whatever transport asks, on behalf of one caller:
/// every call checks the caller's [`Access`] before it does anything.
#[derive(Clone)]
pub struct Service {
    role: Role,
    metadata: Arc<dyn MetadataApi>,
    gateway: Option<Arc<Gateway>>,
    reader: Option<Arc<Reader>>,
    clock: Arc<dyn Clock>,
    auth: Arc<Authenticator>,
    /// Who is calling; [`Access::Open`] until [`Self::for_caller`] says otherwise.
    access: Access,
    draining: Draining,
    /// Where the basins' tables are, for their status.
    table_store: Option<TableStore>,
}

impl Service {
    pub fn new(
        role: Role,
        metadata: Arc<dyn MetadataApi>,
        gateway: Option<Arc<Gateway>>,
        reader: Option<Arc<Reader>>,
        clock: Arc<dyn Clock>,
        auth: Arc<Authenticator>,
        draining: Draining,
    ) -> Self {
        Self { role, metadata, gateway, reader, clock, auth, access: Access::Open, draining, table_store: None }
    }

    /// The same service, able to tell the table tier's status from `table_store`.
    pub fn with_table_store(self, table_store: Option<TableStore>) -> Self {
        Self { table_store, ..self }
    }

    /// The same service acting for `access`.
    pub fn for_caller(&self, access: Access) -> Self {
        Self { access, ..self.clone() }
    }

    /// Who this service acts for.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Who lets callers in: for transports that authenticate in their own way (Kafka's SASL).
    pub fn authenticator(&self) -> &Arc<Authenticator> {
        &self.auth
    }

    /// What keeps a session's caller checked while it runs.
    fn session_guard(&self) -> crate::auth::SessionGuard {
        crate::auth::SessionGuard::new(self.auth.clone(), self.access.clone())
    }

    /// Refuses unless the caller may run `op` on `target`.
    fn allow(&self, op: Operation, target: Target<'_>) -> Result<(), ServiceError> {
        self.access.check(op, target)
    }

    /// The caller's full name for a stream (auto-prefixed), once it may run `op` on it.
    fn allow_stream<'a>(
        &self,
        op: Operation,
        basin: &str,
        stream: &'a str,
    ) -> Result<std::borrow::Cow<'a, str>, ServiceError> {
        let stream = self.access.full_stream_name(stream);
        self.allow(op, Target::Stream { basin, stream: &stream })?;
        Ok(stream)
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// What readiness asks: the metadata this process uses.
    pub fn metadata(&self) -> &Arc<dyn MetadataApi> {
        &self.metadata
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The gateway, or the error that says to send appends to one.
    fn gateway(&self) -> Result<&Arc<Gateway>, ServiceError> {
        self.gateway.as_ref().ok_or(ServiceError::WrongRole {
            role: self.role.name(),
            call: "appends",
            use_role: "gateway",
        })
    }

    /// The reader, or the error that says to send reads to one.
    fn reader(&self) -> Result<&Arc<Reader>, ServiceError> {
        self.reader.as_ref().ok_or(ServiceError::WrongRole {
            role: self.role.name(),
            call: "reads, check-tail and live reads",
            use_role: "reader",
        })
    }

    /// Metadata for basin and stream management, which gateways serve.
    fn catalog(&self) -> Result<&dyn MetadataApi, ServiceError> {
        match self.role {
            Role::Reader => Err(ServiceError::WrongRole {
                role: self.role.name(),
                call: "basin and stream management",
                use_role: "gateway",
            }),
            Role::AllInOne | Role::Gateway | Role::Agent => Ok(self.metadata.as_ref()),
        }
    }
}

fn valid_basin(basin: &str) -> Result<(), ServiceError> {
    shale_proto::names::validate_basin(basin).map_err(ServiceError::BadRequest)
}

fn valid_stream(basin: &str, stream: &str) -> Result<(), ServiceError> {
    valid_basin(basin)?;
    shale_proto::names::validate_stream(stream).map_err(ServiceError::BadRequest)
}
