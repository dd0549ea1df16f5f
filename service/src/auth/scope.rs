//! The access-token model: operations, the groups that grant them, resource sets, and
//! a token's scope, as domain types. Their encodings live at the edges: S2's JSON in the
//! S2 API, protobuf in `shale.v1`, and the stored form in [`super::stored`].

use std::collections::BTreeSet;

/// Declares [`Operation`], its names and the list of all of them from one table.
macro_rules! operations {
    ($($op:ident = $name:literal),* $(,)?) => {
        /// Every operation a token may be granted.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Operation {
            $($op),*
        }

        const ALL_OPERATIONS: &[Operation] = &[$(Operation::$op),*];

        impl Operation {
            /// Every operation there is.
            pub fn all() -> &'static [Operation] {
                ALL_OPERATIONS
            }

            /// The operation's name (kebab-case, as S2 names it too).
            pub fn name(self) -> &'static str {
                match self {
                    $(Operation::$op => $name),*
                }
            }

            /// The operation with this name, if there is one.
            pub fn from_name(name: &str) -> Option<Operation> {
                match name {
                    $($name => Some(Operation::$op),)*
                    _ => None,
                }
            }
        }
    };
}

operations!(
    ListBasins = "list-basins",
    CreateBasin = "create-basin",
    DeleteBasin = "delete-basin",
    ReconfigureBasin = "reconfigure-basin",
    GetBasinConfig = "get-basin-config",
    IssueAccessToken = "issue-access-token",
    RevokeAccessToken = "revoke-access-token",
    ListAccessTokens = "list-access-tokens",
    ListStreams = "list-streams",
    CreateStream = "create-stream",
    DeleteStream = "delete-stream",
    GetStreamConfig = "get-stream-config",
    ReconfigureStream = "reconfigure-stream",
    CheckTail = "check-tail",
    Append = "append",
    Read = "read",
    Trim = "trim",
    Fence = "fence",
    AccountMetrics = "account-metrics",
    BasinMetrics = "basin-metrics",
    StreamMetrics = "stream-metrics",
);

/// The level of an operation group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Account,
    Basin,
    Stream,
}

impl Operation {
    /// The group that grants this operation: its level, and whether it writes.
    fn group(self) -> (Level, bool) {
        use Operation::*;
        match self {
            ListBasins | ListAccessTokens | AccountMetrics => (Level::Account, false),
            CreateBasin | DeleteBasin | IssueAccessToken | RevokeAccessToken => (Level::Account, true),
            GetBasinConfig | ListStreams | BasinMetrics => (Level::Basin, false),
            ReconfigureBasin => (Level::Basin, true),
            GetStreamConfig | CheckTail | Read | StreamMetrics => (Level::Stream, false),
            CreateStream | DeleteStream | ReconfigureStream | Append | Trim | Fence => (Level::Stream, true),
        }
    }
}

/// Names a token may act on: none, one exact name, or every name with a prefix (an empty
/// prefix is every name; an empty exact name is none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ResourceSet {
    #[default]
    None,
    Exact(String),
    Prefix(String),
}

impl ResourceSet {
    pub fn matches(&self, name: &str) -> bool {
        match self {
            ResourceSet::None => false,
            ResourceSet::Exact(exact) => !exact.is_empty() && exact == name,
            ResourceSet::Prefix(prefix) => name.starts_with(prefix.as_str()),
        }
    }

    /// Whether every name `other` matches, this matches too.
    pub fn covers(&self, other: &ResourceSet) -> bool {
        match other {
            ResourceSet::None => true,
            ResourceSet::Exact(name) if name.is_empty() => true,
            ResourceSet::Exact(name) => self.matches(name),
            ResourceSet::Prefix(prefix) => match self {
                ResourceSet::Prefix(mine) => prefix.starts_with(mine.as_str()),
                _ => false,
            },
        }
    }
}

/// Read and write permission on one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadWrite {
    pub read: bool,
    pub write: bool,
}

impl ReadWrite {
    fn grants(&self, writes: bool) -> bool {
        if writes {
            self.write
        } else {
            self.read
        }
    }
}

/// Read and write permissions per level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpGroups {
    pub account: Option<ReadWrite>,
    pub basin: Option<ReadWrite>,
    pub stream: Option<ReadWrite>,
}

