//! S2's JSON shapes for basin and stream configs and their reconfigurations, mapped to
//! the service's types here and nowhere else: metadata stores its own format, so a
//! change in S2's JSON is a change in this file, never a data migration. Unknown fields
//! are refused (S2 ignores them): a setting Shale does not know is never taken as
//! applied.

use serde::{Deserialize, Serialize};
use shale_metadata_contract::{
    BasinConfig, BasinPatch, BodyFormat, DeleteOnEmpty, RetentionPolicy, StreamConfig, StreamPatch, StreamSetting,
    TablesConfig, TimestampingConfig,
};
use shale_proto::TimestampingMode;

use crate::ApiError;

/// S2's `StreamConfig`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfigJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    storage_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention_policy: Option<RetentionPolicyJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timestamping: Option<TimestampingJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delete_on_empty: Option<DeleteOnEmptyJson>,
}

/// S2's `retention_policy`: `{"age": secs}` or `{"infinite": {}}`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum RetentionPolicyJson {
    Age(u64),
    Infinite {},
}

impl RetentionPolicyJson {
    fn into_policy(self) -> RetentionPolicy {
        match self {
            RetentionPolicyJson::Age(secs) => RetentionPolicy::Age(secs),
            RetentionPolicyJson::Infinite {} => RetentionPolicy::Infinite,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimestampingJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<TimestampingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uncapped: Option<bool>,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteOnEmptyJson {
    #[serde(default)]
    min_age_secs: u64,
}

/// S2's `StreamReconfiguration`: the fields of [`StreamConfigJson`], those present
/// change and those `null` go back to the basin's default (so does every field of a
/// `null` `timestamping` or `delete_on_empty`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamPatchJson {
    #[serde(default, deserialize_with = "present")]
    storage_class: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    retention_policy: Option<Option<RetentionPolicyJson>>,
    #[serde(default, deserialize_with = "present")]
    timestamping: Option<Option<TimestampingPatchJson>>,
    #[serde(default, deserialize_with = "present")]
    delete_on_empty: Option<Option<DeleteOnEmptyPatchJson>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimestampingPatchJson {
    #[serde(default, deserialize_with = "present")]
    mode: Option<Option<TimestampingMode>>,
    #[serde(default, deserialize_with = "present")]
    uncapped: Option<Option<bool>>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteOnEmptyPatchJson {
    #[serde(default, deserialize_with = "present")]
    min_age_secs: Option<Option<u64>>,
}

/// S2's `BasinConfig`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasinConfigJson {
    #[serde(default)]
    default_stream_config: Option<StreamConfigJson>,
    /// S2's encryption of new streams: Shale has none, so only `null` is accepted (and
    /// shown, as s2-lite shows a basin without it).
    #[serde(default)]
    stream_cipher: Option<serde_json::Value>,
    #[serde(default)]
    create_stream_on_append: bool,
    #[serde(default)]
    create_stream_on_read: bool,
    /// The table tier (a Shale extension): shown only when on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tables: Option<TablesJson>,
}

/// `"tables": {"after_secs": N, "body_format": "binary" | "json", "serve_reads": bool}`:
/// records N seconds old are also written as Parquet; JSON bodies also as typed columns;
/// reads below a stream's trim point served from the table.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TablesJson {
    after_secs: u64,
    #[serde(default)]
    body_format: BodyFormatJson,
    #[serde(default)]
    serve_reads: bool,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BodyFormatJson {
    #[default]
    Binary,
    Json,
}

impl TablesJson {
    fn into_config(self) -> TablesConfig {
        let body_format = match self.body_format {
            BodyFormatJson::Binary => BodyFormat::Binary,
            BodyFormatJson::Json => BodyFormat::Json,
        };
        TablesConfig { after_secs: self.after_secs, body_format, serve_reads: self.serve_reads }
    }

    fn from_config(config: TablesConfig) -> Self {
        let body_format = match config.body_format {
            BodyFormat::Binary => BodyFormatJson::Binary,
            BodyFormat::Json => BodyFormatJson::Json,
        };
        Self { after_secs: config.after_secs, body_format, serve_reads: config.serve_reads }
    }
}

/// A field whose presence matters: absent is `None`, `null` is `Some(None)`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// S2's `BasinReconfiguration`: only the fields present change.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasinPatchJson {
    /// `null` resets every setting of the default stream config.
    #[serde(default, deserialize_with = "present")]
    default_stream_config: Option<Option<StreamPatchJson>>,
    #[serde(default)]
    create_stream_on_append: Option<bool>,
    #[serde(default)]
    create_stream_on_read: Option<bool>,
    #[serde(default)]
    stream_cipher: Option<serde_json::Value>,
    /// `null` turns the table tier off.
    #[serde(default, deserialize_with = "present")]
    tables: Option<Option<TablesJson>>,
}

fn no_cipher(cipher: &Option<serde_json::Value>) -> Result<(), ApiError> {
    match cipher {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(other) => {
            Err(ApiError::bad(format!("stream_cipher {other} is not supported: Shale does not encrypt streams")))
        }
    }
}

impl StreamConfigJson {
    pub fn into_config(self) -> StreamConfig {
        StreamConfig {
            storage_class: self.storage_class,
            retention_policy: self.retention_policy.map(RetentionPolicyJson::into_policy),
            timestamping: self.timestamping.map(|t| TimestampingConfig { mode: t.mode, uncapped: t.uncapped }),
            delete_on_empty: self.delete_on_empty.map(|d| DeleteOnEmpty { min_age_secs: d.min_age_secs }),
            // Not in S2's config: set through Kafka's topic configs only.
            key_compaction: None,
        }
    }

    /// The config a stream runs with, as S2 shows a stream's config: every setting the
    /// stream leaves unset at the value that applies (records kept until trimmed, the
    /// client's timestamps preferred and capped at arrival, no deletion when empty). A
    /// storage class is shown only when one was set: Shale has one.
    pub fn effective(config: &StreamConfig) -> Self {
        let mut json = Self::from_config(config);
        json.retention_policy.get_or_insert(RetentionPolicyJson::Infinite {});
        let policy = config.timestamp_policy();
        json.timestamping = Some(TimestampingJson { mode: Some(policy.mode), uncapped: Some(policy.uncapped) });
        json.delete_on_empty.get_or_insert(DeleteOnEmptyJson { min_age_secs: 0 });
        json
    }

    pub fn from_config(config: &StreamConfig) -> Self {
        Self {
            storage_class: config.storage_class.clone(),
            retention_policy: config.retention_policy.map(|policy| match policy {
                RetentionPolicy::Age(secs) => RetentionPolicyJson::Age(secs),
                RetentionPolicy::Infinite => RetentionPolicyJson::Infinite {},
            }),
            timestamping: config.timestamping.as_ref().map(|t| TimestampingJson { mode: t.mode, uncapped: t.uncapped }),
            delete_on_empty: config.delete_on_empty.map(|d| DeleteOnEmptyJson { min_age_secs: d.min_age_secs }),
        }
    }
}

impl StreamPatchJson {
    pub fn into_patch(self) -> StreamPatch {
        let timestamping = match self.timestamping {
            Some(None) => Some(TimestampingPatchJson { mode: Some(None), uncapped: Some(None) }),
            other => other.flatten(),
        };
        let delete_on_empty = match self.delete_on_empty {
            Some(None) => Some(DeleteOnEmptyPatchJson { min_age_secs: Some(None) }),
            other => other.flatten(),
        };
        let nulls = [
            (is_null(&self.storage_class), StreamSetting::StorageClass),
            (is_null(&self.retention_policy), StreamSetting::RetentionPolicy),
            (timestamping.as_ref().is_some_and(|t| is_null(&t.mode)), StreamSetting::TimestampingMode),
            (timestamping.as_ref().is_some_and(|t| is_null(&t.uncapped)), StreamSetting::TimestampingUncapped),
            (delete_on_empty.is_some_and(|d| is_null(&d.min_age_secs)), StreamSetting::DeleteOnEmpty),
        ];
        StreamPatch {
            storage_class: self.storage_class.flatten(),
            retention_policy: self.retention_policy.flatten().map(RetentionPolicyJson::into_policy),
            timestamping: timestamping
                .map(|t| TimestampingConfig { mode: t.mode.flatten(), uncapped: t.uncapped.flatten() })
                .filter(|t| *t != TimestampingConfig::default()),
            delete_on_empty: delete_on_empty
                .and_then(|d| d.min_age_secs.flatten())
                .map(|min_age_secs| DeleteOnEmpty { min_age_secs }),
            // Not in S2's config: set through Kafka's topic configs only.
            key_compaction: None,
            reset: nulls.into_iter().filter(|(null, _)| *null).map(|(_, setting)| setting).collect(),
        }
    }
}

/// Whether a reconfiguration's field is `null` (present, without a value).
fn is_null<T>(field: &Option<Option<T>>) -> bool {
    matches!(field, Some(None))
}

impl BasinConfigJson {
    pub fn into_config(self) -> Result<BasinConfig, ApiError> {
        no_cipher(&self.stream_cipher)?;
        Ok(BasinConfig {
            // `{}` sets no default: the same as none, as a reconfiguration leaves it.
            default_stream_config: self
                .default_stream_config
                .map(StreamConfigJson::into_config)
                .filter(|defaults| *defaults != StreamConfig::default()),
            create_stream_on_append: self.create_stream_on_append,
            create_stream_on_read: self.create_stream_on_read,
            tables: self.tables.map(TablesJson::into_config),
        })
    }

    pub fn from_config(config: &BasinConfig) -> Self {
        Self {
            default_stream_config: config.default_stream_config.as_ref().map(StreamConfigJson::from_config),
            create_stream_on_append: config.create_stream_on_append,
            create_stream_on_read: config.create_stream_on_read,
            stream_cipher: None,
            tables: config.tables.map(TablesJson::from_config),
        }
    }
}

impl BasinPatchJson {
    pub fn into_patch(self) -> Result<BasinPatch, ApiError> {
        no_cipher(&self.stream_cipher)?;
        Ok(BasinPatch {
            create_stream_on_append: self.create_stream_on_append,
            create_stream_on_read: self.create_stream_on_read,
            default_stream_config: self.default_stream_config.map(|patch| match patch {
                Some(patch) => patch.into_patch(),
                None => StreamPatch::reset_all(),
            }),
            tables: self.tables.map(|tables| tables.map(TablesJson::into_config)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_config_json_matches_s2() {
        let json = r#"{"retention_policy":{"age":3600},"timestamping":{"mode":"client-require","uncapped":true}}"#;
        let config = serde_json::from_str::<StreamConfigJson>(json).expect("valid config").into_config();
        assert_eq!(config.retention_policy, Some(RetentionPolicy::Age(3600)));
        assert_eq!(config.timestamping.as_ref().and_then(|t| t.mode), Some(TimestampingMode::ClientRequire));
        assert_eq!(serde_json::to_string(&StreamConfigJson::from_config(&config)).expect("serialises"), json);
        let infinite: StreamConfigJson =
            serde_json::from_str(r#"{"retention_policy":{"infinite":{}}}"#).expect("valid");
        assert_eq!(infinite.into_config().retention_policy, Some(RetentionPolicy::Infinite));
    }

    #[test]
    fn unknown_fields_and_ciphers_are_refused() {
        assert!(serde_json::from_str::<StreamConfigJson>(r#"{"bogus":1}"#).is_err());
        assert!(serde_json::from_str::<StreamConfigJson>(r#"{"timestamping":{"bogus":1}}"#).is_err());
        assert!(serde_json::from_str::<BasinConfigJson>(r#"{"default_stream_config":{"bogus":1}}"#).is_err());
        let null_cipher: BasinConfigJson = serde_json::from_str(r#"{"stream_cipher":null}"#).expect("valid");
        assert!(null_cipher.into_config().is_ok());
        let cipher: BasinConfigJson = serde_json::from_str(r#"{"stream_cipher":"aegis-256"}"#).expect("parses");
        assert!(cipher.into_config().is_err());
    }
}
