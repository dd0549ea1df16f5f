//! Basins and streams: S2's create (idempotent with a request token), create-or-get,
//! config, reconfigure (a patch applied at metadata), list and delete.

use shale_metadata_contract::{
    BasinConfig, BasinPatch, BasinRecord, ListPage, MetadataError, StreamConfig, StreamInfo, StreamPatch, StreamSummary,
};

use super::{valid_basin, valid_stream, Service};
use crate::auth::{Operation, Target};
use crate::ServiceError;

/// What S2's PUT of a basin or stream did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provisioned {
    Created,
    /// It existed with another config, now replaced.
    Updated,
    /// It existed with this config.
    Unchanged,
}

impl Provisioned {
    /// S2's `s2-provision-result` header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Provisioned::Created => "created",
            Provisioned::Updated => "updated",
            Provisioned::Unchanged => "noop",
        }
    }
}

/// Largest page S2 returns, and what an unset or zero `limit` means.
const MAX_LIST_LIMIT: usize = 1000;

/// A listing request: names starting with `prefix`, sorting after `start_after`.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    pub prefix: String,
    pub start_after: String,
    /// `None` or 0: S2's page size, 1000; more than 1000 is 1000, as s2-lite takes it
    /// (`has_more` says there is more).
    pub limit: Option<usize>,
}

impl ListQuery {
    pub(super) fn limit(&self) -> usize {
        match self.limit {
            None | Some(0) => MAX_LIST_LIMIT,
            Some(n) => n.min(MAX_LIST_LIMIT),
        }
    }
}

impl Service {
    pub async fn list_basins(&self, query: &ListQuery) -> Result<ListPage<BasinRecord>, ServiceError> {
        self.allow(Operation::ListBasins, Target::Account)?;
        let limit = query.limit();
        let mut page = self.metadata.list_basins(&query.prefix, &query.start_after, limit).await?;
        page.items.retain(|basin| self.access.sees_basin(&basin.name));
        Ok(page)
    }

