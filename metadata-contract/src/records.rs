//! The stored (and internal wire) form of basin and stream records: the protobuf
//! messages of `records.proto`, behind one version byte. Values written before that
//! format are JSON and still decode, so existing data directories open unchanged; each
//! record is rewritten in the new format the next time it changes.

use prost::Message;
use shale_proto::metadata_rpc as pb;
use shale_proto::TimestampingMode;

use crate::{
    AccessTokenRecord, BasinConfig, BasinPatch, BasinRecord, ConsumerPosition, DeleteOnEmpty, KeyCompactionConfig,
    MetadataError, Result, RetentionPolicy, StreamConfig, StreamPatch, StreamRecord, StreamSetting, TimestampingConfig,
};

/// The first byte of a stored record in the protobuf format.
const FORMAT_V1: u8 = 1;

/// A record metadata stores under one key.
pub trait Stored: Sized {
    /// The value to store.
    fn to_stored(&self) -> Vec<u8>;
    /// Decodes a stored value (either format); `key` names it in errors.
    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self>;
}

fn corrupt(key: &[u8], reason: impl ToString) -> MetadataError {
    MetadataError::Corrupt { key: String::from_utf8_lossy(key).into_owned(), reason: reason.to_string() }
}

/// Decodes either format: `{` starts a record from before the protobuf format.
fn decode_stored<M: Message + Default, J: serde::de::DeserializeOwned, T>(
    key: &[u8],
    bytes: &[u8],
    from_wire: impl FnOnce(M) -> Result<T>,
    from_legacy: impl FnOnce(J) -> T,
) -> Result<T> {
    match bytes.first() {
        Some(&FORMAT_V1) => from_wire(M::decode(&bytes[1..]).map_err(|e| corrupt(key, e))?),
        Some(b'{') => serde_json::from_slice(bytes).map(from_legacy).map_err(|e| corrupt(key, e)),
        Some(other) => Err(corrupt(key, format!("unknown record format {other}"))),
        None => Err(corrupt(key, "empty record")),
    }
}

/// Metadata's own stored messages that never had a JSON form: the version byte and
/// the message.
pub fn decode_v1<M: Message + Default>(key: &[u8], bytes: &[u8]) -> Result<M> {
    match bytes.split_first() {
        Some((&FORMAT_V1, message)) => M::decode(message).map_err(|e| corrupt(key, e)),
        _ => Err(corrupt(key, "unknown record format")),
    }
}

/// The version byte and the message.
pub fn encode_stored(message: impl Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + message.encoded_len());
    out.push(FORMAT_V1);
    message.encode(&mut out).expect("a Vec grows to fit");
    out
}

impl Stored for BasinRecord {
    fn to_stored(&self) -> Vec<u8> {
        encode_stored(basin_record_to_wire(self))
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        decode_stored(key, bytes, basin_record_from_wire, legacy::BasinRecord::into_record)
    }
}

/// Access tokens were stored in the protobuf format from the start.
impl Stored for crate::AccessTokenRecord {
    fn to_stored(&self) -> Vec<u8> {
        encode_stored(token_to_wire(self))
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        decode_v1::<pb::AccessTokenRecord>(key, bytes).map(token_from_wire)
    }
}

impl Stored for crate::ConsumerPosition {
    fn to_stored(&self) -> Vec<u8> {
        encode_stored(consumer_to_wire(self))
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        decode_v1::<pb::ConsumerPosition>(key, bytes).map(consumer_from_wire)
    }
}

impl Stored for StreamRecord {
    fn to_stored(&self) -> Vec<u8> {
        encode_stored(stream_record_to_wire(self))
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        decode_stored(key, bytes, stream_record_from_wire, legacy::StreamRecord::into_record)
    }
}

pub fn basin_record_to_wire(record: &BasinRecord) -> pb::BasinRecord {
    pb::BasinRecord {
        name: record.name.clone(),
        created_at_ms: record.created_at_ms,
        config: Some(basin_config_to_wire(&record.config)),
        request_token: record.request_token.clone(),
    }
}

