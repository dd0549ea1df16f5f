//! Access control: who is calling, and whether they may. S2's access tokens (scopes of
//! operations over basins, streams and tokens, with expiry and stream auto-prefixing)
//! stored hashed in metadata, a root token from the configuration, and the checks every
//! service call makes, whatever transport it came on.
//!
//! - `scope`: the token model (operations, groups, resource sets, scopes);
//! - `stored`: a token's info as metadata stores it (a frozen JSON shape);
//! - `tokens`: [`Authenticator`]: the root token, issuing, listing and revoking, and
//!   resolving a presented secret (cached for the revocation bound);
//! - `access`: [`Access`], what one request may do, and its checks;
//! - `session`: the same checks again during sessions that outlive their request;
//! - `scram`: the SCRAM keys each token keeps, for Kafka's SASL/SCRAM.
//!
//! Each transport finds the presented secret in its own way (`shale-api`'s tower layer
//! reads `Authorization: Bearer`) and asks [`Authenticator::authenticate`] for the caller.

mod access;
mod scope;
mod scram;
mod session;
mod stored;
mod tokens;

pub use access::{Access, Grant, Target};
pub use scope::{OpGroups, Operation, ReadWrite, ResourceSet, Scope, TokenInfo};
pub use scram::{ScramHash, ScramKeys, ScramSecrets, SCRAM_ITERATIONS};
pub use session::SessionGuard;
pub use tokens::{Authenticator, IssuedToken, DEFAULT_REVOCATION_BOUND, MIN_CHOSEN_SECRET_CHARS};
