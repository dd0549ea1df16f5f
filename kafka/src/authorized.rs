//! Authorized operations, as Kafka's describe calls answer them when a client asks
//! (Metadata's topics and cluster, DescribeCluster, DescribeGroups, ConsumerGroupDescribe,
//! ShareGroupDescribe): a bit field of Kafka's ACL operation codes the caller may use on
//! the resource. Where every call is allowed (access control off, or the root token), it
//! is every operation Kafka supports on that kind of resource, as a Kafka broker without
//! an authorizer answers. Under an access token, each operation is the token's right to
//! the Shale call it maps to (the table in docs/kafka.md, "Access control"): a topic's
//! rights are those on its first partition's stream, a group's are the right to use
//! groups (`read` in the basin).

use shale_service::auth::{Access, Operation, Target};

use crate::Kafka;

/// What an answer holds when the client did not ask (the field's default in Kafka's
/// message definitions).
pub const NOT_ASKED: i32 = i32::MIN;

/// Kafka's ACL operations (`AclOperation`'s codes) that Shale answers for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
}

use AclOperation::*;

/// What Kafka supports on each kind of resource (`AclEntry.supportedOperations`).
const TOPIC: &[AclOperation] = &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs];
const GROUP: &[AclOperation] = &[Read, Describe, Delete, DescribeConfigs, AlterConfigs];
const CLUSTER: &[AclOperation] =
    &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe];

/// The bit field of `operations` (bit `code` set for each).
fn bits(operations: impl IntoIterator<Item = AclOperation>) -> i32 {
    operations.into_iter().fold(0, |field, op| field | (1 << op as i32))
}

/// A field's answer: `compute()` when the client asked for it, else [`NOT_ASKED`].
pub fn when_asked(asked: bool, compute: impl FnOnce() -> i32) -> i32 {
    if asked {
        compute()
    } else {
        NOT_ASKED
    }
}

/// The caller's operations on `topic`.
pub fn topic(kafka: &Kafka, topic: &str) -> i32 {
    let access = kafka.service.access();
    if access.permits_everything() {
        return bits(TOPIC.iter().copied());
    }
    let stream = crate::topics::stream_of(topic, 0);
    let target = Target::Stream { basin: &kafka.config.basin, stream: &stream };
    let may = |op: Operation| access.check(op, target).is_ok();
    // CreatePartitions (Kafka's ALTER) creates streams, as CreateTopics does.
    let creates = may(Operation::CreateStream);
    let rights = [
        (Read, may(Operation::Read)),
        (Write, may(Operation::Append)),
        (Create, creates),
        (Alter, creates),
        (Delete, may(Operation::DeleteStream)),
        (Describe, crate::topics::visible(kafka, topic)),
        (DescribeConfigs, may(Operation::GetStreamConfig)),
        (AlterConfigs, may(Operation::ReconfigureStream)),
    ];
    bits(rights.into_iter().filter_map(|(op, allowed)| allowed.then_some(op)))
}

/// The caller's operations on a group it is answered about.
pub fn group(kafka: &Kafka) -> i32 {
    if kafka.service.access().permits_everything() {
        return bits(GROUP.iter().copied());
    }
    // Group configs are not served, so only what using groups gives.
    if crate::groups::may_use_groups(kafka) {
        bits([Read, Describe, Delete])
    } else {
        0
    }
}

/// The caller's operations on the cluster.
pub fn cluster(kafka: &Kafka) -> i32 {
    let access = kafka.service.access();
    if access.permits_everything() {
        return bits(CLUSTER.iter().copied());
    }
    // Any logged-in caller describes the cluster and the brokers' (read-only) configs and
    // gets an idempotent producer id; creating on the cluster is creating any topic.
    let mut ops = vec![Describe, DescribeConfigs, IdempotentWrite];
    if creates_any_stream(access, &kafka.config.basin) {
        ops.push(Create);
    }
    bits(ops)
}

fn creates_any_stream(access: &Access, basin: &str) -> bool {
    access.check(Operation::CreateStream, Target::Basin(basin)).is_ok() && access.reaches_every_stream()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_is_its_codes_bit() {
        assert_eq!(bits([Read]), 8);
        assert_eq!(bits([Read, Write, Describe]), 8 | 16 | 256);
        assert_eq!(bits([]), 0);
    }

    #[test]
    fn every_operation_kafka_supports_is_kafkas_own_field() {
        // The fields a Kafka broker without an authorizer answers: topics READ..ALTER,
        // DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS; groups READ, DESCRIBE, DELETE and the
        // two configs; the cluster CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, the configs and
        // IDEMPOTENT_WRITE.
        assert_eq!(bits(TOPIC.iter().copied()), 0b1101_1111_1000);
        assert_eq!(bits(GROUP.iter().copied()), 0b1101_0100_1000);
        assert_eq!(bits(CLUSTER.iter().copied()), 0b1_1111_1010_0000);
    }
}