pub fn basin_record_from_wire(record: pb::BasinRecord) -> Result<BasinRecord> {
    Ok(BasinRecord {
        name: record.name,
        created_at_ms: record.created_at_ms,
        config: basin_config_from_wire(record.config.unwrap_or_default())?,
        request_token: record.request_token,
    })
}

pub fn stream_record_to_wire(record: &StreamRecord) -> pb::StreamRecord {
    pb::StreamRecord {
        id: record.id,
        created_at_ms: record.created_at_ms,
        config: Some(stream_config_to_wire(&record.config)),
        next_seq: record.next_seq,
        last_timestamp: record.last_timestamp,
        trim_point: record.trim_point,
        fencing_token: record.fencing_token.clone(),
        record_count: record.record_count,
        metered_bytes: record.metered_bytes,
        request_token: record.request_token.clone(),
    }
}

pub fn stream_record_from_wire(record: pb::StreamRecord) -> Result<StreamRecord> {
    Ok(StreamRecord {
        id: record.id,
        created_at_ms: record.created_at_ms,
        config: stream_config_from_wire(record.config.unwrap_or_default())?,
        next_seq: record.next_seq,
        last_timestamp: record.last_timestamp,
        trim_point: record.trim_point,
        fencing_token: record.fencing_token,
        record_count: record.record_count,
        metered_bytes: record.metered_bytes,
        request_token: record.request_token,
    })
}

pub fn basin_config_to_wire(config: &BasinConfig) -> pb::BasinConfig {
    pb::BasinConfig {
        default_stream_config: config.default_stream_config.as_ref().map(stream_config_to_wire),
        create_stream_on_append: config.create_stream_on_append,
        create_stream_on_read: config.create_stream_on_read,
        tables: config.tables.map(tables_to_wire),
    }
}

pub fn basin_config_from_wire(config: pb::BasinConfig) -> Result<BasinConfig> {
    Ok(BasinConfig {
        default_stream_config: config.default_stream_config.map(stream_config_from_wire).transpose()?,
        create_stream_on_append: config.create_stream_on_append,
        create_stream_on_read: config.create_stream_on_read,
        tables: config.tables.map(tables_from_wire),
    })
}

fn tables_to_wire(tables: crate::TablesConfig) -> pb::TablesConfig {
    let json_bodies = tables.body_format == crate::BodyFormat::Json;
    pb::TablesConfig { after_secs: tables.after_secs, json_bodies, serve_reads: tables.serve_reads }
}

fn tables_from_wire(tables: pb::TablesConfig) -> crate::TablesConfig {
    let body_format = match tables.json_bodies {
        true => crate::BodyFormat::Json,
        false => crate::BodyFormat::Binary,
    };
    crate::TablesConfig { after_secs: tables.after_secs, body_format, serve_reads: tables.serve_reads }
}

pub fn basin_patch_to_wire(patch: &BasinPatch) -> pb::BasinPatch {
    pb::BasinPatch {
        create_stream_on_append: patch.create_stream_on_append,
        create_stream_on_read: patch.create_stream_on_read,
        default_stream_config: patch.default_stream_config.as_ref().map(stream_patch_to_wire),
        tables: patch.tables.map(|tables| pb::TablesPatch { config: tables.map(tables_to_wire) }),
    }
}

pub fn basin_patch_from_wire(patch: pb::BasinPatch) -> Result<BasinPatch> {
    Ok(BasinPatch {
        create_stream_on_append: patch.create_stream_on_append,
        create_stream_on_read: patch.create_stream_on_read,
        default_stream_config: patch.default_stream_config.map(stream_patch_from_wire).transpose()?,
        tables: patch.tables.map(|tables| tables.config.map(tables_from_wire)),
    })
}