    /// Creates a basin; with a `request_token`, a retry of the same create answers the
    /// basin with `false` instead of `already_exists`.
    pub async fn create_basin(
        &self,
        basin: &str,
        config: BasinConfig,
        request_token: Option<&str>,
    ) -> Result<(BasinRecord, bool), ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::CreateBasin, Target::Basin(basin))?;
        Ok(self.catalog()?.create_basin_idempotent(basin, config, request_token).await?)
    }

    /// Creates the basin, or answers the existing one, unchanged, with `false` (S2's PUT,
    /// which also sets the config, is [`Self::put_basin`]).
    pub async fn ensure_basin(&self, basin: &str, config: BasinConfig) -> Result<(BasinRecord, bool), ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::CreateBasin, Target::Basin(basin))?;
        let catalog = self.catalog()?;
        match catalog.create_basin(basin, config).await {
            Ok(record) => Ok((record, true)),
            Err(MetadataError::BasinExists(_)) => Ok((catalog.basin(basin).await?, false)),
            Err(e) => Err(e.into()),
        }
    }

    /// S2's PUT: creates the basin with `config`, or makes the existing basin's config
    /// exactly `config` (what it leaves out at its default), as `s2 apply` declares it.
    pub async fn put_basin(
        &self,
        basin: &str,
        config: BasinConfig,
    ) -> Result<(BasinRecord, Provisioned), ServiceError> {
        let (record, created) = self.ensure_basin(basin, config.clone()).await?;
        if created {
            return Ok((record, Provisioned::Created));
        }
        match self.reconfigure_basin_if_changed(basin, &record.config, BasinPatch::replacing(&config)).await? {
            Some(record) => Ok((record, Provisioned::Updated)),
            None => Ok((record, Provisioned::Unchanged)),
        }
    }

    /// Applies `patch` to the basin whose config is `current`, unless that changes
    /// nothing: then `None`, nothing written and no `reconfigure` right needed.
    pub async fn reconfigure_basin_if_changed(
        &self,
        basin: &str,
        current: &BasinConfig,
        patch: BasinPatch,
    ) -> Result<Option<BasinRecord>, ServiceError> {
        if patch.apply(current.clone()) == *current {
            return Ok(None);
        }
        valid_basin(basin)?;
        self.allow(Operation::ReconfigureBasin, Target::Basin(basin))?;
        Ok(Some(self.catalog()?.reconfigure_basin(basin, patch).await?))
    }

    pub async fn basin_config(&self, basin: &str) -> Result<BasinConfig, ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::GetBasinConfig, Target::Basin(basin))?;
        Ok(self.catalog()?.basin(basin).await?.config)
    }

    /// Merges `patch` into the basin's config at metadata; answers the new config.
    pub async fn reconfigure_basin(&self, basin: &str, patch: BasinPatch) -> Result<BasinConfig, ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::ReconfigureBasin, Target::Basin(basin))?;
        Ok(self.catalog()?.reconfigure_basin(basin, patch).await?.config)
    }

    pub async fn delete_basin(&self, basin: &str) -> Result<(), ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::DeleteBasin, Target::Basin(basin))?;
        Ok(self.catalog()?.delete_basin(basin).await?)
    }

    /// Streams of an existing basin (a missing basin is `not_found`, as in S2).
    pub async fn list_streams(&self, basin: &str, query: &ListQuery) -> Result<ListPage<StreamSummary>, ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::ListStreams, Target::Basin(basin))?;
        let limit = query.limit();
        let catalog = self.catalog()?;
        catalog.basin(basin).await?;
        let prefix = self.access.full_stream_name(&query.prefix);
        let start_after = match query.start_after.as_str() {
            "" => String::new(),
            name => self.access.full_stream_name(name).into_owned(),
        };
        let mut page = catalog.list_streams(basin, &prefix, &start_after, limit).await?;
        page.items.retain(|stream| self.access.sees_stream(&stream.name));
        for stream in &mut page.items {
            stream.name = self.access.shown_stream_name(std::mem::take(&mut stream.name));
        }
        Ok(page)
    }

    /// Creates a stream; with a `request_token`, a retry of the same create answers the
    /// stream with `false` instead of `already_exists`.
    pub async fn create_stream(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
        request_token: Option<&str>,
    ) -> Result<(StreamInfo, bool), ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::CreateStream, basin, stream)?;
        let (info, created) = self.catalog()?.create_stream_idempotent(basin, &stream, config, request_token).await?;
        Ok((self.shown(info), created))
    }

    /// Creates the stream, or answers the existing one, unchanged, with `false` (S2's
    /// PUT, which also sets the config, is [`Self::put_stream`]).
    pub async fn ensure_stream(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
    ) -> Result<(StreamInfo, bool), ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::CreateStream, basin, stream)?;
        let catalog = self.catalog()?;
        match catalog.create_stream(basin, &stream, config).await {
            Ok(info) => Ok((self.shown(info), true)),
            Err(MetadataError::StreamExists { .. }) => Ok((self.shown(catalog.stream(basin, &stream).await?), false)),
            Err(e) => Err(e.into()),
        }
    }

    /// S2's PUT: creates the stream with `config`, or makes the existing stream's S2
    /// settings exactly `config`'s, those it leaves unset at the basin's default (as at
    /// creation), as `s2 apply` declares it.
    pub async fn put_stream(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
    ) -> Result<(StreamInfo, Provisioned), ServiceError> {
        let (mut info, created) = self.ensure_stream(basin, stream, config.clone()).await?;
        if created {
            return Ok((info, Provisioned::Created));
        }
        let patch = StreamPatch::replacing(&config);
        match self.reconfigure_stream_if_changed(basin, stream, &info.record.config, patch).await? {
            Some(config) => {
                info.record.config = config;
                Ok((info, Provisioned::Updated))
            }
            None => Ok((info, Provisioned::Unchanged)),
        }
    }

    /// Applies `patch` to the stream whose config is `current`, unless that changes
    /// nothing (settings it resets go back to the basin's defaults): then `None`, nothing
    /// written and no `reconfigure` right needed.
    pub async fn reconfigure_stream_if_changed(
        &self,
        basin: &str,
        stream: &str,
        current: &StreamConfig,
        patch: StreamPatch,
    ) -> Result<Option<StreamConfig>, ServiceError> {
        let defaults = match patch.reset.is_empty() {
            true => None,
            false => self.catalog()?.basin(basin).await?.config.default_stream_config,
        };
        if patch.apply(current.clone(), defaults.as_ref()) == *current {
            return Ok(None);
        }
        Ok(Some(self.reconfigure_stream(basin, stream, patch).await?))
    }

    pub async fn stream_config(&self, basin: &str, stream: &str) -> Result<StreamConfig, ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::GetStreamConfig, basin, stream)?;
        Ok(self.catalog()?.stream(basin, &stream).await?.record.config)
    }

    /// Merges `patch` into the stream's config at metadata; answers the new config.
    pub async fn reconfigure_stream(
        &self,
        basin: &str,
        stream: &str,
        patch: StreamPatch,
    ) -> Result<StreamConfig, ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::ReconfigureStream, basin, stream)?;
        Ok(self.catalog()?.reconfigure_stream(basin, &stream, patch).await?.record.config)
    }

    pub async fn delete_stream(&self, basin: &str, stream: &str) -> Result<(), ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::DeleteStream, basin, stream)?;
        Ok(self.catalog()?.delete_stream(basin, &stream).await?)
    }

    /// A stream's info with its name as the caller sees it.
    fn shown(&self, mut info: StreamInfo) -> StreamInfo {
        info.name = self.access.shown_stream_name(info.name);
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_past_the_maximum_is_the_maximum() {
        let limit = |limit| ListQuery { limit, ..ListQuery::default() }.limit();
        assert_eq!(
            [limit(None), limit(Some(0)), limit(Some(7)), limit(Some(1000)), limit(Some(5000))],
            [1000, 1000, 7, 1000, 1000]
        );
    }
}
