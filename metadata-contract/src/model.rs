//! What metadata stores and answers: basin and stream records and their configs, index
//! entries, positions and acks. Plain types: their stored form is `records`, their S2
//! JSON form belongs to the API edge.

use shale_proto::{TimestampPolicy, TimestampResolver, TimestampingMode};

/// S2's `timestamping` stream setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimestampingConfig {
    pub mode: Option<TimestampingMode>,
    pub uncapped: Option<bool>,
}

/// S2's `retention_policy`: keep records for `age` seconds, or forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionPolicy {
    Age(u64),
    Infinite,
}

/// S2's `delete_on_empty` stream setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOnEmpty {
    pub min_age_secs: u64,
}

/// A stream's configuration, shaped as S2's `StreamConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamConfig {
    pub storage_class: Option<String>,
    pub retention_policy: Option<RetentionPolicy>,
    pub timestamping: Option<TimestampingConfig>,
    pub delete_on_empty: Option<DeleteOnEmpty>,
    /// Not in S2's config: set through Kafka's topic configs.
    pub key_compaction: Option<KeyCompactionConfig>,
}

/// Key compaction settings (Kafka's `cleanup.policy=compact`), each optional: a patch
/// changes only those set, and unset ones take Kafka's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCompactionConfig {
    pub enabled: Option<bool>,
    pub delete_retention_ms: Option<u64>,
    pub min_lag_ms: Option<u64>,
}

/// What key compaction keeps of a stream: the last record of each key, a tombstone for
/// `delete_retention_ms` past its timestamp, and every record younger than `min_lag_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyCompactionPolicy {
    pub delete_retention_ms: u64,
    pub min_lag_ms: u64,
}

/// Kafka's `delete.retention.ms` default: one day.
pub const DEFAULT_DELETE_RETENTION_MS: u64 = 86_400_000;

impl KeyCompactionConfig {
    fn merged(self, over: KeyCompactionConfig) -> KeyCompactionConfig {
        KeyCompactionConfig {
            enabled: over.enabled.or(self.enabled),
            delete_retention_ms: over.delete_retention_ms.or(self.delete_retention_ms),
            min_lag_ms: over.min_lag_ms.or(self.min_lag_ms),
        }
    }
}

impl StreamConfig {
    /// The stream's key compaction, when it is on.
    pub fn key_compaction_policy(&self) -> Option<KeyCompactionPolicy> {
        let config = self.key_compaction.filter(|c| c.enabled == Some(true))?;
        Some(KeyCompactionPolicy {
            delete_retention_ms: config.delete_retention_ms.unwrap_or(DEFAULT_DELETE_RETENTION_MS),
            min_lag_ms: config.min_lag_ms.unwrap_or(0),
        })
    }

    pub fn timestamp_policy(&self) -> TimestampPolicy {
        let ts = self.timestamping.clone().unwrap_or_default();
        TimestampPolicy { mode: ts.mode.unwrap_or_default(), uncapped: ts.uncapped.unwrap_or(false) }
    }

    /// Fills settings this config leaves unset from `defaults` (a basin's default).
    pub fn with_defaults(mut self, defaults: &StreamConfig) -> StreamConfig {
        self.storage_class = self.storage_class.or_else(|| defaults.storage_class.clone());
        self.retention_policy = self.retention_policy.or(defaults.retention_policy);
        // Field by field, as S2 merges a stream's timestamping with its basin's.
        self.timestamping = match (self.timestamping, defaults.timestamping.clone()) {
            (Some(own), Some(default)) => Some(TimestampingConfig {
                mode: own.mode.or(default.mode),
                uncapped: own.uncapped.or(default.uncapped),
            }),
            (own, default) => own.or(default),
        };
        self.delete_on_empty = self.delete_on_empty.or(defaults.delete_on_empty);
        self.key_compaction = match (self.key_compaction, defaults.key_compaction) {
            (Some(own), Some(default)) => Some(default.merged(own)),
            (own, default) => own.or(default),
        };
        self
    }
}