pub fn stream_config_to_wire(config: &StreamConfig) -> pb::StreamConfig {
    pb::StreamConfig {
        storage_class: config.storage_class.clone(),
        retention_policy: config.retention_policy.map(retention_to_wire),
        timestamping: config.timestamping.as_ref().map(timestamping_to_wire),
        delete_on_empty: config.delete_on_empty.map(|d| pb::DeleteOnEmpty { min_age_secs: d.min_age_secs }),
        key_compaction: config.key_compaction.map(|k| pb::KeyCompaction {
            enabled: k.enabled,
            delete_retention_ms: k.delete_retention_ms,
            min_lag_ms: k.min_lag_ms,
        }),
        reset: Vec::new(),
    }
}

pub fn stream_config_from_wire(config: pb::StreamConfig) -> Result<StreamConfig> {
    Ok(StreamConfig {
        storage_class: config.storage_class,
        retention_policy: config.retention_policy.map(retention_from_wire).transpose()?,
        timestamping: config.timestamping.map(timestamping_from_wire).transpose()?,
        delete_on_empty: config.delete_on_empty.map(|d| DeleteOnEmpty { min_age_secs: d.min_age_secs }),
        key_compaction: config.key_compaction.map(|k| KeyCompactionConfig {
            enabled: k.enabled,
            delete_retention_ms: k.delete_retention_ms,
            min_lag_ms: k.min_lag_ms,
        }),
    })
}

/// What a create with an `s2-request-token` is remembered by: the token and a digest of
/// the config it asked for, so a retry (same token, same config) is told apart from
/// another create that reuses the token.
pub fn creation_key(request_token: &str, config: &impl Message) -> String {
    format!("{request_token}#{:08x}", crc32c::crc32c(&config.encode_to_vec()))
}

/// A stream patch travels as a stream config: every field optional, only those set
/// change, and the settings it resets listed.
pub fn stream_patch_to_wire(patch: &StreamPatch) -> pb::StreamConfig {
    let mut wire = stream_config_to_wire(&StreamConfig {
        storage_class: patch.storage_class.clone(),
        retention_policy: patch.retention_policy,
        timestamping: patch.timestamping.clone(),
        delete_on_empty: patch.delete_on_empty,
        key_compaction: patch.key_compaction,
    });
    wire.reset = patch.reset.iter().map(|setting| setting_to_wire(*setting) as i32).collect();
    wire
}

pub fn stream_patch_from_wire(patch: pb::StreamConfig) -> Result<StreamPatch> {
    let reset = patch.reset.iter().map(|setting| setting_from_wire(*setting)).collect::<Result<Vec<_>>>()?;
    let config = stream_config_from_wire(patch)?;
    Ok(StreamPatch {
        storage_class: config.storage_class,
        retention_policy: config.retention_policy,
        timestamping: config.timestamping,
        delete_on_empty: config.delete_on_empty,
        key_compaction: config.key_compaction,
        reset,
    })
}

fn setting_to_wire(setting: StreamSetting) -> pb::StreamSetting {
    match setting {
        StreamSetting::StorageClass => pb::StreamSetting::StorageClass,
        StreamSetting::RetentionPolicy => pb::StreamSetting::RetentionPolicy,
        StreamSetting::TimestampingMode => pb::StreamSetting::TimestampingMode,
        StreamSetting::TimestampingUncapped => pb::StreamSetting::TimestampingUncapped,
        StreamSetting::DeleteOnEmpty => pb::StreamSetting::DeleteOnEmpty,
    }
}

fn setting_from_wire(setting: i32) -> Result<StreamSetting> {
    match pb::StreamSetting::try_from(setting) {
        Ok(pb::StreamSetting::StorageClass) => Ok(StreamSetting::StorageClass),
        Ok(pb::StreamSetting::RetentionPolicy) => Ok(StreamSetting::RetentionPolicy),
        Ok(pb::StreamSetting::TimestampingMode) => Ok(StreamSetting::TimestampingMode),
        Ok(pb::StreamSetting::TimestampingUncapped) => Ok(StreamSetting::TimestampingUncapped),
        Ok(pb::StreamSetting::DeleteOnEmpty) => Ok(StreamSetting::DeleteOnEmpty),
        Ok(pb::StreamSetting::Unspecified) | Err(_) => {
            Err(MetadataError::InvalidArgument(format!("unknown stream setting {setting} to reset")))
        }
    }
}

