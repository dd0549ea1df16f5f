//! S2's `AccessTokenInfo` JSON (S2's OpenAPI spec: `AccessTokenInfo`,
//! `AccessTokenScope`, `ResourceSet`, `PermittedOperationGroups`, `Operation` names):
//! what `/v1/access-tokens` takes and lists. Unset fields may come as `null`, as S2's
//! clients send them; unknown fields and operations are refused. Metadata's stored form
//! of a token is the service's own, even where its shape is the same.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use shale_service::auth::{OpGroups, Operation, ReadWrite, ResourceSet, Scope, TokenInfo};

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenInfoJson {
    id: String,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    auto_prefix_streams: bool,
    scope: ScopeJson,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    basins: Option<ResourceSetJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    streams: Option<ResourceSetJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    access_tokens: Option<ResourceSetJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    op_groups: Option<OpGroupsJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ops: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ResourceSetJson {
    Exact(String),
    Prefix(String),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpGroupsJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<ReadWriteJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    basin: Option<ReadWriteJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream: Option<ReadWriteJson>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadWriteJson {
    #[serde(default, deserialize_with = "null_is_default")]
    read: bool,
    #[serde(default, deserialize_with = "null_is_default")]
    write: bool,
}

fn null_is_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl From<&TokenInfo> for TokenInfoJson {
    fn from(info: &TokenInfo) -> Self {
        let set = |set: &ResourceSet| match set {
            ResourceSet::None => None,
            ResourceSet::Exact(name) => Some(ResourceSetJson::Exact(name.clone())),
            ResourceSet::Prefix(prefix) => Some(ResourceSetJson::Prefix(prefix.clone())),
        };
        let rw = |g: Option<ReadWrite>| g.map(|g| ReadWriteJson { read: g.read, write: g.write });
        let scope = &info.scope;
        TokenInfoJson {
            id: info.id.clone(),
            expires_at: info.expires_at.clone(),
            auto_prefix_streams: info.auto_prefix_streams,
            scope: ScopeJson {
                basins: set(&scope.basins),
                streams: set(&scope.streams),
                access_tokens: set(&scope.access_tokens),
                op_groups: scope.op_groups.as_ref().map(|g| OpGroupsJson {
                    account: rw(g.account),
                    basin: rw(g.basin),
                    stream: rw(g.stream),
                }),
                ops: scope.ops.as_ref().map(|ops| ops.iter().map(|op| op.name().to_string()).collect()),
            },
        }
    }
}

impl TokenInfoJson {
    pub fn into_info(self) -> Result<TokenInfo, String> {
        let set = |set: Option<ResourceSetJson>| match set {
            None => ResourceSet::None,
            Some(ResourceSetJson::Exact(name)) => ResourceSet::Exact(name),
            Some(ResourceSetJson::Prefix(prefix)) => ResourceSet::Prefix(prefix),
        };
        let rw = |g: Option<ReadWriteJson>| g.map(|g| ReadWrite { read: g.read, write: g.write });
        let scope = self.scope;
        let ops = match scope.ops {
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|name| Operation::from_name(name).ok_or_else(|| format!("unknown operation `{name}`")))
                    .collect::<Result<BTreeSet<_>, _>>()?,
            ),
        };
        Ok(TokenInfo {
            id: self.id,
            expires_at: self.expires_at,
            auto_prefix_streams: self.auto_prefix_streams,
            scope: Scope {
                basins: set(scope.basins),
                streams: set(scope.streams),
                access_tokens: set(scope.access_tokens),
                op_groups: scope.op_groups.map(|g| OpGroups {
                    account: rw(g.account),
                    basin: rw(g.basin),
                    stream: rw(g.stream),
                }),
                ops,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_info_reads_and_writes_s2_json() {
        let json = serde_json::json!({
            "id": "ro", "expires_at": null, "auto_prefix_streams": false,
            "scope": { "basins": { "prefix": "team-a-" }, "streams": null, "access_tokens": null,
                       "op_groups": { "account": null, "basin": null, "stream": { "read": true, "write": false } },
                       "ops": null }
        });
        let info = serde_json::from_value::<TokenInfoJson>(json).unwrap().into_info().unwrap();
        assert_eq!(info.scope.basins, ResourceSet::Prefix("team-a-".into()));
        assert_eq!(info.scope.streams, ResourceSet::None);
        assert!(info.scope.permits(Operation::Read) && !info.scope.permits(Operation::Append));
        let back = serde_json::to_value(TokenInfoJson::from(&info)).unwrap();
        assert_eq!(back["scope"]["basins"], serde_json::json!({ "prefix": "team-a-" }));
        assert!(back["scope"].get("streams").is_none(), "{back}");
        let unknown = serde_json::json!({ "id": "x", "scope": { "ops": ["no-such-op"] } });
        let unknown = serde_json::from_value::<TokenInfoJson>(unknown).unwrap().into_info().unwrap_err();
        assert!(unknown.contains("no-such-op"), "{unknown}");
        let extra = serde_json::json!({ "id": "x", "scope": {}, "extra": 1 });
        assert!(serde_json::from_value::<TokenInfoJson>(extra).is_err());
    }
}
