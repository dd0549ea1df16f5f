//! Kafka's ACL calls (DescribeAcls, CreateAcls, DeleteAcls), answered as a Kafka broker
//! without an authorizer answers them: SECURITY_DISABLED, for the call or for each
//! creation and deletion asked. Shale keeps no Kafka ACLs: with access control off every
//! call is allowed, and with it on, access is by access tokens, whose rights the describe
//! calls' authorized operations show. So tools that list ACLs (admin clients, consoles,
//! `kafka-acls.sh`) get Kafka's own answer instead of a call the broker does not know.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::auth::Access;

use crate::Kafka;

/// SECURITY_DISABLED, with Kafka's message, or with access control on, what takes the
/// ACLs' place.
fn no_acls(kafka: &Kafka) -> (i16, Option<StrBytes>) {
    let message = match kafka.service.access() {
        Access::Open => "No Authorizer is configured on the broker",
        _ => "No Authorizer is configured: access is by access tokens, not Kafka ACLs",
    };
    (ResponseError::SecurityDisabled.code(), Some(StrBytes::from_static_str(message)))
}

pub fn describe(kafka: &Kafka) -> DescribeAclsResponse {
    let (error, message) = no_acls(kafka);
    DescribeAclsResponse::default().with_error_code(error).with_error_message(message)
}

pub fn create(kafka: &Kafka, request: CreateAclsRequest) -> CreateAclsResponse {
    let (error, message) = no_acls(kafka);
    let refused = || AclCreationResult::default().with_error_code(error).with_error_message(message.clone());
    CreateAclsResponse::default().with_results(request.creations.iter().map(|_| refused()).collect())
}

pub fn delete(kafka: &Kafka, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let (error, message) = no_acls(kafka);
    let refused = || DeleteAclsFilterResult::default().with_error_code(error).with_error_message(message.clone());
    DeleteAclsResponse::default().with_filter_results(request.filters.iter().map(|_| refused()).collect())
}