fn retention_to_wire(policy: RetentionPolicy) -> pb::RetentionPolicy {
    let policy = match policy {
        RetentionPolicy::Age(secs) => pb::retention_policy::Policy::AgeSecs(secs),
        RetentionPolicy::Infinite => pb::retention_policy::Policy::Infinite(true),
    };
    pb::RetentionPolicy { policy: Some(policy) }
}

fn retention_from_wire(policy: pb::RetentionPolicy) -> Result<RetentionPolicy> {
    match policy.policy {
        Some(pb::retention_policy::Policy::AgeSecs(secs)) => Ok(RetentionPolicy::Age(secs)),
        Some(pb::retention_policy::Policy::Infinite(_)) => Ok(RetentionPolicy::Infinite),
        None => Err(MetadataError::InvalidArgument("retention policy without a policy".into())),
    }
}

fn timestamping_to_wire(config: &TimestampingConfig) -> pb::Timestamping {
    let mode = match config.mode {
        None => pb::TimestampingMode::Unset,
        Some(TimestampingMode::ClientPrefer) => pb::TimestampingMode::ClientPrefer,
        Some(TimestampingMode::ClientRequire) => pb::TimestampingMode::ClientRequire,
        Some(TimestampingMode::Arrival) => pb::TimestampingMode::Arrival,
    };
    pb::Timestamping { mode: mode.into(), uncapped: config.uncapped }
}

fn timestamping_from_wire(config: pb::Timestamping) -> Result<TimestampingConfig> {
    let mode = match pb::TimestampingMode::try_from(config.mode) {
        Ok(pb::TimestampingMode::Unset) => None,
        Ok(pb::TimestampingMode::ClientPrefer) => Some(TimestampingMode::ClientPrefer),
        Ok(pb::TimestampingMode::ClientRequire) => Some(TimestampingMode::ClientRequire),
        Ok(pb::TimestampingMode::Arrival) => Some(TimestampingMode::Arrival),
        Err(_) => return Err(MetadataError::InvalidArgument(format!("unknown timestamping mode {}", config.mode))),
    };
    Ok(TimestampingConfig { mode, uncapped: config.uncapped })
}

/// The JSON records were stored in before the protobuf format, frozen: they are only
/// ever read, and must keep decoding whatever S2's API does later.
mod legacy {
    use serde::Deserialize;
    use shale_proto::TimestampingMode;

    #[derive(Deserialize)]
    pub struct BasinRecord {
        name: String,
        created_at_ms: u64,
        config: BasinConfig,
        #[serde(default)]
        request_token: Option<String>,
    }

    #[derive(Deserialize)]
    struct BasinConfig {
        #[serde(default)]
        default_stream_config: Option<StreamConfig>,
        #[serde(default)]
        create_stream_on_append: bool,
        #[serde(default)]
        create_stream_on_read: bool,
    }

    #[derive(Deserialize)]
    pub struct StreamRecord {
        id: u64,
        created_at_ms: u64,
        config: StreamConfig,
        next_seq: u64,
        last_timestamp: u64,
        trim_point: u64,
        fencing_token: String,
        record_count: u64,
        metered_bytes: u64,
        #[serde(default)]
        request_token: Option<String>,
    }

    #[derive(Deserialize)]
    struct StreamConfig {
        #[serde(default)]
        storage_class: Option<String>,
        #[serde(default)]
        retention_policy: Option<RetentionPolicy>,
        #[serde(default)]
        timestamping: Option<Timestamping>,
        #[serde(default)]
        delete_on_empty: Option<DeleteOnEmpty>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum RetentionPolicy {
        Age(u64),
        Infinite {},
    }

    #[derive(Deserialize)]
    struct Timestamping {
        #[serde(default)]
        mode: Option<TimestampingMode>,
        #[serde(default)]
        uncapped: Option<bool>,
    }

    #[derive(Deserialize)]
    struct DeleteOnEmpty {
        #[serde(default)]
        min_age_secs: u64,
    }

