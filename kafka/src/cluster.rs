//! The cluster as clients see it (`brokers` decides who is in it): Metadata lists the
//! live brokers (those of the client's zone when it names one) and topics with their
//! partitions, each led by one of them; DescribeCluster lists the brokers;
//! FindCoordinator names each group's coordinator.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::brokers::{Broker, Brokers};
use crate::topics::Found;
use crate::{authorized, topics, Kafka};

/// What a client puts in its `client.id` to name its zone: `shale_az=<zone>`, as
/// WarpStream's clients name theirs (Kafka's own `client.rack` reaches only Fetch).
const ZONE_MARK: &str = "shale_az=";

/// The zone a client id names, if any.
pub(crate) fn zone_of(client_id: &str) -> Option<&str> {
    let (_, rest) = client_id.split_once(ZONE_MARK)?;
    let zone = rest.split([',', ' ', ';']).next().unwrap_or(rest);
    (!zone.is_empty()).then_some(zone)
}

fn rack(broker: &Broker) -> Option<StrBytes> {
    (!broker.rack.is_empty()).then(|| StrBytes::from_string(broker.rack.clone()))
}

fn broker_answer(broker: &Broker) -> MetadataResponseBroker {
    MetadataResponseBroker::default()
        .with_node_id(BrokerId(broker.id))
        .with_host(StrBytes::from_string(broker.host.clone()))
        .with_port(broker.port)
        .with_rack(rack(broker))
}

fn topic_answer(brokers: &[Broker], name: &str, partitions: u32) -> MetadataResponseTopic {
    let partitions = (0..partitions as i32)
        .map(|p| {
            let leader = BrokerId(Brokers::leader_of(brokers, name, p));
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(leader)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![leader])
                .with_isr_nodes(vec![leader])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_topic_id(topics::topic_id(name))
        .with_partitions(partitions)
}

fn topic_error(name: TopicName, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default().with_name(Some(name)).with_error_code(error.code())
}

pub async fn metadata(kafka: &Kafka, request: MetadataRequest, version: i16, client_id: &str) -> MetadataResponse {
    let brokers = kafka.brokers.for_zone(zone_of(client_id));
    // Version 0 has no null list: an empty list asks for every topic, as null does later.
    let asked = match request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => Some(topics),
        _ => None,
    };
    let mut answers = Vec::new();
    match asked {
        None => match topics::all_topics(kafka).await {
            Ok(all) => answers.extend(all.iter().map(|(name, &n)| topic_answer(&brokers, name, n))),
            Err(e) => tracing::warn!(error = %e, "kafka metadata could not list topics"),
        },
        Some(asked) => {
            let auto_create = kafka.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
            let mut by_id = topics::NamesById::default();
            for topic in asked {
                // A topic asked for by id is found by it, whatever its name field holds
                // (Java's admin client leaves it empty, not null).
                if !topic.topic_id.is_nil() {
                    answers.push(topic_by_id(kafka, &brokers, topic.topic_id, &mut by_id).await);
                } else if let Some(name) = topic.name {
                    answers.push(one_topic(kafka, &brokers, name, auto_create).await);
                }
            }
        }
    }
    if version >= 8 && request.include_topic_authorized_operations {
        for answer in answers.iter_mut().filter(|answer| described(answer)) {
            if let Some(name) = &answer.name {
                answer.topic_authorized_operations = authorized::topic(kafka, &name.0);
            }
        }
    }
    // Asked of the cluster in versions 8 to 10 (DescribeCluster answers it since).
    let cluster_asked = (8..=10).contains(&version) && request.include_cluster_authorized_operations;
    MetadataResponse::default()
        .with_cluster_authorized_operations(authorized::when_asked(cluster_asked, || authorized::cluster(kafka)))
        .with_brokers(brokers.iter().map(broker_answer).collect())
        .with_cluster_id(Some(StrBytes::from_string(kafka.cluster_id.clone())))
        .with_controller_id(BrokerId(controller(&brokers)))
        .with_topics(answers)
}

/// Whether a topic's answer gets its authorized operations: those found and those the
/// caller may see but that do not exist, as Kafka answers (not those it may not see).
fn described(answer: &MetadataResponseTopic) -> bool {
    let missing = ResponseError::UnknownTopicOrPartition.code();
    answer.error_code == 0 || answer.error_code == missing
}

/// The broker named as controller: the lowest id (every admin call is served anywhere).
fn controller(brokers: &[Broker]) -> i32 {
    brokers.first().map_or(-1, |b| b.id)
}

/// A topic asked for by its id alone (from version 10, as a consumer-protocol member asks
/// for the topics it is assigned), found among every topic (listed once per request);
/// an unknown id is UNKNOWN_TOPIC_ID.
async fn topic_by_id(
    kafka: &Kafka,
    brokers: &[Broker],
    id: uuid::Uuid,
    by_id: &mut topics::NamesById,
) -> MetadataResponseTopic {
    match by_id.name_of(kafka, id).await {
        Ok(Some(name)) => one_topic(kafka, brokers, TopicName(StrBytes::from_string(name)), false).await,
        Ok(None) => {
            MetadataResponseTopic::default().with_topic_id(id).with_error_code(ResponseError::UnknownTopicId.code())
        }
        Err(e) => MetadataResponseTopic::default().with_topic_id(id).with_error_code(crate::error::code(&e)),
    }
}

