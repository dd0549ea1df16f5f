//! `shale.v1.AccessTokens`: S2's access-token calls, with the scope in protobuf.

use shale_proto::grpc as pb;
use shale_proto::grpc::access_tokens_server::AccessTokens;
use tonic::{Request, Response, Status};

use super::{err, list_query, GrpcService};
use crate::auth::{OpGroups, ReadWrite};
use crate::auth::{Operation, ResourceSet, Scope, TokenInfo};
use crate::ApiError;

#[tonic::async_trait]
impl AccessTokens for GrpcService {
    async fn issue_access_token(
        &self,
        request: Request<pb::AccessTokenInfo>,
    ) -> Result<Response<pb::IssueAccessTokenResponse>, Status> {
        let service = self.caller(&request)?;
        let info = info_from_wire(request.into_inner()).map_err(err)?;
        let issued = service.issue_access_token(info).await.map_err(err)?;
        Ok(Response::new(pb::IssueAccessTokenResponse { access_token: issued.secret }))
    }

    async fn list_access_tokens(
        &self,
        request: Request<pb::ListAccessTokensRequest>,
    ) -> Result<Response<pb::ListAccessTokensResponse>, Status> {
        let service = self.caller(&request)?;
        let r = request.into_inner();
        let page = service.list_access_tokens(&list_query(r.prefix, r.start_after, r.limit)).await.map_err(err)?;
        let access_tokens = page.items.into_iter().map(info_to_wire).collect();
        Ok(Response::new(pb::ListAccessTokensResponse { access_tokens, has_more: page.has_more }))
    }

    async fn revoke_access_token(
        &self,
        request: Request<pb::RevokeAccessTokenRequest>,
    ) -> Result<Response<pb::RevokeAccessTokenResponse>, Status> {
        let service = self.caller(&request)?;
        service.revoke_access_token(&request.into_inner().id).await.map_err(err)?;
        Ok(Response::new(pb::RevokeAccessTokenResponse {}))
    }
}

fn set_from_wire(set: Option<pb::ResourceSet>) -> ResourceSet {
    match set.and_then(|s| s.matching) {
        Some(pb::resource_set::Matching::Exact(name)) => ResourceSet::Exact(name),
        Some(pb::resource_set::Matching::Prefix(prefix)) => ResourceSet::Prefix(prefix),
        None => ResourceSet::None,
    }
}

fn set_to_wire(set: ResourceSet) -> Option<pb::ResourceSet> {
    let matching = match set {
        ResourceSet::Exact(name) => pb::resource_set::Matching::Exact(name),
        ResourceSet::Prefix(prefix) => pb::resource_set::Matching::Prefix(prefix),
        ResourceSet::None => return None,
    };
    Some(pb::ResourceSet { matching: Some(matching) })
}

fn info_from_wire(info: pb::AccessTokenInfo) -> Result<TokenInfo, ApiError> {
    let scope = info.scope.unwrap_or_default();
    let ops = scope
        .ops
        .into_iter()
        .map(|name| Operation::from_name(&name).ok_or_else(|| ApiError::bad(format!("unknown operation `{name}`"))))
        .collect::<Result<_, _>>()?;
    let rw = |p: Option<pb::ReadWritePermissions>| p.map(|p| ReadWrite { read: p.read, write: p.write });
    let op_groups =
        scope.op_groups.map(|g| OpGroups { account: rw(g.account), basin: rw(g.basin), stream: rw(g.stream) });
    Ok(TokenInfo {
        id: info.id,
        expires_at: info.expires_at,
        auto_prefix_streams: info.auto_prefix_streams,
        scope: Scope {
            basins: set_from_wire(scope.basins),
            streams: set_from_wire(scope.streams),
            access_tokens: set_from_wire(scope.access_tokens),
            op_groups,
            ops: Some(ops),
        },
    })
}

fn info_to_wire(info: TokenInfo) -> pb::AccessTokenInfo {
    let rw = |p: Option<ReadWrite>| p.map(|p| pb::ReadWritePermissions { read: p.read, write: p.write });
    let scope = info.scope;
    pb::AccessTokenInfo {
        id: info.id,
        expires_at: info.expires_at,
        auto_prefix_streams: info.auto_prefix_streams,
        scope: Some(pb::AccessTokenScope {
            basins: set_to_wire(scope.basins),
            streams: set_to_wire(scope.streams),
            access_tokens: set_to_wire(scope.access_tokens),
            op_groups: scope.op_groups.map(|g| pb::PermittedOperationGroups {
                account: rw(g.account),
                basin: rw(g.basin),
                stream: rw(g.stream),
            }),
            ops: scope.ops.unwrap_or_default().into_iter().map(|op| op.name().to_string()).collect(),
        }),
    }
}