impl StreamConfig {
    /// Rejects settings S2 rejects.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(RetentionPolicy::Age(0)) = self.retention_policy {
            return Err("retention_policy.age must be greater than 0 seconds".into());
        }
        if let Some(class) = &self.storage_class {
            if class != "standard" && class != "express" {
                return Err(format!("storage_class must be standard or express, got `{class}`"));
            }
        }
        Ok(())
    }
}

/// S2's `StreamReconfiguration`: only the fields present change. Applied by the
/// sequencer under its writer lock, so concurrent patches of different fields compose.
/// The same fields as [`StreamConfig`], kept apart because a patch refuses unknown
/// fields (as S2 does), merges `timestamping` field by field and may reset settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamPatch {
    pub storage_class: Option<String>,
    pub retention_policy: Option<RetentionPolicy>,
    pub timestamping: Option<TimestampingConfig>,
    pub delete_on_empty: Option<DeleteOnEmpty>,
    pub key_compaction: Option<KeyCompactionConfig>,
    /// Settings set back to their default (S2's `null` in a reconfiguration), before the
    /// fields above apply.
    pub reset: Vec<StreamSetting>,
}

/// A stream setting a patch can reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamSetting {
    StorageClass,
    RetentionPolicy,
    TimestampingMode,
    TimestampingUncapped,
    DeleteOnEmpty,
}

impl StreamSetting {
    pub const ALL: [StreamSetting; 5] = [
        StreamSetting::StorageClass,
        StreamSetting::RetentionPolicy,
        StreamSetting::TimestampingMode,
        StreamSetting::TimestampingUncapped,
        StreamSetting::DeleteOnEmpty,
    ];

    /// Sets this setting of `config` to what `defaults` (a basin's default stream
    /// config) has for it: unset where there are none.
    fn reset(self, config: &mut StreamConfig, defaults: Option<&StreamConfig>) {
        let default_timestamping = defaults.and_then(|d| d.timestamping.clone()).unwrap_or_default();
        match self {
            StreamSetting::StorageClass => config.storage_class = defaults.and_then(|d| d.storage_class.clone()),
            StreamSetting::RetentionPolicy => config.retention_policy = defaults.and_then(|d| d.retention_policy),
            StreamSetting::DeleteOnEmpty => config.delete_on_empty = defaults.and_then(|d| d.delete_on_empty),
            StreamSetting::TimestampingMode | StreamSetting::TimestampingUncapped => {
                let mut current = config.timestamping.take().unwrap_or_default();
                if self == StreamSetting::TimestampingMode {
                    current.mode = default_timestamping.mode;
                } else {
                    current.uncapped = default_timestamping.uncapped;
                }
                config.timestamping = (current != TimestampingConfig::default()).then_some(current);
            }
        }
    }
}

impl StreamPatch {
    /// The patch S2's `null` for a whole stream config makes: every setting reset.
    pub fn reset_all() -> StreamPatch {
        StreamPatch { reset: StreamSetting::ALL.to_vec(), ..StreamPatch::default() }
    }

    /// The patch that makes a stream's S2 settings exactly `config`'s: those it sets
    /// set, those it leaves unset reset (to the basin's default). Key compaction, not an
    /// S2 setting, is left as it is.
    pub fn replacing(config: &StreamConfig) -> StreamPatch {
        let timestamping = config.timestamping.clone().unwrap_or_default();
        let unset = [
            (config.storage_class.is_none(), StreamSetting::StorageClass),
            (config.retention_policy.is_none(), StreamSetting::RetentionPolicy),
            (timestamping.mode.is_none(), StreamSetting::TimestampingMode),
            (timestamping.uncapped.is_none(), StreamSetting::TimestampingUncapped),
            (config.delete_on_empty.is_none(), StreamSetting::DeleteOnEmpty),
        ];
        StreamPatch {
            storage_class: config.storage_class.clone(),
            retention_policy: config.retention_policy,
            timestamping: config.timestamping.clone(),
            delete_on_empty: config.delete_on_empty,
            key_compaction: None,
            reset: unset.into_iter().filter(|(unset, _)| *unset).map(|(_, setting)| setting).collect(),
        }
    }