async fn one_topic(kafka: &Kafka, brokers: &[Broker], name: TopicName, auto_create: bool) -> MetadataResponseTopic {
    let topic = name.0.to_string();
    match topics::find(kafka, &topic).await {
        Ok(Found::Invalid) => topic_error(name, ResponseError::InvalidTopicException),
        Ok(Found::Hidden) => topic_error(name, ResponseError::TopicAuthorizationFailed),
        Ok(Found::Partitions(0)) if auto_create => match topics::auto_create(kafka, &topic, 0).await {
            // Kafka answers LEADER_NOT_AVAILABLE while a new topic's partitions settle;
            // here they are there at once.
            Ok(()) => topic_answer(brokers, &topic, kafka.config.default_partitions),
            Err((error, _)) => topic_error(name, error),
        },
        Ok(Found::Partitions(0)) => topic_error(name, ResponseError::UnknownTopicOrPartition),
        Ok(Found::Partitions(n)) => topic_answer(brokers, &topic, n),
        Err(e) => topic_error(name, crate::error::code_of(&e)),
    }
}

/// DescribeCluster's endpoint types (version 1): brokers, and KRaft controllers, which
/// Shale has none of.
const ENDPOINT_BROKERS: i8 = 1;
const ENDPOINT_CONTROLLERS: i8 = 2;

/// DescribeCluster: the live brokers. Asked for controllers (a client that takes this
/// listener for a controller's) it is MISMATCHED_ENDPOINT_TYPE, any other endpoint type
/// UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers them.
pub fn describe(kafka: &Kafka, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let refused = |error: ResponseError, message: &'static str| {
        DescribeClusterResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_static_str(message)))
            .with_cluster_id(StrBytes::from_string(kafka.cluster_id.clone()))
    };
    match request.endpoint_type {
        ENDPOINT_BROKERS => {}
        ENDPOINT_CONTROLLERS => {
            return refused(
                ResponseError::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            )
        }
        _ => return refused(ResponseError::UnsupportedEndpointType, "Unsupported endpoint type"),
    }
    let live = kafka.brokers.live();
    let brokers = live
        .iter()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host.clone()))
                .with_port(b.port)
                .with_rack(rack(b))
        })
        .collect();
    let asked = request.include_cluster_authorized_operations;
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(kafka.cluster_id.clone()))
        .with_cluster_authorized_operations(authorized::when_asked(asked, || authorized::cluster(kafka)))
        .with_controller_id(BrokerId(controller(&live)))
        .with_brokers(brokers)
}

/// Key types FindCoordinator asks for: groups and transactional ids.
const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

/// A key's coordinator, or the error that says why there is none now. A transactional
/// id's state is in metadata, so any broker could coordinate it; they are spread like
/// groups.
fn coordinator(kafka: &Kafka, key_type: i8, key: &str) -> Result<Broker, i16> {
    match key_type {
        KEY_GROUP if !crate::groups::may_use_groups(kafka) => {
            return Err(ResponseError::GroupAuthorizationFailed.code());
        }
        KEY_TRANSACTION if !crate::transactions::may_use_transactions(kafka) => {
            return Err(ResponseError::TransactionalIdAuthorizationFailed.code());
        }
        KEY_GROUP | KEY_TRANSACTION => {}
        _ => return Err(ResponseError::InvalidRequest.code()),
    }
    kafka.brokers.coordinator_of(key).ok_or(ResponseError::CoordinatorNotAvailable.code())
}

pub fn find_coordinator(kafka: &Kafka, request: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let answer = Coordinator::default();
                let answer = match coordinator(kafka, request.key_type, &key) {
                    Ok(b) => {
                        answer.with_node_id(BrokerId(b.id)).with_host(StrBytes::from_string(b.host)).with_port(b.port)
                    }
                    Err(error) => answer.with_node_id(BrokerId(-1)).with_port(-1).with_error_code(error),
                };
                answer.with_key(key)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match coordinator(kafka, request.key_type, &request.key) {
        Ok(b) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(b.id))
            .with_host(StrBytes::from_string(b.host))
            .with_port(b.port),
        Err(error) => {
            FindCoordinatorResponse::default().with_node_id(BrokerId(-1)).with_port(-1).with_error_code(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_names_its_zone_in_its_id() {
        assert_eq!(zone_of("app,shale_az=us-east-1a"), Some("us-east-1a"));
        assert_eq!(zone_of("shale_az=z1,other"), Some("z1"));
        assert_eq!(zone_of("shale_az="), None);
        assert_eq!(zone_of("rdkafka"), None);
    }
}
