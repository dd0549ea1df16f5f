//! The APIs and versions this listener serves: what ApiVersions lists, and the check every
//! request passes before its body is decoded. Nothing unbuilt is listed.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiKey;

/// `(api, lowest, highest)` version served. The lowest produce and fetch versions are the
/// first with record batch v2; the highest are the last before topic ids replace names.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Whether `version` of `api` is served.
pub fn served(api: ApiKey, version: i16) -> bool {
    SERVED.iter().any(|&(key, min, max)| key == api && (min..=max).contains(&version))
}

/// ApiVersions' list.
pub fn api_versions() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .map(|&(key, min, max)| {
            ApiVersion::default().with_api_key(key as i16).with_min_version(min).with_max_version(max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version listed is one the codec can decode and encode.
    #[test]
    fn every_served_version_is_within_the_codecs() {
        for &(key, min, max) in SERVED {
            let codec = key.valid_versions();
            assert!(codec.min <= min && max <= codec.max, "{key:?} {min}..={max} outside {codec}");
        }
        assert!(served(ApiKey::Produce, 11) && !served(ApiKey::Produce, 2) && !served(ApiKey::EndTxn, 5));
    }
}