/// What a token may do, and on what. Missing resource sets match nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    pub basins: ResourceSet,
    pub streams: ResourceSet,
    pub access_tokens: ResourceSet,
    pub op_groups: Option<OpGroups>,
    pub ops: Option<BTreeSet<Operation>>,
}

impl Scope {
    /// Whether the operation is granted, by `ops` or by its group.
    pub fn permits(&self, op: Operation) -> bool {
        if self.ops.as_ref().is_some_and(|ops| ops.contains(&op)) {
            return true;
        }
        let (level, writes) = op.group();
        let Some(groups) = &self.op_groups else { return false };
        let group = match level {
            Level::Account => groups.account,
            Level::Basin => groups.basin,
            Level::Stream => groups.stream,
        };
        group.is_some_and(|g| g.grants(writes))
    }

    /// Every operation granted.
    pub fn operations(&self) -> Vec<Operation> {
        ALL_OPERATIONS.iter().copied().filter(|op| self.permits(*op)).collect()
    }

    /// Whether a token with this scope may issue one with `other`: every operation and
    /// every name `other` grants, this grants too.
    pub fn covers(&self, other: &Scope) -> bool {
        other.operations().iter().all(|op| self.permits(*op))
            && self.basins.covers(&other.basins)
            && self.streams.covers(&other.streams)
            && self.access_tokens.covers(&other.access_tokens)
    }
}

/// A token as it is issued and listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    pub id: String,
    /// RFC 3339; `None` never expires.
    pub expires_at: Option<String>,
    pub auto_prefix_streams: bool,
    pub scope: Scope,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn scope(json: serde_json::Value) -> Scope {
        let info = serde_json::json!({ "id": "t", "scope": json });
        super::super::stored::decode(info.to_string().as_bytes()).unwrap().scope
    }

    #[test]
    fn groups_and_ops_grant_operations() {
        let read_streams = scope(serde_json::json!({ "op_groups": { "stream": { "read": true } } }));
        assert!(read_streams.permits(Operation::Read));
        assert!(read_streams.permits(Operation::CheckTail));
        assert!(!read_streams.permits(Operation::Append));
        assert!(!read_streams.permits(Operation::ListBasins));
        let with_op = scope(serde_json::json!({ "ops": ["append"], "op_groups": { "stream": { "read": true } } }));
        assert!(with_op.permits(Operation::Append));
        assert!(!with_op.permits(Operation::Trim));
        assert_eq!(Operation::IssueAccessToken.name(), "issue-access-token");
        for op in ALL_OPERATIONS {
            assert_eq!(Operation::from_name(op.name()), Some(*op));
        }
        assert_eq!(Operation::from_name("no-such-op"), None);
    }

    #[test]
    fn resource_sets_match_and_cover() {
        let team_a = ResourceSet::Prefix("team-a-".into());
        assert!(team_a.matches("team-a-x"));
        assert!(!team_a.matches("team-b-x"));
        assert!(!ResourceSet::Exact(String::new()).matches(""));
        assert!(ResourceSet::Prefix(String::new()).matches("anything"));
        assert!(team_a.covers(&ResourceSet::Prefix("team-a-x".into())));
        assert!(team_a.covers(&ResourceSet::Exact("team-a-y".into())));
        assert!(!team_a.covers(&ResourceSet::Prefix("team-".into())));
        assert!(!ResourceSet::Exact("x".into()).covers(&ResourceSet::Prefix("x".into())));
        assert!(ResourceSet::None.covers(&ResourceSet::None));
    }

    #[test]
    fn a_scope_covers_only_narrower_scopes() {
        let wide = scope(serde_json::json!({
            "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" },
            "op_groups": { "stream": { "read": true, "write": true } }
        }));
        let narrow = scope(serde_json::json!({
            "basins": { "exact": "team-a-x" }, "streams": { "prefix": "logs/" }, "ops": ["read"]
        }));
        let wider_ops = scope(serde_json::json!({ "basins": { "exact": "team-a-x" }, "ops": ["delete-basin"] }));
        assert!(wide.covers(&narrow));
        assert!(!narrow.covers(&wide));
        assert!(!wide.covers(&wider_ops));
    }
}
