//! The cluster as clients see it: this process is the one broker (node 0) and leads
//! every partition; Metadata lists topics with their partitions, DescribeCluster the
//! broker, FindCoordinator names this broker for every group.

use std::net::SocketAddr;

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

use crate::{topics, Kafka, KafkaConfig, KafkaError};

/// The id clients know this broker by.
const NODE_ID: i32 = 0;

/// This process as a Kafka broker.
pub struct Node {
    pub host: String,
    pub port: i32,
    /// Names this cluster in Metadata and DescribeCluster: the basin's.
    pub cluster_id: String,
}

impl Node {
    pub fn new(config: &KafkaConfig, local: SocketAddr) -> Result<Self, KafkaError> {
        let (host, port) = match &config.advertised {
            Some(advertised) => {
                let (host, port) = advertised
                    .rsplit_once(':')
                    .ok_or_else(|| KafkaError::Config(format!("advertised `{advertised}` is not host:port")))?;
                let port = port
                    .parse()
                    .map_err(|_| KafkaError::Config(format!("advertised `{advertised}` has no valid port")))?;
                (host.trim_start_matches('[').trim_end_matches(']').to_string(), port)
            }
            None => (local.ip().to_string(), i32::from(local.port())),
        };
        Ok(Self { host, port, cluster_id: format!("shale-{}", config.basin) })
    }
}

fn broker(kafka: &Kafka) -> MetadataResponseBroker {
    MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(kafka.node.host.clone()))
        .with_port(kafka.node.port)
}

fn topic_answer(name: &str, partitions: u32) -> MetadataResponseTopic {
    let partitions = (0..partitions as i32)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(NODE_ID))
                .with_leader_epoch(0)
                .with_replica_nodes(vec![BrokerId(NODE_ID)])
                .with_isr_nodes(vec![BrokerId(NODE_ID)])
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

pub async fn metadata(kafka: &Kafka, request: MetadataRequest, version: i16) -> MetadataResponse {
    // Version 0 has no null list: an empty list asks for every topic, as null does later.
    let asked = match request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => Some(topics),
        _ => None,
    };
    let mut answers = Vec::new();
    match asked {
        None => match topics::all_topics(kafka).await {
            Ok(all) => answers.extend(all.iter().map(|(name, &n)| topic_answer(name, n))),
            Err(e) => tracing::warn!(error = %e, "kafka metadata could not list topics"),
        },
        Some(asked) => {
            let auto_create = kafka.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
            for topic in asked {
                let Some(name) = topic.name else { continue };
                answers.push(one_topic(kafka, name, auto_create).await);
            }
        }
    }
    MetadataResponse::default()
        .with_brokers(vec![broker(kafka)])
        .with_cluster_id(Some(StrBytes::from_string(kafka.node.cluster_id.clone())))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(answers)
}

async fn one_topic(kafka: &Kafka, name: TopicName, auto_create: bool) -> MetadataResponseTopic {
    let topic = name.0.to_string();
    if topics::valid_topic(&topic).is_err() {
        return topic_error(name, ResponseError::InvalidTopicException);
    }
    match topics::partition_count(kafka, &topic).await {
        Ok(0) if auto_create => match topics::auto_create(kafka, &topic, 0).await {
            // Kafka answers LEADER_NOT_AVAILABLE while a new topic's partitions settle;
            // here they are there at once.
            Ok(()) => topic_answer(&topic, kafka.config.default_partitions),
            Err((error, _)) => topic_error(name, error),
        },
        Ok(0) => topic_error(name, ResponseError::UnknownTopicOrPartition),
        Ok(n) => topic_answer(&topic, n),
        Err(e) => topic_error(name, crate::error::code_of(&e)),
    }
}

pub fn describe(kafka: &Kafka, _request: DescribeClusterRequest) -> DescribeClusterResponse {
    let broker = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(kafka.node.host.clone()))
        .with_port(kafka.node.port);
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(kafka.node.cluster_id.clone()))
        .with_controller_id(BrokerId(NODE_ID))
        .with_brokers(vec![broker])
}

/// Key types FindCoordinator asks for: groups, and transactional ids (not served yet).
const KEY_GROUP: i8 = 0;

pub fn find_coordinator(kafka: &Kafka, request: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let host = StrBytes::from_string(kafka.node.host.clone());
    let error = if request.key_type == KEY_GROUP { 0 } else { ResponseError::CoordinatorNotAvailable.code() };
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(NODE_ID))
                    .with_host(host.clone())
                    .with_port(kafka.node.port)
                    .with_error_code(error)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    FindCoordinatorResponse::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(host)
        .with_port(kafka.node.port)
        .with_error_code(error)
}
