//! The stored form of a token's info, as metadata keeps it in `AccessTokenRecord.info`:
//! JSON, frozen in the shape tokens were first stored in (which was S2's
//! `AccessTokenInfo` of the time). It changes only with a migration of stored tokens;
//! what S2's API sends and answers is the S2 edge's business, not this.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use base64::Engine;

use super::scope::{OpGroups, Operation, ReadWrite, ResourceSet, Scope, TokenInfo};
use super::scram::{ScramKeys, ScramSecrets};

/// The stored bytes of `info`, as tokens without SCRAM keys were stored.
#[cfg(test)]
pub fn encode(info: &TokenInfo) -> Vec<u8> {
    encode_with_scram(info, None)
}

/// The stored bytes of `info` with the token's SCRAM keys (tokens issued since SASL).
pub fn encode_with_scram(info: &TokenInfo, scram: Option<&ScramSecrets>) -> Vec<u8> {
    let mut stored = StoredInfo::from(info);
    stored.scram =
        scram.map(|s| StoredScram { sha256: StoredKeys::from(&s.sha256), sha512: StoredKeys::from(&s.sha512) });
    // Serializing these plain structs to a Vec cannot fail.
    serde_json::to_vec(&stored).unwrap_or_default()
}

/// The info stored in `bytes`; an error names what is wrong.
pub fn decode(bytes: &[u8]) -> Result<TokenInfo, String> {
    let stored: StoredInfo = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    stored.into_info()
}

/// The SCRAM keys stored in `bytes`: `None` for a token issued before they were kept.
pub fn decode_scram(bytes: &[u8]) -> Result<Option<ScramSecrets>, String> {
    let stored: StoredInfo = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Some(scram) = stored.scram else { return Ok(None) };
    Ok(Some(ScramSecrets { sha256: scram.sha256.into_keys()?, sha512: scram.sha512.into_keys()? }))
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredScram {
    sha256: StoredKeys,
    sha512: StoredKeys,
}

/// One hash's SCRAM keys, the byte strings in standard base64.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredKeys {
    salt: String,
    iterations: u32,
    stored_key: String,
    server_key: String,
}

impl From<&ScramKeys> for StoredKeys {
    fn from(keys: &ScramKeys) -> Self {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        Self {
            salt: b64(&keys.salt),
            iterations: keys.iterations,
            stored_key: b64(&keys.stored_key),
            server_key: b64(&keys.server_key),
        }
    }
}

impl StoredKeys {
    fn into_keys(self) -> Result<ScramKeys, String> {
        let bytes =
            |s: &str| base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| format!("scram key: {e}"));
        Ok(ScramKeys {
            salt: bytes(&self.salt)?,
            iterations: self.iterations,
            stored_key: bytes(&self.stored_key)?,
            server_key: bytes(&self.server_key)?,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredInfo {
    id: String,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    auto_prefix_streams: bool,
    scope: StoredScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scram: Option<StoredScram>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredScope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    basins: Option<StoredSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    streams: Option<StoredSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    access_tokens: Option<StoredSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    op_groups: Option<StoredGroups>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ops: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredSet {
    Exact(String),
    Prefix(String),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredGroups {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account: Option<StoredReadWrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    basin: Option<StoredReadWrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream: Option<StoredReadWrite>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredReadWrite {
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

impl From<&TokenInfo> for StoredInfo {
    fn from(info: &TokenInfo) -> Self {
        let set = |set: &ResourceSet| match set {
            ResourceSet::None => None,
            ResourceSet::Exact(name) => Some(StoredSet::Exact(name.clone())),
            ResourceSet::Prefix(prefix) => Some(StoredSet::Prefix(prefix.clone())),
        };
        let rw = |g: Option<ReadWrite>| g.map(|g| StoredReadWrite { read: g.read, write: g.write });
        let scope = &info.scope;
        StoredInfo {
            id: info.id.clone(),
            expires_at: info.expires_at.clone(),
            auto_prefix_streams: info.auto_prefix_streams,
            scope: StoredScope {
                basins: set(&scope.basins),
                streams: set(&scope.streams),
                access_tokens: set(&scope.access_tokens),
                op_groups: scope.op_groups.as_ref().map(|g| StoredGroups {
                    account: rw(g.account),
                    basin: rw(g.basin),
                    stream: rw(g.stream),
                }),
                ops: scope.ops.as_ref().map(|ops| ops.iter().map(|op| op.name().to_string()).collect()),
            },
            scram: None,
        }
    }
}

impl StoredInfo {
    fn into_info(self) -> Result<TokenInfo, String> {
        let set = |set: Option<StoredSet>| match set {
            None => ResourceSet::None,
            Some(StoredSet::Exact(name)) => ResourceSet::Exact(name),
            Some(StoredSet::Prefix(prefix)) => ResourceSet::Prefix(prefix),
        };
        let rw = |g: Option<StoredReadWrite>| g.map(|g| ReadWrite { read: g.read, write: g.write });
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

    /// Bytes stored before the model had its own types decode, and encode back the same.
    #[test]
    fn stored_tokens_read_and_write_the_same_bytes() {
        let stored = br#"{"id":"ro","expires_at":null,"auto_prefix_streams":false,"scope":{"basins":{"prefix":"team-a-"},"op_groups":{"stream":{"read":true,"write":false}},"ops":["append","read"]}}"#;
        let info = decode(stored).unwrap();
        assert_eq!(info.scope.basins, ResourceSet::Prefix("team-a-".into()));
        assert_eq!(info.scope.streams, ResourceSet::None);
        assert!(info.scope.permits(Operation::Read) && info.scope.permits(Operation::Append));
        assert!(!info.scope.permits(Operation::Trim));
        assert_eq!(encode(&info), stored.to_vec());
        let nulls = br#"{"id":"x","expires_at":null,"auto_prefix_streams":null,"scope":{"streams":null,"ops":null}}"#;
        assert_eq!(decode(nulls).unwrap().scope, Scope::default());
        assert!(decode(br#"{"id":"x","scope":{"ops":["no-such-op"]}}"#).unwrap_err().contains("no-such-op"));
        assert!(decode(br#"{"id":"x","scope":{},"extra":1}"#).is_err());
        assert_eq!(decode_scram(stored).unwrap(), None, "a token stored before SCRAM has no keys");
    }

    #[test]
    fn scram_keys_are_stored_beside_the_info_and_read_back() {
        let info = decode(br#"{"id":"k","scope":{"ops":["read"]}}"#).unwrap();
        let secrets = ScramSecrets::derive("secret");
        let bytes = encode_with_scram(&info, Some(&secrets));
        assert_eq!(decode(&bytes).unwrap(), info);
        assert_eq!(decode_scram(&bytes).unwrap(), Some(secrets));
    }
}