    impl BasinRecord {
        pub fn into_record(self) -> crate::BasinRecord {
            crate::BasinRecord {
                name: self.name,
                created_at_ms: self.created_at_ms,
                config: crate::BasinConfig {
                    default_stream_config: self.config.default_stream_config.map(StreamConfig::into_config),
                    create_stream_on_append: self.config.create_stream_on_append,
                    create_stream_on_read: self.config.create_stream_on_read,
                    tables: None,
                },
                request_token: self.request_token,
            }
        }
    }

    impl StreamRecord {
        pub fn into_record(self) -> crate::StreamRecord {
            crate::StreamRecord {
                id: self.id,
                created_at_ms: self.created_at_ms,
                config: self.config.into_config(),
                next_seq: self.next_seq,
                last_timestamp: self.last_timestamp,
                trim_point: self.trim_point,
                fencing_token: self.fencing_token,
                record_count: self.record_count,
                metered_bytes: self.metered_bytes,
                request_token: self.request_token,
            }
        }
    }

    impl StreamConfig {
        fn into_config(self) -> crate::StreamConfig {
            crate::StreamConfig {
                storage_class: self.storage_class,
                retention_policy: self.retention_policy.map(|policy| match policy {
                    RetentionPolicy::Age(secs) => crate::RetentionPolicy::Age(secs),
                    RetentionPolicy::Infinite {} => crate::RetentionPolicy::Infinite,
                }),
                timestamping: self
                    .timestamping
                    .map(|t| crate::TimestampingConfig { mode: t.mode, uncapped: t.uncapped }),
                delete_on_empty: self.delete_on_empty.map(|d| crate::DeleteOnEmpty { min_age_secs: d.min_age_secs }),
                key_compaction: None,
            }
        }
    }
}

pub fn token_to_wire(record: &AccessTokenRecord) -> pb::AccessTokenRecord {
    pb::AccessTokenRecord { id: record.id.clone(), secret_hash: record.secret_hash.clone(), info: record.info.clone() }
}

pub fn token_from_wire(record: pb::AccessTokenRecord) -> AccessTokenRecord {
    AccessTokenRecord { id: record.id, secret_hash: record.secret_hash, info: record.info }
}

pub fn consumer_to_wire(position: &ConsumerPosition) -> pb::ConsumerPosition {
    pb::ConsumerPosition {
        basin: position.basin.clone(),
        stream: position.stream.clone(),
        name: position.name.clone(),
        seq_num: position.seq_num,
        updated_ms: position.updated_ms,
        commit_metadata: position.commit_metadata.clone(),
    }
}

pub fn consumer_from_wire(position: pb::ConsumerPosition) -> ConsumerPosition {
    ConsumerPosition {
        basin: position.basin,
        stream: position.stream,
        name: position.name,
        seq_num: position.seq_num,
        updated_ms: position.updated_ms,
        commit_metadata: position.commit_metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_record() -> StreamRecord {
        StreamRecord {
            id: 7,
            created_at_ms: 1_700_000_000_000,
            config: StreamConfig {
                storage_class: Some("express".into()),
                retention_policy: Some(RetentionPolicy::Age(3600)),
                timestamping: Some(TimestampingConfig { mode: Some(TimestampingMode::Arrival), uncapped: None }),
                delete_on_empty: Some(DeleteOnEmpty { min_age_secs: 60 }),
                key_compaction: Some(KeyCompactionConfig {
                    enabled: Some(true),
                    delete_retention_ms: Some(5),
                    min_lag_ms: None,
                }),
            },
            next_seq: 42,
            last_timestamp: 9,
            trim_point: 3,
            fencing_token: "f".into(),
            record_count: 39,
            metered_bytes: 1234,
            request_token: Some("t".into()),
        }
    }

    #[test]
    fn records_round_trip_through_the_stored_format() {
        let stream = stream_record();
        assert_eq!(stream.to_stored()[0], FORMAT_V1);
        assert_eq!(StreamRecord::from_stored(b"s/x", &stream.to_stored()).expect("decodes"), stream);
        let basin = BasinRecord {
            name: "b".into(),
            created_at_ms: 5,
            config: BasinConfig {
                default_stream_config: Some(StreamConfig {
                    retention_policy: Some(RetentionPolicy::Infinite),
                    ..StreamConfig::default()
                }),
                create_stream_on_append: true,
                create_stream_on_read: false,
                tables: Some(crate::TablesConfig {
                    after_secs: 30,
                    body_format: crate::BodyFormat::Json,
                    serve_reads: true,
                }),
            },
            request_token: None,
        };
        assert_eq!(BasinRecord::from_stored(b"b/b", &basin.to_stored()).expect("decodes"), basin);
        // A patch turns the table tier off, and one that does not mention it keeps it.
        let off = BasinPatch { tables: Some(None), ..BasinPatch::default() };
        assert_eq!(basin_patch_from_wire(basin_patch_to_wire(&off)).expect("decodes"), off);
        assert_eq!(off.apply(basin.config.clone()).tables, None);
        assert_eq!(BasinPatch::default().apply(basin.config.clone()).tables, basin.config.tables);
    }

    #[test]
    fn records_stored_as_json_still_decode() {
        let legacy = br#"{"id":7,"created_at_ms":1700000000000,"config":{"storage_class":"express","retention_policy":{"age":3600},"timestamping":{"mode":"arrival"},"delete_on_empty":{"min_age_secs":60}},"next_seq":42,"last_timestamp":9,"trim_point":3,"fencing_token":"f","record_count":39,"metered_bytes":1234,"request_token":"t"}"#;
        let mut expected = stream_record();
        expected.config.key_compaction = None;
        assert_eq!(StreamRecord::from_stored(b"s/x", legacy).expect("decodes"), expected);
        let basin = br#"{"name":"b","created_at_ms":5,"config":{"default_stream_config":null,"create_stream_on_append":true,"create_stream_on_read":false}}"#;
        assert!(BasinRecord::from_stored(b"b/b", basin).expect("decodes").config.create_stream_on_append);
    }

    #[test]
    fn unknown_formats_are_corrupt_not_guessed() {
        assert!(matches!(StreamRecord::from_stored(b"s/x", &[9, 1, 2]), Err(MetadataError::Corrupt { .. })));
        assert!(matches!(StreamRecord::from_stored(b"s/x", &[]), Err(MetadataError::Corrupt { .. })));
    }

    #[test]
    fn a_patch_keeps_unset_fields_unset_on_the_wire() {
        let patch = StreamPatch { retention_policy: Some(RetentionPolicy::Age(5)), ..StreamPatch::default() };
        assert_eq!(stream_patch_from_wire(stream_patch_to_wire(&patch)).expect("decodes"), patch);
        let basin = BasinPatch { create_stream_on_read: Some(true), ..BasinPatch::default() };
        assert_eq!(basin_patch_from_wire(basin_patch_to_wire(&basin)).expect("decodes"), basin);
    }

    #[test]
    fn a_patch_carries_the_settings_it_resets() {
        let patch = StreamPatch {
            retention_policy: Some(RetentionPolicy::Age(5)),
            reset: vec![StreamSetting::TimestampingMode, StreamSetting::StorageClass],
            ..StreamPatch::default()
        };
        assert_eq!(stream_patch_from_wire(stream_patch_to_wire(&patch)).expect("decodes"), patch);
        let basin = BasinPatch { default_stream_config: Some(StreamPatch::reset_all()), ..BasinPatch::default() };
        assert_eq!(basin_patch_from_wire(basin_patch_to_wire(&basin)).expect("decodes"), basin);
        let mut unknown = stream_patch_to_wire(&patch);
        unknown.reset.push(99);
        assert!(matches!(stream_patch_from_wire(unknown), Err(MetadataError::InvalidArgument(_))));
        let wire = stream_config_to_wire(&patch.apply(StreamConfig::default(), None));
        assert!(wire.reset.is_empty(), "a stored config lists no resets");
    }
}