    /// `config` with this patch applied; `defaults` is the basin's default stream config,
    /// what reset settings go back to.
    pub fn apply(&self, mut config: StreamConfig, defaults: Option<&StreamConfig>) -> StreamConfig {
        for setting in &self.reset {
            setting.reset(&mut config, defaults);
        }
        if let Some(class) = &self.storage_class {
            config.storage_class = Some(class.clone());
        }
        if let Some(retention) = self.retention_policy {
            config.retention_policy = Some(retention);
        }
        if let Some(ts) = &self.timestamping {
            let mut current = config.timestamping.unwrap_or_default();
            current.mode = ts.mode.or(current.mode);
            current.uncapped = ts.uncapped.or(current.uncapped);
            config.timestamping = Some(current);
        }
        if let Some(doe) = self.delete_on_empty {
            config.delete_on_empty = Some(doe);
        }
        if let Some(patch) = self.key_compaction {
            config.key_compaction = Some(config.key_compaction.unwrap_or_default().merged(patch));
        }
        config
    }
}

/// S2's `BasinReconfiguration`: only the fields present change (the default stream
/// config field by field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasinPatch {
    pub create_stream_on_append: Option<bool>,
    pub create_stream_on_read: Option<bool>,
    pub default_stream_config: Option<StreamPatch>,
    /// `Some(None)` turns the table tier off.
    pub tables: Option<Option<TablesConfig>>,
}

impl BasinPatch {
    /// The patch that makes a basin's config exactly `config`: what it leaves out at its
    /// default (no default stream settings, no table tier).
    pub fn replacing(config: &BasinConfig) -> BasinPatch {
        let defaults = config.default_stream_config.clone().unwrap_or_default();
        BasinPatch {
            create_stream_on_append: Some(config.create_stream_on_append),
            create_stream_on_read: Some(config.create_stream_on_read),
            default_stream_config: Some(StreamPatch {
                key_compaction: defaults.key_compaction,
                reset: StreamSetting::ALL.to_vec(),
                ..StreamPatch::replacing(&defaults)
            }),
            tables: Some(config.tables),
        }
    }

    pub fn apply(&self, mut config: BasinConfig) -> BasinConfig {
        if let Some(v) = self.create_stream_on_append {
            config.create_stream_on_append = v;
        }
        if let Some(v) = self.create_stream_on_read {
            config.create_stream_on_read = v;
        }
        if let Some(patch) = &self.default_stream_config {
            let defaults = patch.apply(config.default_stream_config.unwrap_or_default(), None);
            config.default_stream_config = (defaults != StreamConfig::default()).then_some(defaults);
        }
        if let Some(tables) = self.tables {
            config.tables = tables;
        }
        config
    }
}

impl BasinConfig {
    /// Rejects what S2 rejects: the default stream config is validated like a stream's.
    pub fn validate(&self) -> Result<(), String> {
        match &self.default_stream_config {
            Some(defaults) => defaults.validate().map_err(|e| format!("default_stream_config: {e}")),
            None => Ok(()),
        }
    }
}

/// A basin's configuration, shaped as S2's `BasinConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasinConfig {
    pub default_stream_config: Option<StreamConfig>,
    pub create_stream_on_append: bool,
    pub create_stream_on_read: bool,
    /// The table tier (a Shale extension): off unless set.
    pub tables: Option<TablesConfig>,
}

/// A basin's table tier: its records are also written as Parquet files under
/// `tables/<basin>/` once they are `after_secs` old.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TablesConfig {
    pub after_secs: u64,
    /// What the records' bodies are: JSON bodies also get their top-level fields as
    /// typed columns.
    pub body_format: BodyFormat,
    /// Reads that start below a stream's trim point are served from the table where it
    /// holds the records.
    pub serve_reads: bool,
}

