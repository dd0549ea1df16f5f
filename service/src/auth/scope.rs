//! S2's access-token model: operations, the groups that grant them, resource sets, and a
//! token's scope, in S2's JSON shapes (`AccessTokenInfo` of S2's OpenAPI spec).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Declares [`Operation`] and the list of all of them from one list of names.
macro_rules! operations {
    ($($op:ident),* $(,)?) => {
        /// Every operation a token may be granted (S2's `Operation`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Operation {
            $($op),*
        }

        const ALL_OPERATIONS: &[Operation] = &[$(Operation::$op),*];
    };
}

operations!(
    ListBasins,
    CreateBasin,
    DeleteBasin,
    ReconfigureBasin,
    GetBasinConfig,
    IssueAccessToken,
    RevokeAccessToken,
    ListAccessTokens,
    ListStreams,
    CreateStream,
    DeleteStream,
    GetStreamConfig,
    ReconfigureStream,
    CheckTail,
    Append,
    Read,
    Trim,
    Fence,
    AccountMetrics,
    BasinMetrics,
    StreamMetrics,
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

    /// The kebab-case name S2 gives it.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

/// Names a token may act on: none, one exact name, or every name with a prefix (an empty
/// prefix is every name; an empty exact name is none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceSet {
    #[default]
    #[serde(skip)]
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

    fn is_none(&self) -> bool {
        *self == ResourceSet::None
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadWrite {
    #[serde(default, deserialize_with = "null_is_default")]
    pub read: bool,
    #[serde(default, deserialize_with = "null_is_default")]
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

/// Read and write permissions per level (S2's `PermittedOperationGroups`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpGroups {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<ReadWrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basin: Option<ReadWrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<ReadWrite>,
}

/// What a token may do, and on what (S2's `AccessTokenScope`). Missing resource sets
/// match nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "ResourceSet::is_none", deserialize_with = "resource_set")]
    pub basins: ResourceSet,
    #[serde(default, skip_serializing_if = "ResourceSet::is_none", deserialize_with = "resource_set")]
    pub streams: ResourceSet,
    #[serde(default, skip_serializing_if = "ResourceSet::is_none", deserialize_with = "resource_set")]
    pub access_tokens: ResourceSet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_groups: Option<OpGroups>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<BTreeSet<Operation>>,
}

/// S2's clients send `null` for unset fields.
fn null_is_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `null` is the same as a missing set.
fn resource_set<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ResourceSet, D::Error> {
    null_is_default(deserializer)
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

/// A token as it is issued and listed (S2's `AccessTokenInfo`), and as metadata stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenInfo {
    pub id: String,
    /// RFC 3339; `None` never expires.
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub auto_prefix_streams: bool,
    pub scope: Scope,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn scope(json: serde_json::Value) -> Scope {
        serde_json::from_value(json).unwrap()
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

    #[test]
    fn token_info_reads_s2_json() {
        let json = serde_json::json!({
            "id": "ro", "expires_at": null, "auto_prefix_streams": false,
            "scope": { "basins": { "prefix": "team-a-" }, "streams": null, "access_tokens": null,
                       "op_groups": { "account": null, "basin": null, "stream": { "read": true, "write": false } },
                       "ops": null }
        });
        let info: TokenInfo = serde_json::from_value(json).unwrap();
        assert_eq!(info.scope.basins, ResourceSet::Prefix("team-a-".into()));
        assert_eq!(info.scope.streams, ResourceSet::None);
        let back = serde_json::to_value(&info).unwrap();
        assert_eq!(back["scope"]["basins"], serde_json::json!({ "prefix": "team-a-" }));
        assert!(serde_json::from_value::<Scope>(serde_json::json!({ "ops": ["no-such-op"] })).is_err());
    }
}
