//! [`CatalogCall`] and [`CatalogReply`] as `shale.metadata.v1` messages.

use shale_proto::metadata_rpc as pb;

use crate::records;
use crate::wire::malformed;
use crate::{CatalogCall, CatalogReply, ListPage, Result, StreamInfo, StreamSummary};

pub fn catalog_call_to_wire(call: &CatalogCall) -> pb::CatalogCall {
    use pb::catalog_call::Call;
    let stream_ref = |basin: &str, stream: &str| pb::StreamRef { basin: basin.into(), stream: stream.into() };
    let list = |basin: &str, prefix: &str, start_after: &str, limit: usize| pb::ListRequest {
        basin: basin.into(),
        prefix: prefix.into(),
        start_after: start_after.into(),
        limit: u32::try_from(limit).unwrap_or(u32::MAX),
    };
    let call = match call {
        CatalogCall::GetBasin { basin } => Call::GetBasin(pb::BasinRef { basin: basin.clone() }),
        CatalogCall::CreateBasin { basin, config, request_token } => Call::CreateBasin(pb::CreateBasin {
            basin: basin.clone(),
            config: Some(records::basin_config_to_wire(config)),
            request_token: request_token.clone(),
        }),
        CatalogCall::ReconfigureBasin { basin, patch } => Call::ReconfigureBasin(pb::ReconfigureBasin {
            basin: basin.clone(),
            patch: Some(records::basin_patch_to_wire(patch)),
        }),
        CatalogCall::ListBasins { prefix, start_after, limit } => {
            Call::ListBasins(list("", prefix, start_after, *limit))
        }
        CatalogCall::DeleteBasin { basin } => Call::DeleteBasin(pb::BasinRef { basin: basin.clone() }),
        CatalogCall::GetStream { basin, stream } => Call::GetStream(stream_ref(basin, stream)),
        CatalogCall::CreateStream { basin, stream, config, request_token } => Call::CreateStream(pb::CreateStream {
            basin: basin.clone(),
            stream: stream.clone(),
            config: Some(records::stream_config_to_wire(config)),
            request_token: request_token.clone(),
        }),
        CatalogCall::ReconfigureStream { basin, stream, patch } => Call::ReconfigureStream(pb::ReconfigureStream {
            basin: basin.clone(),
            stream: stream.clone(),
            patch: Some(records::stream_patch_to_wire(patch)),
        }),
        CatalogCall::ListStreams { basin, prefix, start_after, limit } => {
            Call::ListStreams(list(basin, prefix, start_after, *limit))
        }
        CatalogCall::DeleteStream { basin, stream } => Call::DeleteStream(stream_ref(basin, stream)),
    };
    pb::CatalogCall { call: Some(call) }
}

pub fn catalog_call_from_wire(call: pb::CatalogCall) -> Result<CatalogCall> {
    use pb::catalog_call::Call;
    Ok(match call.call.ok_or_else(|| malformed("catalog call"))? {
        Call::GetBasin(r) => CatalogCall::GetBasin { basin: r.basin },
        Call::CreateBasin(r) => CatalogCall::CreateBasin {
            basin: r.basin,
            config: records::basin_config_from_wire(r.config.unwrap_or_default())?,
            request_token: r.request_token,
        },
        Call::ReconfigureBasin(r) => CatalogCall::ReconfigureBasin {
            basin: r.basin,
            patch: records::basin_patch_from_wire(r.patch.unwrap_or_default())?,
        },
        Call::ListBasins(r) => {
            CatalogCall::ListBasins { prefix: r.prefix, start_after: r.start_after, limit: r.limit as usize }
        }
        Call::DeleteBasin(r) => CatalogCall::DeleteBasin { basin: r.basin },
        Call::GetStream(r) => CatalogCall::GetStream { basin: r.basin, stream: r.stream },
        Call::CreateStream(r) => CatalogCall::CreateStream {
            basin: r.basin,
            stream: r.stream,
            config: records::stream_config_from_wire(r.config.unwrap_or_default())?,
            request_token: r.request_token,
        },
        Call::ReconfigureStream(r) => CatalogCall::ReconfigureStream {
            basin: r.basin,
            stream: r.stream,
            patch: records::stream_patch_from_wire(r.patch.unwrap_or_default())?,
        },
        Call::ListStreams(r) => CatalogCall::ListStreams {
            basin: r.basin,
            prefix: r.prefix,
            start_after: r.start_after,
            limit: r.limit as usize,
        },
        Call::DeleteStream(r) => CatalogCall::DeleteStream { basin: r.basin, stream: r.stream },
    })
}

pub fn catalog_reply_to_wire(reply: &CatalogReply) -> pb::CatalogReply {
    use pb::catalog_reply::Reply;
    let (reply, created) = match reply {
        CatalogReply::Basin { record, created } => (Reply::Basin(records::basin_record_to_wire(record)), *created),
        CatalogReply::Stream { info, created } => {
            (Reply::Stream(records::stream_record_to_wire(&info.record)), *created)
        }
        CatalogReply::Basins(page) => (
            Reply::Basins(pb::BasinPage {
                basins: page.items.iter().map(records::basin_record_to_wire).collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Streams(page) => (
            Reply::Streams(pb::StreamPage {
                streams: page
                    .items
                    .iter()
                    .map(|s| pb::StreamSummary { name: s.name.clone(), created_at_ms: s.created_at_ms })
                    .collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Done => (Reply::Done(pb::Empty {}), false),
    };
    pb::CatalogReply { reply: Some(reply), created }
}

/// The reply to `call`: a stream record comes back without its names, which the call has.
pub fn catalog_reply_from_wire(call: &CatalogCall, reply: pb::CatalogReply) -> Result<CatalogReply> {
    use pb::catalog_reply::Reply;
    let created = reply.created;
    Ok(match reply.reply.ok_or_else(|| malformed("catalog reply"))? {
        Reply::Basin(record) => CatalogReply::Basin { record: records::basin_record_from_wire(record)?, created },
        Reply::Stream(record) => {
            let (basin, stream) = match call {
                CatalogCall::GetStream { basin, stream }
                | CatalogCall::CreateStream { basin, stream, .. }
                | CatalogCall::ReconfigureStream { basin, stream, .. } => (basin.clone(), stream.clone()),
                _ => return Err(malformed("stream record for a call about no stream")),
            };
            let record = records::stream_record_from_wire(record)?;
            CatalogReply::Stream { info: StreamInfo { basin, name: stream, record }, created }
        }
        Reply::Basins(page) => CatalogReply::Basins(ListPage {
            items: page.basins.into_iter().map(records::basin_record_from_wire).collect::<Result<_>>()?,
            has_more: page.has_more,
        }),
        Reply::Streams(page) => CatalogReply::Streams(ListPage {
            items: page
                .streams
                .into_iter()
                .map(|s| StreamSummary { name: s.name, created_at_ms: s.created_at_ms })
                .collect(),
            has_more: page.has_more,
        }),
        Reply::Done(_) => CatalogReply::Done,
    })
}