/// What a basin's record bodies hold, as its table tier reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BodyFormat {
    /// Any bytes: the table has the `body` column only.
    #[default]
    Binary,
    /// JSON objects, decoded into columns where they are.
    Json,
}

/// A basin as stored under `b/<basin>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasinRecord {
    pub name: String,
    pub created_at_ms: u64,
    pub config: BasinConfig,
    /// The client's `s2-request-token` at creation, so a retried create succeeds.
    pub request_token: Option<String>,
}

/// A stream as stored under `s/<basin>/<stream>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRecord {
    /// Internal id: index keys use it, so a re-created stream never sees old entries.
    pub id: u64,
    pub created_at_ms: u64,
    pub config: StreamConfig,
    /// The tail: the sequence number the next record will get.
    pub next_seq: u64,
    /// Timestamp of the last record (0 when empty).
    pub last_timestamp: u64,
    /// Records below this sequence number are trimmed.
    pub trim_point: u64,
    /// Set by `fence` command records; empty until then.
    pub fencing_token: String,
    pub record_count: u64,
    pub metered_bytes: u64,
    /// The client's `s2-request-token` at creation, so a retried create succeeds.
    pub request_token: Option<String>,
}

impl StreamRecord {
    pub fn tail(&self) -> Position {
        Position { seq_num: self.next_seq, timestamp: self.last_timestamp }
    }
}

/// A position in a stream: a sequence number and a timestamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub seq_num: u64,
    pub timestamp: u64,
}

/// What a successful append learns: its first position, one past its last, and the
/// stream's tail after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendAck {
    pub start: Position,
    pub end: Position,
    pub tail: Position,
}

/// A stream's identity and state as readers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    pub basin: String,
    pub name: String,
    pub record: StreamRecord,
}

/// Where one committed append lives: `(segment, byte range)` plus what readers need to
/// number and timestamp its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub segment_id: u128,
    pub offset: u64,
    pub len: u32,
    pub first_seq: u64,
    /// The offsets the entry spans (`first_seq..end_seq()`): its block's records, or
    /// more when key compaction dropped some (a sparse block, with gaps).
    pub record_count: u32,
    pub first_timestamp: u64,
    pub last_timestamp: u64,
    /// The stream's last timestamp before this entry: the resolver's starting floor.
    pub timestamp_floor: u64,
    pub timestamp_policy: TimestampPolicy,
    /// Metadata's clock at commit, when the block's arrival time (the gateway's clock)
    /// was later: arrival times are clamped to it, so a gateway whose clock runs ahead
    /// cannot raise a stream's timestamps (and their floor) for good.
    pub arrival_cap: Option<u64>,
    /// The stream's metered bytes from its creation through this entry's last record
    /// (what consumer lag in bytes is measured with); `None` for entries written before
    /// it was recorded.
    pub metered_end: Option<u64>,
}

const INDEX_ENTRY_LEN: usize = 16 + 8 + 4 + 8 + 4 + 8 + 8 + 8 + 1;
/// With an arrival cap: eight more bytes.
const CAPPED_INDEX_ENTRY_LEN: usize = INDEX_ENTRY_LEN + 8;
/// With metered bytes: the cap (0 for none) and the metered end.
const METERED_INDEX_ENTRY_LEN: usize = CAPPED_INDEX_ENTRY_LEN + 8;

impl IndexEntry {
    pub fn last_seq(&self) -> u64 {
        self.first_seq + u64::from(self.record_count) - 1
    }

    pub fn end_seq(&self) -> u64 {
        self.first_seq + u64::from(self.record_count)
    }

    /// Whether `block` is this entry's: as many records as it spans, or, when key
    /// compaction dropped some (a sparse block), none past its end.
    pub fn fits(&self, block: &shale_proto::segment::DecodedBlock) -> bool {
        if block.positions.is_empty() {
            block.records.len() == self.record_count as usize
        } else {
            block.span() <= u64::from(self.record_count)
        }
    }

