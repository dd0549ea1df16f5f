//! `shale tokens issue|list|revoke`: access tokens through `shale.v1`'s AccessTokens
//! service, as S2's `issue-access-token`, `list-access-tokens` and `revoke-access-token`.
//! The calling token (`--token`) must itself be allowed to (the root token is); a new
//! token's scope must be within the caller's.

use clap::Subcommand;
use shale_proto::grpc as pb;
use shale_proto::grpc::access_tokens_client::AccessTokensClient;

use crate::client::{channel, Connection, Failure};

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Issue a token and print its secret (stdout: `TOKEN=$(shale tokens issue ...)`).
    Issue {
        /// The token's id: what `list` shows and `revoke` takes.
        id: String,
        /// Basins it reaches, by name prefix ("" for all); none unless given.
        #[arg(long, value_name = "PREFIX", conflicts_with = "basin")]
        basins: Option<String>,
        /// The one basin it reaches.
        #[arg(long, value_name = "NAME")]
        basin: Option<String>,
        /// Streams it reaches, by name prefix ("" for all); none unless given.
        #[arg(long, value_name = "PREFIX", conflicts_with = "stream")]
        streams: Option<String>,
        /// The one stream it reaches.
        #[arg(long, value_name = "NAME")]
        stream: Option<String>,
        /// Tokens it may list, issue or revoke, by id prefix; none unless given.
        #[arg(long, value_name = "PREFIX")]
        tokens: Option<String>,
        /// Operations it may call, by S2's names: read, append, check-tail, list-streams,
        /// create-stream, list-basins, issue-access-token, ... (comma-separated).
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
        /// Operation groups it may call, as LEVEL=r|w|rw with LEVEL one of account, basin,
        /// stream (comma-separated): `--op-groups stream=r` is a read-only token.
        #[arg(long, value_delimiter = ',', value_parser = parse_op_group)]
        op_groups: Vec<(String, pb::ReadWritePermissions)>,
        /// When it expires (RFC 3339); the calling token's expiry when not given.
        #[arg(long)]
        expires_at: Option<String>,
        /// Stream names it gives are prefixed with its stream prefix, and listed without it.
        #[arg(long)]
        auto_prefix_streams: bool,
    },
    /// List the tokens the calling token may see: id, expiry, basins, streams, operations.
    List {
        /// Only tokens whose ids start with this.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Revoke a token: calls with it fail from then on.
    Revoke {
        /// The token's id.
        id: String,
    },
}

fn parse_op_group(value: &str) -> Result<(String, pb::ReadWritePermissions), String> {
    let (level, access) = value.split_once('=').ok_or_else(|| format!("expected LEVEL=r|w|rw, got `{value}`"))?;
    if !matches!(level, "account" | "basin" | "stream") {
        return Err(format!("unknown level `{level}`: account, basin or stream"));
    }
    let permissions = match access {
        "r" => pb::ReadWritePermissions { read: true, write: false },
        "w" => pb::ReadWritePermissions { read: false, write: true },
        "rw" => pb::ReadWritePermissions { read: true, write: true },
        _ => return Err(format!("unknown access `{access}`: r, w or rw")),
    };
    Ok((level.to_string(), permissions))
}

fn resource_set(prefix: Option<String>, exact: Option<String>) -> Option<pb::ResourceSet> {
    let matching = match (exact, prefix) {
        (Some(name), _) => pb::resource_set::Matching::Exact(name),
        (None, Some(prefix)) => pb::resource_set::Matching::Prefix(prefix),
        (None, None) => return None,
    };
    Some(pb::ResourceSet { matching: Some(matching) })
}

fn describe_set(set: &Option<pb::ResourceSet>) -> String {
    match set.as_ref().and_then(|s| s.matching.as_ref()) {
        Some(pb::resource_set::Matching::Exact(name)) => name.clone(),
        Some(pb::resource_set::Matching::Prefix(prefix)) => format!("{prefix}*"),
        None => "-".to_string(),
    }
}

pub async fn tokens(connection: &Connection, command: TokensCommand) -> Result<(), Failure> {
    let mut client = AccessTokensClient::new(channel(connection).await?);
    match command {
        TokensCommand::Issue {
            id,
            basins,
            basin,
            streams,
            stream,
            tokens,
            ops,
            op_groups,
            expires_at,
            auto_prefix_streams,
        } => {
            let mut groups = pb::PermittedOperationGroups::default();
            for (level, permissions) in op_groups {
                match level.as_str() {
                    "account" => groups.account = Some(permissions),
                    "basin" => groups.basin = Some(permissions),
                    _ => groups.stream = Some(permissions),
                }
            }
            let scope = pb::AccessTokenScope {
                basins: resource_set(basins, basin),
                streams: resource_set(streams, stream),
                access_tokens: resource_set(tokens, None),
                op_groups: Some(groups),
                ops,
            };
            let info = pb::AccessTokenInfo { id, expires_at, auto_prefix_streams, scope: Some(scope) };
            let issued = client.issue_access_token(info).await?.into_inner();
            println!("{}", issued.access_token);
            Ok(())
        }
        TokensCommand::List { prefix } => {
            let mut start_after = String::new();
            println!("{:<24} {:<26} {:<20} {:<20} OPERATIONS", "ID", "EXPIRES", "BASINS", "STREAMS");
            loop {
                let request = pb::ListAccessTokensRequest { prefix: prefix.clone(), start_after, limit: 0 };
                let page = client.list_access_tokens(request).await?.into_inner();
                for token in &page.access_tokens {
                    let scope = token.scope.clone().unwrap_or_default();
                    let mut operations = scope.ops.clone();
                    if let Some(groups) = &scope.op_groups {
                        for (level, permissions) in
                            [("account", &groups.account), ("basin", &groups.basin), ("stream", &groups.stream)]
                        {
                            let access = match permissions {
                                Some(p) if p.read && p.write => "rw",
                                Some(p) if p.read => "r",
                                Some(p) if p.write => "w",
                                _ => continue,
                            };
                            operations.push(format!("{level}={access}"));
                        }
                    }
                    println!(
                        "{:<24} {:<26} {:<20} {:<20} {}",
                        token.id,
                        token.expires_at.as_deref().unwrap_or("never"),
                        describe_set(&scope.basins),
                        describe_set(&scope.streams),
                        operations.join(",")
                    );
                }
                match page.access_tokens.last() {
                    Some(last) if page.has_more => start_after = last.id.clone(),
                    _ => return Ok(()),
                }
            }
        }
        TokensCommand::Revoke { id } => {
            client.revoke_access_token(pb::RevokeAccessTokenRequest { id: id.clone() }).await?;
            println!("revoked token {id}");
            Ok(())
        }
    }
}