    /// Replays the commit's timestamp decisions over the entry's block, which arrived at
    /// `block_arrival` by the gateway's clock.
    pub fn resolver(&self, block_arrival: u64) -> TimestampResolver {
        let arrival = self.arrival_cap.map_or(block_arrival, |cap| block_arrival.min(cap));
        self.timestamp_policy.resolver(arrival, self.timestamp_floor)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(METERED_INDEX_ENTRY_LEN);
        out.extend_from_slice(&self.segment_id.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.len.to_be_bytes());
        out.extend_from_slice(&self.first_seq.to_be_bytes());
        out.extend_from_slice(&self.record_count.to_be_bytes());
        out.extend_from_slice(&self.first_timestamp.to_be_bytes());
        out.extend_from_slice(&self.last_timestamp.to_be_bytes());
        out.extend_from_slice(&self.timestamp_floor.to_be_bytes());
        out.push(self.timestamp_policy.to_byte());
        match (self.arrival_cap, self.metered_end) {
            (cap, Some(metered)) => {
                out.extend_from_slice(&cap.unwrap_or(0).to_be_bytes());
                out.extend_from_slice(&metered.to_be_bytes());
            }
            (Some(cap), None) => out.extend_from_slice(&cap.to_be_bytes()),
            (None, None) => {}
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if ![INDEX_ENTRY_LEN, CAPPED_INDEX_ENTRY_LEN, METERED_INDEX_ENTRY_LEN].contains(&bytes.len()) {
            return None;
        }
        let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        Some(Self {
            segment_id: u128::from_be_bytes(bytes[0..16].try_into().expect("16 bytes")),
            offset: u64_at(16),
            len: u32_at(24),
            first_seq: u64_at(28),
            record_count: u32_at(36),
            first_timestamp: u64_at(40),
            last_timestamp: u64_at(48),
            timestamp_floor: u64_at(56),
            timestamp_policy: TimestampPolicy::from_byte(bytes[64])?,
            arrival_cap: (bytes.len() > INDEX_ENTRY_LEN).then(|| u64_at(INDEX_ENTRY_LEN)).filter(|&cap| cap != 0),
            metered_end: (bytes.len() == METERED_INDEX_ENTRY_LEN).then(|| u64_at(CAPPED_INDEX_ENTRY_LEN)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(
        retention: Option<RetentionPolicy>,
        mode: Option<TimestampingMode>,
        uncapped: Option<bool>,
    ) -> StreamConfig {
        let timestamping = TimestampingConfig { mode, uncapped };
        StreamConfig {
            retention_policy: retention,
            timestamping: (timestamping != TimestampingConfig::default()).then_some(timestamping),
            ..StreamConfig::default()
        }
    }

    #[test]
    fn a_reset_setting_goes_back_to_the_basin_default_or_unset() {
        let current = config(Some(RetentionPolicy::Age(5)), Some(TimestampingMode::Arrival), Some(true));
        let reset = |settings: &[StreamSetting]| StreamPatch { reset: settings.to_vec(), ..StreamPatch::default() };
        let defaults = config(Some(RetentionPolicy::Age(600)), Some(TimestampingMode::ClientRequire), None);
        assert_eq!(
            reset(&[StreamSetting::RetentionPolicy]).apply(current.clone(), Some(&defaults)),
            config(Some(RetentionPolicy::Age(600)), Some(TimestampingMode::Arrival), Some(true))
        );
        assert_eq!(
            reset(&[StreamSetting::RetentionPolicy, StreamSetting::TimestampingUncapped]).apply(current.clone(), None),
            config(None, Some(TimestampingMode::Arrival), None)
        );
        assert_eq!(StreamPatch::reset_all().apply(current.clone(), None), StreamConfig::default());
        let reset_then_set = StreamPatch {
            timestamping: Some(TimestampingConfig { mode: None, uncapped: Some(false) }),
            ..reset(&[StreamSetting::TimestampingMode])
        };
        assert_eq!(
            reset_then_set.apply(current, Some(&defaults)),
            config(Some(RetentionPolicy::Age(5)), Some(TimestampingMode::ClientRequire), Some(false))
        );
    }

    #[test]
    fn a_stream_created_with_a_config_is_unchanged_by_replacing_it_with_that_config() {
        let configs = [
            config(None, None, None),
            config(Some(RetentionPolicy::Age(5)), None, None),
            config(None, Some(TimestampingMode::Arrival), None),
            config(None, None, Some(true)),
            config(Some(RetentionPolicy::Infinite), Some(TimestampingMode::ClientRequire), Some(false)),
        ];
        for defaults in &configs {
            for asked in &configs {
                let created = asked.clone().with_defaults(defaults);
                let replaced = StreamPatch::replacing(asked).apply(created.clone(), Some(defaults));
                assert_eq!(replaced, created, "asked {asked:?} with defaults {defaults:?}");
            }
        }
    }

    #[test]
    fn a_basin_patch_that_resets_every_default_leaves_none() {
        let basin = BasinConfig {
            default_stream_config: Some(config(Some(RetentionPolicy::Age(5)), None, None)),
            ..BasinConfig::default()
        };
        let patch = BasinPatch { default_stream_config: Some(StreamPatch::reset_all()), ..BasinPatch::default() };
        assert_eq!(patch.apply(basin).default_stream_config, None);
    }

    #[test]
    fn a_replacing_patch_makes_the_config_exactly_the_given_one() {
        let current = config(Some(RetentionPolicy::Age(5)), Some(TimestampingMode::Arrival), Some(true));
        let wanted = config(None, Some(TimestampingMode::ClientRequire), None);
        let defaults = config(Some(RetentionPolicy::Age(600)), None, Some(false));
        assert_eq!(StreamPatch::replacing(&wanted).apply(current.clone(), None), wanted);
        assert_eq!(
            StreamPatch::replacing(&wanted).apply(current, Some(&defaults)),
            config(Some(RetentionPolicy::Age(600)), Some(TimestampingMode::ClientRequire), Some(false)),
            "what it leaves unset takes the basin's default"
        );
        let basin = BasinConfig {
            default_stream_config: Some(config(Some(RetentionPolicy::Age(5)), None, None)),
            create_stream_on_read: true,
            tables: Some(TablesConfig::default()),
            ..BasinConfig::default()
        };
        let wanted = BasinConfig {
            default_stream_config: Some(config(None, Some(TimestampingMode::Arrival), None)),
            create_stream_on_append: true,
            ..BasinConfig::default()
        };
        assert_eq!(BasinPatch::replacing(&wanted).apply(basin.clone()), wanted);
        assert_eq!(BasinPatch::replacing(&BasinConfig::default()).apply(basin), BasinConfig::default());
    }

    #[test]
    fn index_entry_round_trips() {
        let entry = IndexEntry {
            segment_id: u128::MAX - 7,
            offset: 12,
            len: 99,
            first_seq: 1 << 40,
            record_count: 1000,
            first_timestamp: 5,
            last_timestamp: 9,
            timestamp_floor: 4,
            timestamp_policy: TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: true },
            arrival_cap: None,
            metered_end: None,
        };
        assert_eq!(IndexEntry::decode(&entry.encode()), Some(entry));
        assert_eq!(entry.last_seq(), (1 << 40) + 999);
        assert_eq!(IndexEntry::decode(&entry.encode()[1..]), None);
        let capped = IndexEntry { arrival_cap: Some(7), ..entry };
        assert_eq!(IndexEntry::decode(&capped.encode()), Some(capped));
        assert_eq!(IndexEntry::decode(&capped.encode()[1..]), None);
        for arrival_cap in [None, Some(7)] {
            let metered = IndexEntry { arrival_cap, metered_end: Some(1 << 50), ..entry };
            assert_eq!(IndexEntry::decode(&metered.encode()), Some(metered));
        }
    }
}
